# Included by _otlp.pyx: building the Arrow columns straight from the rows, as Arrow C data interface
# arrays (otlp_support.h) whose buffers are malloc'd here and freed by the release callback once
# pyarrow lets go of them. GIL-free; every builder returns NULL after recording an error in the Ctx.

cdef enum:
    # fixed-width column selectors
    C_START = 0
    C_TIME = 1
    C_VALUE = 2
    C_VALUE_INT = 3
    C_COUNT = 4
    C_SUM = 5
    C_MIN = 6
    C_MAX = 7
    C_SCALE = 8
    C_ZERO_COUNT = 9
    C_POS_OFFSET = 10
    C_NEG_OFFSET = 11
    C_FLAGS = 12
    C_EXEMPLARS = 13
    C_PAYLOAD = 14
    C_MONOTONIC = 15
    # string column selectors
    S_METRIC = 0
    S_DESCRIPTION = 1
    S_UNIT = 2
    S_KIND = 3
    S_TEMPORALITY = 4
    S_SCOPE_NAME = 5
    S_SCOPE_VERSION = 6
    S_LABEL = 7
    # list column selectors
    L_BUCKETS = 0
    L_BOUNDS = 1
    L_POSITIVE = 2
    L_NEGATIVE = 3


cdef const char* KIND_NAMES[6]
KIND_NAMES[0] = ""
KIND_NAMES[1] = "gauge"
KIND_NAMES[2] = "sum"
KIND_NAMES[3] = "histogram"
KIND_NAMES[4] = "exponential_histogram"
KIND_NAMES[5] = "summary"
cdef Py_ssize_t KIND_LENS[6]
KIND_LENS[:] = [0, 5, 3, 9, 21, 7]


cdef inline void* palloc(Ctx* c, size_t n) noexcept nogil:
    cdef void* p = otlp_pool_alloc(c.out, n)
    if p == NULL:
        fail_oom(c)
    return p


cdef inline uint8_t* pbits(Ctx* c, int64_t n) noexcept nogil:
    """A zeroed validity bitmap for n slots."""
    cdef void* p = otlp_pool_calloc(c.out, <size_t>((n + 7) >> 3))
    if p == NULL:
        fail_oom(c)
    return <uint8_t*>p


cdef inline void bit_set(uint8_t* bits, int64_t i) noexcept nogil:
    bits[i >> 3] |= <uint8_t>(1 << (i & 7))


cdef ArrowArray* new_array(Ctx* c, int64_t length, int n_buffers, int n_children) noexcept nogil:
    cdef ArrowArray* a = otlp_pool_array(c.out, length, n_buffers, n_children)
    if a == NULL:
        fail_oom(c)
    return a


cdef inline void set_validity(ArrowArray* a, uint8_t* valid, int64_t nulls) noexcept nogil:
    """Buffer 0: the bitmap when there are nulls, none otherwise."""
    a.null_count = nulls
    a.buffers[0] = valid if nulls else NULL


