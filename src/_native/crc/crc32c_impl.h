/* CRC32C (Castagnoli): reflected polynomial 0x82F63B78, initial value and final XOR 0xFFFFFFFF.
 *
 * Three implementations, chosen once by k714_crc32c_init():
 *   - x86-64: the SSE4.2 `crc32` instruction when the CPU has it, checked at run time
 *       gcc/clang (Linux, musl, MinGW): __builtin_cpu_supports;
 *       clang on macOS: CPUID through <cpuid.h> (__builtin_cpu_supports needs the ___cpu_model
 *         runtime symbol, which Apple's toolchain has been reported not to provide; an extension is
 *         linked with -undefined dynamic_lookup, so that would only show as an import error);
 *       MSVC (and clang-cl): __cpuid from <intrin.h>, _mm_crc32_u64 & co. from <nmmintrin.h>;
 *     gcc/clang compile the hardware functions with a per-function target attribute, so the rest of
 *     the module does not need -msse4.2 (MSVC needs no flag for the intrinsics);
 *   - aarch64 with gcc/clang: the ARMv8 CRC32C instructions, either always (the compiler already
 *     targets them: __ARM_FEATURE_CRC32, e.g. Apple clang for arm64 macOS; or macOS on arm64 in any
 *     case, since every Apple silicon Mac has them) or after a Linux getauxval(AT_HWCAP) check
 *     (glibc and musl);
 *   - everywhere else (Windows on ARM64, 32-bit x86 and ARM, other architectures) and as the forced
 *     fallback: slicing-by-8 tables.
 * Define KIP714_CRC32C_NO_HW to compile the tables only; KIP714_CRC32C_CPUID selects the <cpuid.h>
 * detection on any gcc/clang x86-64 target (the default on macOS; used to test that branch on Linux).
 * Large inputs on the hardware paths run three independent CRC streams side by side (the instruction
 * has a latency of about three cycles and a throughput of one) and join them with a precomputed
 * "shift by N zero bytes" table.
 *
 * All update functions work on the raw CRC register (already inverted); k714_crc32c() does the
 * pre/post inversion so that `value` continues a finished CRC exactly like crc32c.crc32c(data, value).
 *
 * Not thread-safe until k714_crc32c_init() has returned; call it once from module initialisation.
 */
#ifndef KIP714_CRC32C_IMPL_H
#define KIP714_CRC32C_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kip714_bytes.h"

#define K714_CRC32C_POLY 0x82F63B78u

/* ------------------------------------------------------------------------------------ tables */

static uint32_t k714_crc_tab[8][256];          /* slicing-by-8 */
static int k714_crc_hw_active = 0;             /* 1 when the hardware path is selected */

static void k714_crc_build_tables(void) {
    uint32_t i, k, c;
    for (i = 0; i < 256; i++) {
        c = i;
        for (k = 0; k < 8; k++)
            c = (c & 1u) ? (c >> 1) ^ K714_CRC32C_POLY : c >> 1;
        k714_crc_tab[0][i] = c;
    }
    for (i = 0; i < 256; i++) {
        c = k714_crc_tab[0][i];
        for (k = 1; k < 8; k++) {
            c = (c >> 8) ^ k714_crc_tab[0][c & 0xFFu];
            k714_crc_tab[k][i] = c;
        }
    }
}

