#!/usr/bin/env bash
# Cross-compile checks of the Cython core for the wheel targets this machine cannot build natively
# (see "Portability" in wheels/README.md). It installs nothing: each check runs when its tools are
# there and is reported as SKIP otherwise.
#
#   wheels/cross_check.sh          all available checks; exit 1 if any FAILs, 0 otherwise
#
# Checks (Debian package names of the tools in brackets):
#   aarch64 Linux  every src/_native/*.c compiled with aarch64-linux-gnu-gcc -O2 [gcc-aarch64-linux-gnu]
#                  and clang --target=aarch64-linux-gnu [clang, lld]; _crc.o must hold crc32c instructions;
#                  the CRC32C self-test built static and run under qemu-aarch64 [qemu-user]: hardware path,
#                  forced tables, and a kernel that reports no CRC32 (getauxval(AT_HWCAP) = 0)
#   musl           every .c compiled with musl-gcc; the self-test linked against musl and run [musl-tools]
#   Windows x64    every .c compiled by clang in MSVC mode (--target=x86_64-pc-windows-msvc, no
#                  __STDC_VERSION__ like cl's default C mode, GNU extensions and VLAs as warnings) and by
#                  x86_64-w64-mingw32-gcc (LLP64) [mingw-w64], both against mingw-w64's CRT headers and a
#                  stand-in Windows pyconfig.h written below; _crc must hold crc32 + cpuid (MSVC branch)
#   macOS          crc32c_impl.h alone (no SDK here: libc stubbed) for arm64 (default CPU, and apple-a7,
#                  which lacks __ARM_FEATURE_CRC32) and x86_64 (CPUID detection, no ___cpu_model)
#   x86-64 host    the CRC32C self-test with gcc/clang, __builtin_cpu_supports and <cpuid.h> detection
#   Python 3.10-3.13  the checks above use the venv's Python headers; the headers of every other
#                  interpreter in $PYTHONS (default: each python3.1x on PATH) get an aarch64 gcc
#                  -fsyntax-only pass (the 3.13 branch of k714_uuid_int_be compiles only against 3.13)
# The generated C must be current: run `make build` first (it cythonizes src/_native/*.pyx).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PY:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=python3
NATIVE=$ROOT/src/_native
# every extension folder and common/ on the include path (the headers sit next to their .pyx)
NATIVE_INC=()
for d in "$NATIVE"/*/; do NATIVE_INC+=("-I${d%/}"); done
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

have() { command -v "$1" >/dev/null 2>&1; }
missing=()
have aarch64-linux-gnu-gcc || missing+=("gcc-aarch64-linux-gnu")
have musl-gcc || missing+=("musl-tools")
have x86_64-w64-mingw32-gcc || missing+=("mingw-w64")
have clang || missing+=("clang")
have qemu-aarch64 || have qemu-aarch64-static || missing+=("qemu-user")
have ld.lld || missing+=("lld")
if ! have aarch64-linux-gnu-gcc && ! have musl-gcc && ! have x86_64-w64-mingw32-gcc && ! have clang; then
    echo "skipped: no cross compilers here (apt-get install ${missing[*]})"
    exit 0
fi
[ ${#missing[@]} -eq 0 ] || echo "missing (those checks are skipped): ${missing[*]}"
QEMU=$(command -v qemu-aarch64 || command -v qemu-aarch64-static || true)
OBJDUMP=$(command -v llvm-objdump || ls /usr/lib/llvm-*/bin/llvm-objdump 2>/dev/null | tail -1 || true)

