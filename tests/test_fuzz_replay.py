"""Deterministic replay of the fuzz corpus (fuzz/corpus/TARGET/*) through the fuzz targets.

Seeds come from the real captures (``fuzz/make_corpus.py``); ``regress-*`` files are inputs that once
found a bug and must keep passing. A short, seeded mutation pass over the seeds adds a little fresh
input on every run. Inputs a fuzzing run leaves in ``fuzz/findings/`` (``TARGET-crash-<sha1>``, or a
reproducer filed there) are replayed with the corpus, and fail until the bug is fixed; then the file
moves into ``fuzz/corpus/TARGET/regress-<what>``. The long, coverage-guided runs are ``make fuzz`` (see
fuzz/README.md).
"""

from __future__ import annotations

import pathlib
import random
import sys

import pytest

FUZZ = pathlib.Path(__file__).resolve().parents[1] / "fuzz"
if not (FUZZ / "targets.py").exists():  # e.g. cibuildwheel copies only tests/ next to the wheel
    pytest.skip("fuzz/ is not next to tests/", allow_module_level=True)
sys.path.insert(0, str(FUZZ))

import targets  # noqa: E402

pytestmark = pytest.mark.usefixtures("quiet_kip714_logs")  # the server logs each bad frame it drops


def _corpus() -> dict[str, list[pathlib.Path]]:
    """Every committed corpus input and every open finding (a file's target is its name before the first
    ``-``), by target."""
    by_target: dict[str, list[pathlib.Path]] = {}
    for name in targets.TARGETS:
        d = FUZZ / "corpus" / name
        if d.is_dir():
            by_target[name] = sorted(d.iterdir())
    findings = FUZZ / "findings"
    for path in sorted(findings.iterdir()) if findings.is_dir() else ():
        name = path.name.split("-")[0]
        if path.is_file() and path.suffix != ".md" and name in targets.TARGETS:
            by_target.setdefault(name, []).append(path)
    return {name: paths for name, paths in by_target.items() if paths}


def test_every_target_has_a_seed_corpus():
    for name in targets.TARGETS:
        files = list((FUZZ / "corpus" / name).glob("seed-*"))
        assert files, f"fuzz/corpus/{name} has no seeds (run fuzz/make_corpus.py)"


#: Every committed corpus input (and open finding), by target. Never an empty parameter set, which pytest
#: would only skip: without a corpus the one parameter is a failure that says so.
CORPUS = _corpus()


@pytest.mark.parametrize("target", list(CORPUS) or [None])
def test_corpus_inputs(target):
    """Each input of ``target``'s corpus (and its open findings) through the harness: the failures are listed
    by file. One test per target, not per input: the ~2 000 inputs take milliseconds, pytest's own work per
    test took seconds (a worker that crashes names the target; ``fuzz/run.py --replay TARGET`` then replays
    its inputs one by one)."""
    assert target is not None, "fuzz/corpus/ has no inputs (it is committed; run fuzz/make_corpus.py for the seeds)"
    failed = []
    for path in CORPUS[target]:
        try:
            targets.TARGETS[target](path.read_bytes())
        except Exception as exc:  # every failing input is listed, with what it raised
            failed.append(f"{path.relative_to(FUZZ)}: {exc!r}")
    assert not failed, f"{len(failed)} of {len(CORPUS[target])} inputs failed:\n" + "\n".join(failed)


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(5)
        if op == 0 and b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op == 1 and b:
            b[rng.randrange(len(b))] = rng.choice((0, 0x7F, 0x80, 0xFF))
        elif op == 2:
            del b[rng.randrange(len(b) + 1) :]
        elif op == 3 and b:
            i = rng.randrange(len(b))
            b[i:i] = bytes(rng.choice((b"\xff\xff\xff\xff\x0f", b"\x7f\xff\xff\xff", b"\x00" * 4)))
        elif b:
            i, j = sorted(rng.randrange(len(b)) for _ in range(2))
            b[i:i] = b[i:j]
    return bytes(b)


@pytest.mark.parametrize("target", list(targets.TARGETS))
def test_seeded_mutations(target):
    rng = random.Random(f"kip714-{target}")
    seeds = sorted((FUZZ / "corpus" / target).glob("seed-*"))
    rounds = 40 if target in ("stream", "config") else 300
    for _ in range(rounds):
        data = _mutate(rng, rng.choice(seeds).read_bytes())
        try:
            targets.TARGETS[target](data)
        except BaseException as exc:
            raise AssertionError(f"{target} failed on mutated input {data.hex()}") from exc
