/* Small C helpers for the OTLP walker (_otlp.pyx): little-endian loads, UTF-8 validation, a seeded byte hash, base64,
 * decimal int64, JSON string escaping and the Arrow C data interface structs with a release callback
 * that frees malloc'd buffers. Everything here is pure C, GIL-free and bounds-explicit. */
#ifndef KIP714_OTLP_SUPPORT_H
#define KIP714_OTLP_SUPPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kip714_bytes.h"
#include "kip714_hash.h"

/* ------------------------------------------------------------------------------- little endian */

/* Protobuf fixed32/fixed64/double are little-endian on the wire, whatever the host (common/kip714_bytes.h). */
#define otlp_le64 k714_le64
#define otlp_le32 k714_le32
#define otlp_le64_copy k714_le64_copy

static inline double otlp_bits_to_double(uint64_t b) { double d; memcpy(&d, &b, 8); return d; }
static inline uint64_t otlp_double_to_bits(double d) { uint64_t b; memcpy(&b, &d, 8); return b; }

/* memcpy for the short strings that dominate (names, keys, values): no call for n <= 16. */
static inline void otlp_copy(void *dst, const void *src, size_t n) {
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    if (n <= 16) {
        if (n >= 8) {
            uint64_t a, b;
            memcpy(&a, s, 8);
            memcpy(&b, s + n - 8, 8);
            memcpy(d, &a, 8);
            memcpy(d + n - 8, &b, 8);
        } else if (n >= 4) {
            uint32_t a, b;
            memcpy(&a, s, 4);
            memcpy(&b, s + n - 4, 4);
            memcpy(d, &a, 4);
            memcpy(d + n - 4, &b, 4);
        } else {
            for (size_t i = 0; i < n; i++) d[i] = s[i];
        }
        return;
    }
    memcpy(d, s, n);
}

/* ---------------------------------------------------------------------------------------- UTF-8 */

/* 1 if s[0:n] is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF): the same
 * set that upb accepts for proto3 string fields and that Python's strict UTF-8 decoder accepts. */
static inline int otlp_utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (n - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ULL)) { i += 8; continue; }
        }
        unsigned char c = s[i];
        if (c < 0x80) { i += 1; continue; }
        if (c < 0xC2) return 0;
        if (c < 0xE0) {
            if (n - i < 2 || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
            continue;
        }
        if (c < 0xF0) {
            if (n - i < 3) return 0;
            unsigned char c1 = s[i + 1];
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && c1 < 0xA0) return 0;          /* overlong */
            if (c == 0xED && c1 > 0x9F) return 0;          /* surrogate */
            i += 3;
            continue;
        }
        if (c < 0xF5) {
            if (n - i < 4) return 0;
            unsigned char c1 = s[i + 1];
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80) return 0;
            if (c == 0xF0 && c1 < 0x90) return 0;          /* overlong */
            if (c == 0xF4 && c1 > 0x8F) return 0;          /* > U+10FFFF */
            i += 4;
            continue;
        }
        return 0;
    }
    return 1;
}

/* ----------------------------------------------------------------------------------------- hash */

/* A fast seeded hash of a byte string (for the intern tables; the seed is random per process and the
 * tables cap probe lengths, so crafted collisions cost speed, never correctness). */
static inline uint64_t otlp_hash(const unsigned char *p, size_t n, uint64_t seed) {
    uint64_t h = seed ^ (0x9E3779B97F4A7C15ULL * (uint64_t)(n + 1));
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, p, n);
        h = (h ^ w) * 0x94d049bb133111ebULL;
    }
    return k714_mix64(h);
}

/* --------------------------------------------------------------------------------------- base64 */

static inline size_t otlp_b64_len(size_t n) { return ((n + 2) / 3) * 4; }

