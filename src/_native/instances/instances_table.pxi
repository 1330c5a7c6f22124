# Included by _instances.pyx: the instance table in native memory — its layout (Entry, TtlClass, Table),
# the hash index, the LRU and TTL-class lists, expiry, growth, creation and the per-request decision cores.
# Everything here runs without the GIL; the caller holds the table's mutex. See the module docstring.

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
