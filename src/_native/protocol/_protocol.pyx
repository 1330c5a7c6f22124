# cython: language_level=3
"""Kafka framing, request/response headers and message bodies for the APIs a KIP-714 endpoint speaks:
GetTelemetrySubscriptions (71) v0, PushTelemetry (72) v0, ApiVersions (18) v0-v4 and Metadata (3) v0-v13,
and the config admin APIs its subscriptions are managed by: DescribeConfigs (32) v1-v4, AlterConfigs (33)
v0-v2, IncrementalAlterConfigs (44) v0-v1 and ListConfigResources (74) v0-v1.

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
    K_DESCRIBE_CONFIGS = 32
    K_ALTER_CONFIGS = 33
    K_INCREMENTAL_ALTER_CONFIGS = 44
    K_GET_TELEMETRY_SUBSCRIPTIONS = 71
    K_PUSH_TELEMETRY = 72
    K_LIST_CONFIG_RESOURCES = 74

#: api_key -> (min version, max version, first flexible version)
SUPPORTED_VERSIONS = {
    K_METADATA: (0, 13, 9),
    K_API_VERSIONS: (0, 4, 3),
    K_GET_TELEMETRY_SUBSCRIPTIONS: (0, 0, 0),
    K_PUSH_TELEMETRY: (0, 0, 0),
    K_DESCRIBE_CONFIGS: (1, 4, 4),
    K_ALTER_CONFIGS: (0, 2, 2),
    K_INCREMENTAL_ALTER_CONFIGS: (0, 1, 1),
    K_LIST_CONFIG_RESOURCES: (0, 1, 0),
}


cdef inline int _flexible_from(int api_key) noexcept:
    if api_key == K_METADATA:
        return 9
    if api_key == K_API_VERSIONS:
        return 3
    if api_key == K_DESCRIBE_CONFIGS:
        return 4
    if api_key == K_ALTER_CONFIGS:
        return 2
    if api_key == K_INCREMENTAL_ALTER_CONFIGS:
        return 1
    return 0


cdef inline int _max_version(int api_key) noexcept:
    if api_key == K_METADATA:
        return 13
    if api_key == K_API_VERSIONS or api_key == K_DESCRIBE_CONFIGS:
        return 4
    if api_key == K_ALTER_CONFIGS:
        return 2
    if api_key == K_INCREMENTAL_ALTER_CONFIGS or api_key == K_LIST_CONFIG_RESOURCES:
        return 1
    return 0


cdef inline int _min_version(int api_key) noexcept:
    return 1 if api_key == K_DESCRIBE_CONFIGS else 0


cdef inline bint _known_key(int api_key) noexcept:
    return (api_key == K_PUSH_TELEMETRY or api_key == K_GET_TELEMETRY_SUBSCRIPTIONS
            or api_key == K_API_VERSIONS or api_key == K_METADATA or api_key == K_DESCRIBE_CONFIGS
            or api_key == K_ALTER_CONFIGS or api_key == K_INCREMENTAL_ALTER_CONFIGS
            or api_key == K_LIST_CONFIG_RESOURCES)


# The field types, the message base and headers, the KIP-714 messages, the messages a client needs before it
# pushes (ApiVersions, Metadata) and the config admin messages (subscriptions through Kafka's admin API): one
# file each, included in this order (each uses the ones before it).
include "proto_fields.pxi"
include "proto_message.pxi"
include "proto_telemetry.pxi"
include "proto_admin.pxi"
include "proto_configs.pxi"


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
        if api_key == K_DESCRIBE_CONFIGS:
            return _dec_describe_configs_request(r, version)
        if api_key == K_ALTER_CONFIGS:
            return _dec_alter_configs_request(r, version)
        if api_key == K_INCREMENTAL_ALTER_CONFIGS:
            return _dec_incremental_alter_configs_request(r, version)
        if api_key == K_LIST_CONFIG_RESOURCES:
            return _dec_list_config_resources_request(r, version)
    else:
        if api_key == K_PUSH_TELEMETRY:
            return _dec_push_response(r, version)
        if api_key == K_GET_TELEMETRY_SUBSCRIPTIONS:
            return _dec_gts_response(r, version)
        if api_key == K_API_VERSIONS:
            return _dec_api_versions_response(r, version)
        if api_key == K_METADATA:
            return _dec_metadata_response(r, version)
        if api_key == K_DESCRIBE_CONFIGS:
            return _dec_describe_configs_response(r, version)
        if api_key == K_ALTER_CONFIGS:
            return _dec_alter_configs_response(r, version)
        if api_key == K_INCREMENTAL_ALTER_CONFIGS:
            return _dec_incremental_alter_configs_response(r, version)
        if api_key == K_LIST_CONFIG_RESOURCES:
            return _dec_list_config_resources_response(r, version)
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
    if version < _min_version(api_key) or version > _max_version(api_key):
        exc = UnsupportedVersionError(f"API key {api_key} version {version} is not supported "
                                      f"({_min_version(api_key)}-{_max_version(api_key)})")
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
    if api_version < _min_version(api_key) or api_version > _max_version(api_key):
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
    (K_DESCRIBE_CONFIGS, True): DescribeConfigsRequest,
    (K_DESCRIBE_CONFIGS, False): DescribeConfigsResponse,
    (K_ALTER_CONFIGS, True): AlterConfigsRequest,
    (K_ALTER_CONFIGS, False): AlterConfigsResponse,
    (K_INCREMENTAL_ALTER_CONFIGS, True): IncrementalAlterConfigsRequest,
    (K_INCREMENTAL_ALTER_CONFIGS, False): IncrementalAlterConfigsResponse,
    (K_LIST_CONFIG_RESOURCES, True): ListConfigResourcesRequest,
    (K_LIST_CONFIG_RESOURCES, False): ListConfigResourcesResponse,
}
