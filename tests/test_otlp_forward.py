"""OtlpForwarder and the native resource-attribute splice, checked with opentelemetry-proto (an independent
parser) and a test OTLP/HTTP receiver on 127.0.0.1 (http.server)."""

from __future__ import annotations

import gzip
import http.server
import logging
import socket
import ssl
import threading
import time
import uuid

import otlp_build as ob
import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData
from tls_cert import make_cert

import kip714
from kip714 import OtlpForwarder
from kip714._otlp_splice import add_resource_attributes, encode_attributes
from kip714.broker.receivers import ReceiverContext, TelemetryPayload
from kip714.broker.subscriptions import ClientInfo
from kip714.errors import CorruptPayloadError
from kip714.sinks.otlp_forward import metrics_url, retry_after_seconds
from kip714.tools.bench import otlp_like, sample_payloads


def attrs_of(resource):
    return [(a.key, a.value.string_value) for a in resource.attributes]


def strip_resources(msg):
    for rm in msg.resource_metrics:
        rm.resource.ClearField("attributes")
    return msg


# ------------------------------------------------------------------------------------------ the splice


@pytest.mark.unit
@pytest.mark.parametrize("data", sample_payloads() + (otlp_like(100_000),), ids=lambda d: f"{len(d)}B")
def test_splice_adds_attributes_and_keeps_everything_else(data):
    labels = [("client_id", "c1"), ("client_instance_id", "AAAAAAAAAAAAAAAAAAAAAA"), ("group_id", "broker")]
    out = add_resource_attributes(data, encode_attributes(labels))
    got, want = MetricsData.FromString(out), MetricsData.FromString(data)
    assert len(got.resource_metrics) == len(want.resource_metrics) >= 1
    for g, w in zip(got.resource_metrics, want.resource_metrics):
        client = attrs_of(w.resource)
        keys = {k for k, _ in client}
        assert attrs_of(g.resource) == client + [kv for kv in labels if kv[0] not in keys]
    assert strip_resources(got) == strip_resources(want)


@pytest.mark.unit
def test_splice_creates_the_resource_and_handles_several():
    data = ob.payload([ob.gauge("a", 1.0)]) + ob.payload([ob.gauge("b", 2.0)], resource={"x": "y"})
    out = add_resource_attributes(data, encode_attributes([("client_id", "ü-ñ")]))
    md = MetricsData.FromString(out)
    assert [attrs_of(rm.resource) for rm in md.resource_metrics] == [
        [("client_id", "ü-ñ")],
        [("x", "y"), ("client_id", "ü-ñ")],
    ]
    assert add_resource_attributes(b"", encode_attributes([("k", "v")])) == b""
    assert add_resource_attributes(data, []) == data


@pytest.mark.parametrize(
    "bad",
    [
        b"\x0a\x05abc",
        b"\x0a",
        b"\x08\x01\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        b"\x0b\x00",
        b"\x0a\x02\x0a\x09",
        b"\x00\x00",
        b"\x09\x01",
    ],
)
@pytest.mark.unit
def test_splice_refuses_malformed_bytes(bad):
    with pytest.raises(CorruptPayloadError):
        add_resource_attributes(bad, encode_attributes([("k", "v")]))


