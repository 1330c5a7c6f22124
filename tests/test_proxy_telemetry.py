"""Telemetry modes of ``kip714 proxy`` against librdkafka's mock cluster and real librdkafka clients:
``tap`` (the mock answers, the proxy records), ``terminate`` (an upstream without 71/72: the proxy answers),
``off``; the recording holds every push with the right node id and decodes."""

from __future__ import annotations

import base64
import gc
import logging
import time
import uuid

import pytest

ck = pytest.importorskip("confluent_kafka")

from mock_cluster import MockCluster  # noqa: E402
from proxy_helpers import connect, recv_frame, start_proxy, wait  # noqa: E402
from rdk_close import AnsweredPushes, await_push_answered  # noqa: E402

import kip714  # noqa: E402
from kip714.otlp import reference as otlp_pb  # noqa: E402
from kip714.sinks.recorder import ParquetRecorder, read_closed, read_recording  # noqa: E402


def run_producer(
    bootstrap: str, topic: str, pushes: int = 1, terminating: bool = False, timeout: float = 20.0, **conf
) -> int:
    """A producer that produces until ``pushes`` of its pushes were answered (seen in its own telemetry log;
    at most ``timeout`` seconds); with ``terminating``, then closed just after its next push was answered so
    that it sends its terminating push (see rdk_close). Returns the pushes it saw answered."""
    answered = AnsweredPushes()
    p = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "kip714-proxy-test",
            "log_level": 0,
            "linger.ms": 5,
            **answered.conf,
            **conf,
        }
    )
    deadline = time.monotonic() + timeout
    i = 0
    while answered() < pushes and time.monotonic() < deadline:
        p.produce(topic, b"value-%d" % i)
        i += 1
        p.poll(0.05)
    p.flush(10)
    if terminating:
        await_push_answered(p, answered)
    del p  # rd_kafka_destroy: the terminating push
    gc.collect()
    return answered.count


def rows_of(recorder: ParquetRecorder):
    recorder.flush()
    return read_recording(recorder.directory).to_pylist()


def metric_names(row) -> set[str]:
    data = kip714.decompress(row["payload"], row["compression_type"], 1 << 20)
    return {r["metric"] for r in otlp_pb.flatten(data)}


def test_tap_records_the_pushes_the_cluster_answers(tmp_path):
    with MockCluster(2, metrics=["org.apache.kafka.producer."], push_interval_ms=1000) as mc:
        mc.create_topic("tapped", 2)
        recorder = ParquetRecorder(tmp_path / "rec")
        pt = start_proxy(mc.bootstraps, recorder=recorder)
        contexts = []

        class Timing:  # what receivers learn of each tapped push
            def export_metrics(self, context, payload):
                contexts.append((context.push_interval_ms, context.expiry_ms))

        pt.call(lambda: pt.proxy.broker.add_receiver(Timing()))
        try:
            assert pt.proxy.mode == "tap"  # auto: the mock advertises 71 and 72
            assert run_producer(pt.bootstrap, "tapped", terminating=True) >= 2
            assert wait(lambda: any(r["terminating"] for r in rows_of(recorder)), 10)
            rows = rows_of(recorder)
            # the proxy decided nothing: its broker answered no push itself
            assert pt.call(lambda: pt.proxy.broker.metrics()["push-request-count"]) == 0
        finally:
            pt.stop()
    assert len(rows) >= 2
    assert {r["error_code"] for r in rows} == {0}  # what the mock answered
    assert sum(r["terminating"] for r in rows) == 1
    assert {r["node_id"] for r in rows} <= {"1", "2"}
    assert {r["client_id"] for r in rows} == {"kip714-proxy-test"}
    assert rows[0]["client_software_name"] == "confluent-kafka-python"
    assert rows[0]["principal"] == "User:ANONYMOUS" and rows[0]["client_source_address"] == "127.0.0.1"
    names = set().union(*(metric_names(r) for r in rows if r["payload"]))
    assert "org.apache.kafka.producer.node.request.latency.avg" in names
    assert all(n.startswith("org.apache.kafka.producer.") for n in names)  # the mock's subscription
    # the mock's GetTelemetrySubscriptions answers were read on the way: what it told the client is recorded
    # and the receivers get its push interval and the expiry it gives (max(60 s, 3 × 1 s))
    assert {r["push_interval_ms"] for r in rows} == {1000}
    assert {tuple(r["subscribed_metrics"]) for r in rows} == {("org.apache.kafka.producer.",)}
    assert contexts and set(contexts) == {(1000, 60_000)}
    for r in rows:
        assert r["accepted_compression_types"] and r["delta_temporality"] is not None


