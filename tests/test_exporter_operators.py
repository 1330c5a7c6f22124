"""What kip714 exposes for its dashboards and alert rules (issue 29): the normalised broker label, the
Streams sum that is not monotonic, the per-instance last push and expiry, the instance counters, the queue
capacities, the recording lag and the proxy's upstream errors."""

from __future__ import annotations

import time
import uuid

import pytest

pytest.importorskip("prometheus_client")
import otlp_build as ob
from prometheus_client.parser import text_string_to_metric_families

from kip714 import PrometheusExporter
from kip714.broker.receivers import ReceiverContext, TelemetryPayload
from kip714.broker.subscriptions import ClientInfo
from kip714.client.otlp_encode import MetricsCollector
from kip714.sinks.prometheus.names import broker_node


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def push(ex, data, instance, client_id="c1", terminating=False, interval_ms=1000, expiry_ms=None):
    ci = ClientInfo(client_id=client_id)
    ex.export_metrics(
        ReceiverContext(ci, 1, interval_ms, None, expiry_ms),
        TelemetryPayload(instance, terminating, "OTLP", data, ci.labels(1, instance), 0, 1, 0),
    )


def samples(ex):
    body, _ = ex.exposition(None)
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(body.decode()) for s in f.samples]


def one(found, name, **labels):
    hits = [v for n, lab, v in found if n == name and all(lab.get(k) == w for k, w in labels.items())]
    assert len(hits) == 1, (name, labels, [x for x in found if x[0] == name])
    return hits[0]


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("node-3", ("3", "broker")),  # Java
        ("3", ("3", "broker")),  # librdkafka's node.id
        ("node-2147483646", ("1", "coordinator")),  # Java's coordinator connection: Integer.MAX_VALUE - 1
        ("node--1", ("-1", "bootstrap")),  # Java's bootstrap connection
        ("node--2", ("-2", "bootstrap")),
        ("-1", ("-1", "coordinator")),  # librdkafka's logical group coordinator
        ("broker-a", None),
        ("", None),
    ],
)
def test_the_broker_a_node_tag_names(value, want):
    assert broker_node(value) == want


def test_one_broker_label_across_client_libraries_and_the_client_tag_kept():
    ex = PrometheusExporter(background=False)
    java, rdk = MetricsCollector(layout="java"), MetricsCollector(layout="librdkafka")
    name = "org.apache.kafka.producer.node.request.latency.avg"
    java.gauge(name, {"node_id": "node-3"}).set(5.0)
    java.gauge(name, {"node_id": "node-2147483646"}).set(1.0)
    rdk.gauge(name, {"node.id": 3}, value_type="double").set(7.0)
    push(ex, java.collect(), uuid.uuid4(), "java")
    push(ex, rdk.collect(), uuid.uuid4(), "rdk")
    found = samples(ex)
    lat = "org_apache_kafka_producer_node_request_latency_avg"
    assert one(found, lat, client_id="java", node_id="node-3", kafka_node_id="3", kafka_node_role="broker") == 5.0
    assert one(found, lat, client_id="rdk", node_id="3", kafka_node_id="3", kafka_node_role="broker") == 7.0
    assert one(found, lat, node_id="node-2147483646", kafka_node_id="1", kafka_node_role="coordinator") == 1.0
    # a metric without a per-node tag gets no broker label
    plain = MetricsCollector()
    plain.gauge("org.apache.kafka.producer.record.queue.time.avg").set(2.0)
    push(ex, plain.collect(), uuid.uuid4(), "plain")
    labels = next(lab for n, lab, _ in samples(ex) if n == "org_apache_kafka_producer_record_queue_time_avg")
    assert "kafka_node_id" not in labels


def test_restore_remaining_records_is_a_gauge_though_pushed_as_a_monotonic_sum():
    """Kafka Streams' task metric falls as restoration proceeds and is -1 when not restoring; Java pushes it
    as a monotonic sum (a CumulativeSum), delta or cumulative as asked."""
    name = "org.apache.kafka.stream.task.restore.remaining.records.total"
    for delta in (True, False):
        ex = PrometheusExporter(background=False)
        c = MetricsCollector()
        remaining = {"v": 5000.0}
        c.counter(name, {"thread_id": "t-1", "task_id": "0_1"}, value_fn=lambda: remaining["v"])
        inst = uuid.uuid4()
        for v in (5000.0, 1200.0, 0.0, -1.0):
            remaining["v"] = v
            push(ex, c.collect(delta=delta), inst)
            got = one(samples(ex), "org_apache_kafka_stream_task_restore_remaining_records_total", task_id="0_1")
            assert got == v
        assert "invalid-value" not in ex.dropped


