"""Broker decisions for GetTelemetrySubscriptions and PushTelemetry, as Apache Kafka 4.1+ makes them.

:class:`TelemetryBroker` is the equivalent of Kafka's ``ClientMetricsManager``: it answers both requests
from a :class:`~kip714.SubscriptionRegistry` and a native per-instance state table
(:class:`kip714._instances.InstanceTable`: rate limits, terminating flag, last error; expiry
``max(60 s, 3 × interval)`` after an instance's last request; bounded LRU capacity).

Validation order for a push (Kafka's ``processPushTelemetryRequest``): reserved ids → INVALID_REQUEST;
instance created or rebuilt when its subscription is stale; already terminating → INVALID_REQUEST; rate
limit (first push after a Get accepted early, a terminating push bypasses it) → THROTTLING_QUOTA_EXCEEDED;
wrong SubscriptionId → UNKNOWN_SUBSCRIPTION_ID; compression id outside 0–4 → UNSUPPORTED_COMPRESSION_TYPE;
wire size over ``telemetry_max_bytes`` → TELEMETRY_TOO_LARGE; then (non-empty payloads only) decompression
failure → INVALID_RECORD, decompressed size over ``telemetry_max_bytes`` → TELEMETRY_TOO_LARGE (newest
Kafka), a receiver raising → INVALID_RECORD.

Subscriptions are matched, as in Kafka's ``ClientMetricsManager.clientInstance()``, against the
:class:`ClientInfo` captured when the instance was created on this broker (Kafka's
``ClientMetricsInstanceMetadata``, built from the request that found the instance absent). A re-creation
after a subscription change keeps that metadata; only an instance that left the table (expiry, LRU
eviction, its connection closing) is captured afresh by the next request. The labels handed to receivers
come from the request being handled, as Kafka's receiver gets the current request context.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, cast, overload

from .._enums import (
    DEFAULT_ACCEPTED_COMPRESSION_TYPES,
    DEFAULT_TELEMETRY_MAX_BYTES,
    INSTANCE_CACHE_EXPIRY_MS,
    INSTANCE_CACHE_MAX_SIZE,
    CompressionType,
    ErrorCode,
)
from .._instances import TICKET_BASE, InstanceTable, Outcome, PayloadDecompressor, RequestLoop
from .._protocol import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from ..errors import Kip714Error, TelemetryTooLargeError
from .receivers import (
    AcceptedBatch,
    ClientSubscription,
    InstanceCloseObserver,
    PushBatch,
    PushObserver,
    ReceiverContext,
    TelemetryPayload,
    TelemetryReceiver,
)
from .subscriptions import ClientInfo, Resolution, SubscriptionRegistry, kafka_uuid_string

__all__ = [
    "TelemetryBroker",
    "DEFAULT_ACCEPTED_COMPRESSION_TYPES",
]

log = logging.getLogger("kip714.broker")

_ZERO = uuid.UUID(int=0)
_ONE = uuid.UUID(int=1)
_ANONYMOUS = ClientInfo()

#: ReceiverContexts kept for reuse at most (TelemetryBroker._context).
_MAX_CONTEXTS = 4096
_new_context = object.__new__

_NONE = int(ErrorCode.NONE)
_INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
_INVALID_RECORD = int(ErrorCode.INVALID_RECORD)
_THROTTLED = int(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
_UNKNOWN_SUB = int(ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
_TOO_LARGE = int(ErrorCode.TELEMETRY_TOO_LARGE)


def _random_instance_id(table: InstanceTable, now_ms: int) -> uuid.UUID:
    """Kafka's ``Uuid.randomUuid()`` plus the manager's rule: never reserved, never printing with a
    leading '-', never an id already in use."""
    while True:
        u = uuid.uuid4()
        if u in (_ZERO, _ONE):
            continue
        if kafka_uuid_string(u)[0] == "-":
            continue
        if table.lookup(u.bytes, now_ms, 0) is not Outcome.ABSENT:
            continue
        return u


class TelemetryBroker:
    """Answers GetTelemetrySubscriptions and PushTelemetry exactly as an Apache Kafka 4.1+ broker does.

    ``handle(body, client_info, now_ms=None, connection=None)`` returns ``(response, payload)`` where
    ``payload`` is a :class:`TelemetryPayload` for an accepted non-empty push and ``None`` otherwise.
    Thread-safe (docs/threads.md): every decision on one instance (lookup, creation, rate check, state
    update, last error) is one native call under the instance table's lock, and the broker's own maps and
    counters are updated under its lock. Any interleaving of ``handle``, ``deliver`` and
    ``connection_closed`` from threads answers each request with a Kafka error code; an instance evicted
    while its push is exported is left alone, as Kafka drops its evicted instance object.

    Connections (Kafka 4.0+, KAFKA-17778): pass a hashable ``connection`` id with each request and call
    :meth:`connection_closed` when that connection closes; like Kafka, the broker remembers, per
    connection, the last instance (re)created on it and drops that instance when the connection closes
    (even if the client has moved to another connection since). Without ``connection`` ids instances
    only leave by expiry and LRU eviction, as in Kafka 3.8/3.9.

    Options: ``telemetry_max_bytes`` (Kafka's ``telemetry.max.bytes``; limits the wire size and, as newest
    Kafka does, the decompressed size), ``accepted_compression_types`` (what the response advertises;
    like Kafka, any id 0–4 is still accepted on a push), ``max_instances`` (LRU capacity, Kafka's 16384),
    ``cache_expiry_ms`` (60000), ``node_id`` (the ``node_id`` label), ``clock`` (milliseconds, default
    wall clock), ``receivers`` (called for every accepted non-empty push), ``decompress_payloads`` (False
    skips decompression: the payload then carries the bytes as received and their compression type)."""

    def __init__(
        self,
        registry: SubscriptionRegistry | None = None,
        telemetry_max_bytes: int = DEFAULT_TELEMETRY_MAX_BYTES,
        accepted_compression_types: Iterable[int] = DEFAULT_ACCEPTED_COMPRESSION_TYPES,
        max_instances: int = INSTANCE_CACHE_MAX_SIZE,
        node_id: int = 0,
        clock: Callable[[], int] | None = None,
        cache_expiry_ms: int = INSTANCE_CACHE_EXPIRY_MS,
        receivers: Iterable[TelemetryReceiver] = (),
        decompress_payloads: bool = True,
        delta_temporality: bool = True,
    ) -> None:
        if telemetry_max_bytes < 1:
            raise ValueError("telemetry_max_bytes must be at least 1")
        self.registry = registry if registry is not None else SubscriptionRegistry()
        # what the request loops counted of the pushes they decided (carried over when the limit changes)
        self._loop_counts = [0, 0, 0]
        self._decompressor = PayloadDecompressor(int(telemetry_max_bytes))
        self.accepted_compression_types = [int(CompressionType(t)) for t in accepted_compression_types]
        self.node_id = int(node_id)
        self.clock = clock or (lambda: time.time_ns() // 1_000_000)
        self.receivers: list[TelemetryReceiver] = []
        self._observers: list[PushObserver] = []  # receivers that also see every push with its answer
        self._takers: list[TelemetryReceiver] = []  # receivers that take payloads (not takes_payloads = False)
        self._closers: list[InstanceCloseObserver] = []  # receivers that hear when an instance's connection closes
        # what the last successful Get told each instance (for the observers; bounded like the table)
        self._told: dict[bytes, ClientSubscription] = {}
        self._told_values: dict[ClientSubscription, ClientSubscription] = {}  # equal values: one object
        self._seen_on: dict[Any, dict[bytes, ClientInfo]] = {}  # connection → instances that used it
        self._max_told = int(max_instances)
        for receiver in receivers:
            self.add_receiver(receiver)
        self.decompress_payloads = decompress_payloads
        self.delta_temporality = delta_temporality
        self.instances = InstanceTable(max_instances=max_instances, cache_expiry_ms=cache_expiry_ms)
        self._try_push_request = self.instances.try_push_request  # bound once: called for every push
        self._lock = threading.Lock()
        # Decisions are counted natively by the instance table; these count what happens around them.
        # A push fed through deliver() was answered by someone else: its export failures are counted apart
        # ("delivered-…"), so that push_results() stays this broker's own answers.
        self._counts = dict.fromkeys(
            (
                "invalid-request",
                "plugin-export",
                "plugin-error",
                "decompression-error",
                "decompressed-too-large",
                "observer-error",
                "delivered-plugin-error",
                "delivered-decompression-error",
                "delivered-decompressed-too-large",
            ),
            0,
        )
        self._export_time_total = 0.0
        self._export_time_max = 0.0
        self._by_connection: dict[Any, bytes] = {}  # connection id → instance (re)created on it last
        # instance → the ClientInfo captured when it was created (Kafka's ClientMetricsInstanceMetadata).
        # Entries of instances that left the native table by expiry or eviction are swept out once the
        # map outgrows the live instances by a quarter (amortised O(1) per creation).
        self._metadata: dict[bytes, ClientInfo] = {}
        self._contexts: dict[tuple[Any, ...], ReceiverContext] = {}  # see _context
        self._expiries: dict[int, int] = {}  # push interval → the instance table's expiry (a constant rule)

    # ---------------------------------------------------------------------------------- dispatch

    @overload
    def handle(
        self,
        body: PushTelemetryRequest,
        client_info: ClientInfo | None = None,
        now_ms: int | None = None,
        connection: Hashable | None = None,
        *,
        node_id: int | None = None,
    ) -> tuple[PushTelemetryResponse, TelemetryPayload | None]: ...

    @overload
    def handle(
        self,
        body: GetTelemetrySubscriptionsRequest,
        client_info: ClientInfo | None = None,
        now_ms: int | None = None,
        connection: Hashable | None = None,
        *,
        node_id: int | None = None,
    ) -> tuple[GetTelemetrySubscriptionsResponse, None]: ...

    @overload
    def handle(
        self,
        body: object,
        client_info: ClientInfo | None = None,
        now_ms: int | None = None,
        connection: Hashable | None = None,
        *,
        node_id: int | None = None,
    ) -> tuple[GetTelemetrySubscriptionsResponse | PushTelemetryResponse, TelemetryPayload | None]: ...

    def handle(
        self,
        body: object,
        client_info: ClientInfo | None = None,
        now_ms: int | None = None,
        connection: Hashable | None = None,
        *,
        node_id: int | None = None,
    ) -> tuple[GetTelemetrySubscriptionsResponse | PushTelemetryResponse, TelemetryPayload | None]:
        """Decide one request body (GetTelemetrySubscriptionsRequest or PushTelemetryRequest).

        ``connection`` identifies the client connection the request came on (see :meth:`connection_closed`);
        ``node_id`` is the broker the client sent it to when that is not this broker's ``node_id`` (a proxy
        answering for every broker of a cluster): it becomes the ``node_id`` label and context."""
        if now_ms is None:
            now_ms = self.clock()
        if type(body) is PushTelemetryRequest:
            # The common push (a live instance, nothing to export) is answered here, decided in one native
            # call that reads the request's fields in C; everything else goes on to _push. The instance id
            # stays 16 bytes: no uuid.UUID is built for a push (one is built when an instance is
            # (re)created, for the subscription match, and on TelemetryPayload access). Per-push Python
            # work is kept to the minimum: the registry's version is read from its attribute (a property
            # call costs as much as the rest of this path) and nothing else is looked up unless needed.
            code = self._try_push_request(body, now_ms, self.registry._version, self.telemetry_max_bytes)
            if 0 <= code < TICKET_BASE:  # an ErrorCode, and no payload to export
                response = PushTelemetryResponse(0, code)
                if not self._observers and not self._closers:
                    return response, None
                result: tuple[PushTelemetryResponse, TelemetryPayload | None] = response, None
            else:  # a ticket (accepted, a payload to export) or an Outcome: no decision was made
                result = self._push(
                    body, client_info, now_ms, connection, self.node_id if node_id is None else node_id, code
                )
            if self._observers:
                self._observe(
                    body, client_info, result[0].error_code, now_ms, self.node_id if node_id is None else node_id
                )
            if self._closers and connection is not None:
                self._seen(connection, body.client_instance_id_bytes, client_info)
            return result
        if type(body) is GetTelemetrySubscriptionsRequest:
            answer = self._get(body, client_info, now_ms, connection)
            if (self._observers or self._closers) and answer.error_code == 0:
                self._remember(answer)
                if self._closers and connection is not None:
                    self._seen(connection, answer.client_instance_id.bytes, client_info)
            return answer, None
        raise TypeError(f"TelemetryBroker handles telemetry request bodies, not {type(body).__name__}")

    def add_receiver(self, receiver: TelemetryReceiver) -> None:
        """Feed ``receiver`` too: ``export_metrics`` for every accepted non-empty push and, when it has one,
        ``push_completed`` for every push with its answer (see :class:`~kip714.TelemetryReceiver`). This is
        the one way accepted pushes leave the broker: the recorder, the exporters and callbacks all use it."""
        self.receivers.append(receiver)
        if getattr(receiver, "takes_payloads", True):
            self._takers.append(receiver)
        # the optional hooks are looked up by name (the Protocols are not runtime-checkable)
        if callable(getattr(receiver, "push_completed", None)):
            self._observers.append(cast(PushObserver, receiver))
        if callable(getattr(receiver, "instance_closed", None)):
            self._closers.append(cast(InstanceCloseObserver, receiver))

    @property
    def telemetry_max_bytes(self) -> int:
        """Kafka's ``telemetry.max.bytes``: the largest push payload, on the wire and decompressed."""
        return self._decompressor.limit

    @telemetry_max_bytes.setter
    def telemetry_max_bytes(self, value: int) -> None:
        if int(value) != self._decompressor.limit:
            self._loop_counts = self._take_loop_counts()
            self._decompressor = PayloadDecompressor(int(value))

    # -------------------------------------------------------------------------- the request loop

    def request_loop(self, max_frame_bytes: int, decides: bool = True) -> RequestLoop:
        """A native request loop for one client connection (:class:`kip714._instances.RequestLoop`): feed it
        each read with :meth:`feed`; it decides the pushes it can decide alone with this broker's decision and
        hands back every other frame, in its turn, for :meth:`handle` (``decides=False``: every frame)."""
        return RequestLoop(self.instances, max_frame_bytes, decides)

    def feed(
        self,
        loop: RequestLoop,
        data: bytes | None,
        client_info: Callable[[str | None], ClientInfo],
        connection: Hashable | None = None,
        *,
        node_id: int | None = None,
    ) -> tuple[bytearray | None, bytes | None]:
        """One read of a client connection through its request loop: ``(answers, frame)``, the answers to the
        pushes decided (in order, one buffer for one write) and the frame the loop handed back (decode it and
        :meth:`handle` it, then call ``feed(loop, None, ...)`` to go on after it), or None.

        ``client_info(client_id)`` gives the connection's :class:`ClientInfo` of a client id (asked only when
        receivers or observers need it). Accepted pushes reach the receivers, and every push the observers,
        as with :meth:`handle`; an answer a receiver changes (it raised: INVALID_RECORD) is changed in
        ``answers``. Raises what ``RequestLoop.feed`` raises (a bad size prefix)."""
        answers, frame = self._through(loop.feed, data, client_info, connection, node_id)
        return answers, cast("bytes | None", frame)

    def feed_prefix(
        self,
        loop: RequestLoop,
        data: bytes,
        client_info: Callable[[str | None], ClientInfo],
        connection: Hashable | None = None,
        *,
        node_id: int | None = None,
    ) -> tuple[bytearray | None, int]:
        """:meth:`feed` for an endpoint that streams the other requests on (``kip714 proxy``): the pushes the loop
        decides at the start of ``data``, nothing held: ``(answers, consumed)``; ``data[consumed:]`` starts with a
        frame the loop did not take (not whole in ``data``, or not one it decides alone)."""
        answers, consumed = self._through(loop.feed_prefix, data, client_info, connection, node_id)
        return answers, cast(int, consumed)

    def _through(
        self,
        call: Callable[..., tuple[bytearray | None, Any, Any]],
        data: bytes | None,
        client_info: Callable[[str | None], ClientInfo],
        connection: Hashable | None,
        node_id: int | None,
    ) -> tuple[bytearray | None, Any]:
        """One call of a request loop (``RequestLoop.feed`` or ``feed_prefix``) with this broker's state, then the
        receivers' and observers' part of the pushes it decided: ``(answers, what the call says of the rest)``."""
        now_ms = self.clock()
        records = self._records()
        answers, rest, batch = call(
            data, now_ms, self.registry._version, self._decompressor, self.decompress_payloads, records
        )
        if batch is not None:
            self._finish_batch(
                batch, answers, client_info, connection, self.node_id if node_id is None else node_id, now_ms, records
            )
        return answers, rest

    def _records(self) -> int:
        """What a request loop hands back of the pushes it decides: 2, each one and the accepted payloads (a
        receiver takes them); 1, each one (observers only); 0, nothing."""
        return 2 if self._takers else 1 if (self._observers or self._closers) else 0

    def _finish_batch(
        self,
        batch: tuple[Any, ...],
        answers: bytearray | None,
        client_info: Callable[[str | None], ClientInfo],
        connection: Hashable | None,
        node_id: int,
        now_ms: int,
        records: int,
    ) -> None:
        """The receivers' and observers' part of the pushes a request loop decided (``batch``: its columns; the
        loop was called with ``records``, so that accepted pushes wait for the receivers only when it is 2)."""
        ids, sids, terminating, ctypes, codes, raws, datas, client_ids, offsets, new_here = batch
        n = len(ids)
        if client_ids.count(client_ids[0]) == n:  # one connection: almost always one client id
            infos = [client_info(client_ids[0])] * n
        else:
            infos = []
            last_id: object = ()
            info = _ANONYMOUS
            for cid in client_ids:
                if cid is not last_id:
                    info, last_id = client_info(cid), cid
                infos.append(info)
        accepted = (
            [k for k in range(n) if codes[k] >= TICKET_BASE] if records == 2 and max(codes) >= TICKET_BASE else []
        )
        if accepted:  # their payloads decompressed: the receivers have them now
            failed = self._export_batch(ids, terminating, ctypes, sids, datas, infos, accepted, node_id, now_ms)
            finish = self.instances.finish_push
            # An instance's last error is its last push's: the loop decided every push of the read before this
            # runs, and a later push of the same instance set its own (a refusal at once, an acceptance through
            # its own ticket), which finishing an earlier one must not overwrite.
            last = {id16: k for k, id16 in enumerate(ids)} if n > 1 else None
            for j, k in enumerate(accepted):
                final = _INVALID_RECORD if j in failed else _NONE
                if last is None or last[ids[k]] == k:
                    finish(ids[k], codes[k], final)
                codes[k] = final
                if final and answers is not None:
                    answers[offsets[k] : offsets[k] + 2] = final.to_bytes(2, "big")
        if self._observers:
            self._observe_batch(ids, infos, sids, terminating, ctypes, codes, raws, node_id, now_ms)
        if self._closers and connection is not None:
            for k in new_here:  # (the loop knows the instances it saw on this connection: only new ones)
                self._seen(connection, ids[k], infos[k])

    def _export_batch(
        self,
        ids: list[bytes],
        terminating: list[bool],
        ctypes: list[int],
        sids: list[int],
        datas: list[bytes],
        infos: list[ClientInfo],
        accepted: list[int],
        node_id: int,
        now_ms: int,
    ) -> set[int]:
        """The accepted pushes of a batch (``accepted``: their rows) to every receiver: as columns to those with
        ``export_batch`` (an :class:`AcceptedBatch`), at once to those with ``export_many``, one by one to the
        others, as :meth:`_export_data` hands one push. Returns the indices into ``accepted`` of the pushes a
        receiver raised on (answered INVALID_RECORD, as by :meth:`handle`)."""
        started = time.perf_counter()
        raw_type = not self.decompress_payloads
        items: list[tuple[ReceiverContext, TelemetryPayload]] | None = None  # made for the receivers that need them
        failed: set[int] = set()
        batch: AcceptedBatch | None = None  # made once for every receiver that takes columns, while none failed more
        batch_failed = 0
        for receiver in self._takers:
            columns = getattr(receiver, "export_batch", None)
            if columns is not None:
                if batch is None or batch_failed != len(failed):  # (failed only grows)
                    keep = [k for j, k in enumerate(accepted) if j not in failed] if failed else accepted
                    timing = self._timing
                    timings = [timing(ids[k], None) for k in keep]
                    batch = AcceptedBatch(
                        now_ms,
                        node_id,
                        [ids[k] for k in keep],
                        [infos[k] for k in keep],
                        [terminating[k] for k in keep],
                        [datas[k] for k in keep],
                        [ctypes[k] for k in keep] if raw_type else [0] * len(keep),
                        [sids[k] for k in keep],
                        [t[0] for t in timings],
                        [t[1] for t in timings],
                    )
                    batch_failed = len(failed)
                if self._hand_all(receiver, columns, batch, len(accepted), failed):
                    continue
                break
            if items is None:
                items = []
                for k in accepted:
                    id16, info = ids[k], infos[k]
                    payload = TelemetryPayload._accepted(
                        id16, terminating[k], datas[k], info, node_id, ctypes[k] if raw_type else 0, sids[k], now_ms
                    )
                    interval, expiry = self._timing(id16, None)
                    items.append((self._context(info, node_id, interval, None, expiry), payload))
            many = getattr(receiver, "export_many", None)
            if many is not None:
                batch_items = items if not failed else [item for j, item in enumerate(items) if j not in failed]
                if self._hand_all(receiver, many, batch_items, len(items), failed):
                    continue
                break
            for j, (ctx, payload) in enumerate(items):
                if j in failed:
                    continue
                try:
                    receiver.export_metrics(ctx, payload)
                except Exception:
                    log.warning("telemetry receiver %r failed", receiver, exc_info=True)
                    self._count("plugin-error")
                    failed.add(j)
        elapsed = (time.perf_counter() - started) * 1000.0
        exported = len(accepted) - len(failed)
        with self._lock:
            self._counts["plugin-export"] += exported
            self._export_time_total += elapsed
            per_push = elapsed / len(accepted)
            if per_push > self._export_time_max:
                self._export_time_max = per_push
        return failed

    def _hand_all(self, receiver: object, call: Callable[[Any], object], arg: object, n: int, failed: set[int]) -> bool:
        """``call(arg)``: every push of the batch (``n``) to ``receiver`` at once. When it raises, each push not
        already in ``failed`` is counted as a plugin error and added to it; False."""
        try:
            call(arg)
            return True
        except Exception:
            log.warning("telemetry receiver %r failed", receiver, exc_info=True)
            self._count("plugin-error", n - len(failed))
            failed.update(range(n))
            return False

    def _observe_batch(
        self,
        ids: list[bytes],
        infos: list[ClientInfo],
        sids: Sequence[int],
        terminating: list[bool],
        ctypes: list[int],
        codes: Sequence[int],
        raws: Sequence[bytes],
        node_id: int,
        now_ms: int,
    ) -> None:
        """Every push of a batch to the observers: at once to those that take a :class:`PushBatch`, one by one
        (a :class:`PushTelemetryRequest` made for each) to the others."""
        with self._lock:
            subscriptions = list(map(self._told.get, ids))
        if not all(subscriptions):  # (a ClientSubscription is true)
            for k, sub in enumerate(subscriptions):
                if sub is None:
                    subscriptions[k] = self.told(ids[k], infos[k])
        batch = PushBatch(now_ms, node_id, ids, infos, subscriptions, sids, terminating, ctypes, codes, raws)
        for observer in self._observers:
            try:
                batched = getattr(observer, "pushes_completed", None)
                if batched is not None:
                    batched(batch)
                    continue
                for k in range(len(ids)):
                    sub = subscriptions[k]
                    interval = sub.push_interval_ms if sub is not None else None
                    ctx = self._context(infos[k], node_id, interval, sub, self._expiry(interval))
                    request = PushTelemetryRequest(uuid.UUID(bytes=ids[k]), sids[k], terminating[k], ctypes[k], raws[k])
                    observer.push_completed(ctx, request, codes[k], now_ms)
            except Exception:
                log.warning("telemetry observer %r failed", observer, exc_info=True)
                self._count("observer-error")

    def _take_loop_counts(self) -> list[int]:
        """What the request loops counted (exported, payloads that failed to decompress, over the limit), the
        decompressor's counts added to those of the decompressors it replaced."""
        d = self._decompressor
        return [
            self._loop_counts[0] + d.loop_exported,
            self._loop_counts[1] + d.loop_corrupt,
            self._loop_counts[2] + d.loop_too_large,
        ]

    def told_by_upstream(self, response: GetTelemetrySubscriptionsResponse) -> None:
        """A GetTelemetrySubscriptions response another broker gave a client (``kip714 proxy`` in ``tap``
        mode): remember what it told the instance, so that its pushes fed through :meth:`deliver` carry
        that subscription, push interval and expiry to the receivers and observers."""
        if response.error_code == 0:
            self._remember(response)

    def _remember(self, response: GetTelemetrySubscriptionsResponse) -> None:
        """Keep what a successful Get told the instance (what the observers learn its pushes were held to)."""
        told = ClientSubscription(
            subscription_id=response.subscription_id,
            requested_metrics=tuple(response.requested_metrics),
            push_interval_ms=response.push_interval_ms,
            delta_temporality=bool(response.delta_temporality),
            accepted_compression_types=tuple(int(c) for c in response.accepted_compression_types),
            telemetry_max_bytes=response.telemetry_max_bytes,
        )
        id16 = response.client_instance_id.bytes
        with self._lock:
            # every instance of a subscription is told the same: one object for all of them (what the
            # observers receive per push; the recorder makes its columns once per object)
            told = self._told_values.setdefault(told, told)
            if len(self._told_values) > 1024:
                self._told_values.clear()
            told_map = self._told
            told_map.pop(id16, None)
            told_map[id16] = told
            if len(told_map) > self._max_told:  # oldest first out (dicts keep insertion order)
                del told_map[next(iter(told_map))]

    def told(self, client_instance_id: uuid.UUID | bytes, client_info: ClientInfo | None = None) -> ClientSubscription:
        """What the endpoint last told ``client_instance_id`` in a GetTelemetrySubscriptions response; when
        that Get was not seen (or has been forgotten), what the registry resolves for it now."""
        id16 = client_instance_id.bytes if isinstance(client_instance_id, uuid.UUID) else bytes(client_instance_id)
        with self._lock:
            told = self._told.get(id16)
        if told is not None:
            return told
        info = self.client_metadata(id16) or client_info or _ANONYMOUS
        res = self.registry.resolve(info, uuid.UUID(bytes=id16))
        return ClientSubscription(
            res.subscription_id,
            tuple(res.requested_metrics),
            res.push_interval_ms,
            bool(self.delta_temporality),
            tuple(self.accepted_compression_types),
            self.telemetry_max_bytes,
        )

    def _seen(self, connection: Hashable, id16: bytes, client_info: ClientInfo | None) -> None:
        seen = self._seen_on.get(connection)
        if seen is not None and id16 in seen:  # (every push of an instance after its first one)
            return
        with self._lock:
            seen = self._seen_on.get(connection)
            if seen is None:
                seen = self._seen_on[connection] = {}
            if id16 not in seen and len(seen) < 64:  # a connection carries one client: bounded anyway
                seen[id16] = client_info or _ANONYMOUS

    def deliver(
        self,
        body: PushTelemetryRequest,
        client_info: ClientInfo | None,
        error_code: int,
        now_ms: int | None = None,
        *,
        node_id: int | None = None,
        subscription: ClientSubscription | None = None,
    ) -> TelemetryPayload | None:
        """Feed the receivers a push that someone else decided (a proxy tapping a real cluster, whose
        broker stays the authority): ``error_code`` is that answer. An accepted non-empty push is
        decompressed and exported as :meth:`handle` would; every push reaches the observers. Returns the
        payload exported, or ``None``. A failure here is counted and logged; the answer stays the given one.
        ``node_id``: the broker that answered (default this broker's ``node_id``). ``subscription``: what the
        real broker told this client (the observers record it); by default what a Get this broker answered or
        saw answered (:meth:`told_by_upstream`) told it, or nothing (the recording's subscription columns
        stay null rather than guess)."""
        if now_ms is None:
            now_ms = self.clock()
        node = self.node_id if node_id is None else node_id
        payload = None
        if error_code == 0 and body.metrics_size:
            payload, _ = self._export(
                body,
                body.client_instance_id_bytes,
                client_info or _ANONYMOUS,
                now_ms,
                node,
                subscription,
                counted="delivered-",
            )
        if self._observers:
            self._observe(body, client_info, error_code, now_ms, node, subscription, resolve=False)
        return payload

    def _observe(
        self,
        body: PushTelemetryRequest,
        client_info: ClientInfo | None,
        error_code: int,
        now_ms: int,
        node_id: int,
        subscription: ClientSubscription | None = None,
        resolve: bool = True,
    ) -> None:
        if subscription is None:
            if resolve:
                subscription = self.told(body.client_instance_id_bytes, client_info)
            else:  # decided elsewhere: only a Get this broker answered itself says what the client was told
                with self._lock:
                    subscription = self._told.get(body.client_instance_id_bytes)
        interval = subscription.push_interval_ms if subscription is not None else None
        ctx = self._context(client_info or _ANONYMOUS, node_id, interval, subscription, self._expiry(interval))
        for observer in self._observers:
            try:
                observer.push_completed(ctx, body, error_code, now_ms)
            except Exception:
                log.warning("telemetry observer %r failed", observer, exc_info=True)
                self._count("observer-error")

    def connection_closed(
        self, connection: Hashable, reason: str = "client", now_ms: int | None = None, *, node_id: int | None = None
    ) -> bool:
        """A client connection closed: drop the instance last (re)created on it, as Kafka 4.0+ does.

        Returns True if a live instance was removed. Unknown connections are ignored. Receivers with
        ``instance_closed`` hear of every instance that used the connection, with ``reason`` ("client":
        the peer closed it; "endpoint": the endpoint did), ``now_ms`` (default: the broker's clock) and
        ``node_id``, the broker the connection was to, as :meth:`handle` takes it (default this broker's)."""
        with self._lock:
            id16 = self._by_connection.pop(connection, None)
            if id16 is not None:
                self._metadata.pop(id16, None)
            seen = self._seen_on.pop(connection, None)
        removed = id16 is not None and self.instances.remove(id16)
        if seen:
            at_ms = self.clock() if now_ms is None else now_ms
            for seen_id, info in seen.items():
                told = self.told(seen_id, info)
                ctx = ReceiverContext(
                    info,
                    self.node_id if node_id is None else node_id,
                    told.push_interval_ms,
                    told,
                    self._expiry(told.push_interval_ms),
                )
                instance = uuid.UUID(bytes=seen_id)
                for closer in self._closers:
                    try:
                        closer.instance_closed(ctx, instance, at_ms, reason)
                    except Exception:
                        log.warning("telemetry observer %r failed", closer, exc_info=True)
                        self._count("observer-error")
        return removed

    def client_metadata(self, instance: uuid.UUID | bytes) -> ClientInfo | None:
        """The ClientInfo subscriptions are matched against for ``instance``: the one captured when the
        instance was created (None if it is not known)."""
        id16 = instance.bytes if isinstance(instance, uuid.UUID) else bytes(instance)
        if self.instances.get_state(id16) is None:
            return None
        return self._metadata.get(id16)

    def _create(
        self, id16: bytes, instance: uuid.UUID, client_info: ClientInfo | None, connection: Hashable | None, stale: bool
    ) -> Resolution:
        """Kafka's clientInstance() for an absent (``stale`` False) or stale instance: capture its metadata and
        resolve the subscriptions against it. An absent instance captures the request's ClientInfo; a stale
        one keeps what it captured when it was created. The caller (re)creates it in the table with the
        result, in the same native call that decides the request (``create_get``/``create_push_request``):
        another thread's request can then neither evict it in between nor find it half made."""
        with self._lock:
            info = self._metadata.get(id16) if stale else None
            if info is None:
                info = client_info or _ANONYMOUS
                self._metadata[id16] = info
                if len(self._metadata) > len(self.instances) + max(1024, len(self.instances) >> 2):
                    self._sweep_metadata()
            if connection is not None:
                self._by_connection[connection] = id16
        return self.registry.resolve(info, instance)

    def _sweep_metadata(self) -> None:
        """Drop the captured metadata of instances no longer in the table (called under the lock)."""
        get_state = self.instances.get_state
        self._metadata = {k: v for k, v in self._metadata.items() if get_state(k) is not None}

    def _get(
        self,
        body: GetTelemetrySubscriptionsRequest,
        client_info: ClientInfo | None,
        now_ms: int,
        connection: Hashable | None,
    ) -> GetTelemetrySubscriptionsResponse:
        instance = body.client_instance_id
        if instance == _ZERO:
            instance = _random_instance_id(self.instances, now_ms)
        id16 = instance.bytes
        res = None
        code = self.instances.try_get(id16, now_ms, self.registry._version)
        if code is Outcome.ABSENT or code is Outcome.STALE:
            res = self._create(id16, instance, client_info, connection, code is Outcome.STALE)
            code = self.instances.create_get(id16, now_ms, res.version, res.subscription_id, res.push_interval_ms)
        if code:
            return GetTelemetrySubscriptionsResponse(0, code)
        if res is None:
            # a live instance answers with the subscription it was built with: match what it captured
            res = self.registry.resolve(self._metadata.get(id16) or client_info or _ANONYMOUS, instance)
        return GetTelemetrySubscriptionsResponse(
            0,
            0,
            instance,
            res.subscription_id,
            self.accepted_compression_types,
            res.push_interval_ms,
            self.telemetry_max_bytes,
            self.delta_temporality,
            list(res.requested_metrics),
        )

    def _push(
        self,
        body: PushTelemetryRequest,
        client_info: ClientInfo | None,
        now_ms: int,
        connection: Hashable | None,
        node_id: int,
        code: int,
    ) -> tuple[PushTelemetryResponse, TelemetryPayload | None]:
        """The rest of a push after ``try_push_request`` answered ``code``: an Outcome (reserved id, or an
        instance to create first) or a ticket (accepted, a payload to export). Each step on the instance is
        one native call under the table's lock; after the export, :meth:`InstanceTable.finish_push` sets the
        last error of the incarnation that accepted the push, or nothing if it has left the table since."""
        table = self.instances
        if code < 0:  # an Outcome: no decision was made
            if code is Outcome.RESERVED:  # ZERO or ONE: INVALID_REQUEST before any instance is touched
                self._count("invalid-request")
                return PushTelemetryResponse(0, _INVALID_REQUEST), None
            # ABSENT or STALE (a rebuild keeps the captured client metadata): (re)create and decide at once
            id16 = body.client_instance_id_bytes
            res = self._create(id16, uuid.UUID(bytes=id16), client_info, connection, code is Outcome.STALE)
            code = table.create_push_request(
                body, now_ms, res.version, res.subscription_id, res.push_interval_ms, self.telemetry_max_bytes
            )
            if code < TICKET_BASE:
                return PushTelemetryResponse(0, code), None
        ticket = code
        id16 = body.client_instance_id_bytes
        payload, code = self._export(body, id16, client_info or _ANONYMOUS, now_ms, node_id)
        table.finish_push(id16, ticket, code)
        if code:
            return PushTelemetryResponse(0, code), None
        return PushTelemetryResponse(0, 0), payload

    def _context(
        self,
        client_info: ClientInfo,
        node_id: int,
        interval: int | None,
        subscription: ClientSubscription | None,
        expiry: int | None,
    ) -> ReceiverContext:
        """The ReceiverContext of these values: one made per push costs more than the rest of a push's
        bookkeeping, so the contexts (immutable) are kept and handed out again for the same client
        connection, node, subscription and timing (at most ``_MAX_CONTEXTS``, then made afresh)."""
        key = (id(client_info), node_id, interval, id(subscription), expiry)
        ctx = self._contexts.get(key)
        if ctx is None or ctx.client_info is not client_info or ctx.subscription is not subscription:
            # (what the frozen dataclass's __init__ makes, its fields set in its __dict__ directly: this runs
            # for a push of every instance, each told a subscription of its own)
            ctx = _new_context(ReceiverContext)
            fields = ctx.__dict__
            fields["client_info"] = client_info
            fields["node_id"] = node_id
            fields["push_interval_ms"] = interval
            fields["subscription"] = subscription
            fields["expiry_ms"] = expiry
            contexts = self._contexts
            if len(contexts) >= _MAX_CONTEXTS:
                contexts.clear()
            contexts[key] = ctx  # (holds client_info and subscription: their ids stay theirs while kept)
        return ctx

    def _expiry(self, push_interval_ms: int | None) -> int | None:
        """The instance table's expiry for a push interval (None when the interval is not known)."""
        if push_interval_ms is None or not 0 <= push_interval_ms <= 0x7FFFFFFF:
            return None
        expiry = self._expiries.get(push_interval_ms)
        if expiry is None:
            expiry = self.instances.expiry_for(push_interval_ms)
            if len(self._expiries) < 1024:
                self._expiries[push_interval_ms] = expiry
        return expiry

    def _timing(self, id16: bytes, subscription: ClientSubscription | None) -> tuple[int | None, int | None]:
        """``(push interval, expiry)`` of an instance for the receivers: the table's when it holds the
        instance, else (a push decided elsewhere) what the client was told."""
        timing = self.instances.timing(id16)
        if timing is not None:
            return timing
        if subscription is None:
            with self._lock:
                subscription = self._told.get(id16)
        if subscription is None:
            return None, None
        return subscription.push_interval_ms, self._expiry(subscription.push_interval_ms)

    def _export(
        self,
        body: PushTelemetryRequest,
        id16: bytes,
        client_info: ClientInfo,
        now_ms: int,
        node_id: int,
        subscription: ClientSubscription | None = None,
        counted: str = "",
    ) -> tuple[TelemetryPayload | None, int]:
        """Decompress and hand an accepted push to the receivers: ``(payload, NONE)`` or ``(None, the
        error code)``. Failures are counted under ``counted`` + their name ("delivered-" for deliver())."""
        ctype = body.compression_type
        try:
            if self.decompress_payloads:
                data = self._decompressor.decompress(body.metrics, ctype)
            else:
                data = bytes(body.metrics)
        except TelemetryTooLargeError:
            self._count(counted + "decompressed-too-large")
            return None, _TOO_LARGE
        except Kip714Error:
            self._count(counted + "decompression-error")
            return None, _INVALID_RECORD
        return self._export_data(
            id16,
            body.terminating,
            data,
            client_info,
            now_ms,
            node_id,
            body.subscription_id,
            ctype,
            subscription,
            counted,
        )

    def _export_data(
        self,
        id16: bytes,
        terminating: bool,
        data: bytes,
        client_info: ClientInfo,
        now_ms: int,
        node_id: int,
        subscription_id: int,
        ctype: int,
        subscription: ClientSubscription | None = None,
        counted: str = "",
    ) -> tuple[TelemetryPayload | None, int]:
        """Hand an accepted push's payload (``data``: decompressed unless ``decompress_payloads`` is off) to the
        receivers: ``(payload, NONE)``, or ``(None, INVALID_RECORD)`` when one raised."""
        started = time.perf_counter()
        payload = TelemetryPayload._accepted(
            id16,
            terminating,
            data,
            client_info,
            node_id,
            0 if self.decompress_payloads else ctype,
            subscription_id,
            now_ms,
        )
        if self._takers:
            interval, expiry = self._timing(id16, subscription)
            ctx: ReceiverContext | None = None
            batch: AcceptedBatch | None = None
            for receiver in self._takers:
                try:
                    columns = getattr(receiver, "export_batch", None)
                    if columns is not None:  # one path into such a receiver: the request loop's reads come so too
                        if batch is None:
                            batch = AcceptedBatch(
                                now_ms,
                                node_id,
                                [id16],
                                [client_info],
                                [terminating],
                                [data],
                                [0 if self.decompress_payloads else ctype],
                                [subscription_id],
                                [interval],
                                [expiry],
                            )
                        columns(batch)
                        continue
                    if ctx is None:
                        ctx = self._context(client_info, node_id, interval, None, expiry)
                    receiver.export_metrics(ctx, payload)
                except Exception:
                    log.warning("telemetry receiver %r failed", receiver, exc_info=True)
                    self._count(counted + "plugin-error")
                    return None, _INVALID_RECORD
        elapsed = (time.perf_counter() - started) * 1000.0
        with self._lock:
            self._counts["plugin-export"] += 1
            self._export_time_total += elapsed
            if elapsed > self._export_time_max:
                self._export_time_max = elapsed
        return payload, _NONE

    def labels(self, client_info: ClientInfo, instance: uuid.UUID | bytes | None = None) -> dict[str, str]:
        """The KIP's broker-added labels for a client (:meth:`ClientInfo.labels` with this broker's node id)."""
        return client_info.labels(self.node_id, instance)

    # ----------------------------------------------------------------------------------- metrics

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def push_results(self) -> dict[int, int]:
        """Every PushTelemetry answer so far, counted by error code (0: accepted)."""
        decisions = self.instances.decision_counts()
        with self._lock:
            counts = dict(self._counts)
        _, corrupt, too_large = self._take_loop_counts()
        counts["decompression-error"] += corrupt
        counts["decompressed-too-large"] += too_large
        push = dict(decisions["push"])
        # pushes the table accepted but that failed afterwards, and pushes refused before the table
        failed_after = counts["decompression-error"] + counts["plugin-error"] + counts["decompressed-too-large"]
        push[0] = push.get(0, 0) - failed_after
        push[_INVALID_RECORD] = push.get(_INVALID_RECORD, 0) + counts["decompression-error"] + counts["plugin-error"]
        push[_TOO_LARGE] = push.get(_TOO_LARGE, 0) + counts["decompressed-too-large"]
        push[_INVALID_REQUEST] = push.get(_INVALID_REQUEST, 0) + counts["invalid-request"]
        return {c: n for c, n in push.items() if n}

    def metrics(self) -> dict[str, Any]:
        """Kafka's ``client-metrics`` group (as broker-wide totals) plus kip714's own counters.

        ``push-results`` / ``get-results`` count every answer by error code name."""
        decisions = self.instances.decision_counts()
        with self._lock:
            counts = dict(self._counts)
            export_total, export_max = self._export_time_total, self._export_time_max
        push = self.push_results()
        get = decisions["get"]
        loop_exported, loop_corrupt, _ = self._take_loop_counts()
        counts["decompression-error"] += loop_corrupt
        exports = counts["plugin-export"] + loop_exported
        return {
            "instance-count": len(self.instances),
            "unknown-subscription-request-count": push.get(_UNKNOWN_SUB, 0),
            "throttle-count": push.get(_THROTTLED, 0) + get.get(_THROTTLED, 0),
            "plugin-export-count": exports,
            "plugin-export-time-avg": export_total / exports if exports else 0.0,
            "plugin-export-time-max": export_max,
            "plugin-error-count": (
                counts["plugin-error"]
                + counts["decompression-error"]
                + counts["delivered-plugin-error"]
                + counts["delivered-decompression-error"]
            ),
            "observer-error-count": counts["observer-error"],
            "get-request-count": sum(get.values()),
            "push-request-count": sum(push.values()),
            "push-results": {ErrorCode(c).name: n for c, n in sorted(push.items()) if n},
            "get-results": {ErrorCode(c).name: n for c, n in sorted(get.items()) if n},
            "instance-evictions": self.instances.evictions,
            "instance-expirations": self.instances.expirations,
        }
