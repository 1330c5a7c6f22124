"""kip714's dashboards and alert rules against a real Prometheus (Debian's) scraping kip714 while clients push.

One stack for the module: real librdkafka clients (confluent-kafka) produce and consume through ``kip714
proxy`` in front of librdkafka's mock cluster (the proxy answers their telemetry), and a simulated fleet of
Java-style and librdkafka-style producers and consumers and Kafka Streams applications pushes to ``kip714
serve`` over TCP (with a recording, OTLP forwarding to a stub collector, and a second exporter capped at 50
series). A few clients misbehave: a broker slow for one producer, throttling, record errors, a consumer
falling behind, one throttled on fetches, a client that vanishes without a terminating push, a stream thread
that dies, one stuck in a processor, an application stuck REBALANCING, pushes that do not decode; the proxy
loses a broker for a moment. The proxy's exporter names its replica (``proxy-1``, as ``--replica-id`` does),
and a second replica's exporter (``proxy-2``) is scraped, then stops answering. Prometheus scrapes every
second and evaluates the generated rules every second (short windows).

Every panel query of every generated dashboard is evaluated through Prometheus' HTTP API: each parses and
each panel returns series (the client-specific ones too: every client kind is in this fleet). The alerts
that fire are exactly those of the misbehaving clients. The dashboards are drawn from the same queries
(``KIP714_DOCS_PICTURES=1`` writes all five to docs/dashboards/, else one to a temporary folder).
"""

from __future__ import annotations

import gc
import http.server
import os
import pathlib
import socket
import threading
import time
import uuid

import pytest

ck = pytest.importorskip("confluent_kafka")
pytest.importorskip("prometheus_client")

import server_thread  # noqa: E402
from mock_cluster import MockCluster  # noqa: E402
from prometheus_runner import PROMETHEUS, Prometheus  # noqa: E402
from proxy_helpers import closed_by_peer, connect, start_proxy  # noqa: E402

import kip714  # noqa: E402
from kip714 import PrometheusExporter, SubscriptionRegistry, TelemetryBroker  # noqa: E402
from kip714.endpoint.health import endpoint_metric_families  # noqa: E402
from kip714.endpoint.server import TelemetryServer  # noqa: E402
from kip714.operations import AlertSettings, dashboards, rules  # noqa: E402
from kip714.operations.panels import substitute  # noqa: E402
from kip714.operations.yaml_text import dump  # noqa: E402
from kip714.sinks import OtlpForwarder, ParquetRecorder  # noqa: E402
from kip714.tools.simulate import Fleet  # noqa: E402

pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason="the prometheus server is not installed (make prometheus)")

ROOT = pathlib.Path(__file__).resolve().parents[1]
FAST = AlertSettings(window="5s", pending="1s", evaluation_interval="1s", streams_state_pending="2s")
RATE = "5s"  # $__rate_interval: four scrapes


class _Always:
    """Throttled in every window (a stand-in for the simulator's throttling bursts)."""

    def overlap(self, t0: int, t1: int) -> float:
        return 1.0


