# Included by _otlp.pyx after otlp_walk_points.pxi: the walker's upper levels, Metric, ScopeMetrics, Resource,
# ResourceMetrics and a whole payload; GIL-free. Field numbers: otlp_walk.pxi.

# ----------------------------------------------------------------------------------- metric levels

cdef int walk_metric_body(Ctx* c, Rd r, int depth, int32_t mi, uint8_t kind) noexcept nogil:
    """Gauge / Sum / Histogram / ExponentialHistogram / Summary."""
    cdef uint32_t fn, wt
    cdef uint64_t v
    cdef Rd sub
    cdef int rc
    if depth_ok(c, &r, depth) < 0:
        return -1
    while r.p < r.end:
        if next_field(c, &r, &fn, &wt) < 0:
            return -1
        if fn == 1 and wt == 2:
            if rd_ld(c, &r, &sub) < 0:
                return -1
            if kind == K_GAUGE or kind == K_SUM:
                rc = walk_number_point(c, sub, depth + 1, mi, kind)
            elif kind == K_HIST:
                rc = walk_histogram_point(c, sub, depth + 1, mi)
            elif kind == K_EXP:
                rc = walk_exp_histogram_point(c, sub, depth + 1, mi)
            else:
                rc = walk_summary_point(c, sub, depth + 1, mi)
            if rc < 0:
                return -1
        elif fn == 2 and wt == 0 and (kind == K_SUM or kind == K_HIST or kind == K_EXP):
            if rd_varint(c, &r, &v) < 0:
                return -1
            (<MetricRec*>c.metrics.data)[mi].temporality = <int32_t>v
        elif fn == 3 and wt == 0 and kind == K_SUM:
            if rd_varint(c, &r, &v) < 0:
                return -1
            (<MetricRec*>c.metrics.data)[mi].monotonic = v != 0
        elif skip_field(c, &r, fn, wt, depth) < 0:
            return -1
    return 0


cdef inline uint8_t kind_of_field(uint32_t fn) noexcept nogil:
    if fn == 5:
        return K_GAUGE
    if fn == 7:
        return K_SUM
    if fn == 9:
        return K_HIST
    if fn == 10:
        return K_EXP
    if fn == 11:
        return K_SUMMARY
    return K_NONE


cdef int walk_metric(Ctx* c, Rd r, int depth) noexcept nogil:
    cdef uint32_t fn, wt
    cdef Rd sub
    cdef MetricRec* m
    cdef int32_t mi
    cdef uint8_t kind
    cdef Marks marks
    cdef Span s
    if depth_ok(c, &r, depth) < 0:
        return -1
    m = <MetricRec*>push(c, &c.metrics)
    if m == NULL:
        return -1
    memset(m, 0, sizeof(MetricRec))
    m.name.p = m.desc.p = m.unit.p = <const uint8_t*>""
    mi = <int32_t>(c.metrics.n - 1)
    ctx_mark(c, &marks)
    while r.p < r.end:
        if next_field(c, &r, &fn, &wt) < 0:
            return -1
        if 1 <= fn <= 3 and wt == 2:
            if str_field(c, &r, &s) < 0:
                return -1
            m = &(<MetricRec*>c.metrics.data)[mi]
            if fn == 1:
                m.name = s
            elif fn == 2:
                m.desc = s
            else:
                m.unit = s
        elif wt == 2 and kind_of_field(fn) != K_NONE:
            kind = kind_of_field(fn)
            m = &(<MetricRec*>c.metrics.data)[mi]
            if m.kind != kind:
                # another oneof member: upb drops the previous one and starts this one afresh
                c.rows.n = marks.rows
                c.pattr.n = marks.pattr
                c.pa.n = marks.pa
                c.pb.n = marks.pb
                c.pd.n = marks.pd
                c.pq.n = marks.pq
                m.kind = kind
                m.temporality = 0
                m.monotonic = 0
            if rd_ld(c, &r, &sub) < 0 or walk_metric_body(c, sub, depth + 1, mi, kind) < 0:
                return -1
        elif fn == 12 and wt == 2:
            if kv_check(c, &r, depth) < 0:
                return -1
        elif skip_field(c, &r, fn, wt, depth) < 0:
            return -1
    m = &(<MetricRec*>c.metrics.data)[mi]
    return amp_add(c, c.rows.n - marks.rows, <uint64_t>(m.name.n + m.desc.n + m.unit.n))


