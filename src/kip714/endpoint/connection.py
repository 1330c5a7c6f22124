"""The per-connection half every kip714 endpoint shares (``kip714 serve`` and ``kip714 proxy``).

:class:`ClientIdentity` is what an endpoint knows about the client on one connection — its address and
port as Kafka prints them, the software it named in ApiVersions (KIP-511), its principal — and builds the
:class:`~kip714.ClientInfo` the broker decides on. :class:`FramedConnection` is an asyncio protocol that
cuts the byte stream into size-prefixed frames (``split_frames``, bounded by ``max_frame_bytes``), applies
flow control both ways, tracks idleness and hands each whole frame to :meth:`FramedConnection.handle_frame`.
:class:`BufferBudget` bounds the bytes held in unfinished frames across all connections of an endpoint.
:class:`EndpointConnection` is the part both share whatever they do with the bytes (bookkeeping, drop, the
telemetry answers, and the answers held until the recording is durable: :meth:`EndpointConnection.send`
and :meth:`EndpointConnection.send_durable`, in request order). :class:`RecordGate` turns a sync recorder's
group commits into futures of the event loop. :class:`EndpointStats` holds the connection-level counters of an
endpoint; push and Get counts come from the broker (``TelemetryBroker.metrics()``), never from a parallel count here.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import os
import socket
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, Iterable
from typing import Any, Protocol, cast

from .._enums import ErrorCode
from .._protocol import encode_response
from ..broker.receivers import CallbackReceiver, TelemetryPayload, TelemetryReceiver
from ..broker.subscriptions import ANONYMOUS_PRINCIPAL, ClientInfo
from ..errors import FrameTooLargeError, Kip714Error
from .address import java_host_address

__all__ = [
    "BufferBudget",
    "ClientIdentity",
    "EndpointConnection",
    "EndpointStats",
    "FramedConnection",
    "RecordGate",
    "Recorder",
    "connection_ids",
]

log = logging.getLogger("kip714.endpoint")

_INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
#: Answers a connection may hold for the disk before it stops reading the client's requests.
HELD_MAX = 64
#: The default of ``--drain-spread``: the seconds over which a drain closes the client connections (never more
#: than half the drain timeout).
DRAIN_SPREAD_S = 2.0
#: Seconds a draining connection waits, after the end of its answers (a half close), for the client to close
#: its side before it is closed anyway.
LINGER_S = 2.0


class ClientIdentity:
    """What an endpoint knows about the client on one connection."""

    __slots__ = ("_infos", "address", "port", "principal", "software")

    def __init__(self, address: str = "", port: int = 0, principal: str = ANONYMOUS_PRINCIPAL) -> None:
        self.address = address
        self.port = port
        self.principal = principal
        self.software = ("unknown", "unknown")
        self._infos: dict[str, ClientInfo] = {}

    def api_versions(self, body: Any, version: int) -> int:
        """Take the client software an ApiVersions request (v3+) names, as Kafka does (KIP-511): a name or
        version that fails Kafka's validation is INVALID_REQUEST (returned), a valid pair is kept."""
        if version < 3:
            return 0
        if not body.is_valid():
            return _INVALID_REQUEST
        self.set_software(body.client_software_name, body.client_software_version)
        return 0

    def set_software(self, name: str, version: str) -> None:
        self.software = (name, version)
        self._infos.clear()

    def set_principal(self, principal: str) -> None:
        self.principal = principal
        self._infos.clear()

    def client_info(self, client_id: str | None) -> ClientInfo:
        """The :class:`ClientInfo` of a request with this ``client_id`` on this connection (cached)."""
        key = client_id or ""
        info = self._infos.get(key)
        if info is None:
            info = ClientInfo(
                client_id=key,
                client_software_name=self.software[0],
                client_software_version=self.software[1],
                client_source_address=self.address,
                client_source_port=self.port,
                principal=self.principal,
            )
            self._infos[key] = info
        return info


