"""Deterministic replay of the fuzz corpus (fuzz/corpus/TARGET/*) through the fuzz targets.

Seeds come from the real captures (``fuzz/make_corpus.py``); ``regress-*`` files are inputs that once
found a bug and must keep passing. A short, seeded mutation pass over the seeds adds a little fresh
input on every run. Inputs a fuzzing run leaves in ``fuzz/findings/`` (``TARGET-crash-<sha1>``, or a
reproducer filed there) are replayed with the corpus, and fail until the bug is fixed; then the file
moves into ``fuzz/corpus/TARGET/regress-<what>``. The long, coverage-guided runs are ``make fuzz`` (see
fuzz/README.md).
"""

from __future__ import annotations

import logging
import pathlib
import random
import sys

import pytest

FUZZ = pathlib.Path(__file__).resolve().parents[1] / "fuzz"
if not (FUZZ / "targets.py").exists():  # e.g. cibuildwheel copies only tests/ next to the wheel
    pytest.skip("fuzz/ is not next to tests/", allow_module_level=True)
sys.path.insert(0, str(FUZZ))

import targets  # noqa: E402


def _corpus():
    for name in targets.TARGETS:
        d = FUZZ / "corpus" / name
        for path in sorted(d.iterdir()) if d.is_dir() else ():
            yield pytest.param(name, path, id=f"{name}/{path.name}")
    findings = FUZZ / "findings"
    for path in sorted(findings.iterdir()) if findings.is_dir() else ():
        name = path.name.split("-")[0]
        if path.is_file() and path.suffix != ".md" and name in targets.TARGETS:
            yield pytest.param(name, path, id=f"findings/{path.name}")


@pytest.fixture(autouse=True)
def _quiet_server_logs():
    logger = logging.getLogger("kip714")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


def test_every_target_has_a_seed_corpus():
    for name in targets.TARGETS:
        files = list((FUZZ / "corpus" / name).glob("seed-*"))
        assert files, f"fuzz/corpus/{name} has no seeds (run fuzz/make_corpus.py)"


#: Every committed corpus input (and open finding). Never an empty parameter set, which pytest would only
#: skip: without a corpus the one parameter is a failure that says so.
CORPUS = list(_corpus()) or [pytest.param(None, None, id="no-corpus")]


@pytest.mark.parametrize("target,path", CORPUS)
def test_corpus_input(target, path):
    assert path is not None, "fuzz/corpus/ has no inputs (it is committed; run fuzz/make_corpus.py for the seeds)"
    targets.TARGETS[target](path.read_bytes())


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
