# Included by _otlp.pyx: the OTLP MetricsData walker (one function per message type), GIL-free.
#
# Field numbers and types are those of opentelemetry-proto's descriptors (checked by the tests):
#   MetricsData      resource_metrics=1
#   ResourceMetrics  resource=1 scope_metrics=2 schema_url=3(string)
#   Resource         attributes=1 dropped_attributes_count=2 entity_refs=3
#   EntityRef        schema_url=1 type=2 id_keys=3 description_keys=4 (all strings)
#   ScopeMetrics     scope=1 metrics=2 schema_url=3(string)
#   InstrumentationScope name=1 version=2 attributes=3 dropped_attributes_count=4
#   Metric           name=1 description=2 unit=3 | gauge=5 sum=7 histogram=9 exponential_histogram=10
#                    summary=11 (oneof data) | metadata=12 (KeyValue)
#   Gauge/Summary    data_points=1;  Sum data_points=1 aggregation_temporality=2 is_monotonic=3
#   Histogram/ExponentialHistogram data_points=1 aggregation_temporality=2
#   NumberDataPoint  start=2 time=3 (fixed64) as_double=4 exemplars=5 as_int=6 (sfixed64) attributes=7
#                    flags=8
#   HistogramDataPoint start=2 time=3 count=4 sum=5 bucket_counts=6 (packed fixed64)
#                    explicit_bounds=7 (packed double) exemplars=8 attributes=9 flags=10 min=11 max=12
#   ExponentialHistogramDataPoint attributes=1 start=2 time=3 count=4 sum=5 scale=6 (sint32)
#                    zero_count=7 positive=8 negative=9 flags=10 exemplars=11 min=12 max=13
#                    zero_threshold=14;  Buckets offset=1 (sint32) bucket_counts=2 (packed uint64)
#   SummaryDataPoint start=2 time=3 count=4 sum=5 quantile_values=6 (quantile=1 value=2) attributes=7
#                    flags=8
#   Exemplar         filtered_attributes=7 (the rest are scalars/bytes, skipped)
#   KeyValue         key=1 value=2 key_strindex=3;  KeyValueList/ArrayValue values=1
#   AnyValue         string=1 bool=2 int=3 double=4 array=5 kvlist=6 bytes=7 string_value_strindex=8
#
# upb semantics reproduced here:
# * a known field with another wire type is an unknown field (skipped, never an error); a repeated
#   scalar accepts both its packed and its unpacked form;
# * a non-repeated scalar seen twice keeps the last value; a non-repeated message seen twice is
#   merged; a oneof member replaces the previous member, and a message member starts afresh when the
#   oneof case changes (Metric.data, AnyValue.value);
# * every string field (even in messages that produce no column, such as Exemplar attributes, Metric
#   metadata, scope attributes or EntityRef) must be valid UTF-8; bytes and unknown fields are opaque;
# * nesting (messages and groups) deeper than MAX_DEPTH below MetricsData is an error.


cdef inline int depth_ok(Ctx* c, const Rd* r, int depth) noexcept nogil:
    if depth > MAX_DEPTH:
        return fail(c, r.p, "nesting deeper than 100 levels")
    return 0


# ------------------------------------------------------------------------------- AnyValue / KeyValue

ctypedef struct AV:
    uint32_t case_          # the AnyValue.value oneof field number (0 = unset)
    const uint8_t* p        # string / bytes payload
    Py_ssize_t n
    uint64_t bits           # bool / int / double


cdef int walk_anyvalue(Ctx* c, Rd r, int depth, AV* av) noexcept nogil:
    """Validate one AnyValue occurrence and fold it into ``av`` (a later oneof member replaces)."""
    cdef uint32_t fn, wt
    cdef uint64_t v
    cdef Rd sub, sub2
    cdef uint32_t fn2, wt2
    cdef AV inner
    if depth_ok(c, &r, depth) < 0:
        return -1
    while r.p < r.end:
        if next_field(c, &r, &fn, &wt) < 0:
            return -1
        if wt == 2 and (fn == 1 or fn == 7):
            if rd_ld(c, &r, &sub) < 0:
                return -1
            if fn == 1 and check_utf8(c, &sub) < 0:
                return -1
            av.case_ = fn
            av.p = sub.p
            av.n = sub.end - sub.p
        elif wt == 0 and (fn == 2 or fn == 3 or fn == 8):
            if rd_varint(c, &r, &v) < 0:
                return -1
            av.case_ = fn
            av.bits = (v != 0) if fn == 2 else v
        elif wt == 1 and fn == 4:
            if rd_fixed64(c, &r, &v) < 0:
                return -1
            av.case_ = 4
            av.bits = v
        elif wt == 2 and (fn == 5 or fn == 6):
            # ArrayValue{values=1: AnyValue} / KeyValueList{values=1: KeyValue}
            if rd_ld(c, &r, &sub) < 0:
                return -1
            if depth_ok(c, &sub, depth + 1) < 0:
                return -1
            while sub.p < sub.end:
                if next_field(c, &sub, &fn2, &wt2) < 0:
                    return -1
                if fn2 == 1 and wt2 == 2:
                    if rd_ld(c, &sub, &sub2) < 0:
                        return -1
                    if fn == 5:
                        inner.case_ = 0
                        if walk_anyvalue(c, sub2, depth + 2, &inner) < 0:
                            return -1
                    elif walk_kv(c, sub2, depth + 2, NULL) < 0:
                        return -1
                elif skip_field(c, &sub, fn2, wt2, depth + 1) < 0:
                    return -1
            av.case_ = fn
        elif skip_field(c, &r, fn, wt, depth) < 0:
            return -1
    return 0


