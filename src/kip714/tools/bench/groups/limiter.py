"""The ``limiter`` group: Kafka's push rate limit as :class:`~kip714.broker.InstanceTable` decides it, in
batches (``decide_pushes``) against one ``try_push`` call per push, by the number of live instances; the
native memory per live instance; the cost per decision by batch size."""

from __future__ import annotations

import array
import functools
import gc
import itertools
import os
import random
import time
from typing import Any

from kip714._instances import InstanceTable, java_uuid_hash

from ..harness import Bench
from ..payloads import LIMIT
from ..render import fmt_ns, fmt_rate
from ..timing import interleaved, summarise

__all__ = ["run"]


T0 = 1_700_000_000_000  # the tables' clock (Unix ms)
INTERVAL = 30_000  # the subscription's push interval (ms)
CRC_BASE = -725132322  # the subscription's CRC, xored with each instance's hash


def _fill(n: int) -> tuple[InstanceTable, bytes]:
    raw = os.urandom(16 * n)
    return _fill_same(raw)


def _decide(
    t: InstanceTable,
    ids: Any,
    now: Any,
    sids: Any,
    out: Any,
    terminating: Any = None,
    ctypes: Any = None,
    sizes: Any = None,
) -> int:
    n = len(now)
    return t.decide_pushes(
        ids,
        now,
        sids,
        terminating if terminating is not None else bytes(n),
        ctypes if ctypes is not None else array.array("b", [4]) * n,
        sizes if sizes is not None else array.array("i", [900]) * n,
        out,
        subscription_version=0,
        crc_base=CRC_BASE,
        push_interval_ms=INTERVAL,
        telemetry_max_bytes=LIMIT,
    )


def _fill_same(raw: bytes) -> tuple[InstanceTable, bytes]:
    """A second table holding the same instances (so two contenders do not share state)."""
    n = len(raw) // 16
    t = InstanceTable(max_instances=n)
    sids = array.array("i", [CRC_BASE ^ java_uuid_hash(raw[16 * k : 16 * k + 16]) for k in range(n)])
    out = array.array("h", bytes(2 * n))
    _decide(t, raw, array.array("q", [T0]) * n, sids, out)  # every instance's first push
    assert len(t) == n and not any(out), "the first pushes were not all accepted"
    return t, raw


