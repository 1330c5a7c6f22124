"""``kip714 serve`` and ``kip714 proxy`` as a service: the admin API's options, where subscriptions come from,
health, and the life cycle under a supervisor (systemd, Kubernetes).

* Subscriptions: :func:`build_subscriptions` stacks the config file's ``[subscriptions]``, ``--config FILE``,
  the ``--metrics``/``--match``/``--interval-ms`` flags and the admin API's state folder (``--state-dir``) in a
  :class:`~kip714.broker.subscription_layers.SubscriptionLayers`; the admin API is answered by a
  :class:`~kip714.broker.config_admin.ClientMetricsAdmin` (``--admin-open``, ``--admin-principals``).
* :class:`ServiceRunner` runs the endpoint: ``READY=1`` to systemd once listening (``sd_notify`` without a
  dependency: a datagram to ``$NOTIFY_SOCKET``); SIGTERM or SIGINT drains (readiness false at once, stop
  accepting, answer what was read, close the connections cleanly, flush and close the recording, all within
  ``--drain-timeout``; ``STOPPING=1``); SIGHUP reloads the config file, the subscriptions (file, flags in the
  file, admin state) and the TLS certificates without dropping a connection (``RELOADING=1`` then
  ``READY=1``): everything is checked first (certificates loaded into a scratch context), and a bad new
  configuration is refused and logged while the old one keeps running. Settings that only a restart can change
  (ports, the upstream, the recording folder...) are named in a warning and keep their old value.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import socket
import ssl
import time
from collections.abc import Callable, Iterable
from typing import Any

from .._units import duration
from ..broker.admin_state import AdminStateStore, StateStore
from ..broker.config_admin import ClientMetricsAdmin
from ..broker.subscription_layers import SubscriptionLayers
from ..broker.subscriptions import SubscriptionRegistry
from ..endpoint.connection import DRAIN_SPREAD_S
from ..endpoint.health import Health, endpoint_metric_families, start_health_server
from ..endpoint.subscription_file import SubscriptionFileWatcher, load_subscription_file
from ..errors import InvalidConfigError
from ._settings import Settings
from ._sinks import host_port, load_cert_chain

__all__ = [
    "RELOADABLE",
    "ServiceRunner",
    "add_service_options",
    "build_admin",
    "build_subscriptions",
    "drain_spread",
    "flag_subscription",
    "sd_notify",
]

log = logging.getLogger("kip714.service")

#: Settings a SIGHUP applies (the others need a restart: a reload that changes them says so and keeps them).
RELOADABLE = frozenset(
    {
        "metrics",
        "interval_ms",
        "match",
        "subscription_name",
        "tls_cert",
        "tls_key",
        "prometheus_tls_cert",
        "prometheus_tls_key",
        "admin_open",
        "admin_principals",
        "log_level",
        "drain_timeout",
        "drain_spread",
        "idle_timeout",
        "max_connections",
        "config_file",
        "print_config",
    }
)


def add_service_options(p: argparse.ArgumentParser, proxy: bool = False) -> None:
    """The admin API's options, health and the drain."""
    g = p.add_argument_group("running as a service: Kafka's admin API, health and signals")
    g.add_argument(
        "--state-dir",
        metavar="DIR",
        help="keep the subscriptions created, changed or deleted through Kafka's admin API "
        "(kafka-client-metrics.sh, kafka-configs.sh --entity-type client-metrics, AdminClient) in "
        "DIR/client-metrics.json, written atomically: they survive a restart and a kill -9, and "
        "win over --config, --metrics and the config file for every name they touched (default: "
        "admin changes live in memory only)",
    )
    g.add_argument(
        "--admin-principals",
        metavar="User:NAME[,User:NAME...]",
        help="the principals that may alter subscriptions through the admin API (SASL user names as "
        "Kafka prints them, User:alice); others get CLUSTER_AUTHORIZATION_FAILED. Describing and "
        "listing are open to every client (default: nobody may alter)",
    )
    g.add_argument(
        "--admin-open",
        action="store_true",
        help="let every client alter subscriptions through the admin API (for a listener only trusted "
        "clients reach; default: off)",
    )
    g.add_argument(
        "--admin",
        metavar="HOST:PORT",
        type=host_port,
        help="serve GET /healthz and /readyz on http://HOST:PORT (they are also on the --prometheus "
        "port when there is one; default: not served)",
    )
    g.add_argument(
        "--drain-timeout",
        type=duration,
        default=20.0,
        metavar="DURATION",
        help="on SIGTERM/SIGINT: time allowed to answer the requests already read, close the "
        "connections cleanly and flush the recording; connections still open then are aborted "
        "(default 20s)",
    )
    g.add_argument(
        "--drain-spread",
        type=duration,
        metavar="DURATION",
        help="on SIGTERM/SIGINT: close the client connections one after another over this long rather "
        "than all at once, each client's connections in turn and its last one late, so that clients "
        "behind a load balancer reconnect to another replica before they lose their last connection "
        "(librdkafka never sees all its brokers down); each connection serves as usual until its turn; "
        f"at most half of --drain-timeout; 0 closes them all at once (default {DRAIN_SPREAD_S:g}s, or "
        "half of --drain-timeout when that is less)",
    )
    if proxy:
        f = p.add_argument_group("a fleet of replicas: shared subscriptions and the replica's name")
        f.add_argument(
            "--replica-id",
            metavar="ID",
            default=socket.gethostname(),
            help="this replica's name in logs, self-metrics (the replica label) and recordings (the "
            "kip714_replica column) (default: the host name)",
        )
        f.add_argument(
            "--state-topic",
            metavar="NAME",
            help="keep the subscriptions changed through Kafka's admin API in this compacted topic of the "
            "upstream cluster, shared by every replica (instead of --state-dir); needs the fleet extra "
            "(default: none)",
        )
        f.add_argument(
            "--state-topic-replication-factor",
            type=int,
            default=3,
            metavar="N",
            help="the state topic's replication factor when kip714 creates it (-1: the cluster's "
            "default.replication.factor; default 3, as Kafka Connect's and Schema Registry's topics)",
        )
        f.add_argument(
            "--upstream-sasl-mechanism",
            choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
            help="SASL mechanism of the proxy's own connection to the cluster (the state topic); with "
            "--upstream-tls it is SASL_SSL (default: no SASL)",
        )
        for what in ("username", "password"):
            f.add_argument(
                f"--upstream-sasl-{what}",
                metavar=what.upper(),
                help=f"the SASL {what} of the proxy's own connection to the cluster: set it in the config "
                f"file (upstream-sasl-{what} = ...) or KIP714_UPSTREAM_SASL_{what.upper()}, never as a flag "
                "(a flag is refused: it would show in the process list)",
            )
        g.add_argument(
            "--upstream-check-interval",
            type=duration,
            default=2.0,
            metavar="DURATION",
            help="how often /readyz asks the cluster's bootstrap servers for their ApiVersions (default 2s)",
        )


