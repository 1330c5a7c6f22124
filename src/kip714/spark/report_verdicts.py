"""The verdicts of ``kip714 report``, in plain Python over the rows its Spark job collected (one per client
instance, and per instance, insight metric and node): the conformance table (per client software and check,
:data:`~kip714.spark.report_checks.CHECKS`) and the insights (per flagged instance,
:data:`~kip714.spark.report_checks.INSIGHTS`), with the thresholds they apply (:class:`ReportOptions`).
:mod:`kip714.spark.report` runs the job and builds the tables."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .report_checks import (
    CHECKS,
    INSIGHTS,
    REQUIRED_METRICS_NOTE,
    STANDARD_CONSUMER_METRICS,
    STANDARD_PRODUCER_METRICS,
    STANDARD_RESOURCE_LABELS,
    STREAMS_CLIENT_EXPECTED,
    STREAMS_THREAD_EXPECTED,
)
from .report_checks import KAFKA_METRIC_PREFIX as _NS
from .report_streams import STREAMS_METRICS as _STREAMS
from .report_streams import streams_insights, streams_kind

__all__ = ["INSIGHT_METRICS", "NODE_LATENCY", "SOFTWARE", "ReportOptions", "Row", "conformance_rows", "insight_rows"]

_CONSUMER_LABELS = ("group_id", "group_instance_id", "group_member_id")
_PRODUCER_LABELS = ("transactional_id",)
#: Spellings that stand for a standard label but are not it (librdkafka sends ``member_id``).
_LABEL_VARIANTS = tuple(
    sorted(
        {
            v
            for lab in STANDARD_RESOURCE_LABELS
            for v in (lab.replace("_", "."), lab.replace("_", "-"), lab.replace("_", ""))
        }
        | {"member_id", "member.id", "rack", "instance_id"}
    )
)
#: The suffix of the per-broker request latency metrics (``...node.request.latency.avg``, one per node).
NODE_LATENCY = ".node.request.latency.avg"
_THROTTLE = {
    _NS + "producer.produce.throttle.time.avg": "producer_byte_rate quota",
    _NS + "consumer.fetch.manager.fetch.throttle.time.avg": "consumer_byte_rate quota",
}
_RPR = _NS + "producer.records.per.request.avg"
_SEND, _REQ = _NS + "producer.record.send.total", _NS + "producer.request.total"
_ERR, _RETRY = _NS + "producer.record.error.total", _NS + "producer.record.retry.total"
_BATCH = _NS + "producer.batch.size.avg"
_CONN = (_NS + "producer.connection.creation.total", _NS + "consumer.connection.creation.total")
_LAG, _IDLE = _NS + "consumer.fetch.manager.records.lag.max", _NS + "consumer.poll.idle.ratio.avg"
#: The metrics the insights read (the workers aggregate them per instance and node).
INSIGHT_METRICS = tuple(_THROTTLE) + (_RPR, _SEND, _REQ, _ERR, _RETRY, _BATCH) + _CONN + (_LAG, _IDLE) + _STREAMS
#: The columns that name a client software (KIP-511).
SOFTWARE = ("client_software_name", "client_software_version")
#: A row as the workers hand it back and the tables take it (column name -> value).
Row = dict[str, Any]


@dataclass(frozen=True)
class ReportOptions:
    """Thresholds of the report (every one a ``kip714 report`` option, same name with dashes).

    - ``interval_tolerance`` (0.1): a push is *early* when it comes less than ``(1 - tolerance) ×
      PushIntervalMs`` after the previous accepted push of the same subscription (network jitter).
    - ``gap_factor`` (2.0): a push more than ``gap_factor × PushIntervalMs`` after the previous one is a gap.
    - ``slow_node_ratio`` (3.0) and ``slow_node_min_ms`` (10.0): a node whose average request latency is at
      least this many times the median over the client's nodes, and at least this many ms.
    - ``throttle_ms`` (5.0): average throttle time (ms) above which a client counts as throttled.
    - ``min_records_per_request`` (2.0): fewer records per produce request means tiny batches (``linger.ms``).
    - ``max_error_rate`` (0.01) / ``max_retry_rate`` (0.05): record errors / retries per record sent.
    - ``max_connections_per_min`` (1.0): connections opened per minute after the first push.
    - ``max_consumer_lag`` (10000): records of lag a growing lag must pass to be flagged.
    - ``poll_idle_ratio`` (0.99): average poll idle ratio at or above which a consumer is flagged.
    - ``streams_blocked_process_ratio`` (0.9): a RUNNING Kafka Streams thread whose last poll rate is 0 and
      whose process ratio is at least this is stuck in a processor.
    - ``examples`` (3): example instance ids per check.
    """

    interval_tolerance: float = 0.1
    gap_factor: float = 2.0
    slow_node_ratio: float = 3.0
    slow_node_min_ms: float = 10.0
    throttle_ms: float = 5.0
    min_records_per_request: float = 2.0
    max_error_rate: float = 0.01
    max_retry_rate: float = 0.05
    max_connections_per_min: float = 1.0
    max_consumer_lag: float = 10000.0
    poll_idle_ratio: float = 0.99
    streams_blocked_process_ratio: float = 0.9
    examples: int = 3


def _label_problems(r: Row) -> list[str]:
    keys = r["resource_keys"] or []
    is_p, is_c = bool(r["is_producer"]), bool(r["is_consumer"])
    wrong = (
        [k for k in keys if k in _CONSUMER_LABELS]
        if is_p and not is_c
        else [k for k in keys if k in _PRODUCER_LABELS]
        if is_c and not is_p
        else []
    )
    out = [f"'{k}' is not a standard label name" for k in keys if k in _LABEL_VARIANTS]
    out += [f"'{k}' on the wrong client type" for k in wrong]
    if ("group_instance_id" in keys or "group_member_id" in keys) and "group_id" not in keys:
        out.append("group_instance_id/group_member_id without group_id")
    return out


def conformance_rows(inst: dict[str, Row], opts: ReportOptions) -> list[Row]:
    """One row per software name, version and check, from the instance rows."""
    by_sw: dict[tuple[str, str], list[Row]] = {}
    for iid in sorted(inst, key=lambda i: (i is None, i or "")):  # a push without an id: its own, last
        r = inst[iid]
        by_sw.setdefault((r["client_software_name"], r["client_software_version"]), []).append(r)
    k = opts.examples
    out: list[Row] = []
    for sw, rs in sorted(by_sw.items()):

        def total(col: str, rs: list[Row] = rs) -> int:
            n: int = sum(r[col] or 0 for r in rs)
            return n

        def ex(cond: Callable[[Row], bool], rs: list[Row] = rs) -> list[str]:
            return [r["client_instance_id"] for r in rs if cond(r) and r["client_instance_id"] is not None][:k]

        def joined(lists: Iterable[Iterable[str | None] | None]) -> str:
            # the first five distinct values of the lists, in instance order
            return ", ".join(list(dict.fromkeys(x for xs in lists for x in (xs or ()) if x is not None))[:5])

        def names(col: str, rs: list[Row] = rs) -> str:
            return joined(r[col] for r in rs)

        def departed(r: Row) -> bool:  # left without a terminating push
            return bool(not r["terminated"] and r["left"])

        def failing(count_col: str) -> list[str]:
            return ex(lambda row: (row[count_col] or 0) > 0)

        is_p = [r for r in rs if r["is_producer"]]
        is_c = [r for r in rs if r["is_consumer"]]
        streams_client = [r for r in rs if streams_kind(r) == "streams-client"]
        streams_thread = [r for r in rs if streams_kind(r) == "streams-thread"]
        labels = {id(r): _label_problems(r) for r in rs}
        label_checked = [r for r in rs if r["is_producer"] or r["is_consumer"] or r["resource_keys"]]
        label_bad = [r for r in label_checked if labels[id(r)]]

        def mislabelled(row: Row, labels: dict[int, list[str]] = labels) -> bool:
            return bool(labels[id(row)])

        left = [r for r in rs if r["terminated"] or r["left"]]
        term_bad = [r for r in rs if departed(r)]
        running = sum(1 for r in rs if not r["terminated"] and not r["left"])
        with_id = [r for r in rs if r["client_instance_id"] is not None]
        shared = [r for r in with_id if (r["clients"] or 0) > 1]  # several clients under one instance id
        cov_checked, cov_bad, cov_ex, cov_why = 0, 0, [], []
        for group, standard, label in (
            (is_p, STANDARD_PRODUCER_METRICS, "producer"),
            (is_c, STANDARD_CONSUMER_METRICS, "consumer"),
            (streams_client, STREAMS_CLIENT_EXPECTED, "Kafka Streams client"),
            (streams_thread, STREAMS_THREAD_EXPECTED, "Kafka Streams thread"),
        ):
            if not group:
                continue
            subs = list(dict.fromkeys(tuple(s) for r in group for s in (r["subscriptions"] or ())))
            seen = {m for r in group for m in (r["standard_seen"] or ())}
            subs = subs or [("*",)]
            wanted = [
                m for m in standard if any(p is not None and (p == "*" or m.startswith(p)) for s in subs for p in s)
            ]
            missing = [m for m in wanted if m not in seen]
            cov_checked += len(wanted)
            cov_bad += len(missing)
            if missing:
                cov_ex += [r["client_instance_id"] for r in group if r["client_instance_id"] is not None][:k]
                cov_why.append(f"{label} missing: " + ", ".join(missing))
        cov_why.append(REQUIRED_METRICS_NOTE)
        gaps = total("gaps")
        earliest = min((r["earliest_gap_ms"] for r in rs if r["earliest_gap_ms"] is not None), default=None)
        gap_note = f"gaps (later than {opts.gap_factor}× the interval): {gaps}" + (
            f"; earliest push {earliest} ms after the previous" if earliest is not None else ""
        )
        closes_known = any(r["closes_known"] for r in rs)
        term_note = (
            f"{running} instance(s) without a terminating push still running"
            if closes_known
            else "the recording has no connection-closed rows: running and departed clients cannot be told apart"
        )
        comp_why = names("compression_bad_types")
        err_all = total("error_responses")
        rows = {
            "payload_decodes": (
                total("decode_failed"),
                total("payload_pushes"),
                failing("decode_failed"),
                next((r["decode_error"] for r in rs if r["decode_error"] is not None), None),
            ),
            "metric_naming": (total("naming_bad"), total("points"), failing("naming_bad"), names("naming_bad_names")),
            "subscribed_only": (
                total("subscribed_bad"),
                total("subscribed_checked"),
                failing("subscribed_bad"),
                names("subscribed_bad_names"),
            ),
            "temporality": (
                total("temporality_bad"),
                total("temporality_checked"),
                failing("temporality_bad"),
                names("temporality_bad_names"),
            ),
            "start_time_stable": (
                total("start_moved"),
                total("cumulative_series"),
                failing("start_moved"),
                names("start_moved_names"),
            ),
            "no_duplicate_series": (
                total("duplicate_series"),
                total("series_in_pushes"),
                failing("duplicate_series"),
                names("duplicate_names"),
            ),
            "standard_coverage": (cov_bad, cov_checked, list(dict.fromkeys(cov_ex))[:k], "; ".join(cov_why)),
            "resource_labels": (
                len(label_bad),
                len(label_checked),
                ex(mislabelled),
                joined(labels[id(r)] for r in rs),
            ),
            "push_interval": (total("early_pushes"), total("interval_checked"), failing("early_pushes"), gap_note),
            "compression_accepted": (
                total("compression_bad"),
                total("compression_checked"),
                failing("compression_bad"),
                f"compression types used: {comp_why}" if comp_why else None,
            ),
            "terminating_push": (len(term_bad), len(left), ex(departed), term_note),
            "one_client_per_instance": (
                len(shared),
                len(with_id),
                ex(lambda r: (r["clients"] or 0) > 1),
                joined(r["client_names"] for r in shared) or None,
            ),
            "error_responses": (
                total("error_faults"),
                total("pushes"),
                failing("error_faults"),
                f"error responses: {err_all} (codes {names('error_codes')})" if err_all else None,
            ),
        }
        for order, (check, (failures, checked, examples, detail)) in enumerate(rows.items()):
            _, rule, unit = CHECKS[check]
            status = "n/a" if checked == 0 else "fail" if failures > 0 else "pass"
            out.append(
                {
                    "client_software_name": sw[0],
                    "client_software_version": sw[1],
                    "check": check,
                    "status": status,
                    "failures": failures,
                    "checked": checked,
                    "unit": unit,
                    "examples": examples,
                    "rule": rule,
                    "detail": detail,
                    "_order": order,
                }
            )
    return out


def _number(x: float, digits: int) -> str:
    """A number as Spark's ``format_number`` writes it (thousands separators)."""
    return f"{x:,.{digits}f}"


