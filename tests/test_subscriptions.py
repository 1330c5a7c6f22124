"""SubscriptionRegistry: Kafka's config parsing/validation, matching, and JDK-identical resolution."""

from __future__ import annotations

import uuid

import pytest

import kip714
from kip714 import ClientInfo, SubscriptionRegistry
from kip714.broker.subscriptions import kafka_uuid_string, parse_config_string, parse_kafka_list

DOC = uuid.UUID(int=(0x5E0B1D6A3C4F7A21 << 64) | 0x9D3E2B7C8A1F4E60)
P = "org.apache.kafka."


def reg(*subs, jdk=17):
    r = SubscriptionRegistry(jdk=jdk)
    for name, metrics, interval in subs:
        r.set(name, {"metrics": metrics, "interval.ms": str(interval)})
    return r


def test_kafka_uuid_string():
    assert kafka_uuid_string(DOC) == "XgsdajxPeiGdPit8ih9OYA"
    assert kafka_uuid_string(uuid.UUID(int=(1 << 64) | 2)) == "AAAAAAAAAAEAAAAAAAAAAg"
    assert kafka_uuid_string(uuid.UUID(int=(0xFFFFFFFF00000000 << 64) | 0x0000000100000000)) == "_____wAAAAAAAAABAAAAAA"


# Vectors from docs/reference/kafka-java-behaviour.md §6, computed with real JDK 17 / 25 HashSet, ConcurrentHashMap, CRC32C.
@pytest.mark.parametrize(
    "subs,interval,order,sid",
    [
        ([], 300000, [], -1583195767),
        (
            [("sub-1", P + "client.producer.partition.queue.," + P + "client.producer.partition.latency", 30000)],
            30000,
            [P + "client.producer.partition.latency", P + "client.producer.partition.queue."],
            -111713672,
        ),
        (
            [
                ("sub-1", P + "client.producer.partition.queue.," + P + "client.producer.partition.latency", 30000),
                ("sub-2", "*", 300000),
            ],
            30000,
            ["*"],
            -1387469480,
        ),
        (
            [("a", P + "producer.," + P + "consumer.", 60000), ("b", P + "consumer.," + P + "producer.node.", 10000)],
            10000,
            [P + "producer.", P + "consumer.", P + "producer.node."],
            881785404,
        ),
        ([("a", P + "producer.", 600000)], 300000, [P + "producer."], -1446181002),
        ([("a", P + "producer.,", 1000)], 1000, [P + "producer.", ""], 38142455),
        ([("a", ",", 5000)], 5000, [""], 1691415660),  # "," parses to ["", ""]: the set {""}
    ],
)
def test_documented_subscription_ids(subs, interval, order, sid):
    r = reg(*subs)
    res = r.resolve(ClientInfo(client_instance_id=DOC))
    assert res.push_interval_ms == interval
    assert list(res.requested_metrics) == order
    assert res.subscription_id == sid


def test_vector_7_empty_value_gives_no_metrics_but_the_same_id():
    r = SubscriptionRegistry()
    r.set("a", {"metrics": "", "interval.ms": "5000"})
    # "" parses to [] (no metric); {""}.toString() and [].toString() are both "[]", so the id is the same
    res = r.resolve(ClientInfo(client_instance_id=DOC))
    assert res.requested_metrics == () and res.subscription_id == 1691415660


def test_vector_8_the_thirteen_kip_metrics():
    names = [
        P + "producer." + n
        for n in (
            "connection.creation.rate",
            "connection.creation.total",
            "node.request.latency.avg",
            "node.request.latency.max",
            "produce.throttle.time.avg",
            "produce.throttle.time.max",
            "record.queue.time.avg",
            "record.queue.time.max",
        )
    ]
    names += [
        P + "consumer." + n
        for n in (
            "connection.creation.rate",
            "connection.creation.total",
            "node.request.latency.avg",
            "node.request.latency.max",
            "poll.idle.ratio.avg",
        )
    ]
    r = reg(("a", ",".join(names), 100))
    res = r.resolve(ClientInfo(client_instance_id=DOC))
    short = [m.replace(P, "") for m in res.requested_metrics]
    assert short == [
        "producer.record.queue.time.avg",
        "producer.node.request.latency.max",
        "consumer.node.request.latency.max",
        "producer.produce.throttle.time.avg",
        "consumer.poll.idle.ratio.avg",
        "producer.connection.creation.total",
        "producer.connection.creation.rate",
        "producer.produce.throttle.time.max",
        "producer.record.queue.time.max",
        "consumer.node.request.latency.avg",
        "producer.node.request.latency.avg",
        "consumer.connection.creation.total",
        "consumer.connection.creation.rate",
    ]
    assert res.subscription_id == 1179564880


