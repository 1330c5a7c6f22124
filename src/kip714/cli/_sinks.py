"""The exporter options shared by ``kip714 serve`` and ``kip714 proxy``: Prometheus exposition and OTLP
forwarding (:func:`add_sink_options` adds them to a parser, :func:`build_sinks` builds the receivers)."""

from __future__ import annotations

import argparse
import logging
import os
import ssl
from typing import Any

from .._units import duration
from ..endpoint.connection import os_error_words
from ..errors import InvalidConfigError
from ..sinks.prometheus import BROKER_LABELS, DEFAULT_LABELS

log = logging.getLogger("kip714.sinks")

_LABELS_HELP = ", ".join(BROKER_LABELS)


def host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` / ``[V6]:PORT`` / ``:PORT`` (all interfaces) → (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or "0.0.0.0", int(port)


def _header(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def require_files(*options: tuple[str, str | None]) -> None:
    """Each given ``(option, path)`` names a file that exists (InvalidConfigError naming both otherwise)."""
    for option, path in options:
        if path and not os.path.isfile(path):
            raise InvalidConfigError(f"{option} {path}: no such file")


def cert_chain_error(
    exc: BaseException, cert_option: str, cert: str, key_option: str, key: str | None
) -> InvalidConfigError:
    """The error for a certificate chain ``ssl`` could not load, naming the options and files (ssl's own
    says "PEM lib" without either)."""
    where = f"{cert_option} {cert}" + (f" / {key_option} {key}" if key else "")
    hint = "" if key else f" (without {key_option}, the private key must be in the same PEM file)"
    return InvalidConfigError(
        f"{where}: cannot load a certificate chain and its private key: {getattr(exc, 'reason', None) or exc}{hint}"
    )


def load_cert_chain(ctx: ssl.SSLContext, cert: str, key: str | None, cert_option: str, key_option: str) -> None:
    """``ctx.load_cert_chain`` with an error that names the option and the file (ssl's own says "PEM lib"
    or "[Errno 2] No such file or directory" without either)."""
    require_files((cert_option, cert), (key_option, key))
    try:
        ctx.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise cert_chain_error(exc, cert_option, cert, key_option, key) from None


def add_sink_options(parser: argparse.ArgumentParser) -> None:
    """Add the Prometheus and OTLP exporter options to ``parser``."""
    g = parser.add_argument_group("Prometheus exposition (client metrics as a scrape target)")
    g.add_argument(
        "--prometheus",
        metavar="HOST:PORT",
        type=host_port,
        help="serve the clients' metrics for Prometheus on http://HOST:PORT/metrics (text format or "
        "OpenMetrics by content negotiation), with kip714's own kip714_* metrics (default: not "
        "served)",
    )
    g.add_argument(
        "--prometheus-labels",
        default=",".join(DEFAULT_LABELS),
        metavar="LIST",
        help=f"broker-added labels put on every series (default {','.join(DEFAULT_LABELS)}; any of "
        f"{_LABELS_HELP}; '' for none)",
    )
    g.add_argument(
        "--prometheus-max-series",
        type=int,
        default=100_000,
        metavar="N",
        help="at most N time series exposed; new series beyond are refused and counted (default 100000)",
    )
    g.add_argument(
        "--prometheus-no-scope-labels",
        action="store_true",
        help="leave out the otel_scope_name/otel_scope_version labels (default: put on every series)",
    )
    g.add_argument(
        "--prometheus-tls-cert", metavar="FILE", help="serve HTTPS with this certificate (PEM; default: plain HTTP)"
    )
    g.add_argument("--prometheus-tls-key", metavar="FILE", help="the private key of --prometheus-tls-cert")
    o = parser.add_argument_group("OTLP forwarding (client metrics to an OpenTelemetry collector)")
    o.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="forward every accepted payload as OTLP/HTTP protobuf to URL (its /v1/metrics is used when "
        "URL has no path; https:// for TLS), the broker-added labels added to the resource "
        "attributes (default: not forwarded)",
    )
    o.add_argument(
        "--otlp-labels",
        default=",".join(DEFAULT_LABELS),
        metavar="LIST",
        help=f"broker-added labels added as resource attributes (default {','.join(DEFAULT_LABELS)}; "
        f"any of {_LABELS_HELP})",
    )
    o.add_argument(
        "--otlp-header",
        action="append",
        type=_header,
        default=[],
        metavar="K=V",
        help="HTTP header sent with every export (repeatable), e.g. Authorization=Bearer\\ TOKEN",
    )
    o.add_argument(
        "--otlp-compression", choices=["gzip", "none"], default="gzip", help="request body compression (default gzip)"
    )
    o.add_argument(
        "--otlp-timeout",
        type=duration,
        default=10.0,
        metavar="DURATION",
        help="time allowed per export request (default 10s)",
    )
    o.add_argument(
        "--otlp-queue",
        type=int,
        default=10_000,
        metavar="N",
        help="payloads waiting to be sent at most; more are dropped and counted (default 10000)",
    )
    o.add_argument(
        "--otlp-ca",
        metavar="FILE",
        help="CA certificates (PEM) that verify an https:// collector's certificate (default: the "
        "system's trust store); a certificate that fails is counted as "
        'kip714_otlp_requests_total{status="tls-error"}',
    )
    o.add_argument("--otlp-client-cert", metavar="FILE", help="client certificate for mutual TLS (PEM; default: none)")
    o.add_argument("--otlp-client-key", metavar="FILE", help="the private key of --otlp-client-cert")
    o.add_argument(
        "--otlp-insecure", action="store_true", help="do not verify the collector's certificate (default: verified)"
    )


def build_sinks(args: Any, recorder: Any = None, health: Any = None) -> list[Any]:
    """The receivers the options ask for (started: the Prometheus HTTP server listens, the forwarder's
    sender runs). Each has ``close()``. ``recorder`` (a ParquetRecorder) gets its queue depth exposed;
    ``health`` (a :class:`~kip714.endpoint.health.Health`) has its /healthz and /readyz served next to
    /metrics."""
    from ..sinks.otlp_forward import OtlpForwarder
    from ..sinks.prometheus import PrometheusExporter, parse_labels

    for key, cert in (("prometheus_tls_key", "prometheus_tls_cert"), ("otlp_client_key", "otlp_client_cert")):
        if getattr(args, key, None) and not getattr(args, cert, None):
            raise InvalidConfigError(f"--{key.replace('_', '-')} needs --{cert.replace('_', '-')}")
    for option, needs in (
        ("prometheus_tls_cert", "prometheus"),
        ("otlp_client_cert", "otlp_endpoint"),
        ("otlp_ca", "otlp_endpoint"),
    ):
        if getattr(args, option, None) and not getattr(args, needs, None):  # never silently ignored
            raise InvalidConfigError(f"--{option.replace('_', '-')} needs --{needs.replace('_', '-')}")
    require_files(
        *(
            (f"--{option.replace('_', '-')}", getattr(args, option, None))
            for option in (
                "prometheus_tls_cert",
                "prometheus_tls_key",
                "otlp_ca",
                "otlp_client_cert",
                "otlp_client_key",
            )
        )
    )
    sinks: list[Any] = []
    exporter = forwarder = None
    if getattr(args, "otlp_endpoint", None):
        forwarder = OtlpForwarder(
            args.otlp_endpoint,
            labels=parse_labels(args.otlp_labels),
            headers=dict(args.otlp_header),
            compression=args.otlp_compression,
            timeout_s=args.otlp_timeout,
            max_queue=args.otlp_queue,
            ca_file=args.otlp_ca,
            client_cert=args.otlp_client_cert,
            client_key=args.otlp_client_key,
            verify=not args.otlp_insecure,
        )
        sinks.append(forwarder)
    if getattr(args, "prometheus", None):
        host, port = args.prometheus
        exporter = PrometheusExporter(
            labels=parse_labels(args.prometheus_labels),
            max_series=args.prometheus_max_series,
            scope_labels=not args.prometheus_no_scope_labels,
            # --replica-id (proxy and serve): the replica label on kip714's own metrics (docs/fleet.md)
            self_labels={"replica": args.replica_id} if getattr(args, "replica_id", None) else None,
        )
        if recorder is not None:
            exporter.watch_queue("recorder", recorder.pending)
            exporter.add_self_metrics(recorder.self_metrics)
        if forwarder is not None:
            exporter.watch_queue("otlp", lambda: forwarder.queue_depth, forwarder.max_queue)
            exporter.add_self_metrics(forwarder.self_metrics)
        try:
            bound = exporter.start_http_server(
                host,
                port,
                certfile=args.prometheus_tls_cert,
                keyfile=args.prometheus_tls_key,
                app=health.wsgi(exporter.wsgi_app) if health is not None else None,
            )
        except ssl.SSLError as exc:
            raise cert_chain_error(
                exc, "--prometheus-tls-cert", args.prometheus_tls_cert, "--prometheus-tls-key", args.prometheus_tls_key
            ) from None
        except OSError as exc:
            raise OSError(f"--prometheus {host}:{port}: cannot listen: {os_error_words(exc)}") from None
        scheme = "https" if args.prometheus_tls_cert else "http"
        log.info("event=prometheus url=%s://%s:%d/metrics", scheme, host, bound)
        sinks.insert(0, exporter)
    return sinks
