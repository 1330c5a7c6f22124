"""``kip714 report``: what a fleet's telemetry says, computed on Spark.

Two views over a recording (``kip714 serve --record``, ``kip714 proxy``, the simulator) or over the points
table ``kip714 pipeline`` wrote:

**Conformance, per client software name and version** (KIP-511's ClientSoftwareName/Version). Each check
cites the KIP-714 rule it tests (:data:`CHECKS`) and counts failures in its own unit, with example
client instance ids. Checks that need what the endpoint told the client (subscription, temporality,
accepted compression) read it from the recording's subscription columns; on recordings made before they
existed those checks are ``n/a``. A check is ``n/a`` when nothing it applies to was seen, ``fail`` when
anything failed, ``pass`` otherwise.

**Insights, per client instance**: the operator's view (:data:`INSIGHTS`): a broker node much slower
than the client's others, throttling, tiny producer batches, record errors and retries, connection churn,
consumer lag and idle polls — each with the metric, the value, the threshold it crossed and, where the
metric points at one, the client setting to look at. Thresholds are :class:`ReportOptions` fields.

The points are never a Spark table here: the recording is partitioned by client instance and each Python
worker decodes its pushes and reduces them to one row per instance and per insight metric
(:mod:`kip714.spark.report_points`, pyarrow and numpy); Spark joins those small tables with what it computes
from the pushes (one window per instance: intervals, compression, errors, termination). Only aggregated
results (one row per software × check, per flagged client, per instance) reach the driver, when they are
written out. A ``kip714 pipeline`` points table is reduced by the same workers.

The KIP's standard producer and consumer metrics are listed in :data:`STANDARD_PRODUCER_METRICS` and
:data:`STANDARD_CONSUMER_METRICS` (from the KIP-714 text). The KIP marks a subset of them as *required*
by setting them in bold; the KIP text kip714 was built from is plain text where that marking is lost, so
the required set cannot be established here (:data:`REQUIRED_METRICS` is ``None``) and
``standard_coverage`` checks the standard set (those the subscription asked for) instead of guessing.
"""

from __future__ import annotations

import dataclasses
import pathlib
from dataclasses import dataclass
from typing import Any, NamedTuple

from .._enums import COMPRESSION_NAMES, ErrorCode
from ..sinks.recorder import CLOSED_DIR, closed_schema, record_schema

__all__ = ["CHECKS", "INSIGHTS", "REQUIRED_METRICS", "REQUIRED_METRICS_NOTE", "Report", "ReportOptions",
           "STANDARD_CONSUMER_METRICS", "STANDARD_PRODUCER_METRICS", "STANDARD_RESOURCE_LABELS", "report"]

_NS = "org.apache.kafka."
#: KIP-714 "Standard producer metrics" (telemetry names).
STANDARD_PRODUCER_METRICS = tuple(_NS + "producer." + n for n in (
    "connection.creation.rate", "connection.creation.total", "node.request.latency.avg",
    "node.request.latency.max", "produce.throttle.time.avg", "produce.throttle.time.max",
    "record.queue.time.avg", "record.queue.time.max"))
#: KIP-714 "Standard consumer metrics" (telemetry names).
STANDARD_CONSUMER_METRICS = tuple(_NS + "consumer." + n for n in (
    "connection.creation.rate", "connection.creation.total", "node.request.latency.avg",
    "node.request.latency.max", "poll.idle.ratio.avg", "coordinator.commit.latency.avg",
    "coordinator.commit.latency.max", "coordinator.assigned.partitions", "coordinator.rebalance.latency.avg",
    "coordinator.rebalance.latency.max", "coordinator.rebalance.latency.total", "fetch.manager.fetch.latency.avg",
    "fetch.manager.fetch.latency.max"))
#: The required metrics (bold in the KIP): cannot be established from the KIP text kip714 has.
REQUIRED_METRICS: tuple[str, ...] | None = None
REQUIRED_METRICS_NOTE = ("required metrics: cannot be established (KIP-714 marks them in bold; the KIP text "
                         "kip714 was built from has lost that marking), so the standard set is checked")
#: KIP-714 "Standard client resource labels".
STANDARD_RESOURCE_LABELS = ("client_rack", "group_id", "group_instance_id", "group_member_id", "transactional_id")
_CONSUMER_LABELS = ("group_id", "group_instance_id", "group_member_id")
_PRODUCER_LABELS = ("transactional_id",)
#: Spellings that stand for a standard label but are not it (librdkafka sends ``member_id``).
_LABEL_VARIANTS = tuple(sorted({v for lab in STANDARD_RESOURCE_LABELS
                                for v in (lab.replace("_", "."), lab.replace("_", "-"), lab.replace("_", ""))}
                               | {"member_id", "member.id", "rack", "instance_id"}))
#: A telemetry metric name: lower-case dot-separated segments, at least two (a namespace and a name).
NAME_PATTERN = r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$"

