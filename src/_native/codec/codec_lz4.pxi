# lz4 for kip714._codec (included by _codec.pyx; shares its imports and helpers)

# ================================================================================================= lz4

cdef struct Lz4Frame:
    Py_ssize_t end              # offset just past the frame
    Py_ssize_t blocks           # offset of the first block header
    Py_ssize_t block_max        # the frame's maximum block size
    uint64_t bound              # an upper bound on the frame's decompressed size
    uint64_t content_size
    uint32_t content_xxh
    bint has_size
    bint independent
    bint block_checksum
    bint content_checksum


# LZ4 is read as Kafka's broker reads it (clients/.../compress/Lz4BlockInputStream.java with lz4-java):
# * the FLG byte must have version 01, its two low bits clear (so no dictionary id) and *block independence
#   set* ("Dependent block stream is unsupported"): frames with linked blocks are refused;
# * BD: reserved bits clear, block maximum id 4..7; the header checksum is verified;
# * a content size, when flagged, is skipped: it is neither checked against the output nor used as a limit;
# * a block size word whose low 31 bits are 0 is the end mark (0x80000000 too, the stored bit is masked off
#   first); block checksums are verified; a flagged content checksum must be present but is not verified;
# * the reader stops at the end mark: whatever follows the first frame (another frame, stray bytes) is
#   never read, so it is ignored and only the first frame's content is returned.

cdef const char* _lz4_walk(const unsigned char* p, Py_ssize_t n, Py_ssize_t pos, Lz4Frame* f,
                           Py_ssize_t* bad_at) noexcept nogil:
    """Check one LZ4 frame's structure starting at ``pos`` as Kafka's reader does: header and its checksum,
    every block header and size, block checksums, the end mark and the content checksum field's presence.
    Nothing is decompressed."""
    cdef Py_ssize_t avail = n - pos, desc_len, q
    cdef uint8_t flg, bd, bid
    cdef uint32_t v, size
    cdef uint64_t bound = 0
    bad_at[0] = pos
    if avail < 4 or kc_le32(p + pos) != KC_LZ4_MAGIC:
        return "not an LZ4 frame (bad magic)"
    if avail < 7:
        return "truncated frame header"
    flg = p[pos + 4]
    bd = p[pos + 5]
    if (flg >> 6) != 1:
        return "unsupported frame version"
    if flg & 0x02:
        return "reserved FLG bit set"
    if flg & 0x01:
        return "dictionary ids are not supported"
    if bd & 0x8F:
        return "reserved BD bits set"
    bid = (bd >> 4) & 7
    if bid < 4:
        return "invalid block maximum size"
    f.block_max = (<Py_ssize_t>1) << (8 + 2 * bid)
    f.independent = (flg & 0x20) != 0
    if not f.independent:
        return "linked (dependent) blocks are not supported, as in Kafka"
    f.block_checksum = (flg & 0x10) != 0
    f.has_size = (flg & 0x08) != 0
    f.content_checksum = (flg & 0x04) != 0
    desc_len = 10 if f.has_size else 2
    if avail < 4 + desc_len + 1:
        return "truncated frame header"
    if ((kc_xxh32(p + pos + 4, <size_t>desc_len, 0) >> 8) & 0xFF) != p[pos + 4 + desc_len]:
        bad_at[0] = pos + 4 + desc_len
        return "header checksum mismatch"
    f.content_size = kc_le64(p + pos + 6) if f.has_size else 0
    q = pos + 4 + desc_len + 1
    f.blocks = q
    while True:
        bad_at[0] = q
        if n - q < 4:
            return "truncated block header (no end mark)"
        v = kc_le32(p + q)
        q += 4
        size = v & KC_LZ4_SIZE_MASK
        if size == 0:
            break                                  # the end mark (Kafka masks the stored bit off first)
        if <Py_ssize_t>size > f.block_max:
            return "block larger than the frame's maximum block size"
        if <uint64_t>(n - q) < <uint64_t>size + (4 if f.block_checksum else 0):
            return "truncated block"
        if f.block_checksum and kc_xxh32(p + q, size, 0) != kc_le32(p + q + size):
            return "block checksum mismatch"
        bound += size if (v & KC_LZ4_STORED_BIT) != 0 else <uint64_t>f.block_max
        q += size + (4 if f.block_checksum else 0)
    if f.content_checksum:
        bad_at[0] = q
        if n - q < 4:
            return "truncated content checksum"
        f.content_xxh = kc_le32(p + q)
        q += 4
    f.bound = bound
    f.end = q
    return NULL


