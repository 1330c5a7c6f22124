"""PrometheusExporter against Prometheus' own parsers (prometheus_client's text and OpenMetrics parsers).

Payloads are built with opentelemetry-proto (tests/otlp_build.py) or are the bundled librdkafka captures;
every exposition is parsed back, and the values are compared with what the points say."""

from __future__ import annotations

import math
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest

pytest.importorskip("prometheus_client")
import otlp_build as ob
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_families
from prometheus_client.parser import text_string_to_metric_families as text_families

from kip714 import PrometheusExporter
from kip714.broker.receivers import ReceiverContext, TelemetryPayload
from kip714.broker.subscriptions import ClientInfo
from kip714.otlp import reference
from kip714.sinks.prometheus.names import broker_node_labels, label_name, merge_labels, metric_name
from kip714.tools.bench import sample_payloads


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def push(ex, data, instance, client_id="c1", terminating=False, interval_ms=None, port=50000):
    ci = ClientInfo(client_id=client_id, client_source_port=port)
    ex.export_metrics(
        ReceiverContext(ci, 1, interval_ms),
        TelemetryPayload(instance, terminating, "OTLP", data, ci.labels(1, instance), 0, 1, 0),
    )


def scrape(ex, openmetrics=False):
    body, _ctype = ex.exposition("application/openmetrics-text; version=1.0.0" if openmetrics else None)
    text = body.decode()
    fams = list(om_families(text) if openmetrics else text_families(text))
    return {s.name + _lbl(s.labels): s.value for f in fams for s in f.samples}, {f.name: f for f in fams}, text


def _lbl(labels):
    skip = ("otel_scope_name", "otel_scope_version", "client_instance_id", "client_id")
    items = sorted((k, v) for k, v in labels.items() if k not in skip)
    return "{" + ",".join(f"{k}={v}" for k, v in items) + "}" if items else ""


def client_samples(samples):
    return {k: v for k, v in samples.items() if not k.startswith("kip714_")}


# ------------------------------------------------------------------------------------------ names


@pytest.mark.parametrize(
    "name,unit,kind,mono,want",
    [
        # librdkafka and the Java client send no unit
        (
            "org.apache.kafka.producer.node.request.latency.avg",
            "",
            "gauge",
            None,
            "org_apache_kafka_producer_node_request_latency_avg",
        ),
        (
            "org.apache.kafka.producer.connection.creation.total",
            "",
            "sum",
            True,
            "org_apache_kafka_producer_connection_creation_total",
        ),
        (
            "org.apache.kafka.consumer.poll.idle.ratio.avg",
            "",
            "gauge",
            None,
            "org_apache_kafka_consumer_poll_idle_ratio_avg",
        ),
        (
            "org.apache.kafka.producer.record.send.total",
            "",
            "sum",
            False,
            "org_apache_kafka_producer_record_send_total",
        ),
        (
            "org.apache.kafka.producer.bufferpool.wait.ratio",
            "1",
            "gauge",
            None,
            "org_apache_kafka_producer_bufferpool_wait_ratio",
        ),
        (
            "org.apache.kafka.consumer.fetch.manager.bytes.consumed",
            "By",
            "sum",
            True,
            "org_apache_kafka_consumer_fetch_manager_bytes_consumed_total",
        ),
        ("http.server.duration", "ms", "histogram", None, "http_server_duration_milliseconds"),
        ("system.network.dropped", "{packets}", "sum", True, "system_network_dropped_total"),
        ("system.network.io", "By/s", "gauge", None, "system_network_io_bytes_per_second"),
        ("(lambda).function.executions(#)", "", "gauge", None, "lambda_function_executions"),
        ("system.memory.utilization", "1", "gauge", None, "system_memory_utilization_ratio"),
        ("total.requests", "", "sum", True, "requests_total"),
        ("seconds.before.birthday", "s", "gauge", None, "seconds_before_birthday"),
        ("5xx.count", "", "gauge", None, "_5xx_count"),
        ("...", "", "gauge", None, ""),
    ],
)
def test_metric_names_follow_the_otel_spec(name, unit, kind, mono, want):
    assert metric_name(name, unit, kind, mono) == want


@pytest.mark.parametrize(
    "key,want",
    [
        ("node.id", "node_id"),
        ("client_rack", "client_rack"),
        ("1abc", "key_1abc"),
        ("_x", "key_x"),
        ("__name__", "key_name_"),
        ("a..b/c", "a_b_c"),
        ("ü", "_"),
        ("", ""),
    ],
)
def test_label_names(key, want):
    got = label_name(key)
    if want == "_":
        assert got == "key_"
    else:
        assert got == want


def test_colliding_label_names_join_values_in_key_order():
    labels, dropped = merge_labels([("b.x", "2"), ("a.x", "1"), ("c", "3"), ("", "lost")])
    assert labels == {"b_x": "2", "a_x": "1", "c": "3"} and dropped == 1
    labels, _ = merge_labels([("node_id", "broker"), ("node.id", "7")])
    assert labels == {"node_id": "7;broker"}  # "node.id" < "node_id"


# ------------------------------------------------------------------------------------------ librdkafka captures