#: check id → (what it tests, the KIP-714 rule it cites, the unit its counts are in)
CHECKS: dict[str, tuple[str, str, str]] = {
    "payload_decodes": (
        "payloads decode", "PushTelemetryRequest: Metrics is an OTLP MetricsData protobuf compressed with "
        "CompressionType (a broker answers INVALID_RECORD when it cannot decompress or parse it)", "pushes"),
    "metric_naming": (
        "metric names follow the naming rule", "Metrics naming and format: prefix 'org.apache.kafka.', the "
        "group without '-metrics', every '-' replaced with '.'; other metrics under a reverse-domain "
        "namespace; standard metrics only under 'org.apache.kafka.'", "data points"),
    "subscribed_only": (
        "only subscribed metrics are pushed", "Client behaviour: the client pushes the metrics matching the "
        "RequestedMetrics prefixes of its GetTelemetrySubscriptions response ('*' or an empty prefix: all)",
        "data points"),
    "temporality": (
        "temporality matches DeltaTemporality", "Metric aggregation temporality: sums and histograms are "
        "DELTA when DeltaTemporality is true, CUMULATIVE when false", "data points"),
    "start_time_stable": (
        "cumulative start times stay fixed", "Metric aggregation temporality / OTLP: a CUMULATIVE series "
        "keeps its StartTimeUnixNano from push to push", "series"),
    "no_duplicate_series": (
        "no series twice in one payload", "OTLP MetricsData: one data point per series (metric name, "
        "attributes, resource) in a push", "series in a push"),
    "standard_coverage": (
        "standard metrics covered", "Standard producer/consumer metrics: supporting clients should provide "
        "the standard metrics (the subscribed ones are checked); " + REQUIRED_METRICS_NOTE, "standard metrics"),
    "resource_labels": (
        "standard resource labels", "Standard client resource labels: client_rack, group_id, "
        "group_instance_id, group_member_id (consumer), transactional_id (producer), spelled so", "instances"),
    "push_interval": (
        "push interval kept", "PushIntervalMs: the client pushes every PushIntervalMs (a broker throttles "
        "earlier pushes); pushes much later than the interval are counted as gaps", "pushes"),
    "compression_accepted": (
        "compression among the accepted types", "AcceptedCompressionTypes: the client compresses with a "
        "type from the list, or sends uncompressed (always when the list is empty)", "pushes"),
    "terminating_push": (
        "terminating push before leaving", "Client termination: a client sends a final PushTelemetry with "
        "Terminating=true before it closes", "instances"),
    "error_responses": (
        "no error responses", "PushTelemetry error codes: a conforming client is not answered INVALID_REQUEST, "
        "INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE, TELEMETRY_TOO_LARGE, nor UNKNOWN_SUBSCRIPTION_ID twice in a "
        "row (it must fetch its new subscription); THROTTLING_QUOTA_EXCEEDED answers early pushes and is "
        "counted under push_interval", "pushes"),
}
#: insight id → what it flags
INSIGHTS: dict[str, str] = {
    "slow_node": "request latency to one broker node far above the client's other nodes",
    "throttled": "the broker throttles the client (quota)",
    "small_batches": "a producer sends few records per request (tiny batches)",
    "retries_errors": "a producer's record error or retry rate is high",
    "connection_churn": "the client keeps opening connections after start-up",
    "consumer_lag": "a consumer's lag grows past a bound, or its poll() is idle nearly all the time",
}

_LAT = ".node.request.latency.avg"
_THROTTLE = {_NS + "producer.produce.throttle.time.avg": "producer_byte_rate quota",
             _NS + "consumer.fetch.manager.fetch.throttle.time.avg": "consumer_byte_rate quota"}
