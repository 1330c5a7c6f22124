# zstd for kip714._codec (included by _codec.pyx; shares its imports and helpers)

# ================================================================================================ zstd

cdef struct ZstdFrame:
    Py_ssize_t end              # offset just past the frame
    uint64_t content_size
    uint64_t bound              # an upper bound on the decompressed size (sum over blocks)
    bint skippable
    bint has_size


cdef const char* _zstd_walk(const unsigned char* p, Py_ssize_t n, Py_ssize_t pos, ZstdFrame* f,
                            Py_ssize_t* bad_at) noexcept nogil:
    """Check one zstd (or skippable) frame's structure: header, every block header and size, the checksum
    field. Computes the declared content size and an upper bound of the output. Nothing is decompressed."""
    cdef Py_ssize_t avail = n - pos, q, hdr
    cdef uint32_t magic, skip, bh, bsize, btype
    cdef uint8_t fhd, wd, fcs_flag
    cdef bint single
    cdef Py_ssize_t did_size, fcs_size
    cdef uint64_t window, base, block_max, bound = 0, fcs = 0
    bad_at[0] = pos
    f.skippable = 0
    f.has_size = 0
    f.content_size = 0
    f.bound = 0
    if avail < 4:
        return "truncated frame magic"
    magic = kc_le32(p + pos)
    if (magic & KC_ZSTD_SKIPPABLE_MASK) == KC_ZSTD_SKIPPABLE_MAGIC:
        if avail < 8:
            return "truncated skippable frame header"
        skip = kc_le32(p + pos + 4)
        if <uint64_t>skip > <uint64_t>(avail - 8):
            return "truncated skippable frame"
        f.skippable = 1
        f.end = pos + 8 + skip
        return NULL
    if magic != KC_ZSTD_MAGIC:
        return "not a zstd frame (bad magic)"
    if avail < 5:
        return "truncated frame header"
    fhd = p[pos + 4]
    fcs_flag = fhd >> 6
    single = (fhd >> 5) & 1
    if fhd & 0x08:
        return "reserved frame header bit set"
    did_size = fhd & 3
    if did_size == 3:
        did_size = 4
    if fcs_flag == 0:
        fcs_size = 1 if single else 0
    else:
        fcs_size = (<Py_ssize_t>1) << fcs_flag         # 1 -> 2, 2 -> 4, 3 -> 8 bytes
    hdr = 5 + (0 if single else 1) + did_size + fcs_size
    if avail < hdr:
        return "truncated frame header"
    q = pos + 5
    window = 0
    if not single:
        wd = p[q]
        q += 1
        base = (<uint64_t>1) << (10 + (wd >> 3))
        window = base + (base >> 3) * (wd & 7)
    q += did_size
    if fcs_size == 1:
        fcs = p[q]
    elif fcs_size == 2:
        fcs = kc_le16(p + q) + 256
    elif fcs_size == 4:
        fcs = kc_le32(p + q)
    elif fcs_size == 8:
        fcs = kc_le64(p + q)
    q += fcs_size
    if single:
        window = fcs
    block_max = window if window < _ZSTD_BLOCK_MAX else _ZSTD_BLOCK_MAX
    while True:
        bad_at[0] = q
        if n - q < 3:
            return "truncated block header"
        bh = kc_le24(p + q)
        q += 3
        btype = (bh >> 1) & 3
        bsize = bh >> 3
        if btype == 3:
            return "reserved block type"
        if btype == 1:                                 # RLE: one byte repeated bsize times
            if n - q < 1:
                return "truncated RLE block"
            bound += bsize
            q += 1
        else:
            if <Py_ssize_t>bsize > n - q:
                return "truncated block"
            bound += bsize if btype == 0 else block_max
            q += bsize
        if bh & 1:
            break
    if fhd & 0x04:
        bad_at[0] = q
        if n - q < 4:
            return "truncated content checksum"
        q += 4
    f.has_size = fcs_size > 0
    f.content_size = fcs
    f.bound = bound
    f.end = q
    return NULL


cdef const char* _zstd_walk_all(const unsigned char* p, Py_ssize_t n, ZstdFrame* first, Py_ssize_t* nframes,
                                uint64_t* declared, Py_ssize_t* bad_at) noexcept nogil:
    cdef ZstdFrame f
    cdef Py_ssize_t pos = 0, count = 0
    cdef uint64_t sizes = 0
    cdef const char* err
    while pos < n:
        if count > 0 and n - pos >= 4 and kc_le32(p + pos) != KC_ZSTD_MAGIC and \
                (kc_le32(p + pos) & KC_ZSTD_SKIPPABLE_MASK) != KC_ZSTD_SKIPPABLE_MAGIC:
            bad_at[0] = pos
            return "trailing bytes after the last frame"
        err = _zstd_walk(p, n, pos, &f, bad_at)
        if err != NULL:
            return err
        if count == 0:
            first[0] = f
        if f.has_size:
            sizes = sizes + f.content_size if sizes + f.content_size >= sizes else <uint64_t>-1
        count += 1
        pos = f.end
    nframes[0] = count
    declared[0] = sizes
    return NULL


