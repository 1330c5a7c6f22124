"""``kip714 serve``: a KIP-714 telemetry endpoint that real Kafka clients push to.

It is **not a Kafka broker**. It speaks the subset of the Kafka protocol a client needs before it pushes
telemetry — ApiVersions (v0–v4), Metadata (itself as the only broker, no topics), GetTelemetrySubscriptions
and PushTelemetry — and answers the telemetry requests through :class:`~kip714.TelemetryBroker`, exactly
as an Apache Kafka 4.1+ broker would. Its subscriptions can be managed with Kafka's admin API
(DescribeConfigs, IncrementalAlterConfigs, AlterConfigs, ListConfigResources on CLIENT_METRICS resources:
``kafka-client-metrics.sh``, kafka-python's ``KafkaAdminClient``), answered by a
:class:`~kip714.broker.config_admin.ClientMetricsAdmin`. Use it as a telemetry collector, or as a test peer
when developing a client's KIP-714 support. Any other API key gets a log line and a clean disconnect.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl as _ssl
from collections import Counter
from collections.abc import Callable

from .._enums import DEFAULT_MAX_BUFFERED_BYTES, ApiKey, ErrorCode, serve_max_frame_bytes
from .._protocol import (
    AlterConfigsRequest,
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeConfigsRequest,
    GetTelemetrySubscriptionsRequest,
    IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest,
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponseTopic,
    PushTelemetryRequest,
    decode_request,
    encode_response,
)
from ..broker.config_admin import ADMIN_APIS, ClientMetricsAdmin
from ..broker.manager import TelemetryBroker
from ..broker.receivers import TelemetryPayload
from ..broker.subscription_layers import SubscriptionLayers
from ..broker.subscriptions import SubscriptionRegistry
from ..errors import Kip714Error, UnsupportedApiKeyError, UnsupportedVersionError
from .connection import (
    BufferBudget,
    EndpointStats,
    FramedConnection,
    Recorder,
    attach_receivers,
    connection_ids,
    drain_connections,
    log_summaries,
    os_error_words,
    reap_idle,
    serve_until,
)
from .proxy_protocol import HeaderListener, ProxyProtocol

__all__ = [
    "TelemetryServer",
    "ADVERTISED_APIS",
]

log = logging.getLogger("kip714.server")

#: (api_key, min_version, max_version) advertised in ApiVersions responses: every API answered, in key order.
ADVERTISED_APIS = tuple(
    sorted(
        (
            (int(ApiKey.METADATA), 0, 12),
            (int(ApiKey.API_VERSIONS), 0, 4),
            (int(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS), 0, 0),
            (int(ApiKey.PUSH_TELEMETRY), 0, 0),
            *ADMIN_APIS,
        )
    )
)
#: The ApiVersions versions kip714 decodes (an answer to a newer one lists this range, in the v0 format).
API_VERSIONS_RANGE = ApiVersion(int(ApiKey.API_VERSIONS), 0, 4)
UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
UNKNOWN_TOPIC_ID = int(ErrorCode.UNKNOWN_TOPIC_ID)


class _ServeConnection(FramedConnection):
    """A client connection of ``kip714 serve``: every request is answered here."""

    def handle_frame(self, frame: bytes) -> None:
        server = self.endpoint
        try:
            req = decode_request(frame)
        except UnsupportedVersionError as exc:
            header = exc.header
            if header.api_key == ApiKey.API_VERSIONS:
                # Kafka answers an ApiVersions version it does not know in the v0 format, listing its range
                body = ApiVersionsResponse(error_code=int(ErrorCode.UNSUPPORTED_VERSION), api_keys=[API_VERSIONS_RANGE])
                self.write(encode_response(header.correlation_id, body, 0))
                return
            self.drop(f"unsupported version {header.api_version} of API key {header.api_key}")
            return
        except UnsupportedApiKeyError as exc:
            h = exc.header
            self.drop(f"API key {h.api_key} v{h.api_version} is not served (client_id={h.client_id!r})")
            return
        except Kip714Error as exc:
            self.drop(f"malformed request: {exc}")
            return
        body = req.body
        version = req.api_version
        if type(body) is PushTelemetryRequest:
            self.send_durable(self.telemetry_response(req))  # after its row is on disk with --record-sync
        elif type(body) is GetTelemetrySubscriptionsRequest:
            self.write(self.telemetry_response(req))
        elif type(body) is ApiVersionsRequest:
            error = self.identity.api_versions(body, version)
            resp = ApiVersionsResponse(
                error_code=error, api_keys=[ApiVersion(*a) for a in ADVERTISED_APIS] if not error else []
            )
            self.write(encode_response(req.correlation_id, resp, version))
        elif type(body) is MetadataRequest:
            if version < 12 and any(t.name is None for t in body.topics or ()):
                # Kafka: "Topic name can not be null for version 10/11" (InvalidRequestException)
                self.drop(f"Metadata v{version} request with a null topic name")
                return
            self.write(encode_response(req.correlation_id, server.metadata(body), version))
        elif type(body) is DescribeConfigsRequest:
            self.write(encode_response(req.correlation_id, server.admin.describe_configs(body), version))
        elif type(body) is IncrementalAlterConfigsRequest:
            resp = server.admin.incremental_alter_configs(body, self.identity.principal)
            self.write(encode_response(req.correlation_id, resp, version))
        elif type(body) is AlterConfigsRequest:
            resp = server.admin.alter_configs(body, self.identity.principal)
            self.write(encode_response(req.correlation_id, resp, version))
        elif type(body) is ListConfigResourcesRequest:
            self.write(encode_response(req.correlation_id, server.admin.list_config_resources(body, version), version))


class TelemetryServer:
    """The asyncio server behind ``kip714 serve``.

    ``advertised_host``/``advertised_port`` are what Metadata tells clients (set them for clients behind
    NAT); by default the bound address. Accepted pushes leave through the broker's receivers (one exit,
    see :meth:`kip714.TelemetryBroker.add_receiver`); ``recorder`` (a
    :class:`~kip714.sinks.ParquetRecorder`, which records every push) and ``on_payload`` (called with
    every accepted payload) are conveniences that add a receiver to the broker.

    Limits: at most ``max_connections`` open connections (more are accepted and closed at once); a size
    prefix over ``max_frame_bytes`` closes the connection before anything is buffered for the frame, as
    Kafka does (``stats["frames_too_large"]``; default: what the requests served can need, the broker's
    ``telemetry_max_bytes`` plus ``SERVE_FRAME_HEADROOM``, see :func:`kip714._enums.serve_max_frame_bytes`);
    at most ``max_buffered_bytes`` are held in unfinished frames across all connections, over it the
    connections holding the most are dropped (:class:`~kip714.endpoint.connection.BufferBudget`,
    ``stats["dropped_memory_budget"]``), so resident memory stays within about that budget above the
    baseline whatever the clients send; a
    connection with no complete request for ``idle_timeout_s`` is closed (bytes trickling into a frame
    that never completes do not count); while a client leaves its responses unread, the server stops
    reading its requests (asyncio flow control), so neither buffer grows without bound. As in Kafka 4.0+,
    the client instance created on a connection is dropped when that connection closes
    (``stats["instances_dropped_on_disconnect"]``). ``ssl``: an :class:`ssl.SSLContext` (server side) to
    take TLS connections only (``security.protocol=SSL`` clients). ``admin``: the
    :class:`~kip714.broker.config_admin.ClientMetricsAdmin` answering Kafka's config admin requests (default:
    one over the broker's registry, changes in memory only, altering refused to everyone). ``proxy_protocol``:
    a :class:`~kip714.endpoint.proxy_protocol.ProxyProtocol` when a TCP load balancer in front opens every
    connection with a PROXY protocol header (v1 or v2, before TLS): the client's address and port are then
    the header's, a connection without one (or from a peer it does not trust) is refused.

    With a synchronous recorder (``ParquetRecorder(..., sync=True)``, ``--record-sync``) the answer to a push
    is written only once its row is durably on disk, later answers on the connection waiting behind it; a
    failed write closes the connection instead of answering (``stats["record_sync_failures"]``)."""

    def __init__(
        self,
        broker: TelemetryBroker | None = None,
        host: str = "127.0.0.1",
        port: int = 9092,
        *,
        advertised_host: str | None = None,
        advertised_port: int | None = None,
        max_frame_bytes: int | None = None,
        max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES,
        max_connections: int = 10000,
        idle_timeout_s: float = 600.0,
        recorder: Recorder | None = None,
        cluster_id: str = "kip714-telemetry",
        summary_interval_s: float = 0.0,
        on_payload: Callable[[TelemetryPayload], object] | None = None,
        ssl: _ssl.SSLContext | None = None,
        admin: ClientMetricsAdmin | None = None,
        proxy_protocol: ProxyProtocol | None = None,
    ) -> None:
        self.broker = broker if broker is not None else TelemetryBroker(SubscriptionRegistry())
        self.admin = admin if admin is not None else ClientMetricsAdmin(SubscriptionLayers(self.broker.registry))
        self.host, self.port = host, port
        self.advertised_host, self.advertised_port = advertised_host, advertised_port
        self._max_frame_bytes = max_frame_bytes
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self.recorder = recorder
        self.cluster_id = cluster_id
        self.summary_interval_s = summary_interval_s
        self.ssl = ssl
        self.proxy_protocol = proxy_protocol
        self.record_gate = attach_receivers(self.broker, recorder, on_payload)
        self.connections: set[FramedConnection] = set()
        self.next_connection_id = connection_ids()
        self._stats = EndpointStats()
        self.budget = BufferBudget(max_buffered_bytes, self._stats)
        self._server: asyncio.AbstractServer | None = None
        self._tasks: list[asyncio.Task[None]] = []
        #: set by :meth:`drain`: no new connection or request is taken
        self.draining = False

    @property
    def max_frame_bytes(self) -> int:
        """The largest request frame read: as given, else the broker's ``telemetry_max_bytes`` plus headroom."""
        if self._max_frame_bytes is not None:
            return self._max_frame_bytes
        return serve_max_frame_bytes(self.broker.telemetry_max_bytes)

    @max_frame_bytes.setter
    def max_frame_bytes(self, value: int | None) -> None:
        self._max_frame_bytes = value

    @property
    def node_id(self) -> int:
        return self.broker.node_id

    @property
    def stats(self) -> EndpointStats:
        """Connection-level counters, plus ``gets`` and ``pushes`` as the broker counted them."""
        decisions = self.broker.instances.decision_counts()
        self._stats["gets"] = sum(decisions["get"].values())
        self._stats["pushes"] = sum(self.push_codes.values())
        return self._stats

    @property
    def push_codes(self) -> Counter[int]:
        """Pushes by the error code they were answered with (the broker's count)."""
        return Counter(self.broker.push_results())

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            if self.proxy_protocol is not None:
                sock = socket.create_server((self.host, self.port), backlog=1024)
                self.port = sock.getsockname()[1]
                self._server = HeaderListener(sock, lambda: _ServeConnection(self), self.proxy_protocol, self.ssl)
            else:
                self._server = await loop.create_server(
                    lambda: _ServeConnection(self), self.host, self.port, reuse_address=True, backlog=1024, ssl=self.ssl
                )
                self.port = self._server.sockets[0].getsockname()[1]
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on {self.host}:{self.port}: {os_error_words(exc)}") from None
        self._tasks.append(asyncio.create_task(reap_idle(self, self._stats)))
        if self.summary_interval_s > 0:
            self._tasks.append(asyncio.create_task(log_summaries(self, self.summary_interval_s)))
        log.info(
            "event=listening host=%s port=%d node_id=%d advertised=%s:%d tls=%s proxy_protocol=%s",
            self.host,
            self.port,
            self.node_id,
            self.advertised_host or self.host,
            self.advertised_port or self.port,
            self.ssl is not None,
            "off" if self.proxy_protocol is None else f"from:{self.proxy_protocol.describe()}",
        )

    @property
    def listening(self) -> bool:
        """The listener is up (started, not draining or closed)."""
        return self._server is not None and self._server.is_serving()

    async def drain(self, timeout_s: float = 30.0, spread_s: float = 0.0) -> int:
        """Stop accepting, answer every request already read whole (a push held for ``--record-sync`` once its
        row is on disk), then close each connection cleanly: clients see whole answers, then the end of the
        connection; the closes spread over ``spread_s`` (at most half of ``timeout_s``; see
        :func:`~kip714.endpoint.connection.stagger`). After ``timeout_s`` the connections left are aborted;
        returns how many. :meth:`close` afterwards flushes and closes the recording."""
        self.draining = True
        log.info("event=draining connections=%d timeout=%.1fs", len(self.connections), timeout_s)
        if self._server is not None:
            self._server.close()
        aborted = await drain_connections(self, timeout_s, spread_s)
        log.info("event=drained aborted=%d", aborted)
        return aborted

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        if self._server is not None:
            self._server.close()
            if self.record_gate is not None:
                await self.record_gate.settle()
            for conn in list(self.connections):
                if conn.transport is not None:
                    conn.closed_by_endpoint = True
                    conn.transport.close()
            await self._server.wait_closed()
        if self.recorder is not None:
            self.recorder.close()
        log.info("event=stopped %s", self.summary())

    async def serve(self, duration_s: float | None = None, stop: asyncio.Event | None = None) -> None:
        """Run until ``stop`` is set or ``duration_s`` passes (forever when neither is given)."""
        await serve_until(self, duration_s, stop)

    # ------------------------------------------------------------------------------------ answers

    def metadata(self, request: MetadataRequest) -> MetadataResponse:
        topics = []
        for t in request.topics or ():
            # a topic asked for by id alone (v12+, name null) is an unknown topic id, as in Kafka
            code = UNKNOWN_TOPIC_OR_PARTITION if t.name is not None else UNKNOWN_TOPIC_ID
            topics.append(MetadataResponseTopic(error_code=code, name=t.name, topic_id=t.topic_id))
        me = MetadataResponseBroker(
            self.node_id, self.advertised_host or self.host, self.advertised_port or self.port, None
        )
        return MetadataResponse(brokers=[me], cluster_id=self.cluster_id, controller_id=self.node_id, topics=topics)

    def summary(self) -> str:
        stats = self.stats
        codes = " ".join(
            f"{ErrorCode(c).name if c in ErrorCode._value2member_map_ else c}={n}"
            for c, n in sorted(self.push_codes.items())
        )
        return (
            f"connections_open={len(self.connections)} connections_total={stats['connections']} "
            f"gets={stats['gets']} pushes={stats['pushes']} push_results=[{codes}] "
            f"instances={len(self.broker.instances)} protocol_errors={stats['protocol_errors']} "
            f"frames_too_large={stats['frames_too_large']} "
            f"dropped_memory_budget={stats['dropped_memory_budget']} buffered_bytes={self.budget.total}"
            + (f" record_sync_failures={stats['record_sync_failures']}" if self.record_gate else "")
        )
