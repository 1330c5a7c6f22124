"""The Spark jobs of the ``spark`` and ``pipeline-scale`` groups: the input DataFrame, kip714's decode and
the protobuf-based peer (``mapInArrow`` whose Python function decompresses with the codec package and
flattens with protobuf + Python, :mod:`kip714.otlp.reference`), and the noop sink that materialises them.

Module level, and light to import, so that Spark's Python workers import these functions by name (kip714
must be importable there)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import kip714

from .payloads import KB, LIMIT, otlp_like

__all__ = [
    "protobuf_mapper",
    "recording_peer_schema",
    "recording_protobuf_mapper",
    "run_noop",
    "spark_input",
    "spark_kip714",
    "spark_peer",
]


def spark_input(spark: Any, k: int, distinct: int = 16) -> tuple[Any, int, int, int]:
    """K rows (id, compression_type, payload) of zstd-compressed ~100 KB OTLP MetricsData (``distinct``
    different payloads, cycled), in 2 partitions, cached and materialised. Returns (df, points, otlp bytes,
    compressed bytes)."""
    from kip714 import _otlp

    raws = [otlp_like(100 * KB, seed=1000 + i) for i in range(min(k, distinct))]
    packed = [kip714.compress(r, 4) for r in raws]
    points = [_otlp.decode_metrics(r).num_rows for r in raws]
    rows = [(i, 4, packed[i % len(packed)]) for i in range(k)]
    df = spark.createDataFrame(rows, "id long, compression_type byte, payload binary").repartition(2).cache()
    assert df.count() == k
    total_points = sum(points[i % len(points)] for i in range(k))
    return (
        df,
        total_points,
        sum(len(raws[i % len(raws)]) for i in range(k)),
        sum(len(packed[i % len(packed)]) for i in range(k)),
    )


def spark_kip714(df: Any, combined: bool = False) -> Any:
    """kip714's side: ``decode_payloads(df).points`` (``.combined`` with ``combined=True``)."""
    from kip714 import spark as kspark

    res = kspark.decode_payloads(df)
    return res.combined if combined else res.points


def _peer_schema() -> Any:
    import pyarrow as pa

    from kip714 import _otlp

    return pa.schema(
        list(_otlp.output_schema()) + [pa.field("id", pa.int64()), pa.field("compression_type", pa.int8())]
    )


def protobuf_mapper(batches: Iterator[Any]) -> Iterator[Any]:
    """The protobuf-based decoder as a mapInArrow function: the direct codec call, protobuf (upb) parsing and
    Python flattening (kip714.otlp.reference.flatten), columns built per batch (pa.RecordBatch.from_pydict: the
    fastest way to Arrow from rows measured here). Only zstd and uncompressed rows are handled."""
    import pyarrow as pa
    import zstandard

    from kip714.otlp.reference import flatten
    from kip714.otlp.schema import COLUMNS

    schema = _peer_schema()
    dctx = zstandard.ZstdDecompressor()
    for batch in batches:
        cols: dict[str, list[object]] = {name: [] for name in COLUMNS}
        ids, ctypes = [], []
        for rid, ctype, payload in zip(
            batch.column("id").to_pylist(),
            batch.column("compression_type").to_pylist(),
            batch.column("payload").to_pylist(),
        ):
            raw = dctx.decompress(payload, max_output_size=LIMIT) if ctype == 4 else payload
            rows = flatten(raw)
            for name in COLUMNS:
                cols[name].extend([r[name] for r in rows])
            ids.extend([rid] * len(rows))
            ctypes.extend([ctype] * len(rows))
        cols["id"] = ids
        cols["compression_type"] = ctypes
        yield pa.RecordBatch.from_pydict(cols, schema=schema)


def spark_peer(df: Any) -> Any:
    """The peer's side: :func:`protobuf_mapper` over ``df`` with ``mapInArrow``."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return df.mapInArrow(protobuf_mapper, from_arrow_schema(_peer_schema()))


def recording_peer_schema(df: Any) -> Any:
    """The peer's output on a recording: the point columns, then the recording's other columns."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    from kip714 import _otlp

    return pa.schema(
        list(_otlp.output_schema())
        + [pa.field(f.name, to_arrow_type(f.dataType)) for f in df.schema.fields if f.name != "payload"]
    )


def recording_protobuf_mapper(batches: Iterator[Any], carry: list[str], schema: Any) -> Iterator[Any]:
    """:func:`protobuf_mapper` on a recording: the recording's columns (``carry``) repeated onto every point,
    one output batch per input batch (the straightforward way)."""
    import pyarrow as pa
    import zstandard

    from kip714.otlp.reference import flatten
    from kip714.otlp.schema import COLUMNS

    dctx = zstandard.ZstdDecompressor()
    for batch in batches:
        cols: dict[str, list[object]] = {name: [] for name in list(COLUMNS) + list(carry)}
        payloads = batch.column("payload").to_pylist()
        carried = [batch.column(c).to_pylist() for c in carry]
        for i, (ctype, payload) in enumerate(zip(batch.column("compression_type").to_pylist(), payloads)):
            raw = dctx.decompress(payload, max_output_size=LIMIT) if ctype == 4 else payload
            rows = flatten(raw)
            for name in COLUMNS:
                cols[name].extend([r[name] for r in rows])
            for name, values in zip(carry, carried):
                cols[name].extend([values[i]] * len(rows))
        yield pa.RecordBatch.from_pydict(cols, schema=schema)


def run_noop(out_df: Any) -> float:
    """Materialise a DataFrame with the noop sink; wall seconds."""
    t0 = time.perf_counter()
    out_df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0
