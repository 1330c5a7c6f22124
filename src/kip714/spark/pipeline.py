"""``kip714 pipeline INPUT... OUTPUT``: bulk-decode collected telemetry on Spark into a metrics table.

INPUT is a folder of frame files (``*.bin``, one or more size-prefixed request frames each, searched
recursively) or a ``kip714 serve --record`` recording (a folder of Parquet files); several INPUTs are read
as one. A folder whose sub-folders are recordings (a fleet's root: each replica of ``kip714 proxy`` records
into ``ROOT/REPLICA``) stands for all of them; a recording named twice, or together with a root that holds
it, is read once. OUTPUT receives ``points/`` (Parquet, one row per OTLP data point, partitioned by ``date``
of the point's time, UTC; ``kip714_replica`` is the replica that received the point's push) and
``errors/`` (Parquet, every input that could not be decoded, with its bytes, the Kafka error code and the
reason). A recording's own ``error_code`` (what the broker answered) is kept as ``push_error_code``:
rejected pushes are decoded too, since they carry real telemetry. Runs on local Spark (local[*]) unless
--master names a cluster. Under spark-submit, run the file kip714.spark.submit prints (it takes the same
arguments and uses the master spark-submit was given):

    spark-submit --master yarn --archives venv.tar.gz#venv \\
        --conf spark.pyspark.python=./venv/bin/python \\
        "$(python -m kip714.spark.submit --path)" hdfs:///telemetry/rec hdfs:///telemetry/out

Memory does not grow with the input: partitions hold at most 32 MiB of input files, the decoders hand Spark
batches of at most 65536 rows / 16 MiB, and nothing is cached. --conf KEY=VALUE passes any Spark setting
(repeatable), e.g. --conf spark.driver.memory=8g; a job that fails ends with one line saying what ran out
and what to raise (--verbose shows Spark's log and the traceback).
"""

from __future__ import annotations

import argparse
import errno
import functools
import json
import os
import pathlib
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, cast

from .._enums import DEFAULT_TELEMETRY_MAX_BYTES
from .._extras import require
from .._units import DURATION_HELP, duration, size
from ..errors import SparkJobError

if TYPE_CHECKING:  # pyspark is the spark extra: imported by the functions that need it
    from pyspark import Accumulator
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from .decode import DecodeResult


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
        return (
            f"{self.input_rows} {self.input_kind} rows → {self.points} points from {self.clients} clients "
            f"({self.metrics} metric names), {self.errors} errors, {self.seconds:.1f} s "
            f"({self.points_per_second:,.0f} points/s)"
        )


def _say(progress: bool, started: float, message: str) -> None:
    if progress:
        print(f"[{time.perf_counter() - started:7.1f}s] {message}", file=sys.stderr, flush=True)


def detect_inputs(paths: str | Sequence[str]) -> str:
    """What the INPUTs hold, all of them: 'frames' or 'recording' (:func:`detect_input` of each);
    ValueError when they mix the two or there are none."""
    items = [paths] if isinstance(paths, str) else list(paths)
    kinds = {detect_input(p) for p in items}
    if len(kinds) != 1:
        raise ValueError("no input given" if not kinds else "the inputs mix *.bin frame files and recordings")
    return kinds.pop()


def detect_input(path: str) -> str:
    """'frames' for a folder/file of *.bin, 'recording' for Parquet; FileNotFoundError when ``path`` does not
    exist, ValueError when it holds neither."""
    if "://" in path:  # a URL Spark reads (hdfs://, s3a://…): a recording unless it names a frame file
        return "frames" if path.endswith(".bin") else "recording"
    p = pathlib.Path(path)
    if not p.exists():
        raise FileNotFoundError(errno.ENOENT, "does not exist", path)
    if p.is_file():
        return "recording" if p.suffix == ".parquet" else "frames"
    if any(p.rglob("*.parquet")):
        return "recording"
    if any(p.rglob("*.bin")):
        return "frames"
    raise ValueError(f"{path} holds neither *.bin frame files nor a Parquet recording")


