"""The pipeline at fleet scale: recordings of a chosen number of data points, and runs of a Spark job in a
child process whose peak memory (JVM and Python workers) is sampled from ``/proc``.

Used by ``kip714 bench``'s ``pipeline-scale`` group and by the scale tests. Simulating a fleet costs about
a millisecond per push (an hour of 100 clients, 12 M points, takes minutes), so large recordings are made
from a small simulated base: :func:`fleet_recording` simulates a fleet into Parquet, and
:func:`replicate_recording` copies its rows under new client instance ids (a fresh UUID per copy and
client) and shifted ``received_at_ms`` — the payload bytes are the base's own, so every copy decodes to the
same points as the base (same metric values and point times inside the OTLP bytes) and the number of
points is exactly ``copies × base points``.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

import kip714

__all__ = [
    "fleet_recording",
    "replicate_recording",
    "recording_points",
    "ProcessSampler",
    "JobRun",
    "run_job",
]


def fleet_recording(
    directory: str | os.PathLike[str],
    producers: int = 10,
    consumers: int = 10,
    duration: str = "10m",
    seed: Any = 7,
    codec: str = "zstd",
) -> int:
    """Simulate a fleet in-process (push interval 1 s, every metric) and record every push to Parquet in
    ``directory``; returns the number of rows."""
    from kip714 import SubscriptionRegistry, TelemetryBroker
    from kip714.tools.simulate import Fleet

    reg = SubscriptionRegistry()
    reg.set("all", {"metrics": "*", "interval.ms": "1000"})
    fleet = Fleet(producers, consumers, seed=seed, codec=codec, software="mix")
    stats = fleet.run_in_process(TelemetryBroker(reg), duration, recorder=str(directory))
    return stats.recorded_rows


def replicate_recording(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    copies: int,
    rows_per_file: int = 50_000,
    shift_ms: int | None = None,
) -> int:
    """Write ``copies`` copies of the recording in ``src`` to ``dst`` (Parquet, zstd, files of at most
    ``rows_per_file`` rows, one row group each as the recorder writes them). Copy k gets new
    ``client_instance_id`` values (one UUID per original instance) and ``received_at_ms`` shifted by
    ``k × shift_ms`` (default: the base's time span). Returns the rows written."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from kip714 import kafka_uuid_string
    from kip714.sinks.recorder import read_recording

    base = read_recording(src)
    dst = pathlib.Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    if shift_ms is None:
        times = base.column("received_at_ms")
        shift_ms = int(pc.max(times).as_py() - pc.min(times).as_py()) + 1000 if base.num_rows else 0
    ids = base.column("client_instance_id")
    distinct = pc.unique(ids)
    index = pc.index_in(ids, distinct)
    written, seq = 0, 0
    pending: list[pa.Table] = []
    pending_rows = 0

    def flush():
        nonlocal seq, pending, pending_rows
        if pending:
            seq += 1
            pq.write_table(
                pa.concat_tables(pending),
                dst / f"push-replica-{seq:06d}.parquet",
                compression="zstd",
                row_group_size=max(pending_rows, 1),
            )
        pending, pending_rows = [], 0

    for k in range(copies):
        new_ids = pa.array([kafka_uuid_string(uuid.uuid4()) if k else v for v in distinct.to_pylist()], pa.string())
        copy = base.set_column(
            base.schema.get_field_index("client_instance_id"), "client_instance_id", pc.take(new_ids, index)
        )
        copy = copy.set_column(
            base.schema.get_field_index("received_at_ms"),
            "received_at_ms",
            pc.add(base.column("received_at_ms"), pa.scalar(k * shift_ms, pa.int64())),
        )
        for offset in range(0, copy.num_rows, rows_per_file):
            piece = copy.slice(offset, rows_per_file)
            pending.append(piece)
            pending_rows += piece.num_rows
            written += piece.num_rows
            if pending_rows >= rows_per_file:
                flush()
    flush()
    return written


def recording_points(directory: str | os.PathLike[str], max_output: int = 1 << 20) -> tuple[int, int]:
    """(rows, data points) of a recording, decoding every payload in this process with kip714 (the count the
    pipeline must reproduce). Payloads that fail count no points."""
    import pyarrow.parquet as pq

    from kip714 import _otlp
    from kip714._codec import decompress
    from kip714.errors import Kip714Error
    from kip714.sinks.recorder import recording_files

    rows = points = 0
    for path in recording_files(directory):
        table = pq.read_table(path, columns=["compression_type", "payload"])
        rows += table.num_rows
        raws = []
        for data, ctype in zip(table.column("payload").to_pylist(), table.column("compression_type").to_pylist()):
            try:
                raws.append(decompress(data, int(ctype), max_output) if data else b"")
            except (Kip714Error, TypeError):
                continue
        for i in range(0, len(raws), 1000):
            table_, _ = _otlp.decode_metrics_batch(raws[i : i + 1000], errors="collect")
            points += table_.num_rows
    return rows, points


# ------------------------------------------------------------------------------------ process memory


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    return kids


def _status(pid: int) -> tuple[str, dict[str, int]] | None:
    """What the sampler reads of process ``pid``: its kind (``java``, ``worker`` or ``other``) and its
    numbers (``VmHWM`` and ``VmRSS`` in bytes when it has them, ``cpu_ticks``); None once it is gone."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmHWM", "VmRSS"):
                    out[key] = int(value.split()[0]) * 1024
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
        with open(f"/proc/{pid}/stat") as f:
            st = f.read().rsplit(")", 1)[1].split()
        out["cpu_ticks"] = int(st[11]) + int(st[12])
    except (OSError, IndexError, ValueError):
        return None
    exe = cmd.split(b"\0", 1)[0]
    kind = (
        "java"
        if exe.endswith(b"java")
        else "worker"
        if b"pyspark.daemon" in cmd or b"pyspark.worker" in cmd
        else "other"
    )
    return kind, out


@dataclass
class MemoryPeaks:
    """Peaks over a run, in bytes: the JVM's resident set high-water mark (VmHWM), the JVM's largest heap
    occupancy right after a collection (``heap_live``: what the job kept alive, from the JVM's GC log; 0 when
    there was none), the largest Python worker's VmHWM, the largest sum of the workers' resident sets at one
    sample, and CPU seconds."""

    jvm_hwm: int = 0
    heap_live: int = 0
    worker_hwm: int = 0
    workers_rss: int = 0
    jvm_cpu_s: float = 0.0
    workers_cpu_s: float = 0.0
    samples: int = 0


class ProcessSampler:
    """Samples the descendants of ``pid`` every ``interval_s`` (a daemon thread, /proc only: Linux)."""

    def __init__(self, pid: int, interval_s: float = 0.2) -> None:
        self.pid, self.interval_s = pid, interval_s
        self.peaks = MemoryPeaks()
        self._cpu: dict[int, tuple[str, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kip714-sampler", daemon=True)

    def __enter__(self) -> ProcessSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)

    def sample(self) -> None:
        kids, stack, seen = _children(), [self.pid], []
        while stack:
            p = stack.pop()
            seen.append(p)
            stack.extend(kids.get(p, []))
        p_ = self.peaks
        workers_rss = 0
        for pid in seen:
            status = _status(pid)
            if status is None or "VmHWM" not in status[1]:
                continue
            kind, st = status
            self._cpu[pid] = (kind, st["cpu_ticks"])
            if kind == "java":
                p_.jvm_hwm = max(p_.jvm_hwm, st["VmHWM"])
            elif kind == "worker":
                p_.worker_hwm = max(p_.worker_hwm, st["VmHWM"])
                workers_rss += st["VmRSS"]
        p_.workers_rss = max(p_.workers_rss, workers_rss)
        tck = os.sysconf("SC_CLK_TCK")
        p_.jvm_cpu_s = sum(t for k, t in self._cpu.values() if k == "java") / tck
        p_.workers_cpu_s = sum(t for k, t in self._cpu.values() if k == "worker") / tck
        p_.samples += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)


# ------------------------------------------------------------------------------------ jobs in a child


@dataclass
class JobRun:
    """One job in a child process: wall seconds of the job (session start excluded), its result, the
    peaks, the exit status and the tail of stderr when it failed."""

    job: str
    seconds: float | None
    result: dict[str, float] = field(default_factory=dict)  # what the child printed: points, seconds, ...
    peaks: MemoryPeaks = field(default_factory=MemoryPeaks)
    returncode: int = 0
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_job(
    job: str,
    recording: str,
    output: str,
    *,
    master: str = "local[2]",
    conf: dict[str, str] | None = None,
    timeout_s: float = 1800,
    env: dict[str, str] | None = None,
) -> JobRun:
    """Run ``job`` (``kip714``: :func:`kip714.spark.pipeline.run_pipeline`; ``peer``: read the recording, the
    protobuf mapInArrow peer, write the points to Parquet by date as the pipeline does) in a fresh Python
    process with its own Spark session, sampling its memory. The child is killed after ``timeout_s``."""
    conf = dict(conf or {})
    with tempfile.NamedTemporaryFile(prefix="kip714-gc-", suffix=".log", delete=False) as gc_log:
        pass  # the JVM writes it; only its name is needed here
    # the JVM's GC log gives the live heap after each collection (extraJavaOptions: kip714's own JVM options
    # are in spark.driver.defaultJavaOptions, which this does not replace)
    conf["spark.driver.extraJavaOptions"] = " ".join(
        x for x in (conf.get("spark.driver.extraJavaOptions"), f"-Xlog:gc:file={gc_log.name}") if x
    )
    try:
        return _run_child(job, recording, output, master, conf, timeout_s, env, gc_log.name)
    finally:
        os.unlink(gc_log.name)


def heap_live_after_gc(gc_log: str) -> int:
    """The largest heap occupancy right after a collection in a JVM unified GC log (``-Xlog:gc``), in bytes:
    the ``B`` of ``A->B(C)`` on each pause line."""
    best = 0
    try:
        with open(gc_log, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = _GC_PAUSE.search(line)
                if m:
                    best = max(best, int(m.group(1)) << _GC_UNIT[m.group(2)])
    except OSError:
        return 0
    return best


_GC_PAUSE = re.compile(r"Pause (?:Young|Full)\b.*?\d+[KMG]->(\d+)([KMG])\(\d+[KMG]\)")
_GC_UNIT = {"K": 10, "M": 20, "G": 30}


def _run_child(
    job: str,
    recording: str,
    output: str,
    master: str,
    conf: dict[str, str],
    timeout_s: float,
    env: dict[str, str] | None,
    gc_log: str,
) -> JobRun:
    cmd = [sys.executable, "-m", "kip714.tools.bench.scale", job, recording, output, master, json.dumps(conf)]
    child_env = dict(os.environ, **(env or {}))
    src = str(pathlib.Path(kip714.__file__).resolve().parents[1])
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (src, child_env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env, start_new_session=True
    )
    with ProcessSampler(proc.pid) as sampler:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            out, err = proc.communicate()
            sampler.peaks.heap_live = heap_live_after_gc(gc_log)
            return JobRun(job, None, peaks=sampler.peaks, returncode=-9, error=f"timed out after {timeout_s:.0f} s")
    sampler.peaks.heap_live = heap_live_after_gc(gc_log)
    result: dict[str, float] = {}
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            result = json.loads(line)
            break
    if proc.returncode or not result:
        tail = [line for line in err.splitlines() if line.strip() and not line.startswith(("\t", "  at "))]
        return JobRun(job, None, result, sampler.peaks, proc.returncode or 1, "\n".join(tail[-5:]))
    return JobRun(job, result.get("seconds"), result, sampler.peaks)


def _child(job: str, recording: str, output: str, master: str, conf_json: str) -> int:
    from kip714 import spark as kspark

    conf = json.loads(conf_json)
    spark = kspark.local_session(master, app_name=f"kip714-scale-{job}", conf=conf)
    spark.sparkContext.setLogLevel("OFF")
    started = time.perf_counter()
    result: dict[str, float]
    if job == "kip714":
        from kip714.spark.pipeline import run_pipeline

        summary = run_pipeline(recording, output, spark=spark, progress=False)
        result = {"points": summary.points, "errors": summary.errors, "rows": summary.input_rows}
    elif job == "peer":
        result = _peer_job(spark, recording, output)
    else:
        raise SystemExit(f"unknown job {job!r}")
    result["seconds"] = time.perf_counter() - started
    print(json.dumps(result), flush=True)
    spark.stop()
    return 0


def _peer_job(spark: Any, recording: str, output: str) -> dict[str, float]:
    """The straightforward peer of the bench's spark group on a recording: mapInArrow whose function
    decompresses with zstandard and flattens with protobuf + Python (``otlp_pb.flatten``), one output batch
    per input batch, the recording's columns carried; the points written to Parquet by date."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from .spark_jobs import recording_peer_schema, recording_protobuf_mapper

    df = spark.read.parquet(recording).withColumnRenamed("error_code", "push_error_code")
    carry = [f.name for f in df.schema.fields if f.name != "payload"]
    schema = recording_peer_schema(df)

    def mapper(batches):
        return recording_protobuf_mapper(batches, carry, schema)

    points = df.mapInArrow(mapper, from_arrow_schema(schema)).withColumn(
        "date", F.to_date(F.timestamp_seconds(F.col("time_unix_nano") / F.lit(1_000_000_000)))
    )
    points.write.mode("overwrite").partitionBy("date").parquet(output.rstrip("/") + "/points")
    n = spark.read.parquet(output.rstrip("/") + "/points").count()
    return {"points": n, "errors": 0, "rows": df.count()}


if __name__ == "__main__":
    sys.exit(_child(*sys.argv[1:6]))
