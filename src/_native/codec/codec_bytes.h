/* The codec frame walkers' names for the shared byte-order readers (kip714._codec); the one
 * implementation is common/kip714_bytes.h. */
#ifndef KIP714_CODEC_BYTES_H
#define KIP714_CODEC_BYTES_H

#include "kip714_bytes.h"

#define kc_le16 k714_le16
#define kc_le24 k714_le24
#define kc_le32 k714_le32
#define kc_le64 k714_le64
#define kc_be32 k714_be32
#define kc_store_be32 k714_store_be32

#endif /* KIP714_CODEC_BYTES_H */
