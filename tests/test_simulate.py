"""The simulated client fleet (kip714.tools.simulate): in-process on a simulated clock, recording, and over TCP.

Loopback only; every wait is bounded.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections import Counter, defaultdict

import pytest
import server_thread

import kip714
from kip714 import ErrorCode, SubscriptionRegistry, TelemetryBroker
from kip714.cli import add_command
from kip714.client.naming import telemetry_metric_name
from kip714.endpoint.server import TelemetryServer
from kip714.otlp import reference as otlp_pb
from kip714.sinks.recorder import ParquetRecorder, read_recording, record_schema
from kip714.tools.simulate import (
    JAVA_CONSUMER_METRICS,
    JAVA_PRODUCER_METRICS,
    RDK_CONSUMER_METRICS,
    RDK_PRODUCER_METRICS,
    SOFTWARE_JAVA,
    SOFTWARE_LIBRDKAFKA,
    Fleet,
    parse_duration,
)

START_MS = 1_750_000_000_000
HOUR = 3_600_000


def registry(metrics="*", interval_ms=60_000):
    r = SubscriptionRegistry()
    r.set("fleet", {"metrics": metrics, "interval.ms": str(interval_ms)})
    return r


def expected_names(client, fleet):
    """Every metric name a client of this kind and layout reports."""
    if client.layout == "librdkafka":
        table = RDK_CONSUMER_METRICS if client.kind == "consumer" else RDK_PRODUCER_METRICS
        return {f"org.apache.kafka.{client.kind}.{name}" for name, _, _ in table}
    table = JAVA_CONSUMER_METRICS if client.kind == "consumer" else JAVA_PRODUCER_METRICS
    names = {telemetry_metric_name(group, name) for group, name, _, _ in table}
    names |= {
        telemetry_metric_name(f"{client.kind}-node-metrics", n)
        for n in ("request-latency-avg", "request-latency-max", "request-total")
    }
    if client.kind == "producer":
        names |= {"org.apache.kafka.producer.topic.record.send.total", "org.apache.kafka.producer.topic.byte.total"}
    return names


def point_value(row):
    return row["value_int"] if row["value_int"] is not None else row["value"]


def check_sane(rows, client, t_lo_ns, t_hi_ns):
    """Values are finite and non-negative, ratios in [0, 1], max >= avg, types as the client sends them."""
    by_key = {}
    for r in rows:
        v = point_value(r)
        assert r["kind"] in ("gauge", "sum"), r
        assert math.isfinite(v) and v >= 0, (r["metric"], v)
        assert t_lo_ns <= r["time_unix_nano"] <= t_hi_ns
        if r["kind"] == "sum":
            assert r["monotonic"] is True
        if r["metric"].endswith("poll.idle.ratio.avg"):
            assert 0.0 <= v <= 1.0
        if client.layout == "librdkafka":
            assert r["scope_name"] == f"{client.client_id}#{client.kind}-1" and r["scope_version"] == "2.16.0"
            assert r["description"]
            is_int = r["metric"].endswith((".max", ".total", "assigned.partitions"))
            assert (r["value_int"] is not None) == is_int, r["metric"]
            if "node.request" in r["metric"]:
                assert set(r["attributes"]) == {"node.id"}
        else:
            assert r["value_int"] is None and r["description"] == "" and r["scope_name"] == ""
            if ".node." in r["metric"]:
                assert set(r["attributes"]) == {"node_id"} and r["attributes"]["node_id"].startswith("node-")
        by_key[(r["metric"], tuple(sorted(r["attributes"].items())))] = v
    for (metric, attrs), v in by_key.items():
        if metric.endswith(("latency.max", "time.max")):
            avg = by_key.get((metric[:-3] + "avg", attrs))
            if avg is not None:
                assert v >= avg - 1e-9 or (client.layout == "librdkafka" and v >= math.floor(avg)), (metric, v, avg)


def test_parse_duration():
    assert parse_duration("10m") == 600_000
    assert parse_duration("600s") == 600_000
    assert parse_duration("1h30m") == 5_400_000
    assert parse_duration("250ms") == 250
    assert parse_duration("2.5") == 2_500
    assert parse_duration(3) == 3_000
    for bad in ("", "10x", "m", "1h 3q"):
        with pytest.raises(ValueError):
            parse_duration(bad)


@pytest.mark.integration  # a whole fleet for a simulated hour, end to end: not a unit
def test_hour_of_telemetry_star_subscription_cumulative():
    """50 + 50 clients (Java and librdkafka), one simulated hour, '*' subscription, cumulative sums."""
    broker = TelemetryBroker(registry("*", 60_000), node_id=1, delta_temporality=False)
    fleet = Fleet(50, 50, seed=7, software="mix", start_ms=START_MS)
    stats = fleet.run_in_process(broker, "1h", collect_payloads=True)

    # protocol: no errors at all (no throttling either), one Get and one terminating push per client
    assert stats.errors_by_code == {} and stats.protocol_errors == {}
    assert stats.gets == 100 and stats.get_results == Counter({0: 100})
    assert stats.accepted == stats.pushes == stats.payloads
    assert 55 * 100 < stats.pushes < 65 * 100
    assert stats.terminating_pushes == 100
    assert all(c.terminating_pushes == 1 and c.errors == Counter() and c.gets == 1 for c in fleet.clients)
    assert {c.layout for c in fleet.clients} == {"java", "librdkafka"}
    assert broker.metrics()["push-results"] == {"NONE": stats.pushes}
    assert stats.simulated_ms >= HOUR and stats.wall_s < 60

    # payloads decode to the expected names with sane values; cumulative counters never decrease
    clients = {}
    per_instance = defaultdict(list)
    for client, payload in fleet.payloads:
        clients[payload.client_instance_id] = client
        per_instance[payload.client_instance_id].append(payload)
    assert len(per_instance) == 100
    latency_by_node = defaultdict(list)
    end_ns = (START_MS + stats.simulated_ms) * 1_000_000
    for instance, payloads in per_instance.items():
        client = clients[instance]
        assert [p.terminating for p in payloads].count(True) == 1 and payloads[-1].terminating
        assert payloads[0].labels["client_id"] == client.client_id
        assert payloads[0].labels["client_software_name"] == client.software_name
        last = {}
        for p in payloads:
            rows = otlp_pb.flatten(p.data)
            assert {r["metric"] for r in rows} == expected_names(client, fleet)
            check_sane(rows, client, START_MS * 1_000_000, end_ns)
            for r in rows:
                if r["kind"] == "sum":
                    assert r["temporality"] == "cumulative"
                    key = (r["metric"], tuple(sorted(r["attributes"].items())))
                    v = point_value(r)
                    if key in last:
                        assert v >= last[key][0], key
                        assert r["start_time_unix_nano"] == last[key][1]
                    last[key] = (v, r["start_time_unix_nano"])
                if r["metric"].endswith("node.request.latency.avg") and client.kind == "producer":
                    node = r["attributes"].get("node.id", r["attributes"].get("node_id"))
                    latency_by_node[int(str(node).removeprefix("node-"))].append(point_value(r))
            if client.kind == "consumer":
                res = rows[0]["resource"]
                assert res["group_id"] == client.group_id
        # counters did grow over the hour
        assert any(v > 0 for v, _ in last.values())
    # the slow broker is visibly slower
    medians = {n: sorted(v)[len(v) // 2] for n, v in latency_by_node.items()}
    assert set(medians) == {1, 2, 3}
    slow = fleet.slow_broker
    assert all(medians[slow] > 1.8 * m for n, m in medians.items() if n != slow), medians
    # resource attributes vary across the fleet
    assert any("transactional_id" in c.resource for c in fleet.producers)
    assert any("client_rack" in c.resource for c in fleet.clients)


@pytest.mark.integration  # a whole fleet for a simulated hour, end to end: not a unit
def test_prefix_subscription_mixed_codecs_recorded(tmp_path):
    """A prefix subscription, every codec, delta temporality, each push recorded as Parquet."""
    prefixes = (
        "org.apache.kafka.producer.node.",
        "org.apache.kafka.consumer.fetch.manager.",
        "org.apache.kafka.consumer.poll.",
        "org.apache.kafka.producer.connection.",
    )
    broker = TelemetryBroker(registry(",".join(prefixes), 60_000), node_id=2)
    fleet = Fleet(50, 50, seed=11, software=[SOFTWARE_JAVA, SOFTWARE_LIBRDKAFKA], codec="mixed", start_ms=START_MS)
    recorder = ParquetRecorder(tmp_path / "rec", flush_interval_s=60)
    try:
        stats = fleet.run_in_process(broker, HOUR, step_ms=100, recorder=recorder)
    finally:
        recorder.close()
    assert stats.errors_by_code == {}
    assert stats.terminating_pushes == 100 and all(c.terminating_pushes == 1 for c in fleet.clients)
    assert set(stats.by_compression) == {"NONE", "GZIP", "SNAPPY", "LZ4", "ZSTD"}

    table = read_recording(tmp_path / "rec")
    assert table.schema.equals(record_schema())
    assert table.num_rows == stats.pushes == stats.recorded_rows
    rows = table.to_pylist()
    by_client = {c.client_id: c for c in fleet.clients}
    names = set()
    terminating = Counter()
    for row in rows:
        assert row["error_code"] == 0 and row["node_id"] == "2"
        assert START_MS <= row["received_at_ms"] <= START_MS + stats.simulated_ms
        client = by_client[row["client_id"]]
        assert row["client_software_name"] == client.software_name
        assert row["client_software_version"] == client.software_version
        assert row["client_source_address"] == client.client_info.client_source_address
        assert row["compression_type"] == int(kip714.CompressionType[(client.codec or "zstd").upper()])
        terminating[row["client_instance_id"]] += row["terminating"]
        data = kip714.decompress(row["payload"], row["compression_type"], 1 << 20)
        points = otlp_pb.flatten(data)
        assert points
        for p in points:
            assert p["metric"].startswith(prefixes), p["metric"]
            if p["kind"] == "sum":
                assert p["temporality"] == "delta" and point_value(p) >= 0
            names.add(p["metric"])
        check_sane(points, client, START_MS * 1_000_000, (START_MS + stats.simulated_ms) * 1_000_000)
    assert len(terminating) == 100 and set(terminating.values()) == {1}
    assert {
        "org.apache.kafka.producer.node.request.latency.avg",
        "org.apache.kafka.consumer.poll.idle.ratio.avg",
        "org.apache.kafka.consumer.fetch.manager.fetch.latency.max",
        "org.apache.kafka.producer.connection.creation.total",
    } <= names
    # received_at_ms of one client's pushes are about one interval apart
    times = sorted(
        r["received_at_ms"] for r in rows if r["client_id"] == fleet.clients[0].client_id and not r["terminating"]
    )
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps and all(60_000 <= g <= 60_000 + 200 for g in gaps)


def test_config_change_mid_run_resubscribes_every_client():
    reg = registry("*", 60_000)
    broker = TelemetryBroker(reg, node_id=1)
    fleet = Fleet(20, 20, seed=3, software="mix", start_ms=START_MS)
    change = lambda now: reg.set("fleet", {"metrics": "org.apache.kafka.", "interval.ms": "30000"})  # noqa: E731
    stats = fleet.run_in_process(broker, 30 * 60_000, actions=[(15 * 60_000, change)], collect_payloads=True)
    unknown, throttled = int(ErrorCode.UNKNOWN_SUBSCRIPTION_ID), int(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
    # Kafka 4.1+: the Get right after UNKNOWN_SUBSCRIPTION_ID is exempt from throttling but does not move
    # lastGetRequestTimestamp, so the next push is THROTTLED when the client's jitter drew < 1 x interval
    # (docs/reference/kafka-java-behaviour.md 3(c)); that client then subscribes once more. Nothing else goes wrong.
    assert stats.protocol_errors == {unknown: 40}
    assert set(stats.errors_by_code) <= {unknown, throttled}
    assert stats.push_results[unknown] == 40 and set(stats.get_results) == {0}
    assert 0 < stats.push_results[throttled] < 40
    for c in fleet.clients:
        assert c.errors[unknown] == 1 and set(c.errors) <= {unknown, throttled}
        assert c.gets == 2 + c.errors[throttled] and c.terminating_pushes == 1
        assert c.telemetry.subscription.push_interval_ms == 30_000
        assert c.telemetry.subscription.requested_metrics == ("org.apache.kafka.",)
    assert broker.metrics()["unknown-subscription-request-count"] == 40
    # pushes after the change carry the new subscription id, about twice as often
    after = [p for _, p in fleet.payloads if p.received_at_ms > START_MS + 16 * 60_000]
    new_ids = {c.telemetry.subscription.subscription_id for c in fleet.clients}
    assert after and {p.subscription_id for p in after} <= new_ids


def test_same_seed_same_telemetry():
    def run(seed):
        broker = TelemetryBroker(registry("*", 10_000))
        fleet = Fleet(3, 3, seed=seed, software="mix", codec="mixed", start_ms=START_MS)
        fleet.run_in_process(broker, 120_000, collect_payloads=True)
        return [(c.index, p.data, p.received_at_ms) for c, p in fleet.payloads]

    first, second = run("repeat"), run("repeat")
    assert first == second and len(first) > 30  # byte-identical payloads at identical times
    assert run("other") != first


def test_fleet_options_and_validation():
    fleet = Fleet(4, 6, seed=1, brokers=[101, 102], software=("my-client", "1.0.0"), slow_broker=102, consumer_groups=2)
    assert fleet.nodes == (101, 102) and fleet.slow_broker == 102
    assert {c.layout for c in fleet.clients} == {"java"} and len(fleet.producers) == 4
    groups = Counter(c.group_id for c in fleet.consumers)
    assert len(groups) == 2
    # the members of a group share its partitions
    for gid in groups:
        members = [c for c in fleet.consumers if c.group_id == gid]
        assert max(m.base_assignment for m in members) - min(m.base_assignment for m in members) <= 1
    assert Fleet(1, 1, software=("x", "1.2-rdkafka-2.3.0")).clients[0].layout == "librdkafka"
    with pytest.raises(ValueError):
        Fleet(1, 0, software=("bad name!", "1"))
    with pytest.raises(ValueError):
        Fleet(1, 0, codec="brotli")
    with pytest.raises(ValueError):
        Fleet(1, 0, brokers=3, slow_broker=9)
    with pytest.raises(ValueError):
        Fleet(1, 0).run_tcp("192.0.2.1", 9092, 1.0)  # not loopback: refused before connecting


def test_on_payload_callback_and_resumed_run():
    broker = TelemetryBroker(registry("*", 5_000))
    fleet = Fleet(2, 2, seed=5, start_ms=START_MS, software="librdkafka")
    seen = []
    fleet.run_in_process(broker, 60_000, on_payload=lambda p, c: seen.append((c.client_id, p)), close=False)
    first = len(seen)
    assert first > 20 and not any(p.terminating for _, p in seen)
    stats = fleet.run_in_process(broker, 60_000, on_payload=lambda p, c: seen.append((c.client_id, p)))
    assert len(seen) > 2 * first - 8
    assert sum(p.terminating for _, p in seen) == 4 and stats.terminating_pushes == 4
    assert stats.simulated_ms >= 120_000 and stats.errors_by_code == {}
    with pytest.raises(RuntimeError):
        fleet.run_in_process(broker, 1_000)


def test_cli_in_process_with_recording(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="kip714")
    add_command(parser.add_subparsers(dest="command"), "simulate")
    rec = tmp_path / "rec"
    args = parser.parse_args(
        [
            "simulate",
            "--producers",
            "3",
            "--consumers",
            "2",
            "--duration",
            "2m",
            "--interval-ms",
            "5000",
            "--codec",
            "lz4",
            "--software",
            "mix",
            "--record",
            str(rec),
            "--seed",
            "9",
        ]
    )
    assert args.func(args) == 0
    out = capsys.readouterr()
    assert "clients: 5" in out.out and "errors by code: none" in out.out and "lz4=" in out.out
    assert "pushes" in out.err  # progress lines
    table = read_recording(rec)
    pushes = int(out.out.split("PushTelemetry=")[1].split()[0])
    assert table.num_rows == pushes > 5 * 20
    assert set(table.column("compression_type").to_pylist()) == {int(kip714.CompressionType.LZ4)}


# ------------------------------------------------------------------------------------------ TCP


class ServerThread(server_thread.ServerThread):
    """A TelemetryServer on 127.0.0.1 (free port) that keeps every accepted payload."""

    def __init__(self, reg):
        self.payloads = []
        self.broker = TelemetryBroker(reg, node_id=1)
        super().__init__(TelemetryServer(self.broker, "127.0.0.1", 0, on_payload=self.payloads.append), 10)


@pytest.mark.integration
def test_tcp_fleet_against_kip714_serve():
    srv = ServerThread(registry("*", 500))
    try:
        fleet = Fleet(3, 3, seed=2, software="mix", codec="mixed")
        started = time.monotonic()
        stats = fleet.run_tcp("127.0.0.1", srv.server.port, 2.5, request_timeout_s=5, close_timeout_s=5)
        assert time.monotonic() - started < 20
    finally:
        srv.stop()
    assert stats.started == 6 and stats.connect_failures == 0 and stats.failed_requests == 0
    assert stats.errors_by_code == {}
    assert stats.gets == 6 and stats.accepted == stats.pushes >= 6 * 2
    assert stats.terminating_pushes == 6
    assert all(c.terminating_pushes == 1 and c.closed for c in fleet.clients)
    assert srv.server.push_codes == Counter({0: stats.pushes})
    assert srv.server.stats["protocol_errors"] == 0
    # what the server saw: the clients' software from ApiVersions v3, one terminating push each
    terminating = Counter(p.client_instance_id for p in srv.payloads if p.terminating)
    assert len(terminating) == 6 and set(terminating.values()) == {1}
    by_id = {c.client_id: c for c in fleet.clients}
    for p in srv.payloads:
        c = by_id[p.labels["client_id"]]
        assert p.labels["client_software_name"] == c.software_name
        assert p.labels["client_software_version"] == c.software_version
        assert p.labels["client_source_address"] == "127.0.0.1"
        rows = otlp_pb.flatten(p.data)
        assert {r["metric"] for r in rows} == expected_names(c, fleet)
