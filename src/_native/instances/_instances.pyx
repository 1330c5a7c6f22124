# cython: language_level=3
"""The broker's per-client-instance state (Kafka's ``ClientMetricsManager`` cache), in native memory.

One ``InstanceTable`` holds, for each 16-byte client instance id (msb big-endian, then lsb): the last
Get and last Push times, the push interval, the SubscriptionId, the config version the instance was
built from, the terminating flag and the last error. Time is always passed in by the caller
(milliseconds); the table never reads a clock.

Kafka 4.1+ semantics (docs/reference/kafka-java-behaviour.md §3(c), §3(d)):

* An instance expires ``max(cache_expiry_ms, 3 * push_interval_ms)`` after its last request. Every Get
  or Push that reaches it (``create`` and every ``decide_*``) re-arms that deadline. An expired instance
  behaves exactly as if absent.
* The table holds at most ``max_instances``; inserting into a full table evicts the least recently
  used instance (every Get and Push counts as a use, like Kafka's access-ordered ``LinkedHashMap``).
* ``decide_get`` / ``decide_push`` are Kafka's rate limits and push validation steps 4-8.

Layout. Entries are fixed-size C structs (88 bytes) in one flat array that doubles as needed up to
``max_instances`` (a free list recycles slots). A chained hash index (two uint32 bucket heads per
entry slot, rounded up to a power of two; the chain link lives in the entry) is keyed by a seeded mix
of the id, so chosen ids cannot be lined up in one chain. Each entry sits on two intrusive doubly
linked lists of uint32 indices: the global LRU list, and the list of its *TTL class* (all live entries
with the same time-to-live). Within a class, entries are in re-arm order, which is also deadline
order, so expired entries are always at the heads: each operation reclaims at most
``RECLAIM_PER_OP`` due heads (skipped entirely while the clock is below a cached lower bound of the
earliest head deadline) and ``expire(now)`` reclaims all of them. Every decision is O(1); creating an
instance with a TTL that no live instance has is O(number of distinct live TTLs), a handful.

Clock. The table keeps ``now_ms``, the largest ``now_ms`` any modifying call has passed. Expiry is
judged against it and deadlines are set from it, so an instance that has expired stays expired even
if a later caller's clock is a little behind (threads racing), and the deadline lists stay sorted
without any walking. With a clock that never goes backwards this is exactly "expires
max(cache_expiry, 3 * interval) after its last request". Rate-limit arithmetic uses each call's own
``now_ms`` with Java's wrap-around long subtraction, like the broker's ``time.milliseconds()``.

Threads. Every method takes the table's mutex (``cython.pymutex``). Single-request methods hold the
GIL (they are a few hundred nanoseconds); the batch methods release the GIL and hold the mutex once
for the whole batch.
"""

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_RawFree, PyMem_RawMalloc, PyMem_RawRealloc
from cpython.pycapsule cimport PyCapsule_GetPointer
from libc.stdint cimport (INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t,
                          uint64_t)
from libc.string cimport memset

import os as _os

cdef extern from "kbuf_endian.h":
    uint64_t kb_load_be64(const unsigned char* p) noexcept nogil
    void kb_store_be64(unsigned char* p, uint64_t v) noexcept nogil

cdef extern from "instances_util.h":
    uint32_t NIL "K714I_NIL"
    uint64_t k714i_hash(uint64_t msb, uint64_t lsb, uint64_t k0, uint64_t k1) noexcept nogil
    int64_t k714i_wsub(int64_t a, int64_t b) noexcept nogil
    int64_t k714i_sat_add(int64_t a, int64_t b) noexcept nogil
    void k714i_prefetch(const void* p) noexcept nogil
    void k714i_advise_huge(void* p, size_t n) noexcept nogil

import enum as _enum

from kip714._enums import ErrorCode as _ErrorCode

__all__ = ["InstanceTable", "Outcome", "RequestLoop", "PackedBytes", "PayloadDecompressor", "java_uuid_hash", "LOOKUP_LIVE", "LOOKUP_ABSENT", "LOOKUP_STALE",
           "LOOKUP_RESERVED", "TICKET_BASE"]

# Kafka error codes this module produces.
from kafka_constants cimport *  # Kafka's error codes (one home: kip714._enums)

cdef enum:
    RECLAIM_PER_OP = 8          # expired heads reclaimed at most per operation
    INITIAL_CAPACITY = 1024     # entry slots allocated up front (fewer if max_instances is smaller)
    PREFETCH_AHEAD = 16         # batch mode: ids hashed and their buckets prefetched this far ahead

