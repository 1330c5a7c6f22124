"""``kip714 serve``: a KIP-714 telemetry endpoint real clients push to (not a Kafka broker).

Also the option groups ``serve`` and ``proxy`` share (subscriptions, recording, client-side TLS, limits,
running; the exporters' are in :mod:`._sinks`) and the helpers that turn them into a broker, a TLS context
and a running endpoint."""

from __future__ import annotations

import argparse
import logging
import socket
import ssl
from typing import Any

from .._enums import (
    COMPRESSION_NAMES,
    DEFAULT_ACCEPTED_COMPRESSION_TYPES,
    DEFAULT_MAX_BUFFERED_BYTES,
    DEFAULT_TELEMETRY_MAX_BYTES,
    INSTANCE_CACHE_MAX_SIZE,
    SERVE_FRAME_HEADROOM,
    compression_type_from_name,
    serve_max_frame_bytes,
)
from .._extras import available, require
from .._units import DURATION_HELP, duration, format_duration, format_size, size
from ..broker import TelemetryBroker
from ..broker.subscription_layers import SubscriptionLayers
from ..broker.subscriptions import ANONYMOUS_PRINCIPAL
from ..endpoint.connection import warn_if_no_subscription
from ..endpoint.health import Health
from ..endpoint.proxy_protocol import HEADER_TIMEOUT_S, LOOPBACK, ProxyProtocol
from ..endpoint.server import TelemetryServer
from ..endpoint.subscription_file import SubscriptionFileWatcher
from ..errors import InvalidConfigError
from ..sinks import ParquetRecorder
from ..sinks.recorder import ROLL_BYTES, ROLL_INTERVAL_S
from ..wire import DEFAULT_MAX_FRAME_BYTES
from ._args import advertised_port, host, node_id, port
from ._service import ServiceRunner, add_service_options, build_admin, build_subscriptions
from ._settings import Settings, add_settings_options, resolve
from ._sinks import add_sink_options, build_sinks, load_cert_chain

log = logging.getLogger("kip714.serve")
_ACCEPTED = ",".join(COMPRESSION_NAMES[c] for c in DEFAULT_ACCEPTED_COMPRESSION_TYPES)


def add_subscription_options(p, default_name: str) -> None:
    """The subscription and broker options (kafka-client-metrics.sh's, plus the broker's settings)."""
    g = p.add_argument_group("subscriptions (as kafka-client-metrics.sh sets them)")
    g.add_argument("--metrics", help="metric-name prefixes of a subscription, comma separated ('*' for all)")
    g.add_argument(
        "--interval-ms",
        type=int,
        help="push interval of that subscription in ms, 100-3600000 (default 300000, Kafka's)",
    )
    g.add_argument("--match", help="selectors of that subscription, e.g. client_software_name=apache-kafka-java")
    g.add_argument(
        "--subscription-name", default=default_name, help=f"name of that subscription (default {default_name})"
    )
    g.add_argument(
        "--config",
        help="subscriptions file (JSON when it starts with '{', else lines "
        "'NAME metrics=[..],interval.ms=..,match=[..]'); "
        "reloaded on change, which bumps SubscriptionIds like Kafka; a version with any invalid "
        "entry changes nothing (the last good one keeps serving, the error is logged once)",
    )
    g.add_argument(
        "--accepted-compression",
        default=_ACCEPTED,
        help=f"AcceptedCompressionTypes in preference order (default {_ACCEPTED})",
    )
    g.add_argument(
        "--telemetry-max-bytes",
        type=size,
        default=DEFAULT_TELEMETRY_MAX_BYTES,
        help=f"telemetry.max.bytes (default {DEFAULT_TELEMETRY_MAX_BYTES})",
    )
    g.add_argument(
        "--max-instances",
        type=int,
        default=INSTANCE_CACHE_MAX_SIZE,
        help=f"client instances kept (LRU; default {INSTANCE_CACHE_MAX_SIZE})",
    )
    g.add_argument(
        "--jdk",
        type=int,
        default=17,
        help="the Java version of the brokers to agree with on SubscriptionIds (their HashSet order "
        "changed in JDK 19): e.g. 11, 17 or 21 (default 17)",
    )
    g.add_argument(
        "--record",
        metavar="DIR",
        help="record every push (accepted or not) as Parquet files in DIR "
        "(the input of 'kip714 pipeline' and kip714.spark)",
    )
    g.add_argument(
        "--record-roll-bytes",
        type=size,
        default=ROLL_BYTES,
        metavar="SIZE",
        help=f"start a new recording file when the current one reaches this size (default {format_size(ROLL_BYTES)})",
    )
    g.add_argument(
        "--record-roll-interval",
        type=duration,
        default=ROLL_INTERVAL_S,
        metavar="DURATION",
        help=f"start a new recording file after this long (default {format_duration(ROLL_INTERVAL_S)}); "
        "rows reach the disk every second either way, in DIR/_open/ until the file rolls",
    )
    g.add_argument(
        "--record-sync",
        action="store_true",
        help="answer a push only once its row is durably on disk (group commit: the rows that arrive "
        "while one commit is written form the next; each part and the folders fsync'd), so a "
        "crash or kill -9 loses no push a client was told was accepted. Costs throughput when few "
        "pushes are in flight (measured: 1270 vs 3460 pushes/s with 32 in flight, 7670 vs 8850 "
        "with 512, ~20 ms more latency; kip714 bench --only record). A failed write closes the client's connection "
        "instead of answering. Default off: rows are written every second, not fsync'd, and a "
        "kill -9 loses up to that second",
    )


