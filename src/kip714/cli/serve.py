"""``kip714 serve``: a KIP-714 telemetry endpoint real clients push to (not a Kafka broker)."""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any

import kip714

from .._enums import (COMPRESSION_NAMES, DEFAULT_ACCEPTED_COMPRESSION_TYPES, DEFAULT_TELEMETRY_MAX_BYTES,
                      compression_type_from_name)
from ..broker import SubscriptionRegistry, TelemetryBroker
from ..endpoint.server import TelemetryServer
from ..endpoint.subscription_file import SubscriptionFileWatcher
from ..sinks import ParquetRecorder
from ._sinks import add_sink_options, build_sinks

_ACCEPTED = ",".join(COMPRESSION_NAMES[c] for c in DEFAULT_ACCEPTED_COMPRESSION_TYPES)


def add_parser(sub) -> None:
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
    p.add_argument("--accepted-compression", default=_ACCEPTED,
                   help=f"AcceptedCompressionTypes in preference order (default {_ACCEPTED})")
    p.add_argument("--telemetry-max-bytes", type=int, default=DEFAULT_TELEMETRY_MAX_BYTES,
                   help=f"telemetry.max.bytes (default {DEFAULT_TELEMETRY_MAX_BYTES})")
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
    add_sink_options(p)
    p.set_defaults(func=run)


def run(args: Any) -> int:
    """Entry point of ``kip714 serve``."""
    logging.basicConfig(level=getattr(logging, args.log_level.upper()),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    registry = SubscriptionRegistry(jdk=args.jdk)
    watcher = None
    if args.config:
        watcher = SubscriptionFileWatcher(registry, args.config)
    if args.metrics is not None or args.match or args.interval_ms is not None:
        cfg = {"metrics": args.metrics if args.metrics is not None else "*"}
        if args.interval_ms is not None:
            cfg["interval.ms"] = str(args.interval_ms)
        if args.match:
            cfg["match"] = args.match
        registry.set(args.subscription_name, cfg)
    accepted = [compression_type_from_name(c) for c in args.accepted_compression.split(",") if c.strip()]
    broker = TelemetryBroker(registry, telemetry_max_bytes=args.telemetry_max_bytes,
                             accepted_compression_types=accepted, max_instances=args.max_instances,
                             node_id=args.node_id)
    recorder = ParquetRecorder(args.record) if args.record else None
    sinks = build_sinks(args, recorder)
    for sink in sinks:
        broker.add_receiver(sink)
    server = TelemetryServer(broker, args.host, args.port, advertised_host=args.advertised_host,
                             advertised_port=args.advertised_port, recorder=recorder,
                             max_connections=args.max_connections, idle_timeout_s=args.idle_timeout,
                             max_frame_bytes=args.max_frame_bytes, summary_interval_s=args.summary_interval)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):
                pass
        tasks = [asyncio.create_task(watcher.watch())] if watcher else []
        try:
            await server.serve(args.duration, stop)
        finally:
            for t in tasks:
                t.cancel()

    try:
        asyncio.run(run())
    finally:
        for sink in sinks:
            sink.close()
    print(server.summary())
    return 0
