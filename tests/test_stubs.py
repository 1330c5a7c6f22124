"""The shipped ``.pyi`` stubs describe the native modules' public surface: everything public, nothing private.

Private helpers the tests use (``_crc32c_sw``, ``_lz4_block_size``, ...) stay out of the stubs; private
names a stub may declare are type aliases and typing-only base classes (``_Framing``, ``_ApiMessage``)."""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

import kip714

ROOT = pathlib.Path(kip714.__file__).parent
STUBS = sorted(ROOT.glob("_*.pyi"))


def _declared(stub: pathlib.Path) -> tuple[dict[str, ast.AST], set[str]]:
    tree = ast.parse(stub.read_text())
    defs: dict[str, ast.AST] = {}
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defs[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return defs, names


def _runtime_public(mod) -> set[str]:
    return {
        n
        for n, v in vars(mod).items()
        if not n.startswith("_") and (getattr(v, "__module__", None) == mod.__name__ or n.isupper())
    }


@pytest.mark.parametrize("stub", STUBS, ids=lambda p: p.stem)
def test_stub_covers_the_public_surface(stub):
    mod = importlib.import_module(f"kip714.{stub.stem}")
    defs, names = _declared(stub)
    missing = sorted(_runtime_public(mod) - set(defs) - names)
    assert not missing, f"{stub.name} lacks {missing}"
    for name, node in defs.items():
        if name.startswith("_") or _typing_only(node):
            continue  # typing helpers (aliases, TypedDicts, typing-only bases) exist only in the stub
        assert hasattr(mod, name), f"{stub.name} declares {name}, which kip714.{stub.stem} does not have"
        if isinstance(node, ast.ClassDef) and isinstance(getattr(mod, name), type):
            cls = getattr(mod, name)
            stub_members = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            stub_members |= {
                n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
            }
            stub_members |= {
                t.id
                for n in node.body
                if isinstance(n, ast.Assign)  # enum members: NAME = value
                for t in n.targets
                if isinstance(t, ast.Name)
            }
            runtime = {n for n in vars(cls) if not n.startswith("_")}
            lacking = sorted(runtime - stub_members - _inherited_in_stub(defs, node))
            assert not lacking, f"{stub.name}: {name} lacks {lacking}"


def _typing_only(node: ast.AST) -> bool:
    return isinstance(node, ast.ClassDef) and any(
        isinstance(b, ast.Name) and b.id in ("TypedDict", "Protocol", "NamedTuple") for b in node.bases
    )


def _inherited_in_stub(defs: dict[str, ast.AST], node: ast.ClassDef) -> set[str]:
    out: set[str] = set()
    for base in node.bases:
        if isinstance(base, ast.Name) and isinstance(defs.get(base.id), ast.ClassDef):
            b = defs[base.id]
            out |= {n.name for n in b.body if isinstance(n, ast.FunctionDef)}
            out |= {n.target.id for n in b.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
            out |= _inherited_in_stub(defs, b)
    return out


@pytest.mark.parametrize("stub", STUBS, ids=lambda p: p.stem)
def test_stub_declares_no_private_function(stub):
    defs, _ = _declared(stub)
    private = sorted(n for n, node in defs.items() if n.startswith("_") and isinstance(node, ast.FunctionDef))
    assert not private, f"{stub.name} ships test hooks or private helpers: {private}"
