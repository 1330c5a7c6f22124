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

One documented difference: Kafka matches subscriptions against the connection attributes captured when an
instance was first created on the broker; kip714 matches against the :class:`ClientInfo` of the request
being handled. They differ only when one instance id arrives over connections with different attributes
and a subscription selects on those attributes.
"""

from __future__ import annotations

import base64
import logging
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Protocol

from ._codec import decompress
from ._enums import CompressionType, ErrorCode
from ._instances import InstanceTable
from ._protocol import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from .errors import Kip714Error, TelemetryTooLargeError
from .subscriptions import ClientInfo, SubscriptionRegistry, kafka_uuid_string

__all__ = [
    "TelemetryBroker",
    "TelemetryPayload",
    "TelemetryReceiver",
    "ReceiverContext",
    "BackgroundReceiver",
    "DEFAULT_ACCEPTED_COMPRESSION_TYPES",
]

log = logging.getLogger("kip714.broker")

DEFAULT_ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)  # zstd, lz4, gzip, snappy: what Kafka advertises
_ZERO = uuid.UUID(int=0)
_ONE = uuid.UUID(int=1)
_ZERO_B = bytes(16)
_ONE_B = (1).to_bytes(16, "big")

_NONE = int(ErrorCode.NONE)
_INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
_INVALID_RECORD = int(ErrorCode.INVALID_RECORD)
_THROTTLED = int(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
_UNKNOWN_SUB = int(ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
_TOO_LARGE = int(ErrorCode.TELEMETRY_TOO_LARGE)


@dataclass(frozen=True)
class TelemetryPayload:
    """An accepted push, as Kafka hands it to its ClientTelemetryReceivers.

    ``data`` is the decompressed OTLP MetricsData (``content_type`` "OTLP"); ``labels`` are the KIP's
    broker-added labels."""

    client_instance_id: uuid.UUID
    terminating: bool
    content_type: str
    data: bytes
    labels: dict[str, str]
    compression_type: int
    subscription_id: int
    received_at_ms: int


@dataclass(frozen=True)
class ReceiverContext:
    """What a receiver knows about the request besides the payload (Kafka's AuthorizableRequestContext)."""

    client_info: ClientInfo
    node_id: int
    push_interval_ms: int | None = None


class TelemetryReceiver(Protocol):
    """Kafka's ``ClientTelemetryReceiver``: called for every accepted non-empty push. It must not block
    the caller (hand work to a queue, see :class:`BackgroundReceiver`); an exception it raises makes the
    broker answer INVALID_RECORD."""

    def export_metrics(self, context: ReceiverContext, payload: TelemetryPayload) -> None: ...


class BackgroundReceiver:
    """Runs a slow receiver on a worker thread behind a bounded queue, so ``export_metrics`` never blocks.

    When the queue is full the push is refused with INVALID_RECORD (as a failing receiver would be) and
    counted in ``dropped``: nothing is lost silently."""

    def __init__(self, receiver: TelemetryReceiver, max_queue: int = 10000, name: str = "kip714-receiver") -> None:
        self.receiver = receiver
        self.dropped = 0
        self.failed = 0
        self._queue: queue.Queue[tuple[ReceiverContext, TelemetryPayload] | None] = queue.Queue(max_queue)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def export_metrics(self, context: ReceiverContext, payload: TelemetryPayload) -> None:
        try:
            self._queue.put_nowait((context, payload))
        except queue.Full:
            self.dropped += 1
            raise Kip714Error("receiver queue is full", ErrorCode.INVALID_RECORD) from None

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                self.receiver.export_metrics(*item)
            except Exception:  # a failing background receiver must not kill the worker
                self.failed += 1
                log.exception("telemetry receiver failed")
            finally:
                self._queue.task_done()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued so far was exported (True) or ``timeout`` seconds passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.001)
        return True

    def close(self, timeout: float | None = 5.0) -> None:
        self.flush(timeout)
        self._queue.put(None)
        self._thread.join(timeout)


def _random_instance_id(table: InstanceTable, now_ms: int) -> uuid.UUID:
    """Kafka's ``Uuid.randomUuid()`` plus the manager's rule: never reserved, never printing with a
    leading '-', never an id already in use."""
    while True:
        u = uuid.uuid4()
        if u in (_ZERO, _ONE):
            continue
        if base64.urlsafe_b64encode(u.bytes)[:1] == b"-":
            continue
        if table.lookup(u.bytes, now_ms, 0) != 1:
            continue
        return u


