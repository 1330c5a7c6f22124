"""kip714 serve against a client nobody here wrote: librdkafka 2.16 through confluent-kafka.

Loopback only; every client runs a few seconds at most and every wait is bounded.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest
import server_thread
from rdk_close import await_push_answered

import kip714
from kip714 import SubscriptionRegistry, TelemetryBroker
from kip714.endpoint.address import java_host_address
from kip714.endpoint.server import TelemetryServer
from kip714.otlp import reference as otlp_pb
from kip714.sinks.recorder import ParquetRecorder, read_recording

confluent_kafka = pytest.importorskip("confluent_kafka")

INTERVAL = "500"


class ServerThread(server_thread.ServerThread):
    """A TelemetryServer on 127.0.0.1 (free port) with a broker, a registry and optionally a recorder."""

    def __init__(self, registry=None, accepted=(4, 3, 1, 2), record_dir=None, **kw):
        self.registry = registry or sub(metrics="*")
        self.broker = TelemetryBroker(self.registry, accepted_compression_types=accepted, node_id=1)
        self.recorder = ParquetRecorder(record_dir, flush_interval_s=0.2) if record_dir else None
        super().__init__(TelemetryServer(self.broker, "127.0.0.1", 0, recorder=self.recorder, **kw), 10)


def sub(metrics="*", interval=INTERVAL, match=None):
    r = SubscriptionRegistry()
    cfg = {"metrics": metrics, "interval.ms": interval}
    if match:
        cfg["match"] = match
    r.set("test", cfg)
    return r


def run_producer(srv, until, terminating=False, timeout=15.0, pushes=None, **conf):
    """A librdkafka producer on ``srv``, polled until ``until()`` holds (the server saw what the test needs;
    at most ``timeout`` seconds); ``terminating``: then close it just after a push was answered, so that it
    sends its terminating push (see rdk_close; ``pushes``: the pushes seen so far, by default the server's
    count). Returns whether ``until()`` held."""
    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": srv.bootstrap,
            "enable.sparse.connections": False,
            "client.id": "kip714-test-producer",
            "log_level": 0,
            **conf,
        }
    )
    deadline = time.monotonic() + timeout
    while not (held := until()) and time.monotonic() < deadline:
        p.poll(0.05)
    if terminating:
        await_push_answered(p, pushes or (lambda: srv.server.stats["pushes"]))
    del p  # rd_kafka_destroy: sends the terminating push (waits up to 1 s)
    gc.collect()
    return held


def accepted_pushes(srv) -> int:
    """Pushes the server answered with NONE (the broker's count)."""
    return srv.server.push_codes[0]


@pytest.fixture
def server(tmp_path):
    servers = []

    def make(**kw):
        s = ServerThread(record_dir=tmp_path / f"rec{len(servers)}", **kw)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.stop()


def recorded(srv):
    srv.recorder.flush()
    return read_recording(srv.recorder.directory).to_pylist()


def decoded_names(row):
    data = kip714.decompress(row["payload"], row["compression_type"], 1 << 20)
    return {r["metric"] for r in otlp_pb.flatten(data)}


@pytest.mark.parametrize("codec", ["zstd", "lz4", "snappy", "gzip", "none"])
def test_producer_pushes_with_each_codec(server, codec):
    ctype = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[codec]
    srv = server(accepted=() if codec == "none" else (ctype,))
    assert run_producer(srv, lambda: accepted_pushes(srv) >= 2, terminating=True)
    assert srv.wait_for(lambda: any(r["terminating"] for r in recorded(srv)))
    rows = recorded(srv)
    accepted = [r for r in rows if r["error_code"] == 0]
    assert len(accepted) >= 2
    assert {r["compression_type"] for r in accepted} == {ctype}
    assert sum(r["terminating"] for r in rows) == 1 and rows[-1]["terminating"]
    r0 = accepted[0]
    assert r0["client_software_name"] == "confluent-kafka-python"
    assert r0["client_software_version"].startswith("2.") and "rdkafka" in r0["client_software_version"]
    assert r0["client_id"] == "kip714-test-producer" and r0["client_source_address"] == "127.0.0.1"
    assert len(r0["client_instance_id"]) == 22 and r0["node_id"] == "1"
    names = decoded_names(r0)
    assert "org.apache.kafka.producer.node.request.latency.avg" in names
    assert "org.apache.kafka.producer.connection.creation.total" in names
    assert srv.broker.metrics()["plugin-export-count"] >= 2


def test_consumer_with_a_group_pushes(server):
    srv = server()
    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": srv.bootstrap,
            "group.id": "kip714-test-group",
            "client.id": "kip714-test-consumer",
            "log_level": 0,
        }
    )
    deadline = time.monotonic() + 15
    while accepted_pushes(srv) < 1 and time.monotonic() < deadline:
        c.poll(0.05)
    await_push_answered(c, lambda: srv.server.stats["pushes"])
    c.close()
    del c
    gc.collect()
    assert srv.wait_for(lambda: any(r["terminating"] for r in recorded(srv)))
    rows = [r for r in recorded(srv) if r["error_code"] == 0]
    assert rows and {r["compression_type"] for r in rows} == {4}
    data = kip714.decompress(rows[0]["payload"], 4, 1 << 20)
    flat = otlp_pb.flatten(data)
    assert "org.apache.kafka.consumer.node.request.latency.avg" in {r["metric"] for r in flat}
    assert flat[0]["resource"].get("group_id") == "kip714-test-group"


