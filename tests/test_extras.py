"""The optional extras: a command or library class whose extra is not installed says which one to install, in
one line for the command line (exit status 2) and as a MissingExtraError (an ImportError) for the library.
Missing modules are simulated by making ``importlib.util.find_spec`` report them absent; the fresh venv of
tests/test_distribution.py checks the same with a wheel installed without extras."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import pathlib
import re

import pytest

from kip714 import cli
from kip714._extras import PARTS, available, require
from kip714.errors import MissingExtraError

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture
def without(monkeypatch):
    """``without("urllib3", ...)``: from now on find_spec reports those modules as not installed."""

    def hide(*modules: str) -> None:
        real = importlib.util.find_spec
        monkeypatch.setattr(
            importlib.util, "find_spec", lambda name, package=None: None if name in modules else real(name, package)
        )

    return hide


def hint(what: str, extra: str) -> str:
    return f"{what} needs the {extra} extra: pip install 'kip714[{extra}]'"


COMMANDS_WITHOUT = [  # (missing module, argv, the one line)
    (
        "urllib3",
        ["serve", "--otlp-endpoint", "http://127.0.0.1:1"],
        "kip714 serve: " + hint("--otlp-endpoint", "export"),
    ),
    ("prometheus_client", ["serve", "--prometheus", "127.0.0.1:0"], "kip714 serve: " + hint("--prometheus", "export")),
    ("numpy", ["serve", "--prometheus", "127.0.0.1:0"], "kip714 serve: " + hint("--prometheus", "export")),
    ("uvloop", ["serve", "--loop", "uvloop"], "kip714 serve: " + hint("--loop uvloop", "fast")),
    (
        "urllib3",
        ["proxy", "--upstream", "127.0.0.1:1", "--otlp-endpoint", "http://127.0.0.1:1"],
        "kip714 proxy: " + hint("--otlp-endpoint", "export"),
    ),
    (
        "prometheus_client",
        ["proxy", "--upstream", "127.0.0.1:1", "--prometheus", "127.0.0.1:0"],
        "kip714 proxy: " + hint("--prometheus", "export"),
    ),
    (
        "uvloop",
        ["proxy", "--upstream", "127.0.0.1:1", "--loop", "uvloop"],
        "kip714 proxy: " + hint("--loop uvloop", "fast"),
    ),
    ("pyspark", ["pipeline", "in", "out"], "kip714 pipeline: " + hint("this command", "spark")),
    ("pandas", ["pipeline", "in", "out", "--follow"], "kip714 pipeline: " + hint("this command", "spark")),
    ("pyspark", ["report", "recording"], "kip714 report: " + hint("this command", "spark")),
    (
        "grafana_foundation_sdk",
        ["dashboards", "--out", "never-written"],
        "kip714 dashboards: " + hint("this command (or --only rules)", "dashboards"),
    ),
]


@pytest.mark.parametrize("missing,argv,line", COMMANDS_WITHOUT, ids=[f"{a[0]}-{m}" for m, a, _ in COMMANDS_WITHOUT])
def test_a_command_names_the_extra_it_needs(without, capsys, tmp_path, missing, argv, line):
    """Checked before anything starts: the --record folder is not even created."""
    without(missing)
    record = (
        ["--record", str(tmp_path / "rec"), "--port", "0", "--duration", "0.1"] if argv[0] in ("serve", "proxy") else []
    )
    assert cli.main([*argv, *record]) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [line] and out == ""
    assert not (tmp_path / "rec").exists()


def test_loop_auto_without_uvloop_is_asyncio(without):
    from kip714.cli.serve import loop_factory

    without("uvloop")
    assert loop_factory("auto") is None and loop_factory("asyncio") is None
    with pytest.raises(MissingExtraError, match=re.escape(hint("--loop uvloop", "fast"))):
        loop_factory("uvloop")


def test_library_classes_raise_the_same_hint(without):
    from kip714.sinks import OtlpForwarder, PrometheusExporter

    without("urllib3", "prometheus_client")
    with pytest.raises(ImportError, match=re.escape(hint("PrometheusExporter", "export"))) as info:
        PrometheusExporter(background=False)
    assert isinstance(info.value, MissingExtraError) and info.value.extra == "export"
    assert info.value.name == "prometheus_client"
    with pytest.raises(MissingExtraError, match=re.escape(hint("OtlpForwarder", "export"))) as info:
        OtlpForwarder("http://127.0.0.1:1")
    assert info.value.name == "urllib3"


SPARK_CALLS = [
    ("local_session", ()),
    ("register", (None,)),
    ("decode_payloads", (None,)),
    ("decode_frames", (None,)),
    ("report", ("recording",)),
    ("pipeline.run_pipeline", ("in", "out")),
    ("pipeline.follow_pipeline", ("in", "out")),
]


@pytest.mark.parametrize("path,args", SPARK_CALLS, ids=[path for path, _ in SPARK_CALLS])
def test_spark_functions_raise_the_hint(without, path, args):
    import functools

    import kip714.spark
    import kip714.spark.pipeline

    function = functools.reduce(getattr, path.split("."), kip714.spark)
    without("pyspark")
    with pytest.raises(MissingExtraError, match=re.escape(hint(f"kip714.spark.{path}", "spark"))):
        function(*args)


def test_require_and_available():
    assert available("spark") and available("otlp")  # the test environment has every extra
    require("prometheus", "anything")
    with pytest.raises(KeyError):
        require("nonexistent", "anything")


def test_parts_match_the_extras_of_pyproject():
    """Every module PARTS names is installed by a requirement of its extra in pyproject.toml, and ``all``
    holds every extra PARTS names."""
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    def names(reqs: list[str]) -> set[str]:
        return {re.split(r"[\s<>=!;\[]", r, maxsplit=1)[0].lower().replace("_", "-") for r in reqs}

    providers = importlib.metadata.packages_distributions()
    for part, (extra, modules) in PARTS.items():
        for module in modules:
            dists = {d.lower().replace("_", "-") for d in providers.get(module, [])}
            assert dists & names(extras[extra]), f"{part}: {module} is not installed by kip714[{extra}]"
    (everything,) = extras["all"]
    assert set(re.fullmatch(r"kip714\[(.*)\]", everything).group(1).split(",")) == {e for e, _ in PARTS.values()}


def test_missing_extra_error_is_one_line_and_exit_2():
    line, status = cli._describe(MissingExtraError("--x", "export", "urllib3"))
    assert (line, status) == (hint("--x", "export"), 2)
