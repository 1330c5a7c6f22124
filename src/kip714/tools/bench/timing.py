"""How ``kip714 bench`` times: alternating rounds of inner loops sized to about 1 ms, medians over rounds.

* kip714 and its peer are measured in **alternating rounds** (kip714, peer, peer, kip714, …) so that noise
  from other processes on these small machines hits both alike; each number is the **median** over
  rounds, and the ratio is peer median / kip714 median (> 1: kip714 is faster).
* A round is an inner loop sized to about 1 ms (``time.perf_counter_ns`` around ``for _ in repeat(None, n):
  f(*args)``), so sub-microsecond calls are not dominated by the timer. Both sides pay the same loop
  overhead (~10 ns), which only lowers kip714's ratios. The garbage collector is off while timing, as in
  ``timeit``.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any

__all__ = ["inner_loop_size", "interleaved", "settle_allocator", "summarise"]

#: What is timed: a callable and the positional arguments of each call.
Contender = tuple[Callable[..., object], tuple[object, ...]]
#: A measurement as rows hold it and the JSON result writes it: statistics of ns per operation ("median",
#: "min", "max", "q1", "q3", "mean", "rounds", from :func:`summarise`) or ``{"value": ...}``, plus what the
#: timing or the group adds ("calls_per_round", "paired_ratio_median" which may be None, "samples", ...).
Summary = dict[str, Any]


def _loop_ns(f: Callable[..., object], args: tuple[object, ...], n: int) -> int:
    it = repeat(None, n)
    t0 = time.perf_counter_ns()
    for _ in it:
        f(*args)
    return time.perf_counter_ns() - t0


def inner_loop_size(f: Callable[..., object], args: tuple[object, ...] = (), target_ns: int = 1_000_000) -> int:
    """Calls per round so that a round lasts about ``target_ns`` (1 for calls slower than that)."""
    f(*args)  # warm up (lazy imports, caches)
    n = 1
    while True:
        dt = _loop_ns(f, args, n)
        if dt >= target_ns // 8 or n >= 1 << 22:
            break
        n *= 8 if dt < target_ns // 64 else 2
    return max(1, round(target_ns * n / max(dt, 1)))


def summarise(samples: Sequence[float]) -> Summary:
    """Summary of per-operation samples (ns)."""
    s = sorted(samples)
    q = statistics.quantiles(s, n=4) if len(s) >= 2 else [s[0]] * 3
    return {
        "median": statistics.median(s),
        "min": s[0],
        "max": s[-1],
        "q1": q[0],
        "q3": q[2],
        "mean": statistics.fmean(s),
        "rounds": len(s),
    }


def interleaved(
    contenders: Sequence[Contender],
    rounds: int,
    target_ns: int = 1_000_000,
    budget_s: float | None = None,
    min_rounds: int = 3,
    per_call: Sequence[float] | None = None,
) -> list[Summary]:
    """Time each ``(f, args)`` in alternating rounds (order reversed every other round); returns one summary
    per contender, in ns per call (divided by ``per_call[i]`` when given, e.g. decisions per call).

    ``budget_s`` caps the rounds so that slow calls (several ms each) do not run for minutes."""
    inners = [inner_loop_size(f, a, target_ns) for f, a in contenders]
    if budget_s is not None:
        est = sum(_loop_ns(f, a, n) for (f, a), n in zip(contenders, inners)) / 1e9
        rounds = max(min_rounds, min(rounds, int(budget_s / max(est, 1e-9))))
    samples: list[list[float]] = [[] for _ in contenders]
    order = list(range(len(contenders)))
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            for i in order if r % 2 == 0 else order[::-1]:
                f, a = contenders[i]
                samples[i].append(_loop_ns(f, a, inners[i]) / inners[i])
    finally:
        if enabled:
            gc.enable()
    out: list[Summary] = []
    for i, s in enumerate(samples):
        div = per_call[i] if per_call else 1
        summ = summarise([x / div for x in s])
        summ["calls_per_round"] = inners[i]
        if per_call:
            summ["ops_per_call"] = div
        out.append(summ)
    if len(out) == 2:  # a paired view: ratio of the two rounds that ran next to each other
        paired = [b / a for a, b in zip(samples[0], samples[1]) if a > 0]
        out[0]["paired_ratio_median"] = statistics.median(paired) if paired else None
    return out


def settle_allocator() -> None:
    """Put glibc's malloc in its steady state before timing. Its mmap threshold starts at 128 KiB and rises
    to the size of the largest mmapped block freed so far (up to 32 MiB): until a process has freed one big
    buffer, every output buffer above 128 KiB (zstandard's ``max_output_size`` of 1 MiB, zlib's growing
    buffers) is a fresh mmap with page faults, several times slower, and which side pays depends on what ran
    before. Allocating and freeing one 4 MiB block gives every group the state any long-running process
    reaches, whatever ran before it."""
    block = bytearray(4 << 20)
    block[::4096] = b"\x01" * len(block[::4096])
    del block
