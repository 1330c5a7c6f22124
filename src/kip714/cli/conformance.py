"""``kip714 conformance``: the client lab (docs/conformance.md)."""

from __future__ import annotations

import argparse
import sys

from .._units import duration
from ._text import plain


def run(args: argparse.Namespace) -> int:
    """Provoke a Kafka client with every broker answer KIP-714 defines and judge, from the frames exchanged,
    whether it acts as the KIP says. For each scenario the lab starts a fresh client (--client, with
    {bootstrap} and {seconds} filled in; it must close itself normally after {seconds}), plays a scripted
    two-node cluster and gives one verdict: pass, fail, n/a (with why) or error (the client did not run).
    With --listen the lab waits for a client started by someone else, one session per scenario, and says
    on stdout what it expects next. Exit status 1 when a scenario failed or could not run."""
    from ..conformance import exit_status, table
    from ..conformance import run as run_lab
    from ..conformance.runner import Result

    if args.client is None and args.listen is None:
        raise ValueError("give --client CMD (or a built-in client name) or --listen HOST:PORT")
    if args.client is not None and args.listen is not None:
        raise ValueError("--client and --listen exclude each other: the lab either starts the client or waits for it")
    listen_mode = args.listen is not None

    def progress(result: Result) -> None:
        line = f"{result.scenario}: {result.status} — {result.why}"
        print(line, file=sys.stdout if listen_mode else sys.stderr, flush=True)

    results = run_lab(
        args.client,
        args.scenario,
        interval_ms=args.interval_ms,
        compression=args.compression,
        jobs=args.jobs,
        startup_s=args.startup,
        out=args.out,
        junit=args.junit,
        listen=args.listen,
        progress=progress,
    )
    print(table(results))
    if args.out:
        print(f"results: {args.out}/results.json, {args.out}/index.html")
    if args.junit:
        print(f"JUnit XML: {args.junit}")
    return exit_status(results)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``kip714 conformance``."""
    from ..conformance.runner import BUILTIN_CLIENTS, DEFAULT_INTERVAL_MS, DEFAULT_STARTUP_S
    from ..conformance.scenarios import SCENARIO_IDS

    p.description = plain(run.__doc__)
    p.add_argument(
        "--client",
        metavar="CMD",
        help="the client command, run once per scenario, with {bootstrap} (the lab's address) and "
        "{seconds} (how long to run before closing normally; {ms} in milliseconds) filled in; or "
        f"a built-in client: {', '.join(BUILTIN_CLIENTS)}",
    )
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="instead of starting the client, listen on PORT (node 1, the bootstrap) and PORT+1 (node 2) "
        "and run the scenarios one client session after another, saying on stdout what to start",
    )
    p.add_argument(
        "--scenario",
        action="append",
        choices=SCENARIO_IDS,
        metavar="ID",
        help=f"run this scenario (repeatable; default all): {', '.join(SCENARIO_IDS)}",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="write DIR/results.json, DIR/index.html and DIR/logs/ (the client's output per scenario)",
    )
    p.add_argument("--junit", metavar="FILE", help="write JUnit XML, one testcase per scenario")
    p.add_argument(
        "--interval-ms",
        type=_positive_int,
        default=DEFAULT_INTERVAL_MS,
        metavar="N",
        help=f"PushIntervalMs of the lab's subscriptions (default {DEFAULT_INTERVAL_MS}; the whole set "
        "then takes under 2 minutes; the terminating scenarios always use 30000)",
    )
    p.add_argument(
        "--compression",
        metavar="LIST",
        default=None,
        help="the AcceptedCompressionTypes the lab answers, in its order (default zstd,lz4,gzip,snappy, "
        "Kafka's); e.g. gzip,zstd makes a client that takes the first type it supports use gzip",
    )
    p.add_argument(
        "--jobs",
        type=_positive_int,
        default=1,
        metavar="N",
        help="run N scenarios at once, each on its own ports (default 1; timing verdicts are measured "
        "from the lab's own clock, but a loaded machine delays every client)",
    )
    p.add_argument(
        "--startup",
        type=duration,
        default=DEFAULT_STARTUP_S,
        metavar="DURATION",
        help=f"time a client gets to start and send its first Get (default {DEFAULT_STARTUP_S:g}s); "
        "{seconds} is this plus what the scenario needs",
    )
