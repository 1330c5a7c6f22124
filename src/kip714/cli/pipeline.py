"""``kip714 pipeline``: bulk-decode frames or a recording on Spark (the job and its arguments are
:mod:`kip714.spark.pipeline`, which :mod:`kip714.spark.submit` runs under spark-submit too)."""

from __future__ import annotations

import argparse

from .._extras import require
from ..spark import pipeline as _pipeline
from ._text import plain


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``kip714 pipeline``."""
    p.description, p.formatter_class = plain(_pipeline.__doc__), argparse.RawDescriptionHelpFormatter
    _pipeline.add_arguments(p)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``kip714 pipeline``."""
    require("spark", "this command")
    return _pipeline.run_job(args)