def drain_spread(args: Any) -> float:
    """The seconds a drain spreads its closes over: ``--drain-spread``, by default :data:`DRAIN_SPREAD_S` or
    half of ``--drain-timeout`` when that is less; InvalidConfigError when it is more than that half."""
    timeout = float(getattr(args, "drain_timeout", 20.0))
    spread = getattr(args, "drain_spread", None)
    if spread is None:
        return min(DRAIN_SPREAD_S, timeout / 2)
    if spread > timeout / 2:
        raise InvalidConfigError(
            f"--drain-spread {spread:g}s is more than half of --drain-timeout {timeout:g}s (the rest answers "
            "the last requests)"
        )
    return float(spread)


def parse_principals(text: str | None) -> list[str]:
    """``User:alice,User:bob`` -> the principals (each ``TYPE:NAME``, as Kafka prints them)."""
    out = []
    for item in filter(None, (s.strip() for s in (text or "").split(","))):
        kind, sep, name = item.partition(":")
        if not sep or not kind or not name:
            raise InvalidConfigError(f"--admin-principals: {item!r} is not a principal such as User:alice")
        out.append(item)
    return out


def flag_subscription(args: Any) -> dict[str, dict[str, str]]:
    """The subscription the ``--metrics``/``--interval-ms``/``--match`` flags describe (none without them)."""
    if args.metrics is None and not args.match and args.interval_ms is None:
        return {}
    cfg = {"metrics": args.metrics if args.metrics is not None else "*"}
    if args.interval_ms is not None:
        cfg["interval.ms"] = str(args.interval_ms)
    if args.match:
        cfg["match"] = args.match
    return {args.subscription_name: cfg}


#: the proxy's own credentials toward the cluster: from the config file or the environment, never a flag
CREDENTIALS = ("upstream_sasl_username", "upstream_sasl_password")


