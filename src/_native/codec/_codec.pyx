# cython: language_level=3
"""Bounded decompression and Java-compatible compression of KIP-714 telemetry payloads (``kip714._codec``).

The broker side of KIP-714 receives a PushTelemetry ``Metrics`` field compressed with the codec named by
``CompressionType`` and must turn it back into the serialized OTLP ``MetricsData`` without letting a small
request allocate a large amount of memory. :func:`decompress` does that for the five Kafka codec ids and
every framing real clients send; :func:`compress` writes what the Java client writes.

Decompression rules shared by all codecs
----------------------------------------
* ``max_output`` is a hard limit on the decompressed size. Exactly ``max_output`` bytes is accepted; one byte
  more raises :class:`~kip714.errors.TelemetryTooLargeError` (TELEMETRY_TOO_LARGE). Where the framing
  declares the size up front (snappy's length preamble, a zstd content size) the check happens before
  anything is allocated or decompressed; otherwise output is produced in bounded steps and decompression
  stops as soon as the limit is passed, so a decompression bomb costs at most about ``max_output`` bytes.
* Anything that does not decompress (bad magic, bad checksum, truncation, corrupt blocks) raises
  :class:`~kip714.errors.CorruptPayloadError` (INVALID_RECORD). What follows the end of a stream is
  treated as Kafka's readers treat it (see :func:`decompress`): gzip as ``GZIPInputStream`` (ignored
  unless it parses as another member's header), snappy as snappy-java's ``SnappyInputStream`` (1-3 stray
  bytes ignored), LZ4 as Kafka's ``Lz4BlockInputStream`` (everything after the first frame ignored);
  zstd: see :func:`decompress`. The exceptions of the underlying codec packages never escape.
* A type id outside 0..4 raises :class:`~kip714.errors.UnsupportedCompressionTypeError`
  (UNSUPPORTED_COMPRESSION_TYPE).
* An empty payload with a codec other than none raises :class:`~kip714.errors.CorruptPayloadError`: none of
  Kafka's readers accept an empty stream (``GZIPInputStream`` and ``Lz4BlockInputStream`` hit EOF in the
  header, snappy-java refuses empty input, zstd-jni reports a truncated frame). A broker never gets that far
  in practice: Kafka does not decompress an empty ``Metrics`` field at all, so callers that want Kafka's
  broker behaviour should check for an empty payload before calling :func:`decompress`.

The codec packages (zlib, cramjam, lz4, zstandard) do the entropy decoding and release the GIL while they do;
the frame walking, checksums and copies done here run without the GIL when the input is large.
"""

from cpython.buffer cimport PyBUF_READ, PyBUF_SIMPLE, PyBUF_WRITE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, _PyBytes_Resize
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_REFCNT
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memchr, memcmp, memcpy

import zlib as _zlib
from operator import index as _operator_index

import cramjam as _cramjam
import lz4.block as _lz4_block
import lz4.frame as _lz4f
import zstandard as _zstd

from kip714.errors import CorruptPayloadError, TelemetryTooLargeError, UnsupportedCompressionTypeError


cdef extern from "codec_bytes.h" nogil:
    uint32_t kc_le16(const unsigned char* p)
    uint32_t kc_le24(const unsigned char* p)
    uint32_t kc_le32(const unsigned char* p)
    uint64_t kc_le64(const unsigned char* p)
    uint32_t kc_be32(const unsigned char* p)
    void kc_store_be32(unsigned char* p, uint32_t v)

cdef extern from "codec_formats.h" nogil:
    const uint32_t KC_LZ4_MAGIC
    const uint32_t KC_LZ4_STORED_BIT
    const uint32_t KC_LZ4_SIZE_MASK
    const uint32_t KC_ZSTD_MAGIC
    const uint32_t KC_ZSTD_SKIPPABLE_MASK
    const uint32_t KC_ZSTD_SKIPPABLE_MAGIC
    const uint32_t KC_XERIAL_MAGIC_HEAD
    const uint64_t KC_U32_MAX
    const uint32_t KC_I32_MAX

cdef extern from "codec_lz4.h" nogil:
    int64_t kc_lz4_block_size(const unsigned char* src, size_t n, uint64_t history)

cdef extern from "codec_xxhash.h" nogil:
    uint32_t kc_xxh32(const unsigned char* p, size_t length, uint32_t seed)