def test_librdkafka_captures_are_exposed_with_their_values():
    ex = PrometheusExporter(background=False)
    inst = uuid.uuid4()
    payloads = sample_payloads()[1:5]  # the producer captures (one instance, delta sums)
    for d in payloads:
        push(ex, d, inst)
    samples, fams, text = scrape(ex)
    # the oracle: protobuf's reading of the same payloads; gauges last value, delta sums added
    want: dict[str, float] = {}
    for d in payloads:
        for r in reference.flatten(d):
            name = metric_name(r["metric"], r["unit"], r["kind"], r["monotonic"])
            labels = {label_name(k): v for k, v in r["attributes"].items()}
            labels |= dict(broker_node_labels(r["attributes"].items()))  # kafka_node_id, kafka_node_role
            key = name + _lbl(labels)
            if r["kind"] == "sum":
                want[key] = want.get(key, 0.0) + r["value"]
            else:
                want[key] = r["value"]
    assert client_samples(samples) == want
    assert fams["org_apache_kafka_producer_connection_creation"].type == "counter"
    assert 'client_instance_id="' in text and 'otel_scope_version="2.16.0"' in text
    om_samples, _, _ = scrape(ex, openmetrics=True)
    assert client_samples(om_samples) == want
    assert samples["kip714_export_instances"] == 1


def test_export_path_builds_no_uuid_and_keys_instances_by_their_bytes(monkeypatch):
    """A payload from the broker carries the 16-byte id: export_metrics and absorbing build no uuid.UUID
    (the broker path builds none per push); an item with a uuid.UUID from a direct caller lands on the
    same instance."""
    inst = uuid.uuid4()
    payloads = sample_payloads()[1:3]
    ci = ClientInfo(client_id="c1", client_source_port=50000)
    ex = PrometheusExporter(background=False)
    built = []
    real_init = uuid.UUID.__init__

    def counting_init(self, *args, **kwargs):
        built.append(args or kwargs)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(uuid.UUID, "__init__", counting_init)
    for d in payloads:
        ex.export_metrics(
            ReceiverContext(ci, 1, None),
            TelemetryPayload(inst.bytes, False, "OTLP", d, ci.labels(1, inst.bytes), 0, 1, 0),
        )
    assert built == []
    monkeypatch.undo()
    samples, _, _ = scrape(ex)
    assert samples["kip714_export_instances"] == 1
    ex.absorb([(inst, ci.labels(1, inst), payloads[0], False, None)])  # a direct caller's uuid.UUID
    again, _, _ = scrape(ex)
    assert again["kip714_export_instances"] == 1 and client_samples(again).keys() == client_samples(samples).keys()


def test_labels_option_and_scope_labels():
    ex = PrometheusExporter(labels="client_id,client_source_port", scope_labels=False, background=False)
    push(ex, ob.payload([ob.gauge("g", 1.0, {"topic": "t"})], resource={"group.id": "grp"}), uuid.uuid4(), port=4242)
    _, fams, _ = scrape(ex)
    (s,) = fams["g"].samples
    assert s.labels == {"topic": "t", "group_id": "grp", "client_id": "c1", "client_source_port": "4242"}
    with pytest.raises(ValueError, match="unknown broker-added label"):
        PrometheusExporter(labels="client_id,nope", background=False)


# ------------------------------------------------------------------------------------------ point types


def test_every_point_type():
    ex = PrometheusExporter(background=False)
    inst = uuid.uuid4()
    one = ob.payload(
        [
            ob.gauge("temp", 3.5, unit="Cel"),
            ob.sum_("req", 5, monotonic=True, temporality=ob.DELTA),
            ob.sum_("queue.size", 7, monotonic=False, temporality=ob.DELTA),
            ob.sum_("conn", 10, monotonic=True, temporality=ob.CUMULATIVE, start=100),
            ob.sum_("inflight", 4, monotonic=False, temporality=ob.CUMULATIVE),
            ob.histogram("lat", [1.0, 5.0, 10.0], [1, 2, 3, 4], 50.0, unit="ms"),
            ob.summary("rtt", [(0.5, 2.0), (0.99, 9.0)], 10, 30.0),
            ob.exp_histogram("size", 0, 0, [1, 2, 3], zero=1, total=20.0, neg_offset=1, neg_counts=[2]),
        ]
    )
    two = ob.payload(
        [
            ob.gauge("temp", 4.5, unit="Cel"),
            ob.sum_("req", 2, monotonic=True, temporality=ob.DELTA),
            ob.sum_("queue.size", -3, monotonic=False, temporality=ob.DELTA),
            ob.sum_("conn", 12, monotonic=True, temporality=ob.CUMULATIVE, start=100),
            ob.sum_("inflight", 2, monotonic=False, temporality=ob.CUMULATIVE),
            ob.histogram("lat", [1.0, 5.0, 10.0], [0, 1, 0, 1], 20.0, unit="ms"),
            ob.summary("rtt", [(0.5, 3.0), (0.99, 8.0)], 20, 70.0),
            ob.exp_histogram("size", 0, 1, [1], total=3.0),
        ]
    )
    push(ex, one, inst)
    push(ex, two, inst)
    for om in (False, True):
        samples, fams, _ = scrape(ex, openmetrics=om)
        assert samples["temp_celsius"] == 4.5
        assert samples["req_total"] == 7
        assert samples["queue_size"] == 4  # up-down counter: 7 - 3
        assert samples["conn_total"] == 12  # cumulative: 10, then +2
        assert samples["inflight"] == 2
        assert [samples[f"lat_milliseconds_bucket{{le={le}}}"] for le in ("1", "5", "10", "+Inf")] == [1, 4, 7, 12]
        assert samples["lat_milliseconds_count"] == 12 and samples["lat_milliseconds_sum"] == 70
        assert samples["rtt_milliseconds{quantile=0.5}"] == 3 and samples["rtt_milliseconds{quantile=0.99}"] == 8
        assert samples["rtt_milliseconds_count"] == 20 and samples["rtt_milliseconds_sum"] == 70
        # exponential, scale 0: positive bucket i = (2**i, 2**(i+1)]; negative bucket 1 = [-4, -2)
        assert samples["size_seconds_bucket{le=-2}"] == 2
        assert samples["size_seconds_bucket{le=0}"] == 3  # + the zero bucket
        assert samples["size_seconds_bucket{le=2}"] == 4
        assert samples["size_seconds_bucket{le=4}"] == 7  # 2 + 1 from the second point (offset 1)
        assert samples["size_seconds_bucket{le=8}"] == 10
        assert samples["size_seconds_bucket{le=+Inf}"] == 10
        # negative buckets: no _sum (the OTel spec: a sum is exposed only when every bucket is positive;
        # OpenMetrics refuses it too); _count in the text format (the spec), not in OpenMetrics (its
        # _count appears if and only if _sum does; the +Inf bucket carries the count)
        assert "size_seconds_sum" not in samples
        if om:
            assert "size_seconds_count" not in samples
        else:
            assert samples["size_seconds_count"] == 10
        assert fams["lat_milliseconds"].type == "histogram" and fams["rtt_milliseconds"].type == "summary"
        assert fams["queue_size"].type == "gauge" and fams["conn"].type == "counter"


