# Included by _instances.pyx: the instance table's invariants, walked in O(n) (InstanceTable._check, for tests).


cdef list _table_problems(Table* t):
    """Every inconsistency of the hash index, the LRU list, the TTL-class lists and the free list, in words
    (the caller holds the table's mutex)."""
    cdef uint32_t i, j, c, n, prev, steps
    cdef uint64_t h
    cdef list problems = []
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
    return problems