def os_error_words(exc: BaseException) -> str:
    """An OS error in words, lower case: ``address already in use``, ``connection refused``, ``name or service
    not known``… — not ``[Errno 98] …`` nor asyncio's text that repeats the address."""
    if (
        isinstance(exc, OSError)
        and not isinstance(exc, socket.gaierror)
        and isinstance(exc.errno, int)
        and exc.errno > 0
    ):
        return os.strerror(exc.errno).lower()
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__


def warn_if_no_subscription(broker: Any) -> None:
    """Say at start-up that nobody is subscribed (clients then never push, as with Kafka)."""
    if not len(broker.registry):
        log.warning(
            "event=no_subscription clients get an empty subscription and will not push (as with Kafka "
            "without CLIENT_METRICS resources); pass --metrics '*' for all metrics, or --config FILE"
        )


class EndpointStats(Counter[str]):
    """Connection-level counters of an endpoint: ``connections``, ``connections_refused``,
    ``protocol_errors``, ``frames_too_large`` (size prefixes over the frame limit; also protocol errors),
    ``dropped_memory_budget`` (connections dropped by the :class:`BufferBudget`), ``internal_errors``,
    ``idle_closed``, ``instances_dropped_on_disconnect``, ``record_sync_failures`` (pushes never answered
    because writing their row failed: the connection was closed instead), ``tls_handshakes_failed``
    (connections to a TLS listener that never completed the handshake: a client without TLS, or one that
    refused the certificate; counted when the loop lets go of the connection object, at the next garbage
    collection; logged at most every 10 s)."""

    _tls_said = -1e9

    def tls_handshake_failed(self) -> None:
        self["tls_handshakes_failed"] += 1
        now = time.monotonic()
        if now - self._tls_said >= 10.0:
            self._tls_said = now
            log.warning(
                "event=tls_handshake_failed total=%d (a client that does not speak TLS, or that refused "
                "the certificate; said at most every 10 s)",
                self["tls_handshakes_failed"],
            )


def _unmade(made: list[bool], stats: EndpointStats) -> None:
    """Finalizer of a connection object on a TLS listener: gone without ``connection_made`` means the loop
    dropped it during the handshake (asyncio and uvloop log that at DEBUG only)."""
    if not made[0]:
        stats.tls_handshake_failed()


class BufferBudget:
    """The bytes held in unfinished request frames (and input not yet cut into frames) across all
    connections of one endpoint, at most ``limit``.

    Each connection reports what it holds after every read (:meth:`hold`, O(1): a running total). A read
    that takes the total over ``limit`` stops reading at once on the connections holding the most — they
    are closed (``drop_for_memory()``, counted in ``stats["dropped_memory_budget"]``), largest first, until
    the total is at three quarters of the limit (so the sort runs once per quarter of the budget, not per
    read). Connections that send whole frames hold nothing between reads and are never chosen while
    others hold more. Resident memory stays within about ``limit`` plus one read chunk (asyncio reads at
    most 256 KiB at a time, and only one read is in hand at once) plus about 2 KiB per open connection
    above the endpoint's baseline.

    Reading is not paused instead: a connection paused in the middle of a frame still holds what it sent,
    so pausing frees nothing; checking after every read bounds the overshoot to one read."""

    __slots__ = ("held", "limit", "stats", "total")

    def __init__(self, limit: int, stats: EndpointStats) -> None:
        if limit < 1:
            raise ValueError("the buffered-bytes budget must be at least 1 byte")
        self.limit = int(limit)
        self.total = 0
        self.held: dict[Any, int] = {}  # connection -> bytes it holds (only connections holding some)
        self.stats = stats

    def hold(self, conn: Any, n: int) -> None:
        """``conn`` now holds ``n`` bytes; over the limit, drop the connections holding the most."""
        held = self.held
        old = held.get(conn, 0)
        if n:
            held[conn] = n
        elif old:
            del held[conn]
        else:
            return
        self.total += n - old
        if self.total > self.limit:
            self._make_room()

    def release(self, conn: Any) -> None:
        """``conn`` is gone: what it held is free."""
        self.total -= self.held.pop(conn, 0)

    def _make_room(self) -> None:
        target = self.limit * 3 // 4
        victims = sorted(self.held.items(), key=lambda item: item[1], reverse=True)
        dropped = 0
        for conn, n in victims:
            if self.total <= target:
                break
            del self.held[conn]
            self.total -= n
            dropped += 1
            conn.drop_for_memory(n)
        self.stats["dropped_memory_budget"] += dropped
        log.warning(
            "event=memory_budget dropped=%d limit=%d held=%d connections_holding=%d",
            dropped,
            self.limit,
            self.total,
            len(self.held),
        )


