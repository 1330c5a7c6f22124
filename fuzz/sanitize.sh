#!/usr/bin/env bash
# ASan + UBSan run of kip714 (what `make sanitize` runs).
#
#   fuzz/sanitize.sh [pytest args...]
#
# 1. Copies the project's files (git ls-files: tracked + new, not ignored) into build/asan-tree and
#    compiles the extensions there with KIP714_SANITIZE=1 (gcc: -fsanitize=address,undefined
#    -fno-sanitize-recover=undefined). src/kip714 is never touched, so other users of the tree keep
#    importing normal builds.
# 2. Runs the test suite of that copy and replays the fuzz corpora (fuzz/corpus, plus build/fuzz-corpus
#    when `make fuzz` made one) with libasan preloaded: the Python interpreter is not ASan-linked, so the
#    ASan runtime must be loaded before anything else (LD_PRELOAD), and leak detection is off because
#    CPython keeps memory until exit by design.
# Any ASan/UBSan report aborts the process, so a clean exit means zero reports.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PY:-$ROOT/.venv/bin/python}
TREE=$ROOT/build/asan-tree
CC=${CC:-gcc}
LIBASAN=$("$CC" -print-file-name=libasan.so)
if [ ! -e "$LIBASAN" ]; then echo "no libasan.so for $CC (install gcc's libasan)"; exit 2; fi

rm -rf "$TREE"
mkdir -p "$TREE"
if git rev-parse --git-dir >/dev/null 2>&1; then
    git ls-files -co --exclude-standard -z | tar --null -T - -cf - | (cd "$TREE" && tar -xf -)
else
    tar --exclude=./build --exclude=./.venv --exclude='*.so' --exclude='./src/_native/*/*.c' -cf - . \
        | (cd "$TREE" && tar -xf -)
fi
echo "building the extensions with ASan + UBSan in $TREE"
(cd "$TREE" && CC=$CC KIP714_SANITIZE=1 "$PY" setup.py --quiet build_ext --inplace)

# libstdc++ is preloaded too: C++ extensions in the dependencies (matplotlib's ft2font, pyarrow) throw
# exceptions, and ASan's __cxa_throw interceptor aborts ("real___cxa_throw != 0") when libstdc++ was
# not loaded before the ASan runtime initialised.
LIBSTDCXX=$("$CC" -print-file-name=libstdc++.so)
export LD_PRELOAD="$LIBASAN${LIBSTDCXX:+ $LIBSTDCXX}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export PYTHONPATH=$TREE/src
export KIP714_SANITIZED=1 KIP714_SKIP_SDIST=1
# the thread stress tests (tests/test_threads.py) run ten times longer here
export KIP714_STRESS_SCALE=${KIP714_STRESS_SCALE:-10}
cd "$TREE"
"$PY" -c 'import kip714._protocol as p, sys; assert p.__file__.startswith(sys.argv[1]), p.__file__' "$TREE"
echo "== test suite under ASan + UBSan"
# tests/test_spark.py is left out: Spark's launcher runs `ps`, which hangs with libasan preloaded, and the
# JVM would run under ASan too. The Python workers it starts run the same decoders the rest of the
# suite (and the corpus replay) already exercise under the sanitizers.
"$PY" -m pytest -q -p no:cacheprovider --ignore=tests/test_spark.py "$@"
echo "== fuzz corpus replay under ASan + UBSan"
"$PY" fuzz/run.py --replay
if [ -d "$ROOT/build/fuzz-corpus" ]; then
    # what `make fuzz` found: replayed for sanitizer reports and the oracles (an open finding's oracle can
    # be switched off with KIP714_FUZZ_TOLERATE=<name>, see fuzz/targets.py)
    "$PY" fuzz/run.py --replay --dir "$ROOT/build/fuzz-corpus"
fi
echo "sanitizers: no reports"
