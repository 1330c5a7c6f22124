"""``kip714 pipeline``: bulk-decode frames or a recording on Spark (the job is :mod:`kip714.spark.pipeline`)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from .._enums import DEFAULT_TELEMETRY_MAX_BYTES
from .._extras import require
from ..spark import pipeline as _pipeline
from ..spark.pipeline import failure_line, run_pipeline
from .._units import DURATION_HELP, duration, size
from ._text import plain


def _conf_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"--conf takes KEY=VALUE (e.g. spark.driver.memory=8g), not {text!r}")
    return key.strip(), value.strip()


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``kip714 pipeline``."""
    p.description, p.formatter_class = plain(_pipeline.__doc__), argparse.RawDescriptionHelpFormatter
    p.add_argument("input", help="folder of *.bin frame files, or a kip714 serve --record folder (a URL such as "
                                 "hdfs://… is read as a recording)")
    p.add_argument("output", help="output folder: points/ and errors/ are written there")
    p.add_argument("--master", help="Spark master URL (default local[*], or the one spark-submit gives)")
    p.add_argument("--partitions", type=int, help="repartition the input into N partitions before decoding")
    p.add_argument("--max-output", type=size, default=DEFAULT_TELEMETRY_MAX_BYTES,
                   help=f"largest decompressed payload accepted per row (default {DEFAULT_TELEMETRY_MAX_BYTES})")
    p.add_argument("--conf", type=_conf_pair, action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting, as with spark-submit (repeatable), e.g. --conf spark.driver.memory=8g; "
                        "kip714's defaults: driver heap 768m committed at start (less on machines under 6 GiB), "
                        "spark.sql.files.maxPartitionBytes=32 MiB, Arrow batches of 4096 rows / 16 MiB")
    p.add_argument("--follow", action="store_true",
                   help="keep following a recording that serve/proxy is still writing (Spark Structured "
                        "Streaming): append each micro-batch to OUTPUT/points and OUTPUT/errors, exactly once "
                        "across restarts (checkpoint in OUTPUT/_checkpoint); stop with Ctrl-C")
    p.add_argument("--trigger", type=duration, default="5s", metavar="DURATION",
                   help=f"--follow: how often to look for new files ({DURATION_HELP}; default 5s)")
    p.add_argument("--checkpoint", help="--follow: checkpoint folder (default OUTPUT/_checkpoint)")
    p.add_argument("--max-files-per-trigger", type=int, help="--follow: at most N new files per micro-batch")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--verbose", action="store_true",
                   help="Spark's own warnings and, when the job fails, the full traceback")


def run(args) -> int:
    require("spark", "this command")
    if getattr(args, "follow", False):
        return _follow(args)
    conf = dict(args.conf)
    _pipeline.detect_input(args.input)  # a missing or unreadable input is bad input (exit 2), not a Spark failure
    if not args.verbose:
        _pipeline.quiet_gateway_errors()
    try:
        summary = run_pipeline(args.input, args.output, master=args.master, partitions=args.partitions,
                               max_output=args.max_output, progress=not args.quiet, conf=conf,
                               log_level=None if args.verbose else "OFF")
    except KeyboardInterrupt:
        print("kip714 pipeline: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a Spark/Py4J failure: one line, not a 60-line traceback (--verbose shows it)
        if args.verbose:
            raise
        local = args.master is None or args.master.startswith("local")
        print(failure_line(exc, conf, args.master, jvm_gone=local and _pipeline.jvm_exited()), file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({**asdict(summary), "points_per_second": summary.points_per_second}))
    else:
        print(summary.describe())
    return 0


def _follow(args) -> int:
    from ..spark.pipeline import follow_pipeline

    running = follow_pipeline(args.input, args.output, trigger_s=args.trigger, master=args.master,
                              partitions=args.partitions, checkpoint=args.checkpoint,
                              max_files_per_trigger=args.max_files_per_trigger, max_output=args.max_output,
                              progress=not args.quiet, conf=dict(args.conf))
    try:
        running.await_termination()
    except KeyboardInterrupt:
        pass
    finally:
        running.stop()
    if args.json:
        print(json.dumps([asdict(b) for b in running.batches]))
    else:
        print(f"{len(running.batches)} micro-batches, {sum(b.pushes for b in running.batches)} pushes, "
              f"{sum(b.points for b in running.batches)} points")
    return 0
