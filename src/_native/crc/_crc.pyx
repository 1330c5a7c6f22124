# cython: language_level=3
"""CRC32C (Castagnoli) and the KIP-714 SubscriptionId, bit-identical to an Apache Kafka broker.

``crc32c`` continues a running value like ``crc32c.crc32c(data, value)`` and ``google_crc32c.extend``.
The C core (``crc32c_impl.h``) uses the SSE4.2 / ARMv8 CRC32C instructions when the CPU has them and
slicing-by-8 tables otherwise; ``hardware_accelerated()`` says which one is in use, and
``_crc32c_sw`` always runs the tables (tests compare the two). Setting ``KIP714_CRC32C_SOFTWARE=1``
before import forces the tables everywhere.

``compute_subscription_id`` follows ``ClientMetricsManager.computeSubscriptionId``::

    bytes = (set.toString() + pushIntervalMs).getBytes(UTF_8)   # "[m1, m2]300000"
    return (int) Crc32C.compute(bytes) ^ clientInstanceId.hashCode()

for a list that is already in Java ``HashSet`` iteration order (see ``kip714.broker.javaorder``).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.long cimport PyLong_Check
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_Check, PyUnicode_CheckExact
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcpy

import uuid as _uuid_mod

cdef extern from "Python.h":
    object PySequence_Fast(object o, const char* message)
    Py_ssize_t PySequence_Fast_GET_SIZE(object o)
    PyObject* PySequence_Fast_GET_ITEM(object o, Py_ssize_t i)
    bint PyUnicode_IS_COMPACT_ASCII(PyObject* o)
    void* PyUnicode_DATA(PyObject* o)
    Py_ssize_t PyUnicode_GET_LENGTH(PyObject* o)
    # checked by hand (NULL + pending exception) so the per-item loop needs no try/except block
    const char* utf8_and_size "PyUnicode_AsUTF8AndSize"(object s, Py_ssize_t* size)
    int PyErr_ExceptionMatches(object exc)
    void PyErr_Clear()

cdef extern from *:
    """
    /* The 16 big-endian bytes of a non-negative int below 2**128 (uuid.UUID.int), without temporaries. */
    static int k714_uuid_int_be(PyObject *v, unsigned char *out16) {
    #if PY_VERSION_HEX >= 0x030D0000
        Py_ssize_t need = PyLong_AsNativeBytes(v, out16, 16, Py_ASNATIVEBYTES_BIG_ENDIAN
                                               | Py_ASNATIVEBYTES_UNSIGNED_BUFFER
                                               | Py_ASNATIVEBYTES_REJECT_NEGATIVE);
        if (need < 0) return -1;
        if (need > 16) {
            PyErr_SetString(PyExc_OverflowError, "UUID.int does not fit in 128 bits");
            return -1;
        }
        return 0;
    #else
        return _PyLong_AsByteArray((PyLongObject *)v, out16, 16, 0, 0);
    #endif
    }
    """
    int k714_uuid_int_be(object v, unsigned char* out16) except -1

cdef extern from "kbuf_endian.h":
    uint64_t kb_load_be64(const unsigned char* p) noexcept nogil

cdef extern from "crc32c_impl.h":
    void k714_crc32c_init() noexcept nogil
    uint32_t k714_crc32c(uint32_t value, const unsigned char* p, size_t n) noexcept nogil
    uint32_t k714_crc32c_software(uint32_t value, const unsigned char* p, size_t n) noexcept nogil
    uint32_t k714_crc32c_update(uint32_t crc, const unsigned char* p, size_t n) noexcept nogil
    int k714_crc32c_hw_enabled() noexcept nogil

k714_crc32c_init()

__all__ = ["crc32c", "uuid_hash", "compute_subscription_id", "hardware_accelerated"]

# Inputs at least this long are checksummed with the GIL released (from ~0.2 µs of work on the
# hardware path, ~2 µs on the tables: well above the cost of dropping and taking the GIL).
cdef Py_ssize_t NOGIL_MIN = 4096
cdef type _UUID = _uuid_mod.UUID


cdef int _acquire(object data, Py_buffer* view) except -1:
    """A C-contiguous byte view of ``data``; ValueError for strided buffers, TypeError for non-buffers."""
    try:
        PyObject_GetBuffer(data, view, PyBUF_SIMPLE)
    except BufferError as exc:
        raise ValueError(f"crc32c needs a C-contiguous buffer: {exc}") from exc
    return 0


cdef uint32_t _run(uint32_t value, const unsigned char* p, Py_ssize_t n, bint software) noexcept:
    cdef uint32_t out
    if n < NOGIL_MIN:
        return k714_crc32c_software(value, p, <size_t>n) if software else k714_crc32c(value, p, <size_t>n)
    with nogil:
        if software:
            out = k714_crc32c_software(value, p, <size_t>n)
        else:
            out = k714_crc32c(value, p, <size_t>n)
    return out


def crc32c(data, uint32_t value=0):
    """CRC32C of ``data`` (any C-contiguous buffer), continuing the finished CRC ``value`` (0 to start).

    Returns the unsigned 32-bit CRC. ``crc32c(b, crc32c(a)) == crc32c(a + b)``.
    """
    cdef Py_buffer view
    cdef uint32_t out
    if type(data) is bytes:
        return _run(value, <const unsigned char*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), False)
    _acquire(data, &view)
    out = _run(value, <const unsigned char*>view.buf, view.len, False)
    PyBuffer_Release(&view)
    return out


def _crc32c_sw(data, uint32_t value=0):
    """``crc32c`` through the slicing-by-8 tables only, whatever the CPU (for tests and benchmarks)."""
    cdef Py_buffer view
    cdef uint32_t out
    if type(data) is bytes:
        return _run(value, <const unsigned char*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), True)
    _acquire(data, &view)
    out = _run(value, <const unsigned char*>view.buf, view.len, True)
    PyBuffer_Release(&view)
    return out


def hardware_accelerated():
    """True when CRC32C runs on the CPU's CRC32C instructions (SSE4.2 or ARMv8 CRC), False for tables."""
    return k714_crc32c_hw_enabled() != 0


