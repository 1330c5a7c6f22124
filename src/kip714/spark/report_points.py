"""The per-push and per-point work of ``kip714 report``, done next to the decoder in Spark's Python workers.

A report reads every push and every data point once: intervals, compression, error answers and
termination per push; naming, subscription and temporality per point, series per push, and the few metrics
the insights look at. Shipping a million decoded points (map columns and all) back to the JVM to aggregate
them there cost most of the report's time, and a dozen small Spark jobs over the pushes most of the rest,
so the workers do it all: the input is partitioned by client instance and sorted, each worker decodes its
pushes (the same chunked, bounded decoder as :func:`kip714.spark.decode_payloads`) and reduces each complete
instance with pyarrow's hash aggregations and numpy (never a Python loop per point; per instance, a few
loops over its pushes). Only small tables leave the workers: one row per instance (kind ``inst``: its push
facts, decode failures and point facts) and one per instance, metric and node of the insight metrics
(``agg``).

Memory: a worker holds one input batch and the pushes and points of one instance at a time (an instance's points are
reduced together, so a client that pushed for a month at the default 5-minute interval — ~9 000 pushes, a
few hundred thousand points — is held whole; partial aggregation per instance would lift that bound).

The rules (what counts as a bad name, an unsubscribed metric, a duplicate series…) are the report's
(:mod:`kip714.spark.report`); this module only evaluates them over Arrow data. The workers' functions that
decode the pushes and cut the sorted input at instance boundaries are :mod:`kip714.spark.report_workers`'.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._enums import ErrorCode

__all__ = [
    "AGG_COLUMNS",
    "FACT_COLUMNS",
    "INST_COLUMNS",
    "OUT_SCHEMA",
    "aggregate",
]

_STR_LIST = pa.list_(pa.string())

_PUSH_FIELDS = [
    # inst: from the instance's pushes, in time order (what the endpoint answered, intervals, compression)
    ("client_id", pa.string()),
    ("client_software_name", pa.string()),
    ("client_software_version", pa.string()),
    ("client_source_address", pa.string()),
    ("pushes", pa.int64()),
    ("payload_pushes", pa.int64()),
    ("first_push_ms", pa.int64()),
    ("last_push_ms", pa.int64()),
    ("terminated", pa.bool_()),
    ("interval_checked", pa.int64()),
    ("early_pushes", pa.int64()),
    ("gaps", pa.int64()),
    ("earliest_gap_ms", pa.int64()),
    ("compression_checked", pa.int64()),
    ("compression_bad", pa.int64()),
    ("compression_bad_types", _STR_LIST),
    ("error_responses", pa.int64()),
    ("error_faults", pa.int64()),
    ("error_codes", _STR_LIST),
    # inst: the clients (client id, software name and version) that pushed under the instance id
    ("clients", pa.int64()),
    ("client_names", _STR_LIST),
    # inst: payloads that did not decompress or decode
    ("decode_failed", pa.int64()),
    ("decode_error", pa.string()),
]
_INST_FIELDS = _PUSH_FIELDS + [
    # inst: from the instance's points
    ("points", pa.int64()),
    ("naming_bad", pa.int64()),
    ("naming_bad_names", _STR_LIST),
    ("subscribed_checked", pa.int64()),
    ("subscribed_bad", pa.int64()),
    ("subscribed_bad_names", _STR_LIST),
    ("temporality_checked", pa.int64()),
    ("temporality_bad", pa.int64()),
    ("temporality_bad_names", _STR_LIST),
    ("is_producer", pa.bool_()),
    ("is_consumer", pa.bool_()),
    ("resource_keys", _STR_LIST),
    ("standard_seen", _STR_LIST),
    ("subscriptions", pa.list_(_STR_LIST)),
    # inst: from its series
    ("series_in_pushes", pa.int64()),
    ("duplicate_series", pa.int64()),
    ("duplicate_names", _STR_LIST),
    ("cumulative_series", pa.int64()),
    ("start_moved", pa.int64()),
    ("start_moved_names", _STR_LIST),
]
_AGG_FIELDS = [  # agg: one insight metric (and node) of one instance
    ("metric", pa.string()),
    ("node", pa.string()),
    ("avg", pa.float64()),
    ("sum", pa.float64()),
    ("max", pa.float64()),
    ("first", pa.float64()),
    ("last", pa.float64()),
    ("t0", pa.int64()),
    ("t1", pa.int64()),
    ("n", pa.int64()),
    ("temporality", pa.string()),
]
#: What the workers hand back (every column nullable; ``row_kind`` says which are set).
OUT_SCHEMA = pa.schema([("row_kind", pa.string()), ("client_instance_id", pa.string())] + _INST_FIELDS + _AGG_FIELDS)
#: The columns of each kind of row (besides ``row_kind`` and ``client_instance_id``).
INST_COLUMNS = tuple(name for name, _ in _INST_FIELDS)
AGG_COLUMNS = tuple(name for name, _ in _AGG_FIELDS)
#: The recording columns the points are reduced with (copied onto each decoded point).
PUSH_COLUMNS = (
    "client_instance_id",
    "node_id",
    "received_at_ms",
    "subscribed_metrics",
    "delta_temporality",
    "kip714_replica",
    "terminating",
)
#: The columns that tell one push of an instance from another where a push is not a row of its own (a points
#: table repeats them on every point of the push): the replica that received it (each push is one row of one
#: replica's recording), the node and the millisecond it arrived at, and whether it was the terminating push
#: (which a client sends right after its last push, often within the same millisecond).
PUSH_KEY = ("client_instance_id", "kip714_replica", "node_id", "received_at_ms", "terminating")
#: The recording columns the push facts read (``push_error_code`` is the recording's ``error_code``: the
#: endpoint's answer). The workers also take ``payload_bytes`` (null: no payload) and ``decode_error``.
FACT_COLUMNS = (
    "client_instance_id",
    "node_id",
    "received_at_ms",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "terminating",
    "push_interval_ms",
    "push_error_code",
    "subscription_id",
    "accepted_compression_types",
    "compression_type",
    "kip714_replica",
)
_UNKNOWN_SUB = int(ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
_THROTTLED = int(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
_NAMES = 5
_T = TypeVar("_T")
#: What :meth:`Rules.__getstate__` hands :meth:`Rules.__setstate__`: the arguments of :class:`Rules`.
_RulesState = tuple[str, set[str], set[str], set[str], str, str, str, float, float]


class Rules:
    """The report's rules, as the workers need them (plain values: they travel to the workers pickled)."""

    def __init__(
        self,
        name_pattern: str,
        bare_standard: set[str],
        standard: set[str],
        interest: set[str],
        latency_suffix: str,
        producer_prefix: str,
        consumer_prefix: str,
        interval_tolerance: float,
        gap_factor: float,
    ) -> None:
        self.name_re = re.compile(name_pattern)
        self.bare_standard = bare_standard
        self.standard = standard
        self.interest = interest
        self.latency_suffix = latency_suffix
        self.producer_prefix = producer_prefix  # a metric under it makes the client a producer
        self.consumer_prefix = consumer_prefix
        self.interval_tolerance = interval_tolerance  # ReportOptions': early and gapped pushes
        self.gap_factor = gap_factor

    def __getstate__(self) -> _RulesState:
        return (
            self.name_re.pattern,
            self.bare_standard,
            self.standard,
            self.interest,
            self.latency_suffix,
            self.producer_prefix,
            self.consumer_prefix,
            self.interval_tolerance,
            self.gap_factor,
        )

    def __setstate__(self, state: _RulesState) -> None:
        Rules.__init__(self, *state)


