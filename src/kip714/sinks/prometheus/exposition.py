"""The Prometheus exporter's renderers: its series as ``prometheus_client`` metric families (the collector
protocol), and the fast exposition that keeps each series' rendered line prefix.

:class:`Exposition` renders the same text as ``prometheus_client``'s encoder over those families, byte for
byte: each series' sample lines up to the value, and each family's ``# HELP``/``# TYPE`` lines, are rendered
by that encoder once per format (:class:`_Format`) and kept while the series lives; a scrape renders only
new series and formats the values (``prometheus_client.utils.floatToGoString``). The clients' series and
kip714's per-client families (:data:`~.store.PER_CLIENT_FAMILIES`, a series per live client) go the same
way."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .accumulators import float_text, sum_exposed
from .store import Family, SeriesStore

if TYPE_CHECKING:  # prometheus_client is imported where it is used, not with this module
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import Collector
    from prometheus_client.samples import Sample

__all__ = ["Collected", "Exposition", "encoded_text"]

log = logging.getLogger("kip714.prometheus")

_MAX_FORMATS = 4  # exposition formats whose rendered lines are kept (by content type)
_COUNT, _SUM = "\x00count", "\x00sum"  # keys of a histogram's / summary's _count and _sum line prefixes
_K = TypeVar("_K", int, str)  # where a rendered line prefix is kept: by slot, or by a series' line key


class Exposition:
    """Renders a :class:`~.store.SeriesStore`'s series. Every method runs with the store's lock held (the
    caller's: a scrape also reads the self-metrics under it)."""

    def __init__(self, store: SeriesStore) -> None:
        self.store = store
        self.formats: dict[str, _Format] = {}  # content type → rendered headers and line prefixes
        store.on_forget = self.forget

    def forget(self, slot: int, family_gone: str | None) -> None:
        """A series (and, named, its family) is gone: forget its rendered lines in every format."""
        for f in self.formats.values():
            f.forget(slot, family_gone)

    def families(self) -> list[Metric]:
        """The clients' series as ``prometheus_client`` metric families (the collector protocol)."""
        from prometheus_client.samples import Sample

        out: list[Metric] = []
        store = self.store
        for family in store.families.values():
            m = _metric(family)
            samples = m.samples
            typ = family.type
            vals = store.slot_value
            if typ in ("gauge", "counter"):
                name, numbers = family.sample, store.slot_number
                for slot, labels in family.slots.items():
                    samples.append(Sample(name, labels, numbers[slot]))
            elif typ == "histogram":
                bname, cname, sname = family.name + "_bucket", family.name + "_count", family.name + "_sum"
                for slot, labels in family.slots.items():
                    acc = vals[slot]
                    if acc is None:
                        continue
                    for le, v in acc.le_buckets():
                        samples.append(Sample(bname, {**labels, "le": le}, v))
                    # the format is not known here: OpenMetrics' rule (_count only beside _sum, _sum
                    # only without negative buckets) holds for both; render() refines it per format
                    if sum_exposed(acc):
                        samples.append(Sample(cname, labels, acc.count))
                        samples.append(Sample(sname, labels, acc.sum))
            else:
                cname, sname = family.name + "_count", family.name + "_sum"
                for slot, labels in family.slots.items():
                    acc = vals[slot]
                    if acc is None:
                        continue
                    for q, v in acc.quantiles:
                        samples.append(Sample(family.name, {**labels, "quantile": float_text(q)}, v))
                    samples.append(Sample(cname, labels, acc.count))
                    if acc.sum is not None:
                        samples.append(Sample(sname, labels, acc.sum))
            if samples:
                out.append(m)
        return out

    def per_client_families(self) -> list[Metric]:
        """kip714's per-client families (:data:`~.store.PER_CLIENT_FAMILIES`) as ``prometheus_client``
        metric families, each also when it has no series."""
        from prometheus_client.samples import Sample

        self.store.settle_liveness()
        vals = self.store.slot_number
        out = []
        for family in (self.store.last_push, self.store.expired_at):
            m = _metric(family)
            m.samples = [Sample(family.sample, labels, vals[slot]) for slot, labels in family.slots.items()]
            out.append(m)
        return out

    def _format(self, encoder: Callable[[Collector], bytes], key: str) -> _Format:
        f = self.formats.get(key)
        if f is None:
            if len(self.formats) >= _MAX_FORMATS:  # Accept headers are the scraper's to choose
                self.formats.pop(next(iter(self.formats)))
            f = self.formats[key] = _Format(encoder)
        return f

    def render(self, encoder: Callable[[Collector], bytes], key: str) -> list[str]:
        """The clients' series in the format of ``encoder`` (content type ``key``), from the kept line
        prefixes (rendering those of new series): pieces of text to join (one copy of the whole, not two)."""
        fmt = _float_to_go_string()
        parts: list[str] = []
        f = self._format(encoder, key)
        for family in self.store.families.values():
            if family.type in ("gauge", "counter"):
                lines = self._simple_lines(f, family, fmt)
            else:
                lines = self._complex_lines(f, family, fmt)
            if lines:
                parts.append(f.header(family))
                parts.append("\n".join(lines))
                parts.append("\n")
        return parts

    def render_per_client(self, encoder: Callable[[Collector], bytes], key: str) -> list[str]:
        """kip714's per-client families as :meth:`render` writes the clients' series (each family's header
        also when it has no series), without OpenMetrics' ``# EOF``."""
        self.store.settle_liveness()
        fmt = _float_to_go_string()
        f = self._format(encoder, key)
        parts: list[str] = []
        for family in (self.store.last_push, self.store.expired_at):
            parts.append(f.header(family))
            lines = self._simple_lines(f, family, fmt)
            if lines:
                parts.append("\n".join(lines))
                parts.append("\n")
        return parts

    def _simple_lines(self, f: _Format, family: Family, fmt: Callable[[float], str]) -> list[str]:
        """Gauge and counter sample lines of ``family`` (rendering the prefixes it has not seen)."""
        pref, slots, vals = f.prefixes, family.slots, self.store.slot_number
        missing = [s for s in slots if s not in pref]
        if missing:
            _Sample, name = _sample_class(), family.sample
            f.render(family, [(pref, s, _Sample(name, slots[s], 0.0)) for s in missing])
        return [pref[s] + fmt(vals[s]) for s in slots]

    def _complex_lines(
        self, f: _Format, family: Family, fmt: Callable[[float], str] | None, slots: list[int] | None = None
    ) -> list[str]:
        """Histogram and summary sample lines of ``family`` (rendering the prefixes it has not seen); with
        ``slots``, only those series, and with ``fmt`` None only the rendering (no lines)."""
        _Sample = _sample_class()
        vals = self.store.slot_value
        entries: list[tuple[dict[str, str], str, float]] = []
        missing: list[tuple[dict[str, str], str, Sample]] = []
        histogram = family.type == "histogram"
        base = family.name
        bname, cname, sname = base + "_bucket", base + "_count", base + "_sum"
        series = family.slots.items() if slots is None else [(s, family.slots[s]) for s in slots]
        for slot, labels in series:
            acc = vals[slot]
            if acc is None:
                continue
            d = f.prefixes.get(slot)
            if d is None:
                d = f.prefixes[slot] = {}
            if histogram:
                for le, v in acc.le_buckets():
                    if le not in d:
                        missing.append((d, le, _Sample(bname, {**labels, "le": le}, 0.0)))
                    entries.append((d, le, v))
                # _sum only when every bucket is positive (the OTel spec); _count always in the text
                # format (the spec), only beside _sum in OpenMetrics (its rule; the +Inf bucket holds it)
                with_sum = sum_exposed(acc)
                for k, n, v in ((_COUNT, cname, acc.count), (_SUM, sname, acc.sum)):
                    if with_sum or (k == _COUNT and not f.openmetrics):
                        if k not in d:
                            missing.append((d, k, _Sample(n, labels, 0.0)))
                        entries.append((d, k, v))
            else:
                for q, v in acc.quantiles:
                    qt = float_text(q)
                    if qt not in d:
                        missing.append((d, qt, _Sample(base, {**labels, "quantile": qt}, 0.0)))
                    entries.append((d, qt, v))
                for k, n, v in ((_COUNT, cname, acc.count), (_SUM, sname, acc.sum)):
                    if v is None:
                        continue
                    if k not in d:
                        missing.append((d, k, _Sample(n, labels, 0.0)))
                    entries.append((d, k, v))
            if len(d) > 4 * self.store.max_buckets + 8:  # an exponential histogram's bounds moved many times
                d.clear()
                return self._complex_lines(f, family, fmt, slots)
        if missing:
            f.render(family, missing)
        return [] if fmt is None else [d[k] + fmt(v) for d, k, v in entries]

    def prerender(self) -> None:
        """Render the line prefixes of the series created since the last call, in every known format."""
        fresh, self.store.fresh = self.store.fresh, []
        if not self.formats:
            return  # nothing scraped yet: the first scrape renders them all
        _Sample = _sample_class()
        by_family: dict[int, tuple[Family, list[int]]] = {}
        for slot in dict.fromkeys(fresh):
            fam = self.store.slot_family[slot]
            if fam is not None and slot in fam.slots:
                by_family.setdefault(id(fam), (fam, []))[1].append(slot)
        for key, f in list(self.formats.items()):
            try:
                self._prerender_format(f, by_family.values(), _Sample)
            except RuntimeError:  # the scrape renders them (or falls back) instead
                log.exception("pre-rendering %s failed", key)
                self.formats.pop(key, None)

    def _prerender_format(
        self, f: _Format, families: Iterable[tuple[Family, list[int]]], _Sample: type[Sample]
    ) -> None:
        pref = f.prefixes
        for fam, slots in families:
            if fam.type in ("gauge", "counter"):
                todo = [(pref, s, _Sample(fam.sample, fam.slots[s], 0.0)) for s in slots if s not in pref]
                if todo:
                    f.render(fam, todo)
            else:
                self._complex_lines(f, fam, None, slots)


def _metric(family: Family) -> Metric:
    """``family`` as a ``prometheus_client`` metric family without samples."""
    from prometheus_client.core import Metric

    return Metric(family.name, family.help, family.type, family.unit)


def _sample_class() -> type[Sample]:
    from prometheus_client.samples import Sample

    return Sample


def _float_to_go_string() -> Callable[[float], str]:
    """``prometheus_client.utils.floatToGoString``, how its encoders write a sample value. prometheus_client
    leaves it unannotated (a call to it is an untyped call): this gives it its type, once per scrape rather
    than around each call (one line per value)."""
    from prometheus_client.utils import floatToGoString

    fmt: Callable[[float], str] = floatToGoString
    return fmt


class Collected:
    """Fixed metric families as a collector (what prometheus_client's encoders take)."""

    __slots__ = ("metrics",)

    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> list[Metric]:
        return self.metrics


class _Format:
    """One exposition format (a content type prometheus_client negotiated) and what its encoder rendered:
    each family's header lines and each exposed series' sample lines without the value. Lines come from
    the encoder itself (a batch of new samples at value 0, split at the newlines; label values never hold
    a raw newline, the encoder escapes it), so the format stays prometheus_client's."""

    __slots__ = ("encoder", "headers", "openmetrics", "prefixes")

    def __init__(self, encoder: Callable[[Collector], bytes]) -> None:
        self.encoder = encoder
        self.openmetrics = bool(encoder(Collected([])))  # OpenMetrics' encoder writes "# EOF" even then
        self.headers: dict[str, str] = {}  # family sample name → HELP/TYPE/UNIT lines
        self.prefixes: dict[int, Any] = {}  # slot → line prefix, or {bucket key: prefix}

    def header(self, family: Family) -> str:
        h = self.headers.get(family.sample)
        if h is None:
            h = self.headers[family.sample] = encoded_text(self.encoder, [_metric(family)])
        return h

    def render(self, family: Family, todo: Sequence[tuple[MutableMapping[_K, str], _K, Sample]]) -> None:
        """Render ``todo`` = [(target dict, key, Sample at value 0)] and store each line's prefix."""
        m = _metric(family)
        m.samples = [t[2] for t in todo]
        for (target, key, _), prefix in zip(todo, _zero_line_prefixes(self.encoder, m, self.header(family))):
            target[key] = prefix

    def forget(self, slot: int, family_gone: str | None) -> None:
        self.prefixes.pop(slot, None)
        if family_gone is not None:
            self.headers.pop(family_gone, None)


_EOF = "# EOF\n"


def encoded_text(encoder: Callable[[Collector], bytes], families: list[Metric]) -> str:
    """``families`` as ``encoder`` writes them, without OpenMetrics' closing ``# EOF`` line (text that more
    families may follow)."""
    text = encoder(Collected(families)).decode("utf-8")
    return text[: _body_end(text)]


def _body_end(text: str) -> int:
    """Where ``text`` ends before OpenMetrics' closing ``# EOF`` line (its length when it has none)."""
    return len(text) - len(_EOF) if text.endswith(_EOF) else len(text)


def _zero_line_prefixes(encoder: Callable[[Collector], bytes], family: Metric, header: str) -> list[str]:
    """Each sample line ``encoder`` writes for ``family`` (whose samples are all at value 0, after the family's
    ``header``), up to and including the space before its value: what :class:`_Format` keeps, one per sample."""
    text = encoder(Collected([family])).decode("utf-8")
    lines = text[len(header) : _body_end(text)].split("\n")
    if not text.startswith(header) or len(lines) != len(family.samples) + 1 or lines[-1]:
        raise RuntimeError(
            f"unexpected exposition of {family.name}: {len(lines) - 1} lines for {len(family.samples)} samples"
        )
    lines.pop()  # the empty text after the last newline
    prefixes = []
    for line in lines:
        if not line.endswith(" 0.0"):
            raise RuntimeError(f"unexpected exposition line {line!r}")
        prefixes.append(line[:-3])
    return prefixes
