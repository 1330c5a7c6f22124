/* libzstd's one-shot decompression, found at run time.
 *
 * The request loop (kip714._instances) decompresses a push's zstd payload with libzstd itself, through a
 * context kept for the broker, instead of building python-zstandard objects per push. python-zstandard's
 * wheel links libzstd statically and exports none of it, and a C build against libzstd would need its
 * headers (Debian's libzstd-dev) on every machine that builds kip714. The shared library itself is on
 * every Debian system (apt depends on it) and most others: it is opened once with dlopen, and the six
 * functions used here (stable API since zstd 1.3) are declared here. Without it, or when it is not the
 * release python-zstandard bundles, k714_zstd_load() answers 0 and the caller keeps its portable path
 * (kip714._codec, through python-zstandard).
 */
#ifndef KIP714_ZSTD_H
#define KIP714_ZSTD_H

#include <stddef.h>
#include <stdint.h>
#include "kip714_bytes.h"   /* k714_le32 */
#include <dlfcn.h>

typedef struct k714_ZSTD_DCtx_s k714_ZSTD_DCtx;

typedef k714_ZSTD_DCtx* (*k714_zstd_create_fn)(void);
typedef size_t (*k714_zstd_free_fn)(k714_ZSTD_DCtx*);
typedef size_t (*k714_zstd_decompress_fn)(k714_ZSTD_DCtx*, void*, size_t, const void*, size_t);
typedef unsigned (*k714_zstd_is_error_fn)(size_t);
typedef size_t (*k714_zstd_frame_size_fn)(const void*, size_t);
typedef unsigned (*k714_zstd_version_fn)(void);

static k714_zstd_create_fn k714_ZSTD_createDCtx = NULL;
static k714_zstd_free_fn k714_ZSTD_freeDCtx = NULL;
static k714_zstd_decompress_fn k714_ZSTD_decompressDCtx = NULL;
static k714_zstd_is_error_fn k714_ZSTD_isError = NULL;
static k714_zstd_frame_size_fn k714_ZSTD_findFrameCompressedSize = NULL;
static k714_zstd_version_fn k714_ZSTD_versionNumber = NULL;

/* 1 when libzstd ``version`` (ZSTD_versionNumber(): 10507 for 1.5.7) is loaded, else 0. Called once, with the
 * GIL held. Only that exact version is taken: two libzstd releases do not refuse the same corrupt frames (1.5.4
 * decodes blocks over Block_Maximum_Size that 1.5.7 refuses), and every answer must be the one the portable
 * path (python-zstandard's bundled libzstd) gives. */
static int k714_zstd_load(unsigned version) {
    static int state = -1;
    const char* names[] = {"libzstd.so.1", "libzstd.so", "libzstd.1.dylib", "libzstd.dylib", NULL};
    void* lib = NULL;
    int k;
    if (state >= 0)
        return state;
    state = 0;
    for (k = 0; names[k] != NULL && lib == NULL; k++)
        lib = dlopen(names[k], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return 0;
    k714_ZSTD_createDCtx = (k714_zstd_create_fn)dlsym(lib, "ZSTD_createDCtx");
    k714_ZSTD_freeDCtx = (k714_zstd_free_fn)dlsym(lib, "ZSTD_freeDCtx");
    k714_ZSTD_decompressDCtx = (k714_zstd_decompress_fn)dlsym(lib, "ZSTD_decompressDCtx");
    k714_ZSTD_isError = (k714_zstd_is_error_fn)dlsym(lib, "ZSTD_isError");
    k714_ZSTD_findFrameCompressedSize = (k714_zstd_frame_size_fn)dlsym(lib, "ZSTD_findFrameCompressedSize");
    k714_ZSTD_versionNumber = (k714_zstd_version_fn)dlsym(lib, "ZSTD_versionNumber");
    if (!k714_ZSTD_createDCtx || !k714_ZSTD_freeDCtx || !k714_ZSTD_decompressDCtx || !k714_ZSTD_isError
        || !k714_ZSTD_findFrameCompressedSize || !k714_ZSTD_versionNumber || k714_ZSTD_versionNumber() != version)
        return 0;
    state = 1;
    return 1;
}

#endif
