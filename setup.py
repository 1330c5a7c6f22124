"""Build the Cython core: every ``src/_native/<name>.pyx`` becomes the extension ``kip714.<name>``.

Environment switches:
  KIP714_DEBUG=1      -O0 -g, Cython line tracing off but bounds/wraparound checks on
  KIP714_ANNOTATE=1   write Cython's HTML annotation next to each .pyx
  KIP714_SANITIZE=1   build with AddressSanitizer + UndefinedBehaviorSanitizer (see README)
  KIP714_ONLY=a,b     build only these modules
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
NATIVE = Path("src") / "_native"

debug = os.environ.get("KIP714_DEBUG") == "1"
sanitize = os.environ.get("KIP714_SANITIZE") == "1"

extra_compile_args: list[str] = []
extra_link_args: list[str] = []
if sys.platform != "win32":
    extra_compile_args += ["-O0", "-g"] if debug else ["-O3"]
    extra_compile_args += ["-Wno-unreachable-code", "-fno-strict-aliasing"]
    if sanitize:
        flags = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined"]
        extra_compile_args += flags + ["-O1", "-g"]
        extra_link_args += flags

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
        include_dirs=[str(NATIVE)],
        extra_compile_args=extra_compile_args,
        extra_link_args=extra_link_args,
    )
    for pyx in sorted((HERE / NATIVE).glob("*.pyx"))
    # KIP714_ONLY=_a,_b builds just those modules (handy while iterating on one of them)
    if not os.environ.get("KIP714_ONLY") or pyx.stem in os.environ["KIP714_ONLY"].split(",")
]
for ext in extensions:
    ext.sources = [str(Path(s).relative_to(HERE)) if Path(s).is_absolute() else s for s in ext.sources]

setup(
    ext_modules=cythonize(
        extensions,
        include_path=[str(NATIVE)],
        compiler_directives=directives,
        annotate=os.environ.get("KIP714_ANNOTATE") == "1",
        nthreads=0,
    ),
)