# What the table answers when it makes no decision. Negative and below -1, so never a Kafka error code
# (those start at -1, UNKNOWN_SERVER_ERROR): every single-request method answers either an ErrorCode (a
# decision on a live, current instance) or one of these, in one numbering.
cdef enum:
    O_LIVE = 0
    O_ABSENT = -2
    O_STALE = -3
    O_RESERVED = -4

# try_push_request / create_push_request: an accepted push with a payload to export answers TICKET_BASE plus
# the instance's incarnation (Entry.gen), above every ErrorCode and Outcome; finish_push takes it back.
cdef enum:
    T_BASE = 65536
TICKET_BASE = T_BASE


class Outcome(_enum.IntEnum):
    """The instance table's answers that are not decisions (``lookup``, ``try_push``, ``try_get``).

    ``LIVE`` (0): the instance is live and current (``lookup`` only: the ``try_*`` methods then decide
    and answer the decision's :class:`~kip714.ErrorCode`). ``ABSENT``: absent, expired or evicted.
    ``STALE``: built from an older subscription version. ``ABSENT`` and ``STALE`` mean "create it, then
    decide" and nothing was touched. ``RESERVED``: ``try_push`` on the reserved ids ZERO or ONE, which
    Kafka answers INVALID_REQUEST before touching any instance. The negative values never collide with
    a Kafka error code (those start at -1)."""

    LIVE = O_LIVE
    ABSENT = O_ABSENT
    STALE = O_STALE
    RESERVED = O_RESERVED


LOOKUP_LIVE = Outcome.LIVE
LOOKUP_ABSENT = Outcome.ABSENT
LOOKUP_STALE = Outcome.STALE
LOOKUP_RESERVED = Outcome.RESERVED

# The answers as cached objects (no enum construction per call): decisions by code, outcomes by -value.
cdef tuple _ERRORS = tuple(_ErrorCode(c) if c in _ErrorCode._value2member_map_ else c for c in range(128))
cdef tuple _OUTCOMES = (Outcome.LIVE, None, Outcome.ABSENT, Outcome.STALE, Outcome.RESERVED)


cdef inline object _answer(int r):
    """The typed answer of a single-request method: ErrorCode for 0 <= r < 128, else an Outcome."""
    if 0 <= r < 128:
        return _ERRORS[r]
    if -4 <= r <= 0:
        return _OUTCOMES[-r]
    return r

# kip714._protocol's reader of a PushTelemetryRequest's decision fields (see try_push_request): a C
# function handed over in a capsule, so that this module needs no declaration of the message class.
ctypedef int (*_push_fields_fn)(object, uint64_t*, uint64_t*, int32_t*, int*, int*, Py_ssize_t*) except -1
from kip714._protocol import _PUSH_FIELDS_CAPI
cdef _push_fields_fn _push_fields = <_push_fields_fn>PyCapsule_GetPointer(_PUSH_FIELDS_CAPI,
                                                                        "kip714._protocol._PUSH_FIELDS_CAPI")

# The table in native memory, its batch replays and its invariant check: one file each.
include "instances_table.pxi"
include "instances_batch.pxi"
include "instances_check.pxi"


# ------------------------------------------------------------------------------------- Python side

cdef inline int _key(bytes id16, uint64_t* msb, uint64_t* lsb) except -1:
    cdef const unsigned char* p
    if PyBytes_GET_SIZE(id16) != 16:
        raise ValueError(f"a client instance id is 16 bytes, got {PyBytes_GET_SIZE(id16)}")
    p = <const unsigned char*>PyBytes_AS_STRING(id16)
    msb[0] = kb_load_be64(p)
    lsb[0] = kb_load_be64(p + 8)
    return 0


cdef inline int32_t _check_interval(int64_t push_interval_ms) except? -1:
    if push_interval_ms < 0 or push_interval_ms > INT32_MAX_:
        raise ValueError(f"push_interval_ms must be in 0..2147483647, got {push_interval_ms}")
    return <int32_t>push_interval_ms


cdef bytes _id_bytes(uint64_t msb, uint64_t lsb):
    cdef unsigned char raw[16]
    kb_store_be64(raw, msb)
    kb_store_be64(raw + 8, lsb)
    return PyBytes_FromStringAndSize(<const char*>raw, 16)


cdef int _ids_buffer(object ids, Py_buffer* view) except -1:
    """A C-contiguous byte view of a batch's ids: TypeError for non-buffers, ValueError for strided ones."""
    if isinstance(ids, str):
        raise TypeError("ids must be a buffer of N*16 bytes, not str")
    try:
        PyObject_GetBuffer(ids, view, PyBUF_SIMPLE)
    except BufferError as exc:
        raise ValueError(f"ids must be a C-contiguous buffer: {exc}") from exc
    return 0


