"""The Spark decoders at fleet scale (issue 18): bounded output batches, the whole pipeline on one
large partition in a small driver heap, the one-line failure, and a standalone cluster.

Sizes are kept small by shrinking the memory (a driver heap of 512 MiB in a child process) rather than by
growing the input. The oracles: every payload decoded in this process (the point count), and protobuf
(``kip714.otlp.reference``) for the rows' content."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time

import pyarrow as pa
import pytest
from run_once import built_once

import kip714
from kip714.otlp import reference as otlp_pb

pytest.importorskip("pyspark")
from kip714.spark import decode as kdecode
from kip714.spark import session as ksession
from kip714.tools.bench import scale

SRC = str(pathlib.Path(kip714.__file__).resolve().parents[1])


@pytest.fixture(scope="session")
def base_recording(tmp_path_factory):
    """A simulated fleet (mixed Java/librdkafka clients, zstd, a fixed seed), every push recorded: ~3 000
    rows, made once a run for every worker. The tests only read it."""

    def build(path: pathlib.Path) -> None:
        assert scale.fleet_recording(path, 5, 5, "5m") > 2000

    return built_once(tmp_path_factory, "spark-scale-base-recording", build)


@pytest.mark.unit
def test_output_batches_are_bounded_whatever_the_input_batch_holds(base_recording):
    """One input batch holding the whole recording gives batches within the bounds, and the same points
    (count and content) as protobuf on every payload."""
    from kip714.sinks.recorder import read_recording

    recording = read_recording(base_recording)
    table = recording.rename_columns(["push_error_code" if c == "error_code" else c for c in recording.column_names])
    batch = table.combine_chunks().to_batches()[0]
    bad = pa.RecordBatch.from_pylist(
        [dict(batch.slice(0, 1).to_pylist()[0], payload=b"\x28\xb5\x2f\xfd junk")], schema=batch.schema
    )
    carry = pa.schema([f for f in batch.schema if f.name != "payload"])
    schema = kdecode._combined_arrow_schema(carry, pa.field("payload", pa.binary()))
    budget = kdecode._Budget(max_rows=5000, max_bytes=1 << 20)
    out = list(
        kdecode._decode_payload_batches(
            iter([batch, bad]), "payload", "compression_type", 1 << 20, kdecode._Output(schema, budget)
        )
    )
    assert len(out) > 10
    assert all(b.num_rows <= 5000 and b.nbytes <= 1.05 * (1 << 20) for b in out), max(
        (b.num_rows, b.nbytes) for b in out
    )
    got = pa.Table.from_batches(out, schema=schema)
    points = got.filter(pa.compute.is_null(got.column("error_code")))
    errors = got.filter(pa.compute.is_valid(got.column("error_code")))
    # protobuf's points of every instance (one pass: the reference decoder is the slow part of this test)
    by_instance: dict[str, int] = {}
    for inst, payload in zip(batch.column("client_instance_id").to_pylist(), batch.column("payload").to_pylist()):
        by_instance[inst] = by_instance.get(inst, 0) + len(otlp_pb.flatten(kip714.decompress(payload, 4, 1 << 20)))
    assert points.num_rows == sum(by_instance.values())
    assert errors.num_rows == 1 and errors.column("error_code")[0].as_py() == 87
    # the carried columns follow their points across chunk boundaries: every instance's points, as protobuf has
    counts = points.group_by("client_instance_id").aggregate([("metric", "count")])
    assert dict(zip(counts.column(0).to_pylist(), counts.column(1).to_pylist())) == by_instance


@pytest.mark.unit
def test_frames_chunked_inside_one_value_keep_their_header_fields(base_recording):
    """One value holding hundreds of frames is decoded in several chunks: the same points as frame by frame."""
    from kip714.sinks.recorder import read_recording

    rec = read_recording(base_recording).slice(0, 400)
    frames = []
    for i, (payload, ctype, inst) in enumerate(
        zip(
            rec.column("payload").to_pylist(),
            rec.column("compression_type").to_pylist(),
            rec.column("client_instance_id").to_pylist(),
        )
    ):
        import base64
        import uuid

        body = kip714.PushTelemetryRequest(
            client_instance_id=uuid.UUID(bytes=base64.urlsafe_b64decode(inst + "==")),
            subscription_id=7,
            terminating=False,
            compression_type=ctype,
            metrics=payload,
        )
        frames.append(kip714.encode_request(body, correlation_id=i, client_id=f"c{i % 3}"))
    value = b"".join(frames)
    batch = pa.RecordBatch.from_pydict({"source": ["all"], "frame": [value]})
    extra = [
        pa.field("client_id", pa.string()),
        pa.field("correlation_id", pa.int32()),
        pa.field("client_instance_id", pa.string()),
        pa.field("subscription_id", pa.int32()),
        pa.field("terminating", pa.bool_()),
        pa.field("compression_type", pa.int8()),
    ]
    schema = kdecode._combined_arrow_schema(
        pa.schema([pa.field("source", pa.string())]), pa.field("frame", pa.binary()), extra
    )
    out = list(
        kdecode._decode_frame_batches(
            iter([batch]),
            "frame",
            1 << 20,
            kdecode._Output(schema, kdecode._Budget(max_rows=2000, max_bytes=256 << 10)),
        )
    )
    assert len(out) > 5 and all(b.num_rows <= 2000 for b in out)
    got = pa.Table.from_batches(out, schema=schema)
    assert got.column("error_code").null_count == got.num_rows
    want = [len(otlp_pb.flatten(kip714.decompress(p, 4, 1 << 20))) for p in rec.column("payload").to_pylist()]
    counts = got.group_by("correlation_id").aggregate([("metric", "count")])
    assert dict(zip(counts.column(0).to_pylist(), counts.column(1).to_pylist())) == {
        i: n for i, n in enumerate(want) if n
    }
    assert set(got.column("source").to_pylist()) == {"all"}


@pytest.fixture(scope="module")
def large_recording(base_recording, tmp_path_factory):
    """~0.19 M points in one Parquet file of ~6 000 pushes (one row group, so one partition does all the
    work): each of its input Arrow batches (up to 4 096 pushes) decodes to about twice the output bound, so
    the bounded batches are what the driver sees. Measured on 2026-11-27: with the bound lifted, even 1 M
    points (11 copies) still fit a 512 MiB driver, so this test shows the whole pipeline running in a small
    heap, with that heap set the way a user sets it; the bound itself is checked by
    test_output_batches_are_bounded_whatever_the_input_batch_holds. Two copies keep two input batches and
    cost ~8 CPU-s less than four (machine-wide CPU of this test alone, 44 against 52 s, mean of two and three
    runs); four, and the 1 M-point file, showed nothing more."""
    path = tmp_path_factory.mktemp("large") / "rec"
    scale.replicate_recording(base_recording, path, 2, rows_per_file=35_000)
    rows, points = scale.recording_points(path)
    assert rows > 4096 and points > 150_000
    return path, rows, points


def _pipeline(args, env_extra=None, timeout=600):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]), **(env_extra or {}))
    return subprocess.run(
        [sys.executable, "-m", "kip714", "pipeline", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


#: the driver JVM prints its flags (heap sizes included) as its first line of output
PRINT_FLAGS = "-XX:+PrintCommandLineFlags"
#: the suite's JVM options (tests/conftest.py) and PRINT_FLAGS, for a ``kip714 pipeline`` child's driver
PRINTING_SUBMIT_OPTS = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {PRINT_FLAGS}"


def _jvm_flags(stdout: str) -> set[str]:
    """The flags of the JVM that printed them (``PRINT_FLAGS``) in ``stdout``: ``-XX:MaxHeapSize=...`` etc."""
    line = next((ln for ln in stdout.splitlines() if "-XX:MaxHeapSize=" in ln), "")
    return set(line.split())


def _committed_heap(mib: int) -> set[str]:
    """The flags of a local session's driver with a heap of ``mib``: the whole heap committed from the start
    (initial = maximum), touched (AlwaysPreTouch), a young generation of a quarter."""
    heap, young = mib << 20, (mib // 4) << 20
    return {
        f"-XX:InitialHeapSize={heap}",
        f"-XX:MaxHeapSize={heap}",
        f"-XX:NewSize={young}",
        f"-XX:MaxNewSize={young}",
        "-XX:+AlwaysPreTouch",
    }


def test_pipeline_with_a_small_driver_heap(large_recording, tmp_path):
    """The whole pipeline in a 512 MiB driver (local[2]) on a partition of ~0.19 M points: the right number of
    points, and the written table reads back with the in-process count."""
    path, rows, points = large_recording
    proc = _pipeline(
        [str(path), str(tmp_path / "out"), "--master", "local[2]", "--json", "--quiet"],
        # the suite's JVM options (tests/conftest.py): on twice this partition C1 and the serial collector cost
        # 48 CPU-s against the JDK defaults' 61 (two runs each), for 5 s more wall
        {
            "KIP714_SPARK_DRIVER_MEMORY": "512m",
            "SPARK_SUBMIT_OPTS": PRINTING_SUBMIT_OPTS,
        },
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the heap came from KIP714_SPARK_DRIVER_MEMORY, committed and touched at start (local_session)
    assert _committed_heap(512) <= _jvm_flags(proc.stdout), proc.stdout[:3000]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["input_rows"] == rows and summary["points"] == points and summary["errors"] == 0
    import pyarrow.dataset as ds

    assert ds.dataset(tmp_path / "out" / "points", format="parquet", partitioning="hive").count_rows() == points


def test_a_failed_job_ends_with_one_line(tmp_path):
    """A job that runs the JVM out of memory exits non-zero with one line naming what ran out and the option
    to raise, not a traceback: a recording holding one 640 MB payload (zeros, a few KB on disk) read by a
    512 MiB driver."""
    import struct

    import pyarrow.parquet as pq

    from kip714.sinks.recorder import record_schema

    rec = tmp_path / "rec"
    rec.mkdir()
    schema, size = record_schema(), 640 << 20
    columns = {f.name: pa.nulls(1, f.type) for f in schema}
    columns["received_at_ms"] = pa.array([0], pa.int64())
    columns["compression_type"] = pa.array([0], pa.int8())
    # the zeros as the value's buffer, not copied; no statistics (min/max of 640 MB took 6 s to write)
    offsets = pa.py_buffer(struct.pack("<ii", 0, size))
    columns["payload"] = pa.Array.from_buffers(pa.binary(), 1, [None, offsets, pa.py_buffer(bytes(size))])
    table = pa.table(columns, schema=schema)
    pq.write_table(table, rec / "huge.parquet", compression="zstd", write_statistics=False)
    del table, columns
    proc = _pipeline(
        [str(rec), str(tmp_path / "out"), "--master", "local[1]", "--quiet", "--conf", "spark.driver.memory=512m"],
        {"SPARK_SUBMIT_OPTS": PRINTING_SUBMIT_OPTS},
    )
    # the heap came from --conf spark.driver.memory, with the same start-up settings as local_session's own
    assert _committed_heap(512) <= _jvm_flags(proc.stdout), proc.stdout[:3000]
    assert proc.returncode == 1, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert (
        last.startswith("kip714 pipeline: the Spark JVM")
        and "memory" in last
        and "--conf spark.driver.memory=1024m" in last
    ), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Py4J" not in proc.stderr


@pytest.mark.unit
def test_failure_line_when_the_gateway_broke_with_the_jvm():
    """When the OutOfMemoryError hits the JVM thread that would describe it, Py4J can no longer reach its own
    classes; the one line still says the JVM died and which setting to raise (the job above hits this about
    one run in eight)."""
    from kip714.spark.pipeline import failure_line

    class Py4JError(Exception):
        pass

    line = failure_line(
        Py4JError("py4j.reflection.TypeUtil.isInstanceOf does not exist in the JVM"),
        {"spark.driver.memory": "512m"},
        "local[1]",
    )
    assert line.startswith("the Spark JVM died") and "--conf spark.driver.memory=1024m" in line
    line = failure_line(Py4JError("py4j does not exist in the JVM"), {"spark.driver.memory": "512m"}, "local[1]")
    assert line.startswith("the Spark JVM died")  # the package itself (seen in CI)
    # whatever message reached Python, a driver JVM that has exited died (its out-of-memory handler exits it)
    vague = Py4JError("An error occurred while calling o168.parquet.")
    assert failure_line(vague, {}, "local[1]").startswith("Spark job failed")
    assert failure_line(vague, {}, "local[1]", jvm_gone=True).startswith("the Spark JVM died")
    other = failure_line(Py4JError("com.example.Missing does not exist in the JVM"), {}, "local[1]")
    assert other.startswith("Spark job failed: com.example.Missing")

    # another variant (seen in CI): the converter's isInstanceOf call itself fails, raised while the gateway's
    # connection was being lost (Python chains the Py4JNetworkError and the ConnectionResetError under it)
    class Py4JNetworkError(Exception):
        pass

    def broken():
        try:
            try:
                raise ConnectionResetError(104, "Connection reset by peer")
            except ConnectionResetError:
                raise Py4JNetworkError("Error while sending or receiving")  # noqa: B904 (Py4J chains implicitly)
        except Py4JNetworkError:
            raise Py4JError("An error occurred while calling z:py4j.reflection.TypeUtil.isInstanceOf")  # noqa: B904

    try:
        broken()
    except Py4JError as exc:
        line = failure_line(exc, {"spark.driver.memory": "512m"}, "local[1]")
    assert line.startswith("the Spark JVM died") and "--conf spark.driver.memory=1024m" in line


@pytest.mark.unit
def test_conf_option_reaches_spark(base_recording, tmp_path, capsys):
    from kip714.cli import main

    with pytest.raises(SystemExit) as exit_:  # argparse refuses it before Spark starts
        main(["pipeline", str(base_recording), str(tmp_path / "out"), "--quiet", "--conf", "bad"])
    assert exit_.value.code == 2 and "--conf takes KEY=VALUE" in capsys.readouterr().err


@pytest.mark.unit
def test_driver_java_options_follow_the_heap():
    """The JVM options of a local session's driver (the two pipelines above read them back from their JVM)."""
    assert ksession.driver_java_options("2g") == "-Xms2048m -Xmn512m -XX:+AlwaysPreTouch"
    assert ksession.driver_java_options("512m") == "-Xms512m -Xmn128m -XX:+AlwaysPreTouch"
    assert ksession.driver_java_options("nonsense") == ""
    assert ksession._mib("1048576k") == 1024 and ksession._mib("nonsense") is None


