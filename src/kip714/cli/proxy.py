"""``kip714 proxy``: a Kafka-protocol proxy in front of any cluster that collects KIP-714 telemetry."""

from __future__ import annotations

import argparse
import ssl
from typing import Any

from .._units import duration
from ..endpoint.proxy import TELEMETRY_MODES, TelemetryProxy, parse_broker_ports
from ..errors import InvalidConfigError
from ._args import advertised_port, host, port
from ._service import add_service_options, build_admin, upstream_client
from ._settings import add_settings_options
from ._sinks import add_sink_options, require_files
from .serve import (
    add_proxy_protocol_options,
    add_run_options,
    add_subscription_options,
    add_tls_options,
    build_broker,
    build_outputs,
    proxy_protocol_of,
    run_service,
    server_tls,
    start_service,
)

DESCRIPTION = """\
A Kafka-protocol proxy in front of an existing cluster that collects KIP-714 client telemetry with no broker
plugin. Point clients' bootstrap.servers at the proxy: every request is forwarded byte for byte to the
upstream broker it is meant for and every response comes back byte for byte, except the responses that
name broker addresses (Metadata, FindCoordinator, DescribeCluster), which are rewritten to the proxy's
listeners, and the ApiVersions answer (versions capped to what the proxy reads; Produce <= v9 and
Fetch <= v15, whose newer answers may name leaders' addresses).

Listeners: --port is the bootstrap listener; each upstream broker gets its own port, by default
--broker-port-base + node id (base = --port + 1), or the explicit --broker-ports map. The mapping is the
same in every replica and across restarts; a node id without a valid port closes the connection whose
response named it (never a real address to the client).

Telemetry (--telemetry): 'terminate' answers GetTelemetrySubscriptions/PushTelemetry itself (adds them to
ApiVersions when the cluster lacks them) with the subscriptions below, node_id = the upstream broker the
connection stands for; 'tap' lets the cluster answer and records each push with the cluster's error code;
'off' forwards telemetry untouched; 'auto' (default) is 'tap' when the cluster advertises both APIs, else
'terminate'. SASL PLAIN/SCRAM pass through and the user name becomes the principal (User:<name>).

Kafka's admin API for subscriptions (kafka-client-metrics.sh, kafka-configs.sh --entity-type client-metrics,
AdminClient): with --telemetry terminate, the CLIENT_METRICS resources of DescribeConfigs,
IncrementalAlterConfigs, AlterConfigs and ListConfigResources are answered by the proxy (a request that also
names topics, brokers or groups is split: the cluster answers those, one response goes back); with tap the
cluster answers them.

Not done: no ACLs or authentication of its own, no controller endpoints (bootstrap.controllers,
DescribeQuorum), no share groups (ShareFetch/ShareAcknowledge), no SASL GSSAPI/OAUTHBEARER principals,
no SaslHandshake v0."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``kip714 proxy``."""
    p.description, p.formatter_class = DESCRIPTION, argparse.RawDescriptionHelpFormatter
    g = p.add_argument_group("upstream and listeners")
    g.add_argument(
        "--upstream",
        required=True,
        metavar="HOST:PORT[,HOST:PORT...]",
        help="the cluster's bootstrap servers (the proxy connects nowhere a client names)",
    )
    g.add_argument("--host", type=host, default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    g.add_argument("--port", type=port, default=9092, help="bootstrap listener port (default 9092)")
    g.add_argument(
        "--broker-port-base",
        type=port,
        metavar="BASE",
        help="broker listener port = BASE + node id (default --port + 1)",
    )
    g.add_argument(
        "--broker-ports",
        metavar="ID=PORT[,ID=PORT...]",
        help="explicit broker listener ports, e.g. 1=9193,2=9194 (instead of --broker-port-base)",
    )
    g.add_argument("--advertised-host", type=host, help="host clients are told to connect to (for clients behind NAT)")
    g.add_argument(
        "--advertised-port",
        type=advertised_port,
        metavar="PORT",
        help="the bootstrap port clients use when a load balancer's ports differ from the listeners' "
        "(a Kubernetes NodePort, a cloud balancer): each broker is then advertised at its listener's "
        "port shifted by PORT - --port, unless --advertised-broker-port-base or "
        "--advertised-broker-ports says otherwise (default: the listening ports)",
    )
    g.add_argument(
        "--advertised-broker-port-base",
        type=advertised_port,
        metavar="BASE",
        help="broker node id N is advertised at port BASE + N in Metadata, FindCoordinator and "
        "DescribeCluster answers (default: see --advertised-port)",
    )
    g.add_argument(
        "--advertised-broker-ports",
        metavar="ID=PORT[,ID=PORT...]",
        help="explicit advertised broker ports, e.g. 1=31093,2=31094 (instead of "
        "--advertised-broker-port-base; a broker without one is an error on the connection whose "
        "answer names it; default: see --advertised-port)",
    )
    g.add_argument(
        "--telemetry", choices=TELEMETRY_MODES, default="auto", help="auto (default), terminate, tap or off (see above)"
    )
    g.add_argument(
        "--connect-timeout",
        type=duration,
        default=10.0,
        metavar="DURATION",
        help="time allowed to connect upstream (default 10s)",
    )
    u = p.add_argument_group("TLS toward the cluster")
    u.add_argument("--upstream-tls", action="store_true", help="connect to the cluster with TLS")
    u.add_argument(
        "--upstream-ca", metavar="PEM", help="CA certificates to verify the cluster with (default: the system's)"
    )
    add_subscription_options(p, "kip714-proxy")
    add_tls_options(p)
    add_proxy_protocol_options(p, "proxy")
    add_run_options(p, proxy=True)
    add_sink_options(p)
    add_service_options(p, proxy=True)
    add_settings_options(p)


def upstream_tls(args: Any) -> ssl.SSLContext | None:
    if not args.upstream_tls:
        if args.upstream_ca:
            raise InvalidConfigError("--upstream-ca needs --upstream-tls")
        return None
    require_files(("--upstream-ca", args.upstream_ca))
    try:
        return ssl.create_default_context(cafile=args.upstream_ca)
    except ssl.SSLError as exc:
        raise InvalidConfigError(
            f"--upstream-ca {args.upstream_ca}: not PEM CA certificates ({exc.reason or exc})"
        ) from None


def run(args: Any) -> int:
    """Entry point of ``kip714 proxy``."""
    settings = start_service(args)
    if settings is None:
        return 0
    if args.broker_ports and args.broker_port_base is not None:
        raise InvalidConfigError("give --broker-ports or --broker-port-base, not both")
    if args.advertised_broker_ports and args.advertised_broker_port_base is not None:
        raise InvalidConfigError("give --advertised-broker-ports or --advertised-broker-port-base, not both")
    advertised_ports = (
        parse_broker_ports(args.advertised_broker_ports, "--advertised-broker-ports")
        if args.advertised_broker_ports
        else None
    )
    proxy_protocol = proxy_protocol_of(args)
    if args.telemetry == "off":
        given = [
            opt
            for opt, on in (
                ("--record", args.record),
                ("--prometheus", args.prometheus),
                ("--otlp-endpoint", args.otlp_endpoint),
            )
            if on
        ]
        if given:
            raise InvalidConfigError(
                f"--telemetry off forwards telemetry untouched: {', '.join(given)} would "
                "receive nothing (use auto, terminate or tap)"
            )
    if args.telemetry in ("tap", "off") and (
        args.state_dir or args.state_topic or args.admin_open or args.admin_principals
    ):
        raise InvalidConfigError(
            f"--telemetry {args.telemetry} lets the cluster answer its admin API: --state-dir, --state-topic, "
            "--admin-open and --admin-principals need --telemetry terminate or auto"
        )
    if args.state_topic:
        upstream_client(args, settings)  # the credentials' origins checked before anything connects
    broker, watcher, layers = build_broker(args)
    admin = build_admin(args, layers, "kip714 proxy")
    recorder, health, sinks = build_outputs(args, broker, layers)
    proxy = TelemetryProxy(
        args.upstream,
        broker,
        args.host,
        args.port,
        broker_port_base=args.broker_port_base,
        broker_ports=parse_broker_ports(args.broker_ports) if args.broker_ports else None,
        advertised_host=args.advertised_host,
        advertised_port=args.advertised_port,
        advertised_broker_port_base=args.advertised_broker_port_base,
        advertised_broker_ports=advertised_ports,
        proxy_protocol=proxy_protocol,
        telemetry=args.telemetry,
        recorder=recorder,
        ssl=server_tls(args),
        upstream_ssl=upstream_tls(args),
        max_connections=args.max_connections,
        idle_timeout_s=args.idle_timeout,
        connect_timeout_s=args.connect_timeout,
        max_frame_bytes=args.max_frame_bytes,
        max_buffered_bytes=args.max_buffered_bytes,
        summary_interval_s=args.summary_interval,
        admin=admin,
        upstream_check_interval_s=args.upstream_check_interval,
    )
    return run_service(proxy, args, settings, layers, watcher, health, sinks)
