"""``--record-sync``: a push answered "accepted" is in the recording even when the endpoint is killed with
SIGKILL mid-load; without it the last flush window is lost (the contrast that shows the check can fail).
Also: a failed commit closes the connection instead of answering, a truncated part a crash left does not
break reading, and answers keep request order."""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time

import pytest
import server_thread

from kip714 import SubscriptionRegistry, TelemetryBroker
from kip714._protocol import GetTelemetrySubscriptionsRequest, PushTelemetryRequest, decode_response, encode_request
from kip714.endpoint.server import TelemetryServer
from kip714.sinks.recorder import OPEN_DIR, ParquetRecorder, read_recording
from kip714.tools.bench.groups.record import PushLoad, ServeProcess, push_load_async

pytest.importorskip("pyarrow")
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")


def _kill_mid_load(record_dir, sync: bool, min_accepted: int = 300, min_seconds: float = 2.5):
    """Push from 6 clients (each pipelining 4 pushes), SIGKILL ``kip714 serve`` once ``min_accepted`` pushes
    were seen accepted and ``min_seconds`` passed (past the first flushes), the load still running; return
    what the clients saw and the recording on disk."""
    serve = ServeProcess(str(record_dir), sync)

    async def drive():
        load = PushLoad()
        started = time.monotonic()
        task = asyncio.create_task(push_load_async("127.0.0.1", serve.port, 60.0, clients=6, out=load))
        deadline = started + 30
        while (
            time.monotonic() < deadline
            and not task.done()
            and (len(load.accepted) < min_accepted or time.monotonic() - started < min_seconds)
        ):
            await asyncio.sleep(0.02)
        running = not task.done()
        await asyncio.get_running_loop().run_in_executor(None, serve.kill)
        await asyncio.wait_for(task, 30)
        return load, running

    try:
        load, running = asyncio.run(drive())
    finally:
        if serve.proc.poll() is None:
            serve.kill()
    assert running, "the load ended before the kill: " + "".join(serve.log[-10:])
    assert load.errors > 0, "the clients saw the server die mid-load"
    assert len(load.accepted) >= min_accepted
    return load, read_recording(record_dir)


def _lost(load, table) -> list[bytes]:
    recorded = dict(zip(table.column("payload").to_pylist(), table.column("client_instance_id").to_pylist()))
    from kip714.broker.subscriptions import kafka_uuid_string

    lost = []
    for payload, instance in load.accepted.items():
        if recorded.get(payload) != kafka_uuid_string(instance):
            lost.append(payload)
    return lost


def test_sigkill_mid_load_loses_no_accepted_push_with_record_sync(tmp_path):
    load, table = _kill_mid_load(tmp_path / "rec", sync=True)
    lost = _lost(load, table)
    print(f"sync: {len(load.accepted)} accepted, {table.num_rows} rows recorded, {len(lost)} lost")
    assert not lost, f"{len(lost)} of {len(load.accepted)} pushes answered accepted are not in the recording"
    # what the killed process left is read: parts in _open/ (nothing rolled yet) and every row whole
    assert list((tmp_path / "rec" / OPEN_DIR).glob("part-*.parquet"))
    assert set(table.column("error_code").to_pylist()) == {0}


def test_without_record_sync_a_sigkill_loses_accepted_pushes(tmp_path):
    """The contrast: the same kill without --record-sync loses the pushes of the last flush window (up to a
    second of them); the check above would catch that."""
    load, table = _kill_mid_load(tmp_path / "rec", sync=False)
    lost = _lost(load, table)
    print(f"no sync: {len(load.accepted)} accepted, {table.num_rows} rows recorded, {len(lost)} lost")
    assert lost, "expected the unflushed pushes to be lost without --record-sync"
    assert table.num_rows < len(load.accepted) + sum(load.codes.values())


def _raw(port: int, frames: bytes, answers: list[int], timeout: float = 10.0):
    """Send ``frames`` at once, read one response per API key in ``answers`` (None when the server closes)."""
    out = []
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(frames)
        buf = b""
        for api_key in answers:
            while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
                try:
                    chunk = s.recv(65536)
                except ConnectionResetError:
                    chunk = b""
                if not chunk:
                    return out, True
                buf += chunk
            size = struct.unpack(">i", buf[:4])[0]
            out.append(decode_response(buf[4 : 4 + size], api_key, 0))
            buf = buf[4 + size :]
    return out, False


