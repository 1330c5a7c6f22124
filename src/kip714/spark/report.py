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
from collections.abc import Sequence
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
from .report_streams import streams_kind
from .report_verdicts import INSIGHT_METRICS, NODE_LATENCY, ReportOptions, conformance_rows, insight_rows
from .report_verdicts import SOFTWARE as _SW
from .report_verdicts import Row as _Row

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

#: A telemetry metric name: lower-case dot-separated segments, at least two (a namespace and a name).
NAME_PATTERN = r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$"


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
        set(INSIGHT_METRICS),
        NODE_LATENCY,
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


def _closed_folders(paths: list[str]) -> list[str]:
    """The ``_closed`` folders of the recordings ``paths`` name (local ones that have one, each once; a URL's
    own ``URL/_closed``, which may not exist)."""
    from ..sinks.recorder import recording_sources

    local = [p for p in paths if "://" not in p]
    out = [p.rstrip("/") + "/" + CLOSED_DIR for p in dict.fromkeys(p for p in paths if "://" in p)]
    seen: set[pathlib.Path] = set()
    for source in recording_sources(local) if local else []:
        folder = source / CLOSED_DIR
        if source.is_dir() and folder.is_dir() and folder.resolve() not in seen:
            seen.add(folder.resolve())
            out.append(str(folder))
    return out


def _load(
    spark: SparkSession,
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | DataFrame,
    closed: str | os.PathLike[str] | None,
    opts: ReportOptions,
) -> tuple[DataFrame, DataFrame, DataFrame | None]:
    """(pushes, the workers' rows, closed rows or None) of recordings or a points table. ``pushes`` (one
    row per push, lazy) feeds the per-minute and per-error-code tables."""
    from pyspark.sql import functions as F

    from .report_points import FACT_COLUMNS, PUSH_COLUMNS, PUSH_KEY
    from .report_workers import points_worker, recording_worker

    rec_schema: pa.Schema = record_schema()

    def closed_spark_schema() -> StructType:
        return _spark_schema(closed_schema())

    closed_df = None
    if hasattr(source, "schema"):  # a DataFrame
        paths = None
    elif isinstance(source, (str, os.PathLike)):
        paths = [os.fspath(source)]
    else:
        paths = [os.fspath(p) for p in source]
    path = paths[0] if paths is not None and len(paths) == 1 else None  # one path: maybe a points table
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
        pushes = src.select(*facts, "push_error_code").dropDuplicates(list(PUSH_KEY))
        for name in ("closed", CLOSED_DIR):
            if closed_df is None and (local / name).is_dir():
                closed_df = spark.read.schema(closed_spark_schema()).parquet(str(local / name))
        return pushes, rows, closed_df
    if paths is not None:
        from .decode import read_recording_df

        # the rolled files and the _open/ parts of live recordings, each recording once
        rec = read_recording_df(spark, paths)
        if closed_df is None:
            folders = _closed_folders(paths)
            if folders:
                try:
                    closed_df = spark.read.schema(closed_spark_schema()).parquet(*folders)
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
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | DataFrame,
    spark: SparkSession | None = None,
    *,
    options: ReportOptions | None = None,
    master: str | None = None,
    closed: str | os.PathLike[str] | None = None,
) -> Report:
    """The conformance and insight tables of a recording (a path, or a DataFrame of recording rows), of
    several (a fleet's root of ``ROOT/REPLICA`` recordings, or a list of paths: read as one, each recording
    once, see :func:`kip714.spark.decode.recording_paths`) or of a ``kip714 pipeline`` output folder
    (``points/``, ``errors/``). A client instance whose pushes went to several replicas is one instance: its
    pushes are taken in time order across replicas, and the push intervals are checked between consecutive
    pushes to the same replica only (a move to another replica is the fleet's doing, not the client's).
    ``closed``: a ``_closed`` folder to use instead of the recordings' own. Returns a :class:`Report` of
    DataFrames; ``Report.write(dir)`` writes the JSON, Parquet and HTML files. ``spark``: a session (default
    :func:`kip714.spark.local_session` with ``master``).

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

    conformance = frame(conformance_rows(inst, opts), _CONFORMANCE_SCHEMA)
    insights = frame(insight_rows(agg, inst, opts), _INSIGHT_SCHEMA)
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