def test_last_push_terminated_expired_and_the_expiry_marker():
    clock = Clock()
    ex = PrometheusExporter(background=False, clock=clock, expired_retention_s=60)
    c = MetricsCollector()
    c.gauge("org.apache.kafka.producer.record.queue.time.avg").set(1.0)
    stays, crashes, leaves = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    before = time.time()
    for inst, cid in ((stays, "stays"), (crashes, "crashes"), (leaves, "leaves")):
        push(ex, c.collect(), inst, cid, expiry_ms=3000)
    found = samples(ex)
    for cid in ("stays", "crashes", "leaves"):
        assert one(found, "kip714_client_last_push_timestamp_seconds", client_id=cid) >= before
    assert one(found, "kip714_client_instances", client_software_name="unknown") == 3
    push(ex, c.collect(), leaves, "leaves", terminating=True, expiry_ms=3000)
    samples(ex)  # the scrape exposes its final values, then it goes
    clock.t += 2.0
    push(ex, c.collect(), stays, "stays", expiry_ms=3000)
    clock.t += 2.0
    assert ex.expire() == 1  # "crashes": silent for 4 s > its 3 s expiry
    found = samples(ex)
    assert one(found, "kip714_instances_terminated_total") == 1
    assert one(found, "kip714_instances_expired_total") == 1
    assert one(found, "kip714_client_expired_timestamp_seconds", client_id="crashes") >= before
    assert not [
        x for x in found if x[0] == "kip714_client_expired_timestamp_seconds" and x[1]["client_id"] != "crashes"
    ]
    assert {lab["client_id"] for n, lab, _ in found if n == "kip714_client_last_push_timestamp_seconds"} == {"stays"}
    # the marker goes when an instance with those labels pushes again
    push(ex, c.collect(), crashes, "crashes", expiry_ms=3000)
    assert not [x for x in samples(ex) if x[0] == "kip714_client_expired_timestamp_seconds"]


def test_the_expiry_marker_is_kept_for_its_retention_only():
    clock, wall = Clock(), Clock()
    ex = PrometheusExporter(background=False, clock=clock, expired_retention_s=60)
    ex._store.wall_clock = wall
    push(ex, ob.payload([ob.gauge("g", 1.0)]), uuid.uuid4(), "gone", expiry_ms=1000)
    clock.t += 2
    ex.expire()
    assert one(samples(ex), "kip714_client_expired_timestamp_seconds", client_id="gone") == wall.t
    wall.t += 61
    ex.expire()
    assert not [x for x in samples(ex) if x[0] == "kip714_client_expired_timestamp_seconds"]


def test_last_push_of_instances_sharing_their_labels():
    """With labels that several live instances share, the series is their latest push (the wall clock's
    value at it), placed where the first of them is; it follows them as they go, and a wall clock that
    steps back is not mistaken for a later push."""
    clock, wall = Clock(), Clock()
    ex = PrometheusExporter(labels=("client_id",), background=False, clock=clock)
    ex._store.wall_clock = wall
    data = ob.payload([ob.gauge("g", 1.0)])
    first, second, third, other = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()

    def last_pushes():  # one scrape
        found = samples(ex)
        return [(lab["client_id"], v) for n, lab, v in found if n == "kip714_client_last_push_timestamp_seconds"]

    wall.t = 2000.0
    push(ex, data, first, "app", expiry_ms=5000)
    wall.t = 2001.0
    push(ex, data, other, "other", expiry_ms=60_000)
    wall.t = 2002.0
    push(ex, data, second, "app", expiry_ms=60_000)
    assert last_pushes() == [("app", 2002.0), ("other", 2001.0)]
    wall.t = 2003.0
    clock.t += 3
    push(ex, data, first, "app", terminating=True, expiry_ms=5000)
    assert last_pushes() == [("app", 2003.0), ("other", 2001.0)]  # the terminating push, exposed once
    # first is gone: app is second's last push, placed where second is (after other)
    assert last_pushes() == [("other", 2001.0), ("app", 2002.0)]
    wall.t = 1990.0  # the wall clock steps back: app's latest push is this one, not an earlier one
    push(ex, data, second, "app", expiry_ms=60_000)
    assert last_pushes() == [("other", 2001.0), ("app", 1990.0)]
    wall.t = 1995.0
    push(ex, data, third, "app", expiry_ms=60_000)
    wall.t = 1991.0
    push(ex, data, second, "app", expiry_ms=60_000)  # stepped back again, below third's push
    assert last_pushes() == [("other", 2001.0), ("app", 1995.0)]


def test_queue_capacities():
    ex = PrometheusExporter(background=False, max_queue=123)
    ex.watch_queue("otlp", lambda: 7, 500)
    ex.watch_queue("recorder", lambda: 3)
    found = samples(ex)
    assert one(found, "kip714_queue_capacity", queue="prometheus") == 123
    assert one(found, "kip714_queue_capacity", queue="otlp") == 500
    assert one(found, "kip714_queue_depth", queue="otlp") == 7
    assert not [x for x in found if x[0] == "kip714_queue_capacity" and x[1]["queue"] == "recorder"]
