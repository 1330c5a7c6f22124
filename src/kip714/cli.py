"""The ``kip714`` command line."""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from collections.abc import Iterable, Sequence

import kip714

from . import otlp_pb

SAMPLES = pathlib.Path(__file__).parent / "samples"


# ------------------------------------------------------------------------------------------ helpers

def _table(rows: Sequence[Sequence[object]], headers: Sequence[str]) -> str:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cells[0], widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells[1:]]
    return "\n".join(lines)


def _codec_name(ctype: int) -> str:
    try:
        return kip714.CompressionType(ctype).name.lower()
    except ValueError:
        return f"unknown({ctype})"


def iter_frames(paths: Iterable[pathlib.Path], max_frame_bytes: int):
    """(path, index, frame bytes) for every size-prefixed frame in the files; leftover bytes are an error."""
    for path in paths:
        data = path.read_bytes()
        frames, consumed = kip714.split_frames(data, max_frame_bytes)
        if consumed != len(data):
            raise kip714.MalformedFrameError(f"{path}: {len(data) - consumed} bytes after the last whole frame")
        for i, frame in enumerate(frames):
            yield path, i, frame


def decode_push(frame, max_output: int):
    """Decode one PushTelemetry frame: (request, decompressed payload, data-point rows)."""
    req = kip714.decode_request(frame)
    body = req.body
    if not isinstance(body, kip714.PushTelemetryRequest):
        return req, None, []
    metrics = body.metrics if body.metrics is not None else b""
    payload = kip714.decompress(metrics, body.compression_type, max_output) if len(metrics) else b""
    return req, payload, otlp_pb.flatten(payload)


# -------------------------------------------------------------------------------------- subcommands

def cmd_decode(args: argparse.Namespace) -> int:
    """Decode frame files and print one row per data point (or JSON lines)."""
    paths = [pathlib.Path(p) for p in args.files]
    status = 0
    out_rows = []
    for path, index, frame in iter_frames(paths, args.max_frame_bytes):
        source = f"{path.name}#{index}"
        try:
            req, payload, rows = decode_push(frame, args.max_output)
        except kip714.Kip714Error as exc:
            print(f"{source}: {type(exc).__name__} (error code {exc.error_code.value} "
                  f"{exc.error_code.name}): {exc}", file=sys.stderr)
            status = 1
            continue
        h, body = req.header, req.body
        if args.json:
            base = {"source": source, "api_key": h.api_key, "correlation_id": h.correlation_id,
                    "client_id": h.client_id}
            if isinstance(body, kip714.PushTelemetryRequest):
                base.update(client_instance_id=str(body.client_instance_id), subscription_id=body.subscription_id,
                            terminating=body.terminating, compression=_codec_name(body.compression_type))
            for row in rows or [{}]:
                print(json.dumps({**base, **row}, default=str))
            continue
        if not isinstance(body, kip714.PushTelemetryRequest):
            print(f"{source}: {type(body).__name__} correlation_id={h.correlation_id} client_id={h.client_id}")
            continue
        print(f"{source}: PushTelemetry client_id={h.client_id} instance={body.client_instance_id} "
              f"subscription={body.subscription_id} codec={_codec_name(body.compression_type)} "
              f"wire={body.metrics_size}B otlp={len(payload)}B terminating={body.terminating} "
              f"points={len(rows)}")
        for r in rows:
            attrs = ",".join(f"{k}={v}" for k, v in r["attributes"].items())
            value = r["value_int"] if r["value_int"] is not None else r["value"]
            out_rows.append((r["metric"], r["kind"], r["temporality"] or "", attrs, value))
        if out_rows and not args.summary:
            print(_table(out_rows, ("metric", "kind", "temporality", "attributes", "value")))
        out_rows.clear()
    return status