/* Software update of the raw register: byte at a time until 8-byte chunks, slicing-by-8 in the middle. */
static uint32_t k714_crc32c_sw_update(uint32_t crc, const unsigned char *p, size_t n) {
    while (n >= 8) {
        uint32_t lo = crc ^ k714_le32(p);
        uint32_t hi = k714_le32(p + 4);
        crc = k714_crc_tab[7][lo & 0xFFu] ^ k714_crc_tab[6][(lo >> 8) & 0xFFu]
            ^ k714_crc_tab[5][(lo >> 16) & 0xFFu] ^ k714_crc_tab[4][lo >> 24]
            ^ k714_crc_tab[3][hi & 0xFFu] ^ k714_crc_tab[2][(hi >> 8) & 0xFFu]
            ^ k714_crc_tab[1][(hi >> 16) & 0xFFu] ^ k714_crc_tab[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) crc = k714_crc_tab[0][(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
    return crc;
}

/* ------------------------------------------------------------------ hardware instruction shims */

#if defined(__APPLE__) && defined(__aarch64__) && !defined(__ARM_FEATURE_CRC32)
#include <TargetConditionals.h>
#if defined(TARGET_OS_OSX) && TARGET_OS_OSX
#define K714_ARM_ALWAYS_CRC 1                  /* macOS on arm64: Apple M1 and later, CRC32 always there */
#endif
#endif

#if defined(KIP714_CRC32C_NO_HW)
/* tables only */

#elif (defined(__x86_64__) || defined(__amd64__)) && (defined(__GNUC__) || defined(__clang__)) \
    && !defined(_MSC_VER)
#define K714_CRC_HW_X86 1
#include <nmmintrin.h>
#if defined(__APPLE__) || defined(KIP714_CRC32C_CPUID)
#include <cpuid.h>
#define K714_X86_DETECT_CPUID_H 1
#else
#define K714_X86_DETECT_BUILTIN 1
#endif
#define K714_HW_FN __attribute__((target("sse4.2")))
/* the 64-bit form keeps its accumulator in a 64-bit register: no zero-extension inside the loops */
typedef uint64_t k714_hwacc_t;
#define K714_HW_U64(c, v) _mm_crc32_u64((c), (v))
#define K714_HW_U32(c, v) _mm_crc32_u32((c), (v))
#define K714_HW_U8(c, v) _mm_crc32_u8((c), (v))

#elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_AMD64)) && !defined(_M_ARM64EC)
/* MSVC x64 (C mode) and clang-cl. ARM64EC code also defines _M_X64: it keeps the tables. */
#define K714_CRC_HW_X86 1
#define K714_X86_DETECT_MSVC 1
#include <intrin.h>
#include <nmmintrin.h>
#if defined(__clang__)
#define K714_HW_FN __attribute__((target("sse4.2")))   /* clang-cl gates the intrinsics on the feature */
#else
#define K714_HW_FN                                     /* MSVC allows any intrinsic without /arch */
#endif
typedef uint64_t k714_hwacc_t;                         /* unsigned __int64, as _mm_crc32_u64 takes */
#define K714_HW_U64(c, v) _mm_crc32_u64((c), (v))
#define K714_HW_U32(c, v) _mm_crc32_u32((c), (v))
#define K714_HW_U8(c, v) _mm_crc32_u8((c), (v))

#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__)) \
    && (defined(__ARM_FEATURE_CRC32) || defined(K714_ARM_ALWAYS_CRC) || defined(__linux__))
#define K714_CRC_HW_ARM 1
#if defined(__ARM_FEATURE_CRC32)
#define K714_HW_FN                             /* the whole translation unit already targets +crc */
#define K714_ARM_NEEDS_HWCAP 0
#else
#if defined(__clang__)
#define K714_HW_FN __attribute__((target("crc")))
#else
#define K714_HW_FN __attribute__((target("+crc")))
#endif
#if defined(K714_ARM_ALWAYS_CRC)
#define K714_ARM_NEEDS_HWCAP 0
#else
#define K714_ARM_NEEDS_HWCAP 1
#endif
#endif
typedef uint32_t k714_hwacc_t;
#if defined(__clang__)
#define K714_HW_U64(c, v) __builtin_arm_crc32cd((c), (v))
#define K714_HW_U32(c, v) __builtin_arm_crc32cw((c), (v))
#define K714_HW_U8(c, v) __builtin_arm_crc32cb((c), (v))
#else
#define K714_HW_U64(c, v) __builtin_aarch64_crc32cx((c), (v))
#define K714_HW_U32(c, v) __builtin_aarch64_crc32cw((c), (v))
#define K714_HW_U8(c, v) __builtin_aarch64_crc32cb((c), (v))
#endif
#if K714_ARM_NEEDS_HWCAP
#include <sys/auxv.h>                          /* getauxval: glibc 2.16+, musl 1.1+ */
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)                   /* arch/arm64/include/uapi/asm/hwcap.h */
#endif
#endif
#endif

#if defined(K714_CRC_HW_X86) || defined(K714_CRC_HW_ARM)
#define K714_CRC_HAVE_HW 1

/* ----------------------------------------- GF(2) helpers for joining the 3-way streams */

/* a * b modulo the CRC polynomial, in the reflected representation (bit 31 is x^0). */
static uint32_t k714_crc_mulmod(uint32_t a, uint32_t b) {
    uint32_t m = 1u << 31, prod = 0;
    while (m) {
        if (a & m) prod ^= b;
        b = (b & 1u) ? (b >> 1) ^ K714_CRC32C_POLY : b >> 1;
        m >>= 1;
    }
    return prod;
}

/* x^(8 * nbytes) modulo the polynomial: the operator that appends nbytes zero bytes. */
static uint32_t k714_crc_zeros_op(size_t nbytes) {
    uint32_t result = 1u << 31;                 /* x^0 */
    uint32_t base = 1u << (31 - 8);             /* x^8 */
    while (nbytes) {
        if (nbytes & 1u) result = k714_crc_mulmod(result, base);
        base = k714_crc_mulmod(base, base);
        nbytes >>= 1;
    }
    return result;
}

/* table[k][i] = (i << 8k) * op, so shifting a register is four lookups */
static void k714_crc_build_shift(uint32_t table[4][256], size_t nbytes) {
    uint32_t op = k714_crc_zeros_op(nbytes);
    uint32_t i, k;
    for (k = 0; k < 4; k++)
        for (i = 0; i < 256; i++)
            table[k][i] = k714_crc_mulmod(op, i << (8 * k));
}

static inline uint32_t k714_crc_shift(const uint32_t table[4][256], uint32_t crc) {
    return table[0][crc & 0xFFu] ^ table[1][(crc >> 8) & 0xFFu]
         ^ table[2][(crc >> 16) & 0xFFu] ^ table[3][crc >> 24];
}

#define K714_CRC_LONG 8192      /* bytes per stream in the big 3-way blocks */
#define K714_CRC_MID 256        /* ... in the middle ones */
#define K714_CRC_SHORT 64       /* ... in the small ones (inputs from 192 bytes, e.g. SubscriptionId text) */


static uint32_t k714_crc_shift_long[4][256];
static uint32_t k714_crc_shift_mid[4][256];
static uint32_t k714_crc_shift_short[4][256];

/* one stream, 8 bytes per instruction; unaligned loads are fine on both architectures */
K714_HW_FN static inline uint32_t k714_crc32c_hw1(uint32_t crc32, const unsigned char *p, size_t n) {
    k714_hwacc_t acc = crc32;
    uint32_t crc;
    while (n >= 8) {
        acc = K714_HW_U64(acc, k714_le64(p));
        p += 8;
        n -= 8;
    }
    crc = (uint32_t)acc;
    if (n >= 4) {
        crc = K714_HW_U32(crc, k714_le32(p));
        p += 4;
        n -= 4;
    }
    while (n--) crc = K714_HW_U8(crc, *p++);
    return crc;
}

/* three streams of `block` bytes each, joined as crc(ABC) = shift(shift(crc(A)) ^ crc(B)) ^ crc(C) */
K714_HW_FN static inline uint32_t k714_crc32c_hw3(uint32_t crc, const unsigned char *p, size_t block,
                                                   const uint32_t shift[4][256]) {
    k714_hwacc_t c0 = crc, c1 = 0, c2 = 0;
    const unsigned char *end = p + block;
    uint32_t joined;
    while (p < end) {
        c0 = K714_HW_U64(c0, k714_le64(p));
        c1 = K714_HW_U64(c1, k714_le64(p + block));
        c2 = K714_HW_U64(c2, k714_le64(p + 2 * block));
        p += 8;
    }
    joined = k714_crc_shift(shift, (uint32_t)c0) ^ (uint32_t)c1;
    return k714_crc_shift(shift, joined) ^ (uint32_t)c2;
}

K714_HW_FN static uint32_t k714_crc32c_hw_update(uint32_t crc, const unsigned char *p, size_t n) {
    while (n >= 3 * (size_t)K714_CRC_LONG) {
        crc = k714_crc32c_hw3(crc, p, K714_CRC_LONG, (const uint32_t (*)[256])k714_crc_shift_long);
        p += 3 * K714_CRC_LONG;
        n -= 3 * K714_CRC_LONG;
    }
    while (n >= 3 * (size_t)K714_CRC_MID) {
        crc = k714_crc32c_hw3(crc, p, K714_CRC_MID, (const uint32_t (*)[256])k714_crc_shift_mid);
        p += 3 * K714_CRC_MID;
        n -= 3 * K714_CRC_MID;
    }
    while (n >= 3 * (size_t)K714_CRC_SHORT) {
        crc = k714_crc32c_hw3(crc, p, K714_CRC_SHORT, (const uint32_t (*)[256])k714_crc_shift_short);
        p += 3 * K714_CRC_SHORT;
        n -= 3 * K714_CRC_SHORT;
    }
    return k714_crc32c_hw1(crc, p, n);
}

static int k714_crc_cpu_has_hw(void) {
#if defined(K714_X86_DETECT_BUILTIN)
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") ? 1 : 0;
#elif defined(K714_X86_DETECT_CPUID_H)
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    return (ecx & (1u << 20)) ? 1 : 0;         /* CPUID.01H:ECX bit 20 = SSE4.2 */
#elif defined(K714_X86_DETECT_MSVC)
    int regs[4];                               /* EAX, EBX, ECX, EDX */
    __cpuid(regs, 0);
    if (regs[0] < 1) return 0;                 /* leaf 1 not available */
    __cpuid(regs, 1);
    return (regs[2] & (1 << 20)) ? 1 : 0;      /* CPUID.01H:ECX bit 20 = SSE4.2 */
#elif K714_ARM_NEEDS_HWCAP
    return (getauxval(AT_HWCAP) & HWCAP_CRC32) ? 1 : 0;
#else
    return 1;
#endif
}
#endif /* hardware */

/* ------------------------------------------------------------------------------------ public */

/* Call once before anything else. Setting KIP714_CRC32C_SOFTWARE=1 in the environment forces the tables. */
static void k714_crc32c_init(void) {
    const char *force_sw = getenv("KIP714_CRC32C_SOFTWARE");
    k714_crc_build_tables();
#if defined(K714_CRC_HAVE_HW)
    k714_crc_build_shift(k714_crc_shift_long, K714_CRC_LONG);
    k714_crc_build_shift(k714_crc_shift_mid, K714_CRC_MID);
    k714_crc_build_shift(k714_crc_shift_short, K714_CRC_SHORT);
    k714_crc_hw_active = k714_crc_cpu_has_hw();
    if (force_sw != NULL && force_sw[0] != '\0' && strcmp(force_sw, "0") != 0) k714_crc_hw_active = 0;
#else
    (void)force_sw;
    k714_crc_hw_active = 0;
#endif
}

/* Raw-register update through the selected path (no pre/post inversion). */
static inline uint32_t k714_crc32c_update(uint32_t crc, const unsigned char *p, size_t n) {
#if defined(K714_CRC_HAVE_HW)
    if (k714_crc_hw_active) return k714_crc32c_hw_update(crc, p, n);
#endif
    return k714_crc32c_sw_update(crc, p, n);
}

/* Continue the finished CRC `value` (0 to start) over n bytes; returns the finished CRC. */
static inline uint32_t k714_crc32c(uint32_t value, const unsigned char *p, size_t n) {
    return ~k714_crc32c_update(~value, p, n);
}

/* The same through the tables only, whatever the CPU. */
static inline uint32_t k714_crc32c_software(uint32_t value, const unsigned char *p, size_t n) {
    return ~k714_crc32c_sw_update(~value, p, n);
}

static inline int k714_crc32c_hw_enabled(void) { return k714_crc_hw_active; }

#endif /* KIP714_CRC32C_IMPL_H */
