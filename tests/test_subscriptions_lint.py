"""kip714 subscriptions explain|lint: explain gives the SubscriptionIds a broker's handle() answers; lint has one
test per finding, a clean configuration passes, and a recording brings the fleet's metrics, clients and
known defects in."""

from __future__ import annotations

import json
import uuid

import pytest

from kip714 import SubscriptionRegistry, TelemetryBroker, cli
from kip714.broker.subscriptions import ClientInfo, kafka_uuid_string
from kip714.operations.defects import KNOWN_DEFECTS, family_version
from kip714.operations.subscriptions import explain, lint, parse_client
from kip714.wire import GetTelemetrySubscriptionsRequest

CONFIG = """\
# producers get their own metrics fast, everyone the standard ones
java-producers metrics=[org.apache.kafka.producer.,org.apache.kafka.consumer.fetch.manager.],interval.ms=10000,match=[client_software_name=apache-kafka-java,client_id=orders-.*]
standard metrics=[org.apache.kafka.producer.node.request.latency,org.apache.kafka.consumer.node.request.latency],interval.ms=60000
rdk metrics=[org.apache.kafka.producer.record.queue.time,org.apache.kafka.consumer.poll.idle],interval.ms=30000,match=[client_software_name=confluent-kafka-.*]
"""
T0 = 1_700_000_000_000
CLEAN = """\
all metrics=*,interval.ms=60000
"""


def write(tmp_path, text, name="subs.conf"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


CLIENTS = [
    "client_id=orders-1,client_software_name=apache-kafka-java,client_software_version=3.9.0",
    "client_id=billing-1,client_software_name=apache-kafka-java,client_software_version=4.1.0",
    "client_id=orders-2,client_software_name=confluent-kafka-python,client_software_version=2.16.1-rdkafka-2.16.0,"
    "client_source_address=10.0.0.7,client_source_port=50123",
    "client_id=x,client_software_name=unknown,client_software_version=unknown",
]


@pytest.mark.parametrize("jdk", [17, 21])
def test_explain_agrees_with_the_brokers_handle(tmp_path, jdk):
    path = write(tmp_path, CONFIG)
    from kip714.operations.subscriptions import load_subscriptions

    subs = load_subscriptions(path)
    registry = SubscriptionRegistry(jdk=jdk)
    for name, cfg in subs.items():
        registry.set(name, cfg)
    broker = TelemetryBroker(registry)
    for text in CLIENTS:
        client = parse_client(text)
        response, _ = broker.handle(GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)), client, T0)
        assert response.error_code == 0
        got = explain(subs, client.with_instance_id(response.client_instance_id), jdk)
        assert got.subscription_id == response.subscription_id, text
        assert got.requested_metrics == list(response.requested_metrics)
        assert got.push_interval_ms == response.push_interval_ms
        # and through the command line, with the instance id as Kafka prints it
        iid = kafka_uuid_string(response.client_instance_id)
        argv = ["subscriptions", "explain", "--config", path, "--client", f"{text},client_instance_id={iid}", "--json"]
        if jdk != 17:
            argv += ["--jdk", str(jdk)]
        out = _run(argv)
        assert out[0] == 0
        (shown,) = json.loads(out[1])
        assert shown["subscription_id"] == response.subscription_id and shown["client_instance_id"] == iid


def _run(argv, capsys=None):
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        status = cli.main(argv)
    return status, buf.getvalue()


def test_explain_says_why_each_subscription_matched_or_not(tmp_path):
    status, text = _run(["subscriptions", "explain", "--config", write(tmp_path, CONFIG), "--client", CLIENTS[0]])
    assert status == 0
    assert "java-producers: matches (every selector matches" in text
    assert "rdk: no match (client_software_name=confluent-kafka-.* does not match 'apache-kafka-java')" in text
    assert "standard: matches (no match selectors: every client)" in text
    assert "push interval: 10000 ms" in text and "SubscriptionId:" in text and "zero UUID" in text
    nothing = explain({"none": {"metrics": "", "interval.ms": "1000"}}, ClientInfo(client_id="a"))
    assert nothing.requested_metrics == [] and "never pushes" in nothing.notes[0]


def codes(findings):
    return sorted({f.code for f in findings})