def cmd_demo(args: argparse.Namespace) -> int:
    """``kip714 demo --captures``: decode the bundled real librdkafka captures and show what they reported."""
    started = time.perf_counter()
    paths = sorted(SAMPLES.glob("*.bin"))
    print(f"kip714 {kip714.__version__}: decoding {len(paths)} real PushTelemetry frames captured from "
          f"librdkafka 2.16 (confluent-kafka) clients\n")
    summary, latency = [], []
    for path, _, frame in iter_frames(paths, kip714.DEFAULT_MAX_FRAME_BYTES):
        req, payload, rows = decode_push(frame, 1 << 20)
        body = req.body
        summary.append((path.stem, req.header.client_id, _codec_name(body.compression_type), body.metrics_size,
                        len(payload), len(rows)))
        for r in rows:
            if r["metric"].endswith(("node.request.latency.avg", "node.request.latency.max")):
                latency.append((req.header.client_id, _codec_name(body.compression_type),
                                r["metric"].rsplit(".", 1)[-1], r["attributes"].get("node.id"),
                                r["value_int"] if r["value_int"] is not None else r["value"]))
    print(_table(summary, ("capture", "client", "codec", "wire bytes", "otlp bytes", "points")))
    print("\nPer-node request latency (ms) reported by each client:\n")
    print(_table(latency, ("client", "codec", "stat", "node.id", "latency ms")))
    print(f"\n{sum(s[-1] for s in summary)} data points from {len(summary)} frames in "
          f"{(time.perf_counter() - started) * 1000:.1f} ms")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kip714", description=__doc__.strip() + " (KIP-714 client telemetry).")
    parser.add_argument("--version", action="version", version=f"kip714 {kip714.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("decode", help="decode size-prefixed request frames (files of one or more frames)",
                       description=cmd_decode.__doc__)
    p.add_argument("files", nargs="+", help="frame files (each holds one or more size-prefixed frames)")
    p.add_argument("--json", action="store_true", help="print JSON lines, one per data point")
    p.add_argument("--summary", action="store_true", help="one line per frame, no data-point table")
    p.add_argument("--max-output", type=int, default=1 << 20,
                   help="largest decompressed payload accepted (default 1048576, Kafka's telemetry.max.bytes)")
    p.add_argument("--max-frame-bytes", type=int, default=kip714.DEFAULT_MAX_FRAME_BYTES,
                   help="largest frame accepted (default 104857600)")
    p.set_defaults(func=cmd_decode)

    p = sub.add_parser(
        "serve", help="run a KIP-714 telemetry endpoint real clients push to (not a Kafka broker)",
        description="A KIP-714 telemetry endpoint: answers ApiVersions, Metadata (itself as the only broker, "
                    "no topics), GetTelemetrySubscriptions and PushTelemetry exactly as Apache Kafka 4.1+ does. "
                    "It is not a Kafka broker: use it to collect client telemetry or to test a client's KIP-714 "
                    "support. Subscription options follow kafka-client-metrics.sh.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=9092, help="port to listen on (default 9092; 0 picks a free one)")
    p.add_argument("--advertised-host", help="host clients are told to connect to (for clients behind NAT)")
    p.add_argument("--advertised-port", type=int, help="port clients are told to connect to")
    p.add_argument("--metrics", help="metric-name prefixes of a subscription, comma separated ('*' for all)")
    p.add_argument("--interval-ms", type=int, help="push interval of that subscription (100-3600000)")
    p.add_argument("--match", help="selectors of that subscription, e.g. client_software_name=apache-kafka-java")
    p.add_argument("--subscription-name", default="kip714-serve", help="name of that subscription")
    p.add_argument("--config", help="subscriptions file (JSON, or lines 'NAME metrics=[..],interval.ms=..,match=[..]'); "
                                    "reloaded on change, which bumps SubscriptionIds like Kafka")
    p.add_argument("--accepted-compression", default="zstd,lz4,gzip,snappy",
                   help="AcceptedCompressionTypes in preference order (default zstd,lz4,gzip,snappy)")
    p.add_argument("--telemetry-max-bytes", type=int, default=1048576, help="telemetry.max.bytes (default 1048576)")
    p.add_argument("--max-instances", type=int, default=16384, help="client instances kept (LRU; default 16384)")
    p.add_argument("--node-id", type=int, default=1, help="this endpoint's node id (default 1)")
    p.add_argument("--record", metavar="DIR", help="record every push (accepted or not) as Parquet files in DIR")
    p.add_argument("--jdk", type=int, default=17, help="Java HashSet order to match for SubscriptionIds (17 or 19+)")
    p.add_argument("--max-connections", type=int, default=10000)
    p.add_argument("--idle-timeout", type=float, default=600.0, help="close idle connections after this many seconds")
    p.add_argument("--max-frame-bytes", type=int, default=kip714.DEFAULT_MAX_FRAME_BYTES)
    p.add_argument("--summary-interval", type=float, default=10.0, help="seconds between summary log lines (0: off)")
    p.add_argument("--duration", type=float, help="stop after this many seconds (default: run until SIGINT/SIGTERM)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.set_defaults(func=lambda a: __import__("kip714.server", fromlist=["serve_main"]).serve_main(a))

    from .bench import add_bench_parser
    from .pipeline import add_pipeline_parser
    from .simulate import add_simulate_parser

    add_bench_parser(sub)

    add_simulate_parser(sub)
    add_pipeline_parser(sub)

    from .demo import add_demo_parser

    add_demo_parser(sub, cmd_demo)
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
