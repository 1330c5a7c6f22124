# cython: language_level=3
"""Native OTLP ``MetricsData`` decoder: protobuf wire bytes → one Arrow row per data point.

``decode_metrics(otlp_bytes, labels=None)`` walks the protobuf wire format directly (no protobuf
objects) and returns a ``pyarrow.Table`` with the columns of :data:`kip714.otlp.schema.COLUMNS`, in that
order, plus one constant column per label. ``decode_metrics_batch`` does the same for many payloads
at once, adding a ``payload_index`` column, and can collect bad payloads instead of raising.

The reference is :func:`kip714.otlp.reference.flatten` (upb parse + Python); this module produces the same
rows (see its docstring for what every column holds and how attribute values become text) and
accepts and rejects exactly the payloads upb does, with these deliberate limits: a payload of 2 GiB or
more, one with more than ``MAX_ROWS`` data points, or one whose metric/scope/resource strings would be
copied onto its rows more than ``MAX_AMPLIFIED_BYTES`` in total is refused, and so is any output that
Arrow's 32-bit offsets cannot hold. Every refusal is :class:`kip714.errors.CorruptPayloadError`
(INVALID_RECORD).

Types: fixed64/uint64 fields (timestamps, counts, bucket counts, zero_count) land in int64 columns
(Spark has no unsigned types). A payload carrying such a value of 2**63 or more (a time past the
year 2262, a count no client reaches) is refused as INVALID_RECORD naming the field, never wrapped to
a negative number; the check applies to the final value of a field seen twice. ``flags`` (uint32) is
int64, ``exemplar_count`` int32.

Design (three passes, the first and last without the GIL for large payloads):

1. *Walk* (``otlp_walk.pxi``): one C function per message type reads the wire format with bounds
   checks on every read and appends fixed-size records to growable native arrays: one ``Row`` per
   data point, ``Entry`` records for attributes (key and value as pointers into the payload: strings
   are never copied or decoded here), per-metric / per-scope / per-resource records that rows refer to
   by index (so fields that arrive after the data points, or are merged from repeated occurrences,
   still apply), and pools for bucket counts, bounds and quantiles.
2. *Render* (``otlp_render.pxi``, GIL): the few attribute values that are not strings become text
   (repr() of doubles needs CPython).
3. *Build* (``otlp_arrow.pxi``): every column is written straight into Arrow buffers carved from one
   chunked memory pool (strings are copied from the payload, so a metric name repeated on many rows
   costs one short copy per row and is never decoded: no interning or dictionary pass is needed) and
   handed to pyarrow through the Arrow C data interface (``RecordBatch._import_from_c`` with a cached
   schema); the root array's release callback frees the pool.

The walk's native stores and one output chunk are kept between calls, so decoding payload after
payload runs on warm memory. Below ~1,000 data points the cost is dominated by pyarrow's fixed
price for importing a 29-column batch (about 25 µs, the same as pyarrow's own export/import round trip).
"""

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free
from cpython.pyport cimport PY_SSIZE_T_MAX
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memmove, memset, strlen

from kip714.errors import CorruptPayloadError


cdef extern from "Python.h":
    char* PyOS_double_to_string(double val, char format_code, int precision, int flags, int* ptype) except NULL
    int Py_DTSF_ADD_DOT_0


cdef extern from "otlp_support.h":
    struct ArrowArray:
        int64_t length
        int64_t null_count
        int64_t offset
        int64_t n_buffers
        int64_t n_children
        const void** buffers
        ArrowArray** children
        ArrowArray* dictionary
        void (*release)(ArrowArray*) noexcept nogil
        void* private_data

    uint64_t otlp_le64(const unsigned char* p) noexcept nogil
    void otlp_le64_copy(uint64_t* dst, const unsigned char* src, size_t n) noexcept nogil
    double otlp_bits_to_double(uint64_t b) noexcept nogil
    void otlp_copy(void* dst, const void* src, size_t n) noexcept nogil
    int otlp_utf8_valid(const unsigned char* s, size_t n) noexcept nogil
    size_t otlp_b64_len(size_t n) noexcept nogil
    void otlp_b64(const unsigned char* src, size_t n, char* dst) noexcept nogil
    int otlp_i64_dec(int64_t v, char* dst) noexcept nogil
    size_t otlp_json_escaped_len(const unsigned char* s, size_t n) noexcept nogil
    size_t otlp_json_escape(const unsigned char* s, size_t n, char* dst) noexcept nogil
    ctypedef struct otlp_pool:
        pass
    otlp_pool* otlp_pool_new(size_t first_size) noexcept nogil
    void otlp_pool_free(otlp_pool* p) noexcept nogil
    void* otlp_pool_alloc(otlp_pool* p, size_t n) noexcept nogil
    void* otlp_pool_calloc(otlp_pool* p, size_t n) noexcept nogil
    ArrowArray* otlp_pool_array(otlp_pool* p, int64_t length, int n_buffers, int n_children) noexcept nogil
    void otlp_root_release(ArrowArray* a) noexcept nogil


