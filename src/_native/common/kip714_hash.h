/* The 64-bit mixing function of the native core's hash tables (splitmix64's finalizer): the instance
 * table keys 16-byte ids with it, the OTLP decoder's intern tables hash strings with it. */
#ifndef KIP714_HASH_H
#define KIP714_HASH_H

#include <stdint.h>

static inline uint64_t k714_mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    x ^= x >> 31;
    return x;
}

#endif /* KIP714_HASH_H */