def upstream_client(args: Any, settings: Settings | None = None) -> dict[str, str]:
    """librdkafka properties of the proxy's own connection to the cluster (the state topic): TLS from
    ``--upstream-tls``/``--upstream-ca``, SASL from the config file or the environment."""
    if settings is not None:
        for dest in CREDENTIALS:
            if settings.origins.get(dest, "").startswith("flag"):
                option = "--" + dest.replace("_", "-")
                raise InvalidConfigError(
                    f"{option} is read from the config file or KIP714_{dest.upper()}, never from a flag "
                    "(the process list would show it)"
                )
    props: dict[str, str] = {}
    sasl = getattr(args, "upstream_sasl_mechanism", None)
    tls = bool(getattr(args, "upstream_tls", False))
    if sasl and not (getattr(args, "upstream_sasl_username", None) and getattr(args, "upstream_sasl_password", None)):
        raise InvalidConfigError(
            "--upstream-sasl-mechanism needs upstream-sasl-username and upstream-sasl-password (the config file "
            "or KIP714_UPSTREAM_SASL_USERNAME / KIP714_UPSTREAM_SASL_PASSWORD)"
        )
    props["security.protocol"] = {(False, False): "PLAINTEXT", (True, False): "SSL"}.get(
        (tls, bool(sasl)), "SASL_SSL" if tls else "SASL_PLAINTEXT"
    )
    if sasl:
        props.update(
            {
                "sasl.mechanism": sasl,
                "sasl.username": args.upstream_sasl_username,
                "sasl.password": args.upstream_sasl_password,
            }
        )
    if tls and getattr(args, "upstream_ca", None):
        props["ssl.ca.location"] = args.upstream_ca
    return props


def state_store(args: Any, settings: Settings | None = None) -> StateStore | None:
    """Where the admin API's state is kept: the state topic (``--state-topic``, with ``--state-dir`` as its
    cache), the state folder (``--state-dir``), or nowhere (None)."""
    state_dir = getattr(args, "state_dir", None)
    topic = getattr(args, "state_topic", None)
    if not topic:
        return AdminStateStore(state_dir) if state_dir else None
    from ..broker.state_topic import StateTopicStore

    return StateTopicStore(
        topic,
        args.upstream,
        replica_id=args.replica_id,
        client=upstream_client(args, settings),
        replication_factor=args.state_topic_replication_factor,
        cache=AdminStateStore(state_dir) if state_dir else None,
        connect_timeout_s=args.connect_timeout,
    )


def build_subscriptions(
    args: Any, settings: Settings | None = None
) -> tuple[SubscriptionLayers, SubscriptionFileWatcher | None]:
    """The subscriptions every source of the options describes (see the module docstring), and the watcher of
    ``--config`` (or None)."""
    registry = SubscriptionRegistry(jdk=args.jdk)
    store = state_store(args, settings)
    layers = SubscriptionLayers(registry, store)
    layers.set_base("config-file", getattr(args, "file_subscriptions", None) or {})
    watcher = SubscriptionFileWatcher(layers, args.config) if args.config else None
    layers.set_base("flags", flag_subscription(args))
    layers.warn_overridden()
    return layers, watcher


def build_admin(args: Any, layers: SubscriptionLayers, role: str) -> ClientMetricsAdmin:
    """The admin API's answers for the options (``--admin-open``, ``--admin-principals``)."""
    principals = parse_principals(getattr(args, "admin_principals", None))
    if getattr(args, "admin_open", False) and principals:
        raise InvalidConfigError("give --admin-open or --admin-principals, not both")
    return ClientMetricsAdmin(
        layers, alter_open=bool(getattr(args, "admin_open", False)), principals=principals, role=role
    )


