"""Simulated Kafka Streams applications push the Streams metrics KIP-1076/1091/1221 define, with Kafka's names,
kinds and tags (kip714.client.catalog cites the Kafka sources), through the right clients."""

from __future__ import annotations

import pytest

from kip714 import SubscriptionRegistry, TelemetryBroker
from kip714.client.catalog import STREAMS_CLIENT_METRICS, STREAMS_TASK_METRICS, STREAMS_THREAD_METRICS
from kip714.client.naming import telemetry_metric_name
from kip714.otlp import reference
from kip714.tools.simulate import Fleet
from kip714.tools.simulate.streams import streams_tags


def run(fleet, ms=20_000, metrics="*"):
    reg = SubscriptionRegistry()
    reg.set("all", {"metrics": metrics, "interval.ms": "1000"})
    fleet.run_in_process(TelemetryBroker(reg), ms, collect_payloads=True)
    rows = {}
    for client, payload in fleet.payloads:
        for r in reference.flatten(payload.data):
            rows.setdefault(client.client_id, []).append(r)
    return rows


def test_an_application_is_an_admin_client_and_one_main_consumer_per_thread():
    fleet = Fleet(0, 0, n_streams=1, streams_threads=3, seed=3)
    app = fleet.streams_apps[0]
    ids = [c.client_id for c in fleet.clients]
    assert ids == [f"{app.client_id}-admin"] + [f"{app.client_id}-StreamThread-{n}-consumer" for n in (1, 2, 3)]
    assert app.client_id == f"{app.application_id}-{app.process_id}"
    assert {c.software_version for c in fleet.clients} == {"4.2.0"}
    rows = run(fleet)
    admin = {r["metric"]: r for r in rows[ids[0]]}
    for name, kind, _ in STREAMS_CLIENT_METRICS:
        r = admin[telemetry_metric_name("stream-metrics", name)]
        assert r["kind"] == kind and (kind == "gauge" or r["monotonic"])
    # Kafka's KafkaStreamsTelemetryIntegrationTest: exactly these four through the admin client
    assert {m for m in admin if m.startswith("org.apache.kafka.stream.")} == {
        "org.apache.kafka.stream.alive.stream.threads",
        "org.apache.kafka.stream.client.state",
        "org.apache.kafka.stream.failed.stream.threads",
        "org.apache.kafka.stream.recording.level",
    }
    assert admin["org.apache.kafka.stream.client.state"]["attributes"] == {
        "process_id": app.process_id,
        "application_id": app.application_id,
    }
    assert admin["org.apache.kafka.stream.client.state"]["value"] == 2.0  # RUNNING
    assert admin["org.apache.kafka.stream.recording.level"]["attributes"] == {"process_id": app.process_id}
    assert admin["org.apache.kafka.stream.alive.stream.threads"]["attributes"] == {}
    assert admin["org.apache.kafka.stream.alive.stream.threads"]["value"] == 3.0
    consumer = rows[ids[1]]
    names = {r["metric"] for r in consumer}
    for name, _ in STREAMS_THREAD_METRICS:
        assert telemetry_metric_name("stream-thread-metrics", name) in names
    for name, _ in STREAMS_TASK_METRICS:
        assert telemetry_metric_name("stream-task-metrics", name) in names
    assert "org.apache.kafka.consumer.fetch.manager.records.lag.max" in names  # still a consumer
    state = next(r for r in consumer if r["metric"] == "org.apache.kafka.stream.thread.thread.state")
    assert state["attributes"] == {"thread_id": f"{app.client_id}-StreamThread-1", "process_id": app.process_id}
    assert state["value"] == 4.0  # StreamThread.State.RUNNING
    assert all(r["resource"].get("group_id") == app.application_id for r in consumer)
    # stream threads do not push the client-level metrics, the admin client no thread metrics
    assert not any(r["metric"].startswith("org.apache.kafka.stream.thread.") for r in rows[ids[0]])
    assert not any(r["metric"] == "org.apache.kafka.stream.client.state" for r in consumer)


@pytest.mark.parametrize(
    ("version", "alive", "state"),
    [
        ("4.0.0", ("process-id",), ("process-id",)),  # KAFKA-19882, before KIP-1221
        ("4.0.2", (), ("process-id",)),
        ("4.1.1", ("process-id",), ("process-id",)),
        ("4.1.2", (), ("process-id",)),
        ("4.2.0", (), ("process-id", "application-id")),  # KIP-1221
    ],
)
def test_tags_follow_the_streams_version(version, alive, state):
    assert streams_tags(version, "alive-stream-threads") == alive
    assert streams_tags(version, "failed-stream-threads") == alive
    assert streams_tags(version, "client-state") == state
    assert streams_tags(version, "recording-level") == ("process-id",)


def test_a_failed_thread_a_state_change_and_a_blocked_thread():
    fleet = Fleet(0, 0, n_streams=1, streams_threads=3, seed=4, start_spread_ms=0)
    app = fleet.streams_apps[0]
    app.fail_thread = (2, 8_000)
    app.state_change = (10_000, 1)  # REBALANCING
    app.block_thread = (3, 5_000)
    rows = run(fleet, 20_000)
    admin = rows[f"{app.client_id}-admin"]

    def series(rs, metric, **attrs):
        return [
            r["value"]
            for r in sorted(rs, key=lambda r: r["time_unix_nano"])
            if r["metric"] == metric and all(r["attributes"].get(k) == v for k, v in attrs.items())
        ]

    failed = series(admin, "org.apache.kafka.stream.failed.stream.threads")
    assert sum(failed) == 1.0  # delta pushes: one failure
    assert series(admin, "org.apache.kafka.stream.alive.stream.threads")[-2] == 2.0
    assert 1.0 in series(admin, "org.apache.kafka.stream.client.state")
    # the failed thread's consumer left with a terminating push
    dead = next(c for c in fleet.clients if c.client_id == f"{app.client_id}-StreamThread-2-consumer")
    assert (
        dead.terminating_pushes == 1
        and max(r["time_unix_nano"] for r in rows[dead.client_id]) < min(r["time_unix_nano"] for r in admin) + 12e9
    )
    blocked = rows[f"{app.client_id}-StreamThread-3-consumer"]
    polls = series(blocked, "org.apache.kafka.stream.thread.poll.total")
    assert polls[-2] == 0.0 and polls[0] > 0  # deltas: no poll once blocked
    assert series(blocked, "org.apache.kafka.stream.thread.process.ratio")[-2] == 1.0
    assert series(blocked, "org.apache.kafka.stream.thread.thread.state")[-2] == 4.0  # still RUNNING


def test_a_client_that_leaves_silently_sends_no_terminating_push():
    fleet = Fleet(2, 0, seed=5, start_spread_ms=0)
    fleet.clients[0].leave_after_ms = 5_000
    fleet.clients[0].leave_cleanly = False
    fleet.clients[1].leave_after_ms = 5_000
    run(fleet, 15_000)
    assert fleet.clients[0].terminating_pushes == 0 and fleet.clients[0].pushes <= 7
    assert fleet.clients[1].terminating_pushes == 1 and fleet.clients[1].pushes <= 8
