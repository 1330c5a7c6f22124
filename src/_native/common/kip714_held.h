/* The request loop's held bytes (unfinished frames) in memory the process gives back the moment it is let go
 * of. A buffer of at least KIP714_HELD_MAPPED bytes is its own anonymous mapping (mmap, grown by mremap,
 * which moves pages instead of copying them, and unmapped when let go of); a smaller one comes from malloc.
 *
 * Written by hand because malloc alone does not bound what a hostile connection costs: glibc raises its
 * mmap threshold to the size of each large block freed (up to 32 MiB), so after the first dropped connection
 * the next large frames come from the heap, whose freed middle is not returned. A server under the buffered-
 * bytes budget then measured 32 to 71 MiB over its baseline for a 32 MiB budget; with mappings it is the
 * budget plus a read chunk, every time. */
#ifndef KIP714_HELD_H
#define KIP714_HELD_H

#include <stdlib.h>
#include <string.h>

#define KIP714_HELD_MAPPED ((size_t)128 * 1024)

#if defined(__linux__)
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/mman.h>

/* A buffer of `cap` bytes grown to `new_cap` (> cap) keeping its first `used` bytes; NULL when out of memory
 * (the old buffer is then still valid). */
static inline unsigned char* kip714_held_grow(unsigned char* p, size_t cap, size_t used, size_t new_cap) {
    void* q;
    if (new_cap < KIP714_HELD_MAPPED)
        return (unsigned char*)realloc(p, new_cap);
    if (p != NULL && cap >= KIP714_HELD_MAPPED) {
        q = mremap(p, cap, new_cap, MREMAP_MAYMOVE);
        return q == MAP_FAILED ? NULL : (unsigned char*)q;
    }
    q = mmap(NULL, new_cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (q == MAP_FAILED)
        return NULL;
    if (used)
        memcpy(q, p, used);
    free(p);
    return (unsigned char*)q;
}

static inline void kip714_held_free(unsigned char* p, size_t cap) {
    if (p == NULL)
        return;
    if (cap >= KIP714_HELD_MAPPED)
        munmap(p, cap);
    else
        free(p);
}

#else

static inline unsigned char* kip714_held_grow(unsigned char* p, size_t cap, size_t used, size_t new_cap) {
    (void)cap;
    (void)used;
    return (unsigned char*)realloc(p, new_cap);
}

static inline void kip714_held_free(unsigned char* p, size_t cap) {
    (void)cap;
    free(p);
}

#endif
#endif