# one configuration per finding (and only that finding)
FINDINGS = [
    ("interval-out-of-bounds", {"a": {"metrics": "*", "interval.ms": "50"}}),
    ("interval-out-of-bounds", {"a": {"metrics": "*", "interval.ms": "4000000"}}),
    ("interval-capped", {"a": {"metrics": "*", "interval.ms": "600000"}}),
    ("empty-metrics", {"a": {"metrics": "", "interval.ms": "60000"}}),
    ("empty-metrics", {"a": {"interval.ms": "60000"}}),
    ("empty-prefix", {"a": {"metrics": "org.apache.kafka.producer.,", "interval.ms": "60000"}}),
    ("prefix-matches-nothing", {"a": {"metrics": "org.apache.kafka.producr.node", "interval.ms": "60000"}}),
    ("invalid-regex", {"a": {"metrics": "*", "match": "client_id=orders-(["}}),
    ("unsafe-regex", {"a": {"metrics": "*", "match": "client_id=(a+)+b"}}),
    ("unsafe-regex", {"a": {"metrics": "*", "match": "client_id=(\\w)\\1"}}),
    ("regex-never-matches", {"a": {"metrics": "*", "match": "client_software_name=apache kafka java"}}),
    ("regex-never-matches", {"a": {"metrics": "*", "match": "client_source_port=port-.*"}}),
    ("glob-like-regex", {"a": {"metrics": "*", "match": "client_id=orders*"}}),
    ("several-subscriptions", {"a": {"metrics": "*"}, "b": {"metrics": "*", "match": "client_id=x.*"}}),
    ("invalid-config", {"a": {"metrics": "*", "intervall.ms": "1000"}}),
    ("invalid-config", {"a": {"metrics": "*", "match": "client_rack=a"}}),
]


@pytest.mark.parametrize(("code", "subs"), FINDINGS, ids=[f"{c}-{i}" for i, (c, _) in enumerate(FINDINGS)])
def test_one_finding_each(code, subs):
    found = lint(subs)
    assert codes(found) == [code], [f.text() for f in found]
    assert all(f.message and f.severity in ("error", "warning") for f in found)


def test_the_prefix_hint_names_the_metric_meant():
    (f,) = lint({"a": {"metrics": "org.apache.kafka.producr.node", "interval.ms": "60000"}})
    assert "did you mean 'org.apache.kafka.producer.node'" in f.message


def test_a_clean_configuration_passes(tmp_path, capsys):
    path = write(tmp_path, CLEAN)
    assert lint({"all": {"metrics": "*", "interval.ms": "60000"}}) == []
    std = "org.apache.kafka.producer.node.request.latency.avg,org.apache.kafka.consumer."
    assert lint({"std": {"metrics": std}}) == []
    status, out = _run(["subscriptions", "lint", "--config", path])
    assert status == 0 and out.startswith("no finding: 1 subscription(s)")
    status, out = _run(["subscriptions", "lint", "--config", path, "--json"])
    assert status == 0 and json.loads(out) == []


def test_lint_exits_1_with_text_or_json(tmp_path):
    path = write(tmp_path, "a metrics=,interval.ms=50\n")
    status, out = _run(["subscriptions", "lint", "--config", path])
    assert status == 1 and "error: interval-out-of-bounds: [a]" in out and "warning: empty-metrics: [a]" in out
    status, out = _run(["subscriptions", "lint", "--config", path, "--json"])
    assert status == 1 and {f["code"] for f in json.loads(out)} == {"interval-out-of-bounds", "empty-metrics"}


def test_clients_given_are_checked_for_overlaps_and_defects():
    subs = {
        "p": {"metrics": "org.apache.kafka.producer.record.error", "match": "client_id=orders-.*"},
        "all": {"metrics": "org.apache.kafka.producer.", "match": "client_software_name=.*kafka.*"},
    }
    crashing = parse_client(
        "client_id=orders-1,client_software_name=confluent-kafka-python,client_software_version=2.5.0-rdkafka-2.5.0"
    )
    found = lint({"p": subs["p"]}, clients=[crashing])
    assert [f.code for f in found] == ["known-defect"] and "librdkafka#4833" in found[0].message
    found = lint(subs, clients=[crashing])
    assert "several-subscriptions" in codes(found)


@pytest.mark.parametrize(
    ("name", "version", "want"),
    [
        ("confluent-kafka-python", "2.5.0-rdkafka-2.5.0", ("librdkafka", (2, 5, 0))),
        ("librdkafka", "2.10.0", ("librdkafka", (2, 10, 0))),
        ("apache-kafka-java", "3.9.0", ("java", (3, 9, 0))),
        ("apache-kafka-java", "7.6.0-ccs", ("java", (3, 6, 0))),  # Confluent Platform 7.6 carries Apache Kafka 3.6
        ("apache-kafka-java", "8.1.0-ccs", ("java", (4, 1, 0))),
        ("some-client", "1.0", None),
    ],
)
def test_software_versions_map_to_the_defect_tables(name, version, want):
    assert family_version(name, version) == want


