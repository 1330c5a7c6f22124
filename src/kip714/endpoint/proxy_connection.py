"""One client connection of ``kip714 proxy`` and its upstream connection: :class:`ProxyConnection`.

The data path reads frame boundaries and request headers only (:class:`~kip714.endpoint.stream.FrameStream`)
and remembers, per connection and in order, what each forwarded request expects back (Kafka answers in
order; a response whose correlation id is not the next expected one closes the connection). Flow control
runs both ways: a client that does not read its responses stops the proxy reading from its upstream
connection (and from the client), an upstream that does not read stops the proxy reading from the client;
write buffers are bounded. An upstream that closes closes its client connection.

Requests the proxy reads whole (telemetry, ApiVersions, SASL) are decoded here; telemetry is answered
through the proxy's :class:`~kip714.TelemetryBroker` (``terminate``) or recorded with the upstream's answer
(``tap``); responses naming broker addresses are rewritten (:mod:`kip714.endpoint.rewrite`) to the proxy's
listeners (:class:`~kip714.endpoint.proxy.TelemetryProxy`, which opens them).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import ssl as _ssl
import struct
import time
from typing import TYPE_CHECKING, Any, cast

from .._enums import ApiKey, ErrorCode
from .._protocol import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from ..broker.config_admin import ADMIN_APIS
from ..errors import FrameTooLargeError, Kip714Error, RewriteError, UnsupportedVersionError
from . import rewrite
from .connection import EndpointConnection, os_error_words
from .proxy_admin import split_admin_request
from .rewrite import MAX_VERSIONS, REMOVED_APIS, REWRITERS
from .stream import CAPTURE, STOP, STREAM, FrameStream

if TYPE_CHECKING:
    from .._instances import RequestLoop

__all__ = ["ProxyConnection", "upstream_error_words", "failure_reason"]

log = logging.getLogger("kip714.proxy")

_GTS = int(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS)
_PUSH = int(ApiKey.PUSH_TELEMETRY)
_PRODUCE = int(ApiKey.PRODUCE)
_FETCH = int(ApiKey.FETCH)
_API_VERSIONS = int(ApiKey.API_VERSIONS)
_SASL_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)
_SASL_AUTHENTICATE = int(ApiKey.SASL_AUTHENTICATE)
_UNSUPPORTED_VERSION = int(ErrorCode.UNSUPPORTED_VERSION)
#: The ApiVersions versions the proxy reads (an answer to a newer request lists this range, in v0 format).
_API_VERSIONS_RANGE = ApiVersion(_API_VERSIONS, 0, MAX_VERSIONS[_API_VERSIONS])

#: the admin APIs answered in terminate mode: api key -> (min, max) versions kip714 reads
_ADMIN = {key: (lo, hi) for key, lo, hi in ADMIN_APIS}

_REQ_HEAD = struct.Struct(">hhi")  # api_key, api_version, correlation_id (after the size prefix)
_I32 = struct.Struct(">i")

# what a forwarded request expects back (the second item of a pending entry)
_A_PASS = 0  # the response streams through
_A_REWRITE = 1  # addresses to rewrite: info = (rewrite function, version)
_A_API_VERSIONS = 2  # info = (version, client_id)
_A_TAP = 3  # tap: a PushTelemetry to record with the upstream's answer, or a Get whose answer to
# remember (told_by_upstream): info = decoded request
_A_SASL = 4  # a SaslAuthenticate: info = the user name it authenticates as (or None)
_A_LOCAL = 5  # an answer the proxy made: info = the frame to write when its turn comes
_A_INTERNAL = 6  # the proxy's own ApiVersions: info = (client correlation id, client version, our version)
_A_MERGE = 7  # an admin request split between kip714 and the cluster: info = the merge function
_INTERNAL_CORRELATION_ID = 0x7FFF_F714

_WRITE_HIGH = 1 << 20  # write-buffer high-water mark of each side (bytes)


class _Drop(Exception):
    """Close the client connection (and its upstream connection) for this reason. Private control flow:
    raised and caught inside a connection's request path (like a Kip714Error there), never seen outside this
    module, so it is not in kip714.errors."""


def upstream_error_words(exc: BaseException) -> str:
    """An upstream failure in words: ``connection refused``, ``timed out``… (not an exception's repr)."""
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, asyncio.IncompleteReadError):
        return "closed the connection"
    return os_error_words(exc)