def test_terminate_answers_for_an_upstream_without_telemetry(tmp_path):
    with MockCluster(2, disable_apis=(71, 72)) as mc:
        mc.create_topic("terminated", 2)
        registry = kip714.SubscriptionRegistry()
        registry.set("all", {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"})
        recorder = ParquetRecorder(tmp_path / "rec")
        pt = start_proxy(mc.bootstraps, broker=kip714.TelemetryBroker(registry), recorder=recorder)
        try:
            assert pt.proxy.mode == "terminate"
            # the ApiVersions answer gains GetTelemetrySubscriptions and PushTelemetry v0
            with connect(pt.port) as s:
                s.sendall(kip714.encode_request(kip714.wire.ApiVersionsRequest("raw", "1.0"), 3, "raw", 3))
                resp = kip714.decode_response(recv_frame(s), 18, 3)
            apis = {a.api_key: (a.min_version, a.max_version) for a in resp.body.api_keys}
            assert apis[71] == (0, 0) and apis[72] == (0, 0)
            assert apis[0][1] <= 9 and apis[1][1] <= 15  # KIP-951 versions capped
            assert run_producer(pt.bootstrap, "terminated", terminating=True) >= 2
            assert wait(lambda: any(r["terminating"] for r in rows_of(recorder)), 10)
            rows = rows_of(recorder)
            metrics = pt.call(lambda: pt.proxy.broker.metrics())
            ports = pt.call(lambda: pt.proxy.broker_ports)
        finally:
            pt.stop()
    assert metrics["push-request-count"] == len(rows) >= 2
    assert metrics["get-request-count"] >= 1
    accepted = [r for r in rows if r["error_code"] == 0]
    assert len(accepted) >= 2 and rows[-1]["terminating"]
    assert {r["node_id"] for r in rows} <= {str(n) for n in ports}
    assert "org.apache.kafka.producer.node.request.latency.avg" in metric_names(accepted[0])


def test_off_forwards_telemetry_untouched(tmp_path):
    with MockCluster(2, metrics=["org.apache.kafka.producer."], push_interval_ms=1000) as mc:
        mc.create_topic("untouched", 1)
        recorder = ParquetRecorder(tmp_path / "rec")
        pt = start_proxy(mc.bootstraps, telemetry="off", recorder=recorder)
        try:
            assert pt.proxy.mode == "off"
            assert run_producer(pt.bootstrap, "untouched", pushes=2) >= 2  # the cluster answered them
            time.sleep(0.3)
            rows = rows_of(recorder)
        finally:
            pt.stop()
    assert rows == []


def test_terminate_answers_in_turn_between_pipelined_requests():
    """A telemetry request answered by the proxy between forwarded requests is answered in its turn."""
    with MockCluster(1, disable_apis=(71, 72)) as mc:
        pt = start_proxy(mc.bootstraps)
        try:
            frames = []
            for corr in range(1, 41):
                if corr % 4 == 0:
                    body = kip714.GetTelemetrySubscriptionsRequest(uuid.UUID(int=0))
                    frames.append(kip714.encode_request(body, corr, "pipelined", 0))
                else:
                    frames.append(kip714.encode_request(kip714.wire.MetadataRequest(topics=[]), corr, "pipelined", 9))
            with connect(pt.port) as s:
                s.sendall(b"".join(frames))  # all at once, before reading any answer
                answers = [recv_frame(s) for _ in frames]
        finally:
            pt.stop()
    corrs = [int.from_bytes(a[:4], "big") for a in answers]
    assert corrs == list(range(1, 41))
    for corr, a in zip(corrs, answers):
        if corr % 4 == 0:
            resp = kip714.decode_response(a, 71, 0)
            assert resp.body.error_code == 0 and resp.body.client_instance_id != uuid.UUID(int=0)


def test_terminate_decides_pushes_in_its_request_loop_and_keeps_request_order():
    """Pushes at the start of a read are decided by the broker's request loop, the others (behind a forwarded
    request, or of an instance to create) by the broker's Python path, every answer in its request's turn."""
    registry = kip714.SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": "60000"})
    payload = kip714.compress(b"\x0a\x00", kip714.CompressionType.ZSTD)
    with MockCluster(1, disable_apis=(71, 72)) as mc:
        pt = start_proxy(mc.bootstraps, broker=kip714.TelemetryBroker(registry))
        try:
            with connect(pt.port) as s:
                ids = []
                for corr in (1, 2):
                    s.sendall(
                        kip714.encode_request(kip714.GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)), corr, "c", 0)
                    )
                    ids.append(kip714.decode_response(recv_frame(s), 71, 0).body)

                def push(corr: int, k: int) -> bytes:
                    body = kip714.PushTelemetryRequest(
                        ids[k].client_instance_id, ids[k].subscription_id, False, 4, payload
                    )
                    return kip714.encode_request(body, corr, "c", 0)

                metadata = kip714.encode_request(kip714.wire.MetadataRequest(topics=[]), 5, "c", 9)
                # the loop takes 3 and 4; 5 goes upstream; 6 and 7 wait behind its answer (the Python path)
                s.sendall(push(3, 0) + push(4, 1) + metadata + push(6, 0) + push(7, 1))
                answers = [recv_frame(s) for _ in range(5)]
                taken = pt.call(lambda: sum(c.loop.frames for c in pt.proxy.connections if c.loop is not None))
        finally:
            pt.stop()
    assert [int.from_bytes(a[:4], "big") for a in answers] == [3, 4, 5, 6, 7]
    codes = [kip714.decode_response(answers[i], 72, 0).body.error_code for i in (0, 1, 3, 4)]
    assert codes == [0, 0, 89, 89]  # accepted (the first push after a Get), then throttled
    assert taken == 2