__all__ = [
    "decompress",
    "compress",
    "detect_framing",
    "xxh32",
    "NONE",
    "GZIP",
    "SNAPPY",
    "LZ4",
    "ZSTD",
    "XERIAL_MAGIC",
    "XERIAL_HEADER",
    "XERIAL_BLOCK_SIZE",
    "SNAPPY_FRAMING_MAGIC",
    "LZ4_FRAME_MAGIC",
    "ZSTD_FRAME_MAGIC",
    "GZIP_MAGIC",
]

# Kafka's compression type ids (CompressionType.forId).
NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

#: snappy-java's SnappyOutputStream stream header: magic, int32 BE version 1, int32 BE compatible version 1.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
#: SnappyOutputStream's default block size (what Kafka uses).
XERIAL_BLOCK_SIZE = 32 * 1024
#: Google's snappy *framing format* stream identifier; Kafka rejects it and so does kip714.
SNAPPY_FRAMING_MAGIC = b"\xff\x06\x00\x00sNaPpY"
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
ZSTD_FRAME_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"

# Java's GZIPOutputStream header: ID1 ID2 CM=8 FLG=0 MTIME=0 XFL=0 OS=0xff (JDK 16+ writes 0xff "unknown").
cdef bytes _JAVA_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"

cdef const char* _XERIAL_MAGIC_C = b"\x82SNAPPY\x00"
cdef const char* _FRAMING_MAGIC_C = b"\xff\x06\x00\x00sNaPpY"
cdef bytes _XERIAL_HEADER_B = XERIAL_HEADER
_XERIAL_MAX_BLOCK = _cramjam.snappy.compress_raw_max_len(bytes(XERIAL_BLOCK_SIZE))

cdef enum:
    _ZSTD_BLOCK_MAX = 128 * 1024         # zstd Block_Maximum_Size is min(Window_Size, 128 KiB)
    _NOGIL_THRESHOLD = 32 * 1024         # release the GIL for walks/copies/hashes over at least this many bytes
    _ZSTD_STREAM_CHUNK = 256 * 1024      # read size of the bounded zstd streaming path
    _POOL_MAX = 16                       # idle zstd contexts kept per pool

# Anything larger than this is treated as "no limit" (keeps limit + 1 and sums far from overflow).
cdef Py_ssize_t _LIMIT_CAP = (<Py_ssize_t>1) << 60

# Exceptions the codec packages raise on bad input; all of them become CorruptPayloadError.
cdef tuple _ZLIB_ERRORS = (_zlib.error, ValueError, OverflowError, EOFError)
cdef tuple _CRAMJAM_ERRORS = (_cramjam.DecompressionError, ValueError, OverflowError, RuntimeError)
cdef tuple _LZ4_ERRORS = (_lz4_block.LZ4BlockError, _cramjam.DecompressionError, ValueError, OverflowError,
                          RuntimeError)
cdef tuple _ZSTD_ERRORS = (_zstd.ZstdError, ValueError, OverflowError, RuntimeError)

# The package functions on the hot paths, looked up once.
cdef object _zlib_decompressobj = _zlib.decompressobj
cdef object _snappy_raw = _cramjam.snappy.decompress_raw
cdef object _snappy_raw_into = _cramjam.snappy.decompress_raw_into
cdef object _lz4_block_into = _cramjam.lz4.decompress_block_into
cdef object _lz4_block_decompress = _lz4_block.decompress
cdef object _ZstdDecompressor = _zstd.ZstdDecompressor


cdef bint _cramjam_lz4_block_usable():
    """cramjam >= 2.11 decodes a block without a size prefix into a caller's buffer (``output_len``)."""
    out = bytearray(1)
    try:
        return _lz4_block_into(b"\x10a", out, 1) == 1 and out == b"a"
    except Exception:
        return False


# Independent LZ4 blocks are decoded by cramjam straight into the output when it can; python-lz4 otherwise.
cdef bint _CRAMJAM_LZ4 = _cramjam_lz4_block_usable()


# ------------------------------------------------------------------------------------------ small helpers

cdef int _compression_type(object compression_type) except -1:
    cdef int overflow = 0
    cdef long long v
    if not isinstance(compression_type, int):        # int, bool and IntEnum (CompressionType) pass as they are
        try:
            compression_type = _operator_index(compression_type)    # numpy integers and other int-likes
        except TypeError:
            raise TypeError(f"compression_type must be an int, not {type(compression_type).__name__}") from None
    v = PyLong_AsLongLongAndOverflow(compression_type, &overflow)
    if overflow == 0 and 0 <= v <= 4:
        return <int>v
    raise UnsupportedCompressionTypeError(f"unsupported compression type {int(compression_type)}")