cdef Py_ssize_t _lz4_decode_block(const unsigned char* p, Py_ssize_t q, uint32_t size, object out, Py_ssize_t opos,
                           Py_ssize_t room, Py_ssize_t history) except -2:
    """Decode the compressed block p[q:q+size] into out[opos:opos+room] (``history`` bytes of earlier output
    before it for linked blocks). Returns the decoded size, or -1 if it is corrupt or needs more than room."""
    cdef object block = _read_slice(p, q, size), chunk
    cdef int64_t exact
    cdef Py_ssize_t written
    try:
        if size < 4 or kc_le32(p + q) > <uint32_t>room:
            return _lz4_block_into(block, _write_view(out, opos, room), room)
        # cramjam retries a block that fails to decode as one with a 4-byte size prefix, which would accept
        # invalid blocks whose first bytes read as a size that fits; walk such blocks first and only decode
        # the ones that are valid, into exactly their size.
        exact = kc_lz4_block_size(p + q, size, 0)
        if exact < 0 or exact > room:
            return -1
        if exact == 0:
            return 0
        written = _lz4_block_into(block, _write_view(out, opos, <Py_ssize_t>exact), <Py_ssize_t>exact)
        return written if written == exact else -1
    except _LZ4_ERRORS:
        return -1


cdef Py_ssize_t _LZ4_SLACK = 1024  # room past the exact output that liblz4's safe decoder may want


cdef Py_ssize_t _lz4_decode_full(const unsigned char* p, Py_ssize_t q, uint32_t size, Py_ssize_t block_max,
                                 object out, Py_ssize_t opos, Py_ssize_t room, Py_ssize_t history) except -4:
    """liblz4 (python-lz4) decode of one block into a whole block's capacity, as Kafka's Lz4BlockInputStream
    (lz4-java) does; copies the result to out[opos:]. Returns its size, -1 if corrupt, -3 if more than room."""
    cdef object chunk
    cdef Py_ssize_t n
    try:
        chunk = _lz4_block_decompress(_read_slice(p, q, size), block_max, False,
                                      _write_view(out, opos - history, history).toreadonly() if history else None)
    except _LZ4_ERRORS:
        return -1
    n = len(chunk)
    if n > room:
        return -3
    memcpy(PyBytes_AS_STRING(out) + opos, PyBytes_AS_STRING(chunk), n)
    return n