# ------------------------------------------------------------------------------------ Uuid.hashCode

cdef int32_t _uuid_hash32(object cid) except? -1:
    """Kafka ``Uuid.hashCode()``: x = msb ^ lsb; (int)(x >> 32) ^ (int)x."""
    cdef uint64_t msb, lsb, x
    cdef unsigned char raw[16]
    cdef Py_buffer view
    cdef const unsigned char* p
    if type(cid) is bytes:
        if PyBytes_GET_SIZE(cid) != 16:
            raise ValueError(f"a client instance id is 16 bytes, got {PyBytes_GET_SIZE(cid)}")
        p = <const unsigned char*>PyBytes_AS_STRING(cid)
        msb = kb_load_be64(p)
        lsb = kb_load_be64(p + 8)
    elif type(cid) is _UUID or isinstance(cid, _UUID):
        big = cid.int
        if not PyLong_Check(big):
            raise TypeError("UUID.int is not an int")
        k714_uuid_int_be(big, raw)
        msb = kb_load_be64(raw)
        lsb = kb_load_be64(raw + 8)
    else:
        if isinstance(cid, str):
            raise TypeError("client_instance_id must be a uuid.UUID or 16 bytes, not str")
        _acquire(cid, &view)
        if view.len != 16:
            PyBuffer_Release(&view)
            raise ValueError(f"a client instance id is 16 bytes, got {view.len}")
        msb = kb_load_be64(<const unsigned char*>view.buf)
        lsb = kb_load_be64(<const unsigned char*>view.buf + 8)
        PyBuffer_Release(&view)
    x = msb ^ lsb
    return <int32_t>(<uint32_t>(x >> 32) ^ <uint32_t>x)


def uuid_hash(client_instance_id):
    """Java ``org.apache.kafka.common.Uuid.hashCode()`` (signed int32) of a ``uuid.UUID`` or 16 bytes
    (most significant half first, big-endian, as on the wire)."""
    return _uuid_hash32(client_instance_id)


# ---------------------------------------------------------------------------------- SubscriptionId

cdef struct Feed:
    uint32_t crc          # raw register (inverted)
    Py_ssize_t used
    unsigned char buf[1024]


cdef void _flush(Feed* f) noexcept:
    f.crc = k714_crc32c_update(f.crc, f.buf, <size_t>f.used)
    f.used = 0


