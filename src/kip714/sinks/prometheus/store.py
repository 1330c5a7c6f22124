"""The Prometheus exporter's series store: absorbing decoded points into exposed series, and their life cycle.

Each (client instance, broker-added labels, OTLP series) is a *source*; each exposed Prometheus series (a
family name and a label set) is a *slot*, shared by every source that maps to it. Sources and slots live
in flat lists indexed by id (free lists recycle ids), so that a batch of points is applied with numpy by
source id.

* Temporality: every counter and histogram is kept as a cumulative accumulator per slot. Delta points add
  to it; cumulative points add their increase since the previous point of the same source, or their whole
  value when the start time changed or the value fell (a client restart): an exposed counter never
  decreases, so ``rate()`` is never negative, also when several instances share one label set. A
  non-monotonic delta sum accumulates into a gauge (an up-down counter's current value). Cumulative
  exponential histograms and summaries are kept as last received.
* Labels: the point's attributes, the resource attributes, ``otel_scope_name``/``otel_scope_version``
  (``scope_labels``) and the chosen broker-added labels; keys that sanitise to the same label name are
  joined with ``;`` as the specification says; ``le`` on a histogram and ``quantile`` on a summary become
  ``key_le`` / ``key_quantile``.
* Life cycle: :meth:`SeriesStore.drop_terminated` drops the instances whose terminating push was absorbed
  before a scrape began; :meth:`SeriesStore.expire` those silent for as long as the broker keeps them.
* Liveness: kip714's per-client families (:data:`PER_CLIENT_FAMILIES`, a series per set of broker-label
  values: when its instances last pushed, when one expired) are kept in slots as the clients' series are, so
  that the exposition renders them from the same kept line prefixes.
* Limits: ``max_series`` exposed time series (a histogram counts its bucket lines), ``max_buckets`` per
  histogram point; every point not exposed is counted in :attr:`SeriesStore.dropped` by reason.
"""

from __future__ import annotations

import array
import itertools
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from ...client.catalog import NON_MONOTONIC_SUMS
from ...otlp import MetricsAccumulator
from ...otlp.schema import COLUMNS
from .accumulators import ExpHistogram, Histogram, Summary
from .names import broker_node_labels, label_name, merge_labels, metric_name, prometheus_unit

__all__ = ["EXPIRED_AT", "LAST_PUSH", "PER_CLIENT_FAMILIES", "Family", "SeriesStore"]

#: kip714's own families with a series per set of broker-label values (per live client): never labelled
#: with the exporter's ``self_labels``, so that a client pushing to several replicas stays one client
LAST_PUSH = "kip714_client_last_push_timestamp_seconds"
EXPIRED_AT = "kip714_client_expired_timestamp_seconds"
PER_CLIENT_FAMILIES = frozenset({LAST_PUSH, EXPIRED_AT})
_MAX_EXPIRED = 10_000  # expiry markers kept at most (kip714_client_expired_timestamp_seconds)
# how a source's points reach its exposed series
_SET, _ADD_MONOTONIC, _ADD, _PY = 0, 1, 2, 3
_KIND_TYPE = {"gauge": "gauge", "histogram": "histogram", "exponential_histogram": "histogram", "summary": "summary"}
_RESERVED = {"histogram": "le", "summary": "quantile"}
#: a row's fields that say which series it is (the decoded columns before its times and values)
_ROW_FIELDS = COLUMNS[: COLUMNS.index("start_time_unix_nano")]
#: the fields of a row whose points are applied in Python (histograms and summaries, _apply_row)
_PY_FIELDS = (
    "kind",
    "temporality",
    "monotonic",
    "start_time_unix_nano",
    "value",
    "count",
    "sum",
    *COLUMNS[COLUMNS.index("bucket_counts") : COLUMNS.index("quantiles") + 1],
)


class Family:
    """An exposed metric family: its name, type, help and unit, and its series (slot → labels)."""

    __slots__ = ("help", "name", "sample", "slots", "type", "unit")

    def __init__(self, name: str, typ: str, help_: str, unit: str) -> None:
        self.sample = name
        self.name = name[:-6] if typ == "counter" else name  # prometheus_client adds _total itself
        self.type = typ
        self.help = help_
        self.unit = unit if unit and self.name.endswith("_" + unit) else ""
        self.slots: dict[int, dict[str, str]] = {}  # exposed series slot → labels


