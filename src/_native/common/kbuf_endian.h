/* The wire reader's (kbuf.pxd) names for the shared big-endian loads and stores; the one implementation
 * is common/kip714_bytes.h. */
#ifndef KIP714_KBUF_ENDIAN_H
#define KIP714_KBUF_ENDIAN_H

#include "kip714_bytes.h"

#define kb_load_be16 k714_be16
#define kb_load_be32 k714_be32
#define kb_load_be64 k714_be64
#define kb_store_be16 k714_store_be16
#define kb_store_be32 k714_store_be32
#define kb_store_be64 k714_store_be64

#endif