def sd_notify(message: str) -> bool:
    """Tell systemd ``message`` (``READY=1``, ``STOPPING=1``...) when it supervises this process
    (``$NOTIFY_SOCKET`` set; a leading ``@`` is the abstract namespace); False otherwise or on failure."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address or not hasattr(socket, "AF_UNIX"):
        return False
    if address[0] == "@":
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
        return True
    except OSError as exc:
        log.debug("event=sd_notify_failed error=%r", exc)
        return False


async def _watchdog(interval_s: float) -> None:
    """``WATCHDOG=1`` to systemd while the event loop runs (a stuck loop stops it: systemd restarts us)."""
    while True:
        sd_notify("WATCHDOG=1")
        await asyncio.sleep(interval_s)


def _monotonic_usec() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000 if hasattr(time, "clock_gettime_ns") else 0


class ServiceRunner:
    """Runs ``endpoint`` (a :class:`~kip714.TelemetryServer` or :class:`~kip714.TelemetryProxy`) as a
    service (see the module docstring). ``loop_factory``: the event loop's (None: asyncio's)."""

    def __init__(
        self,
        endpoint: Any,
        args: Any,
        settings: Settings | None,
        *,
        layers: SubscriptionLayers,
        watcher: SubscriptionFileWatcher | None,
        health: Health,
        sinks: Iterable[Any] = (),
        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.args = args
        self.settings = settings
        self.layers = layers
        self.watcher = watcher
        self.health = health
        self.sinks = list(sinks)
        self.loop_factory = loop_factory
        self.reloads = {"ok": 0, "refused": 0}
        drain_spread(args)  # checked before anything starts
        self._admin_http: tuple[Any, Any] | None = None
        self._reloading: asyncio.Task[bool] | None = None
        exporter = next((s for s in self.sinks if hasattr(s, "add_self_metrics")), None)
        if exporter is not None:
            exporter.add_self_metrics(lambda: endpoint_metric_families(endpoint, health, self.reloads))
        self.exporter = exporter

    # ------------------------------------------------------------------------------ running

    def run(self) -> None:
        """Run until ``--duration`` passes or SIGTERM/SIGINT, then drain; the sinks are closed at the end."""
        try:
            if self.loop_factory is None:
                asyncio.run(self._main())
            else:  # asyncio.Runner(loop_factory=) is 3.11+: set the loop up by hand (3.10 too)
                loop = self.loop_factory()
                try:
                    loop.run_until_complete(self._main())
                finally:
                    loop.run_until_complete(loop.shutdown_asyncgens())
                    loop.close()
        finally:
            if self._admin_http is not None:
                self._admin_http[0].shutdown()
                self._admin_http[0].server_close()
            for sink in self.sinks:
                sink.close()
            if self.layers.store is not None:
                self.layers.store.close()

    async def _main(self) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError, AttributeError):
                pass
        try:
            loop.add_signal_handler(signal.SIGHUP, self._on_sighup)
        except (NotImplementedError, RuntimeError, AttributeError):
            pass
        endpoint = self.endpoint
        admin_address = getattr(self.args, "admin", None)
        if admin_address is not None:
            try:
                self._admin_http = start_health_server(self.health.wsgi(), *admin_address)
            except OSError as exc:
                raise OSError(
                    f"--admin {admin_address[0]}:{admin_address[1]}: cannot listen: {exc.strerror or exc}"
                ) from None
            log.info("event=health url=http://%s:%d/readyz", admin_address[0], self._admin_http[0].server_port)
        await endpoint.start()
        tasks = [asyncio.create_task(self.health.run())]
        watchdog = os.environ.get("WATCHDOG_USEC", "")
        if watchdog.isdigit() and int(watchdog) > 0:  # systemd's WatchdogSec: beat at half the period
            tasks.append(asyncio.create_task(_watchdog(int(watchdog) / 2e6)))
        if self.watcher is not None:
            tasks.append(asyncio.create_task(self.watcher.watch()))
        # What is alive now (modules, the endpoint, its sinks and tables) lives as long as the process: frozen out
        # of the collector, whose full passes otherwise walk all of it again every few seconds under load (with
        # --record at the bench's load: 70 ms of CPU every 8 s, 0.3 µs a push). Cycles made later are collected.
        gc.freeze()
        try:
            self.health.refresh()
            sd_notify(f"READY=1\nSTATUS=listening on port {endpoint.port}")
            log.info("event=ready port=%d", endpoint.port)
            try:
                await asyncio.wait_for(stop.wait(), getattr(self.args, "duration", None))
            except asyncio.TimeoutError:
                pass
            sd_notify("STOPPING=1\nSTATUS=draining")
            endpoint.draining = True
            self.health.refresh()  # /readyz fails from now on
            if self._reloading is not None:
                await asyncio.gather(self._reloading, return_exceptions=True)
            timeout = getattr(self.args, "drain_timeout", 20.0)
            try:
                spread = drain_spread(self.args)
            except InvalidConfigError:  # a reload made it longer than half the timeout: take the half
                spread = timeout / 2
            await endpoint.drain(timeout, spread)
        finally:
            for t in tasks:
                t.cancel()
            await endpoint.close()

    # ------------------------------------------------------------------------------ SIGHUP

    def _on_sighup(self) -> None:
        if self._reloading is not None and not self._reloading.done():
            log.warning("event=reload_skipped a reload is already running")
            return
        self._reloading = asyncio.get_running_loop().create_task(self.reload())

    async def reload(self) -> bool:
        """Reload the config file, the subscriptions and the TLS certificates (see the module docstring); True
        when applied, False when refused (the old configuration keeps running)."""
        sd_notify(f"RELOADING=1\nMONOTONIC_USEC={_monotonic_usec()}\nSTATUS=reloading")
        try:
            steps = self._prepare_reload()
        except Exception as exc:  # refused whole: nothing was changed
            self.reloads["refused"] += 1
            log.error(
                "event=reload_refused error=%s (the running configuration is unchanged)", str(exc) or type(exc).__name__
            )
            return False
        finally:
            sd_notify(f"READY=1\nSTATUS=listening on port {self.endpoint.port}")
        for step in steps:
            step()
        self.reloads["ok"] += 1
        self.layers.warn_overridden()
        log.info("event=reloaded subscriptions=%d version=%d", len(self.layers.registry), self.layers.registry.version)
        return True

    def _prepare_reload(self) -> list[Callable[[], None]]:
        """Check everything a reload would change and return the steps that apply it (nothing is changed
        here; any problem raises)."""
        args = self.args
        new = argparse.Namespace(**vars(args))
        if self.settings is not None:
            settings = self.settings.reload()
            for dest, value in settings.values.items():
                setattr(new, dest, value)
            new.file_subscriptions = settings.subscriptions
        else:
            settings = None
        restart = sorted(
            d
            for d in vars(new)
            if not d.startswith("_")
            and d not in RELOADABLE
            and d != "file_subscriptions"
            and getattr(new, d) != getattr(args, d, None)
        )
        if restart:
            log.warning(
                "event=reload_needs_restart settings=%s (these keep their running values until kip714 restarts)",
                ",".join(restart),
            )
            for dest in restart:
                setattr(new, dest, getattr(args, dest))
        steps: list[Callable[[], None]] = []
        layers = self.layers
        # subscriptions: every source checked before any is applied
        file_subs = getattr(new, "file_subscriptions", None) or {}
        flags = flag_subscription(new)
        layers.check("config-file", file_subs)
        layers.check("flags", flags)
        sub_file = load_subscription_file(self.watcher.path) if self.watcher is not None else None
        if sub_file is not None:
            layers.check("subscription-file", sub_file)
        admin_state = layers.load_admin()
        principals = parse_principals(new.admin_principals)
        if new.admin_open and principals:
            raise InvalidConfigError("give --admin-open or --admin-principals, not both")
        steps.append(lambda: layers.set_base("config-file", file_subs))
        watcher = self.watcher
        if watcher is not None:

            def file_again() -> None:
                watcher.reload(force=True)

            steps.append(file_again)
        steps.append(lambda: layers.set_base("flags", flags))
        steps.append(lambda: layers.replace_admin(admin_state))
        admin = getattr(self.endpoint, "admin", None)
        if admin is not None:

            def set_admin() -> None:
                admin.alter_open, admin.principals = bool(new.admin_open), frozenset(principals)

            steps.append(set_admin)
        # TLS: the new chains loaded into scratch contexts first; the live contexts take them in place
        steps.extend(self._tls_steps(new))

        # live settings
        def live() -> None:
            logging.getLogger().setLevel(getattr(logging, new.log_level.upper()))
            self.endpoint.idle_timeout_s = new.idle_timeout
            self.endpoint.max_connections = new.max_connections
            self.args = new
            if settings is not None:
                self.settings = settings

        steps.append(live)
        return steps

    def _tls_steps(self, new: Any) -> list[Callable[[], None]]:
        steps: list[Callable[[], None]] = []
        live = getattr(self.endpoint, "ssl", None)
        if (live is None) != (not new.tls_cert):
            log.warning("event=reload_needs_restart settings=tls_cert (turning TLS on or off takes a restart)")
        elif live is not None:
            scratch = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            load_cert_chain(scratch, new.tls_cert, new.tls_key, "--tls-cert", "--tls-key")
            cert, key = new.tls_cert, new.tls_key

            def client_tls() -> None:
                live.load_cert_chain(cert, key)
                log.info("event=tls_reloaded listener=clients cert=%s", cert)

            steps.append(client_tls)
        http_ctx = getattr(self.exporter, "tls_context", None) if self.exporter is not None else None
        if http_ctx is not None and new.prometheus_tls_cert:
            scratch = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            load_cert_chain(
                scratch,
                new.prometheus_tls_cert,
                new.prometheus_tls_key,
                "--prometheus-tls-cert",
                "--prometheus-tls-key",
            )
            pcert, pkey = new.prometheus_tls_cert, new.prometheus_tls_key

            def http_tls() -> None:
                http_ctx.load_cert_chain(pcert, pkey)
                log.info("event=tls_reloaded listener=prometheus cert=%s", pcert)

            steps.append(http_tls)
        return steps
