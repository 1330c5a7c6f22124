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
  :class:`~kip714.TelemetryBroker` (``node_id`` = the upstream node the connection maps to); ``tap``
  forwards them and records each push with the upstream's answer (and with what the upstream's
  GetTelemetrySubscriptions answer told the client: subscription, push interval, expiry); ``off``
  forwards them untouched; ``auto`` is ``tap`` when the cluster advertises both APIs, else ``terminate``.

SASL PLAIN and SCRAM pass through; the user name becomes the telemetry principal (``User:<name>``).

The data path reads frame boundaries and request headers only (:class:`~kip714.endpoint.stream.FrameStream`)
and remembers, per connection and in order, what each forwarded request expects back (Kafka answers in
order; a response whose correlation id is not the next expected one closes the connection). Flow control
runs both ways: a client that does not read its responses stops the proxy reading from its upstream
connection (and from the client), an upstream that does not read stops the proxy reading from the client;
write buffers are bounded. An upstream that closes closes its client connection.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import ssl as _ssl
import struct
import time
from collections import Counter
from typing import Any, Iterable

from .._enums import DEFAULT_MAX_BUFFERED_BYTES, ApiKey, ErrorCode
from .._protocol import (
    DEFAULT_MAX_FRAME_BYTES,
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from ..broker.manager import TelemetryBroker
from ..broker.receivers import CallbackReceiver
from ..broker.subscriptions import SubscriptionRegistry
from ..errors import (FrameTooLargeError, InvalidConfigError, Kip714Error, ListenerError, RewriteError,
                      UnsupportedVersionError)
from . import rewrite
from .connection import (BufferBudget, EndpointConnection, EndpointStats, RecordGate, connection_ids, log_summaries,
                         os_error_words, reap_idle, serve_until, warn_if_no_subscription)
from .rewrite import MAX_VERSIONS, REMOVED_APIS, REWRITERS
from .stream import CAPTURE, STREAM, FrameStream

__all__ = ["TelemetryProxy", "TELEMETRY_MODES", "parse_upstream", "parse_broker_ports"]

log = logging.getLogger("kip714.proxy")

#: Values of ``telemetry``.
TELEMETRY_MODES = ("auto", "terminate", "tap", "off")

_GTS = int(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS)
_PUSH = int(ApiKey.PUSH_TELEMETRY)
_PRODUCE = int(ApiKey.PRODUCE)
_FETCH = int(ApiKey.FETCH)
_API_VERSIONS = int(ApiKey.API_VERSIONS)
_SASL_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)
_SASL_AUTHENTICATE = int(ApiKey.SASL_AUTHENTICATE)
_UNSUPPORTED_VERSION = int(ErrorCode.UNSUPPORTED_VERSION)
_TELEMETRY_APIS = ((_GTS, 0, 0), (_PUSH, 0, 0))
#: The ApiVersions versions the proxy reads (an answer to a newer request lists this range, in v0 format).
_API_VERSIONS_RANGE = ApiVersion(_API_VERSIONS, 0, MAX_VERSIONS[_API_VERSIONS])

_REQ_HEAD = struct.Struct(">hhi")      # api_key, api_version, correlation_id (after the size prefix)
_I32 = struct.Struct(">i")

# what a forwarded request expects back (the second item of a pending entry)
_A_PASS = 0          # the response streams through
_A_REWRITE = 1       # addresses to rewrite: info = (rewrite function, version)
_A_API_VERSIONS = 2  # info = (version, client_id)
_A_TAP = 3           # tap: a PushTelemetry to record with the upstream's answer, or a Get whose answer to
                     # remember (told_by_upstream): info = decoded request
_A_SASL = 4          # a SaslAuthenticate: info = the user name it authenticates as (or None)
_A_LOCAL = 5         # an answer the proxy made: info = the frame to write when its turn comes
_A_INTERNAL = 6      # the proxy's own ApiVersions: info = (client correlation id, client version, our version)
_INTERNAL_CORRELATION_ID = 0x7FFF_F714