def test_vectors_9_and_10():
    one_two = uuid.UUID(int=(1 << 64) | 2)
    assert SubscriptionRegistry().resolve(ClientInfo(client_instance_id=one_two)).subscription_id == -725132323
    assert reg(("x", "*", 30000)).resolve(ClientInfo(client_instance_id=one_two)).subscription_id == -668342516
    odd = uuid.UUID(int=(0xFFFFFFFF00000000 << 64) | 0x0000000100000000)
    assert SubscriptionRegistry().resolve(ClientInfo(client_instance_id=odd)).subscription_id == 725132320


@pytest.mark.parametrize(
    "jdk,order,sid",
    [
        (17, "alpha kappa gamma lambda iota epsilon beta sigma phi delta mu nu", -1939838256),
        (19, "alpha kappa gamma lambda epsilon beta iota phi sigma delta mu nu", -836231277),
        (21, "alpha kappa gamma lambda epsilon beta iota phi sigma delta mu nu", -836231277),
    ],
)
def test_vector_11_depends_on_the_jdk(jdk, order, sid):
    listed = ["lambda", "epsilon", "nu", "phi", "beta", "gamma", "sigma", "delta", "mu", "kappa", "alpha", "iota"]
    r = reg(("a", ",".join(P + "producer." + x for x in listed), 60000), jdk=jdk)
    res = r.resolve(ClientInfo(client_instance_id=DOC))
    assert [m.rsplit(".", 1)[-1] for m in res.requested_metrics] == order.split()
    assert res.subscription_id == sid


# ------------------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    "value,items",
    [
        ("", []),
        ("   ", []),
        ("a", ["a"]),
        ("a,b", ["a", "b"]),
        (" a , b ", ["a", "b"]),
        ("a,", ["a", ""]),
        (",", ["", ""]),
        ("a,,b", ["a", "", "b"]),
        ("a b,c", ["a b", "c"]),
    ],
)
def test_kafka_list_parsing_keeps_empty_items(value, items):
    assert parse_kafka_list(value) == items


@pytest.mark.parametrize(
    "config,error",
    [
        ({"metrics": "a", "bogus": "1"}, kip714.errors.InvalidRequestError),
        ({"interval.ms": "99"}, kip714.errors.InvalidRequestError),
        ({"interval.ms": "3600001"}, kip714.errors.InvalidRequestError),
        ({"interval.ms": "bbb"}, kip714.errors.InvalidConfigError),
        ({"interval.ms": "1.5"}, kip714.errors.InvalidConfigError),
        ({"match": "client_id"}, kip714.errors.InvalidConfigError),
        ({"match": "client_id="}, kip714.errors.InvalidConfigError),
        ({"match": "client_id=a=b"}, kip714.errors.InvalidConfigError),
        ({"match": "=abc"}, kip714.errors.InvalidConfigError),
        ({"match": "client_rack=abc"}, kip714.errors.InvalidConfigError),
        ({"match": "client_id=[unclosed"}, kip714.errors.InvalidConfigError),
    ],
)
def test_invalid_configs_are_refused_with_kafka_error_codes(config, error):
    with pytest.raises(error) as e:
        SubscriptionRegistry().set("s", config)
    assert e.value.error_code == (42 if error is kip714.errors.InvalidRequestError else 40)


def test_valid_edge_configs():
    r = SubscriptionRegistry()
    r.set("s", {"interval.ms": "100"})
    r.set("s", {"interval.ms": " 3600000 "})
    r.set("s", {"match": "client_id=a=,client_software_name = apache-kafka-java "})  # Java split drops the trailing ''
    sub = r.subscriptions()[0]
    assert sub.match["client_id"].pattern == "a" and sub.match["client_software_name"].pattern == "apache-kafka-java"
    with pytest.raises(kip714.errors.InvalidRequestError):
        r.set("", {"metrics": "x"})


