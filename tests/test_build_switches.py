"""KIP714_DEBUG / KIP714_ANNOTATE / KIP714_ONLY take effect on a built tree, without `make clean`.

The smallest extension (_crc) is built in a private copy of the build files, so the tree under test is
never touched."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads the switches gcc records in the debug info")


@pytest.fixture
def tree(tmp_path):
    for name in ("setup.py", "pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tmp_path / name)
    for folder in ("crc", "common"):
        shutil.copytree(
            ROOT / "src" / "_native" / folder,
            tmp_path / "src" / "_native" / folder,
            ignore=shutil.ignore_patterns("*.c", "*.html"),
        )
    (tmp_path / "src" / "kip714").mkdir()
    (tmp_path / "src" / "kip714" / "__init__.py").write_text('__version__ = "0"\n')
    return tmp_path


def build(tree, **switches) -> pathlib.Path:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KIP714_")}
    env.update({"KIP714_ONLY": "_crc", **switches})
    proc = subprocess.run(
        [sys.executable, "setup.py", "--quiet", "build_ext", "--inplace"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (so,) = (tree / "src" / "kip714").glob("_crc*.so")
    return so


def state(so: pathlib.Path) -> tuple[int, bool]:
    """(mtime, compiled with KIP714_DEBUG's -O0: gcc records its switches in the debug info)."""
    return so.stat().st_mtime_ns, b" -O0" in so.read_bytes()


def test_switches_rebuild_a_built_module_only_when_they_change(tree):
    # a debug build first: of the three compiles, two are KIP714_DEBUG's -O0, which takes half the CPU time of
    # the release flags' -O3 (3.3 against 5.8 CPU-s here); each direction of the switch is still built once
    first = state(build(tree, KIP714_DEBUG="1"))
    assert first[1]
    assert state(build(tree, KIP714_DEBUG="1")) == first  # nothing changed: nothing rebuilt
    release = state(build(tree))
    assert release[0] != first[0] and not release[1]  # the switch (dropped) took effect on the built tree
    assert state(build(tree)) == release  # same switches: no rebuild
    debug = state(build(tree, KIP714_DEBUG="1"))
    assert debug[0] != release[0] and debug[1]  # and back
    html = tree / "src" / "_native" / "crc" / "_crc.html"
    assert not html.exists()
    # the HTML, and the same C: not compiled again
    assert state(build(tree, KIP714_DEBUG="1", KIP714_ANNOTATE="1")) == debug
    assert html.exists()
