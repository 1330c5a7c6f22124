"""The ``kip714`` command line.

Subcommands are registered in :data:`COMMANDS` (name, module, one-line help) and loaded lazily: ``kip714
--help`` lists them all without importing any, and only the module of the subcommand being run is imported
(``kip714 serve`` never loads the tools or Spark). Each module has ``add_arguments(parser)`` (its options and
its ``--help`` description) and ``run(args) -> int`` (the exit status). A new subcommand is one line in
:data:`COMMANDS` plus its module.

Errors are handled here, once for every subcommand: whatever a command raises ends as one line on stderr
(``kip714 COMMAND: what failed``, naming the input) and the exit status of :data:`EXIT_STATUS`, never a
traceback (``KIP714_TRACEBACK=1``, or a command's own ``--verbose``, shows it)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import NamedTuple

import kip714

from ..errors import MissingExtraError, SparkJobError


class Command(NamedTuple):
    """A subcommand: its name, its module (relative to this package) and the one line ``--help`` shows."""

    name: str
    module: str
    help: str


#: Subcommands in the order ``--help`` lists them (the order of the data flow, then the tools).
COMMANDS: tuple[Command, ...] = (
    Command("serve", ".serve", "run a KIP-714 telemetry endpoint real clients push to (not a Kafka broker)"),
    Command("proxy", ".proxy", "a Kafka-protocol proxy that collects KIP-714 telemetry from any cluster"),
    Command("decode", ".decode", "decode size-prefixed request frames (files of one or more frames)"),
    Command("pipeline", ".pipeline", "bulk-decode frames or a serve recording on Spark into Parquet"),
    Command("report", ".report", "conformance per client software and misbehaving clients, from a recording (Spark)"),
    Command(
        "conformance",
        ".conformance",
        "the client lab: provoke a client with KIP-714's broker answers and judge what it does",
    ),
    Command(
        "dashboards",
        ".dashboards",
        "Grafana dashboards and Prometheus alert rules (with promtool tests) for what kip714 exports",
    ),
    Command(
        "subscriptions",
        ".subscriptions",
        "explain which subscription a client gets, and lint a subscription file for known fleet risks",
    ),
    Command("simulate", ".simulate", "a simulated fleet of Kafka clients pushing realistic KIP-714 telemetry"),
    Command("bench", ".bench", "measure kip714 against its peers (kio, codec packages, crc32c, protobuf, Spark)"),
    Command("demo", ".demo", "real telemetry → kip714 serve → Spark pipeline → table and chart"),
)
_BY_NAME = {c.name: c for c in COMMANDS}


#: Exit statuses of every subcommand (``kip714 --help`` shows them).
EXIT_STATUS = {
    0: "success",
    1: (
        "the command ran and found problems (decode: undecodable frames; simulate: no push accepted or a "
        "protocol error answered; bench: a group failed; pipeline: the Spark job failed; conformance: a scenario "
        "failed or could not run; subscriptions lint: a finding; dashboards --check: a file differs)"
    ),
    2: (
        "bad usage or bad input: an unknown option or value, a file that does not exist or does not hold what "
        "the command reads (the message names it), or an option whose extra is not installed (the message says "
        "what to install)"
    ),
    130: "interrupted (Ctrl-C)",
    141: "the output was closed early (e.g. piped into head), as for a tool stopped by SIGPIPE",
}


def _epilog() -> str:
    lines = ["exit status:"] + [f"  {code:<4} {text}" for code, text in EXIT_STATUS.items()]
    lines += [
        "",
        "Errors are one line on stderr: 'kip714 COMMAND: what failed'. KIP714_TRACEBACK=1 also prints "
        "Python's traceback.",
        "Durations take 90s, 10m, 2h, 1h30m, 500ms or plain seconds; sizes 64MB, 512KiB or bytes.",
    ]
    return "\n".join(lines)


def module_of(name: str) -> ModuleType:
    """The module of subcommand ``name``, imported on first use (by the import statement's machinery, which
    ``python -X importtime`` logs; ``importlib.import_module`` bypasses it)."""
    path = __name__ + _BY_NAME[name].module
    __import__(path)
    return sys.modules[path]


def add_command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], name: str, arguments: bool = True
) -> argparse.ArgumentParser:
    """Add subcommand ``name`` to ``subparsers``: its help line, and (``arguments``) its module's options and
    ``run`` as ``func`` (which imports the module)."""
    command = _BY_NAME[name]
    parser = subparsers.add_parser(name, help=command.help, description=command.help)
    if arguments:
        module = module_of(name)
        module.add_arguments(parser)
        parser.set_defaults(func=module.run)
    return parser


def build_parser(load: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The ``kip714`` parser: every subcommand listed with its help; the options of those named in ``load``
    (default: all of them, importing every subcommand module, as the tests and docs want)."""
    parser = argparse.ArgumentParser(
        prog="kip714",
        description="kip714 — the wire side of Apache Kafka KIP-714 client telemetry, with a Cython core.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"kip714 {kip714.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    loaded = set(_BY_NAME if load is None else load)
    for command in COMMANDS:
        add_command(sub, command.name, arguments=command.name in loaded)
    return parser


def _command_in(argv: Sequence[str]) -> list[str]:
    """The subcommand ``argv`` names, if any (the top level has no option that takes a value, so it is the
    first word that is not an option)."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return [word] if word in _BY_NAME else []


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _describe(exc: BaseException) -> tuple[str, int]:
    """(one line, exit status) for an exception a command raised."""
    if isinstance(exc, MissingExtraError):  # names the extra to install
        return str(exc), 2
    if isinstance(exc, SparkJobError):  # says what ran out and what to raise
        return str(exc), 1
    if isinstance(exc, kip714.Kip714Error):
        return f"{exc} (error code {exc.error_code.value} {exc.error_code.name})", 2
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}", 2
    if isinstance(exc, OSError) and exc.strerror:  # the words, not "[Errno 98] …"
        return exc.strerror, 2
    if isinstance(exc, (OSError, ValueError)):
        return str(exc) or type(exc).__name__, 2
    # anything else (a Spark job failure, a bug): its first line
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__, 1


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(_command_in(argv)).parse_args(argv)
    args._argv = argv  # what was given, for the commands that read a config file too (cli/_settings.py)
    prog = f"kip714 {args.command}"
    try:
        status = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return status
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if os.environ.get("KIP714_TRACEBACK") == "1" or getattr(args, "verbose", False):
            raise
        line, status = _describe(exc)
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _silence_stdout()
        print(f"{prog}: {line}", file=sys.stderr)
        return status


if __name__ == "__main__":
    sys.exit(main())