/* Standard alphabet with padding, as Python's base64.b64encode. dst must hold otlp_b64_len(n). */
static inline void otlp_b64(const unsigned char *src, size_t n, char *dst) {
    static const char T[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t i = 0;
    while (n - i >= 3) {
        uint32_t v = ((uint32_t)src[i] << 16) | ((uint32_t)src[i + 1] << 8) | src[i + 2];
        dst[0] = T[(v >> 18) & 63]; dst[1] = T[(v >> 12) & 63]; dst[2] = T[(v >> 6) & 63]; dst[3] = T[v & 63];
        dst += 4;
        i += 3;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)src[i] << 16;
        dst[0] = T[(v >> 18) & 63]; dst[1] = T[(v >> 12) & 63]; dst[2] = '='; dst[3] = '=';
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)src[i] << 16) | ((uint32_t)src[i + 1] << 8);
        dst[0] = T[(v >> 18) & 63]; dst[1] = T[(v >> 12) & 63]; dst[2] = T[(v >> 6) & 63]; dst[3] = '=';
    }
}

/* ---------------------------------------------------------------------------------------- decimal */

/* Decimal text of v (as Python's str(int)); dst must hold 20 bytes; returns the length. */
static inline int otlp_i64_dec(int64_t v, char *dst) {
    char tmp[24];
    int n = 0, len = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do { tmp[n++] = (char)('0' + (u % 10)); u /= 10; } while (u);
    if (v < 0) dst[len++] = '-';
    while (n) dst[len++] = tmp[--n];
    return len;
}

/* ------------------------------------------------------------------------------------------ JSON */

/* Bytes json.dumps(s, ensure_ascii=False) needs for the body of s (without the quotes). */
static inline size_t otlp_json_escaped_len(const unsigned char *s, size_t n) {
    size_t out = n;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f') out += 1;
        else if (c < 0x20) out += 5;
    }
    return out;
}

/* Write the escaped body; dst must hold otlp_json_escaped_len(s, n). Returns bytes written. */
static inline size_t otlp_json_escape(const unsigned char *s, size_t n, char *dst) {
    static const char H[] = "0123456789abcdef";
    char *d = dst;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        switch (c) {
        case '"': *d++ = '\\'; *d++ = '"'; break;
        case '\\': *d++ = '\\'; *d++ = '\\'; break;
        case '\n': *d++ = '\\'; *d++ = 'n'; break;
        case '\r': *d++ = '\\'; *d++ = 'r'; break;
        case '\t': *d++ = '\\'; *d++ = 't'; break;
        case '\b': *d++ = '\\'; *d++ = 'b'; break;
        case '\f': *d++ = '\\'; *d++ = 'f'; break;
        default:
            if (c < 0x20) {
                *d++ = '\\'; *d++ = 'u'; *d++ = '0'; *d++ = '0'; *d++ = H[c >> 4]; *d++ = H[c & 15];
            } else {
                *d++ = (char)c;
            }
        }
    }
    return (size_t)(d - dst);
}

/* ------------------------------------------------------------------------ Arrow C data interface */

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
#endif

/* ---------------------------------------------------------------------------- output memory pool */

/* Every buffer, child ArrowArray and pointer table of one decoded batch comes from one chunked bump
 * pool (64-byte aligned pieces): a handful of mallocs per call instead of hundreds, and a single
 * release. The root ArrowArray carries the pool in private_data; its release frees the pool; the
 * children's release callbacks only mark them released (their memory goes with the pool). */

typedef struct otlp_chunk {
    struct otlp_chunk *next;
    size_t cap;
    size_t used;
} otlp_chunk;

typedef struct otlp_pool {
    otlp_chunk *head;
    size_t next_size;
} otlp_pool;

#define OTLP_ALIGN 64
#define OTLP_CHUNK_HDR ((sizeof(otlp_chunk) + OTLP_ALIGN - 1) & ~(size_t)(OTLP_ALIGN - 1))

/* One spare chunk survives a released batch, so that decoding payload after payload reuses warm
 * memory instead of paying malloc (and, for big chunks, mmap + page faults) every call. Released
 * batches may be freed on any thread: the slot is swapped atomically. */
#if defined(_MSC_VER)
#include <intrin.h>
#define OTLP_XCHG(ptr, val) ((otlp_chunk *)_InterlockedExchangePointer((void *volatile *)(ptr), (void *)(val)))
#else
#define OTLP_XCHG(ptr, val) __atomic_exchange_n((ptr), (val), __ATOMIC_ACQ_REL)
#endif
#define OTLP_SPARE_MAX ((size_t)64 << 20)