def test_repeated_layouts_are_applied_in_bulk_as_point_by_point():
    """A batch whose payloads all have their instance's last layout is applied in bulk (no table, numpy on the
    series' values): the exposition says what the points say, as one by one in push order. Several pushes of
    one instance in a batch (the last gauge value wins, every delta adds in order), instances sharing series
    (broker labels that leave the instance out), invalid values counted, and a batch mixing a new layout
    with repeated ones."""
    ex = PrometheusExporter(labels="client_software_name", background=False)

    def made(g, d, u, bad=0.0):
        return ob.payload(
            [
                ob.gauge("temp", g, unit="Cel"),
                ob.sum_("req", d, monotonic=True, temporality=ob.DELTA),
                ob.sum_("queue.size", u, monotonic=False, temporality=ob.DELTA),
                ob.sum_("bad", bad, monotonic=True, temporality=ob.DELTA),
            ]
        )

    infos = {k: ClientInfo(client_id="c", client_software_name=f"s{k % 2}", client_source_port=k) for k in range(4)}
    ids = {k: uuid.uuid4().bytes for k in range(4)}

    def batch(rows):
        ex.absorb([(ids[k], (infos[k], 1), data, False, (100, None)) for k, data in rows])

    batch([(k, made(1.0, 1, 1)) for k in range(4)])  # new instances: their series looked up
    bulk = ex._store._accumulator.flush_values  # (counts the bulk batches from here on)
    calls = []

    def counted():
        calls.append(1)
        return bulk()

    ex._store._accumulator = _Spy(ex._store._accumulator, counted)
    batch([(0, made(2.0, 2, -1)), (1, made(3.0, 3, 5)), (0, made(4.0, 4, 2)), (2, made(5.0, 0.5, 0, -1.0))])
    batch([(3, made(6.0, 1, 1, math.nan)), (2, made(7.0, 1, 1))])
    assert len(calls) == 2
    samples, _, _ = scrape(ex)
    # s0: instances 0 and 2 share each series (the software name only); s1: instances 1 and 3
    assert samples["temp_celsius{client_software_name=s0}"] == 7.0  # instance 2's last push, the batch's last of s0
    assert samples["temp_celsius{client_software_name=s1}"] == 6.0
    assert samples["req_total{client_software_name=s0}"] == 1 + 1 + 2 + 4 + 0.5 + 1
    assert samples["req_total{client_software_name=s1}"] == 1 + 1 + 3 + 1
    assert samples["queue_size{client_software_name=s0}"] == 1 + 1 - 1 + 2 + 0 + 1
    assert samples["queue_size{client_software_name=s1}"] == 1 + 1 + 5 + 1
    assert ex.dropped == {"invalid-value": 2}  # a negative and a NaN monotonic delta
    assert ex.points_absorbed == (4 + 4 + 2) * 4
    batch([(0, made(8.0, 1, 1)), (1, ob.payload([ob.gauge("temp", 9.0, unit="Cel")]))])  # a new layout: a table
    assert len(calls) == 2
    samples, _, _ = scrape(ex)
    assert (
        samples["temp_celsius{client_software_name=s0}"] == 8.0
        and samples["temp_celsius{client_software_name=s1}"] == 9.0
    )
    assert samples["req_total{client_software_name=s0}"] == 10.5


def test_one_instance_labelled_by_a_dict_and_by_its_client_info_in_turn():
    """One instance's pushes reach the store with their labels as a dict (a direct caller, ``export_metrics``)
    and as ``(client_info, node_id)`` (the broker's batch), in either order: each is absorbed with the labels
    it says, and nothing is counted as an internal error (the two kinds of source once raised KeyError)."""
    ex = PrometheusExporter(labels="client_id", background=False)
    instance = uuid.uuid4().bytes
    info = ClientInfo(client_id="by-info")
    data = ob.payload([ob.gauge("temp", 1.0, unit="Cel")])
    for source in ({"client_id": "by-dict"}, (info, 1), {"client_id": "by-dict"}, (info, 1)):
        ex.absorb([(instance, source, data, False, (100, None))])
        _, _, text = scrape(ex)
        expected = "by-dict" if type(source) is dict else "by-info"
        lines = [ln for ln in text.splitlines() if ln.startswith("temp_celsius{") and f'client_id="{expected}"' in ln]
        assert len(lines) == 1 and float(lines[0].split()[-1]) == 1.0, (source, text)
    assert ex.dropped == {}