def _server(tmp_path, **recorder_kw):
    registry = SubscriptionRegistry()
    registry.set("all", {"metrics": "*"})
    recorder = ParquetRecorder(tmp_path / "rec", **recorder_kw)
    return server_thread.ServerThread(TelemetryServer(TelemetryBroker(registry), port=0, recorder=recorder)), recorder


def _get_then_pushes(port: int, n: int):
    """n instances: n pipelined Gets, then n pipelined pushes and a Get behind them on one connection."""
    gets, _ = _raw(
        port, b"".join(encode_request(GetTelemetrySubscriptionsRequest(), i, "c", 0) for i in range(n)), [71] * n
    )
    frames = b"".join(
        encode_request(
            PushTelemetryRequest(g.body.client_instance_id, g.body.subscription_id, metrics=b"m%d" % i), 100 + i, "c", 0
        )
        for i, g in enumerate(gets)
    )
    frames += encode_request(GetTelemetrySubscriptionsRequest(), 200, "c", 0)
    return _raw(port, frames, [72] * n + [71])


def test_pipelined_answers_keep_request_order_while_held_for_the_disk(tmp_path):
    srv, recorder = _server(tmp_path, sync=True)
    try:
        answers, closed = _get_then_pushes(srv.port, 20)
        assert not closed
        assert [a.correlation_id for a in answers] == list(range(100, 120)) + [200]
        assert [a.body.error_code for a in answers[:20]] == [0] * 20
        assert recorder.commits >= 1 and recorder.rows_written == 20  # answered only once written
    finally:
        srv.stop()
    assert read_recording(tmp_path / "rec").num_rows == 20


def test_a_failed_commit_closes_the_connection_instead_of_answering(tmp_path):
    srv, recorder = _server(tmp_path, sync=True)
    try:
        open_dir = tmp_path / "rec" / OPEN_DIR
        open_dir.rmdir()
        open_dir.write_bytes(b"not a folder")  # every commit now fails (a real OSError), like a full disk
        answers, closed = _get_then_pushes(srv.port, 3)
        assert closed and answers == [], "no push was answered, the connection was closed"
        assert srv.wait_for(lambda: srv.server.stats["record_sync_failures"] >= 1)
        assert recorder.commits_failed >= 1 and recorder.rows_failed >= 3
        open_dir.unlink()  # the disk recovers: pushes are answered again
        answers, closed = _get_then_pushes(srv.port, 2)
        assert not closed and [a.body.error_code for a in answers] == [0, 0, 0]
    finally:
        srv.stop()
    assert read_recording(tmp_path / "rec").num_rows == 2