def add_tls_options(p) -> None:
    """Client-side TLS: clients connect with ``security.protocol=SSL``."""
    g = p.add_argument_group("TLS toward clients")
    g.add_argument(
        "--tls-cert",
        metavar="PEM",
        help="certificate chain (PEM): take TLS connections only (clients use security.protocol=SSL)",
    )
    g.add_argument("--tls-key", metavar="PEM", help="private key of --tls-cert (PEM; default: inside --tls-cert)")


def add_proxy_protocol_options(p, what: str = "serve") -> None:
    """The PROXY protocol behind a TCP load balancer (HAProxy's ``send-proxy``/``send-proxy-v2``)."""
    g = p.add_argument_group("behind a TCP load balancer: the PROXY protocol")
    listeners = "every listener (bootstrap and brokers)" if what == "proxy" else "the listener"
    g.add_argument(
        "--proxy-protocol",
        action="store_true",
        help=f"every client connection on {listeners} must open with a PROXY protocol header, v1 or v2 "
        "(HAProxy's send-proxy or send-proxy-v2, before TLS when TLS is on): the client's address and "
        "port in it become client_source_address/client_source_port (the broker's labels, the "
        "recording, Prometheus); a LOCAL or UNKNOWN header keeps the socket's. A connection without a "
        f"whole valid header within {HEADER_TIMEOUT_S:g}s, or from a peer outside --proxy-protocol-from, "
        "is closed and counted in kip714_proxy_protocol_refused_total{reason} (default off: the socket's "
        "address is the client's)",
    )
    g.add_argument(
        "--proxy-protocol-from",
        metavar="CIDR[,CIDR...]",
        help="the load balancers allowed to send the header, e.g. 10.0.0.0/24,10.1.2.3 (connections "
        "from anywhere else are refused: a header names any address it likes, so only the balancers "
        f"may send one); needs --proxy-protocol (default {','.join(LOOPBACK)}, loopback only)",
    )


def proxy_protocol_of(args: Any) -> ProxyProtocol | None:
    """The :class:`ProxyProtocol` of ``--proxy-protocol``/``--proxy-protocol-from`` (None when off)."""
    if not getattr(args, "proxy_protocol", False):
        if getattr(args, "proxy_protocol_from", None):
            raise InvalidConfigError("--proxy-protocol-from needs --proxy-protocol")
        return None
    return ProxyProtocol(args.proxy_protocol_from or LOOPBACK)


