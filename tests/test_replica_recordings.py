"""A fleet's recordings read as one: each replica of the endpoint records into a folder of its own under one
root, every push row carries the replica that received it (``kip714_replica``), and ``kip714 pipeline``,
``kip714 report`` and ``kip714.spark`` take the root (or several recordings) and count every push once.

The recordings are made by two real endpoints (TelemetryServer replicas r1 and r2, each with its recorder)
that clients push to over TCP with kip714's client half (ClientTelemetry and MetricsCollector); one client
moves from r2 to r1 midway, after a pause longer than twice its push interval, as a client does when the
replica it was connected to stops and the balancer sends it elsewhere. The oracle is each replica's folder
read on its own with pyarrow (the replica from the folder's name, not from the column) and the pushes'
payloads parsed with protobuf."""

from __future__ import annotations

import random
import re
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest
import server_thread

from kip714 import SubscriptionRegistry, TelemetryBroker
from kip714._protocol import decode_response, encode_request
from kip714.client.otlp_encode import MetricsCollector
from kip714.client.telemetry import ClientTelemetry
from kip714.endpoint.server import TelemetryServer
from kip714.errors import InvalidConfigError
from kip714.sinks.recorder import (
    REPLICA_COLUMN,
    ParquetRecorder,
    read_recording,
    read_recordings,
    recordings_files,
)

INTERVAL_MS = 100
#: the pause of the client that moves: more than ReportOptions.gap_factor (2) push intervals
MOVE_PAUSE_S = 0.45
#: (client id, [(replica, pushes there), ...]): the last segment ends with the terminating push
CLIENTS = (
    ("stays-on-r1", [("r1", 4)]),
    ("stays-on-r2", [("r2", 3)]),
    ("moves-r2-to-r1", [("r2", 3), ("r1", 3)]),
)


def _call(sock: socket.socket, body, correlation_id: int, client_id: str):
    sock.sendall(encode_request(body, correlation_id, client_id, 0))
    buf = b""
    deadline = time.monotonic() + 10
    while (len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]) and time.monotonic() < deadline:
        chunk = sock.recv(65536)
        assert chunk, "the replica closed the connection"
        buf += chunk
    return decode_response(buf, type(body).API_KEY, 0, size_prefixed=True)


def _drive(client_id: str, segments: list[tuple[str, int]], ports: dict[str, int], seed: int) -> list[str]:
    """Push as a KIP-714 client does (ClientTelemetry schedules every request) over one connection to the
    replica of each segment in turn; returns the replica of each push, in order (the terminating one last)."""
    collector = MetricsCollector(resource_attributes={"client.id": client_id})
    sent = collector.counter("org.apache.kafka.producer.record.send.total")
    collector.gauge("org.apache.kafka.producer.buffer.available.bytes", value_fn=lambda: 1024)
    tel = ClientTelemetry(collector, supported_compression=[0], rng=random.Random(seed))
    pushed: list[str] = []
    correlation = 0

    def now_ms() -> int:
        return time.time_ns() // 1_000_000

    for i, (replica, pushes) in enumerate(segments):
        last = i == len(segments) - 1
        with socket.create_connection(("127.0.0.1", ports[replica]), timeout=10) as sock:
            deadline = time.monotonic() + 10
            done = 0
            while done < pushes and time.monotonic() < deadline:
                wait = tel.time_to_next_update(10_000, now_ms())
                if wait > 0:
                    time.sleep(min(wait, 50) / 1000)
                    continue
                body = tel.create_request(now_ms())
                assert body is not None, tel.disabled_reason
                sent.add(3)
                correlation += 1
                response = _call(sock, body, correlation, client_id)
                tel.handle_response(response.body, now_ms())
                if type(body).API_KEY == 72:
                    assert response.body.error_code == 0, (client_id, replica, response.body)
                    pushed.append(replica)
                    done += 1
            assert done == pushes, f"{client_id}: {done} of {pushes} pushes to {replica} in time"
            if last:
                assert tel.initiate_close(now_ms())
                body = tel.create_request(now_ms())
                correlation += 1
                assert _call(sock, body, correlation, client_id).body.error_code == 0
                pushed.append(replica)
        if not last:
            time.sleep(MOVE_PAUSE_S)  # the replica went away; the client comes back through the balancer
    return pushed


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """ROOT/r1 and ROOT/r2, recorded by two endpoints the clients of :data:`CLIENTS` pushed to, and what each
    client pushed where. ROOT/_checkpoint and ROOT/notes are not recordings."""
    root = tmp_path_factory.mktemp("fleet")
    registry = SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": str(INTERVAL_MS)})
    replicas = {}
    for name in ("r1", "r2"):
        recorder = ParquetRecorder(root / name, flush_interval_s=3600, replica=name)
        replicas[name] = server_thread.ServerThread(
            TelemetryServer(TelemetryBroker(registry), port=0, recorder=recorder)
        )
    results: dict[str, list[str]] = {}
    errors: list[BaseException] = []
    ports = {name: r.port for name, r in replicas.items()}

    def run(i: int, client_id: str, segments) -> None:
        try:
            results[client_id] = _drive(client_id, segments, ports, seed=i)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i, c, s)) for i, (c, s) in enumerate(CLIENTS)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        for r in replicas.values():
            r.stop()  # closes the recorders: every row written
    assert not errors, errors
    (root / "_checkpoint").mkdir()
    (root / "notes").mkdir()
    (root / "notes" / "readme.txt").write_text("not a recording")
    return root, results