class _Spy:
    """An accumulator whose flush_values is ``flush_values`` (the rest is the wrapped one's)."""

    def __init__(self, wrapped, flush_values):
        self._wrapped, self.flush_values = wrapped, flush_values

    def __getattr__(self, name):
        return getattr(self._wrapped, name)


def test_negative_sums_and_quantiles_keep_every_scrape_parseable():
    """What OpenMetrics forbids never reaches a scrape: a negative histogram or summary _sum is left out (the
    OTel spec reports _sum only when positive), a summary point with a negative quantile value is dropped
    and counted; both formats stay parseable by prometheus_client's parsers."""
    ex = PrometheusExporter(background=False)
    push(
        ex,
        ob.payload(
            [
                ob.histogram("h", [1.0, 5.0], [1, 1, 1], -40.0, unit="s"),
                ob.summary("s", [(0.5, 2.0)], 3, -7.0),
                ob.summary("q", [(0.5, -2.0), (0.9, 1.0)], 3, 1.0),
            ]
        ),
        uuid.uuid4(),
    )
    for om in (False, True):
        samples, _, _ = scrape(ex, openmetrics=om)
        assert samples["h_seconds_bucket{le=+Inf}"] == 3 and "h_seconds_sum" not in samples
        assert ("h_seconds_count" in samples) is not om  # OpenMetrics: _count only beside _sum
        assert samples["s_milliseconds{quantile=0.5}"] == 2 and samples["s_milliseconds_count"] == 3
        assert "s_milliseconds_sum" not in samples
        assert not any(k.startswith("q_") for k in samples)
        assert samples["kip714_export_points_dropped_total{reason=invalid-value}"] == 1


def test_exponential_histograms_merge_scales_and_cap_buckets():
    ex = PrometheusExporter(background=False, max_buckets=8)
    inst = uuid.uuid4()
    push(ex, ob.payload([ob.exp_histogram("e", 2, 0, [1] * 4)]), inst)  # scale 2: (1, 2**0.25] …
    push(ex, ob.payload([ob.exp_histogram("e", 1, 0, [1] * 2)]), inst)  # scale 1 → merge at 1
    samples, _, _ = scrape(ex)
    assert samples["e_seconds_bucket{le=1.4142135623730951}"] == 3
    assert samples["e_seconds_bucket{le=2}"] == 6
    push(ex, ob.payload([ob.exp_histogram("e", 1, 0, [1] * 100)]), inst)  # 100 buckets > 8: downscaled
    samples, _, _ = scrape(ex)
    les = [k for k in samples if k.startswith("e_seconds_bucket")]
    assert len(les) <= 8 + 2
    assert samples["e_seconds_bucket{le=+Inf}"] == samples["e_seconds_count"] == 106


def test_bounds_beyond_the_double_range_give_one_line_per_bound():
    """Exponential buckets whose bounds overflow to ±Inf, and an explicit +Inf bound, merge into one
    ``le="+Inf"`` / ``le="-Inf"`` line each (a repeated le would be a duplicate series for Prometheus)."""
    ex = PrometheusExporter(background=False)
    push(
        ex,
        ob.payload(
            [
                ob.exp_histogram("e", 0, 1020, [1] * 6, neg_offset=1022, neg_counts=[1] * 4),
                ob.histogram("h", [1.0, float("inf")], [1, 2, 0], 3.0, unit="s"),
            ]
        ),
        uuid.uuid4(),
    )
    for om in (False, True):
        _, fams, _text = scrape(ex, openmetrics=om)
        for fam, total in (("e_seconds", 10), ("h_seconds", 3)):
            les = [s.labels["le"] for s in fams[fam].samples if s.name.endswith("_bucket")]
            assert len(les) == len(set(les)) and les[-1] == "+Inf"
            bucket = {s.labels["le"]: s.value for s in fams[fam].samples if s.name.endswith("_bucket")}
            assert bucket["+Inf"] == total
        e = {s.labels["le"]: s.value for s in fams["e_seconds"].samples if s.name.endswith("_bucket")}
        assert e["-Inf"] == 2 and e["-8.98846567431158e+307"] == 3 and e["0"] == 4
        assert e["8.98846567431158e+307"] == 7  # 2**1023


def test_histogram_quantile_inputs_are_cumulative_and_monotone():
    ex = PrometheusExporter(background=False)
    push(ex, ob.payload([ob.histogram("h", [0.1, 1.0, 10.0], [5, 0, 3, 2], 12.0, unit="s")]), uuid.uuid4())
    _, fams, _ = scrape(ex)
    buckets = [s.value for s in fams["h_seconds"].samples if s.name.endswith("_bucket")]
    assert buckets == sorted(buckets) == [5, 5, 8, 10]


# ------------------------------------------------------------------------------------------ temporality


def test_restart_never_makes_a_counter_fall():
    ex = PrometheusExporter(labels="client_id", background=False)  # the instance id is not a label
    a, b = uuid.uuid4(), uuid.uuid4()
    push(ex, ob.payload([ob.sum_("c", 100, temporality=ob.CUMULATIVE, start=10)]), a)
    push(ex, ob.payload([ob.sum_("c", 130, temporality=ob.CUMULATIVE, start=10)]), a)
    seen = [scrape(ex)[0]["c_total"]]
    push(ex, ob.payload([ob.sum_("c", 5, temporality=ob.CUMULATIVE, start=99)]), a)  # start-time reset
    seen.append(scrape(ex)[0]["c_total"])
    push(ex, ob.payload([ob.sum_("c", 2, temporality=ob.CUMULATIVE, start=99)]), a)  # fell without reset
    seen.append(scrape(ex)[0]["c_total"])
    push(ex, ob.payload([ob.sum_("c", 7, temporality=ob.CUMULATIVE, start=500)]), b)  # restart: new instance
    seen.append(scrape(ex)[0]["c_total"])
    assert seen == [130, 135, 137, 144] == sorted(seen)


