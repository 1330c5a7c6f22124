/* Unaligned little/big-endian loads and stores for the codec frame walkers (kip714._codec).
 * memcpy-based so they are safe on any alignment, and independent of the host byte order. */
#ifndef KIP714_CODEC_BYTES_H
#define KIP714_CODEC_BYTES_H

#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define KC_HOST_BIG_ENDIAN 1
#else
#define KC_HOST_BIG_ENDIAN 0
#endif

static inline uint32_t kc_le16(const unsigned char *p) { return (uint32_t)p[0] | ((uint32_t)p[1] << 8); }

static inline uint32_t kc_le24(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16);
}

static inline uint32_t kc_le32(const unsigned char *p) {
#if KC_HOST_BIG_ENDIAN
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
#else
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
#endif
}

static inline uint64_t kc_le64(const unsigned char *p) {
    return (uint64_t)kc_le32(p) | ((uint64_t)kc_le32(p + 4) << 32);
}

static inline uint32_t kc_be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static inline void kc_store_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

#endif /* KIP714_CODEC_BYTES_H */
