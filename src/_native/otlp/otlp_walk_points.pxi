# Included by _otlp.pyx after otlp_walk.pxi: the data point walkers (number, histogram, exponential histogram,
# summary), each appending one row; GIL-free. Field numbers: otlp_walk.pxi.

# --------------------------------------------------------------------------------------- data points

cdef Row* new_row(Ctx* c, const Rd* r, int32_t metric, uint8_t kind) noexcept nogil:
    cdef Row* row
    if c.rows.n - c.payload_row0 >= c.max_rows:
        fail(c, r.p, "too many data points in one payload (over max_rows)")
        return NULL
    row = <Row*>push(c, &c.rows)
    if row == NULL:
        return NULL
    memset(row, 0, sizeof(Row))
    row.metric = metric
    row.scope = c.cur_scope
    row.resource = c.cur_resource
    row.payload = c.cur_payload
    row.kind = kind
    row.attr_start = <uint32_t>c.pattr.n
    return row


cdef inline int rd_double_field(Ctx* c, Rd* r, double* out) noexcept nogil:
    cdef uint64_t v
    if rd_fixed64(c, r, &v) < 0:
        return -1
    out[0] = otlp_bits_to_double(v)
    return 0


cdef int walk_number_point(Ctx* c, Rd r, int depth, int32_t metric, uint8_t kind) noexcept nogil:
    cdef uint32_t fn, wt
    cdef uint64_t v
    cdef Rd sub
    cdef Row* row
    if depth_ok(c, &r, depth) < 0:
        return -1
    row = new_row(c, &r, metric, kind)
    if row == NULL:
        return -1
    while r.p < r.end:
        if next_field(c, &r, &fn, &wt) < 0:
            return -1
        if wt == 1 and (fn == 2 or fn == 3 or fn == 4 or fn == 6):
            if rd_fixed64(c, &r, &v) < 0:
                return -1
            if fn == 2:
                row.start_time = <int64_t>v
            elif fn == 3:
                row.time = <int64_t>v
            else:
                row.value_bits = v
                row.vkind = NUM_DOUBLE if fn == 4 else NUM_INT
        elif fn == 7 and wt == 2:
            if attr_into(c, &r, depth, &c.pattr) < 0:
                return -1
        elif fn == 5 and wt == 2:
            if rd_ld(c, &r, &sub) < 0 or walk_exemplar(c, sub, depth + 1) < 0:
                return -1
            row.exemplars += 1
        elif fn == 8 and wt == 0:
            if rd_varint(c, &r, &v) < 0:
                return -1
            row.flags = <uint32_t>v
        elif skip_field(c, &r, fn, wt, depth) < 0:
            return -1
    row.attr_end = <uint32_t>c.pattr.n
    return 0


cdef int packed_fixed64(Ctx* c, Rd* r, Vec* pool) noexcept nogil:
    """A packed fixed64/double field (wire type 2) appended to ``pool`` (8-byte elements)."""
    cdef Rd sub
    cdef Py_ssize_t k
    if rd_ld(c, r, &sub) < 0:
        return -1
    k = sub.end - sub.p
    if k % 8:
        return fail(c, sub.p, "packed fixed64 field whose length is not a multiple of 8")
    k //= 8
    if reserve(c, pool, k) < 0:
        return -1
    otlp_le64_copy(<uint64_t*>(pool.data + pool.n * 8), sub.p, <size_t>k)
    pool.n += k
    return 0


cdef int one_fixed64(Ctx* c, Rd* r, Vec* pool) noexcept nogil:
    """An unpacked element (wire type 1) of a repeated fixed64/double field."""
    cdef uint64_t v
    cdef uint64_t* slot
    if rd_fixed64(c, r, &v) < 0:
        return -1
    slot = <uint64_t*>push(c, pool)
    if slot == NULL:
        return -1
    slot[0] = v
    return 0