def _input_bytes(spark: SparkSession, path: str) -> int | None:
    """Bytes under ``path`` (through Hadoop's FileSystem, so any URL Spark reads), or None."""
    try:
        jvm = spark.sparkContext._jvm
        if jvm is None:  # no JVM gateway (Spark Connect)
            return None
        jpath = jvm.org.apache.hadoop.fs.Path(path)
        fs = jpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        return int(fs.getContentSummary(jpath).getLength())
    except Exception:  # Spark Connect, or a file system that cannot say: keep Spark's own split
        return None


def _size_bytes(text: str) -> int:
    """A Spark size ("33554432", "128MB", "32m", "1g") in bytes."""
    text = text.strip().lower().rstrip("b")
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def _error_counter(spark: SparkSession) -> Accumulator[int] | None:
    try:
        return spark.sparkContext.accumulator(0)
    except Exception:  # Spark Connect has no accumulators: the errors pass then always runs
        return None


def run_pipeline(
    input_path: str | Sequence[str],
    output_path: str,
    *,
    master: str | None = None,
    partitions: int | None = None,
    max_output: int = DEFAULT_TELEMETRY_MAX_BYTES,
    progress: bool = True,
    spark: SparkSession | None = None,
    conf: dict[str, str] | None = None,
    log_level: str | None = None,
) -> PipelineSummary:
    """Decode INPUT on Spark into OUTPUT/points and OUTPUT/errors; returns the summary. ``input_path``: one
    input or several, read as one (frame folders, or recordings and roots of recordings: see
    :func:`kip714.spark.decode.recording_paths`).

    ``conf``: Spark settings for the session this call starts (ignored when ``spark`` is given).
    Memory does not grow with the input: input partitions are bounded in bytes (Spark's
    ``spark.sql.files.maxPartitionBytes``; a recording in fewer, larger files than that is repartitioned by
    its size), the decoders' output batches are bounded in rows and bytes, and nothing is cached: the points
    are written in one decoding pass that also counts the inputs that fail, and the errors pass (decoding
    again, keeping only the failures) runs only when there are some."""
    require("spark", "kip714.spark.pipeline.run_pipeline")
    from pyspark.sql import functions as F

    from . import decode as kspark
    from . import session as ksession

    started = time.perf_counter()
    inputs = [input_path] if isinstance(input_path, str) else list(input_path)
    kind = detect_inputs(inputs)
    if spark is None:
        _say(progress, started, f"starting Spark ({master or 'local[*]'})")
        spark = ksession.local_session(
            master,
            app_name="kip714-pipeline",
            partitions=partitions,
            progress=progress and sys.stderr.isatty(),
            conf=conf,
        )
    if log_level:
        spark.sparkContext.setLogLevel(log_level)
    _say(progress, started, f"reading {kind} from {', '.join(inputs)}")
    if kind == "frames":
        df = (
            spark.read.format("binaryFile")
            .option("recursiveFileLookup", "true")
            .option("pathGlobFilter", "*.bin")
            .load(list(dict.fromkeys(inputs)))
            .select(F.col("path").alias("source"), F.col("content").alias("frame"))
            .dropDuplicates(["source"])  # a folder named twice, or with a folder inside it
        )
    else:
        # decode_payloads keeps the broker's answer to each push as push_error_code: rejected pushes still
        # carry real telemetry, so they are decoded too
        df = kspark.read_recording_df(spark, inputs)  # with the _open/ parts of a live or killed endpoint
    if partitions:
        df = df.repartition(partitions)
    else:
        size = sum(_input_bytes(spark, p) or 0 for p in dict.fromkeys(inputs))
        split_setting = spark.conf.get("spark.sql.files.maxPartitionBytes", str(ksession.PARTITION_BYTES))
        split = _size_bytes(cast(str, split_setting))  # (not None: a default is given)
        wanted = -(-size // split) if size else 0
        if wanted > df.rdd.getNumPartitions():  # files larger than a partition that Spark cannot split
            _say(progress, started, f"repartitioning {size / 1e6:,.0f} MB into {wanted} partitions")
            df = df.repartition(wanted)
    input_rows = df.count()
    _say(progress, started, f"decoding {input_rows} rows in {df.rdd.getNumPartitions()} partitions")
    bounds = kspark._Bounds(kspark.MAX_BATCH_ROWS, kspark.MAX_BATCH_BYTES)

    def decode(*, emit_points: bool = True, error_counter: Accumulator[int] | None = None) -> DecodeResult:
        job = kspark._Pass(max_output, bounds, emit_points, error_counter)
        if kind == "frames":
            return kspark._decode_frames(df, "frame", job)
        return kspark._decode_payloads(df, "payload", "compression_type", job)

    out = pathlib.Path(output_path) if "://" not in output_path else None
    points_dir = str(out / "points") if out else output_path.rstrip("/") + "/points"
    errors_dir = str(out / "errors") if out else output_path.rstrip("/") + "/errors"
    counter = _error_counter(spark)
    result = decode(error_counter=counter)
    points = result.points.withColumn(
        "date", F.to_date(F.timestamp_seconds(F.col("time_unix_nano") / F.lit(1_000_000_000)))
    )
    _say(progress, started, f"writing points to {points_dir}")
    points.write.mode("overwrite").partitionBy("date").parquet(points_dir)
    if counter is None or counter.value:
        _say(
            progress,
            started,
            f"writing errors to {errors_dir}"
            + (f" (a second decoding pass for {counter.value} failed inputs)" if counter is not None else ""),
        )
        decode(emit_points=False).errors.write.mode("overwrite").parquet(errors_dir)
    else:
        _say(progress, started, f"no input failed; writing an empty errors table to {errors_dir}")
        spark.createDataFrame([], result.errors.schema).write.mode("overwrite").parquet(errors_dir)
    _say(progress, started, "summarising")
    # with the schema: when every input failed, partitionBy wrote no file Spark could infer one from
    stats = (
        spark.read.schema(points.schema)
        .parquet(points_dir)
        .agg(
            F.count(F.lit(1)).alias("points"),
            F.countDistinct("client_instance_id").alias("clients"),
            F.countDistinct("metric").alias("metrics"),
        )
        .first()
    )
    assert stats is not None  # an aggregate without grouping has one row
    n_errors = spark.read.schema(result.errors.schema).parquet(errors_dir).count()
    summary = PipelineSummary(
        kind, input_rows, stats["points"], n_errors, stats["clients"], stats["metrics"], time.perf_counter() - started
    )
    _say(progress, started, "done")
    return summary


def quiet_gateway_errors() -> None:
    """Drop the log records Py4J writes from its own modules (through the root logger, with a traceback) when
    its connection to a dying JVM breaks: the command line says what happened in one line instead
    (:func:`failure_line`; ``--verbose`` shows everything)."""
    import logging

    def not_py4j(record: logging.LogRecord) -> bool:
        return f"{os.sep}py4j{os.sep}" not in (record.pathname or "")

    logging.getLogger().addFilter(not_py4j)


def jvm_exited(wait_s: float = 2.0) -> bool:
    """Whether this process's Spark JVM (the one pyspark launched) has exited, or does within ``wait_s``: after
    a failure, the sure sign that it died (its out-of-memory handler exits it), whatever message reached Python."""
    import subprocess

    try:
        from pyspark import SparkContext

        proc = getattr(SparkContext._gateway, "proc", None)
        if proc is None:
            return False
        proc.wait(timeout=wait_s)
        return True
    except subprocess.TimeoutExpired:
        return False
    except Exception:  # no pyspark, no gateway: nothing to tell
        return False


def failure_line(
    exc: BaseException, conf: dict[str, str] | None = None, master: str | None = None, jvm_gone: bool = False
) -> str:
    """One line saying why a Spark job failed and which setting to raise (the message of
    :class:`~kip714.errors.SparkJobError`, after ``kip714 pipeline:`` on the command line).
    ``jvm_gone``: the driver's JVM is known to have exited (:func:`jvm_exited`)."""
    from .session import default_driver_memory

    conf = conf or {}
    text = _failure_text(exc)
    local = master is None or master.startswith("local")
    key = "spark.driver.memory" if local else "spark.executor.memory"
    current = conf.get(key) or (default_driver_memory() if local else "1g")
    more = _double(current)
    where = "the Spark JVM" if local else "a Spark executor JVM"
    if (
        "Java heap space" in text
        or "GC overhead limit exceeded" in text
        or "Cannot reserve additional contiguous bytes" in text
    ):
        return f"{where} ran out of heap memory ({key}={current}); raise it, e.g. --conf {key}={more}"
    if "Direct buffer memory" in text or "OutOfDirectMemoryError" in text:
        return (
            f"{where} ran out of off-heap (direct) memory for Arrow batches (it is capped at "
            f"the heap, {key}={current}); raise it, e.g. --conf {key}={more}"
        )
    if "OutOfMemoryError" in text:
        return f"{where} ran out of memory ({key}={current}); raise it, e.g. --conf {key}={more}"
    if "MemoryError" in text or "Python worker exited unexpectedly" in text:
        return (
            "a Python worker ran out of memory or was killed; give it more with "
            "--conf spark.executor.pyspark.memory=2g, or fewer rows per batch with "
            "--conf spark.sql.execution.arrow.maxRecordsPerBatch=1024"
        )
    no_details = type(exc).__name__ == "Py4JJavaError" and sum(1 for line in text.splitlines() if line.strip()) <= 1
    # Py4J's own classes unreachable ("py4j.reflection… does not exist in the JVM"): the gateway broke while the
    # JVM was failing (seen when an OutOfMemoryError hits the thread describing the error)
    gateway_broken = re.search(r"\bpy4j(\.\S*)? does not exist in the JVM", text) is not None
    # the gateway's connection broke while the error was being described (pyspark's converter calls
    # py4j.reflection.TypeUtil.isInstanceOf on a JVM already gone): the exceptions Python chained on the way
    lost = _chain_has(exc, ("Py4JNetworkError", "ConnectionResetError", "ConnectionRefusedError", "BrokenPipeError"))
    if (
        type(exc).__name__ in ("Py4JNetworkError", "ConnectionRefusedError")
        or "Answer from Java side is empty" in text
        or "SparkContext was shut down" in text
        or no_details
        or gateway_broken
        or lost
        or jvm_gone
    ):
        # a Java error it can no longer describe
        return f"the Spark JVM died (most often out of memory: {key}={current}); raise it, e.g. --conf {key}={more}"
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    return f"Spark job failed: {first[:300]} (--verbose shows the traceback)"


def _chain_has(exc: BaseException, names: tuple[str, ...]) -> bool:
    """Whether ``exc`` or an exception it was raised from or during (``__cause__``/``__context__``) is of a
    type named in ``names`` (bounded walk)."""
    seen: BaseException | None = exc
    for _ in range(20):
        if seen is None:
            return False
        if type(seen).__name__ in names:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _failure_text(exc: BaseException) -> str:
    """The message of ``exc`` and, for a Py4J error, of its Java exception and every cause (the JVM may be
    gone: then only what Python holds)."""
    parts = []
    try:
        parts.append(str(exc))
    except Exception:
        pass
    java = getattr(exc, "java_exception", None)
    for _ in range(20):  # a cause chain is short; bounded anyway
        if java is None:
            break
        try:
            parts.append(str(java.toString()))
            java = java.getCause()
        except Exception:  # the JVM is gone (its OOM handler exits it): nothing more to ask
            parts.append("Answer from Java side is empty")
            break
    return "\n".join(p for p in parts if p) or repr(exc)


def _double(size: str) -> str:
    """Twice a Spark memory size ("6026m" → "12052m", "2g" → "4g")."""
    from .session import _memory_size

    parsed = _memory_size(size)
    return f"{2 * parsed[0]}{parsed[1] or 'b'}" if parsed else "a larger value"


# ------------------------------------------------------------------------------------------ --follow


@dataclass
class BatchProgress:
    """One micro-batch of a following pipeline: what it read and wrote, and how long after the pushes."""

    batch_id: int
    pushes: int
    points: int
    errors: int
    seconds: float
    #: milliseconds from a push reaching the endpoint (``received_at_ms``) to its points being in the table:
    #: the newest push of the batch (``delay_min_ms``) and the oldest (``delay_max_ms``)
    delay_min_ms: int | None
    delay_max_ms: int | None

    def describe(self) -> str:
        delay = (
            f", push→table {self.delay_min_ms / 1000:.1f}–{self.delay_max_ms / 1000:.1f} s"
            if self.delay_min_ms is not None and self.delay_max_ms is not None  # (both or neither)
            else ""
        )
        return (
            f"batch {self.batch_id}: {self.pushes} pushes → {self.points} points, {self.errors} errors in "
            f"{self.seconds:.1f} s{delay}"
        )


def follow_sources(paths: str | Sequence[str]) -> list[str]:
    """What ``--follow`` streams for these inputs, one Spark file source each: a recording folder is itself
    (its rolled files), a root of recordings (a local folder that is not a recording but holds some, a fleet's
    ``ROOT/REPLICA``) the glob of its replicas' rolled files, ``ROOT/[^_.]*/push-*.parquet``, which also
    takes in replicas that start recording later. An input named twice, or a recording inside a root also
    given, is dropped (it would be read twice). A local input that does not exist yet is created (and followed
    as a recording)."""
    from ..sinks.recorder import is_recording

    items = [paths] if isinstance(paths, str) else list(paths)
    roots: set[pathlib.Path] = set()
    kinds: dict[str, pathlib.Path | None] = {}  # input -> its resolved folder (None: a URL)
    for item in items:
        if "://" in item:
            kinds.setdefault(item, None)
            continue
        p = pathlib.Path(item)
        p.mkdir(parents=True, exist_ok=True)
        resolved = p.resolve()
        if resolved in kinds.values():
            continue
        kinds[item] = resolved
        if not is_recording(p) and any(
            c.is_dir() and not c.name.startswith(("_", ".")) and is_recording(c) for c in p.iterdir()
        ):
            roots.add(resolved)
    out = []
    for item, folder in kinds.items():
        if folder is None:
            out.append(item)
        elif folder in roots:
            out.append(re.sub(r"([\\{}\[\]*?])", r"\\\1", item.rstrip("/")) + "/[^_.]*/push-*.parquet")
        elif folder.parent not in roots or folder.name.startswith(("_", ".")):
            out.append(item)
    return out


class FollowingPipeline:
    """A running ``kip714 pipeline --follow``: Spark Structured Streaming over a recording directory that is
    still being written (new ``push-*.parquet`` files are picked up as they appear), or over several, or over
    a root of them (:func:`follow_sources`), appending each micro-batch's points and errors to
    ``OUTPUT/points/batch=N/`` and ``OUTPUT/errors/batch=N/``.

    Exactly once: the checkpoint (``OUTPUT/_checkpoint`` by default) records which files each batch read
    before the batch runs and which batches completed; a batch that was interrupted is run again over the
    same files after a restart and *overwrites* its own ``batch=N`` folders, so a restart neither loses nor
    duplicates a push (restart it with the same inputs, in the same order: each is a source of the query).
    Reading ``OUTPUT/points`` gives the table (``batch`` and ``date`` are partition columns). ``progress``
    (a callable) receives a :class:`BatchProgress` per batch.

    Delay from push to table = the recorder's flush interval (1 s by default) + up to one trigger interval
    + the micro-batch. Measured with ``kip714 serve`` (recorder flushing every 1 s), 20 simulated clients
    pushing every second over TCP and ``trigger_s=1`` on local[2] (2 shared cores): per micro-batch the
    newest push reached the table after a median 1.7 s, the oldest after 2.6 s, at most 4.9 s."""

    def __init__(
        self,
        spark: SparkSession,
        input_path: str | Sequence[str],
        output_path: str,
        *,
        trigger_s: float = 5.0,
        checkpoint: str | None = None,
        max_files_per_trigger: int | None = None,
        max_output: int = DEFAULT_TELEMETRY_MAX_BYTES,
        progress: Callable[[BatchProgress], object] | None = None,
    ) -> None:
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import from_arrow_schema

        from ..sinks.recorder import record_schema
        from .decode import decode_payloads

        self.spark = spark
        out = output_path.rstrip("/")
        self.points_dir, self.errors_dir = out + "/points", out + "/errors"
        self.checkpoint = checkpoint or out + "/_checkpoint"
        self.batches: list[BatchProgress] = []
        reader = spark.readStream.schema(from_arrow_schema(record_schema()))
        if max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", int(max_files_per_trigger))
        streams = [reader.parquet(source) for source in follow_sources(input_path)]
        stream = functools.reduce(lambda a, b: a.union(b), streams).withColumnRenamed("error_code", "push_error_code")

        def write_batch(df: DataFrame, batch_id: int) -> None:
            from pyspark import StorageLevel

            started = time.perf_counter()
            result = decode_payloads(df, max_output=max_output).persist(StorageLevel.MEMORY_AND_DISK)
            try:
                points = result.points.withColumn(
                    "date", F.to_date(F.timestamp_seconds(F.col("time_unix_nano") / F.lit(1_000_000_000)))
                )
                # overwrite this batch's own folders: a batch replayed after a restart replaces, never adds
                points.write.mode("overwrite").partitionBy("date").parquet(f"{self.points_dir}/batch={batch_id}")
                result.errors.write.mode("overwrite").parquet(f"{self.errors_dir}/batch={batch_id}")
                stats = result.combined.agg(
                    F.count(F.when(F.col("error_code").isNull(), 1)).alias("points"),
                    F.count(F.col("error_code")).alias("errors"),
                ).first()
                span = df.agg(
                    F.count(F.lit(1)).alias("n"),
                    F.min("received_at_ms").alias("t0"),
                    F.max("received_at_ms").alias("t1"),
                ).first()
            finally:
                result.combined.unpersist()
            assert stats is not None and span is not None  # aggregates without grouping have one row
            now_ms = int(time.time() * 1000)
            p = BatchProgress(
                batch_id,
                span["n"],
                stats["points"],
                stats["errors"],
                time.perf_counter() - started,
                now_ms - span["t1"] if span["t1"] is not None else None,
                now_ms - span["t0"] if span["t0"] is not None else None,
            )
            self.batches.append(p)
            if progress is not None:
                progress(p)

        self.query: StreamingQuery = (
            stream.writeStream.foreachBatch(write_batch)
            .option("checkpointLocation", self.checkpoint)
            .trigger(processingTime=f"{max(0.1, float(trigger_s))} seconds")
            .queryName("kip714-pipeline-follow")
            .start()
        )

    def process_all_available(self) -> None:
        """Block until every file present now has been processed."""
        self.query.processAllAvailable()

    def await_termination(self, timeout_s: float | None = None) -> bool | None:
        """Wait for the query to end: within ``timeout_s`` seconds (then whether it did), or for good (None)."""
        if timeout_s is None:
            return self.query.awaitTermination()
        # pyspark takes int or float seconds (it checks for both) but annotates the timeout as int
        return self.query.awaitTermination(timeout_s)  # type: ignore[arg-type]

    def stop(self) -> None:
        self.query.stop()


def follow_pipeline(
    input_path: str | Sequence[str],
    output_path: str,
    *,
    trigger_s: float = 5.0,
    master: str | None = None,
    partitions: int | None = None,
    checkpoint: str | None = None,
    max_files_per_trigger: int | None = None,
    max_output: int = DEFAULT_TELEMETRY_MAX_BYTES,
    progress: bool = True,
    spark: SparkSession | None = None,
    conf: dict[str, str] | None = None,
) -> FollowingPipeline:
    """Start following ``input_path`` (a recording being written, a root of them, or several: see
    :func:`follow_sources`) into ``output_path``; returns the :class:`FollowingPipeline` (``stop()`` it; a
    later call with the same inputs and output resumes where it stopped)."""
    require("spark", "kip714.spark.pipeline.follow_pipeline")
    from .session import local_session

    if spark is None:
        spark = local_session(master, app_name="kip714-pipeline-follow", partitions=partitions, conf=conf)
    started = time.perf_counter()

    def show(p: BatchProgress) -> None:
        _say(progress, started, p.describe())

    return FollowingPipeline(
        spark,
        input_path,
        output_path,
        trigger_s=trigger_s,
        checkpoint=checkpoint,
        max_files_per_trigger=max_files_per_trigger,
        max_output=max_output,
        progress=show if progress else None,
    )


# ------------------------------------------------------------------------------------------ the job as a command


def _conf_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"--conf takes KEY=VALUE (e.g. spark.driver.memory=8g), not {text!r}")
    return key.strip(), value.strip()


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The job's arguments: ``kip714 pipeline`` and :mod:`kip714.spark.submit` (under spark-submit) take the
    same."""
    p.add_argument(
        "input",
        nargs="+",
        help="folder of *.bin frame files, or a kip714 serve/proxy --record folder (a URL such as "
        "hdfs://… is read as a recording), or a folder of such recordings (a fleet's ROOT/REPLICA); "
        "several are read as one, each recording once",
    )
    p.add_argument("output", help="output folder: points/ and errors/ are written there")
    p.add_argument("--master", help="Spark master URL (default local[*], or the one spark-submit gives)")
    p.add_argument("--partitions", type=int, help="repartition the input into N partitions before decoding")
    p.add_argument(
        "--max-output",
        type=size,
        default=DEFAULT_TELEMETRY_MAX_BYTES,
        help=f"largest decompressed payload accepted per row (default {DEFAULT_TELEMETRY_MAX_BYTES})",
    )
    p.add_argument(
        "--conf",
        type=_conf_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, as with spark-submit (repeatable), e.g. --conf spark.driver.memory=8g; "
        "kip714's defaults: driver heap 768m committed at start (less on machines under 6 GiB), "
        "spark.sql.files.maxPartitionBytes=32 MiB, Arrow batches of 4096 rows / 16 MiB",
    )
    p.add_argument(
        "--follow",
        action="store_true",
        help="keep following recordings that serve/proxy are still writing (Spark Structured "
        "Streaming; a root of recordings also takes in replicas that start later): append each "
        "micro-batch to OUTPUT/points and OUTPUT/errors, exactly once across restarts (checkpoint in "
        "OUTPUT/_checkpoint); stop with Ctrl-C",
    )
    p.add_argument(
        "--trigger",
        type=duration,
        default="5s",
        metavar="DURATION",
        help=f"--follow: how often to look for new files ({DURATION_HELP}; default 5s)",
    )
    p.add_argument("--checkpoint", help="--follow: checkpoint folder (default OUTPUT/_checkpoint)")
    p.add_argument("--max-files-per-trigger", type=int, help="--follow: at most N new files per micro-batch")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument(
        "--verbose", action="store_true", help="Spark's own warnings and, when the job fails, the full traceback"
    )


def run_job(args: argparse.Namespace) -> int:
    """Run the job :func:`add_arguments` describes and print its summary (JSON with ``--json``); returns the
    exit status (0). An input that does not exist or holds nothing to decode raises before Spark starts
    (FileNotFoundError, ValueError); a failed Spark job raises :class:`~kip714.errors.SparkJobError`, whose
    message says what ran out and which setting to raise (``--verbose``: the Spark error itself)."""
    if args.follow:
        return _follow_job(args)
    conf = dict(args.conf)
    # a missing or unreadable input, or a folder that holds no recording, is bad input, not a Spark failure
    if detect_inputs(args.input) == "recording":
        from .decode import recording_paths

        recording_paths(args.input)
    if not args.verbose:
        quiet_gateway_errors()
    try:
        summary = run_pipeline(
            args.input,
            args.output,
            master=args.master,
            partitions=args.partitions,
            max_output=args.max_output,
            progress=not args.quiet,
            conf=conf,
            log_level=None if args.verbose else "OFF",
        )
    except Exception as exc:  # a Spark/Py4J failure: one line, not a 60-line traceback (--verbose shows it)
        if args.verbose:
            raise
        local = args.master is None or args.master.startswith("local")
        raise SparkJobError(failure_line(exc, conf, args.master, jvm_gone=local and jvm_exited())) from exc
    if args.json:
        print(json.dumps({**asdict(summary), "points_per_second": summary.points_per_second}))
    else:
        print(summary.describe())
    return 0


def _follow_job(args: argparse.Namespace) -> int:
    running = follow_pipeline(
        args.input,
        args.output,
        trigger_s=args.trigger,
        master=args.master,
        partitions=args.partitions,
        checkpoint=args.checkpoint,
        max_files_per_trigger=args.max_files_per_trigger,
        max_output=args.max_output,
        progress=not args.quiet,
        conf=dict(args.conf),
    )
    try:
        running.await_termination()
    except KeyboardInterrupt:
        pass
    finally:
        running.stop()
    if args.json:
        print(json.dumps([asdict(b) for b in running.batches]))
    else:
        print(
            f"{len(running.batches)} micro-batches, {sum(b.pushes for b in running.batches)} pushes, "
            f"{sum(b.points for b in running.batches)} points"
        )
    return 0
