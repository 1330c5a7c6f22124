"""``kip714 simulate``: a simulated fleet of Kafka clients pushing realistic KIP-714 telemetry
(the fleet itself is :mod:`kip714.tools.simulate`)."""

from __future__ import annotations

import argparse
import os
import sys

from .._enums import INSTANCE_CACHE_MAX_SIZE
from .._units import DURATION_HELP, duration
from ..broker import SubscriptionRegistry, TelemetryBroker
from ..tools.simulate import CODECS, SOFTWARE_PRESETS, Fleet, FleetStats
from ._args import node_id


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``kip714 simulate``."""
    p.description = (
        "Simulate producers and consumers (Java and/or librdkafka style) and Kafka Streams applications "
        "pushing KIP-714 telemetry. "
        "By default the fleet runs in-process against a TelemetryBroker on a simulated clock "
        "(hours of telemetry in seconds); --connect drives it over TCP against a kip714 serve "
        "endpoint in real time."
    )
    p.add_argument("--producers", type=int, default=10, help="simulated producers (default 10)")
    p.add_argument("--consumers", type=int, default=10, help="simulated consumers (default 10)")
    p.add_argument(
        "--streams",
        type=int,
        default=0,
        metavar="N",
        help="simulated Kafka Streams applications (default 0): each an admin client pushing the client-level "
        "org.apache.kafka.stream.* metrics and the main consumer of each stream thread pushing the thread "
        "and task metrics (KIP-1076/1091/1221)",
    )
    p.add_argument(
        "--streams-threads", type=int, default=2, metavar="N", help="stream threads per application (default 2)"
    )
    p.add_argument(
        "--streams-version",
        default="4.2.0",
        metavar="VERSION",
        help="the Kafka Streams version the applications run, which decides the tags (default 4.2.0)",
    )
    p.add_argument(
        "--duration",
        type=duration,
        default=600.0,
        metavar="DURATION",
        help=f"how long: simulated time in-process, real time with --connect ({DURATION_HELP}; default 10m)",
    )
    p.add_argument(
        "--interval-ms",
        type=int,
        default=1000,
        help="push interval of the in-process subscription (default 1000; with --connect the "
        "server's subscriptions apply)",
    )
    p.add_argument(
        "--metrics",
        default="*",
        help="metrics of the in-process subscription: '*' or comma-separated prefixes (default '*')",
    )
    p.add_argument(
        "--codec",
        default="zstd",
        choices=sorted(CODECS) + ["mixed", "any"],
        help="compression the clients use (mixed: each client picks one; any: the broker's preference; default zstd)",
    )
    p.add_argument(
        "--software",
        default="java",
        choices=sorted(SOFTWARE_PRESETS),
        help="client software: Java clients, librdkafka clients, or a mix (default java)",
    )
    p.add_argument("--brokers", type=int, default=3, help="broker node ids the clients talk to (default 3)")
    p.add_argument("--cumulative", action="store_true", help="in-process broker asks for cumulative temporality")
    p.add_argument(
        "--record",
        metavar="DIR",
        help="in-process: record every push as Parquet in DIR (the kip714 serve --record schema)",
    )
    p.add_argument(
        "--connect",
        metavar="HOST:PORT",
        help="drive the fleet over TCP against this endpoint in real time (loopback only unless --allow-remote)",
    )
    p.add_argument("--allow-remote", action="store_true", help="allow --connect to a non-loopback address")
    p.add_argument("--step-ms", type=int, default=10, help="in-process poll granularity (default 10)")
    p.add_argument("--node-id", type=node_id, default=1, help="node id of the in-process broker (default 1)")
    p.add_argument("--seed", default="0", help="random seed (default 0)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def run(args: argparse.Namespace) -> int:
    """Entry point of ``kip714 simulate``. Exit status 0, or 1 when no push was accepted or a protocol error
    (anything but throttling) was answered."""
    duration_ms = round(args.duration * 1000)
    codec = None if args.codec == "any" else args.codec
    fleet = Fleet(
        args.producers,
        args.consumers,
        seed=args.seed,
        brokers=args.brokers,
        software=args.software,
        codec=codec,
        n_streams=args.streams,
        streams_threads=args.streams_threads,
        streams_version=args.streams_version,
    )
    tty = sys.stderr.isatty()

    def progress(st: FleetStats) -> None:
        if args.quiet:
            return
        print(("\r" if tty else "") + st.progress_line(), end="" if tty else "\n", file=sys.stderr, flush=True)

    if args.connect:
        host, sep, port = args.connect.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"--connect takes HOST:PORT, not {args.connect!r}")
        host = host.strip("[]")
        stats = fleet.run_tcp(host, int(port), duration_ms / 1000.0, allow_remote=args.allow_remote, progress=progress)
    else:
        registry = SubscriptionRegistry()
        registry.set("kip714-simulate", {"metrics": args.metrics, "interval.ms": str(args.interval_ms)})
        broker = TelemetryBroker(
            registry,
            node_id=args.node_id,
            delta_temporality=not args.cumulative,
            max_instances=max(INSTANCE_CACHE_MAX_SIZE, 2 * len(fleet)),
        )
        recorder = None
        if args.record:
            from ..sinks import ParquetRecorder

            recorder = ParquetRecorder(args.record, flush_interval_s=5.0)
        try:
            stats = fleet.run_in_process(
                broker, duration_ms, step_ms=args.step_ms, recorder=recorder, progress=progress
            )
        finally:
            if recorder is not None:
                recorder.close()
    if tty and not args.quiet:
        print(file=sys.stderr)
    print(stats.summary())
    if args.record and not args.connect:
        print(f"recording: {os.path.abspath(args.record)}")
    return 0 if stats.accepted and not stats.protocol_errors else 1
