# cython: language_level=3
"""Kafka framing, request/response headers and message bodies for the APIs a KIP-714 endpoint speaks:
GetTelemetrySubscriptions (71) v0, PushTelemetry (72) v0, ApiVersions (18) v0-v4 and Metadata (3) v0-v13.

Decoding is bounds-checked against the input (see kbuf.pxd) and zero-copy where it matters: a decoded
PushTelemetryRequest keeps a reference to the input and hands out ``.metrics`` as a memoryview into it.
Python objects that are expensive to make and often unused (``uuid.UUID`` values, the client id string,
the metrics view) are created on first access, so decoding a push costs a few C reads and two small
object allocations.

Strings are decoded as Apache Kafka decodes them (``new String(bytes, UTF_8)``): invalid UTF-8 becomes
U+FFFD rather than an error.
"""

cimport cython
from cpython.buffer cimport (PyBUF_FORMAT, PyBUF_ND, PyBUF_SIMPLE, PyBUF_STRIDES, PyBUF_WRITABLE,
                             PyBuffer_Release, PyObject_GetBuffer)
from cpython.memoryview cimport PyMemoryView_FromObject
from cpython.bytes cimport (PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize,
                            PyBytes_GET_SIZE)
from cpython.object cimport PyObject_GenericSetAttr, PyTypeObject
from cpython.pycapsule cimport PyCapsule_New
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t

from kbuf cimport *

import uuid as _uuid_module

from kip714.errors import (FrameTooLargeError, InvalidRequestError, Kip714Error, MalformedFrameError,
                           UnsupportedApiKeyError, UnsupportedVersionError)

cdef object _UUID = _uuid_module.UUID
cdef object _SAFE_UNKNOWN = _uuid_module.SafeUUID.unknown
cdef object _INT_FROM_BYTES = int.from_bytes

cdef extern from *:
    """
    #include <structmember.h>
    static PyObject *kip714_type_alloc(PyTypeObject *t, Py_ssize_t n) { return t->tp_alloc(t, n); }

    /* uuid.UUID.int from the 16 big-endian bytes, one PyLong and no temporaries. */
    static PyObject *kip714_uuid_int(const unsigned char *b16) {
    #if PY_VERSION_HEX >= 0x030D0000
        return PyLong_FromUnsignedNativeBytes(b16, 16, Py_ASNATIVEBYTES_BIG_ENDIAN);
    #else
        return _PyLong_FromByteArray(b16, 16, 0, 0);
    #endif
    }

    /* The byte offset of a __slots__ member holding an object (uuid.UUID's "int" and "is_safe"), or
       -1 when ``descr`` is not such a writable member descriptor: then the caller falls back to
       PyObject_GenericSetAttr. */
    static Py_ssize_t kip714_slot_offset(PyObject *descr) {
        PyMemberDef *m;
        if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type) return -1;
        m = ((PyMemberDescrObject *)descr)->d_member;
        if (m == NULL || m->type != T_OBJECT_EX || (m->flags & READONLY) || m->offset <= 0) return -1;
        return m->offset;
    }

    /* Store ``value`` (new reference taken here) into an object slot that is still NULL (fresh object). */
    static void kip714_slot_init(PyObject *obj, Py_ssize_t offset, PyObject *value) {
        PyObject **slot = (PyObject **)((char *)obj + offset);
        PyObject *old = *slot;
        Py_INCREF(value);
        *slot = value;
        Py_XDECREF(old);
    }
    """
    object _uuid_alloc "kip714_type_alloc"(PyTypeObject* t, Py_ssize_t n)
    object _uuid_int "kip714_uuid_int"(const unsigned char* b16)
    Py_ssize_t _slot_offset "kip714_slot_offset"(object descr)
    void _slot_init "kip714_slot_init"(object obj, Py_ssize_t offset, object value)

# uuid.UUID is a __slots__ class ("int", "is_safe"): a decoded id fills the two slots of a freshly
# allocated UUID directly, as UUID.__init__ would, without its argument parsing (~50 ns instead of
# ~350 ns). The offsets are read once from the member descriptors; any other shape (another Python's
# uuid module) falls back to generic attribute setting.
cdef Py_ssize_t _UUID_INT_OFF = _slot_offset(_UUID.__dict__.get("int"))
cdef Py_ssize_t _UUID_SAFE_OFF = _slot_offset(_UUID.__dict__.get("is_safe"))

#: Kafka's default ``socket.request.max.bytes``: the largest frame a broker reads.
DEFAULT_MAX_FRAME_BYTES = 104857600

# API keys this module decodes.
cdef enum:
    K_METADATA = 3
    K_API_VERSIONS = 18
    K_GET_TELEMETRY_SUBSCRIPTIONS = 71
    K_PUSH_TELEMETRY = 72

#: api_key -> (min version, max version, first flexible version)
SUPPORTED_VERSIONS = {
    K_METADATA: (0, 13, 9),
    K_API_VERSIONS: (0, 4, 3),
    K_GET_TELEMETRY_SUBSCRIPTIONS: (0, 0, 0),
    K_PUSH_TELEMETRY: (0, 0, 0),
}


cdef inline int _flexible_from(int api_key) noexcept:
    if api_key == K_METADATA:
        return 9
    if api_key == K_API_VERSIONS:
        return 3
    return 0


cdef inline int _max_version(int api_key) noexcept:
    if api_key == K_METADATA:
        return 13
    if api_key == K_API_VERSIONS:
        return 4
    return 0


cdef inline bint _known_key(int api_key) noexcept:
    return (api_key == K_PUSH_TELEMETRY or api_key == K_GET_TELEMETRY_SUBSCRIPTIONS
            or api_key == K_API_VERSIONS or api_key == K_METADATA)


# --------------------------------------------------------------------------------------------- helpers

cdef object _make_uuid(uint64_t msb, uint64_t lsb):
    """uuid.UUID from its two halves without going through UUID.__init__'s argument parsing
    (UUID is a __slots__ class: allocate it and fill its two slots, as UUID.__init__ would)."""
    cdef unsigned char b[16]
    kb_store_be64(b, msb)
    kb_store_be64(b + 8, lsb)
    cdef object value = _uuid_int(b)
    cdef object u = _uuid_alloc(<PyTypeObject*>_UUID, 0)
    if _UUID_INT_OFF > 0 and _UUID_SAFE_OFF > 0:
        _slot_init(u, _UUID_INT_OFF, value)
        _slot_init(u, _UUID_SAFE_OFF, _SAFE_UNKNOWN)
    else:
        PyObject_GenericSetAttr(u, "int", value)
        PyObject_GenericSetAttr(u, "is_safe", _SAFE_UNKNOWN)
    return u