cdef int cols_fixed(Ctx* c, ArrowArray** out, bint with_payload) noexcept nogil:
    """Every fixed-width column (indexed by the C_* selectors) in one pass over the rows; the nulls
    follow the row kind exactly as kip714.otlp.reference.flatten leaves fields None."""
    cdef int64_t n = c.rows.n
    cdef const Row* rows = <const Row*>c.rows.data
    cdef const MetricRec* metrics = <const MetricRec*>c.metrics.data
    cdef const Row* row
    cdef int64_t i
    cdef int k, width
    cdef uint8_t kind
    cdef bint num, dist, hist_exp, exp
    cdef void* data[16]
    cdef uint8_t* valid[16]
    cdef int64_t nulls[16]
    cdef ArrowArray* a
    for k in range(16):
        out[k] = NULL
        data[k] = NULL
        valid[k] = NULL
        nulls[k] = 0
        if k == C_PAYLOAD and not with_payload:
            continue
        width = 4 if (k == C_SCALE or k == C_POS_OFFSET or k == C_NEG_OFFSET or k == C_EXEMPLARS or
                      k == C_PAYLOAD) else (0 if k == C_MONOTONIC else 8)
        a = new_array(c, n, 2, 0)
        if a == NULL:
            return -1
        data[k] = pbits(c, n) if width == 0 else palloc(c, <size_t>(n * width))
        if k != C_START and k != C_TIME and k != C_FLAGS and k != C_PAYLOAD:
            valid[k] = pbits(c, n)
            if valid[k] == NULL:
                return -1
        if data[k] == NULL:
            return -1
        a.buffers[1] = data[k]
        out[k] = a
    cdef int64_t* d_start = <int64_t*>data[C_START]
    cdef int64_t* d_time = <int64_t*>data[C_TIME]
    cdef double* d_value = <double*>data[C_VALUE]
    cdef int64_t* d_value_int = <int64_t*>data[C_VALUE_INT]
    cdef int64_t* d_count = <int64_t*>data[C_COUNT]
    cdef double* d_sum = <double*>data[C_SUM]
    cdef double* d_min = <double*>data[C_MIN]
    cdef double* d_max = <double*>data[C_MAX]
    cdef int32_t* d_scale = <int32_t*>data[C_SCALE]
    cdef int64_t* d_zero = <int64_t*>data[C_ZERO_COUNT]
    cdef int32_t* d_pos = <int32_t*>data[C_POS_OFFSET]
    cdef int32_t* d_neg = <int32_t*>data[C_NEG_OFFSET]
    cdef int64_t* d_flags = <int64_t*>data[C_FLAGS]
    cdef int32_t* d_ex = <int32_t*>data[C_EXEMPLARS]
    cdef int32_t* d_payload = <int32_t*>data[C_PAYLOAD]
    cdef uint8_t* d_mono = <uint8_t*>data[C_MONOTONIC]
    for i in range(n):
        row = &rows[i]
        kind = row.kind
        num = kind == K_GAUGE or kind == K_SUM
        hist_exp = kind == K_HIST or kind == K_EXP
        dist = hist_exp or kind == K_SUMMARY
        exp = kind == K_EXP
        d_start[i] = row.start_time
        d_time[i] = row.time
        d_flags[i] = row.flags
        if with_payload:
            d_payload[i] = row.payload
        # value / value_int
        if num and row.vkind != NUM_NONE:
            bit_set(valid[C_VALUE], i)
            if row.vkind == NUM_INT:
                d_value[i] = <double>(<int64_t>row.value_bits)
                d_value_int[i] = <int64_t>row.value_bits
                bit_set(valid[C_VALUE_INT], i)
            else:
                d_value[i] = otlp_bits_to_double(row.value_bits)
                d_value_int[i] = 0
                nulls[C_VALUE_INT] += 1
        else:
            d_value[i] = 0.0
            d_value_int[i] = 0
            nulls[C_VALUE] += 1
            nulls[C_VALUE_INT] += 1
        # count / sum / min / max
        if dist:
            bit_set(valid[C_COUNT], i)
            d_count[i] = row.count
        else:
            d_count[i] = 0
            nulls[C_COUNT] += 1
        if dist and (row.has & HAS_SUM):
            bit_set(valid[C_SUM], i)
            d_sum[i] = row.sum
        else:
            d_sum[i] = 0.0
            nulls[C_SUM] += 1
        if hist_exp and (row.has & HAS_MIN):
            bit_set(valid[C_MIN], i)
            d_min[i] = row.min
        else:
            d_min[i] = 0.0
            nulls[C_MIN] += 1
        if hist_exp and (row.has & HAS_MAX):
            bit_set(valid[C_MAX], i)
            d_max[i] = row.max
        else:
            d_max[i] = 0.0
            nulls[C_MAX] += 1
        # exponential histogram scalars
        if exp:
            bit_set(valid[C_SCALE], i)
            bit_set(valid[C_ZERO_COUNT], i)
            bit_set(valid[C_POS_OFFSET], i)
            bit_set(valid[C_NEG_OFFSET], i)
            d_scale[i] = row.scale
            d_zero[i] = row.zero_count
            d_pos[i] = row.pos_offset
            d_neg[i] = row.neg_offset
        else:
            d_scale[i] = 0
            d_zero[i] = 0
            d_pos[i] = 0
            d_neg[i] = 0
            nulls[C_SCALE] += 1
            nulls[C_ZERO_COUNT] += 1
            nulls[C_POS_OFFSET] += 1
            nulls[C_NEG_OFFSET] += 1
        # exemplar_count (no exemplars in a summary), monotonic (sums only)
        if kind != K_SUMMARY:
            bit_set(valid[C_EXEMPLARS], i)
            d_ex[i] = row.exemplars
        else:
            d_ex[i] = 0
            nulls[C_EXEMPLARS] += 1
        if kind == K_SUM:
            bit_set(valid[C_MONOTONIC], i)
            if metrics[row.metric].monotonic:
                bit_set(d_mono, i)
        else:
            nulls[C_MONOTONIC] += 1
    for k in range(16):
        if out[k] != NULL:
            set_validity(out[k], valid[k], nulls[k])
    return 0