_WRITE_HIGH = 1 << 20   # write-buffer high-water mark of each side (bytes)


class _Drop(Exception):
    """Close the client connection (and its upstream connection) for this reason. Private control flow:
    raised and caught inside a connection's request path (like a Kip714Error there), never seen outside this
    module, so it is not in kip714.errors."""


def _reason(exc: BaseException) -> str:
    """An upstream failure in words: ``connection refused``, ``timed out``… (not an exception's repr)."""
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, asyncio.IncompleteReadError):
        return "closed the connection"
    return os_error_words(exc)


def parse_upstream(spec: str | Iterable[Any]) -> list[tuple[str, int]]:
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


def parse_broker_ports(spec: str) -> dict[int, int]:
    """``1=9193,2=9194`` → {1: 9193, 2: 9194}."""
    out = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        node, sep, port = item.partition("=")
        try:
            out[int(node)] = int(port)
        except ValueError:
            raise InvalidConfigError(f"broker port {item!r} is not NODE=PORT") from None
        if not 0 <= int(node) < 2**31 or not 1 <= int(port) <= 65535:
            raise InvalidConfigError(f"broker port {item!r}: node ids are 0-{2**31 - 1}, ports 1-65535")
    if len(set(out.values())) != len(out):
        raise InvalidConfigError(f"two brokers share a port in {spec!r}")
    return out


class _Upstream(asyncio.Protocol):
    """The proxy's connection to one upstream broker, on behalf of one client connection."""

    def __init__(self, client: _ClientConnection) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.set_write_buffer_limits(_WRITE_HIGH)

    def data_received(self, data: bytes) -> None:
        self.client.response_data(data)

    def connection_lost(self, exc) -> None:
        self.client.upstream_lost(exc)

    def eof_received(self):
        return False    # close

    # the upstream reads slower than the client sends: stop reading the client
    def pause_writing(self) -> None:
        self.client.block_reading(2, True)

    def resume_writing(self) -> None:
        self.client.block_reading(2, False)