# --- the generated C must exist and be newer than every Cython source
CFILES=()
for pyx in "$NATIVE"/*/_*.pyx; do
    c=${pyx%.pyx}.c
    if [ ! -f "$c" ]; then echo "$c is missing: run \`make build\` first"; exit 2; fi
    # its sources: the .pyx, the .pxi files it includes and the local .pxd files it cimports
    deps=("$pyx")
    for inc in $(sed -n 's/^include "\(.*\)"/\1/p' "$pyx"); do deps+=("$(dirname "$pyx")/$inc"); done
    for pxd in "$NATIVE"/common/*.pxd; do
        if grep -qE "^(from|cimport) $(basename "$pxd" .pxd)\b" "$pyx"; then deps+=("$pxd"); fi
    done
    for src in "${deps[@]}"; do
        if [ "$src" -nt "$c" ]; then echo "$c is older than $src: run \`make build\` first"; exit 2; fi
    done
    CFILES+=("$c")
done

PYINC=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
PYVER=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
OTHER_INC=()
# other interpreters whose headers to check: PYTHONS="/path/python3.10 ..." or every python3.1x on PATH
for exe in ${PYTHONS:-python3.10 python3.11 python3.12 python3.13}; do
    info=$("$exe" -c 'import sys, sysconfig; print("%d.%d" % sys.version_info[:2], sysconfig.get_paths()["include"])' \
        2>/dev/null) || continue
    v=${info%% *}
    inc=${info#* }
    [ "$v" != "$PYVER" ] && [ -f "$inc/Python.h" ] && OTHER_INC+=("$v:$inc")
done
echo "generated C: ${#CFILES[@]} files; Python headers: $PYVER ($PYINC)${OTHER_INC:+ + ${OTHER_INC[*]%%:*}}"

results=()
pass() { results+=("PASS  $1"); }
fail() { results+=("FAIL  $1"); }
skip() { results+=("SKIP  $1"); }

# compile_all NAME OUTDIR EXT COMPILER [FLAGS...]: every generated .c, $JOBS at a time, a log per file
compile_all() {
    local name=$1 out=$2 ext=$3 f warnings
    shift 3
    mkdir -p "$out"
    printf '%s\n' "${CFILES[@]}" | OUT=$out EXT=$ext xargs -P "$JOBS" -I{} sh -c '
        f=$1; shift; b=$(basename "$f" .c)
        "$@" "$f" -o "$OUT/$b.$EXT" >"$OUT/$b.log" 2>&1 || echo "$b" >>"$OUT/FAILED"' sh {} "$@"
    if [ -f "$out/FAILED" ]; then
        fail "$name: $(tr '\n' ' ' <"$out/FAILED")did not compile (errors above)"
        for f in $(cat "$out/FAILED"); do grep -m5 'error' "$out/$f.log" || true; done
        return 1
    fi
    warnings=$(cat "$out"/*.log | grep -c 'warning:' || true)
    pass "$name: ${#CFILES[@]} files, $warnings warnings"
}

# build NAME COMPILER [ARGS...]: compile a self-test binary; a failure is recorded and returns 1
build() {
    local name=$1
    shift
    if "$@" >"$WORK/build.log" 2>&1; then return 0; fi
    fail "$name: the self-test does not build: $(grep -m3 error "$WORK/build.log" | tr '\n' ' ')"
    return 1
}

# --- the CRC32C self-test (known vectors, then the selected path against the tables)
cat >"$WORK/crc_selftest.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(K714_TEST_NO_HWCAP)
/* a kernel that reports no CRC32: getauxval(AT_HWCAP) = 0, so the tables must be chosen */
#define getauxval k714_test_getauxval
#endif
#include "crc32c_impl.h"
#if defined(K714_TEST_NO_HWCAP)
unsigned long k714_test_getauxval(unsigned long type) { (void)type; return 0; }
#endif

static int failures = 0;

static void expect(const char *what, uint32_t got, uint32_t want) {
    if (got != want) {
        printf("FAIL %s: got %08x, want %08x\n", what, (unsigned)got, (unsigned)want);
        failures++;
    }
}

