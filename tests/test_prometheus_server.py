"""A real Prometheus server (Debian's ``prometheus``, installed by ``make prometheus``) scraping kip714.

Prometheus runs on 127.0.0.1 with its own temporary storage and a 1 s scrape interval; real librdkafka
clients (confluent-kafka) push to ``kip714 serve``'s TelemetryServer with a PrometheusExporter, and the
tests ask Prometheus' HTTP API what it stored. Every wait is bounded."""

from __future__ import annotations

import gc
import socket
import struct
import time
import uuid

import otlp_build as ob
import pytest
import server_thread
from rdk_close import await_push_answered

import kip714
from kip714 import PrometheusExporter, SubscriptionRegistry, TelemetryBroker
from kip714.broker.receivers import CallbackReceiver, ReceiverContext, TelemetryPayload
from kip714.broker.subscriptions import ClientInfo
from kip714.endpoint.server import TelemetryServer
from kip714.otlp import reference

confluent_kafka = pytest.importorskip("confluent_kafka")
from prometheus_runner import PROMETHEUS, Prometheus  # noqa: E402

pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason="the prometheus server is not installed (make prometheus)")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prom")
    reg = SubscriptionRegistry()
    reg.set("all", {"metrics": "*", "interval.ms": "500"})
    served = PrometheusExporter()  # default labels: client_id, client_instance_id
    seen = []  # every accepted payload, for the oracle
    broker = TelemetryBroker(reg, node_id=1, receivers=[served, CallbackReceiver(seen.append)])
    server = server_thread.ServerThread(TelemetryServer(broker, "127.0.0.1", 0), 10)
    direct = PrometheusExporter(labels="client_id")  # fed directly: restarts and histograms
    ports = [served.start_http_server("127.0.0.1", 0), direct.start_http_server("127.0.0.1", 0)]
    prom = Prometheus(tmp, [f"127.0.0.1:{p}" for p in ports])
    try:
        yield {"server": server, "served": served, "direct": direct, "prom": prom, "seen": seen}
    finally:
        prom.stop()
        server.stop()
        served.close()
        direct.close()


def feed(ex, data, instance, client_id):
    ci = ClientInfo(client_id=client_id)
    ex.export_metrics(
        ReceiverContext(ci, 1), TelemetryPayload(instance, False, "OTLP", data, ci.labels(1, instance), 0, 1, 0)
    )


def test_librdkafka_producer_series_values_and_disappearance(stack):
    prom, seen = stack["prom"], stack["seen"]
    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": stack["server"].bootstrap,
            "client.id": "prom-producer",
            "enable.sparse.connections": False,
            "log_level": 0,
        }
    )
    gauge = 'org_apache_kafka_producer_node_request_latency_avg{client_id="prom-producer"}'
    counter = 'org_apache_kafka_producer_connection_creation_total{client_id="prom-producer"}'
    try:
        deadline = time.monotonic() + 20
        found = []
        while time.monotonic() < deadline and not found:
            p.poll(0.1)
            found = prom.query(gauge)
        assert found, "the producer's series never reached Prometheus"
        labels = found[0]["metric"]
        assert labels["client_id"] == "prom-producer" and len(labels["client_instance_id"]) == 22
        assert labels["node_id"] == "1" and labels["otel_scope_version"].startswith("2.")
        assert labels["job"] == "kip714"
        instance = labels["client_instance_id"]
        for _ in range(10):
            p.poll(0.1)
        await_push_answered(p, lambda: len(seen))  # then its close sends the terminating push
    finally:
        del p  # rd_kafka_destroy: the terminating push
        gc.collect()
    assert stack["served"].flush(10)
    mine = [pl for pl in seen if kip714.kafka_uuid_string(pl.client_instance_id) == instance]
    assert mine and mine[-1].terminating
    # the oracle: protobuf's reading of every accepted payload of this instance
    total = sum(
        r["value"]
        for pl in mine
        for r in reference.flatten(pl.data)
        if r["metric"] == "org.apache.kafka.producer.connection.creation.total"
    )
    last = {
        r["attributes"].get("node.id"): r["value"]
        for r in reference.flatten(mine[-1].data)
        if r["metric"] == "org.apache.kafka.producer.node.request.latency.avg"
    }
    # the terminating push's values are scraped once, then the series go stale
    prom.wait(f"absent({counter})", timeout=15)
    final = prom.query(f"last_over_time({counter}[2m])")
    assert [float(r["value"][1]) for r in final] == [total]
    final = prom.query(f"last_over_time({gauge}[2m])")
    assert {r["metric"]["node_id"]: float(r["value"][1]) for r in final} == last
    assert prom.query(gauge) == [] and prom.query(counter) == []
    rates = prom.query(f"min_over_time(rate({counter}[3s])[1m:1s])")
    assert all(float(r["value"][1]) >= 0 for r in rates)