def java_uuid_hash(id16):
    """Kafka ``Uuid.hashCode()`` of a 16-byte id (msb then lsb, big-endian): x = msb ^ lsb;
    (int)(x >> 32) ^ (int)x, as a signed int32."""
    cdef Py_buffer view
    cdef uint64_t msb, lsb
    if isinstance(id16, bytes):
        _key(<bytes>id16, &msb, &lsb)
    else:
        if isinstance(id16, str):
            raise TypeError("java_uuid_hash needs 16 bytes, not str")
        PyObject_GetBuffer(id16, &view, PyBUF_SIMPLE)
        try:
            if view.len != 16:
                raise ValueError(f"a client instance id is 16 bytes, got {view.len}")
            msb = kb_load_be64(<const unsigned char*>view.buf)
            lsb = kb_load_be64(<const unsigned char*>view.buf + 8)
        finally:
            PyBuffer_Release(&view)
    return _java_hash(msb, lsb)


cdef class InstanceTable:
    """Per-client-instance state of a KIP-714 broker, keyed by the 16-byte client instance id.

    ``InstanceTable(max_instances=16384, cache_expiry_ms=60000)``. See the module docstring for the
    semantics and layout. All ids are ``bytes`` of length 16; all times are caller-supplied ms.
    """

    cdef Table t
    cdef cython.pymutex _lock
    cdef bint _ready

    def __cinit__(self, *args, **kwargs):
        memset(&self.t, 0, sizeof(Table))
        self._ready = False

    # Kafka's defaults (their home: kip714._enums INSTANCE_CACHE_MAX_SIZE, INSTANCE_CACHE_EXPIRY_MS), written
    # out so that the signature shows them; tests/test_constants.py checks that they agree.
    def __init__(self, max_instances=16384, cache_expiry_ms=60000):
        cdef int64_t mx = max_instances
        cdef int64_t ce = cache_expiry_ms
        cdef bytes seed
        cdef int rc
        if mx < 1 or mx > <int64_t>MAX_INSTANCES_LIMIT:
            raise ValueError(f"max_instances must be in 1..{MAX_INSTANCES_LIMIT}, got {max_instances}")
        if ce < 1:
            raise ValueError(f"cache_expiry_ms must be >= 1, got {cache_expiry_ms}")
        seed = _os.urandom(16)
        with self._lock:
            if self._ready:
                _table_free(&self.t)
                self._ready = False
            memset(&self.t, 0, sizeof(Table))
            self.t.clock = INT64_MIN
            rc = _table_init(&self.t, <uint32_t>mx, ce, kb_load_be64(<const unsigned char*>PyBytes_AS_STRING(seed)),
                             kb_load_be64(<const unsigned char*>PyBytes_AS_STRING(seed) + 8))
            if rc == 0:
                self._ready = True
        if rc != 0:
            raise MemoryError("cannot allocate the instance table")

    def __dealloc__(self):
        _table_free(&self.t)

    cdef inline int _need(self) except -1:
        if not self._ready:
            raise RuntimeError("InstanceTable.__init__ was not called")
        return 0

    # ------------------------------------------------------------------ properties and counters

    @property
    def max_instances(self):
        """The most instances the table holds; inserting beyond it evicts the least recently used."""
        return self.t.max_n

    @property
    def capacity(self):
        """Entry slots currently allocated (grows by doubling up to ``max_instances``)."""
        return self.t.cap

    @property
    def cache_expiry_ms(self):
        return self.t.cache_expiry

    @property
    def now_ms(self):
        """The table clock: the largest now_ms a modifying call has passed (None before the first)."""
        return None if self.t.clock == INT64_MIN else self.t.clock

    @property
    def evictions(self):
        """Instances dropped because the table was full (least recently used first)."""
        return self.t.evictions

    @property
    def expirations(self):
        """Instances dropped (or replaced) because they had expired."""
        return self.t.expirations

    def memory_bytes(self):
        """Native bytes the table holds: entry array + hash buckets + TTL classes."""
        cdef size_t n
        with self._lock:
            n = (<size_t>self.t.cap * sizeof(Entry) + (<size_t>self.t.bmask + 1) * sizeof(uint32_t)
                 + <size_t>self.t.ncls_alloc * sizeof(TtlClass))
        return n if self._ready else 0

    @staticmethod
    def entry_size():
        """sizeof() the per-instance C struct."""
        return sizeof(Entry)

    def __len__(self):
        """Live instances, after reclaiming everything that is due at the table clock."""
        cdef uint32_t n
        with self._lock:
            _reclaim(&self.t, 0xFFFFFFFF)
            n = self.t.count
        return n

    def expire(self, int64_t now_ms):
        """Advance the table clock to ``now_ms`` (if later) and reclaim every instance due by then.
        Returns how many were reclaimed."""
        cdef uint32_t n
        self._need()
        with self._lock:
            _advance(&self.t, now_ms)
            n = _reclaim(&self.t, 0xFFFFFFFF)
        return n

    def clear(self):
        """Drop every instance and shrink back to the initial allocation (counters are kept)."""
        cdef Table fresh
        cdef int rc
        self._need()
        memset(&fresh, 0, sizeof(Table))
        with self._lock:
            rc = _table_init(&fresh, self.t.max_n, self.t.cache_expiry, self.t.k0, self.t.k1)
            if rc == 0:
                fresh.clock = self.t.clock
                fresh.evictions = self.t.evictions
                fresh.expirations = self.t.expirations
                fresh.push_codes = self.t.push_codes
                fresh.get_codes = self.t.get_codes
                _table_free(&self.t)
                self.t = fresh
        if rc != 0:
            raise MemoryError("cannot allocate the instance table")

    # --------------------------------------------------------------------- single-request path

    def lookup(self, bytes id16 not None, int64_t now_ms, int64_t subscription_version):
        """``Outcome.LIVE`` (live and current), ``Outcome.ABSENT`` (absent, expired or evicted) or
        ``Outcome.STALE`` (present but built from a subscription version older than
        ``subscription_version``). Changes nothing."""
        cdef uint64_t msb, lsb, h
        cdef uint32_t i
        cdef int64_t clock
        cdef int r
        _key(id16, &msb, &lsb)
        self._need()
        h = _hash(&self.t, msb, lsb)
        with self._lock:
            clock = now_ms if now_ms > self.t.clock else self.t.clock
            i = _find(&self.t, msb, lsb, h)
            if i == NIL or self.t.e[i].deadline <= clock:
                r = O_ABSENT
            elif self.t.e[i].sub_version < subscription_version:
                r = O_STALE
            else:
                r = O_LIVE
        return _OUTCOMES[-r]

    def create(self, bytes id16 not None, int64_t now_ms, int64_t subscription_version,
               int32_t subscription_id, int64_t push_interval_ms):
        """(Re)create the instance fresh: timestamps 0, not terminating, last error NONE, expiry armed
        from ``now_ms``. Replaces any previous state of that id (Kafka's re-evaluation)."""
        cdef uint64_t msb, lsb, h
        cdef uint32_t i
        cdef int32_t interval = _check_interval(push_interval_ms)
        _key(id16, &msb, &lsb)
        self._need()
        h = _hash(&self.t, msb, lsb)
        with self._lock:
            _advance(&self.t, now_ms)
            _reclaim(&self.t, RECLAIM_PER_OP)
            i = _create(&self.t, msb, lsb, h, subscription_version, subscription_id, interval)
        if i == NIL:
            raise MemoryError("cannot grow the instance table")

    def decide_get(self, bytes id16 not None, int64_t now_ms):
        """Kafka's GetTelemetrySubscriptions rate limit (4.1+) on a live instance. Returns ErrorCode NONE
        or THROTTLING_QUOTA_EXCEEDED.
        Re-arms expiry and counts as a use. KeyError if the instance is absent or expired."""
        return _answer(self._decide_live(id16, now_ms, False, 0, False, 0, 0, 0))

    def decide_push(self, bytes id16 not None, int64_t now_ms, int32_t subscription_id, bint terminating,
                    int64_t compression_type, int64_t wire_size, int64_t telemetry_max_bytes):
        """PushTelemetry validation steps 4-8 on a live instance; returns the ErrorCode (NONE,
        INVALID_REQUEST, THROTTLING_QUOTA_EXCEEDED, UNKNOWN_SUBSCRIPTION_ID, UNSUPPORTED_COMPRESSION_TYPE or
        TELEMETRY_TOO_LARGE).

        Always copies ``terminating`` into the instance; on an error also sets its last error. On 0 the
        last error is left alone: the caller sets it after decompression/export (``set_last_error``).
        KeyError if the instance is absent or expired."""
        return _answer(self._decide_live(id16, now_ms, True, subscription_id, terminating, compression_type,
                                         wire_size, telemetry_max_bytes))

    cdef int _decide_live(self, bytes id16, int64_t now_ms, bint push, int32_t subscription_id, bint terminating,
                          int64_t compression_type, int64_t wire_size, int64_t telemetry_max_bytes) except? -1:
        """decide_get (``push`` false) or decide_push on a live instance under one hold of the lock; KeyError
        if it is absent or expired."""
        cdef uint64_t msb, lsb, h
        cdef uint32_t i
        cdef int r = -1
        _key(id16, &msb, &lsb)
        self._need()
        h = _hash(&self.t, msb, lsb)
        with self._lock:
            _advance(&self.t, now_ms)
            _reclaim(&self.t, RECLAIM_PER_OP)
            i = _find(&self.t, msb, lsb, h)
            if i != NIL and self.t.e[i].deadline > self.t.clock:
                if push:
                    r = _push_core(&self.t, i, now_ms, subscription_id, terminating, compression_type,
                                   wire_size, telemetry_max_bytes)
                else:
                    r = _get_core(&self.t, i, now_ms)
        if r < 0:
            raise KeyError(id16)
        return r

    cdef int64_t _push_at(self, uint64_t msb, uint64_t lsb, int64_t now_ms, int64_t subscription_version,
                          int32_t subscription_id, bint terminating, int64_t compression_type, int64_t wire_size,
                          int64_t telemetry_max_bytes, bint export_follows, bint create, int32_t new_sub_id,
                          int32_t new_interval) except? -9:
        """The push decision of ``try_push``/``try_push_request``/``create_push_request`` under one hold of the
        lock (the table is ready, the id not reserved): lookup, (with ``create``) the (re)creation of an
        absent or stale instance from ``new_sub_id``/``new_interval``, rate check, state update, last error.
        ``export_follows``: an accepted push with a payload answers its ticket (``TICKET_BASE`` + the
        instance's incarnation) and leaves the last error to ``finish_push``; otherwise an accepted push with
        ``wire_size == 0`` sets it to NONE. Without ``create`` an absent or stale instance answers
        ``O_ABSENT``/``O_STALE`` and nothing is touched."""
        cdef uint64_t h = _hash(&self.t, msb, lsb)
        cdef uint32_t i
        cdef int64_t r
        cdef bint oom = False
        with self._lock:
            _advance(&self.t, now_ms)
            _reclaim(&self.t, RECLAIM_PER_OP)
            i = _find(&self.t, msb, lsb, h)
            if i == NIL or self.t.e[i].deadline <= self.t.clock:
                r = O_ABSENT
            elif self.t.e[i].sub_version < subscription_version:
                r = O_STALE
            else:
                r = O_LIVE
            if r != O_LIVE and create:
                i = _create(&self.t, msb, lsb, h, subscription_version, new_sub_id, new_interval)
                if i == NIL:
                    oom = True
                else:
                    r = O_LIVE
            if r == O_LIVE and not oom:
                r = _push_core(&self.t, i, now_ms, subscription_id, terminating, compression_type,
                               wire_size, telemetry_max_bytes)
                if r == E_NONE:
                    if wire_size > 0 and export_follows:
                        r = T_BASE + <int64_t>self.t.e[i].gen
                    elif wire_size == 0:
                        self.t.e[i].last_error = E_NONE
        if oom:
            raise MemoryError("cannot grow the instance table")
        return r

    def try_push(self, bytes id16 not None, int64_t now_ms, int64_t subscription_version, int32_t subscription_id,
                 bint terminating, int64_t compression_type, int64_t wire_size, int64_t telemetry_max_bytes):
        """The broker's one-call push path: ``Outcome.RESERVED`` for a reserved id (ZERO or ONE: the caller
        answers INVALID_REQUEST, nothing is touched); ``Outcome.ABSENT`` when the instance is absent or
        expired and ``Outcome.STALE`` when its subscription_version is older (nothing is touched: the
        caller creates it, then calls decide_push); otherwise ``decide_push``'s ErrorCode. An accepted push
        with ``wire_size == 0`` also sets the last error to NONE, since no export follows."""
        cdef uint64_t msb, lsb
        _key(id16, &msb, &lsb)
        if msb == 0 and lsb <= 1:
            return _OUTCOMES[-O_RESERVED]
        self._need()
        return _answer(<int>self._push_at(msb, lsb, now_ms, subscription_version, subscription_id, terminating,
                                          compression_type, wire_size, telemetry_max_bytes, False, False, 0, 0))

    def try_push_request(self, body, int64_t now_ms, int64_t subscription_version, int64_t telemetry_max_bytes):
        """``try_push`` with the fields read from a decoded ``PushTelemetryRequest`` in C (its 16-byte id,
        SubscriptionId, flags and wire size; no Python object is made for them). The same answers and
        effects as ``try_push``, except that an accepted push with a payload (``wire_size > 0``, an
        export follows) answers a *ticket* instead of ``ErrorCode.NONE``: an int >= ``TICKET_BASE`` (never
        an ErrorCode or an Outcome) naming this incarnation of the instance. Its last error is then left to
        :meth:`finish_push`. TypeError for anything that is not a PushTelemetryRequest."""
        return self._push_request(body, now_ms, subscription_version, telemetry_max_bytes, False, 0, 0)

    def create_push_request(self, body, int64_t now_ms, int64_t subscription_version, int32_t subscription_id,
                            int64_t push_interval_ms, int64_t telemetry_max_bytes):
        """``try_push_request`` for an instance the caller found absent or stale, under the same hold of the
        lock as its decision: an instance still absent, or still older than ``subscription_version``, is
        (re)created with ``subscription_id`` and ``push_interval_ms`` (``create``); one another thread has
        (re)created meanwhile at this version or later is decided as it is. Answers an ErrorCode, a ticket,
        or ``Outcome.RESERVED`` for the ids ZERO and ONE (nothing touched); never ABSENT or STALE."""
        return self._push_request(body, now_ms, subscription_version, telemetry_max_bytes, True, subscription_id,
                                  _check_interval(push_interval_ms))

    cdef object _push_request(self, object body, int64_t now_ms, int64_t subscription_version,
                              int64_t telemetry_max_bytes, bint create, int32_t new_sub_id, int32_t new_interval):
        cdef uint64_t msb, lsb
        cdef int32_t sid
        cdef int terminating, ctype
        cdef int64_t r
        cdef Py_ssize_t size
        if _push_fields(body, &msb, &lsb, &sid, &terminating, &ctype, &size) != 1:
            raise TypeError(f"expected a PushTelemetryRequest, got {type(body).__name__}")
        if msb == 0 and lsb <= 1:
            return _OUTCOMES[-O_RESERVED]
        self._need()
        r = self._push_at(msb, lsb, now_ms, subscription_version, sid, terminating, ctype, size,
                          telemetry_max_bytes, True, create, new_sub_id, new_interval)
        return r if r >= T_BASE else _answer(<int>r)

    cdef bint _finish(self, uint64_t msb, uint64_t lsb, int64_t ticket, int code) noexcept:
        """finish_push on the id's halves (the request loop's)."""
        cdef uint64_t h = _hash(&self.t, msb, lsb)
        cdef uint32_t i
        cdef bint ok = False
        with self._lock:
            i = _find(&self.t, msb, lsb, h)
            if (i != NIL and self.t.e[i].deadline > self.t.clock
                    and self.t.e[i].gen == <uint32_t>(ticket - T_BASE)):
                self.t.e[i].last_error = <int16_t>code
                ok = True
        return ok

    def finish_push(self, bytes id16 not None, ticket, code):
        """Set the last error of the instance a push ticket was given for, once its export is done (Kafka sets
        ``lastKnownError`` on the instance object it decided the push with). True if set; False when that
        incarnation has left the table meanwhile (expired, evicted, removed or re-created): then, as in
        Kafka, whose evicted instance object is simply dropped, nothing else changes."""
        cdef uint64_t msb, lsb
        cdef int64_t c = code
        cdef int64_t tk = ticket
        if c < -32768 or c > 32767:
            raise ValueError(f"an error code is an int16, got {code}")
        if tk < T_BASE or tk > T_BASE + <int64_t>0xFFFFFFFF:
            raise ValueError(f"not a push ticket: {ticket}")
        _key(id16, &msb, &lsb)
        self._need()
        return self._finish(msb, lsb, tk, <int>c)

    def try_get(self, bytes id16 not None, int64_t now_ms, int64_t subscription_version):
        """The broker's one-call Get path: ``Outcome.ABSENT`` (absent/expired) or ``Outcome.STALE``
        without touching anything, else ``decide_get``'s ErrorCode."""
        cdef uint64_t msb, lsb, h
        cdef uint32_t i
        cdef int r
        _key(id16, &msb, &lsb)
        self._need()
        h = _hash(&self.t, msb, lsb)
        with self._lock:
            _advance(&self.t, now_ms)
            _reclaim(&self.t, RECLAIM_PER_OP)
            i = _find(&self.t, msb, lsb, h)
            if i == NIL or self.t.e[i].deadline <= self.t.clock:
                r = O_ABSENT
            elif self.t.e[i].sub_version < subscription_version:
                r = O_STALE
            else:
                r = _get_core(&self.t, i, now_ms)
        return _answer(r)

    def create_get(self, bytes id16 not None, int64_t now_ms, int64_t subscription_version, int32_t subscription_id,
                   int64_t push_interval_ms):
        """``try_get`` for an instance the caller found absent or stale, under the same hold of the lock as its
        decision: an instance still absent, or still older than ``subscription_version``, is (re)created with
        ``subscription_id`` and ``push_interval_ms``; one another thread has (re)created meanwhile at this
        version or later is decided as it is. Answers ``decide_get``'s ErrorCode (never KeyError)."""
        cdef uint64_t msb, lsb, h
        cdef uint32_t i
        cdef int r
        cdef int32_t interval = _check_interval(push_interval_ms)
        _key(id16, &msb, &lsb)
        self._need()
        h = _hash(&self.t, msb, lsb)
        with self._lock:
            _advance(&self.t, now_ms)
            _reclaim(&self.t, RECLAIM_PER_OP)
            i = _find(&self.t, msb, lsb, h)
            if i == NIL or self.t.e[i].deadline <= self.t.clock or self.t.e[i].sub_version < subscription_version:
                i = _create(&self.t, msb, lsb, h, subscription_version, subscription_id, interval)
            r = -1 if i == NIL else _get_core(&self.t, i, now_ms)
        if r < 0:
            raise MemoryError("cannot grow the instance table")
        return _answer(r)

    def decision_counts(self):
        """{"push": {code: n}, "get": {code: n}}: every decision the table made, by result code."""
        cdef int c
        push, get = {}, {}
        self._need()
        with self._lock:
            for c in range(128):
                if self.t.push_codes[c]:
                    push[c] = self.t.push_codes[c]
                if self.t.get_codes[c]:
                    get[c] = self.t.get_codes[c]
        return {"push": push, "get": get}

    def set_last_error(self, bytes id16 not None, code):
        """Set the instance's lastKnownError (an int16 Kafka error code). KeyError if absent or expired."""
        cdef uint64_t msb, lsb, h
        cdef uint32_t i
        cdef int64_t c = code
        cdef bint ok = False
        if c < -32768 or c > 32767:
            raise ValueError(f"an error code is an int16, got {code}")
        _key(id16, &msb, &lsb)
        self._need()
        h = _hash(&self.t, msb, lsb)
        with self._lock:
            i = _find(&self.t, msb, lsb, h)
            if i != NIL and self.t.e[i].deadline > self.t.clock:
                self.t.e[i].last_error = <int16_t>c
                ok = True
        if not ok:
            raise KeyError(id16)

    def expiry_for(self, push_interval_ms):
        """How long an instance with this push interval lives without a request: ``max(cache_expiry_ms,
        3 × push_interval_ms)`` (the one home of the rule; receivers get it as ``ReceiverContext.expiry_ms``)."""
        cdef int64_t interval = push_interval_ms
        if interval < 0 or interval > 0x7FFFFFFF:
            raise ValueError(f"push_interval_ms must be in 0..2147483647, got {push_interval_ms}")
        self._need()
        return _ttl_for(&self.t, interval)

    cdef bint _snapshot(self, bytes id16, Entry* out, int64_t* ttl) except -1:
        """Copy a live instance's entry and its class's expiry into ``out``/``ttl``; False if absent or
        expired at the table clock."""
        cdef uint64_t msb, lsb, h
        cdef uint32_t i
        cdef bint found = False
        _key(id16, &msb, &lsb)
        self._need()
        h = _hash(&self.t, msb, lsb)
        with self._lock:
            i = _find(&self.t, msb, lsb, h)
            if i != NIL and self.t.e[i].deadline > self.t.clock:
                out[0] = self.t.e[i]
                ttl[0] = self.t.cls[out[0].cls].ttl
                found = True
        return found

    def timing(self, bytes id16 not None):
        """``(push_interval_ms, expiry_ms)`` of a live instance (what it lives without a request, see
        :meth:`expiry_for`), or None if absent or expired at the table clock. Cheaper than get_state."""
        cdef Entry snap
        cdef int64_t ttl = 0
        if not self._snapshot(id16, &snap, &ttl):
            return None
        return (snap.interval, ttl)

    def get_state(self, bytes id16 not None):
        """Every field of the instance as a dict, or None if absent or expired at the table clock."""
        cdef Entry snap
        cdef int64_t ttl = 0
        if not self._snapshot(id16, &snap, &ttl):
            return None
        return {
            "instance_id": id16,
            "last_get_ms": snap.last_get,
            "last_push_ms": snap.last_push,
            "push_interval_ms": snap.interval,
            "subscription_id": snap.sub_id,
            "subscription_version": snap.sub_version,
            "terminating": bool(snap.terminating),
            "last_known_error": snap.last_error,
            "ttl_ms": ttl,
            "expires_at_ms": snap.deadline,
            "last_request_ms": snap.deadline - ttl,
        }

    def remove(self, bytes id16 not None):
        """Drop the instance (e.g. its connection closed). True if a live instance was removed."""
        cdef uint64_t msb, lsb, h
        cdef uint32_t i
        cdef bint live = False
        _key(id16, &msb, &lsb)
        self._need()
        h = _hash(&self.t, msb, lsb)
        with self._lock:
            i = _find(&self.t, msb, lsb, h)
            if i != NIL:
                live = self.t.e[i].deadline > self.t.clock
                if not live:
                    self.t.expirations += 1
                _remove(&self.t, i)
        return live

    # -------------------------------------------------------------------------------- batches

    def decide_pushes(self, ids, const int64_t[::1] now_ms not None, const int32_t[::1] subscription_ids not None,
                      const uint8_t[::1] terminating not None, const int8_t[::1] compression_types not None,
                      const int32_t[::1] wire_sizes not None, int16_t[::1] out not None, *,
                      int64_t subscription_version, int32_t crc_base, int64_t push_interval_ms,
                      int64_t telemetry_max_bytes):
        """Replay N pushes in order with the GIL released. ``ids`` is a C-contiguous buffer of N*16 bytes;
        the arrays are int64 now_ms, int32 subscription ids, uint8 terminating flags, int8 compression
        types, int32 wire sizes and the int16 ``out`` for the error codes. An absent, expired or stale
        instance is first created with SubscriptionId ``crc_base ^ java_uuid_hash(id)`` and
        ``push_interval_ms``; an accepted push also sets last error NONE. Returns how many were accepted."""
        cdef Py_buffer view
        cdef Py_ssize_t n = now_ms.shape[0]
        cdef int32_t interval = _check_interval(push_interval_ms)
        cdef const unsigned char* idp
        cdef const int64_t* nowp
        cdef const int32_t* sidp
        cdef const uint8_t* termp
        cdef const int8_t* ctp
        cdef const int32_t* wsp
        cdef int16_t* outp
        cdef Py_ssize_t accepted = 0
        self._need()
        if (subscription_ids.shape[0] != n or terminating.shape[0] != n or compression_types.shape[0] != n
                or wire_sizes.shape[0] != n or out.shape[0] != n):
            raise ValueError("decide_pushes: every array must have the same length as now_ms")
        _ids_buffer(ids, &view)
        try:
            if view.len != n * 16:
                raise ValueError(f"ids must hold {n} * 16 = {n * 16} bytes, got {view.len}")
            if n == 0:
                return 0
            idp = <const unsigned char*>view.buf
            nowp = &now_ms[0]
            sidp = &subscription_ids[0]
            termp = &terminating[0]
            ctp = &compression_types[0]
            wsp = &wire_sizes[0]
            outp = &out[0]
            with nogil:
                with self._lock:
                    accepted = _replay_pushes(&self.t, idp, n, nowp, sidp, termp, ctp, wsp, outp, subscription_version,
                                              crc_base, interval, telemetry_max_bytes)
        finally:
            PyBuffer_Release(&view)
        if accepted < 0:
            raise MemoryError("cannot grow the instance table")
        return accepted

    def decide_gets(self, ids, const int64_t[::1] now_ms not None, int16_t[::1] out not None, *,
                    int64_t subscription_version, int32_t crc_base, int64_t push_interval_ms):
        """Replay N Gets in order with the GIL released (same create-if-needed rule as ``decide_pushes``).
        Writes 0 or 89 per Get into ``out``; returns how many were allowed."""
        cdef Py_buffer view
        cdef Py_ssize_t n = now_ms.shape[0]
        cdef int32_t interval = _check_interval(push_interval_ms)
        cdef const unsigned char* idp
        cdef const int64_t* nowp
        cdef int16_t* outp
        cdef Py_ssize_t accepted = 0
        self._need()
        if out.shape[0] != n:
            raise ValueError("decide_gets: out must have the same length as now_ms")
        _ids_buffer(ids, &view)
        try:
            if view.len != n * 16:
                raise ValueError(f"ids must hold {n} * 16 = {n * 16} bytes, got {view.len}")
            if n == 0:
                return 0
            idp = <const unsigned char*>view.buf
            nowp = &now_ms[0]
            outp = &out[0]
            with nogil:
                with self._lock:
                    accepted = _replay_gets(&self.t, idp, n, nowp, outp, subscription_version, crc_base, interval)
        finally:
            PyBuffer_Release(&view)
        if accepted < 0:
            raise MemoryError("cannot grow the instance table")
        return accepted

    # -------------------------------------------------------------------------- introspection

    def _lru_ids(self):
        """Ids from least to most recently used, including expired entries not yet reclaimed (tests)."""
        cdef list res = []
        cdef list raw = []
        cdef uint32_t i
        with self._lock:
            i = self.t.lru_head
            while i != NIL:
                raw.append((self.t.e[i].msb, self.t.e[i].lsb))
                i = self.t.e[i].lru_next
        for m, l in raw:
            res.append(_id_bytes(m, l))
        return res

    def _check(self):
        """Walk every structure and raise AssertionError on any inconsistency (tests; O(n))."""
        cdef list problems
        with self._lock:
            problems = _table_problems(&self.t)
        if problems:
            raise AssertionError("; ".join(problems))


# The endpoint's request loop on this table (after the table's class, which it drives).
include "instances_loop.pxi"
