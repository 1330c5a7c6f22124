"""TelemetryBroker.handle for empty pushes (goal: >= 1 million decisions/s) at 1k, 100k and 1M instances."""

from __future__ import annotations

import os

import pytest

import kip714
from kip714 import ClientInfo, PushTelemetryRequest, SubscriptionRegistry, TelemetryBroker

T0 = 1_763_700_000_000
CLIENT = ClientInfo(client_id="bench")


def _broker(n_instances: int):
    reg = SubscriptionRegistry()
    reg.set("all", {"metrics": "*", "interval.ms": "100"})
    broker = TelemetryBroker(reg, max_instances=max(n_instances, 16384))
    res = reg.resolve(CLIENT)
    ids = [os.urandom(16) for _ in range(n_instances)]
    bodies = []
    for i, raw in enumerate(ids):
        sid = kip714.compute_subscription_id(list(res.requested_metrics), res.push_interval_ms, raw)
        bodies.append(PushTelemetryRequest(raw, sid, False, 0, b""))
    for body in bodies:  # create every instance
        broker.handle(body, CLIENT, T0)
    assert broker.metrics()["instance-count"] == n_instances
    return broker, bodies


@pytest.mark.parametrize("n", [1_000, 100_000, 1_000_000], ids=["1k", "100k", "1M"])
@pytest.mark.benchmark(group="broker-handle-empty-push")
def test_handle_empty_push(benchmark, n):
    broker, bodies = _broker(n)
    clock = [T0]

    def run():
        clock[0] += 100
        now = clock[0]
        handle = broker.handle
        for body in bodies[:1000]:
            handle(body, CLIENT, now)

    benchmark.pedantic(run, rounds=20, warmup_rounds=1)
    benchmark.extra_info["decisions_per_call"] = 1000
