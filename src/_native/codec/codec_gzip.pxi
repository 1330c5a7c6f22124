# gzip for kip714._codec (included by _codec.pyx; shares its imports and helpers)

# ================================================================================================ gzip

#: java.util.zip.GZIPInputStream's buffer as Kafka sizes it (GzipCompression.wrapForInput: 8 KiB)
cdef Py_ssize_t _JAVA_GZIP_BUFFER = 8192


cdef inline Py_ssize_t _after_zero(const unsigned char* p, Py_ssize_t pos, Py_ssize_t n) noexcept:
    """The offset after the zero byte that ends the string at ``pos`` (-1 if the input ends first)."""
    cdef const unsigned char* z = <const unsigned char*>memchr(p + pos, 0, <size_t>(n - pos))
    return -1 if z == NULL else (z - p) + 1


cdef Py_ssize_t _gzip_header(const unsigned char* p, Py_ssize_t n) except -2:
    """Length of the gzip member header at ``p`` as ``GZIPInputStream.readHeader`` reads it, or -1 where
    that throws: bad magic, a method other than deflate, the input ending inside the header, or a header
    CRC (FHCRC) that does not match. Reserved flag bits are ignored, as Java does (zlib refuses them)."""
    cdef Py_ssize_t pos = 10, xlen
    cdef unsigned char flg
    if n < 10 or p[0] != 0x1f or p[1] != 0x8b or p[2] != 8:
        return -1
    flg = p[3]
    if flg & 4:                                         # FEXTRA
        if n - pos < 2:
            return -1
        xlen = kc_le16(p + pos)
        pos += 2
        if n - pos < xlen:
            return -1
        pos += xlen
    if flg & 8:                                         # FNAME
        pos = _after_zero(p, pos, n)
    if flg & 16 and pos >= 0:                           # FCOMMENT
        pos = _after_zero(p, pos, n)
    if pos < 0:
        return -1
    if flg & 2:                                         # FHCRC: low 16 bits of the header's CRC-32
        if n - pos < 2:
            return -1
        if kc_le16(p + pos) != (_zlib.crc32(_read_slice(p, 0, pos)) & 0xFFFF):
            return -1
        pos += 2
    return pos


cdef object _gunzip(const unsigned char* p, Py_ssize_t n, Py_ssize_t limit):
    """RFC 1952 members read exactly as Kafka's broker reads them (``GZIPInputStream``, 8 KiB buffer).

    Each member's header is parsed by Java's rules (``_gzip_header``) and its deflate data inflated by
    zlib with an output cap per call. zlib's own gzip parser then checks the trailer (CRC-32 and ISIZE)
    as it inflates; a header with reserved flag bits, which Java ignores and zlib refuses, is inflated
    raw instead and its trailer checked here (the common path keeps the CRC inside zlib's inflate: no
    second pass over the output). What follows a member is decided as Java decides it: another member
    when the bytes parse as a gzip header (its body must then be valid); ignored when they do not; and,
    Java's quirk, ignored without being looked at when they are at most 18 bytes that all sit in the
    reader's current 8 KiB buffer. The buffer positions are modelled: Java reads the first header
    straight from the stream, then fills its buffer 8192 bytes at a time, and a trailer or header that
    runs past the buffer is read from the stream too.
    """
    cdef Py_ssize_t pos = 0, total = 0, h, body, end, buf_end, rem, in_pos, m
    cdef list parts = None
    cdef object chunk, first = None, d
    cdef bint raw
    h = _gzip_header(p, n)
    if h < 0:
        if n >= 2 and p[0] == 0x1f and p[1] == 0x8b:
            _raise_corrupt("gzip", "not a gzip member (bad header)")
        _raise_corrupt("gzip", "not a gzip member (bad magic)")
    buf_end = h                              # the first header is read from the stream: the buffer is empty
    while True:
        raw = (p[pos + 3] & 0xE0) != 0      # reserved flag bits: zlib's gzip parser would refuse them
        body = pos + h if raw else pos
        d = _zlib_decompressobj(-15 if raw else 31)
        try:
            chunk = d.decompress(_read_slice(p, body, n - body), limit - total + 1)
        except _ZLIB_ERRORS as e:
            raise CorruptPayloadError(f"gzip: invalid member at offset {pos}: {e}") from None
        total += len(chunk)
        if total > limit:
            _raise_too_large("gzip", f"more than {limit}", limit)
        if not d.eof:
            _raise_corrupt("gzip", f"truncated gzip member at offset {pos}")
        end = n - len(d.unused_data)          # after the deflate data (raw) or after the trailer (zlib)
        if not raw:
            end -= 8                          # the trailer's offset
        elif n - end < 8:
            _raise_corrupt("gzip", f"truncated gzip trailer at offset {end}")
        elif (kc_le32(p + end) != (_zlib.crc32(chunk) & 0xFFFFFFFF)
                or kc_le32(p + end + 4) != (len(chunk) & 0xFFFFFFFF)):
            _raise_corrupt("gzip", f"gzip trailer at offset {end} does not match the data (CRC or size)")
        if first is None:
            first = chunk
        else:
            if parts is None:
                parts = [first]
            parts.append(chunk)
        # Java: where its buffer ended when the inflater finished, and how much of it was left over
        if end > buf_end:
            buf_end = min(buf_end + ((end - 1 - buf_end) // _JAVA_GZIP_BUFFER + 1) * _JAVA_GZIP_BUFFER, n)
        rem = buf_end - end                   # Inflater.getRemaining(): the trailer and what follows
        in_pos = buf_end if buf_end > end + 8 else end + 8
        if n - in_pos <= 0 and rem <= 26:     # Java only looks for another member past this point
            break
        pos = end + 8
        h = _gzip_header(p + pos, n - pos)
        if h < 0:                             # "ignore any malformed": the rest is dropped
            break
        m = 8 + h
        if rem <= m:                          # the header ran past the buffer: it refills after the header
            buf_end = pos + h
    if parts is None:
        return first
    return b"".join(parts)
