"""``kip714 pipeline INPUT OUTPUT``: bulk-decode collected telemetry on Spark into a metrics table.

INPUT is a folder of frame files (``*.bin``, one or more size-prefixed request frames each, searched
recursively) or a ``kip714 serve --record`` recording (a folder of Parquet files). OUTPUT receives
``points/`` (Parquet, one row per OTLP data point, partitioned by ``date`` of the point's time, UTC) and
``errors/`` (Parquet, every input that could not be decoded, with its bytes, the Kafka error code and the
reason). A recording's own ``error_code`` (what the broker answered) is kept as ``push_error_code``:
rejected pushes are decoded too, since they carry real telemetry. Runs on local Spark (``local[*]``) unless ``--master`` names a cluster; under ``spark-submit`` the
submitted master is used:

    spark-submit --master yarn --archives venv.tar.gz#venv \\
        --conf spark.pyspark.python=./venv/bin/python \\
        "$(python -c 'import kip714.pipeline as p; print(p.__file__)')" hdfs:///telemetry/rec hdfs:///telemetry/out
"""

import pathlib
import sys
import time
from .._enums import DEFAULT_TELEMETRY_MAX_BYTES
from dataclasses import dataclass


@dataclass
class PipelineSummary:
    input_kind: str
    input_rows: int
    points: int
    errors: int
    clients: int
    metrics: int
    seconds: float

    @property
    def points_per_second(self) -> float:
        return self.points / self.seconds if self.seconds else 0.0

    def describe(self) -> str:
        return (f"{self.input_rows} {self.input_kind} rows → {self.points} points from {self.clients} clients "
                f"({self.metrics} metric names), {self.errors} errors, {self.seconds:.1f} s "
                f"({self.points_per_second:,.0f} points/s)")


def _say(progress: bool, started: float, message: str) -> None:
    if progress:
        print(f"[{time.perf_counter() - started:7.1f}s] {message}", file=sys.stderr, flush=True)


def detect_input(path: str) -> str:
    """'frames' for a folder/file of *.bin, 'recording' for Parquet."""
    p = pathlib.Path(path)
    if p.is_file():
        return "recording" if p.suffix == ".parquet" else "frames"
    if any(p.rglob("*.parquet")):
        return "recording"
    if any(p.rglob("*.bin")):
        return "frames"
    raise SystemExit(f"kip714 pipeline: {path} holds neither *.bin frame files nor a Parquet recording")


def run_pipeline(input_path: str, output_path: str, *, master: str | None = None, partitions: int | None = None,
                 max_output: int = DEFAULT_TELEMETRY_MAX_BYTES, progress: bool = True, spark=None) -> PipelineSummary:
    """Decode INPUT on Spark into OUTPUT/points and OUTPUT/errors; returns the summary."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from .. import spark as kspark

    started = time.perf_counter()
    kind = detect_input(input_path)
    if spark is None:
        _say(progress, started, f"starting Spark ({master or 'local[*]'})")
        spark = kspark.local_session(master, app_name="kip714-pipeline", partitions=partitions,
                                     progress=progress and sys.stderr.isatty())
    _say(progress, started, f"reading {kind} from {input_path}")
    if kind == "frames":
        df = (spark.read.format("binaryFile").option("recursiveFileLookup", "true")
              .option("pathGlobFilter", "*.bin").load(input_path).select(F.col("path").alias("source"),
                                                                         F.col("content").alias("frame")))
    else:
        # the broker's answer to each recorded push; rejected pushes still carry real telemetry, so they are
        # decoded too and keep this column to tell them apart
        df = spark.read.parquet(input_path).withColumnRenamed("error_code", "push_error_code")
    if partitions:
        df = df.repartition(partitions)
    input_rows = df.count()
    _say(progress, started, f"decoding {input_rows} rows")
    result = (kspark.decode_frames(df, "frame", max_output=max_output) if kind == "frames"
              else kspark.decode_payloads(df, max_output=max_output))
    result.combined.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        points = result.points.withColumn(
            "date", F.to_date(F.timestamp_seconds(F.col("time_unix_nano") / F.lit(1_000_000_000))))
        out = pathlib.Path(output_path) if "://" not in output_path else None
        points_dir = str(out / "points") if out else output_path.rstrip("/") + "/points"
        errors_dir = str(out / "errors") if out else output_path.rstrip("/") + "/errors"
        _say(progress, started, f"writing points to {points_dir}")
        points.write.mode("overwrite").partitionBy("date").parquet(points_dir)
        _say(progress, started, f"writing errors to {errors_dir}")
        result.errors.write.mode("overwrite").parquet(errors_dir)
        _say(progress, started, "summarising")
        stats = result.points.agg(F.count(F.lit(1)).alias("points"),
                                  F.countDistinct("client_instance_id").alias("clients"),
                                  F.countDistinct("metric").alias("metrics")).first()
        n_errors = result.errors.count()
    finally:
        result.combined.unpersist()
    summary = PipelineSummary(kind, input_rows, stats["points"], n_errors, stats["clients"], stats["metrics"],
                              time.perf_counter() - started)
    _say(progress, started, "done")
    return summary