def add_run_options(p, proxy: bool = False) -> None:
    """Limits, logging and how long to run (``proxy``: its frame limit is Kafka's, it forwards any request)."""
    g = p.add_argument_group("limits and running")
    g.add_argument(
        "--max-connections", type=int, default=10000, help="client connections (more are refused; default 10000)"
    )
    g.add_argument(
        "--idle-timeout",
        type=duration,
        default=600.0,
        metavar="DURATION",
        help="close a connection with no complete request for this long (default 10m)",
    )
    if proxy:
        g.add_argument(
            "--max-frame-bytes",
            type=size,
            default=DEFAULT_MAX_FRAME_BYTES,
            metavar="SIZE",
            help="largest request/response frame; a larger size prefix closes the connection before "
            f"anything is buffered (default {format_size(DEFAULT_MAX_FRAME_BYTES)}, Kafka's "
            "socket.request.max.bytes)",
        )
    else:
        g.add_argument(
            "--max-frame-bytes",
            type=size,
            metavar="SIZE",
            help="largest request frame; a larger size prefix closes the connection before anything "
            "is buffered, as Kafka does (default --telemetry-max-bytes + "
            f"{format_size(SERVE_FRAME_HEADROOM)}, i.e. "
            f"{format_size(serve_max_frame_bytes(DEFAULT_TELEMETRY_MAX_BYTES))} by default: "
            "what ApiVersions, Metadata and the telemetry requests can need)",
        )
    captured = "telemetry, ApiVersions and SASL requests the proxy reads whole" if proxy else "requests"
    g.add_argument(
        "--max-buffered-bytes",
        type=size,
        default=DEFAULT_MAX_BUFFERED_BYTES,
        metavar="SIZE",
        help=f"bytes held in unfinished {captured} across all connections; over it the connections "
        "holding the most are closed (counted as dropped_memory_budget), so resident memory "
        "stays within about this much above the baseline "
        f"(default {format_size(DEFAULT_MAX_BUFFERED_BYTES)})",
    )
    g.add_argument(
        "--summary-interval",
        type=duration,
        default=10.0,
        metavar="DURATION",
        help="time between summary log lines, 0 for none (default 10s)",
    )
    g.add_argument(
        "--duration",
        type=duration,
        metavar="DURATION",
        help=f"stop after this long ({DURATION_HELP}; default: run until SIGINT/SIGTERM)",
    )
    g.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="log lines on stderr at this level and above (default info)",
    )
    g.add_argument(
        "--loop",
        default="auto",
        choices=["auto", "asyncio", "uvloop"],
        help="event loop: uvloop (libuv; its transports move bytes with less CPU per request) or "
        "asyncio's own; auto (default) takes uvloop when it is installed (pip install "
        "'kip714[fast]')",
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``kip714 serve``."""
    p.description = (
        "A KIP-714 telemetry endpoint: answers ApiVersions, Metadata (itself as the only broker, "
        "no topics), GetTelemetrySubscriptions and PushTelemetry exactly as Apache Kafka 4.1+ does. "
        "It is not a Kafka broker: use it to collect client telemetry or to test a client's KIP-714 "
        "support. Subscription options follow kafka-client-metrics.sh. Without --metrics, --match, "
        "--interval-ms or --config there is no subscription, so clients (as with Kafka) get an empty "
        "one and never push: serve says so at start-up."
    )
    p.add_argument("--host", type=host, default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=port, default=9092, help="port to listen on (default 9092; 0 picks a free one)")
    p.add_argument("--advertised-host", type=host, help="host clients are told to connect to (for clients behind NAT)")
    p.add_argument("--advertised-port", type=advertised_port, help="port clients are told to connect to")
    p.add_argument("--node-id", type=node_id, default=1, help="this endpoint's node id (default 1)")
    p.add_argument(
        "--replica-id",
        metavar="ID",
        default=socket.gethostname(),
        help="this endpoint's name in recordings (the kip714_replica column), when several record side by "
        "side, each into its own --record folder (default: the host name)",
    )
    add_subscription_options(p, "kip714-serve")
    add_tls_options(p)
    add_proxy_protocol_options(p)
    add_run_options(p)
    add_sink_options(p)
    add_service_options(p)
    add_settings_options(p)


def setup_logging(args: Any) -> None:
    """Log lines as ``TIME LEVEL LOGGER [replica=ID] event=...`` (a proxy replica names itself, so a fleet's logs
    gathered in one place still say which replica said what)."""
    replica = getattr(args, "replica_id", None)
    name = f"replica={replica} " if replica else ""
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format=f"%(asctime)s %(levelname)s %(name)s {name.replace('%', '%%')}%(message)s",
    )


def build_broker(
    args: Any, node_id: int = 0
) -> tuple[TelemetryBroker, SubscriptionFileWatcher | None, SubscriptionLayers]:
    """The broker the subscription options describe, the watcher of ``--config`` (or None) and the sources of
    the subscriptions (config file, ``--config``, flags, ``--state-dir``)."""
    layers, watcher = build_subscriptions(args)
    accepted = [compression_type_from_name(c) for c in args.accepted_compression.split(",") if c.strip()]
    broker = TelemetryBroker(
        layers.registry,
        telemetry_max_bytes=args.telemetry_max_bytes,
        accepted_compression_types=accepted,
        max_instances=args.max_instances,
        node_id=node_id,
    )
    return broker, watcher, layers


def recorder_of(args: Any) -> ParquetRecorder | None:
    """The recorder ``--record`` asks for (None without it), its rows carrying ``--replica-id``."""
    if not args.record:
        if getattr(args, "record_sync", False):
            raise InvalidConfigError("--record-sync needs --record DIR")
        return None
    return ParquetRecorder(
        args.record,
        roll_bytes=args.record_roll_bytes,
        roll_interval_s=args.record_roll_interval,
        sync=args.record_sync,
        replica=getattr(args, "replica_id", None),
    )


def build_outputs(
    args: Any, broker: TelemetryBroker, layers: SubscriptionLayers
) -> tuple[ParquetRecorder | None, Health, list[Any]]:
    """What an endpoint's pushes and state go out to: the recorder ``--record`` asks for (None without it),
    the health of ``/healthz``, ``/readyz`` and the endpoint's metrics (with the state store when a fleet
    shares it), and the exporters ``--prometheus``/``--otlp-endpoint`` ask for, added to ``broker`` as
    receivers (the health served next to /metrics)."""
    recorder = recorder_of(args)
    health = Health(None, recorder)
    if layers.store is not None and layers.store.shared:
        health.state_store = layers.store
    sinks = build_sinks(args, recorder, health)
    for sink in sinks:
        broker.add_receiver(sink)
    return recorder, health, sinks


def server_tls(args: Any) -> ssl.SSLContext | None:
    """A server-side TLS context from ``--tls-cert``/``--tls-key`` (None without ``--tls-cert``)."""
    if not args.tls_cert:
        if args.tls_key:
            raise InvalidConfigError("--tls-key needs --tls-cert")
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    load_cert_chain(ctx, args.tls_cert, args.tls_key, "--tls-cert", "--tls-key")
    return ctx


def loop_factory(choice: str):
    """The event-loop factory ``--loop`` names: None (asyncio's default loop) for ``asyncio``, uvloop's for
    ``uvloop`` (MissingExtraError when it is not installed) and for ``auto`` when uvloop is installed."""
    if choice == "asyncio" or (choice == "auto" and not available("uvloop")):
        return None
    require("uvloop", "--loop uvloop")
    import uvloop

    return uvloop.new_event_loop


def require_extras(args: Any) -> None:
    """The extras the options of ``serve``/``proxy`` need are installed (MissingExtraError naming the option
    and the extra otherwise): checked before anything starts."""
    if getattr(args, "prometheus", None):
        require("prometheus", "--prometheus")
    if getattr(args, "otlp_endpoint", None):
        require("otlp", "--otlp-endpoint")
    if getattr(args, "loop", "auto") == "uvloop":
        require("uvloop", "--loop uvloop")
    if getattr(args, "state_topic", None):
        require("fleet", "--state-topic")


def start_service(args: Any) -> Settings | None:
    """Apply ``--config-file`` and the ``KIP714_*`` environment to ``args``; print them and return None for
    ``--print-config``. Otherwise check the extras the options need and set the logging up."""
    settings = resolve(args)
    if args.print_config:
        print(settings.render(), end="")
        return None
    require_extras(args)
    setup_logging(args)
    return settings


def run_service(
    endpoint: Any,
    args: Any,
    settings: Settings,
    layers: SubscriptionLayers,
    watcher: SubscriptionFileWatcher | None,
    health: Health,
    sinks: list[Any],
) -> int:
    """Run ``endpoint`` (a :class:`~kip714.TelemetryServer` or :class:`~kip714.TelemetryProxy`) as a service
    (:class:`~._service.ServiceRunner`) until SIGTERM or ``--duration``, then drain it; its final summary is
    its ``event=stopped`` log line. Returns the exit status."""
    health.endpoint = endpoint
    ServiceRunner(
        endpoint,
        args,
        settings,
        layers=layers,
        watcher=watcher,
        health=health,
        sinks=sinks,
        loop_factory=loop_factory(getattr(args, "loop", "auto")),
    ).run()
    return 0


def run(args: Any) -> int:
    """Entry point of ``kip714 serve``."""
    settings = start_service(args)
    if settings is None:
        return 0
    broker, watcher, layers = build_broker(args, args.node_id)
    admin = build_admin(args, layers, "kip714 serve")
    if admin.principals:
        log.warning(
            "event=admin_principals kip714 serve authenticates nobody: every client is %s, so "
            "--admin-principals only matches that (use --admin-open on a trusted listener)",
            ANONYMOUS_PRINCIPAL,
        )
    warn_if_no_subscription(broker)
    recorder, health, sinks = build_outputs(args, broker, layers)
    server = TelemetryServer(
        broker,
        args.host,
        args.port,
        advertised_host=args.advertised_host,
        advertised_port=args.advertised_port,
        recorder=recorder,
        max_connections=args.max_connections,
        idle_timeout_s=args.idle_timeout,
        max_frame_bytes=args.max_frame_bytes,
        max_buffered_bytes=args.max_buffered_bytes,
        summary_interval_s=args.summary_interval,
        ssl=server_tls(args),
        admin=admin,
        proxy_protocol=proxy_protocol_of(args),
    )
    return run_service(server, args, settings, layers, watcher, health, sinks)