cdef int walk_scope(Ctx* c, Rd r, int depth, int32_t si) noexcept nogil:
    """InstrumentationScope: name/version (last wins), attributes validated only."""
    cdef uint32_t fn, wt
    cdef Span s
    if depth_ok(c, &r, depth) < 0:
        return -1
    while r.p < r.end:
        if next_field(c, &r, &fn, &wt) < 0:
            return -1
        if (fn == 1 or fn == 2) and wt == 2:
            if str_field(c, &r, &s) < 0:
                return -1
            if fn == 1:
                (<ScopeRec*>c.scopes.data)[si].name = s
            else:
                (<ScopeRec*>c.scopes.data)[si].version = s
        elif fn == 3 and wt == 2:
            if kv_check(c, &r, depth) < 0:
                return -1
        elif skip_field(c, &r, fn, wt, depth) < 0:
            return -1
    return 0


cdef int walk_scope_metrics(Ctx* c, Rd r, int depth) noexcept nogil:
    cdef uint32_t fn, wt
    cdef Rd sub
    cdef ScopeRec* s
    cdef int32_t si
    cdef Py_ssize_t row0 = c.rows.n
    if depth_ok(c, &r, depth) < 0:
        return -1
    s = <ScopeRec*>push(c, &c.scopes)
    if s == NULL:
        return -1
    s.name.p = s.version.p = <const uint8_t*>""
    s.name.n = s.version.n = 0
    si = <int32_t>(c.scopes.n - 1)
    c.cur_scope = si
    while r.p < r.end:
        if next_field(c, &r, &fn, &wt) < 0:
            return -1
        if fn == 1 and wt == 2:
            if rd_ld(c, &r, &sub) < 0 or walk_scope(c, sub, depth + 1, si) < 0:
                return -1
        elif fn == 2 and wt == 2:
            if rd_ld(c, &r, &sub) < 0 or walk_metric(c, sub, depth + 1) < 0:
                return -1
        elif fn == 3 and wt == 2:
            if str_field(c, &r, NULL) < 0:
                return -1
        elif skip_field(c, &r, fn, wt, depth) < 0:
            return -1
    s = &(<ScopeRec*>c.scopes.data)[si]
    return amp_add(c, c.rows.n - row0, <uint64_t>(s.name.n + s.version.n))


cdef int walk_resource(Ctx* c, Rd r, int depth) noexcept nogil:
    cdef uint32_t fn, wt
    cdef Rd sub
    if depth_ok(c, &r, depth) < 0:
        return -1
    while r.p < r.end:
        if next_field(c, &r, &fn, &wt) < 0:
            return -1
        if fn == 1 and wt == 2:
            if attr_into(c, &r, depth, &c.rattr) < 0:
                return -1
        elif fn == 3 and wt == 2:
            if rd_ld(c, &r, &sub) < 0 or walk_entity_ref(c, sub, depth + 1) < 0:
                return -1
        elif skip_field(c, &r, fn, wt, depth) < 0:
            return -1
    return 0


cdef inline uint64_t entry_out_bound(const Entry* e) noexcept nogil:
    """Upper bound of the Arrow bytes one map entry costs (key, rendered value, two offsets)."""
    cdef uint64_t v
    if e.kind == V_STR:
        v = e.val_len
    elif e.kind == V_INT or e.kind == V_DOUBLE:
        v = 32
    elif e.kind == V_BYTES:
        v = (<uint64_t>e.val_len + 2) // 3 * 4
    elif e.kind == V_COMPOSITE:
        # JSON text: at most 6 output bytes per input byte (\u00XX escapes, repr of doubles)
        v = <uint64_t>e.val_len * 6 + 16
    else:
        v = 0
    return <uint64_t>e.key_len + v + 8