@pytest.mark.unit
def test_splicing_many_payloads_joins_what_splicing_each_gives():
    """add_resource_attributes_all: each payload with its own attributes, the results in one buffer, equal to
    joining add_resource_attributes' results; the payloads it refuses (truncations, garbage) are left out and
    named, exactly those add_resource_attributes refuses. Oracle of the joined body: opentelemetry-proto."""
    from kip714._otlp_splice import add_resource_attributes_all

    base = ob.payload([ob.gauge("a", 1.0, {"k": "v"})], resource={"x": "y", "client_id": "own"})
    payloads = [data[:n] for data in [base, *sample_payloads()[:2]] for n in (len(data), len(data) - 3, 5)]
    payloads += [b"", b"\xff\xff", ob.payload([ob.gauge("b", 2.0)])]
    attrs = [encode_attributes([("client_id", f"c{k}"), ("n", str(k))][: k % 3]) for k in range(len(payloads))]
    body, malformed = add_resource_attributes_all(payloads, attrs)
    want, refused = [], []
    for k, (data, enc) in enumerate(zip(payloads, attrs)):
        try:
            want.append(add_resource_attributes(data, enc))
        except CorruptPayloadError:
            refused.append(k)
    assert malformed == refused and 0 < len(refused) < len(payloads)
    assert body == b"".join(want)
    parsed = MetricsData.FromString(body)
    assert len(parsed.resource_metrics) == sum(len(MetricsData.FromString(w).resource_metrics) for w in want)
    with pytest.raises(ValueError):
        add_resource_attributes_all(payloads, attrs[:-1])


@pytest.mark.unit
def test_splice_never_reads_out_of_bounds_on_truncations():
    data = ob.payload([ob.gauge("a", 1.0, {"k": "v"})], resource={"x": "y"})
    enc = encode_attributes([("client_id", "c")])
    for n in range(len(data)):
        try:
            out = add_resource_attributes(data[:n], enc)
        except CorruptPayloadError:
            continue
        MetricsData.FromString(out)  # what it accepts protobuf parses (the prefixes it rewrote are right)


# ------------------------------------------------------------------------------------------ the receiver