cdef inline void row_strings(const Ctx* c, const Row* row, Span* out) noexcept nogil:
    """The seven string columns of a row (out.p = NULL: null), in S_* order."""
    cdef const MetricRec* m = &(<const MetricRec*>c.metrics.data)[row.metric]
    cdef const ScopeRec* sc = &(<const ScopeRec*>c.scopes.data)[row.scope]
    out[S_METRIC] = m.name
    out[S_DESCRIPTION] = m.desc
    out[S_UNIT] = m.unit
    out[S_KIND].p = <const uint8_t*>KIND_NAMES[row.kind]
    out[S_KIND].n = KIND_LENS[row.kind]
    if (row.kind == K_SUM or row.kind == K_HIST or row.kind == K_EXP) and m.temporality == 1:
        out[S_TEMPORALITY].p = <const uint8_t*>"delta"
        out[S_TEMPORALITY].n = 5
    elif (row.kind == K_SUM or row.kind == K_HIST or row.kind == K_EXP) and m.temporality == 2:
        out[S_TEMPORALITY].p = <const uint8_t*>"cumulative"
        out[S_TEMPORALITY].n = 10
    else:
        out[S_TEMPORALITY].p = NULL
        out[S_TEMPORALITY].n = 0
    out[S_SCOPE_NAME] = sc.name
    out[S_SCOPE_VERSION] = sc.version


cdef int cols_string(Ctx* c, ArrowArray** out) noexcept nogil:
    """The seven string columns (S_* order): one sizing pass and one copying pass over the rows."""
    cdef int64_t n = c.rows.n
    cdef const Row* rows = <const Row*>c.rows.data
    cdef int64_t i
    cdef int k
    cdef Span s[7]
    cdef Py_ssize_t total[7]
    cdef int64_t nulls[7]
    cdef int32_t* offsets[7]
    cdef char* data[7]
    cdef uint8_t* valid[7]
    cdef ArrowArray* a
    for k in range(7):
        total[k] = 0
        nulls[k] = 0
        out[k] = NULL
    for i in range(n):
        row_strings(c, &rows[i], s)
        for k in range(7):
            total[k] += s[k].n
    for k in range(7):
        if total[k] > POOL_LIMIT:
            return fail(c, NULL, "decoded output too large (a string column over 2 GiB)")
        a = new_array(c, n, 3, 0)
        valid[k] = pbits(c, n)
        offsets[k] = <int32_t*>palloc(c, <size_t>(n + 1) * 4)
        data[k] = <char*>palloc(c, <size_t>total[k])
        if a == NULL or valid[k] == NULL or offsets[k] == NULL or data[k] == NULL:
            return -1
        a.buffers[1] = offsets[k]
        a.buffers[2] = data[k]
        offsets[k][0] = 0
        total[k] = 0
        out[k] = a
    for i in range(n):
        row_strings(c, &rows[i], s)
        for k in range(7):
            if s[k].p != NULL:
                bit_set(valid[k], i)
                otlp_copy(data[k] + total[k], s[k].p, <size_t>s[k].n)
                total[k] += s[k].n
            else:
                nulls[k] += 1
            offsets[k][i + 1] = <int32_t>total[k]
    for k in range(7):
        set_validity(out[k], valid[k], nulls[k])
    return 0