class _Instance:
    """What the store keeps per client instance: its sources, when it pushed (the store's clock, and the
    wall clock for ``kip714_client_last_push_timestamp_seconds``), its broker-added label values (and their
    slot in that family, shared by the instances with the same values), and the
    source of each row of its last payload whose rows all had one (``shape``: that payload's row keys, see
    :meth:`SeriesStore.absorb`)."""

    __slots__ = (
        "broker_labels",
        "expiry_s",
        "interval_s",
        "last_seen",
        "last_wall",
        "live_slot",
        "previous_seen",
        "shape",
        "shape_bulk",
        "shape_modes",
        "shape_refused",
        "shape_slots",
        "shape_sources",
        "shape_state",
        "software",
        "sources",
        "terminated_at",
    )

    def __init__(self, now: float) -> None:
        self.sources: list[int] = []
        self.broker_labels: tuple[str, ...] = ()
        self.software: tuple[str, str] = ("", "")
        self.last_wall = 0.0
        self.live_slot = -1
        # the last payload's shape and, per row, its source (or -1: refused); a shape with refused rows
        # holds only while the store's series are as they were then (shape_state), and says what the
        # refusals counted (shape_refused: series refused, points dropped by reason)
        self.shape: tuple[str, int | None] | None = None  # (the seed of its keys, the layout) of its last payload
        self.shape_sources: list[int] = []
        # no source of the shape's rows is applied in Python (_PY): their points are applied in bulk
        # (_absorb_values) to the series and in the ways these say (int64 slots and int8 modes, row by row)
        self.shape_bulk = False
        self.shape_slots = b""
        self.shape_modes = b""
        self.shape_state: tuple[int, int] | None = None
        self.shape_refused: tuple[int, dict[str, int]] | None = None
        self.last_seen = now
        self.previous_seen: float | None = None
        self.interval_s: float | None = None
        self.expiry_s: float | None = None  # the broker's expiry for it (ReceiverContext.expiry_ms)
        self.terminated_at: float | None = None


