"""kip714 report understands Kafka Streams applications: their clients' kinds, the coverage of the metrics
KIP-1076/1091 make them push, and the Streams insights (failed stream threads, an application out of
RUNNING, a stream thread stuck in a processor)."""

from __future__ import annotations

import pytest

from kip714 import SubscriptionRegistry, TelemetryBroker

pytest.importorskip("pyspark")

from kip714.spark.report import INSIGHTS, report


@pytest.fixture(scope="module")
def streams_report(spark, tmp_path_factory):
    from kip714.tools.simulate import Fleet

    tmp = tmp_path_factory.mktemp("streams-report")
    fleet = Fleet(2, 0, n_streams=3, streams_threads=2, seed=11, slow_broker=None, incidents=False, start_spread_ms=0)
    failing, rebalancing, blocked = fleet.streams_apps
    failing.fail_thread = (2, 60_000)
    rebalancing.state_change = (20_000, 1)  # REBALANCING from 20 s on
    blocked.block_thread = (1, 30_000)
    registry = SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": "5000"})
    fleet.run_in_process(TelemetryBroker(registry, node_id=1), "3m", recorder=tmp / "rec")
    data = report(str(tmp / "rec"), spark).write(tmp / "out")
    return fleet, data, data["insights"]


def test_streams_clients_have_their_kind(streams_report):
    fleet, data, _ = streams_report
    kinds = {r["client_id"]: r["kind"] for r in data["clients"]}
    for c in fleet.clients:
        if c.streams is None:
            assert kinds[c.client_id] == "producer"
        else:
            assert kinds[c.client_id] == ("streams-client" if c.streams.thread is None else "streams-thread")


def test_streams_clients_conform_and_cover_their_metrics(streams_report):
    _, data, _ = streams_report
    rows = {(r["client_software_version"], r["check"]): r for r in data["conformance"]}
    coverage = rows[("4.2.0", "standard_coverage")]
    assert coverage["status"] == "pass" and coverage["checked"] > 40, coverage
    assert all(r["status"] in ("pass", "n/a") for (v, _), r in rows.items() if v == "4.2.0"), [
        (k, r["status"], r["detail"]) for k, r in rows.items() if r["status"] == "fail"
    ]


def test_streams_insights_flag_exactly_the_misbehaving_applications(streams_report):
    fleet, _, insights = streams_report
    failing, rebalancing, blocked = fleet.streams_apps
    found = {(r["insight"], r["client_id"]) for r in insights}
    assert found == {
        ("streams_failed_threads", f"{failing.client_id}-admin"),
        ("streams_not_running", f"{rebalancing.client_id}-admin"),
        ("streams_thread_blocked", f"{blocked.thread_id(1)}-consumer"),
    }, insights
    by = {r["insight"]: r for r in insights}
    assert set(by) <= set(INSIGHTS)
    assert by["streams_failed_threads"]["value"] == 1.0
    assert (
        f"application {failing.application_id} (process {failing.process_id})" in by["streams_failed_threads"]["detail"]
    )
    assert by["streams_not_running"]["metric"] == "org.apache.kafka.stream.client.state"
    assert "most of the time" in by["streams_not_running"]["detail"]
    assert (
        by["streams_thread_blocked"]["value"] == 1.0
        and by["streams_thread_blocked"]["setting"] == "max.poll.interval.ms"
    )