def test_new_instance_id_is_a_new_series_with_default_labels():
    ex = PrometheusExporter(background=False)
    a, b = uuid.uuid4(), uuid.uuid4()
    push(ex, ob.payload([ob.sum_("c", 100)]), a)
    push(ex, ob.payload([ob.sum_("c", 3)]), b)
    _, fams, _ = scrape(ex)
    assert sorted(s.value for s in fams["c"].samples) == [3, 100]
    assert len({s.labels["client_instance_id"] for s in fams["c"].samples}) == 2


# ------------------------------------------------------------------------------------------ life cycle


def test_terminating_push_is_exposed_once_then_gone():
    ex = PrometheusExporter(background=False)
    inst = uuid.uuid4()
    push(ex, ob.payload([ob.gauge("g", 1.0)]), inst)
    push(ex, ob.payload([ob.gauge("g", 2.0)]), inst, terminating=True)
    assert scrape(ex)[0]["g"] == 2.0
    samples, _, _ = scrape(ex)
    assert "g" not in samples and samples["kip714_export_instances"] == 0 and samples["kip714_export_series"] == 0


def test_expiry_after_max_of_floor_and_three_intervals():
    clock = Clock()
    ex = PrometheusExporter(background=False, clock=clock, expiry_floor_s=60)
    slow, fast = uuid.uuid4(), uuid.uuid4()
    push(ex, ob.payload([ob.gauge("g", 1.0)]), slow, client_id="slow", interval_ms=100_000)
    push(ex, ob.payload([ob.gauge("g", 1.0)]), fast, client_id="fast")
    clock.t += 10
    push(ex, ob.payload([ob.gauge("g", 1.0)]), fast, client_id="fast")  # observed interval 10 s
    clock.t += 61
    assert ex.expire() == 1  # fast: 61 s > max(60, 30)
    assert {s.labels["client_id"] for s in scrape(ex)[1]["g"].samples} == {"slow"}
    clock.t += 220
    assert ex.expire() == 0  # slow: 291 s ≤ 3 × 100 s
    clock.t += 10
    assert ex.expire() == 1
    assert ex.series_count == 0 and ex.instances == 0


def test_expiry_is_the_brokers_instance_expiry_from_the_push_interval():
    """The broker gives receivers each instance's push interval and its expiry (the instance table's
    max(60 s, 3 × interval)); the exporter drops an instance's series exactly when the broker forgets it:
    interval 100 s → 300 s, interval 5 s → 60 s (the floor), with one injected clock for both."""
    import kip714
    from kip714 import SubscriptionRegistry, TelemetryBroker

    clock = Clock()
    reg = SubscriptionRegistry()
    reg.set("slow", {"metrics": "*", "interval.ms": "100000", "match": "client_id=slow"})
    reg.set("fast", {"metrics": "*", "interval.ms": "5000", "match": "client_id=fast"})
    ex = PrometheusExporter(background=False, clock=clock, expiry_floor_s=1)  # the broker's rule wins
    broker = TelemetryBroker(reg, receivers=[ex], clock=lambda: int(clock.t * 1000))
    seen = []

    class Ctx:
        def export_metrics(self, context, payload):
            seen.append((context.push_interval_ms, context.expiry_ms))

    broker.add_receiver(Ctx())
    ids = {}
    for cid in ("slow", "fast"):
        ci = ClientInfo(client_id=cid)
        get, _ = broker.handle(kip714.GetTelemetrySubscriptionsRequest(), ci)
        ids[cid] = get.client_instance_id
        req = kip714.PushTelemetryRequest(
            client_instance_id=get.client_instance_id,
            subscription_id=get.subscription_id,
            compression_type=0,
            metrics=ob.payload([ob.gauge("g", 1.0)]),
        )
        assert broker.handle(req, ci)[0].error_code == 0
    assert seen == [(100_000, 300_000), (5_000, 60_000)]
    for cid in ("slow", "fast"):
        assert broker.instances.get_state(ids[cid].bytes)["ttl_ms"] == {"slow": 300_000, "fast": 60_000}[cid]

    def clients():
        return {s.labels["client_id"] for s in scrape(ex)[1]["g"].samples} if ex.series_count else set()

    clock.t += 59
    assert ex.expire() == 0 and clients() == {"slow", "fast"}
    clock.t += 2  # 61 s: past fast's 60 s, not slow's 300 s
    assert ex.expire() == 1 and clients() == {"slow"}
    clock.t += 238  # 299 s
    assert ex.expire() == 0 and clients() == {"slow"}
    clock.t += 2  # 301 s
    assert ex.expire() == 1 and ex.series_count == 0 and ex.instances == 0


def test_proxy_delivered_pushes_carry_the_told_interval():
    """A push decided elsewhere (TelemetryBroker.deliver, the proxy's path) is not in this broker's table:
    the receivers get the interval the client was told and the expiry that interval gives."""
    import kip714
    from kip714 import TelemetryBroker
    from kip714.broker.receivers import ClientSubscription

    seen = []

    class Ctx:
        def export_metrics(self, context, payload):
            seen.append((context.push_interval_ms, context.expiry_ms))

    broker = TelemetryBroker(receivers=[Ctx()])
    inst = uuid.uuid4()
    req = kip714.PushTelemetryRequest(
        client_instance_id=inst, subscription_id=1, compression_type=0, metrics=ob.payload([ob.gauge("g", 1.0)])
    )
    told = ClientSubscription(1, ("",), 45_000, True, (0,))
    broker.deliver(req, ClientInfo(client_id="p"), 0, subscription=told)
    broker.deliver(req, ClientInfo(client_id="p"), 0)  # nothing known about it
    assert seen == [(45_000, 135_000), (None, None)]