cdef Py_ssize_t _limit(object max_output) except -1:
    cdef int overflow = 0
    cdef long long v
    if not isinstance(max_output, int):
        raise TypeError(f"max_output must be an int, not {type(max_output).__name__}")
    v = PyLong_AsLongLongAndOverflow(max_output, &overflow)
    if overflow < 0 or (overflow == 0 and v < 0):
        raise ValueError(f"max_output must be >= 0, got {max_output}")
    if overflow > 0 or v > _LIMIT_CAP:
        return _LIMIT_CAP
    return <Py_ssize_t>v


cdef object _get_buffer(object data, Py_buffer* view):
    """Export ``data`` as a contiguous byte buffer; returns the object actually exported (a copy only for
    non-contiguous buffers)."""
    try:
        PyObject_GetBuffer(data, view, PyBUF_SIMPLE)
        return data
    except BufferError:
        if not isinstance(data, memoryview):
            raise
    data = data.tobytes()            # a non-contiguous memoryview: one copy, then the normal path
    PyObject_GetBuffer(data, view, PyBUF_SIMPLE)
    return data


cdef inline object _read_view(object data, Py_buffer* view):
    """The input as an object the codec packages read without a copy (valid while ``view`` is held)."""
    if type(data) is bytes:
        return data
    return PyMemoryView_FromMemory(<char*>view.buf, view.len, PyBUF_READ)


cdef inline object _read_slice(const unsigned char* p, Py_ssize_t offset, Py_ssize_t size):
    """A read-only memoryview over input bytes [offset, offset+size) (valid while the input buffer is held)."""
    return PyMemoryView_FromMemory(<char*>p + offset, size, PyBUF_READ)


cdef object _new_bytes(Py_ssize_t size):
    """A fresh uninitialised bytes object of ``size`` > 0 bytes (to be filled before anyone else sees it)."""
    try:
        return PyBytes_FromStringAndSize(NULL, size)
    except MemoryError:
        raise TelemetryTooLargeError(f"cannot allocate {size} bytes for the decompressed payload") from None


cdef inline object _write_view(object buf, Py_ssize_t offset, Py_ssize_t size):
    """A writable memoryview over ``size`` bytes at ``offset`` of a fresh bytes object being filled."""
    return PyMemoryView_FromMemory(PyBytes_AS_STRING(buf) + offset, size, PyBUF_WRITE)


cdef int _raise_corrupt(str codec, str what) except -1:
    raise CorruptPayloadError(f"{codec}: {what}")


cdef int _raise_changed(str codec) except -1:
    raise CorruptPayloadError(f"{codec}: the payload changed while it was being decompressed")


cdef int _raise_too_large(str codec, object size, Py_ssize_t limit) except -1:
    raise TelemetryTooLargeError(f"{codec}: decompressed payload ({size} bytes) exceeds the limit of {limit} bytes")


def xxh32(data, seed=0):
    """XXH32 of ``data`` (any contiguous buffer) with ``seed`` (0..2**32-1): the checksum of LZ4 frames."""
    cdef Py_buffer view
    cdef uint32_t s, h
    if not isinstance(seed, int) or seed < 0 or seed > 0xFFFFFFFF:
        raise ValueError("seed must be an int in 0..2**32-1")
    s = <uint32_t>seed
    data = _get_buffer(data, &view)
    try:
        if view.len >= _NOGIL_THRESHOLD:
            with nogil:
                h = kc_xxh32(<const unsigned char*>view.buf, <size_t>view.len, s)
        else:
            h = kc_xxh32(<const unsigned char*>view.buf, <size_t>view.len, s)
    finally:
        PyBuffer_Release(&view)
    return h


# ================================================================================================ none

cdef object _copy_out(object data, Py_buffer* view):
    cdef object out
    cdef Py_ssize_t n = view.len
    if type(data) is bytes:
        return data
    if n == 0:
        return b""
    out = PyBytes_FromStringAndSize(NULL, n)
    cdef char* dst = PyBytes_AS_STRING(out)
    if n >= _NOGIL_THRESHOLD:
        with nogil:
            memcpy(dst, view.buf, <size_t>n)
    else:
        memcpy(dst, view.buf, <size_t>n)
    return out


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


