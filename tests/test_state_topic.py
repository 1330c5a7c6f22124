"""The admin API's state shared by a fleet through a compacted topic (``kip714 proxy --state-topic``), against
librdkafka's mock cluster (a cluster nobody here wrote), read and written through confluent-kafka.

In process: two or three replicas (each a :class:`SubscriptionLayers` with its own :class:`StateTopicStore`
and :class:`ClientMetricsAdmin`) over one topic. An alter is answered once read back, so a describe through the
same replica sees it at once; the others apply it within a second (the median and worst of 100 alters are
printed); concurrent incremental alters of one name through two replicas both survive; 1 000 varied clients get
the same SubscriptionIds from every replica after alters and deletes sent to alternating replicas; a record that
does not parse is skipped and counted; a restarted replica reads the state back; a cluster that does not answer
makes alters fail with REQUEST_TIMED_OUT and the replica not ready, and it catches up when the cluster is back.
Then the command line: a topic of several partitions, or one the cluster will not create, stops
``kip714 proxy`` with one line and exit status 2.
"""

from __future__ import annotations

import itertools
import json
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from mock_cluster import MockCluster  # noqa: E402
from service_helpers import wait_until  # noqa: E402

import kip714  # noqa: E402
from kip714 import ErrorCode  # noqa: E402
from kip714.broker.admin_state import AdminStateStore  # noqa: E402
from kip714.broker.config_admin import ClientMetricsAdmin  # noqa: E402
from kip714.broker.state_topic import StateTopicStore  # noqa: E402
from kip714.broker.subscription_layers import SubscriptionLayers  # noqa: E402
from kip714.broker.subscriptions import ClientInfo  # noqa: E402
from kip714.endpoint.health import Health  # noqa: E402
from kip714.wire import (  # noqa: E402
    IncrementalAlterableConfig,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)

CM = 16
SET, DELETE = 0, 1
_names = itertools.count()


@pytest.fixture(scope="module")
def cluster():
    with MockCluster(brokers=3) as mc:
        yield mc


class Replica:
    """One replica's admin side: its store, its layers and its admin API."""

    def __init__(
        self, cluster: MockCluster, topic: str, name: str, base: dict | None = None, cache=None, connect_timeout_s=10
    ) -> None:
        self.store = StateTopicStore(
            topic, cluster.bootstraps, replica_id=name, cache=cache, connect_timeout_s=connect_timeout_s
        )
        self.layers = SubscriptionLayers(kip714.SubscriptionRegistry(), self.store)
        if base:
            self.layers.set_base("config-file", base)
        self.admin = ClientMetricsAdmin(self.layers, alter_open=True)

    def alter(self, name: str, *configs: tuple[str, int, str | None]) -> tuple[int, str | None]:
        req = IncrementalAlterConfigsRequest(
            [IncrementalAlterConfigsResource(CM, name, [IncrementalAlterableConfig(*c) for c in configs])], False
        )
        (r,) = self.admin.incremental_alter_configs(req, "User:ANONYMOUS").responses
        return r.error_code, r.error_message

    def config(self, name: str) -> dict[str, str] | None:
        return self.layers.config(name)

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def topic(cluster):
    name = f"kip714-state-{next(_names)}"
    cluster.create_topic(name, 1)
    return name


@pytest.fixture
def replicas(cluster, topic):
    made: list[Replica] = []

    def make(name: str, **kw) -> Replica:
        made.append(Replica(cluster, topic, name, **kw))
        return made[-1]

    yield make
    for r in made:
        r.close()


def _equal_soon(replicas: list[Replica], name: str, expected, timeout: float = 1.0, t0: float | None = None) -> float:
    """Seconds from ``t0`` (default: now) until every replica holds ``expected`` for ``name`` (AssertionError
    after ``timeout``)."""
    t0 = time.perf_counter() if t0 is None else t0
    deadline = t0 + timeout
    while time.perf_counter() < deadline:
        if all(r.config(name) == expected for r in replicas):
            return time.perf_counter() - t0
        time.sleep(0.001)
    raise AssertionError(f"{name}: {[r.config(name) for r in replicas]} != {expected} after {timeout}s")