def _oracle(root):
    """Per push (instance, replica from the folder's name, received_at_ms, terminating: a terminating push
    often arrives in the millisecond of the push before it): its data points, counted by protobuf in the
    payload; the replicas' recordings read one by one with pyarrow."""
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    pushes = {}
    for replica in ("r1", "r2"):
        for row in read_recording(root / replica).to_pylist():
            md = metrics_pb2.MetricsData()
            md.ParseFromString(row["payload"] or b"")
            points = 0
            for rm in md.resource_metrics:
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        points += len(getattr(m, m.WhichOneof("data")).data_points)
            key = (row["client_instance_id"], replica, row["received_at_ms"], row["terminating"])
            assert key not in pushes
            pushes[key] = points
    return pushes


# ------------------------------------------------------------------------------------------ the recordings


@pytest.mark.integration
def test_each_push_row_names_the_replica_that_received_it(fleet):
    root, results = fleet
    for replica in ("r1", "r2"):
        table = read_recording(root / replica)
        assert set(table.column(REPLICA_COLUMN).to_pylist()) == {replica}
        assert table.num_rows == sum(pushed.count(replica) for pushed in results.values())
    both = read_recordings(root)
    assert both.num_rows == sum(len(p) for p in results.values())
    moved = [r for r in both.to_pylist() if r["client_id"] == "moves-r2-to-r1"]
    assert {r["client_instance_id"] for r in moved} and len({r["client_instance_id"] for r in moved}) == 1
    in_time = [r[REPLICA_COLUMN] for r in sorted(moved, key=lambda r: r["received_at_ms"])]
    assert in_time == results["moves-r2-to-r1"] == ["r2"] * 3 + ["r1"] * 4


@pytest.mark.integration
def test_a_root_named_with_its_own_recordings_reads_each_file_once(fleet, tmp_path):
    root, _ = fleet
    once = recordings_files(root)
    assert {f.parent.name for f in once} == {"r1", "r2"}
    link = tmp_path / "link-to-r1"
    link.symlink_to(root / "r1")
    one_file = next((root / "r2").glob("push-*.parquet"))
    again = recordings_files([root, root / "r1", str(root / "r2") + "/", link, root / "r1" / ".." / "r1", one_file])
    assert sorted(f.resolve() for f in again) == sorted(f.resolve() for f in once)
    assert read_recordings([root, link, root]).num_rows == read_recordings(root).num_rows
    assert recordings_files(root / "r1") == [f for f in once if f.parent.name == "r1"]


@pytest.mark.integration
def test_what_is_not_a_recording_says_so(fleet, tmp_path):
    root, _ = fleet
    with pytest.raises(ValueError, match="holds no recording"):
        recordings_files(root / "notes")
    with pytest.raises(FileNotFoundError):
        recordings_files([root, tmp_path / "missing"])
    deep = tmp_path / "a" / "b" / "rec"
    deep.mkdir(parents=True)
    (deep / "push-1.parquet").write_bytes(b"")
    with pytest.raises(ValueError, match="folders below it with Parquet files: b/rec"):
        recordings_files(tmp_path / "a")  # one level of recordings below a root, no deeper