int main(int argc, char **argv) {
    static unsigned char buf[2 * 3 * 8192 + 4096];
    static const size_t sizes[] = {191, 192, 193, 767, 768, 769, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 1,
                                   3 * 8192 + 3 * 256 + 3 * 64 + 7, 2 * 3 * 8192, sizeof buf - 7};
    unsigned char v[32];
    uint32_t seed = 12345u, a, b;
    size_t i, len, off;
    const char *want = argc > 1 ? argv[1] : "any";

    k714_crc32c_init();
    printf("hardware path: %s\n", k714_crc32c_hw_enabled() ? "yes" : "no");
    if ((strcmp(want, "hw") == 0 && !k714_crc32c_hw_enabled()) || (strcmp(want, "sw") == 0 && k714_crc32c_hw_enabled())) {
        printf("FAIL: expected the %s path\n", want);
        failures++;
    }
    /* the CRC catalogue's check value and the iSCSI vectors of RFC 3720, B.4 */
    expect("123456789", k714_crc32c(0, (const unsigned char *)"123456789", 9), 0xE3069283u);
    memset(v, 0, 32);
    expect("32 x 00", k714_crc32c(0, v, 32), 0x8A9136AAu);
    memset(v, 0xFF, 32);
    expect("32 x FF", k714_crc32c(0, v, 32), 0x62A8AB43u);
    for (i = 0; i < 32; i++) v[i] = (unsigned char)i;
    expect("00..1F", k714_crc32c(0, v, 32), 0x46DD794Eu);
    for (i = 0; i < 32; i++) v[i] = (unsigned char)(31 - i);
    expect("1F..00", k714_crc32c(0, v, 32), 0x113FDB5Cu);
    expect("empty", k714_crc32c(0, v, 0), 0u);
    expect("continued", k714_crc32c(k714_crc32c(0, (const unsigned char *)"1234", 4),
                                    (const unsigned char *)"56789", 5), 0xE3069283u);
    for (i = 0; i < sizeof buf; i++) {
        seed = seed * 1103515245u + 12345u;
        buf[i] = (unsigned char)(seed >> 16);
    }
    /* every length up to 1 KiB at every alignment, then lengths around the 3-way block sizes */
    for (len = 0; len <= 1024; len++)
        for (off = 0; off < 8; off++) {
            a = k714_crc32c(0x1234567u, buf + off, len);
            b = k714_crc32c_software(0x1234567u, buf + off, len);
            if (a != b) { printf("FAIL len %zu off %zu\n", len, off); failures++; }
        }
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (off = 0; off < 8; off += 3) {
            len = sizes[i];
            if (len + off > sizeof buf) continue;
            a = k714_crc32c(0, buf + off, len);
            b = k714_crc32c_software(0, buf + off, len);
            if (a != b) { printf("FAIL len %zu off %zu\n", len, off); failures++; }
        }
    printf("%s\n", failures ? "FAILED" : "all CRC32C checks passed");
    return failures ? 1 : 0;
}
EOF

# selftest NAME EXPECT(hw|sw|any) RUNNER... BINARY [ENV=...]
selftest() {
    local name=$1 want=$2 bin=$3
    shift 3
    local out
    if out=$(env "$@" $bin "$want" 2>&1); then
        pass "$name: $(echo "$out" | head -1)"
    else
        fail "$name: $(echo "$out" | tr '\n' ' ' | cut -c1-300)"
    fi
}

# ====================================================================================== aarch64 Linux
if have aarch64-linux-gnu-gcc; then
    if compile_all "aarch64 gcc -O2 (Python $PYVER)" "$WORK/a64" o aarch64-linux-gnu-gcc -c -O2 -Wall \
            -Wno-unused-function -fPIC -I"$PYINC" "${NATIVE_INC[@]}"; then
        n=$(aarch64-linux-gnu-objdump -d "$WORK/a64/_crc.o" | grep -cE '\scrc32c[bhwx]\s' || true)
        if [ "$n" -gt 0 ]; then pass "aarch64 gcc: _crc.o has $n crc32c instructions (ARMv8 CRC path selected)"
        else fail "aarch64 gcc: _crc.o has no crc32c instruction (tables only)"; fi
    fi
    for entry in "${OTHER_INC[@]}"; do
        compile_all "aarch64 gcc -fsyntax-only (Python ${entry%%:*})" "$WORK/a64-${entry%%:*}" o \
            aarch64-linux-gnu-gcc -fsyntax-only -Wall -Wno-unused-function -I"${entry#*:}" "${NATIVE_INC[@]}" || true
    done
    if [ -z "$QEMU" ]; then
        skip "qemu-aarch64 self-test: no qemu-aarch64 (qemu-user)"
    elif build "aarch64 gcc self-test" aarch64-linux-gnu-gcc -O2 -Wall -Wextra -static "${NATIVE_INC[@]}" \
            "$WORK/crc_selftest.c" -o "$WORK/t_a64" \
        && build "aarch64 gcc self-test" aarch64-linux-gnu-gcc -O2 -Wall -Wextra -static -DK714_TEST_NO_HWCAP \
            "${NATIVE_INC[@]}" "$WORK/crc_selftest.c" -o "$WORK/t_a64_nohwcap"; then
        selftest "qemu-aarch64 self-test (gcc)" hw "$QEMU $WORK/t_a64"
        selftest "qemu-aarch64 self-test (gcc), KIP714_CRC32C_SOFTWARE=1" sw "$QEMU $WORK/t_a64" KIP714_CRC32C_SOFTWARE=1
        selftest "qemu-aarch64 self-test (gcc), AT_HWCAP without CRC32" sw "$QEMU $WORK/t_a64_nohwcap"
    fi