cdef object _lz4_frame(const unsigned char* p, Lz4Frame* f, Py_ssize_t start, Py_ssize_t budget):
    """Decompress the frame described by ``f`` (already validated) with at most ``budget`` bytes of output."""
    cdef Py_ssize_t cap, opos = 0, q, room, written, history
    cdef int64_t exact
    cdef uint32_t v, size
    cdef bint stored
    cdef object out
    cdef PyObject* raw
    cdef char* dst
    # the content size is not trusted (Kafka skips it): the output is bounded by the blocks and the budget
    cap = <Py_ssize_t>f.bound if f.bound < <uint64_t>budget else budget
    out = _new_bytes(cap) if cap > 0 else b""
    q = f.blocks
    while True:
        # second pass over a validated frame: bounds re-checked in case the input buffer changed meanwhile
        if f.end - q < 4:
            _raise_changed("lz4")
        v = kc_le32(p + q)
        q += 4
        size = v & KC_LZ4_SIZE_MASK
        if size == 0:
            break
        if <Py_ssize_t>size > f.block_max or <Py_ssize_t>size + (4 if f.block_checksum else 0) > f.end - q:
            _raise_changed("lz4")
        stored = (v & KC_LZ4_STORED_BIT) != 0
        if stored:
            if <Py_ssize_t>size > cap - opos:
                _raise_too_large("lz4", f"more than {budget}", budget)
            dst = PyBytes_AS_STRING(out) + opos
            if size >= _NOGIL_THRESHOLD:
                with nogil:
                    memcpy(dst, p + q, size)
            else:
                memcpy(dst, p + q, size)
            written = size
        else:
            room = cap - opos
            if room > f.block_max:
                room = f.block_max
            history = 0                            # blocks are independent (linked frames are refused)
            written = _lz4_decode_block(p, q, size, out, opos, room, history)
            if written < 0:
                # The fast decoder refused the block: it is corrupt, it decodes to more than the room left
                # under the limit, or it is one of the blocks liblz4 decodes only with room to spare past
                # their end (Kafka's reader always gives a whole block's capacity, so it accepts those).
                # 1. liblz4 with a little slack past the room left: the last case, when it fits.
                written = _lz4_decode_full(p, q, size, min(f.block_max, room + _LZ4_SLACK), out, opos, room,
                                           history)
                if written < 0:
                    # 2. the block walk: a valid block bigger than the room is too large, found without
                    #    allocating anything (decompression bombs end here).
                    if size >= _NOGIL_THRESHOLD:
                        with nogil:
                            exact = kc_lz4_block_size(p + q, size, history)
                    else:
                        exact = kc_lz4_block_size(p + q, size, history)
                    if exact > room and exact <= f.block_max:
                        written = -3
                    elif exact >= 0:
                        written = -1
                    else:
                        # 3. a block the format forbids: decode it exactly as Kafka's reader would
                        written = _lz4_decode_full(p, q, size, f.block_max, out, opos, room, history)
                if written == -1:
                    _raise_corrupt("lz4", f"corrupt block at offset {q - 4}")
                if written < 0:
                    _raise_too_large("lz4", f"more than {budget}", budget)
        opos += written
        q += size + (4 if f.block_checksum else 0)
    # a content size and a content checksum are not verified: Kafka's reader skips the one and reads the
    # other without checking it ("TODO: verify this content checksum")
    if opos == cap:
        return out
    if opos == 0:
        return b""
    if Py_REFCNT(out) != 1:
        return PyBytes_FromStringAndSize(PyBytes_AS_STRING(out), opos)
    # Shrink the over-allocated buffer in place. `out` is referenced only by this frame's local variable:
    # move that reference into `raw` and let _PyBytes_Resize reallocate it.
    raw = <PyObject*>out
    Py_INCREF(out)
    out = None
    _PyBytes_Resize(&raw, opos)
    out = <object>raw
    Py_DECREF(out)
    return out


cdef object _unlz4(const unsigned char* p, Py_ssize_t n, Py_ssize_t limit):
    cdef Lz4Frame frame
    cdef Py_ssize_t bad_at = 0
    cdef const char* err
    # Kafka's reader ends at the first frame's end mark: nothing after it is looked at
    if n >= _NOGIL_THRESHOLD:
        with nogil:
            err = _lz4_walk(p, n, 0, &frame, &bad_at)
    else:
        err = _lz4_walk(p, n, 0, &frame, &bad_at)
    if err != NULL:
        _raise_corrupt("lz4", f"{err.decode('ascii')} at offset {bad_at}")
    return _lz4_frame(p, &frame, 0, limit)


def _lz4_block_size(block, history=0):
    """The size an LZ4 block decodes to (``history`` bytes of earlier output available), or -1 if it is
    invalid. Test hook for the block walk used by :func:`decompress`."""
    cdef Py_buffer view
    cdef int64_t r
    cdef uint64_t h = history
    block = _get_buffer(block, &view)
    try:
        r = kc_lz4_block_size(<const unsigned char*>view.buf, <size_t>view.len, h)
    finally:
        PyBuffer_Release(&view)
    return r
