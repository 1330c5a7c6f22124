"""Per-client-instance state table (kip714._instances): decisions per second, call overhead, memory.

Run: ``python -m pytest bench/test_bench_instances.py --benchmark-only --benchmark-columns=min,mean,median``
Each batch benchmark stores ``decisions_per_s`` (from the median round) in its extra_info; the memory
benchmark stores ``bytes_per_instance``. ``--benchmark-json`` keeps both.
"""

from __future__ import annotations

import array
import os
import random
from itertools import repeat

import pytest

from kip714._instances import InstanceTable, java_uuid_hash

T0 = 1_700_000_000_000
INTERVAL = 30_000
CRC_BASE = -725132322
BATCH = 1_000_000
SIZES = {"1k": 1_000, "100k": 100_000, "1M": 1_000_000}


def _fill(n: int, interval: int = INTERVAL) -> tuple[InstanceTable, list[bytes]]:
    t = InstanceTable(max_instances=n)
    raw = os.urandom(16 * n)
    _pushes(t, raw, T0, array.array("i", bytes(4 * n)), interval)
    return t, [raw[16 * k : 16 * k + 16] for k in range(n)]


def _pushes(t: InstanceTable, ids: bytes, now: int, sids, interval: int = INTERVAL, out=None) -> int:
    n = len(ids) // 16
    out = out if out is not None else array.array("h", bytes(2 * n))
    return t.decide_pushes(
        ids, array.array("q", [now]) * n, sids, bytes(n), array.array("b", [4]) * n, array.array("i", [900]) * n,
        out, subscription_version=0, crc_base=CRC_BASE, push_interval_ms=interval, telemetry_max_bytes=1 << 20,
    )


@pytest.mark.parametrize("size", list(SIZES))
def test_decide_pushes(benchmark, size):
    """One batch of 1M pushes drawn at random from `size` live instances (all stay live: rounds are 5 s
    apart, the TTL is 90 s); with a 30 s interval most repeats inside a round are throttled."""
    benchmark.group = "instances-decide_pushes"
    n = SIZES[size]
    t, pool = _fill(n)
    rng = random.Random(n)
    picks = rng.choices(pool, k=BATCH)
    ids = b"".join(picks)
    sids = array.array("i", [CRC_BASE ^ java_uuid_hash(p) for p in picks])
    terminating = bytes(BATCH)
    ctypes = array.array("b", [4]) * BATCH
    sizes = array.array("i", [900]) * BATCH
    out = array.array("h", bytes(2 * BATCH))
    rounds = iter(range(1, 1_000))

    def setup():
        now = array.array("q", [T0 + 5_000 * next(rounds)]) * BATCH
        return (ids, now, sids, terminating, ctypes, sizes, out), {
            "subscription_version": 0, "crc_base": CRC_BASE, "push_interval_ms": INTERVAL,
            "telemetry_max_bytes": 1 << 20,
        }

    accepted = benchmark.pedantic(t.decide_pushes, setup=setup, rounds=5, warmup_rounds=1)
    assert 0 < accepted <= BATCH and len(t) == n and t.evictions == 0
    benchmark.extra_info["live_instances"] = n
    benchmark.extra_info["decisions_per_s"] = round(BATCH / benchmark.stats.stats.median)


def test_decide_gets(benchmark):
    benchmark.group = "instances-decide_pushes"
    n = SIZES["1M"]
    t, pool = _fill(n)
    rng = random.Random(3)
    ids = b"".join(rng.choices(pool, k=BATCH))
    out = array.array("h", bytes(2 * BATCH))
    rounds = iter(range(1, 1_000))

    def setup():
        now = array.array("q", [T0 + 5_000 * next(rounds)]) * BATCH
        return (ids, now, out), {"subscription_version": 0, "crc_base": CRC_BASE, "push_interval_ms": INTERVAL}

    benchmark.pedantic(t.decide_gets, setup=setup, rounds=5, warmup_rounds=1)
    benchmark.extra_info["live_instances"] = n
    benchmark.extra_info["decisions_per_s"] = round(BATCH / benchmark.stats.stats.median)


