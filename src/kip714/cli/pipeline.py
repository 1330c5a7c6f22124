"""``kip714 pipeline``: bulk-decode frames or a recording on Spark (the job is :mod:`kip714.spark.pipeline`)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from .._enums import DEFAULT_TELEMETRY_MAX_BYTES
from ..spark import pipeline as _pipeline
from ..spark.pipeline import run_pipeline

def add_parser(subparsers) -> None:
    p = subparsers.add_parser("pipeline", help="bulk-decode frames or a serve recording on Spark into Parquet",
                              description=_pipeline.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", help="folder of *.bin frame files, or a kip714 serve --record folder")
    p.add_argument("output", help="output folder: points/ and errors/ are written there")
    p.add_argument("--master", help="Spark master URL (default local[*], or the one spark-submit gives)")
    p.add_argument("--partitions", type=int, help="repartition the input into N partitions before decoding")
    p.add_argument("--max-output", type=int, default=DEFAULT_TELEMETRY_MAX_BYTES,
                   help=f"largest decompressed payload accepted per row (default {DEFAULT_TELEMETRY_MAX_BYTES})")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def run(args) -> int:
    summary = run_pipeline(args.input, args.output, master=args.master, partitions=args.partitions,
                           max_output=args.max_output, progress=not args.quiet)
    if args.json:
        print(json.dumps({**asdict(summary), "points_per_second": summary.points_per_second}))
    else:
        print(summary.describe())
    return 0