@pytest.mark.integration
def test_the_commands_take_several_recordings_and_check_them_first(fleet, tmp_path, capsys):
    """``kip714 pipeline`` and ``kip714 report`` take several inputs; one that is missing or holds no recording
    is a one-line error before Spark starts."""
    from kip714.cli import build_parser, main

    root, _ = fleet
    args = build_parser().parse_args(["pipeline", str(root / "r1"), str(root / "r2"), "out", "--quiet"])
    assert args.input == [str(root / "r1"), str(root / "r2")] and args.output == "out"
    assert build_parser().parse_args(["report", str(root), str(root / "r1")]).source == [str(root), str(root / "r1")]
    for command in (
        ["pipeline", str(root), str(root / "notes"), str(tmp_path / "out")],
        ["report", str(root), str(root / "notes")],
    ):
        assert main(command) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and re.search(r"notes holds (no recording|neither)", err[0]), err


@pytest.mark.unit
def test_recorded_rows_keep_a_replica_they_were_given(tmp_path):
    """record() rows with their own replica keep it; rows without take the recorder's; a recorder without a
    replica leaves the column null."""
    named = ParquetRecorder(tmp_path / "named", flush_interval_s=3600, replica="r7")
    plain = ParquetRecorder(tmp_path / "plain", flush_interval_s=3600)
    try:
        row = {"received_at_ms": 1, "client_instance_id": "a", "error_code": 0, "payload": b""}
        named.record(row)
        named.record({**row, REPLICA_COLUMN: "elsewhere"})
        plain.record(row)
    finally:
        named.close()
        plain.close()
    assert read_recording(tmp_path / "named").column(REPLICA_COLUMN).to_pylist() == ["r7", "elsewhere"]
    assert read_recording(tmp_path / "plain").column(REPLICA_COLUMN).to_pylist() == [None]