def test_empty_config_deletes_and_versions_move_only_on_change():
    r = SubscriptionRegistry()
    assert r.version == 0
    r.set("a", {"metrics": "x"})
    assert r.version == 1 and "a" in r
    r.set("a", {})
    assert r.version == 2 and "a" not in r
    assert r.delete("a") is False and r.version == 2
    r.set("b", "metrics=[x,y],interval.ms=1000,match=[client_id=c.*,client_software_name=apache-kafka-java]")
    sub = r.subscriptions()[0]
    assert (
        sub.metrics == ("x", "y")
        and sub.interval_ms == 1000
        and set(sub.match) == {"client_id", "client_software_name"}
    )


def test_parse_config_string():
    assert parse_config_string("metrics=[a,b],interval.ms=15000,match=[client_id=x,client_source_port=1]") == {
        "metrics": "a,b",
        "interval.ms": "15000",
        "match": "client_id=x,client_source_port=1",
    }
    assert parse_config_string("metrics=org.apache.kafka.producer.") == {"metrics": "org.apache.kafka.producer."}
    with pytest.raises(kip714.errors.InvalidConfigError):
        parse_config_string("metrics=[a,b")


# ------------------------------------------------------------------------------------- matching

CLIENT = ClientInfo(
    client_instance_id=DOC,
    client_id="producer-1",
    client_software_name="apache-kafka-java",
    client_software_version="3.5.2",
    client_source_address="127.0.0.1",
    client_source_port=56078,
)


@pytest.mark.parametrize(
    "match,matches",
    [
        ("", True),
        ("client_software_name=apache-kafka-java,client_software_version=3.5.*", True),
        ("client_software_version=3.5", False),  # full match, not search
        ("client_software_version=3.5.2.*", True),
        ("client_id=producer-\\d", True),
        ("client_id=Producer-1", False),  # case-sensitive
        ("client_source_port=56078", True),
        ("client_source_port=5607", False),
        ("client_source_address=127\\.0\\.0\\.1", True),
        ("client_instance_id=XgsdajxPeiGdPit8ih9OYA", True),
        ("client_instance_id=Xgsd.*", True),
        ("client_id=producer-1,client_software_name=librdkafka", False),  # AND within a subscription
    ],
)
def test_match_selectors(match, matches):
    r = SubscriptionRegistry()
    r.set("s", {"metrics": "m.", "match": match} if match else {"metrics": "m."})
    assert (r.resolve(CLIENT).requested_metrics == ("m.",)) is matches


def test_missing_attribute_never_matches_and_union_across_subscriptions():
    r = SubscriptionRegistry()
    r.set("port", {"metrics": "a.", "match": "client_source_port=.*"})
    r.set("java", {"metrics": "b.", "interval.ms": "5000", "match": "client_software_name=apache-kafka-java"})
    r.set("rd", {"metrics": "c.", "interval.ms": "1000", "match": "client_software_name=librdkafka"})
    res = r.resolve(ClientInfo(client_instance_id=DOC, client_software_name="apache-kafka-java"))
    assert set(res.requested_metrics) == {"b."} and res.push_interval_ms == 5000
    res = r.resolve(CLIENT)
    assert set(res.requested_metrics) == {"a.", "b."} and res.push_interval_ms == 5000 and res.matched


def test_resolution_is_cached_per_version_and_attributes():
    r = reg(("a", "x.", 1000))
    one = r.resolve(CLIENT)
    assert r.resolve(CLIENT) == one
    other = uuid.uuid4()
    two = r.resolve(CLIENT, other)
    assert two.requested_metrics == one.requested_metrics and two.crc_base == one.crc_base
    assert two.subscription_id == kip714.compute_subscription_id(["x."], 1000, other)
    r.set("a", {"metrics": "x.", "interval.ms": "2000"})
    assert r.resolve(CLIENT).push_interval_ms == 2000 and r.resolve(CLIENT).version == one.version + 1
