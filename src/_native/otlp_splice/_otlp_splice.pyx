# cython: language_level=3
"""Adding resource attributes to OTLP ``MetricsData`` bytes without decoding them (the OTLP forwarder).

``add_resource_attributes(data, attributes)`` returns ``data`` with every top-level ``ResourceMetrics``
carrying the given string attributes in its ``Resource`` (appended after the client's own; a key the
client already set on that resource is left as the client set it), creating the ``Resource`` when a
``ResourceMetrics`` has none. Everything else is copied byte for byte; only the length prefixes of the
changed ``Resource`` and ``ResourceMetrics`` messages are rewritten.

Hand-written because no library edits protobuf wire bytes in place: decoding and re-encoding the whole
payload with protobuf would cost far more than the forwarder may spend per payload. Every read is
bounds-checked; bytes that are not a well-formed protobuf message at the levels walked (MetricsData,
ResourceMetrics, Resource, KeyValue) raise :class:`kip714.errors.CorruptPayloadError`. Deeper levels
(scope metrics, data points) are copied without being looked at.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport uint8_t, uint64_t
from libc.string cimport memcmp, memcpy

from kip714.errors import CorruptPayloadError

__all__ = ["add_resource_attributes", "add_resource_attributes_all", "encode_attributes"]

DEF MAX_KEYS = 16


cdef inline Py_ssize_t read_varint(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, uint64_t* out) noexcept nogil:
    """Reads a varint at ``pos``; returns the position after it, or -1 when it is truncated or too long."""
    cdef uint64_t v = 0
    cdef int shift = 0
    cdef uint8_t b
    while pos < end and shift < 64:
        b = p[pos]
        pos += 1
        v |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            out[0] = v
            return pos
        shift += 7
    return -1


cdef inline int varint_size(uint64_t v) noexcept nogil:
    cdef int n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline Py_ssize_t write_varint(uint8_t* p, Py_ssize_t pos, uint64_t v) noexcept nogil:
    while v >= 0x80:
        p[pos] = <uint8_t>((v & 0x7F) | 0x80)
        v >>= 7
        pos += 1
    p[pos] = <uint8_t>v
    return pos + 1


cdef inline Py_ssize_t skip_field(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, int wire,
                                  Py_ssize_t* body) noexcept nogil:
    """Skips the value of a field of wire type ``wire`` at ``pos``; returns the position after it (-1 when
    malformed). For length-delimited fields ``body`` receives where the contents start."""
    cdef uint64_t n
    if wire == 0:
        return read_varint(p, pos, end, &n)
    if wire == 1:
        return pos + 8 if end - pos >= 8 else -1
    if wire == 5:
        return pos + 4 if end - pos >= 4 else -1
    if wire == 2:
        pos = read_varint(p, pos, end, &n)
        if pos < 0 or n > <uint64_t>(end - pos):
            return -1
        body[0] = pos
        return pos + <Py_ssize_t>n
    return -1  # groups (3, 4) and reserved wire types: upb refuses them in OTLP too


cdef struct Field:
    Py_ssize_t start      # the tag
    Py_ssize_t body       # contents (length-delimited fields)
    Py_ssize_t end


cdef inline Py_ssize_t next_field(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, uint64_t* number,
                                  Field* f) noexcept nogil:
    cdef uint64_t tag
    cdef Py_ssize_t q = read_varint(p, pos, end, &tag)
    if q < 0 or (tag >> 3) == 0:
        return -1
    f.start = pos
    f.body = -1
    number[0] = tag >> 3
    if (tag & 7) != 2 and (tag >> 3) == 1:
        return -1          # at the levels walked, field 1 is always a message
    q = skip_field(p, q, end, <int>(tag & 7), &f.body)
    f.end = q
    return q


cdef int mark_present_keys(const uint8_t* p, Py_ssize_t start, Py_ssize_t end, int nkeys,
                           const uint8_t* const* keys, const Py_ssize_t* key_lens, int* present) noexcept nogil:
    """Walks a Resource's fields; for every attribute (field 1: KeyValue) whose key (field 1) equals one
    of ``keys``, sets ``present[i]``. Returns -1 when the Resource is malformed."""
    cdef Py_ssize_t pos = start, q, kpos, kend
    cdef uint64_t number, knum
    cdef Field f, kf
    cdef int i
    while pos < end:
        q = next_field(p, pos, end, &number, &f)
        if q < 0:
            return -1
        if number == 1:
            kpos = f.body
            kend = f.end
            while kpos < kend:
                q = next_field(p, kpos, kend, &knum, &kf)
                if q < 0:
                    return -1
                if knum == 1:   # the key; the last occurrence would win, all are compared
                    for i in range(nkeys):
                        if kf.end - kf.body == key_lens[i] and memcmp(p + kf.body, keys[i], key_lens[i]) == 0:
                            present[i] = 1
                kpos = q
        pos = f.end
    return 0


def encode_attributes(attributes):
    """``[(key, value), ...]`` (str) → ``[(key bytes, Resource.attributes field bytes), ...]`` for
    :func:`add_resource_attributes` (a KeyValue with a string AnyValue, as field 1 of a Resource)."""
    out = []
    for key, value in attributes:
        k = key.encode("utf-8")
        v = value.encode("utf-8")
        anyv = b"\x0a" + _varint(len(v)) + v
        kv = b"\x0a" + _varint(len(k)) + k + b"\x12" + _varint(len(anyv)) + anyv
        out.append((k, b"\x0a" + _varint(len(kv)) + kv))
    return out


cdef bytes _varint(uint64_t v):
    cdef uint8_t buf[10]
    cdef Py_ssize_t n = write_varint(buf, 0, v)
    return PyBytes_FromStringAndSize(<char*>buf, n)


cdef struct Attrs:
    int n
    Py_ssize_t extra_all                 # every attribute's field bytes
    const uint8_t* keys[MAX_KEYS]
    Py_ssize_t key_lens[MAX_KEYS]
    const uint8_t* fields[MAX_KEYS]
    Py_ssize_t field_lens[MAX_KEYS]


cdef int _attrs(list attributes, Attrs* a) except -1:
    """``attributes`` (from :func:`encode_attributes`, kept alive by the caller) into ``a``."""
    cdef int i
    cdef bytes kb, fb
    a.n = len(attributes)
    if a.n > MAX_KEYS:
        raise ValueError(f"at most {MAX_KEYS} attributes")
    a.extra_all = 0
    for i in range(a.n):
        kb, fb = attributes[i]
        a.keys[i] = <const uint8_t*>PyBytes_AS_STRING(kb)
        a.key_lens[i] = len(kb)
        a.fields[i] = <const uint8_t*>PyBytes_AS_STRING(fb)
        a.field_lens[i] = len(fb)
        a.extra_all += a.field_lens[i]
    return 0


cdef Py_ssize_t _bound(const uint8_t* p, Py_ssize_t n, const Attrs* a, Py_ssize_t* err) noexcept nogil:
    """The most bytes :func:`_splice` writes for ``p[:n]`` (each ResourceMetrics grows by at most its attributes
    + 2 × 10 + 1); -1 when a top-level field is malformed (``err``: where)."""
    cdef Py_ssize_t pos = 0, q, count = 0
    cdef uint64_t number
    cdef Field f
    while pos < n:
        q = next_field(p, pos, n, &number, &f)
        if q < 0:
            err[0] = pos
            return -1
        if number == 1:
            count += 1
        pos = q
    return n + count * (a.extra_all + 21)


cdef Py_ssize_t _splice(const uint8_t* p, Py_ssize_t n, const Attrs* a, uint8_t* o, Py_ssize_t* err) noexcept nogil:
    """``p[:n]`` with the attributes added into ``o`` (:func:`_bound` bytes at least): the bytes written, or -1 (a
    malformed top-level field: :func:`_bound` refused it first), -2 (a malformed ResourceMetrics field) or -3 (a
    malformed Resource), ``err`` saying where."""
    cdef int present[MAX_KEYS]
    cdef Py_ssize_t pos = 0, q, w = 0
    cdef Py_ssize_t rpos, rend, res_start, extra, new_res_len, new_rm_len
    cdef Py_ssize_t res_body = 0, res_end = 0
    cdef uint64_t number, rnum
    cdef Field f, rf
    cdef int i
    cdef int nkeys = a.n
    while pos < n:
        q = next_field(p, pos, n, &number, &f)
        if q < 0:                             # (checked by _bound: never)
            err[0] = pos
            return -1
        if number != 1:
            memcpy(o + w, p + pos, q - pos)
            w += q - pos
            pos = q
            continue
        # a ResourceMetrics: find its last Resource (field 1)
        res_start = -1
        rpos = f.body
        rend = f.end
        while rpos < rend:
            q = next_field(p, rpos, rend, &rnum, &rf)
            if q < 0:
                err[0] = rpos
                return -2
            if rnum == 1:
                res_start, res_body, res_end = rf.start, rf.body, rf.end
            rpos = q
        for i in range(nkeys):
            present[i] = 0
        if res_start >= 0 and mark_present_keys(p, res_body, res_end, nkeys, a.keys, a.key_lens, present) < 0:
            err[0] = res_body
            return -3
        extra = 0
        for i in range(nkeys):
            if not present[i]:
                extra += a.field_lens[i]
        if extra == 0:
            memcpy(o + w, p + f.start, f.end - f.start)
            w += f.end - f.start
            pos = f.end
            continue
        if res_start >= 0:
            new_res_len = (res_end - res_body) + extra
            new_rm_len = (f.end - f.body) - (res_end - res_start) + 1 + varint_size(new_res_len) + new_res_len
        else:
            new_res_len = extra
            new_rm_len = (f.end - f.body) + 1 + varint_size(new_res_len) + new_res_len
        o[w] = 0x0A
        w = write_varint(o, w + 1, new_rm_len)
        if res_start < 0:
            o[w] = 0x0A
            w = write_varint(o, w + 1, new_res_len)
            for i in range(nkeys):
                memcpy(o + w, a.fields[i], a.field_lens[i])
                w += a.field_lens[i]
            memcpy(o + w, p + f.body, f.end - f.body)
            w += f.end - f.body
        else:
            memcpy(o + w, p + f.body, res_start - f.body)             # fields before the Resource
            w += res_start - f.body
            o[w] = 0x0A
            w = write_varint(o, w + 1, new_res_len)
            memcpy(o + w, p + res_body, res_end - res_body)           # the client's attributes
            w += res_end - res_body
            for i in range(nkeys):
                if not present[i]:
                    memcpy(o + w, a.fields[i], a.field_lens[i])
                    w += a.field_lens[i]
            memcpy(o + w, p + res_end, f.end - res_end)               # fields after it
            w += f.end - res_end
        pos = f.end
    return w


cdef str _malformed(Py_ssize_t rc, Py_ssize_t at):
    if rc == -1:
        return f"not an OTLP MetricsData message (malformed field at byte {at})"
    if rc == -2:
        return f"not an OTLP MetricsData message (malformed ResourceMetrics field at byte {at})"
    return f"not an OTLP MetricsData message (malformed Resource at byte {at})"


def add_resource_attributes(const uint8_t[::1] data, list attributes):
    """``data`` (OTLP MetricsData) with ``attributes`` (from :func:`encode_attributes`) added to the
    Resource of every ResourceMetrics; a key already on that Resource is not added again."""
    cdef Py_ssize_t n = data.shape[0]
    cdef const uint8_t* p = &data[0] if n else NULL
    cdef Attrs a
    cdef Py_ssize_t bound, w, err = 0
    _attrs(attributes, &a)
    bound = _bound(p, n, &a, &err)
    if bound < 0:
        raise CorruptPayloadError(_malformed(-1, err))
    if bound == n or a.n == 0:                # no ResourceMetrics, or nothing to add
        return bytes(data)
    out = PyBytes_FromStringAndSize(NULL, bound)
    cdef uint8_t* o = <uint8_t*>PyBytes_AS_STRING(out)
    with nogil:
        w = _splice(p, n, &a, o, &err)
    if w < 0:
        raise CorruptPayloadError(_malformed(w, err))
    return out[:w]


def add_resource_attributes_all(list payloads, list attributes):
    """:func:`add_resource_attributes` for many payloads at once, the results joined: ``(body, malformed)``,
    the concatenation of each payload (``bytes``) with its ``attributes[k]`` added (what joining
    :func:`add_resource_attributes`'s results gives; concatenated MetricsData messages are one), and the
    indices of the payloads left out because they are malformed. One output buffer, no object per payload."""
    cdef Py_ssize_t count = len(payloads), k, total = 0, w = 0, rc, err = 0, n
    cdef Attrs a
    cdef bytes data, out
    cdef list bounds = [], malformed = []
    if len(attributes) != count:
        raise ValueError("one attribute list per payload")
    for k in range(count):
        data = payloads[k]
        _attrs(attributes[k], &a)
        rc = _bound(<const uint8_t*>PyBytes_AS_STRING(data), len(data), &a, &err)
        bounds.append(rc)
        if rc > 0:
            total += rc
    out = PyBytes_FromStringAndSize(NULL, total)
    cdef uint8_t* o = <uint8_t*>PyBytes_AS_STRING(out)
    for k in range(count):
        if <Py_ssize_t>bounds[k] < 0:
            malformed.append(k)
            continue
        data = payloads[k]
        n = len(data)
        _attrs(attributes[k], &a)
        if a.n == 0:
            memcpy(o + w, PyBytes_AS_STRING(data), n)
            w += n
            continue
        rc = _splice(<const uint8_t*>PyBytes_AS_STRING(data), n, &a, o + w, &err)
        if rc < 0:
            malformed.append(k)
            continue
        w += rc
    return out[:w] if w != total else out, malformed