cdef ArrowArray* col_label_string(Ctx* c, const Span* per_payload) noexcept nogil:
    """A label column of strings: each row takes its payload's value (p == NULL: null)."""
    cdef int64_t n = c.rows.n
    cdef const Row* rows = <const Row*>c.rows.data
    cdef int64_t i, nulls = 0
    cdef Py_ssize_t total = 0
    cdef const Span* s
    cdef uint8_t* valid
    cdef int32_t* offsets
    cdef char* data
    cdef ArrowArray* a
    for i in range(n):
        total += per_payload[rows[i].payload].n
        if total > POOL_LIMIT:
            fail(c, NULL, "decoded output too large (a label column over 2 GiB)")
            return NULL
    a = new_array(c, n, 3, 0)
    valid = pbits(c, n)
    offsets = <int32_t*>palloc(c, <size_t>(n + 1) * 4)
    data = <char*>palloc(c, <size_t>total)
    if a == NULL or valid == NULL or offsets == NULL or data == NULL:
        return NULL
    a.buffers[1] = offsets
    a.buffers[2] = data
    total = 0
    offsets[0] = 0
    for i in range(n):
        s = &per_payload[rows[i].payload]
        if s.p != NULL:
            bit_set(valid, i)
            otlp_copy(data + total, s.p, <size_t>s.n)
            total += s.n
        else:
            nulls += 1
        offsets[i + 1] = <int32_t>total
    set_validity(a, valid, nulls)
    return a


cdef ArrowArray* col_label_int(Ctx* c, const int64_t* values, const uint8_t* present) noexcept nogil:
    """A label column of int64: each row takes its payload's value (present[i] == 0: null)."""
    cdef int64_t n = c.rows.n
    cdef const Row* rows = <const Row*>c.rows.data
    cdef int64_t i, nulls = 0
    cdef int32_t p
    cdef ArrowArray* a = new_array(c, n, 2, 0)
    cdef uint8_t* valid = pbits(c, n)
    cdef int64_t* data = <int64_t*>palloc(c, <size_t>n * 8)
    if a == NULL or valid == NULL or data == NULL:
        return NULL
    a.buffers[1] = data
    for i in range(n):
        p = rows[i].payload
        if present[p]:
            bit_set(valid, i)
            data[i] = values[p]
        else:
            nulls += 1
            data[i] = 0
    set_validity(a, valid, nulls)
    return a


cdef inline void entry_text(const Ctx* c, const Entry* e, const uint8_t** p, Py_ssize_t* n) noexcept nogil:
    """The rendered value text of an entry (p = NULL for a null value)."""
    if e.kind == V_STR:
        p[0] = e.val
        n[0] = e.val_len
    elif e.kind == V_ARENA:
        # (an empty rendering may leave the arena unallocated: still a value, not a null)
        p[0] = <const uint8_t*>(c.arena.data + e.bits) if c.arena.data != NULL else <const uint8_t*>""
        n[0] = e.val_len
    else:
        p[0] = NULL
        n[0] = 0


