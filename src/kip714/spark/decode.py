"""Bulk decoding of KIP-714 telemetry on Apache Spark (PySpark ≥ 4.1), on local Spark or any cluster.

The heavy lifting runs on the executors in kip714's native code: frames are split and decoded, payloads
decompressed, and OTLP ``MetricsData`` walked straight into Arrow columns. Spark receives those columns
through the Arrow paths that let one input row become many output rows: ``mapInArrow`` for the DataFrame
API and an Arrow Python UDTF for SQL.

- :func:`decode_payloads` — recorded rows (the ``kip714 serve --record`` schema: ``payload`` and
  ``compression_type`` plus label columns) → one row per data point, the other input columns carried along.
- :func:`decode_frames` — PushTelemetry request frames (size-prefixed, several per value, or bare) → points,
  with the request's header fields.
- :func:`register` — SQL: the table function ``kip714_points(TABLE(...))`` and vectorised scalar functions
  ``kip714_decompress``, ``kip714_payload_error``, ``kip714_frame_header``, ``kip714_subscription_id`` and
  ``kip714_metric_name``.

Both decoders return a :class:`DecodeResult`: ``points`` and ``errors`` DataFrames split from one pass.
Rows that cannot be decoded are never dropped and never fail the job: they appear in ``errors`` with the
source columns, the input bytes, the Kafka error code a broker would answer with and the reason.
Call ``result.persist()`` before using both halves, so the input is decoded once.

On a cluster, every executor needs kip714 installed (``pip install kip714`` on the nodes, or ship a packed
virtual environment with ``spark-submit --archives venv.tar.gz#venv`` and
``spark.pyspark.python=./venv/bin/python``): it contains compiled extensions, so ``--py-files`` is not
enough.
"""

import os
import pathlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import pyarrow as pa

from .. import _otlp
from .._codec import decompress
from .._enums import DEFAULT_TELEMETRY_MAX_BYTES, ApiKey, ErrorCode
from .._extras import require
from .._protocol import PushTelemetryRequest, decode_request, split_frames
from ..broker.subscriptions import kafka_uuid_string
from ..errors import Kip714Error, MalformedFrameError
from ..sinks.recorder import LABEL_COLUMNS, record_schema

if TYPE_CHECKING:  # pyspark is the spark extra: imported by the functions that need it
    from pyspark import Accumulator, StorageLevel
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql._typing import UserDefinedFunctionLike
    from pyspark.sql.types import StructType
    from pyspark.sql.udtf import UserDefinedTableFunction

#: Told the number of inputs a points-only pass could not decode (an accumulator's ``add``).
_ErrorCallback = Callable[[int], object]
#: A mapInArrow function: Arrow batches in, Arrow batches out.
_ArrowMapper = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
#: An input row that could not be decoded: (row in its chunk, Kafka error code, reason, stage).
_ErrorRow = tuple[int, int, str, str]
#: A frame's header fields copied onto its points (:data:`FRAME_COLUMNS`).
_FrameMeta = tuple[str | None, int, str, int, bool, int]

__all__ = [
    "DecodeResult",
    "decode_payloads",
    "decode_frames",
    "read_recording_df",
    "recording_paths",
    "register",
    "points_schema",
    "DEFAULT_MAX_OUTPUT",
    "MAX_BATCH_ROWS",
    "MAX_BATCH_BYTES",
]

#: Largest decompressed payload accepted per row (Kafka's default telemetry.max.bytes).
_INVALID_RECORD = int(ErrorCode.INVALID_RECORD)
_INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
DEFAULT_MAX_OUTPUT = DEFAULT_TELEMETRY_MAX_BYTES
ERROR_CODE, ERROR, ERROR_STAGE = "error_code", "error", "error_stage"
#: API keys a bare (unprefixed) frame may start with: the requests kip714 decodes.
_BARE_KEYS = frozenset(
    int(k) for k in (ApiKey.METADATA, ApiKey.API_VERSIONS, ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY)
)
#: A recording's ``error_code`` (the broker's answer to the push) is output under this name.
PUSH_ERROR_CODE = "push_error_code"
FRAME_COLUMNS = (
    "client_id",
    "correlation_id",
    "client_instance_id",
    "subscription_id",
    "terminating",
    "compression_type",
)