@pytest.mark.integration
def test_a_folder_takes_one_recorder_at_a_time(tmp_path, capsys):
    """A second process recording into a folder fails at once, naming the first; once that one closed (or
    died), the folder is free."""
    from kip714.cli import main

    folder = tmp_path / "rec"
    code = (
        "import sys\n"
        "from kip714.sinks import ParquetRecorder\n"
        f"r = ParquetRecorder({str(folder)!r}, replica='r1')\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
        "r.close()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        with pytest.raises(InvalidConfigError, match=rf"pid {child.pid} \(replica r1\).*folder of its own"):
            ParquetRecorder(folder)
        # kip714 serve refuses it at start, in one line, before it listens
        assert main(["serve", "--record", str(folder), "--port", "0", "--metrics", "*"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("kip714 serve: ") and f"pid {child.pid}" in err[0], err
    finally:
        child.communicate("", timeout=30)
    assert child.returncode == 0
    ParquetRecorder(folder, replica="r2").close()


# ------------------------------------------------------------------------------------------ on Spark


@pytest.fixture(scope="module")
def pipelined(fleet, spark, tmp_path_factory):
    """``kip714 pipeline ROOT ROOT/r1 OUT --json`` in this process (the root with one of its own recordings
    again; the command takes the shared session): (OUT, its JSON summary)."""
    import contextlib
    import io
    import json

    from kip714.cli import main

    root, _ = fleet
    out = tmp_path_factory.mktemp("pipelined")
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            argv = [str(root), str(root / "r1"), str(out), "--master", "local[2]", "--json", "--quiet"]
            assert main(["pipeline", *argv]) == 0
    finally:
        spark.sparkContext.setLogLevel("ERROR")  # the command turns Spark's log off
    return out, json.loads(printed.getvalue().strip().splitlines()[-1])


def test_pipeline_over_the_root_counts_every_push_once_with_its_replica(fleet, pipelined, spark):
    from pyspark.sql import functions as F

    root, _ = fleet
    out, summary = pipelined
    want = _oracle(root)
    assert summary["input_rows"] == len(want) and summary["errors"] == 0
    assert summary["points"] == sum(want.values()) > 0
    assert summary["clients"] == len(CLIENTS)
    got = (
        spark.read.parquet(str(out / "points"))
        .groupBy("client_instance_id", REPLICA_COLUMN, "received_at_ms", "terminating")
        .agg(F.count(F.lit(1)).alias("n"))
        .collect()
    )
    assert {tuple(r[:4]): r[4] for r in got} == {k: v for k, v in want.items() if v}


def test_decode_payloads_takes_the_root(fleet, spark):
    from kip714.spark import decode_payloads, read_recording_df

    root, _ = fleet
    want = _oracle(root)
    result = decode_payloads(str(root), spark=spark)
    assert result.points.count() == sum(want.values())
    # the same recording named twice and an old recording (no kip714_replica column) beside it
    rows = read_recording_df(spark, [str(root / "r2"), str(root / "r2")]).select(REPLICA_COLUMN).collect()
    assert [r[0] for r in rows] == ["r2"] * sum(1 for k in want if k[1] == "r2")


def test_the_report_takes_a_client_that_moved_as_one_instance(fleet, pipelined, spark):
    """The instance that moved from r2 to r1 is one client with all its pushes, in time order: the move (a
    pause of more than twice its interval, the first push on r1) is no gap and no early push. The same rows
    without their replicas (as one endpoint would have recorded them) do show the gap: the replica is what
    tells a move from a client that paused."""
    from pyspark.sql import functions as F

    from kip714.spark import report

    root, results = fleet
    rep = report(str(root), spark)
    clients = {r["client_id"]: r.asDict() for r in rep.clients.collect()}
    assert set(clients) == {c for c, _ in CLIENTS}
    for client_id, pushed in results.items():
        row = clients[client_id]
        assert row["pushes"] == len(pushed) and row["terminated"]
        assert row["gaps"] == 0 and row["early_pushes"] == 0, row
    checks = {r["check"]: r for r in rep.conformance.collect()}
    assert checks["push_interval"]["status"] == "pass", checks["push_interval"]

    from kip714.spark import read_recording_df

    as_one = read_recording_df(spark, str(root)).withColumn(REPLICA_COLUMN, F.lit(None).cast("string"))
    one_endpoint = {r["client_id"]: r for r in report(as_one, spark).clients.collect()}
    assert one_endpoint["moves-r2-to-r1"]["gaps"] == 1
    assert one_endpoint["moves-r2-to-r1"]["pushes"] == len(results["moves-r2-to-r1"])

    # over the pipeline's points table (a push there is its PUSH_KEY: instance, replica, node, time, terminating)
    from_points = {r["client_id"]: r.asDict() for r in report(str(pipelined[0]), spark).clients.collect()}
    keep = ("pushes", "gaps", "early_pushes", "terminated", "first_push_ms", "last_push_ms")
    assert {c: {k: r[k] for k in keep} for c, r in from_points.items()} == {
        c: {k: r[k] for k in keep} for c, r in clients.items()
    }


def test_follow_takes_in_the_replicas_of_a_root(fleet, spark, tmp_path):
    """``--follow`` over a root streams every replica's rolled files, also of a replica that starts
    recording after the stream started; a recording of the root named again is not read twice."""
    import shutil

    from kip714.spark.pipeline import follow_pipeline, follow_sources

    root, _ = fleet
    want = _oracle(root)
    live = tmp_path / "live"
    shutil.copytree(root / "r1", live / "r1")
    sources = follow_sources([str(live), str(live / "r1"), str(live)])
    assert sources == [str(live) + "/[^_.]*/push-*.parquet"]
    running = follow_pipeline(
        [str(live), str(live / "r1")], str(tmp_path / "out"), trigger_s=0.2, spark=spark, progress=False
    )
    try:
        running.process_all_available()
        shutil.copytree(root / "r2", live / "r2")  # a replica that started later
        running.process_all_available()
    finally:
        running.stop()
    points = spark.read.parquet(str(tmp_path / "out" / "points"))
    assert sum(b.pushes for b in running.batches) == len(want)
    assert points.count() == sum(want.values())
    assert {r[0] for r in points.select(REPLICA_COLUMN).distinct().collect()} == {"r1", "r2"}