def test_alters_are_seen_at_once_by_the_writer_and_within_a_second_by_the_others(replicas, tmp_path):
    a, b = replicas("r1"), replicas("r2")
    assert a.store.ready and b.store.ready
    lags = []
    for i in range(100):
        name = f"s{i % 7}"
        t0 = time.perf_counter()  # from the alter's request to the other replica applying it
        if i % 10 == 9:
            assert a.alter(name, ("metrics", DELETE, None), ("interval.ms", DELETE, None)) == (0, None)
            expected = None
        else:
            assert a.alter(name, ("metrics", SET, f"org.apache.kafka.m{i}"), ("interval.ms", SET, "1000")) == (0, None)
            expected = {"metrics": f"org.apache.kafka.m{i}", "interval.ms": "1000"}
        assert a.config(name) == expected  # the writer answered only once it read its record back
        lags.append(_equal_soon([b], name, expected, t0=t0))
    median, worst = statistics.median(lags), max(lags)
    (tmp_path / "propagation.json").write_text(json.dumps({"median_s": median, "worst_s": worst}))
    print(
        f"\npropagation of 100 alters (request to the other replica): median {median * 1e3:.1f} ms, worst {worst * 1e3:.1f} ms"
    )
    assert median < 0.1
    assert worst < 1.0
    assert a.layers.effective() == b.layers.effective()
    assert a.store.lag() == 0 and b.store.lag() == 0


def test_concurrent_incremental_alters_of_one_name_through_two_replicas_both_survive(replicas):
    a, b = replicas("r1"), replicas("r2")
    for round_ in range(10):
        name = f"both-{round_}"
        assert a.alter(name, ("metrics", SET, "org.apache.kafka.a")) == (0, None)
        _equal_soon([a, b], name, {"metrics": "org.apache.kafka.a"})
        go = threading.Barrier(2)
        results: dict[str, tuple] = {}

        def alter(r: Replica, key: str, value: str, tag: str) -> None:
            go.wait(5)
            results[tag] = r.alter(name, (key, SET, value))

        threads = [
            threading.Thread(target=alter, args=(a, "interval.ms", "2000", "a")),
            threading.Thread(target=alter, args=(b, "match", "client_id=app-.*", "b")),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert results == {"a": (0, None), "b": (0, None)}
        _equal_soon([a, b], name, {"metrics": "org.apache.kafka.a", "interval.ms": "2000", "match": "client_id=app-.*"})


def _clients(n: int) -> list[ClientInfo]:
    return [
        ClientInfo(
            client_instance_id=uuid.UUID(int=(i * 0x9E3779B97F4A7C15) % (1 << 128)),
            client_id=f"app-{i % 13}",
            client_software_name=("librdkafka", "apache-kafka-java", "confluent-kafka-python")[i % 3],
            client_software_version=f"2.{i % 11}.0",
            client_source_address=f"10.0.{i % 7}.{i % 251}",
            client_source_port=30000 + i,
        )
        for i in range(n)
    ]


def test_replicas_compute_the_same_subscription_ids_for_1000_clients(replicas):
    base = {"base": {"metrics": "org.apache.kafka.producer.", "interval.ms": "30000"}}
    a, b = replicas("r1", base=base), replicas("r2", base=base)
    steps = [
        (
            "p",
            [("metrics", SET, "org.apache.kafka.producer.node.request.latency"), ("match", SET, "client_id=app-1.*")],
        ),
        ("c", [("metrics", SET, "org.apache.kafka.consumer."), ("interval.ms", SET, "5000")]),
        ("java", [("metrics", SET, "*"), ("match", SET, "client_software_name=apache-kafka-java")]),
        ("p", [("interval.ms", SET, "1000")]),
        ("base", [("metrics", DELETE, None), ("interval.ms", DELETE, None)]),  # hides the file's subscription
        ("c", [("metrics", DELETE, None), ("interval.ms", DELETE, None)]),
        (
            "src",
            [("metrics", SET, "org.apache.kafka.consumer.fetch"), ("match", SET, "client_source_address=10.0.3.*")],
        ),
        ("java", [("match", DELETE, None)]),
    ]
    clients = _clients(1000)
    for i, (name, configs) in enumerate(steps):
        writer = (a, b)[i % 2]
        assert writer.alter(name, *configs) == (0, None)
        _equal_soon([a, b], name, writer.config(name))
        ids_a = [a.layers.registry.resolve(c) for c in clients]
        ids_b = [b.layers.registry.resolve(c) for c in clients]
        assert [(r.subscription_id, r.requested_metrics, r.push_interval_ms) for r in ids_a] == [
            (r.subscription_id, r.requested_metrics, r.push_interval_ms) for r in ids_b
        ]
    assert a.layers.source("base") is None and b.layers.source("base") is None
    assert len({r.subscription_id for r in ids_a}) > 1


def test_a_record_that_does_not_parse_is_skipped_counted_and_the_replica_keeps_serving(cluster, topic, replicas):
    a = replicas("r1")
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstraps})
    for value in (b"not json", b'{"format": 99}', b'{"format": 1, "config": {"metrics": 5}}'):
        producer.produce(topic, key=b"junk", value=value, partition=0)
    producer.produce(topic, key=None, value=b"{}", partition=0)
    producer.flush(10)
    wait_until(lambda: a.store.skipped == 4, 5)
    assert a.alter("after", ("metrics", SET, "org.apache.kafka.x")) == (0, None)
    b = replicas("r2")  # reads the junk from the beginning too
    assert b.store.skipped == 4
    assert b.config("after") == {"metrics": "org.apache.kafka.x"}
    assert b.config("junk") is None


