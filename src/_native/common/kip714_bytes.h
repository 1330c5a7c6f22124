/* Byte order, once for the whole native core: unaligned little- and big-endian loads and stores that are
 * safe on any alignment and any host byte order (memcpy + a byte swap where the host differs).
 *
 * Kafka's wire is big-endian (k714_be*); protobuf fixed-width fields, LZ4/xxHash and gzip trailers are
 * little-endian (k714_le*). Every extension includes this header; the per-module headers only name the
 * functions they use. */
#ifndef KIP714_BYTES_H
#define KIP714_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(_MSC_VER)
#include <stdlib.h>
#define K714_BSWAP16(x) _byteswap_ushort(x)
#define K714_BSWAP32(x) _byteswap_ulong(x)
#define K714_BSWAP64(x) _byteswap_uint64(x)
#define K714_BIG_ENDIAN_HOST 0
#else
#define K714_BSWAP16(x) __builtin_bswap16(x)
#define K714_BSWAP32(x) __builtin_bswap32(x)
#define K714_BSWAP64(x) __builtin_bswap64(x)
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define K714_BIG_ENDIAN_HOST 1
#else
#define K714_BIG_ENDIAN_HOST 0
#endif
#endif

/* ------------------------------------------------------------------------------------ little endian */

static inline uint32_t k714_le16(const unsigned char *p) { return (uint32_t)p[0] | ((uint32_t)p[1] << 8); }

static inline uint32_t k714_le24(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16);
}

static inline uint32_t k714_le32(const unsigned char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
#if K714_BIG_ENDIAN_HOST
    v = K714_BSWAP32(v);
#endif
    return v;
}

static inline uint64_t k714_le64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if K714_BIG_ENDIAN_HOST
    v = K714_BSWAP64(v);
#endif
    return v;
}

/* n little-endian 8-byte words from src into host-order uint64 dst (a plain copy on little-endian hosts). */
static inline void k714_le64_copy(uint64_t *dst, const unsigned char *src, size_t n) {
#if K714_BIG_ENDIAN_HOST
    for (size_t i = 0; i < n; i++) dst[i] = k714_le64(src + 8 * i);
#else
    if (n) memcpy(dst, src, n * 8);
#endif
}

/* --------------------------------------------------------------------------------------- big endian */

static inline uint16_t k714_be16(const unsigned char *p) {
    uint16_t v;
    memcpy(&v, p, 2);
#if !K714_BIG_ENDIAN_HOST
    v = K714_BSWAP16(v);
#endif
    return v;
}

static inline uint32_t k714_be32(const unsigned char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
#if !K714_BIG_ENDIAN_HOST
    v = K714_BSWAP32(v);
#endif
    return v;
}

static inline uint64_t k714_be64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if !K714_BIG_ENDIAN_HOST
    v = K714_BSWAP64(v);
#endif
    return v;
}

static inline void k714_store_be16(unsigned char *p, uint16_t v) {
#if !K714_BIG_ENDIAN_HOST
    v = K714_BSWAP16(v);
#endif
    memcpy(p, &v, 2);
}

static inline void k714_store_be32(unsigned char *p, uint32_t v) {
#if !K714_BIG_ENDIAN_HOST
    v = K714_BSWAP32(v);
#endif
    memcpy(p, &v, 4);
}

static inline void k714_store_be64(unsigned char *p, uint64_t v) {
#if !K714_BIG_ENDIAN_HOST
    v = K714_BSWAP64(v);
#endif
    memcpy(p, &v, 8);
}

#endif /* KIP714_BYTES_H */
