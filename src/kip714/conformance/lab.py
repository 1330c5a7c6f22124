"""The lab's scripted broker: a two-node cluster of listeners that answer like ``kip714 serve`` and log every
frame.

:class:`LabCluster` listens for node ids 1 and 2 (two ports), answers ApiVersions and Metadata itself
(Metadata names both nodes, so a client can move between connections) and GetTelemetrySubscriptions /
PushTelemetry through one shared :class:`~kip714.TelemetryBroker`, exactly as an Apache Kafka 4.1+ broker
would. Each telemetry answer then goes through the scenario's :class:`Script`, which may replace its error
code (after the broker decided, so the broker's state moves as Kafka's would, and its instance's last error
is set to the forced code), change the broker for what follows, or close the connection a moment after the
answer. Every request, answer and connection event lands in the run's :class:`~.trace.Trace` with the
lab's own times.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .._enums import ApiKey, ErrorCode
from .._protocol import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponseTopic,
    PushTelemetryRequest,
    PushTelemetryResponse,
    decode_request,
    encode_response,
)
from ..broker.manager import TelemetryBroker
from ..broker.subscriptions import kafka_uuid_string
from ..endpoint.connection import BufferBudget, EndpointStats, FramedConnection, connection_ids
from ..endpoint.server import ADVERTISED_APIS, API_VERSIONS_RANGE
from ..errors import Kip714Error, UnsupportedApiKeyError, UnsupportedVersionError
from .trace import ConnectionEvent, Exchange, Trace

__all__ = ["NODE_IDS", "Directive", "LabCluster", "Script"]

log = logging.getLogger("kip714.conformance")

#: The node ids the lab's Metadata names; the client's bootstrap address is the first one's listener.
NODE_IDS = (1, 2)
#: Frames up to this size reach the broker (so an oversized push is answered TELEMETRY_TOO_LARGE, not dropped).
LAB_MAX_FRAME_BYTES = 16 * 1024 * 1024
_PUSH = int(ApiKey.PUSH_TELEMETRY)
_UNKNOWN_TOPIC = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
_UNKNOWN_TOPIC_ID = int(ErrorCode.UNKNOWN_TOPIC_ID)


@dataclass
class Directive:
    """What a scenario's script does with one telemetry answer."""

    #: replace the broker's error code with this one (the broker's instance then remembers it as its last error)
    error_code: int | None = None
    #: close the connection this long after the answer is written
    close_after_s: float | None = None
    #: said in the evidence next to the exchange
    note: str = ""


class Script(Protocol):
    """A scenario's hooks into the lab."""

    def setup(self, broker: TelemetryBroker) -> None:
        """Configure the fresh broker (subscription, limits, codecs) before the client starts."""

    def on_telemetry(self, lab: LabCluster, exchange: Exchange, response: Any) -> Directive | None:
        """Called with every Get / push after the broker decided and before the answer is written."""


def _raw_push_fields(frame: bytes) -> tuple[int, uuid.UUID, dict[str, Any], bool] | None:
    """A PushTelemetry v0 frame that the strict decoder refused (a null Metrics field): its correlation id,
    its fields and whether Metrics was null, read by hand so that the evidence can show it."""
    try:
        api_key, _version, corr = struct.unpack_from(">hhi", frame, 0)
        if api_key != _PUSH:
            return None
        pos = 8
        (id_len,) = struct.unpack_from(">h", frame, pos)
        pos += 2 + max(0, id_len)
        pos += 1 + frame[pos]  # header tagged fields: a count (assumed < 128) of none
        instance = uuid.UUID(bytes=bytes(frame[pos : pos + 16]))
        pos += 16
        sub_id, terminating, ctype = struct.unpack_from(">i?b", frame, pos)
        pos += 6
        length, shift = 0, 0
        while True:
            byte = frame[pos]
            pos += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        fields = {
            "client_instance_id": kafka_uuid_string(instance),
            "subscription_id": sub_id,
            "terminating": bool(terminating),
            "compression_type": ctype,
        }
        return corr, instance, fields, length == 0
    except (struct.error, IndexError, ValueError):
        return None


def _telemetry_fields(body: Any) -> dict[str, Any]:
    if type(body) is PushTelemetryRequest:
        return {
            "client_instance_id": kafka_uuid_string(body.client_instance_id),
            "subscription_id": body.subscription_id,
            "terminating": bool(body.terminating),
            "compression_type": body.compression_type,
        }
    return {"client_instance_id": kafka_uuid_string(body.client_instance_id)}


def _answer_fields(response: Any) -> dict[str, Any]:
    if type(response) is GetTelemetrySubscriptionsResponse and response.error_code == 0:
        return {
            "client_instance_id": kafka_uuid_string(response.client_instance_id),
            "subscription_id": response.subscription_id,
            "accepted_compression_types": list(response.accepted_compression_types),
            "push_interval_ms": response.push_interval_ms,
            "telemetry_max_bytes": response.telemetry_max_bytes,
            "delta_temporality": bool(response.delta_temporality),
            "requested_metrics": list(response.requested_metrics),
        }
    return {}


