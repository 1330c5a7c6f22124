/* Big-endian loads and stores that are safe on unaligned pointers and on any host byte order. */
#ifndef KIP714_KBUF_ENDIAN_H
#define KIP714_KBUF_ENDIAN_H

#include <stdint.h>
#include <string.h>

#if defined(_MSC_VER)
#include <stdlib.h>
#define KB_BSWAP16(x) _byteswap_ushort(x)
#define KB_BSWAP32(x) _byteswap_ulong(x)
#define KB_BSWAP64(x) _byteswap_uint64(x)
#define KB_LITTLE_ENDIAN 1
#else
#define KB_BSWAP16(x) __builtin_bswap16(x)
#define KB_BSWAP32(x) __builtin_bswap32(x)
#define KB_BSWAP64(x) __builtin_bswap64(x)
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define KB_LITTLE_ENDIAN 0
#else
#define KB_LITTLE_ENDIAN 1
#endif
#endif

static inline uint16_t kb_load_be16(const unsigned char *p) {
    uint16_t v; memcpy(&v, p, 2);
#if KB_LITTLE_ENDIAN
    v = KB_BSWAP16(v);
#endif
    return v;
}
static inline uint32_t kb_load_be32(const unsigned char *p) {
    uint32_t v; memcpy(&v, p, 4);
#if KB_LITTLE_ENDIAN
    v = KB_BSWAP32(v);
#endif
    return v;
}
static inline uint64_t kb_load_be64(const unsigned char *p) {
    uint64_t v; memcpy(&v, p, 8);
#if KB_LITTLE_ENDIAN
    v = KB_BSWAP64(v);
#endif
    return v;
}
static inline void kb_store_be16(unsigned char *p, uint16_t v) {
#if KB_LITTLE_ENDIAN
    v = KB_BSWAP16(v);
#endif
    memcpy(p, &v, 2);
}
static inline void kb_store_be32(unsigned char *p, uint32_t v) {
#if KB_LITTLE_ENDIAN
    v = KB_BSWAP32(v);
#endif
    memcpy(p, &v, 4);
}
static inline void kb_store_be64(unsigned char *p, uint64_t v) {
#if KB_LITTLE_ENDIAN
    v = KB_BSWAP64(v);
#endif
    memcpy(p, &v, 8);
}

#endif