class Receiver:
    """An OTLP/HTTP metrics endpoint that answers from a script (status codes, then 200)."""

    def __init__(self, script=(), tls=None, port=0):
        self.script = list(script)
        self.requests: list[tuple[dict, ExportMetricsServiceRequest]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                status, headers = outer.script.pop(0) if outer.script else (200, {})
                if status == 200:
                    outer.requests.append((dict(self.headers), ExportMetricsServiceRequest.FromString(body)))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        if tls is not None:  # (cert.pem, key.pem): HTTPS
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(*tls)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
            self.url = "https" + self.url[4:]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    made = []

    def make(script=(), tls=None, port=0):
        r = Receiver(script, tls, port)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def push(fwd, data, instance=None, client_id="c1"):
    instance = instance or uuid.uuid4()
    ci = ClientInfo(client_id=client_id)
    fwd.export_metrics(
        ReceiverContext(ci, 1), TelemetryPayload(instance, False, "OTLP", data, ci.labels(1, instance), 0, 1, 0)
    )
    return instance


def wait(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


def test_forwarded_points_equal_the_clients(receiver):
    r = receiver()
    fwd = OtlpForwarder(r.url, headers={"Authorization": "Bearer t0ken"})
    try:
        payloads = sample_payloads()
        ids = [push(fwd, d) for d in payloads]
        assert fwd.flush(10) and wait(lambda: fwd.forwarded == len(payloads))
    finally:
        fwd.close()
    got = [rm for _, req in r.requests for rm in req.resource_metrics]
    assert len(got) == len(payloads)
    headers = r.requests[0][0]
    assert headers["Authorization"] == "Bearer t0ken" and headers["Content-Type"] == "application/x-protobuf"
    assert headers["Content-Encoding"] == "gzip"
    for rm, data, inst in zip(got, payloads, ids):
        (want,) = MetricsData.FromString(data).resource_metrics
        attrs = dict(attrs_of(rm.resource))
        assert attrs["client_id"] == "c1" and attrs["client_instance_id"] == kip714.kafka_uuid_string(inst)
        assert rm.scope_metrics == want.scope_metrics
        assert [a for a in attrs_of(rm.resource) if a[0] not in ("client_id", "client_instance_id")] == attrs_of(
            want.resource
        )


def test_a_reads_pushes_are_forwarded_from_its_columns(receiver):
    """Through the broker's request loop the forwarder takes a read's accepted pushes as columns (export_batch:
    no payload, context nor labels per push on the request path); what reaches the collector is what
    export_metrics forwards: each client's resource with the chosen labels (made once per instance, again when
    its connection's client info changes), its scope metrics as pushed. Oracle: opentelemetry-proto."""
    from kip714 import SubscriptionRegistry, TelemetryBroker

    r = receiver()
    fwd = OtlpForwarder(r.url, labels=("client_id", "client_instance_id", "client_source_port"))
    reg = SubscriptionRegistry()
    reg.set("all", {"metrics": "*", "interval.ms": "100"})
    now = [1_000_000]
    broker = TelemetryBroker(reg, receivers=[fwd], clock=lambda: now[0])
    payloads = sample_payloads()[:3]
    infos = [ClientInfo(client_id=f"c{k}", client_source_port=1000 + k) for k in range(len(payloads))]
    gets = [broker.handle(kip714.GetTelemetrySubscriptionsRequest(), ci)[0] for ci in infos]
    loop = broker.request_loop(1 << 20)
    sent = []
    try:
        for rnd in range(2):  # the second round on a new connection's client info: labels made again
            if rnd:
                infos = [ClientInfo(client_id=f"c{k}", client_source_port=2000 + k) for k in range(len(payloads))]
            for k, (get, data) in enumerate(zip(gets, payloads)):
                req = kip714.PushTelemetryRequest(get.client_instance_id, get.subscription_id, False, 0, data)
                answers, frame = broker.feed(loop, kip714.encode_request(req, k, "x", 0), lambda cid, k=k: infos[k])
                assert frame is None and answers is not None
                sent.append((get.client_instance_id, infos[k], data))
            now[0] += 1000
        assert fwd.flush(10) and wait(lambda: fwd.forwarded == len(sent))
    finally:
        fwd.close()
    got = [rm for _, req in r.requests for rm in req.resource_metrics]
    assert len(got) == len(sent)
    for rm, (inst, ci, data) in zip(got, sent):
        (want,) = MetricsData.FromString(data).resource_metrics
        attrs = dict(attrs_of(rm.resource))
        assert attrs["client_id"] == ci.client_id and attrs["client_instance_id"] == kip714.kafka_uuid_string(inst)
        assert attrs["client_source_port"] == str(ci.client_source_port)
        assert rm.scope_metrics == want.scope_metrics


def test_503_then_200_delivers_once(receiver):
    r = receiver([(503, {"Retry-After": "0"}), (429, {}), (200, {})])
    fwd = OtlpForwarder(r.url, initial_backoff_s=0.01, compression="none")
    try:
        push(fwd, ob.payload([ob.gauge("g", 1.0)]))
        assert wait(lambda: fwd.forwarded == 1)
    finally:
        fwd.close()
    assert len(r.requests) == 1 and fwd.retries == 2
    assert fwd.requests == {"503": 1, "429": 1, "200": 1}


def test_non_retryable_status_is_dropped_and_counted(receiver):
    r = receiver([(400, {})])
    fwd = OtlpForwarder(r.url, initial_backoff_s=0.01)
    try:
        push(fwd, ob.payload([ob.gauge("g", 1.0)]))
        assert wait(lambda: fwd.dropped.get("rejected") == 1)
    finally:
        fwd.close()
    assert fwd.forwarded == 0 and not r.requests


def test_receiver_down_drops_are_counted_and_pushes_keep_being_answered():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    reg = kip714.SubscriptionRegistry()
    reg.set("all", {"metrics": "*", "interval.ms": "100"})
    fwd = OtlpForwarder(
        f"http://127.0.0.1:{port}",
        max_queue=20,
        initial_backoff_s=0.05,
        max_backoff_s=0.1,
        max_elapsed_s=0.3,
        timeout_s=0.5,
    )
    broker = kip714.TelemetryBroker(reg, receivers=[fwd])
    data = ob.payload([ob.gauge("g", 1.0)])
    try:
        worst = 0.0
        for i in range(500):
            ci = ClientInfo(client_id=f"c{i}")
            get, _ = broker.handle(kip714.GetTelemetrySubscriptionsRequest(), ci)
            req = kip714.PushTelemetryRequest(
                client_instance_id=get.client_instance_id,
                subscription_id=get.subscription_id,
                compression_type=0,
                metrics=data,
            )
            t0 = time.perf_counter()
            resp, _ = broker.handle(req, ci)
            worst = max(worst, time.perf_counter() - t0)
            assert resp.error_code == 0
        assert worst < 0.05  # never waits for the collector (generous bound for a loaded machine)
        assert wait(lambda: fwd.dropped.get("queue-full", 0) >= 400)
        assert wait(lambda: fwd.dropped.get("retries-exhausted", 0) >= 1)
        assert fwd.requests.get("error", 0) >= 1 and fwd.forwarded == 0
    finally:
        fwd.close(1)


def test_an_unreachable_collector_is_said_once_and_so_is_its_return(receiver, caplog):
    """A collector that cannot be reached is logged when it goes away (once, not per retry), the first batch
    given up is logged with its count, its return is logged with what the outage cost, and payloads still
    queued at close are logged as dropped (they were only in a metric that dies with the process)."""
    caplog.set_level(logging.DEBUG, logger="kip714.otlp")
    with socket.socket() as s:  # a port nobody listens on, for now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    fwd = OtlpForwarder(
        f"http://127.0.0.1:{port}", initial_backoff_s=0.05, max_backoff_s=0.1, max_elapsed_s=0.3, timeout_s=0.5
    )
    data = ob.payload([ob.gauge("g", 1.0)])

    def said(text):
        return [r for r in caplog.records if r.levelno >= logging.WARNING and text in r.getMessage()]

    try:
        for _ in range(3):
            push(fwd, data)
            assert wait(lambda: fwd.queue_depth == 0 and fwd._idle.is_set())
        assert fwd.dropped.get("retries-exhausted") == 3 and fwd.requests["error"] >= 6
        assert len(said("failed:")) == 1 and len(said("given up after")) == 1
        assert "1 payloads dropped" in said("given up after")[0].getMessage()
        r = receiver(port=port)  # the collector is back
        push(fwd, data)
        assert wait(lambda: fwd.forwarded == 1 and len(r.requests) == 1)
        (back,) = said("reachable again")
        assert f"{fwd.requests['error']} requests failed, 3 payloads dropped" in back.getMessage()
        r.close()  # gone again: said again, once
        push(fwd, data)
        assert wait(lambda: fwd.dropped.get("retries-exhausted") == 4)
        assert len(said("failed:")) == 2 and len(said("given up after")) == 2  # again after a delivery
    finally:
        fwd.max_elapsed_s = 60  # what is queued at close stays queued
        for _ in range(3):
            push(fwd, data)
        fwd.close(0.2)
    assert fwd.dropped.get("shutdown", 0) >= 1
    assert said("OTLP forwarder closed with")


def _forwarder_from_options(*argv):
    """The forwarder ``kip714 serve``'s OTLP options build (cli/_sinks.py)."""
    import argparse

    from kip714.cli._sinks import add_sink_options, build_sinks

    parser = argparse.ArgumentParser()
    add_sink_options(parser)
    (fwd,) = build_sinks(parser.parse_args(list(argv)))
    return fwd


def test_https_with_the_collectors_ca(receiver, tmp_path):
    """--otlp-endpoint https://… --otlp-ca FILE: the payload reaches a TLS receiver whose certificate was
    made here, spliced (the client's points, the broker-added labels in the resource)."""
    cert = make_cert(tmp_path)
    r = receiver(tls=cert)
    fwd = _forwarder_from_options("--otlp-endpoint", r.url + "/v1/metrics", "--otlp-ca", cert[0])
    data = sample_payloads()[0]
    try:
        inst = push(fwd, data, client_id="tls-client")
        assert wait(lambda: fwd.forwarded == 1)
    finally:
        fwd.close()
    assert fwd.requests == {"200": 1} and not fwd.dropped
    ((_, req),) = r.requests
    (rm,) = req.resource_metrics
    (want,) = MetricsData.FromString(data).resource_metrics
    attrs = dict(attrs_of(rm.resource))
    assert attrs["client_id"] == "tls-client" and attrs["client_instance_id"] == kip714.kafka_uuid_string(inst)
    assert rm.scope_metrics == want.scope_metrics


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")  # --otlp-insecure, on purpose
def test_https_untrusted_certificate_fails_and_is_counted(receiver, tmp_path):
    """A collector whose certificate the CA file does not vouch for (or, without a CA file, the system
    store): no request is delivered, each attempt is counted as a TLS error, the payload is dropped as
    retries-exhausted, and the request path never waits. --otlp-insecure then delivers to the same one."""
    trusted = make_cert(tmp_path, "trusted")
    r = receiver(tls=make_cert(tmp_path, "other"))
    short = ("--otlp-timeout", "2s")
    for argv in (("--otlp-ca", trusted[0]), ()):
        fwd = _forwarder_from_options("--otlp-endpoint", r.url, *short, *argv)
        fwd.initial_backoff_s, fwd.max_backoff_s, fwd.max_elapsed_s = 0.02, 0.05, 0.2
        try:
            t0 = time.perf_counter()
            push(fwd, ob.payload([ob.gauge("g", 1.0)]))
            assert time.perf_counter() - t0 < 0.05
            assert wait(lambda: fwd.dropped.get("retries-exhausted") == 1)
        finally:
            fwd.close(1)
        assert fwd.forwarded == 0 and fwd.requests.get("tls-error", 0) >= 1 and set(fwd.requests) == {"tls-error"}
        samples = {(m.name, tuple(s.labels.items())): s.value for m in fwd.self_metrics() for s in m.samples}
        assert samples[("kip714_otlp_requests", (("status", "tls-error"),))] >= 1
    assert not r.requests
    fwd = _forwarder_from_options("--otlp-endpoint", r.url, "--otlp-insecure")
    try:
        push(fwd, ob.payload([ob.gauge("g", 1.0)]))
        assert wait(lambda: fwd.forwarded == 1)
    finally:
        fwd.close()
    assert len(r.requests) == 1


@pytest.mark.parametrize(
    "argv",
    [
        ("--otlp-endpoint", "https://127.0.0.1:9/v1/metrics", "--otlp-client-key", "k.pem"),
        ("--prometheus", "127.0.0.1:0", "--prometheus-tls-key", "k.pem"),
    ],
)
@pytest.mark.unit
def test_a_key_without_its_certificate_is_refused(argv):
    from kip714.errors import InvalidConfigError

    with pytest.raises(InvalidConfigError, match="needs --"):
        _forwarder_from_options(*argv)


def test_forwarder_self_metrics_reach_the_prometheus_exporter(receiver):
    from prometheus_client.parser import text_string_to_metric_families

    r = receiver()
    fwd = OtlpForwarder(r.url)
    ex = kip714.PrometheusExporter(background=False)
    ex.add_self_metrics(fwd.self_metrics)
    ex.watch_queue("otlp", lambda: fwd.queue_depth)
    try:
        push(fwd, ob.payload([ob.gauge("g", 1.0)]))
        assert wait(lambda: fwd.forwarded == 1)
        text = ex.exposition()[0].decode()
    finally:
        fwd.close()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    assert samples[("kip714_otlp_payloads_forwarded_total", ())] == 1
    assert samples[("kip714_otlp_requests_total", (("status", "200"),))] == 1
    assert samples[("kip714_queue_depth", (("queue", "otlp"),))] == 0


@pytest.mark.unit
def test_urls_and_retry_after():
    assert metrics_url("http://h:4318") == "http://h:4318/v1/metrics"
    assert metrics_url("https://h/") == "https://h/v1/metrics"
    assert metrics_url("http://h:4318/custom/path") == "http://h:4318/custom/path"
    with pytest.raises(ValueError):
        metrics_url("h:4318")
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None
