"""The values of the Prometheus exporter's histogram and summary series: explicit-bucket and exponential
accumulators (an exponential histogram exposed as explicit buckets), summaries, and how their bucket bounds
and quantiles are written as label values."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["ExpHistogram", "Histogram", "Summary", "float_text", "sum_exposed"]


def float_text(v: float) -> str:
    """A bucket bound / quantile as Prometheus writes label values of floats (Go's strconv 'g', shortest)."""
    if v == math.inf:
        return "+Inf"
    if v == -math.inf:
        return "-Inf"
    r = repr(float(v))
    return r[:-2] if r.endswith(".0") else r


class Histogram:
    """An explicit-bucket accumulator (bounds fixed; a point with other bounds restarts it)."""

    __slots__ = ("bounds", "buckets", "count", "sum")

    def __init__(self, bounds: tuple[float, ...], n: int) -> None:
        self.bounds = bounds
        self.buckets = [0] * n
        self.count = 0
        self.sum: float | None = 0.0

    def weight(self) -> int:
        return len(self.bounds) + 3

    def has_negative(self) -> bool:
        return bool(self.bounds) and self.bounds[0] < 0

    def le_buckets(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        acc = 0
        for bound, n in zip(self.bounds, self.buckets):
            acc += n
            out.append((float_text(bound), acc))
        out.append(("+Inf", acc + (self.buckets[-1] if len(self.buckets) > len(self.bounds) else 0)))
        return _distinct_bounds(out)


class ExpHistogram:
    """An exponential histogram as explicit buckets: bucket ``i`` at scale ``s`` covers
    ``(2**(i·2**-s), 2**((i+1)·2**-s)]`` and becomes ``le = 2**((i+1)·2**-s)`` (``-2**(i·2**-s)`` for
    negative buckets); the zero bucket becomes ``le="0"`` (kip714's decoder does not keep the zero
    threshold, so values within it count as 0). Points at different scales merge at the smaller scale;
    more than ``max_buckets`` buckets downscale further (adjacent buckets merge, counts stay exact)."""

    __slots__ = ("count", "max_buckets", "neg", "pos", "scale", "sum", "zero")

    def __init__(self, max_buckets: int) -> None:
        self.scale: int | None = None
        self.pos: dict[int, int] = {}
        self.neg: dict[int, int] = {}
        self.zero = 0
        self.count = 0
        self.sum: float | None = 0.0
        self.max_buckets = max_buckets

    @staticmethod
    def _downscale(buckets: dict[int, int], by: int) -> dict[int, int]:
        if by <= 0:
            return buckets
        out: dict[int, int] = {}
        for i, n in buckets.items():
            j = i >> by
            out[j] = out.get(j, 0) + n
        return out

    def add(
        self,
        scale: int,
        pos_offset: int,
        pos: Sequence[int],
        neg_offset: int,
        neg: Sequence[int],
        zero: int,
        count: int,
        sum_: float | None,
    ) -> None:
        incoming_pos = {pos_offset + i: n for i, n in enumerate(pos) if n}
        incoming_neg = {neg_offset + i: n for i, n in enumerate(neg) if n}
        if self.scale is None:
            self.scale = scale
        target = min(self.scale, scale)
        self.pos = self._downscale(self.pos, self.scale - target)
        self.neg = self._downscale(self.neg, self.scale - target)
        incoming_pos = self._downscale(incoming_pos, scale - target)
        incoming_neg = self._downscale(incoming_neg, scale - target)
        self.scale = target
        for src, dst in ((incoming_pos, self.pos), (incoming_neg, self.neg)):
            for i, n in src.items():
                dst[i] = dst.get(i, 0) + n
        while len(self.pos) + len(self.neg) > self.max_buckets:
            self.pos = self._downscale(self.pos, 1)
            self.neg = self._downscale(self.neg, 1)
            self.scale -= 1
        self.zero += zero
        self.count += count
        self.sum = None if (sum_ is None or self.sum is None) else self.sum + sum_

    def weight(self) -> int:
        return len(self.pos) + len(self.neg) + 4

    def le_buckets(self) -> list[tuple[str, float]]:
        scale = self.scale or 0
        out: list[tuple[str, float]] = []
        acc = 0
        for i in sorted(self.neg, reverse=True):  # most negative first
            acc += self.neg[i]
            out.append((float_text(-_boundary(i, scale)), acc))
        acc += self.zero
        out.append(("0", acc))
        for i in sorted(self.pos):
            acc += self.pos[i]
            out.append((float_text(_boundary(i + 1, scale)), acc))
        out.append(("+Inf", max(acc, self.count)))
        return _distinct_bounds(out)

    def has_negative(self) -> bool:
        return bool(self.neg)


def _distinct_bounds(buckets: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Cumulative ``(le, count)`` with one line per bound: buckets whose bounds overflowed to ±Inf (an
    exponential bucket index beyond the double range, an explicit bound of +Inf) merge, the cumulative
    count of the last one kept (a repeated ``le`` would be a duplicate series Prometheus refuses)."""
    out: list[tuple[str, float]] = []
    for le, n in buckets:
        if out and out[-1][0] == le:
            out[-1] = (le, n)
        else:
            out.append((le, n))
    return out


def sum_exposed(acc: Histogram | ExpHistogram) -> bool:
    """A histogram's ``_sum`` is exposed when it is known, not negative, and every bucket is positive: the
    OTel specification reports it "only if the sum is positive and monotonic", OpenMetrics forbids a
    negative ``_sum`` and a ``_sum`` beside negative buckets."""
    return acc.sum is not None and acc.sum >= 0 and not acc.has_negative()


def _boundary(i: int, scale: int) -> float:
    """``2**(i·2**-scale)``, exact for integer exponents (scale ≤ 0), correctly rounded otherwise."""
    try:
        if scale <= 0:
            return math.ldexp(1.0, i << -scale)
        # float ** float is typed as Any (a negative base gives a complex); 2.0 ** x is always a float
        value: float = 2.0 ** (i / (1 << scale))
        return value
    except OverflowError:
        return math.inf


class Summary:
    __slots__ = ("count", "quantiles", "sum")

    def __init__(self, quantiles: list[tuple[float, float]], count: int, sum_: float | None) -> None:
        self.quantiles = quantiles
        self.count = count
        self.sum = sum_

    def weight(self) -> int:
        return len(self.quantiles) + 2
