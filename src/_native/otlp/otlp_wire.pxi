# Included by _otlp.pyx: the bounded protobuf wire reader, the growable native stores and the decode
# context. Everything here is plain C under Cython: no Python objects, callable without the GIL.
#
# Error model: every function returns 0 (ok) or -1 (error) and is ``noexcept nogil``; the first error
# is recorded in the Ctx (a static message and the byte offset in the payload), and _otlp.pyx turns it
# into CorruptPayloadError (or MemoryError for a failed allocation) once the GIL is held again.

cdef enum:
    # upb's default recursion limit: a payload may nest at most this many messages and groups below
    # the top-level MetricsData (upb rejects one more, and so do we).
    MAX_DEPTH = 100
    # One payload may not decode to more data points than this.
    MAX_ROWS = 10000000
    # Every pool (entries, bucket counts, ...) and every string column must fit Arrow's int32 offsets.
    POOL_LIMIT = 0x7FFFFFFF


# Upper bound on the bytes one payload may make the decoder copy per row (metric, scope and resource
# strings are repeated on every row of that metric / scope / resource): a few-megabyte payload must
# not be able to demand gigabytes of output.
cdef uint64_t MAX_AMPLIFIED_BYTES = 1 << 30


# ------------------------------------------------------------------------------------------- stores

ctypedef struct Vec:
    char* data
    Py_ssize_t n        # elements in use
    Py_ssize_t cap      # elements allocated
    Py_ssize_t size     # bytes per element


cdef inline void vec_init(Vec* v, Py_ssize_t size) noexcept nogil:
    v.data = NULL
    v.n = 0
    v.cap = 0
    v.size = size


cdef inline void vec_free(Vec* v) noexcept nogil:
    free(v.data)
    v.data = NULL
    v.n = 0
    v.cap = 0