@pytest.mark.unit
def test_gc_log_gives_the_heap_after_collections(tmp_path):
    """The scale bench's live-heap figure: the largest ``after`` of the GC log's pause lines (G1's format)."""
    log = tmp_path / "gc.log"
    log.write_text(
        "[0.003s][info][gc] Using G1\n"
        "[1.261s][info][gc] GC(5) Pause Young (Concurrent Start) (Metadata GC Threshold) 42M->29M(460M) 4.549ms\n"
        "[1.285s][info][gc] GC(6) Pause Remark 930M->930M(1200M) 2.728ms\n"
        "[65.382s][info][gc] GC(157) Pause Young (Normal) (G1 Evacuation Pause) 1459M->510M(1566M) 8.098ms\n"
        "[70.1s][info][gc] GC(158) Pause Full (G1 Compaction Pause) 1G->1G(2G) 90.1ms\n"
    )
    assert scale.heap_live_after_gc(str(log)) == 1 << 30
    log.write_text(log.read_text().replace("1G->1G(2G)", "700M->300M(2G)"))
    assert scale.heap_live_after_gc(str(log)) == 510 << 20
    assert scale.heap_live_after_gc(str(tmp_path / "missing.log")) == 0


# ------------------------------------------------------------------------------------ standalone cluster


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.3)
    return False


