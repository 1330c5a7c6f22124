/* LZ4 block validation without decoding (kip714._codec).
 *
 * kc_lz4_block_size walks the sequences of one LZ4 block (https://github.com/lz4/lz4/blob/dev/doc/lz4_Block_format.md)
 * and returns the exact number of bytes it decodes to, or -1 when the block is malformed: a length or an offset
 * runs past the input, an offset is 0 or reaches before the available history (`history` bytes of earlier
 * output, 0 for an independent block), the block ends inside a sequence, or the end-of-block rules are broken
 * (the last sequence holds literals only, the last match starts at least 12 bytes and ends at least 5 bytes
 * before the end of the block).
 *
 * Those rules are the format's, and LZ4_decompress_safe() enforces them relative to its output capacity, so a
 * block accepted here also decodes with LZ4_decompress_safe() into exactly the returned number of bytes. The
 * walk touches only the compressed bytes; it is a pure function, safe without the GIL.
 */
#ifndef KIP714_CODEC_LZ4_H
#define KIP714_CODEC_LZ4_H

#include <stddef.h>
#include <stdint.h>

#define KC_LZ4_MFLIMIT 12      /* the last match starts at least this many bytes before the block's end */
#define KC_LZ4_LASTLITERALS 5  /* the last bytes of a block are always literals */

static inline int64_t kc_lz4_block_size(const unsigned char *src, size_t n, uint64_t history) {
    const unsigned char *ip = src;
    const unsigned char *const end = src + n;
    uint64_t op = 0, lit, ml, offset, last_start = 0, last_end = 0;
    unsigned token, b;
    int have_match = 0;
    if (n == 0)
        return -1;
    for (;;) {
        token = *ip++;
        lit = token >> 4;
        if (lit == 15) {
            do {
                if (ip >= end)
                    return -1;
                b = *ip++;
                lit += b;
            } while (b == 255);
        }
        if ((uint64_t)(end - ip) < lit)
            return -1;
        ip += lit;
        op += lit;
        if (ip == end)
            break; /* the last sequence: literals only */
        if (end - ip < 2)
            return -1;
        offset = (uint64_t)ip[0] | ((uint64_t)ip[1] << 8);
        ip += 2;
        if (offset == 0 || offset > op + history)
            return -1;
        ml = token & 15;
        if (ml == 15) {
            do {
                if (ip >= end)
                    return -1;
                b = *ip++;
                ml += b;
            } while (b == 255);
        }
        last_start = op;
        op += ml + 4;
        last_end = op;
        have_match = 1;
        if (ip >= end)
            return -1; /* a block cannot end with a match */
    }
    if (have_match && (last_start + KC_LZ4_MFLIMIT > op || last_end + KC_LZ4_LASTLITERALS > op))
        return -1;
    return (int64_t)op;
}

#endif /* KIP714_CODEC_LZ4_H */
