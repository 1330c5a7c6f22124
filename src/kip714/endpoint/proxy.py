"""``kip714 proxy``: a Kafka-protocol proxy in front of any cluster that collects KIP-714 telemetry with no
broker plugin.

Clients set ``bootstrap.servers`` to the proxy. The proxy listens on a bootstrap port and on one port per
upstream broker (``broker_port_base + node_id`` or an explicit map, so every replica of the proxy and every
restart agree), and connects each client connection to the upstream broker its listener stands for (the
bootstrap listener to the configured bootstrap servers: the proxy never connects anywhere a client names).

Every request goes upstream byte for byte and every response comes back byte for byte, except:

* responses that name broker addresses — Metadata, FindCoordinator, DescribeCluster — which are rewritten
  to the proxy's listeners (:mod:`kip714.endpoint.rewrite`); one that cannot be rewritten closes the
  connection, never reaches the client with a real address;
* the ApiVersions answer, whose versions are capped to what the proxy reads (and which gains
  GetTelemetrySubscriptions/PushTelemetry v0 when the proxy answers telemetry itself);
* telemetry, by mode: ``terminate`` answers GetTelemetrySubscriptions/PushTelemetry here through a
  :class:`~kip714.TelemetryBroker` (``node_id`` = the upstream node the connection maps to), and the
  CLIENT_METRICS resources of Kafka's config admin API (DescribeConfigs, IncrementalAlterConfigs,
  AlterConfigs, ListConfigResources) through a :class:`~kip714.broker.config_admin.ClientMetricsAdmin`, a
  request that mixes them with other resources split between kip714 and the cluster
  (:mod:`kip714.endpoint.proxy_admin`); ``tap``
  forwards them and records each push with the upstream's answer (and with what the upstream's
  GetTelemetrySubscriptions answer told the client: subscription, push interval, expiry); ``off``
  forwards them untouched; ``auto`` is ``tap`` when the cluster advertises both APIs, else ``terminate``.

SASL PLAIN and SCRAM pass through; the user name becomes the telemetry principal (``User:<name>``).

The data path of each client connection is :mod:`kip714.endpoint.proxy_connection`.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl as _ssl
import struct
from collections import Counter
from collections.abc import Callable, Iterable

from .._enums import DEFAULT_MAX_BUFFERED_BYTES, ApiKey
from .._protocol import DEFAULT_MAX_FRAME_BYTES, ApiVersionsRequest, MetadataRequest, decode_response, encode_request
from ..broker.config_admin import ADMIN_APIS, ClientMetricsAdmin
from ..broker.manager import TelemetryBroker
from ..broker.receivers import TelemetryPayload
from ..broker.subscription_layers import SubscriptionLayers
from ..broker.subscriptions import SubscriptionRegistry
from ..errors import InvalidConfigError, Kip714Error, ListenerError
from . import rewrite
from .connection import (
    BufferBudget,
    EndpointStats,
    Recorder,
    attach_receivers,
    connection_ids,
    drain_connections,
    log_summaries,
    os_error_words,
    reap_idle,
    serve_until,
    warn_if_no_subscription,
)
from .proxy_connection import ProxyConnection, failure_reason, upstream_error_words
from .proxy_protocol import HeaderListener, ProxyProtocol
from .rewrite import MAX_VERSIONS, REMOVED_APIS, REWRITERS

__all__ = [
    "TelemetryProxy",
    "TELEMETRY_MODES",
    "parse_upstream",
    "parse_broker_ports",
]

log = logging.getLogger("kip714.proxy")

#: Values of ``telemetry``.
TELEMETRY_MODES = ("auto", "terminate", "tap", "off")

_GTS = int(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS)
_PUSH = int(ApiKey.PUSH_TELEMETRY)
_TELEMETRY_APIS = ((_GTS, 0, 0), (_PUSH, 0, 0))
_I32 = struct.Struct(">i")


def parse_upstream(spec: str | Iterable[str | tuple[str, int]]) -> list[tuple[str, int]]:
    """``HOST:PORT[,HOST:PORT…]`` (IPv6 as ``[::1]:9092``) or an iterable of such strings / (host, port)."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out = []
    for item in items:
        if isinstance(item, tuple):
            out.append((str(item[0]), int(item[1])))
            continue
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise InvalidConfigError(f"upstream {item!r} is not HOST:PORT")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise InvalidConfigError("no upstream bootstrap server given")
    return out


