"""The random processes behind the simulated numbers: counts with a given mean, log-normal draws, levels
that drift (mean-reverting in log space), on/off episodes, and the fleet-wide broker incidents every client
sees at the same time. Each takes the caller's seeded ``random.Random``, so a seed replays a fleet."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

__all__ = ["Bursts", "Incidents", "LogOU", "lognormal", "poisson", "random_count"]


def poisson(rng: random.Random, lam: float) -> int:
    if lam <= 0:
        return 0
    if lam > 30:
        return max(0, round(rng.gauss(lam, math.sqrt(lam))))
    limit, k, p = math.exp(-lam), 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


def lognormal(rng: random.Random, median: float, sigma: float) -> float:
    return median * math.exp(rng.gauss(0.0, sigma))


def random_count(rng: random.Random, expected: float) -> int:
    """An integer with the given expectation (floor plus a Bernoulli remainder)."""
    base = math.floor(expected)
    return int(base) + (rng.random() < expected - base)


class LogOU:
    """A level that drifts: an Ornstein–Uhlenbeck process in log space (mean-reverting to ``median``)."""

    __slots__ = ("mu", "sigma", "tau", "x")

    def __init__(self, rng: random.Random, median: float, sigma: float, tau_ms: float) -> None:
        self.mu = math.log(median)
        self.sigma = sigma
        self.tau = tau_ms
        self.x = self.mu + rng.gauss(0.0, sigma)

    def step(self, rng: random.Random, dt_ms: float) -> float:
        a = math.exp(-max(dt_ms, 0.0) / self.tau)
        self.x = self.mu + (self.x - self.mu) * a + self.sigma * math.sqrt(max(0.0, 1.0 - a * a)) * rng.gauss(0, 1)
        return math.exp(self.x)


class Bursts:
    """On/off episodes (exponential gaps and lengths); ``overlap(t0, t1)`` is the covered share of a window."""

    __slots__ = ("end", "gap", "length", "rng", "start")

    def __init__(self, rng: random.Random, mean_gap_ms: float, mean_len_ms: float, from_ms: int) -> None:
        self.rng, self.gap, self.length = rng, mean_gap_ms, mean_len_ms
        self.start = from_ms + rng.expovariate(1.0 / mean_gap_ms)
        self.end = self.start + rng.expovariate(1.0 / mean_len_ms)

    def overlap(self, t0: float, t1: float) -> float:
        while self.end <= t0:
            self.start = self.end + self.rng.expovariate(1.0 / self.gap)
            self.end = self.start + self.rng.expovariate(1.0 / self.length)
        if self.start >= t1 or t1 <= t0:
            return 0.0
        return (min(self.end, t1) - max(self.start, t0)) / (t1 - t0)


class Incidents:
    """Fleet-wide broker incidents: every client sees node ``n`` slow during the same episodes."""

    def __init__(
        self,
        seed: Any,
        nodes: Sequence[int],
        from_ms: int,
        mean_gap_ms: float = 45 * 60_000,
        mean_len_ms: float = 150_000,
    ) -> None:
        self._bursts = {}
        self._mult = {}
        for n in nodes:
            rng = random.Random(f"{seed}:incident:{n}")
            self._bursts[n] = Bursts(rng, mean_gap_ms, mean_len_ms, from_ms)
            self._mult[n] = rng
        self._level: dict[tuple[int, float], float] = {}

    def factor(self, node: int, t0: float, t1: float) -> float:
        b = self._bursts.get(node)
        if b is None:
            return 1.0
        share = b.overlap(t0, t1)
        if share <= 0.0:
            return 1.0
        key = (node, b.start)
        level = self._level.get(key)
        if level is None:
            if len(self._level) > 4096:
                self._level.clear()
            level = self._level[key] = 2.0 + lognormal(self._mult[node], 3.0, 0.5)
        return 1.0 + (level - 1.0) * share
