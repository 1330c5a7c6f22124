# Included by _otlp.pyx: the post-pass that turns non-string attribute values into text, exactly as
# kip714.otlp.reference.render_any_value does: ints in decimal, doubles as Python's repr() (CPython's own
# PyOS_double_to_string, so it needs the GIL), bytes as base64, arrays / kvlists as compact JSON.
# It runs after the walk, on bytes the walk has already validated, and appends to Ctx.arena.


cdef int arena_reserve(Ctx* c, Py_ssize_t extra) except -1:
    if extra > PY_SSIZE_T_MAX - c.arena.n or (
            c.arena.n + extra > c.arena.cap and vec_grow(&c.arena, c.arena.n + extra) < 0):
        raise MemoryError()
    return 0


cdef inline int arena_put(Ctx* c, const char* s, Py_ssize_t n) except -1:
    arena_reserve(c, n)
    if n:
        memcpy(c.arena.data + c.arena.n, s, <size_t>n)
    c.arena.n += n
    return 0


cdef int arena_double(Ctx* c, double d) except -1:
    cdef char* s = PyOS_double_to_string(d, b'r', 0, Py_DTSF_ADD_DOT_0, NULL)
    try:
        arena_put(c, s, <Py_ssize_t>strlen(s))
    finally:
        PyMem_Free(s)
    return 0


cdef int arena_int(Ctx* c, int64_t v) except -1:
    arena_reserve(c, 24)
    c.arena.n += otlp_i64_dec(v, c.arena.data + c.arena.n)
    return 0


cdef int arena_b64(Ctx* c, const uint8_t* p, Py_ssize_t n) except -1:
    cdef Py_ssize_t k = <Py_ssize_t>otlp_b64_len(<size_t>n)
    arena_reserve(c, k)
    otlp_b64(p, <size_t>n, c.arena.data + c.arena.n)
    c.arena.n += k
    return 0


cdef int arena_json_str(Ctx* c, const uint8_t* p, Py_ssize_t n) except -1:
    """json.dumps(s, ensure_ascii=False) of an (already valid) UTF-8 string."""
    cdef Py_ssize_t k = <Py_ssize_t>otlp_json_escaped_len(p, <size_t>n)
    arena_reserve(c, k + 2)
    c.arena.data[c.arena.n] = b'"'
    c.arena.n += 1
    c.arena.n += <Py_ssize_t>otlp_json_escape(p, <size_t>n, c.arena.data + c.arena.n)
    c.arena.data[c.arena.n] = b'"'
    c.arena.n += 1
    return 0


cdef int render_fail(Ctx* c) except -1:
    # Unreachable on bytes the walk accepted; kept so that a bug can never read out of bounds.
    raise CorruptPayloadError("internal error while rendering an attribute value")


cdef int spans_push(Vec* v, Rd sub) except -1:
    if v.n >= v.cap and vec_grow(v, v.n + 1) < 0:
        raise MemoryError()
    (<Rd*>v.data)[v.n] = sub
    v.n += 1
    return 0


cdef int render_kv_values(Ctx* c, Rd kv, Vec* values, Span* key) except -1:
    """The key (last occurrence) and every ``value`` occurrence of a KeyValue."""
    cdef uint32_t fn = 0, wt = 0
    cdef Rd sub
    sub.p = sub.end = NULL
    key.p = <const uint8_t*>""
    key.n = 0
    while kv.p < kv.end:
        if next_field(c, &kv, &fn, &wt) < 0:
            render_fail(c)
        if fn == 1 and wt == 2:
            if rd_ld(c, &kv, &sub) < 0:
                render_fail(c)
            key.p = sub.p
            key.n = sub.end - sub.p
        elif fn == 2 and wt == 2:
            if rd_ld(c, &kv, &sub) < 0:
                render_fail(c)
            spans_push(values, sub)
        elif skip_field(c, &kv, fn, wt, 0) < 0:
            render_fail(c)
    return 0