def test_a_truncated_part_left_by_a_crash_does_not_break_reading(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kip714.sinks.recorder import record_schema

    rec = tmp_path / "rec"
    (rec / OPEN_DIR).mkdir(parents=True)
    part = rec / OPEN_DIR / "part-1700000000000-1-000001.parquet"  # a part as a killed recorder leaves it
    row = {c: [None] for c in record_schema().names} | {"received_at_ms": [1], "payload": [b"p"]}
    pq.write_table(pa.Table.from_pydict(row, schema=record_schema()), part)
    broken = part.with_name("part-9999999999999-1-000999.parquet")
    broken.write_bytes(part.read_bytes()[:40])  # a truncated part (a host crash without --record-sync)
    (rec / OPEN_DIR / ".part-1.parquet.tmp").write_bytes(b"PAR1")  # a write a kill interrupted
    assert read_recording(rec).column("payload").to_pylist() == [b"p"]
    reopened = ParquetRecorder(rec, flush_interval_s=3600)  # rolls the leftovers, sets the broken part aside
    reopened.close()
    assert not list((rec / OPEN_DIR).glob(".*.tmp"))
    assert (rec / OPEN_DIR / (broken.name + ".corrupt")).exists()
    assert read_recording(rec).column("payload").to_pylist() == [b"p"]


@pytest.mark.parametrize("mode", ["tap", "terminate"])
def test_proxy_record_sync_holds_push_answers_until_durable(tmp_path, mode):
    """``kip714 proxy --record-sync`` in front of a cluster (here a ``kip714 serve`` as the upstream): the
    answer to a push, the cluster's (tap) or the proxy's (terminate), reaches the client only after its row
    was written, in request order with what follows it."""
    from proxy_helpers import start_proxy

    registry = SubscriptionRegistry()
    registry.set("all", {"metrics": "*"})
    upstream = server_thread.ServerThread(TelemetryServer(TelemetryBroker(registry), port=0))
    recorder = ParquetRecorder(tmp_path / "rec", flush_interval_s=3600, sync=True)  # no timed flush at all
    proxy_registry = SubscriptionRegistry()
    proxy_registry.set("all", {"metrics": "*"})
    proxy = start_proxy(
        f"127.0.0.1:{upstream.port}", broker=TelemetryBroker(proxy_registry), telemetry=mode, recorder=recorder
    )
    try:
        answers, closed = _get_then_pushes(proxy.port, 10)
        assert not closed
        assert [a.correlation_id for a in answers] == list(range(100, 110)) + [200]
        assert [a.body.error_code for a in answers[:10]] == [0] * 10
        assert recorder.rows_written == 10, "every answered push was written before its answer"
    finally:
        proxy.stop()
        upstream.stop()
    table = read_recording(tmp_path / "rec")
    assert sorted(table.column("payload").to_pylist()) == sorted(b"m%d" % i for i in range(10))


def test_parts_a_crash_left_after_their_roll_are_read_once(tmp_path):
    """A kill between a roll's rename and the removal of its parts: the parts are both in the rolled file
    and in _open/; reading counts them once and the next recorder removes them instead of rolling again."""
    import shutil

    rec = tmp_path / "rec"
    recorder = ParquetRecorder(rec, flush_interval_s=3600, sync=True)
    for i in range(3):
        recorder.record({"received_at_ms": i, "client_instance_id": "a", "error_code": 0, "payload": b"p%d" % i})
        recorder.durable().result(10)
    parts = sorted((rec / OPEN_DIR).glob("part-*.parquet"))
    assert len(parts) >= 1
    saved = tmp_path / "saved"
    saved.mkdir()
    for part in parts:
        shutil.copy(part, saved / part.name)
    recorder.close()  # rolls the parts into one file and removes them
    assert not list((rec / OPEN_DIR).glob("part-*.parquet"))
    for part in parts:  # as if killed before the removal
        shutil.copy(saved / part.name, rec / OPEN_DIR / part.name)
    assert sorted(read_recording(rec).column("payload").to_pylist()) == [b"p0", b"p1", b"p2"]
    ParquetRecorder(rec, flush_interval_s=3600).close()
    assert not list((rec / OPEN_DIR).glob("part-*.parquet"))
    assert sorted(read_recording(rec).column("payload").to_pylist()) == [b"p0", b"p1", b"p2"]


@pytest.mark.parametrize("command", [["serve"], ["proxy", "--upstream", "127.0.0.1:1"]])
def test_record_sync_needs_a_recording(command):
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "kip714", *command, "--port", "0", "--record-sync", "--duration", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "--record-sync needs --record DIR" in out.stderr


def test_a_clean_stop_answers_the_pushes_it_recorded(tmp_path):
    """SIGTERM/close with answers still waiting for their commit: the endpoint waits for that commit and
    the answers go out before the connections close (the commit is held back here by the recorder's own
    writer lock, so the stop surely begins while they wait)."""
    import threading

    srv, recorder = _server(tmp_path, sync=True)
    stopped = False
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"".join(encode_request(GetTelemetrySubscriptionsRequest(), i, "c", 0) for i in range(5)))
        gets = []
        buf = b""
        while len(gets) < 5:
            buf += s.recv(65536)
            while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]:
                size = struct.unpack(">i", buf[:4])[0]
                gets.append(decode_response(buf[4 : 4 + size], 71, 0).body)
                buf = buf[4 + size :]
        with recorder._write_lock:  # no commit can finish until this block ends
            s.sendall(
                b"".join(
                    encode_request(
                        PushTelemetryRequest(g.client_instance_id, g.subscription_id, metrics=b"s%d" % i),
                        10 + i,
                        "c",
                        0,
                    )
                    for i, g in enumerate(gets)
                )
            )
            assert srv.wait_for(lambda: srv.call(lambda: srv.server.stats["pushes"]) == 5)
            stopper = threading.Thread(target=srv.stop)
            stopper.start()
            time.sleep(0.3)  # the stop is under way, the answers still held
            assert stopper.is_alive()
        stopper.join(30)
        stopped = True
        answers = []
        while len(answers) < 5:
            while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
                chunk = s.recv(65536)
                assert chunk, f"closed after {len(answers)} answers"
                buf += chunk
            size = struct.unpack(">i", buf[:4])[0]
            answers.append(decode_response(buf[4 : 4 + size], 72, 0))
            buf = buf[4 + size :]
    assert stopped and [(a.correlation_id, a.body.error_code) for a in answers] == [(10 + i, 0) for i in range(5)]
    assert sorted(read_recording(tmp_path / "rec").column("payload").to_pylist()) == [b"s%d" % i for i in range(5)]