cdef int walk_resource_metrics(Ctx* c, Rd r, int depth) noexcept nogil:
    cdef uint32_t fn, wt
    cdef Rd sub
    cdef ResourceRec* rec
    cdef int32_t ri
    cdef Py_ssize_t row0 = c.rows.n
    cdef Py_ssize_t i
    cdef uint64_t per_row = 0
    if depth_ok(c, &r, depth) < 0:
        return -1
    rec = <ResourceRec*>push(c, &c.resources)
    if rec == NULL:
        return -1
    rec.start = rec.end = c.rattr.n
    ri = <int32_t>(c.resources.n - 1)
    c.cur_resource = ri
    c.cur_scope = -1
    while r.p < r.end:
        if next_field(c, &r, &fn, &wt) < 0:
            return -1
        if fn == 1 and wt == 2:
            if rd_ld(c, &r, &sub) < 0 or walk_resource(c, sub, depth + 1) < 0:
                return -1
        elif fn == 2 and wt == 2:
            if rd_ld(c, &r, &sub) < 0 or walk_scope_metrics(c, sub, depth + 1) < 0:
                return -1
        elif fn == 3 and wt == 2:
            if str_field(c, &r, NULL) < 0:
                return -1
        elif skip_field(c, &r, fn, wt, depth) < 0:
            return -1
    rec = &(<ResourceRec*>c.resources.data)[ri]
    rec.end = c.rattr.n
    for i in range(rec.start, rec.end):
        per_row += entry_out_bound(&(<Entry*>c.rattr.data)[i])
    if c.rows.n > row0 and (rec.end - rec.start) > POOL_LIMIT // (c.rows.n - row0):
        return fail(c, NULL, "decoded output too large (resource attributes repeated on too many data points)")
    return amp_add(c, c.rows.n - row0, per_row)


cdef int walk_payload(Ctx* c, const uint8_t* data, Py_ssize_t size, int32_t payload) noexcept nogil:
    """Walk one MetricsData message, appending its rows (and everything they refer to) to ``c``."""
    cdef uint32_t fn, wt
    cdef Rd r, sub
    c.base = data
    c.cur_payload = payload
    c.cur_scope = -1
    c.cur_resource = -1
    c.payload_row0 = c.rows.n
    c.amp = 0
    if size >= 0x7FFFFFFF:
        return fail(c, NULL, "payload larger than 2 GiB")
    r.p = data
    r.end = data + size
    while r.p < r.end:
        if next_field(c, &r, &fn, &wt) < 0:
            return -1
        if fn == 1 and wt == 2:
            if rd_ld(c, &r, &sub) < 0 or walk_resource_metrics(c, sub, 1) < 0:
                return -1
        elif skip_field(c, &r, fn, wt, 0) < 0:
            return -1
    return check_int63(c)


cdef int check_int63(Ctx* c) noexcept nogil:
    """Refuse the payload if one of its rows holds an unsigned value the int64 columns cannot.

    OTLP's timestamps and counters are fixed64/uint64, the output columns int64 (Spark has no
    unsigned types). A value of 2**63 or more (a time after the year 2262, a count no client can
    reach) is refused with its field named, never wrapped to a negative number. Checked on the rows
    that survive the walk (after last-wins, merges and dropped oneof members), as upb would see them.
    """
    cdef Py_ssize_t i
    cdef uint32_t j
    cdef const Row* row
    cdef uint64_t acc
    cdef const uint64_t* pa = <const uint64_t*>c.pa.data
    cdef const uint64_t* pb = <const uint64_t*>c.pb.data
    for i in range(c.payload_row0, c.rows.n):
        row = &(<const Row*>c.rows.data)[i]
        if ((<uint64_t>row.start_time) | (<uint64_t>row.time)) >> 63:
            return fail(c, NULL, "start_time_unix_nano or time_unix_nano is 2**63 or more "
                                 "(does not fit the int64 column)")
        acc = (<uint64_t>row.count) | (<uint64_t>row.zero_count)
        if row.kind == K_HIST or row.kind == K_EXP:        # bucket counts; pd (bounds) are doubles
            for j in range(row.a_start, row.a_end):
                acc |= pa[j]
        if row.kind == K_EXP:
            for j in range(row.b_start, row.b_end):
                acc |= pb[j]
        if acc >> 63:
            return fail(c, NULL, "count, zero_count or a bucket count is 2**63 or more "
                                 "(does not fit the int64 column)")
    return 0
