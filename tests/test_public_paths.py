"""Every dotted ``kip714.X…`` path that the docs name resolves to a real object.

Read at test time: README.md, CONTRIBUTING.md, docs/**/*.md, the docstrings and comments of src/kip714 (the
``.pyi`` stubs whole) and the native sources (their docstrings are the compiled modules'). A path resolves
when its longest importable module prefix imports and the rest are attributes of it, reached without a
DeprecationWarning (a name that left the top level must be named at its new home)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import io
import pathlib
import re
import tokenize
import warnings
from collections import defaultdict

import pytest

ROOT = pathlib.Path(__file__).parents[1]
PATH = re.compile(r"(?<![\w./-])kip714(?:\.[A-Za-z_][A-Za-z0-9_]*)+")

#: Paths that are not kip714 objects, with where and why.
NOT_OURS = {
    # docs/reference/python-ecosystem.md: a setup.py sketch from the layout survey, before kip714 had one
    "kip714._native.messages",
}


def _texts_of_python(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring (string statements included, e.g. attribute docs)."""
    source = path.read_text()
    out = []
    # tokenize is pure Python (a tenth of a second per module, in every worker's collection): only where a
    # line could hold a comment that names a path
    if any("#" in line and PATH.search(line) for line in source.splitlines()):
        out += [
            (tok.start[0], tok.string)
            for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT
        ]
    out += _string_statements(ast.parse(source).body)
    return out


def _string_statements(body: list[ast.stmt]) -> list[tuple[int, str]]:
    """(line, text) of the string statements in ``body`` and the blocks nested in it (statements only: a
    walk of every expression node cost a second of each worker's collection)."""
    out = []
    for node in body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            out.append((node.lineno, node.value.value))
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            nested = getattr(node, field, None)
            if isinstance(nested, list):
                out += _string_statements(nested)
    return out


def _texts() -> list[tuple[pathlib.Path, int, str]]:
    out = []
    docs = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
    whole = [
        *docs,
        *sorted((ROOT / "src" / "kip714").rglob("*.pyi")),
        *sorted(p for p in (ROOT / "src" / "_native").rglob("*") if p.suffix in (".pyx", ".pxi", ".pxd")),
    ]
    for path in whole:
        if path.is_file():
            out += [(path, n, line) for n, line in enumerate(path.read_text().splitlines(), 1)]
    for path in sorted((ROOT / "src" / "kip714").rglob("*.py")):
        out += [(path, n, text) for n, text in _texts_of_python(path)]
    return out


def _named_paths() -> dict[str, list[str]]:
    """Each dotted path -> where it is named (file:line)."""
    where: dict[str, list[str]] = defaultdict(list)
    for path, line, text in _texts():
        for m in PATH.finditer(text):
            where[m.group(0)].append(f"{path.relative_to(ROOT)}:{line + text.count(chr(10), 0, m.start())}")
    return dict(sorted(where.items()))


NAMED = _named_paths()


def resolve(dotted: str) -> object:
    """The object at ``dotted``: import its longest module prefix, then getattr the rest."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            continue  # a prefix of it is not a package
        if spec is not None:
            break
    if parts[i - 1] == "__main__":
        return spec  # importing it would run the command line
    obj = importlib.import_module(name)
    for attr in parts[i:]:
        obj = getattr(obj, attr)
    return obj


def test_the_docs_name_kip714_paths():
    assert len(NAMED) > 50 and "kip714.TelemetryBroker" in NAMED


@pytest.mark.parametrize("dotted", [p for p in NAMED if p not in NOT_OURS])
def test_named_path_resolves(dotted):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            resolve(dotted)
        return
    except ModuleNotFoundError as exc:
        if exc.name and not exc.name.startswith("kip714"):
            pytest.skip(f"{exc.name} is not installed")
        problem: Exception = exc
    except (AttributeError, DeprecationWarning) as exc:
        problem = exc
    pytest.fail(f"{dotted}, named at {', '.join(NAMED[dotted])}, does not resolve: {problem}", pytrace=False)