class DecodeResult(NamedTuple):
    """``points`` (one row per data point), ``errors`` (inputs that could not be decoded) and ``combined``
    (both in one decoding pass; error rows have ``error_code`` set). ``points`` is its own pass whose
    workers hand Spark the point rows and columns only (no filter and projection in the JVM); ``errors``
    reads ``combined``. To decode once and read both, use the result :meth:`persist` returns."""

    points: "DataFrame"
    errors: "DataFrame"
    combined: "DataFrame"

    def persist(self, storage_level: "StorageLevel | None" = None) -> "DecodeResult":
        """Cache ``combined`` and return a result whose ``points`` and ``errors`` are read from it (one
        decoding pass for both). Use the returned result: this one's ``points`` still decode on their own."""
        combined = self.combined.persist() if storage_level is None else self.combined.persist(storage_level)
        return self._replace(points=_points_of(combined), combined=combined)

    def unpersist(self) -> "DecodeResult":
        self.combined.unpersist()
        return self


def _points_of(combined: "DataFrame") -> "DataFrame":
    """The point rows and columns of a ``combined`` DataFrame: every column before the input column (which
    comes just before ``error_code``, see :func:`_combined_arrow_schema`)."""
    from pyspark.sql import functions as F

    cols = combined.columns
    return combined.where(F.col(ERROR_CODE).isNull()).select(*cols[: cols.index(ERROR_CODE) - 1])


def points_schema() -> pa.Schema:
    """The Arrow schema of decoded points (the columns of :func:`kip714.decode_metrics`)."""
    return _otlp.output_schema()


def _to_spark_schema(schema: pa.Schema) -> "StructType":
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


#: One recording, a root of recordings (a fleet's ``ROOT/REPLICA`` folders) or several of either.
Recordings = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def _path_list(paths: Recordings) -> list[str]:
    return [os.fspath(paths)] if isinstance(paths, (str, os.PathLike)) else [os.fspath(p) for p in paths]


def recording_paths(paths: Recordings) -> list[str]:
    """The files of the recordings ``paths`` name: a recording folder, a root whose sub-folders are recordings
    (a fleet's ``ROOT/REPLICA`` folders: each replica records into its own), one of a recording's files, or
    several of them. For local folders, the files :func:`kip714.sinks.recorder.recordings_files` lists: the
    rolled files and the parts of the file being filled (``_open/``, which Spark's own listing skips, as it
    skips every ``_`` folder) — a live or killed endpoint's last rows included — each file once however often
    it is named (the same recording twice, a root with one of its own recordings); a recording with
    connection-closed rows only (clients that never pushed) has none. A URL (``hdfs://``, ``s3a://``…) names
    one recording or file, read as Spark lists it. FileNotFoundError when a path does not exist; ValueError
    when a local folder holds no recording (naming the folders below it that hold Parquet files)."""
    from ..sinks.recorder import recordings_files

    items = _path_list(paths)
    urls = list(dict.fromkeys(p for p in items if "://" in p))
    local = [p for p in items if "://" not in p]
    return urls + ([str(f) for f in recordings_files(local)] if local or not urls else [])


def read_recording_df(spark: "SparkSession", paths: Recordings) -> "DataFrame":
    """One or more recordings (``kip714 serve/proxy --record``; a fleet's root of them, see
    :func:`recording_paths`) as one Spark DataFrame in the recording schema (columns a recording by an older
    kip714 lacks are null: ``kip714_replica`` there), each push once. The parts of the file being filled
    (``_open/``) are read now, on the driver (they hold at most one roll interval): a live recorder merges and
    deletes them when it rolls, which would fail a Spark job that reads them later."""
    from ..sinks.recorder import OPEN_DIR, read_recording_files

    schema = _to_spark_schema(record_schema())
    files = recording_paths(paths)
    parts = [f for f in files if "://" not in f and pathlib.Path(f).parent.name == OPEN_DIR]
    rolled = [f for f in files if f not in parts]
    df = spark.read.schema(schema).parquet(*rolled) if rolled else None
    if parts or df is None:
        now = spark.createDataFrame(read_recording_files([pathlib.Path(f) for f in parts]), schema=schema)
        df = now if df is None else df.unionByName(now)
    return df


# ------------------------------------------------------------------------------ the Arrow workers


