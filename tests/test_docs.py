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


def _fenced(page: str, first_line: str) -> str:
    """The fenced block of ``docs/PAGE`` whose first line is ``first_line``."""
    found = re.findall(r"^```[a-z]*\n(" + re.escape(first_line) + r"\n.*?)^```", (DOCS / page).read_text(), re.M | re.S)
    assert len(found) == 1, f"docs/{page}: {len(found)} blocks starting {first_line!r}"
    return found[0]


def test_the_fleet_pages_haproxy_config_is_valid(tmp_path):
    """docs/fleet.md's HAProxy configuration passes ``haproxy -c`` and does what the page says: TCP,
    PROXY protocol v2 to the replicas, /readyz checked on their Prometheus port, the same ports."""
    import shutil
    import subprocess

    import pytest

    config = _fenced("fleet.md", "global")
    for line in ("mode tcp", "option httpchk GET /readyz", "server kip714-3 127.0.0.4"):
        assert line in config, line
    assert re.search(r"default-server check port 9464 .*send-proxy-v2", config)
    haproxy = shutil.which("haproxy")
    if haproxy is None:
        pytest.skip("haproxy is not installed (make haproxy)")
    (tmp_path / "haproxy.cfg").write_text(config)
    proc = subprocess.run(
        [haproxy, "-c", "-f", "haproxy.cfg"], cwd=tmp_path, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_fleet_pages_prometheus_config_loads_the_shipped_rules(tmp_path):
    import shutil
    import subprocess

    import pytest

    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (make prometheus)")
    (tmp_path / "prometheus.yml").write_text(_fenced("fleet.md", "scrape_configs:"))
    shutil.copy(DOCS.parent / "deploy" / "prometheus" / "kip714-rules.yml", tmp_path)
    proc = subprocess.run(
        [promtool, "check", "config", "prometheus.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0 and "SUCCESS" in proc.stdout, proc.stdout + proc.stderr
