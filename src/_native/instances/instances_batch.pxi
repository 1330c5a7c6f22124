# Included by _instances.pyx: replaying batches of requests against the table without the GIL
# (InstanceTable.decide_pushes / decide_gets hold the table's mutex around these). The next ids are hashed and
# their buckets prefetched PREFETCH_AHEAD requests ahead.


cdef Py_ssize_t _replay_pushes(Table* t, const unsigned char* idp, Py_ssize_t n, const int64_t* nowp,
                               const int32_t* sidp, const uint8_t* termp, const int8_t* ctp, const int32_t* wsp,
                               int16_t* outp, int64_t subscription_version, int32_t crc_base, int32_t interval,
                               int64_t telemetry_max_bytes) noexcept nogil:
    """N pushes in order: each answer into ``outp``; returns how many were accepted, or -1 when the table
    could not grow (the answers before it are written)."""
    cdef Py_ssize_t k
    cdef uint64_t msb, lsb, h
    cdef uint64_t hashes[PREFETCH_AHEAD]
    cdef uint32_t i
    cdef int16_t err
    cdef Py_ssize_t accepted = 0
    _prefetch_start(t, idp, n, hashes)
    for k in range(n):
        msb = kb_load_be64(idp + 16 * k)
        lsb = kb_load_be64(idp + 16 * k + 8)
        h = hashes[k % PREFETCH_AHEAD]
        _prefetch_step(t, idp, k, n, hashes)
        _advance(t, nowp[k])
        _reclaim(t, RECLAIM_PER_OP)
        i = _resolve(t, msb, lsb, h, subscription_version, crc_base, interval)
        if i == NIL:
            return -1
        err = _push_core(t, i, nowp[k], sidp[k], termp[k] != 0, ctp[k], wsp[k],
                         telemetry_max_bytes)
        if err == E_NONE:
            t.e[i].last_error = E_NONE
            accepted += 1
        outp[k] = err
    return accepted


cdef Py_ssize_t _replay_gets(Table* t, const unsigned char* idp, Py_ssize_t n, const int64_t* nowp, int16_t* outp,
                             int64_t subscription_version, int32_t crc_base, int32_t interval) noexcept nogil:
    """N Gets in order: 0 or 89 per Get into ``outp``; returns how many were allowed, or -1 when the table
    could not grow."""
    cdef Py_ssize_t k
    cdef uint64_t msb, lsb, h
    cdef uint64_t hashes[PREFETCH_AHEAD]
    cdef uint32_t i
    cdef int16_t err
    cdef Py_ssize_t accepted = 0
    _prefetch_start(t, idp, n, hashes)
    for k in range(n):
        msb = kb_load_be64(idp + 16 * k)
        lsb = kb_load_be64(idp + 16 * k + 8)
        h = hashes[k % PREFETCH_AHEAD]
        _prefetch_step(t, idp, k, n, hashes)
        _advance(t, nowp[k])
        _reclaim(t, RECLAIM_PER_OP)
        i = _resolve(t, msb, lsb, h, subscription_version, crc_base, interval)
        if i == NIL:
            return -1
        err = _get_core(t, i, nowp[k])
        if err == E_NONE:
            accepted += 1
        outp[k] = err
    return accepted