include "otlp_wire.pxi"
include "otlp_walk.pxi"
include "otlp_walk_points.pxi"
include "otlp_walk_metrics.pxi"
include "otlp_render.pxi"
include "otlp_arrow.pxi"


# ============================================================================================ Python API

from kip714._enums import ErrorCode

__all__ = ["decode_metrics", "decode_metrics_batch", "MetricsAccumulator", "output_schema", "COLUMNS",
           "MAX_ROWS", "MAX_AMPLIFIED_BYTES"]

from kip714.otlp.schema import COLUMNS  # the column contract has one home
globals()["MAX_ROWS"] = MAX_ROWS
globals()["MAX_AMPLIFIED_BYTES"] = MAX_AMPLIFIED_BYTES

# Payloads at least this large are walked (and their columns built) with the GIL released.
cdef Py_ssize_t NOGIL_THRESHOLD = 32768

cdef object _pa = None
cdef dict _schemas = {}


cdef object _import_batch = None     # pyarrow.RecordBatch._import_from_c, looked up once
cdef object _from_batches = None     # pyarrow.Table.from_batches


cdef object _pyarrow():
    global _pa, _import_batch, _from_batches
    if _pa is None:
        import pyarrow
        _import_batch = pyarrow.RecordBatch._import_from_c
        _from_batches = pyarrow.Table.from_batches
        _pa = pyarrow
    return _pa


cdef list _base_fields(pa):
    s = pa.string()
    i64 = pa.int64()
    f64 = pa.float64()
    i32 = pa.int32()
    attrs = pa.map_(s, s)
    return [
        pa.field("metric", s), pa.field("description", s), pa.field("unit", s), pa.field("kind", s),
        pa.field("temporality", s), pa.field("monotonic", pa.bool_()), pa.field("attributes", attrs),
        pa.field("resource", attrs), pa.field("scope_name", s), pa.field("scope_version", s),
        pa.field("start_time_unix_nano", i64), pa.field("time_unix_nano", i64), pa.field("value", f64),
        pa.field("value_int", i64), pa.field("count", i64), pa.field("sum", f64), pa.field("min", f64),
        pa.field("max", f64), pa.field("bucket_counts", pa.list_(i64)),
        pa.field("explicit_bounds", pa.list_(f64)), pa.field("scale", i32), pa.field("zero_count", i64),
        pa.field("positive_offset", i32), pa.field("positive_bucket_counts", pa.list_(i64)),
        pa.field("negative_offset", i32), pa.field("negative_bucket_counts", pa.list_(i64)),
        pa.field("quantiles", pa.list_(pa.struct([pa.field("quantile", f64), pa.field("value", f64)]))),
        pa.field("flags", i64), pa.field("exemplar_count", i32),
    ]


cdef object _schema(bint batch, tuple label_types):
    """The (cached) pyarrow schema for this label set: ((name, is_int), ...)."""
    key = (batch, label_types)
    schema = _schemas.get(key)
    if schema is None:
        pa = _pyarrow()
        fields = _base_fields(pa)
        if batch:
            fields.append(pa.field("payload_index", pa.int32()))
        for name, is_int in label_types:
            fields.append(pa.field(name, pa.int64() if is_int else pa.string()))
        schema = pa.schema(fields)
        if len(_schemas) > 256:
            _schemas.clear()
        _schemas[key] = schema
    return schema


def output_schema(labels=None, *, batch=False):
    """The schema ``decode_metrics`` (``batch=False``) or ``decode_metrics_batch`` returns for these labels."""
    n = len(labels) if batch and isinstance(labels, (list, tuple)) else 1
    specs = _label_specs(labels, n, batch)
    return _schema(bool(batch), tuple((name, is_int) for name, is_int, _ in specs))


