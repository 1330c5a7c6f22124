/* Magic numbers and limits of the compressed formats kip714._codec walks (all values as the spec gives them). */
#ifndef KIP714_CODEC_FORMATS_H
#define KIP714_CODEC_FORMATS_H

#include <stdint.h>

/* LZ4 frame format: magic read as a little-endian uint32; bit 31 of a block size = stored uncompressed. */
#define KC_LZ4_MAGIC            ((uint32_t)0x184D2204U)
#define KC_LZ4_STORED_BIT       ((uint32_t)0x80000000U)
#define KC_LZ4_SIZE_MASK        ((uint32_t)0x7FFFFFFFU)

/* zstd (RFC 8878): frame magic, skippable frames 0x184D2A50..0x184D2A5F, Block_Maximum_Size cap. */
#define KC_ZSTD_MAGIC           ((uint32_t)0xFD2FB528U)
#define KC_ZSTD_SKIPPABLE_MASK  ((uint32_t)0xFFFFFFF0U)
#define KC_ZSTD_SKIPPABLE_MAGIC ((uint32_t)0x184D2A50U)

/* snappy-java xerial framing: the first four magic bytes (82 53 4E 41) read as an int32 BE chunk length. */
#define KC_XERIAL_MAGIC_HEAD    ((uint32_t)0x82534E41U)
#define KC_U32_MAX              ((uint64_t)0xFFFFFFFFU)
#define KC_I32_MAX              ((uint32_t)0x7FFFFFFFU)

#endif /* KIP714_CODEC_FORMATS_H */