# ------------------------------------------------------------------------------------------ hostile input


def test_nan_inf_and_negative_deltas():
    ex = PrometheusExporter(background=False)
    inst = uuid.uuid4()
    push(ex, ob.payload([ob.gauge("g", math.nan), ob.gauge("h", math.inf), ob.sum_("c", 5.0)]), inst)
    push(ex, ob.payload([ob.sum_("c", math.inf), ob.sum_("c2", -1.0), ob.sum_("c2", 4.0)]), inst)
    for om in (False, True):
        samples, _, _ = scrape(ex, openmetrics=om)
        assert math.isnan(samples["g"]) and samples["h"] == math.inf
        assert samples["c_total"] == 5.0 and samples["c2_total"] == 4.0
        assert samples["kip714_export_points_dropped_total{reason=invalid-value}"] == 2


def test_refused_label_names_and_reserved_labels():
    ex = PrometheusExporter(background=False)
    attrs = {"1st": "a", "__name__": "b", "with space": "c", "le": "d", "": "e", "ünï": "f"}
    push(
        ex,
        ob.payload([ob.histogram("h", [1.0], [1, 1], 2.0, attrs=attrs), ob.gauge("g", 1.0, attrs=attrs)]),
        uuid.uuid4(),
    )
    for om in (False, True):
        _, fams, _ = scrape(ex, openmetrics=om)
        g = fams["g"].samples[0].labels
        assert g["key_1st"] == "a" and g["key_name_"] == "b" and g["with_space"] == "c" and g["le"] == "d"
        assert g["key_n_"] == "f"
        h = next(s for s in fams["h"].samples if s.name == "h_count").labels
        assert h["key_le"] == "d" and "le" not in h
    samples, _, _ = scrape(ex)
    assert samples["kip714_export_points_dropped_total{reason=invalid-label-name-ignored}"] == 2


def test_absurd_histograms_are_refused_and_counted():
    ex = PrometheusExporter(background=False, max_buckets=100)
    inst = uuid.uuid4()
    push(
        ex,
        ob.payload(
            [
                ob.histogram("big", [float(i) for i in range(1000)], [1] * 1001, 1.0),
                ob.histogram("unsorted", [2.0, 1.0], [1, 1, 1], 1.0),
                ob.histogram("mismatch", [1.0, 2.0], [1, 1], 1.0),
                ob.exp_histogram("wide", 0, -(1 << 30), [1] * 50_000),
                ob.histogram("ok", [1.0], [1, 1], 1.0),
            ]
        ),
        inst,
    )
    samples, _, _ = scrape(ex)
    assert samples["kip714_export_points_dropped_total{reason=too-many-buckets}"] == 1
    assert samples["kip714_export_points_dropped_total{reason=invalid-histogram}"] == 2
    assert samples["ok_count"] == 2
    assert samples["wide_seconds_count"] == 50_000
    assert sum(1 for k in samples if k.startswith("wide_seconds_bucket")) <= 100 + 2


def _many_gauges(prefix: str, n: int) -> bytes:
    """MetricsData with ``n`` gauges named ``prefix.i``, assembled from protobuf-serialised parts (building
    100,000 Metric messages one by one takes seconds)."""
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    def varint(v):
        out = bytearray()
        while v >= 0x80:
            out.append(v & 0x7F | 0x80)
            v >>= 7
        out.append(v)
        return bytes(out)

    gauge = metrics_pb2.Metric(name="x")
    gauge.gauge.data_points.add(as_double=1.0)
    tail = gauge.SerializeToString()[3:]  # after field 1 ("x")
    names = [f"{prefix}.{i}".encode() for i in range(n)]
    assert len(max(names, key=len)) + len(tail) + 2 < 0x80  # every length below fits in one varint byte
    # ScopeMetrics.metrics (field 2), each a Metric whose name (field 1) is names[i]
    scope = b"".join(b"\x12" + bytes((len(m) + len(tail) + 2, 0x0A, len(m))) + m + tail for m in names)
    rm = b"\x12" + varint(len(scope)) + scope  # ResourceMetrics.scope_metrics (field 2)
    return b"\x0a" + varint(len(rm)) + rm  # MetricsData.resource_metrics (field 1)


def test_million_series_names_stay_under_the_cap():
    first = _many_gauges("n0", 100_000)
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    metrics = metrics_pb2.MetricsData.FromString(first).resource_metrics[0].scope_metrics[0].metrics
    assert len(metrics) == 100_000 and metrics[7].name == "n0.7" and metrics[7].gauge.data_points[0].as_double == 1
    ex = PrometheusExporter(background=False, max_series=5000, labels="client_id")
    push(ex, first, uuid.uuid4())
    for chunk in range(1, 10):  # 10 payloads × 100,000 distinct names = 1 M series
        push(ex, _many_gauges(f"n{chunk}", 100_000), uuid.uuid4())
    assert ex.series_count == 5000
    assert ex.series_refused == 1_000_000 - 5000
    samples, _, text = scrape(ex)
    assert samples["kip714_export_series"] == 5000
    assert samples["kip714_export_points_dropped_total{reason=series-limit}"] == 1_000_000 - 5000
    assert len(text) < 2_000_000
    assert len(ex._store._sources) == 5000  # nothing kept for refused series