class TelemetryBroker:
    """Answers GetTelemetrySubscriptions and PushTelemetry exactly as an Apache Kafka 4.1+ broker does.

    ``handle(body, client_info, now_ms=None)`` returns ``(response, payload)`` where ``payload`` is a
    :class:`TelemetryPayload` for an accepted non-empty push and ``None`` otherwise. Thread-safe: the
    instance table is native and locked; counters are updated under a lock.

    Options: ``telemetry_max_bytes`` (Kafka's ``telemetry.max.bytes``; limits the wire size and, as newest
    Kafka does, the decompressed size), ``accepted_compression_types`` (what the response advertises;
    like Kafka, any id 0–4 is still accepted on a push), ``max_instances`` (LRU capacity, Kafka's 16384),
    ``cache_expiry_ms`` (60000), ``node_id`` (the ``node_id`` label), ``clock`` (milliseconds, default
    wall clock), ``receivers`` (called for every accepted non-empty push), ``decompress_payloads`` (False
    skips decompression: the payload then carries the bytes as received and their compression type)."""

    def __init__(
        self,
        registry: SubscriptionRegistry | None = None,
        telemetry_max_bytes: int = 1048576,
        accepted_compression_types: Iterable[int] = DEFAULT_ACCEPTED_COMPRESSION_TYPES,
        max_instances: int = 16384,
        node_id: int = 0,
        clock: Callable[[], int] | None = None,
        cache_expiry_ms: int = 60000,
        receivers: Iterable[TelemetryReceiver] = (),
        decompress_payloads: bool = True,
        delta_temporality: bool = True,
    ) -> None:
        if telemetry_max_bytes < 1:
            raise ValueError("telemetry_max_bytes must be at least 1")
        self.registry = registry if registry is not None else SubscriptionRegistry()
        self.telemetry_max_bytes = int(telemetry_max_bytes)
        self.accepted_compression_types = [int(CompressionType(t)) for t in accepted_compression_types]
        self.node_id = int(node_id)
        self.clock = clock or (lambda: time.time_ns() // 1_000_000)
        self.receivers = list(receivers)
        self.decompress_payloads = decompress_payloads
        self.delta_temporality = delta_temporality
        self.instances = InstanceTable(max_instances=max_instances, cache_expiry_ms=cache_expiry_ms)
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(
            ("get-requests", "push-requests", "unknown-subscription-request", "throttle", "plugin-export",
             "plugin-error", "invalid-request", "too-large", "accepted-empty"), 0)
        self._errors: dict[int, int] = {}
        self._export_time_total = 0.0
        self._export_time_max = 0.0

    # ---------------------------------------------------------------------------------- dispatch

    def handle(self, body: Any, client_info: ClientInfo | None = None, now_ms: int | None = None):
        """Decide one request body (GetTelemetrySubscriptionsRequest or PushTelemetryRequest)."""
        if now_ms is None:
            now_ms = self.clock()
        if client_info is None:
            client_info = ClientInfo()
        if type(body) is PushTelemetryRequest:
            return self._push(body, client_info, now_ms)
        if type(body) is GetTelemetrySubscriptionsRequest:
            return self._get(body, client_info, now_ms), None
        raise TypeError(f"TelemetryBroker handles telemetry request bodies, not {type(body).__name__}")

    def _instance(self, id16: bytes, instance: uuid.UUID, client_info: ClientInfo, now_ms: int):
        """Kafka's clientInstance(): create, or rebuild when the subscription changed. Returns the
        resolution when (re)built, else None."""
        version = self.registry.version
        if self.instances.lookup(id16, now_ms, version) == 0:
            return None
        res = self.registry.resolve(client_info, instance)
        self.instances.create(id16, now_ms, res.version, res.subscription_id, res.push_interval_ms)
        return res

    def _get(self, body: GetTelemetrySubscriptionsRequest, client_info: ClientInfo, now_ms: int):
        self._count("get-requests")
        instance = body.client_instance_id
        if instance == _ZERO:
            instance = _random_instance_id(self.instances, now_ms)
        id16 = instance.bytes
        res = self._instance(id16, instance, client_info, now_ms)
        code = self.instances.decide_get(id16, now_ms)
        if code:
            self._count("throttle")
            self._error(code)
            return GetTelemetrySubscriptionsResponse(error_code=code)
        if res is None:
            res = self.registry.resolve(client_info, instance)
        return GetTelemetrySubscriptionsResponse(
            throttle_time_ms=0, error_code=0, client_instance_id=instance, subscription_id=res.subscription_id,
            accepted_compression_types=self.accepted_compression_types, push_interval_ms=res.push_interval_ms,
            telemetry_max_bytes=self.telemetry_max_bytes, delta_temporality=self.delta_temporality,
            requested_metrics=list(res.requested_metrics))

    def _push(self, body: PushTelemetryRequest, client_info: ClientInfo, now_ms: int):
        self._count("push-requests")
        id16 = body.client_instance_id_bytes
        if id16 == _ZERO_B or id16 == _ONE_B:
            self._count("invalid-request")
            self._error(_INVALID_REQUEST)
            return PushTelemetryResponse(error_code=_INVALID_REQUEST), None
        instance = body.client_instance_id
        self._instance(id16, instance, client_info, now_ms)
        size = body.metrics_size
        code = self.instances.decide_push(id16, now_ms, body.subscription_id, body.terminating,
                                          body.compression_type, size, self.telemetry_max_bytes)
        if code:
            if code == _UNKNOWN_SUB:
                self._count("unknown-subscription-request")
            elif code == _THROTTLED:
                self._count("throttle")
            self._error(code)
            return PushTelemetryResponse(error_code=code), None
        if size == 0:
            self.instances.set_last_error(id16, _NONE)
            self._count("accepted-empty")
            return PushTelemetryResponse(), None
        payload, code = self._export(body, instance, client_info, now_ms)
        self.instances.set_last_error(id16, code)
        if code:
            self._error(code)
            return PushTelemetryResponse(error_code=code), None
        return PushTelemetryResponse(), payload

    def _export(self, body: PushTelemetryRequest, instance: uuid.UUID, client_info: ClientInfo, now_ms: int):
        started = time.perf_counter()
        ctype = body.compression_type
        try:
            if self.decompress_payloads:
                data = decompress(body.metrics, ctype, self.telemetry_max_bytes)
            else:
                data = bytes(body.metrics)
        except TelemetryTooLargeError:
            self._count("too-large")
            return None, _TOO_LARGE
        except Kip714Error:
            self._count("plugin-error")
            return None, _INVALID_RECORD
        payload = TelemetryPayload(
            client_instance_id=instance, terminating=body.terminating, content_type="OTLP", data=data,
            labels=self.labels(client_info, instance),
            compression_type=0 if self.decompress_payloads else ctype,
            subscription_id=body.subscription_id, received_at_ms=now_ms)
        if self.receivers:
            ctx = ReceiverContext(client_info, self.node_id)
            for receiver in self.receivers:
                try:
                    receiver.export_metrics(ctx, payload)
                except Exception:
                    log.warning("telemetry receiver %r failed", receiver, exc_info=True)
                    self._count("plugin-error")
                    return None, _INVALID_RECORD
        elapsed = (time.perf_counter() - started) * 1000.0
        with self._lock:
            self._counts["plugin-export"] += 1
            self._export_time_total += elapsed
            if elapsed > self._export_time_max:
                self._export_time_max = elapsed
        return payload, _NONE

    def labels(self, client_info: ClientInfo, instance: uuid.UUID | None = None) -> dict[str, str]:
        """The KIP's broker-added labels for a client."""
        instance = client_info.client_instance_id if instance is None else instance
        return {
            "client_instance_id": kafka_uuid_string(instance),
            "client_id": client_info.client_id,
            "client_software_name": client_info.client_software_name,
            "client_software_version": client_info.client_software_version,
            "client_source_address": client_info.client_source_address,
            "client_source_port": str(client_info.client_source_port),
            "principal": client_info.principal,
            "node_id": str(self.node_id),
        }

    # ----------------------------------------------------------------------------------- metrics

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def _error(self, code: int) -> None:
        with self._lock:
            self._errors[code] = self._errors.get(code, 0) + 1

    def metrics(self) -> dict[str, Any]:
        """Kafka's ``client-metrics`` group (as totals) plus kip714's own counters."""
        with self._lock:
            counts = dict(self._counts)
            exports = counts["plugin-export"]
            out: dict[str, Any] = {
                "instance-count": len(self.instances),
                "unknown-subscription-request-count": counts["unknown-subscription-request"],
                "throttle-count": counts["throttle"],
                "plugin-export-count": exports,
                "plugin-export-time-avg": self._export_time_total / exports if exports else 0.0,
                "plugin-export-time-max": self._export_time_max,
                "plugin-error-count": counts["plugin-error"],
                "get-request-count": counts["get-requests"],
                "push-request-count": counts["push-requests"],
                "errors-by-code": {ErrorCode(c).name: n for c, n in sorted(self._errors.items())},
                "instance-evictions": self.instances.evictions,
                "instance-expirations": self.instances.expirations,
            }
        return out