def parse_broker_ports(spec: str, option: str = "--broker-ports") -> dict[int, int]:
    """``1=9193,2=9194`` → {1: 9193, 2: 9194} (``option`` names where it came from in errors)."""
    out = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        node, _sep, port = item.partition("=")
        try:
            out[int(node)] = int(port)
        except ValueError:
            raise InvalidConfigError(f"{option}: {item!r} is not NODE=PORT") from None
        if not 0 <= int(node) < 2**31 or not 1 <= int(port) <= 65535:
            raise InvalidConfigError(f"{option}: {item!r}: node ids are 0-{2**31 - 1}, ports 1-65535")
    if len(set(out.values())) != len(out):
        raise InvalidConfigError(f"{option}: two brokers share a port in {spec!r}")
    return out


class TelemetryProxy:
    """The asyncio Kafka-protocol proxy behind ``kip714 proxy``: forwards a cluster's traffic byte for byte,
    rewrites broker addresses to its own listeners and answers (``terminate``) or records (``tap``) the
    clients' KIP-714 telemetry; ``start()``, ``serve()``, ``close()``, ``port``, ``broker_ports``.

    ``upstream``: the cluster's bootstrap servers (``"host:port,host:port"`` or a list). ``port``: the
    bootstrap listener; each broker gets ``broker_port_base + node_id`` (default base ``port + 1``; base
    ``0`` picks free ports, for tests — not stable across restarts) or its port in ``broker_ports``
    ({node_id: port}); a broker of the cluster without a usable port (none in ``broker_ports``, past 65535, or
    taken) makes ``start()`` raise :class:`ListenerError` (INVALID_CONFIG), and one that appears later is an
    error on the connection whose response named it. ``advertised_host``: the host clients are told (default
    ``host``); the ports they are told, where a load balancer's differ from the listeners': broker
    ``node_id`` is advertised at ``advertised_broker_ports[node_id]``, else ``advertised_broker_port_base +
    node_id``, else its listener's port shifted by ``advertised_port - port`` (the balancer's bootstrap port
    less the listener's), else its listener's port. ``proxy_protocol``: a
    :class:`~kip714.endpoint.proxy_protocol.ProxyProtocol` when the balancer opens every connection with a
    PROXY protocol header (v1 or v2, before TLS) on every listener: the client's address and port are then
    the header's. ``telemetry``: ``auto``, ``terminate``, ``tap`` or ``off``. ``broker`` answers
    (terminate) or records (tap) telemetry;
    ``recorder`` (a :class:`~kip714.sinks.ParquetRecorder`) and ``on_payload`` add receivers to it; with a
    synchronous recorder (``sync=True``, ``--record-sync``) a push's answer, the proxy's own or the
    cluster's, reaches the client only once its row is durably on disk (later answers wait behind it; a
    failed write closes the client connection, ``stats["record_sync_failures"]``).
    ``ssl``: server-side :class:`ssl.SSLContext` for client connections; ``upstream_ssl``: client-side
    context toward the cluster. Limits: ``max_connections`` client connections, ``max_frame_bytes`` per
    frame (``stats["frames_too_large"]``), ``max_buffered_bytes`` held in unfinished requests the proxy
    reads whole (telemetry, ApiVersions, SASL; frames that stream through, such as Produce, never count)
    across all client connections — over it the connections holding the most are dropped
    (``stats["dropped_memory_budget"]``) —, ``idle_timeout_s`` without traffic closes a connection,
    ``connect_timeout_s`` per upstream connect. ``admin``: the
    :class:`~kip714.broker.config_admin.ClientMetricsAdmin` answering the CLIENT_METRICS resources of Kafka's
    config admin API in ``terminate`` mode (default: one over the broker's registry, changes in memory only,
    altering refused to everyone). ``upstream_check_interval_s``: how often the cluster is asked for its
    ApiVersions for :attr:`upstream_ok` (readiness; 0: never after the start)."""

    def __init__(
        self,
        upstream: str | Iterable[str | tuple[str, int]],
        broker: TelemetryBroker | None = None,
        host: str = "127.0.0.1",
        port: int = 9092,
        *,
        broker_port_base: int | None = None,
        broker_ports: dict[int, int] | None = None,
        advertised_host: str | None = None,
        advertised_port: int | None = None,
        advertised_broker_port_base: int | None = None,
        advertised_broker_ports: dict[int, int] | None = None,
        proxy_protocol: ProxyProtocol | None = None,
        telemetry: str = "auto",
        recorder: Recorder | None = None,
        on_payload: Callable[[TelemetryPayload], object] | None = None,
        ssl: _ssl.SSLContext | None = None,
        upstream_ssl: _ssl.SSLContext | None = None,
        max_connections: int = 10000,
        idle_timeout_s: float = 600.0,
        connect_timeout_s: float = 10.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES,
        summary_interval_s: float = 0.0,
        admin: ClientMetricsAdmin | None = None,
        upstream_check_interval_s: float = 0.0,
    ) -> None:
        if telemetry not in TELEMETRY_MODES:
            raise InvalidConfigError(f"telemetry must be one of {', '.join(TELEMETRY_MODES)}, not {telemetry!r}")
        self.upstreams = parse_upstream(upstream)
        self.broker = broker if broker is not None else TelemetryBroker(SubscriptionRegistry())
        self.admin = (
            admin
            if admin is not None
            else ClientMetricsAdmin(SubscriptionLayers(self.broker.registry), role="kip714 proxy")
        )
        self.host, self.port = host, port
        self.advertised_host = advertised_host
        if advertised_broker_ports and advertised_broker_port_base is not None:
            raise InvalidConfigError("give advertised broker ports or an advertised broker port base, not both")
        self.advertised_port = advertised_port
        self.advertised_broker_port_base = advertised_broker_port_base
        self.advertised_broker_ports = dict(advertised_broker_ports) if advertised_broker_ports else None
        self.proxy_protocol = proxy_protocol
        self.broker_port_base = broker_port_base
        self.explicit_ports = dict(broker_ports) if broker_ports else None
        self.telemetry = telemetry
        self.mode = telemetry if telemetry != "auto" else "terminate"  # resolved by start()
        self.recorder = recorder
        self.record_gate = attach_receivers(self.broker, recorder, on_payload)
        self.ssl, self.upstream_ssl = ssl, upstream_ssl
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.max_frame_bytes = max_frame_bytes
        self.summary_interval_s = summary_interval_s
        self.connections: set[ProxyConnection] = set()
        self.next_connection_id = connection_ids()
        self.stats = EndpointStats()
        self.budget = BufferBudget(max_buffered_bytes, self.stats)
        self.bytes_up = 0  # bytes read from clients
        self.bytes_down = 0  # bytes read from upstream brokers
        self.nodes: dict[int, tuple[str, int]] = {}  # node id -> upstream (host, port)
        self._ports: dict[int, int] = {}  # node id -> listening port
        self._servers: list[asyncio.AbstractServer] = []
        self._pending_servers: list[asyncio.Task[asyncio.Server]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._rotation = 0
        self.upstream_apis: dict[int, tuple[int, int]] = {}
        self._ready: asyncio.Event | None = None
        self.upstream_check_interval_s = upstream_check_interval_s
        #: the last check of the cluster answered (a bootstrap server answered ApiVersions)
        self.upstream_ok = False
        #: (node id or "bootstrap", reason) -> failures talking to the cluster: a connect refused or timed
        #: out ("refused", "timeout", "tls", "unreachable"), a node without an address ("unknown-node"), a
        #: broker that closed the connection ("closed"), a failed readiness check ("check-<reason>")
        self.upstream_failures: Counter[tuple[str, str]] = Counter()
        #: node id (or "bootstrap") -> upstream connections made
        self.upstream_connects: Counter[str] = Counter()
        #: requests forwarded or answered, by API key (index; the last slot counts keys outside 0-127)
        self.requests_by_key = [0] * 129
        #: set by :meth:`drain`: no new connection or request is taken
        self.draining = False
        self._configure_mode()

    # ---------------------------------------------------------------------------- configuration

    def _configure_mode(self) -> None:
        terminate = self.mode == "terminate"
        # terminate: the telemetry and admin APIs are answered here (added to ApiVersions when the cluster
        # lacks them, capped to the versions kip714 reads when it has them)
        self.api_additions = _TELEMETRY_APIS + ADMIN_APIS if terminate else ()
        self.caps = dict(MAX_VERSIONS)
        if self.mode in ("terminate", "tap"):
            self.caps[_GTS] = 0
            self.caps[_PUSH] = 0
        if terminate:
            self.caps.update({key: hi for key, _, hi in ADMIN_APIS})
        # API keys above Fetch the request path looks at
        self.special_apis = frozenset(
            set(REWRITERS)
            | REMOVED_APIS
            | {_GTS, _PUSH, int(ApiKey.API_VERSIONS), int(ApiKey.SASL_HANDSHAKE), int(ApiKey.SASL_AUTHENTICATE)}
            | ({key for key, _, _ in ADMIN_APIS} if terminate else set())
        )

    @property
    def broker_ports(self) -> dict[int, int]:
        """node id → the proxy port that stands for that upstream broker."""
        return dict(self._ports)

    def _port_for(self, node_id: int) -> int:
        if self.explicit_ports is not None:
            port = self.explicit_ports.get(node_id)
            if port is None:
                raise ListenerError(f"broker node id {node_id} has no port in --broker-ports")
            return port
        base = self.port + 1 if self.broker_port_base is None else self.broker_port_base
        if base == 0:
            return 0
        port = base + node_id
        if node_id < 0 or port > 65535:
            raise ListenerError(
                f"broker node id {node_id} maps to port {port}, outside 1-65535 "
                f"(--broker-port-base {base}); use --broker-ports"
            )
        return port

    def advertise(self, node_id: int, host: str, port: int) -> tuple[str, int]:
        """The proxy address that stands for upstream broker ``node_id`` (at ``host:port``): remembers the
        upstream address (the newest wins) and opens the broker's listener on first sight."""
        old = self.nodes.get(node_id)
        if old != (host, port):
            self.nodes[node_id] = (host, port)
            if old is not None:
                log.info("event=broker_moved node_id=%d from=%s:%d to=%s:%d", node_id, *old, host, port)
        listen = self._ports.get(node_id)
        if listen is None:
            listen = self._listen(node_id)
        return self.advertised_host or self.host, self._advertised_port(node_id, listen)

    def _advertised_port(self, node_id: int, listen: int) -> int:
        """The port clients are told for broker ``node_id`` (listening on ``listen``)."""
        if self.advertised_broker_ports is not None:
            port = self.advertised_broker_ports.get(node_id)
            if port is None:
                raise ListenerError(f"broker node id {node_id} has no port in --advertised-broker-ports")
            return port
        if self.advertised_broker_port_base is not None:
            port, how = self.advertised_broker_port_base + node_id, "--advertised-broker-port-base"
        elif self.advertised_port is not None:
            port, how = listen + self.advertised_port - self.port, "--advertised-port"
        else:
            return listen
        if not 1 <= port <= 65535:
            raise ListenerError(
                f"broker node id {node_id} is advertised at port {port} ({how}), outside 1-65535; "
                "use --advertised-broker-ports"
            )
        return port

    def node_for_address(self, host: str, port: int) -> int:
        for node_id, address in self.nodes.items():
            if address == (host, port):
                return node_id
        return -1

    def bootstrap_order(self) -> list[tuple[str, int]]:
        """The bootstrap servers, starting at the next one in turn (spreads bootstrap connections)."""
        n = len(self.upstreams)
        i = self._rotation % n
        self._rotation += 1
        return self.upstreams[i:] + self.upstreams[:i]

    def _listen(self, node_id: int | None) -> int:
        """Bind a listener now (synchronously, so the port is taken before any client is told about it)
        and start serving it; returns the port."""
        port: int = self.port if node_id is None else self._port_for(node_id)
        try:
            sock = socket.create_server((self.host, port), backlog=1024)
        except OSError as exc:
            what = "bootstrap" if node_id is None else f"broker node id {node_id}"
            raise ListenerError(f"cannot listen on {self.host}:{port} for {what}: {os_error_words(exc)}") from None
        sock.setblocking(False)
        port = sock.getsockname()[1]
        loop = asyncio.get_running_loop()

        def factory() -> ProxyConnection:
            return ProxyConnection(self, node_id)

        if self.proxy_protocol is not None:
            server = HeaderListener(sock, factory, self.proxy_protocol, self.ssl)
            self._servers.append(server)
        else:
            task = loop.create_task(loop.create_server(factory, sock=sock, ssl=self.ssl, backlog=1024))
            # the socket is closed there if the server never started (a failed start, or close() cancelling it)
            task.add_done_callback(lambda t: self._server_started(t, sock))
            self._pending_servers.append(task)
        if node_id is not None:
            self._ports[node_id] = port
            log.info("event=broker_listener node_id=%d port=%d upstream=%s:%d", node_id, port, *self.nodes[node_id])
        return port

    def _server_started(self, task: asyncio.Task[asyncio.Server], sock: socket.socket) -> None:
        self._pending_servers.remove(task)
        if not task.cancelled() and task.exception() is None:
            self._servers.append(task.result())
        else:
            sock.close()  # no server took it over

    # ---------------------------------------------------------------------------- life cycle

    async def start(self) -> None:
        """Ask the cluster for its APIs and brokers, resolve ``auto``, open the listeners."""
        self._ready = asyncio.Event()
        self.port = self._listen(None)  # first: the broker ports may derive from it
        try:
            await self._probe()
        except BaseException:
            await self.close()
            raise
        self._ready.set()
        self.upstream_ok = True
        if self._pending_servers:
            await asyncio.gather(*list(self._pending_servers), return_exceptions=True)
        self._tasks.append(asyncio.create_task(reap_idle(self, self.stats)))
        if self.upstream_check_interval_s > 0:
            self._tasks.append(asyncio.create_task(self._watch_upstream(self.upstream_check_interval_s)))
        if self.summary_interval_s > 0:
            self._tasks.append(asyncio.create_task(log_summaries(self, self.summary_interval_s)))
        log.info(
            "event=listening host=%s port=%d telemetry=%s upstream=%s broker_ports=%s advertised=%s tls=%s "
            "proxy_protocol=%s",
            self.host,
            self.port,
            self.mode,
            ",".join(f"{h}:{p}" for h, p in self.upstreams),
            self.broker_ports,
            {n: self._advertised_port(n, p) for n, p in self._ports.items()},
            self.ssl is not None,
            "off" if self.proxy_protocol is None else f"from:{self.proxy_protocol.describe()}",
        )

    async def _probe(self) -> None:
        errors = []
        for host, port in self.upstreams:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(
                        host, port, ssl=self.upstream_ssl, server_hostname=host if self.upstream_ssl else None
                    ),
                    self.connect_timeout_s,
                )
            except (OSError, asyncio.TimeoutError, _ssl.SSLError) as exc:
                errors.append(f"{host}:{port}: {upstream_error_words(exc)}")
                continue
            try:

                async def call(
                    body: ApiVersionsRequest | MetadataRequest,
                    version: int,
                    corr: int,
                    reader: asyncio.StreamReader = reader,
                    writer: asyncio.StreamWriter = writer,
                ) -> bytes:
                    writer.write(encode_request(body, corr, "kip714-proxy", version))
                    size = _I32.unpack(await reader.readexactly(4))[0]
                    if not 4 <= size <= self.max_frame_bytes:
                        raise Kip714Error(f"bad response size {size}")
                    return await reader.readexactly(size)

                frame = await asyncio.wait_for(call(ApiVersionsRequest(), 0, 1), self.connect_timeout_s)
                resp = decode_response(frame, int(ApiKey.API_VERSIONS), 0)
                if resp.body.error_code:
                    raise Kip714Error(f"ApiVersions error {resp.body.error_code}")
                self.upstream_apis = {a.api_key: (a.min_version, a.max_version) for a in resp.body.api_keys}
                self._resolve_mode()
                meta = self.upstream_apis.get(int(ApiKey.METADATA))
                if meta and meta[1] >= 1:
                    version = min(meta[1], 12)
                    try:
                        frame = await asyncio.wait_for(
                            call(MetadataRequest(topics=[]), version, 2), self.connect_timeout_s
                        )
                        # the brokers as a client's Metadata answer would name them (opens their listeners)
                        rewrite.rewrite_metadata(frame, version, self.advertise)
                    except ListenerError:
                        raise  # the proxy's own configuration: refuse to start
                    except (Kip714Error, OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
                        # e.g. a SASL listener: Metadata only after authentication; listeners open as
                        # clients' own Metadata answers name the brokers
                        log.warning("event=probe_metadata_failed upstream=%s:%d error=%r", host, port, exc)
                return
            except ListenerError:
                raise
            except (Kip714Error, OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
                errors.append(f"{host}:{port}: {upstream_error_words(exc)}")
            finally:
                writer.close()
        raise Kip714Error("no upstream bootstrap server answered ApiVersions: " + "; ".join(errors))

    async def check_upstream(self) -> bool:
        """Ask the cluster's bootstrap servers, in turn, for their ApiVersions; True when one answers (sets
        :attr:`upstream_ok`; a failure is counted in :attr:`upstream_failures` as ``check-<reason>``)."""
        timeout = min(self.connect_timeout_s, 2.0)
        reason = "none"
        for host, port in self.upstreams:
            writer = None
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(
                        host, port, ssl=self.upstream_ssl, server_hostname=host if self.upstream_ssl else None
                    ),
                    timeout,
                )
                writer.write(encode_request(ApiVersionsRequest(), 1, "kip714-proxy-check", 0))
                size = _I32.unpack(await asyncio.wait_for(reader.readexactly(4), timeout))[0]
                if not 4 <= size <= self.max_frame_bytes:
                    raise Kip714Error(f"bad response size {size}")
                frame = await asyncio.wait_for(reader.readexactly(size), timeout)
                if decode_response(frame, int(ApiKey.API_VERSIONS), 0).body.error_code == 0:
                    self.upstream_ok = True
                    return True
                reason = "error"
            except (Kip714Error, OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, _ssl.SSLError) as exc:
                reason = failure_reason(exc)
            finally:
                if writer is not None:
                    writer.close()
        if self.upstream_ok:
            log.warning(
                "event=upstream_down reason=%s upstream=%s", reason, ",".join(f"{h}:{p}" for h, p in self.upstreams)
            )
        self.upstream_failures[("bootstrap", f"check-{reason}")] += 1
        self.upstream_ok = False
        return False

    async def _watch_upstream(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            was = self.upstream_ok
            if await self.check_upstream() and not was:
                log.info("event=upstream_up upstream=%s", ",".join(f"{h}:{p}" for h, p in self.upstreams))

    @property
    def listening(self) -> bool:
        """Every listener is up (started, not draining or closed)."""
        return bool(
            self._ready is not None
            and self._ready.is_set()
            and self._servers
            and all(s.is_serving() for s in self._servers)
        )

    async def drain(self, timeout_s: float = 30.0, spread_s: float = 0.0) -> int:
        """Stop accepting on every listener, answer every request already forwarded or read whole, forward none
        after it (each connection stops at its next request boundary), then close each connection cleanly,
        the closes spread over ``spread_s`` (at most half of ``timeout_s``; see
        :func:`~kip714.endpoint.connection.stagger`: a client keeps one connection until late, so behind a
        balancer it reconnects to another replica before it loses the last). After ``timeout_s`` the
        connections left are aborted; returns how many. :meth:`close` afterwards flushes and closes the
        recording."""
        self.draining = True
        log.info("event=draining connections=%d timeout=%.1fs", len(self.connections), timeout_s)
        for t in list(self._pending_servers):
            t.cancel()
        for server in self._servers:
            server.close()
        aborted = await drain_connections(self, timeout_s, spread_s)
        log.info("event=drained aborted=%d", aborted)
        return aborted

    def _resolve_mode(self) -> None:
        offered = _GTS in self.upstream_apis and _PUSH in self.upstream_apis
        if self.telemetry == "auto":
            self.mode = "tap" if offered else "terminate"
        if self.mode == "tap" and not offered:
            log.warning(
                "event=no_telemetry_upstream the cluster does not advertise GetTelemetrySubscriptions and "
                "PushTelemetry (API keys 71, 72): with --telemetry tap its clients never push; auto or "
                "terminate answers them here"
            )
        if self.mode == "terminate":
            warn_if_no_subscription(self.broker)
        elif self.admin.alter_open or self.admin.principals or self.admin.layers.store is not None:
            log.warning(
                "event=admin_not_answered telemetry=%s: the cluster answers Kafka's admin API for "
                "client-metrics (the proxy's admin options apply with --telemetry terminate)",
                self.mode,
            )
        self._configure_mode()

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        for pending in list(self._pending_servers):
            pending.cancel()
        for server in self._servers:
            server.close()
        if self.record_gate is not None:
            await self.record_gate.settle()
        for conn in list(self.connections):
            conn._close()
        for server in self._servers:
            await server.wait_closed()
        if self.recorder is not None:
            self.recorder.close()
        if self._ready is not None and self._ready.is_set():  # a start that failed has no summary to give
            log.info("event=stopped %s", self.summary())

    async def serve(self, duration_s: float | None = None, stop: asyncio.Event | None = None) -> None:
        """Run until ``stop`` is set or ``duration_s`` passes (forever when neither is given)."""
        await serve_until(self, duration_s, stop)

    # ---------------------------------------------------------------------------- reporting

    @property
    def push_codes(self) -> Counter[int]:
        """Pushes by the error code they were answered with (the broker's count: answered here in terminate
        mode; in tap mode the recorded pushes are counted by the receivers)."""
        return Counter(self.broker.push_results())

    def summary(self) -> str:
        stats = self.stats
        return (
            f"telemetry={self.mode} connections_open={len(self.connections)} "
            f"connections_total={stats['connections']} refused={stats['connections_refused']} "
            f"bytes_from_clients={self.bytes_up} bytes_from_upstream={self.bytes_down} "
            f"protocol_errors={stats['protocol_errors']} frames_too_large={stats['frames_too_large']} "
            f"dropped_memory_budget={stats['dropped_memory_budget']} rewrite_errors={stats['rewrite_errors']} "
            f"upstream_errors={stats['upstream_errors']} brokers={self.broker_ports}"
            + (f" record_sync_failures={stats['record_sync_failures']}" if self.record_gate else "")
        )
