"""``kip714 demo``: the end-to-end demo (:mod:`kip714.tools.demo`), or ``--captures``: decode the bundled
real librdkafka captures."""

from __future__ import annotations

import argparse
import time

import kip714

from .._enums import DEFAULT_TELEMETRY_MAX_BYTES
from .._table import table as _table
from .._units import DURATION_HELP, duration
from ..tools import SAMPLES
from ..tools import demo as _demo
from ._text import codec_name as _codec_name
from ._text import plain
from .decode import decode_push, iter_frames


def captures(args: argparse.Namespace) -> int:
    """``kip714 demo --captures``: decode the bundled real librdkafka captures and show what they reported."""
    started = time.perf_counter()
    paths = sorted(SAMPLES.glob("*.bin"))
    print(
        f"kip714 {kip714.__version__}: decoding {len(paths)} real PushTelemetry frames captured from "
        f"librdkafka 2.16 (confluent-kafka) clients\n"
    )
    summary, latency = [], []
    for path, _, frame in iter_frames(paths, kip714.wire.DEFAULT_MAX_FRAME_BYTES):
        req, payload, rows = decode_push(frame, DEFAULT_TELEMETRY_MAX_BYTES)
        body = req.body
        assert payload is not None  # the captures are PushTelemetry requests
        summary.append(
            (
                path.stem,
                req.header.client_id,
                _codec_name(body.compression_type),
                body.metrics_size,
                len(payload),
                len(rows),
            )
        )
        for r in rows:
            if r["metric"].endswith(("node.request.latency.avg", "node.request.latency.max")):
                latency.append(
                    (
                        req.header.client_id,
                        _codec_name(body.compression_type),
                        r["metric"].rsplit(".", 1)[-1],
                        r["attributes"].get("node.id"),
                        r["value_int"] if r["value_int"] is not None else r["value"],
                    )
                )
    print(_table(summary, ("capture", "client", "codec", "wire bytes", "otlp bytes", "points")))
    print("\nPer-node request latency (ms) reported by each client:\n")
    print(_table(latency, ("client", "codec", "stat", "node.id", "latency ms")))
    print(
        f"\n{sum(s[-1] for s in summary)} data points from {len(summary)} frames in "
        f"{(time.perf_counter() - started) * 1000:.1f} ms"
    )
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``kip714 demo``."""
    p.description, p.formatter_class = plain(_demo.__doc__), argparse.RawDescriptionHelpFormatter
    p.add_argument(
        "--output", default="demo-output", help="where the recording, points, errors and chart go (default demo-output)"
    )
    p.add_argument(
        "--duration",
        "--seconds",
        type=duration,
        default=8.0,
        metavar="DURATION",
        help=f"how long the clients push ({DURATION_HELP}; default 8s)",
    )
    p.add_argument("--simulated", type=int, default=24, help="simulated clients (default 24)")
    p.add_argument("--master", help="Spark master (default local[*])")
    p.add_argument(
        "--captures", action="store_true", help="only decode the bundled librdkafka captures (no Spark, no network)"
    )


def run(args: argparse.Namespace) -> int:
    if args.captures:
        return captures(args)
    return _demo.run_demo(args.output, args.duration, args.simulated, args.master)