cdef int _uuid_halves(object value, uint64_t* msb, uint64_t* lsb) except -1:
    """Accept uuid.UUID, 16 bytes-like, or None (the zero UUID)."""
    cdef object n
    if value is None:
        msb[0] = 0
        lsb[0] = 0
        return 0
    if isinstance(value, _UUID):
        n = value.int
    elif isinstance(value, (bytes, bytearray, memoryview)):
        if len(value) != 16:
            raise ValueError(f"a UUID needs 16 bytes, got {len(value)}")
        n = _INT_FROM_BYTES(bytes(value), "big")
    else:
        raise TypeError(f"expected uuid.UUID or 16 bytes, got {type(value).__name__}")
    msb[0] = <uint64_t>(n >> 64)
    lsb[0] = <uint64_t>(n & 0xFFFFFFFFFFFFFFFF)
    return 0


cdef inline int kw_uuid(KWriter* w, uint64_t msb, uint64_t lsb) except -1:
    kw_reserve(w, 16)
    kb_store_be64(w.p + w.pos, msb)
    kb_store_be64(w.p + w.pos + 8, lsb)
    w.pos += 16
    return 0


cdef inline int kr_uuid(KReader* r, uint64_t* msb, uint64_t* lsb) except -1:
    kr_need(r, 16, "uuid")
    msb[0] = kb_load_be64(r.buf + r.pos)
    lsb[0] = kb_load_be64(r.buf + r.pos + 8)
    r.pos += 16
    return 0


cdef inline object _str_at(const unsigned char* p, Py_ssize_t n):
    return PyUnicode_DecodeUTF8(<const char*>p, n, "replace")


# Nulls and lengths follow Kafka's generated readers (MessageDataGenerator.generateVariableLengthReader):
# any negative length is null; null in a field that is not nullable at that version is refused with
# Kafka's text "non-nullable field <name> was serialized as null" (<name> is the camelCase field name, or
# "<name> element" for an element of an array of strings); a string longer than 0x7fff bytes is refused
# with "string field <name> had invalid length <n>". The table of which field is nullable in which
# version is in tests/test_nullability.py.

cdef inline int kr_null_refused(KReader* r, str what) except -1:
    return kr_bad(r, f"non-nullable field {what} was serialized as null")


cdef inline object kr_cstr(KReader* r, str what, bint nullable):
    """Compact string; Kafka's replacement-character UTF-8 decoding; null refused unless nullable."""
    cdef Py_ssize_t n = kr_compact_len(r, what)
    if n < 0:
        if not nullable:
            kr_null_refused(r, what)
        return None
    if n > 0x7fff:
        kr_bad(r, f"string field {what} had invalid length {n}")
    cdef object s = _str_at(r.buf + r.pos, n)
    r.pos += n
    return s


cdef inline object kr_str(KReader* r, str what, bint nullable):
    """Classic string (int16 length; any negative length is null)."""
    cdef int16_t n = kr_i16(r)
    if n < 0:
        if nullable:
            return None
        kr_null_refused(r, what)
    kr_need(r, n, what)
    cdef object s = _str_at(r.buf + r.pos, n)
    r.pos += n
    return s


cdef inline object kr_string_v(KReader* r, bint flexible, str what, bint nullable):
    return kr_cstr(r, what, nullable) if flexible else kr_str(r, what, nullable)


cdef inline Py_ssize_t kr_array_v(KReader* r, bint flexible, str what, Py_ssize_t min_size,
                                  bint nullable) except -2:
    cdef Py_ssize_t n
    if flexible:
        n = kr_compact_count(r, what, min_size)
    else:
        n = kr_classic_count(r, what, min_size)
    if n < 0 and not nullable:
        kr_null_refused(r, what)
    return n


cdef int kw_utf8(KWriter* w, object s, bint flexible, bint nullable, str what) except -1:
    """String field: compact (flexible) or int16-length (classic); None only where nullable."""
    cdef const char* data
    cdef Py_ssize_t n
    if s is None:
        if not nullable:
            raise ValueError(f"{what} may not be None")
        if flexible:
            kw_uvarint(w, 0)
        else:
            kw_i16(w, -1)
        return 0
    if not isinstance(s, str):
        raise TypeError(f"{what} must be str, not {type(s).__name__}")
    data = PyUnicode_AsUTF8AndSize(s, &n)
    if n > 32767:  # Kafka's writers refuse it in both forms ("field is too long to be serialized")
        raise ValueError(f"{what} is longer than 32767 bytes")
    if flexible:
        kw_uvarint(w, <uint32_t>(n + 1))
    else:
        kw_i16(w, <int>n)
    kw_raw(w, <const unsigned char*>data, n)
    return 0


cdef inline int kw_array_len(KWriter* w, object seq, bint flexible) except -1:
    if seq is None:
        if flexible:
            kw_uvarint(w, 0)
        else:
            kw_i32(w, -1)
        return 0
    if isinstance(seq, (str, bytes)):   # a bare string would be written one character per element
        raise TypeError(f"an array field takes a list, not {type(seq).__name__} {seq!r:.40}")
    cdef Py_ssize_t n = len(seq)
    if flexible:
        kw_uvarint(w, <uint32_t>(n + 1))
    else:
        kw_i32(w, n)
    return 0