cdef int vec_grow(Vec* v, Py_ssize_t need) noexcept nogil:
    """Make room for ``need`` elements in total; -1 if impossible (the caller reports out of memory)."""
    cdef Py_ssize_t cap = v.cap if v.cap > 0 else 16
    cdef char* p
    if need < 0:
        return -1
    while cap < need:
        if cap > (PY_SSIZE_T_MAX // 2) // v.size:
            return -1
        cap *= 2
    if cap > PY_SSIZE_T_MAX // v.size:
        return -1
    p = <char*>realloc(v.data, <size_t>(cap * v.size))
    if p == NULL:
        return -1
    v.data = p
    v.cap = cap
    return 0


# ---------------------------------------------------------------------------------------- records

cdef enum:
    # metric kinds (Metric.data oneof); also the row kind
    K_NONE = 0
    K_GAUGE = 1
    K_SUM = 2
    K_HIST = 3
    K_EXP = 4
    K_SUMMARY = 5

cdef enum:
    # how an attribute value is held until the Arrow build
    V_NULL = 0        # unset AnyValue or string_value_strindex: a null map value
    V_STR = 1         # val/val_len: bytes in the payload, or a static literal
    V_INT = 2         # bits: the int64 value (rendered in the post-pass)
    V_DOUBLE = 3      # bits: the IEEE bits (rendered with repr() in the post-pass, under the GIL)
    V_BYTES = 4       # val/val_len: raw bytes (base64 in the post-pass)
    V_COMPOSITE = 5   # val/val_len: the whole KeyValue message (array/kvlist, JSON in the post-pass)
    V_ARENA = 6       # bits: offset of the rendered text in the arena; val_len its length

cdef enum:
    # Row.has bits
    HAS_SUM = 1
    HAS_MIN = 2
    HAS_MAX = 4

cdef enum:
    # Row.vkind
    NUM_NONE = 0
    NUM_DOUBLE = 1
    NUM_INT = 2


ctypedef struct Span:
    const uint8_t* p    # NULL means null
    Py_ssize_t n


ctypedef struct Entry:
    const uint8_t* key
    const uint8_t* val
    uint64_t bits
    uint32_t key_len
    uint32_t val_len
    uint8_t kind


ctypedef struct MetricRec:
    Span name
    Span desc
    Span unit
    int32_t temporality
    uint8_t kind
    uint8_t monotonic


ctypedef struct ScopeRec:
    Span name
    Span version


ctypedef struct ResourceRec:
    Py_ssize_t start    # entries [start, end) of Ctx.rattr
    Py_ssize_t end


ctypedef struct Row:
    int64_t start_time
    int64_t time
    uint64_t value_bits     # as_double bits or as_int
    int64_t count
    double sum
    double min
    double max
    int64_t zero_count
    int32_t metric
    int32_t scope
    int32_t resource
    int32_t payload
    uint32_t attr_start     # Ctx.pattr
    uint32_t attr_end
    uint32_t a_start        # histogram bucket_counts / exp positive (Ctx.pa); summary quantiles (Ctx.pq)
    uint32_t a_end
    uint32_t b_start        # histogram explicit_bounds (Ctx.pd) / exp negative (Ctx.pb)
    uint32_t b_end
    int32_t scale
    int32_t pos_offset
    int32_t neg_offset
    uint32_t flags
    int32_t exemplars
    uint8_t kind
    uint8_t vkind
    uint8_t has


ctypedef struct QPair:
    double quantile
    double value


ctypedef struct Ctx:
    # first error
    const char* err_msg
    Py_ssize_t err_off
    int err_oom
    # the payload being walked
    const uint8_t* base
    int32_t cur_payload
    int32_t cur_scope
    int32_t cur_resource
    Py_ssize_t payload_row0
    uint64_t amp
    Py_ssize_t max_rows     # limits (see MAX_ROWS, MAX_AMPLIFIED_BYTES)
    uint64_t max_amp
    Py_ssize_t n_render     # entries that the post-pass must render (an upper bound)
    # stores
    Vec rows        # Row
    Vec pattr       # Entry: data point attributes
    Vec rattr       # Entry: resource attributes
    Vec metrics     # MetricRec
    Vec scopes      # ScopeRec
    Vec resources   # ResourceRec
    Vec pa          # uint64: histogram bucket_counts, exp positive bucket counts
    Vec pb          # uint64: exp negative bucket counts
    Vec pd          # double: histogram explicit_bounds
    Vec pq          # QPair: summary quantiles
    Vec arena       # char: rendered attribute values
    otlp_pool* out  # the Arrow output being built (until the root ArrowArray takes it over)


ctypedef struct Marks:
    Py_ssize_t rows, pattr, rattr, metrics, scopes, resources, pa, pb, pd, pq


cdef void ctx_init(Ctx* c) noexcept nogil:
    memset(c, 0, sizeof(Ctx))
    c.max_rows = MAX_ROWS
    c.max_amp = MAX_AMPLIFIED_BYTES
    vec_init(&c.rows, sizeof(Row))
    vec_init(&c.pattr, sizeof(Entry))
    vec_init(&c.rattr, sizeof(Entry))
    vec_init(&c.metrics, sizeof(MetricRec))
    vec_init(&c.scopes, sizeof(ScopeRec))
    vec_init(&c.resources, sizeof(ResourceRec))
    vec_init(&c.pa, 8)
    vec_init(&c.pb, 8)
    vec_init(&c.pd, 8)
    vec_init(&c.pq, sizeof(QPair))
    vec_init(&c.arena, 1)


cdef void ctx_free(Ctx* c) noexcept nogil:
    vec_free(&c.rows)
    vec_free(&c.pattr)
    vec_free(&c.rattr)
    vec_free(&c.metrics)
    vec_free(&c.scopes)
    vec_free(&c.resources)
    vec_free(&c.pa)
    vec_free(&c.pb)
    vec_free(&c.pd)
    vec_free(&c.pq)
    vec_free(&c.arena)
    otlp_pool_free(c.out)
    c.out = NULL


cdef inline void ctx_mark(Ctx* c, Marks* m) noexcept nogil:
    m.rows = c.rows.n
    m.pattr = c.pattr.n
    m.rattr = c.rattr.n
    m.metrics = c.metrics.n
    m.scopes = c.scopes.n
    m.resources = c.resources.n
    m.pa = c.pa.n
    m.pb = c.pb.n
    m.pd = c.pd.n
    m.pq = c.pq.n


cdef inline void ctx_truncate(Ctx* c, const Marks* m) noexcept nogil:
    c.rows.n = m.rows
    c.pattr.n = m.pattr
    c.rattr.n = m.rattr
    c.metrics.n = m.metrics
    c.scopes.n = m.scopes
    c.resources.n = m.resources
    c.pa.n = m.pa
    c.pb.n = m.pb
    c.pd.n = m.pd
    c.pq.n = m.pq


# ----------------------------------------------------------------------------------------- errors

cdef int fail(Ctx* c, const uint8_t* at, const char* msg) noexcept nogil:
    if c.err_msg == NULL:
        c.err_msg = msg
        c.err_off = at - c.base if at != NULL and c.base != NULL else -1
    return -1


cdef int fail_oom(Ctx* c) noexcept nogil:
    if c.err_msg == NULL:
        c.err_msg = "out of memory"
        c.err_oom = 1
        c.err_off = -1
    return -1


cdef inline void* push(Ctx* c, Vec* v) noexcept nogil:
    """A new (uninitialised) element at the end of ``v``; NULL (error recorded) on failure."""
    if v.n >= POOL_LIMIT:
        fail(c, NULL, "decoded output too large (more than 2**31-1 elements in one column)")
        return NULL
    if v.n >= v.cap and vec_grow(v, v.n + 1) < 0:
        fail_oom(c)
        return NULL
    v.n += 1
    return v.data + (v.n - 1) * v.size


cdef inline int reserve(Ctx* c, Vec* v, Py_ssize_t extra) noexcept nogil:
    """Room for ``extra`` more elements (extra is bounded by the payload size by every caller)."""
    if extra > POOL_LIMIT - v.n:
        return fail(c, NULL, "decoded output too large (more than 2**31-1 elements in one column)")
    if v.n + extra > v.cap and vec_grow(v, v.n + extra) < 0:
        return fail_oom(c)
    return 0


cdef inline int amp_add(Ctx* c, Py_ssize_t rows, uint64_t per_row) noexcept nogil:
    """Account for ``per_row`` bytes copied onto each of ``rows`` rows (see MAX_AMPLIFIED_BYTES)."""
    if rows <= 0 or per_row == 0:
        return 0
    if c.amp > c.max_amp or per_row > (c.max_amp - c.amp) // <uint64_t>rows:
        return fail(c, NULL, "decoded output too large (metric, scope or resource strings repeated on "
                             "too many data points)")
    c.amp += per_row * <uint64_t>rows
    return 0


# ------------------------------------------------------------------------------------------ reader

ctypedef struct Rd:
    const uint8_t* p
    const uint8_t* end


cdef inline int rd_varint(Ctx* c, Rd* r, uint64_t* out) noexcept nogil:
    """A base-128 varint of at most 10 bytes; bits past 64 are dropped (as upb does)."""
    cdef const uint8_t* p = r.p
    cdef Py_ssize_t avail = r.end - p
    cdef uint64_t v = 0
    cdef uint64_t b
    cdef int i
    if avail > 0 and p[0] < 0x80:
        out[0] = p[0]
        r.p = p + 1
        return 0
    for i in range(10):
        if i >= avail:
            return fail(c, p, "truncated varint")
        b = p[i]
        v |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            out[0] = v
            r.p = p + i + 1
            return 0
    return fail(c, p, "varint longer than 10 bytes")


cdef inline int rd_tag(Ctx* c, Rd* r, uint32_t* fn, uint32_t* wt) noexcept nogil:
    """A field tag: a varint of at most 5 bytes whose value fits 32 bits (upb's rule)."""
    cdef const uint8_t* start = r.p
    cdef uint64_t v
    if r.p < r.end and r.p[0] < 0x80:
        v = r.p[0]
        r.p += 1
    else:
        if rd_varint(c, r, &v) < 0:
            return -1
        if r.p - start > 5 or (v >> 32) != 0:
            return fail(c, start, "malformed field tag")
    fn[0] = <uint32_t>(v >> 3)
    wt[0] = <uint32_t>(v & 7)
    return 0


cdef inline int rd_fixed64(Ctx* c, Rd* r, uint64_t* out) noexcept nogil:
    if r.end - r.p < 8:
        return fail(c, r.p, "truncated fixed64 field")
    out[0] = otlp_le64(r.p)
    r.p += 8
    return 0


cdef inline int rd_ld(Ctx* c, Rd* r, Rd* sub) noexcept nogil:
    """A length-delimited field's body (sub) — within the current message and under 2**31-1 bytes."""
    cdef const uint8_t* at = r.p
    cdef uint64_t n
    if rd_varint(c, r, &n) < 0:
        return -1
    if n >= 0x7FFFFFFF or n > <uint64_t>(r.end - r.p):
        return fail(c, at, "length-delimited field runs past the end of its message")
    sub.p = r.p
    sub.end = r.p + n
    r.p = sub.end
    return 0


cdef inline int check_utf8(Ctx* c, const Rd* s) noexcept nogil:
    if not otlp_utf8_valid(s.p, <size_t>(s.end - s.p)):
        return fail(c, s.p, "invalid UTF-8 in a string field")
    return 0


cdef inline int skip_plain(Ctx* c, Rd* r, uint32_t wt) noexcept nogil:
    """Skip the value of a varint, fixed64, length-delimited or fixed32 field."""
    cdef uint64_t v
    cdef Rd sub
    if wt == 0:
        return rd_varint(c, r, &v)
    if wt == 1:
        if r.end - r.p < 8:
            return fail(c, r.p, "truncated fixed64 field")
        r.p += 8
        return 0
    if wt == 2:
        return rd_ld(c, r, &sub)
    if wt == 5:
        if r.end - r.p < 4:
            return fail(c, r.p, "truncated fixed32 field")
        r.p += 4
        return 0
    return fail(c, r.p, "invalid wire type")


cdef int skip_group(Ctx* c, Rd* r, uint32_t number, int depth) noexcept nogil:
    """Skip a group (wire types 3/4) as upb does: nested groups, any field number inside (even 0),
    the end tag must carry the group's number, and every group counts towards MAX_DEPTH."""
    cdef const uint8_t* at = r.p
    cdef uint32_t fn, wt
    if depth > MAX_DEPTH:
        return fail(c, r.p, "nesting deeper than 100 levels")
    while True:
        if r.p >= r.end:
            return fail(c, at, "unterminated group")
        if rd_tag(c, r, &fn, &wt) < 0:
            return -1
        if wt == 4:
            if fn == number:
                return 0
            return fail(c, r.p, "end-group tag does not match its group")
        if wt == 3:
            if skip_group(c, r, fn, depth + 1) < 0:
                return -1
        elif skip_plain(c, r, wt) < 0:
            return -1


cdef inline int skip_field(Ctx* c, Rd* r, uint32_t fn, uint32_t wt, int depth) noexcept nogil:
    """A field the walker does not use (unknown, or known with a wire type that makes it unknown to
    upb) in a message at nesting ``depth``."""
    if wt == 3:
        return skip_group(c, r, fn, depth + 1)
    if wt == 4:
        return fail(c, r.p, "end-group tag outside a group")
    return skip_plain(c, r, wt)


cdef inline int next_field(Ctx* c, Rd* r, uint32_t* fn, uint32_t* wt) noexcept nogil:
    """The next field tag of a message body (field number 0 is malformed)."""
    if rd_tag(c, r, fn, wt) < 0:
        return -1
    if fn[0] == 0:
        return fail(c, r.p, "field number 0")
    return 0
