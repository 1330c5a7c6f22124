"""``kip714 report``: what a fleet's telemetry says, computed on Spark.

Two views over a recording (``kip714 serve --record``, ``kip714 proxy``, the simulator) or over the points
table ``kip714 pipeline`` wrote:

**Conformance, per client software name and version** (KIP-511's ClientSoftwareName/Version). Each check
cites the KIP-714 rule it tests (:data:`CHECKS`, from :mod:`kip714.spark.report_checks`) and counts failures in
its own unit, with example
client instance ids. Checks that need what the endpoint told the client (subscription, temporality,
accepted compression) read it from the recording's subscription columns; on recordings made before they
existed those checks are ``n/a``. A check is ``n/a`` when nothing it applies to was seen, ``fail`` when
anything failed, ``pass`` otherwise.

**Insights, per client instance**: the operator's view (:data:`INSIGHTS`): a broker node much slower
than the client's others, throttling, tiny producer batches, record errors and retries, connection churn,
consumer lag and idle polls — each with the metric, the value, the threshold it crossed and, where the
metric points at one, the client setting to look at. Thresholds are :class:`ReportOptions` fields.

The points are never a Spark table here: the recording is partitioned by client instance and each Python
worker decodes its pushes and reduces them to one row per instance (push intervals, compression, error
answers, termination, decode failures, naming, subscription, temporality, series) and per insight metric
(:mod:`kip714.spark.report_points`, pyarrow and numpy). Those rows — one per client instance, thousands
rather than millions — are the only thing collected; the driver derives the conformance, insight and
client tables from them in plain Python, so a report is one Spark job (plus one over the connection-closed
rows). A ``kip714 pipeline`` points table (with its ``errors/``) is reduced by the same workers. The
per-minute and per-error-code tables stay lazy Spark queries over the pushes.

The KIP's standard producer and consumer metrics are listed in :data:`STANDARD_PRODUCER_METRICS` and
:data:`STANDARD_CONSUMER_METRICS` (from the KIP-714 text). The KIP marks a subset of them as *required*
by setting them in bold; the KIP text kip714 was built from is plain text where that marking is lost, so
the required set cannot be established here (:data:`REQUIRED_METRICS` is ``None``) and
``standard_coverage`` checks the standard set (those the subscription asked for) instead of guessing.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from .._enums import COMPRESSION_NAMES, ErrorCode
from .._extras import require
from ..sinks.recorder import CLOSED_DIR, closed_schema, record_schema
from .report_checks import (
    CHECKS,
    INSIGHTS,
    REQUIRED_METRICS,
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

if TYPE_CHECKING:  # pyspark is the spark extra, pyarrow and the workers' module are imported where used
    import argparse

    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from .decode import _ArrowMapper
    from .report_points import Rules

__all__ = [
    "CHECKS",
    "INSIGHTS",
    "REQUIRED_METRICS",
    "REQUIRED_METRICS_NOTE",
    "Report",
    "ReportOptions",
    "STANDARD_CONSUMER_METRICS",
    "STANDARD_PRODUCER_METRICS",
    "STANDARD_RESOURCE_LABELS",
    "report",
]

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
#: A telemetry metric name: lower-case dot-separated segments, at least two (a namespace and a name).
NAME_PATTERN = r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$"

_LAT = ".node.request.latency.avg"
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
_INTEREST = tuple(_THROTTLE) + (_RPR, _SEND, _REQ, _ERR, _RETRY, _BATCH) + _CONN + (_LAG, _IDLE) + _STREAMS
_UNKNOWN_SUB = int(ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
_THROTTLED = int(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
_SW = ("client_software_name", "client_software_version")
#: A row as the workers hand it back and the tables take it (column name -> value).
_Row = dict[str, Any]


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


class Report(NamedTuple):
    """The report's tables (Spark DataFrames).

    - ``conformance``: one row per software name, version and check: ``check``, ``status``, ``failures``,
      ``checked`` (counts in the check's unit), ``examples`` (instance ids), ``rule``, ``detail``.
    - ``insights``: one row per flagged client and finding: ``client_instance_id``, ``client_id``, software,
      ``insight``, ``metric``, ``value``, ``threshold``, ``setting``, ``detail``.
    - ``clients``: one row per client instance (kind, pushes, points, first/last push, terminating, left).
    - ``errors``: error responses by software and code.
    - ``timeline``: pushes per minute and software.
    """

    conformance: DataFrame
    insights: DataFrame
    clients: DataFrame
    errors: DataFrame
    timeline: DataFrame
    options: ReportOptions
    cached: tuple[DataFrame, ...] = ()

    def unpersist(self) -> None:
        """Release what the report keeps cached in Spark: nothing since the report became one job (its
        tables are small local DataFrames); kept so that code calling it keeps working."""
        for df in self.cached:
            df.unpersist()

    def write(self, out: str | pathlib.Path, *, summary: bool = True) -> dict[str, Any]:
        """Write ``conformance.json``, ``insights.json``, ``tables/*.parquet`` and ``report.html`` under
        ``out``; returns the collected results (``conformance``, ``insights``, ``clients``, ``errors``,
        ``timeline`` as lists of dicts, ``summary`` text)."""
        from . import report_html

        return report_html.write_report(self, pathlib.Path(out), summary=summary)


def _schema(*fields: str) -> pa.Schema:
    import pyarrow as pa

    types = {
        "s": pa.string(),
        "i": pa.int64(),
        "d": pa.float64(),
        "b": pa.bool_(),
        "o": pa.int32(),
        "l": pa.list_(pa.string()),
    }
    return pa.schema([(name, types[t]) for name, t in (f.split(":") for f in fields)])


_CONFORMANCE_SCHEMA = _schema(
    "client_software_name:s",
    "client_software_version:s",
    "check:s",
    "status:s",
    "failures:i",
    "checked:i",
    "unit:s",
    "examples:l",
    "rule:s",
    "detail:s",
    "_order:o",
)
_INSIGHT_SCHEMA = _schema(
    "client_instance_id:s",
    "client_id:s",
    "client_software_name:s",
    "client_software_version:s",
    "insight:s",
    "metric:s",
    "value:d",
    "threshold:d",
    "setting:s",
    "detail:s",
    "_order:o",
)
_CLIENT_SCHEMA = _schema(
    "client_instance_id:s",
    "client_id:s",
    "client_software_name:s",
    "client_software_version:s",
    "client_source_address:s",
    "kind:s",
    "pushes:i",
    "points:i",
    "first_push_ms:i",
    "last_push_ms:i",
    "terminated:b",
    "left:b",
    "error_responses:i",
    "early_pushes:i",
    "gaps:i",
)


# ------------------------------------------------------------------------------------------ inputs


def _spark_schema(arrow_schema: pa.Schema) -> StructType:
    from .decode import _to_spark_schema

    return _to_spark_schema(arrow_schema)


def _with_columns(df: DataFrame, arrow_schema: pa.Schema) -> DataFrame:
    """``df`` with every column of ``arrow_schema`` (missing ones null, of the schema's type)."""
    from pyspark.sql import functions as F

    spark_schema = _spark_schema(arrow_schema)
    for field in spark_schema.fields:
        if field.name not in df.columns:
            df = df.withColumn(field.name, F.lit(None).cast(field.dataType))
    return df


def _rules(opts: ReportOptions | None = None) -> Rules:
    from .report_points import Rules

    opts = opts or ReportOptions()
    std_all = STANDARD_PRODUCER_METRICS + STANDARD_CONSUMER_METRICS
    return Rules(
        NAME_PATTERN,
        {m[len(_NS) :] for m in std_all},
        set(std_all) | set(STREAMS_CLIENT_EXPECTED) | set(STREAMS_THREAD_EXPECTED),
        set(_INTEREST),
        _LAT,
        _NS + "producer.",
        _NS + "consumer.",
        opts.interval_tolerance,
        opts.gap_factor,
    )


def _reduce(df: DataFrame, worker: _ArrowMapper) -> DataFrame:
    """The workers' rows (:data:`kip714.spark.report_points.OUT_SCHEMA`) of ``df`` (recording or points
    rows), partitioned by client instance and sorted so that each worker sees every row of an instance."""
    from .report_points import OUT_SCHEMA

    spark = df.sparkSession
    parts = max(2, spark.sparkContext.defaultParallelism)
    src = df.repartition(parts, "client_instance_id").sortWithinPartitions("client_instance_id")
    return src.mapInArrow(worker, _spark_schema(OUT_SCHEMA))


def _load(
    spark: SparkSession,
    source: str | os.PathLike[str] | DataFrame,
    closed: str | os.PathLike[str] | None,
    opts: ReportOptions,
) -> tuple[DataFrame, DataFrame, DataFrame | None]:
    """(pushes, the workers' rows, closed rows or None) of a recording or a points table. ``pushes`` (one
    row per push, lazy) feeds the per-minute and per-error-code tables."""
    from pyspark.sql import functions as F

    from .report_points import FACT_COLUMNS, PUSH_COLUMNS, points_worker, recording_worker

    rec_schema: pa.Schema = record_schema()

    def closed_spark_schema() -> StructType:
        return _spark_schema(closed_schema())

    closed_df = None
    path = None if hasattr(source, "schema") else str(source)
    local = pathlib.Path(path) if path is not None and "://" not in path else None
    if closed is not None:
        closed_df = spark.read.schema(closed_spark_schema()).parquet(str(closed))
    facts = [c for c in FACT_COLUMNS if c != "push_error_code"]
    if local is not None and (local / "points").is_dir():
        points = _with_columns(spark.read.parquet(str(local / "points")), rec_schema)
        if "push_error_code" not in points.columns:
            points = points.withColumn("push_error_code", F.col("error_code"))
        from .decode import points_schema

        wanted = [c for c in list(points_schema().names) + list(PUSH_COLUMNS) if c in points.columns]
        src = points.select(
            *dict.fromkeys(wanted + facts + ["push_error_code"]),
            F.lit(1).cast("long").alias("payload_bytes"),
            F.lit(None).cast("string").alias("decode_error"),
        )
        if (local / "errors").is_dir():  # the pushes that did not decode: their own rows, no points
            errors = _with_columns(spark.read.parquet(str(local / "errors")), rec_schema)
            if "push_error_code" not in errors.columns:
                errors = errors.withColumn("push_error_code", F.lit(None).cast("short"))
            src = src.unionByName(
                errors.select(
                    *facts,
                    "push_error_code",
                    F.length("payload").cast("long").alias("payload_bytes"),
                    F.col("error").alias("decode_error"),
                ),
                allowMissingColumns=True,
            )
        rows = _reduce(src, points_worker(_rules(opts)))
        pushes = src.select(*facts, "push_error_code").dropDuplicates(
            ["client_instance_id", "node_id", "received_at_ms"]
        )
        for name in ("closed", CLOSED_DIR):
            if closed_df is None and (local / name).is_dir():
                closed_df = spark.read.schema(closed_spark_schema()).parquet(str(local / name))
        return pushes, rows, closed_df
    if path is not None:
        from .decode import read_recording_df

        rec = read_recording_df(spark, path)  # the rolled files and the _open/ parts of a live recording
        if closed_df is None and (local is None or (local / CLOSED_DIR).is_dir()):
            try:
                closed_df = spark.read.schema(closed_spark_schema()).parquet(path.rstrip("/") + "/" + CLOSED_DIR)
            except Exception:  # no connection-closed rows recorded (older recording, remote path without them)
                closed_df = None
    else:
        rec = _with_columns(cast("DataFrame", source), rec_schema)  # it has a schema: a DataFrame
    rec = rec.withColumnRenamed("error_code", "push_error_code")
    rows = _reduce(
        rec.select(*dict.fromkeys(list(PUSH_COLUMNS) + list(FACT_COLUMNS)), "payload"), recording_worker(_rules(opts))
    )
    return rec.drop("payload"), rows, closed_df


# ------------------------------------------------------------------------------------------ the report


def report(
    source: str | os.PathLike[str] | DataFrame,
    spark: SparkSession | None = None,
    *,
    options: ReportOptions | None = None,
    master: str | None = None,
    closed: str | os.PathLike[str] | None = None,
) -> Report:
    """The conformance and insight tables of a recording (a path, or a DataFrame of recording rows) or of
    a ``kip714 pipeline`` output folder (``points/``, ``errors/``). ``closed``: a ``_closed`` folder to use
    instead of the recording's own. Returns a :class:`Report` of DataFrames; ``Report.write(dir)`` writes
    the JSON, Parquet and HTML files. ``spark``: a session (default :func:`kip714.spark.local_session`
    with ``master``).

    One Spark job does the work: the workers reduce every push and point to one row per client instance
    (and per insight metric); those rows — thousands, not millions — come back to the driver, which
    derives the conformance, insight and client tables from them in Python (a dozen small Spark jobs
    cost more than the rows they would aggregate). The per-minute and per-error-code tables stay lazy
    Spark queries over the pushes."""
    require("spark", "kip714.spark.report")
    from pyspark.sql import functions as F

    from .session import local_session

    opts = options or ReportOptions()
    if spark is None:
        spark = local_session(master, app_name="kip714-report")
    pushes, rows, closed_df = _load(spark, source, closed, opts)
    table = rows.toArrow()
    closes = _closes(closed_df)
    inst, agg = _split_rows(table, closes)
    pushes = pushes.withColumns({c: F.coalesce(F.col(c), F.lit("unknown")) for c in _SW})

    def frame(rows_: list[_Row], schema: pa.Schema) -> DataFrame:
        import pyarrow as pa

        return spark.createDataFrame(pa.Table.from_pylist(rows_, schema=schema))

    conformance = frame(_conformance(inst, opts), _CONFORMANCE_SCHEMA)
    insights = frame(_insights(agg, inst, opts), _INSIGHT_SCHEMA)
    clients = frame([_client_row(i) for i in inst.values()], _CLIENT_SCHEMA)
    error_names = F.create_map(*[x for e in ErrorCode for x in (F.lit(int(e)), F.lit(e.name))])
    errors_by_code = (
        pushes.where(F.col("push_error_code") != 0)
        .groupBy(*_SW, F.col("push_error_code").alias("error_code"))
        .count()
        .withColumn("error", F.coalesce(error_names[F.col("error_code")], F.col("error_code").cast("string")))
    )
    timeline = pushes.groupBy(*_SW, (F.floor(F.col("received_at_ms") / 60000) * 60000).alias("minute_ms")).agg(
        F.count(F.lit(1)).alias("pushes"), F.sum(F.when(F.col("push_error_code") != 0, 1).otherwise(0)).alias("errors")
    )
    return Report(conformance, insights, clients, errors_by_code, timeline, opts)


def _closes(closed_df: DataFrame | None) -> dict[str, int] | None:
    """Per client instance, when its last connection closed (closes by the endpoint itself do not count:
    the client did not leave); None when the recording has no connection-closed rows."""
    if closed_df is None:
        return None
    from pyspark.sql import functions as F

    t = (
        closed_df.where(F.coalesce(F.col("reason"), F.lit("client")) != "endpoint")
        .groupBy("client_instance_id")
        .agg(F.max("closed_at_ms").alias("closed_at_ms"))
    ).toArrow()
    return dict(zip(t.column("client_instance_id").to_pylist(), t.column("closed_at_ms").to_pylist()))


def _split_rows(table: pa.Table, closes: dict[str, int] | None) -> tuple[dict[str, _Row], list[_Row]]:
    """The workers' rows as (instance id → instance row, with ``left`` and ``closes_known``; agg rows)."""
    import pyarrow.compute as pc

    from .report_points import AGG_COLUMNS, INST_COLUMNS

    kind = table.column("row_kind")
    inst_t = table.filter(pc.equal(kind, "inst")).select(["client_instance_id", *INST_COLUMNS])
    agg = table.filter(pc.equal(kind, "agg")).select(["client_instance_id", *AGG_COLUMNS]).to_pylist()
    inst: dict[str, _Row] = {}
    for r in inst_t.to_pylist():
        closed_at = closes.get(r["client_instance_id"]) if closes is not None else None
        r["left"] = closed_at is not None and r["last_push_ms"] is not None and closed_at >= r["last_push_ms"]
        r["closes_known"] = closes is not None
        inst[r["client_instance_id"]] = r
    return inst, agg


def _label_problems(r: _Row) -> list[str]:
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


def _conformance(inst: dict[str, _Row], opts: ReportOptions) -> list[_Row]:
    """One row per software name, version and check, from the instance rows."""
    by_sw: dict[tuple[str, str], list[_Row]] = {}
    for iid in sorted(inst, key=lambda i: (i is None, i or "")):  # a push without an id: its own, last
        r = inst[iid]
        by_sw.setdefault((r["client_software_name"], r["client_software_version"]), []).append(r)
    k = opts.examples
    out: list[_Row] = []
    for sw, rs in sorted(by_sw.items()):

        def total(col: str, rs: list[_Row] = rs) -> int:
            n: int = sum(r[col] or 0 for r in rs)
            return n

        def ex(cond: Callable[[_Row], bool], rs: list[_Row] = rs) -> list[str]:
            return [r["client_instance_id"] for r in rs if cond(r) and r["client_instance_id"] is not None][:k]

        def joined(lists: Iterable[Iterable[str | None] | None]) -> str:
            # the first five distinct values of the lists, in instance order
            return ", ".join(list(dict.fromkeys(x for xs in lists for x in (xs or ()) if x is not None))[:5])

        def names(col: str, rs: list[_Row] = rs) -> str:
            return joined(r[col] for r in rs)

        def departed(r: _Row) -> bool:  # left without a terminating push
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

        def mislabelled(row: _Row, labels: dict[int, list[str]] = labels) -> bool:
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


def _insights(agg: list[_Row], inst: dict[str, _Row], opts: ReportOptions) -> list[_Row]:
    """One row per flagged client instance and finding, from the workers' ``agg`` rows (per instance,
    insight metric and node: avg, sum, max, first and last value by time, time span, temporality)."""
    order = {name: i for i, name in enumerate(INSIGHTS)}
    found: list[_Row] = []

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
                **{c: r.get(c) for c in _SW},
                "insight": insight,
                "metric": metric,
                "value": float(value),
                "threshold": float(threshold),
                "setting": setting,
                "detail": detail,
                "_order": order[insight],
            }
        )

    def delta(a: _Row) -> bool:
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
    lat: dict[tuple[str, str], list[_Row]] = {}
    for a in agg:
        if a["metric"] is not None and a["metric"].endswith(_LAT) and a["node"] is not None:
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
    per: dict[str, dict[str, _Row]] = {}
    for a in agg:
        if a["node"] is None:
            per.setdefault(a["client_instance_id"], {})[a["metric"]] = a

    def value(d: dict[str, _Row], metric: str, col: str) -> float | None:
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


def _client_row(r: _Row) -> _Row:
    p, c = bool(r["is_producer"]), bool(r["is_consumer"])
    kind = streams_kind(r) or ("both" if p and c else "producer" if p else "consumer" if c else "unknown")
    return {
        **{k: r[k] for k in ("client_instance_id", "client_id", *_SW, "client_source_address")},
        "kind": kind,
        **{
            k: r[k]
            for k in (
                "pushes",
                "points",
                "first_push_ms",
                "last_push_ms",
                "terminated",
                "left",
                "error_responses",
                "early_pushes",
                "gaps",
            )
        },
    }


#: :data:`~kip714._enums.COMPRESSION_NAMES` by plain int (a compression type id as a table holds it).
_COMPRESSION_NAMES: dict[int, str] = {int(t): name for t, name in COMPRESSION_NAMES.items()}


def compression_name(ctype: int) -> str:
    return _COMPRESSION_NAMES.get(int(ctype), str(ctype))


def options_from(args: argparse.Namespace) -> ReportOptions:
    """ReportOptions from parsed ``kip714 report`` arguments (same names)."""
    return ReportOptions(
        **{
            f.name: getattr(args, f.name)
            for f in dataclasses.fields(ReportOptions)
            if getattr(args, f.name, None) is not None
        }
    )
