"""Build the Cython core: every ``src/_native/<folder>/<name>.pyx`` becomes the extension ``kip714.<name>``.

Each extension's folder holds its ``.pyx``, ``.pxi`` and headers; ``src/_native/common/`` holds what they
share (the bounded wire reader ``kbuf.pxd``, byte order in ``kip714_bytes.h``).

Environment switches:
  KIP714_DEBUG=1      -O0 -g, Cython line tracing off but bounds/wraparound checks on
  KIP714_ANNOTATE=1   write Cython's HTML annotation next to each .pyx
  KIP714_SANITIZE=1   build with AddressSanitizer + UndefinedBehaviorSanitizer (see README)
  KIP714_ONLY=a,b     build only these modules (KIP714_ONLY=none: no module; the Makefile's editable install
                      uses it, then compiles them in place, in parallel, with make build)

Modules are cythonized when build_ext runs (an sdist ships the .pyx sources, not C), with build_ext's
``--parallel N`` jobs (``make build`` passes the number of cores), like the C compiles.

The switches take effect on a built tree: build/kip714-switches.json records the switches each module was
last built with (a module without an entry counts as built with none), and a module whose switches differ
is cythonized and compiled again (KIP714_ANNOTATE=1 re-cythonizes a module whose HTML is missing or older
than its .pyx). No `make clean` needed.

The flags follow the compiler setuptools picks: gcc/clang get -O3 -fno-strict-aliasing (Linux, macOS,
MinGW); MSVC gets /O2 (debug: /Od /Zi), and refuses KIP714_SANITIZE.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).parent
NATIVE = Path("src") / "_native"
COMMON = NATIVE / "common"

debug = os.environ.get("KIP714_DEBUG") == "1"
sanitize = os.environ.get("KIP714_SANITIZE") == "1"
annotate = os.environ.get("KIP714_ANNOTATE") == "1"
SWITCHES_FILE = HERE / "build" / "kip714-switches.json"
#: The switches that change a module's C code or compile flags (what a rebuild must follow).
SWITCHES = {"debug": debug, "sanitize": sanitize}
NO_SWITCHES = {"debug": False, "sanitize": False}


def _recorded_switches() -> dict:
    try:
        return json.loads(SWITCHES_FILE.read_text())
    except (OSError, ValueError):
        return {}


def _record_switches(names) -> None:
    recorded = _recorded_switches()
    recorded.update(dict.fromkeys(names, SWITCHES))
    SWITCHES_FILE.parent.mkdir(parents=True, exist_ok=True)
    SWITCHES_FILE.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")


def _flags(compiler_type: str) -> tuple[list[str], list[str]]:
    """Compile and link flags for the compiler setuptools picked (known only once build_ext runs)."""
    if compiler_type == "msvc":
        # MSVC (C mode): /O2 for releases (setuptools adds it too); it has no type-based alias analysis
        # to switch off and no -W names.
        if sanitize:
            raise SystemExit("KIP714_SANITIZE=1 needs gcc or clang (ASan + UBSan with -fsanitize)")
        return (["/Od", "/Zi"], ["/DEBUG"]) if debug else (["/O2"], [])
    # gcc and clang (Linux glibc and musl, macOS, MinGW)
    cflags = ["-O0", "-g"] if debug else ["-O3"]
    cflags += ["-Wno-unreachable-code", "-fno-strict-aliasing"]
    ldflags: list[str] = []
    if sanitize:
        flags = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined"]
        cflags += flags + ["-O1", "-g"]
        ldflags += flags
    return cflags, ldflags


class BuildExt(build_ext):
    """build_ext that cythonizes the modules and chooses the flags by compiler type (gcc/clang style everywhere
    but MSVC)."""

    def run(self) -> None:
        # Cythonize here, when extensions are built (an sdist, which also finalizes build_ext, ships the .pyx
        # sources). Modules built with other switches are cythonized again (force); their new C file makes
        # build_ext compile them again. The others are cythonized only when their sources changed.
        jobs = self.parallel or 0
        recorded = _recorded_switches()
        stale = [e for e in self.extensions if _stale(e, recorded)]
        # Modules cythonized again only for KIP714_ANNOTATE's HTML (built with these switches): Cython writes
        # the same C, so it keeps its time and build_ext does not compile it again (-O3 of _protocol: 28 CPU-s).
        kept = {}
        for ext in stale:
            c_file = (HERE / ext.sources[0]).with_suffix(".c")
            if recorded.get(ext.name, NO_SWITCHES) == SWITCHES and c_file.exists():
                kept[c_file] = (c_file.read_bytes(), c_file.stat().st_mtime_ns)
        made = _cythonize(stale, True, jobs) + _cythonize([e for e in self.extensions if e not in stale], False, jobs)
        for c_file, (code, mtime) in kept.items():
            if c_file.exists() and c_file.read_bytes() == code:
                os.utime(c_file, ns=(mtime, mtime))
        by_name = {e.name: e for e in made}
        for ext in self.extensions:  # the C sources (and Cython's depends) onto the objects build_ext set up
            for key, value in vars(by_name[ext.name]).items():
                if not key.startswith("_"):
                    setattr(ext, key, value)
        super().run()

    def build_extensions(self) -> None:
        cflags, ldflags = _flags(self.compiler.compiler_type)
        for ext in self.extensions:
            ext.extra_compile_args = cflags + list(ext.extra_compile_args or [])
            ext.extra_link_args = ldflags + list(ext.extra_link_args or [])
        super().build_extensions()
        _record_switches(ext.name for ext in self.extensions)


directives = {
    "language_level": "3",
    "boundscheck": debug,
    "wraparound": debug,
    "initializedcheck": debug,
    "cdivision": True,
    "embedsignature": True,
    "freethreading_compatible": False,
}

extensions = [
    Extension(
        f"kip714.{pyx.stem}",
        [str(pyx)],
        include_dirs=[str(pyx.parent.relative_to(HERE)), str(COMMON)],
    )
    for pyx in sorted((HERE / NATIVE).glob("*/_*.pyx"))
    # KIP714_ONLY=_a,_b builds just those modules (handy while iterating on one of them)
    if not os.environ.get("KIP714_ONLY") or pyx.stem in os.environ["KIP714_ONLY"].split(",")
]
for ext in extensions:
    ext.sources = [str(Path(s).relative_to(HERE)) if Path(s).is_absolute() else s for s in ext.sources]


def _stale(ext: Extension, recorded: dict) -> bool:
    """True when ``ext`` was built with other switches (or needs the HTML KIP714_ANNOTATE asks for)."""
    if recorded.get(ext.name, NO_SWITCHES) != SWITCHES:
        return True
    pyx = HERE / ext.sources[0]
    html = pyx.with_suffix(".html")
    return annotate and (not html.exists() or html.stat().st_mtime < pyx.stat().st_mtime)


def _cythonize(exts: list, force: bool, jobs: int) -> list:
    if not exts:
        return []
    return cythonize(
        exts,
        include_path=[str(COMMON)],
        compiler_directives=directives,
        annotate=annotate,
        nthreads=jobs if jobs > 1 else 0,
        force=force,
    )


# the .pyx modules; BuildExt cythonizes them when extensions are built
setup(cmdclass={"build_ext": BuildExt}, ext_modules=extensions)
