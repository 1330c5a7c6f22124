# cython: language_level=3
"""Bounded decompression and Java-compatible compression of KIP-714 telemetry payloads (``kip714._codec``).

One codec per file: ``codec_gzip.pxi``, ``codec_snappy.pxi`` (+ ``codec_snappy_java.pxi``), ``codec_lz4.pxi``,
``codec_zstd.pxi``; ``codec_compress.pxi`` writes Java's framings; this module holds the shared helpers and
the public ``decompress`` / ``detect_framing`` dispatch.

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

The codec packages (zlib, cramjam, lz4, zstandard) do the entropy decoding and release the GIL while they do,
except for snappy: its blocks are decoded here (``codec_snappy.h``), straight into the returned ``bytes``, with
the rules of Google's decoder that snappy-java runs (cramjam's refuses some blocks that Kafka accepts: a
literal length written with more bytes than it needs). The frame walking, checksums, snappy decoding and
copies done here run without the GIL when the input is large.
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

from kip714.errors import (CorruptPayloadError, InvalidConfigError, TelemetryTooLargeError,
                           UnsupportedCompressionTypeError)


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

cdef extern from "codec_snappy.h" nogil:
    const char* kc_snappy_decode(const unsigned char* src, size_t n_in, unsigned char* out, size_t n_out)

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
cdef tuple _LZ4_ERRORS = (_lz4_block.LZ4BlockError, _cramjam.DecompressionError, ValueError, OverflowError,
                          RuntimeError)
cdef tuple _ZSTD_ERRORS = (_zstd.ZstdError, ValueError, OverflowError, RuntimeError)

# The package functions on the hot paths, looked up once.
cdef object _zlib_decompressobj = _zlib.decompressobj
cdef object _lz4_block_into = _cramjam.lz4.decompress_block_into
cdef object _lz4_block_decompress = _lz4_block.decompress
cdef object _ZstdDecompressor = _zstd.ZstdDecompressor


# Independent LZ4 blocks are decoded by cramjam (>= 2.11, a dependency) straight into the output; liblz4
# through python-lz4 decodes the blocks that need a whole block's capacity, as Kafka's reader gives them.


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


include "codec_gzip.pxi"


include "codec_snappy.pxi"


include "codec_lz4.pxi"


include "codec_zstd.pxi"


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
            return _unsnappy(p, n, limit)
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


include "codec_compress.pxi"
