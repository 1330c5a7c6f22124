"""The contract an accepted push leaves the broker by: Kafka's ``ClientTelemetryReceiver``.

A :class:`TelemetryReceiver` is called once for every accepted non-empty push with a
:class:`ReceiverContext` and a :class:`TelemetryPayload`. Every sink (recorder, exporters) is one;
:class:`BackgroundReceiver` runs a slow one on a worker thread behind a bounded queue
(:mod:`.bounded_queue`: the one full-queue policy)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .bounded_queue import BoundedQueueReceiver
from .subscriptions import ClientInfo

__all__ = [
    "AcceptedBatch",
    "BackgroundReceiver",
    "CallbackReceiver",
    "ClientSubscription",
    "InstanceCloseObserver",
    "PushBatch",
    "PushBatchObserver",
    "PushObserver",
    "ReceiverContext",
    "TelemetryPayload",
    "TelemetryReceiver",
]

log = logging.getLogger("kip714.broker")


class TelemetryPayload:
    """An accepted push, as Kafka hands it to its ClientTelemetryReceivers (immutable).

    ``client_instance_id`` is a ``uuid.UUID`` (built on first access: the broker carries the 16 raw bytes,
    ``client_instance_id_bytes``, and pays for the UUID only when a receiver asks); the constructor takes
    either. ``data`` is the decompressed OTLP MetricsData (``content_type`` "OTLP"); ``labels`` are the
    KIP's broker-added labels (a payload the broker makes builds them on first access, from the client's
    :class:`ClientInfo`, as it builds the UUID)."""

    __slots__ = (
        "_label_source",
        "_labels",
        "_uuid",
        "client_instance_id_bytes",
        "compression_type",
        "content_type",
        "data",
        "received_at_ms",
        "subscription_id",
        "terminating",
    )
    _FIELDS = (
        "client_instance_id",
        "terminating",
        "content_type",
        "data",
        "labels",
        "compression_type",
        "subscription_id",
        "received_at_ms",
    )

    _uuid: uuid.UUID | None
    client_instance_id_bytes: bytes
    terminating: bool
    content_type: str
    data: bytes
    compression_type: int
    subscription_id: int
    received_at_ms: int
    _labels: dict[str, str] | None
    _label_source: tuple[ClientInfo, int] | None

    def __init__(
        self,
        client_instance_id: uuid.UUID | bytes,
        terminating: bool,
        content_type: str,
        data: bytes,
        labels: dict[str, str],
        compression_type: int,
        subscription_id: int,
        received_at_ms: int,
    ) -> None:
        if isinstance(client_instance_id, uuid.UUID):
            id16, u = client_instance_id.bytes, client_instance_id
        else:
            id16, u = bytes(client_instance_id), None
            if len(id16) != 16:
                raise ValueError(f"a client instance id is 16 bytes, got {len(id16)}")
        setattr_ = object.__setattr__
        setattr_(self, "client_instance_id_bytes", id16)
        setattr_(self, "_uuid", u)
        setattr_(self, "terminating", terminating)
        setattr_(self, "content_type", content_type)
        setattr_(self, "data", data)
        setattr_(self, "_labels", labels)
        setattr_(self, "_label_source", None)
        setattr_(self, "compression_type", compression_type)
        setattr_(self, "subscription_id", subscription_id)
        setattr_(self, "received_at_ms", received_at_ms)

    @classmethod
    def _accepted(
        cls,
        id16: bytes,
        terminating: bool,
        data: bytes,
        client_info: ClientInfo,
        node_id: int,
        compression_type: int,
        subscription_id: int,
        received_at_ms: int,
    ) -> TelemetryPayload:
        """The payload of a push the broker accepted (``id16``: its 16-byte instance id, checked by the
        decoder), made on the request path for every push: no checks, and the labels built on first access
        (``client_info.labels(node_id, id16)``)."""
        self = _new_payload(cls)
        _set_id16(self, id16)
        _set_uuid(self, None)
        _set_terminating(self, terminating)
        _set_content_type(self, "OTLP")
        _set_data(self, data)
        _set_labels(self, None)
        _set_label_source(self, (client_info, node_id))
        _set_compression_type(self, compression_type)
        _set_subscription_id(self, subscription_id)
        _set_received_at_ms(self, received_at_ms)
        return self

    @property
    def labels(self) -> dict[str, str]:
        labels = self._labels
        if labels is None:
            assert self._label_source is not None  # (one of the two is always set)
            client_info, node_id = self._label_source
            labels = client_info.labels(node_id, self.client_instance_id_bytes)
            object.__setattr__(self, "_labels", labels)
        return labels

    @property
    def client_instance_id(self) -> uuid.UUID:
        u = self._uuid
        if u is None:
            u = uuid.UUID(bytes=self.client_instance_id_bytes)
            object.__setattr__(self, "_uuid", u)
        return u

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"TelemetryPayload is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"TelemetryPayload is immutable: cannot set {name!r}")

    def _astuple(self) -> tuple[Any, ...]:
        return (self.client_instance_id_bytes, *(getattr(self, f) for f in self._FIELDS[1:]))

    def __eq__(self, other: object) -> bool:
        if type(other) is not TelemetryPayload:
            return NotImplemented
        return self._astuple() == other._astuple()

    def __hash__(self) -> int:
        return hash(
            (
                self.client_instance_id_bytes,
                self.terminating,
                self.content_type,
                self.data,
                self.compression_type,
                self.subscription_id,
                self.received_at_ms,
            )
        )

    def __repr__(self) -> str:
        parts = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._FIELDS)
        return f"TelemetryPayload({parts})"

    def __reduce__(self) -> tuple[type[TelemetryPayload], tuple[Any, ...]]:
        return (TelemetryPayload, (self.client_instance_id_bytes, *(getattr(self, f) for f in self._FIELDS[1:])))


# TelemetryPayload._accepted sets the slots through their descriptors (not the refusing __setattr__)
_new_payload = object.__new__
(
    _set_id16,
    _set_uuid,
    _set_terminating,
    _set_content_type,
    _set_data,
    _set_labels,
    _set_label_source,
    _set_compression_type,
    _set_subscription_id,
    _set_received_at_ms,
) = (
    TelemetryPayload.__dict__[name].__set__
    for name in (
        "client_instance_id_bytes",
        "_uuid",
        "terminating",
        "content_type",
        "data",
        "_labels",
        "_label_source",
        "compression_type",
        "subscription_id",
        "received_at_ms",
    )
)


@dataclass(frozen=True)
class ClientSubscription:
    """What the endpoint told a client in its last successful GetTelemetrySubscriptions response: the
    subscription its pushes are held to (requested metric prefixes, push interval, temporality, the
    compression types it may use)."""

    subscription_id: int
    requested_metrics: tuple[str, ...]
    push_interval_ms: int
    delta_temporality: bool
    accepted_compression_types: tuple[int, ...]
    telemetry_max_bytes: int | None = None


@dataclass(frozen=True)
class ReceiverContext:
    """What a receiver knows about the request besides the payload (Kafka's AuthorizableRequestContext).

    ``subscription`` is what the endpoint last told this client instance (:class:`ClientSubscription`)
    when the broker knows it; it is set for the observers' ``push_completed`` and ``instance_closed``.
    ``push_interval_ms`` is the instance's push interval (KIP-1217's context) and ``expiry_ms`` how long
    the broker keeps the instance without a request, ``max(cache_expiry_ms, 3 × push interval)`` (the
    instance table's rule): a receiver keeping per-client state drops it after as long. Both are None
    when the broker does not know them."""

    client_info: ClientInfo
    node_id: int
    push_interval_ms: int | None = None
    subscription: ClientSubscription | None = None
    expiry_ms: int | None = None


class TelemetryReceiver(Protocol):
    """Kafka's ``ClientTelemetryReceiver``: called for every accepted non-empty push. It must not block
    the caller (hand work to a queue, see :class:`BackgroundReceiver`); an exception it raises makes the
    broker answer INVALID_RECORD.

    A receiver may also define ``push_completed(context, request, error_code, received_at_ms)``
    (:class:`PushObserver`): the broker then calls it once for *every* PushTelemetry request, accepted or
    not, after the answer is decided (the Parquet recorder records rejected pushes this way). An exception
    there is logged and counted, never changes the answer. A receiver with
    ``instance_closed(context, client_instance_id, at_ms, reason)`` (:class:`InstanceCloseObserver`) also hears
    when the connection an instance used closes. A receiver whose ``export_metrics`` does nothing (it records
    through ``push_completed``) may say so with ``takes_payloads = False``: the broker then builds no payload for
    it. One with ``export_many(items)`` takes the accepted pushes of one read at once (``(context, payload)``
    pairs, in order), instead of one ``export_metrics`` call each; one with ``export_batch(batch)`` takes them as
    columns (an :class:`AcceptedBatch`: no payload, context or labels made per push), before ``export_many``.
    The broker hands such a receiver every accepted push this way, also those it decides one at a time
    (``handle``, ``deliver``: a batch of one), so it has one path in."""

    def export_metrics(self, context: ReceiverContext, payload: TelemetryPayload) -> None: ...


class PushObserver(Protocol):
    """The optional second hook of a receiver: every PushTelemetry request with the error code it was
    answered with (0 for an accepted push). ``request`` is the decoded
    :class:`~kip714.PushTelemetryRequest` (its ``metrics`` view is only valid during the call)."""

    def push_completed(self, context: ReceiverContext, request: Any, error_code: int, received_at_ms: int) -> None: ...


@dataclass(slots=True)
class PushBatch:
    """The PushTelemetry requests of one read that the endpoint's request loop decided, as columns (one sequence
    per field, one entry per push, in request order): what :class:`PushBatchObserver` receives instead of one
    ``push_completed`` call per push. ``payloads`` are the metrics bytes as received (compressed);
    ``subscriptions`` what the endpoint last told each instance (None where it does not know); all pushes of a
    batch came on one connection to ``node_id`` and were received at ``received_at_ms``.

    The request loop packs the columns a store takes whole: ``subscription_ids`` and ``error_codes`` are
    ``array.array`` s and ``payloads`` a :class:`~kip714._instances.PackedBytes` (one buffer and its offsets).
    Each reads as a sequence of ``int`` or ``bytes``; lists do as well."""

    received_at_ms: int
    node_id: int
    client_instance_ids: list[bytes]
    client_infos: list[ClientInfo]
    subscriptions: list[ClientSubscription | None]
    subscription_ids: Sequence[int]
    terminating: list[bool]
    compression_types: list[int]
    error_codes: Sequence[int]
    payloads: Sequence[bytes]


@dataclass(slots=True)
class AcceptedBatch:
    """The accepted non-empty pushes of one read that the endpoint's request loop decided, as columns (one list
    per field, one entry per push, in request order): what a receiver with ``export_batch`` receives instead of
    a ``(context, payload)`` pair per push. Each push's fields are its :class:`TelemetryPayload`'s (``payloads``:
    its ``data``; its ``labels`` are ``client_infos[k].labels(node_id, client_instance_ids[k])``, left to the
    receiver to make when it needs them) and its context's (``push_intervals``, ``expiries``: the
    :class:`ReceiverContext`'s ``push_interval_ms`` and ``expiry_ms``); all of them came on one connection to
    ``node_id`` and were received at ``received_at_ms``."""

    received_at_ms: int
    node_id: int
    client_instance_ids: list[bytes]
    client_infos: list[ClientInfo]
    terminating: list[bool]
    payloads: list[bytes]
    compression_types: list[int]
    subscription_ids: list[int]
    push_intervals: list[int | None]
    expiries: list[int | None]


class PushBatchObserver(Protocol):
    """A :class:`PushObserver` that also takes the pushes of one read at once (the Parquet recorder): the broker
    then calls ``pushes_completed`` with a :class:`PushBatch` instead of ``push_completed`` per push."""

    def pushes_completed(self, batch: PushBatch) -> None: ...


class InstanceCloseObserver(Protocol):
    """An optional third hook of a receiver: the client connection an instance used has closed
    (``client_instance_id`` is a :class:`uuid.UUID`, ``at_ms`` the broker clock, ``reason`` "client" when
    the peer closed it, "endpoint" when the endpoint did: shutdown, idle timeout, protocol error). Called
    once for each instance seen on that connection, whether or not the broker still holds it; it tells a
    client that left without a terminating push from one still running. An exception there is logged and
    counted."""

    def instance_closed(
        self, context: ReceiverContext, client_instance_id: uuid.UUID, at_ms: int, reason: str
    ) -> None: ...


class CallbackReceiver:
    """A receiver around a plain function ``fn(payload)`` called for every accepted non-empty push."""

    def __init__(self, fn: Callable[[TelemetryPayload], Any]) -> None:
        self.fn = fn

    def export_metrics(self, context: ReceiverContext, payload: TelemetryPayload) -> None:
        self.fn(payload)


class BackgroundReceiver(BoundedQueueReceiver):
    """Runs a slow receiver on a worker thread behind a bounded queue, so ``export_metrics`` never blocks.

    The full-queue policy of :class:`~kip714.broker.bounded_queue.BoundedQueueReceiver`: a payload that
    finds the queue full is dropped and counted (``payloads_dropped["queue-full"]``, also ``dropped``),
    logged once per episode, and the push is still answered as accepted (a refused push would make the
    client stop pushing for good). A payload the wrapped receiver raised on is logged and counted as
    ``receiver-error`` (also ``failed``): nothing is lost silently."""

    queue_name = "receiver"
    dropped_metric = 'BackgroundReceiver.payloads_dropped["queue-full"]'
    log = log

    def __init__(self, receiver: TelemetryReceiver, max_queue: int = 10000, name: str = "kip714-receiver") -> None:
        self.receiver = receiver
        super().__init__(max_queue=max_queue, batch=1, thread_name=name)

    def _process(self, items: list[tuple[ReceiverContext, TelemetryPayload]]) -> None:
        for context, payload in items:
            try:
                self.receiver.export_metrics(context, payload)
            except Exception:  # a failing background receiver must not kill the worker
                log.exception("telemetry receiver failed")
                self._drop("receiver-error")

    @property
    def dropped(self) -> int:
        """Payloads dropped for a full queue."""
        return self.payloads_dropped.get("queue-full", 0)

    @property
    def failed(self) -> int:
        """Payloads the wrapped receiver raised on."""
        return self.payloads_dropped.get("receiver-error", 0)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued so far was exported (True) or ``timeout`` seconds passed."""
        return super().flush(timeout)