cdef int walk_histogram_point(Ctx* c, Rd r, int depth, int32_t metric) noexcept nogil:
    cdef uint32_t fn, wt
    cdef uint64_t v
    cdef Rd sub
    cdef Row* row
    if depth_ok(c, &r, depth) < 0:
        return -1
    row = new_row(c, &r, metric, K_HIST)
    if row == NULL:
        return -1
    row.a_start = <uint32_t>c.pa.n
    row.b_start = <uint32_t>c.pd.n
    while r.p < r.end:
        if next_field(c, &r, &fn, &wt) < 0:
            return -1
        if wt == 1 and (fn == 2 or fn == 3 or fn == 4 or fn == 5 or fn == 11 or fn == 12):
            if rd_fixed64(c, &r, &v) < 0:
                return -1
            if fn == 2:
                row.start_time = <int64_t>v
            elif fn == 3:
                row.time = <int64_t>v
            elif fn == 4:
                row.count = <int64_t>v
            elif fn == 5:
                row.sum = otlp_bits_to_double(v)
                row.has |= HAS_SUM
            elif fn == 11:
                row.min = otlp_bits_to_double(v)
                row.has |= HAS_MIN
            else:
                row.max = otlp_bits_to_double(v)
                row.has |= HAS_MAX
        elif fn == 9 and wt == 2:
            if attr_into(c, &r, depth, &c.pattr) < 0:
                return -1
        elif fn == 6 and (wt == 2 or wt == 1):
            if (packed_fixed64(c, &r, &c.pa) if wt == 2 else one_fixed64(c, &r, &c.pa)) < 0:
                return -1
        elif fn == 7 and (wt == 2 or wt == 1):
            if (packed_fixed64(c, &r, &c.pd) if wt == 2 else one_fixed64(c, &r, &c.pd)) < 0:
                return -1
        elif fn == 8 and wt == 2:
            if rd_ld(c, &r, &sub) < 0 or walk_exemplar(c, sub, depth + 1) < 0:
                return -1
            row.exemplars += 1
        elif fn == 10 and wt == 0:
            if rd_varint(c, &r, &v) < 0:
                return -1
            row.flags = <uint32_t>v
        elif skip_field(c, &r, fn, wt, depth) < 0:
            return -1
    row.attr_end = <uint32_t>c.pattr.n
    row.a_end = <uint32_t>c.pa.n
    row.b_end = <uint32_t>c.pd.n
    return 0