cdef int kw_buffer(KWriter* w, object data, bint flexible) except -1:
    """Bytes field from any buffer; None writes null."""
    cdef Py_buffer view
    if data is None:
        if flexible:
            kw_uvarint(w, 0)
        else:
            kw_i32(w, -1)
        return 0
    if PyBytes_CheckExact(data):
        if flexible:
            kw_uvarint(w, <uint32_t>(PyBytes_GET_SIZE(data) + 1))
        else:
            kw_i32(w, PyBytes_GET_SIZE(data))
        kw_raw(w, <const unsigned char*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
        return 0
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if flexible:
            kw_uvarint(w, <uint32_t>(view.len + 1))
        else:
            kw_i32(w, view.len)
        kw_raw(w, <const unsigned char*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return 0


cdef int kw_tags(KWriter* w, object tags) except -1:
    """Write a tagged-field section from {tag: bytes} (None or empty writes the single 0 byte)."""
    if not tags:
        kw_uvarint(w, 0)
        return 0
    kw_uvarint(w, <uint32_t>len(tags))
    cdef object tag
    cdef Py_buffer view
    for tag in sorted(tags):
        # a tag is an unsigned varint of 32 bits on the wire (Kafka's readUnsignedVarint): every tag the
        # decoder accepts must encode again
        if not 0 <= tag <= 0xFFFFFFFF:
            raise ValueError(f"tag {tag} is out of range")
        kw_uvarint(w, <uint32_t>tag)
        PyObject_GetBuffer(tags[tag], &view, PyBUF_SIMPLE)
        try:
            kw_uvarint(w, <uint32_t>view.len)
            kw_raw(w, <const unsigned char*>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)
    return 0


cdef list _as_list(object value, str what):
    """An array field's value as a list; a bare str or bytes (which ``list()`` would split into characters)
    is refused."""
    if value is None:
        return []
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"{what} takes a list, not {type(value).__name__} {value!r:.40}")
    return list(value)


cdef object _merge_tags(object known, object unknown):
    """Known tagged fields ({tag: encoded bytes}) plus the unknown ones kept from decoding."""
    if not unknown:
        return known
    if not known:
        return unknown
    out = dict(unknown)
    out.update(known)
    return out


cdef inline int _check_i8(object v, str what) except -1:
    if not -128 <= v <= 127:
        raise OverflowError(f"{what}={v} does not fit int8")
    return 0


cdef inline int _check_i16(object v, str what) except -1:
    if not -32768 <= v <= 32767:
        raise OverflowError(f"{what}={v} does not fit int16")
    return 0


cdef inline int _check_i32(object v, str what) except -1:
    if not -2147483648 <= v <= 2147483647:
        raise OverflowError(f"{what}={v} does not fit int32")
    return 0


# --------------------------------------------------------------------------------------------- base

cdef class Message:
    """Base of every message and struct: field-wise equality, repr, ``to_dict``, ``encode``/``decode``.

    Subclasses list their public fields in ``FIELDS``; messages also carry ``API_KEY``, the supported
    version range and whether they are a request."""

    FIELDS = ()

    cdef int _write(self, KWriter* w, int version) except -1:
        raise NotImplementedError

    def to_dict(self):
        """Fields as a plain dict (nested structs become dicts too)."""
        out = {}
        for name in type(self).FIELDS:
            v = getattr(self, name)
            if isinstance(v, Message):
                v = v.to_dict()
            elif isinstance(v, list) and v and isinstance(v[0], Message):
                v = [x.to_dict() for x in v]
            out[name] = v
        return out

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        for name in type(self).FIELDS:
            if getattr(self, name) != getattr(other, name):
                return False
        return True

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None

    def __repr__(self):
        parts = []
        for name in type(self).FIELDS:
            v = getattr(self, name)
            if isinstance(v, memoryview):
                v = f"<{v.nbytes} bytes>"
            elif isinstance(v, (bytes, bytearray)) and len(v) > 32:
                v = f"<{len(v)} bytes>"
            else:
                v = repr(v)
            parts.append(f"{name}={v}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def __reduce__(self):
        return (_rebuild, (type(self), self.to_kwargs()))

    def to_kwargs(self):
        return {name: getattr(self, name) for name in type(self).FIELDS}

    def encode(self, version=None):
        """The message body (no header, no size prefix) at ``version`` (default: the newest supported)."""
        cdef KWriter w
        cdef int v = self._resolve_version(version)
        kw_init(&w)
        try:
            self._write(&w, v)
            return kw_to_bytes(&w)
        finally:
            kw_free(&w)

    cdef int _resolve_version(self, object version) except -1:
        cls = type(self)
        if version is None:
            return cls.MAX_VERSION
        if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
            raise UnsupportedVersionError(
                f"{cls.__name__} supports versions {cls.MIN_VERSION}-{cls.MAX_VERSION}, not {version}")
        return version

    @classmethod
    def decode(cls, buf, version=None):
        """Decode a body (no header) that must span the whole of ``buf``."""
        cdef int v = cls.MAX_VERSION if version is None else version
        if not cls.MIN_VERSION <= v <= cls.MAX_VERSION:
            raise UnsupportedVersionError(
                f"{cls.__name__} supports versions {cls.MIN_VERSION}-{cls.MAX_VERSION}, not {v}")
        return _with_reader(buf, _decode_body_entry, cls.API_KEY, v, cls.IS_REQUEST)


def _rebuild(cls, kwargs):
    return cls(**kwargs)


# --------------------------------------------------------------------------------------------- headers

@cython.final
cdef class RequestHeader(Message):
    """Request header v1/v2: api_key, api_version, correlation_id, client_id (None if null on the wire)."""

    FIELDS = ("api_key", "api_version", "correlation_id", "client_id", "unknown_tagged_fields")
    MIN_VERSION = 1
    MAX_VERSION = 2

    cdef public int api_key
    cdef public int api_version
    cdef public int32_t correlation_id
    cdef object _client_id
    cdef object _src
    cdef Py_ssize_t _cid_off
    cdef Py_ssize_t _cid_len
    cdef public object unknown_tagged_fields

    def __init__(self, api_key=0, api_version=0, correlation_id=0, client_id=None,
                 unknown_tagged_fields=None):
        _check_i16(api_key, "api_key")
        _check_i16(api_version, "api_version")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self._client_id = client_id
        self._src = None
        self._cid_len = -1
        self.unknown_tagged_fields = unknown_tagged_fields

    @property
    def client_id(self):
        if self._src is not None:
            if self._cid_len >= 0:
                self._client_id = _view_str(self._src, self._cid_off, self._cid_len)
            self._src = None
        return self._client_id

    @client_id.setter
    def client_id(self, value):
        self._src = None
        self._client_id = value

    @property
    def header_version(self):
        """2 when the API version is flexible, else 1."""
        return 2 if _known_key(self.api_key) and self.api_version >= _flexible_from(self.api_key) else 1


cdef object _view_str(object src, Py_ssize_t off, Py_ssize_t n):
    cdef Py_buffer view
    if PyBytes_CheckExact(src):
        return _str_at(<const unsigned char*>PyBytes_AS_STRING(src) + off, n)
    PyObject_GetBuffer(src, &view, PyBUF_SIMPLE)
    try:
        return _str_at(<const unsigned char*>view.buf + off, n)
    finally:
        PyBuffer_Release(&view)


@cython.final
cdef class ResponseHeader(Message):
    """Response header v0 (correlation id) or v1 (plus tagged fields)."""

    FIELDS = ("correlation_id", "unknown_tagged_fields")
    MIN_VERSION = 0
    MAX_VERSION = 1

    cdef public int32_t correlation_id
    cdef public object unknown_tagged_fields

    def __init__(self, correlation_id=0, unknown_tagged_fields=None):
        self.correlation_id = correlation_id
        self.unknown_tagged_fields = unknown_tagged_fields


@cython.final
@cython.freelist(16)
cdef class Request:
    """A decoded request: ``.header`` (RequestHeader) and ``.body`` (the message).

    The header fields are parsed eagerly into C slots; the RequestHeader object (and the client id
    string) is only built when asked for. ``api_key``, ``api_version``, ``correlation_id`` and
    ``client_id`` are available on the request directly."""

    cdef readonly int api_key
    cdef readonly int api_version
    cdef readonly int32_t correlation_id
    cdef object _src
    cdef Py_ssize_t _cid_off
    cdef Py_ssize_t _cid_len
    cdef object _header
    cdef object _header_tags
    cdef object _client_id
    cdef readonly object body

    def __init__(self, RequestHeader header, body):
        self.api_key = header.api_key
        self.api_version = header.api_version
        self.correlation_id = header.correlation_id
        self._header = header
        self._src = None
        self.body = body

    @property
    def header(self):
        cdef RequestHeader h
        if self._header is None:
            h = RequestHeader.__new__(RequestHeader)
            h.api_key = self.api_key
            h.api_version = self.api_version
            h.correlation_id = self.correlation_id
            h._src = self._src
            h._cid_off = self._cid_off
            h._cid_len = self._cid_len
            h._client_id = self._client_id   # already decoded by .client_id when _src is None
            h.unknown_tagged_fields = self._header_tags
            self._header = h
        return self._header

    @property
    def client_id(self):
        """The header's client id (None if null), decoded straight from the frame when the header object
        was not built."""
        if self._header is not None:
            return (<RequestHeader>self._header).client_id
        if self._src is not None:
            self._client_id = _view_str(self._src, self._cid_off, self._cid_len) if self._cid_len >= 0 else None
            self._src = None
        return self._client_id

    def __repr__(self):
        return f"Request(header={self.header!r}, body={self.body!r})"

    def __eq__(self, other):
        if not isinstance(other, Request):
            return NotImplemented
        return self.header == (<Request>other).header and self.body == (<Request>other).body

    __hash__ = None


@cython.final
@cython.freelist(8)
cdef class Response:
    """A decoded response: ``.header`` (ResponseHeader) and ``.body``."""

    cdef readonly ResponseHeader header
    cdef readonly object body

    def __init__(self, ResponseHeader header, body):
        self.header = header
        self.body = body

    @property
    def correlation_id(self):
        return self.header.correlation_id

    def __repr__(self):
        return f"Response(header={self.header!r}, body={self.body!r})"

    def __eq__(self, other):
        if not isinstance(other, Response):
            return NotImplemented
        return self.header == (<Response>other).header and self.body == (<Response>other).body

    __hash__ = None


# --------------------------------------------------------------------------------- KIP-714 messages

cdef class _InstanceMessage(Message):
    """Base of the messages that carry a ClientInstanceId: stored as two C integers, exposed as a
    ``uuid.UUID`` built on first access, or as 16 raw bytes."""

    cdef uint64_t _msb
    cdef uint64_t _lsb
    cdef object _uuid

    @property
    def client_instance_id(self):
        """The instance id as ``uuid.UUID`` (in a GetTelemetrySubscriptions request, all zeros asks the
        broker to assign one)."""
        if self._uuid is None:
            self._uuid = _make_uuid(self._msb, self._lsb)
        return self._uuid

    @client_instance_id.setter
    def client_instance_id(self, value):
        _uuid_halves(value, &self._msb, &self._lsb)
        self._uuid = None

    @property
    def client_instance_id_bytes(self):
        """The 16 raw bytes of the instance id (msb then lsb, big-endian)."""
        cdef unsigned char b[16]
        kb_store_be64(b, self._msb)
        kb_store_be64(b + 8, self._lsb)
        return PyBytes_FromStringAndSize(<const char*>b, 16)


@cython.final
cdef class GetTelemetrySubscriptionsRequest(_InstanceMessage):
    """GetTelemetrySubscriptions request v0 (key 71): ``client_instance_id`` (zero on first contact)."""

    API_KEY = K_GET_TELEMETRY_SUBSCRIPTIONS
    IS_REQUEST = True
    MIN_VERSION = 0
    MAX_VERSION = 0
    FIELDS = ("client_instance_id", "unknown_tagged_fields")

    cdef public object unknown_tagged_fields

    def __init__(self, client_instance_id=None, unknown_tagged_fields=None):
        _uuid_halves(client_instance_id, &self._msb, &self._lsb)
        self._uuid = None
        self.unknown_tagged_fields = unknown_tagged_fields

    cdef int _write(self, KWriter* w, int version) except -1:
        kw_uuid(w, self._msb, self._lsb)
        kw_tags(w, self.unknown_tagged_fields)
        return 0


cdef object _dec_gts_request(KReader* r, int version):
    cdef GetTelemetrySubscriptionsRequest m = GetTelemetrySubscriptionsRequest.__new__(
        GetTelemetrySubscriptionsRequest)
    kr_uuid(r, &m._msb, &m._lsb)
    m.unknown_tagged_fields = kr_tagged_fields(r)
    return m


@cython.final
cdef class GetTelemetrySubscriptionsResponse(_InstanceMessage):
    """GetTelemetrySubscriptions response v0: the subscription a broker hands a client."""

    API_KEY = K_GET_TELEMETRY_SUBSCRIPTIONS
    IS_REQUEST = False
    MIN_VERSION = 0
    MAX_VERSION = 0
    FIELDS = ("throttle_time_ms", "error_code", "client_instance_id", "subscription_id",
              "accepted_compression_types", "push_interval_ms", "telemetry_max_bytes",
              "delta_temporality", "requested_metrics", "unknown_tagged_fields")

    cdef public int32_t throttle_time_ms
    cdef public int16_t error_code
    cdef public int32_t subscription_id
    cdef public list accepted_compression_types
    cdef public int32_t push_interval_ms
    cdef public int32_t telemetry_max_bytes
    cdef public bint delta_temporality
    cdef public list requested_metrics
    cdef public object unknown_tagged_fields

    def __init__(self, throttle_time_ms=0, error_code=0, client_instance_id=None, subscription_id=0,
                 accepted_compression_types=None, push_interval_ms=0, telemetry_max_bytes=0,
                 delta_temporality=False, requested_metrics=None, unknown_tagged_fields=None):
        self.throttle_time_ms = throttle_time_ms
        self.error_code = error_code
        _uuid_halves(client_instance_id, &self._msb, &self._lsb)
        self._uuid = None
        self.subscription_id = subscription_id
        self.accepted_compression_types = _as_list(accepted_compression_types, "accepted_compression_types")
        self.push_interval_ms = push_interval_ms
        self.telemetry_max_bytes = telemetry_max_bytes
        self.delta_temporality = delta_temporality
        self.requested_metrics = _as_list(requested_metrics, "requested_metrics")
        self.unknown_tagged_fields = unknown_tagged_fields

    cdef int _write(self, KWriter* w, int version) except -1:
        cdef object t
        cdef object s
        kw_i32(w, self.throttle_time_ms)
        kw_i16(w, self.error_code)
        kw_uuid(w, self._msb, self._lsb)
        kw_i32(w, self.subscription_id)
        kw_uvarint(w, <uint32_t>(len(self.accepted_compression_types) + 1))
        for t in self.accepted_compression_types:
            _check_i8(t, "accepted_compression_types item")
            kw_i8(w, t)
        kw_i32(w, self.push_interval_ms)
        kw_i32(w, self.telemetry_max_bytes)
        kw_i8(w, 1 if self.delta_temporality else 0)
        kw_uvarint(w, <uint32_t>(len(self.requested_metrics) + 1))
        for s in self.requested_metrics:
            kw_utf8(w, s, True, False, "requested_metrics item")
        kw_tags(w, self.unknown_tagged_fields)
        return 0


cdef object _dec_gts_response(KReader* r, int version):
    cdef GetTelemetrySubscriptionsResponse m = GetTelemetrySubscriptionsResponse.__new__(
        GetTelemetrySubscriptionsResponse)
    cdef Py_ssize_t i, n
    cdef list types, metrics
    m.throttle_time_ms = kr_i32(r)
    m.error_code = kr_i16(r)
    kr_uuid(r, &m._msb, &m._lsb)
    m.subscription_id = kr_i32(r)
    n = kr_array_v(r, True, "acceptedCompressionTypes", 1, False)
    types = [None] * n
    for i in range(n):
        types[i] = kr_i8(r)
    m.accepted_compression_types = types
    m.push_interval_ms = kr_i32(r)
    m.telemetry_max_bytes = kr_i32(r)
    m.delta_temporality = kr_bool(r)
    n = kr_array_v(r, True, "requestedMetrics", 1, False)
    metrics = [None] * n
    for i in range(n):
        metrics[i] = kr_cstr(r, "requestedMetrics element", False)
    m.requested_metrics = metrics
    m.unknown_tagged_fields = kr_tagged_fields(r)
    return m


@cython.final
cdef class PushTelemetryRequest(_InstanceMessage):
    """PushTelemetry request v0 (key 72).

    ``metrics`` is the (possibly compressed) OTLP payload. On a decoded request it is a read-only
    memoryview into the decoded buffer (no copy). The field is not nullable: a null on the wire (what
    librdkafka before 2.10.1 sent for an empty payload) raises MalformedFrameError, "non-nullable field
    metrics was serialized as null", as Kafka's parser does (the broker then closes the connection), and
    encoding ``metrics=None`` raises ValueError."""

    API_KEY = K_PUSH_TELEMETRY
    IS_REQUEST = True
    MIN_VERSION = 0
    MAX_VERSION = 0
    FIELDS = ("client_instance_id", "subscription_id", "terminating", "compression_type", "metrics",
              "unknown_tagged_fields")

    cdef public int32_t subscription_id
    cdef public bint terminating
    cdef public int8_t compression_type
    cdef object _metrics
    cdef object _src
    cdef Py_ssize_t _m_off
    cdef Py_ssize_t _m_len
    cdef public object unknown_tagged_fields

    def __init__(self, client_instance_id=None, subscription_id=0, terminating=False,
                 compression_type=0, metrics=b"", unknown_tagged_fields=None):
        _uuid_halves(client_instance_id, &self._msb, &self._lsb)
        self._uuid = None
        self.subscription_id = subscription_id
        self.terminating = terminating
        self.compression_type = compression_type
        self._metrics = metrics
        self._src = None
        self.unknown_tagged_fields = unknown_tagged_fields

    @property
    def metrics(self):
        if self._src is not None:
            self._metrics = _slice_view(self._src, self._m_off, self._m_len)
            self._src = None
        return self._metrics

    @metrics.setter
    def metrics(self, value):
        self._src = None
        self._metrics = value

    @property
    def metrics_size(self):
        """Length of the payload on the wire (0 for null), without materialising ``metrics``."""
        return self._metrics_size()

    cdef Py_ssize_t _metrics_size(self) except -1:
        cdef Py_buffer view
        cdef Py_ssize_t n
        if self._src is not None:
            return self._m_len
        if self._metrics is None:
            return 0
        if PyBytes_CheckExact(self._metrics):
            return PyBytes_GET_SIZE(self._metrics)
        PyObject_GetBuffer(self._metrics, &view, PyBUF_SIMPLE)   # bytes of any buffer, whatever its format
        n = view.len
        PyBuffer_Release(&view)
        return n

    def decision_fields(self):
        """``(client_instance_id_bytes, subscription_id, terminating, compression_type, metrics_size)``
        in one call: what a broker needs to decide the push, without materialising the UUID or the view."""
        cdef unsigned char b[16]
        kb_store_be64(b, self._msb)
        kb_store_be64(b + 8, self._lsb)
        return (PyBytes_FromStringAndSize(<const char*>b, 16), self.subscription_id, self.terminating,
                self.compression_type, self._metrics_size())

    cdef int _write(self, KWriter* w, int version) except -1:
        kw_uuid(w, self._msb, self._lsb)
        kw_i32(w, self.subscription_id)
        kw_i8(w, 1 if self.terminating else 0)
        kw_i8(w, self.compression_type)
        if self.metrics is None:
            raise ValueError("metrics may not be None (the field is not nullable)")
        kw_buffer(w, self.metrics, True)
        kw_tags(w, self.unknown_tagged_fields)
        return 0


# The fields a broker decides a push on, read in C by another native module (kip714._instances'
# InstanceTable.try_push_request) through a capsule: no Python object is made for them (the tuple of
# decision_fields() and its 16-byte id are most of a push's cost when the decision is the whole answer).
# Returns 1 and fills the outputs for a PushTelemetryRequest, 0 for any other object, -1 with an exception.
ctypedef int (*_push_fields_fn)(object, uint64_t*, uint64_t*, int32_t*, int*, int*, Py_ssize_t*) except -1


cdef int _push_fields(object body, uint64_t* msb, uint64_t* lsb, int32_t* sid, int* terminating,
                      int* compression_type, Py_ssize_t* size) except -1:
    cdef PushTelemetryRequest m
    if type(body) is not PushTelemetryRequest:
        return 0
    m = <PushTelemetryRequest>body
    msb[0] = m._msb
    lsb[0] = m._lsb
    sid[0] = m.subscription_id
    terminating[0] = 1 if m.terminating else 0
    compression_type[0] = m.compression_type
    size[0] = m._metrics_size()
    return 1


_PUSH_FIELDS_CAPI = PyCapsule_New(<void*>_push_fields, "kip714._protocol._PUSH_FIELDS_CAPI", NULL)


cdef char* _FORMAT_B = "B"


@cython.final
@cython.freelist(8)
cdef class _BytesSlice:
    """Hands a memoryview ``n`` bytes at ``p`` inside the ``bytes`` object ``src``, read-only, with
    ``src`` as the view's exporter (``view.obj is src``): the view keeps the frame alive by itself and
    this helper is gone once the view exists. ``bytes`` has no release hook, so naming it as the
    exporter is exactly what ``memoryview(src)`` would record. One memoryview instead of a view of the
    whole frame plus its slice (~3x cheaper)."""

    cdef object _src
    cdef const unsigned char* _p
    cdef Py_ssize_t _n

    def __getbuffer__(self, Py_buffer* buffer, int flags):
        if (flags & PyBUF_WRITABLE) == PyBUF_WRITABLE:
            raise BufferError("the payload view is read-only")
        buffer.obj = self._src
        buffer.buf = <void*>self._p
        buffer.len = self._n
        buffer.readonly = 1
        buffer.itemsize = 1
        buffer.format = _FORMAT_B if (flags & PyBUF_FORMAT) == PyBUF_FORMAT else NULL
        buffer.ndim = 1
        buffer.shape = &buffer.len if (flags & PyBUF_ND) == PyBUF_ND else NULL
        buffer.strides = &buffer.itemsize if (flags & PyBUF_STRIDES) == PyBUF_STRIDES else NULL
        buffer.suboffsets = NULL
        buffer.internal = NULL


cdef object _slice_view(object src, Py_ssize_t off, Py_ssize_t n):
    """A read-only memoryview of ``src[off:off + n]`` whose ``.obj`` is ``src`` (no copy)."""
    cdef _BytesSlice sl
    if not PyBytes_CheckExact(src):
        view = memoryview(src)[off:off + n]
        return view if view.readonly else view.toreadonly()
    if off < 0 or n < 0 or off > PyBytes_GET_SIZE(src) - n:
        raise IndexError("payload slice out of the frame")
    sl = _BytesSlice.__new__(_BytesSlice)
    sl._src = src
    sl._p = <const unsigned char*>PyBytes_AS_STRING(src) + off
    sl._n = n
    return PyMemoryView_FromObject(sl)


cdef object _dec_push_request(KReader* r, int version, object src):
    cdef PushTelemetryRequest m = PushTelemetryRequest.__new__(PushTelemetryRequest)
    cdef Py_ssize_t n
    kr_uuid(r, &m._msb, &m._lsb)
    m.subscription_id = kr_i32(r)
    m.terminating = kr_bool(r)
    m.compression_type = kr_i8(r)
    n = kr_compact_len(r, "metrics")
    if n < 0:
        kr_null_refused(r, "metrics")   # Metrics is not nullable: Kafka closes the connection
    m._src = src
    m._m_off = r.pos
    m._m_len = n
    r.pos += n
    m.unknown_tagged_fields = kr_tagged_fields(r)
    return m


@cython.final
cdef class PushTelemetryResponse(Message):
    """PushTelemetry response v0: ``throttle_time_ms``, ``error_code``."""

    API_KEY = K_PUSH_TELEMETRY
    IS_REQUEST = False
    MIN_VERSION = 0
    MAX_VERSION = 0
    FIELDS = ("throttle_time_ms", "error_code", "unknown_tagged_fields")

    cdef public int32_t throttle_time_ms
    cdef public int16_t error_code
    cdef public object unknown_tagged_fields

    def __init__(self, throttle_time_ms=0, error_code=0, unknown_tagged_fields=None):
        self.throttle_time_ms = throttle_time_ms
        self.error_code = error_code
        self.unknown_tagged_fields = unknown_tagged_fields

    cdef int _write(self, KWriter* w, int version) except -1:
        kw_i32(w, self.throttle_time_ms)
        kw_i16(w, self.error_code)
        kw_tags(w, self.unknown_tagged_fields)
        return 0


cdef object _dec_push_response(KReader* r, int version):
    cdef PushTelemetryResponse m = PushTelemetryResponse.__new__(PushTelemetryResponse)
    m.throttle_time_ms = kr_i32(r)
    m.error_code = kr_i16(r)
    m.unknown_tagged_fields = kr_tagged_fields(r)
    return m


include "proto_admin.pxi"


# ----------------------------------------------------------------------------------------- dispatch

cdef object _decode_body(KReader* r, int api_key, int version, bint is_request, object src):
    if is_request:
        if api_key == K_PUSH_TELEMETRY:
            return _dec_push_request(r, version, src)
        if api_key == K_GET_TELEMETRY_SUBSCRIPTIONS:
            return _dec_gts_request(r, version)
        if api_key == K_API_VERSIONS:
            return _dec_api_versions_request(r, version)
        if api_key == K_METADATA:
            return _dec_metadata_request(r, version)
    else:
        if api_key == K_PUSH_TELEMETRY:
            return _dec_push_response(r, version)
        if api_key == K_GET_TELEMETRY_SUBSCRIPTIONS:
            return _dec_gts_response(r, version)
        if api_key == K_API_VERSIONS:
            return _dec_api_versions_response(r, version)
        if api_key == K_METADATA:
            return _dec_metadata_response(r, version)
    raise UnsupportedApiKeyError(f"kip714 does not decode API key {api_key}")


cdef inline int _check_end(KReader* r, str what) except -1:
    if r.pos != r.end:
        kr_bad(r, f"{r.end - r.pos} unexpected bytes after the {what}")
    return 0


ctypedef object (*reader_fn)(KReader* r, object src, int a, int b, bint c)


cdef object _with_reader(object buf, reader_fn fn, int a, int b, bint c):
    """Run ``fn`` over the bytes of ``buf``: bytes directly, any other buffer through the protocol."""
    cdef KReader r
    cdef Py_buffer view
    if PyBytes_CheckExact(buf):
        kr_init(&r, <const unsigned char*>PyBytes_AS_STRING(buf), PyBytes_GET_SIZE(buf))
        return fn(&r, buf, a, b, c)
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        kr_init(&r, <const unsigned char*>view.buf, view.len)
        return fn(&r, buf, a, b, c)
    finally:
        PyBuffer_Release(&view)


cdef object _decode_body_entry(KReader* r, object src, int api_key, int version, bint is_request):
    body = _decode_body(r, api_key, version, is_request, src)
    _check_end(r, "message body")
    return body


cdef RequestHeader _read_request_header_fixed(KReader* r, object src):
    cdef RequestHeader h = RequestHeader.__new__(RequestHeader)
    cdef int16_t n
    h.api_key = kr_i16(r)
    h.api_version = kr_i16(r)
    h.correlation_id = kr_i32(r)
    n = kr_i16(r)
    h._src = src
    h._cid_len = n if n >= 0 else -1   # ClientId is nullable: any negative length is null, as in Kafka
    if n >= 0:
        kr_need(r, n, "client id")
        h._cid_off = r.pos
        r.pos += n
    return h


cdef object _decode_request_entry(KReader* r, object src, int unused_a, int unused_b, bint unused_c):
    cdef Request req = Request.__new__(Request)
    cdef int16_t n
    cdef int api_key, version
    req.api_key = api_key = kr_i16(r)
    req.api_version = version = kr_i16(r)
    req.correlation_id = kr_i32(r)
    n = kr_i16(r)
    req._src = src
    req._cid_len = n if n >= 0 else -1   # nullable: any negative length is null, as in Kafka
    if n >= 0:
        kr_need(r, n, "client id")
        req._cid_off = r.pos
        r.pos += n
    if not _known_key(api_key):
        exc = UnsupportedApiKeyError(f"kip714 does not decode API key {api_key}")
        exc.header = req.header
        raise exc
    if version < 0 or version > _max_version(api_key):
        exc = UnsupportedVersionError(
            f"API key {api_key} version {version} is not supported (0-{_max_version(api_key)})")
        exc.header = req.header
        raise exc
    if version >= _flexible_from(api_key):
        req._header_tags = kr_tagged_fields(r)
    req.body = _decode_body(r, api_key, version, True, src)
    _check_end(r, "request body")
    return req


def decode_request(buf):
    """Decode one request frame *without* its 4-byte size prefix into a :class:`Request`.

    Raises MalformedFrameError (INVALID_REQUEST) for bytes that do not parse, UnsupportedApiKeyError for
    an API key kip714 does not decode and UnsupportedVersionError (UNSUPPORTED_VERSION) for a version out
    of range; the last two carry ``.header`` (api_key, api_version, correlation_id, client_id) so a server
    can still answer or log. Nothing is guessed: a frame passed with its size prefix fails (as it would
    anyway) and its error says so."""
    try:
        return _with_reader(buf, _decode_request_entry, 0, 0, False)
    except Kip714Error as exc:
        if _looks_size_prefixed(buf):
            _add_prefix_hint(exc, "split_frames first, or pass frame[4:]")
        raise


cdef int _add_prefix_hint(object exc, str what) except -1:
    """Append to ``exc``'s message that the frame starts with its own size prefix (its type, error code and
    attributes such as ``.header`` stay)."""
    exc.args = (f"{exc} (the frame starts with its own size prefix: {what})",) + tuple(exc.args[1:])


cdef object _decode_header_entry(KReader* r, object src, int a, int b, bint c):
    cdef RequestHeader h = _read_request_header_fixed(r, src)
    h.client_id
    return h


def decode_request_header(buf):
    """The fixed part of any request header (api_key, api_version, correlation_id, client_id), for any
    API key, without decoding the body. Useful to log or refuse requests kip714 does not decode. Takes the
    frame without its 4-byte size prefix, as :func:`split_frames` returns it (any API key and version is
    read as it comes, so a prefix cannot be told from a header here)."""
    return _with_reader(buf, _decode_header_entry, 0, 0, False)


cdef object _decode_response_entry(KReader* r, object src, int api_key, int version, bint unused):
    cdef ResponseHeader h = ResponseHeader.__new__(ResponseHeader)
    h.correlation_id = kr_i32(r)
    # Flexible responses use header v1, except ApiVersions which always keeps header v0.
    if api_key != K_API_VERSIONS and version >= _flexible_from(api_key):
        h.unknown_tagged_fields = kr_tagged_fields(r)
    else:
        h.unknown_tagged_fields = None
    body = _decode_body(r, api_key, version, False, src)
    _check_end(r, "response body")
    cdef Response resp = Response.__new__(Response)
    resp.header = h
    resp.body = body
    return resp


def decode_response(buf, int api_key, int api_version, *, bint size_prefixed=False):
    """Decode one response frame, for the request (api_key, api_version) it answers, into a
    :class:`Response`.

    By default the frame comes *without* its 4-byte size prefix, as :func:`split_frames` returns it;
    ``size_prefixed=True`` takes it *with* the prefix, as :func:`encode_response` returns it (the prefix
    must match the length). Nothing is guessed: a prefixed frame passed without ``size_prefixed=True``
    fails, and its error says to pass it."""
    if not _known_key(api_key):
        raise UnsupportedApiKeyError(f"kip714 does not decode API key {api_key}")
    if api_version < 0 or api_version > _max_version(api_key):
        raise UnsupportedVersionError(f"API key {api_key} version {api_version} is not supported")
    if size_prefixed:
        return _with_reader(_without_size_prefix(buf), _decode_response_entry, api_key, api_version, False)
    try:
        return _with_reader(buf, _decode_response_entry, api_key, api_version, False)
    except MalformedFrameError as exc:
        if _looks_size_prefixed(buf):
            _add_prefix_hint(exc, "pass size_prefixed=True, or split_frames first")
        raise


cdef object _without_size_prefix(object buf):
    """``buf`` minus its 4-byte size prefix, which must match its length."""
    cdef object mv = memoryview(buf).cast("B")
    cdef Py_ssize_t n = len(mv)
    if n < 4:
        raise MalformedFrameError(f"a size-prefixed frame needs 4 bytes of size prefix, got {n}")
    size = int.from_bytes(mv[:4], "big", signed=True)
    if size != n - 4:
        raise MalformedFrameError(f"the size prefix says {size} bytes, {n - 4} follow")
    return mv[4:]


cdef bint _looks_size_prefixed(object buf):
    try:
        mv = memoryview(buf).cast("B")
    except TypeError:
        return False
    return len(mv) >= 4 and int.from_bytes(mv[:4], "big", signed=True) == len(mv) - 4


cdef int _body_version(Message body, object api_version) except -1:
    return body._resolve_version(api_version)


def encode_request(Message body not None, int32_t correlation_id, client_id, api_version=None,
                   header_tagged_fields=None):
    """A size-prefixed request frame: header v1 or v2 (by the API's flexible versions), then the body.

    ``api_version`` defaults to the newest version kip714 supports for the body's API."""
    if not type(body).IS_REQUEST:
        raise TypeError(f"{type(body).__name__} is a response; use encode_response")
    cdef int version = _body_version(body, api_version)
    cdef int api_key = type(body).API_KEY
    cdef KWriter w
    kw_init(&w)
    try:
        kw_i32(&w, 0)
        kw_i16(&w, api_key)
        kw_i16(&w, version)
        kw_i32(&w, correlation_id)
        kw_utf8(&w, client_id, False, True, "client_id")
        if version >= _flexible_from(api_key):
            kw_tags(&w, header_tagged_fields)
        body._write(&w, version)
        return kw_to_frame(&w, 0)
    finally:
        kw_free(&w)


def encode_response(int32_t correlation_id, Message body not None, api_version=None,
                    header_tagged_fields=None):
    """A size-prefixed response frame: header v0/v1 (ApiVersions always v0), then the body, ready for the
    socket (``decode_response(frame, key, version, size_prefixed=True)`` reads it back).

    ``api_version`` defaults to the newest version kip714 supports for the body's API; answer with the
    version the request used."""
    if type(body).IS_REQUEST:
        raise TypeError(f"{type(body).__name__} is a request; use encode_request")
    cdef int version = _body_version(body, api_version)
    cdef int api_key = type(body).API_KEY
    cdef KWriter w
    kw_init(&w)
    try:
        kw_i32(&w, 0)
        kw_i32(&w, correlation_id)
        if api_key != K_API_VERSIONS and version >= _flexible_from(api_key):
            kw_tags(&w, header_tagged_fields)
        body._write(&w, version)
        return kw_to_frame(&w, 0)
    finally:
        kw_free(&w)


# ----------------------------------------------------------------------------------------- framing

cdef object _split_frames_entry(KReader* r, object src, int copy, int max_frame, bint unused):
    cdef list frames = []
    cdef int32_t size
    cdef Py_ssize_t start
    cdef object mv = None
    while r.end - r.pos >= 4:
        size = <int32_t>kb_load_be32(r.buf + r.pos)
        if size < 0:
            kr_bad(r, f"negative frame size {size}")
        if size > max_frame:
            raise FrameTooLargeError(
                f"frame size {size} is over the limit of {max_frame} bytes (offset {r.pos})")
        if r.end - r.pos - 4 < size:
            break
        start = r.pos + 4
        if copy:
            frames.append(PyBytes_FromStringAndSize(<const char*>(r.buf + start), size))
        else:
            if mv is None:
                mv = memoryview(src).cast("B") if not PyBytes_CheckExact(src) else memoryview(src)
            frames.append(mv[start:start + size])
        r.pos = start + size
    return (frames, r.pos)


def split_frames(buf, max_frame_bytes=DEFAULT_MAX_FRAME_BYTES, *, bint copy=True):
    """Split a stream of size-prefixed frames.

    Returns ``(frames, consumed)``: every complete frame without its 4-byte prefix, and the number of
    bytes they took; an incomplete trailing frame is left for the next call. A size prefix over
    ``max_frame_bytes`` (default 100 MiB, Kafka's ``socket.request.max.bytes``) raises FrameTooLargeError
    before anything is allocated for it; a negative size raises MalformedFrameError.

    With ``copy=False`` the frames are memoryviews into ``buf`` (no copy; the buffer cannot be resized
    while they live). The default returns ``bytes``, safe to keep while ``buf`` is reused."""
    if max_frame_bytes < 0 or max_frame_bytes > 2147483647:
        raise ValueError("max_frame_bytes must be within 0..2147483647")
    return _with_reader(buf, _split_frames_entry, 1 if copy else 0, max_frame_bytes, False)


def message_class(int api_key, bint is_request):
    """The message class for (api_key, request or response); UnsupportedApiKeyError for a key kip714 does
    not model."""
    try:
        return _CLASSES[(api_key, is_request)]
    except KeyError:
        raise UnsupportedApiKeyError(f"kip714 does not decode API key {api_key}") from None


_CLASSES = {
    (K_GET_TELEMETRY_SUBSCRIPTIONS, True): GetTelemetrySubscriptionsRequest,
    (K_GET_TELEMETRY_SUBSCRIPTIONS, False): GetTelemetrySubscriptionsResponse,
    (K_PUSH_TELEMETRY, True): PushTelemetryRequest,
    (K_PUSH_TELEMETRY, False): PushTelemetryResponse,
    (K_API_VERSIONS, True): ApiVersionsRequest,
    (K_API_VERSIONS, False): ApiVersionsResponse,
    (K_METADATA, True): MetadataRequest,
    (K_METADATA, False): MetadataResponse,
}