cdef list _label_specs(labels, Py_ssize_t n_payloads, bint batch):
    """[(name, is_int, [value per payload])] from a dict, or (batch) a list of dicts, one per payload.

    A label is int64 when every value given for it is an int, a string otherwise (ints are written in
    decimal then); a payload that lacks it (or gives None) gets null."""
    if labels is None:
        return []
    if isinstance(labels, dict):
        per_payload = [labels] * n_payloads
    elif batch and isinstance(labels, (list, tuple)):
        if len(labels) != n_payloads:
            raise ValueError(f"labels: {len(labels)} dicts for {n_payloads} payloads")
        per_payload = list(labels)
    else:
        raise TypeError("labels must be a dict of str to str or int" +
                        (", or a list of such dicts (one per payload)" if batch else ""))
    reserved = set(COLUMNS)
    if batch:
        reserved.add("payload_index")
    order = {}
    for d in per_payload:
        if d is None:
            continue
        if not isinstance(d, dict):
            raise TypeError("labels: every item must be a dict (or None)")
        for k, v in d.items():
            if not isinstance(k, str):
                raise TypeError(f"label names must be str, not {type(k).__name__}")
            if k in reserved:
                raise ValueError(f"label {k!r} would shadow an output column")
            if v is not None and (isinstance(v, bool) or not isinstance(v, (str, int))):
                raise TypeError(f"label {k!r}: values must be str or int, not {type(v).__name__}")
            if k not in order:
                order[k] = True
            if isinstance(v, str):
                order[k] = False
    specs = []
    for k, all_int in order.items():
        values = []
        for d in per_payload:
            v = None if d is None else d.get(k)
            if v is None:
                values.append(None)
            elif all_int:
                if not -(1 << 63) <= v < (1 << 63):
                    raise ValueError(f"label {k!r}: {v} does not fit int64")
                values.append(v)
            else:
                values.append(str(v).encode("utf-8"))
        specs.append((k, all_int, values))
    return specs


# The walk's stores of the last call, kept for the next one (taken and given back with the GIL held;
# a call that finds the slot empty, e.g. a concurrent one, simply starts with empty stores).
cdef Ctx _spare
cdef bint _spare_full = False
cdef Py_ssize_t SPARE_MAX_BYTES = 16 << 20


cdef Vec* _ctx_vecs(Ctx* c, int i) noexcept:
    cdef Vec* vecs[11]
    vecs[:] = [&c.rows, &c.pattr, &c.rattr, &c.metrics, &c.scopes, &c.resources, &c.pa, &c.pb, &c.pd,
               &c.pq, &c.arena]
    return vecs[i]


cdef void _ctx_take_spare(Ctx* c) noexcept:
    global _spare_full
    cdef int i
    cdef Vec* mine
    cdef Vec* spare
    if not _spare_full:
        return
    for i in range(11):
        mine = _ctx_vecs(c, i)
        spare = _ctx_vecs(&_spare, i)
        mine.data = spare.data
        mine.cap = spare.cap
        mine.n = 0
        spare.data = NULL
        spare.cap = 0
    _spare_full = False


cdef void _ctx_give_spare(Ctx* c) noexcept:
    """Keep c's stores for the next call (if the slot is free and they are not huge), then free c."""
    global _spare_full
    cdef int i
    cdef Py_ssize_t total = 0
    cdef Vec* mine
    cdef Vec* spare
    for i in range(11):
        mine = _ctx_vecs(c, i)
        total += mine.cap * mine.size
    if not _spare_full and total <= SPARE_MAX_BYTES:
        for i in range(11):
            mine = _ctx_vecs(c, i)
            spare = _ctx_vecs(&_spare, i)
            spare.data = mine.data
            spare.cap = mine.cap
            spare.size = mine.size
            spare.n = 0
            mine.data = NULL
            mine.cap = 0
        _spare_full = True
    ctx_free(c)


ctypedef struct Input:
    const uint8_t* p
    Py_ssize_t n
    bint has_view
    bint missing
    Py_buffer view


cdef str _error_text(Ctx* c):
    msg = (<bytes>c.err_msg).decode("utf-8", "replace")
    if c.err_off >= 0:
        return f"not a valid OTLP MetricsData payload: {msg} (at byte {c.err_off})"
    return f"not a valid OTLP MetricsData payload: {msg}"