class _LabConnection(FramedConnection):
    """One client connection to one node of the lab: frames in, answers out, everything logged (every frame
    reaches :meth:`handle_frame`: the lab traces each exchange and its script may change an answer)."""

    decides = False

    def __init__(self, lab: LabCluster, node_id: int) -> None:
        super().__init__(lab)
        self.lab = lab
        self.broker_node_id = node_id
        self.rx_ns = 0
        self.close_reason = ""

    @property
    def node(self) -> int:
        return self.broker_node_id if self.broker_node_id is not None else 0

    def connection_made(self, transport: Any) -> None:
        if self.accept(transport):
            self.lab.opened(self)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.lab.closed(self)

    def data_received(self, data: bytes) -> None:
        self.rx_ns = time.monotonic_ns()
        super().data_received(data)

    def lab_close(self, reason: str) -> None:
        """Close the connection from the lab's side (a scenario's script)."""
        if self.transport is not None and not self.transport.is_closing():
            self.closed_by_endpoint = True
            self.close_reason = reason
            self.transport.close()

    def drop(self, reason: str) -> None:
        """Close at once after a request Kafka would refuse to parse (the reason goes into the evidence, not to
        the log: it is the client's finding, not the lab's problem)."""
        log.debug("event=disconnect peer=%s:%s reason=%r", self.address, self.port, reason)
        self.close_reason = reason
        self.endpoint.stats["protocol_errors"] += 1
        self.closed_by_endpoint = True
        self.free_buffers()
        if self.transport is not None:
            self.transport.abort()

    def _exchange(self, api_key: int, version: int, corr: int, client_id: str | None) -> Exchange:
        trace = self.lab.trace
        ex = Exchange(
            seq=trace.next_seq(),
            conn=self.connection_id,
            node=self.node,
            api_key=api_key,
            api_version=version,
            correlation_id=corr,
            client_id=client_id,
            t_rx=trace.at(self.rx_ns),
        )
        trace.events.append(ex)
        return ex

    def _answer(self, ex: Exchange, corr: int, body: Any, version: int) -> None:
        frame = encode_response(corr, body, version)
        ex.t_tx = self.lab.trace.at(time.monotonic_ns())
        self.write(frame)

    def handle_frame(self, frame: bytes) -> None:
        try:
            req = decode_request(frame)
        except UnsupportedVersionError as exc:
            header: Any = getattr(exc, "header")  # noqa: B009 (set by the native decoder, not declared)
            ex = self._exchange(header.api_key, header.api_version, header.correlation_id, header.client_id)
            if header.api_key == ApiKey.API_VERSIONS:
                ex.error_code = int(ErrorCode.UNSUPPORTED_VERSION)
                body = ApiVersionsResponse(error_code=ex.error_code, api_keys=[API_VERSIONS_RANGE])
                self._answer(ex, header.correlation_id, body, 0)
                return
            ex.problem = f"unsupported version {header.api_version} of API key {header.api_key}"
            self.drop(ex.problem)
            return
        except UnsupportedApiKeyError as exc:
            h: Any = getattr(exc, "header")  # noqa: B009 (set by the native decoder, not declared)
            ex = self._exchange(h.api_key, h.api_version, h.correlation_id, h.client_id)
            ex.problem = f"API key {h.api_key} is not served by the lab (nor advertised in ApiVersions)"
            self.drop(ex.problem)
            return
        except Kip714Error as exc:
            raw = _raw_push_fields(frame)
            if raw is not None:
                corr, instance, fields, null = raw
                ex = self._exchange(_PUSH, 0, corr, None)
                ex.request, ex.instance, ex.metrics_null = fields, instance, null
            else:
                ex = self._exchange(-1, -1, -1, None)
            ex.problem = f"malformed request: {exc} (a Kafka broker closes the connection)"
            self.drop(ex.problem)
            return
        body = req.body
        version = req.api_version
        ex = self._exchange(req.api_key, version, req.correlation_id, req.client_id)
        if type(body) is PushTelemetryRequest or type(body) is GetTelemetrySubscriptionsRequest:
            self._telemetry(ex, req, body)
        elif type(body) is ApiVersionsRequest:
            error = self.identity.api_versions(body, version)
            if version >= 3:
                ex.request = {
                    "client_software_name": body.client_software_name,
                    "client_software_version": body.client_software_version,
                }
                if not error and self.lab.trace.software is None:
                    self.lab.trace.software = (body.client_software_name, body.client_software_version)
            ex.error_code = error
            resp = ApiVersionsResponse(
                error_code=error, api_keys=[ApiVersion(*a) for a in ADVERTISED_APIS] if not error else []
            )
            self._answer(ex, req.correlation_id, resp, version)
        elif type(body) is MetadataRequest:
            if version < 12 and any(t.name is None for t in body.topics or ()):
                ex.problem = f"Metadata v{version} request with a null topic name"
                self.drop(ex.problem)
                return
            ex.error_code = 0
            self._answer(ex, req.correlation_id, self.lab.metadata(body), version)

    def _telemetry(self, ex: Exchange, req: Any, body: Any) -> None:
        lab = self.lab
        ex.request = _telemetry_fields(body)
        ex.instance = body.client_instance_id
        if type(body) is PushTelemetryRequest:
            ex.metrics = bytes(body.metrics)
        info = self.identity.client_info(req.client_id)
        response, _ = lab.broker.handle(body, info, None, self.connection_id, node_id=self.broker_node_id)
        ex.error_code = response.error_code
        ex.answer = _answer_fields(response)
        if ex.answer:
            ex.given_instance = response.client_instance_id
        directive = lab.script.on_telemetry(lab, ex, response)
        if directive is not None:
            if directive.error_code is not None and directive.error_code != response.error_code:
                said = response.error_code
                response = (
                    PushTelemetryResponse(0, directive.error_code)
                    if type(body) is PushTelemetryRequest
                    else GetTelemetrySubscriptionsResponse(0, directive.error_code)
                )
                instance = body.client_instance_id
                if instance.int != 0 and lab.broker.instances.get_state(instance.bytes) is not None:
                    lab.broker.instances.set_last_error(instance.bytes, directive.error_code)
                ex.error_code = directive.error_code
                ex.answer = _answer_fields(response)
                ex.given_instance = None
                ex.lab = f"answer forced to {directive.error_code} (the broker said {said})"
            if directive.note:
                ex.lab = f"{ex.lab}; {directive.note}" if ex.lab else directive.note
        self._answer(ex, req.correlation_id, response, req.api_version)
        if directive is not None and directive.close_after_s is not None:
            reason = "scenario: close the connection that carries telemetry"
            asyncio.get_running_loop().call_later(directive.close_after_s, self.lab_close, reason)