def test_type_conflict_keeps_the_first_type():
    ex = PrometheusExporter(background=False)
    push(ex, ob.payload([ob.gauge("x_total", 1.0)]), uuid.uuid4())
    push(ex, ob.payload([ob.sum_("x", 1.0)]), uuid.uuid4())
    samples, fams, _ = scrape(ex)
    assert fams["x_total"].type == "gauge"
    assert samples["kip714_export_points_dropped_total{reason=type-conflict}"] == 1


def test_undecodable_payload_is_counted():
    ex = PrometheusExporter(background=False)
    push(ex, b"\xff\xff\xff", uuid.uuid4())
    samples, _, _ = scrape(ex)
    assert samples["kip714_export_payloads_dropped_total{reason=undecodable}"] == 1


# ------------------------------------------------------------------------------------------ queue and HTTP


def test_full_queue_drops_without_blocking_and_counts():
    ex = PrometheusExporter(max_queue=4)
    gate = threading.Event()
    real = ex.absorb
    ex.absorb = lambda items: (gate.wait(5), real(items))  # hold the worker
    data = ob.payload([ob.gauge("g", 1.0)])
    started = time.perf_counter()
    for _ in range(50):
        push(ex, data, uuid.uuid4())
    assert time.perf_counter() - started < 1.0
    gate.set()
    assert ex.flush(5)
    samples, _, _ = scrape(ex)
    dropped = samples["kip714_export_payloads_dropped_total{reason=queue-full}"]
    assert dropped >= 50 - 4 - ex.batch and samples["kip714_export_payloads_total"] + dropped == 50
    ex.close()


@pytest.mark.integration
def test_http_server_negotiates_formats():
    ex = PrometheusExporter()
    port = ex.start_http_server("127.0.0.1", 0)
    try:
        push(ex, ob.payload([ob.sum_("c", 3)]), uuid.uuid4())
        assert ex.flush(5)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = r.read().decode()
        assert {f.name for f in text_families(text)} >= {"c", "kip714_export_series"}
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
        )
        with urllib.request.urlopen(req, timeout=5) as r:
            assert r.headers["Content-Type"].startswith("application/openmetrics-text")
            text = r.read().decode()
        assert text.endswith("# EOF\n") and any(f.name == "c" for f in om_families(text))
    finally:
        ex.close()


# Accept headers: none (text 0.0.4), OpenMetrics, and what Prometheus 2.x/3.x send
ACCEPTS = [
    None,
    "application/openmetrics-text; version=1.0.0",
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;"
    "version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,"
    "*/*;q=0.2",
    "text/plain;version=1.0.0;escaping=underscores",
]


def _encoder_over_collect(ex, accept):
    """What prometheus_client's own encoder writes from the collector protocol (the slow path)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.exposition import choose_encoder

    reg = CollectorRegistry(auto_describe=False)
    reg.register(ex)
    encoder, ctype = choose_encoder(accept or "")
    return encoder(reg), ctype


def test_cached_exposition_is_prometheus_clients_text_byte_for_byte():
    """exposition() reuses each series' rendered line prefix between scrapes: across new series, changed
    values, moving exponential buckets, expiry (slots reused) and awkward label values it must stay the
    exact bytes prometheus_client's encoder writes for the same state, in every negotiated format."""
    clock = Clock()
    ex = PrometheusExporter(background=False, clock=clock)
    odd = {"path": 'a "quoted" \\ back\nslash', "ünï": "ç☃", "le": "x"}

    def batch(k, extra=()):
        return ob.payload(
            [
                ob.gauge("temp", 3.5 + k, attrs=odd, unit="Cel"),
                ob.sum_("req", 5 + k, attrs={"n": k % 3}),
                ob.sum_("conn", 10 * k, temporality=ob.CUMULATIVE, start=100),
                ob.histogram("lat", [0.5, 1.0, 5.0], [1, k, 3, 4], 50.0 + k, attrs=odd, unit="ms"),
                ob.summary("rtt", [(0.5, 2.0 + k), (0.99, 9.0)], 10 + k, 30.0),
                ob.exp_histogram("size", 1 if k % 2 else 0, k, [1, 2, 3], zero=1, total=20.0),
                ob.gauge("big", 1.5e300 * (k + 1)),
                ob.gauge("tiny", -2.5e-300),
                *extra,
            ]
        )

    a, b = uuid.uuid4(), uuid.uuid4()
    for step in range(4):
        push(ex, batch(step), a, client_id="a")
        push(
            ex,
            batch(step + 7, [ob.gauge(f"only.b.{step}", float("nan")), ob.gauge("inf", float("-inf"))]),
            b,
            client_id='b"\\',
        )
        if step == 2:
            clock.t += 61  # both expire: every slot is freed, then reused
            assert ex.expire() == 2
        for accept in ACCEPTS:
            fast, ctype = ex.exposition(accept)
            slow, ctype_slow = _encoder_over_collect(ex, accept)
            assert ctype == ctype_slow
            assert fast == slow, accept
            if step == 2:  # the expired instances' lines, from the same line cache
                assert b"kip714_client_expired_timestamp_seconds{" in fast
    text = ex.exposition(ACCEPTS[1])[0].decode()
    assert {f.name for f in om_families(text)} >= {"temp_celsius", "lat_milliseconds", "size_seconds", "inf"}
    # kip714's per-client families (a line per instance, from the prefixes kept with the clients' series) were
    # among those bytes
    assert 'kip714_client_last_push_timestamp_seconds{client_id="b\\"\\\\"' in text