cdef ArrowArray* col_map(Ctx* c, bint resource) noexcept nogil:
    """map<string, string>: the point attributes, or (resource=True) each row's resource attributes."""
    cdef int64_t n = c.rows.n
    cdef const Row* rows = <const Row*>c.rows.data
    cdef const Entry* store = <const Entry*>(c.rattr.data if resource else c.pattr.data)
    cdef const ResourceRec* res = <const ResourceRec*>c.resources.data
    cdef const Entry* e
    cdef int64_t i, j, lo, hi
    cdef int64_t n_entries = 0, k = 0, nulls = 0
    cdef Py_ssize_t key_bytes = 0, val_bytes = 0, koff = 0, voff = 0
    cdef const uint8_t* vp
    cdef Py_ssize_t vn
    cdef int32_t* moffs
    cdef int32_t* koffs
    cdef int32_t* voffs
    cdef char* kdata
    cdef char* vdata
    cdef uint8_t* vvalid
    cdef ArrowArray* m
    cdef ArrowArray* ent
    cdef ArrowArray* keys
    cdef ArrowArray* vals
    # sizes
    for i in range(n):
        if resource:
            lo = res[rows[i].resource].start
            hi = res[rows[i].resource].end
        else:
            lo = rows[i].attr_start
            hi = rows[i].attr_end
        for j in range(lo, hi):
            e = &store[j]
            entry_text(c, e, &vp, &vn)
            if n_entries >= POOL_LIMIT or e.key_len > POOL_LIMIT - key_bytes or vn > POOL_LIMIT - val_bytes:
                fail(c, NULL, "decoded output too large (an attribute column over 2 GiB)")
                return NULL
            n_entries += 1
            key_bytes += e.key_len
            val_bytes += vn
    m = new_array(c, n, 2, 1)
    ent = new_array(c, n_entries, 1, 2)
    keys = new_array(c, n_entries, 3, 0)
    vals = new_array(c, n_entries, 3, 0)
    moffs = <int32_t*>palloc(c, <size_t>(n + 1) * 4)
    koffs = <int32_t*>palloc(c, <size_t>(n_entries + 1) * 4)
    voffs = <int32_t*>palloc(c, <size_t>(n_entries + 1) * 4)
    kdata = <char*>palloc(c, <size_t>key_bytes)
    vdata = <char*>palloc(c, <size_t>val_bytes)
    vvalid = pbits(c, n_entries)
    if m == NULL or ent == NULL or keys == NULL or vals == NULL or moffs == NULL or koffs == NULL or \
            voffs == NULL or kdata == NULL or vdata == NULL or vvalid == NULL:
        return NULL
    m.children[0] = ent
    ent.children[0] = keys
    ent.children[1] = vals
    m.buffers[1] = moffs
    keys.buffers[1] = koffs
    keys.buffers[2] = kdata
    vals.buffers[1] = voffs
    vals.buffers[2] = vdata
    moffs[0] = 0
    koffs[0] = 0
    voffs[0] = 0
    for i in range(n):
        if resource:
            lo = res[rows[i].resource].start
            hi = res[rows[i].resource].end
        else:
            lo = rows[i].attr_start
            hi = rows[i].attr_end
        for j in range(lo, hi):
            e = &store[j]
            otlp_copy(kdata + koff, e.key, e.key_len)
            koff += e.key_len
            entry_text(c, e, &vp, &vn)
            if vp != NULL:
                bit_set(vvalid, k)
                otlp_copy(vdata + voff, vp, <size_t>vn)
                voff += vn
            else:
                nulls += 1
            k += 1
            koffs[k] = <int32_t>koff
            voffs[k] = <int32_t>voff
        moffs[i + 1] = <int32_t>k
    set_validity(vals, vvalid, nulls)
    return m