cdef object _table(Ctx* c, Py_ssize_t n, list specs, object schema, bint batch, Py_ssize_t total):
    """The ``pyarrow.Table`` of everything walked into ``c`` (``n`` payloads, ``total`` bytes): the attribute
    values rendered, the label columns of ``specs`` (:func:`_label_specs`) added, every column built into
    Arrow buffers (without the GIL for large inputs) and imported with ``schema``."""
    cdef Py_ssize_t i, j
    cdef int rc
    cdef int n_labels = len(specs)
    cdef LabelCol* lcols = NULL
    cdef Span* spans
    cdef int64_t* ints
    cdef uint8_t* present
    cdef ArrowArray root
    cdef object b
    c.base = NULL
    try:
        render_all(c)
        if n_labels:
            lcols = <LabelCol*>calloc(<size_t>n_labels, sizeof(LabelCol))
            if lcols == NULL:
                raise MemoryError()
            for j, (name, is_int, values) in enumerate(specs):
                lcols[j].is_int = is_int
                if is_int:
                    ints = <int64_t*>calloc(<size_t>(n if n else 1), 8)
                    present = <uint8_t*>calloc(<size_t>(n if n else 1), 1)
                    lcols[j].ints = ints
                    lcols[j].present = present
                    if ints == NULL or present == NULL:
                        raise MemoryError()
                    for i in range(n):
                        if values[i] is not None:
                            ints[i] = values[i]
                            present[i] = 1
                else:
                    spans = <Span*>calloc(<size_t>(n if n else 1), sizeof(Span))
                    lcols[j].spans = spans
                    if spans == NULL:
                        raise MemoryError()
                    for i in range(n):
                        b = values[i]
                        if b is not None:
                            spans[i].p = <const uint8_t*>PyBytes_AS_STRING(b)
                            spans[i].n = PyBytes_GET_SIZE(b)
        if total >= NOGIL_THRESHOLD:
            with nogil:
                rc = build_root(c, &root, batch, lcols, n_labels)
        else:
            rc = build_root(c, &root, batch, lcols, n_labels)
        if rc < 0:
            if c.err_oom:
                raise MemoryError()
            raise CorruptPayloadError(_error_text(c))
        try:
            rb = _import_batch(<uintptr_t>&root, schema)
        finally:
            if root.release != NULL:
                root.release(&root)     # not taken over (import failed): ours to release
        return _from_batches([rb], schema)
    finally:
        if lcols != NULL:
            for j in range(n_labels):
                free(<void*>lcols[j].spans)
                free(<void*>lcols[j].ints)
                free(<void*>lcols[j].present)
            free(lcols)


