"""The Python workers of ``kip714 report``: the ``mapInArrow`` functions that decode a partition's pushes (or
read a points table) and hand each complete client instance to :func:`~kip714.spark.report_points.aggregate`.

The input is partitioned by client instance and sorted by it, so an instance's rows are contiguous: every
instance before the last one of an input batch is complete and reduced at once; the last one's rows wait for
the next batch (memory: one input batch and one instance)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..sinks.recorder import record_schema
from .decode import (
    DEFAULT_MAX_OUTPUT,
    ERROR,
    ERROR_CODE,
    ERROR_STAGE,
    _ArrowMapper,
    _Budget,
    _decode_payload_batches,
    _Output,
    points_schema,
)
from .report_points import FACT_COLUMNS, PUSH_COLUMNS, Rules, aggregate

__all__ = ["points_worker", "recording_worker"]

#: (points, pushes, last instance id of the input batch they came from): what :func:`_by_instance` reduces.
_Tables = tuple[pa.Table, pa.Table, "str | None"]


def _record_schema() -> pa.Schema:
    """The recording's schema (the recording columns keep their own types here)."""
    schema: pa.Schema = record_schema()
    return schema


def _tail_cut(ids: pa.ChunkedArray, last: str | None) -> int:
    """Where the rows of instance ``last`` start in ``ids`` (they are its tail: the input is sorted)."""
    ends = pc.fill_null(pc.equal(ids, last), False)
    cut = len(ids) - int(pc.sum(ends).as_py() or 0)
    if 0 < cut < len(ids) and not pc.all(ends.slice(cut)).as_py():
        raise AssertionError("report worker: input not sorted by client instance")
    return cut


def _by_instance(tables: Iterator[_Tables], rules: Rules, distinct_pushes: bool = False) -> Iterator[pa.RecordBatch]:
    """Reduce a stream sorted by instance: ``tables`` yields (points, pushes, last instance id of the
    input batch they came from); every instance before that id is complete. The rows of the last instance
    wait for the next input batch (memory: one input batch and one instance). ``distinct_pushes``: the
    push rows repeat (one per point of a points table) and are made distinct first."""
    held_points: list[pa.Table] = []
    held_pushes: list[pa.Table] = []
    for points, pushes, last in tables:
        # both are in input order, so the last instance's rows are their tails: slices, no copies
        cut_pt = _tail_cut(points.column("client_instance_id"), last)
        cut_pu = _tail_cut(pushes.column("client_instance_id"), last)
        if cut_pt or cut_pu:
            done_points = pa.concat_tables([*held_points, points.slice(0, cut_pt)])
            done_pushes = pa.concat_tables([*held_pushes, pushes.slice(0, cut_pu)])
            held_points, held_pushes = [], []
            yield from aggregate(done_points, done_pushes, rules, distinct_pushes).to_batches()
        held_points.append(points.slice(cut_pt))
        held_pushes.append(pushes.slice(cut_pu))
    if held_points:
        rest_points, rest_pushes = pa.concat_tables(held_points), pa.concat_tables(held_pushes)
        if rest_points.num_rows or rest_pushes.num_rows:
            yield from aggregate(rest_points, rest_pushes, rules, distinct_pushes).to_batches()


def _fact_table(batch: pa.RecordBatch, payload_bytes: pa.Array, decode_error: pa.Array) -> pa.Table:
    """The pushes of ``batch`` as :func:`aggregate` reads them (the recording's own types)."""
    rec = _record_schema()
    arrays: list[pa.Array] = []
    names: list[str] = []
    for name in FACT_COLUMNS:
        field = rec.field("error_code" if name == "push_error_code" else name)
        col = batch.column(name) if name in batch.schema.names else pa.nulls(batch.num_rows, field.type)
        arrays.append(col.cast(field.type))
        names.append(name)
    return pa.Table.from_arrays(arrays + [payload_bytes, decode_error], names=names + ["payload_bytes", "decode_error"])


def recording_worker(rules: Rules, max_output: int = DEFAULT_MAX_OUTPUT) -> _ArrowMapper:
    """The mapInArrow function over recording rows (:data:`FACT_COLUMNS`, ``payload``; partitioned by client
    instance, sorted by it): decode the payloads and hand back the :data:`OUT_SCHEMA` rows."""
    rec = _record_schema()
    carry = [rec.field(name) for name in PUSH_COLUMNS]  # the recording's own types (node_id is a string)
    row = pa.field("_push_row", pa.int64())  # which push a point or an error came from
    schema = pa.schema(
        list(points_schema())
        + carry
        + [
            row,
            rec.field("payload"),
            pa.field(ERROR_CODE, pa.int16()),
            pa.field(ERROR, pa.string()),
            pa.field(ERROR_STAGE, pa.string()),
        ]
    )
    keep = [f.name for f in schema if f.name not in ("payload",)]

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        def decoded() -> Iterator[_Tables]:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                n = batch.num_rows
                src = pa.RecordBatch.from_arrays(
                    [batch.column(f.name).cast(f.type) for f in carry]
                    + [pa.array(np.arange(n, dtype=np.int64))]
                    + [batch.column("payload"), batch.column("compression_type")],
                    names=[f.name for f in carry] + [row.name, "payload", "compression_type"],
                )
                outs = list(
                    _decode_payload_batches(
                        iter([src]), "payload", "compression_type", max_output, _Output(schema, _Budget())
                    )
                )
                table = (
                    pa.Table.from_batches(outs, schema=schema).select(keep)
                    if outs
                    else schema.empty_table().select(keep)
                )
                reasons: list[str | None] = [None] * n
                failed = pc.is_valid(table.column(ERROR_CODE))
                if pc.any(failed).as_py():
                    bad = table.filter(failed)
                    for i, why in zip(bad.column(row.name).to_pylist(), bad.column(ERROR).to_pylist()):
                        reasons[i] = why
                    table = table.filter(pc.invert(failed))
                pushes = _fact_table(
                    batch, pc.binary_length(batch.column("payload")).cast(pa.int64()), pa.array(reasons, pa.string())
                )
                yield table, pushes, batch.column("client_instance_id")[n - 1].as_py()

        yield from _by_instance(decoded(), rules)

    return run


def points_worker(rules: Rules) -> _ArrowMapper:
    """The mapInArrow function over a points table (``kip714 pipeline`` output) with its ``errors/`` rows
    (``decode_error`` set, ``payload_bytes``), partitioned by client instance and sorted by it: the
    :data:`OUT_SCHEMA` rows. A push is the distinct :data:`~kip714.spark.report_points.PUSH_KEY` (instance,
    replica, node, receive time, terminating) of its rows."""
    names = list(points_schema().names) + list(PUSH_COLUMNS)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        def tables() -> Iterator[_Tables]:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                table = pa.Table.from_batches([batch])
                is_error = pc.is_valid(table.column("decode_error"))
                points = table.filter(pc.invert(is_error)).select([c for c in names if c in batch.schema.names])
                pushes = _fact_table(
                    batch,
                    batch.column("payload_bytes").cast(pa.int64()),
                    batch.column("decode_error").cast(pa.string()),
                )
                yield points, pushes, batch.column("client_instance_id")[batch.num_rows - 1].as_py()

        yield from _by_instance(tables(), rules, distinct_pushes=True)

    return run