def test_metrics_push_disabled_sends_nothing(server):
    srv = server()
    ended = time.monotonic() + 1.5  # an enabled client has sent its Get and its first push by then
    run_producer(srv, lambda: time.monotonic() > ended, **{"enable.metrics.push": False})
    time.sleep(0.3)
    assert srv.server.stats["gets"] == 0 and srv.server.stats["pushes"] == 0


def test_empty_subscription_keeps_the_client_polling(server):
    r = SubscriptionRegistry()
    r.set("none", {"metrics": "", "interval.ms": INTERVAL})  # matches the client, requests no metric
    srv = server(registry=r)
    assert run_producer(srv, lambda: srv.server.stats["gets"] >= 3)
    assert srv.server.stats["pushes"] == 0


def test_metric_that_matches_nothing_gets_empty_pushes(server):
    srv = server(registry=sub(metrics="does.not.exist"))
    assert run_producer(srv, lambda: srv.server.stats["pushes"] >= 3)
    rows = recorded(srv)
    assert rows and all(r["payload"] == b"" and r["compression_type"] == 0 for r in rows)
    assert all(r["error_code"] == 0 for r in rows)


def test_prefix_subscription_only_sends_matching_metrics(server):
    srv = server(registry=sub(metrics="org.apache.kafka.producer.node."))
    assert run_producer(srv, lambda: accepted_pushes(srv) >= 2)
    rows = [r for r in recorded(srv) if r["error_code"] == 0 and r["payload"]]
    assert rows
    for row in rows:
        names = decoded_names(row)
        assert names and all(n.startswith("org.apache.kafka.producer.node.") for n in names)


def test_config_change_makes_the_client_resubscribe(server):
    reg = sub(metrics="*")
    srv = server(registry=reg)
    p = confluent_kafka.Producer(
        {"bootstrap.servers": srv.bootstrap, "enable.sparse.connections": False, "log_level": 0}
    )
    deadline = time.monotonic() + 15.0
    changed = False
    seen = None
    while time.monotonic() < deadline:
        p.poll(0.05)
        codes = srv.server.push_codes
        if not changed and codes[0] >= 1:
            reg.set("test", {"metrics": "org.apache.kafka.producer.", "interval.ms": INTERVAL})
            changed = True
        elif changed and codes[int(kip714.ErrorCode.UNKNOWN_SUBSCRIPTION_ID)] >= 1 and codes != seen:
            seen = codes  # until a push under the new subscription was accepted
            if len({r["subscription_id"] for r in recorded(srv) if r["error_code"] == 0}) == 2:
                break
    del p
    gc.collect()
    assert changed
    codes = srv.server.push_codes
    assert codes[int(kip714.ErrorCode.UNKNOWN_SUBSCRIPTION_ID)] >= 1
    ids = {r["subscription_id"] for r in recorded(srv) if r["error_code"] == 0}
    assert len(ids) == 2, "pushes before and after the change carry different SubscriptionIds"


def test_malformed_bytes_from_a_raw_socket_do_not_hurt_the_server(server):
    srv = server()
    for junk in (
        b"\x00\x00\x00\x05hello",
        struct.pack(">i", 2**31 - 1),
        b"\xff" * 64,
        struct.pack(">ihhi", 10, 0, 0, 1) + b"\x00\x00",  # Produce: not served
        struct.pack(">ihhih", 10, 72, 0, 9, -7),
    ):  # bad client id length
        with socket.create_connection(("127.0.0.1", srv.server.port), timeout=2) as s:
            s.sendall(junk)
            s.settimeout(2)
            try:
                assert s.recv(100) == b""  # the server disconnects
            except ConnectionResetError:
                pass
    # an ApiVersions v5 (unknown version) gets the v0-format UNSUPPORTED_VERSION reply
    with socket.create_connection(("127.0.0.1", srv.server.port), timeout=2) as s:
        s.sendall(struct.pack(">ihhih", 10, 18, 5, 42, 0))
        reply = s.recv(100)
    resp = kip714.decode_response(reply[4:], 18, 0)
    assert resp.correlation_id == 42 and resp.body.error_code == 35
    assert srv.server.stats["protocol_errors"] >= 5
    assert run_producer(srv, lambda: accepted_pushes(srv) >= 1)
    assert srv.server.push_codes[0] >= 1


