"""The one-page API list and the architecture page stay true."""

from __future__ import annotations

import pathlib
import re

import kip714
from kip714 import spark as ks

DOCS = pathlib.Path(__file__).parents[1] / "docs"


def test_api_page_lists_every_public_name():
    text = (DOCS / "api.md").read_text()
    listed = set(re.findall(r"^\| `([A-Za-z_][A-Za-z0-9_]*)", text, flags=re.M))
    public = set(kip714.__all__) - {"__version__"}
    assert not public - listed, f"docs/api.md lacks {sorted(public - listed)}"
    assert not set(ks.__all__) - listed, f"docs/api.md lacks kip714.spark's {sorted(set(ks.__all__) - listed)}"


def test_architecture_names_modules_that_exist():
    text = (DOCS / "architecture.md").read_text()
    root = pathlib.Path(kip714.__file__).parent
    for path in set(re.findall(r"`kip714/([a-z_/]+\.py)`", text)):
        assert (root / path).is_file(), f"docs/architecture.md names kip714/{path}, which does not exist"
    for folder in set(re.findall(r"`kip714/([a-z_]+)/`", text)):
        assert (root / folder / "__init__.py").is_file(), f"docs/architecture.md names kip714/{folder}/"