class _ClientConnection(EndpointConnection):
    """One client connection of the proxy and its upstream connection."""

    def __init__(self, proxy: TelemetryProxy, node_id: int | None) -> None:
        super().__init__(proxy)
        self.proxy = proxy
        self.listener_node = node_id            # None: the bootstrap listener
        self.node_id = -1 if node_id is None else node_id   # the upstream node (telemetry's node_id)
        self.upstream: _Upstream | None = None
        self.early: list[bytes] = []            # read before the upstream connected (uvloop; see data_received)
        self.pending: collections.deque = collections.deque()
        self.locals = 0                         # _A_LOCAL entries in pending
        # read_block bits: 1 upstream not ready, 2 upstream full, 4 client full, 8 answers held
        self.closing = False
        self.sasl_mechanism = ""
        self.requests = FrameStream(self._request_head, self._request_captured, self._to_upstream, 8,
                                    proxy.max_frame_bytes)
        self.responses = FrameStream(self._response_head, self._response_captured, self._to_client, 4,
                                     proxy.max_frame_bytes)

    # ------------------------------------------------------------------------------ life cycle

    @property
    def broker_node_id(self) -> int:
        return self.node_id

    def connection_made(self, transport) -> None:
        if not self.accept(transport):
            return
        transport.set_write_buffer_limits(_WRITE_HIGH)
        self.block_reading(1, True)
        self.connect_task = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        proxy = self.proxy
        loop = asyncio.get_running_loop()
        await proxy._ready.wait()     # the telemetry mode is known once the cluster was asked
        if self.listener_node is None:
            candidates = proxy.bootstrap_order()
        else:
            address = proxy.nodes.get(self.listener_node)
            candidates = [address] if address else []
        if not candidates:
            log.warning("event=upstream_unknown node_id=%s peer=%s:%s", self.listener_node, self.address, self.port)
            proxy.stats["upstream_errors"] += 1
            self._close()
            return
        last = None
        for host, port in candidates:
            try:
                _, upstream = await asyncio.wait_for(loop.create_connection(
                    lambda: _Upstream(self), host, port, ssl=proxy.upstream_ssl,
                    server_hostname=host if proxy.upstream_ssl is not None else None), proxy.connect_timeout_s)
            except (OSError, asyncio.TimeoutError, _ssl.SSLError) as exc:
                last = exc
                continue
            if self.transport is None or self.transport.is_closing():
                upstream.transport.close()
                return
            self.upstream = upstream
            if self.listener_node is None:
                self.node_id = proxy.node_for_address(host, port)
            early, self.early = self.early, []
            for data in early:
                self.data_received(data)
            self.block_reading(1, False)
            log.debug("event=upstream_connected peer=%s:%s upstream=%s:%d node_id=%d", self.address, self.port,
                      host, port, self.node_id)
            return
        log.warning("event=upstream_unreachable peer=%s:%s upstream=%s error=%r", self.address, self.port,
                    ",".join(f"{h}:{p}" for h, p in candidates), last)
        proxy.stats["upstream_errors"] += 1
        self._close()

    def connection_lost(self, exc) -> None:
        super().connection_lost(exc)
        self.closing = True
        task = getattr(self, "connect_task", None)
        if task is not None and not task.done():
            task.cancel()
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.close()

    def upstream_lost(self, exc) -> None:
        if not self.closing:
            log.info("event=upstream_closed peer=%s:%s node_id=%d pending=%d error=%r", self.address, self.port,
                     self.node_id, len(self.pending), exc)
        self._close()

    def _close(self) -> None:
        self.closing = True
        self.closed_by_endpoint = True
        if self.transport is not None:
            self.transport.close()

    close_idle = _close

    def _abort(self, reason: str) -> None:
        """A protocol error on this connection: close both sides at once."""
        if self.closing:
            return
        self.closing = True
        self.drop(reason)
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.abort()

    # ------------------------------------------------------------------------------ flow control

    def hold_reading(self, blocked: bool) -> None:
        self.block_reading(8, blocked)

    # the client reads slower than responses arrive: stop reading the upstream and the client
    def pause_writing(self) -> None:
        self.block_reading(4, True)
        up = self.upstream
        if up is not None and up.transport is not None and not up.transport.is_closing():
            up.transport.pause_reading()

    def resume_writing(self) -> None:
        self.block_reading(4, False)
        up = self.upstream
        if up is not None and up.transport is not None and not up.transport.is_closing():
            up.transport.resume_reading()

    # ------------------------------------------------------------------------------ requests

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        if self.upstream is None:
            # uvloop starts reading right after connection_made, whatever it paused (asyncio honours the
            # pause): keep what came and pause now; _connect feeds it once the upstream is there
            self.early.append(bytes(data))
            self.transport.pause_reading()
            return
        self.last_activity = time.monotonic()
        self.proxy.bytes_up += len(data)
        requests = self.requests
        try:
            requests.feed(data)
        except (_Drop, Kip714Error) as exc:
            if isinstance(exc, FrameTooLargeError):
                self.proxy.stats["frames_too_large"] += 1
            self._abort(str(exc))
            return
        except Exception:  # a bug must cost this connection, not escape into the event loop
            log.error("event=internal_error peer=%s:%s", self.address, self.port, exc_info=True)
            self.proxy.stats["internal_errors"] += 1
            self._abort("internal error")
            return
        # requests read whole (telemetry, ApiVersions, SASL) count against the endpoint's budget; frames
        # that stream through are bounded by flow control instead
        self.proxy.budget.hold(self, requests.held)

    def free_buffers(self) -> None:
        self.requests.free()

    def drop_for_memory(self, held: int) -> None:
        self.closing = True
        super().drop_for_memory(held)
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.abort()

    def _to_upstream(self, data) -> None:
        self.upstream.transport.write(data)

    def _request_head(self, buf, start: int, end: int, size: int) -> int | None:
        if end - start < 12:
            return None
        api_key, version, corr = _REQ_HEAD.unpack_from(buf, start + 4)
        if api_key > _FETCH and api_key not in self.proxy.special_apis:
            self.pending.append((corr, _A_PASS, None))
            return STREAM
        if api_key == _PRODUCE:
            if version > MAX_VERSIONS[_PRODUCE]:
                raise _Drop(f"Produce v{version} is over the proxy's v{MAX_VERSIONS[_PRODUCE]} "
                            "(newer answers may name leader addresses)")
            acks = rewrite.produce_acks(buf, start, end, version)
            if acks is None:
                return None
            if acks != 0:       # acks=0: Kafka sends no response
                self.pending.append((corr, _A_PASS, None))
            return STREAM
        if api_key == _FETCH:
            if version > MAX_VERSIONS[_FETCH]:
                raise _Drop(f"Fetch v{version} is over the proxy's v{MAX_VERSIONS[_FETCH]} "
                            "(newer answers may name leader addresses)")
            self.pending.append((corr, _A_PASS, None))
            return STREAM
        fn = REWRITERS.get(api_key)
        if fn is not None:
            if version > MAX_VERSIONS[api_key]:
                raise _Drop(f"API key {api_key} v{version} is over the v{MAX_VERSIONS[api_key]} the proxy rewrites")
            self.pending.append((corr, _A_REWRITE, (fn, version)))
            return STREAM
        if api_key in REMOVED_APIS:
            raise _Drop(f"API key {api_key} answers name addresses the proxy does not rewrite")
        if api_key == _GTS or api_key == _PUSH:
            mode = self.proxy.mode
            if mode == "terminate" or mode == "tap":    # tap: a Get's answer says the push interval
                return CAPTURE
            self.pending.append((corr, _A_PASS, None))
            return STREAM
        if api_key in (_API_VERSIONS, _SASL_HANDSHAKE, _SASL_AUTHENTICATE):
            return CAPTURE
        self.pending.append((corr, _A_PASS, None))
        return STREAM

    def _request_captured(self, frame: bytes) -> None:
        api_key, version, corr = _REQ_HEAD.unpack_from(frame, 4)
        body = memoryview(frame)[4:]
        if api_key == _GTS or api_key == _PUSH:
            try:
                req = decode_request(body)
            except Kip714Error as exc:
                raise _Drop(f"malformed telemetry request: {exc}") from None
            if self.proxy.mode == "terminate":
                self._answer(corr, self.telemetry_response(req, node_id=self.node_id), durable=api_key == _PUSH)
                return
            self.pending.append((corr, _A_TAP, req))
        elif api_key == _API_VERSIONS:
            try:
                req = decode_request(body)
            except UnsupportedVersionError:
                # as Kafka does: UNSUPPORTED_VERSION in the v0 format, listing the versions it reads
                resp = ApiVersionsResponse(error_code=_UNSUPPORTED_VERSION, api_keys=[_API_VERSIONS_RANGE])
                self._answer(corr, encode_response(corr, resp, 0))
                return
            except Kip714Error as exc:
                raise _Drop(f"malformed ApiVersions request: {exc}") from None
            self.identity.api_versions(req.body, version)   # KIP-511 software name (the upstream validates it)
            self.pending.append((corr, _A_API_VERSIONS, (version, req.header.client_id)))
        elif api_key == _SASL_HANDSHAKE:
            if version < 1:
                raise _Drop("SaslHandshake v0 (SASL tokens outside Kafka frames) is not proxied")
            self.sasl_mechanism = rewrite.sasl_mechanism(body)
            self.pending.append((corr, _A_PASS, None))
        else:   # SaslAuthenticate: the principal is set when the upstream accepts it
            user = rewrite.sasl_user(body, version, self.sasl_mechanism)
            self.pending.append((corr, _A_SASL, None if user is None else (user, version)))
        self._to_upstream(frame)

    def _answer(self, corr: int, frame: bytes, durable: bool = False) -> None:
        """Write an answer the proxy made, in its turn among the upstream's responses (``durable``: a push's
        answer, held until its recorded row is on disk with --record-sync)."""
        if not self.pending and self.responses.at_boundary:
            self.send_durable(frame) if durable else self.send(frame)
            return
        self.pending.append((corr, _A_LOCAL, (frame, durable)))
        self.locals += 1
        self.responses.on_boundary = self._flush_locals

    def _flush_locals(self) -> None:
        pending = self.pending
        while pending and pending[0][1] == _A_LOCAL:
            frame, durable = pending.popleft()[2]
            self.send_durable(frame) if durable else self.send(frame)
            self.locals -= 1
        if not self.locals:
            self.responses.on_boundary = None

    # ------------------------------------------------------------------------------ responses

    def response_data(self, data: bytes) -> None:
        if self.closing:
            return
        self.proxy.bytes_down += len(data)
        self.last_activity = time.monotonic()
        try:
            self.responses.feed(data)
        except (_Drop, Kip714Error) as exc:
            if isinstance(exc, RewriteError):
                self.proxy.stats["rewrite_errors"] += 1
            self._abort(f"upstream response: {exc}")
        except Exception:
            log.error("event=internal_error peer=%s:%s", self.address, self.port, exc_info=True)
            self.proxy.stats["internal_errors"] += 1
            self._abort("internal error")

    def _to_client(self, data) -> None:
        self.send(data)

    def _response_head(self, buf, start: int, end: int, size: int) -> int | None:
        corr = _I32.unpack_from(buf, start + 4)[0]
        pending = self.pending
        if not pending or pending[0][0] != corr:
            expected = pending[0][0] if pending else None
            raise _Drop(f"response with correlation id {corr}, expected {expected}")
        entry = pending[0]
        if entry[1] == _A_PASS:
            pending.popleft()
            return STREAM
        return CAPTURE

    def _response_captured(self, frame: bytes) -> None:
        corr, action, info = self.pending.popleft()
        body = memoryview(frame)[4:]
        if action == _A_REWRITE:
            fn, version = info
            frame = fn(body, version, self.proxy.advertise)
        elif action == _A_API_VERSIONS:
            version, client_id = info
            error = rewrite.api_versions_error(body)
            if error == 0:
                frame = rewrite.rewrite_api_versions(body, version, self.proxy.api_additions, self.proxy.caps)
            elif error == _UNSUPPORTED_VERSION and version > 0 and not self.pending:
                self._reissue_api_versions(body, corr, version, client_id)
                return
        elif action == _A_INTERNAL:
            client_corr, client_version, our_version = info
            if rewrite.api_versions_error(body) != 0:
                raise _Drop("the upstream refused ApiVersions")
            frame = rewrite.rewrite_api_versions(body, our_version, self.proxy.api_additions, self.proxy.caps,
                                                 out_version=client_version, correlation_id=client_corr)
        elif action == _A_TAP and info.api_key == _GTS:
            try:
                told = decode_response(body, _GTS, info.api_version).body
            except Kip714Error as exc:
                raise _Drop(f"malformed GetTelemetrySubscriptions response: {exc}") from None
            self.proxy.broker.told_by_upstream(told)
        elif action == _A_TAP:
            try:
                error = decode_response(body, _PUSH, info.api_version).body.error_code
            except Kip714Error as exc:
                raise _Drop(f"malformed PushTelemetry response: {exc}") from None
            self.telemetry_tapped(info, error, node_id=self.node_id)
            self.send_durable(frame)   # the cluster's answer, once the row is on disk with --record-sync
            if self.locals:
                self._flush_locals()
            return
        elif action == _A_SASL and info is not None:
            user, version = info
            if rewrite.sasl_authenticate_error(body, version) == 0:
                self.identity.set_principal(f"User:{user}")
        self.send(frame)
        if self.locals:
            self._flush_locals()

    def _reissue_api_versions(self, body, corr: int, version: int, client_id: str | None) -> None:
        """The upstream does not know the ApiVersions version the client opened with (librdkafka's mock
        cluster answers v3+ with a body kafka-python cannot parse): ask it at a version it knows and
        answer the client in the version it asked for."""
        ours = 0
        try:    # Kafka answers in the v0 format with the range it supports
            ranges = rewrite.upstream_api_versions(body, 0)
            if _API_VERSIONS in ranges:
                ours = max(0, min(ranges[_API_VERSIONS][1], version - 1))
        except Kip714Error:
            pass
        log.debug("event=api_versions_fallback peer=%s:%s client_version=%d upstream_version=%d", self.address,
                  self.port, version, ours)
        self.pending.append((_INTERNAL_CORRELATION_ID, _A_INTERNAL, (corr, version, ours)))
        self._to_upstream(encode_request(ApiVersionsRequest(), _INTERNAL_CORRELATION_ID, client_id, ours))


