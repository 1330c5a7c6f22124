/* Raw snappy block decoding (kip714._codec).
 *
 * kc_snappy_decode decodes the tags of one raw snappy block (https://github.com/google/snappy/blob/main/format_description.txt),
 * the bytes after its varint length preamble, into exactly `n_out` bytes at `out` (the preamble's value,
 * checked against the caller's limit before `out` was allocated). It returns NULL on success, or a short
 * reason when the block is malformed, with the rules of Google's RawUncompress (what snappy-java, and so
 * Kafka, runs):
 * - a literal's length bytes or its data run past the input;
 * - a copy's offset bytes run past the input, its offset is 0 or reaches before the start of the output;
 * - a literal or a copy would write past `n_out` bytes (every tag writes at least one byte, so trailing
 *   input after a full output is refused too);
 * - the input ends before `n_out` bytes were written.
 * Nothing is read outside [src, src + n_in) or written outside [out, out + n_out). A pure function, safe
 * without the GIL; `out` may be NULL when n_out is 0.
 */
#ifndef KIP714_CODEC_SNAPPY_H
#define KIP714_CODEC_SNAPPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline const char *kc_snappy_decode(const unsigned char *src, size_t n_in, unsigned char *out,
                                           size_t n_out) {
    const unsigned char *ip = src;
    const unsigned char *const ip_end = src + n_in;
    unsigned char *op = out;
    unsigned char *const op_end = out + n_out;
    while (ip < ip_end) {
        const unsigned tag = *ip++;
        size_t len, off;
        if ((tag & 3) == 0) { /* literal */
            len = tag >> 2;
            if (len >= 60) {
                const size_t nb = len - 59; /* 1..4 little-endian length bytes */
                if ((size_t)(ip_end - ip) < nb)
                    return "literal length runs past the input";
                len = 0;
                for (size_t i = 0; i < nb; i++)
                    len |= (size_t)ip[i] << (8 * i);
                ip += nb;
            }
            len += 1;
            if (len > (size_t)(ip_end - ip))
                return "literal runs past the input";
            if (len > (size_t)(op_end - op))
                return "literal runs past the declared length";
            if (len <= 16 && (ip_end - ip) >= 16 && (op_end - op) >= 16)
                memcpy(op, ip, 16); /* short literal: a fixed-size copy (the extra bytes are overwritten later) */
            else
                memcpy(op, ip, len);
            ip += len;
            op += len;
            continue;
        }
        if ((tag & 3) == 1) { /* copy, 1-byte offset */
            if (ip >= ip_end)
                return "copy offset runs past the input";
            len = 4 + ((tag >> 2) & 7);
            off = ((size_t)(tag >> 5) << 8) | ip[0];
            ip += 1;
        } else if ((tag & 3) == 2) { /* copy, 2-byte offset */
            if ((size_t)(ip_end - ip) < 2)
                return "copy offset runs past the input";
            len = (tag >> 2) + 1;
            off = (size_t)ip[0] | ((size_t)ip[1] << 8);
            ip += 2;
        } else { /* copy, 4-byte offset */
            if ((size_t)(ip_end - ip) < 4)
                return "copy offset runs past the input";
            len = (tag >> 2) + 1;
            off = (size_t)ip[0] | ((size_t)ip[1] << 8) | ((size_t)ip[2] << 16) | ((size_t)ip[3] << 24);
            ip += 4;
        }
        if (off == 0 || off > (size_t)(op - out))
            return "copy offset out of range";
        if (len > (size_t)(op_end - op))
            return "copy runs past the declared length";
        {
            const unsigned char *from = op - off;
            if ((size_t)(op_end - op) >= len + 16) {
                /* room to copy past the end (bytes that later tags overwrite): fixed-size steps */
                if (off >= 16) { /* a 16-byte step never reads what it writes */
                    memcpy(op, from, 16);
                    for (size_t i = 16; i < len; i += 16)
                        memcpy(op + i, from + i, 16);
                } else { /* a short pattern: widen it to 8 bytes by doubling, then 8-byte steps */
                    unsigned char *d = op;
                    ptrdiff_t left = (ptrdiff_t)len;
                    uint64_t v;
                    while (d - from < 8) {
                        memcpy(&v, from, 8);
                        memcpy(d, &v, 8);
                        left -= d - from;
                        d += d - from;
                        if (left <= 0)
                            break;
                    }
                    while (left > 0) {
                        memcpy(&v, from, 8);
                        memcpy(d, &v, 8);
                        from += 8;
                        d += 8;
                        left -= 8;
                    }
                }
            } else if (off >= len) {
                memcpy(op, from, len);
            } else {
                for (size_t i = 0; i < len; i++)
                    op[i] = from[i];
            }
            op += len;
        }
    }
    if (op != op_end)
        return "input ends before the declared length";
    return NULL;
}

#endif
