# snappy for kip714._codec (included by _codec.pyx; shares its imports and helpers)

# ============================================================================================== snappy

cdef Py_ssize_t _snappy_preamble(const unsigned char* p, Py_ssize_t n, uint64_t* value) noexcept nogil:
    """Parse the varint uncompressed length at the start of a raw snappy block; returns its byte count or 0."""
    cdef uint64_t v = 0
    cdef Py_ssize_t i = 0
    cdef unsigned int shift = 0
    cdef unsigned char b
    while i < n and i < 5:
        b = p[i]
        v |= (<uint64_t>(b & 0x7F)) << shift
        i += 1
        if b < 0x80:
            if v > KC_U32_MAX:
                return 0
            value[0] = v
            return i
        shift += 7
    return 0


# A xerial stream is read as snappy-java's SnappyInputStream reads it (Kafka's SnappyCompression wraps it,
# checked against snappy-java itself in tests/test_snappy_java.py):
# * the first header's version fields are not looked at (only its 8-byte magic);
# * where a chunk length is due, fewer than 4 bytes left mean the end of the stream: 1-3 stray bytes after
#   the last chunk are ignored;
# * a chunk length equal to the magic's first four bytes starts a concatenated stream's header: fewer than
#   12 more bytes is an error; if the 8-byte magic does not follow, the stream ends there (the rest is
#   ignored); a version under 1 is an error;
# * a negative or zero chunk length, a truncated chunk or an invalid snappy block is an error.

cdef const char* _xerial_walk(const unsigned char* p, Py_ssize_t n, uint64_t* total,
                              Py_ssize_t* nchunks, Py_ssize_t* bad_at, Py_ssize_t* end,
                              bint* not_a_header) noexcept nogil:
    """Validate a xerial stream (first header already checked) and sum the chunks' uncompressed lengths;
    ``end`` is where SnappyInputStream stops reading, unless ``not_a_header`` is set: then the stream holds
    a 4-byte magic prefix that does not start a header, and how much of the rest Kafka reads depends on
    how its reads are cut (_snappy_java_read)."""
    cdef Py_ssize_t pos = 16
    cdef uint32_t clen
    cdef uint64_t ulen, sum_ = 0
    cdef Py_ssize_t count = 0
    while n - pos >= 4:
        bad_at[0] = pos
        clen = kc_be32(p + pos)
        if clen == KC_XERIAL_MAGIC_HEAD:
            # SnappyInputStream accepts concatenated streams: a full header where a chunk length would be
            if n - pos < 16:
                return "truncated concatenated stream header"
            if memcmp(p + pos, <const void*>_XERIAL_MAGIC_C, 8) != 0:
                not_a_header[0] = True
                break
            if <int>kc_be32(p + pos + 8) < 1:
                return "unsupported snappy-java stream version"
            pos += 16
            continue
        if clen == 0 or clen > KC_I32_MAX:
            return "invalid chunk length"
        pos += 4
        if <uint64_t>clen > <uint64_t>(n - pos):
            return "truncated chunk"
        if _snappy_preamble(p + pos, clen, &ulen) == 0:
            return "invalid snappy length preamble in chunk"
        sum_ += ulen
        count += 1
        pos += clen
    total[0] = sum_
    nchunks[0] = count
    end[0] = pos
    return NULL


cdef object _unsnappy(const unsigned char* p, Py_ssize_t n, Py_ssize_t limit):
    cdef uint64_t ulen = 0, total = 0
    cdef Py_ssize_t nchunks = 0, bad_at = 0, pos, opos, end = 0
    cdef bint not_a_header = False
    cdef uint32_t clen
    cdef const char* err
    cdef Py_ssize_t hdr
    cdef unsigned char* dst
    cdef object out
    if n >= 10 and memcmp(p, <const void*>_FRAMING_MAGIC_C, 10) == 0:
        _raise_corrupt("snappy", "the snappy framing format (ff 06 00 00 sNaPpY) is not accepted, as in Kafka")
    if n >= 16 and memcmp(p, <const void*>_XERIAL_MAGIC_C, 8) == 0:
        # ---- xerial (snappy-java SnappyOutputStream) framing; shorter input is read as a raw block, as
        #      snappy-java does
        if n >= _NOGIL_THRESHOLD:
            with nogil:
                err = _xerial_walk(p, n, &total, &nchunks, &bad_at, &end, &not_a_header)
        else:
            err = _xerial_walk(p, n, &total, &nchunks, &bad_at, &end, &not_a_header)
        if err != NULL:
            _raise_corrupt("snappy", f"xerial stream: {err.decode('ascii')} at offset {bad_at}")
        if not_a_header:
            return _snappy_java_read(p, n, limit)
        if total > <uint64_t>limit:
            _raise_too_large("snappy", total, limit)
        if total == 0:
            out = b""
        else:
            out = _new_bytes(<Py_ssize_t>total)
        pos = 16
        opos = 0
        while pos < end:
            # second pass over a validated stream; the bounds are re-checked in case the caller's buffer
            # (a bytearray, say) was modified meanwhile
            if n - pos < 4:
                _raise_changed("snappy")
            clen = kc_be32(p + pos)
            if clen == KC_XERIAL_MAGIC_HEAD:
                if n - pos < 16 or memcmp(p + pos, <const void*>_XERIAL_MAGIC_C, 8) != 0:
                    _raise_changed("snappy")
                pos += 16
                continue
            pos += 4
            if clen == 0 or <uint64_t>clen > <uint64_t>(n - pos):
                _raise_changed("snappy")
            hdr = _snappy_preamble(p + pos, clen, &ulen)
            if hdr == 0 or <uint64_t>opos + ulen > total:
                _raise_changed("snappy")
            # decoded in place, into exactly this chunk's ulen bytes of the output
            dst = <unsigned char*>PyBytes_AS_STRING(out) + opos if ulen else NULL
            if ulen >= _NOGIL_THRESHOLD:     # (decoding costs by the bytes it writes)
                with nogil:
                    err = kc_snappy_decode(p + pos + hdr, <size_t>clen - <size_t>hdr, dst, <size_t>ulen)
            else:
                err = kc_snappy_decode(p + pos + hdr, <size_t>clen - <size_t>hdr, dst, <size_t>ulen)
            if err != NULL:
                raise CorruptPayloadError(f"snappy: xerial chunk at offset {pos - 4}: {err.decode('ascii')}")
            opos += <Py_ssize_t>ulen
            pos += clen
        return out
    # ---- a raw snappy block (what librdkafka sends; snappy-java falls back to it without the magic),
    #      decoded straight into the bytes object returned
    hdr = _snappy_preamble(p, n, &ulen)
    if hdr == 0:
        _raise_corrupt("snappy", "invalid raw snappy length preamble")
    if ulen > <uint64_t>limit:
        _raise_too_large("snappy", ulen, limit)
    if ulen == 0:
        out = b""
        dst = NULL
    else:
        out = _new_bytes(<Py_ssize_t>ulen)
        dst = <unsigned char*>PyBytes_AS_STRING(out)
    if ulen >= _NOGIL_THRESHOLD:           # (decoding costs by the bytes it writes)
        with nogil:
            err = kc_snappy_decode(p + hdr, <size_t>(n - hdr), dst, <size_t>ulen)
    else:
        err = kc_snappy_decode(p + hdr, <size_t>(n - hdr), dst, <size_t>ulen)
    if err != NULL:
        _raise_corrupt("snappy", f"invalid raw snappy block: {err.decode('ascii')}")
    return out


include "codec_snappy_java.pxi"