# ------------------------------------------------------------------------------------------ helpers


def _codes(arr: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[Any]]:
    """Dense int64 codes of ``arr`` (nulls get their own code) and the distinct values, in code order."""
    enc = pc.dictionary_encode(arr, null_encoding="encode")
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks() if enc.num_chunks != 1 else enc.chunk(0)
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary.to_pylist()


def _combine(*codes: np.ndarray) -> np.ndarray:
    """One dense code per distinct tuple of ``codes`` (re-densified at each step so nothing overflows)."""
    out = codes[0]
    for c in codes[1:]:
        width = int(c.max()) + 1 if len(c) else 1
        _, out = np.unique(out * width + c, return_inverse=True)
        out = out.astype(np.int64)
    return out


def _map_codes(col: pa.MapArray | pa.ChunkedArray) -> np.ndarray:
    """A code per row of a ``map<string, string>`` column that is equal for two rows exactly when their
    entries are the same multiset (Spark's ``array_sort(map_entries(m))``); a null map has its own code."""
    col, offsets, keys, items = _map_parts(col)
    n = len(col)
    lengths = np.diff(offsets)
    if len(keys):
        entry = pc.binary_join_element_wise(keys, pc.fill_null(items, "\x00null"), "\x00")
        ecode, _ = _codes(entry)
        row = np.repeat(np.arange(n, dtype=np.int64), lengths)
        order = np.lexsort((ecode, row))
        sorted_codes = ecode[order].astype(np.int32)
    else:
        sorted_codes = np.zeros(0, np.int32)
    # each row's sorted entry codes as one binary value, dictionary-encoded: exact, no hashing
    data = pa.py_buffer(sorted_codes.tobytes())
    offs = pa.py_buffer((offsets * 4).astype(np.int32).tobytes())
    valid = col.is_valid()
    binary = pa.Array.from_buffers(pa.binary(), n, [None, offs, data])
    binary = pc.if_else(valid, binary, pa.scalar(None, pa.binary()))
    code, _ = _codes(binary)
    return code