def test_a_record_computed_from_a_stale_copy_is_ignored_by_every_replica(cluster, topic, replicas):
    a = replicas("r1")
    assert a.alter("s", ("metrics", SET, "org.apache.kafka.first")) == (0, None)
    assert a.alter("s", ("metrics", SET, "org.apache.kafka.second")) == (0, None)
    first = a.store.versions(["s"])["s"]
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstraps})
    stale = json.dumps({"format": 1, "config": {"metrics": "org.apache.kafka.stale"}}).encode()
    producer.produce(topic, key=b"s", value=stale, partition=0, headers=[("kip714-base", str(first - 1).encode())])
    producer.flush(10)
    wait_until(lambda: a.store.stale == 1, 5)
    b = replicas("r2")  # a replica that starts later decides the same
    assert b.store.stale == 1
    assert a.config("s") == b.config("s") == {"metrics": "org.apache.kafka.second"}


def test_a_restarted_replica_reads_the_state_back(replicas):
    a = replicas("r1")
    for i in range(20):
        assert a.alter(f"k{i}", ("metrics", SET, f"org.apache.kafka.k{i}")) == (0, None)
    for i in range(0, 20, 2):
        assert a.alter(f"k{i}", ("metrics", DELETE, None)) == (0, None)
    a.close()
    again = replicas("r1")
    assert sorted(again.layers.names()) == sorted(f"k{i}" for i in range(1, 20, 2))


def test_an_unreachable_cluster_fails_alters_with_request_timed_out_and_readiness(cluster, replicas):
    a = replicas("r1")
    assert a.alter("before", ("metrics", SET, "org.apache.kafka.b")) == (0, None)
    for broker in (1, 2, 3):
        cluster.broker_down(broker)
    try:
        wait_until(lambda: not a.store.ready, 10)
        assert "unreachable" in a.store.why
        # degraded, still ready: every replica reads this topic, failing them all would empty the balancer
        health = Health(None)
        health.state_store = a.store
        health.refresh()
        checks = {name: (ok, why) for name, ok, why in health.ready()[1]}
        assert checks["state-topic"][0] and checks["state-topic"][1].startswith("degraded: the state topic")
        assert a.store.lag() == -1
        t0 = time.perf_counter()
        code, message = a.alter("during", ("metrics", SET, "org.apache.kafka.d"))
        assert code == ErrorCode.REQUEST_TIMED_OUT and "state topic" in message
        assert time.perf_counter() - t0 < 1.0  # refused at once, not after a timeout
        assert a.config("before") == {"metrics": "org.apache.kafka.b"}  # the state it has is kept
    finally:
        for broker in (1, 2, 3):
            cluster.broker_up(broker)
    wait_until(lambda: a.store.ready, 15)
    assert a.alter("after", ("metrics", SET, "org.apache.kafka.a")) == (0, None)