cdef int walk_kv(Ctx* c, Rd r, int depth, Entry* e) noexcept nogil:
    """Validate a KeyValue; when ``e`` is not NULL, describe it there (key, and the merged value)."""
    cdef uint32_t fn, wt
    cdef Rd sub
    cdef AV av
    cdef const uint8_t* start = r.p
    cdef const uint8_t* end = r.end
    cdef const uint8_t* key = r.p
    cdef Py_ssize_t key_len = 0
    if depth_ok(c, &r, depth) < 0:
        return -1
    av.case_ = 0
    while r.p < r.end:
        if next_field(c, &r, &fn, &wt) < 0:
            return -1
        if fn == 1 and wt == 2:
            if rd_ld(c, &r, &sub) < 0 or check_utf8(c, &sub) < 0:
                return -1
            key = sub.p
            key_len = sub.end - sub.p
        elif fn == 2 and wt == 2:
            if rd_ld(c, &r, &sub) < 0 or walk_anyvalue(c, sub, depth + 1, &av) < 0:
                return -1
        elif skip_field(c, &r, fn, wt, depth) < 0:
            return -1
    if e == NULL:
        return 0
    e.key = key
    e.key_len = <uint32_t>key_len
    e.val = NULL
    e.val_len = 0
    e.bits = 0
    if av.case_ == 1:
        e.kind = V_STR
        e.val = av.p
        e.val_len = <uint32_t>av.n
    elif av.case_ == 2:
        e.kind = V_STR
        if av.bits:
            e.val = <const uint8_t*>"true"
            e.val_len = 4
        else:
            e.val = <const uint8_t*>"false"
            e.val_len = 5
    elif av.case_ == 3:
        e.kind = V_INT
        e.bits = av.bits
    elif av.case_ == 4:
        e.kind = V_DOUBLE
        e.bits = av.bits
    elif av.case_ == 7:
        e.kind = V_BYTES
        e.val = av.p
        e.val_len = <uint32_t>av.n
    elif av.case_ == 5 or av.case_ == 6:
        e.kind = V_COMPOSITE
        e.val = start
        e.val_len = <uint32_t>(end - start)
    else:
        e.kind = V_NULL
    if e.kind != V_STR and e.kind != V_NULL:
        c.n_render += 1
    return 0


cdef inline int attr_into(Ctx* c, Rd* r, int depth, Vec* store) noexcept nogil:
    """A KeyValue field of a message at ``depth``: validate it and append its Entry to ``store``."""
    cdef Rd sub
    cdef Entry e
    cdef Entry* slot
    if rd_ld(c, r, &sub) < 0 or walk_kv(c, sub, depth + 1, &e) < 0:
        return -1
    slot = <Entry*>push(c, store)
    if slot == NULL:
        return -1
    slot[0] = e
    return 0


cdef inline int kv_check(Ctx* c, Rd* r, int depth) noexcept nogil:
    """A KeyValue field that produces no column (validated only)."""
    cdef Rd sub
    if rd_ld(c, r, &sub) < 0:
        return -1
    return walk_kv(c, sub, depth + 1, NULL)


cdef inline int str_field(Ctx* c, Rd* r, Span* out) noexcept nogil:
    """A string field: UTF-8 checked; ``out`` (may be NULL) gets its bytes."""
    cdef Rd sub
    if rd_ld(c, r, &sub) < 0 or check_utf8(c, &sub) < 0:
        return -1
    if out != NULL:
        out.p = sub.p
        out.n = sub.end - sub.p
    return 0


# ------------------------------------------------------------------- messages producing no column

cdef int walk_exemplar(Ctx* c, Rd r, int depth) noexcept nogil:
    cdef uint32_t fn, wt
    if depth_ok(c, &r, depth) < 0:
        return -1
    while r.p < r.end:
        if next_field(c, &r, &fn, &wt) < 0:
            return -1
        if fn == 7 and wt == 2:
            if kv_check(c, &r, depth) < 0:
                return -1
        elif skip_field(c, &r, fn, wt, depth) < 0:
            return -1
    return 0


cdef int walk_entity_ref(Ctx* c, Rd r, int depth) noexcept nogil:
    cdef uint32_t fn, wt
    if depth_ok(c, &r, depth) < 0:
        return -1
    while r.p < r.end:
        if next_field(c, &r, &fn, &wt) < 0:
            return -1
        if 1 <= fn <= 4 and wt == 2:
            if str_field(c, &r, NULL) < 0:
                return -1
        elif skip_field(c, &r, fn, wt, depth) < 0:
            return -1
    return 0


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