def test_cli_proxy_records_a_producer(tmp_path):
    """``kip714 proxy`` end to end: subscription flags, --record, --telemetry terminate, a real producer."""
    import re
    import signal
    import subprocess
    import sys

    with MockCluster(2) as mc:
        mc.create_topic("cli", 1)
        rec = tmp_path / "rec"
        cmd = [
            sys.executable,
            "-m",
            "kip714",
            "proxy",
            "--upstream",
            mc.bootstraps,
            "--port",
            "0",
            "--broker-port-base",
            "0",
            "--telemetry",
            "terminate",
            "--metrics",
            "org.apache.kafka.producer.",
            "--interval-ms",
            "1000",
            "--record",
            str(rec),
            "--duration",
            "60",
            "--summary-interval",
            "0",
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            port = None
            deadline = time.monotonic() + 15
            while port is None and time.monotonic() < deadline:
                line = proc.stderr.readline()
                m = re.search(r"event=listening host=\S+ port=(\d+) telemetry=terminate", line)
                if m:
                    port = int(m.group(1))
            assert port, "the proxy did not start"
            assert run_producer(f"127.0.0.1:{port}", "cli", terminating=True) >= 2
            proc.send_signal(signal.SIGTERM)  # a clean stop, as Ctrl-C: the recording is flushed and closed
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, err[-2000:]
    stopped = err.split("event=stopped")  # the final summary, once, on the log (stdout stays empty)
    assert len(stopped) == 2 and "telemetry=terminate" in stopped[1] and "bytes_from_clients=" in stopped[1]
    assert out == ""
    rows = read_recording(rec).to_pylist()
    assert any(r["terminating"] for r in rows) and {r["error_code"] for r in rows} == {0}
    assert {r["node_id"] for r in rows} <= {"1", "2"}


def test_cli_proxy_help_documents_every_option():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "kip714", "proxy", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for option in (
        "--upstream",
        "--host",
        "--port",
        "--broker-port-base",
        "--broker-ports",
        "--advertised-host",
        "--telemetry",
        "--record",
        "--metrics",
        "--interval-ms",
        "--match",
        "--config",
        "--tls-cert",
        "--tls-key",
        "--upstream-tls",
        "--upstream-ca",
        "--max-connections",
        "--idle-timeout",
        "terminate",
        "tap",
        "Not done",
    ):
        assert option in out, option


@pytest.mark.parametrize("mode", ["terminate", "tap"])
def test_each_push_carries_the_node_id_of_the_listener_it_came_through(tmp_path, mode):
    """Port-per-broker: a push sent to broker N's listener is recorded with ``node_id`` N, in both modes
    (terminate: the proxy's broker answers as node N; tap: broker N of the cluster answers)."""
    kw = (
        {"disable_apis": (71, 72)}
        if mode == "terminate"
        else {"metrics": ["org.apache.kafka.producer."], "push_interval_ms": 1000}
    )
    with MockCluster(3, **kw) as mc:
        registry = kip714.SubscriptionRegistry()
        registry.set("all", {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"})
        recorder = ParquetRecorder(tmp_path / "rec")
        pt = start_proxy(mc.bootstraps, broker=kip714.TelemetryBroker(registry), recorder=recorder, telemetry=mode)
        try:
            with connect(pt.port) as s:  # the bootstrap's Metadata makes the per-broker listeners
                s.sendall(kip714.encode_request(kip714.wire.MetadataRequest(topics=[]), 1, "node-test", 9))
                recv_frame(s)
            ports = pt.call(lambda: pt.proxy.broker_ports)
            assert sorted(ports) == [1, 2, 3]
            sent = {}
            for node, port in sorted(ports.items()):
                with connect(port) as s:
                    get = kip714.GetTelemetrySubscriptionsRequest(uuid.UUID(int=0))
                    s.sendall(kip714.encode_request(get, 1, f"node-test-{node}", 0))
                    told = kip714.decode_response(recv_frame(s), 71, 0).body
                    assert told.error_code == 0
                    push = kip714.PushTelemetryRequest(told.client_instance_id, told.subscription_id, True, 0, b"")
                    s.sendall(kip714.encode_request(push, 2, f"node-test-{node}", 0))
                    assert kip714.decode_response(recv_frame(s), 72, 0).body.error_code == 0
                    # Kafka's Uuid text: URL-safe base64 without padding
                    text = base64.urlsafe_b64encode(told.client_instance_id.bytes).rstrip(b"=").decode()
                    sent[text] = str(node)
            assert wait(lambda: len(rows_of(recorder)) == 3, 10)
            rows = rows_of(recorder)
        finally:
            pt.stop()
    assert {r["client_instance_id"]: r["node_id"] for r in rows} == sent
    if mode == "terminate":  # the connection-closed rows name the same broker (they had said node 0)
        closed = read_closed(recorder.directory).to_pylist()
        assert {c["client_instance_id"]: c["node_id"] for c in closed} == sent
    assert {r["client_id"] for r in rows} == {f"node-test-{n}" for n in (1, 2, 3)}
    for r in rows:  # what this client was told, by the proxy (terminate) or by the cluster (tap)
        assert r["subscribed_metrics"] == ["org.apache.kafka.producer."] and r["push_interval_ms"] == 1000


@pytest.mark.parametrize("mode", ["auto", "tap"])
def test_a_mode_that_would_record_nothing_says_so(mode, caplog):
    """Against a cluster without the telemetry APIs (Kafka before 3.7, or no plugin): auto answers here but
    nobody is subscribed, tap can never see a push: both are said at start, not left silent."""
    with MockCluster(1, disable_apis=(71, 72)) as mc, caplog.at_level(logging.WARNING, logger="kip714"):
        pt = start_proxy(mc.bootstraps, telemetry=mode)
        try:
            assert pt.proxy.mode == ("terminate" if mode == "auto" else "tap")
        finally:
            pt.stop()
    said = " ".join(r.getMessage() for r in caplog.records)
    assert ("event=no_subscription" in said) == (mode == "auto")
    assert ("event=no_telemetry_upstream" in said) == (mode == "tap")
