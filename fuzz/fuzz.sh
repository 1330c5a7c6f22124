#!/usr/bin/env bash
# Coverage-guided fuzzing of kip714 (what `make fuzz` runs).
#
#   fuzz/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      default: 60 s, every target in fuzz/targets.py
#
# The extensions are compiled into a separate copy of the tree (build/fuzz-tree), never in src/kip714:
# with clang they get libFuzzer's edge/compare instrumentation, so libFuzzer sees the Cython code too;
# without clang they are built normally and only the Python code is coverage-guided. Logs go to
# build/fuzz-logs/TARGET.log, new corpus entries to build/fuzz-corpus/TARGET, crashes to fuzz/findings/.
# Exit status 1 when any target found something.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PY:-$ROOT/.venv/bin/python}
PER=${1:-60}
shift || true
if [ $# -gt 0 ]; then TARGETS="$*"; else TARGETS=$("$PY" fuzz/run.py --list); fi
TREE=$ROOT/build/fuzz-tree
LOGS=$ROOT/build/fuzz-logs
mkdir -p "$TREE" "$LOGS"

# 1. a private copy of the sources, built with coverage instrumentation when clang is there
tar --exclude='*.so' --exclude='src/_native/*/*.c' --exclude='__pycache__' -cf - \
    setup.py pyproject.toml README.md LICENSE src | (cd "$TREE" && tar -xf -)
if command -v clang >/dev/null 2>&1; then
    export CC=clang LDSHARED="clang -shared"
    export CFLAGS="-fsanitize-coverage=inline-8bit-counters,pc-table,trace-cmp -g"
    MODE="clang, native coverage"
else
    MODE="no clang: Python coverage only"
fi
for pyx in "$TREE"/src/_native/*/_*.pyx; do
    mod=$(basename "$pyx" .pyx)
    (cd "$TREE" && KIP714_ONLY=$mod "$PY" setup.py --quiet build_ext --inplace --force >"$LOGS/build-$mod.log" 2>&1) \
        || echo "warning: $mod did not build (see $LOGS/build-$mod.log); targets needing it skip or fail"
done
unset CC LDSHARED CFLAGS

# 2. atheris' libFuzzer loaded globally first, so the instrumented extensions find its callbacks
PRELOAD=$("$PY" -c 'import atheris, glob, os; print((glob.glob(os.path.join(os.path.dirname(atheris.__file__), "core_with_libfuzzer*.so")) or [""])[0])')
echo "fuzzing $(echo $TARGETS | wc -w) targets for ${PER}s each ($MODE)"
status=0
for t in $TARGETS; do
    PYTHONPATH="$TREE/src" env ${PRELOAD:+LD_PRELOAD=$PRELOAD} "$PY" fuzz/run.py "$t" --seconds "$PER" \
        >"$LOGS/$t.log" 2>&1
    rc=$?
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$LOGS/$t.log" | grep -o '[0-9]*$')
    cov=$(grep -E '^#[0-9]+' "$LOGS/$t.log" | tail -1 | grep -o 'cov: [0-9]* ft: [0-9]*')
    if [ $rc -ne 0 ]; then
        status=1
        echo "$t: FOUND SOMETHING (exit $rc) after ${runs:-?} runs; see $LOGS/$t.log and fuzz/findings/"
    else
        echo "$t: ${runs:-?} runs in ${PER}s, ${cov:-no coverage line}, no findings"
    fi
done
exit $status