cdef ArrowArray* col_list(Ctx* c, int which) noexcept nogil:
    """list<int64> / list<float64> from a pool, one range per row of the right kind (null otherwise)."""
    cdef int64_t n = c.rows.n
    cdef const Row* rows = <const Row*>c.rows.data
    cdef const uint64_t* pool
    cdef uint8_t kind
    cdef bint use_b = which == L_BOUNDS or which == L_NEGATIVE
    cdef int64_t i, total = 0, nulls = 0, lo, hi
    cdef ArrowArray* a
    cdef ArrowArray* child
    cdef int32_t* offs
    cdef uint64_t* data
    cdef uint8_t* valid
    if which == L_BUCKETS:
        pool = <const uint64_t*>c.pa.data
        kind = K_HIST
    elif which == L_BOUNDS:
        pool = <const uint64_t*>c.pd.data
        kind = K_HIST
    elif which == L_POSITIVE:
        pool = <const uint64_t*>c.pa.data
        kind = K_EXP
    else:
        pool = <const uint64_t*>c.pb.data
        kind = K_EXP
    for i in range(n):
        if rows[i].kind == kind:
            total += (rows[i].b_end - rows[i].b_start) if use_b else (rows[i].a_end - rows[i].a_start)
            if total > POOL_LIMIT:
                fail(c, NULL, "decoded output too large (a list column over 2**31-1 elements)")
                return NULL
    a = new_array(c, n, 2, 1)
    child = new_array(c, total, 2, 0)
    valid = pbits(c, n)
    offs = <int32_t*>palloc(c, <size_t>(n + 1) * 4)
    data = <uint64_t*>palloc(c, <size_t>total * 8)
    if a == NULL or child == NULL or valid == NULL or offs == NULL or data == NULL:
        return NULL
    a.children[0] = child
    a.buffers[1] = offs
    child.buffers[1] = data
    total = 0
    offs[0] = 0
    for i in range(n):
        if rows[i].kind == kind:
            bit_set(valid, i)
            if use_b:
                lo = rows[i].b_start
                hi = rows[i].b_end
            else:
                lo = rows[i].a_start
                hi = rows[i].a_end
            if hi > lo:
                memcpy(data + total, pool + lo, <size_t>(hi - lo) * 8)
                total += hi - lo
        else:
            nulls += 1
        offs[i + 1] = <int32_t>total
    set_validity(a, valid, nulls)
    return a


cdef ArrowArray* col_quantiles(Ctx* c) noexcept nogil:
    """list<struct<quantile: float64, value: float64>> for summary rows (null otherwise)."""
    cdef int64_t n = c.rows.n
    cdef const Row* rows = <const Row*>c.rows.data
    cdef const QPair* pool = <const QPair*>c.pq.data
    cdef int64_t i, j, total = 0, nulls = 0
    cdef ArrowArray* a
    cdef ArrowArray* st
    cdef ArrowArray* qa
    cdef ArrowArray* va
    cdef int32_t* offs
    cdef double* qd
    cdef double* vd
    cdef uint8_t* valid
    for i in range(n):
        if rows[i].kind == K_SUMMARY:
            total += rows[i].a_end - rows[i].a_start
            if total > POOL_LIMIT:
                fail(c, NULL, "decoded output too large (a list column over 2**31-1 elements)")
                return NULL
    a = new_array(c, n, 2, 1)
    st = new_array(c, total, 1, 2)
    qa = new_array(c, total, 2, 0)
    va = new_array(c, total, 2, 0)
    valid = pbits(c, n)
    offs = <int32_t*>palloc(c, <size_t>(n + 1) * 4)
    qd = <double*>palloc(c, <size_t>total * 8)
    vd = <double*>palloc(c, <size_t>total * 8)
    if a == NULL or st == NULL or qa == NULL or va == NULL or valid == NULL or offs == NULL or \
            qd == NULL or vd == NULL:
        return NULL
    a.children[0] = st
    st.children[0] = qa
    st.children[1] = va
    a.buffers[1] = offs
    qa.buffers[1] = qd
    va.buffers[1] = vd
    total = 0
    offs[0] = 0
    for i in range(n):
        if rows[i].kind == K_SUMMARY:
            bit_set(valid, i)
            for j in range(rows[i].a_start, rows[i].a_end):
                qd[total] = pool[j].quantile
                vd[total] = pool[j].value
                total += 1
        else:
            nulls += 1
        offs[i + 1] = <int32_t>total
    set_validity(a, valid, nulls)
    return a