cdef object _unsnappy(object src, const unsigned char* p, Py_ssize_t n, Py_ssize_t limit):
    cdef uint64_t ulen = 0, total = 0
    cdef Py_ssize_t nchunks = 0, bad_at = 0, pos, opos, written, end = 0
    cdef bint not_a_header = False
    cdef uint32_t clen
    cdef const char* err
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
            if clen == 0 or <uint64_t>clen > <uint64_t>(n - pos) or _snappy_preamble(p + pos, clen, &ulen) == 0 \
                    or <uint64_t>opos + ulen > total:
                _raise_changed("snappy")
            try:
                if ulen == 0:
                    written = len(_snappy_raw(_read_slice(p, pos, clen)))
                else:
                    written = _snappy_raw_into(_read_slice(p, pos, clen), _write_view(out, opos, <Py_ssize_t>ulen))
            except _CRAMJAM_ERRORS as e:
                raise CorruptPayloadError(f"snappy: xerial chunk at offset {pos - 4}: {e}") from None
            if written != <Py_ssize_t>ulen:
                _raise_corrupt("snappy", f"xerial chunk at offset {pos - 4} decompressed to {written} bytes, "
                                         f"expected {ulen}")
            opos += written
            pos += clen
        return out
    # ---- a raw snappy block (what librdkafka sends; snappy-java falls back to it without the magic)
    if _snappy_preamble(p, n, &ulen) == 0:
        _raise_corrupt("snappy", "invalid raw snappy length preamble")
    if ulen > <uint64_t>limit:
        _raise_too_large("snappy", ulen, limit)
    try:
        if ulen == 0:
            written = len(_snappy_raw(src))
            out = b""
        else:
            out = _new_bytes(<Py_ssize_t>ulen)
            written = _snappy_raw_into(src, _write_view(out, 0, <Py_ssize_t>ulen))
    except _CRAMJAM_ERRORS as e:
        raise CorruptPayloadError(f"snappy: invalid raw snappy block: {e}") from None
    if written != <Py_ssize_t>ulen:
        _raise_corrupt("snappy", f"raw block decompressed to {written} bytes, expected {ulen}")
    return out


include "codec_snappy_java.pxi"


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
        if history or not _CRAMJAM_LZ4:
            chunk = _lz4_block_decompress(block, room, False,
                                          _write_view(out, opos - history, history).toreadonly() if history else None)
            written = len(chunk)
            if written > room:
                return -1
            memcpy(PyBytes_AS_STRING(out) + opos, PyBytes_AS_STRING(chunk), written)
            return written
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


def _use_cramjam_lz4(flag):
    """Choose cramjam (True) or python-lz4 (False) for independent LZ4 blocks; returns the previous choice.
    Test hook: python-lz4 is what runs when the installed cramjam is older than 2.11."""
    global _CRAMJAM_LZ4
    previous = _CRAMJAM_LZ4
    _CRAMJAM_LZ4 = bool(flag) and _cramjam_lz4_block_usable()
    return previous


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


# ========================================================================================== public API

