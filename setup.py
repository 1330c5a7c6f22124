"""Build the Cython core: every ``src/_native/<folder>/<name>.pyx`` becomes the extension ``kip714.<name>``.

Each extension's folder holds its ``.pyx``, ``.pxi`` and headers; ``src/_native/common/`` holds what they
share (the bounded wire reader ``kbuf.pxd``, byte order in ``kip714_bytes.h``).

Environment switches:
  KIP714_DEBUG=1      -O0 -g, Cython line tracing off but bounds/wraparound checks on
  KIP714_ANNOTATE=1   write Cython's HTML annotation next to each .pyx
  KIP714_SANITIZE=1   build with AddressSanitizer + UndefinedBehaviorSanitizer (see README)
  KIP714_ONLY=a,b     build only these modules

The flags follow the compiler setuptools picks: gcc/clang get -O3 -fno-strict-aliasing (Linux, macOS,
MinGW); MSVC gets /O2 (debug: /Od /Zi), and refuses KIP714_SANITIZE.
"""

from __future__ import annotations

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
    """build_ext that chooses the flags by compiler type (gcc/clang style everywhere but MSVC)."""

    def build_extensions(self) -> None:
        cflags, ldflags = _flags(self.compiler.compiler_type)
        for ext in self.extensions:
            ext.extra_compile_args = cflags + list(ext.extra_compile_args or [])
            ext.extra_link_args = ldflags + list(ext.extra_link_args or [])
        super().build_extensions()


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

setup(
    cmdclass={"build_ext": BuildExt},
    ext_modules=cythonize(
        extensions,
        include_path=[str(COMMON)],
        compiler_directives=directives,
        annotate=os.environ.get("KIP714_ANNOTATE") == "1",
        nthreads=0,
    ),
)
