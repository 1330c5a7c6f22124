"""Client telemetry as a Prometheus scrape target: :class:`PrometheusExporter`.

A :class:`~kip714.TelemetryReceiver` on :class:`~kip714.broker.bounded_queue.BoundedQueueReceiver`:
accepted pushes are queued (bounded, never blocking the request path: a full queue drops the payload,
counts it and logs the episode once) and absorbed by a worker thread, many payloads at a time, with the native Arrow decoder (:func:`kip714.decode_metrics_batch`). The state is exposed through
``prometheus_client`` (a custom collector; text format or OpenMetrics by content negotiation) on its
WSGI server, or on any registry it is registered with. ``docs/exporters.md`` documents the mapping.

Mapping (the OpenTelemetry "Prometheus and OpenMetrics compatibility" specification, names as
:mod:`kip714.sinks.prometheus_names`):

* gauge → gauge; monotonic sum → counter (``_total``); non-monotonic sum → gauge; histogram →
  histogram (``_bucket{le}``, ``_sum``, ``_count``); summary → summary (``{quantile}``, ``_sum``,
  ``_count``); exponential histogram → histogram with explicit buckets at the exponential bucket
  boundaries (see :class:`_ExpHistogram`).
* Temporality: every counter and histogram is kept as a cumulative accumulator per exposed series.
  Delta points add to it; cumulative points add their increase since the previous point of the same
  (client instance, series), or their whole value when the start time changed or the value fell (a
  client restart): an exposed counter never decreases, so ``rate()`` is never negative, also when
  several instances share one label set. A non-monotonic delta sum accumulates into a gauge (an
  up-down counter's current value). Cumulative exponential histograms and summaries are exposed as
  last received.
* Labels: the point's attributes, the resource attributes, ``otel_scope_name``/``otel_scope_version``
  (``scope_labels``) and the broker-added labels in ``labels`` (default ``client_id``,
  ``client_instance_id``). Keys that sanitise to the same label name are joined with ``;`` as the
  specification says (a broker label included); ``le`` on a histogram and ``quantile`` on a summary
  become ``key_le`` / ``key_quantile``.
* Life cycle: an instance's series disappear at the first scrape after its terminating push was
  absorbed (so its final values are exposed once), and when it pushed nothing for as long as the
  broker keeps it (``ReceiverContext.expiry_ms``: the instance table's ``max(60 s, 3 × push
  interval)``); without that context, ``max(expiry_floor_s, 3 × push interval)`` with the context's
  interval, otherwise the gap between its last two pushes.
* Limits: ``max_series`` exposed time series (a histogram counts its bucket lines), ``max_buckets`` per
  histogram point; everything not exposed is counted in ``kip714_export_points_dropped_total{reason}``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from typing import Any, Callable, Iterable

from ..broker.bounded_queue import BoundedQueueReceiver
from ..broker.subscriptions import ClientInfo
from .prometheus_names import label_name, merge_labels, metric_name, prometheus_unit

__all__ = ["PrometheusExporter", "BROKER_LABELS", "DEFAULT_LABELS"]

log = logging.getLogger("kip714.prometheus")

#: The KIP's broker-added labels, in the order the broker builds them (one home: ClientInfo.labels).
BROKER_LABELS = tuple(ClientInfo().labels(0, uuid.UUID(int=2)))
DEFAULT_LABELS = ("client_id", "client_instance_id")

# how a source's points reach its exposed series
_SET, _ADD_MONOTONIC, _ADD, _PY = 0, 1, 2, 3
_KIND_TYPE = {"gauge": "gauge", "histogram": "histogram", "exponential_histogram": "histogram",
              "summary": "summary"}
_RESERVED = {"histogram": "le", "summary": "quantile"}
_MAX_FORMATS = 4                 # exposition formats whose rendered lines are kept (by content type)
_COUNT, _SUM = "\x00count", "\x00sum"  # keys of a histogram's / summary's _count and _sum line prefixes
_ROW_FIELDS = ("metric", "description", "unit", "kind", "temporality", "monotonic", "attributes", "resource",
               "scope_name", "scope_version")
_PY_FIELDS = ("kind", "temporality", "monotonic", "start_time_unix_nano", "value", "count", "sum",
              "bucket_counts", "explicit_bounds", "scale", "zero_count", "positive_offset",
              "positive_bucket_counts", "negative_offset", "negative_bucket_counts", "quantiles")


def parse_labels(text: str | Iterable[str]) -> tuple[str, ...]:
    """``client_id,client_instance_id`` → a tuple of broker-added label names (ValueError for others)."""
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    bad = [n for n in names if n not in BROKER_LABELS]
    if bad:
        raise ValueError(f"unknown broker-added label {', '.join(bad)}; choose from {', '.join(BROKER_LABELS)}")
    return tuple(dict.fromkeys(names))


def _float_text(v: float) -> str:
    """A bucket bound / quantile as Prometheus writes label values of floats (Go's strconv 'g', shortest)."""
    if v == math.inf:
        return "+Inf"
    if v == -math.inf:
        return "-Inf"
    r = repr(float(v))
    return r[:-2] if r.endswith(".0") else r


class _Family:
    __slots__ = ("name", "sample", "type", "help", "unit", "slots")

    def __init__(self, name: str, typ: str, help_: str, unit: str) -> None:
        self.sample = name
        self.name = name[:-6] if typ == "counter" else name      # prometheus_client adds _total itself
        self.type = typ
        self.help = help_
        self.unit = unit if unit and self.name.endswith("_" + unit) else ""
        self.slots: dict[int, dict[str, str]] = {}                # exposed series slot → labels


class _Histogram:
    """An explicit-bucket accumulator (bounds fixed; a point with other bounds restarts it)."""

    __slots__ = ("bounds", "buckets", "count", "sum")

    def __init__(self, bounds: tuple, n: int) -> None:
        self.bounds = bounds
        self.buckets = [0] * n
        self.count = 0
        self.sum: float | None = 0.0

    def weight(self) -> int:
        return len(self.bounds) + 3

    def has_negative(self) -> bool:
        return bool(self.bounds) and self.bounds[0] < 0

    def le_buckets(self) -> list[tuple[str, float]]:
        out, acc = [], 0
        for bound, n in zip(self.bounds, self.buckets):
            acc += n
            out.append((_float_text(bound), acc))
        out.append(("+Inf", acc + (self.buckets[-1] if len(self.buckets) > len(self.bounds) else 0)))
        return _distinct_bounds(out)


class _ExpHistogram:
    """An exponential histogram as explicit buckets: bucket ``i`` at scale ``s`` covers
    ``(2**(i·2**-s), 2**((i+1)·2**-s)]`` and becomes ``le = 2**((i+1)·2**-s)`` (``-2**(i·2**-s)`` for
    negative buckets); the zero bucket becomes ``le="0"`` (kip714's decoder does not keep the zero
    threshold, so values within it count as 0). Points at different scales merge at the smaller scale;
    more than ``max_buckets`` buckets downscale further (adjacent buckets merge, counts stay exact)."""

    __slots__ = ("scale", "pos", "neg", "zero", "count", "sum", "max_buckets")

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

    def add(self, scale: int, pos_offset: int, pos: list, neg_offset: int, neg: list, zero: int, count: int,
            sum_: float | None) -> None:
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
        out, acc = [], 0
        for i in sorted(self.neg, reverse=True):          # most negative first
            acc += self.neg[i]
            out.append((_float_text(-_boundary(i, scale)), acc))
        acc += self.zero
        out.append(("0", acc))
        for i in sorted(self.pos):
            acc += self.pos[i]
            out.append((_float_text(_boundary(i + 1, scale)), acc))
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


def _sum_exposed(acc) -> bool:
    """A histogram's ``_sum`` is exposed when it is known, not negative, and every bucket is positive: the
    OTel specification reports it "only if the sum is positive and monotonic", OpenMetrics forbids a
    negative ``_sum`` and a ``_sum`` beside negative buckets."""
    return acc.sum is not None and acc.sum >= 0 and not acc.has_negative()


def _boundary(i: int, scale: int) -> float:
    """``2**(i·2**-scale)``, exact for integer exponents (scale ≤ 0), correctly rounded otherwise."""
    try:
        if scale <= 0:
            return math.ldexp(1.0, i << -scale)
        return 2.0 ** (i / (1 << scale))
    except OverflowError:
        return math.inf


class _Summary:
    __slots__ = ("quantiles", "count", "sum")

    def __init__(self, quantiles, count, sum_) -> None:
        self.quantiles = quantiles
        self.count = count
        self.sum = sum_

    def weight(self) -> int:
        return len(self.quantiles) + 2


class _Instance:
    __slots__ = ("sources", "last_seen", "previous_seen", "interval_s", "expiry_s", "terminated_at")

    def __init__(self, now: float) -> None:
        self.sources: list[int] = []
        self.last_seen = now
        self.previous_seen: float | None = None
        self.interval_s: float | None = None
        self.expiry_s: float | None = None         # the broker's expiry for it (ReceiverContext.expiry_ms)
        self.terminated_at: float | None = None


class PrometheusExporter(BoundedQueueReceiver):
    """Exposes client telemetry for Prometheus to scrape (see the module docstring for the mapping).

    ``exporter = PrometheusExporter(labels=("client_id",), max_series=50_000)``;
    ``broker.add_receiver(exporter)``; ``exporter.start_http_server("127.0.0.1", 9464)``, or register it
    on a ``prometheus_client`` registry (it is a collector: ``registry.register(exporter)``).

    Options: ``labels`` (broker-added labels put on every series), ``max_series`` (exposed time series
    at most), ``max_queue`` (payloads waiting to be absorbed; a full queue drops, counts ``queue-full`` and
    logs the episode once, the push is still accepted), ``batch``
    (payloads decoded per call), ``expiry_floor_s`` (60), ``scope_labels`` (``otel_scope_name`` /
    ``otel_scope_version``), ``max_buckets`` (per histogram point), ``background`` (False absorbs in the
    caller, for tests and tools), ``clock`` (seconds, monotonic)."""

    queue_name = "prometheus"
    dropped_metric = 'kip714_export_payloads_dropped_total{reason="queue-full"}'
    log = log

    def __init__(self, labels: Iterable[str] | str = DEFAULT_LABELS, max_series: int = 100_000,
                 max_queue: int = 10_000, batch: int = 256, expiry_floor_s: float = 60.0,
                 scope_labels: bool = True, max_buckets: int = 160, background: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        import numpy as np  # noqa: F401  (fail early: the absorb path is vectorised)
        import pyarrow  # noqa: F401

        self.labels = parse_labels(labels)
        self.max_series = int(max_series)
        self.expiry_floor_s = float(expiry_floor_s)
        self.scope_labels = scope_labels
        self.max_buckets = int(max_buckets)
        self.clock = clock
        self._lock = threading.RLock()
        # sources: one per (instance, broker labels, OTLP series); key text → id
        self._sources: dict[str, int] = {}
        self._src_key: list[str | None] = []
        self._src_slot: list[int] = []
        self._src_mode: list[int] = []
        self._src_state: dict[int, Any] = {}       # cumulative points: id → (start, value or buckets)
        self._src_free: list[int] = []
        # exposed series: slot → value (float) or accumulator object
        self._series: dict[tuple, int] = {}
        self._slot_key: list[tuple | None] = []
        self._slot_family: list[_Family | None] = []
        self._slot_refs: list[int] = []
        self._slot_value: list[Any] = []
        self._slot_weight: list[int] = []
        self._slot_free: list[int] = []
        self.series_count = 0                      # exposed time series (histogram lines included)
        self._families: dict[str, _Family] = {}
        self._otlp_names: dict[str, int] = {}      # OTLP metric name → exposed series using it
        self._slot_otlp: list[str | None] = []
        self._instances: dict[bytes, _Instance] = {}   # by the instance's 16 bytes
        self._np_cache: tuple | None = None
        self._formats: dict[str, _Format] = {}     # content type → rendered headers and line prefixes
        self._fresh: list[int] = []                # series created since the last pre-rendering
        # counters (self-metrics)
        self.push_codes: dict[str, int] = {}
        self.dropped: dict[str, int] = {}          # points dropped, by reason
        self.payloads_absorbed = 0
        self.points_absorbed = 0
        self.series_refused = 0
        self.expired = 0
        self.scrapes = 0
        self._extra: list[Callable[[], Iterable[Any]]] = []
        self._queues: dict[str, Callable[[], int]] = {}
        self._http = None
        self._next_expiry = clock() + 1.0
        # the queue between the request path and the worker; payloads never absorbed, by reason:
        # self.payloads_dropped
        super().__init__(max_queue=max_queue, batch=batch, background=background, thread_name="kip714-prometheus")

    # ------------------------------------------------------------------ receiver (request path)

    def _item(self, context, payload) -> tuple:
        return (payload.client_instance_id_bytes, payload.labels, payload.data, payload.terminating,
                (getattr(context, "push_interval_ms", None), getattr(context, "expiry_ms", None)))

    def push_completed(self, context, request, error_code: int, received_at_ms: int) -> None:
        """Count every push by the error code it was answered with (``kip714_pushes_total``)."""
        from ..errors import ErrorCode

        try:
            name = ErrorCode(error_code).name
        except ValueError:
            name = str(error_code)
        with self._lock:
            self.push_codes[name] = self.push_codes.get(name, 0) + 1

    # ------------------------------------------------------------------ worker

    def _process(self, items: list) -> None:
        self.absorb(items)       # (an exception counts the items as internal-error)

    def _tick(self) -> None:
        """Expire silent instances about once a second."""
        now = self.clock()
        if now >= self._next_expiry:
            self.expire(now)
            self._next_expiry = now + 1.0

    def close(self, timeout: float | None = 5.0) -> None:
        """Absorb what is queued (for up to ``timeout`` seconds), stop the worker and the HTTP server (if
        started)."""
        super().close(timeout)
        if self._http is not None:
            server, thread = self._http
            server.shutdown()
            server.server_close()
            thread.join(5)
            self._http = None

    def watch_queue(self, name: str, depth: Callable[[], int]) -> None:
        """Expose ``depth()`` as ``kip714_queue_depth{queue=name}`` (the recorder, the forwarder)."""
        self._queues[name] = depth

    def add_self_metrics(self, source: Callable[[], Iterable[Any]]) -> None:
        """Also yield the metric families ``source()`` returns on every scrape (another sink's counters)."""
        self._extra.append(source)

    # ------------------------------------------------------------------ absorbing

    def _count(self, table: dict, reason: str, n: int = 1) -> None:
        """Count ``n`` under ``reason`` (the queue's lock, not the exporter's: the request path counts drops
        from many threads and must not wait for an absorb holding the exporter's lock)."""
        with self._queue_lock:
            table[reason] = table.get(reason, 0) + n

    def absorb(self, items: list) -> None:
        """Absorb queued items ``(instance, labels, otlp bytes, terminating, timing)`` (see :meth:`_absorb`);
        then render the new series' lines for the formats scraped so far, so that a scrape after many new
        series does not pay for them."""
        try:
            self._absorb(items)
        finally:
            if self._fresh:
                with self._lock:
                    self._prerender()

    def _prerender(self) -> None:
        """Render the line prefixes of the series created since the last call, in every known format."""
        fresh, self._fresh = self._fresh, []
        if not self._formats:
            return                                 # nothing scraped yet: the first scrape renders them all
        _Sample = _sample_class()
        by_family: dict[int, tuple[_Family, list[int]]] = {}
        for slot in dict.fromkeys(fresh):
            fam = self._slot_family[slot]
            if fam is not None and slot in fam.slots:
                by_family.setdefault(id(fam), (fam, []))[1].append(slot)
        for key, f in list(self._formats.items()):
            try:
                self._prerender_format(f, by_family.values(), _Sample)
            except RuntimeError:                   # the scrape renders them (or falls back) instead
                log.exception("pre-rendering %s failed", key)
                self._formats.pop(key, None)

    def _prerender_format(self, f: "_Format", families, _Sample) -> None:
        pref = f.prefixes
        for fam, slots in families:
            if fam.type in ("gauge", "counter"):
                todo = [(pref, s, _Sample(fam.sample, fam.slots[s], 0.0)) for s in slots if s not in pref]
                if todo:
                    f.render(fam, todo)
            else:
                self._complex_lines(f, fam, None, slots)

    def _absorb(self, items: list) -> None:
        """Absorb queued items ``(instance, labels, otlp bytes, terminating, timing)`` (``instance``: the 16-byte
        id, or a ``uuid.UUID``); ``timing`` is
        ``(push_interval_ms, expiry_ms)`` from the receiver context (either None when not known), a bare
        push interval, or None."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from ..otlp import decode_metrics_batch

        now = self.clock()
        seeds = []
        # instances are keyed by their 16 bytes (what the broker hands over: no uuid.UUID per push);
        # a uuid.UUID from a direct caller is keyed the same way
        items = [it if type(it[0]) is bytes else (it[0].bytes,) + tuple(it[1:]) for it in items]
        for instance, labels, _, _, _ in items:
            seeds.append({"_k": instance.hex() + "\x1c" + "\x1c".join(labels.get(n, "") for n in self.labels)})
        table, errors = decode_metrics_batch([it[2] for it in items], seeds, errors="collect")
        with self._lock:
            if errors:
                self._drop("undecodable", len(errors))
            bad = {e[0] for e in errors}
            for i, (instance, _, _, terminating, timing) in enumerate(items):
                if i in bad:
                    continue
                inst = self._instances.get(instance)
                if inst is None:
                    inst = self._instances[instance] = _Instance(now)
                else:
                    inst.previous_seen, inst.last_seen = inst.last_seen, now
                    inst.interval_s = now - inst.previous_seen
                interval_ms, expiry_ms = timing if isinstance(timing, tuple) else (timing, None)
                if interval_ms:
                    inst.interval_s = interval_ms / 1000.0
                inst.expiry_s = expiry_ms / 1000.0 if expiry_ms else None
                if terminating:
                    inst.terminated_at = now
            self.payloads_absorbed += len(items) - len(bad)
            n = table.num_rows
            if not n:
                return
            self.points_absorbed += n
            keys = pc.binary_join_element_wise(
                table.column("_k"), table.column("metric"), table.column("unit"), table.column("kind"),
                table.column("temporality"), pc.cast(table.column("monotonic"), pa.string()),
                table.column("scope_name"), table.column("scope_version"),
                _map_text(table.column("attributes")), _map_text(table.column("resource")),
                "\x1d", null_handling="replace", null_replacement="")
            # The key text identifies a source; its separators could appear in a client's own strings,
            # which could only make that client's own series share a source (the seed comes first).
            keys = keys.to_pylist()
            get = self._sources.get
            src = [get(k, -1) for k in keys]
            missing = [i for i, s in enumerate(src) if s < 0]
            if missing and self.series_count >= self.max_series:
                # at the cap only a series that exists already (another instance with the same labels)
                # can still get a source: refuse rows of unknown metrics in bulk, without per-row work
                known = pc.is_in(pc.take(table.column("metric"), pa.array(missing)),
                                 value_set=pa.array(list(self._otlp_names), pa.string())).to_pylist()
                refused = len(missing) - sum(known)
                if refused:
                    self.series_refused += refused
                    self._count(self.dropped, "series-limit", refused)
                    missing = [i for i, k in zip(missing, known) if k]
            if missing:
                self._create_sources(table, missing, keys, src, items)
            src_a = np.array(src, dtype=np.int64)
            ok = src_a >= 0
            if not ok.all():
                idx = np.nonzero(ok)[0]
                src_a = src_a[idx]
            else:
                idx = None
            if not len(src_a):
                return
            modes = np.array(self._src_mode, dtype=np.int8)[src_a]
            slots = np.array(self._src_slot, dtype=np.int64)[src_a]
            values = table.column("value").to_numpy()
            if idx is not None:
                values = values[idx]
            self._apply_vector(modes, slots, values)
            py = np.nonzero(modes == _PY)[0]
            if len(py):
                rows_idx = py if idx is None else idx[py]
                sub = table.select(list(_PY_FIELDS)).take(pa.array(rows_idx)).to_pylist()
                for row, s in zip(sub, src_a[py].tolist()):
                    self._apply_row(s, row)

    def _apply_vector(self, modes, slots, values) -> None:
        import numpy as np

        vals = self._slot_value
        m = modes == _SET
        if m.any():
            for s, v in zip(slots[m].tolist(), values[m].tolist()):
                vals[s] = v
        for mode in (_ADD_MONOTONIC, _ADD):
            m = modes == mode
            if not m.any():
                continue
            v = values[m]
            good = np.isfinite(v)
            if mode == _ADD_MONOTONIC:
                good &= v >= 0
            bad = int(len(v) - good.sum())
            if bad:
                self._count(self.dropped, "invalid-value", bad)
            for s, x in zip(slots[m][good].tolist(), v[good].tolist()):
                vals[s] += x

    def _apply_row(self, source: int, row: dict) -> None:
        """Cumulative sums, histograms, exponential histograms and summaries."""
        slot = self._src_slot[source]
        kind = row["kind"]
        start = row["start_time_unix_nano"]
        cumulative = row["temporality"] == "cumulative"
        if kind == "sum":
            v = row["value"]
            if v is None or not math.isfinite(v) or (row["monotonic"] and v < 0):
                self._count(self.dropped, "invalid-value")
                return
            prev = self._src_state.get(source)
            inc = v if prev is None or prev[0] != start or v < prev[1] else v - prev[1]
            self._src_state[source] = (start, v)
            self._slot_value[slot] += inc
            return
        if kind == "summary":
            qs = row["quantiles"] or []
            if len(qs) > self.max_buckets:
                self._count(self.dropped, "too-many-buckets")
                return
            if any(q["value"] is not None and q["value"] < 0 for q in qs):
                self._count(self.dropped, "invalid-value")     # OpenMetrics: quantile values are never negative
                return
            sum_ = row["sum"]
            if sum_ is not None and not (math.isfinite(sum_) and sum_ >= 0):
                sum_ = None                                    # the spec: _sum only when positive
            acc = _Summary([(q["quantile"], q["value"]) for q in qs], row["count"] or 0, sum_)
            self._set_complex(slot, acc)
            return
        count, sum_ = row["count"] or 0, row["sum"]
        if sum_ is not None and not math.isfinite(sum_):
            sum_ = None
        if kind == "histogram":
            bounds = tuple(row["explicit_bounds"] or ())
            buckets = row["bucket_counts"] or []
            if len(bounds) > self.max_buckets:
                self._count(self.dropped, "too-many-buckets")
                return
            if (buckets and len(buckets) != len(bounds) + 1) or any(
                    not (a < b) for a, b in zip(bounds, bounds[1:])) or any(math.isnan(b) for b in bounds):
                self._count(self.dropped, "invalid-histogram")
                return
            if not buckets:
                buckets = [0] * len(bounds) + [count]
            acc = self._slot_value[slot]
            if not isinstance(acc, _Histogram) or acc.bounds != bounds:
                acc = _Histogram(bounds, len(bounds) + 1)
                self._set_complex(slot, acc)
            if cumulative:
                prev = self._src_state.get(source)
                if prev is not None and prev[0] == start and prev[1] == bounds and count >= prev[2] and all(
                        b >= a for a, b in zip(prev[3], buckets)):
                    incs = [b - a for a, b in zip(prev[3], buckets)]
                    dcount, dsum = count - prev[2], (None if sum_ is None or prev[4] is None else sum_ - prev[4])
                else:
                    incs, dcount, dsum = buckets, count, sum_
                self._src_state[source] = (start, bounds, count, list(buckets), sum_)
            else:
                incs, dcount, dsum = buckets, count, sum_
            for i, n in enumerate(incs):
                acc.buckets[i] += n
            acc.count += dcount
            acc.sum = None if dsum is None or acc.sum is None else acc.sum + dsum
            return
        # exponential histogram
        pos = row["positive_bucket_counts"] or []
        neg = row["negative_bucket_counts"] or []
        scale = row["scale"] or 0
        if not -10 <= scale <= 20:
            self._count(self.dropped, "invalid-histogram")
            return
        acc = self._slot_value[slot]
        if cumulative or not isinstance(acc, _ExpHistogram):
            acc = _ExpHistogram(self.max_buckets)
        before = acc.weight()
        acc.add(scale, row["positive_offset"] or 0, pos, row["negative_offset"] or 0, neg, row["zero_count"] or 0,
                count, sum_)
        if self._slot_value[slot] is not acc:
            self._set_complex(slot, acc)
        else:
            self._reweigh(slot, acc.weight() - before)

    def _set_complex(self, slot: int, acc) -> None:
        old = self._slot_value[slot]
        old_w = old.weight() if hasattr(old, "weight") else self._slot_weight[slot]
        self._slot_value[slot] = acc
        self._reweigh(slot, acc.weight() - old_w)

    def _reweigh(self, slot: int, delta: int) -> None:
        self._slot_weight[slot] += delta
        self.series_count += delta

    def _create_sources(self, table, missing: list[int], keys: list[str], src: list[int], items: list) -> None:
        import pyarrow as pa

        rows = table.select(list(_ROW_FIELDS) + ["payload_index"]).take(pa.array(missing)).to_pylist()
        for i, row in zip(missing, rows):
            key = keys[i]
            s = self._sources.get(key, -1)         # created for an earlier row of this batch
            if s < 0:
                s = self._new_source(key, row, items[row["payload_index"]])
            src[i] = s

    def _new_source(self, key: str, row: dict, item) -> int:
        if self.series_count >= self.max_series and row["metric"] not in self._otlp_names:
            self.series_refused += 1
            self._count(self.dropped, "series-limit")
            return -1
        kind, temporality, monotonic = row["kind"], row["temporality"], row["monotonic"]
        if kind in ("sum", "histogram", "exponential_histogram") and temporality is None:
            self._count(self.dropped, "unspecified-temporality")
            return -1
        name = metric_name(row["metric"], row["unit"] or "", kind, monotonic)
        if not name:
            self._count(self.dropped, "invalid-name")
            return -1
        if kind == "sum":
            typ = "counter" if monotonic else "gauge"
            if monotonic:
                mode = _ADD_MONOTONIC if temporality == "delta" else _PY
            else:
                mode = _ADD if temporality == "delta" else _SET
        else:
            typ = _KIND_TYPE[kind]
            mode = _SET if kind == "gauge" else _PY
        family = self._families.get(name)
        if family is None:
            family = _Family(name, typ, row["description"] or "", prometheus_unit(row["unit"] or ""))
        elif family.type != typ:
            self._count(self.dropped, "type-conflict")
            return -1
        # labels: point attributes, resource, scope, broker-added; collisions joined by the spec's rule
        pairs = list(row["attributes"] or ()) + list(row["resource"] or ())
        if self.scope_labels:
            pairs += [("otel_scope_name", row["scope_name"] or ""), ("otel_scope_version", row["scope_version"] or "")]
        instance, blabels = item[0], item[1]
        pairs += [(n, blabels.get(n, "")) for n in self.labels]
        reserved = _RESERVED.get(typ)
        if reserved is not None:
            pairs = [(k, v) if label_name(k) != reserved else ("key_" + reserved, v) for k, v in pairs]
        labels, dropped = merge_labels(pairs)
        if dropped:
            self._count(self.dropped, "invalid-label-name-ignored", dropped)
        skey = (name, tuple(sorted(labels.items())))
        slot = self._series.get(skey)
        if slot is None:
            weight = 1 if typ in ("gauge", "counter") else 3
            if self.series_count + weight > self.max_series:
                self.series_refused += 1
                self._count(self.dropped, "series-limit")
                return -1
            if name not in self._families:
                self._families[name] = family
            slot = self._slot_free.pop() if self._slot_free else len(self._slot_key)
            if slot == len(self._slot_key):
                for lst, v in ((self._slot_key, None), (self._slot_family, None), (self._slot_refs, 0),
                               (self._slot_value, 0.0), (self._slot_weight, 0), (self._slot_otlp, None)):
                    lst.append(v)
            self._series[skey] = slot
            self._fresh.append(slot)
            self._slot_key[slot] = skey
            self._slot_family[slot] = family
            self._slot_refs[slot] = 0
            self._slot_value[slot] = 0.0 if typ in ("gauge", "counter") else None
            self._slot_weight[slot] = weight
            self._slot_otlp[slot] = otlp_name = row["metric"]
            self._otlp_names[otlp_name] = self._otlp_names.get(otlp_name, 0) + 1
            self.series_count += weight
            family.slots[slot] = labels
        self._slot_refs[slot] += 1
        s = self._src_free.pop() if self._src_free else len(self._src_key)
        if s == len(self._src_key):
            self._src_key.append(None)
            self._src_slot.append(-1)
            self._src_mode.append(_SET)
        self._src_key[s] = key
        self._src_slot[s] = slot
        self._src_mode[s] = mode
        self._sources[key] = s
        self._instances[instance].sources.append(s)
        return s

    # ------------------------------------------------------------------ life cycle

    def _drop_instance(self, instance: bytes) -> None:
        inst = self._instances.pop(instance, None)
        if inst is None:
            return
        for s in inst.sources:
            key = self._src_key[s]
            if key is None:
                continue
            self._sources.pop(key, None)
            self._src_state.pop(s, None)
            self._src_key[s] = None
            self._src_free.append(s)
            slot = self._src_slot[s]
            self._slot_refs[slot] -= 1
            if self._slot_refs[slot] == 0:
                family = self._slot_family[slot]
                family.slots.pop(slot, None)
                gone = None
                if not family.slots:
                    self._families.pop(family.sample, None)
                    gone = family.sample
                for f in self._formats.values():
                    f.forget(slot, gone)
                self._series.pop(self._slot_key[slot], None)
                self.series_count -= self._slot_weight[slot]
                otlp_name = self._slot_otlp[slot]
                if self._otlp_names.get(otlp_name, 0) <= 1:
                    self._otlp_names.pop(otlp_name, None)
                else:
                    self._otlp_names[otlp_name] -= 1
                self._slot_key[slot] = self._slot_family[slot] = None
                self._slot_value[slot] = None
                self._slot_weight[slot] = 0
                self._slot_free.append(slot)

    def expire(self, now: float | None = None) -> int:
        """Drop instances silent for as long as the broker keeps them (``ReceiverContext.expiry_ms``: its
        instance table's ``max(60 s, 3 × push interval)``), or, when the broker did not say,
        ``max(expiry_floor_s, 3 × push interval)``; returns how many."""
        now = self.clock() if now is None else now
        with self._lock:
            floor = self.expiry_floor_s
            gone = [i for i, st in self._instances.items()
                    if now - st.last_seen > (st.expiry_s or max(floor, 3 * (st.interval_s or 0.0)))]
            for i in gone:
                self._drop_instance(i)
            self.expired += len(gone)
        return len(gone)

    @property
    def instances(self) -> int:
        return len(self._instances)

    # ------------------------------------------------------------------ exposition

    def collect(self):
        """The prometheus_client collector protocol: the clients' series, then kip714's own."""
        from prometheus_client.core import Metric
        from prometheus_client.samples import Sample

        started = self.clock()
        out = []
        with self._lock:
            for family in self._families.values():
                m = Metric(family.name, family.help, family.type, family.unit)
                samples = m.samples
                typ = family.type
                vals = self._slot_value
                if typ in ("gauge", "counter"):
                    name = family.sample
                    for slot, labels in family.slots.items():
                        samples.append(Sample(name, labels, vals[slot]))
                elif typ == "histogram":
                    bname, cname, sname = family.name + "_bucket", family.name + "_count", family.name + "_sum"
                    for slot, labels in family.slots.items():
                        acc = vals[slot]
                        if acc is None:
                            continue
                        for le, v in acc.le_buckets():
                            samples.append(Sample(bname, {**labels, "le": le}, v))
                        # the format is not known here: OpenMetrics' rule (_count only beside _sum, _sum
                        # only without negative buckets) holds for both; exposition() refines it per format
                        if _sum_exposed(acc):
                            samples.append(Sample(cname, labels, acc.count))
                            samples.append(Sample(sname, labels, acc.sum))
                else:
                    cname, sname = family.name + "_count", family.name + "_sum"
                    for slot, labels in family.slots.items():
                        acc = vals[slot]
                        if acc is None:
                            continue
                        for q, v in acc.quantiles:
                            samples.append(Sample(family.name, {**labels, "quantile": _float_text(q)}, v))
                        samples.append(Sample(cname, labels, acc.count))
                        if acc.sum is not None:
                            samples.append(Sample(sname, labels, acc.sum))
                if samples:
                    out.append(m)
            out.extend(self._self_metrics())
            self._scraped(started)
        out.extend(self._extra_metrics())
        return out

    def _self_metrics(self) -> list:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        pushes = CounterMetricFamily("kip714_pushes", "PushTelemetry requests by the error code they were answered "
                                     "with", labels=["error_code"])
        for code, n in sorted(self.push_codes.items()):
            pushes.add_metric([code], n)
        live = GaugeMetricFamily("kip714_export_instances", "Client instances with series exposed",
                                 value=len(self._instances))
        series = GaugeMetricFamily("kip714_export_series", "Time series exposed for clients (histogram bucket "
                                   "lines included)", value=self.series_count)
        limit = GaugeMetricFamily("kip714_export_series_limit", "The --prometheus-max-series cap",
                                  value=self.max_series)
        refused = CounterMetricFamily("kip714_export_series_refused", "New series refused at the series cap",
                                      value=self.series_refused)
        payloads = CounterMetricFamily("kip714_export_payloads", "Accepted payloads absorbed into the "
                                       "Prometheus state", value=self.payloads_absorbed)
        points = CounterMetricFamily("kip714_export_points", "Data points absorbed", value=self.points_absorbed)
        dropped = CounterMetricFamily("kip714_export_points_dropped", "Data points not exposed, by reason",
                                      labels=["reason"])
        for reason, n in sorted(self.dropped.items()):
            dropped.add_metric([reason], n)
        pdropped = CounterMetricFamily("kip714_export_payloads_dropped", "Accepted payloads never absorbed, "
                                       "by reason", labels=["reason"])
        for reason, n in sorted(self.dropped_counts().items()):
            pdropped.add_metric([reason], n)
        depth = GaugeMetricFamily("kip714_queue_depth", "Items waiting in a sink's queue", labels=["queue"])
        depth.add_metric(["prometheus"], self.queue_depth)
        for name, fn in self._queues.items():
            try:
                depth.add_metric([name], fn())
            except Exception:
                log.exception("queue depth of %s failed", name)
        return [pushes, live, series, limit, refused, payloads, points, dropped, pdropped, depth]

    def exposition(self, accept: str | None = None) -> tuple[bytes, str]:
        """One scrape: ``(body, content type)`` as prometheus_client negotiates it from ``accept``.

        The same text as ``prometheus_client``'s encoder over :meth:`collect` (byte for byte), made fast:
        each series' sample lines up to the value, and each family's ``# HELP``/``# TYPE`` lines, are
        rendered by that encoder once per format and kept while the series lives; a scrape renders only
        new series and formats the values (``prometheus_client.utils.floatToGoString``)."""
        from prometheus_client.exposition import choose_encoder

        encoder, content_type = choose_encoder(accept or "")
        try:
            return self._render(encoder, content_type), content_type
        except RuntimeError:      # the encoder wrote something unexpected (never seen): render every line
            log.exception("cached exposition failed; rendering every line this time")
            with self._lock:
                self._formats.pop(content_type, None)
            return encoder(_Collected(self.collect())), content_type

    def _render(self, encoder, key: str) -> bytes:
        from prometheus_client.utils import floatToGoString as fmt

        _Sample = _sample_class()
        started = self.clock()
        parts: list[str] = []
        with self._lock:
            f = self._formats.get(key)
            if f is None:
                if len(self._formats) >= _MAX_FORMATS:        # Accept headers are the scraper's to choose
                    self._formats.pop(next(iter(self._formats)))
                f = self._formats[key] = _Format(encoder)
            vals = self._slot_value
            for family in self._families.values():
                pref = f.prefixes
                typ = family.type
                if typ in ("gauge", "counter"):
                    slots = family.slots
                    missing = [s for s in slots if s not in pref]
                    if missing:
                        name = family.sample
                        f.render(family, [(pref, s, _Sample(name, slots[s], 0.0)) for s in missing])
                    lines = [pref[s] + fmt(vals[s]) for s in slots]
                else:
                    lines = self._complex_lines(f, family, fmt)
                if lines:
                    parts.append(f.header(family))
                    parts.append("\n".join(lines))
                    parts.append("\n")
            own = self._self_metrics()
            self._scraped(started)
        own.extend(self._extra_metrics())
        return "".join(parts).encode("utf-8") + encoder(_Collected(own))

    def _complex_lines(self, f: "_Format", family: _Family, fmt, slots: list[int] | None = None) -> list[str]:
        """Histogram and summary sample lines of ``family`` (rendering the prefixes it has not seen); with
        ``slots``, only those series, and with ``fmt`` None only the rendering (no lines)."""
        _Sample = _sample_class()
        vals = self._slot_value
        entries: list[tuple[dict, str, Any]] = []
        missing: list[tuple[dict, str, Any]] = []
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
                with_sum = _sum_exposed(acc)
                for k, n, v in ((_COUNT, cname, acc.count), (_SUM, sname, acc.sum)):
                    if with_sum or (k == _COUNT and not f.openmetrics):
                        if k not in d:
                            missing.append((d, k, _Sample(n, labels, 0.0)))
                        entries.append((d, k, v))
            else:
                for q, v in acc.quantiles:
                    qt = _float_text(q)
                    if qt not in d:
                        missing.append((d, qt, _Sample(base, {**labels, "quantile": qt}, 0.0)))
                    entries.append((d, qt, v))
                for k, n, v in ((_COUNT, cname, acc.count), (_SUM, sname, acc.sum)):
                    if v is None:
                        continue
                    if k not in d:
                        missing.append((d, k, _Sample(n, labels, 0.0)))
                    entries.append((d, k, v))
            if len(d) > 4 * self.max_buckets + 8:   # an exponential histogram's bounds moved many times
                d.clear()
                return self._complex_lines(f, family, fmt, slots)
        if missing:
            f.render(family, missing)
        return [] if fmt is None else [d[k] + fmt(v) for d, k, v in entries]

    def _scraped(self, started: float) -> None:
        """After a scrape (under the lock): count it, and drop the instances whose terminating push was
        absorbed before it began (their final values have now been exposed once)."""
        self.scrapes += 1
        for instance in [i for i, st in self._instances.items()
                         if st.terminated_at is not None and st.terminated_at <= started]:
            self._drop_instance(instance)

    def _extra_metrics(self) -> list:
        out: list = []
        for source in self._extra:
            try:
                out.extend(source())
            except Exception:
                log.exception("self-metrics source failed")
        return out

    def wsgi_app(self, environ, start_response):
        """A WSGI application serving the exposition (any path; ``?name[]=`` keeps the families named, by
        family or sample name, as prometheus_client's ``make_wsgi_app`` means it; gzip when accepted)."""
        import gzip
        from urllib.parse import parse_qs

        from prometheus_client.exposition import choose_encoder, gzip_accepted

        method = environ["REQUEST_METHOD"]
        if method == "OPTIONS":
            status, headers, body = "200 OK", [("Allow", "OPTIONS,GET")], b""
        elif method != "GET":
            status, headers = "405 Method Not Allowed", [("Allow", "OPTIONS,GET")]
            body = f"# HTTP {status}: {method}; use OPTIONS or GET\n".encode()
        elif environ.get("PATH_INFO") == "/favicon.ico":
            status, headers, body = "200 OK", [], b""
        else:
            accept = environ.get("HTTP_ACCEPT")
            params = parse_qs(environ.get("QUERY_STRING", ""))
            if "name[]" in params:                 # the families named (by family or sample name)
                names = set(params["name[]"])
                encoder, ctype = choose_encoder(accept or "")
                body = encoder(_Collected([m for m in self.collect()
                                           if m.name in names or any(x.name in names for x in m.samples)]))
            else:
                body, ctype = self.exposition(accept)
            status, headers = "200 OK", [("Content-Type", ctype)]
            if gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING")):
                body = gzip.compress(body, 1)
                headers.append(("Content-Encoding", "gzip"))
        start_response(status, headers)
        return [body]

    def start_http_server(self, host: str = "127.0.0.1", port: int = 9464, certfile: str | None = None,
                          keyfile: str | None = None) -> int:
        """Serve ``/metrics`` (any path) on ``host:port`` with :meth:`wsgi_app` on prometheus_client's
        threading WSGI server; returns the port (0 picks a free one). ``certfile``/``keyfile`` serve HTTPS."""
        import socket
        import ssl
        from wsgiref.simple_server import WSGIRequestHandler, make_server

        from prometheus_client.exposition import ThreadingWSGIServer

        class Quiet(WSGIRequestHandler):
            def log_message(self, format, *args):  # noqa: A002
                pass

        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        server_class = type("_Server", (ThreadingWSGIServer,), {"address_family": family})
        server = make_server(host, port, self.wsgi_app, server_class, handler_class=Quiet)
        if certfile:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(certfile, keyfile)
            server.socket = ctx.wrap_socket(server.socket, server_side=True)
        thread = threading.Thread(target=server.serve_forever, name="kip714-prometheus-http", daemon=True)
        thread.start()
        self._http = (server, thread)
        return server.server_port


def _sample_class():
    from prometheus_client.samples import Sample

    return Sample


class _Collected:
    """Fixed metric families as a collector (what prometheus_client's encoders take)."""

    __slots__ = ("metrics",)

    def __init__(self, metrics: list) -> None:
        self.metrics = metrics

    def collect(self) -> list:
        return self.metrics


class _Format:
    """One exposition format (a content type prometheus_client negotiated) and what its encoder rendered:
    each family's header lines and each exposed series' sample lines without the value. Lines come from
    the encoder itself (a batch of new samples at value 0, split at the newlines; label values never hold
    a raw newline, the encoder escapes it), so the format stays prometheus_client's."""

    __slots__ = ("encoder", "eof", "openmetrics", "headers", "prefixes")

    def __init__(self, encoder) -> None:
        self.encoder = encoder
        self.eof = encoder(_Collected([])).decode()       # OpenMetrics' "# EOF"
        self.openmetrics = bool(self.eof)
        self.headers: dict[str, str] = {}                  # family sample name → HELP/TYPE/UNIT lines
        self.prefixes: dict[int, Any] = {}                 # slot → line prefix, or {bucket key: prefix}

    def _metric(self, family: _Family):
        from prometheus_client.core import Metric

        return Metric(family.name, family.help, family.type, family.unit)

    def header(self, family: _Family) -> str:
        h = self.headers.get(family.sample)
        if h is None:
            text = self.encoder(_Collected([self._metric(family)])).decode()
            h = self.headers[family.sample] = text[:len(text) - len(self.eof)]
        return h

    def render(self, family: _Family, todo: list) -> None:
        """Render ``todo`` = [(target dict, key, Sample at value 0)] and store each line's prefix."""
        m = self._metric(family)
        m.samples = [t[2] for t in todo]
        text = self.encoder(_Collected([m])).decode()
        header = self.header(family)
        lines = text[len(header):len(text) - len(self.eof)].split("\n")
        if not text.startswith(header) or len(lines) != len(todo) + 1 or lines[-1]:
            raise RuntimeError(f"unexpected exposition of {family.name}: {len(lines)} lines for {len(todo)} samples")
        for (target, key, _), line in zip(todo, lines):
            if not line.endswith(" 0.0"):
                raise RuntimeError(f"unexpected exposition line {line!r}")
            target[key] = line[:-3]

    def forget(self, slot: int, family_gone: str | None) -> None:
        self.prefixes.pop(slot, None)
        if family_gone is not None:
            self.headers.pop(family_gone, None)


def _map_text(column):
    """A map<string,string> column as one text per row (``k\\x1fv`` pairs joined with ``\\x1e``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    kv = pc.binary_join_element_wise(arr.keys, arr.items, "\x1f", null_handling="replace", null_replacement="")
    return pc.binary_join(pa.ListArray.from_arrays(arr.offsets, kv), "\x1e")