cdef inline int32_t zigzag32(uint64_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t>v
    return <int32_t>((u >> 1) ^ (<uint32_t>0 - (u & 1)))


cdef int walk_buckets(Ctx* c, Rd r, int depth, int32_t* offset, Vec* pool) noexcept nogil:
    """ExponentialHistogramDataPoint.Buckets: offset (sint32) and bucket_counts (uint64, packed or not)."""
    cdef uint32_t fn, wt
    cdef uint64_t v
    cdef Rd sub
    cdef uint64_t* slot
    if depth_ok(c, &r, depth) < 0:
        return -1
    while r.p < r.end:
        if next_field(c, &r, &fn, &wt) < 0:
            return -1
        if fn == 1 and wt == 0:
            if rd_varint(c, &r, &v) < 0:
                return -1
            offset[0] = zigzag32(v)
        elif fn == 2 and wt == 2:
            if rd_ld(c, &r, &sub) < 0:
                return -1
            # each varint takes at least one byte: reserve once, then fill
            if reserve(c, pool, sub.end - sub.p) < 0:
                return -1
            slot = <uint64_t*>pool.data
            while sub.p < sub.end:
                if rd_varint(c, &sub, &v) < 0:
                    return -1
                slot[pool.n] = v
                pool.n += 1
        elif fn == 2 and wt == 0:
            if rd_varint(c, &r, &v) < 0:
                return -1
            slot = <uint64_t*>push(c, pool)
            if slot == NULL:
                return -1
            slot[0] = v
        elif skip_field(c, &r, fn, wt, depth) < 0:
            return -1
    return 0


cdef int walk_exp_histogram_point(Ctx* c, Rd r, int depth, int32_t metric) noexcept nogil:
    cdef uint32_t fn, wt
    cdef uint64_t v
    cdef Rd sub
    cdef Row* row
    if depth_ok(c, &r, depth) < 0:
        return -1
    row = new_row(c, &r, metric, K_EXP)
    if row == NULL:
        return -1
    row.a_start = <uint32_t>c.pa.n
    row.b_start = <uint32_t>c.pb.n
    while r.p < r.end:
        if next_field(c, &r, &fn, &wt) < 0:
            return -1
        if wt == 1 and (fn == 2 or fn == 3 or fn == 4 or fn == 5 or fn == 7 or fn == 12 or fn == 13):
            if rd_fixed64(c, &r, &v) < 0:
                return -1
            if fn == 2:
                row.start_time = <int64_t>v
            elif fn == 3:
                row.time = <int64_t>v
            elif fn == 4:
                row.count = <int64_t>v
            elif fn == 5:
                row.sum = otlp_bits_to_double(v)
                row.has |= HAS_SUM
            elif fn == 7:
                row.zero_count = <int64_t>v
            elif fn == 12:
                row.min = otlp_bits_to_double(v)
                row.has |= HAS_MIN
            else:
                row.max = otlp_bits_to_double(v)
                row.has |= HAS_MAX
        elif fn == 1 and wt == 2:
            if attr_into(c, &r, depth, &c.pattr) < 0:
                return -1
        elif fn == 6 and wt == 0:
            if rd_varint(c, &r, &v) < 0:
                return -1
            row.scale = zigzag32(v)
        elif (fn == 8 or fn == 9) and wt == 2:
            if rd_ld(c, &r, &sub) < 0:
                return -1
            if fn == 8:
                if walk_buckets(c, sub, depth + 1, &row.pos_offset, &c.pa) < 0:
                    return -1
            elif walk_buckets(c, sub, depth + 1, &row.neg_offset, &c.pb) < 0:
                return -1
        elif fn == 11 and wt == 2:
            if rd_ld(c, &r, &sub) < 0 or walk_exemplar(c, sub, depth + 1) < 0:
                return -1
            row.exemplars += 1
        elif fn == 10 and wt == 0:
            if rd_varint(c, &r, &v) < 0:
                return -1
            row.flags = <uint32_t>v
        elif skip_field(c, &r, fn, wt, depth) < 0:
            return -1
    row.attr_end = <uint32_t>c.pattr.n
    row.a_end = <uint32_t>c.pa.n
    row.b_end = <uint32_t>c.pb.n
    return 0


cdef int walk_quantile(Ctx* c, Rd r, int depth) noexcept nogil:
    """SummaryDataPoint.ValueAtQuantile → one QPair (absent fields are 0.0, repeated ones last-wins)."""
    cdef uint32_t fn, wt
    cdef QPair q
    cdef QPair* slot
    if depth_ok(c, &r, depth) < 0:
        return -1
    q.quantile = 0.0
    q.value = 0.0
    while r.p < r.end:
        if next_field(c, &r, &fn, &wt) < 0:
            return -1
        if fn == 1 and wt == 1:
            if rd_double_field(c, &r, &q.quantile) < 0:
                return -1
        elif fn == 2 and wt == 1:
            if rd_double_field(c, &r, &q.value) < 0:
                return -1
        elif skip_field(c, &r, fn, wt, depth) < 0:
            return -1
    slot = <QPair*>push(c, &c.pq)
    if slot == NULL:
        return -1
    slot[0] = q
    return 0


cdef int walk_summary_point(Ctx* c, Rd r, int depth, int32_t metric) noexcept nogil:
    cdef uint32_t fn, wt
    cdef uint64_t v
    cdef Rd sub
    cdef Row* row
    if depth_ok(c, &r, depth) < 0:
        return -1
    row = new_row(c, &r, metric, K_SUMMARY)
    if row == NULL:
        return -1
    row.a_start = <uint32_t>c.pq.n
    row.has = HAS_SUM   # SummaryDataPoint.sum has no presence: always a value (0.0 when absent)
    while r.p < r.end:
        if next_field(c, &r, &fn, &wt) < 0:
            return -1
        if wt == 1 and (fn == 2 or fn == 3 or fn == 4 or fn == 5):
            if rd_fixed64(c, &r, &v) < 0:
                return -1
            if fn == 2:
                row.start_time = <int64_t>v
            elif fn == 3:
                row.time = <int64_t>v
            elif fn == 4:
                row.count = <int64_t>v
            else:
                row.sum = otlp_bits_to_double(v)
        elif fn == 7 and wt == 2:
            if attr_into(c, &r, depth, &c.pattr) < 0:
                return -1
        elif fn == 6 and wt == 2:
            if rd_ld(c, &r, &sub) < 0 or walk_quantile(c, sub, depth + 1) < 0:
                return -1
        elif fn == 8 and wt == 0:
            if rd_varint(c, &r, &v) < 0:
                return -1
            row.flags = <uint32_t>v
        elif skip_field(c, &r, fn, wt, depth) < 0:
            return -1
    row.attr_end = <uint32_t>c.pattr.n
    row.a_end = <uint32_t>c.pq.n
    return 0