class Recorder(TelemetryReceiver, Protocol):
    """What an endpoint uses of its ``recorder``, a :class:`~kip714.sinks.ParquetRecorder` (the sinks are a
    layer beside the endpoints, not imported by them): a receiver the endpoint closes when it stops and, when
    the recorder is synchronous (``sync=True``), whose :meth:`durable` futures hold the answers to pushes
    (:class:`RecordGate`)."""

    def durable(self) -> concurrent.futures.Future[int]:
        """A future done when every row recorded so far is on disk (its result: the rows of that commit)."""
        ...

    def close(self) -> None: ...


def _retrieve(future: asyncio.Future[int]) -> None:
    if not future.cancelled():
        future.exception()


class RecordGate:
    """The group commits of a ``ParquetRecorder(sync=True)`` as futures of the running event loop: one
    asyncio future per commit, however many answers wait on it."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self._source: concurrent.futures.Future[int] | None = None
        self._future: asyncio.Future[int] | None = None

    def waiter(self) -> asyncio.Future[int] | None:
        """The future of the commit that makes every row recorded so far durable; None when they already are."""
        source = self.recorder.durable()
        if source.done() and not source.cancelled() and source.exception() is None:
            return None
        if source is not self._source:
            self._source, self._future = source, asyncio.wrap_future(source)
            self._future.add_done_callback(_retrieve)  # a failure is counted by the connections it closes
        return self._future

    async def settle(self, timeout_s: float = 5.0) -> None:
        """Wait (at most ``timeout_s``) for the commit of every row recorded so far and let the answers held
        on it go out: a clean stop answers the pushes it has recorded."""
        waiter = self.waiter()
        if waiter is not None:
            try:
                await asyncio.wait_for(asyncio.shield(waiter), timeout_s)
            except Exception:  # failed or too slow: those connections close unanswered
                pass
        await asyncio.sleep(0)  # the connections' release callbacks run before their transports close


def attach_receivers(
    broker: Any, recorder: Recorder | None, on_payload: Callable[[TelemetryPayload], object] | None
) -> RecordGate | None:
    """An endpoint's ``recorder`` and ``on_payload`` (called with every accepted payload, through a
    :class:`~kip714.broker.receivers.CallbackReceiver`) added to ``broker``'s receivers. Returns the
    :class:`RecordGate` the answers to pushes wait at when the recorder is synchronous (``sync=True``,
    ``--record-sync``), else None."""
    if recorder is not None:
        broker.add_receiver(recorder)
    if on_payload is not None:
        broker.add_receiver(CallbackReceiver(on_payload))
    return RecordGate(recorder) if recorder is not None and getattr(recorder, "sync", False) else None


class EndpointConnection(asyncio.Protocol):
    """What every client connection of an endpoint shares, whatever it does with the bytes: the
    :class:`ClientIdentity`, the broker's connection id, the ``max_connections`` check and counters on
    connect, the broker's ``connection_closed`` on disconnect, :meth:`drop`, and the telemetry answers
    (:meth:`telemetry_response` for a request this endpoint decides, :meth:`telemetry_tapped` for a push
    another broker decided) — the one code path ``serve`` and ``proxy`` handle telemetry by.

    ``endpoint`` provides ``connections`` (a set), ``max_connections``, ``stats``
    (:class:`EndpointStats`), ``budget`` (its :class:`BufferBudget`), ``next_connection_id()`` and ``broker``
    (a :class:`~kip714.TelemetryBroker`;
    its ``connection_closed`` is called when the connection goes: Kafka 4.0+ drops the instance created on
    it)."""

    #: the broker node id of this connection's telemetry (None: the endpoint's broker's own node id)
    broker_node_id: int | None = None
    #: the client's (address, port) from a PROXY protocol header, set before ``connection_made`` (None: the
    #: socket's peer is the client)
    proxied_source: tuple[str, int] | None = None

    def __init__(self, endpoint: Any) -> None:
        self.endpoint = endpoint
        self.transport: asyncio.Transport | None = None
        self.identity = ClientIdentity()
        self.last_activity = time.monotonic()
        self.connection_id = endpoint.next_connection_id()  # the broker's key for this connection
        self.closed_by_endpoint = False  # set when the endpoint closes it (shutdown, idle, protocol error)
        self.stopping = False  # draining: no new request is taken; ended once the answers are out
        self._ended = False
        # (future or None, frame): answers waiting for the disk, in order
        self._held: deque[tuple[asyncio.Future[int] | None, bytes]] | None = None
        self.read_block = 0  # bits, one per reason to stop reading from the client (each subclass names its own)
        self._made = [False]
        if getattr(endpoint, "ssl", None) is not None:
            weakref.finalize(self, _unmade, self._made, endpoint.stats)

    def block_reading(self, reason: int, blocked: bool) -> None:
        """Set or clear one ``reason`` bit for not reading from the client; the transport pauses while any
        bit is set and resumes when the last one clears."""
        old = self.read_block
        new = old | reason if blocked else old & ~reason
        self.read_block = new
        transport = self.transport
        if bool(old) != bool(new) and transport is not None and not transport.is_closing():
            if new:
                transport.pause_reading()
            else:
                transport.resume_reading()

    @property
    def address(self) -> str:
        return self.identity.address

    @property
    def port(self) -> int:
        return self.identity.port

    # asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.accept(transport)

    def accept(self, transport: asyncio.BaseTransport) -> bool:
        """Take ``transport``; False (and the transport aborted) when the endpoint is at ``max_connections``."""
        self._made[0] = True
        # a stream server (TCP or TLS) hands its protocols a full Transport
        transport = self.transport = cast(asyncio.Transport, transport)
        peer = self.proxied_source or transport.get_extra_info("peername") or ("", 0)
        self.identity.address, self.identity.port = java_host_address(str(peer[0])), int(peer[1])
        endpoint = self.endpoint
        if len(endpoint.connections) >= endpoint.max_connections:
            log.warning("event=refused reason=max_connections peer=%s:%s", self.address, self.port)
            endpoint.stats["connections_refused"] += 1
            transport.abort()
            return False
        endpoint.connections.add(self)
        endpoint.stats["connections"] += 1
        log.debug("event=connect peer=%s:%s", self.address, self.port)
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.endpoint.connections.discard(self)
        self.endpoint.budget.release(self)
        # Kafka 4.0+: the instance created on this connection goes with it
        reason = "endpoint" if self.closed_by_endpoint else "client"
        if self.endpoint.broker.connection_closed(self.connection_id, reason, node_id=self.broker_node_id):
            self.endpoint.stats["instances_dropped_on_disconnect"] += 1
        log.debug("event=disconnect peer=%s:%s", self.address, self.port)

    def drop(self, reason: str) -> None:
        """Close the connection at once because of a protocol error (logged and counted), as Kafka does;
        what it held of unfinished frames is let go of now."""
        log.warning("event=disconnect peer=%s:%s reason=%r", self.address, self.port, reason)
        self.endpoint.stats["protocol_errors"] += 1
        self.closed_by_endpoint = True
        self.free_buffers()
        if self.transport is not None:
            self.transport.abort()

    def drop_for_memory(self, held: int) -> None:
        """Close the connection at once: it holds ``held`` of the most bytes in unfinished frames while the
        endpoint is over its :class:`BufferBudget` (counted there). Frees what it holds now."""
        log.warning("event=disconnect peer=%s:%s reason=memory_budget held=%d", self.address, self.port, held)
        self.closed_by_endpoint = True
        self.free_buffers()
        if self.transport is not None:
            self.transport.abort()

    def free_buffers(self) -> None:
        """Let go of the bytes of unfinished frames (the connection is being dropped)."""

    # telemetry: the one code path of every endpoint
    def telemetry_response(self, request: Any, node_id: int | None = None) -> bytes:
        """The response frame to a decoded GetTelemetrySubscriptions or PushTelemetry
        :class:`~kip714.wire.Request`, decided by the endpoint's broker for the client on this connection
        (``node_id``: the broker the client believes it talks to; default the broker's own)."""
        info = self.identity.client_info(request.client_id)
        response, _ = self.endpoint.broker.handle(request.body, info, None, self.connection_id, node_id=node_id)
        return encode_response(request.correlation_id, response, request.api_version)

    def telemetry_tapped(self, request: Any, error_code: int, node_id: int | None = None) -> None:
        """A PushTelemetry :class:`~kip714.wire.Request` another broker answered with ``error_code``: feed the
        endpoint broker's receivers (the recording) without deciding anything."""
        info = self.identity.client_info(request.client_id)
        self.endpoint.broker.deliver(request.body, info, error_code, node_id=node_id)

    def close_idle(self) -> None:
        """Close this connection because it was idle too long."""
        self.closed_by_endpoint = True
        if self.transport is not None:
            self.transport.close()

    # answers in request order, some held until the recording is durable (--record-sync)
    def send(self, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` to the client now, or after the answers held before it (Kafka clients need the
        responses in request order)."""
        held = self._held
        if held:
            held.append((None, bytes(data)))
        else:
            assert self.transport is not None  # set by connection_made, before any request is read
            self.transport.write(data)

    def send_durable(self, data: bytes | bytearray | memoryview) -> None:
        """Write the answer to a push once its recorded row is durable (the endpoint's ``record_gate``, a
        :class:`RecordGate`, when the recorder is synchronous; at once otherwise), keeping request order.
        When the commit fails the answer is never written: the connection is closed (counted in
        ``record_sync_failures``), which Kafka clients take as a retriable failure."""
        gate = getattr(self.endpoint, "record_gate", None)
        waiter = gate.waiter() if gate is not None else None
        if waiter is None:
            self.send(data)
            return
        held = self._held
        if held is None:
            held = deque()
            self._held = held
        held.append((waiter, bytes(data)))
        if len(held) == 1:
            waiter.add_done_callback(self._release)
        if len(held) == HELD_MAX:
            self.hold_reading(True)

    def _release(self, _future: asyncio.Future[int] | None = None) -> None:
        held = self._held
        assert held is not None  # called back for an answer held in it
        transport = self.transport
        while held:
            if transport is None or transport.is_closing():
                held.clear()
                break
            waiter, data = held[0]
            if waiter is not None:
                if not waiter.done():
                    waiter.add_done_callback(self._release)
                    break
                if waiter.cancelled() or waiter.exception() is not None:
                    error = "cancelled" if waiter.cancelled() else repr(waiter.exception())
                    log.warning(
                        "event=disconnect peer=%s:%s reason=record_sync_failed error=%s held=%d",
                        self.address,
                        self.port,
                        error,
                        sum(1 for w, _ in held if w is not None),
                    )
                    self.endpoint.stats["record_sync_failures"] += sum(1 for w, _ in held if w is not None)
                    held.clear()
                    self.closed_by_endpoint = True
                    transport.abort()
                    return
            held.popleft()
            transport.write(data)
        if len(held) < HELD_MAX:
            self.hold_reading(False)
        if not held and self.stopping:
            self.finish_if_answered()

    def hold_reading(self, blocked: bool) -> None:
        """Stop (or resume) reading the client's requests while too many answers wait for the disk."""

    # draining (SIGTERM): no new request, every one read whole answered, then a clean close
    def stop_requests(self) -> None:
        """Take no new request: the ones already read whole are answered, then the connection ends cleanly
        (:meth:`finish_if_answered`): the client sees every answer whole, then the end of the connection.
        What the client sends meanwhile is read and dropped (never left unread: a socket closed with unread
        bytes is reset, and a reset may cost the client answers it has not read yet)."""
        self.stopping = True
        self.finish_if_answered()

    def answered(self) -> bool:
        """No answer is still owed to the client (subclasses add what they wait for)."""
        return not self._held

    def finish_if_answered(self) -> None:
        """End the connection once draining and nothing is owed to the client: the end of the stream after
        the last answer (a half close, TCP FIN), reading on until the client closes its side or
        :data:`LINGER_S` passes; a TLS connection is closed at once (TLS has no half close)."""
        transport = self.transport
        if not (self.stopping and self.answered()) or transport is None or transport.is_closing() or self._ended:
            return
        self._ended = True
        self.closed_by_endpoint = True
        if not transport.can_write_eof():
            transport.close()
            return
        transport.write_eof()
        self.read_block = 0
        transport.resume_reading()
        asyncio.get_running_loop().call_later(LINGER_S, self._linger_over)

    def _linger_over(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def eof_received(self) -> bool | None:
        return None  # the client closed its side: close ours (after what is still being written)


class FramedConnection(EndpointConnection):
    """One client connection of an endpoint that answers requests itself. Each read goes through the broker's
    native request loop (:meth:`~kip714.TelemetryBroker.feed`): the pushes it decides alone are answered in
    one write per read; every other frame comes back whole, in its turn, to :meth:`handle_frame`, which
    subclasses implement (every frame, when the class sets :attr:`decides` False)."""

    #: the request loop decides the pushes it can (False: every frame goes to :meth:`handle_frame`)
    decides = True

    def __init__(self, endpoint: Any) -> None:
        super().__init__(endpoint)
        self.loop = endpoint.broker.request_loop(endpoint.max_frame_bytes, self.decides)
        # read_block bits: 1 the client's write buffer is full, 2 too many answers wait for the disk

    # Flow control: a client that sends requests without reading the answers would otherwise make the
    # transport buffer every response; stop reading while the write buffer is above its high-water mark.
    def pause_writing(self) -> None:
        self.block_reading(1, True)

    def resume_writing(self) -> None:
        self.block_reading(1, False)

    def hold_reading(self, blocked: bool) -> None:
        self.block_reading(2, blocked)

    def data_received(self, data: bytes) -> None:
        if self.stopping:  # draining: a request not read whole yet is never answered
            return
        endpoint = self.endpoint
        broker = endpoint.broker
        loop = self.loop
        taken = loop.frames
        chunk: bytes | None = data
        while True:
            try:
                answers, frame = broker.feed(
                    loop, chunk, self.identity.client_info, self.connection_id, node_id=self.broker_node_id
                )
            except Kip714Error as exc:
                if isinstance(exc, FrameTooLargeError):
                    endpoint.stats["frames_too_large"] += 1
                self.drop(f"bad frame: {exc}")
                return
            except Exception:  # a bug must cost this connection, not escape into the event loop
                self._internal_error()
                return
            chunk = None
            if answers:
                self.send_durable(answers)  # push answers: after their rows are on disk with --record-sync
            if frame is None or self.transport is None or self.transport.is_closing():
                break
            try:
                self.handle_frame(frame)
            except Exception:
                self._internal_error()
                return
            if self.transport is None or self.transport.is_closing():
                return
        if loop.frames != taken:
            # Idle time counts from the last *complete* request: bytes trickling into a frame that never
            # completes (slow loris) do not keep the connection open.
            self.last_activity = time.monotonic()
        endpoint.budget.hold(self, loop.held)

    def _internal_error(self) -> None:
        log.error("event=internal_error peer=%s:%s", self.address, self.port, exc_info=True)
        self.endpoint.stats["internal_errors"] += 1
        self.drop("internal error")

    def free_buffers(self) -> None:
        self.loop.free()

    def handle_frame(self, frame: bytes) -> None:
        raise NotImplementedError

    def write(self, data: bytes) -> None:
        self.send(data)


def stagger(connections: Iterable[Any], spread_s: float) -> list[tuple[float, Any]]:
    """When each of ``connections`` is closed in a drain spread over ``spread_s`` seconds: ``(seconds after
    the drain starts, connection)``, in order, evenly spaced (``spread_s * i / n``: a lone connection closes at
    once). A client's connections (those from one address) close one after another, the clients' turns
    interleaved, and the oldest connection of each client closes last, among the others' last ones: no client
    loses all its connections at once, and each keeps one until late while those closed first reconnect (to
    another replica behind the balancer)."""
    groups: dict[str, list[Any]] = {}
    for conn in sorted(connections, key=lambda c: c.connection_id):
        groups.setdefault(conn.address, []).append(conn)
    order: list[Any] = []
    rounds = [conns[1:] for conns in groups.values()]
    for i in range(max(map(len, rounds), default=0)):  # the clients' other connections, round-robin
        order.extend(conns[i] for conns in rounds if i < len(conns))
    order.extend(conns[0] for conns in groups.values())  # then each client's oldest
    step = max(0.0, spread_s) / max(1, len(order))
    return [(i * step, conn) for i, conn in enumerate(order)]


async def drain_connections(endpoint: Any, timeout_s: float, spread_s: float = 0.0) -> int:
    """Drain ``endpoint``'s connections (``stop_requests()`` on each: no new request read, the ones read whole
    answered, then a clean close) for at most ``timeout_s``; abort the ones still open then. The closes are
    spread over ``spread_s`` (at most half of ``timeout_s``; :func:`stagger` says when each connection
    stops), each connection serving as usual until its turn. Returns how many had to be aborted (each
    logged). The endpoint has stopped accepting already."""
    start = time.monotonic()
    timeout_s = max(0.0, timeout_s)
    deadline = start + timeout_s
    spread_s = min(max(0.0, spread_s), timeout_s / 2)
    schedule = stagger(endpoint.connections, spread_s)
    if spread_s > 0 and len(schedule) > 1:
        log.info("event=drain_spread connections=%d spread=%.1fs", len(schedule), spread_s)
    for offset, conn in schedule:
        delay = start + offset - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if conn in endpoint.connections and not conn.stopping:
            log.debug("event=drain_close peer=%s:%s after=%.3fs", conn.address, conn.port, time.monotonic() - start)
            conn.stop_requests()
    for conn in list(endpoint.connections):  # accepted while the closes were spread (a header read then)
        if not conn.stopping:
            conn.stop_requests()
    while endpoint.connections and time.monotonic() < deadline:
        await asyncio.sleep(min(0.02, max(0.0, deadline - time.monotonic())))
    left = list(endpoint.connections)
    for conn in left:
        log.warning(
            "event=drain_aborted peer=%s:%s (an answer still owed after the drain timeout)", conn.address, conn.port
        )
        conn.closed_by_endpoint = True
        if conn.transport is not None:
            conn.transport.abort()
    endpoint.stats["drain_aborted"] += len(left)
    return len(left)


async def serve_until(endpoint: Any, duration_s: float | None, stop: asyncio.Event | None) -> None:
    """An endpoint's ``serve()``: start it, run until ``stop`` is set or ``duration_s`` passes (forever when
    neither is given), then close it."""
    await endpoint.start()
    try:
        stop = stop or asyncio.Event()
        try:
            await asyncio.wait_for(stop.wait(), duration_s)
        except asyncio.TimeoutError:
            pass
    finally:
        await endpoint.close()


async def log_summaries(endpoint: Any, interval_s: float) -> None:
    """Log ``endpoint.summary()`` every ``interval_s`` seconds (until cancelled)."""
    while True:
        await asyncio.sleep(interval_s)
        log.info("event=summary %s", endpoint.summary())


async def reap_idle(endpoint: Any, stats: EndpointStats) -> None:
    """Close the endpoint's connections that had no complete request for ``endpoint.idle_timeout_s``
    (counted in ``stats["idle_closed"]``), until cancelled."""
    while True:
        await asyncio.sleep(min(5.0, max(0.05, endpoint.idle_timeout_s / 4)))
        cutoff = time.monotonic() - endpoint.idle_timeout_s
        for conn in list(endpoint.connections):
            if conn.last_activity < cutoff and conn.transport is not None:
                log.info("event=disconnect peer=%s:%s reason=idle", conn.address, conn.port)
                stats["idle_closed"] += 1
                conn.close_idle()


def connection_ids() -> Callable[[], int]:
    """A source of connection ids for one endpoint (the broker's key for a connection)."""
    return itertools.count(1).__next__