# One reusable ZstdDecompressor per concurrent caller: contexts are not thread-safe, so a context is taken
# out of the pool for the duration of a call (list.pop/append are atomic under the GIL). The pool holds the
# contexts' bound ``decompress`` methods (the hot call); ``.__self__`` is the context itself.
cdef list _dctx_pool = []


cdef inline object _dctx_get():
    if _dctx_pool:
        return _dctx_pool.pop()
    return _ZstdDecompressor().decompress


cdef inline void _dctx_put(object dctx_decompress):
    if len(_dctx_pool) < _POOL_MAX:
        _dctx_pool.append(dctx_decompress)


cdef object _zstd_stream(object frame, Py_ssize_t budget, Py_ssize_t start):
    """Bounded streaming decode of one frame: output in steps of at most _ZSTD_STREAM_CHUNK bytes, stopping
    as soon as the budget is exceeded. Tells "too large" from "corrupt" for any frame."""
    cdef Py_ssize_t got = 0, want
    cdef list parts = []
    cdef object dctx_decompress = _dctx_get(), reader = None, chunk
    try:
        try:
            reader = dctx_decompress.__self__.stream_reader(frame, read_across_frames=False)
            while True:
                want = budget - got + 1
                if want > _ZSTD_STREAM_CHUNK:
                    want = _ZSTD_STREAM_CHUNK
                chunk = reader.read(want)
                if not chunk:
                    break
                got += len(chunk)
                if got > budget:
                    _raise_too_large("zstd", f"more than {budget}", budget)
                parts.append(chunk)
        except _ZSTD_ERRORS as e:
            raise CorruptPayloadError(f"zstd: invalid frame at offset {start}: {e}") from None
        finally:
            if reader is not None:
                reader.close()
    finally:
        _dctx_put(dctx_decompress)
    if len(parts) == 1:
        return parts[0]
    return b"".join(parts)


cdef object _zstd_frame(object frame, ZstdFrame* f, Py_ssize_t budget, Py_ssize_t start):
    """Decompress one validated (non-skippable) frame with at most ``budget`` bytes of output; a frame that
    declares its content size must produce exactly that many bytes."""
    cdef object out = _zstd_frame_any(frame, f, budget, start)
    if f.has_size and <uint64_t>len(out) != f.content_size:
        _raise_corrupt("zstd", f"frame at offset {start} decompressed to {len(out)} bytes but declares "
                               f"{f.content_size}")
    return out


cdef object _zstd_frame_any(object frame, ZstdFrame* f, Py_ssize_t budget, Py_ssize_t start):
    cdef object dctx_decompress, out = None
    if f.has_size:
        if f.content_size > <uint64_t>budget:
            _raise_too_large("zstd", f.content_size, budget)
        if f.content_size == 0:
            return _zstd_stream(frame, budget, start)       # zstandard returns b"" without decoding these
    elif f.bound == 0 or f.bound > <uint64_t>budget:
        return _zstd_stream(frame, budget, start)
    # Fast path: one call into a reused context with an output buffer that cannot be exceeded by a valid
    # frame (the content size, or the sum of the block bounds). Any failure is re-examined by the bounded
    # streaming path, which tells "too large" from "corrupt" without trusting the bound.
    dctx_decompress = _dctx_get()
    try:
        if f.has_size:
            out = dctx_decompress(frame)
        else:
            out = dctx_decompress(frame, <Py_ssize_t>f.bound)
    except _ZSTD_ERRORS:
        out = None
    except MemoryError:
        raise TelemetryTooLargeError(f"zstd: cannot allocate {f.content_size or f.bound} bytes") from None
    finally:
        _dctx_put(dctx_decompress)
    if out is None:
        return _zstd_stream(frame, budget, start)
    return out


cdef object _unzstd(object src, const unsigned char* p, Py_ssize_t n, Py_ssize_t limit):
    cdef ZstdFrame first, f
    cdef Py_ssize_t nframes = 0, bad_at = 0, pos, total
    cdef uint64_t declared = 0
    cdef const char* err
    cdef list parts
    cdef object part
    if n >= _NOGIL_THRESHOLD:
        with nogil:
            err = _zstd_walk_all(p, n, &first, &nframes, &declared, &bad_at)
    else:
        err = _zstd_walk_all(p, n, &first, &nframes, &declared, &bad_at)
    if err != NULL:
        _raise_corrupt("zstd", f"{err.decode('ascii')} at offset {bad_at}")
    if declared > <uint64_t>limit:
        _raise_too_large("zstd", declared, limit)
    if nframes == 1 and not first.skippable:
        return _zstd_frame(src, &first, limit, 0)
    parts = []
    pos = 0
    total = 0
    while pos < n:
        if _zstd_walk(p, n, pos, &f, &bad_at) != NULL:
            _raise_changed("zstd")
        if not f.skippable:
            part = _zstd_frame(_read_slice(p, pos, f.end - pos), &f, limit - total, pos)
            total += len(part)
            parts.append(part)
        pos = f.end
    if not parts:
        return b""
    if len(parts) == 1:
        return parts[0]
    return b"".join(parts)