class TelemetryProxy:
    """The asyncio Kafka-protocol proxy behind ``kip714 proxy``: forwards a cluster's traffic byte for byte,
    rewrites broker addresses to its own listeners and answers (``terminate``) or records (``tap``) the
    clients' KIP-714 telemetry; ``start()``, ``serve()``, ``close()``, ``port``, ``broker_ports``.

    ``upstream``: the cluster's bootstrap servers (``"host:port,host:port"`` or a list). ``port``: the
    bootstrap listener; each broker gets ``broker_port_base + node_id`` (default base ``port + 1``; base
    ``0`` picks free ports, for tests — not stable across restarts) or its port in ``broker_ports``
    ({node_id: port}); a broker of the cluster without a usable port (none in ``broker_ports``, past 65535, or
    taken) makes ``start()`` raise :class:`ListenerError` (INVALID_CONFIG), and one that appears later is an
    error on the connection whose response named it. ``advertised_host``: the host clients are told (default ``host``). ``telemetry``: ``auto``,
    ``terminate``, ``tap`` or ``off``. ``broker`` answers (terminate) or records (tap) telemetry;
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
    ``connect_timeout_s`` per upstream connect."""

    def __init__(self, upstream, broker: TelemetryBroker | None = None, host: str = "127.0.0.1",
                 port: int = 9092, *, broker_port_base: int | None = None,
                 broker_ports: dict[int, int] | None = None, advertised_host: str | None = None,
                 telemetry: str = "auto", recorder=None, on_payload=None, ssl=None, upstream_ssl=None,
                 max_connections: int = 10000, idle_timeout_s: float = 600.0, connect_timeout_s: float = 10.0,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES, summary_interval_s: float = 0.0) -> None:
        if telemetry not in TELEMETRY_MODES:
            raise InvalidConfigError(f"telemetry must be one of {', '.join(TELEMETRY_MODES)}, not {telemetry!r}")
        self.upstreams = parse_upstream(upstream)
        self.broker = broker if broker is not None else TelemetryBroker(SubscriptionRegistry())
        self.host, self.port = host, port
        self.advertised_host = advertised_host
        self.broker_port_base = broker_port_base
        self.explicit_ports = dict(broker_ports) if broker_ports else None
        self.telemetry = telemetry
        self.mode = telemetry if telemetry != "auto" else "terminate"   # resolved by start()
        self.recorder = recorder
        if recorder is not None:
            self.broker.add_receiver(recorder)
        self.record_gate = RecordGate(recorder) if getattr(recorder, "sync", False) else None
        if on_payload is not None:
            self.broker.add_receiver(CallbackReceiver(on_payload))
        self.ssl, self.upstream_ssl = ssl, upstream_ssl
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.max_frame_bytes = max_frame_bytes
        self.summary_interval_s = summary_interval_s
        self.connections: set[_ClientConnection] = set()
        self.next_connection_id = connection_ids()
        self.stats = EndpointStats()
        self.budget = BufferBudget(max_buffered_bytes, self.stats)
        self.bytes_up = 0            # bytes read from clients
        self.bytes_down = 0          # bytes read from upstream brokers
        self.nodes: dict[int, tuple[str, int]] = {}     # node id -> upstream (host, port)
        self._ports: dict[int, int] = {}                # node id -> listening port
        self._servers: list[asyncio.AbstractServer] = []
        self._pending_servers: list[asyncio.Task] = []
        self._tasks: list[asyncio.Task] = []
        self._rotation = 0
        self.upstream_apis: dict[int, tuple[int, int]] = {}
        self._ready: asyncio.Event | None = None
        self._configure_mode()

    # ---------------------------------------------------------------------------- configuration

    def _configure_mode(self) -> None:
        self.api_additions = _TELEMETRY_APIS if self.mode == "terminate" else ()
        self.caps = dict(MAX_VERSIONS)
        if self.mode in ("terminate", "tap"):
            self.caps[_GTS] = 0
            self.caps[_PUSH] = 0
        # API keys above Fetch the request path looks at
        self.special_apis = frozenset(set(REWRITERS) | REMOVED_APIS | {_GTS, _PUSH, _API_VERSIONS,
                                                                      _SASL_HANDSHAKE, _SASL_AUTHENTICATE})

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
            raise ListenerError(f"broker node id {node_id} maps to port {port}, outside 1-65535 "
                               f"(--broker-port-base {base}); use --broker-ports")
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
        return self.advertised_host or self.host, listen

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
        port = self.port if node_id is None else self._port_for(node_id)
        try:
            sock = socket.create_server((self.host, port), backlog=1024)
        except OSError as exc:
            what = "bootstrap" if node_id is None else f"broker node id {node_id}"
            raise ListenerError(f"cannot listen on {self.host}:{port} for {what}: {os_error_words(exc)}") from None
        sock.setblocking(False)
        port = sock.getsockname()[1]
        loop = asyncio.get_running_loop()
        factory = (lambda: _ClientConnection(self, node_id))
        task = loop.create_task(loop.create_server(factory, sock=sock, ssl=self.ssl, backlog=1024))
        task.add_done_callback(self._server_started)
        task.sock = sock          # closed by close() if the server never started (a failed start)
        self._pending_servers.append(task)
        if node_id is not None:
            self._ports[node_id] = port
            log.info("event=broker_listener node_id=%d port=%d upstream=%s:%d", node_id, port, *self.nodes[node_id])
        return port

    def _server_started(self, task: asyncio.Task) -> None:
        self._pending_servers.remove(task)
        if not task.cancelled() and task.exception() is None:
            self._servers.append(task.result())
        else:
            task.sock.close()     # no server took it over

    # ---------------------------------------------------------------------------- life cycle

    async def start(self) -> None:
        """Ask the cluster for its APIs and brokers, resolve ``auto``, open the listeners."""
        self._ready = asyncio.Event()
        self.port = self._listen(None)      # first: the broker ports may derive from it
        try:
            await self._probe()
        except BaseException:
            await self.close()
            raise
        self._ready.set()
        if self._pending_servers:
            await asyncio.gather(*list(self._pending_servers), return_exceptions=True)
        self._tasks.append(asyncio.create_task(reap_idle(self, self.stats)))
        if self.summary_interval_s > 0:
            self._tasks.append(asyncio.create_task(log_summaries(self, self.summary_interval_s)))
        log.info("event=listening host=%s port=%d telemetry=%s upstream=%s broker_ports=%s tls=%s",
                 self.host, self.port, self.mode, ",".join(f"{h}:{p}" for h, p in self.upstreams),
                 self.broker_ports, self.ssl is not None)

    async def _probe(self) -> None:
        errors = []
        for host, port in self.upstreams:
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(
                    host, port, ssl=self.upstream_ssl, server_hostname=host if self.upstream_ssl else None),
                    self.connect_timeout_s)
            except (OSError, asyncio.TimeoutError, _ssl.SSLError) as exc:
                errors.append(f"{host}:{port}: {_reason(exc)}")
                continue
            try:
                async def call(body, version, corr):
                    writer.write(encode_request(body, corr, "kip714-proxy", version))
                    size = _I32.unpack(await reader.readexactly(4))[0]
                    if not 4 <= size <= self.max_frame_bytes:
                        raise Kip714Error(f"bad response size {size}")
                    return await reader.readexactly(size)

                frame = await asyncio.wait_for(call(ApiVersionsRequest(), 0, 1), self.connect_timeout_s)
                resp = decode_response(frame, _API_VERSIONS, 0)
                if resp.body.error_code:
                    raise Kip714Error(f"ApiVersions error {resp.body.error_code}")
                self.upstream_apis = {a.api_key: (a.min_version, a.max_version) for a in resp.body.api_keys}
                self._resolve_mode()
                meta = self.upstream_apis.get(int(ApiKey.METADATA))
                if meta and meta[1] >= 1:
                    version = min(meta[1], 12)
                    try:
                        frame = await asyncio.wait_for(call(MetadataRequest(topics=[]), version, 2),
                                                       self.connect_timeout_s)
                        # the brokers as a client's Metadata answer would name them (opens their listeners)
                        rewrite.rewrite_metadata(frame, version, self.advertise)
                    except ListenerError:
                        raise           # the proxy's own configuration: refuse to start
                    except (Kip714Error, OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
                        # e.g. a SASL listener: Metadata only after authentication; listeners open as
                        # clients' own Metadata answers name the brokers
                        log.warning("event=probe_metadata_failed upstream=%s:%d error=%r", host, port, exc)
                return
            except ListenerError:
                raise
            except (Kip714Error, OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
                errors.append(f"{host}:{port}: {_reason(exc)}")
            finally:
                writer.close()
        raise Kip714Error("no upstream bootstrap server answered ApiVersions: " + "; ".join(errors))

    def _resolve_mode(self) -> None:
        offered = _GTS in self.upstream_apis and _PUSH in self.upstream_apis
        if self.telemetry == "auto":
            self.mode = "tap" if offered else "terminate"
        if self.mode == "tap" and not offered:
            log.warning("event=no_telemetry_upstream the cluster does not advertise GetTelemetrySubscriptions and "
                        "PushTelemetry (API keys 71, 72): with --telemetry tap its clients never push; auto or "
                        "terminate answers them here")
        if self.mode == "terminate":
            warn_if_no_subscription(self.broker)
        self._configure_mode()

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in list(self._pending_servers):
            t.cancel()
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
        if self._ready is not None and self._ready.is_set():   # a start that failed has no summary to give
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
        return (f"telemetry={self.mode} connections_open={len(self.connections)} "
                f"connections_total={stats['connections']} refused={stats['connections_refused']} "
                f"bytes_from_clients={self.bytes_up} bytes_from_upstream={self.bytes_down} "
                f"protocol_errors={stats['protocol_errors']} frames_too_large={stats['frames_too_large']} "
                f"dropped_memory_budget={stats['dropped_memory_budget']} rewrite_errors={stats['rewrite_errors']} "
                f"upstream_errors={stats['upstream_errors']} brokers={self.broker_ports}"
                + (f" record_sync_failures={stats['record_sync_failures']}" if self.record_gate else ""))