def decompress(data, compression_type, max_output):
    """Decompress a KIP-714 ``Metrics`` payload compressed with Kafka codec ``compression_type``.

    ``data`` is any contiguous buffer (bytes, bytearray, memoryview); it is not copied. Returns ``bytes`` of
    at most ``max_output`` bytes (``max_output >= 0``; a negative value is a ValueError).

    * 0 none: the bytes as they are.
    * 1 gzip: one or more RFC 1952 members (any deflate block type, including the stored blocks librdkafka
      writes), read as Kafka's broker reads them (``java.util.zip.GZIPInputStream``, 8 KiB buffer):
      reserved header flags are ignored; bytes after a member that do not parse as a gzip header are
      ignored, as are up to 18 bytes still in the reader's current 8 KiB buffer; bytes that do parse as a
      header start another member, which must then be valid.
    * 2 snappy: a raw snappy block (librdkafka) or snappy-java's xerial framing (Java clients), including
      concatenated xerial streams, read as Kafka's ``SnappyInputStream`` reads them (checked against
      snappy-java): 1-3 stray bytes after the last chunk, and anything after a 4-byte magic prefix that
      does not continue as a stream header, are ignored; input under 16 bytes is a raw block. Google's
      framing format is rejected as Kafka rejects it. The total size comes from the length preambles and
      is checked before anything is allocated.
    * 3 lz4: an LZ4 frame read as Kafka's broker reads it (``Lz4BlockInputStream``): independent blocks
      only (linked blocks are refused), header and block checksums verified, a content size skipped and a
      content checksum read but not verified, the end mark required; whatever follows the first frame's
      end (another frame, stray bytes) is ignored. Dictionary ids and skippable frames are rejected.
    * 4 zstd: one or more standard zstd frames, with or without a content size or checksum; skippable frames
      are skipped. A declared content size over the limit is refused before decoding.

    Raises CorruptPayloadError (INVALID_RECORD) for anything that does not decompress, including an empty
    payload with a codec other than none; TelemetryTooLargeError (TELEMETRY_TOO_LARGE) when the output would
    exceed ``max_output``; UnsupportedCompressionTypeError (UNSUPPORTED_COMPRESSION_TYPE) for a type id
    outside 0..4.
    """
    cdef int ctype = _compression_type(compression_type)
    cdef Py_ssize_t limit = _limit(max_output)
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef Py_ssize_t n
    data = _get_buffer(data, &view)
    try:
        p = <const unsigned char*>view.buf
        n = view.len
        if ctype == 0:
            if n > limit:
                _raise_too_large("none", n, limit)
            return _copy_out(data, &view)
        if n == 0:
            _raise_corrupt(("gzip", "snappy", "lz4", "zstd")[ctype - 1], "empty payload")
        if ctype == 4:
            return _unzstd(_read_view(data, &view), p, n, limit)
        if ctype == 3:
            return _unlz4(p, n, limit)
        if ctype == 2:
            return _unsnappy(_read_view(data, &view), p, n, limit)
        return _gunzip(p, n, limit)
    finally:
        PyBuffer_Release(&view)


def detect_framing(data, compression_type):
    """Name the framing of a payload without decompressing it.

    Returns ``'none'`` for type 0; ``'empty'`` for an empty payload of another type; otherwise ``'gzip'``,
    ``'xerial'`` / ``'snappy-framing'`` (Google's, rejected by :func:`decompress`) / ``'raw'`` for snappy,
    ``'lz4-frame'``, ``'zstd'`` / ``'zstd-skippable'``, or ``'unknown'`` when the magic bytes do not match.
    """
    cdef int ctype = _compression_type(compression_type)
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef Py_ssize_t n
    cdef uint32_t magic
    data = _get_buffer(data, &view)
    try:
        p = <const unsigned char*>view.buf
        n = view.len
        if ctype == 0:
            return "none"
        if n == 0:
            return "empty"
        if ctype == 1:
            return "gzip" if n >= 2 and p[0] == 0x1f and p[1] == 0x8b else "unknown"
        if ctype == 2:
            if n >= 10 and memcmp(p, <const void*>_FRAMING_MAGIC_C, 10) == 0:
                return "snappy-framing"
            if n >= 8 and memcmp(p, <const void*>_XERIAL_MAGIC_C, 8) == 0:
                return "xerial"
            return "raw"
        if n < 4:
            return "unknown"
        magic = kc_le32(p)
        if ctype == 3:
            return "lz4-frame" if magic == KC_LZ4_MAGIC else "unknown"
        if magic == KC_ZSTD_MAGIC:
            return "zstd"
        if (magic & KC_ZSTD_SKIPPABLE_MASK) == KC_ZSTD_SKIPPABLE_MAGIC:
            return "zstd-skippable"
        return "unknown"
    finally:
        PyBuffer_Release(&view)


# ========================================================================================== compression

cdef dict _cctx_pools = {}


cdef bytes _gzip_compress(object data, Py_ssize_t n, object level):
    if level is None or level == -1:
        level = 6                  # Deflater.DEFAULT_COMPRESSION
    if not 0 <= level <= 9:
        raise ValueError(f"gzip level must be in -1..9, got {level}")
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
        raise ValueError(f"lz4 level must be in 1..17, got {level!r}")
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
        raise ValueError(f"zstd level must be in -131072..22, got {level}")
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
    """
    cdef int ctype = _compression_type(compression_type)
    cdef Py_buffer view
    data = _get_buffer(data, &view)
    try:
        if ctype == 0 or ctype == 2:
            if level is not None:
                raise ValueError(f"{'none' if ctype == 0 else 'snappy'} compression takes no level")
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