def failure_reason(exc: BaseException) -> str:
    """An upstream failure as a metric label: ``refused``, ``timeout``, ``tls``, ``closed``, ``unreachable``
    or ``error``."""
    import errno

    if isinstance(exc, asyncio.TimeoutError):
        return "timeout"
    if isinstance(exc, _ssl.SSLError):
        return "tls"
    if isinstance(exc, (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError)):
        return "closed"
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    if isinstance(exc, OSError) and exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EADDRNOTAVAIL):
        return "unreachable"
    if isinstance(exc, OSError):
        return "refused" if "refused" in str(exc).lower() else "unreachable"
    return "error"


class _Upstream(asyncio.Protocol):
    """The proxy's connection to one upstream broker, on behalf of one client connection."""

    def __init__(self, client: ProxyConnection) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # create_connection hands its protocol a full Transport (TCP or TLS)
        self.transport = stream = cast(asyncio.Transport, transport)
        stream.set_write_buffer_limits(_WRITE_HIGH)

    def data_received(self, data: bytes) -> None:
        self.client.response_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.upstream_lost(exc)

    def eof_received(self) -> bool:
        return False  # close

    # the upstream reads slower than the client sends: stop reading the client
    def pause_writing(self) -> None:
        self.client.block_reading(2, True)

    def resume_writing(self) -> None:
        self.client.block_reading(2, False)


