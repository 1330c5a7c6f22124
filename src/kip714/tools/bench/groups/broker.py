"""The ``broker`` group: :meth:`TelemetryBroker.handle <kip714.TelemetryBroker.handle>` on empty pushes by
the number of live instances (a random instance each push, and the same hot ones every round), and
requests/s of 8 threads sharing one broker on Kafka's default instance table. No peer: goals are rates."""

from __future__ import annotations

import gc
import os
import random
import threading
import time
import uuid

import kip714
from kip714 import (
    ClientInfo,
    GetTelemetrySubscriptionsRequest,
    PushTelemetryRequest,
    SubscriptionRegistry,
    TelemetryBroker,
)

from ..harness import Bench
from ..payloads import capture_payload
from ..timing import summarise

__all__ = ["run"]


def threaded_handle_rate(threads: int, rounds: int, payload: bytes, max_instances: int = 16384) -> tuple[float, int]:
    """Requests per second through one TelemetryBroker shared by ``threads`` threads, each doing ``rounds`` Gets
    for a new client and a zstd push from it; and how many requests raised (anything but an answer)."""
    reg = SubscriptionRegistry()
    reg.set("all", {"metrics": "*", "interval.ms": "100"})
    broker = TelemetryBroker(reg, max_instances=max_instances)
    zero = uuid.UUID(int=0)
    errors = [0] * threads
    start = threading.Barrier(threads + 1)

    def run(k: int) -> None:
        info = ClientInfo(client_id=f"bench-{k}")
        handle = broker.handle
        start.wait()
        for _ in range(rounds):
            try:
                sub, _ = handle(GetTelemetrySubscriptionsRequest(zero), info)
                handle(PushTelemetryRequest(sub.client_instance_id, sub.subscription_id, False, 4, payload), info)
            except Exception:
                errors[k] += 1

    workers = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    start.wait()
    t0 = time.perf_counter()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t0
    return 2 * threads * rounds / elapsed, sum(errors)


def run(bench: Bench) -> None:
    """Add the broker rows (decisions/s by live instances, hot and random; 8 threads) and curve to ``bench``."""
    G = "broker"
    T0 = 1_763_700_000_000
    client = ClientInfo(client_id="bench")
    sizes = [1_000, 100_000] if bench.quick else [1_000, 100_000, 1_000_000]
    calls = 1_000
    rounds = 30 if bench.quick else 100
    rates = []
    for n in sizes:
        reg = SubscriptionRegistry()
        reg.set("all", {"metrics": "*", "interval.ms": "100"})
        broker = TelemetryBroker(reg, max_instances=max(n, 16384))
        res = reg.resolve(client)
        raw = os.urandom(16 * n)
        ids = [raw[16 * k : 16 * k + 16] for k in range(n)]
        requested = list(res.requested_metrics)
        sids = [kip714.compute_subscription_id(requested, res.push_interval_ms, i) for i in ids]
        create = broker.instances.create  # set-up only: the instances exist as after their first Get
        for i, s in zip(ids, sids):
            create(i, T0, res.version, s, res.push_interval_ms)
        rng = random.Random(n)
        handle = broker.handle
        variants = [("random", f"TelemetryBroker.handle, empty push, {n:,} live instances (random instance each push)")]
        if n == sizes[-1] and n > calls:
            variants.append(("hot", f"same, {n:,} live instances, the same {calls:,} instances every round"))
        now = T0  # one clock for both variants: 100 ms a round, far inside the instances' 60 s TTL
        for variant, op in variants:
            hot = rng.sample(range(n), calls) if n > calls else list(range(n))
            samples = []
            for r in range(rounds + 1):
                now += 100  # the subscription's interval: every push is due
                pick = hot if variant == "hot" or n <= calls else rng.sample(range(n), calls)
                # fresh request objects, as a server decodes them per request (hot in cache)
                bodies = [PushTelemetryRequest(ids[k], sids[k], False, 0, b"") for k in pick]
                gc.disable()
                t0 = time.perf_counter_ns()
                for body in bodies:
                    handle(body, client, now)
                dt = time.perf_counter_ns() - t0
                gc.enable()
                if r:
                    samples.append(dt / calls)
            m = broker.metrics()
            assert set(m["push-results"]) == {"NONE"}, m["push-results"]
            assert m["instance-count"] == n and m["instance-expirations"] == 0 and m["instance-evictions"] == 0
            st = summarise(samples)
            st.update(calls_per_round=calls, live_instances=n)
            bench.add_row(
                G,
                f"handle-{variant}-{n}",
                op,
                st,
                None,
                "—",
                unit="rate",
                goal={"kind": "rate", "value": 1e6, "text": "≥ 1 M/s"},
            )
            if variant == "random":
                rates.append(1e9 / st["median"])
        del broker, ids, sids
    bench.curve(
        "broker",
        "TelemetryBroker.handle, empty pushes",
        "live instances",
        "decisions per second",
        sizes,
        {"TelemetryBroker.handle": rates},
        goal_rate=1e6,
        logy=False,
    )
    # 8 threads on one broker (docs/threads.md): each thread's rounds are a Get for a new client and a zstd
    # push from it, on Kafka's default 16 384-instance table, so evictions run all the time
    payload = capture_payload(4)
    rounds8 = 500 if bench.quick else 3_000
    samples8 = []
    for _ in range(3 if bench.quick else 5):
        rate, errors = threaded_handle_rate(8, rounds8, payload)
        assert not errors, f"{errors} requests raised"
        samples8.append(1e9 / rate)
    st = summarise(samples8)
    st.update(threads=8, rounds_per_thread=rounds8)
    bench.add_row(
        G,
        "handle-8-threads",
        "TelemetryBroker.handle, 8 threads × (Get + zstd push of a new client), "
        "16 384-instance table (requests/s, all threads)",
        st,
        None,
        "—",
        unit="rate",
    )
