"""Health of a running endpoint for load balancers, orchestrators and systemd: ``GET /healthz`` and
``GET /readyz``, and the endpoint's own ``kip714_*`` metrics.

:class:`Health` is written by the event loop (:meth:`Health.run` refreshes it every second) and read by HTTP
threads, so each answer is a snapshot replaced whole, never a half-updated one:

* ``/healthz`` (liveness): the event loop answered within :attr:`Health.stall_s` (it refreshes a heartbeat
  every second). It checks no dependency, so an outage upstream never turns into restarts.
* ``/readyz`` (readiness): every listener is up, the cluster answers (proxy: its bootstrap servers answer
  ApiVersions, checked every few seconds), the recording is writable (its last write succeeded and its folder
  is writable), the admin state was loaded, and the endpoint is not draining (SIGTERM turns it false at once).

Both answer 200 with ``ok`` or 503 with the failing checks; ``?verbose`` lists every check as
``[+]name ok`` / ``[-]name failed: reason``, as Kubernetes' own endpoints do. Machines should read the status
code only. Served on the ``--prometheus`` port (next to ``/metrics``) or, without one, on ``--admin HOST:PORT``
(:func:`start_health_server`).

``python -m kip714.endpoint.health URL [--wait SECONDS]`` probes one of them (exit 0 on 200, 1 otherwise,
asking again until SECONDS have passed): the systemd units' ``ExecStartPost`` and a container's health check,
with nothing but the kip714 install.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["Health", "endpoint_metric_families", "probe", "start_health_server"]

log = logging.getLogger("kip714.health")

_Checks = tuple[tuple[str, bool, str], ...]
#: a WSGI application: (environ, start_response) -> the body
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


#: A passing check's note that the endpoint works with less than it should (shown by ``/readyz?verbose``).
DEGRADED = "degraded: "


class Health:
    """Liveness and readiness of ``endpoint`` (a :class:`~kip714.TelemetryServer` or
    :class:`~kip714.TelemetryProxy`), with its ``recorder`` (or None). ``stall_s``: a heartbeat older than this
    makes ``/healthz`` fail."""

    def __init__(self, endpoint: Any, recorder: Any = None, stall_s: float = 10.0) -> None:
        self.endpoint = endpoint
        self.recorder = recorder
        self.stall_s = stall_s
        self.admin_loaded = True
        #: the shared admin state (a state topic: ``ready``, ``why``, ``lag()``), or None
        self.state_store: Any = None
        self.beat = time.monotonic()
        self._checks: _Checks = (("listeners", False, "not started"),)

    # ------------------------------------------------------------------ the loop side

    def refresh(self) -> None:
        """Recompute the readiness checks (on the event loop) and beat the heart."""
        endpoint = self.endpoint
        checks = [("listeners", bool(getattr(endpoint, "listening", False)), "not listening")]
        if hasattr(endpoint, "upstream_ok"):
            checks.append(("upstream", bool(endpoint.upstream_ok), "the cluster's bootstrap servers do not answer"))
        recorder = self.recorder
        if recorder is not None:
            ok = getattr(recorder, "last_error", None) is None and os.access(recorder.directory, os.W_OK)
            checks.append(("recorder", ok, f"cannot write {recorder.directory}"))
        checks.append(("admin-state", self.admin_loaded, "the admin state is not loaded"))
        store = self.state_store
        if store is not None:
            # not ready until caught up; after that a state topic out of reach degrades the replica (alters
            # fail) but keeps it in the balancer: every replica reads the same topic, and failing all of them
            # would cut every client's data path over the admin API's state
            if not store.caught_up:
                checks.append(("state-topic", False, store.why))
            else:
                degraded = "" if store.ready else f"{DEGRADED}{store.why}; alters fail with REQUEST_TIMED_OUT"
                checks.append(("state-topic", True, degraded))
        checks.append(("not-draining", not getattr(endpoint, "draining", False), "draining (stopping)"))
        self._checks = tuple(checks)
        self.beat = time.monotonic()

    async def run(self, interval_s: float = 1.0) -> None:
        """Refresh every ``interval_s`` until cancelled."""
        while True:
            self.refresh()
            await asyncio.sleep(interval_s)

    # ------------------------------------------------------------------ the HTTP side

    def live(self) -> tuple[bool, _Checks]:
        """(alive, checks): the event loop beat within ``stall_s``."""
        age = time.monotonic() - self.beat
        ok = age <= self.stall_s
        return ok, (("event-loop", ok, f"no heartbeat for {age:.1f}s"),)

    def ready(self) -> tuple[bool, _Checks]:
        """(ready, checks): every readiness check passed (and the loop is alive)."""
        alive, loop = self.live()
        checks = self._checks + loop
        return alive and all(ok for _, ok, _ in checks), checks

    def wsgi(self, fallback: WsgiApp | None = None) -> WsgiApp:
        """A WSGI application answering ``/healthz`` and ``/readyz`` and handing every other path to
        ``fallback`` (the Prometheus exposition), or 404 without one."""

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            path = environ.get("PATH_INFO", "")
            if path in ("/healthz", "/livez", "/readyz"):
                ok, checks = self.live() if path != "/readyz" else self.ready()
                verbose = "verbose" in environ.get("QUERY_STRING", "")
                lines = [
                    (f"[+]{name} ok" + (f" ({why})" if why.startswith(DEGRADED) else ""))
                    if good
                    else f"[-]{name} failed: {why}"
                    for name, good, why in checks
                ]
                if verbose:
                    body = "\n".join(lines + [f"{path[1:]} check {'passed' if ok else 'failed'}"]) + "\n"
                else:
                    body = "ok\n" if ok else "\n".join(line for line in lines if line.startswith("[-]")) + "\n"
                start_response(
                    "200 OK" if ok else "503 Service Unavailable",
                    [("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-store")],
                )
                return [body.encode()]
            if fallback is not None:
                return fallback(environ, start_response)
            start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
            return [b"not found: /healthz, /readyz\n"]

        return app


def start_health_server(app: WsgiApp, host: str, port: int) -> tuple[Any, threading.Thread]:
    """Serve ``app`` (:meth:`Health.wsgi`) on ``host:port`` (0 picks a free port) in a daemon thread, with the
    standard library only (``--admin`` needs no extra). Returns ``(server, thread)``; stop it with
    ``server.shutdown(); server.server_close()``."""
    import socket
    import socketserver
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    server_class = type(
        "_HealthServer", (socketserver.ThreadingMixIn, WSGIServer), {"address_family": family, "daemon_threads": True}
    )
    server: Any = make_server(host, port, app, server_class, handler_class=Quiet)
    thread = threading.Thread(target=server.serve_forever, name="kip714-health-http", daemon=True)
    thread.start()
    return server, thread


#: The reasons of ``kip714_upstream_errors_total`` exposed from 0 for every broker the proxy knows: every value of
#: :func:`kip714.endpoint.proxy_connection.failure_reason`, and ``unknown-node``.
UPSTREAM_FAILURES = ("refused", "timeout", "tls", "unreachable", "closed", "error", "unknown-node")


def endpoint_metric_families(
    endpoint: Any, health: Health | None = None, reloads: dict[str, int] | None = None
) -> list[Any]:
    """The endpoint's own ``kip714_*`` metric families (prometheus_client's; the Prometheus exporter exposes
    them): connections, connection events by kind, and for the proxy the bytes each way and the cluster's
    connections and failures by broker and reason; the connections refused for their PROXY protocol header
    by reason (with ``--proxy-protocol``); admin API changes; readiness, draining and ``reloads``
    (result -> count)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    # the counters as they are (TelemetryServer.stats would ask the broker for its decision counts too)
    counters = getattr(endpoint, "_stats", None)
    stats = dict(counters if counters is not None else endpoint.stats)
    out: list[Any] = []
    out.append(GaugeMetricFamily("kip714_connections", "Client connections open", value=len(endpoint.connections)))
    out.append(
        CounterMetricFamily(
            "kip714_connections_accepted", "Client connections accepted", value=stats.get("connections", 0)
        )
    )
    events = CounterMetricFamily(
        "kip714_connection_events",
        "Connection events by kind: refused, "
        "protocol_errors, frames_too_large, dropped_memory_budget, idle_closed, "
        "internal_errors, rewrite_errors, record_sync_failures, tls_handshakes_failed, "
        "drain_aborted, upstream_errors",
        labels=["event"],
    )
    for name, n in sorted(stats.items()):
        if name not in ("connections", "gets", "pushes"):
            events.add_metric([name], n)
    out.append(events)
    if hasattr(endpoint, "upstream_failures"):
        out.append(
            CounterMetricFamily("kip714_proxy_bytes", "Bytes the proxy read, by direction", labels=["direction"])
        )
        out[-1].add_metric(["from_clients"], endpoint.bytes_up)
        out[-1].add_metric(["from_upstream"], endpoint.bytes_down)
        requests = CounterMetricFamily(
            "kip714_proxy_requests",
            "Client requests the proxy forwarded or answered, by API key ('other': outside 0-127)",
            labels=["api_key"],
        )
        counts = list(endpoint.requests_by_key)
        for key, n in enumerate(counts[:-1]):
            if n:
                requests.add_metric([str(key)], n)
        if counts[-1]:
            requests.add_metric(["other"], counts[-1])
        out.append(requests)
        connects = CounterMetricFamily(
            "kip714_upstream_connections",
            "Connections made to the cluster, by broker node id ('bootstrap': the bootstrap servers)",
            labels=["node_id"],
        )
        for node, n in sorted(dict(endpoint.upstream_connects).items()):
            connects.add_metric([node], n)
        out.append(connects)
        failures = CounterMetricFamily(
            "kip714_upstream_errors",
            "Failures talking to the cluster, by broker node "
            "id and reason (refused, timeout, tls, unreachable, closed, error, unknown-node, "
            "check-*: the readiness check)",
            labels=["node_id", "reason"],
        )
        # every known broker and connection failure from 0: a first failure is then an increase rate() sees
        failed = dict.fromkeys(
            (
                (node, reason)
                for node in ["bootstrap", *map(str, sorted(getattr(endpoint, "nodes", {})))]
                for reason in UPSTREAM_FAILURES
            ),
            0,
        )
        failed.update(dict(endpoint.upstream_failures))
        for (node, reason), n in sorted(failed.items()):
            failures.add_metric([node, reason], n)
        out.append(failures)
        out.append(
            GaugeMetricFamily(
                "kip714_upstream_up",
                "1 when the cluster's bootstrap servers answered the last check",
                value=1 if endpoint.upstream_ok else 0,
            )
        )
    proxy_protocol = getattr(endpoint, "proxy_protocol", None)
    if proxy_protocol is not None:
        refused = CounterMetricFamily(
            "kip714_proxy_protocol_refused",
            "Connections refused for their PROXY protocol header, by reason (untrusted: a peer outside "
            "--proxy-protocol-from; missing, bad, too_long, timeout, closed: no whole valid header)",
            labels=["reason"],
        )
        for reason, n in proxy_protocol.refusals().items():
            refused.add_metric([reason], n)
        out.append(refused)
    admin = getattr(endpoint, "admin", None)
    if admin is not None:
        out.append(
            CounterMetricFamily(
                "kip714_admin_changes",
                "Subscriptions created, changed or deleted through Kafka's admin API",
                value=admin.changes,
            )
        )
        out.append(
            CounterMetricFamily(
                "kip714_admin_refused", "Admin API alterations refused for authorization", value=admin.refused
            )
        )
    store = getattr(health, "state_store", None)
    if store is not None:
        out.append(
            GaugeMetricFamily(
                "kip714_state_topic_lag_records",
                "Records of the state topic this replica has not applied yet (-1: its leader does not answer)",
                value=store.lag(),
            )
        )
        out.append(
            GaugeMetricFamily(
                "kip714_state_topic_ready",
                "1 when this replica has caught up with the state topic and its leader answers",
                value=1 if store.ready else 0,
            )
        )
        records = CounterMetricFamily(
            "kip714_state_topic_records",
            "State-topic records read, by outcome (applied; stale: computed from an older copy, ignored)",
            labels=["outcome"],
        )
        for outcome in ("applied", "stale"):
            records.add_metric([outcome], getattr(store, outcome))
        out.append(records)
        out.append(
            CounterMetricFamily(
                "kip714_state_topic_records_skipped",
                "State-topic records that did not parse (logged once, skipped)",
                value=store.skipped,
            )
        )
    if health is not None:
        ready, _ = health.ready()
        out.append(GaugeMetricFamily("kip714_ready", "1 when /readyz passes", value=1 if ready else 0))
    out.append(
        GaugeMetricFamily(
            "kip714_draining", "1 while draining (stopping)", value=1 if getattr(endpoint, "draining", False) else 0
        )
    )
    if reloads is not None:
        family = CounterMetricFamily("kip714_reloads", "SIGHUP reloads by result (ok, refused)", labels=["result"])
        for result, n in sorted(reloads.items()):
            family.add_metric([result], n)
        out.append(family)
    return out


def probe(url: str, wait_s: float = 0.0, timeout_s: float = 5.0) -> tuple[bool, str]:
    """GET ``url`` until it answers 200 or ``wait_s`` passes (every 0.5 s): (healthy, the last answer)."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + wait_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as resp:
                return resp.status == 200, resp.read().decode(errors="replace").strip()
        except urllib.error.HTTPError as exc:
            said = f"HTTP {exc.code}: {exc.read().decode(errors='replace').strip()}"
        except (OSError, ValueError) as exc:
            said = str(getattr(exc, "reason", exc))
        if time.monotonic() >= deadline:
            return False, said
        time.sleep(0.5)


def _main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m kip714.endpoint.health",
        description="probe kip714's /healthz or /readyz: exit 0 when it answers 200",
    )
    p.add_argument("url", help="e.g. http://127.0.0.1:9465/readyz")
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="keep asking until it answers 200 or this long has passed (default 0: ask once)",
    )
    args = p.parse_args(argv)
    ok, said = probe(args.url, args.wait)
    print(f"{args.url}: {said}", file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
