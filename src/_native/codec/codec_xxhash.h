/* XXH32 (xxHash, 32-bit variant) as the LZ4 frame format uses it: header checksum, block checksums and
 * the content checksum are all XXH32 with seed 0 over little-endian 32-bit lanes.
 *
 * Written from the published algorithm description (https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md):
 * four accumulators over 16-byte stripes, a merge, the remaining 4-byte and 1-byte tails, then the avalanche.
 * Loads are done with memcpy so unaligned input is fine on every target; byte order is fixed to little-endian.
 * Pure function of its arguments, safe to call without the GIL.
 */
#ifndef KIP714_CODEC_XXHASH_H
#define KIP714_CODEC_XXHASH_H

#include <stddef.h>
#include <stdint.h>

#include "codec_bytes.h"

#define KC_XXH_P1 0x9E3779B1U
#define KC_XXH_P2 0x85EBCA77U
#define KC_XXH_P3 0xC2B2AE3DU
#define KC_XXH_P4 0x27D4EB2FU
#define KC_XXH_P5 0x165667B1U

static inline uint32_t kc_rotl32(uint32_t x, unsigned r) { return (x << r) | (x >> (32U - r)); }

static inline uint32_t kc_xxh32_round(uint32_t acc, uint32_t lane) {
    acc += lane * KC_XXH_P2;
    acc = kc_rotl32(acc, 13);
    return acc * KC_XXH_P1;
}

static inline uint32_t kc_xxh32(const unsigned char *p, size_t len, uint32_t seed) {
    const unsigned char *end = p + len;
    uint32_t h;
    if (len >= 16) {
        const unsigned char *limit = end - 16;
        uint32_t v1 = seed + KC_XXH_P1 + KC_XXH_P2;
        uint32_t v2 = seed + KC_XXH_P2;
        uint32_t v3 = seed;
        uint32_t v4 = seed - KC_XXH_P1;
        do {
            v1 = kc_xxh32_round(v1, kc_le32(p));
            v2 = kc_xxh32_round(v2, kc_le32(p + 4));
            v3 = kc_xxh32_round(v3, kc_le32(p + 8));
            v4 = kc_xxh32_round(v4, kc_le32(p + 12));
            p += 16;
        } while (p <= limit);
        h = kc_rotl32(v1, 1) + kc_rotl32(v2, 7) + kc_rotl32(v3, 12) + kc_rotl32(v4, 18);
    } else {
        h = seed + KC_XXH_P5;
    }
    h += (uint32_t)len;
    while ((size_t)(end - p) >= 4) {
        h += kc_le32(p) * KC_XXH_P3;
        h = kc_rotl32(h, 17) * KC_XXH_P4;
        p += 4;
    }
    while (p < end) {
        h += (uint32_t)(*p) * KC_XXH_P5;
        h = kc_rotl32(h, 11) * KC_XXH_P1;
        p++;
    }
    h ^= h >> 15;
    h *= KC_XXH_P2;
    h ^= h >> 13;
    h *= KC_XXH_P3;
    h ^= h >> 16;
    return h;
}

#endif /* KIP714_CODEC_XXHASH_H */