def test_every_defect_cites_its_source_and_its_trigger_is_checked():
    by_id = {d.id: d for d in KNOWN_DEFECTS}
    assert set(by_id) >= {"librdkafka#4833", "librdkafka#4912", "KAFKA-19747", "KAFKA-21077"}
    assert all(d.source and d.fixed_in and d.trigger for d in KNOWN_DEFECTS)
    java_only = ["org.apache.kafka.producer.record.error."]
    assert by_id["librdkafka#4833"].triggered(java_only) and not by_id["librdkafka#4833"].triggered(["*"])
    one_sided = ["org.apache.kafka.producer.record.queue.time"]  # librdkafka producers have it, consumers nothing
    assert by_id["librdkafka#4912"].triggered(one_sided)
    assert not by_id["librdkafka#4912"].triggered(one_sided + ["org.apache.kafka.consumer.poll"])
    assert by_id["librdkafka#5104"].triggered(["org.apache.kafka.producer.", "org.apache.kafka.producer.node."])
    assert by_id["librdkafka#4833"].affects("librdkafka", (2, 5, 0)) and not by_id["librdkafka#4833"].affects(
        "librdkafka", (2, 5, 3)
    )
    assert by_id["KAFKA-19747"].affects("java", (3, 9, 0)) and not by_id["KAFKA-19747"].affects("java", (4, 0, 1))
    assert by_id["KAFKA-19747"].affects("java", (4, 1, 0)) and not by_id["KAFKA-19747"].affects("java", (4, 2, 0))


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """A recording of a fleet with librdkafka 2.5.0 producers, Java 3.9 and 4.2 clients (the simulator)."""
    from kip714.tools.simulate import Fleet

    folder = tmp_path_factory.mktemp("rec") / "recording"
    fleet = Fleet(
        3,
        2,
        seed=7,
        software=[(("confluent-kafka-python", "2.5.0-rdkafka-2.5.0"), 1), (("apache-kafka-java", "3.9.0"), 1)],
        start_spread_ms=0,
    )
    for c in fleet.clients:  # a Java metric kip714 does not list by name
        if c.layout == "java":
            c.tune = lambda model: model.client.collector.gauge("org.apache.kafka.producer.bufferpool.wait.ratio").set(
                0.1
            )
    reg = SubscriptionRegistry()
    reg.set("all", {"metrics": "*", "interval.ms": "1000"})
    fleet.run_in_process(TelemetryBroker(reg), 5_000, recorder=str(folder))
    return str(folder), fleet


def test_lint_against_a_recording(tmp_path, recording):
    folder, fleet = recording
    java_only = "org.apache.kafka.producer.record.error.total"
    path = write(
        tmp_path,
        f"""\
crash metrics=[{java_only}],interval.ms=60000
nobody metrics=*,match=[client_id=nobody-.*]
seen metrics=[org.apache.kafka.producer.bufferpool],interval.ms=60000,match=[client_software_name=apache-kafka-java]
""",
    )
    status, out = _run(["subscriptions", "lint", "--config", path, "--recording", folder, "--json"])
    assert status == 1
    found = json.loads(out)
    by_code = {}
    for f in found:
        by_code.setdefault(f["code"], []).append(f)
    crash = [f for f in by_code["known-defect"] if "librdkafka#4833" in f["message"]]
    rdk = [c for c in fleet.clients if c.layout == "librdkafka"]
    assert crash and crash[0]["message"].startswith(f"librdkafka#4833: {len(rdk)} client(s) run confluent-kafka-python")
    assert crash[0]["source"].startswith("librdkafka CHANGELOG v2.5.3")
    assert any("KAFKA-19747" in f["message"] for f in by_code["known-defect"])  # Java 3.9.0
    assert [f["subscription"] for f in by_code["regex-never-matches"]] == ["nobody"]
    assert "prefix-matches-nothing" not in by_code  # a prefix the recording's clients pushed is fine
    assert by_code["several-subscriptions"][0]["subscription"].count(",") >= 1


def test_a_prefix_only_the_recording_knows(tmp_path, recording):
    folder, _ = recording
    from kip714.operations.subscriptions import read_fleet

    fleet = read_fleet(folder)
    assert "org.apache.kafka.producer.bufferpool.wait.ratio" in fleet.metrics  # one kip714 does not list by name
    subs = {"a": {"metrics": "org.apache.kafka.producer.bufferpool", "interval.ms": "60000"}}
    assert codes(lint(subs)) == ["prefix-matches-nothing"]
    assert "prefix-matches-nothing" not in codes(lint(subs, read_fleet(folder)))
