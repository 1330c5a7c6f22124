# cython: language_level=3
"""Bounded reader and growable writer for Kafka wire primitives (header-only, inlined where cimported).

The reader never touches a byte outside [buf, buf+end): every read checks the remaining length first and
raises kip714.errors.MalformedFrameError (INVALID_REQUEST) on underflow. Lengths and element counts read
from the wire are checked against the bytes that remain before anything is allocated for them.

The writer starts in an inline 512-byte area and moves to the heap only when a message outgrows it, so
small messages (every telemetry response) encode without a malloc. ``kw_free`` must be called on every path.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from cpython.mem cimport PyMem_Malloc, PyMem_Realloc, PyMem_Free
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t)
from libc.string cimport memcpy


cdef extern from "kbuf_endian.h":
    uint16_t kb_load_be16(const unsigned char* p) nogil
    uint32_t kb_load_be32(const unsigned char* p) nogil
    uint64_t kb_load_be64(const unsigned char* p) nogil
    void kb_store_be16(unsigned char* p, uint16_t v) nogil
    void kb_store_be32(unsigned char* p, uint32_t v) nogil
    void kb_store_be64(unsigned char* p, uint64_t v) nogil


# ----------------------------------------------------------------------------------------------- reader

cdef struct KReader:
    const unsigned char* buf
    Py_ssize_t pos
    Py_ssize_t end


cdef inline int kr_fail(const KReader* r, str what) except -1:
    from kip714.errors import MalformedFrameError
    raise MalformedFrameError(f"truncated or malformed {what} at offset {r.pos} of {r.end}")


cdef inline int kr_bad(const KReader* r, str message) except -1:
    from kip714.errors import MalformedFrameError
    raise MalformedFrameError(f"{message} (offset {r.pos} of {r.end})")


cdef inline void kr_init(KReader* r, const unsigned char* buf, Py_ssize_t length) noexcept nogil:
    r.buf = buf
    r.pos = 0
    r.end = length


cdef inline Py_ssize_t kr_remaining(const KReader* r) noexcept nogil:
    return r.end - r.pos


cdef inline int kr_need(KReader* r, Py_ssize_t n, str what) except -1:
    if n < 0 or r.end - r.pos < n:
        return kr_fail(r, what)
    return 0


cdef inline int8_t kr_i8(KReader* r) except? -1:
    kr_need(r, 1, "int8")
    cdef int8_t v = <int8_t>r.buf[r.pos]
    r.pos += 1
    return v


cdef inline bint kr_bool(KReader* r) except? -1:
    kr_need(r, 1, "boolean")
    cdef uint8_t v = r.buf[r.pos]
    r.pos += 1
    return v != 0


cdef inline int16_t kr_i16(KReader* r) except? -1:
    kr_need(r, 2, "int16")
    cdef int16_t v = <int16_t>kb_load_be16(r.buf + r.pos)
    r.pos += 2
    return v


cdef inline int32_t kr_i32(KReader* r) except? -1:
    kr_need(r, 4, "int32")
    cdef int32_t v = <int32_t>kb_load_be32(r.buf + r.pos)
    r.pos += 4
    return v


cdef inline int64_t kr_i64(KReader* r) except? -1:
    kr_need(r, 8, "int64")
    cdef int64_t v = <int64_t>kb_load_be64(r.buf + r.pos)
    r.pos += 8
    return v


cdef inline uint32_t kr_uvarint(KReader* r) except? 0xFFFFFFFF:
    """Unsigned varint of at most 5 bytes, read as Kafka's ``ByteUtils.readUnsignedVarint`` reads it: a
    fifth byte with its top bit set is refused ("Varint is too long"), while the fifth byte's bits 4-6 are
    shifted out of the 32-bit ``int`` (Java's ``tmp << 28``) and dropped, not refused."""
    cdef uint32_t value = 0
    cdef int shift = 0
    cdef uint8_t b
    while True:
        if r.pos >= r.end:
            kr_fail(r, "unsigned varint")
        b = r.buf[r.pos]
        r.pos += 1
        if shift == 28 and (b & 0x80):
            kr_bad(r, "unsigned varint is too long: the top bit of its 5th byte is set")
        value |= (<uint32_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            return value
        shift += 7


cdef inline int kr_uvarint_checked(KReader* r, uint32_t* out) except -1:
    out[0] = kr_uvarint(r)
    return 0


cdef inline Py_ssize_t kr_compact_len(KReader* r, str what) except -2:
    """A compact length as Kafka's generated readers compute it: ``readUnsignedVarint() - 1`` in Java
    ``int`` arithmetic, so 0 and every value from 2**31 + 1 up give a negative length, which Kafka reads
    as null. Returns -1 for null (the caller refuses it where the field is not nullable); a length the
    remaining bytes cannot hold is refused."""
    cdef uint32_t raw
    kr_uvarint_checked(r, &raw)
    cdef int32_t n = <int32_t>(raw - 1u)
    if n < 0:
        return -1
    if n > r.end - r.pos:
        kr_fail(r, what)
    return n


cdef inline Py_ssize_t kr_compact_count(KReader* r, str what, Py_ssize_t min_element_size) except -2:
    """A compact array count (Java ``int`` arithmetic as in :func:`kr_compact_len`); -1 for null. A
    count the remaining bytes cannot hold is refused up front."""
    cdef uint32_t raw
    kr_uvarint_checked(r, &raw)
    cdef int32_t n = <int32_t>(raw - 1u)
    if n < 0:
        return -1
    if <Py_ssize_t>n * min_element_size > r.end - r.pos:
        kr_bad(r, f"{what}: {n} elements cannot fit in the {r.end - r.pos} bytes left")
    return n


cdef inline Py_ssize_t kr_classic_count(KReader* r, str what, Py_ssize_t min_element_size) except -2:
    """A classic (int32) array count; -1 for null. Kafka's generated readers take *any* negative count
    as null (``if (arrayLength < 0)``), so -2 is null too, not an error."""
    cdef int32_t n = kr_i32(r)
    if n < 0:
        return -1
    if <Py_ssize_t>n * min_element_size > r.end - r.pos:
        kr_bad(r, f"{what}: {n} elements cannot fit in the {r.end - r.pos} bytes left")
    return n


cdef inline object kr_str_at(KReader* r, Py_ssize_t n, str what):
    cdef object s
    try:
        s = PyUnicode_DecodeUTF8(<const char*>(r.buf + r.pos), n, NULL)
    except UnicodeDecodeError:
        kr_bad(r, f"{what} is not valid UTF-8")
    r.pos += n
    return s


cdef inline object kr_compact_string(KReader* r, str what):
    """Compact nullable string → str or None."""
    cdef Py_ssize_t n = kr_compact_len(r, what)
    if n < 0:
        return None
    return kr_str_at(r, n, what)


cdef inline object kr_string(KReader* r, str what):
    """Classic nullable string (int16 length; any negative length is null, as in Kafka) → str or None."""
    cdef int16_t n = kr_i16(r)
    if n < 0:
        return None
    kr_need(r, n, what)
    return kr_str_at(r, n, what)


cdef inline object kr_compact_bytes(KReader* r, str what):
    """Compact nullable bytes → bytes (a copy) or None."""
    cdef Py_ssize_t n = kr_compact_len(r, what)
    if n < 0:
        return None
    cdef object b = PyBytes_FromStringAndSize(<const char*>(r.buf + r.pos), n)
    r.pos += n
    return b


cdef inline object kr_bytes(KReader* r, str what):
    """Classic nullable bytes (int32 length; any negative length is null, as in Kafka) → bytes or None."""
    cdef int32_t n = kr_i32(r)
    if n < 0:
        return None
    kr_need(r, n, what)
    cdef object b = PyBytes_FromStringAndSize(<const char*>(r.buf + r.pos), n)
    r.pos += n
    return b


cdef inline object kr_uuid16(KReader* r):
    """16 raw bytes of a UUID (msb then lsb, big-endian) as a bytes object."""
    kr_need(r, 16, "uuid")
    cdef object b = PyBytes_FromStringAndSize(<const char*>(r.buf + r.pos), 16)
    r.pos += 16
    return b


cdef inline object kr_tagged_fields(KReader* r):
    """A tagged-field section. Returns None when empty (the common case), else {tag: bytes}.

    Tags must be strictly increasing, as Kafka's generated readers require."""
    cdef uint32_t count = kr_uvarint(r)
    if count == 0:
        return None
    if <Py_ssize_t>count * 2 > r.end - r.pos:
        kr_bad(r, f"{count} tagged fields cannot fit in the {r.end - r.pos} bytes left")
    cdef dict out = {}
    cdef uint32_t i, tag, size
    cdef Py_ssize_t last = -1
    for i in range(count):
        tag = kr_uvarint(r)
        if <Py_ssize_t>tag <= last:
            kr_bad(r, f"tagged field {tag} out of order")
        last = tag
        size = kr_uvarint(r)
        kr_need(r, <Py_ssize_t>size, "tagged field")
        out[tag] = PyBytes_FromStringAndSize(<const char*>(r.buf + r.pos), size)
        r.pos += size
    return out


cdef inline int kr_skip_tagged_fields(KReader* r) except -1:
    """Validate and skip a tagged-field section without building anything."""
    cdef uint32_t count = kr_uvarint(r)
    cdef uint32_t i, tag, size
    cdef Py_ssize_t last = -1
    for i in range(count):
        tag = kr_uvarint(r)
        if <Py_ssize_t>tag <= last:
            kr_bad(r, f"tagged field {tag} out of order")
        last = tag
        size = kr_uvarint(r)
        kr_need(r, <Py_ssize_t>size, "tagged field")
        r.pos += size
    return 0


# ----------------------------------------------------------------------------------------------- writer

cdef enum:
    KW_INLINE = 512


cdef struct KWriter:
    unsigned char* p
    Py_ssize_t pos
    Py_ssize_t cap
    bint heap
    unsigned char inline_buf[KW_INLINE]


cdef inline void kw_init(KWriter* w) noexcept nogil:
    w.p = w.inline_buf
    w.pos = 0
    w.cap = KW_INLINE
    w.heap = False


cdef inline void kw_free(KWriter* w) noexcept:
    if w.heap:
        PyMem_Free(w.p)
        w.heap = False
        w.p = w.inline_buf


cdef inline int kw_reserve(KWriter* w, Py_ssize_t n) except -1:
    cdef Py_ssize_t need = w.pos + n
    cdef Py_ssize_t cap
    cdef unsigned char* np
    if need <= w.cap:
        return 0
    cap = w.cap * 2
    while cap < need:
        cap *= 2
    if w.heap:
        np = <unsigned char*>PyMem_Realloc(w.p, cap)
        if np == NULL:
            raise MemoryError()
    else:
        np = <unsigned char*>PyMem_Malloc(cap)
        if np == NULL:
            raise MemoryError()
        memcpy(np, w.p, w.pos)
        w.heap = True
    w.p = np
    w.cap = cap
    return 0


cdef inline int kw_i8(KWriter* w, int v) except -1:
    kw_reserve(w, 1)
    w.p[w.pos] = <uint8_t>(v & 0xFF)
    w.pos += 1
    return 0


cdef inline int kw_i16(KWriter* w, int v) except -1:
    kw_reserve(w, 2)
    kb_store_be16(w.p + w.pos, <uint16_t>v)
    w.pos += 2
    return 0


cdef inline int kw_i32(KWriter* w, int64_t v) except -1:
    kw_reserve(w, 4)
    kb_store_be32(w.p + w.pos, <uint32_t>v)
    w.pos += 4
    return 0


cdef inline int kw_i64(KWriter* w, int64_t v) except -1:
    kw_reserve(w, 8)
    kb_store_be64(w.p + w.pos, <uint64_t>v)
    w.pos += 8
    return 0


cdef inline int kw_uvarint(KWriter* w, uint32_t v) except -1:
    kw_reserve(w, 5)
    while v >= 0x80:
        w.p[w.pos] = <uint8_t>((v & 0x7F) | 0x80)
        w.pos += 1
        v >>= 7
    w.p[w.pos] = <uint8_t>v
    w.pos += 1
    return 0


cdef inline int kw_raw(KWriter* w, const unsigned char* data, Py_ssize_t n) except -1:
    kw_reserve(w, n)
    if n:
        memcpy(w.p + w.pos, data, n)
    w.pos += n
    return 0


cdef inline bytes kw_to_bytes(KWriter* w):
    return PyBytes_FromStringAndSize(<const char*>w.p, w.pos)


cdef inline bytes kw_to_frame(KWriter* w, Py_ssize_t start):
    """Fill the 4-byte size prefix reserved at ``start`` and return the frame as bytes."""
    kb_store_be32(w.p + start, <uint32_t>(w.pos - start - 4))
    return PyBytes_FromStringAndSize(<const char*>(w.p + start), w.pos - start)