def test_a_replica_that_cannot_reach_the_cluster_at_start_up_serves_its_cache_until_it_caught_up(
    cluster, replicas, tmp_path
):
    a = replicas("r1", cache=AdminStateStore(tmp_path / "r1"))
    assert a.alter("cached", ("metrics", SET, "org.apache.kafka.c")) == (0, None)
    a.close()
    writer = replicas("r2")
    assert writer.alter("later", ("metrics", SET, "org.apache.kafka.l")) == (0, None)
    assert writer.alter("cached", ("metrics", DELETE, None)) == (0, None)  # after r1's cache was written
    for broker in (1, 2, 3):
        cluster.broker_down(broker)
    try:
        again = replicas("r1", cache=AdminStateStore(tmp_path / "r1"), connect_timeout_s=1.0)
        assert not again.store.ready and "catching up" in again.store.why
        assert again.config("cached") == {"metrics": "org.apache.kafka.c"}  # the cached state, served
        assert again.config("later") is None
        assert again.alter("x", ("metrics", SET, "org.apache.kafka.x"))[0] == ErrorCode.REQUEST_TIMED_OUT
    finally:
        for broker in (1, 2, 3):
            cluster.broker_up(broker)
    wait_until(lambda: again.store.ready, 20)
    assert again.config("later") == {"metrics": "org.apache.kafka.l"}
    assert again.config("cached") is None  # the topic's state replaced the cache whole
    cached = json.loads((tmp_path / "r1" / "client-metrics.json").read_text())["client_metrics"]
    assert cached == {"later": {"metrics": "org.apache.kafka.l"}}  # written before it counted as caught up
    assert again.layers.effective() == writer.layers.effective()


def _proxy(cluster: MockCluster, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kip714", "proxy", "--upstream", cluster.bootstraps, "--port", "0", *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_proxy_refuses_a_topic_of_several_partitions_or_one_it_cannot_create(cluster):
    name = f"kip714-state-wide-{next(_names)}"
    cluster.create_topic(name, 4)
    done = _proxy(cluster, "--state-topic", name, "--connect-timeout", "10s")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"--state-topic {name}: the topic has 4 partitions" in done.stderr
    # the mock names no controller: CreateTopics fails, as on a cluster whose ACLs refuse it
    missing = f"kip714-state-missing-{next(_names)}"
    done = _proxy(cluster, "--state-topic", missing, "--connect-timeout", "2s")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"grant this proxy's principal CREATE on Topic:{missing}" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_client_moved_between_replicas_keeps_pushing_with_the_subscription_id_it_holds(replicas):
    """kip714's own client half (ClientTelemetry) against two replicas' brokers that share the state topic: it
    subscribes through one, is moved to the other mid-run and back, and no push is answered
    UNKNOWN_SUBSCRIPTION_ID (the new replica's instance table starts fresh, as Kafka's does on another broker)."""
    a, b = replicas("r1"), replicas("r2")
    assert a.alter("fleet", ("metrics", SET, "org.apache.kafka.producer."), ("interval.ms", SET, "1000")) == (0, None)
    _equal_soon([a, b], "fleet", {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"})
    brokers = [
        kip714.TelemetryBroker(a.layers.registry, node_id=1),
        kip714.TelemetryBroker(b.layers.registry, node_id=2),
    ]
    collector = kip714.MetricsCollector()
    collector.counter("org.apache.kafka.producer.connection.creation.total").add(1)
    client = kip714.ClientTelemetry(collector, rng=random.Random(7))
    info = ClientInfo(client_id="mover", client_software_name="kip714-test", client_software_version="1")
    answers: list[tuple[int, str, int]] = []  # (broker index, request kind, error code)
    now = 1_000_000
    for step in range(120):  # two simulated minutes, 0.5 s apart
        now += 500
        on = (step // 40) % 2  # replica r1, then r2 (moved), then r1 again
        request = client.create_request(now)
        if request is None:
            continue
        response, _ = brokers[on].handle(request, info, now)
        answers.append((on, type(request).__name__, response.error_code))
        client.handle_response(response, now)
    pushes = [(on, code) for on, kind, code in answers if kind == "PushTelemetryRequest"]
    assert {on for on, _ in pushes} == {0, 1}
    assert sum(1 for on, _ in pushes if on == 1) >= 10
    assert all(code == 0 for _, code in pushes), answers
    gets = [on for on, kind, _ in answers if kind == "GetTelemetrySubscriptionsRequest"]
    assert gets == [0]  # subscribed once: the moves themselves asked for nothing again
    # the control: a replica that does not share the state (its own subscription of the same name) answers
    # the same client UNKNOWN_SUBSCRIPTION_ID, as a broker with other subscriptions would
    alone = kip714.SubscriptionRegistry()
    alone.set("fleet", {"metrics": "org.apache.kafka.consumer.", "interval.ms": "1000"})
    other = kip714.TelemetryBroker(alone, node_id=3)
    for _ in range(10):
        now += 500
        request = client.create_request(now)
        if request is not None:
            response, _ = other.handle(request, info, now)
            assert response.error_code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
            break
    else:
        raise AssertionError("the client pushed nothing to the control replica")
