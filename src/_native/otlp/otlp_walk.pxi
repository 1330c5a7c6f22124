# Included by _otlp.pyx: the OTLP MetricsData walker (one function per message type), GIL-free. This file:
# attribute values (AnyValue/KeyValue) and the messages that produce no column; the data points are in
# otlp_walk_points.pxi and the metric, scope and resource levels in otlp_walk_metrics.pxi (included after it).
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