static otlp_chunk *otlp_spare_chunk = NULL;

static void otlp_chunk_retire(otlp_chunk *c) {
    if (c->cap <= OTLP_SPARE_MAX) {
        otlp_chunk *old = OTLP_XCHG(&otlp_spare_chunk, c);
        if (old && old->cap > c->cap) {          /* keep the bigger of the two */
            old = OTLP_XCHG(&otlp_spare_chunk, old);
        }
        free(old);
    } else {
        free(c);
    }
}

static otlp_pool *otlp_pool_new(size_t first_size) {
    otlp_pool *p = (otlp_pool *)calloc(1, sizeof(otlp_pool));
    if (!p) return NULL;
    p->next_size = first_size < 4096 ? 4096 : first_size;
    return p;
}

static void otlp_pool_free(otlp_pool *p) {
    if (!p) return;
    otlp_chunk *c = p->head;
    while (c) {
        otlp_chunk *next = c->next;
        otlp_chunk_retire(c);
        c = next;
    }
    free(p);
}

/* n bytes, 64-byte aligned, not zeroed; NULL on failure (or if n is absurd). */
static void *otlp_pool_alloc(otlp_pool *p, size_t n) {
    size_t need = (n + OTLP_ALIGN - 1) & ~(size_t)(OTLP_ALIGN - 1);
    if (n > ((size_t)1 << 46)) return NULL;
    if (need == 0) need = OTLP_ALIGN;
    otlp_chunk *c = p->head;
    if (!c || c->cap - c->used < need) {
        size_t cap = p->next_size;
        if (cap < need) cap = need;
        c = OTLP_XCHG(&otlp_spare_chunk, (otlp_chunk *)NULL);
        if (c && c->cap < cap) {
            free(c);
            c = NULL;
        }
        if (!c) {
            /* malloc is 16-byte aligned: over-allocate to align the data area by hand */
            c = (otlp_chunk *)malloc(OTLP_CHUNK_HDR + cap + OTLP_ALIGN);
            if (!c) return NULL;
            c->cap = cap;
        }
        c->used = 0;
        c->next = p->head;
        p->head = c;
        if (p->next_size < ((size_t)1 << 26)) p->next_size *= 2;
    }
    uintptr_t base = ((uintptr_t)c + OTLP_CHUNK_HDR + OTLP_ALIGN - 1) & ~(uintptr_t)(OTLP_ALIGN - 1);
    void *out = (void *)(base + c->used);
    c->used += need;
    return out;
}

static void *otlp_pool_calloc(otlp_pool *p, size_t n) {
    void *out = otlp_pool_alloc(p, n);
    if (out && n) memset(out, 0, n);
    return out;
}

static void otlp_child_release(struct ArrowArray *a) {
    a->release = NULL;
}

static void otlp_root_release(struct ArrowArray *a) {
    if (a == NULL || a->release == NULL) return;
    for (int64_t i = 0; i < a->n_children; i++) {
        struct ArrowArray *ch = a->children[i];
        if (ch && ch->release) ch->release(ch);
    }
    otlp_pool_free((otlp_pool *)a->private_data);
    a->private_data = NULL;
    a->release = NULL;
}

/* A zeroed child ArrowArray with its buffer and children pointer tables, all from the pool. */
static struct ArrowArray *otlp_pool_array(otlp_pool *p, int64_t length, int n_buffers, int n_children) {
    size_t bytes = sizeof(struct ArrowArray) + sizeof(void *) * (size_t)(n_buffers + n_children + 1);
    struct ArrowArray *a = (struct ArrowArray *)otlp_pool_calloc(p, bytes);
    if (!a) return NULL;
    a->buffers = (const void **)(a + 1);
    a->children = n_children ? (struct ArrowArray **)(a->buffers + n_buffers) : NULL;
    a->length = length;
    a->n_buffers = n_buffers;
    a->n_children = n_children;
    a->release = otlp_child_release;
    return a;
}

#endif