def test_restart_never_gives_a_negative_rate(stack):
    prom, ex = stack["prom"], stack["direct"]
    first, second = uuid.uuid4(), uuid.uuid4()
    for v in (100, 130, 170):
        feed(ex, ob.payload([ob.sum_("restart.demo", v, temporality=ob.CUMULATIVE, start=10)]), first, "r1")
        time.sleep(1.1)
    for v in (5, 12):  # the client restarted: a new instance id, a new start time, a smaller value
        feed(ex, ob.payload([ob.sum_("restart.demo", v, temporality=ob.CUMULATIVE, start=99)]), second, "r1")
        time.sleep(1.1)
    prom.wait('restart_demo_total{client_id="r1"}', lambda r: r and float(r[0]["value"][1]) == 182)
    assert float(prom.query('resets(restart_demo_total{client_id="r1"}[1m])')[0]["value"][1]) == 0
    rates = prom.query('min_over_time(rate(restart_demo_total{client_id="r1"}[3s])[1m:1s])')
    assert rates and all(float(r["value"][1]) >= 0 for r in rates)


def test_histogram_quantile_over_exported_buckets(stack):
    prom, ex = stack["prom"], stack["direct"]
    inst = uuid.uuid4()
    feed(ex, ob.payload([ob.histogram("hq.latency", [1.0, 2.0, 4.0], [0, 10, 0, 0], 15.0, unit="s")]), inst, "h1")
    feed(ex, ob.payload([ob.histogram("hq.latency", [1.0, 2.0, 4.0], [0, 0, 10, 0], 30.0, unit="s")]), inst, "h1")
    q = 'histogram_quantile(0.5, hq_latency_seconds_bucket{client_id="h1"})'
    result = prom.wait(q)
    assert float(result[0]["value"][1]) == pytest.approx(2.0)  # 10 in (1, 2], 10 in (2, 4]: the median is 2
    result = prom.query('histogram_quantile(0.75, hq_latency_seconds_bucket{client_id="h1"})')
    assert float(result[0]["value"][1]) == pytest.approx(3.0)
    assert float(prom.query('hq_latency_seconds_count{client_id="h1"}')[0]["value"][1]) == 20
    assert float(prom.query('hq_latency_seconds_sum{client_id="h1"}')[0]["value"][1]) == 45


def _push_once(bootstrap: str) -> None:
    """One client's subscription asked for and one push answered NONE, over a raw socket: this test's own
    push, whichever tests ran before it."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        f = s.makefile("rb")

        def ask(body, key: int, corr: int):
            s.sendall(kip714.encode_request(body, corr, "prom-self", 0))
            (size,) = struct.unpack(">i", f.read(4))
            return kip714.decode_response(f.read(size), key, 0).body

        sub = ask(kip714.GetTelemetrySubscriptionsRequest(bytes(16)), 71, 1)
        data = ob.payload([ob.sum_("self.metrics.demo", 1, temporality=ob.CUMULATIVE, start=10)])
        push = kip714.PushTelemetryRequest(sub.client_instance_id, sub.subscription_id, False, 0, data)
        assert ask(push, 72, 2).error_code == 0


def test_self_metrics_are_scraped(stack):
    prom = stack["prom"]
    _push_once(stack["server"].bootstrap)
    result = prom.wait('kip714_pushes_total{error_code="NONE"}')
    assert float(result[0]["value"][1]) >= 1
    assert prom.wait("kip714_export_series_limit")[0]["value"][1] == "100000"
    assert prom.query('up{job="kip714"}') and all(r["value"][1] == "1" for r in prom.query('up{job="kip714"}'))