class _Collector(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP collector that accepts everything."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def _fleet() -> tuple[Fleet, dict[str, str]]:
    """The simulated fleet and, by role, the client id (or application / thread id) that misbehaves."""
    fleet = Fleet(8, 6, seed=29, software="mix", n_streams=2, slow_broker=None, incidents=False,
                  start_spread_ms=500, close_spread_ms=0, client_id_prefix="sim-")  # fmt: skip
    java_p = [c for c in fleet.producers if c.layout == "java"]
    java_c = [c for c in fleet.consumers if c.layout == "java" and c.streams is None]
    other_p = [c for c in fleet.producers if c not in java_p[:3]]

    def slow(model):
        model.node_factor = {n: (40.0 if n == 3 else 1.0) for n in model.node_factor}

    def throttled(model):
        model.throttle, model.throttle_level = _Always(), 60.0

    def failing(model):
        model.error_probability = 0.2

    java_p[0].tune, java_p[1].tune, java_p[2].tune = slow, throttled, failing
    java_c[0].tune = lambda m: setattr(m, "lag_growth", 5000.0)
    java_c[1].tune = lambda m: setattr(m, "fetch_throttle_level", 80.0)
    other_p[0].leave_after_ms, other_p[0].leave_cleanly = 3000, False  # vanishes
    other_p[1].leave_after_ms = 3000  # leaves with a terminating push: no alert
    dying, rebalancing = fleet.streams_apps
    dying.fail_thread, dying.block_thread = (2, 4000), (1, 3000)
    rebalancing.state_change = (3000, 1)
    who = {
        "slow": java_p[0].client_id, "throttled": java_p[1].client_id, "failing": java_p[2].client_id,
        "lagging": java_c[0].client_id, "fetch-throttled": java_c[1].client_id, "vanished": other_p[0].client_id,
        "left": other_p[1].client_id, "dying-app": dying.application_id, "blocked": dying.thread_id(1),
        "rebalancing-app": rebalancing.application_id,
    }  # fmt: skip
    return fleet, who


def _librdkafka(bootstrap: str, stop: threading.Event) -> list[threading.Thread]:
    """A real librdkafka producer and consumer through the proxy, each polling in its own thread until stop."""

    def produce() -> None:
        p = ck.Producer({"bootstrap.servers": bootstrap, "client.id": "rdk-producer", "linger.ms": 5,
                         "log_level": 0})  # fmt: skip
        i = 0
        while not stop.is_set():
            p.produce("orders", b"v%d" % i)
            i += 1
            p.poll(0.05)
        p.flush(5)
        del p
        gc.collect()

    def consume() -> None:
        c = ck.Consumer({"bootstrap.servers": bootstrap, "client.id": "rdk-consumer", "group.id": "rdk-group",
                         "auto.offset.reset": "earliest", "log_level": 0})  # fmt: skip
        c.subscribe(["orders"])
        while not stop.is_set():
            c.poll(0.1)
        c.close()

    threads = [threading.Thread(target=f, daemon=True) for f in (produce, consume)]
    for t in threads:
        t.start()
    return threads


def _bad_pushes(port: int, stop: threading.Event) -> None:
    """Pushes whose payload does not decompress: kip714 answers INVALID_RECORD (Kip714PushErrors)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        corr = 0
        while not stop.wait(0.08):
            corr += 1
            s.sendall(kip714.encode_request(kip714.wire.GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)), corr,
                                            "garbage-pusher", 0))  # fmt: skip
            get = kip714.decode_response(_frame(s), 71, 0).body
            if get.error_code:
                continue
            corr += 1
            body = kip714.wire.PushTelemetryRequest(get.client_instance_id, get.subscription_id, False, 4, b"\x28\xb5x")
            s.sendall(kip714.encode_request(body, corr, "garbage-pusher", 0))
            _frame(s)


def _frame(s: socket.socket) -> bytes:
    from proxy_helpers import recv_frame

    return recv_frame(s)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("operations")
    stop = threading.Event()
    closers: list = []
    try:
        # the proxy, answering the telemetry of real librdkafka clients in front of librdkafka's mock cluster
        mock = MockCluster(3, disable_apis=(71, 72))
        closers.append(mock.close)
        mock.create_topic("orders", 3)
        reg_p = SubscriptionRegistry()
        reg_p.set("all", {"metrics": "*", "interval.ms": "500"})
        proxy_exporter = PrometheusExporter(self_labels={"replica": "proxy-1"})
        closers.append(proxy_exporter.close)
        pt = start_proxy(mock.bootstraps, broker=TelemetryBroker(reg_p, receivers=[proxy_exporter]))
        closers.append(pt.stop)
        proxy_exporter.add_self_metrics(lambda: endpoint_metric_families(pt.proxy))
        # kip714 serve: the main exporter, a capped one (it drops), a recording, OTLP forwarding
        collector = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
        threading.Thread(target=collector.serve_forever, daemon=True).start()
        closers.append(collector.shutdown)
        forwarder = OtlpForwarder(f"http://127.0.0.1:{collector.server_port}")
        closers.append(forwarder.close)
        recorder = ParquetRecorder(tmp / "recording")
        closers.append(recorder.close)
        exporter = PrometheusExporter(expired_retention_s=600)
        closers.append(exporter.close)
        capped = PrometheusExporter(max_series=50)
        closers.append(capped.close)
        exporter.watch_queue("recorder", recorder.pending)
        exporter.add_self_metrics(recorder.self_metrics)
        exporter.watch_queue("otlp", lambda: forwarder.queue_depth, forwarder.max_queue)
        exporter.add_self_metrics(forwarder.self_metrics)
        reg = SubscriptionRegistry()
        reg.set("all", {"metrics": "*", "interval.ms": "500"})
        broker = TelemetryBroker(reg, node_id=1, cache_expiry_ms=2000,
                                 receivers=[exporter, capped, recorder, forwarder])  # fmt: skip
        server = server_thread.ServerThread(TelemetryServer(broker, "127.0.0.1", 0), 10)
        closers.append(server.stop)
        exporter.add_self_metrics(lambda: endpoint_metric_families(server.server))
        # a second proxy replica, scraped until it stops answering (Kip714ReplicaDown)
        dying = PrometheusExporter(self_labels={"replica": "proxy-2"})
        closers.append(dying.close)
        ports = [e.start_http_server("127.0.0.1", 0) for e in (exporter, capped, proxy_exporter, dying)]
        rule_file = tmp / "kip714-rules.yml"
        rule_file.write_text(dump(rules(settings=FAST)))
        prom = Prometheus(tmp, [f"127.0.0.1:{p}" for p in ports], [str(rule_file)])
        closers.append(prom.stop)
        prom.wait("up", lambda r: len(r) == 4, timeout=30)  # Prometheus' first scrapes: up to 5 s after its start
        started = time.time()
        prom.wait('kip714_build_info{replica="proxy-2"}', timeout=10)
        dying.close()
        # the clients
        # the proxy loses broker 3 for a moment, before any client uses it (Kip714ProxyUpstreamErrors): a
        # Metadata request through it makes it open its brokers' listeners
        with connect(pt.port) as s:
            s.sendall(kip714.encode_request(kip714.wire.MetadataRequest(topics=[]), 1, "probe", 9))
            _frame(s)
        assert pt.wait_for(lambda: 3 in pt.call(lambda: pt.proxy.broker_ports), 20), "the proxy did not learn broker 3"
        port3 = pt.call(lambda: pt.proxy.broker_ports)[3]
        mock.command("down", 3)
        try:
            with connect(port3) as s:
                s.sendall(kip714.encode_request(kip714.wire.MetadataRequest(topics=[]), 1, "probe", 9))
                assert closed_by_peer(s, 5)
        finally:
            mock.command("up", 3)
        threads = _librdkafka(pt.bootstrap, stop)
        fleet, who = _fleet()
        threads.append(threading.Thread(target=fleet.run_tcp, args=("127.0.0.1", server.port, 90.0),
                                        kwargs={"stop": stop}, daemon=True))  # fmt: skip
        threads.append(threading.Thread(target=_bad_pushes, args=(server.port, stop), daemon=True))
        for t in threads[2:]:
            t.start()
        closers.append(lambda: [t.join(15) for t in threads])
        closers.append(stop.set)
        yield {
            "prom": prom,
            "who": who,
            "started": started,
            "fleet": fleet,
            "main": f"127.0.0.1:{ports[0]}",
            "proxy": f"127.0.0.1:{ports[2]}",
        }
    finally:
        for close in reversed(closers):
            try:
                close()
            except Exception:  # tear everything down, whatever failed
                pass


def _labels(alert: dict) -> dict:
    return alert["metric"] if "metric" in alert else alert["labels"]


def test_the_alerts_of_the_misbehaving_clients_fire_and_no_other(stack):
    prom, who = stack["prom"], stack["who"]
    expected = {
        ("KafkaClientBrokerLatencyOutlier", who["slow"]),
        ("KafkaProducerThrottled", who["throttled"]),
        ("KafkaProducerRecordErrors", who["failing"]),
        ("KafkaProducerRecordRetries", who["failing"]),  # its errors are retried first
        ("KafkaConsumerLagGrowing", who["lagging"]),
        ("KafkaConsumerThrottled", who["fetch-throttled"]),
        ("KafkaClientStoppedPushing", who["vanished"]),
        ("KafkaStreamsThreadFailed", who["dying-app"]),
        ("KafkaStreamsThreadBlocked", who["blocked"]),
        ("KafkaStreamsClientNotRunning", who["rebalancing-app"]),
        ("Kip714PushErrors", "INVALID_RECORD"),
        ("Kip714DroppingData", "series-limit"),
        ("Kip714SeriesLimit", None),
        ("Kip714ProxyUpstreamErrors", "3"),
        ("Kip714ReplicaDown", "proxy-2"),
    }

    def key(labels: dict) -> tuple[str, str | None]:
        name = labels["alertname"]
        if name == "Kip714DroppingData":
            return name, labels["reason"]
        if name == "Kip714ReplicaDown":
            return name, labels.get("replica")
        for k in ("application_id", "thread_id", "client_id", "error_code", "node_id"):
            if k in labels:
                return name, labels[k]
        return name, None

    deadline = time.monotonic() + 40
    fired: set = set()
    while time.monotonic() < deadline:
        # every alert that fired at any evaluation so far (ALERTS keeps their history)
        history = prom.query_range('ALERTS{alertstate="firing"}', stack["started"], time.time(), 1)
        fired = {key(_labels(a)) for a in history}
        if expected <= fired:
            break
        time.sleep(0.5)
    assert expected <= fired, f"did not fire: {sorted(expected - fired, key=str)}"
    assert fired == expected, f"fired without a cause: {sorted(fired - expected, key=str)}"
    # each names the client and the evidence
    now = {key(a["labels"]): a for a in prom.firing()}
    outlier = now.get(("KafkaClientBrokerLatencyOutlier", who["slow"]))
    if outlier is not None:
        assert outlier["labels"]["kafka_node_id"] == "3"
        assert who["slow"] in outlier["annotations"]["description"]
        assert "node.request.latency.avg" in outlier["annotations"]["description"]


def test_every_panel_query_parses_and_returns_series(stack):
    prom, started = stack["prom"], stack["started"]
    prom.wait("kip714_client_expired_timestamp_seconds", timeout=30)  # the last condition the panels need
    prom.wait("rate(kip714_upstream_errors_total[1m]) > 0", timeout=20)
    empty = []
    for d in dashboards():
        for p in d.panels:
            if p.feature == "state-topic":  # the state topic's replicas are not part of this stack
                continue
            got = 0
            for q in p.queries:
                expr = substitute(q.expr, rate_interval=RATE, range_="1m")
                if q.instant:
                    got += len(prom.query(expr))
                else:
                    got += len(prom.query_range(expr, started, time.time(), 1))
            if not got:
                empty.append(f"{d.uid}: {p.title}")
    assert not empty, f"panels without series: {empty}"


def test_a_client_whose_series_two_targets_hold_is_one_client(stack):
    """The capped exporter receives the pushes of the main one's clients (both are receivers of one broker):
    two scrape targets hold series of the same clients, as two replicas hold a client that moved. The fleet
    dashboard counts each client once (the main exporter's own count, which holds them all, and the proxy's,
    whose clients are others), where a sum over the targets counts them twice."""
    prom = stack["prom"]
    (panel,) = [p for d in dashboards() if d.uid == "kip714-fleet" for p in d.panels if p.title == "Client instances"]
    deadline = time.monotonic() + 20
    while True:
        at = time.time()
        result = prom.query(panel.queries[0].expr, at=at)
        once = float(result[0]["value"][1]) if result else None
        by_target = {
            r["metric"]["instance"]: float(r["value"][1]) for r in prom.query("kip714_export_instances", at=at)
        }
        truth = by_target.get(stack["main"], 0.0) + by_target.get(stack["proxy"], 0.0)
        if once == truth or time.monotonic() > deadline:
            break
        # not scraped yet, or the targets were scraped at different moments while clients came and went: ask again
        time.sleep(0.5)
    assert once == truth and by_target[stack["main"]] > 0 and by_target[stack["proxy"]] > 0
    assert sum(by_target.values()) > once


def test_the_dashboards_are_drawn_from_the_same_queries(stack, tmp_path):
    pytest.importorskip("matplotlib")
    from kip714.tools.dashboard_render import legend_of, render

    prom, started = stack["prom"], stack["started"]
    end = time.time()

    def fetch(panel, query):
        expr = substitute(query.expr, rate_interval=RATE, range_="1m")
        if query.instant or panel.kind in ("stat", "table"):
            return [(legend_of(query, r["metric"]), [float(r["value"][0])], [float(r["value"][1])])
                    for r in prom.query(expr, at=end)]  # fmt: skip
        return [
            (legend_of(query, r["metric"]), [float(t) for t, _ in r["values"]], [float(v) for _, v in r["values"]])
            for r in prom.query_range(expr, started, end, 1)
        ]

    if os.environ.get("KIP714_DOCS_PICTURES") == "1":  # the documentation's pictures: a minute of history
        time.sleep(max(0.0, started + 60 - time.time()))  # (only when drawing them: data to show, not a sync)
        end = time.time()
        for d in dashboards():
            render(d, fetch, ROOT / "docs" / "dashboards" / f"{d.uid}.png")
    png = render(next(d for d in dashboards() if d.uid == "kip714-fleet"), fetch, tmp_path / "fleet.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