def _combined_arrow_schema(carry: pa.Schema, input_field: pa.Field, extra: Sequence[pa.Field] = ()) -> pa.Schema:
    fields = list(points_schema()) + list(extra) + list(carry)
    fields += [
        input_field,
        pa.field(ERROR_CODE, pa.int16()),
        pa.field(ERROR, pa.string()),
        pa.field(ERROR_STAGE, pa.string()),
    ]
    return pa.schema(fields)


def _assemble(
    schema: pa.Schema,
    points: pa.Table,
    src: pa.RecordBatch,
    rows: list[int],
    extra: Mapping[str, tuple[list[Any], list[None]]],
    errors: list[_ErrorRow],
    input_col: str,
) -> pa.RecordBatch:
    """One output batch: decoded points (with their source columns taken from ``src`` at ``rows``) followed
    by error rows (source columns, input bytes, error code, reason)."""
    n_points, n_err = points.num_rows, len(errors)
    point_names = set(points.column_names)
    idx = pa.array(rows, pa.int64())
    err_idx = pa.array([e[0] for e in errors], pa.int64())
    columns = []
    for field in schema:
        name = field.name
        if name in point_names and name not in src.schema.names:
            col = points.column(name).combine_chunks() if n_points else pa.array([], field.type)
            columns.append(pa.concat_arrays([col.cast(field.type), pa.nulls(n_err, field.type)]))
        elif name in extra:
            columns.append(
                pa.concat_arrays([pa.array(extra[name][0], field.type), pa.array(extra[name][1], field.type)])
            )
        elif name == input_col:
            taken = src.column(name).take(err_idx) if n_err else pa.array([], field.type)
            columns.append(pa.concat_arrays([pa.nulls(n_points, field.type), taken.cast(field.type)]))
        elif name == ERROR_CODE:
            columns.append(pa.array([None] * n_points + [e[1] for e in errors], pa.int16()))
        elif name == ERROR:
            columns.append(pa.array([None] * n_points + [e[2] for e in errors], pa.string()))
        elif name == ERROR_STAGE:
            columns.append(pa.array([None] * n_points + [e[3] for e in errors], pa.string()))
        else:  # a carried source column
            col = src.column(name)
            columns.append(pa.concat_arrays([col.take(idx), col.take(err_idx)]).cast(field.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


#: Bounds of every batch the decoders hand back to Spark, whatever the input partition holds: at most this
#: many rows and about this many bytes (Arrow buffer bytes). The JVM materialises each batch in full before it
#: reads a row of it, so an unbounded batch (all the points of an input batch of large payloads) is what ran
#: the driver out of heap at fleet scale (issue 18).
MAX_BATCH_ROWS = 1 << 16
MAX_BATCH_BYTES = 16 << 20


class _Budget:
    """How many decompressed payload bytes to decode together so that one chunk's output is about
    ``max_bytes``: learnt from the output bytes per input byte seen so far (attributes and carried columns
    are copied onto every point, so the ratio depends on the data). Chunks are then sliced to the bounds."""

    MIN_INPUT, MAX_INPUT = 64 << 10, 8 << 20

    def __init__(self, max_rows: int = MAX_BATCH_ROWS, max_bytes: int = MAX_BATCH_BYTES) -> None:
        self.max_rows, self.max_bytes = max(1, max_rows), max(1, max_bytes)
        self.ratio = 6.0  # first guess: Arrow bytes per OTLP byte for typical client telemetry

    def input_bytes(self) -> int:
        return int(min(max(self.max_bytes / self.ratio, self.MIN_INPUT), self.MAX_INPUT))

    def split(self, out: pa.RecordBatch, input_bytes: int) -> Iterator[pa.RecordBatch]:
        n, size = out.num_rows, out.nbytes
        if input_bytes > 0 and n:
            self.ratio = max(size / input_bytes, 0.01)
        pieces = max(1, -(-n // self.max_rows), -(-size // self.max_bytes))
        if pieces == 1:
            yield out
            return
        step = -(-n // pieces)
        for offset in range(0, n, step):
            yield out.slice(offset, step)


class _Output(NamedTuple):
    """What a worker yields: batches of ``schema``, each chunk's output cut to ``budget``'s bounds.
    ``emit_points=False`` yields the error rows only (the pipeline's errors pass). When ``schema`` has no
    ``error_code`` column (the points-only pass), error rows are not emitted: ``on_errors(n)`` is told how many
    there were."""

    schema: pa.Schema
    budget: _Budget
    emit_points: bool = True
    on_errors: _ErrorCallback | None = None


class _Chunk:
    """What a worker decodes together, from input row ``start`` of ``batch`` on: the decompressed payloads,
    each one's input row (counted from ``start``), the rows' errors and, for frames, each payload's header
    fields (:data:`FRAME_COLUMNS`, copied onto its points). :meth:`full` at the budget's
    :meth:`~_Budget.input_bytes` decompressed bytes, so memory does not depend on how many rows or bytes an
    input batch holds."""

    def __init__(self, out: _Output, batch: pa.RecordBatch, input_col: str, frames: bool = False) -> None:
        self.out, self.batch, self.input_col, self.frames = out, batch, input_col, frames
        self.restart(0)

    def restart(self, start: int) -> None:
        self.start, self.size = start, 0
        self.payloads: list[bytes] = []
        self.sources: list[int] = []
        self.errors: list[_ErrorRow] = []
        self.meta: list[_FrameMeta] | None = [] if self.frames else None
        self.limit = self.out.budget.input_bytes()

    def error(self, row: int, code: int, message: str, stage: str) -> None:
        self.errors.append((row - self.start, code, message, stage))

    def add(self, row: int, raw: bytes, meta: _FrameMeta | None = None) -> None:
        self.payloads.append(raw)
        self.sources.append(row - self.start)
        if self.meta is not None:
            assert meta is not None  # a frame's payload comes with its header fields
            self.meta.append(meta)
        self.size += len(raw)

    def full(self) -> bool:
        return self.size >= self.limit

    def pending(self) -> bool:
        return bool(self.payloads or self.errors)

    def decode(self, end: int | None = None) -> Iterator[pa.RecordBatch]:
        """Decode the chunk (input rows ``start`` up to ``end``; None: to the end of the batch) and yield its
        output batches, bounded by the budget."""
        out, payloads, sources, errors, meta = self.out, self.payloads, self.sources, self.errors, self.meta
        src = self.batch.slice(self.start) if end is None else self.batch.slice(self.start, end - self.start)
        table, bad = (
            _otlp.decode_metrics_batch(payloads, errors="collect") if payloads else (points_schema().empty_table(), [])
        )
        for index, code, message in bad:
            errors.append((sources[index], int(code), message, "decode"))
        errors.sort()
        if ERROR_CODE not in out.schema.names:
            if errors and out.on_errors is not None:
                out.on_errors(len(errors))
            errors = []
        if not out.emit_points:
            if not errors:
                return
            table = points_schema().empty_table()
        pidx = table.column("payload_index").to_numpy() if table.num_rows else []
        rows = [sources[k] for k in pidx]
        extra = (
            {}
            if meta is None
            else {name: ([meta[k][j] for k in pidx], [None] * len(errors)) for j, name in enumerate(FRAME_COLUMNS)}
        )
        yield from out.budget.split(_assemble(out.schema, table, src, rows, extra, errors, self.input_col), self.size)


def _decode_payload_batches(
    batches: Iterator[pa.RecordBatch],
    payload_col: str,
    compression_col: str | None,
    max_output: int,
    out: _Output,
) -> Iterator[pa.RecordBatch]:
    """The mapInArrow worker of :func:`decode_payloads`: input rows are decompressed and decoded in chunks
    (:class:`_Chunk`), and each chunk's output is cut to the budget's bounds."""
    for batch in batches:
        payloads = batch.column(payload_col).to_pylist()
        ctypes = batch.column(compression_col).to_pylist() if compression_col else [0] * len(payloads)
        chunk = _Chunk(out, batch, payload_col)
        for i, (data, ctype) in enumerate(zip(payloads, ctypes)):
            if data is None or ctype is None:
                chunk.error(i, _INVALID_RECORD, "null payload or compression type", "input")
            else:
                try:
                    raw = decompress(data, int(ctype), max_output) if data else b""
                except Kip714Error as exc:
                    chunk.error(i, int(exc.error_code), str(exc), "decompress")
                else:
                    chunk.add(i, raw)
            if chunk.full():
                yield from chunk.decode(i + 1)
                chunk.restart(i + 1)
        if chunk.pending():
            yield from chunk.decode()


def _decode_frame_batches(
    batches: Iterator[pa.RecordBatch], frame_col: str, max_output: int, out: _Output
) -> Iterator[pa.RecordBatch]:
    """The mapInArrow worker of :func:`decode_frames`, chunked and bounded as
    :func:`_decode_payload_batches` (a chunk may end inside a value holding many frames)."""
    for batch in batches:
        values = batch.column(frame_col).to_pylist()
        chunk = _Chunk(out, batch, frame_col, frames=True)
        for i, value in enumerate(values):
            if value is None:
                chunk.error(i, _INVALID_REQUEST, "null frame", "frame")
                continue
            try:
                for frame in _frames_of(value):
                    req = decode_request(frame)
                    body = req.body
                    if type(body) is not PushTelemetryRequest:
                        continue  # requests other than PushTelemetry carry no telemetry
                    metrics = body.metrics
                    raw = decompress(metrics, body.compression_type, max_output) if metrics else b""
                    meta = (
                        req.header.client_id,
                        req.correlation_id,
                        kafka_uuid_string(body.client_instance_id_bytes),
                        body.subscription_id,
                        body.terminating,
                        body.compression_type,
                    )
                    chunk.add(i, raw, meta)
                    if chunk.full():  # this value may hold more frames: the next chunk starts at it again
                        yield from chunk.decode(i + 1)
                        chunk.restart(i)
            except Kip714Error as exc:
                chunk.error(i, int(exc.error_code), str(exc), "frame")
        if chunk.pending():
            yield from chunk.decode()


def _frames_of(value: bytes) -> list[bytes]:
    """A value holding one or more size-prefixed frames, or one bare frame. A value that does not split
    into whole frames and does not start with an API key kip714 decodes is a cut size-prefixed frame:
    MalformedFrameError says so (rather than reading its size prefix as an API key)."""
    n = len(value)
    if n >= 4:
        size = int.from_bytes(value[:4], "big")
        consumed = 0
        if size <= n - 4:
            frames, consumed = split_frames(value)
            if consumed == n and frames:
                return frames
        if int.from_bytes(value[:2], "big") not in _BARE_KEYS:
            if consumed:
                raise MalformedFrameError(f"truncated frame: {n - consumed} bytes after the last whole frame")
            raise MalformedFrameError(f"truncated frame: the size prefix says {size} bytes, {n - 4} follow")
    return [value]


# ------------------------------------------------------------------------------ DataFrame API


def _carry_fields(df: "DataFrame", exclude: Iterable[str], names: set[str]) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_type

    fields = []
    for f in df.schema.fields:
        if f.name in exclude:
            continue
        if f.name in names:
            raise ValueError(f"input column {f.name!r} clashes with an output column; rename it first")
        fields.append(pa.field(f.name, to_arrow_type(f.dataType)))
    return pa.schema(fields)


def _split(
    df: "DataFrame",
    combined_schema: pa.Schema,
    input_col: str,
    carry: pa.Schema,
    mapper: Callable[[pa.Schema], _ArrowMapper],
) -> DecodeResult:
    """``mapper(schema)``: the mapInArrow function that yields batches of ``schema`` (the combined one, or
    the points-only one: the columns before the input column)."""
    from pyspark.sql import functions as F

    combined = df.mapInArrow(mapper(combined_schema), _to_spark_schema(combined_schema))
    point_schema = pa.schema(list(combined_schema)[: combined_schema.get_field_index(input_col)])
    # the point rows straight from the workers: Spark converts and filters no error columns (the split as
    # a filter and projection in the JVM cost 0.16-0.41 s of a 0.85-1.06 s decode in the bench)
    points = df.mapInArrow(mapper(point_schema), _to_spark_schema(point_schema))
    errors = combined.where(F.col(ERROR_CODE).isNotNull()).select(
        *carry.names, input_col, ERROR_CODE, ERROR, ERROR_STAGE
    )
    return DecodeResult(points, errors, combined)


def decode_payloads(
    df: "DataFrame | Recordings",
    payload_col: str = "payload",
    compression_col: str | None = "compression_type",
    *,
    max_output: int = DEFAULT_MAX_OUTPUT,
    max_batch_rows: int = MAX_BATCH_ROWS,
    max_batch_bytes: int = MAX_BATCH_BYTES,
    spark: "SparkSession | None" = None,
) -> DecodeResult:
    """Decode recorded payloads: one output row per data point, every other input column carried along
    (for a ``kip714 serve`` recording: the broker-added labels, ``received_at_ms``, ``subscription_id``,
    ``kip714_replica``…). A recording's ``error_code`` (what the broker answered the push) comes out as
    ``push_error_code``, since ``error_code`` is the decoding error's column: a recording is taken as it is.

    ``df`` is a DataFrame of recording rows, or the recordings themselves: a recording folder, a fleet's root
    of them (``ROOT/REPLICA``, one per replica) or several paths, read with :func:`read_recording_df` on
    ``spark`` (default: the active session), each push once; every point carries the replica that received
    its push (``kip714_replica``; null for recordings made before that column).

    ``compression_col=None`` treats every payload as uncompressed OTLP. The batches handed back to Spark
    hold at most ``max_batch_rows`` rows and about ``max_batch_bytes`` bytes, whatever an input batch holds."""
    require("spark", "kip714.spark.decode_payloads")
    if isinstance(df, (str, os.PathLike, list, tuple)):
        if spark is None:
            from pyspark.sql import SparkSession

            spark = SparkSession.active()
        df = read_recording_df(spark, df)
    return _decode_payloads(
        cast("DataFrame", df), payload_col, compression_col, _Pass(max_output, _Bounds(max_batch_rows, max_batch_bytes))
    )


def decode_frames(
    df: "DataFrame",
    col: str = "frame",
    *,
    max_output: int = DEFAULT_MAX_OUTPUT,
    max_batch_rows: int = MAX_BATCH_ROWS,
    max_batch_bytes: int = MAX_BATCH_BYTES,
) -> DecodeResult:
    """Decode PushTelemetry request frames (size-prefixed — one or more per value — or bare): points with
    the request's ``client_id``, ``correlation_id``, ``client_instance_id`` (Kafka's text form),
    ``subscription_id``, ``terminating`` and ``compression_type``, plus the other input columns.
    Frames of other requests (GetTelemetrySubscriptions, ApiVersions…) carry no telemetry and give no rows.
    Output batches are bounded as in :func:`decode_payloads`."""
    require("spark", "kip714.spark.decode_frames")
    return _decode_frames(df, col, _Pass(max_output, _Bounds(max_batch_rows, max_batch_bytes)))


class _Bounds(NamedTuple):
    rows: int
    nbytes: int


def _error_adder(counter: "Accumulator[int] | None") -> _ErrorCallback | None:
    """What the points-only pass calls with the number of inputs it could not decode (``counter.add``)."""
    return None if counter is None else counter.add


def _counted(gen: Iterator[pa.RecordBatch], counter: "Accumulator[int]") -> Iterator[pa.RecordBatch]:
    """Adds the number of error rows that pass by to ``counter`` (a Spark accumulator)."""
    for out in gen:
        n = out.num_rows - out.column(ERROR_CODE).null_count
        if n:
            counter.add(n)
        yield out


_Worker = Callable[[Iterator[pa.RecordBatch], _Output], Iterator[pa.RecordBatch]]


class _Pass(NamedTuple):
    """One decoding pass over a DataFrame: at most ``max_output`` decompressed bytes a payload, output
    batches within ``bounds``; ``emit_points=False`` keeps the error rows only (the pipeline's errors pass);
    ``error_counter`` (a Spark accumulator) counts the error rows."""

    max_output: int
    bounds: _Bounds
    emit_points: bool = True
    error_counter: "Accumulator[int] | None" = None

    def mapper(self, work: _Worker) -> Callable[[pa.Schema], _ArrowMapper]:
        """The mapInArrow function of ``work`` (an Arrow worker) for an output schema, run as this pass says."""
        bounds, emit_points, counter = self.bounds, self.emit_points, self.error_counter

        def mapper(out_schema: pa.Schema) -> _ArrowMapper:
            def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
                gen = work(batches, _Output(out_schema, _Budget(*bounds), emit_points, _error_adder(counter)))
                return _counted(gen, counter) if counter is not None and ERROR_CODE in out_schema.names else gen

            return run

        return mapper


def _decode_payloads(df: "DataFrame", payload_col: str, compression_col: str | None, job: _Pass) -> DecodeResult:
    if ERROR_CODE in df.columns and PUSH_ERROR_CODE not in df.columns:
        df = df.withColumnRenamed(ERROR_CODE, PUSH_ERROR_CODE)  # a recording, taken as it is
    point_names = set(points_schema().names) | {ERROR_CODE, ERROR, ERROR_STAGE}
    carry = _carry_fields(df, {payload_col}, point_names)
    input_field = pa.field(payload_col, pa.binary())
    schema = _combined_arrow_schema(carry, input_field)
    max_output = job.max_output

    def work(batches: Iterator[pa.RecordBatch], out: _Output) -> Iterator[pa.RecordBatch]:
        return _decode_payload_batches(batches, payload_col, compression_col, max_output, out)

    return _split(df, schema, payload_col, carry, job.mapper(work))


def _decode_frames(df: "DataFrame", col: str, job: _Pass) -> DecodeResult:
    extra = [
        pa.field("client_id", pa.string()),
        pa.field("correlation_id", pa.int32()),
        pa.field("client_instance_id", pa.string()),
        pa.field("subscription_id", pa.int32()),
        pa.field("terminating", pa.bool_()),
        pa.field("compression_type", pa.int8()),
    ]
    names = set(points_schema().names) | {f.name for f in extra} | {ERROR_CODE, ERROR, ERROR_STAGE}
    carry = _carry_fields(df, {col}, names)
    schema = _combined_arrow_schema(carry, pa.field(col, pa.binary()), extra)
    max_output = job.max_output

    def work(batches: Iterator[pa.RecordBatch], out: _Output) -> Iterator[pa.RecordBatch]:
        return _decode_frame_batches(batches, col, max_output, out)

    return _split(df, schema, col, carry, job.mapper(work))


# ------------------------------------------------------------------------------------------ SQL

#: Columns of a ``kip714 serve`` recording that ``kip714_points`` carries along (null when absent); the
#: recording's schema has one home, :mod:`kip714.sinks.recorder`.
RECORDING_LABELS = ("received_at_ms",) + LABEL_COLUMNS + ("subscription_id",)


def register(spark: "SparkSession", max_output: int = DEFAULT_MAX_OUTPUT) -> list[str]:
    """Register kip714's SQL functions on ``spark``; returns their names.

    - ``kip714_points(TABLE(t))``: table function over rows with ``payload`` and ``compression_type``
      (and, when present, the recording's label columns); one row per data point, plus one row per bad
      payload with ``error_code``/``error`` set.
    - ``kip714_decompress(payload, compression_type)`` → binary (null when it fails),
      ``kip714_payload_error(payload, compression_type)`` → the reason it fails (null when it decodes),
    - ``kip714_frame_header(frame)`` → struct of the request's header and PushTelemetry fields,
    - ``kip714_subscription_id(metrics, interval_ms, client_instance_id)`` → int (Kafka's id; the
      instance id in Kafka's base64 text form or as a UUID string),
    - ``kip714_metric_name(group, name)`` → Kafka's telemetry metric name."""
    require("spark", "kip714.spark.register")
    import pandas as pd
    from pyspark.sql.functions import arrow_udtf
    from pyspark.sql.pandas.functions import pandas_udf as _pandas_udf

    from .._crc import compute_subscription_id
    from ..client.naming import telemetry_metric_name

    recording = record_schema()
    label_fields = [recording.field(n) for n in RECORDING_LABELS]
    out_schema = pa.schema(
        list(points_schema()) + label_fields + [pa.field(ERROR_CODE, pa.int16()), pa.field(ERROR, pa.string())]
    )
    ddl = _to_spark_schema(out_schema)
    # pyspark's stubs know pandas_udf only with an explicit functionType, not in the form used here (the
    # UDF's kind read from the function's pandas type hints)
    pandas_udf = cast("Callable[[str], Callable[[Callable[..., Any]], UserDefinedFunctionLike]]", _pandas_udf)

    class Kip714Points:
        def eval(self, batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
            names = batch.schema.names
            carry = [f for f in label_fields if f.name in names]
            src_schema = pa.schema(carry)
            combined = _combined_arrow_schema(src_schema, pa.field("payload", pa.binary()))
            for out in _decode_payload_batches(
                iter([batch]),
                "payload",
                "compression_type" if "compression_type" in names else None,
                max_output,
                _Output(combined, _Budget()),
            ):
                cols = []
                for field in out_schema:
                    if field.name in out.schema.names:
                        cols.append(out.column(field.name).cast(field.type))
                    else:
                        cols.append(pa.nulls(out.num_rows, field.type))
                yield pa.RecordBatch.from_arrays(cols, schema=out_schema)

    # given a class, arrow_udtf returns the table function (pyspark types it with its decorator form too)
    spark.udtf.register("kip714_points", cast("UserDefinedTableFunction", arrow_udtf(Kip714Points, returnType=ddl)))

    def _decompress_one(data: bytes | None, ctype: Any) -> tuple[bytes | None, str | None]:
        if data is None or ctype is None or pd.isna(ctype):
            return None, "null payload or compression type"
        try:
            return decompress(data, int(ctype), max_output), None
        except Kip714Error as exc:
            return None, f"{exc.error_code.name} ({int(exc.error_code)}): {exc}"

    @pandas_udf("binary")
    def kip714_decompress(payload: pd.Series, ctype: pd.Series) -> pd.Series:
        return pd.Series([_decompress_one(p, c)[0] for p, c in zip(payload, ctype)], dtype=object)

    @pandas_udf("string")
    def kip714_payload_error(payload: pd.Series, ctype: pd.Series) -> pd.Series:
        out: list[str | None] = []
        for p, c in zip(payload, ctype):
            raw, err = _decompress_one(p, c)
            if raw is not None:  # (err is None)
                try:
                    _otlp.decode_metrics(raw)
                except Kip714Error as exc:
                    err = f"{exc.error_code.name} ({int(exc.error_code)}): {exc}"
            out.append(err)
        return pd.Series(out, dtype=object)

    header_ddl = (
        "api_key int, api_version int, correlation_id int, client_id string, "
        "client_instance_id string, subscription_id int, terminating boolean, compression_type int, "
        "metrics_size int, error_code int, error string"
    )

    @pandas_udf(header_ddl)
    def kip714_frame_header(frame: pd.Series) -> pd.DataFrame:
        rows = []
        for value in frame:
            row = dict.fromkeys(
                (
                    "api_key",
                    "api_version",
                    "correlation_id",
                    "client_id",
                    "client_instance_id",
                    "subscription_id",
                    "terminating",
                    "compression_type",
                    "metrics_size",
                    "error_code",
                    "error",
                )
            )
            try:
                if value is None:
                    raise Kip714Error("null frame", ErrorCode.INVALID_REQUEST)
                req = decode_request(_frames_of(value)[0])
                row.update(
                    api_key=req.api_key,
                    api_version=req.api_version,
                    correlation_id=req.correlation_id,
                    client_id=req.header.client_id,
                )
                body = req.body
                if type(body) is PushTelemetryRequest:
                    row.update(
                        client_instance_id=kafka_uuid_string(body.client_instance_id_bytes),
                        subscription_id=body.subscription_id,
                        terminating=body.terminating,
                        compression_type=body.compression_type,
                        metrics_size=body.metrics_size,
                    )
            except Kip714Error as exc:
                row.update(error_code=int(exc.error_code), error=str(exc))
            rows.append(row)
        return pd.DataFrame(rows, columns=[c.split()[0] for c in header_ddl.split(", ")])

    @pandas_udf("int")
    def kip714_subscription_id(metrics: pd.Series, interval: pd.Series, instance: pd.Series) -> pd.Series:
        import base64
        import uuid

        out: list[int | None] = []
        for m, i, inst in zip(metrics, interval, instance):
            if m is None or inst is None or pd.isna(i):
                out.append(None)
                continue
            text = str(inst)
            raw = uuid.UUID(text).bytes if len(text) == 36 else base64.urlsafe_b64decode(text + "==")
            out.append(compute_subscription_id(list(m), int(i), raw))
        return pd.Series(out, dtype="Int32")

    @pandas_udf("string")
    def kip714_metric_name(group: pd.Series, name: pd.Series) -> pd.Series:
        return pd.Series(
            [None if g is None or n is None else telemetry_metric_name(g, n) for g, n in zip(group, name)], dtype=object
        )

    functions = {
        "kip714_decompress": kip714_decompress,
        "kip714_payload_error": kip714_payload_error,
        "kip714_frame_header": kip714_frame_header,
        "kip714_subscription_id": kip714_subscription_id,
        "kip714_metric_name": kip714_metric_name,
    }
    for name, fn in functions.items():
        spark.udf.register(name, fn)
    return ["kip714_points", *functions]
