# Included by _protocol.pyx: the Message base class every body derives from, the request and response
# headers, and the decoded Request / Response that carry a header and a body.

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