_RPR = _NS + "producer.records.per.request.avg"
_SEND, _REQ = _NS + "producer.record.send.total", _NS + "producer.request.total"
_ERR, _RETRY = _NS + "producer.record.error.total", _NS + "producer.record.retry.total"
_BATCH = _NS + "producer.batch.size.avg"
_CONN = (_NS + "producer.connection.creation.total", _NS + "consumer.connection.creation.total")
_LAG, _IDLE = _NS + "consumer.fetch.manager.records.lag.max", _NS + "consumer.poll.idle.ratio.avg"
_INTEREST = tuple(_THROTTLE) + (_RPR, _SEND, _REQ, _ERR, _RETRY, _BATCH) + _CONN + (_LAG, _IDLE)
_UNKNOWN_SUB = int(ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
_THROTTLED = int(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
_SW = ("client_software_name", "client_software_version")


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

    conformance: Any
    insights: Any
    clients: Any
    errors: Any
    timeline: Any
    options: ReportOptions
    cached: tuple = ()

    def unpersist(self) -> None:
        """Release what the report keeps cached in Spark (the decoded points)."""
        for df in self.cached:
            df.unpersist()

    def write(self, out: str | pathlib.Path, *, summary: bool = True) -> dict[str, Any]:
        """Write ``conformance.json``, ``insights.json``, ``tables/*.parquet`` and ``report.html`` under
        ``out``; returns the collected results (``conformance``, ``insights``, ``clients``, ``errors``,
        ``timeline`` as lists of dicts, ``summary`` text)."""
        from . import report_html

        return report_html.write_report(self, pathlib.Path(out), summary=summary)


# ------------------------------------------------------------------------------------------ inputs

def _spark_schema(arrow_schema):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema)


def _with_columns(df, arrow_schema):
    """``df`` with every column of ``arrow_schema`` (missing ones null, of the schema's type)."""
    from pyspark.sql import functions as F

    spark_schema = _spark_schema(arrow_schema)
    for field in spark_schema.fields:
        if field.name not in df.columns:
            df = df.withColumn(field.name, F.lit(None).cast(field.dataType))
    return df


def _rules():
    from .report_points import Rules

    std_all = STANDARD_PRODUCER_METRICS + STANDARD_CONSUMER_METRICS
    return Rules(NAME_PATTERN, {m[len(_NS):] for m in std_all}, set(std_all), set(_INTEREST), _LAT,
                 _NS + "producer.", _NS + "consumer.")


def _per_point(df, worker):
    """The workers' rows (:data:`kip714.spark.report_points.OUT_SCHEMA`) of ``df`` (recording or points
    rows), partitioned by client instance and sorted so that each worker sees every row of an instance."""
    from .report_points import OUT_SCHEMA

    spark = df.sparkSession
    parts = max(2, spark.sparkContext.defaultParallelism)
    src = df.repartition(parts, "client_instance_id").sortWithinPartitions("client_instance_id")
    return src.mapInArrow(worker, _spark_schema(OUT_SCHEMA))


def _load(spark, source, closed):
    """(pushes, the workers' per-point rows, decode errors or None, closed rows) from a recording or a
    points table. Decode errors come from the workers for a recording (as ``error`` rows) and from the
    ``errors/`` table for a points table."""
    from pyspark.sql import functions as F

    from .report_points import PUSH_COLUMNS, points_worker, recording_worker

    rec_schema = record_schema()
    closed_df = None
    path = None if hasattr(source, "schema") else str(source)
    local = pathlib.Path(path) if path is not None and "://" not in path else None
    if closed is not None:
        closed_df = spark.read.schema(_spark_schema(closed_schema())).parquet(str(closed))
    if local is not None and (local / "points").is_dir():
        points = _with_columns(spark.read.parquet(str(local / "points")), rec_schema)
        if "push_error_code" not in points.columns:
            points = points.withColumn("push_error_code", F.col("error_code"))
        errors = spark.read.parquet(str(local / "errors")) if (local / "errors").is_dir() else None
        push_cols = [c for c in rec_schema.names if c not in ("payload", "error_code")] + ["push_error_code"]
        pushes = points.select(*push_cols, F.lit(1).alias("payload_bytes"))
        if errors is not None:
            errors = _with_columns(errors, rec_schema)
            if "push_error_code" not in errors.columns:
                errors = errors.withColumn("push_error_code", F.lit(None).cast("short"))
            pushes = pushes.unionByName(errors.select(*push_cols, F.length("payload").alias("payload_bytes")))
        pushes = pushes.dropDuplicates(["client_instance_id", "node_id", "received_at_ms"])
        for name in ("closed", CLOSED_DIR):
            if closed_df is None and (local / name).is_dir():
                closed_df = spark.read.schema(_spark_schema(closed_schema())).parquet(str(local / name))
        from .decode import points_schema

        wanted = [c for c in list(points_schema().names) + list(PUSH_COLUMNS) if c in points.columns]
        per_point = _per_point(points.select(*wanted), points_worker(_rules()))
        return pushes, per_point, errors, closed_df
    if path is not None:
        rec = spark.read.schema(_spark_schema(rec_schema)).parquet(path)
        if closed_df is None and (local is None or (local / CLOSED_DIR).is_dir()):
            try:
                closed_df = spark.read.schema(_spark_schema(closed_schema())).parquet(
                    path.rstrip("/") + "/" + CLOSED_DIR)
            except Exception:  # no connection-closed rows recorded (older recording, remote path without them)
                closed_df = None
    else:
        rec = _with_columns(source, rec_schema)
    rec = rec.withColumnRenamed("error_code", "push_error_code")
    per_point = _per_point(rec.select(*PUSH_COLUMNS, "payload", "compression_type"), recording_worker(_rules()))
    pushes = rec.withColumn("payload_bytes", F.length("payload")).drop("payload")
    return pushes, per_point, None, closed_df


# ------------------------------------------------------------------------------------------ the report

def report(source, spark=None, *, options: ReportOptions | None = None, master: str | None = None,
           closed=None) -> Report:
    """The conformance and insight tables of a recording (a path, or a DataFrame of recording rows) or of
    a ``kip714 pipeline`` output folder (``points/``, ``errors/``). ``closed``: a ``_closed`` folder to use
    instead of the recording's own. Returns a :class:`Report` of DataFrames; ``Report.write(dir)`` writes
    the JSON, Parquet and HTML files. ``spark``: a session (default :func:`kip714.spark.local_session`
    with ``master``)."""
    from pyspark.sql import functions as F

    from .decode import local_session

    opts = options or ReportOptions()
    if spark is None:
        spark = local_session(master, app_name="kip714-report")
    from pyspark import StorageLevel

    from .report_points import AGG_COLUMNS, ERROR_COLUMNS, INST_COLUMNS

    pushes, per_point, errors, closed_df = _load(spark, source, closed)
    pushes = pushes.withColumns({c: F.coalesce(F.col(c), F.lit("unknown")) for c in _SW})
    # small (rows per instance, per insight metric): materialised now, in one job, so that the tables below
    # (and Spark's broadcasts of them, which run as concurrent jobs) never decode twice
    per_point = per_point.persist(StorageLevel.MEMORY_AND_DISK)
    per_point.count()
    kind = F.col("row_kind")

    push_inst = _push_instances(pushes, closed_df, opts)
    point_inst = per_point.where(kind == "inst").select("client_instance_id", *INST_COLUMNS)
    if errors is not None:
        decode_inst = errors.groupBy("client_instance_id").agg(
            F.count(F.lit(1)).alias("decode_failed"), F.first("error", ignorenulls=True).alias("decode_error"))
    else:
        decode_inst = per_point.where(kind == "error").select("client_instance_id", *ERROR_COLUMNS)
    inst = push_inst.join(F.broadcast(point_inst), "client_instance_id", "left").join(
        F.broadcast(decode_inst), "client_instance_id", "left")
    # materialised once: every table below starts from it (and Spark no longer re-analyses its lineage)
    inst = inst.localCheckpoint(eager=True)

    conformance = _conformance(inst, opts)
    insights = _insights(per_point.where(kind == "agg").select("client_instance_id", *AGG_COLUMNS), inst, opts)
    clients = inst.select(
        "client_instance_id", "client_id", *_SW, "client_source_address",
        F.when(F.col("is_producer") & ~F.col("is_consumer"), "producer")
         .when(F.col("is_consumer") & ~F.col("is_producer"), "consumer")
         .when(F.col("is_consumer") & F.col("is_producer"), "both").otherwise("unknown").alias("kind"),
        "pushes", F.coalesce("points", F.lit(0)).alias("points"), "first_push_ms", "last_push_ms",
        "terminated", "left", "error_responses", "early_pushes", "gaps")
    error_names = F.create_map(*[x for e in ErrorCode for x in (F.lit(int(e)), F.lit(e.name))])
    errors_by_code = (pushes.where(F.col("push_error_code") != 0)
                      .groupBy(*_SW, F.col("push_error_code").alias("error_code")).count()
                      .withColumn("error", F.coalesce(error_names[F.col("error_code")],
                                                      F.col("error_code").cast("string"))))
    timeline = (pushes.groupBy(*_SW, (F.floor(F.col("received_at_ms") / 60000) * 60000).alias("minute_ms"))
                .agg(F.count(F.lit(1)).alias("pushes"),
                     F.sum(F.when(F.col("push_error_code") != 0, 1).otherwise(0)).alias("errors")))
    return Report(conformance, insights, clients, errors_by_code, timeline, opts, (per_point,))


def _push_instances(pushes, closed_df, opts: ReportOptions):
    """Per client instance, from the pushes: counts, push intervals, compression, errors, termination."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("client_instance_id").orderBy("received_at_ms")
    t, interval = F.col("received_at_ms"), F.col("push_interval_ms")
    prev_t, prev_err, prev_sid = (F.lag("received_at_ms").over(w), F.lag("push_error_code").over(w),
                                  F.lag("subscription_id").over(w))
    p = pushes.select("*", prev_t.alias("prev_t"), prev_err.alias("prev_err"), prev_sid.alias("prev_sid"))
    gap = t - F.col("prev_t")
    interval_checked = (F.col("prev_t").isNotNull() & interval.isNotNull() & ~F.col("terminating")
                        & (F.col("prev_err") == 0) & (F.col("prev_sid") == F.col("subscription_id")))
    early = interval_checked & (gap < interval * (1.0 - opts.interval_tolerance))
    gapped = interval_checked & (gap > interval * opts.gap_factor)
    ctype = F.col("compression_type").cast("int")
    comp_checked = (F.col("payload_bytes") > 0) & F.col("accepted_compression_types").isNotNull()
    comp_bad = comp_checked & (ctype != 0) & ~F.array_contains(
        F.transform("accepted_compression_types", lambda c: c.cast("int")), ctype)
    code = F.col("push_error_code")
    err = code != 0
    err_fault = err & (code != _THROTTLED) & (
        (code != _UNKNOWN_SUB) | ((F.col("prev_err") == _UNKNOWN_SUB) & (F.col("prev_sid") == F.col("subscription_id"))))

    def n(cond):
        return F.sum(F.when(cond, 1).otherwise(0))

    def ex(cond, col):
        return F.slice(F.array_sort(F.collect_set(F.when(cond, col))), 1, 3)

    inst = p.groupBy("client_instance_id").agg(
        F.first("client_id", ignorenulls=True).alias("client_id"),
        *[F.first(c).alias(c) for c in _SW],
        F.first("client_source_address", ignorenulls=True).alias("client_source_address"),
        F.count(F.lit(1)).alias("pushes"),
        n(F.col("payload_bytes").isNotNull()).alias("payload_pushes"),
        F.min(t).alias("first_push_ms"), F.max(t).alias("last_push_ms"),
        F.max(F.col("terminating").cast("int")).cast("boolean").alias("terminated"),
        n(interval_checked).alias("interval_checked"), n(early).alias("early_pushes"), n(gapped).alias("gaps"),
        F.min(F.when(early, gap)).alias("earliest_gap_ms"),
        n(comp_checked).alias("compression_checked"), n(comp_bad).alias("compression_bad"),
        ex(comp_bad, ctype.cast("string")).alias("compression_bad_types"),
        n(err).alias("error_responses"), n(err_fault).alias("error_faults"),
        ex(err, code.cast("string")).alias("error_codes"),
    )
    if closed_df is not None:
        closes = (closed_df.where(F.coalesce(F.col("reason"), F.lit("client")) != "endpoint")
                  .groupBy("client_instance_id").agg(F.max("closed_at_ms").alias("closed_at_ms")))
        inst = inst.join(closes, "client_instance_id", "left")
        left = F.coalesce(F.col("closed_at_ms") >= F.col("last_push_ms"), F.lit(False))
        inst = inst.withColumn("left", left).withColumn("closes_known", F.lit(True))
    else:
        inst = (inst.withColumn("closed_at_ms", F.lit(None).cast("long")).withColumn("left", F.lit(False))
                .withColumn("closes_known", F.lit(False)))
    return inst


def _conformance(inst, opts: ReportOptions):
    """One row per software name, version and check."""
    from pyspark.sql import functions as F

    def z(c):
        return F.coalesce(F.col(c), F.lit(0))

    keys = F.coalesce(F.col("resource_keys"), F.array().cast("array<string>"))
    is_p = F.coalesce(F.col("is_producer"), F.lit(False))
    is_c = F.coalesce(F.col("is_consumer"), F.lit(False))
    variants = F.filter(keys, lambda k: k.isin(list(_LABEL_VARIANTS)))
    wrong_kind = F.when(is_p & ~is_c, F.filter(keys, lambda k: k.isin(list(_CONSUMER_LABELS)))) \
        .when(is_c & ~is_p, F.filter(keys, lambda k: k.isin(list(_PRODUCER_LABELS)))) \
        .otherwise(F.array().cast("array<string>"))
    orphan = (F.array_contains(keys, "group_instance_id") | F.array_contains(keys, "group_member_id")) & \
        ~F.array_contains(keys, "group_id")
    label_problems = F.concat(
        F.transform(variants, lambda k: F.concat(F.lit("'"), k, F.lit("' is not a standard label name"))),
        F.transform(wrong_kind, lambda k: F.concat(F.lit("'"), k, F.lit("' on the wrong client type"))),
        F.when(orphan, F.array(F.lit("group_instance_id/group_member_id without group_id")))
         .otherwise(F.array().cast("array<string>")))
    inst = inst.withColumn("label_problems", label_problems)
    label_checked = is_p | is_c | (F.size(keys) > 0)
    label_bad = label_checked & (F.size("label_problems") > 0)
    term_checked = F.col("terminated") | F.col("left")
    term_bad = ~F.col("terminated") & F.col("left")
    running = ~F.col("terminated") & ~F.col("left")

    def sum_(c):
        return F.sum(c).cast("long")

    def n(cond):
        return F.sum(F.when(cond, 1).otherwise(0)).cast("long")

    k = opts.examples

    def ex(cond):
        return F.slice(F.array_sort(F.collect_list(F.when(cond, F.col("client_instance_id")))), 1, k)

    def names(col):
        return F.array_join(F.slice(F.array_distinct(F.flatten(F.collect_list(col))), 1, 5), ", ")

    def subs_of(kind_cond):
        return F.array_distinct(F.flatten(F.collect_list(F.when(kind_cond, F.col("subscriptions")))))

    def seen_of(kind_cond):
        return F.array_distinct(F.flatten(F.collect_list(F.when(kind_cond, F.col("standard_seen")))))

    per_sw = inst.groupBy(*_SW).agg(
        sum_("payload_pushes").alias("decode_checked"), sum_(z("decode_failed")).alias("decode_bad"),
        ex(z("decode_failed") > 0).alias("decode_ex"), F.first("decode_error", ignorenulls=True).alias("decode_why"),
        sum_(z("points")).alias("naming_checked"), sum_(z("naming_bad")).alias("naming_bad"),
        ex(z("naming_bad") > 0).alias("naming_ex"), names("naming_bad_names").alias("naming_why"),
        sum_(z("subscribed_checked")).alias("sub_checked"), sum_(z("subscribed_bad")).alias("sub_bad"),
        ex(z("subscribed_bad") > 0).alias("sub_ex"), names("subscribed_bad_names").alias("sub_why"),
        sum_(z("temporality_checked")).alias("temp_checked"), sum_(z("temporality_bad")).alias("temp_bad"),
        ex(z("temporality_bad") > 0).alias("temp_ex"), names("temporality_bad_names").alias("temp_why"),
        sum_(z("cumulative_series")).alias("start_checked"), sum_(z("start_moved")).alias("start_bad"),
        ex(z("start_moved") > 0).alias("start_ex"), names("start_moved_names").alias("start_why"),
        sum_(z("series_in_pushes")).alias("dup_checked"), sum_(z("duplicate_series")).alias("dup_bad"),
        ex(z("duplicate_series") > 0).alias("dup_ex"), names("duplicate_names").alias("dup_why"),
        subs_of(is_p).alias("p_subs"), seen_of(is_p).alias("p_seen"), n(is_p).alias("p_n"),
        ex(is_p).alias("p_ex"),
        subs_of(is_c).alias("c_subs"), seen_of(is_c).alias("c_seen"), n(is_c).alias("c_n"),
        ex(is_c).alias("c_ex"),
        n(label_checked).alias("label_checked"), n(label_bad).alias("label_bad"), ex(label_bad).alias("label_ex"),
        names("label_problems").alias("label_why"),
        sum_("interval_checked").alias("interval_checked"), sum_("early_pushes").alias("interval_bad"),
        ex(F.col("early_pushes") > 0).alias("interval_ex"), sum_("gaps").alias("gaps"),
        F.min("earliest_gap_ms").alias("earliest_gap"),
        sum_("compression_checked").alias("comp_checked"), sum_("compression_bad").alias("comp_bad"),
        ex(F.col("compression_bad") > 0).alias("comp_ex"), names("compression_bad_types").alias("comp_why"),
        n(term_checked).alias("term_checked"), n(term_bad).alias("term_bad"), ex(term_bad).alias("term_ex"),
        n(running).alias("running"), F.max(F.col("closes_known").cast("int")).alias("closes_known"),
        sum_("pushes").alias("err_checked"), sum_("error_faults").alias("err_bad"),
        sum_("error_responses").alias("err_all"), ex(F.col("error_faults") > 0).alias("err_ex"),
        names("error_codes").alias("err_why"),
    )

    def coverage(subs, seen, standard):
        std = F.array(*[F.lit(m) for m in standard])
        subs = F.when(F.size(subs) > 0, subs).otherwise(F.array(F.array(F.lit("*"))))
        wanted = F.filter(std, lambda m: F.exists(subs, lambda s: F.exists(
            s, lambda p: (p == "*") | m.startswith(p))))
        return wanted, F.filter(wanted, lambda m: ~F.array_contains(seen, m))

    p_wanted, p_missing = coverage(F.col("p_subs"), F.col("p_seen"), STANDARD_PRODUCER_METRICS)
    c_wanted, c_missing = coverage(F.col("c_subs"), F.col("c_seen"), STANDARD_CONSUMER_METRICS)
    p_on, c_on = F.col("p_n") > 0, F.col("c_n") > 0
    empty = F.array().cast("array<string>")
    cov_checked = F.when(p_on, F.size(p_wanted)).otherwise(0) + F.when(c_on, F.size(c_wanted)).otherwise(0)
    p_miss = F.when(p_on, p_missing).otherwise(empty)
    c_miss = F.when(c_on, c_missing).otherwise(empty)
    cov_bad = F.size(p_miss) + F.size(c_miss)
    cov_why = F.concat_ws("; ", F.when(F.size(p_miss) > 0, F.concat(F.lit("producer missing: "),
                                                                   F.array_join(p_miss, ", "))),
                          F.when(F.size(c_miss) > 0, F.concat(F.lit("consumer missing: "), F.array_join(c_miss, ", "))),
                          F.lit(REQUIRED_METRICS_NOTE))

    def row(check, failures, checked, examples, detail):
        return F.struct(F.lit(check).alias("check"), failures.cast("long").alias("failures"),
                        checked.cast("long").alias("checked"), examples.alias("examples"),
                        detail.cast("string").alias("detail"))

    c = F.col
    gap_note = F.concat(F.lit("gaps (later than "), F.lit(str(opts.gap_factor)), F.lit("× the interval): "),
                        c("gaps").cast("string"),
                        F.when(c("earliest_gap").isNotNull(),
                               F.concat(F.lit("; earliest push "), c("earliest_gap").cast("string"),
                                        F.lit(" ms after the previous"))).otherwise(F.lit("")))
    term_note = F.when(c("closes_known") == 1, F.concat(c("running").cast("string"),
                                                        F.lit(" instance(s) without a terminating push still running")))\
        .otherwise(F.lit("the recording has no connection-closed rows: running and departed clients cannot be "
                         "told apart"))
    rows = F.array(
        row("payload_decodes", c("decode_bad"), c("decode_checked"), c("decode_ex"), c("decode_why")),
        row("metric_naming", c("naming_bad"), c("naming_checked"), c("naming_ex"), c("naming_why")),
        row("subscribed_only", c("sub_bad"), c("sub_checked"), c("sub_ex"), c("sub_why")),
        row("temporality", c("temp_bad"), c("temp_checked"), c("temp_ex"), c("temp_why")),
        row("start_time_stable", c("start_bad"), c("start_checked"), c("start_ex"), c("start_why")),
        row("no_duplicate_series", c("dup_bad"), c("dup_checked"), c("dup_ex"), c("dup_why")),
        row("standard_coverage", cov_bad, cov_checked,
            F.slice(F.array_distinct(F.concat(F.when(F.size(p_miss) > 0, c("p_ex")).otherwise(empty),
                                              F.when(F.size(c_miss) > 0, c("c_ex")).otherwise(empty))), 1, k),
            cov_why),
        row("resource_labels", c("label_bad"), c("label_checked"), c("label_ex"), c("label_why")),
        row("push_interval", c("interval_bad"), c("interval_checked"), c("interval_ex"), gap_note),
        row("compression_accepted", c("comp_bad"), c("comp_checked"), c("comp_ex"),
            F.when(F.length(c("comp_why")) > 0, F.concat(F.lit("compression types used: "), c("comp_why")))),
        row("terminating_push", c("term_bad"), c("term_checked"), c("term_ex"), term_note),
        row("error_responses", c("err_bad"), c("err_checked"), c("err_ex"),
            F.when(c("err_all") > 0, F.concat(F.lit("error responses: "), c("err_all").cast("string"),
                                              F.lit(" (codes "), c("err_why"), F.lit(")")))),
    )
    order = F.create_map(*[x for i, ch in enumerate(CHECKS) for x in (F.lit(ch), F.lit(i))])
    rules = F.create_map(*[x for ch, (_, rule, _) in CHECKS.items() for x in (F.lit(ch), F.lit(rule))])
    units = F.create_map(*[x for ch, (_, _, unit) in CHECKS.items() for x in (F.lit(ch), F.lit(unit))])
    out = per_sw.select(*_SW, F.explode(rows).alias("r")).select(*_SW, "r.*")
    status = F.when(F.col("checked") == 0, "n/a").when(F.col("failures") > 0, "fail").otherwise("pass")
    return (out.withColumn("status", status).withColumn("rule", rules[F.col("check")])
            .withColumn("unit", units[F.col("check")]).withColumn("_order", order[F.col("check")])
            .select(*_SW, "check", "status", "failures", "checked", "unit", "examples", "rule", "detail", "_order"))


def _insights(agg, inst, opts: ReportOptions):
    """One row per flagged client instance and finding, from the workers' ``agg`` rows (per instance,
    insight metric and node: avg, sum, max, first and last value by time, time span, temporality)."""
    from pyspark.sql import functions as F

    # total over the run (delta: the sum of the deltas; cumulative: the last value) and after the first push
    agg = agg.withColumn("total", F.when(F.col("temporality") == "delta", F.col("sum")).otherwise(F.col("last"))) \
        .withColumn("after_first", F.when(F.col("temporality") == "delta", F.col("sum") - F.col("first"))
                    .otherwise(F.col("last") - F.col("first")))
    ids = inst.select("client_instance_id", "client_id", *_SW)
    empty_detail = F.lit(None).cast("string")

    def out(df, insight, metric_col, value, threshold, setting, detail=empty_detail):
        return df.select("client_instance_id", F.lit(insight).alias("insight"), metric_col.alias("metric"),
                         value.cast("double").alias("value"), threshold.cast("double").alias("threshold"),
                         (setting if not isinstance(setting, (str, type(None))) else F.lit(setting))
                         .cast("string").alias("setting"), detail.alias("detail"))

    parts = []
    # slow_node: a node far above the median over the client's nodes
    lat = agg.where(F.col("metric").endswith(_LAT) & F.col("node").isNotNull())
    med = lat.groupBy("client_instance_id", "metric").agg(
        F.percentile_approx("avg", 0.5).alias("median"), F.count(F.lit(1)).alias("nodes"))
    lat = lat.join(med, ["client_instance_id", "metric"])
    limit = F.greatest(F.col("median") * opts.slow_node_ratio, F.lit(opts.slow_node_min_ms))
    slow = lat.where((F.col("nodes") >= 2) & (F.col("avg") >= limit))
    parts.append(out(slow, "slow_node", F.concat(F.col("metric"), F.lit("{node="), F.col("node"), F.lit("}")),
                     F.col("avg"), limit, None,
                     F.concat(F.lit("median over the client's "), F.col("nodes").cast("string"),
                              F.lit(" nodes: "), F.format_number("median", 2), F.lit(" ms"))))
    # throttled
    thr_setting = F.create_map(*[x for m, s in _THROTTLE.items() for x in (F.lit(m), F.lit(s))])
    thr = agg.where(F.col("metric").isin(list(_THROTTLE)) & (F.col("avg") > opts.throttle_ms))
    parts.append(out(thr, "throttled", F.col("metric"), F.col("avg"), F.lit(opts.throttle_ms),
                     thr_setting[F.col("metric")],
                     F.concat(F.lit("max "), F.format_number("max", 1), F.lit(" ms"))))
    # small_batches: records per request (the metric, or record.send.total / request.total)
    pivot = (agg.where(F.col("node").isNull()).groupBy("client_instance_id")
             .agg(*[F.max(F.when(F.col("metric") == m, F.col(col))).alias(f"{key}_{col}")
                    for key, m in (("rpr", _RPR), ("send", _SEND), ("req", _REQ), ("err", _ERR),
                                   ("retry", _RETRY), ("batch", _BATCH), ("lag", _LAG), ("idle", _IDLE))
                    for col in ("avg", "total", "first", "last")],
                  F.max(F.when(F.col("metric").isin(list(_CONN)), F.col("after_first"))).alias("conn_after"),
                  F.max(F.when(F.col("metric").isin(list(_CONN)), F.col("metric"))).alias("conn_metric"),
                  F.max(F.when(F.col("metric").isin(list(_CONN)), (F.col("t1") - F.col("t0")))).alias("conn_span")))
    ratio = F.when(F.col("req_total") > 0, F.col("send_total") / F.col("req_total"))
    rpr = F.coalesce(F.col("rpr_avg"), ratio)
    rpr_metric = F.when(F.col("rpr_avg").isNotNull(), F.lit(_RPR)).otherwise(F.lit(f"{_SEND} / {_REQ}"))
    small = pivot.where(rpr.isNotNull() & (rpr < opts.min_records_per_request))
    parts.append(out(small, "small_batches", rpr_metric, rpr, F.lit(opts.min_records_per_request), "linger.ms",
                     F.when(F.col("batch_avg").isNotNull(),
                            F.concat(F.lit("batch.size.avg "), F.format_number("batch_avg", 0), F.lit(" bytes")))))
    # retries_errors
    sent = F.col("send_total")
    err_rate = F.when(sent > 0, F.col("err_total") / sent)
    retry_rate = F.when(sent > 0, F.col("retry_total") / sent)
    parts.append(out(pivot.where(err_rate > opts.max_error_rate), "retries_errors", F.lit(f"{_ERR} / {_SEND}"),
                     err_rate, F.lit(opts.max_error_rate), "delivery.timeout.ms"))
    parts.append(out(pivot.where(retry_rate > opts.max_retry_rate), "retries_errors",
                     F.lit(f"{_RETRY} / {_SEND}"), retry_rate, F.lit(opts.max_retry_rate), "retries"))
    # connection_churn: connections per minute after the first push
    minutes = F.greatest(F.col("conn_span") / F.lit(60e9), F.lit(1.0))
    churn = F.col("conn_after") / minutes
    parts.append(out(pivot.where(churn > opts.max_connections_per_min), "connection_churn",
                     F.concat(F.col("conn_metric"), F.lit(" per minute")), churn,
                     F.lit(opts.max_connections_per_min), "connections.max.idle.ms"))
    # consumer_lag: growing past a bound, or poll idle nearly always
    lag = pivot.where((F.col("lag_last") > opts.max_consumer_lag) & (F.col("lag_last") > F.col("lag_first")))
    parts.append(out(lag, "consumer_lag", F.lit(_LAG), F.col("lag_last"), F.lit(opts.max_consumer_lag),
                     "max.poll.records", F.concat(F.lit("from "), F.format_number("lag_first", 0))))
    idle = pivot.where(F.col("idle_avg") >= opts.poll_idle_ratio)
    parts.append(out(idle, "consumer_lag", F.lit(_IDLE), F.col("idle_avg"), F.lit(opts.poll_idle_ratio),
                     "fetch.min.bytes"))
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    order = F.create_map(*[x for i, name in enumerate(INSIGHTS) for x in (F.lit(name), F.lit(i))])
    return (result.join(ids, "client_instance_id", "left")
            .select("client_instance_id", "client_id", *_SW, "insight", "metric", "value", "threshold", "setting",
                    "detail", order[F.col("insight")].alias("_order")))


def compression_name(ctype: int) -> str:
    return COMPRESSION_NAMES.get(int(ctype), str(ctype))


def options_from(args) -> ReportOptions:
    """ReportOptions from parsed ``kip714 report`` arguments (same names)."""
    return ReportOptions(**{f.name: getattr(args, f.name) for f in dataclasses.fields(ReportOptions)
                            if getattr(args, f.name, None) is not None})

