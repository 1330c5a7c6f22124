# compression for kip714._codec (included by _codec.pyx; shares its imports and helpers)

# ========================================================================================== compression

cdef dict _cctx_pools = {}


cdef bytes _gzip_compress(object data, Py_ssize_t n, object level):
    if level is None or level == -1:
        level = 6                  # Deflater.DEFAULT_COMPRESSION
    if not 0 <= level <= 9:
        raise InvalidConfigError(f"gzip level must be in -1..9, got {level}")
    c = _zlib.compressobj(level, _zlib.DEFLATED, -15, 8)
    body = c.compress(data) + c.flush()
    trailer = (_zlib.crc32(data) & 0xFFFFFFFF).to_bytes(4, "little") + (n & 0xFFFFFFFF).to_bytes(4, "little")
    return b"".join((_JAVA_GZIP_HEADER, body, trailer))


cdef bytes _xerial_compress(object data, Py_buffer* view):
    cdef Py_ssize_t n = view.len, nblocks, cap, pos, opos, take, written, max_block
    cdef object out, mv, dst
    cdef PyObject* raw
    nblocks = (n + XERIAL_BLOCK_SIZE - 1) // XERIAL_BLOCK_SIZE
    if nblocks == 0:
        return _XERIAL_HEADER_B
    max_block = _XERIAL_MAX_BLOCK
    cap = 16 + nblocks * (4 + max_block)
    out = PyBytes_FromStringAndSize(NULL, cap)
    memcpy(PyBytes_AS_STRING(out), <const char*>_XERIAL_HEADER_B, 16)
    mv = PyMemoryView_FromMemory(<char*>view.buf, n, PyBUF_READ)
    pos = 0
    opos = 16
    while pos < n:
        take = n - pos if n - pos < XERIAL_BLOCK_SIZE else XERIAL_BLOCK_SIZE
        dst = _write_view(out, opos + 4, cap - opos - 4)
        try:
            written = _cramjam.snappy.compress_raw_into(mv[pos:pos + take], dst)
        finally:
            dst.release()
        kc_store_be32(<unsigned char*>PyBytes_AS_STRING(out) + opos, <uint32_t>written)
        opos += 4 + written
        pos += take
    if opos == cap:
        return out
    if Py_REFCNT(out) != 1:
        return PyBytes_FromStringAndSize(PyBytes_AS_STRING(out), opos)
    raw = <PyObject*>out
    Py_INCREF(out)
    out = None
    _PyBytes_Resize(&raw, opos)
    out = <object>raw
    Py_DECREF(out)
    return out


cdef bytes _lz4_compress(object data, object level):
    cdef int lvl
    if level is None or level == 9:
        lvl = 0                    # Kafka's default level 9 uses lz4-java's fast compressor
    elif isinstance(level, int) and 1 <= level <= 17:
        lvl = level if level < 16 else 16
    else:
        raise InvalidConfigError(f"lz4 level must be in 1..17, got {level!r}")
    return _lz4f.compress(
        data,
        compression_level=lvl,
        block_size=_lz4f.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        block_checksum=False,
        store_size=False,
    )


cdef bytes _zstd_compress(object data, object level):
    cdef list pool
    if level is None:
        level = 3
    if not -131072 <= level <= 22:
        raise InvalidConfigError(f"zstd level must be in -131072..22, got {level}")
    cdef int lvl = level
    pool = _cctx_pools.get(lvl)
    if pool is None:
        pool = _cctx_pools.setdefault(lvl, [])
    cctx = pool.pop() if pool else _zstd.ZstdCompressor(level=lvl, write_content_size=True, write_checksum=False)
    try:
        return cctx.compress(data)
    finally:
        if len(pool) < _POOL_MAX:
            pool.append(cctx)


def compress(data, compression_type, level=None):
    """Compress ``data`` the way Apache Kafka's Java client frames telemetry payloads.

    * 0 none: the bytes as they are (``level`` must be None).
    * 1 gzip: one RFC 1952 member with Java's header (MTIME 0, XFL 0, OS 0xff); ``level`` -1..9, default 6
      (Java's ``Deflater.DEFAULT_COMPRESSION``).
    * 2 snappy: snappy-java's xerial framing, 32 KiB blocks; empty input gives the 16-byte header only
      (``level`` must be None).
    * 3 lz4: one LZ4 frame like ``Lz4BlockOutputStream``: FLG 0x60 (independent blocks, no checksums, no
      content size), BD 0x40 (64 KiB blocks), header checksum, end mark. ``level`` 1..17 as in Kafka: None or
      9 = the fast compressor, anything else = LZ4 HC at that level (capped at 16).
    * 4 zstd: one standard frame, ``level`` default 3 (Kafka's default). The frame records the content size
      (zstd-jni's streaming writer leaves it out; every reader accepts both).

    A level out of its codec's range (or any level for none/snappy) raises InvalidConfigError (INVALID_CONFIG),
    as Kafka refuses it when the client is configured.
    """
    cdef int ctype = _compression_type(compression_type)
    cdef Py_buffer view
    data = _get_buffer(data, &view)
    try:
        if ctype == 0 or ctype == 2:
            if level is not None:
                raise InvalidConfigError(f"{'none' if ctype == 0 else 'snappy'} compression takes no level")
            if ctype == 0:
                return _copy_out(data, &view)
            return _xerial_compress(data, &view)
        src = _read_view(data, &view)
        if level is not None and not isinstance(level, int):
            raise TypeError(f"level must be an int or None, not {type(level).__name__}")
        if ctype == 1:
            return _gzip_compress(src, view.len, level)
        if ctype == 3:
            return _lz4_compress(src, level)
        return _zstd_compress(src, level)
    finally:
        PyBuffer_Release(&view)
