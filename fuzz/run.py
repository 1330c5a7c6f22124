"""Run one kip714 fuzz target under atheris (libFuzzer), or replay corpora through it without atheris.

    python fuzz/run.py TARGET [--seconds N] [-- extra libFuzzer flags]
    python fuzz/run.py --replay [TARGET ...] [--dir DIR]
    python fuzz/run.py --list
    python fuzz/run.py TARGET --merge DIR     # add DIR's inputs that reach new coverage to fuzz/corpus/TARGET

Corpora: ``fuzz/corpus/TARGET`` holds the committed seeds and regression inputs. New inputs libFuzzer
finds go to ``build/fuzz-corpus/TARGET`` (not committed; merge interesting ones with ``-merge=1``).
Crashes, timeouts and out-of-memory inputs are written as ``fuzz/findings/TARGET-crash-<sha1>``.

Native coverage: libFuzzer only sees the Cython code when the extensions were compiled with clang's
``-fsanitize-coverage=inline-8bit-counters,pc-table,trace-cmp`` (``make fuzz`` builds such a copy in
``build/fuzz-tree``) and atheris' libFuzzer was loaded globally first (``make fuzz`` sets LD_PRELOAD to
``atheris/core_with_libfuzzer*.so``). Without that, only the Python code is coverage-guided.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))


def corpus_files(target: str, extra: list[pathlib.Path] = ()) -> list[pathlib.Path]:
    dirs = [HERE / "corpus" / target, *extra]
    files: list[pathlib.Path] = []
    for d in dirs:
        if d.is_dir():
            files += sorted(p for p in d.iterdir() if p.is_file())
    return files


def replay(names: list[str], extra_dirs: list[pathlib.Path]) -> int:
    import targets

    failures = 0
    for name in names or list(targets.TARGETS):
        fn = targets.TARGETS[name]
        files = corpus_files(name, [d / name for d in extra_dirs])
        started = time.monotonic()
        for path in files:
            try:
                fn(path.read_bytes())
            except BaseException as exc:  # report every failing input, then fail
                failures += 1
                print(f"FAIL {name} {path}: {type(exc).__name__}: {exc}", file=sys.stderr)
        print(f"{name}: {len(files)} inputs replayed in {time.monotonic() - started:.2f}s")
    return 1 if failures else 0


def fuzz(name: str, seconds: int, libfuzzer_args: list[str], merge_from: list[pathlib.Path] = ()) -> None:
    import atheris

    with atheris.instrument_imports(include=["kip714", "targets"]):
        import targets

    fn = targets.TARGETS[name]
    findings = HERE / "findings"
    findings.mkdir(exist_ok=True)
    if merge_from:
        # add to the committed corpus the inputs of merge_from that reach new coverage (libFuzzer -merge=1)
        argv = [
            sys.argv[0],
            "-merge=1",
            str(HERE / "corpus" / name),
            *map(str, merge_from),
            f"-max_len={1 << 20}",
            f"-artifact_prefix={findings}/{name}-",
            "-timeout=20",
        ]
    else:
        work = ROOT / "build" / "fuzz-corpus" / name
        work.mkdir(parents=True, exist_ok=True)
        argv = [
            sys.argv[0],
            str(work),
            str(HERE / "corpus" / name),
            f"-max_len={targets.MAX_LEN[name]}",
            f"-artifact_prefix={findings}/{name}-",
            "-timeout=20",
            "-rss_limit_mb=4096",
            "-print_final_stats=1",
        ]
        if seconds:
            argv.append(f"-max_total_time={seconds}")
    argv += libfuzzer_args

    def one(data: bytes) -> None:
        fn(data)

    atheris.Setup(argv, one, internal_libfuzzer=True)
    atheris.Fuzz()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", nargs="*")
    ap.add_argument("--seconds", type=int, default=60, help="fuzzing time (0: until stopped)")
    ap.add_argument("--replay", action="store_true", help="run corpus files through the targets and exit")
    ap.add_argument(
        "--dir",
        action="append",
        type=pathlib.Path,
        default=[],
        help="with --replay: also replay DIR/TARGET/* (e.g. build/fuzz-corpus)",
    )
    ap.add_argument("--list", action="store_true")
    ap.add_argument(
        "--merge",
        action="append",
        type=pathlib.Path,
        default=[],
        help="merge the inputs of this directory that add coverage into fuzz/corpus/TARGET",
    )
    args, rest = ap.parse_known_args()
    rest = [a for a in rest if a != "--"]
    if args.list:
        import targets

        print("\n".join(targets.TARGETS))
        return 0
    if args.replay:
        return replay(args.target, args.dir)
    if len(args.target) != 1:
        ap.error("give exactly one target to fuzz (or --replay / --list)")
    fuzz(args.target[0], args.seconds, rest, args.merge)
    return 0


if __name__ == "__main__":
    sys.exit(main())
