"""The command line loads what the subcommand being run needs, nothing more: ``kip714 serve`` and ``kip714
proxy`` never import the tools, Spark, pandas or matplotlib (checked with ``python -X importtime``), while
``kip714 --help`` and ``kip714 COMMAND --help`` stay complete."""

from __future__ import annotations

import argparse
import contextlib
import io
import pkgutil
import subprocess
import sys

import pytest

from kip714 import cli

#: Never imported by serve and proxy (nor by the top-level --help).
FORBIDDEN = ("kip714.tools", "kip714.spark", "pyspark", "pandas", "matplotlib")


def imported_modules(*argv: str, module: str = "kip714") -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run ``python -X importtime -m MODULE ARGV``: the process and the modules it imported, in order."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", module, *argv], capture_output=True, text=True, timeout=120
    )
    names = [line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    return proc, names[1:]  # the first line is the header ("self [us] | cumulative | imported package")


def forbidden_in(names: list[str]) -> list[str]:
    return [n for n in names if any(n == f or n.startswith(f + ".") for f in FORBIDDEN)]


@pytest.mark.parametrize("argv", [["serve", "--help"], ["proxy", "--help"], ["--help"]], ids=" ".join)
def test_help_imports_neither_tools_nor_spark(argv):
    proc, names = imported_modules(*argv)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "kip714.cli" in names and forbidden_in(names) == []
    loaded = {n.rsplit(".", 1)[1] for n in names if n.startswith("kip714.cli.") and not n.startswith("kip714.cli._")}
    wanted = {"--help": set(), "serve": {"serve"}, "proxy": {"proxy", "serve"}}  # proxy shares serve's options
    assert loaded == wanted[argv[0]]


def test_serve_and_proxy_at_work_import_neither_tools_nor_spark(tmp_path):
    """serve for a tenth of a second with every core option (a recording, a subscription); the proxy up to
    its first upstream connection (refused: nothing listens on port 1)."""
    proc, names = imported_modules(
        "serve",
        "--port",
        "0",
        "--duration",
        "0.1",
        "--summary-interval",
        "0",
        "--metrics",
        "*",
        "--record",
        str(tmp_path / "rec"),
    )
    assert proc.returncode == 0 and "event=stopped" in proc.stderr, proc.stderr[-2000:]
    assert "kip714.endpoint.server" in names and forbidden_in(names) == []
    proc, names = imported_modules(
        "proxy",
        "--upstream",
        "127.0.0.1:1",
        "--port",
        "0",
        "--duration",
        "0.1",
        "--summary-interval",
        "0",
        "--metrics",
        "*",
    )
    assert proc.returncode == 2 and "no upstream bootstrap server answered" in proc.stderr, proc.stderr[-2000:]
    assert "kip714.endpoint.proxy" in names and forbidden_in(names) == []


def test_spark_submit_does_not_go_through_the_command_line():
    """The job file spark-submit runs has its own parser (the job's arguments, from kip714.spark.pipeline)."""
    proc, names = imported_modules("--help", module="kip714.spark.submit")
    assert proc.returncode == 0 and "kip714.spark.pipeline" in names, proc.stderr[-2000:]
    assert [n for n in names if n == "kip714.cli" or n.startswith(("kip714.cli.", "kip714.tools"))] == []
    assert "--max-files-per-trigger" in proc.stdout


# ------------------------------------------------------------------------------------------ the registry


def _choices(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def _output(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 0
    return out.getvalue()


def test_top_help_lists_every_command_with_its_help_and_the_exit_statuses():
    text = " ".join(_output(["--help"]).split())  # argparse wraps the help lines
    for command in cli.COMMANDS:
        assert f"{command.name} {command.help}" in text, command.name
    for code, meaning in cli.EXIT_STATUS.items():
        assert f"{code} {' '.join(meaning.split())}" in text
    assert [c.name for c in cli.COMMANDS] == list(_choices(cli.build_parser(load=())))


@pytest.mark.parametrize("name", [c.name for c in cli.COMMANDS])
def test_command_help_is_the_complete_parsers(name):
    """``kip714 NAME --help`` (only NAME loaded) shows what the parser with every command loaded shows."""
    assert _output([name, "--help"]) == _choices(cli.build_parser())[name].format_help()


def test_every_command_module_is_registered_and_has_the_interface():
    modules = {m.name for m in pkgutil.iter_modules(cli.__path__) if not m.name.startswith("_")}
    assert modules == {c.module.lstrip(".") for c in cli.COMMANDS}
    for command in cli.COMMANDS:
        module = cli.module_of(command.name)
        assert callable(module.add_arguments) and callable(module.run), command.name