cdef inline void _feed(Feed* f, const unsigned char* p, Py_ssize_t n) noexcept:
    if f.used + n > <Py_ssize_t>sizeof(f.buf):
        _flush(f)
        if n > <Py_ssize_t>sizeof(f.buf):
            f.crc = k714_crc32c_update(f.crc, p, <size_t>n)
            return
    memcpy(f.buf + f.used, p, <size_t>n)
    f.used += n


cdef inline void _feed_int(Feed* f, int32_t v) noexcept:
    """Java's Integer.toString(v) in ASCII, written straight into the staging buffer."""
    cdef uint32_t w = <uint32_t>(-<int64_t>v) if v < 0 else <uint32_t>v
    cdef uint32_t t = w
    cdef Py_ssize_t width = 1 + (v < 0)
    cdef unsigned char* out
    while t >= 10:
        t //= 10
        width += 1
    if f.used + width > <Py_ssize_t>sizeof(f.buf):
        _flush(f)
    out = f.buf + f.used + width
    f.used += width
    while True:
        out -= 1
        out[0] = <unsigned char>(48 + w % 10)
        w //= 10
        if w == 0:
            break
    if v < 0:
        (out - 1)[0] = 45  # '-'


def _java_utf8(str s):
    """``String.getBytes(UTF_8)`` for a Python str that holds surrogate code points: adjacent
    high+low surrogates form one character (as in Java's UTF-16), a lone surrogate becomes ``?``."""
    paired = s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return paired.encode("utf-8", "replace")


cdef int _propagate() except -1:
    """Hand the exception already set by a C call back to Python."""
    return -1


def compute_subscription_id(requested_metrics, int32_t push_interval_ms, client_instance_id):
    """Kafka's SubscriptionId (signed int32) for ``requested_metrics`` in the given order.

    CRC32C of the UTF-8 bytes of ``"[" + ", ".join(requested_metrics) + "]" + str(push_interval_ms)``,
    as a signed int32, XOR ``Uuid.hashCode()`` of ``client_instance_id`` (``uuid.UUID`` or 16 bytes).
    Strings are encoded as Java does (a lone surrogate becomes ``?``).
    """
    cdef Feed f
    cdef const char* s
    cdef Py_ssize_t slen, i = 0
    cdef PyObject* it
    cdef int32_t h = _uuid_hash32(client_instance_id)
    if isinstance(requested_metrics, (str, bytes, bytearray)):
        raise TypeError("requested_metrics must be a sequence of str, not a single string")
    seq = PySequence_Fast(requested_metrics, "requested_metrics must be a sequence of str")
    f.crc = 0xFFFFFFFF
    f.used = 1
    f.buf[0] = 91  # '['
    # The size is read again on every turn: the slow path below may run Python code (a GC pass).
    while i < PySequence_Fast_GET_SIZE(seq):
        if i:
            if f.used + 2 > <Py_ssize_t>sizeof(f.buf):
                _flush(&f)
            f.buf[f.used] = 44      # ','
            f.buf[f.used + 1] = 32  # ' '
            f.used += 2
        it = PySequence_Fast_GET_ITEM(seq, i)
        i += 1
        if PyUnicode_CheckExact(<object>it) and PyUnicode_IS_COMPACT_ASCII(it):
            # borrowed reference, used before anything else can run: ASCII text is its own UTF-8
            _feed(&f, <const unsigned char*>PyUnicode_DATA(it), PyUnicode_GET_LENGTH(it))
            continue
        item = <object>it
        if not PyUnicode_Check(item):
            raise TypeError(f"requested metric names must be str, got {type(item).__name__}")
        s = utf8_and_size(item, &slen)
        if s == NULL:
            if not PyErr_ExceptionMatches(UnicodeEncodeError):
                return _propagate()
            PyErr_Clear()          # surrogate code points: encode them the way Java does
            raw = _java_utf8(item)
            s = PyBytes_AS_STRING(raw)
            slen = PyBytes_GET_SIZE(raw)
        _feed(&f, <const unsigned char*>s, slen)
    _feed(&f, <const unsigned char*>b"]", 1)
    _feed_int(&f, push_interval_ms)
    f.crc = k714_crc32c_update(f.crc, f.buf, <size_t>f.used)
    return <int32_t>(~f.crc) ^ h