cdef object _decode(list payloads, object labels, bint batch, bint collect, object max_rows,
                    object max_amplified_bytes):
    cdef Ctx c
    cdef Py_ssize_t n = len(payloads)
    cdef Py_ssize_t i, j, total = 0
    cdef Input* inputs = NULL
    cdef Marks marks
    cdef int rc
    cdef list keep = []
    cdef list errors = []
    cdef object obj, b

    if n > 0x7FFFFFFF:
        raise ValueError("too many payloads")
    if labels is None:              # the common case: no label columns (and no generator to build the key)
        specs = []
        schema = _schema(batch, ())
    else:
        specs = _label_specs(labels, n, batch)
        schema = _schema(batch, tuple([(name, is_int) for name, is_int, _ in specs]))
    pa = _pyarrow()

    if not 0 <= max_rows <= MAX_ROWS:
        raise ValueError(f"max_rows must be between 0 and {MAX_ROWS}")
    if not 0 <= max_amplified_bytes <= MAX_AMPLIFIED_BYTES:
        raise ValueError(f"max_amplified_bytes must be between 0 and {MAX_AMPLIFIED_BYTES}")
    inputs = <Input*>calloc(<size_t>(n if n else 1), sizeof(Input))
    if inputs == NULL:
        raise MemoryError()
    ctx_init(&c)
    _ctx_take_spare(&c)
    c.max_rows = max_rows
    c.max_amp = max_amplified_bytes
    try:
        # ---------------------------------------------------------------- the payload bytes
        for i in range(n):
            obj = payloads[i]
            if PyBytes_CheckExact(obj):
                inputs[i].p = <const uint8_t*>PyBytes_AS_STRING(obj)
                inputs[i].n = PyBytes_GET_SIZE(obj)
                keep.append(obj)
            elif obj is None and batch:
                inputs[i].missing = True
            else:
                PyObject_GetBuffer(obj, &inputs[i].view, PyBUF_SIMPLE)
                if inputs[i].view.readonly:
                    inputs[i].has_view = True
                    inputs[i].p = <const uint8_t*>inputs[i].view.buf
                    inputs[i].n = inputs[i].view.len
                else:
                    # a writable buffer could change under the walk: decode a private copy
                    try:
                        b = PyBytes_FromStringAndSize(<const char*>inputs[i].view.buf, inputs[i].view.len)
                    finally:
                        PyBuffer_Release(&inputs[i].view)
                    keep.append(b)
                    inputs[i].p = <const uint8_t*>PyBytes_AS_STRING(b)
                    inputs[i].n = PyBytes_GET_SIZE(b)
            total += inputs[i].n

        # ---------------------------------------------------------------- walk
        for i in range(n):
            if inputs[i].missing:
                if collect:
                    errors.append((i, ErrorCode.INVALID_RECORD, "payload is None"))
                    continue
                raise CorruptPayloadError(f"payload {i}: payload is None")
            ctx_mark(&c, &marks)
            if inputs[i].n >= NOGIL_THRESHOLD:
                with nogil:
                    rc = walk_payload(&c, inputs[i].p, inputs[i].n, <int32_t>i)
            else:
                rc = walk_payload(&c, inputs[i].p, inputs[i].n, <int32_t>i)
            if rc < 0:
                if c.err_oom:
                    raise MemoryError()
                msg = _error_text(&c)
                if not collect:
                    raise CorruptPayloadError(f"payload {i}: {msg}" if batch else msg)
                errors.append((i, ErrorCode.INVALID_RECORD, msg))
                ctx_truncate(&c, &marks)
                c.err_msg = NULL
        c.base = NULL

        table = _table(&c, n, specs, schema, batch, total)
    finally:
        for i in range(n):
            if inputs[i].has_view:
                PyBuffer_Release(&inputs[i].view)
        free(inputs)
        _ctx_give_spare(&c)
    if collect:
        return table, errors
    return table


include "otlp_accumulate.pxi"


def decode_metrics(otlp_bytes, labels=None, *, max_rows=MAX_ROWS, max_amplified_bytes=MAX_AMPLIFIED_BYTES):
    """Decode one OTLP ``MetricsData`` payload (uncompressed protobuf bytes, any buffer) into a
    ``pyarrow.Table`` with one row per data point: the columns of :data:`COLUMNS` in that order, then
    one constant column per entry of ``labels`` (str → string column, int → int64 column).

    Raises :class:`kip714.errors.CorruptPayloadError` (INVALID_RECORD) for anything upb would refuse
    to parse, and for payloads beyond the decoder's limits: more than ``max_rows`` data points, or
    metric / scope / resource strings that would be copied onto the rows more than
    ``max_amplified_bytes`` bytes in all (see the module docstring); both can only be lowered."""
    if otlp_bytes is None:
        raise TypeError("decode_metrics() needs a bytes-like payload, not None")
    return _decode([otlp_bytes], labels, False, False, max_rows, max_amplified_bytes)


def decode_metrics_batch(payloads, labels=None, errors="raise", *, max_rows=MAX_ROWS,
                         max_amplified_bytes=MAX_AMPLIFIED_BYTES):
    """Decode many payloads into one table; a ``payload_index`` (int32) column, placed after the
    :data:`COLUMNS`, says which payload each row came from, and label columns follow it.

    ``labels``: None, one dict for every payload, or a list of dicts (or None) with one per payload; a
    label missing for a payload is null on its rows. A label that is an int in every payload is an int64
    column; one that is a str in any payload is a string column, its int values written as decimal text.

    ``errors="raise"`` (the default) raises :class:`~kip714.errors.CorruptPayloadError` at the first
    bad payload (None counts as bad). ``errors="collect"`` skips bad payloads and returns
    ``(table, [(index, error_code, message), ...])``. The limits apply to each payload."""
    if errors not in ("raise", "collect"):
        raise ValueError("errors must be 'raise' or 'collect'")
    if not isinstance(payloads, list):
        payloads = list(payloads)
    return _decode(payloads, labels, True, errors == "collect", max_rows, max_amplified_bytes)