def insight_rows(agg: list[Row], inst: dict[str, Row], opts: ReportOptions) -> list[Row]:
    """One row per flagged client instance and finding, from the workers' ``agg`` rows (per instance,
    insight metric and node: avg, sum, max, first and last value by time, time span, temporality)."""
    order = {name: i for i, name in enumerate(INSIGHTS)}
    found: list[Row] = []

    def out(
        iid: str,
        insight: str,
        metric: str,
        value: float,
        threshold: float,
        setting: str | None,
        detail: str | None = None,
    ) -> None:
        r = inst.get(iid, {})
        found.append(
            {
                "client_instance_id": iid,
                "client_id": r.get("client_id"),
                **{c: r.get(c) for c in SOFTWARE},
                "insight": insight,
                "metric": metric,
                "value": float(value),
                "threshold": float(threshold),
                "setting": setting,
                "detail": detail,
                "_order": order[insight],
            }
        )

    def delta(a: Row) -> bool:
        return bool(a["temporality"] == "delta")

    for a in agg:  # total over the run (delta: the sum of the deltas; cumulative: the last value)
        s, f, last = a["sum"], a["first"], a["last"]
        a["total"] = s if delta(a) else last
        a["after_first"] = (
            (None if s is None or f is None else s - f)
            if delta(a)
            else (None if last is None or f is None else last - f)
        )
    # slow_node: a node far above the median over the client's nodes
    lat: dict[tuple[str, str], list[Row]] = {}
    for a in agg:
        if a["metric"] is not None and a["metric"].endswith(NODE_LATENCY) and a["node"] is not None:
            lat.setdefault((a["client_instance_id"], a["metric"]), []).append(a)
    for (iid, metric), rs in lat.items():
        avgs = sorted(r["avg"] for r in rs if r["avg"] is not None)
        median = avgs[(len(avgs) - 1) // 2] if avgs else None  # the lower median (percentile 0.5)
        limit = (
            max(median * opts.slow_node_ratio, opts.slow_node_min_ms) if median is not None else opts.slow_node_min_ms
        )
        for r in rs:
            if len(rs) >= 2 and r["avg"] is not None and r["avg"] >= limit:
                out(
                    iid,
                    "slow_node",
                    f"{metric}{{node={r['node']}}}",
                    r["avg"],
                    limit,
                    None,
                    f"median over the client's {len(rs)} nodes: {_number(median, 2)} ms"
                    if median is not None
                    else None,
                )
    # throttled
    for a in agg:
        if a["metric"] in _THROTTLE and a["avg"] is not None and a["avg"] > opts.throttle_ms:
            out(
                a["client_instance_id"],
                "throttled",
                a["metric"],
                a["avg"],
                opts.throttle_ms,
                _THROTTLE[a["metric"]],
                f"max {_number(a['max'], 1)} ms" if a["max"] is not None else None,
            )
    # per client: the metrics without a node
    per: dict[str, dict[str, Row]] = {}
    for a in agg:
        if a["node"] is None:
            per.setdefault(a["client_instance_id"], {})[a["metric"]] = a

    def value(d: dict[str, Row], metric: str, col: str) -> float | None:
        a = d.get(metric)
        v: float | None = None if a is None else a[col]
        return v

    for iid, d in per.items():
        # small_batches: records per request (the metric, or record.send.total / request.total)
        rpr_avg = value(d, _RPR, "avg")
        send, req = value(d, _SEND, "total"), value(d, _REQ, "total")
        ratio = send / req if send is not None and req is not None and req > 0 else None
        rpr = rpr_avg if rpr_avg is not None else ratio
        if rpr is not None and rpr < opts.min_records_per_request:
            batch = value(d, _BATCH, "avg")
            out(
                iid,
                "small_batches",
                _RPR if rpr_avg is not None else f"{_SEND} / {_REQ}",
                rpr,
                opts.min_records_per_request,
                "linger.ms",
                f"batch.size.avg {_number(batch, 0)} bytes" if batch is not None else None,
            )
        # retries_errors
        if send is not None and send > 0:
            for metric, limit, setting in (
                (_ERR, opts.max_error_rate, "delivery.timeout.ms"),
                (_RETRY, opts.max_retry_rate, "retries"),
            ):
                n = value(d, metric, "total")
                if n is not None and n / send > limit:
                    out(iid, "retries_errors", f"{metric} / {_SEND}", n / send, limit, setting)
        # connection_churn: connections per minute after the first push
        conn = [d[m] for m in _CONN if m in d]
        after = max((a["after_first"] for a in conn if a["after_first"] is not None), default=None)
        if after is not None:
            spans = [a["t1"] - a["t0"] for a in conn if a["t1"] is not None and a["t0"] is not None]
            minutes = max(max(spans) / 60e9, 1.0) if spans else 1.0
            churn = after / minutes
            if churn > opts.max_connections_per_min:
                out(
                    iid,
                    "connection_churn",
                    f"{max(a['metric'] for a in conn)} per minute",
                    churn,
                    opts.max_connections_per_min,
                    "connections.max.idle.ms",
                )
        # consumer_lag: growing past a bound, or poll idle nearly always
        lag_first, lag_last = value(d, _LAG, "first"), value(d, _LAG, "last")
        if lag_last is not None and lag_first is not None and lag_last > opts.max_consumer_lag and lag_last > lag_first:
            out(
                iid,
                "consumer_lag",
                _LAG,
                lag_last,
                opts.max_consumer_lag,
                "max.poll.records",
                f"from {_number(lag_first, 0)}",
            )
        idle = value(d, _IDLE, "avg")
        if idle is not None and idle >= opts.poll_idle_ratio:
            out(iid, "consumer_lag", _IDLE, idle, opts.poll_idle_ratio, "fetch.min.bytes")
        streams_insights(iid, d, inst.get(iid, {}), opts.streams_blocked_process_ratio, out)
    return found
