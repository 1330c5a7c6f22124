"""The ``kip714`` command line: one module per subcommand, each with ``add_parser(subparsers)`` and
``run(args)``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import kip714

from . import bench, decode, demo, pipeline, proxy, report, serve, simulate

#: Subcommands in the order ``--help`` lists them (the order of the data flow, then the tools).
COMMANDS = (serve, proxy, decode, pipeline, report, simulate, bench, demo)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kip714", description="kip714 — the wire side of Apache Kafka "
                                     "KIP-714 client telemetry, with a Cython core.")
    parser.add_argument("--version", action="version", version=f"kip714 {kip714.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except kip714.Kip714Error as exc:
        print(f"kip714: {exc} (error code {exc.error_code.value} {exc.error_code.name})", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
