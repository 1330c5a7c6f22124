"""The pytest-benchmark front-end of ``kip714 bench`` (see test_bench.py)."""

import time

import pytest


@pytest.fixture
def measure(benchmark):
    """benchmark(fn, *args) with an inner loop, so that sub-microsecond calls are not dominated by the
    harness's per-round timer overhead. Every contender in a group is measured the same way."""

    def run(fn, *args, iterations=None, **kwargs):
        fn(*args, **kwargs)  # warm up, and size the loop to ~0.2 ms per round
        t0 = time.perf_counter()
        for _ in range(20):
            fn(*args, **kwargs)
        per_call = max((time.perf_counter() - t0) / 20, 1e-8)
        n = iterations or max(1, min(20000, int(2e-4 / per_call)))
        return benchmark.pedantic(fn, args=args, kwargs=kwargs, iterations=n, rounds=30, warmup_rounds=1)

    return run