@pytest.fixture()
def standalone_cluster(tmp_path):
    """A Spark standalone Master and one Worker (1 core, 1 GiB) on 127.0.0.1, started from the pyspark
    installation with spark-class as a deployment would run them, and a conf directory (spark-defaults.conf)
    for what is submitted to it; stopped (process groups) afterwards."""
    import pyspark

    home = pathlib.Path(pyspark.__file__).parent
    spark_class = home / "bin" / "spark-class"
    if not spark_class.exists():
        pytest.skip("this pyspark installation has no bin/spark-class")
    conf = tmp_path / "conf"  # the deployment's settings, as spark-submit reads them on a cluster's edge node
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        "spark.executor.memory 768m\n"
        "spark.driver.host 127.0.0.1\n"
        "spark.driver.bindAddress 127.0.0.1\n"
        # the suite's JIT choice (tests/conftest.py) for the executor JVM too
        f"spark.executor.extraJavaOptions {os.environ.get('SPARK_DAEMON_JAVA_OPTS', '')}\n"
    )
    env = dict(
        os.environ,
        SPARK_HOME=str(home),
        SPARK_CONF_DIR=str(conf),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(tmp_path),
        SPARK_WORKER_DIR=str(tmp_path / "work"),
        PYSPARK_PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
    )
    port = _free_port()
    procs = []
    logs = []
    try:
        log = open(tmp_path / "master.log", "w")
        logs.append(log)
        procs.append(
            subprocess.Popen(
                [
                    str(spark_class),
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    "0",
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        assert _wait_port(port, time.monotonic() + 60), (tmp_path / "master.log").read_text()[-2000:]
        log = open(tmp_path / "worker.log", "w")
        logs.append(log)
        procs.append(
            subprocess.Popen(
                [
                    str(spark_class),
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    "0",
                    f"spark://127.0.0.1:{port}",
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        deadline = time.monotonic() + 60
        while "Successfully registered with master" not in (tmp_path / "worker.log").read_text():
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-2000:]
            assert procs[-1].poll() is None, (tmp_path / "worker.log").read_text()[-2000:]
            time.sleep(0.3)
        yield f"spark://127.0.0.1:{port}", env
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)
        for log in logs:
            log.close()


#: the address of the cluster in the documentation's cluster example, which this test runs as written but for it
DOC_MASTER = "spark://spark-master:7077"


def _cluster_example() -> str:
    """The docs' shell block whose readme-test marker sends it here, as test_readme reads the docs (which
    skips it)."""
    from test_readme import BLOCKS

    found = [b for b in BLOCKS if b.marker == "skip" and "test_spark_scale.py" in b.reason]
    assert len(found) == 1 and DOC_MASTER in found[0].text, [b.id for b in found]
    return found[0].text


def test_standalone_cluster_gives_the_same_points(base_recording, standalone_cluster, tmp_path):
    """The documentation's ``spark-submit`` example against a standalone cluster (its own executor JVM and
    Python workers; the settings in the cluster's spark-defaults.conf) writes the same points as the
    in-process decode: same count and the same multiset of (instance, metric, time, value)."""
    master, env = standalone_cluster
    ws = tmp_path / "ws"
    ws.mkdir()
    rec, out = ws / "recording", ws / "out"
    shutil.copytree(base_recording, rec)
    script = "set -e\n" + _cluster_example().replace(DOC_MASTER, master)
    env = dict(env, PATH=os.pathsep.join([str(pathlib.Path(sys.executable).parent), env.get("PATH", "")]))
    proc = subprocess.run(["bash", "-c", script], cwd=ws, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    rows, points = scale.recording_points(rec)
    assert f"{rows} recording rows → {points} points" in proc.stdout and ", 0 errors," in proc.stdout, proc.stdout
    import pyarrow.dataset as ds

    dataset = ds.dataset(out / "points", format="parquet", partitioning="hive")
    assert dataset.count_rows() == points
    got = dataset.to_table(columns=["client_instance_id", "metric", "time_unix_nano", "value", "value_int"])
    from kip714.sinks.recorder import read_recording

    base = read_recording(rec)
    want = []
    for inst, payload in zip(base.column("client_instance_id").to_pylist(), base.column("payload").to_pylist()):
        for r in otlp_pb.flatten(kip714.decompress(payload, 4, 1 << 20)):
            want.append((inst, r["metric"], r["time_unix_nano"], r["value"], r["value_int"]))
    have = list(zip(*(got.column(c).to_pylist() for c in got.column_names)))
    assert sorted(have, key=repr) == sorted(want, key=repr)