else
    skip "aarch64 gcc: no aarch64-linux-gnu-gcc (gcc-aarch64-linux-gnu)"
fi

A64_SYSROOT=/usr/aarch64-linux-gnu
if have clang && [ -d "$A64_SYSROOT/include" ]; then
    if compile_all "aarch64 clang -O2 (Python $PYVER)" "$WORK/a64c" o clang --target=aarch64-linux-gnu \
            --sysroot="$A64_SYSROOT" -c -O2 -Wall -Wno-unused-function -Wno-unreachable-code -fPIC \
            -I"$PYINC" "${NATIVE_INC[@]}" && [ -n "$OBJDUMP" ]; then
        # llvm-objdump decodes the CRC instructions only when told the feature is there
        n=$("$OBJDUMP" -d --mattr=+crc "$WORK/a64c/_crc.o" | grep -cE '\scrc32c[bhwx]\s' || true)
        if [ "$n" -gt 0 ]; then pass "aarch64 clang: _crc.o has $n crc32c instructions"
        else fail "aarch64 clang: _crc.o has no crc32c instruction"; fi
    fi
    if have ld.lld && [ -n "$QEMU" ] && clang --target=aarch64-linux-gnu --sysroot="$A64_SYSROOT" -fuse-ld=lld \
            -static -O2 -Wall -Wextra "${NATIVE_INC[@]}" "$WORK/crc_selftest.c" -o "$WORK/t_a64_clang" 2>"$WORK/clang-link.log"; then
        selftest "qemu-aarch64 self-test (clang)" hw "$QEMU $WORK/t_a64_clang"
    else
        skip "qemu-aarch64 self-test (clang): needs lld, qemu-user and the aarch64 sysroot"
    fi
else
    skip "aarch64 clang: needs clang and $A64_SYSROOT (libc6-dev-arm64-cross)"
fi

# ============================================================================================== musl
if have musl-gcc; then
    compile_all "musl-gcc -O2 (x86_64, Python $PYVER)" "$WORK/musl" o musl-gcc -c -O2 -Wall \
        -Wno-unused-function -fPIC -I"$PYINC" "${NATIVE_INC[@]}" || true
    if build "musl self-test" musl-gcc -O2 -Wall -Wextra "${NATIVE_INC[@]}" "$WORK/crc_selftest.c" -o "$WORK/t_musl"; then
        selftest "musl self-test" any "$WORK/t_musl"
        selftest "musl self-test, KIP714_CRC32C_SOFTWARE=1" sw "$WORK/t_musl" KIP714_CRC32C_SOFTWARE=1
    fi
else
    skip "musl: no musl-gcc (musl-tools)"
fi

# =========================================================================================== Windows
MINGW_INC=/usr/x86_64-w64-mingw32/include
if [ -d "$MINGW_INC" ]; then
    # Python's Include/ with a stand-in for PC/pyconfig.h: 64-bit Windows (LLP64: long is 32 bits)
    mkdir -p "$WORK/winpy"
    cp -r "$PYINC" "$WORK/winpy/include"
    cat >"$WORK/winpy/include/pyconfig.h" <<'EOF'
