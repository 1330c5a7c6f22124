/* Small portable helpers for kip714._instances (header-only).
 *
 * - k714i_hash: a seeded 128 -> 64 bit mix of a client instance id. Client instance ids are chosen by
 *   clients, so the bucket index must not be predictable without the per-table secret (k0, k1).
 *   Two rounds of the murmur3/splitmix64 finaliser; not a cryptographic PRF, but without the secret an
 *   attacker cannot line ids up in one chain.
 * - k714i_wsub: Java's long subtraction (two's complement wrap-around, no C undefined behaviour).
 * - k714i_sat_add: a + b saturated to the int64 range (deadlines never wrap).
 * - k714i_prefetch: a read prefetch hint where the compiler has one, else nothing.
 * - k714i_advise_huge: ask the kernel to back the 2 MiB-aligned part of a large array with transparent
 *   huge pages (Linux madvise(MADV_HUGEPAGE); nothing elsewhere or when it is refused). A table of a
 *   million instances is ~90 MB touched at random: with 4 KiB pages nearly every lookup also misses the
 *   TLB, and the page walks cost as much as the entry's own cache misses.
 */
#ifndef KIP714_INSTANCES_UTIL_H
#define KIP714_INSTANCES_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "kip714_hash.h"

#define K714I_NIL 0xFFFFFFFFu

static inline uint64_t k714i_hash(uint64_t msb, uint64_t lsb, uint64_t k0, uint64_t k1) {
    return k714_mix64(k714_mix64(msb ^ k0) ^ lsb ^ k1);
}

static inline int64_t k714i_wsub(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a - (uint64_t)b);
}

static inline int64_t k714i_sat_add(int64_t a, int64_t b) {
    /* b >= 0 in every caller */
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    return a + b;
}

#if defined(__GNUC__) || defined(__clang__)
#define k714i_prefetch(p) __builtin_prefetch((const void *)(p), 1, 3)
#elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
#include <xmmintrin.h>
#define k714i_prefetch(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#else
#define k714i_prefetch(p) ((void)(p))
#endif

#if defined(__linux__)
#include <sys/mman.h>
#endif

static inline void k714i_advise_huge(void *p, size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~(huge - 1);
    if (p != NULL && hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);   /* a hint: failure changes nothing */
#else
    (void)p; (void)n;
#endif
}

#endif