class ProxyConnection(EndpointConnection):
    """One client connection of the proxy and its upstream connection (``proxy``: the
    :class:`~kip714.endpoint.proxy.TelemetryProxy` whose listener accepted it; ``node_id``: the upstream
    broker that listener stands for, None for the bootstrap listener)."""

    def __init__(self, proxy: Any, node_id: int | None) -> None:
        super().__init__(proxy)
        self.proxy = proxy
        self.listener_node = node_id  # None: the bootstrap listener
        self.node_id = -1 if node_id is None else node_id  # the upstream node (telemetry's node_id)
        self.upstream: _Upstream | None = None
        self.early: list[bytes] = []  # read before the upstream connected (uvloop; see data_received)
        # (correlation id, action, info): what each forwarded request expects back, in order (info: see _A_*)
        self.pending: collections.deque[tuple[int, int, Any]] = collections.deque()
        self.locals = 0  # _A_LOCAL entries in pending
        # read_block bits: 1 upstream not ready, 2 upstream full, 4 client full, 8 answers held
        self.closing = False
        self.sasl_mechanism = ""
        self.requests = FrameStream(
            self._request_head, self._request_captured, self._to_upstream, 8, proxy.max_frame_bytes
        )
        # terminate mode: the pushes at the start of a read are decided by the broker's request loop (the one
        # kip714 serve runs), nothing held in it; everything else streams through ``requests`` as before
        self.loop: RequestLoop | None = None
        self.responses = FrameStream(
            self._response_head, self._response_captured, self._to_client, 4, proxy.max_frame_bytes
        )

    # ------------------------------------------------------------------------------ life cycle

    @property
    def node_id(self) -> int:
        """The upstream broker this connection talks to (-1 until a bootstrap connection knows it): the
        ``node_id`` of its telemetry, kept as :attr:`broker_node_id` (the node the broker drops the
        connection's instance for when it closes)."""
        node = self.broker_node_id
        return -1 if node is None else node

    @node_id.setter
    def node_id(self, value: int) -> None:
        self.broker_node_id = value

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not self.accept(transport):
            return
        cast(asyncio.Transport, transport).set_write_buffer_limits(_WRITE_HIGH)
        self.block_reading(1, True)
        self.connect_task = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        proxy = self.proxy
        loop = asyncio.get_running_loop()
        await proxy._ready.wait()  # the telemetry mode is known once the cluster was asked
        if self.listener_node is None:
            candidates = proxy.bootstrap_order()
        else:
            address = proxy.nodes.get(self.listener_node)
            candidates = [address] if address else []
        node = "bootstrap" if self.listener_node is None else str(self.listener_node)
        if not candidates:
            log.warning("event=upstream_unknown node_id=%s peer=%s:%s", self.listener_node, self.address, self.port)
            proxy.stats["upstream_errors"] += 1
            proxy.upstream_failures[(node, "unknown-node")] += 1
            self._close()
            return
        last = None
        for host, port in candidates:
            try:
                upstream_transport, upstream = await asyncio.wait_for(
                    loop.create_connection(
                        lambda: _Upstream(self),
                        host,
                        port,
                        ssl=proxy.upstream_ssl,
                        server_hostname=host if proxy.upstream_ssl is not None else None,
                    ),
                    proxy.connect_timeout_s,
                )
            except (OSError, asyncio.TimeoutError, _ssl.SSLError) as exc:
                last = exc
                proxy.upstream_failures[(node, failure_reason(exc))] += 1
                continue
            if self.transport is None or self.transport.is_closing():
                upstream_transport.close()
                return
            self.upstream = upstream
            proxy.upstream_connects[node] += 1
            if self.listener_node is None:
                self.node_id = proxy.node_for_address(host, port)
            early, self.early = self.early, []
            for data in early:
                self.data_received(data)
            self.block_reading(1, False)
            log.debug(
                "event=upstream_connected peer=%s:%s upstream=%s:%d node_id=%d",
                self.address,
                self.port,
                host,
                port,
                self.node_id,
            )
            return
        log.warning(
            "event=upstream_unreachable peer=%s:%s upstream=%s error=%r",
            self.address,
            self.port,
            ",".join(f"{h}:{p}" for h, p in candidates),
            last,
        )
        proxy.stats["upstream_errors"] += 1
        self._close()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.closing = True
        task = getattr(self, "connect_task", None)
        if task is not None and not task.done():
            task.cancel()
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.close()

    def upstream_lost(self, exc: Exception | None) -> None:
        if not self.closing:
            log.info(
                "event=upstream_closed peer=%s:%s node_id=%d pending=%d error=%r",
                self.address,
                self.port,
                self.node_id,
                len(self.pending),
                exc,
            )
            node = "bootstrap" if self.listener_node is None else str(self.listener_node)
            self.proxy.upstream_failures[(node, "closed")] += 1
        self._close()

    def _close(self) -> None:
        self.closing = True
        self.closed_by_endpoint = True
        if self.transport is not None:
            self.transport.close()

    close_idle = _close

    # draining: the requests read so far are answered, none after the next request boundary is forwarded
    def stop_requests(self) -> None:
        self.stopping = True
        if self.upstream is None:  # not connected upstream yet: nothing was forwarded, nothing owed
            self._close()
            return
        if self.requests.at_boundary:
            self.requests.stop()
        self.finish_if_answered()  # else _request_head stops at the next boundary

    def finish_if_answered(self) -> None:
        if self.stopping and self.answered():
            self.closing = True  # the upstream connection closes with this one (not an upstream error)
        super().finish_if_answered()

    def answered(self) -> bool:
        return self.requests.stopped and not self.pending and self.responses.at_boundary and not self._held

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
            assert self.transport is not None  # data comes after connection_made
            self.transport.pause_reading()
            return
        self.last_activity = time.monotonic()
        self.proxy.bytes_up += len(data)
        requests = self.requests
        try:
            if (
                self.proxy.mode == "terminate"
                and not self.stopping
                and not self.pending
                and requests.at_boundary
                and self.responses.at_boundary
            ):
                data = self._decide_pushes(data)
            if data:
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
        if self.stopping:
            self.finish_if_answered()

    def _decide_pushes(self, data: bytes) -> bytes:
        """Answer the pushes at the start of ``data`` through the request loop (nothing is owed to the client
        before them: no upstream answer is pending); the rest of ``data``, from the first frame it did not take."""
        proxy = self.proxy
        loop = self.loop
        if loop is None:
            loop = self.loop = proxy.broker.request_loop(proxy.max_frame_bytes)
        taken = loop.frames
        answers, consumed = proxy.broker.feed_prefix(
            loop, data, self.identity.client_info, self.connection_id, node_id=self.node_id
        )
        if answers:
            proxy.requests_by_key[_PUSH] += loop.frames - taken
            self.send_durable(answers)
        return data[consumed:] if consumed else data

    def free_buffers(self) -> None:
        self.requests.free()

    def drop_for_memory(self, held: int) -> None:
        self.closing = True
        super().drop_for_memory(held)
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.abort()

    def _to_upstream(self, data: bytes | memoryview) -> None:
        upstream = self.upstream
        # requests are fed (and forwarded) only once the upstream is connected
        assert upstream is not None and upstream.transport is not None
        upstream.transport.write(data)

    def _request_head(self, buf: bytes | bytearray, start: int, end: int, size: int) -> int | None:
        if self.stopping:  # draining: this request is never forwarded (the client sees the end)
            return STOP
        if end - start < 12:
            return None
        api_key, version, corr = _REQ_HEAD.unpack_from(buf, start + 4)
        self.proxy.requests_by_key[api_key if 0 <= api_key < 128 else 128] += 1
        if api_key > _FETCH and api_key not in self.proxy.special_apis:
            self.pending.append((corr, _A_PASS, None))
            return STREAM
        if api_key == _PRODUCE:
            if version > MAX_VERSIONS[_PRODUCE]:
                raise _Drop(
                    f"Produce v{version} is over the proxy's v{MAX_VERSIONS[_PRODUCE]} "
                    "(newer answers may name leader addresses)"
                )
            acks = rewrite.produce_acks(buf, start, end, version)
            if acks is None:
                self.proxy.requests_by_key[_PRODUCE] -= 1  # asked again with more bytes: counted then
                return None
            if acks != 0:  # acks=0: Kafka sends no response
                self.pending.append((corr, _A_PASS, None))
            return STREAM
        if api_key == _FETCH:
            if version > MAX_VERSIONS[_FETCH]:
                raise _Drop(
                    f"Fetch v{version} is over the proxy's v{MAX_VERSIONS[_FETCH]} "
                    "(newer answers may name leader addresses)"
                )
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
        if api_key in (_GTS, _PUSH):
            mode = self.proxy.mode
            if mode == "terminate" or mode == "tap":  # tap: a Get's answer says the push interval
                return CAPTURE
            self.pending.append((corr, _A_PASS, None))
            return STREAM
        if api_key in (_API_VERSIONS, _SASL_HANDSHAKE, _SASL_AUTHENTICATE):
            return CAPTURE
        versions = _ADMIN.get(api_key)
        if versions is not None and versions[0] <= version <= versions[1]:
            return CAPTURE  # terminate mode (special_apis): CLIENT_METRICS resources are kip714's
        self.pending.append((corr, _A_PASS, None))
        return STREAM

    def _request_captured(self, frame: bytes) -> None:
        api_key, version, corr = _REQ_HEAD.unpack_from(frame, 4)
        body = memoryview(frame)[4:]
        if api_key in (_GTS, _PUSH):
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
            self.identity.api_versions(req.body, version)  # KIP-511 software name (the upstream validates it)
            self.pending.append((corr, _A_API_VERSIONS, (version, req.header.client_id)))
        elif api_key in _ADMIN:
            try:
                req = decode_request(body)
            except Kip714Error as exc:
                raise _Drop(f"malformed admin request (API key {api_key} v{version}): {exc}") from None
            split = split_admin_request(self.proxy.admin, req, frame, self.identity.principal, self.proxy.upstream_apis)
            if split.local is not None:
                self._answer(corr, split.local)
                return
            assert split.forward is not None  # a split the proxy does not answer goes to the cluster
            self.pending.append((corr, _A_MERGE, split.merge) if split.merge is not None else (corr, _A_PASS, None))
            self._to_upstream(split.forward)
            return
        elif api_key == _SASL_HANDSHAKE:
            if version < 1:
                raise _Drop("SaslHandshake v0 (SASL tokens outside Kafka frames) is not proxied")
            self.sasl_mechanism = rewrite.sasl_mechanism(body)
            self.pending.append((corr, _A_PASS, None))
        else:  # SaslAuthenticate: the principal is set when the upstream accepts it
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
            return
        except Exception:
            log.error("event=internal_error peer=%s:%s", self.address, self.port, exc_info=True)
            self.proxy.stats["internal_errors"] += 1
            self._abort("internal error")
            return
        if self.stopping:
            self.finish_if_answered()

    def _to_client(self, data: bytes | memoryview) -> None:
        self.send(data)

    def _response_head(self, buf: bytes | bytearray, start: int, end: int, size: int) -> int | None:
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
            frame = rewrite.rewrite_api_versions(
                body,
                our_version,
                self.proxy.api_additions,
                self.proxy.caps,
                out_version=client_version,
                correlation_id=client_corr,
            )
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
            self.send_durable(frame)  # the cluster's answer, once the row is on disk with --record-sync
            if self.locals:
                self._flush_locals()
            return
        elif action == _A_MERGE:
            frame = info(body)
        elif action == _A_SASL and info is not None:
            user, version = info
            if rewrite.sasl_authenticate_error(body, version) == 0:
                self.identity.set_principal(f"User:{user}")
        self.send(frame)
        if self.locals:
            self._flush_locals()

    def _reissue_api_versions(self, body: memoryview, corr: int, version: int, client_id: str | None) -> None:
        """The upstream does not know the ApiVersions version the client opened with (librdkafka's mock
        cluster answers v3+ with a body kafka-python cannot parse): ask it at a version it knows and
        answer the client in the version it asked for."""
        ours = 0
        try:  # Kafka answers in the v0 format with the range it supports
            ranges = rewrite.upstream_api_versions(body, 0)
            if _API_VERSIONS in ranges:
                ours = max(0, min(ranges[_API_VERSIONS][1], version - 1))
        except Kip714Error:
            pass
        log.debug(
            "event=api_versions_fallback peer=%s:%s client_version=%d upstream_version=%d",
            self.address,
            self.port,
            version,
            ours,
        )
        self.pending.append((_INTERNAL_CORRELATION_ID, _A_INTERNAL, (corr, version, ours)))
        self._to_upstream(encode_request(ApiVersionsRequest(), _INTERNAL_CORRELATION_ID, client_id, ours))