def _map_parts(col: pa.MapArray | pa.ChunkedArray) -> tuple[pa.MapArray, np.ndarray, pa.Array, pa.Array]:
    """(array, offsets from 0 as int64, keys, items) of a map column, its slice taken into account
    (``MapArray.keys`` is the whole child whatever the slice)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    off = col.offsets.to_numpy().astype(np.int64) if len(col) else np.zeros(1, np.int64)
    lo, hi = int(off[0]), int(off[-1])
    return col, off - lo, col.keys.slice(lo, hi - lo), col.items.slice(lo, hi - lo)


def _first_names(
    inst: np.ndarray, metric: np.ndarray, mask: np.ndarray, names: list[str | None], k: int = _NAMES
) -> dict[int, list[str]]:
    """Per instance code: the first ``k`` distinct metric names (sorted) among rows where ``mask``."""
    out: dict[int, list[str | None]] = {}
    if not mask.any():
        return {}
    width = len(names) + 1
    pairs = np.unique(inst[mask] * width + metric[mask])
    for p in pairs.tolist():
        out.setdefault(p // width, []).append(names[p % width])
    return {i: sorted(x for x in v if x is not None)[:k] for i, v in out.items()}


def _bincount(codes: np.ndarray, n: int, weights: np.ndarray | None = None) -> np.ndarray:
    return np.bincount(codes, weights=weights, minlength=n).astype(np.int64)


# ------------------------------------------------------------------------------------------ the reduction


def aggregate(points: pa.Table, pushes: pa.Table, rules: Rules, distinct_pushes: bool = False) -> pa.Table:
    """The ``inst`` and ``agg`` rows (:data:`OUT_SCHEMA`) of complete instances: ``points`` are their
    decoded points (with the recording columns of :data:`PUSH_COLUMNS`), ``pushes`` their pushes (the
    columns of :data:`FACT_COLUMNS`, ``payload_bytes`` and ``decode_error``). One ``inst`` row per
    instance that pushed. ``distinct_pushes``: keep the first row of each push (:data:`PUSH_KEY`)."""
    if pushes.num_rows == 0 and points.num_rows == 0:
        return OUT_SCHEMA.empty_table()
    if distinct_pushes and pushes.num_rows:
        key = _combine(*(_codes(pushes.column(c))[0] for c in PUSH_KEY))
        pushes = pushes.take(pa.array(np.sort(np.unique(key, return_index=True)[1])))
    ids = pa.chunked_array(
        [*pushes.column("client_instance_id").chunks, *points.column("client_instance_id").chunks], pa.string()
    )
    codes, inst_names = _codes(ids)
    push_inst, point_inst = codes[: pushes.num_rows], codes[pushes.num_rows :]
    n_inst = len(inst_names)
    columns: dict[str, list[Any]] = {"row_kind": ["inst"] * n_inst, "client_instance_id": inst_names}
    columns.update(_push_facts(pushes, push_inst, n_inst, rules))
    metric, metric_names = _codes(points.column("metric")) if points.num_rows else (np.zeros(0, np.int64), [])
    columns.update(_point_facts(points, point_inst, metric, metric_names, n_inst, rules))
    out = pa.Table.from_pydict({f.name: columns.get(f.name, [None] * n_inst) for f in OUT_SCHEMA}, schema=OUT_SCHEMA)
    agg = _insight_aggregates(points, point_inst, inst_names, metric, metric_names, rules) if points.num_rows else None
    return pa.concat_tables([out, agg]) if agg is not None else out


def _push_facts(p: pa.Table, inst: np.ndarray, n_inst: int, rules: Rules) -> dict[str, list[Any]]:
    """Per instance code: the :data:`_PUSH_FIELDS` columns from its pushes, taken in time order across the
    replicas that received them (each push against the one before it: interval, error, subscription). The
    interval is checked between two pushes to the same replica only: the first push after the client's
    connection moved to another replica (a replica stopped, the balancer chose another) follows whatever the
    move cost, which is not the client's interval."""
    n = p.num_rows
    t_all = pc.fill_null(p.column("received_at_ms"), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    order = np.lexsort((t_all, inst))
    p = p.take(pa.array(order)) if n else p
    inst, t = inst[order], t_all[order]

    def ints(name: str, fill: int) -> np.ndarray:
        values: np.ndarray = pc.fill_null(pc.cast(p.column(name), pa.int64()), fill).to_numpy(zero_copy_only=False)
        return values

    def valid(name: str) -> np.ndarray:
        mask: np.ndarray = pc.is_valid(p.column(name)).to_numpy(zero_copy_only=False)
        return mask

    first = np.ones(n, bool)
    first[1:] = inst[1:] != inst[:-1]
    prev = np.r_[0, np.arange(n - 1)] if n else np.zeros(0, np.int64)
    code = ints("push_error_code", -1)
    code_ok = valid("push_error_code")
    sid, sid_ok = ints("subscription_id", 0), valid("subscription_id")
    same_sub = ~first & sid_ok & sid_ok[prev] & (sid == sid[prev])
    replica = _codes(p.column("kip714_replica"))[0]  # null (a recording without the column): one replica
    same_replica = ~first & (replica == replica[prev])
    prev_err, prev_err_ok = code[prev], ~first & code_ok[prev]
    interval, interval_ok = ints("push_interval_ms", 0).astype(float), valid("push_interval_ms")
    term = pc.fill_null(p.column("terminating"), True).to_numpy(zero_copy_only=False)  # unknown: not checked
    gap = t - t[prev]
    t_ok = valid("received_at_ms")
    checked = ~first & interval_ok & ~term & prev_err_ok & (prev_err == 0) & same_sub & same_replica & t_ok
    early = checked & (gap < interval * (1.0 - rules.interval_tolerance))
    gapped = checked & (gap > interval * rules.gap_factor)
    ctype, ctype_ok = ints("compression_type", 0), valid("compression_type")
    size = pc.fill_null(p.column("payload_bytes"), 0).to_numpy(zero_copy_only=False)
    accepted = p.column("accepted_compression_types")
    comp_checked = (size > 0) & pc.is_valid(accepted).to_numpy(zero_copy_only=False)
    # is the push's type in its accepted list: the list's values against the row's own type
    flat = pc.fill_null(pc.cast(pc.list_flatten(accepted), pa.int64()), -1).to_numpy(zero_copy_only=False)
    owner = pc.list_parent_indices(accepted).to_numpy(zero_copy_only=False).astype(np.int64)
    listed = np.zeros(n, bool)
    listed[owner[flat == ctype[owner]]] = True
    comp_bad = comp_checked & ctype_ok & (ctype != 0) & ~listed
    err = code_ok & (code != 0)
    fault = (
        err & (code != _THROTTLED) & ((code != _UNKNOWN_SUB) | (prev_err_ok & (prev_err == _UNKNOWN_SUB) & same_sub))
    )
    failed = pc.is_valid(p.column("decode_error")).to_numpy(zero_copy_only=False)

    counts = {
        "pushes": _bincount(inst, n_inst),
        "payload_pushes": _bincount(inst, n_inst, valid("payload_bytes")),
        "interval_checked": _bincount(inst, n_inst, checked),
        "early_pushes": _bincount(inst, n_inst, early),
        "gaps": _bincount(inst, n_inst, gapped),
        "compression_checked": _bincount(inst, n_inst, comp_checked),
        "compression_bad": _bincount(inst, n_inst, comp_bad),
        "error_responses": _bincount(inst, n_inst, err),
        "error_faults": _bincount(inst, n_inst, fault),
        "decode_failed": _bincount(inst, n_inst, failed),
    }
    out: dict[str, list[Any]] = {k: v.tolist() for k, v in counts.items()}
    starts = np.nonzero(first)[0]
    ends = np.r_[starts[1:], n] - 1
    groups = inst[starts]
    for name, fn in (("first_push_ms", np.min), ("last_push_ms", np.max)):

        def push_time(a: int, b: int, fn: Callable[[np.ndarray], Any] = fn) -> int | None:
            return int(fn(t[a:b][t_ok[a:b]])) if t_ok[a:b].any() else None

        out[name] = _first_by(groups, starts, ends, n_inst, push_time)
    term_v = p.column("terminating").to_pylist()
    out["terminated"] = _first_by(
        groups, starts, ends, n_inst, lambda a, b: max((x for x in term_v[a:b] if x is not None), default=None)
    )
    early_gap = np.where(early, gap, np.iinfo(np.int64).max)
    out["earliest_gap_ms"] = _first_by(
        groups, starts, ends, n_inst, lambda a, b: int(early_gap[a:b].min()) if early[a:b].any() else None
    )
    for name in ("client_id", "client_source_address", "decode_error"):
        vals = p.column(name).to_pylist()

        def first_set(a: int, b: int, v: list[str | None] = vals) -> str | None:
            return next((x for x in v[a:b] if x is not None), None)

        out[name] = _first_by(groups, starts, ends, n_inst, first_set)
    for name in ("client_software_name", "client_software_version"):  # the first push's, as the client said it
        vals = p.column(name).to_pylist()

        def software(a: int, b: int, v: list[str | None] = vals) -> str:
            said = v[a]
            return said if said is not None else "unknown"

        out[name] = _first_by(groups, starts, ends, n_inst, software)
    who = list(
        zip(*(p.column(c).to_pylist() for c in ("client_id", "client_software_name", "client_software_version")))
    )

    def clients(a: int, b: int) -> list[tuple[Any, ...]]:  # distinct (client id, software, version) in push order
        return list(dict.fromkeys(who[a:b]))

    out["clients"] = _first_by(groups, starts, ends, n_inst, lambda a, b: len(clients(a, b)), 0)
    out["client_names"] = _first_by(
        groups,
        starts,
        ends,
        n_inst,
        lambda a, b: _few(f"{c or '?'} ({n or 'unknown'} {v or ''})".replace(" )", ")") for c, n, v in clients(a, b)),
        [],
    )
    ctype_s, code_s = ctype.tolist(), code.tolist()
    out["compression_bad_types"] = _first_by(
        groups, starts, ends, n_inst, lambda a, b: _few(str(ctype_s[i]) for i in range(a, b) if comp_bad[i]), []
    )
    out["error_codes"] = _first_by(
        groups, starts, ends, n_inst, lambda a, b: _few(str(code_s[i]) for i in range(a, b) if err[i]), []
    )
    return out


def _first_by(
    groups: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    n_inst: int,
    fn: Callable[[int, int], _T],
    default: _T | None = None,
) -> list[_T | None]:
    """``fn(start, stop)`` (the group's rows are ``start:stop``) per instance group, at its instance code."""
    col: list[_T | None] = [default] * n_inst
    for g, a, b in zip(groups.tolist(), starts.tolist(), (ends + 1).tolist()):
        col[g] = fn(a, b)
    return col


def _few(values: Iterable[str], k: int = 3) -> list[str]:
    """The first ``k`` of the distinct ``values`` in sorted order (the report's examples of codes)."""
    return sorted(set(values))[:k]


def _point_facts(
    t: pa.Table, inst: np.ndarray, metric: np.ndarray, metric_names: list[str | None], n_inst: int, rules: Rules
) -> dict[str, list[Any]]:
    """Per instance code: the point columns of :data:`_INST_FIELDS` (naming, subscription, temporality,
    kinds, resource keys, standard metrics seen, series)."""
    n = t.num_rows
    if n == 0:
        return {
            **{name: [0] * n_inst for name in _COUNT_FIELDS},
            **{name: [[] for _ in range(n_inst)] for name in _LIST_FIELDS},
            "is_producer": [False] * n_inst,
            "is_consumer": [False] * n_inst,
        }

    # ---- per metric name: naming, kind of client, standard
    bad_name = np.array(
        [m is None or not rules.name_re.search(m) or m in rules.bare_standard for m in metric_names], bool
    )
    producer_m = np.array([m is not None and m.startswith(rules.producer_prefix) for m in metric_names], bool)
    consumer_m = np.array([m is not None and m.startswith(rules.consumer_prefix) for m in metric_names], bool)
    standard_m = np.array([m in rules.standard for m in metric_names], bool)

    naming = bad_name[metric]
    # ---- subscription: per distinct (subscription, metric) pair
    subs_col = t.column("subscribed_metrics")
    sub_code, sub_values = _subscription_codes(subs_col)
    sub_checked = np.array([v is not None for v in sub_values], bool)[sub_code]
    width = len(metric_names)
    pair = sub_code * width + metric
    upairs, pinv = np.unique(pair, return_inverse=True)
    pair_bad = np.zeros(len(upairs), bool)
    for j, p in enumerate(upairs.tolist()):
        subs, m = sub_values[p // width], metric_names[p % width]
        if subs is None:
            continue
        hit, unknown = False, False
        for s in subs:
            if s is None:
                unknown = True
            elif s == "*" or (m is not None and m.startswith(s)):
                hit = True
                break
        pair_bad[j] = not hit and not unknown
    sub_bad = pair_bad[pinv]

    # ---- temporality
    kind = t.column("kind")
    temporality = t.column("temporality")
    delta = t.column("delta_temporality")
    temp_checked = pc.and_(pc.is_in(kind, pa.array(["sum", "histogram", "exponential_histogram"])), pc.is_valid(delta))
    expected = pc.if_else(delta, "delta", "cumulative")
    temp_bad = pc.and_(temp_checked, pc.not_equal(pc.fill_null(temporality, "unspecified"), expected))
    temp_checked = pc.fill_null(temp_checked, False).to_numpy(zero_copy_only=False)
    temp_bad = pc.fill_null(temp_bad, False).to_numpy(zero_copy_only=False)

    # ---- resource keys, standard metrics seen, subscriptions (per instance, distinct)
    res, roff, rkeys, _ = _map_parts(t.column("resource"))
    res_keys: dict[int, set[str]] = {}
    if len(rkeys):
        # (pc.list_parent_indices aborts on a map array in pyarrow 26: the parents from the offsets)
        parent = np.repeat(np.arange(len(res), dtype=np.int64), np.diff(roff))
        kcode, knames = _codes(rkeys)
        kp = np.unique(inst[parent] * (len(knames) + 1) + kcode)
        for p in kp.tolist():
            res_keys.setdefault(p // (len(knames) + 1), set()).add(knames[p % (len(knames) + 1)])
    im = np.unique(inst * width + metric)
    kinds: dict[int, list[Any]] = {}  # [producer, consumer, standard metric names]
    for p in im.tolist():
        i, m = divmod(p, width)
        k = kinds.setdefault(i, [False, False, []])
        k[0] |= bool(producer_m[m])
        k[1] |= bool(consumer_m[m])
        if standard_m[m]:
            k[2].append(metric_names[m])
    isub = np.unique(inst * (len(sub_values) + 1) + sub_code)
    subscriptions: dict[int, list[list[str | None]]] = {}
    for p in isub.tolist():
        i, s = divmod(p, len(sub_values) + 1)
        if sub_values[s] is not None:
            subscriptions.setdefault(i, []).append(sub_values[s])

    # ---- series: per push (:data:`PUSH_KEY`) and per series (metric, attributes, resource)
    attrs = _map_codes(t.column("attributes"))
    rcode = _map_codes(res)
    push_c = _combine(*(_codes(t.column(c))[0] for c in PUSH_KEY[1:]))
    cum = pc.equal(temporality, "cumulative")
    s = pa.table(
        {
            "i": inst,
            "m": metric,
            "a": attrs,
            "r": rcode,
            "push": push_c,
            "start": t.column("start_time_unix_nano"),
            "cum": cum,
        }
    )
    per_push = s.group_by(["i", "push", "m", "a", "r"], use_threads=False).aggregate(
        [([], "count_all"), ("start", "min"), ("start", "max"), ("cum", "max")]
    )
    per_push = per_push.append_column("dup", pc.cast(pc.greater(per_push["count_all"], 1), pa.int64()))
    per_series = per_push.group_by(["i", "m", "a", "r"], use_threads=False).aggregate(
        [([], "count_all"), ("dup", "sum"), ("cum_max", "max"), ("start_min", "min"), ("start_max", "max")]
    )
    si = per_series["i"].to_numpy()
    sm = per_series["m"].to_numpy()
    s_cum = pc.fill_null(per_series["cum_max_max"], False).to_numpy(zero_copy_only=False)
    moved = pc.fill_null(pc.not_equal(per_series["start_min_min"], per_series["start_max_max"]), False)
    s_moved = s_cum & moved.to_numpy(zero_copy_only=False)
    s_dups = per_series["dup_sum"].to_numpy()

    counts = {
        "points": _bincount(inst, n_inst),
        "naming_bad": _bincount(inst, n_inst, naming),
        "subscribed_checked": _bincount(inst, n_inst, sub_checked),
        "subscribed_bad": _bincount(inst, n_inst, sub_bad),
        "temporality_checked": _bincount(inst, n_inst, temp_checked),
        "temporality_bad": _bincount(inst, n_inst, temp_bad),
        "series_in_pushes": _bincount(si, n_inst, per_series["count_all"].to_numpy()),
        "duplicate_series": _bincount(si, n_inst, s_dups),
        "cumulative_series": _bincount(si, n_inst, s_cum),
        "start_moved": _bincount(si, n_inst, s_moved),
    }
    lists = {
        "naming_bad_names": _first_names(inst, metric, naming, metric_names),
        "subscribed_bad_names": _first_names(inst, metric, sub_bad, metric_names),
        "temporality_bad_names": _first_names(inst, metric, temp_bad, metric_names),
        "duplicate_names": _first_names(si, sm, s_dups > 0, metric_names),
        "start_moved_names": _first_names(si, sm, s_moved, metric_names),
    }
    out: dict[str, list[Any]] = {name: arr.tolist() for name, arr in counts.items()}
    for name, d in lists.items():
        out[name] = [d.get(i, []) for i in range(n_inst)]
    out["is_producer"] = [kinds.get(i, [False])[0] for i in range(n_inst)]
    out["is_consumer"] = [kinds.get(i, [False, False])[1] for i in range(n_inst)]
    out["resource_keys"] = [sorted(res_keys.get(i, ())) for i in range(n_inst)]
    out["standard_seen"] = [sorted(kinds[i][2]) if i in kinds else [] for i in range(n_inst)]
    out["subscriptions"] = [subscriptions.get(i, []) for i in range(n_inst)]
    return out


_COUNT_FIELDS = (
    "points",
    "naming_bad",
    "subscribed_checked",
    "subscribed_bad",
    "temporality_checked",
    "temporality_bad",
    "series_in_pushes",
    "duplicate_series",
    "cumulative_series",
    "start_moved",
)
_LIST_FIELDS = (
    "naming_bad_names",
    "subscribed_bad_names",
    "temporality_bad_names",
    "duplicate_names",
    "start_moved_names",
    "resource_keys",
    "standard_seen",
    "subscriptions",
)


def _subscription_codes(col: pa.ListArray | pa.ChunkedArray) -> tuple[np.ndarray, list[list[str | None] | None]]:
    """Dense codes of a ``list<string>`` column (equal lists, equal codes; null its own) and the lists."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    n = len(col)
    if n == 0:
        return np.zeros(0, np.int64), []
    # a list's elements joined by \x01 (a null element as \x02): one string per row to encode
    joined = pc.binary_join(_fill_list(col), "\x01")
    joined = pc.if_else(col.is_valid(), joined, pa.scalar(None, pa.string()))
    code, _ = _codes(joined)
    values: list[list[str | None] | None] = [None] * (int(code.max()) + 1)
    first = np.unique(code, return_index=True)[1]
    for idx in first.tolist():
        values[code[idx]] = col[idx].as_py()
    return code, values


def _fill_list(col: pa.ListArray) -> pa.ListArray:
    """``col`` with null list elements replaced by a marker (binary_join skips nothing then)."""
    flat = pc.fill_null(col.flatten(), "\x02")
    offsets = col.offsets
    return pa.ListArray.from_arrays(pc.subtract(offsets, offsets[0]), flat)


def _insight_aggregates(
    t: pa.Table,
    inst: np.ndarray,
    inst_names: list[str | None],
    metric: np.ndarray,
    metric_names: list[str | None],
    rules: Rules,
) -> pa.Table | None:
    """``agg`` rows: per instance, insight metric and node (latency metrics: the node_id attribute)."""
    interest = np.array(
        [m in rules.interest or (m is not None and m.endswith(rules.latency_suffix)) for m in metric_names], bool
    )
    is_lat = np.array([m is not None and m.endswith(rules.latency_suffix) for m in metric_names], bool)
    rows_mask = interest[metric]
    if not rows_mask.any():
        return None
    idx = np.nonzero(rows_mask)[0]
    sub = t.take(pa.array(idx))
    attrs = sub.column("attributes")
    node = pc.coalesce(pc.map_lookup(attrs, "node_id", "first"), pc.map_lookup(attrs, "node.id", "first"))
    node = pc.if_else(pa.array(is_lat[metric[idx]]), node, pa.scalar(None, pa.string()))
    v = pc.coalesce(sub.column("value"), pc.cast(sub.column("value_int"), pa.float64()))
    tt = sub.column("time_unix_nano")
    node_c, node_names = _codes(node)
    g = _combine(inst[idx], metric[idx], node_c)
    # order rows by (group, time): the first and last value by time are then at each group's ends
    t_np = pc.fill_null(tt, np.iinfo(np.int64).max).to_numpy(zero_copy_only=False)
    order = np.lexsort((t_np, g))
    gs = g[order]
    starts = np.r_[0, np.nonzero(np.diff(gs))[0] + 1]
    ends = np.r_[starts[1:], len(gs)] - 1
    v_np = v.to_numpy(zero_copy_only=False).astype(float)  # nulls → nan
    v_sorted = v_np[order]
    v_valid = pc.is_valid(v).to_numpy(zero_copy_only=False)[order]
    tbl = (
        pa.table({"g": g, "v": v, "t": tt, "temporality": sub.column("temporality")})
        .group_by("g", use_threads=False)
        .aggregate(
            [
                ("v", "mean"),
                ("v", "sum"),
                ("v", "max"),
                ("t", "min"),
                ("t", "max"),
                ([], "count_all"),
                ("temporality", "first"),
            ]
        )
    )
    tbl = tbl.sort_by("g")
    gi = gs[starts]
    first_i = order[starts]
    n_groups = len(gi)
    rows: dict[str, list[Any]] = {f.name: [None] * n_groups for f in OUT_SCHEMA}
    rows["row_kind"] = ["agg"] * n_groups
    rows["client_instance_id"] = [inst_names[i] for i in inst[idx][first_i].tolist()]
    rows["metric"] = [metric_names[m] for m in metric[idx][first_i].tolist()]
    rows["node"] = [node_names[c] for c in node_c[first_i].tolist()]
    for name, col in (
        ("avg", "v_mean"),
        ("sum", "v_sum"),
        ("max", "v_max"),
        ("t0", "t_min"),
        ("t1", "t_max"),
        ("n", "count_all"),
        ("temporality", "temporality_first"),
    ):
        rows[name] = tbl[col].to_pylist()
    rows["first"] = [float(v_sorted[s]) if v_valid[s] else None for s in starts.tolist()]
    rows["last"] = [float(v_sorted[e]) if v_valid[e] else None for e in ends.tolist()]
    return pa.Table.from_pydict(rows, schema=OUT_SCHEMA)