#ifndef Py_CONFIG_H
#define Py_CONFIG_H
#include <basetsd.h>
#include <float.h>
#include <limits.h>
#include <stdio.h>
#define MS_WIN32
#define MS_WIN64
#define MS_WINDOWS
#define NT_THREADS
#define WITH_THREAD
#define PLATFORM "win32"
#define COMPILER "[compile check]"
#define LONG_BIT 32
#define WORD_BIT 32
#define SIZEOF_SHORT 2
#define SIZEOF_INT 4
#define SIZEOF_LONG 4
#define SIZEOF_LONG_LONG 8
#define SIZEOF_FLOAT 4
#define SIZEOF_DOUBLE 8
#define SIZEOF_VOID_P 8
#define SIZEOF_SIZE_T 8
#define SIZEOF_TIME_T 8
#define SIZEOF_OFF_T 4
#define SIZEOF_FPOS_T 8
#define SIZEOF_WCHAR_T 2
#define SIZEOF__BOOL 1
#define SIZEOF_HKEY 8
#define HAVE_SSIZE_T 1
#if defined(_MSC_VER) && !defined(_SSIZE_T_DEFINED)
#define _SSIZE_T_DEFINED
typedef __int64 ssize_t;
#endif
#define HAVE_UINTPTR_T 1
#define HAVE_INTPTR_T 1
#define PY_LONG_LONG long long
#define PY_LLONG_MIN LLONG_MIN
#define PY_LLONG_MAX LLONG_MAX
#define PY_ULLONG_MAX ULLONG_MAX
#define Py_ENABLE_SHARED 1
#define MS_COREDLL
#define HAVE_DECLSPEC_DLL
#define HAVE_COPYSIGN 1
#define HAVE_ROUND 1
#define HAVE_HYPOT 1
#define HAVE_DECL_ISINF 1
#define HAVE_DECL_ISNAN 1
#define HAVE_DECL_ISFINITE 1
#define HAVE_WCHAR_H 1
#define HAVE_DYNAMIC_LOADING
#define STDC_HEADERS 1
#define WITH_DOC_STRINGS 1
#define WITH_PYMALLOC 1
#define DOUBLE_IS_LITTLE_ENDIAN_IEEE754 1
#define HAVE_STDARG_PROTOTYPES
#define HAVE_PROTOTYPES
#endif
EOF
    # mingw-w64's headers under clang's MSVC mode: _mingw.h makes __attribute__ a no-op when __GNUC__
    # is absent and puts __declspec(deprecated) after declarators; undo that once it has been read
    cat >"$WORK/winpy/msvc_prelude.h" <<'EOF'
#include <_mingw.h>
#undef __attribute__
#undef __MINGW_ATTRIB_DEPRECATED
#define __MINGW_ATTRIB_DEPRECATED
#undef __MINGW_ATTRIB_DEPRECATED_SEC_WARN
#define __MINGW_ATTRIB_DEPRECATED_SEC_WARN
#undef __MINGW_ATTRIB_DEPRECATED_MSVC2005
#define __MINGW_ATTRIB_DEPRECATED_MSVC2005
#undef __MINGW_ATTRIB_NORETURN
#define __MINGW_ATTRIB_NORETURN
/* clang's <intrin.h> declares MSVC's _setjmp(jmp_buf); mingw's <setjmp.h> has a two-argument one */
#define _INC_SETJMP
typedef struct { unsigned __int64 Part[2]; } __declspec(align(16)) k714_setjmp_float128;
typedef k714_setjmp_float128 jmp_buf[16];
EOF
    if have clang; then
        RES=$(clang -print-resource-dir)/include
        if compile_all "Windows x64, clang MSVC mode -O2 (Python $PYVER headers)" "$WORK/msvc" obj clang \
                --target=x86_64-pc-windows-msvc -fms-compatibility -fms-extensions -U__STDC_VERSION__ \
                -Wno-builtin-macro-redefined -c -O2 -Wall -Wno-unused-function -Wno-unreachable-code \
                -Wno-unused-but-set-variable -Wvla -Wgnu -Wpointer-arith -Wzero-length-array -nostdinc \
                -isystem "$RES" -isystem "$MINGW_INC" -include "$WORK/winpy/msvc_prelude.h" \
                -I"$WORK/winpy/include" "${NATIVE_INC[@]}" && [ -n "$OBJDUMP" ]; then
            dis=$("$OBJDUMP" -d "$WORK/msvc/_crc.obj")
            n=$(echo "$dis" | grep -cE '\scrc32[bwlq]?\s' || true)
            m=$(echo "$dis" | grep -c 'cpuid' || true)
            if [ "$n" -gt 0 ] && [ "$m" -gt 0 ]; then pass "Windows x64 (MSVC branch): _crc.obj has $n crc32 and $m cpuid instructions"
            else fail "Windows x64 (MSVC branch): _crc.obj has $n crc32 / $m cpuid instructions"; fi
        fi
    else
        skip "Windows x64, clang MSVC mode: no clang"
    fi
    if have x86_64-w64-mingw32-gcc; then
        compile_all "Windows x64, MinGW gcc -O2 (LLP64)" "$WORK/mingw" o x86_64-w64-mingw32-gcc -c -O2 -Wall \
            -Wno-unused-function -Wno-maybe-uninitialized -I"$WORK/winpy/include" "${NATIVE_INC[@]}" || true
    fi