def test_java_host_address():
    assert java_host_address("127.0.0.1") == "127.0.0.1"
    assert java_host_address("::1") == "0:0:0:0:0:0:0:1"
    assert java_host_address("fe80::1%eth0") == "fe80:0:0:0:0:0:0:1%eth0"
    assert java_host_address("::ffff:10.0.0.1") == "10.0.0.1"


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM is TerminateProcess on Windows: no clean stop to test")
def test_serve_command_line(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rec = tmp_path / "rec"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kip714",
            "serve",
            "--port",
            str(port),
            "--metrics",
            "*",
            "--interval-ms",
            INTERVAL,
            "--record",
            str(rec),
            "--duration",
            "60",
            "--summary-interval",
            "0.2",
            "--accepted-compression",
            "lz4",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)

        class Srv:
            bootstrap = f"127.0.0.1:{port}"

        from rdk_close import AnsweredPushes

        answered = AnsweredPushes()  # the server is another process: the client's own log says what it saw
        assert run_producer(Srv, lambda: answered() >= 1, terminating=True, pushes=answered, **answered.conf)
        proc.send_signal(signal.SIGTERM)  # a clean stop: every buffered row must reach the recording
        out, err = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "event=listening" in err and "event=summary" in err
    # the final summary is printed once: the event=stopped log line (stdout stays empty)
    assert err.count("event=stopped") == 1 and "pushes=" in err.split("event=stopped")[1] and out == ""
    rows = read_recording(rec).to_pylist()
    assert any(r["terminating"] for r in rows) and {r["compression_type"] for r in rows if r["payload"]} == {3}


def test_subscription_file_reload_bumps_subscription_ids(tmp_path):
    from kip714.endpoint.subscription_file import SubscriptionFileWatcher, load_subscription_file

    path = tmp_path / "subs.conf"
    path.write_text(
        "# name config\nall metrics=[*],interval.ms=500\n"
        "java metrics=[org.apache.kafka.producer.],match=[client_software_name=apache-kafka-java]\n"
    )
    reg = SubscriptionRegistry()
    watcher = SubscriptionFileWatcher(reg, path)
    assert len(reg) == 2 and reg.version == 2
    before = reg.resolve(kip714.ClientInfo()).subscription_id
    assert watcher.reload() is False  # unchanged file: nothing happens
    path.write_text("all metrics=[org.apache.kafka.consumer.],interval.ms=1000\n")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert watcher.reload() is True
    assert len(reg) == 1 and reg.version == 4  # one changed, one deleted
    res = reg.resolve(kip714.ClientInfo())
    assert res.subscription_id != before and res.push_interval_ms == 1000
    (tmp_path / "subs.json").write_text(json.dumps({"a": {"metrics": ["x.", "y."], "interval.ms": 200}}))
    assert load_subscription_file(tmp_path / "subs.json") == {"a": {"metrics": "x.,y.", "interval.ms": "200"}}
    # JSON is told by its first character, whatever the file's name
    (tmp_path / "subs.conf.new").write_text(json.dumps({"a": {"metrics": "x."}}))
    assert load_subscription_file(tmp_path / "subs.conf.new") == {"a": {"metrics": "x."}}


def test_a_bad_subscription_file_changes_nothing_and_its_fix_is_applied(tmp_path):
    """An edit with one invalid entry (a rename plus a typo in interval.ms) leaves the last good configuration
    serving, whole; it is reported once per version of the file; putting the file back or fixing it works."""
    from kip714.endpoint.subscription_file import SubscriptionFileWatcher

    path = tmp_path / "subs.conf"
    good = "producers metrics=[org.apache.kafka.producer.],interval.ms=1000\n"
    path.write_text(good)
    reg = SubscriptionRegistry()
    watcher = SubscriptionFileWatcher(reg, path)
    version = reg.version

    def touch(text, t):
        path.write_text(text)
        os.utime(path, ns=(t, t))

    touch("prod2 metrics=[org.apache.kafka.producer.],interval.ms=5\nother metrics=[x.]\n", 10**18)
    with pytest.raises(kip714.errors.InvalidRequestError):
        watcher.reload()
    assert watcher.reload() is False  # the same bad file is not re-applied (nor logged) every second
    assert [s.name for s in reg.subscriptions()] == ["producers"] and reg.version == version
    assert reg.resolve(kip714.ClientInfo()).push_interval_ms == 1000
    touch(good, 2 * 10**18)  # reverted: the same configuration, nothing to change
    assert watcher.reload() is True and reg.version == version
    touch("prod2 metrics=[org.apache.kafka.producer.],interval.ms=500\n", 3 * 10**18)  # the fix
    assert watcher.reload() is True
    assert [s.name for s in reg.subscriptions()] == ["prod2"]
    assert reg.resolve(kip714.ClientInfo()).push_interval_ms == 500
    touch('{"a": 1}', 4 * 10**18)  # JSON that is not a map of names to configs
    with pytest.raises(kip714.errors.InvalidConfigError):
        watcher.reload()
    assert [s.name for s in reg.subscriptions()] == ["prod2"]
    # a .json file caught empty mid-save (truncated, not yet written) is an error, not "no subscriptions"
    empty = tmp_path / "subs.json"
    empty.write_text("")
    with pytest.raises(ValueError):
        SubscriptionFileWatcher(SubscriptionRegistry(), empty)
