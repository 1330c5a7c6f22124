# Included by _protocol.pyx: the KIP-714 messages, GetTelemetrySubscriptions (71) v0 and PushTelemetry (72) v0
# (requests and responses), with the capsule kip714._instances reads a push's decision fields through.

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
