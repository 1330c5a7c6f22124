"""``kip714 report``: conformance per client software and insights per client, on Spark
(the job is :mod:`kip714.spark.report`)."""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys

from .._extras import require
from ..spark.report import ReportOptions, options_from
from ..spark.report import report as build_report
from ._text import plain


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``kip714 report``."""
    p.description = plain(sys.modules["kip714.spark.report"].__doc__)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument(
        "source",
        nargs="+",
        metavar="RECORDING_OR_POINTS",
        help="a kip714 serve/proxy --record folder, a folder of such recordings (a fleet's ROOT/REPLICA), "
        "several of them (read as one, each recording once), or a kip714 pipeline output folder "
        "(points/, errors/)",
    )
    p.add_argument(
        "--out",
        default="kip714-report",
        help="where report.html, conformance.json, insights.json, summary.txt and tables/ go (default kip714-report)",
    )
    p.add_argument("--master", help="Spark master URL (default local[*], or the one spark-submit gives)")
    p.add_argument("--closed", help="a _closed folder of connection-closed rows to use (default: the recording's)")
    g = p.add_argument_group("thresholds (see kip714.spark.report.ReportOptions)")
    defaults = ReportOptions()
    for f in dataclasses.fields(ReportOptions):
        g.add_argument(
            "--" + f.name.replace("_", "-"),
            dest=f.name,
            type=type(getattr(defaults, f.name)),
            default=None,
            metavar="N",
            help=f"default {getattr(defaults, f.name)}",
        )
    p.add_argument("--json", action="store_true", help="print conformance and insights as JSON instead of the summary")


def run(args: argparse.Namespace) -> int:
    import json

    from ..spark.decode import recording_paths
    from ..spark.session import local_session

    require("spark", "this command")
    sources = list(args.source)
    points = len(sources) == 1 and "://" not in sources[0] and (pathlib.Path(sources[0]) / "points").is_dir()
    if not points:
        recording_paths(sources)  # a missing or empty input says so before Spark starts
    spark = local_session(args.master, app_name="kip714-report")
    rep = build_report(
        sources[0] if len(sources) == 1 else sources, spark, options=options_from(args), closed=args.closed
    )
    data = rep.write(args.out)
    if args.json:
        from ..spark.report_html import CONFORMANCE_FIELDS, INSIGHT_FIELDS

        print(
            json.dumps(
                {
                    "conformance": [{k: r[k] for k in CONFORMANCE_FIELDS} for r in data["conformance"]],
                    "insights": [{k: r[k] for k in INSIGHT_FIELDS} for r in data["insights"]],
                }
            )
        )
    else:
        print(data["summary"])
    sys.stdout.flush()
    return 0