ctypedef struct LabelCol:
    int is_int
    const Span* spans           # per payload (strings)
    const int64_t* ints         # per payload (ints)
    const uint8_t* present      # per payload (ints)


cdef int build_root(Ctx* c, ArrowArray* root, bint with_payload, const LabelCol* labels,
                    int n_labels) noexcept nogil:
    """Fill ``root`` (a caller-owned struct) as the struct array of every column — kip714.otlp.schema.COLUMNS
    order, then payload_index, then the labels — with all memory in a fresh pool that the root's
    release callback frees. -1 (error recorded, nothing left allocated) on failure."""
    cdef int n_children = 29 + (1 if with_payload else 0) + n_labels
    cdef ArrowArray* col
    cdef ArrowArray** children
    cdef ArrowArray* strings[7]
    cdef ArrowArray* fixed[16]
    cdef int k, i
    # one chunk that (nearly always) holds everything: rows x fixed columns, the strings copied per
    # row (c.amp counts them), the attribute and pool bytes
    cdef size_t guess = <size_t>c.rows.n * (200 + 8 * n_labels) + <size_t>c.amp + \
        <size_t>(c.pattr.n + c.rattr.n) * 16 + <size_t>(c.pa.n + c.pb.n + c.pd.n + 2 * c.pq.n) * 8 + \
        <size_t>c.arena.n + 8192
    memset(root, 0, sizeof(ArrowArray))
    c.out = otlp_pool_new(guess)
    if c.out == NULL:
        return fail_oom(c)
    children = <ArrowArray**>palloc(c, sizeof(ArrowArray*) * <size_t>n_children)
    root.buffers = <const void**>palloc(c, sizeof(void*))
    if children == NULL or root.buffers == NULL:
        return -1
    root.buffers[0] = NULL
    root.length = c.rows.n
    root.n_buffers = 1
    root.n_children = n_children
    root.children = children
    if cols_string(c, strings) < 0 or cols_fixed(c, fixed, with_payload) < 0:
        otlp_pool_free(c.out)
        c.out = NULL
        return -1
    for i in range(n_children):
        if i < 5:
            col = strings[i]                 # metric, description, unit, kind, temporality
        elif i == 5:
            col = fixed[C_MONOTONIC]
        elif i == 6:
            col = col_map(c, False)
        elif i == 7:
            col = col_map(c, True)
        elif i == 8:
            col = strings[S_SCOPE_NAME]
        elif i == 9:
            col = strings[S_SCOPE_VERSION]
        elif i <= 17:
            col = fixed[C_START + (i - 10)]  # start, time, value, value_int, count, sum, min, max
        elif i == 18:
            col = col_list(c, L_BUCKETS)
        elif i == 19:
            col = col_list(c, L_BOUNDS)
        elif i == 20:
            col = fixed[C_SCALE]
        elif i == 21:
            col = fixed[C_ZERO_COUNT]
        elif i == 22:
            col = fixed[C_POS_OFFSET]
        elif i == 23:
            col = col_list(c, L_POSITIVE)
        elif i == 24:
            col = fixed[C_NEG_OFFSET]
        elif i == 25:
            col = col_list(c, L_NEGATIVE)
        elif i == 26:
            col = col_quantiles(c)
        elif i == 27:
            col = fixed[C_FLAGS]
        elif i == 28:
            col = fixed[C_EXEMPLARS]
        elif i == 29 and with_payload:
            col = fixed[C_PAYLOAD]
        else:
            k = i - 29 - (1 if with_payload else 0)
            if labels[k].is_int:
                col = col_label_int(c, labels[k].ints, labels[k].present)
            else:
                col = col_label_string(c, labels[k].spans)
        if col == NULL:
            otlp_pool_free(c.out)
            c.out = NULL
            return -1
        children[i] = col
    root.private_data = c.out
    root.release = otlp_root_release
    c.out = NULL            # now owned by the root (its release frees it)
    return 0
