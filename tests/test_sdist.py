"""The source distribution builds from scratch: sdist → fresh venv → pip install → the native modules load.

Slow (one to two minutes: the Cython core is compiled from the sdist, and pip fetches the build
requirements into an isolated build environment). Skipped when ``KIP714_SKIP_SDIST=1`` (quick local
runs); CI runs it.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import textwrap
import venv

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

sdist_test = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("KIP714_SKIP_SDIST") == "1", reason="KIP714_SKIP_SDIST=1"),
    pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                       reason="needs the git checkout to know which files belong to the project"),
]


def _project_files(root: pathlib.Path) -> list[str]:
    """What a fresh clone holds: tracked files plus new files not ignored by .gitignore."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, check=True,
                         capture_output=True).stdout
    return [p for p in out.decode().split("\0") if p and (root / p).is_file()]


def _copy_tree(root: pathlib.Path, dest: pathlib.Path) -> None:
    for rel in _project_files(root):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)


def _run(cmd, cwd, timeout, env=None):
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc


def build_sdist(src: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """``python -m build --sdist`` when the build frontend is installed, else ``setup.py sdist``."""
    has_build = subprocess.run([sys.executable, "-c", "import build.__main__"], cwd=out.parent,
                               capture_output=True).returncode == 0
    if has_build:
        cmd = [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(out), str(src)]
    else:
        cmd = [sys.executable, "setup.py", "-q", "sdist", "--dist-dir", str(out)]
    _run(cmd, src, 300)
    (sdist,) = out.glob("kip714-*.tar.gz")
    return sdist


def sdist_problems(sdist: pathlib.Path, src: pathlib.Path) -> list[str]:
    """Files a from-scratch build (or the test suite) needs that the sdist does not carry."""
    with tarfile.open(sdist) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    wanted = [p.relative_to(src).as_posix() for p in (src / "src" / "_native").iterdir()
              if p.suffix in (".pyx", ".pxd", ".pxi", ".h")]
    wanted += ["LICENSE", "README.md", "pyproject.toml", "setup.py", "src/kip714/py.typed"]
    wanted += [p.relative_to(src).as_posix() for p in (src / "src" / "kip714").glob("*.pyi")]
    wanted += [p.relative_to(src).as_posix() for p in (src / "src" / "kip714" / "samples").glob("*.bin")]
    wanted += [p.relative_to(src).as_posix() for p in (src / "tests" / "data").rglob("*") if p.is_file()]
    if (src / "CHANGELOG.md").exists():
        wanted.append("CHANGELOG.md")
    missing = sorted(set(wanted) - names)
    problems = [f"missing from the sdist: {m}" for m in missing]
    stale = sorted(n for n in names if n.startswith("src/_native/") and n.endswith(".c"))
    problems += [f"generated file in the sdist (built from the .pyx instead): {n}" for n in stale]
    return problems


_SMOKE = textwrap.dedent("""
    import importlib, importlib.machinery, json, pathlib, sys
    import kip714
    here = pathlib.Path(kip714.__file__).resolve().parent
    out = {"file": str(here), "version": kip714.__version__, "modules": {}}
    for name in sys.argv[1].split(","):
        mod = importlib.import_module("kip714." + name)
        out["modules"][name] = (mod.__file__, isinstance(mod.__loader__, importlib.machinery.ExtensionFileLoader))
    frame = (here / "samples" / "producer_zstd_push_01_zstd.bin").read_bytes()
    push = kip714.decode_request(frame[4:]).body
    otlp = kip714.decompress(push.metrics, push.compression_type, 1 << 20)
    out["otlp_bytes"] = len(otlp)
    out["crc"] = kip714.crc32c(b"123456789")
    print(json.dumps(out))
""")


@sdist_test[0]
@sdist_test[1]
@sdist_test[2]
def test_sdist_builds_installs_and_loads_the_native_core(tmp_path):
    check_sdist_from_scratch(ROOT, tmp_path)


def check_sdist_from_scratch(root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    src = tmp_path / "src"
    _copy_tree(root, src)
    sdist = build_sdist(src, tmp_path / "dist")
    problems = sdist_problems(sdist, src)

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    py = env_dir / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONNOUSERSITE="1")
    env.pop("PYTHONPATH", None)
    _run([py, "-m", "pip", "install", "--quiet", str(sdist)], tmp_path, 600, env)

    natives = sorted(p.stem for p in (src / "src" / "_native").glob("*.pyx"))
    proc = subprocess.run([py, "-c", _SMOKE, ",".join(natives)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=env)                           # cwd outside any source tree
    assert proc.returncode == 0, ("the installed sdist does not import:\n" + proc.stderr[-3000:]
                                  + "\nsdist problems:\n" + "\n".join(problems))
    import json

    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert pathlib.Path(info["file"]).is_relative_to(env_dir.resolve()), info["file"]
    for name, (path, is_ext) in info["modules"].items():
        assert is_ext and pathlib.Path(path).is_relative_to(env_dir.resolve()), (name, path)
    assert info["otlp_bytes"] > 0 and info["crc"] == 0xE3069283
    assert not problems, "\n".join(problems)


def test_version_agrees_everywhere():
    """pyproject.toml, kip714.__version__ and the newest CHANGELOG entry name the same version."""
    import re

    import kip714

    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
    declared = m.group(1) if m else None                  # None: dynamic, read from the package
    assert declared in (None, kip714.__version__)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    newest = re.search(r"^## \[?([0-9][^\]\s]*)", changelog, re.M)
    assert newest and newest.group(1) == kip714.__version__, newest
