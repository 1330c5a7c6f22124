"""``kip714 bench``: every hot path against its peer in the same run (harness: :mod:`kip714.tools.bench`)."""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import kip714

from ..tools.bench import GROUPS, Bench, _groups, _json_default, _loadavg, render_markdown, render_table, write_plots


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``kip714 bench``."""
    p.description = (
        "Run the benchmarks of bench/ without pytest: kip714 and each peer in alternating rounds, "
        "then a table (operation, kip714, peer, ratio, goal, met). Peers that are not installed are "
        "skipped with a note. Exit status 0 even when goals are missed; non-zero on errors."
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="smaller sizes and fewer rounds, Spark skipped unless --only spark (about 10 s of CPU time: "
        "31 s wall measured on a 2-core machine under a load average of 10)",
    )
    p.add_argument(
        "--only",
        type=_groups,
        metavar="NAME",
        help=f"run only this group (or comma-separated groups): {', '.join(GROUPS)}",
    )
    p.add_argument("--json", metavar="FILE", help="write the results (machine, rows, samples summary) as JSON")
    p.add_argument("--plot", metavar="DIR", help="write PNG plots of cost vs work size into DIR")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument(
        "--spark-rows", type=int, metavar="K", help="input rows for the Spark group (default 400; 16 with --quick)"
    )


def run(args: argparse.Namespace) -> int:
    started_wall, started = time.time(), time.perf_counter()
    load_before = _loadavg()
    groups = [g for g in GROUPS if g in args.only] if args.only else list(GROUPS)
    bench = Bench(quick=args.quick, groups=groups, spark_k=getattr(args, "spark_rows", None))
    info = bench.machine()
    bench.log(
        f"kip714 bench ({'quick' if args.quick else 'full'}): groups {', '.join(groups)}; "
        f"{info['processor']}, {info['cpus_usable'] or info['cpu_count']} CPUs, Python {info['python']}; "
        f"load {load_before}"
    )
    bench.run()
    elapsed = time.perf_counter() - started
    load_after = _loadavg()
    print(
        f"kip714 {kip714.__version__} bench ({'quick' if args.quick else 'full'}) — {info['processor']}, "
        f"{info['cpus_usable'] or info['cpu_count']} CPUs, {info['platform']}, Python {info['python']}; "
        f"load average {load_before} → {load_after}"
    )
    print("ratio = peer time / kip714 time (> 1: kip714 faster), medians of interleaved rounds\n")
    print(render_markdown(bench.rows) if getattr(args, "markdown", False) else render_table(bench.rows))
    goals = [r for r in bench.rows if r["met"] is not None]
    missed = [r for r in goals if r["met"] is False]
    print(
        f"\n{len(goals) - len(missed)} of {len(goals)} goals met"
        + ("; missed: " + "; ".join(r["operation"] for r in missed) if missed else "")
    )
    for s in bench.skipped:
        print(f"note: [{s['group']}] peer {s['peer']} skipped: {s['reason']}")
    for n in bench.notes:
        print(f"note: {n}")
    for e in bench.errors:
        print(f"error: [{e['group']}] {e['error']}")
    if args.json:
        path = pathlib.Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps(bench.to_json(started_wall, elapsed, load_before, load_after), indent=1, default=_json_default)
            + "\n"
        )
        print(f"JSON: {path}")
    if args.plot:
        files = write_plots(bench, pathlib.Path(args.plot))
        print("plots: " + ", ".join(str(f) for f in files))
    print(f"elapsed {elapsed:.1f} s")
    return 1 if bench.errors else 0
