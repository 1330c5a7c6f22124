"""The ``kip714`` command line: one module per subcommand, each with ``add_parser(subparsers)`` and
``run(args)``.

Errors are handled here, once for every subcommand: whatever a command raises ends as one line on stderr
(``kip714 COMMAND: what failed``, naming the input) and the exit status of :data:`EXIT_STATUS`, never a
traceback (``KIP714_TRACEBACK=1`` shows it)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import kip714

from . import bench, conformance, decode, demo, pipeline, proxy, report, serve, simulate

#: Subcommands in the order ``--help`` lists them (the order of the data flow, then the tools).
COMMANDS = (serve, proxy, decode, pipeline, report, conformance, simulate, bench, demo)

#: Exit statuses of every subcommand (``kip714 --help`` shows them).
EXIT_STATUS = {
    0: "success",
    1: ("the command ran and found problems (decode: undecodable frames; simulate: no push accepted or a "
        "protocol error answered; bench: a group failed; pipeline: the Spark job failed; conformance: a scenario "
        "failed or could not run)"),
    2: ("bad usage or bad input: an unknown option or value, a file that does not exist or does not hold what "
        "the command reads (the message names it)"),
    130: "interrupted (Ctrl-C)",
    141: "the output was closed early (e.g. piped into head), as for a tool stopped by SIGPIPE",
}


def _epilog() -> str:
    lines = ["exit status:"] + [f"  {code:<4} {text}" for code, text in EXIT_STATUS.items()]
    lines += ["", "Errors are one line on stderr: 'kip714 COMMAND: what failed'. KIP714_TRACEBACK=1 also prints "
                  "Python's traceback.",
              "Durations take 90s, 10m, 2h, 1h30m, 500ms or plain seconds; sizes 64MB, 512KiB or bytes."]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kip714", description="kip714 — the wire side of Apache Kafka "
                                     "KIP-714 client telemetry, with a Cython core.", epilog=_epilog(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"kip714 {kip714.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _describe(exc: BaseException) -> tuple[str, int]:
    """(one line, exit status) for an exception a command raised."""
    if isinstance(exc, kip714.Kip714Error):
        return f"{exc} (error code {exc.error_code.value} {exc.error_code.name})", 2
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}", 2
    if isinstance(exc, OSError) and exc.strerror:     # the words, not "[Errno 98] …"
        return exc.strerror, 2
    if isinstance(exc, (OSError, ValueError)):
        return str(exc) or type(exc).__name__, 2
    # anything else (a Spark job failure, a bug): its first line
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__, 1


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
        if os.environ.get("KIP714_TRACEBACK") == "1":
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