def test_exposition_reads_back_the_same_after_many_scrapes_with_changes():
    ex = PrometheusExporter(background=False)
    inst = uuid.uuid4()
    for k in range(30):
        push(
            ex,
            ob.payload(
                [ob.gauge("g", float(k), attrs={"i": k % 5}), ob.exp_histogram("e", 3 - k % 4, k, [1] * (1 + k % 7))]
            ),
            inst,
        )
        samples, _, _ = scrape(ex, openmetrics=k % 2 == 1)
        assert samples["g{i=" + str(k % 5) + "}"] == k
        assert samples["e_seconds_bucket{le=+Inf}"] == sum(1 + j % 7 for j in range(k + 1))


@pytest.mark.integration
def test_http_server_tls_gzip_and_name_filter(tmp_path):
    """/metrics over HTTPS (a certificate made here), gzip when accepted, ?name[]= as prometheus_client's
    own WSGI app filters; OPTIONS and other methods answered as it answers them."""
    import gzip
    import ssl

    from tls_cert import make_cert

    cert = make_cert(tmp_path)
    ex = PrometheusExporter(background=False)
    port = ex.start_http_server("127.0.0.1", 0, certfile=cert[0], keyfile=cert[1])
    ctx = ssl.create_default_context(cafile=cert[0])
    url = f"https://127.0.0.1:{port}/metrics"
    try:
        push(ex, ob.payload([ob.sum_("c", 3), ob.gauge("g", 2.5)]), uuid.uuid4())
        req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(req, timeout=5, context=ctx) as r:
            assert r.headers["Content-Encoding"] == "gzip"
            text = gzip.decompress(r.read()).decode()
        assert text.encode() == ex.exposition()[0]
        with urllib.request.urlopen(url + "?name[]=g&name[]=kip714_export_series", timeout=5, context=ctx) as r:
            fams = {f.name: f for f in text_families(r.read().decode())}
        assert set(fams) == {"g", "kip714_export_series"} and fams["g"].samples[0].value == 2.5
        with urllib.request.urlopen(urllib.request.Request(url, method="OPTIONS"), timeout=5, context=ctx) as r:
            assert r.status == 200 and r.headers["Allow"] == "OPTIONS,GET"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(urllib.request.Request(url, data=b"x", method="POST"), timeout=5, context=ctx)
        assert err.value.code == 405
        with pytest.raises(urllib.error.URLError):  # the certificate is not trusted
            urllib.request.urlopen(url, timeout=5, context=ssl.create_default_context())
    finally:
        ex.close()


def test_push_codes_are_counted():
    import kip714
    from kip714 import SubscriptionRegistry, TelemetryBroker

    reg = SubscriptionRegistry()
    reg.set("all", {"metrics": "*", "interval.ms": "1000"})
    ex = PrometheusExporter(background=False)
    broker = TelemetryBroker(reg, receivers=[ex], clock=lambda: 1_000_000)  # (a cold first export may take 1 s)
    ci = ClientInfo(client_id="x")
    get, _ = broker.handle(kip714.GetTelemetrySubscriptionsRequest(), ci)
    data = ob.payload([ob.gauge("g", 1.0)])
    req = kip714.PushTelemetryRequest(
        client_instance_id=get.client_instance_id, subscription_id=get.subscription_id, compression_type=0, metrics=data
    )
    assert broker.handle(req, ci)[0].error_code == 0
    assert broker.handle(req, ci)[0].error_code == int(kip714.ErrorCode.THROTTLING_QUOTA_EXCEEDED)
    samples, _, _ = scrape(ex)
    assert samples["kip714_pushes_total{error_code=NONE}"] == 1
    assert samples["kip714_pushes_total{error_code=THROTTLING_QUOTA_EXCEEDED}"] == 1
    assert samples["g"] == 1.0


def test_push_codes_are_counted_the_same_through_the_request_loop():
    """The pushes of one read, decided by the broker's request loop and handed over at once (pushes_completed,
    export_many), are counted and exported as handle() counts and exports them one by one."""
    import kip714
    from kip714 import SubscriptionRegistry, TelemetryBroker

    reg = SubscriptionRegistry()
    reg.set("all", {"metrics": "*", "interval.ms": "1000"})
    ex = PrometheusExporter(background=False)
    broker = TelemetryBroker(reg, receivers=[ex], clock=lambda: 1_000_000)  # (a cold first export may take 1 s)
    ci = ClientInfo(client_id="x")
    frames = []
    for k in range(3):
        get, _ = broker.handle(kip714.GetTelemetrySubscriptionsRequest(), ci)
        data = ob.payload([ob.gauge("g", float(k), {"k": str(k)})])
        req = kip714.PushTelemetryRequest(get.client_instance_id, get.subscription_id, False, 0, data)
        frames.append(kip714.encode_request(req, 2 * k, "x", 0) * 2)  # the second one is throttled
    loop = broker.request_loop(1 << 20)
    answers, frame = broker.feed(loop, b"".join(frames), lambda client_id: ci)
    assert frame is None and answers is not None
    codes = [
        kip714.decode_response(bytes(answers[i : i + 16]), 72, 0, size_prefixed=True).body.error_code
        for i in range(0, 96, 16)
    ]
    assert codes == [0, 89] * 3
    samples, _, _ = scrape(ex)
    assert samples["kip714_pushes_total{error_code=NONE}"] == 3
    assert samples["kip714_pushes_total{error_code=THROTTLING_QUOTA_EXCEEDED}"] == 3
    assert sorted(v for k, v in samples.items() if k.startswith("g{")) == [0.0, 1.0, 2.0]
