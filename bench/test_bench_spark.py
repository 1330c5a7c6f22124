"""Spark bulk decode on local[2]: kip714.spark.decode_payloads against the best protobuf-based approach.

Goal (issue 7): >= 3x a protobuf-based Spark UDF on the same data. The peer is ``mapInArrow`` whose Python
function decompresses with zstandard and flattens with protobuf (upb) + Python (``kip714.otlp.reference.flatten``),
building the same columns with ``pa.RecordBatch.from_pydict`` (docs/reference/python-ecosystem.md §C: the table-generating
Arrow APIs are the fastest protobuf-based route). Both read the same cached input DataFrame of K rows, each a
zstd-compressed ~100 KB OTLP MetricsData, and are materialised with ``write.format("noop")``. The first run of
each pays for Python worker start-up, so one warm-up round runs before the two measured rounds.

Run: ``python -m pytest bench/test_bench_spark.py --benchmark-only --benchmark-columns=min,median,max``
(``KIP714_BENCH_SPARK_ROWS`` changes K, default 400). ``kip714 bench --only spark`` measures the same
thing with kip714 and the peer interleaved.
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("zstandard")

from kip714.tools import bench as kbench

K = int(os.environ.get("KIP714_BENCH_SPARK_ROWS", "400"))


@pytest.fixture(scope="module")
def spark():
    from kip714.spark import local_session

    session = local_session("local[2]", app_name="kip714-bench-spark", partitions=2)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def captures(spark):
    df, points, otlp_bytes, packed_bytes = kbench.spark_input(spark, K)
    yield df, points, otlp_bytes, packed_bytes
    df.unpersist()


PLANS = {
    "kip714-decode_payloads-points": lambda df: kbench.spark_kip714(df),
    "kip714-decode_payloads-combined": lambda df: kbench.spark_kip714(df, combined=True),
    "protobuf-mapInArrow": kbench.spark_peer,
}


@pytest.mark.parametrize("impl", list(PLANS))
def test_spark_bulk_decode(benchmark, captures, impl):
    benchmark.group = f"spark-local2-decode-{K}-rows"
    df, points, otlp_bytes, packed_bytes = captures
    out = PLANS[impl](df)
    assert out.count() == points  # same number of points on both sides
    benchmark.pedantic(kbench.run_noop, args=(out,), rounds=2, warmup_rounds=1, iterations=1)
    benchmark.extra_info.update(
        input_rows=K,
        points=points,
        otlp_bytes=otlp_bytes,
        compressed_bytes=packed_bytes,
        krows_per_s=round(points / benchmark.stats.stats.min / 1e3, 1),
    )