class SeriesStore:
    """Exposed series and what feeds them (see the module docstring). Every method takes :attr:`lock` (an
    ``RLock``; a scrape holds it while it reads :attr:`families`, :attr:`slot_number` and :attr:`slot_value`).

    ``labels``: the broker-added labels put on every series; ``count_payloads(reason, n)`` counts payloads
    that could not be absorbed; :attr:`on_forget` ``(slot, family name or None)`` is called when a series
    (and with the last one, its family) goes away; a series of :attr:`last_push` or :attr:`expired_at` has
    its slot too (its value the time, its refs the live instances sharing its labels), but is no time series
    of the clients (:attr:`series_count`, ``max_series``) and its family never goes."""

    def __init__(
        self,
        labels: tuple[str, ...],
        max_series: int,
        scope_labels: bool,
        max_buckets: int,
        expiry_floor_s: float,
        clock: Callable[[], float],
        count_payloads: Callable[[str, int], None],
        expired_retention_s: float = 900.0,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.labels = labels
        self.max_series = int(max_series)
        self.scope_labels = scope_labels
        self.max_buckets = int(max_buckets)
        self.expiry_floor_s = float(expiry_floor_s)
        self.clock = clock
        self.count_payloads = count_payloads
        self.on_forget: Callable[[int, str | None], None] = lambda slot, family_gone: None
        self.lock = threading.RLock()
        # the decoder of absorb() (an accumulator is used by one thread at a time: _decoding)
        self._accumulator = MetricsAccumulator(max_payloads=1 << 30)
        self._decoding = threading.Lock()
        # instance → (its labels' source as last handed over, the seed of its source keys, its labels); only
        # absorb() uses it, under _decoding
        self._seeds: dict[bytes, tuple[Any, str, dict[str, str]]] = {}
        # sources: one per (instance, broker labels, OTLP series); key text → id
        self._sources: dict[str, int] = {}
        self._src_key: list[str | None] = []
        # (machine arrays: a batch indexes them with numpy without copying them)
        self._src_slot = array.array("q")
        self._src_mode = array.array("b")
        self._src_state: dict[int, Any] = {}  # cumulative points: id → (start, value or buckets)
        self._src_free: list[int] = []
        # exposed series: slot → value (float) or accumulator object
        self._series: dict[tuple[Any, ...], int] = {}
        self._slot_key: list[tuple[Any, ...] | None] = []
        self.slot_family: list[Family | None] = []
        self._slot_refs: list[int] = []
        #: the value of each gauge and counter series (kip714's per-client families' too), by slot (a machine
        #: array: a batch's points are applied to it with numpy); histograms' and summaries' in slot_value
        self.slot_number = array.array("d")
        self.slot_value: list[Any] = []  # a histogram's or summary's accumulator, by slot (None: others)
        self._slot_weight: list[int] = []
        self._slot_free: list[int] = []
        self.series_count = 0  # exposed time series (histogram lines included)
        self._slot_changes = 0  # series created or dropped so far (with series_count: what refusals depend on)
        self.families: dict[str, Family] = {}
        self._otlp_names: dict[str, int] = {}  # OTLP metric name → exposed series using it
        self._slot_otlp: list[str | None] = []
        self._instances: dict[bytes, _Instance] = {}  # by the instance's 16 bytes
        self.fresh: list[int] = []  # series created since the renderers last took them
        # counters
        self.dropped: dict[str, int] = {}  # points dropped, by reason
        self.payloads_absorbed = 0
        self.points_absorbed = 0
        self.series_refused = 0
        self.expired = 0  # instances dropped for silence, without a terminating push
        self.terminated = 0  # instances dropped after their terminating push
        self.wall_clock = wall_clock
        #: kip714's per-client families: per set of broker-label values, the latest push of its live
        #: instances, and when an instance with them expired without a terminating push (kept for
        #: ``expired_retention_s`` or until an instance with those labels pushes again)
        self.last_push = Family(
            LAST_PUSH,
            "gauge",
            "When a live client instance last pushed (Unix time; the latest of the instances sharing these labels)",
            "",
        )
        self.expired_at = Family(
            EXPIRED_AT,
            "gauge",
            "When a client instance that stopped pushing without a terminating push was expired (Unix time; kept "
            "for expired_retention_s or until an instance with these labels pushes again)",
            "",
        )
        self._live: dict[tuple[str, ...], int] = {}  # broker-label values → their slot in last_push
        self._live_unsettled = False  # a shared slot's value or place may be stale: settle_liveness
        self._expired_marks: dict[tuple[str, ...], int] = {}  # broker-label values → their slot in expired_at
        self._software: dict[tuple[str, str], int] = {}  # (client software name, version) → live instances
        self.expired_retention_s = float(expired_retention_s)

    def _count(self, reason: str, n: int = 1) -> None:
        """Count ``n`` points dropped under ``reason`` (the lock is held)."""
        self.dropped[reason] = self.dropped.get(reason, 0) + n

    def absorb(self, items: list[Any]) -> None:
        """Absorb items ``(instance, labels, otlp bytes, terminating, timing)`` (``instance``: the 16-byte id,
        or a ``uuid.UUID``; ``labels``: the broker-added labels, a dict, or ``(client_info, node_id)`` to make
        them from, :meth:`ClientInfo.labels`, only when the instance is new or its labels' source changed);
        ``timing`` is ``(push_interval_ms, expiry_ms)`` from the receiver context (either None when not known),
        a bare push interval, or None. Undecodable payloads are counted through ``count_payloads``; the slots of
        new series are appended to :attr:`fresh`."""
        from ...errors import Kip714Error

        now = self.clock()
        wall = self.wall_clock()
        # instances are keyed by their 16 bytes (what the broker hands over: no uuid.UUID per push);
        # a uuid.UUID from a direct caller is keyed the same way
        items = [it if type(it[0]) is bytes else (it[0].bytes,) + tuple(it[1:]) for it in items]
        # each payload walked as it is taken (MetricsAccumulator); the batch's values (or, when a payload's
        # series must be looked up, its table) taken at once below. ``items`` from here on: the decodable
        # ones, each with its labels as a dict; ``shapes``: each one's (seed, layout)
        accumulator = self._accumulator
        decoded = []
        shapes = []
        with self._decoding:
            seed_of = self._seeds
            if len(seed_of) > 2 * len(self._instances) + 1024:  # (instances gone: made again when they push)
                seed_of.clear()
            for item in items:
                instance, source = item[0], item[1]
                known = seed_of.get(instance)
                # (one instance's labels may come as a dict from one caller and as (client_info, node_id) from
                # another: the sources compare only when of one kind)
                if known is not None and (
                    known[0] is source
                    or (
                        type(source) is tuple
                        and type(known[0]) is tuple
                        and known[0][0] is source[0]
                        and known[0][1] == source[1]
                    )
                    or (type(source) is dict and type(known[0]) is dict and known[0] == source)
                ):
                    _, seed, labels = known
                else:
                    labels = source if type(source) is not tuple else source[0].labels(source[1], instance)
                    seed = instance.hex() + "\x1c" + "\x1c".join(labels.get(n, "") for n in self.labels)
                    seed_of[instance] = (source, seed, labels)
                try:
                    accumulator.append(item[2])
                except (Kip714Error, TypeError):  # not OTLP (or no payload at all): counted below
                    continue
                decoded.append((instance, labels, item[2], item[3], item[4]))
                shapes.append((seed, accumulator.last_layout))
            undecodable = len(items) - len(decoded)
            items = decoded
            with self.lock:
                if undecodable:
                    self.count_payloads("undecodable", undecodable)
                known_shapes = self._touch(items, shapes, now, wall)
                if known_shapes is not None:  # every payload has its instance's last series: their values only
                    _, _, values = accumulator.flush_values()
                    self._absorb_values(known_shapes, values)
                    return
                table, _ = accumulator.flush_with_layouts()
                self._absorb_table(items, shapes, table)

    def _touch(
        self, items: list[Any], shapes: list[tuple[str, int | None]], now: float, wall: float
    ) -> list[_Instance] | None:
        """The instances of ``items`` pushed (made when new; their timing, liveness); returns each item's
        instance when every payload has the shape of its instance's last one and all their points are applied
        in bulk (:meth:`_absorb_values`), else None (the lock is held)."""
        vals, refs = self.slot_number, self._slot_refs
        known: list[_Instance] | None = []
        for k, (instance, labels, _, terminating, timing) in enumerate(items):
            inst = self._instances.get(instance)
            if inst is None:
                inst = self._instances[instance] = _Instance(now)
                inst.broker_labels = tuple(labels.get(n, "") for n in self.labels)
                inst.software = software = (
                    labels.get("client_software_name", ""),
                    labels.get("client_software_version", ""),
                )
                self._software[software] = self._software.get(software, 0) + 1
                inst.live_slot = self._live_slot(inst.broker_labels)
            else:
                inst.previous_seen, inst.last_seen = inst.last_seen, now
                inst.interval_s = now - inst.previous_seen
            interval_ms, expiry_ms = timing if isinstance(timing, tuple) else (timing, None)
            if interval_ms:
                inst.interval_s = interval_ms / 1000.0
            inst.expiry_s = expiry_ms / 1000.0 if expiry_ms else None
            if terminating:
                inst.terminated_at = now
            inst.last_wall = wall
            slot = inst.live_slot
            if wall >= vals[slot] or refs[slot] == 1:
                vals[slot] = wall
            else:  # the wall clock stepped back: the latest push may be another instance's
                self._live_unsettled = True
            if self._expired_marks:  # back: it no longer counts as gone
                self._unmark_expired(inst.broker_labels)
            if known is not None:
                if inst.shape_bulk and inst.shape_state is None and inst.shape == shapes[k]:
                    known.append(inst)
                else:
                    known = None
        self.payloads_absorbed += len(items)
        return known

    def _absorb_values(self, instances: list[_Instance], values: Any) -> None:
        """The points of payloads whose series are their instance's last payload's (``instances``: theirs, one
        per payload; ``values``: every row's value): applied with numpy to the series each instance's last
        payload's rows had, no Python per point (the lock is held)."""
        import numpy as np

        n = len(values)
        self.points_absorbed += n
        slots = np.frombuffer(b"".join([inst.shape_slots for inst in instances]), dtype=np.int64)
        if len(slots) != n:  # (the layouts said the same series: never seen; nothing is applied rather than guess)
            raise RuntimeError(f"{n} points for {len(slots)} known series")
        if n:
            modes = np.frombuffer(b"".join([inst.shape_modes for inst in instances]), dtype=np.int8)
            self._apply_vector(modes, slots, np.frombuffer(values, dtype=np.float64))

    def _absorb_table(self, items: list[Any], shapes: list[tuple[str, int | None]], table: Any) -> None:
        """The points of a batch with payloads whose series must be looked up (a new instance, a new layout,
        rows refused last time): its decoded ``table`` (the lock is held)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        seeds = [seed for seed, _ in shapes]
        n = table.num_rows
        if not n:
            return
        self.points_absorbed += n
        # A payload's *shape*: its instance and broker labels (the seed of its rows' keys) and its layout, which
        # the decoder computed as it walked it (MetricsAccumulator.flush_with_layouts: what identifies each
        # row's series, in order). An instance whose payload has the shape of its previous one (a client
        # pushes the same series push after push) reuses that payload's sources, one per row: no key is
        # made for its rows (only the rows of other payloads get keys, _row_keys): its sources live as long
        # as the instance does (_drop_instance).
        ends = np.cumsum(np.bincount(table.column("payload_index").to_numpy(), minlength=len(items)))
        offsets = np.concatenate(([0], ends)).astype(np.int32)
        src = [-1] * n
        lookup: list[int] = []  # rows whose source is looked up by key
        fresh_shapes: list[tuple[_Instance, tuple[str, int | None], int, int]] = []
        refusing: list[tuple[_Instance, tuple[str, int | None], int, int]] = []  # same shape, rows refused last time
        state = (self._slot_changes, self.series_count)
        for i, (instance, _, _, _, _) in enumerate(items):
            lo, hi = int(offsets[i]), int(offsets[i + 1])
            if lo == hi:
                continue
            inst = self._instances[instance]
            shape = shapes[i]
            if inst.shape == shape and inst.shape_state is None:
                src[lo:hi] = inst.shape_sources
            elif inst.shape == shape and inst.shape_state == state:
                refusing.append((inst, shape, lo, hi))
            else:
                lookup.extend(range(lo, hi))
                fresh_shapes.append((inst, shape, lo, hi))
        if refusing and not lookup:
            # nothing in this batch can create or free a series: the rows refused last time are refused
            # again, and counted as they were
            for inst, _, lo, hi in refusing:
                src[lo:hi] = inst.shape_sources
                assert inst.shape_refused is not None  # (set with shape_state)
                refused, replay = inst.shape_refused
                self.series_refused += refused
                for reason, k in replay.items():
                    self._count(reason, k)
        elif refusing:  # looked up with the rest, in row order
            for inst, shape, lo, hi in refusing:
                lookup.extend(range(lo, hi))
                fresh_shapes.append((inst, shape, lo, hi))
            lookup.sort()
        if lookup:
            get = self._sources.get
            looked = _row_keys(table, lookup, seeds)
            key_of = dict(zip(lookup, looked))
            missing = []
            for i, key in zip(lookup, looked):
                s = get(key, -1)
                src[i] = s
                if s < 0:
                    missing.append(i)
            counted: dict[int, tuple[int, dict[str, int]]] = {}  # what each refused row counted
            if missing and self.series_count >= self.max_series:
                # at the cap only a series that exists already (another instance with the same labels)
                # can still get a source: refuse rows of unknown metrics in bulk, without per-row work
                known = pc.is_in(
                    pc.take(table.column("metric"), pa.array(missing)),
                    value_set=pa.array(list(self._otlp_names), pa.string()),
                ).to_pylist()
                refused = len(missing) - sum(known)
                if refused:
                    self.series_refused += refused
                    self._count("series-limit", refused)
                    for i, k in zip(missing, known):
                        if not k:
                            counted[i] = (1, {"series-limit": 1})
                    missing = [i for i, k in zip(missing, known) if k]
            if missing:
                self._create_sources(table, missing, key_of, src, items, counted)
            # a refusal is known to repeat only while the series stay as they were when it was made
            unchanged = state == (self._slot_changes, self.series_count)
            src_modes, src_slots = self._src_mode, self._src_slot
            for inst, shape, lo, hi in fresh_shapes:
                sources = src[lo:hi]
                if inst.terminated_at is not None:
                    continue
                if min(sources) >= 0:
                    inst.shape, inst.shape_sources = shape, sources
                    inst.shape_state = inst.shape_refused = None
                    inst.shape_bulk = all(src_modes[x] != _PY for x in sources)
                    if inst.shape_bulk:
                        inst.shape_slots = array.array("q", [src_slots[x] for x in sources]).tobytes()
                        inst.shape_modes = array.array("b", [src_modes[x] for x in sources]).tobytes()
                    continue
                if not unchanged:
                    inst.shape = None
                    inst.shape_bulk = False
                    continue
                inst.shape, inst.shape_sources = shape, sources
                inst.shape_bulk = False
                series_refused = 0
                counts: dict[str, int] = {}
                for i in range(lo, hi):
                    if i in counted:
                        series_refused += counted[i][0]
                        for reason, k in counted[i][1].items():
                            counts[reason] = counts.get(reason, 0) + k
                inst.shape_state, inst.shape_refused = state, (series_refused, counts)
        src_a = np.array(src, dtype=np.int64)
        ok = src_a >= 0
        if not ok.all():
            idx = np.nonzero(ok)[0]
            src_a = src_a[idx]
        else:
            idx = None
        if not len(src_a):
            return
        modes = np.frombuffer(self._src_mode, dtype=np.int8)[src_a]
        slots = np.frombuffer(self._src_slot, dtype=np.int64)[src_a]
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

    def _apply_vector(self, modes: Any, slots: Any, values: Any) -> None:
        """The points of gauges and counters (``modes``, ``slots``, ``values``: numpy arrays, one entry per point,
        in row order) applied to :attr:`slot_number` with numpy, as one by one in row order: a series set
        twice keeps its last value, additions are made in order (``numpy.add.at``)."""
        import numpy as np

        vals = np.frombuffer(self.slot_number, dtype=np.float64)  # (a view: released before a slot is made)
        m = modes == _SET
        if m.any():
            at, v = slots[m], values[m]
            if len(at) > 1:
                # the last point of each series wins: its first in reverse order
                last_first, first = np.unique(at[::-1], return_index=True)
                if len(last_first) < len(at):
                    at, v = last_first, v[::-1][first]
            vals[at] = v
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
                self._count("invalid-value", bad)
            np.add.at(vals, slots[m][good], v[good])

    def _apply_row(self, source: int, row: dict[str, Any]) -> None:
        """Cumulative sums, histograms, exponential histograms and summaries."""
        slot = self._src_slot[source]
        kind = row["kind"]
        start = row["start_time_unix_nano"]
        cumulative = row["temporality"] == "cumulative"
        if kind == "sum":
            v = row["value"]
            if v is None or not math.isfinite(v) or (row["monotonic"] and v < 0):
                self._count("invalid-value")
                return
            prev = self._src_state.get(source)
            inc = v if prev is None or prev[0] != start or v < prev[1] else v - prev[1]
            self._src_state[source] = (start, v)
            self.slot_number[slot] += inc
            return
        if kind == "summary":
            qs = row["quantiles"] or []
            if len(qs) > self.max_buckets:
                self._count("too-many-buckets")
                return
            if any(q["value"] is not None and q["value"] < 0 for q in qs):
                self._count("invalid-value")  # OpenMetrics: quantile values are never negative
                return
            sum_ = row["sum"]
            if sum_ is not None and not (math.isfinite(sum_) and sum_ >= 0):
                sum_ = None  # the spec: _sum only when positive
            summary = Summary([(q["quantile"], q["value"]) for q in qs], row["count"] or 0, sum_)
            self._set_complex(slot, summary)
            return
        count, sum_ = row["count"] or 0, row["sum"]
        if sum_ is not None and not math.isfinite(sum_):
            sum_ = None
        if kind == "histogram":
            bounds = tuple(row["explicit_bounds"] or ())
            buckets = row["bucket_counts"] or []
            if len(bounds) > self.max_buckets:
                self._count("too-many-buckets")
                return
            if (
                (buckets and len(buckets) != len(bounds) + 1)
                or any(not (a < b) for a, b in itertools.pairwise(bounds))
                or any(math.isnan(b) for b in bounds)
            ):
                self._count("invalid-histogram")
                return
            if not buckets:
                buckets = [0] * len(bounds) + [count]
            acc = self.slot_value[slot]
            if not isinstance(acc, Histogram) or acc.bounds != bounds:
                acc = Histogram(bounds, len(bounds) + 1)
                self._set_complex(slot, acc)
            if cumulative:
                prev = self._src_state.get(source)
                if (
                    prev is not None
                    and prev[0] == start
                    and prev[1] == bounds
                    and count >= prev[2]
                    and all(b >= a for a, b in zip(prev[3], buckets))
                ):
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
            self._count("invalid-histogram")
            return
        acc = self.slot_value[slot]
        if cumulative or not isinstance(acc, ExpHistogram):
            acc = ExpHistogram(self.max_buckets)
        before = acc.weight()
        acc.add(
            scale,
            row["positive_offset"] or 0,
            pos,
            row["negative_offset"] or 0,
            neg,
            row["zero_count"] or 0,
            count,
            sum_,
        )
        if self.slot_value[slot] is not acc:
            self._set_complex(slot, acc)
        else:
            self._reweigh(slot, acc.weight() - before)

    def _set_complex(self, slot: int, acc: Any) -> None:
        old = self.slot_value[slot]
        old_w = old.weight() if hasattr(old, "weight") else self._slot_weight[slot]
        self.slot_value[slot] = acc
        self._reweigh(slot, acc.weight() - old_w)

    def _reweigh(self, slot: int, delta: int) -> None:
        self._slot_weight[slot] += delta
        self.series_count += delta

    def _create_sources(
        self,
        table: Any,
        missing: list[int],
        keys: Any,
        src: list[int],
        items: list[Any],
        counted: dict[int, tuple[int, dict[str, int]]],
    ) -> None:
        """Sources for the rows ``missing``: created, or refused (``src`` -1; what a refusal counted goes to
        ``counted[row]``: series refused, points dropped by reason)."""
        import pyarrow as pa

        rows = table.select(list(_ROW_FIELDS) + ["payload_index"]).take(pa.array(missing)).to_pylist()
        for i, row in zip(missing, rows):
            key = keys[i]
            s = self._sources.get(key, -1)  # created for an earlier row of this batch
            if s < 0:
                refused, dropped = self.series_refused, dict(self.dropped)
                s = self._new_source(key, row, items[row["payload_index"]])
                if s < 0:
                    counted[i] = (
                        self.series_refused - refused,
                        {r: k - dropped.get(r, 0) for r, k in self.dropped.items() if k != dropped.get(r, 0)},
                    )
            src[i] = s

    def _new_source(self, key: str, row: dict[str, Any], item: Any) -> int:
        if self.series_count >= self.max_series and row["metric"] not in self._otlp_names:
            self.series_refused += 1
            self._count("series-limit")
            return -1
        kind, temporality, monotonic = row["kind"], row["temporality"], row["monotonic"]
        if kind == "sum" and monotonic and row["metric"] in NON_MONOTONIC_SUMS:
            monotonic = False  # a falling value pushed as a monotonic sum (kip714.client.catalog): a gauge
        if kind in ("sum", "histogram", "exponential_histogram") and temporality is None:
            self._count("unspecified-temporality")
            return -1
        name = metric_name(row["metric"], row["unit"] or "", kind, monotonic)
        if not name:
            self._count("invalid-name")
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
        family = self.families.get(name)
        if family is None:
            family = Family(name, typ, row["description"] or "", prometheus_unit(row["unit"] or ""))
        elif family.type != typ:
            self._count("type-conflict")
            return -1
        # labels: point attributes, resource, scope, broker-added; collisions joined by the spec's rule
        attributes = list(row["attributes"] or ())
        pairs = attributes + broker_node_labels(attributes) + list(row["resource"] or ())
        if self.scope_labels:
            pairs += [("otel_scope_name", row["scope_name"] or ""), ("otel_scope_version", row["scope_version"] or "")]
        instance, blabels = item[0], item[1]
        pairs += [(n, blabels.get(n, "")) for n in self.labels]
        reserved = _RESERVED.get(typ)
        if reserved is not None:
            pairs = [(k, v) if label_name(k) != reserved else ("key_" + reserved, v) for k, v in pairs]
        labels, dropped = merge_labels(pairs)
        if dropped:
            self._count("invalid-label-name-ignored", dropped)
        skey = (name, tuple(sorted(labels.items())))
        slot = self._series.get(skey)
        if slot is None:
            weight = 1 if typ in ("gauge", "counter") else 3
            if self.series_count + weight > self.max_series:
                self.series_refused += 1
                self._count("series-limit")
                return -1
            if name not in self.families:
                self.families[name] = family
            slot = self._new_slot(family, labels, 0.0 if typ in ("gauge", "counter") else None)
            self._series[skey] = slot
            self._slot_changes += 1
            self._slot_key[slot] = skey
            self._slot_weight[slot] = weight
            self._slot_otlp[slot] = otlp_name = row["metric"]
            self._otlp_names[otlp_name] = self._otlp_names.get(otlp_name, 0) + 1
            self.series_count += weight
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

    def _new_slot(self, family: Family, labels: dict[str, str], value: Any) -> int:
        """A slot for a new series of ``family`` (no refs, no weight yet); its line prefixes are rendered
        before the next scrape (:attr:`fresh`)."""
        slot = self._slot_free.pop() if self._slot_free else len(self._slot_key)
        if slot == len(self._slot_key):
            self._slot_key.append(None)
            self.slot_family.append(None)
            self._slot_refs.append(0)
            self.slot_value.append(None)
            self.slot_number.append(0.0)
            self._slot_weight.append(0)
            self._slot_otlp.append(None)
        self.fresh.append(slot)
        self.slot_family[slot] = family
        self._slot_refs[slot] = 0
        if family.type in ("gauge", "counter"):
            self.slot_number[slot] = value
            self.slot_value[slot] = None
        else:
            self.slot_value[slot] = value
        family.slots[slot] = labels
        return slot

    def _free_slot(self, slot: int, family: Family) -> None:
        """``slot``'s series is gone (its renderings are forgotten); a clients' family goes with its last."""
        family.slots.pop(slot, None)
        gone = None
        if not family.slots and self.families.get(family.sample) is family:
            self.families.pop(family.sample)
            gone = family.sample
        self.on_forget(slot, gone)
        self.slot_family[slot] = None
        self.slot_value[slot] = None
        self._slot_free.append(slot)

    # ------------------------------------------------------------------ liveness (kip714's per-client families)

    def _live_slot(self, values: tuple[str, ...]) -> int:
        """The :attr:`last_push` slot of a new instance with broker-label ``values`` (one more ref)."""
        slot = self._live.get(values)
        if slot is None:
            slot = self._live[values] = self._new_slot(self.last_push, dict(zip(self.labels, values)), 0.0)
        self._slot_refs[slot] += 1
        return slot

    def _live_gone(self, inst: _Instance) -> None:
        """``inst`` is dropped: its label values' :attr:`last_push` series goes with their last instance."""
        slot = inst.live_slot
        self._slot_refs[slot] -= 1
        if self._slot_refs[slot] == 0:
            del self._live[inst.broker_labels]
            self._free_slot(slot, self.last_push)
        else:  # the latest push, and the series' place (its first live instance's), may have been inst's
            self._live_unsettled = True

    def settle_liveness(self) -> None:
        """Before a scrape (the lock is held): after an instance sharing its broker-label values with others
        went, or a push's wall clock stepped back, set each :attr:`last_push` series to the latest push of
        its live instances, in the order of their first live instance (a pass over the instances, only
        then)."""
        if not self._live_unsettled:
            return
        self._live_unsettled = False
        vals = self.slot_number
        order: dict[int, None] = {}
        for inst in self._instances.values():
            slot = inst.live_slot
            if slot not in order:
                order[slot] = None
                vals[slot] = inst.last_wall
            elif inst.last_wall > vals[slot]:
                vals[slot] = inst.last_wall
        fam = self.last_push
        fam.slots = {slot: fam.slots[slot] for slot in order}

    def _mark_expired(self, values: tuple[str, ...], wall: float) -> None:
        slot = self._expired_marks.get(values)
        if slot is None:
            slot = self._expired_marks[values] = self._new_slot(self.expired_at, dict(zip(self.labels, values)), wall)
        self.slot_number[slot] = wall

    def _unmark_expired(self, values: tuple[str, ...]) -> None:
        slot = self._expired_marks.pop(values, None)
        if slot is not None:
            self._free_slot(slot, self.expired_at)

    # ------------------------------------------------------------------ life cycle

    def _drop_instance(self, instance: bytes) -> None:
        inst = self._instances.pop(instance, None)
        if inst is None:
            return
        self._live_gone(inst)
        if self._software[inst.software] == 1:
            del self._software[inst.software]
        else:
            self._software[inst.software] -= 1
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
                family = self.slot_family[slot]
                assert family is not None  # (a slot in use has its family)
                self._free_slot(slot, family)
                skey = self._slot_key[slot]
                if skey is not None:
                    self._series.pop(skey, None)
                self.series_count -= self._slot_weight[slot]
                otlp_name = self._slot_otlp[slot]
                assert otlp_name is not None  # (a slot in use has its OTLP name)
                if self._otlp_names.get(otlp_name, 0) <= 1:
                    self._otlp_names.pop(otlp_name, None)
                else:
                    self._otlp_names[otlp_name] -= 1
                self._slot_key[slot] = None
                self._slot_changes += 1
                self._slot_weight[slot] = 0

    def expire(self, now: float | None = None) -> int:
        """Drop instances silent for as long as the broker keeps them (``ReceiverContext.expiry_ms``: its
        instance table's ``max(60 s, 3 × push interval)``), or, when the broker did not say,
        ``max(expiry_floor_s, 3 × push interval)``; returns how many."""
        now = self.clock() if now is None else now
        with self.lock:
            floor = self.expiry_floor_s
            gone = [
                i
                for i, st in self._instances.items()
                if now - st.last_seen > (st.expiry_s or max(floor, 3 * (st.interval_s or 0.0)))
            ]
            wall = self.wall_clock()
            for i in gone:
                inst = self._instances[i]
                if inst.terminated_at is None:  # silent without a terminating push: a client gone wrong
                    self._mark_expired(inst.broker_labels, wall)
                    self.expired += 1
                else:  # terminated, and no scrape came to expose its final values
                    self.terminated += 1
                self._drop_instance(i)
            self._prune_expired(wall)
        return len(gone)

    def _prune_expired(self, wall: float) -> None:
        """Forget expiry markers older than the retention, and the oldest beyond ``_MAX_EXPIRED``."""
        marks, vals = self._expired_marks, self.slot_number
        for key in [k for k, slot in marks.items() if wall - vals[slot] > self.expired_retention_s]:
            self._unmark_expired(key)
        while len(marks) > _MAX_EXPIRED:
            self._unmark_expired(next(iter(marks)))

    def software_counts(self) -> dict[tuple[str, str], int]:
        """(client software name, version) → live instances (the store's own dict: the lock is held)."""
        return self._software

    @property
    def instances(self) -> int:
        return len(self._instances)

    def drop_terminated(self, before: float) -> None:
        """Drop the instances whose terminating push was absorbed at or before ``before`` (a scrape's start:
        their final values have been exposed once). The lock is held."""
        for instance in [
            i for i, st in self._instances.items() if st.terminated_at is not None and st.terminated_at <= before
        ]:
            self._drop_instance(instance)
            self.terminated += 1


def _row_keys(table: Any, rows: list[int], seeds: list[str]) -> list[str]:
    """The source key of each of ``rows`` of a decoded table: the seed (instance and broker labels: ``seeds``,
    one per payload), then what identifies the row's series. The key text identifies a source; its separators
    could appear in a client's own strings, which could only make that client's own series share a source (the
    seed comes first)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    sub = table.select(_KEY_COLUMNS).take(pa.array(rows, pa.int64()))
    keys = pc.binary_join_element_wise(
        pc.take(pa.array(seeds, pa.string()), sub.column("payload_index")),
        sub.column("metric"),
        sub.column("unit"),
        sub.column("kind"),
        sub.column("temporality"),
        pc.cast(sub.column("monotonic"), pa.string()),
        sub.column("scope_name"),
        sub.column("scope_version"),
        _map_text(sub.column("attributes")),
        _map_text(sub.column("resource")),
        "\x1d",
        null_handling="replace",
        null_replacement="",
    )
    result: list[str] = keys.to_pylist()
    return result


#: the columns a row's source key is made of (_row_keys): its payload's (the seed), then what says which series
#: the row is
_KEY_COLUMNS = ("payload_index", *(c for c in _ROW_FIELDS if c != "description"))


def _map_text(column: Any) -> Any:
    """A map<string,string> column as one text per row (``k\\x1fv`` pairs joined with ``\\x1e``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    kv = pc.binary_join_element_wise(arr.keys, arr.items, "\x1f", null_handling="replace", null_replacement="")
    return pc.binary_join(pa.ListArray.from_arrays(arr.offsets, kv), "\x1e")
