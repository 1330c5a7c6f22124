"""The one-page API list and the architecture page stay true."""

from __future__ import annotations

import importlib
import pathlib
import re

import kip714

DOCS = pathlib.Path(__file__).parents[1] / "docs"

#: The public subpackages (and the errors module); docs/api.md has a section for each.
PUBLIC_SUBPACKAGES = [f"kip714.{name}" for name in kip714._PUBLIC_SUBPACKAGES]


def _api_sections() -> dict[str, set[str]]:
    """docs/api.md's sections (``## `kip714.wire```) -> the names its table lists."""
    sections: dict[str, set[str]] = {}
    for block in re.split(r"^## ", (DOCS / "api.md").read_text(), flags=re.M)[1:]:
        title = re.match(r"`([\w.]+)`", block)
        if title:
            sections[title.group(1)] = set(re.findall(r"^\| `([A-Za-z_][A-Za-z0-9_]*)", block, flags=re.M))
    return sections


def test_api_page_lists_every_public_name():
    sections = _api_sections()
    public = set(kip714.__all__) - {"__version__"}
    assert not public - sections.get("kip714", set()), f"docs/api.md lacks {sorted(public - sections['kip714'])}"
    for name in PUBLIC_SUBPACKAGES:
        assert name in sections, f"docs/api.md has no section for the public {name}"
        exported = set(importlib.import_module(name).__all__)
        assert not exported - sections[name], f"docs/api.md lacks {name}'s {sorted(exported - sections[name])}"
    assert not set(sections) - {"kip714", *PUBLIC_SUBPACKAGES}, "docs/api.md documents a module not public"


def test_architecture_names_modules_that_exist():
    text = (DOCS / "architecture.md").read_text()
    root = pathlib.Path(kip714.__file__).parent
    native = root.parents[1] / "src" / "_native"
    for path in set(re.findall(r"`kip714/([a-z_/]+\.py)`", text)):
        assert (root / path).is_file(), f"docs/architecture.md names kip714/{path}, which does not exist"
    for folder in set(re.findall(r"`kip714/([a-z_/]+)/`", text)):
        assert (root / folder / "__init__.py").is_file(), f"docs/architecture.md names kip714/{folder}/"
    for path in set(re.findall(r"`src/_native/([\w/]+\.\w+)`", text)):
        assert (native / path).is_file(), f"docs/architecture.md names src/_native/{path}, which does not exist"
    native_files = {p.name for p in native.rglob("*") if p.suffix in (".pyx", ".pxi", ".pxd")}
    for name in set(re.findall(r"`(?:[\w/]+/)?(\w+\.(?:pyx|pxi|pxd))`", text)):
        assert name in native_files, f"docs/architecture.md names {name}, which is not in src/_native"
    python_files = {p.name for p in root.rglob("*.py")}
    for name in set(re.findall(r"`(\w+\.py)`", text)):
        assert name in python_files, f"docs/architecture.md names {name}, which is no module of kip714"


def test_architecture_names_every_package_and_native_file():
    """The page is complete: every subpackage of kip714 and every native source file has its place on it."""
    text = (DOCS / "architecture.md").read_text()
    root = pathlib.Path(kip714.__file__).parent
    for package in sorted(p.parent.relative_to(root).as_posix() for p in root.rglob("__init__.py") if p.parent != root):
        # a subpackage as `kip714/NAME/`, a nested one by its last part (`prometheus/`) in its parent's row
        shown = f"`kip714/{package}/`" if "/" not in package else f"`{package.rsplit('/', 1)[1]}/`"
        assert shown in text, f"docs/architecture.md does not place kip714/{package}/"
    native = root.parents[1] / "src" / "_native"
    for source in sorted(native.rglob("*")):
        if source.suffix in (".pyx", ".pxi", ".pxd"):
            assert source.name in text, f"docs/architecture.md does not place {source.relative_to(native)}"
