"""``make bench``: every table row of ``kip714 bench`` under pytest-benchmark, kip714 and its peer side by side.

One harness: the cases come from :class:`kip714.tools.bench.Bench` in collect mode (the same inputs,
callables and peers as ``kip714 bench``); pytest-benchmark times each contender with the inner loop of
``conftest.measure`` and groups the pair under the row's id. The Spark group has its own module
(``test_bench_spark.py``); curves and plots are ``kip714 bench --plot``'s.

Run: ``python -m pytest bench --benchmark-only`` (``KIP714_BENCH_GROUPS=codec,otlp`` for some groups).
"""

from __future__ import annotations

import io
import os

import pytest

from kip714.tools.bench import GROUPS, Bench

_GROUPS = [g for g in os.environ.get("KIP714_BENCH_GROUPS", ",".join(GROUPS)).split(",") if g and g != "spark"]


def _collect():
    bench = Bench(groups=_GROUPS, log=io.StringIO(), collect=True)
    bench.run()
    if bench.errors:
        raise RuntimeError("collecting the benchmark cases failed: " + "; ".join(e["error"] for e in bench.errors))
    return bench.cases


CASES = _collect()
PARAMS = [
    pytest.param(case, side, id=f"{case.key}-{side}")
    for case in CASES
    for side in ("kip714", "peer")
    if side == "kip714" or case.peer is not None
]


@pytest.mark.parametrize("case,side", PARAMS)
def test_bench(case, side, measure, benchmark):
    benchmark.group = f"{case.group}: {case.operation}"
    if side == "kip714":
        f, args = case.kip714
        benchmark.name = "kip714"
    else:
        name, f, args = case.peer
        benchmark.name = name
    measure(f, *args)
