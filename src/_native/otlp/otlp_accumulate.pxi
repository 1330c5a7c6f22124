# Included by _otlp.pyx (after the Python API): MetricsAccumulator, the per-push decoder. Each append walks
# one payload into the accumulator's own native stores at once (the same walk as decode_metrics); the
# columns are built and handed to pyarrow once per batch of payloads, so a receiver that decodes every
# push as it arrives pays pyarrow's fixed import cost once per batch instead of once per push.

from array import array as _array
from os import urandom as _urandom
from time import monotonic as _monotonic

cdef extern from "otlp_support.h":
    uint64_t otlp_hash(const unsigned char* p, size_t n, uint64_t seed) noexcept nogil
    uint64_t k714_mix64(uint64_t x) noexcept nogil


cdef inline uint64_t _span_hash(uint64_t h, Span s) noexcept nogil:
    if s.p == NULL:
        return k714_mix64(h ^ 0x6E756C6CULL)          # null: not the empty string
    return otlp_hash(s.p, <size_t>s.n, h)


cdef inline uint64_t _entries_hash(uint64_t h, const Entry* e, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    cdef Py_ssize_t i
    h = k714_mix64(h ^ <uint64_t>(hi - lo))
    for i in range(lo, hi):
        h = otlp_hash(e[i].key, e[i].key_len, h)
        h = k714_mix64(h ^ (<uint64_t>e[i].kind << 1) ^ (1 if e[i].val != NULL else 0))
        if e[i].val != NULL:
            h = otlp_hash(e[i].val, e[i].val_len, h)
        else:
            h = k714_mix64(h ^ e[i].bits)
    return h


cdef uint64_t _layout(const Ctx* c, Py_ssize_t row0, uint64_t seed) noexcept nogil:
    """The layout of the rows ``[row0, rows.n)`` (one payload's, as walked): a keyed 64-bit hash of what
    identifies each row's series, in row order (metric name, unit, kind, temporality, monotonic, scope name
    and version, point attributes, resource attributes, each attribute's key, value type and value bytes as
    on the wire), not of its values or times. Two payloads with the same layout have the same series in the
    same order; the hash is keyed by a random seed per accumulator, so that no client can make up another
    payload's layout."""
    cdef const Row* rows = <const Row*>c.rows.data
    cdef const MetricRec* metrics = <const MetricRec*>c.metrics.data
    cdef const ScopeRec* scopes = <const ScopeRec*>c.scopes.data
    cdef const ResourceRec* res = <const ResourceRec*>c.resources.data
    cdef const Entry* pattr = <const Entry*>c.pattr.data
    cdef const Entry* rattr = <const Entry*>c.rattr.data
    cdef const Row* r
    cdef const MetricRec* m
    cdef uint64_t h = k714_mix64(seed ^ <uint64_t>(c.rows.n - row0))
    cdef Py_ssize_t i
    cdef int32_t last_metric = -1, last_scope = -1, last_resource = -1
    for i in range(row0, c.rows.n):
        r = &rows[i]
        if r.metric != last_metric:                 # (the rows of one metric share its record)
            last_metric = r.metric
            m = &metrics[r.metric]
            h = _span_hash(h, m.name)
            h = _span_hash(h, m.unit)
            h = k714_mix64(h ^ (<uint64_t>m.kind << 40) ^ (<uint64_t><uint32_t>m.temporality << 8) ^ m.monotonic)
        h = k714_mix64(h ^ 0x726F77ULL ^ (<uint64_t>r.kind << 16))   # a row starts
        if r.scope != last_scope:
            last_scope = r.scope
            h = _span_hash(h, scopes[r.scope].name)
            h = _span_hash(h, scopes[r.scope].version)
        if r.resource != last_resource:
            last_resource = r.resource
            h = _entries_hash(h, rattr, res[r.resource].start, res[r.resource].end)
        h = _entries_hash(h, pattr, r.attr_start, r.attr_end)
    return h

cdef double _NAN = float("nan")

cdef frozenset _RESERVED_LABELS = frozenset(COLUMNS) | frozenset(["payload_index"])


cdef int _check_labels(object labels) except -1:
    """One payload's labels as decode_metrics checks them (a dict of str to str, int or None; no output
    column shadowed; ints within int64), checked when the payload is appended so that a flush cannot fail
    on them."""
    if type(labels) is not dict:
        raise TypeError("labels must be a dict of str to str or int")
    for k, v in (<dict>labels).items():
        if type(k) is not str:
            if not isinstance(k, str):
                raise TypeError(f"label names must be str, not {type(k).__name__}")
        if k in _RESERVED_LABELS:
            raise ValueError(f"label {k!r} would shadow an output column")
        if v is None or type(v) is str:
            continue
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            raise TypeError(f"label {k!r}: values must be str or int, not {type(v).__name__}")
        if isinstance(v, int) and not -(1 << 63) <= v < (1 << 63):
            raise ValueError(f"label {k!r}: {v} does not fit int64")
    return 0


@cython.embedsignature(False)    # (Cython 3.3 misplaces the ``*`` of this signature: it is written out below)
cdef class MetricsAccumulator:
    """MetricsAccumulator(max_payloads=256, *, max_delay_s=None, max_rows=MAX_ROWS, max_amplified_bytes=MAX_AMPLIFIED_BYTES)

    Decode OTLP ``MetricsData`` payloads one by one as they arrive, into tables of many payloads.

    ``append(payload, labels=None)`` walks the payload at once (a bad payload raises
    :class:`~kip714.errors.CorruptPayloadError` there, and nothing of it is kept) into native column stores
    shared by every payload appended since the last table; :meth:`flush` builds the columns and returns
    them as one ``pyarrow.Table``, exactly the table :func:`~kip714.decode_metrics_batch` returns for those
    payloads and labels (the :data:`~kip714.otlp.COLUMNS`, ``payload_index`` counting the payloads of this
    table from 0, then the label columns). Rows are the rows :func:`~kip714.decode_metrics` gives for each
    payload, in append order.

    A table is handed out per batch: :meth:`append` returns it (flushing) when the batch reaches
    ``max_payloads`` payloads, or when ``max_delay_s`` (if given) has passed since the batch's first
    append; otherwise it returns ``None``. Call :meth:`flush` for the rest (e.g. on a timer, or at the end).
    Building and importing a table has a fixed cost (pyarrow's, about 25 µs for the 29 columns) that one
    table per push would pay every time; per batch it is shared.

    The accumulator keeps a reference to every appended payload until its table is built (the walk
    points into the payload's bytes; a writable buffer is copied when appended). ``max_rows`` and
    ``max_amplified_bytes`` are :func:`~kip714.decode_metrics`' limits, per payload. Not thread-safe: use
    one accumulator per thread (a concurrent call raises ``RuntimeError``)."""

    cdef Ctx c
    cdef list _keep
    cdef list _labels
    cdef bint _labelled
    cdef bint _busy
    cdef Py_ssize_t _n
    cdef Py_ssize_t _bytes
    cdef Py_ssize_t _max_payloads
    cdef double _max_delay
    cdef double _first
    cdef uint64_t _seed
    cdef list _layouts

    def __cinit__(self):
        ctx_init(&self.c)
        self._keep = []
        self._labels = []
        self._layouts = []
        self._seed = int.from_bytes(_urandom(8), "little")

    def __dealloc__(self):
        ctx_free(&self.c)

    def __init__(self, max_payloads=256, *, max_delay_s=None, max_rows=MAX_ROWS,
                 max_amplified_bytes=MAX_AMPLIFIED_BYTES):
        if not 1 <= max_payloads <= 0x7FFFFFFF:
            raise ValueError("max_payloads must be between 1 and 2**31-1")
        if max_delay_s is not None and not max_delay_s >= 0:
            raise ValueError("max_delay_s must be None or at least 0")
        if not 0 <= max_rows <= MAX_ROWS:
            raise ValueError(f"max_rows must be between 0 and {MAX_ROWS}")
        if not 0 <= max_amplified_bytes <= MAX_AMPLIFIED_BYTES:
            raise ValueError(f"max_amplified_bytes must be between 0 and {MAX_AMPLIFIED_BYTES}")
        if self._n:
            raise RuntimeError("MetricsAccumulator.__init__ called on an accumulator holding payloads")
        self._max_payloads = max_payloads
        self._max_delay = -1.0 if max_delay_s is None else max_delay_s
        self.c.max_rows = max_rows
        self.c.max_amp = max_amplified_bytes

    @property
    def max_payloads(self):
        """Payloads per table (the batch size at which :meth:`append` flushes)."""
        return self._max_payloads

    @property
    def max_delay_s(self):
        """Seconds after a batch's first append at which :meth:`append` flushes (None: never)."""
        return None if self._max_delay < 0 else self._max_delay

    @property
    def rows(self):
        """Data points appended and not yet handed out."""
        return self.c.rows.n

    def __len__(self):
        """Payloads appended and not yet handed out."""
        return self._n

    @cython.embedsignature(True)
    def append(self, payload, labels=None):
        """Walk one uncompressed OTLP ``MetricsData`` payload (any bytes-like object) with its ``labels``
        (None, or a dict of str to str or int: constant columns of its rows). Returns the batch's table when
        this payload completes it (see the class docstring), else ``None``. A payload that is not valid
        OTLP raises :class:`~kip714.errors.CorruptPayloadError` (INVALID_RECORD) and is not kept; bad
        labels raise ``TypeError`` / ``ValueError`` before anything is walked."""
        cdef const uint8_t* p
        cdef Py_ssize_t size
        cdef Py_buffer view
        cdef Marks marks
        cdef int rc
        cdef object keep
        if payload is None:
            raise TypeError("MetricsAccumulator.append() needs a bytes-like payload, not None")
        if labels is not None:
            _check_labels(labels)
        if self._busy:
            raise RuntimeError("MetricsAccumulator is not thread-safe: called while another call runs")
        if self._n >= 0x7FFFFFFF:
            raise ValueError("too many payloads in one batch")
        self._busy = True
        try:
            if PyBytes_CheckExact(payload):
                keep = payload
            else:
                keep = memoryview(payload)
                if not keep.readonly:     # a writable buffer could change before the table is built
                    keep = keep.tobytes()
            if PyBytes_CheckExact(keep):
                p = <const uint8_t*>PyBytes_AS_STRING(keep)
                size = PyBytes_GET_SIZE(keep)
            else:
                # the memoryview holds its own export of the payload: the pointer stays valid while it lives
                PyObject_GetBuffer(keep, &view, PyBUF_SIMPLE)
                p = <const uint8_t*>view.buf
                size = view.len
                PyBuffer_Release(&view)
            ctx_mark(&self.c, &marks)
            if size >= NOGIL_THRESHOLD:
                with nogil:
                    rc = walk_payload(&self.c, p, size, <int32_t>self._n)
            else:
                rc = walk_payload(&self.c, p, size, <int32_t>self._n)
            self.c.base = NULL
            if rc < 0:
                ctx_truncate(&self.c, &marks)
                if self.c.err_oom:
                    self.c.err_oom = 0
                    self.c.err_msg = NULL
                    raise MemoryError()
                msg = _error_text(&self.c)
                self.c.err_msg = NULL
                raise CorruptPayloadError(msg)
            self._layouts.append(_layout(&self.c, marks.rows, self._seed))
            self._keep.append(keep)
            self._labels.append(labels)
            if labels is not None:
                self._labelled = True
            self._n += 1
            self._bytes += size
            if self._n == 1 and self._max_delay >= 0:
                self._first = _monotonic()
        finally:
            self._busy = False
        if self._n >= self._max_payloads or (self._max_delay >= 0 and _monotonic() - self._first >= self._max_delay):
            return self.flush()
        return None

    @cython.embedsignature(True)
    def flush_with_layouts(self):
        """:meth:`flush`, and the layout of each payload of the table (a list, in ``payload_index`` order): an
        int that is the same for two payloads exactly when their rows identify the same series in the same
        order (metric, unit, kind, temporality, monotonic, scope, point and resource attributes; not values
        nor times), up to a 64-bit hash keyed by a seed of this accumulator's. A receiver that keeps series
        per client (the Prometheus exporter) reuses a payload's series when its layout is the last one's."""
        layouts = self._layouts
        return self.flush(), layouts

    @property
    def last_layout(self):
        """The layout (see :meth:`flush_with_layouts`) of the payload appended last, None while the batch is
        empty: a receiver that keeps series per client learns at once whether a payload has its last one's."""
        cdef Py_ssize_t n = len(self._layouts)
        return self._layouts[n - 1] if n else None

    @cython.embedsignature(True)
    def flush_values(self):
        """Start a new batch without building its table: ``(layouts, rows, values)``, each payload's layout (as
        :meth:`flush_with_layouts` gives it), each payload's number of rows (``array('q')``, in append order)
        and every row's ``value`` (``array('d')``, in row order: the table's ``value`` column, NaN where it is
        null). For a receiver that needs nothing of a batch but its points' values (each payload's series known
        from its layout): pyarrow's cost per table is not paid."""
        cdef Py_ssize_t n = self._n
        cdef Py_ssize_t nrows = self.c.rows.n
        cdef const Row* rows = <const Row*>self.c.rows.data
        cdef const Row* row
        cdef Py_ssize_t i
        cdef bytes counts_b, values_b
        cdef int64_t* counts
        cdef double* values
        if self._busy:
            raise RuntimeError("MetricsAccumulator is not thread-safe: called while another call runs")
        self._busy = True
        try:
            layouts = self._layouts
            counts_b = PyBytes_FromStringAndSize(NULL, n * 8)
            values_b = PyBytes_FromStringAndSize(NULL, nrows * 8)
            counts = <int64_t*>PyBytes_AS_STRING(counts_b)
            values = <double*>PyBytes_AS_STRING(values_b)
            memset(counts, 0, n * 8)
            for i in range(nrows):
                row = &rows[i]
                counts[row.payload] += 1
                if (row.kind == K_GAUGE or row.kind == K_SUM) and row.vkind != NUM_NONE:
                    if row.vkind == NUM_INT:
                        values[i] = <double>(<int64_t>row.value_bits)
                    else:
                        values[i] = otlp_bits_to_double(row.value_bits)
                else:
                    values[i] = _NAN
            rows_a = _array("q")
            rows_a.frombytes(counts_b)
            values_a = _array("d")
            values_a.frombytes(values_b)
            return layouts, rows_a, values_a
        finally:
            self._reset()
            self._busy = False

    @cython.embedsignature(True)
    def flush(self):
        """The table of every payload appended since the last one (an empty table with the
        :data:`~kip714.otlp.COLUMNS` and ``payload_index`` when there is none), and start a new batch."""
        cdef Py_ssize_t n = self._n
        cdef list specs
        if self._busy:
            raise RuntimeError("MetricsAccumulator is not thread-safe: called while another call runs")
        self._busy = True
        try:
            specs = _label_specs(self._labels, n, True) if self._labelled else []
            schema = _schema(True, tuple([(name, is_int) for name, is_int, _ in specs]))
            _pyarrow()
            return _table(&self.c, n, specs, schema, True, self._bytes)
        finally:
            self._reset()
            self._busy = False

    cdef void _reset(self) noexcept:
        """Forget the batch (its table was built, or building it failed); keep the stores' memory for the next
        one unless it grew past SPARE_MAX_BYTES."""
        cdef int i
        cdef Py_ssize_t total = 0
        cdef Vec* v
        for i in range(11):
            v = _ctx_vecs(&self.c, i)
            total += v.cap * v.size
            v.n = 0
        if total > SPARE_MAX_BYTES:
            for i in range(11):
                vec_free(_ctx_vecs(&self.c, i))
        self.c.n_render = 0
        self.c.err_msg = NULL
        self.c.err_oom = 0
        self._keep = []
        self._labels = []
        self._layouts = []
        self._labelled = False
        self._n = 0
        self._bytes = 0

    def __repr__(self):
        return f"<MetricsAccumulator payloads={self._n} rows={self.c.rows.n} max_payloads={self._max_payloads}>"
