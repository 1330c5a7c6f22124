"""The compiled Cython core is what the package uses: no pure-Python fallback hides a missing build."""

from __future__ import annotations

import importlib
import importlib.machinery
import pathlib

import pytest

import kip714

SOURCES = pathlib.Path(__file__).parents[1] / "src" / "_native"
#: one stub per extension ships in the package (what a wheel's tests see: no sources next to them)
STUBS = sorted(p.stem for p in pathlib.Path(kip714.__file__).parent.glob("_*.pyi"))
NATIVE_MODULES = sorted(p.stem for p in SOURCES.glob("*/_*.pyx")) if SOURCES.is_dir() else STUBS


def test_native_sources_exist():
    assert "_protocol" in NATIVE_MODULES


def test_every_extension_ships_a_stub():
    assert STUBS == NATIVE_MODULES


@pytest.mark.parametrize("name", NATIVE_MODULES)
def test_native_module_is_a_compiled_extension(name):
    mod = importlib.import_module(f"kip714.{name}")
    assert mod.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)), mod.__file__
    assert isinstance(mod.__loader__, importlib.machinery.ExtensionFileLoader)


def test_public_api_is_served_by_the_extension():
    from kip714 import _protocol

    for name in ("decode_request", "split_frames", "encode_request", "encode_response", "decode_response"):
        fn = getattr(kip714, name)
        assert fn is getattr(_protocol, name)
        assert type(fn).__name__ in ("cython_function_or_method", "builtin_function_or_method")
    assert kip714.PushTelemetryRequest.__module__ == "kip714._protocol"
