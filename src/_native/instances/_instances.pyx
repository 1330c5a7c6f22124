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

__all__ = ["InstanceTable", "Outcome", "java_uuid_hash", "LOOKUP_LIVE", "LOOKUP_ABSENT", "LOOKUP_STALE",
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

# Largest accepted max_instances: entry indices are uint32 and 0xFFFFFFFF means "none".
cdef uint32_t MAX_INSTANCES_LIMIT = 0x7FFFFFFF
cdef int64_t INT32_MAX_ = 0x7FFFFFFF


cdef struct Entry:
    uint64_t msb
    uint64_t lsb
    int64_t last_get
    int64_t last_push
    int64_t deadline          # table clock at the last request + ttl (saturated); expired when clock >= deadline
    int64_t sub_version
    int32_t interval
    int32_t sub_id
    uint32_t lru_prev
    uint32_t lru_next
    uint32_t ttl_prev
    uint32_t ttl_next
    uint32_t hnext            # next entry in the hash chain; next free slot while on the free list
    uint32_t cls              # TTL class index
    int16_t last_error
    uint8_t terminating
    uint8_t used
    uint32_t gen              # incarnation: a table-wide count at (re)creation (push tickets, finish_push)


cdef struct TtlClass:
    int64_t ttl               # meaningful while count > 0; a class with count == 0 is free
    uint32_t head             # earliest deadline
    uint32_t tail             # latest deadline
    uint32_t count
    uint32_t pad_


cdef struct Table:
    Entry* e
    uint32_t* buckets
    TtlClass* cls
    uint32_t cap              # entry slots allocated
    uint32_t hw               # slots [0, hw) have been handed out at least once
    uint32_t count            # entries in the index (live, or expired but not reclaimed yet)
    uint32_t max_n
    uint32_t free_head
    uint32_t bmask            # bucket count - 1 (a power of two minus one)
    uint32_t lru_head         # least recently used
    uint32_t lru_tail         # most recently used
    uint32_t ncls_alloc
    uint32_t ncls_hw          # classes [0, ncls_hw) have been used at least once
    uint32_t cls_hint
    int64_t next_due          # lower bound of every class head's deadline (INT64_MAX: nothing to expire)
    int64_t cache_expiry
    int64_t clock             # largest now_ms seen by a modifying call
    uint64_t k0
    uint64_t k1
    uint64_t evictions
    uint64_t expirations
    uint32_t gen_next         # the next incarnation number (wraps; a ticket lives for one export)
    uint64_t push_codes[128]  # decisions by result code (all Kafka codes used here are < 128)
    uint64_t get_codes[128]


# ------------------------------------------------------------------------------------------ helpers

cdef inline int32_t _java_hash(uint64_t msb, uint64_t lsb) noexcept nogil:
    cdef uint64_t x = msb ^ lsb
    return <int32_t>(<uint32_t>(x >> 32) ^ <uint32_t>x)


cdef inline uint64_t _hash(const Table* t, uint64_t msb, uint64_t lsb) noexcept nogil:
    return k714i_hash(msb, lsb, t.k0, t.k1)


cdef inline uint32_t _find(const Table* t, uint64_t msb, uint64_t lsb, uint64_t h) noexcept nogil:
    cdef uint32_t i = t.buckets[h & t.bmask]
    cdef const Entry* ep
    while i != NIL:
        ep = &t.e[i]
        if ep.msb == msb and ep.lsb == lsb:
            return i
        i = ep.hnext
    return NIL


cdef inline int64_t _ttl_for(const Table* t, int64_t interval) noexcept nogil:
    cdef int64_t three = interval * 3          # interval <= 2**31 - 1, no overflow
    return three if three > t.cache_expiry else t.cache_expiry


cdef inline void _hash_link(Table* t, uint32_t i, uint64_t h) noexcept nogil:
    cdef uint32_t* b = &t.buckets[h & t.bmask]
    t.e[i].hnext = b[0]
    b[0] = i


cdef inline void _hash_unlink(Table* t, uint32_t i) noexcept nogil:
    cdef Entry* ep = &t.e[i]
    cdef uint32_t* b = &t.buckets[_hash(t, ep.msb, ep.lsb) & t.bmask]
    cdef uint32_t j
    if b[0] == i:
        b[0] = ep.hnext
        return
    j = b[0]
    while j != NIL and t.e[j].hnext != i:
        j = t.e[j].hnext
    if j != NIL:
        t.e[j].hnext = ep.hnext


cdef inline void _lru_unlink(Table* t, uint32_t i) noexcept nogil:
    cdef Entry* ep = &t.e[i]
    if ep.lru_prev != NIL:
        t.e[ep.lru_prev].lru_next = ep.lru_next
    else:
        t.lru_head = ep.lru_next
    if ep.lru_next != NIL:
        t.e[ep.lru_next].lru_prev = ep.lru_prev
    else:
        t.lru_tail = ep.lru_prev


cdef inline void _lru_append(Table* t, uint32_t i) noexcept nogil:
    cdef Entry* ep = &t.e[i]
    ep.lru_prev = t.lru_tail
    ep.lru_next = NIL
    if t.lru_tail != NIL:
        t.e[t.lru_tail].lru_next = i
    else:
        t.lru_head = i
    t.lru_tail = i


cdef inline void _lru_touch(Table* t, uint32_t i) noexcept nogil:
    if t.lru_tail != i:
        _lru_unlink(t, i)
        _lru_append(t, i)


cdef inline void _ttl_unlink(Table* t, uint32_t i) noexcept nogil:
    cdef Entry* ep = &t.e[i]
    cdef TtlClass* c = &t.cls[ep.cls]
    if ep.ttl_prev != NIL:
        t.e[ep.ttl_prev].ttl_next = ep.ttl_next
    else:
        c.head = ep.ttl_next
    if ep.ttl_next != NIL:
        t.e[ep.ttl_next].ttl_prev = ep.ttl_prev
    else:
        c.tail = ep.ttl_prev
    c.count -= 1


cdef inline void _ttl_append(Table* t, uint32_t i) noexcept nogil:
    """Append to the tail of its class list. Deadlines come from the monotone table clock plus the
    class's fixed ttl, so the tail is always the right place and each list stays sorted."""
    cdef Entry* ep = &t.e[i]
    cdef TtlClass* c = &t.cls[ep.cls]
    ep.ttl_prev = c.tail
    ep.ttl_next = NIL
    if c.tail != NIL:
        t.e[c.tail].ttl_next = i
    else:
        c.head = i
    c.tail = i
    c.count += 1
    if ep.deadline < t.next_due:
        t.next_due = ep.deadline


cdef inline void _touch(Table* t, uint32_t i) noexcept nogil:
    """A request reached instance i: re-arm its expiry from the table clock; it becomes most recently used."""
    cdef Entry* ep = &t.e[i]
    ep.deadline = k714i_sat_add(t.clock, t.cls[ep.cls].ttl)
    if ep.ttl_next != NIL:
        _ttl_unlink(t, i)
        _ttl_append(t, i)
    elif ep.deadline < t.next_due:        # already the tail (and maybe the head): bound stays a bound
        t.next_due = ep.deadline
    _lru_touch(t, i)


cdef inline void _advance(Table* t, int64_t now) noexcept nogil:
    if now > t.clock:
        t.clock = now


cdef void _remove(Table* t, uint32_t i) noexcept nogil:
    _hash_unlink(t, i)
    _lru_unlink(t, i)
    _ttl_unlink(t, i)
    t.e[i].used = 0
    t.e[i].hnext = t.free_head
    t.free_head = i
    t.count -= 1


cdef uint32_t _reclaim(Table* t, uint32_t limit) noexcept nogil:
    """Remove up to ``limit`` instances whose deadline is <= the table clock (class heads first)."""
    cdef int64_t now = t.clock
    cdef int64_t low = INT64_MAX
    cdef uint32_t done = 0
    cdef uint32_t c, h
    cdef TtlClass* cp
    if now < t.next_due:
        return 0
    for c in range(t.ncls_hw):
        cp = &t.cls[c]
        while cp.count > 0 and done < limit:
            h = cp.head
            if t.e[h].deadline > now:
                break
            _remove(t, h)
            done += 1
        if cp.count > 0 and t.e[cp.head].deadline < low:
            low = t.e[cp.head].deadline
    t.next_due = low
    t.expirations += done
    return done


cdef uint32_t _class_for(Table* t, int64_t ttl) noexcept nogil:
    """The class index for ``ttl`` (an existing live one, else a free one). NIL when out of memory."""
    cdef uint32_t c = t.cls_hint
    cdef uint32_t free = NIL
    cdef uint32_t n
    cdef TtlClass* p
    if c < t.ncls_hw and t.cls[c].count > 0 and t.cls[c].ttl == ttl:
        return c
    for c in range(t.ncls_hw):
        if t.cls[c].count > 0:
            if t.cls[c].ttl == ttl:
                t.cls_hint = c
                return c
        elif free == NIL:
            free = c
    if free == NIL:
        if t.ncls_hw == t.ncls_alloc:
            n = t.ncls_alloc * 2
            p = <TtlClass*>PyMem_RawRealloc(t.cls, <size_t>n * sizeof(TtlClass))
            if p == NULL:
                return NIL
            t.cls = p
            t.ncls_alloc = n
        free = t.ncls_hw
        t.ncls_hw += 1
    p = &t.cls[free]
    p.ttl = ttl
    p.head = NIL
    p.tail = NIL
    p.count = 0
    t.cls_hint = free
    return free


cdef uint32_t _pow2_at_least(uint32_t n) noexcept nogil:
    cdef uint32_t p = 1
    while p < n:
        p <<= 1
    return p


cdef inline uint32_t _buckets_for(uint32_t cap) noexcept nogil:
    """Hash buckets for ``cap`` entry slots: a power of two at least twice ``cap`` (load factor <= 1/2,
    ~1.25 entries read per successful lookup instead of ~1.5 at load 1: in a large table each entry read
    is a cache miss). 4 bytes a bucket: ~8 bytes per instance."""
    cdef uint32_t p = _pow2_at_least(cap)
    return p << 1 if p <= 0x40000000 else p


cdef int _grow(Table* t) noexcept nogil:
    """Double the entry array (capped at max_n); keep at least twice as many buckets as slots. -1: no memory."""
    cdef uint32_t newcap = t.cap * 2 if t.cap <= t.max_n // 2 else t.max_n
    cdef uint32_t nb, i
    cdef Entry* ne
    cdef uint32_t* nbk
    if newcap <= t.cap or <size_t>newcap > (<size_t>-1) // sizeof(Entry):
        return -1
    ne = <Entry*>PyMem_RawRealloc(t.e, <size_t>newcap * sizeof(Entry))
    if ne == NULL:
        return -1
    t.e = ne
    t.cap = newcap
    k714i_advise_huge(ne, <size_t>newcap * sizeof(Entry))   # before the new slots are first touched
    nb = _buckets_for(newcap)
    if nb > t.bmask + 1:
        nbk = <uint32_t*>PyMem_RawMalloc(<size_t>nb * sizeof(uint32_t))
        if nbk == NULL:
            return 0            # the old index still works, only with longer chains
        k714i_advise_huge(nbk, <size_t>nb * sizeof(uint32_t))
        memset(nbk, 0xFF, <size_t>nb * sizeof(uint32_t))
        PyMem_RawFree(t.buckets)
        t.buckets = nbk
        t.bmask = nb - 1
        for i in range(t.hw):
            if t.e[i].used:
                _hash_link(t, i, _hash(t, t.e[i].msb, t.e[i].lsb))
    return 0


cdef uint32_t _alloc(Table* t) noexcept nogil:
    """A free entry slot, evicting the least recently used instance when the table is full."""
    cdef uint32_t i
    if t.count >= t.max_n:
        _reclaim(t, 1)                 # something already expired goes first
        if t.count >= t.max_n:
            _remove(t, t.lru_head)
            t.evictions += 1
    if t.free_head != NIL:
        i = t.free_head
        t.free_head = t.e[i].hnext
        return i
    if t.hw == t.cap and _grow(t) != 0:
        return NIL
    i = t.hw
    t.hw += 1
    return i


cdef uint32_t _create(Table* t, uint64_t msb, uint64_t lsb, uint64_t h, int64_t version,
                      int32_t sub_id, int32_t interval) noexcept nogil:
    """(Re)create an instance fresh at the table clock (Kafka builds a new ClientMetricsInstance).
    Returns its index, or NIL when out of memory (the table is unchanged apart from reclaimed entries)."""
    cdef int64_t ttl = _ttl_for(t, interval)
    cdef uint32_t c = _class_for(t, ttl)
    cdef uint32_t i
    cdef Entry* ep
    if c == NIL:
        return NIL
    i = _find(t, msb, lsb, h)
    if i != NIL:
        if t.e[i].deadline <= t.clock:
            t.expirations += 1         # it had expired; Kafka's reaper would have dropped it
        _ttl_unlink(t, i)
        _lru_touch(t, i)
        ep = &t.e[i]
    else:
        i = _alloc(t)
        if i == NIL:
            return NIL
        ep = &t.e[i]
        ep.msb = msb
        ep.lsb = lsb
        ep.used = 1
        _hash_link(t, i, h)
        _lru_append(t, i)
        t.count += 1
    ep.last_get = 0
    ep.last_push = 0
    ep.sub_version = version
    ep.interval = interval
    ep.sub_id = sub_id
    ep.terminating = 0
    ep.last_error = E_NONE
    ep.gen = t.gen_next
    t.gen_next += 1
    ep.cls = c
    ep.deadline = k714i_sat_add(t.clock, ttl)
    _ttl_append(t, i)
    return i


cdef inline int16_t _get_core(Table* t, uint32_t i, int64_t now) noexcept nogil:
    """GetTelemetrySubscriptions step 3-4 on a live, current instance (Kafka 4.1+)."""
    cdef Entry* ep
    cdef int64_t last
    _touch(t, i)
    ep = &t.e[i]
    last = ep.last_get if ep.last_get > ep.last_push else ep.last_push
    if k714i_wsub(now, last) >= ep.interval:
        ep.last_get = now
        ep.last_error = E_NONE
        t.get_codes[E_NONE] += 1
        return E_NONE
    if ep.last_error == E_UNKNOWN_SUBSCRIPTION_ID or ep.last_error == E_UNSUPPORTED_COMPRESSION_TYPE:
        # 4.1+ exemption: allowed, lastGet not moved; the Get still completes, so lastKnownError = NONE
        ep.last_error = E_NONE
        t.get_codes[E_NONE] += 1
        return E_NONE
    t.get_codes[E_THROTTLING_QUOTA_EXCEEDED] += 1
    return E_THROTTLING_QUOTA_EXCEEDED


cdef inline int16_t _push_core(Table* t, uint32_t i, int64_t now, int32_t sub_id, bint terminating,
                               int64_t compression, int64_t wire_size, int64_t max_bytes) noexcept nogil:
    """PushTelemetry validation steps 4-8 and the ``finally`` (docs/reference/kafka-java-behaviour.md §3(d))."""
    cdef Entry* ep
    cdef int16_t err = E_NONE
    cdef bint can_accept
    _touch(t, i)
    ep = &t.e[i]
    if ep.terminating:
        err = E_INVALID_REQUEST
    else:
        can_accept = ep.last_get > ep.last_push
        if not can_accept:
            can_accept = k714i_wsub(now, ep.last_push) >= ep.interval
        if can_accept:
            ep.last_push = now
        if not can_accept and not terminating:
            err = E_THROTTLING_QUOTA_EXCEEDED
        elif sub_id != ep.sub_id:
            err = E_UNKNOWN_SUBSCRIPTION_ID
        elif compression < C_NONE or compression > C_ZSTD:
            err = E_UNSUPPORTED_COMPRESSION_TYPE
        elif wire_size > max_bytes:
            err = E_TELEMETRY_TOO_LARGE
    ep.terminating = 1 if terminating else 0
    if err != E_NONE:
        ep.last_error = err
    t.push_codes[err] += 1
    return err


cdef inline uint32_t _resolve(Table* t, uint64_t msb, uint64_t lsb, uint64_t h, int64_t version,
                              int32_t crc_base, int32_t interval) noexcept nogil:
    """Batch mode's get-or-create: absent, expired or stale → a fresh instance. NIL when out of memory."""
    cdef uint32_t i = _find(t, msb, lsb, h)
    if i != NIL and t.e[i].deadline > t.clock and t.e[i].sub_version >= version:
        return i
    return _create(t, msb, lsb, h, version, crc_base ^ _java_hash(msb, lsb), interval)


cdef inline void _prefetch_start(const Table* t, const unsigned char* idp, Py_ssize_t n,
                                 uint64_t* ring) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(n if n < PREFETCH_AHEAD else PREFETCH_AHEAD):
        ring[j] = _hash(t, kb_load_be64(idp + 16 * j), kb_load_be64(idp + 16 * j + 8))
        k714i_prefetch(&t.buckets[ring[j] & t.bmask])


cdef inline void _prefetch_step(const Table* t, const unsigned char* idp, Py_ssize_t k, Py_ssize_t n,
                                uint64_t* ring) noexcept nogil:
    """Batch software pipeline, run once item k's hash has been taken from the ring: hash item
    k + AHEAD and prefetch its bucket; prefetch the first chain entry of item k + AHEAD/2, whose bucket
    was prefetched AHEAD/2 items ago. Only hints: the table may change before they are used."""
    cdef Py_ssize_t j = k + PREFETCH_AHEAD
    cdef uint32_t b
    if j < n:
        ring[j % PREFETCH_AHEAD] = _hash(t, kb_load_be64(idp + 16 * j), kb_load_be64(idp + 16 * j + 8))
        k714i_prefetch(&t.buckets[ring[j % PREFETCH_AHEAD] & t.bmask])
    j = k + PREFETCH_AHEAD // 2
    if j < n:
        b = t.buckets[ring[j % PREFETCH_AHEAD] & t.bmask]
        if b != NIL:
            k714i_prefetch(&t.e[b])
            k714i_prefetch(<const char*>&t.e[b] + sizeof(Entry) - 1)


cdef int _table_init(Table* t, uint32_t max_n, int64_t cache_expiry, uint64_t k0, uint64_t k1) noexcept nogil:
    cdef uint32_t cap = max_n if max_n < INITIAL_CAPACITY else INITIAL_CAPACITY
    cdef uint32_t nb = _buckets_for(cap)
    t.e = <Entry*>PyMem_RawMalloc(<size_t>cap * sizeof(Entry))
    t.buckets = <uint32_t*>PyMem_RawMalloc(<size_t>nb * sizeof(uint32_t))
    t.cls = <TtlClass*>PyMem_RawMalloc(4 * sizeof(TtlClass))
    if t.e == NULL or t.buckets == NULL or t.cls == NULL:
        _table_free(t)
        return -1
    memset(t.buckets, 0xFF, <size_t>nb * sizeof(uint32_t))
    t.cap = cap
    t.hw = 0
    t.count = 0
    t.max_n = max_n
    t.free_head = NIL
    t.bmask = nb - 1
    t.lru_head = NIL
    t.lru_tail = NIL
    t.ncls_alloc = 4
    t.ncls_hw = 0
    t.cls_hint = 0
    t.next_due = INT64_MAX
    t.cache_expiry = cache_expiry
    t.k0 = k0
    t.k1 = k1
    return 0


cdef void _table_free(Table* t) noexcept nogil:
    PyMem_RawFree(t.e)
    PyMem_RawFree(t.buckets)
    PyMem_RawFree(t.cls)
    t.e = NULL
    t.buckets = NULL
    t.cls = NULL
    t.cap = 0
    t.hw = 0
    t.count = 0
    t.bmask = 0
    t.ncls_alloc = 0
    t.ncls_hw = 0


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
                r = _get_core(&self.t, i, now_ms)
        if r < 0:
            raise KeyError(id16)
        return _answer(r)

    def decide_push(self, bytes id16 not None, int64_t now_ms, int32_t subscription_id, bint terminating,
                    int64_t compression_type, int64_t wire_size, int64_t telemetry_max_bytes):
        """PushTelemetry validation steps 4-8 on a live instance; returns the ErrorCode (NONE,
        INVALID_REQUEST, THROTTLING_QUOTA_EXCEEDED, UNKNOWN_SUBSCRIPTION_ID, UNSUPPORTED_COMPRESSION_TYPE or
        TELEMETRY_TOO_LARGE).

        Always copies ``terminating`` into the instance; on an error also sets its last error. On 0 the
        last error is left alone: the caller sets it after decompression/export (``set_last_error``).
        KeyError if the instance is absent or expired."""
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
                r = _push_core(&self.t, i, now_ms, subscription_id, terminating, compression_type,
                               wire_size, telemetry_max_bytes)
        if r < 0:
            raise KeyError(id16)
        return _answer(r)

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

    def finish_push(self, bytes id16 not None, ticket, code):
        """Set the last error of the instance a push ticket was given for, once its export is done (Kafka sets
        ``lastKnownError`` on the instance object it decided the push with). True if set; False when that
        incarnation has left the table meanwhile (expired, evicted, removed or re-created): then, as in
        Kafka, whose evicted instance object is simply dropped, nothing else changes."""
        cdef uint64_t msb, lsb, h
        cdef uint32_t i
        cdef int64_t c = code
        cdef int64_t tk = ticket
        cdef bint ok = False
        if c < -32768 or c > 32767:
            raise ValueError(f"an error code is an int16, got {code}")
        if tk < T_BASE or tk > T_BASE + <int64_t>0xFFFFFFFF:
            raise ValueError(f"not a push ticket: {ticket}")
        _key(id16, &msb, &lsb)
        self._need()
        h = _hash(&self.t, msb, lsb)
        with self._lock:
            i = _find(&self.t, msb, lsb, h)
            if (i != NIL and self.t.e[i].deadline > self.t.clock
                    and self.t.e[i].gen == <uint32_t>(tk - T_BASE)):
                self.t.e[i].last_error = <int16_t>c
                ok = True
        return ok

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
        cdef Py_ssize_t k
        cdef int32_t interval = _check_interval(push_interval_ms)
        cdef Table* t = &self.t
        cdef const unsigned char* idp
        cdef const int64_t* nowp
        cdef const int32_t* sidp
        cdef const uint8_t* termp
        cdef const int8_t* ctp
        cdef const int32_t* wsp
        cdef int16_t* outp
        cdef uint64_t msb, lsb, h
        cdef uint64_t hashes[PREFETCH_AHEAD]
        cdef uint32_t i
        cdef int16_t err
        cdef Py_ssize_t accepted = 0
        cdef bint oom = False
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
                    _prefetch_start(t, idp, n, hashes)
                    for k in range(n):
                        msb = kb_load_be64(idp + 16 * k)
                        lsb = kb_load_be64(idp + 16 * k + 8)
                        h = hashes[k % PREFETCH_AHEAD]
                        _prefetch_step(t, idp, k, n, hashes)
                        _advance(t, nowp[k])
                        _reclaim(t, RECLAIM_PER_OP)
                        i = _resolve(t, msb, lsb, h, subscription_version, crc_base, interval)
                        if i == NIL:
                            oom = True
                            break
                        err = _push_core(t, i, nowp[k], sidp[k], termp[k] != 0, ctp[k], wsp[k],
                                         telemetry_max_bytes)
                        if err == E_NONE:
                            t.e[i].last_error = E_NONE
                            accepted += 1
                        outp[k] = err
        finally:
            PyBuffer_Release(&view)
        if oom:
            raise MemoryError("cannot grow the instance table")
        return accepted

    def decide_gets(self, ids, const int64_t[::1] now_ms not None, int16_t[::1] out not None, *,
                    int64_t subscription_version, int32_t crc_base, int64_t push_interval_ms):
        """Replay N Gets in order with the GIL released (same create-if-needed rule as ``decide_pushes``).
        Writes 0 or 89 per Get into ``out``; returns how many were allowed."""
        cdef Py_buffer view
        cdef Py_ssize_t n = now_ms.shape[0]
        cdef Py_ssize_t k
        cdef int32_t interval = _check_interval(push_interval_ms)
        cdef Table* t = &self.t
        cdef const unsigned char* idp
        cdef const int64_t* nowp
        cdef int16_t* outp
        cdef uint64_t msb, lsb, h
        cdef uint64_t hashes[PREFETCH_AHEAD]
        cdef uint32_t i
        cdef int16_t err
        cdef Py_ssize_t accepted = 0
        cdef bint oom = False
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
                    _prefetch_start(t, idp, n, hashes)
                    for k in range(n):
                        msb = kb_load_be64(idp + 16 * k)
                        lsb = kb_load_be64(idp + 16 * k + 8)
                        h = hashes[k % PREFETCH_AHEAD]
                        _prefetch_step(t, idp, k, n, hashes)
                        _advance(t, nowp[k])
                        _reclaim(t, RECLAIM_PER_OP)
                        i = _resolve(t, msb, lsb, h, subscription_version, crc_base, interval)
                        if i == NIL:
                            oom = True
                            break
                        err = _get_core(t, i, nowp[k])
                        if err == E_NONE:
                            accepted += 1
                        outp[k] = err
        finally:
            PyBuffer_Release(&view)
        if oom:
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
        cdef uint32_t i, j, c, n, prev, steps
        cdef uint64_t h
        cdef list problems = []
        cdef Table* t = &self.t
        with self._lock:
            n = 0
            for i in range(t.hw):
                if t.e[i].used:
                    n += 1
                    h = _hash(t, t.e[i].msb, t.e[i].lsb)
                    if _find(t, t.e[i].msb, t.e[i].lsb, h) != i:
                        problems.append(f"entry {i} not reachable from its bucket")
            if n != t.count:
                problems.append(f"{n} used entries but count {t.count}")
            if t.count > t.max_n or t.cap > t.max_n:
                problems.append("over max_instances")
            # LRU list
            n = 0
            prev = NIL
            i = t.lru_head
            while i != NIL and n <= t.count:
                if t.e[i].lru_prev != prev or not t.e[i].used:
                    problems.append(f"LRU list broken at {i}")
                    break
                prev = i
                i = t.e[i].lru_next
                n += 1
            if n != t.count or prev != t.lru_tail:
                problems.append(f"LRU list has {n} entries, count {t.count}")
            # TTL classes
            n = 0
            for c in range(t.ncls_hw):
                j = 0
                prev = NIL
                i = t.cls[c].head
                while i != NIL and j <= t.count:
                    if t.e[i].ttl_prev != prev or t.e[i].cls != c or not t.e[i].used:
                        problems.append(f"TTL list {c} broken at {i}")
                        break
                    if prev != NIL and t.e[prev].deadline > t.e[i].deadline:
                        problems.append(f"TTL list {c} out of deadline order at {i}")
                    if i == t.cls[c].head and t.e[i].deadline < t.next_due:
                        problems.append(f"next_due {t.next_due} above head deadline {t.e[i].deadline}")
                    prev = i
                    i = t.e[i].ttl_next
                    j += 1
                if j != t.cls[c].count or prev != t.cls[c].tail:
                    problems.append(f"TTL list {c} has {j} entries, count {t.cls[c].count}")
                n += j
            if n != t.count:
                problems.append(f"TTL lists hold {n} entries, count {t.count}")
            # free list
            n = 0
            i = t.free_head
            while i != NIL and n <= t.hw:
                if t.e[i].used:
                    problems.append(f"used entry {i} on the free list")
                    break
                i = t.e[i].hnext
                n += 1
            if n + t.count != t.hw:
                problems.append(f"free list {n} + count {t.count} != high water {t.hw}")
        if problems:
            raise AssertionError("; ".join(problems))