else
    skip "Windows: no mingw-w64 CRT headers in $MINGW_INC (mingw-w64)"
fi

# ============================================================================================= macOS
if have clang && [ -n "$OBJDUMP" ]; then
    mkdir -p "$WORK/macstub"
    printf '#pragma once\n#include <stddef.h>\nchar *getenv(const char *);\n' >"$WORK/macstub/stdlib.h"
    printf '#pragma once\n#include <stddef.h>\nint strcmp(const char *, const char *);\nvoid *memcpy(void *, const void *, size_t);\nvoid *memset(void *, int, size_t);\n' >"$WORK/macstub/string.h"
    printf '#pragma once\n#define TARGET_OS_OSX 1\n' >"$WORK/macstub/TargetConditionals.h"
    printf '#include "crc32c_impl.h"\nuint32_t probe(const unsigned char *p, size_t n) { k714_crc32c_init(); return k714_crc32c(0, p, n); }\n' \
        >"$WORK/crc_tu.c"
    RES=$(clang -print-resource-dir)/include
    for spec in "arm64-apple-macos11" "arm64-apple-macos11 -mcpu=apple-a7" "x86_64-apple-macos10.9"; do
        set -- $spec
        tgt=$1
        shift
        o="$WORK/mac_$tgt$*.o"
        if ! clang --target="$tgt" "$@" -ffreestanding -nostdinc -isystem "$RES" -isystem "$WORK/macstub" -O2 -Wall \
                -Wextra "${NATIVE_INC[@]}" -c "$WORK/crc_tu.c" -o "$o" 2>"$WORK/mac.log"; then
            fail "macOS $spec: crc32c_impl.h does not compile: $(head -3 "$WORK/mac.log" | tr '\n' ' ')"
            continue
        fi
        case $tgt in arm64*) dis=$("$OBJDUMP" -d --mattr=+crc "$o") ;; *) dis=$("$OBJDUMP" -d "$o") ;; esac
        und=$("$OBJDUMP" -t "$o" | grep -c 'cpu_model\|getauxval' || true)
        case $tgt in
        arm64*) n=$(echo "$dis" | grep -cE '\scrc32c[bhwx]\s' || true) ;;
        *) n=$(echo "$dis" | grep -cE '\scrc32[bwlq]?\s' || true)
           [ "$(echo "$dis" | grep -c cpuid || true)" -gt 0 ] || n=0 ;;
        esac
        if [ "$n" -gt 0 ] && [ "$und" -eq 0 ]; then pass "macOS $spec (crc32c_impl.h only): $n CRC instructions, no ___cpu_model/getauxval"
        else fail "macOS $spec: $n CRC instructions, $und references to ___cpu_model/getauxval"; fi
    done
else
    skip "macOS: needs clang and llvm-objdump"
fi

# ======================================================================================= x86-64 host
if [ "$(uname -m)" = x86_64 ]; then
    for cc in gcc clang; do
        have $cc || continue
        for detect in builtin cpuid; do
            flags=()
            label="__builtin_cpu_supports"
            if [ $detect = cpuid ]; then flags=(-DKIP714_CRC32C_CPUID); label="<cpuid.h> detection, as on macOS"; fi
            build "host self-test ($cc)" $cc -O2 -Wall -Wextra "${flags[@]}" "${NATIVE_INC[@]}" "$WORK/crc_selftest.c" \
                -o "$WORK/t_host" || continue
            selftest "host self-test ($cc, $label)" any "$WORK/t_host"
        done
    done
fi

echo
printf '%s\n' "${results[@]}"
if printf '%s\n' "${results[@]}" | grep -q '^FAIL'; then
    echo "cross_check: FAILED"
    exit 1
fi
echo "cross_check: $(printf '%s\n' "${results[@]}" | grep -c '^PASS') passed, $(printf '%s\n' "${results[@]}" | grep -c '^SKIP' || true) skipped"