def run(bench: Bench) -> None:
    """Add the limiter rows (decisions/s by live instances, memory per instance) and curves to ``bench``."""
    G = "limiter"
    sizes = [1_000, 100_000, 1_000_000] if bench.quick else [1_000, 10_000, 100_000, 1_000_000]
    batch = 200_000 if bench.quick else 1_000_000
    single_n = 20_000 if bench.quick else 100_000
    rounds = 3 if bench.quick else 7
    maxb = LIMIT
    rates_batch, rates_single, bytes_per = [], [], []
    for n in sizes:
        t_batch, raw = _fill(n)
        t_single, _ = _fill_same(raw)
        pool = [raw[16 * k : 16 * k + 16] for k in range(n)]
        rng = random.Random(n)
        picks = rng.choices(pool, k=batch)
        ids = b"".join(picks)
        sids = array.array("i", [CRC_BASE ^ java_uuid_hash(p) for p in picks])
        term, ctypes, wsizes = bytes(batch), array.array("b", [4]) * batch, array.array("i", [900]) * batch
        out = array.array("h", bytes(2 * batch))
        s_picks, s_sids = picks[:single_n], list(sids[:single_n])
        try_push = t_single.try_push

        def single(now, s_picks=s_picks, s_sids=s_sids, try_push=try_push):
            for cid, sid in zip(s_picks, s_sids):
                try_push(cid, now, 0, sid, False, 4, 900, maxb)

        samples_b, samples_s, accepted_total = [], [], 0
        gc.collect()
        for r in range(rounds + 1):  # round 0 warms up
            now_ms = T0 + 5_000 * (r + 1)  # rounds 5 s apart: every instance stays live (TTL 90 s)
            now = array.array("q", [now_ms]) * batch
            for which in (0, 1) if r % 2 == 0 else (1, 0):
                t0 = time.perf_counter_ns()
                if which == 0:
                    accepted = _decide(t_batch, ids, now, sids, out, term, ctypes, wsizes)
                    dt = (time.perf_counter_ns() - t0) / batch
                    if r:
                        samples_b.append(dt)
                        accepted_total += accepted
                else:
                    single(now_ms)
                    dt = (time.perf_counter_ns() - t0) / single_n
                    if r:
                        samples_s.append(dt)
        assert len(t_batch) == n and t_batch.evictions == 0 and t_batch.expirations == 0
        kb, ks = summarise(samples_b), summarise(samples_s)
        kb.update(batch=batch, live_instances=n, accepted_fraction=accepted_total / (batch * rounds))
        ks.update(calls_per_round=single_n, live_instances=n)
        bench.add_row(
            G,
            f"decide-pushes-{n}",
            f"limiter decisions in batch (decide_pushes), {n:,} live instances",
            kb,
            ks,
            "single try_push calls",
            goal={"kind": "rate", "value": 5e6, "text": "≥ 5 M/s"},
            unit="rate",
            note="peer column: the same decisions one Python call each (no external peer)",
        )
        rates_batch.append(1e9 / kb["median"])
        rates_single.append(1e9 / ks["median"])
        per = t_batch.memory_bytes() / n
        bytes_per.append(per)
        bench.log(f"[{G}] {n:,} live instances: {per:.1f} B/instance (memory_bytes)")
        if n == sizes[-1]:
            bench.add_row(
                G,
                f"memory-{n}",
                f"memory per live instance at {n:,} (memory_bytes()/n)",
                {
                    "value": per,
                    "memory_bytes": t_batch.memory_bytes(),
                    "live_instances": n,
                    "entry_struct_bytes": type(t_batch).entry_size(),
                },
                unit="bytes",
                goal={"kind": "max_bytes", "value": 128, "text": "≤ 128 B"},
            )
        del t_batch, t_single, pool, picks, ids, sids, out, s_picks, s_sids
    bench.curve(
        "limiter",
        "Limiter: decisions/s vs live instances",
        "live instances",
        "decisions per second",
        sizes,
        {"decide_pushes (batch)": rates_batch, "single try_push calls": rates_single},
        bytes_per_instance=bytes_per,
        goal_rate=5e6,
        goal_bytes=128,
    )

    # (d) batch-size scaling at 100k live instances: each call takes the next batch of a stream of
    # random pushes (so small batches do not replay the same few, cache-hot instances)
    n = 100_000
    t, raw = _fill(n)
    pool = [raw[16 * k : 16 * k + 16] for k in range(n)]
    rng = random.Random(7)
    stream = 200_000
    picks = rng.choices(pool, k=stream)
    now_ms = T0 + INTERVAL  # the first push of each instance is due, repeats are throttled
    # memoryviews (the _v names): each batch below is a slice of the stream, not a copy
    ids_v = memoryview(b"".join(picks))
    sids_v = memoryview(array.array("i", [CRC_BASE ^ java_uuid_hash(p) for p in picks]))
    nows = memoryview(array.array("q", [now_ms]) * stream)
    term_v = memoryview(bytes(stream))
    ctypes_v = memoryview(array.array("b", [4]) * stream)
    wsizes_v = memoryview(array.array("i", [900]) * stream)
    bsizes = [1, 10, 100, 1_000, 10_000, 100_000]
    dp = functools.partial(
        t.decide_pushes, subscription_version=0, crc_base=CRC_BASE, push_interval_ms=INTERVAL, telemetry_max_bytes=maxb
    )

    def batched(b: int):
        out = array.array("h", bytes(2 * b))
        argsets = itertools.cycle(
            [
                (
                    ids_v[16 * i : 16 * (i + b)],
                    nows[i : i + b],
                    sids_v[i : i + b],
                    term_v[i : i + b],
                    ctypes_v[i : i + b],
                    wsizes_v[i : i + b],
                    out,
                )
                for i in range(0, stream, b)
            ]
        )

        def call():
            return dp(*next(argsets))

        return call

    contenders = [(batched(b), ()) for b in bsizes]
    per_call = list(bsizes)
    s_picks, s_sids = picks[:10_000], list(sids_v[:10_000])
    try_push = t.try_push
    chunks = itertools.cycle(range(0, 10_000, 1_000))

    def single_1000():
        i = next(chunks)
        for cid, sid in zip(s_picks[i : i + 1_000], s_sids[i : i + 1_000]):
            try_push(cid, now_ms, 0, sid, False, 4, 900, maxb)

    contenders.append((single_1000, ()))
    per_call.append(1_000)
    st = interleaved(contenders, 5 if bench.quick else 15, per_call=per_call)
    ns_batch = [s["median"] for s in st[:-1]]
    for b, ns in zip(bsizes, ns_batch):
        bench.log(f"[{G}] batch of {b:,}: {fmt_ns(ns)} per decision ({fmt_rate(1e9 / ns)})")
    bench.log(f"[{G}] single try_push calls: {fmt_ns(st[-1]['median'])} per decision")
    bench.curve(
        "batch",
        "decide_pushes: cost per decision vs batch size (100k live instances)",
        "batch size",
        "ns per decision",
        bsizes,
        {"decide_pushes (one call per batch)": ns_batch, "single try_push calls": [st[-1]["median"]] * len(bsizes)},
        details=st,
    )