class LabCluster:
    """The lab's two listeners (node ids :data:`NODE_IDS`) around one :class:`~kip714.TelemetryBroker`.

    ``ports``: the ports to bind (0: any free one); ``--listen`` gives fixed ones. Binds ``host`` only."""

    def __init__(
        self,
        broker: TelemetryBroker,
        trace: Trace,
        script: Script,
        host: str = "127.0.0.1",
        ports: tuple[int, int] = (0, 0),
    ) -> None:
        self.broker = broker
        self.trace = trace
        self.script = script
        self.host = host
        self.ports = list(ports)
        self.connections: set[FramedConnection] = set()
        self.next_connection_id: Callable[[], int] = connection_ids()
        self.max_connections = 256
        self.max_frame_bytes = LAB_MAX_FRAME_BYTES
        self.ssl = None
        self.record_gate = None
        self.stats = EndpointStats()
        self.budget = BufferBudget(64 * 1024 * 1024, self.stats)
        self.open_connections: set[_LabConnection] = set()
        self.activity = asyncio.Event()  # set on every connection event (the listen mode waits on it)
        self._servers: list[asyncio.AbstractServer] = []

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.ports[0]}"

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            for i, node in enumerate(NODE_IDS):
                server = await loop.create_server(self._factory(node), self.host, self.ports[i], reuse_address=True)
                self._servers.append(server)
                self.ports[i] = server.sockets[0].getsockname()[1]
        except OSError:
            await self.close()
            raise

    def _factory(self, node: int) -> Callable[[], _LabConnection]:
        return lambda: _LabConnection(self, node)

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.closed_by_endpoint = True
                if isinstance(conn, _LabConnection):
                    conn.close_reason = "the run is over"
                conn.transport.close()
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()

    def metadata(self, request: MetadataRequest) -> MetadataResponse:
        topics = []
        for t in request.topics or ():
            code = _UNKNOWN_TOPIC if t.name is not None else _UNKNOWN_TOPIC_ID
            topics.append(MetadataResponseTopic(error_code=code, name=t.name, topic_id=t.topic_id))
        brokers = [MetadataResponseBroker(node, self.host, port, None) for node, port in zip(NODE_IDS, self.ports)]
        return MetadataResponse(
            brokers=brokers, cluster_id="kip714-conformance-lab", controller_id=NODE_IDS[0], topics=topics
        )

    def opened(self, conn: _LabConnection) -> None:
        self.open_connections.add(conn)
        self.trace.events.append(
            ConnectionEvent(self.trace.at(time.monotonic_ns()), conn.connection_id, conn.node, "open")
        )
        self.activity.set()

    def closed(self, conn: _LabConnection) -> None:
        if conn not in self.open_connections:
            return
        self.open_connections.discard(conn)
        by = "lab" if conn.closed_by_endpoint else "client"
        self.trace.events.append(
            ConnectionEvent(
                self.trace.at(time.monotonic_ns()), conn.connection_id, conn.node, "close", by, conn.close_reason
            )
        )
        self.activity.set()

    def close_connection(self, conn_id: int, reason: str) -> bool:
        """Close the open connection ``conn_id`` from the lab's side; False if it is not open."""
        for conn in list(self.open_connections):
            if conn.connection_id == conn_id:
                conn.lab_close(reason)
                return True
        return False