def test_insert_flood(benchmark):
    """1M never-seen ids into a full 10k table: create + evict + decide for every push."""
    benchmark.group = "instances-decide_pushes"
    t, _ = _fill(10_000)
    sids = array.array("i", bytes(4 * BATCH))
    out = array.array("h", bytes(2 * BATCH))
    rounds = iter(range(1, 1_000))

    def setup():
        return (t, os.urandom(16 * BATCH), T0 + next(rounds), sids), {"out": out}

    benchmark.pedantic(_pushes, setup=setup, rounds=5, warmup_rounds=1)
    assert len(t) == 10_000
    benchmark.extra_info["decisions_per_s"] = round(BATCH / benchmark.stats.stats.median)


# ------------------------------------------------------------------------ single Python calls
# Each round makes CALLS calls from a plain Python loop (itertools.repeat, like timeit), so the figures
# are what a Python broker pays per call, loop overhead (~10 ns) included; ns_per_call is in extra_info.

CALLS = 1_000
MAXB = 1 << 20


@pytest.fixture(scope="module")
def single():
    t, pool = _fill(1_000)
    return t, pool[0]


def _per_call(benchmark, loop):
    benchmark(loop)
    benchmark.extra_info["ns_per_call"] = round(benchmark.stats.stats.median / CALLS * 1e9, 1)


def test_single_decide_push(benchmark, single):
    benchmark.group = "instances-single-call (per 1000 calls)"
    t, cid = single
    f = t.decide_push

    def loop():
        for _ in repeat(None, CALLS):
            f(cid, T0, 0, False, 4, 900, MAXB)

    _per_call(benchmark, loop)


def test_single_decide_get(benchmark, single):
    benchmark.group = "instances-single-call (per 1000 calls)"
    t, cid = single
    f = t.decide_get

    def loop():
        for _ in repeat(None, CALLS):
            f(cid, T0)

    _per_call(benchmark, loop)


def test_single_lookup(benchmark, single):
    benchmark.group = "instances-single-call (per 1000 calls)"
    t, cid = single
    f = t.lookup

    def loop():
        for _ in repeat(None, CALLS):
            f(cid, T0, 0)

    _per_call(benchmark, loop)


def test_single_create(benchmark, single):
    benchmark.group = "instances-single-call (per 1000 calls)"
    t, cid = single
    f = t.create

    def loop():
        for _ in repeat(None, CALLS):
            f(cid, T0, 0, 0, INTERVAL)

    _per_call(benchmark, loop)


def test_single_broker_push_path(benchmark, single):
    """What a broker does per PushTelemetry: lookup (create if needed), decide_push, set_last_error."""
    benchmark.group = "instances-single-call (per 1000 calls)"
    t, cid = single

    def loop():
        for _ in repeat(None, CALLS):
            if t.lookup(cid, T0, 0):
                t.create(cid, T0, 0, 0, INTERVAL)
            if t.decide_push(cid, T0, 0, False, 4, 900, MAXB) == 0:
                t.set_last_error(cid, 0)

    _per_call(benchmark, loop)


# ---------------------------------------------------------------------------------------- memory


def test_memory_per_instance_at_1m(benchmark):
    """Filling an empty table with 1M instances (growth included); records native bytes per instance."""
    benchmark.group = "instances-memory"
    n = 1_000_000
    sids = array.array("i", bytes(4 * n))
    holder = {}

    def setup():
        holder["t"] = t = InstanceTable(max_instances=n)
        return (t, os.urandom(16 * n), T0, sids), {}

    benchmark.pedantic(_pushes, setup=setup, rounds=3)
    t = holder["t"]
    assert len(t) == n
    per = t.memory_bytes() / n
    benchmark.extra_info["bytes_per_instance"] = round(per, 2)
    benchmark.extra_info["entry_struct_bytes"] = InstanceTable.entry_size()
    benchmark.extra_info["inserts_per_s"] = round(n / benchmark.stats.stats.median)
    assert per <= 128