cdef int render_any(Ctx* c, const Rd* spans, Py_ssize_t nspans) except -1:
    """Append the JSON of the AnyValue made by merging ``spans`` (upb's merge of repeated occurrences)."""
    cdef uint32_t fn = 0, wt = 0, fn2 = 0, wt2 = 0
    cdef uint32_t case_ = 0
    cdef uint64_t bits = 0
    cdef const uint8_t* sp = NULL
    cdef Py_ssize_t sn = 0
    cdef Rd r, sub, elem
    cdef Py_ssize_t i, j, first
    cdef Vec comp, inner
    cdef Span key
    cdef dict seen
    cdef list order, last_key, last_off, last_len
    cdef object kb
    cdef Py_ssize_t start, mark
    vec_init(&comp, sizeof(Rd))
    vec_init(&inner, sizeof(Rd))
    try:
        for i in range(nspans):
            r = spans[i]
            while r.p < r.end:
                if next_field(c, &r, &fn, &wt) < 0:
                    render_fail(c)
                if (wt == 2 and (fn == 1 or fn == 5 or fn == 6 or fn == 7)) or (
                        wt == 0 and (fn == 2 or fn == 3 or fn == 8)) or (wt == 1 and fn == 4):
                    if wt == 2:
                        if rd_ld(c, &r, &sub) < 0:
                            render_fail(c)
                        if fn == 5 or fn == 6:
                            if case_ != fn:
                                comp.n = 0
                            spans_push(&comp, sub)
                        else:
                            sp = sub.p
                            sn = sub.end - sub.p
                    elif wt == 0:
                        if rd_varint(c, &r, &bits) < 0:
                            render_fail(c)
                    elif rd_fixed64(c, &r, &bits) < 0:
                        render_fail(c)
                    case_ = fn
                elif skip_field(c, &r, fn, wt, 0) < 0:
                    render_fail(c)

        if case_ == 1:
            arena_json_str(c, sp, sn)
        elif case_ == 2:
            if bits:
                arena_put(c, "true", 4)
            else:
                arena_put(c, "false", 5)
        elif case_ == 3:
            arena_int(c, <int64_t>bits)
        elif case_ == 4:
            arena_double(c, otlp_bits_to_double(bits))
        elif case_ == 7:
            arena_put(c, '"', 1)
            arena_b64(c, sp, sn)
            arena_put(c, '"', 1)
        elif case_ == 5:
            arena_put(c, "[", 1)
            first = 1
            for i in range(comp.n):
                r = (<Rd*>comp.data)[i]
                while r.p < r.end:
                    if next_field(c, &r, &fn2, &wt2) < 0:
                        render_fail(c)
                    if fn2 == 1 and wt2 == 2:
                        if rd_ld(c, &r, &elem) < 0:
                            render_fail(c)
                        if not first:
                            arena_put(c, ",", 1)
                        first = 0
                        render_any(c, &elem, 1)
                    elif skip_field(c, &r, fn2, wt2, 0) < 0:
                        render_fail(c)
            arena_put(c, "]", 1)
        elif case_ == 6:
            # Like kip714.otlp.reference: {kv.key: value for kv in values} — a repeated key keeps its first position
            # and takes its last value. Every pair is rendered at the end of the arena first, then the
            # object is assembled after them and moved down over them.
            start = c.arena.n
            seen = {}
            order = []
            last_key = []
            last_off = []
            last_len = []
            for i in range(comp.n):
                r = (<Rd*>comp.data)[i]
                while r.p < r.end:
                    if next_field(c, &r, &fn2, &wt2) < 0:
                        render_fail(c)
                    if fn2 == 1 and wt2 == 2:
                        if rd_ld(c, &r, &elem) < 0:
                            render_fail(c)
                        inner.n = 0
                        render_kv_values(c, elem, &inner, &key)
                        mark = c.arena.n
                        render_any(c, <Rd*>inner.data, inner.n)
                        kb = PyBytes_FromStringAndSize(<const char*>key.p, key.n)
                        j = seen.get(kb, -1)
                        if j < 0:
                            seen[kb] = len(order)
                            order.append(kb)
                            last_off.append(mark)
                            last_len.append(c.arena.n - mark)
                        else:
                            last_off[j] = mark
                            last_len[j] = c.arena.n - mark
                    elif skip_field(c, &r, fn2, wt2, 0) < 0:
                        render_fail(c)
            mark = c.arena.n
            arena_put(c, "{", 1)
            for j in range(len(order)):
                if j:
                    arena_put(c, ",", 1)
                kb = order[j]
                arena_json_str(c, <const uint8_t*>PyBytes_AS_STRING(kb), PyBytes_GET_SIZE(kb))
                arena_put(c, ":", 1)
                arena_reserve(c, <Py_ssize_t>last_len[j])
                memcpy(c.arena.data + c.arena.n, c.arena.data + <Py_ssize_t>last_off[j],
                       <size_t>(<Py_ssize_t>last_len[j]))
                c.arena.n += <Py_ssize_t>last_len[j]
            arena_put(c, "}", 1)
            memmove(c.arena.data + start, c.arena.data + mark, <size_t>(c.arena.n - mark))
            c.arena.n = start + (c.arena.n - mark)
        else:
            arena_put(c, "null", 4)
    finally:
        vec_free(&comp)
        vec_free(&inner)
    return 0


cdef int render_entry(Ctx* c, Entry* e) except -1:
    cdef Py_ssize_t start = c.arena.n
    cdef Rd kv
    cdef Vec values
    cdef Span key
    if e.kind == V_INT:
        arena_int(c, <int64_t>e.bits)
    elif e.kind == V_DOUBLE:
        arena_double(c, otlp_bits_to_double(e.bits))
    elif e.kind == V_BYTES:
        arena_b64(c, e.val, e.val_len)
    elif e.kind == V_COMPOSITE:
        kv.p = e.val
        kv.end = e.val + e.val_len
        vec_init(&values, sizeof(Rd))
        try:
            render_kv_values(c, kv, &values, &key)
            render_any(c, <Rd*>values.data, values.n)
        finally:
            vec_free(&values)
    else:
        return 0
    if c.arena.n - start > POOL_LIMIT:
        raise CorruptPayloadError("decoded output too large (an attribute value renders to over 2 GiB)")
    e.kind = V_ARENA
    e.bits = <uint64_t>start
    e.val = NULL
    e.val_len = <uint32_t>(c.arena.n - start)
    return 0


cdef int render_all(Ctx* c) except -1:
    """Render every entry the walk left as int / double / bytes / array / kvlist."""
    cdef Py_ssize_t i
    cdef Entry* e
    if c.n_render == 0:
        return 0
    for i in range(c.pattr.n):
        e = &(<Entry*>c.pattr.data)[i]
        if e.kind != V_STR and e.kind != V_NULL and e.kind != V_ARENA:
            render_entry(c, e)
    for i in range(c.rattr.n):
        e = &(<Entry*>c.rattr.data)[i]
        if e.kind != V_STR and e.kind != V_NULL and e.kind != V_ARENA:
            render_entry(c, e)
    return 0
