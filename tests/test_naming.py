"""Telemetry metric names: Kafka's TelemetryMetricNamingConvention vectors, the consumer record-latency
metrics (seeds/004) and the librdkafka names that derive from Kafka (group, name) pairs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kip714.client.naming import (
    DEFAULT_PREFIX,
    EXCLUDE_LABELS,
    clean_group,
    clean_name,
    java_ascii_lower,
    telemetry_attribute_key,
    telemetry_attributes,
    telemetry_metric_key,
    telemetry_metric_name,
)

# TelemetryMetricNamingConventionTest and docs/reference/kafka-java-behaviour.md §5. Kafka's helper takes (name, group);
# ours takes (group, name), so each row is written (name, group) as in Kafka and swapped in the test.
KAFKA_VECTORS = [
    ("connection-creation-rate", "producer-metrics", "org.apache.kafka.producer.connection.creation.rate"),
    ("commit-latency-avg", "consumer-coordinator-metrics", "org.apache.kafka.consumer.coordinator.commit.latency.avg"),
    (
        "fetch-latency-max",
        "consumer-fetch-manager-metrics",
        "org.apache.kafka.consumer.fetch.manager.fetch.latency.max",
    ),
    ("name-metrics", "group-metrics-metrics", "org.apache.kafka.group.name.metrics"),
    ("test-Name-1.$", "grouP-name-AB_&", "org.apache.kafka.group.name.ab_&.test.name.1.$"),
    ("", "group-1A", "org.apache.kafka.group.1a."),
]


@pytest.mark.parametrize(("name", "group", "expected"), KAFKA_VECTORS)
def test_kafka_vectors(name, group, expected):
    assert telemetry_metric_name(group, name) == expected


def test_argument_order_is_group_then_name():
    # Swapping the arguments gives a different (wrong) name: the order matters and is (group, name).
    assert (
        telemetry_metric_name("producer-metrics", "connection-creation-rate")
        == "org.apache.kafka.producer.connection.creation.rate"
    )
    assert (
        telemetry_metric_name("connection-creation-rate", "producer-metrics")
        == "org.apache.kafka.connection.creation.rate.producer.metrics"
    )
    assert (
        telemetry_metric_name(group="producer-metrics", name="record-queue-time-max")
        == "org.apache.kafka.producer.record.queue.time.max"
    )


# Computed with OpenJDK 17 running Kafka's rule (toLowerCase(Locale.ROOT), replaceAll) on these inputs.
JDK_VECTORS = [
    ("a..metricsmetrics", "x", "org.apache.kafka.a.metrics.x"),  # one pass: no re-scan after a removal
    (".metricsX-metrics.metrics", "N", "org.apache.kafka.x.n"),  # ".metricsX" -> "X"
    ("metrics", "a", "org.apache.kafka.metrics.a"),  # no leading dot: kept
    ("-metrics-", "b", "org.apache.kafka...b"),
    ("GROUP-METRICS", "NAME", "org.apache.kafka.group.name"),
    ("", "", "org.apache.kafka.."),
    ("consumer-metricsmetrics", "y", "org.apache.kafka.consumermetrics.y"),
    # non-ASCII: É, U+0130 (→ "i" + U+0307), Kelvin sign, capital sharp s
    ("\u00c9te-\u0130-\u212a-\u1e9e", "x", "org.apache.kafka.\u00e9te.i\u0307.k.\u00df.x"),
    ("g", "\u0391\u03a3", "org.apache.kafka.g.\u03b1\u03c2"),  # final sigma at the end of a word
    ("g", "\u0391\u03a3\u0391", "org.apache.kafka.g.\u03b1\u03c3\u03b1"),
]


@pytest.mark.parametrize(("group", "name", "expected"), JDK_VECTORS)
def test_jdk_vectors(group, name, expected):
    assert telemetry_metric_name(group, name) == expected


def test_documented_final_sigma_divergence():
    # Java decides "final sigma" with its word BreakIterator and lowercases "ΩΣ-x" to "ωσ-x"; Python's
    # Unicode Final_Sigma rule gives "ως-x". Documented in kip714.client.naming; pinned here so a change is noticed.
    assert telemetry_metric_name("g", "\u03a9\u03a3-x") == "org.apache.kafka.g.\u03c9\u03c2.x"


@given(st.text(alphabet=st.characters(max_codepoint=127)), st.text(alphabet=st.characters(max_codepoint=127)))
def test_ascii_model(group, name):
    # An independent model of the rule for ASCII: exact.
    def lower(s):
        return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)

    g = lower(group).replace("-", ".")
    out, i = [], 0
    while i < len(g):  # Java replaceAll("\\.(metrics)", ""): left to right, non-overlapping
        if g.startswith(".metrics", i):
            i += len(".metrics")
        else:
            out.append(g[i])
            i += 1
    expected = "org.apache.kafka." + "".join(out) + "." + lower(name).replace("-", ".")
    assert telemetry_metric_name(group, name) == expected
    assert java_ascii_lower(group) == lower(group)


def test_clean_helpers_and_prefix():
    assert clean_name("Request-Latency-AVG") == "request.latency.avg"
    assert clean_group("producer-node-metrics") == "producer.node"
    assert DEFAULT_PREFIX == "org.apache.kafka"
    assert telemetry_metric_name("producer-metrics", "x", prefix="io.confluent") == "io.confluent.producer.x"
    assert telemetry_metric_name("producer-metrics", "x", prefix="") == ".producer.x"
    assert java_ascii_lower("\u00c9A") == "\u00c9a"
    with pytest.raises(TypeError):
        telemetry_metric_name(None, "x")  # type: ignore[arg-type]


# seeds/004: consumer record latency in consumer-fetch-manager-metrics (client level and per partition)
def test_consumer_record_latency_metrics():
    group = "consumer-fetch-manager-metrics"
    assert (
        telemetry_metric_name(group, "records-latency-max")
        == "org.apache.kafka.consumer.fetch.manager.records.latency.max"
    )
    assert telemetry_metric_name(group, "records-latency") == "org.apache.kafka.consumer.fetch.manager.records.latency"
    assert (
        telemetry_metric_name(group, "records-latency-avg")
        == "org.apache.kafka.consumer.fetch.manager.records.latency.avg"
    )
    # the per-partition metrics carry topic and partition; client-id is dropped
    name, attrs = telemetry_metric_key(
        group, "records-latency", {"client-id": "consumer-1", "topic": "orders", "partition": "3"}
    )
    assert name == "org.apache.kafka.consumer.fetch.manager.records.latency"
    assert attrs == {"topic": "orders", "partition": "3"}
    name, attrs = telemetry_metric_key(group, "records-latency-max", {"client-id": "consumer-1"})
    assert attrs == {}


# docs/reference/librdkafka-behaviour.md §4: the names librdkafka hard-codes, and the Java (group, name) they come from.
LIBRDKAFKA_NAMES = [
    ("producer-metrics", "connection-creation-rate", "org.apache.kafka.producer.connection.creation.rate"),
    ("producer-metrics", "connection-creation-total", "org.apache.kafka.producer.connection.creation.total"),
    ("producer-node-metrics", "request-latency-avg", "org.apache.kafka.producer.node.request.latency.avg"),
    ("producer-node-metrics", "request-latency-max", "org.apache.kafka.producer.node.request.latency.max"),
    ("producer-metrics", "produce-throttle-time-avg", "org.apache.kafka.producer.produce.throttle.time.avg"),
    ("producer-metrics", "produce-throttle-time-max", "org.apache.kafka.producer.produce.throttle.time.max"),
    ("producer-metrics", "record-queue-time-avg", "org.apache.kafka.producer.record.queue.time.avg"),
    ("producer-metrics", "record-queue-time-max", "org.apache.kafka.producer.record.queue.time.max"),
    ("producer-metrics", "request-latency-avg", "org.apache.kafka.producer.request.latency.avg"),
    ("producer-metrics", "request-latency-max", "org.apache.kafka.producer.request.latency.max"),
    ("consumer-metrics", "connection-creation-rate", "org.apache.kafka.consumer.connection.creation.rate"),
    ("consumer-metrics", "connection-creation-total", "org.apache.kafka.consumer.connection.creation.total"),
    ("consumer-node-metrics", "request-latency-avg", "org.apache.kafka.consumer.node.request.latency.avg"),
    ("consumer-node-metrics", "request-latency-max", "org.apache.kafka.consumer.node.request.latency.max"),
    (
        "consumer-coordinator-metrics",
        "assigned-partitions",
        "org.apache.kafka.consumer.coordinator.assigned.partitions",
    ),
    (
        "consumer-coordinator-metrics",
        "rebalance-latency-avg",
        "org.apache.kafka.consumer.coordinator.rebalance.latency.avg",
    ),
    (
        "consumer-coordinator-metrics",
        "rebalance-latency-max",
        "org.apache.kafka.consumer.coordinator.rebalance.latency.max",
    ),
    (
        "consumer-coordinator-metrics",
        "rebalance-latency-total",
        "org.apache.kafka.consumer.coordinator.rebalance.latency.total",
    ),
    (
        "consumer-fetch-manager-metrics",
        "fetch-latency-avg",
        "org.apache.kafka.consumer.fetch.manager.fetch.latency.avg",
    ),
    (
        "consumer-fetch-manager-metrics",
        "fetch-latency-max",
        "org.apache.kafka.consumer.fetch.manager.fetch.latency.max",
    ),
    ("consumer-metrics", "poll-idle-ratio-avg", "org.apache.kafka.consumer.poll.idle.ratio.avg"),
    ("consumer-coordinator-metrics", "commit-latency-avg", "org.apache.kafka.consumer.coordinator.commit.latency.avg"),
    ("consumer-coordinator-metrics", "commit-latency-max", "org.apache.kafka.consumer.coordinator.commit.latency.max"),
]


@pytest.mark.parametrize(("group", "name", "expected"), LIBRDKAFKA_NAMES)
def test_librdkafka_names(group, name, expected):
    assert telemetry_metric_name(group, name) == expected


def test_kip_standard_names_from_subscription_vector_8():
    # The 13 KIP standard metric names used in docs/reference/kafka-java-behaviour.md §6 vector 8 are all derivable.
    standard = {
        "org.apache.kafka.producer.connection.creation.rate",
        "org.apache.kafka.producer.connection.creation.total",
        "org.apache.kafka.producer.node.request.latency.avg",
        "org.apache.kafka.producer.node.request.latency.max",
        "org.apache.kafka.producer.produce.throttle.time.avg",
        "org.apache.kafka.producer.produce.throttle.time.max",
        "org.apache.kafka.producer.record.queue.time.avg",
        "org.apache.kafka.producer.record.queue.time.max",
        "org.apache.kafka.consumer.connection.creation.rate",
        "org.apache.kafka.consumer.connection.creation.total",
        "org.apache.kafka.consumer.node.request.latency.avg",
        "org.apache.kafka.consumer.node.request.latency.max",
        "org.apache.kafka.consumer.poll.idle.ratio.avg",
    }
    derived = {telemetry_metric_name(g, n) for g, n, _ in LIBRDKAFKA_NAMES}
    assert standard <= derived


def test_attribute_keys_and_exclusion():
    assert telemetry_attribute_key("node-id") == "node_id"
    assert telemetry_attribute_key("Client-ID") == "client_id"
    assert telemetry_attribute_key("topic.name") == "topic.name"  # only "-" changes
    assert frozenset({"client_id"}) == EXCLUDE_LABELS
    tags = {"client-id": "p-1", "Node-Id": "node-1", "topic": "T-1"}
    assert telemetry_attributes(tags) == {"node_id": "node-1", "topic": "T-1"}  # values unchanged
    assert list(telemetry_attributes([("b", 1), ("a", 2)])) == ["b", "a"]  # order kept
    # a collision after conversion keeps the first key's position and the last value (LinkedHashMap.put)
    assert telemetry_attributes([("a-b", 1), ("x", 2), ("a_b", 3)]) == {"a_b": 3, "x": 2}
    assert list(telemetry_attributes([("a-b", 1), ("x", 2), ("a_b", 3)])) == ["a_b", "x"]
    assert telemetry_attributes({"client_id": "c", "CLIENT-ID": "d"}) == {}
    assert telemetry_attributes(tags, exclude=()) == {"client_id": "p-1", "node_id": "node-1", "topic": "T-1"}
    assert telemetry_attributes(None) == {}


def test_metric_key():
    assert telemetry_metric_key(
        "producer-node-metrics", "request-latency-avg", {"client-id": "p-1", "node-id": "node-1"}
    ) == ("org.apache.kafka.producer.node.request.latency.avg", {"node_id": "node-1"})
