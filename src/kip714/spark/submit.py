"""The ``kip714 pipeline`` job as a file for ``spark-submit`` (absolute imports, so Spark can run it as a
script): the same arguments as ``kip714 pipeline``, with the master ``spark-submit`` was given.

    spark-submit --master 'local[2]' "$(python -m kip714.spark.submit --path)" recording/ out/

``--path`` (alone) prints this file's path. On a cluster every executor needs kip714 installed (it has
compiled extensions): install the wheel on the nodes or ship a packed virtual environment
(``--archives venv.tar.gz#venv --conf spark.pyspark.python=./venv/bin/python``).
"""

import argparse
import sys
from collections.abc import Sequence

from kip714.errors import SparkJobError
from kip714.spark.pipeline import add_arguments, run_job


def run(argv: Sequence[str] | None = None) -> int:
    """Run the ``kip714 pipeline`` job with ``argv`` (default: this script's arguments)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv == ["--path"]:
        print(__file__)
        return 0
    parser = argparse.ArgumentParser(
        prog="kip714.spark.submit",
        description="The kip714 pipeline job under spark-submit (kip714 pipeline --help describes it).",
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_job(args)
    except SparkJobError as exc:  # what ran out and what to raise, in one line (--verbose: Spark's error)
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(run())
