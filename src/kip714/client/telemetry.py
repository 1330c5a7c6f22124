"""Client side of KIP-714: compression choice and the push state machine of Apache Kafka's Java client.

:class:`ClientTelemetry` does no I/O. A Kafka client (kafka-python, aiokafka, a custom one) drives it:

.. code-block:: python

    telemetry = ClientTelemetry(collector)            # a kip714.MetricsCollector
    ...
    # in the client's poll loop, with a connection to one broker that advertises keys 71/72:
    wait_ms = telemetry.time_to_next_update(request_timeout_ms, now_ms)
    if wait_ms == 0:
        body = telemetry.create_request(now_ms)       # GetTelemetrySubscriptionsRequest / PushTelemetryRequest
        if body is not None:
            send(kip714.encode_request(body, correlation_id, client_id))
    # when its response arrives:             telemetry.handle_response(response.body, now_ms)
    # when the request failed on the wire:   telemetry.handle_failed_request(now_ms, exc)
    # on client close:                       telemetry.initiate_close(now_ms); ...send the last push...;
    #                                        telemetry.close()

``now_ms`` is the scheduling clock (any millisecond clock, monotonic is fine). The OTLP timestamps in the
payload come from the collector's own wall clock.

The behaviour is Apache Kafka 3.8+'s ``ClientTelemetryReporter`` (``DefaultClientTelemetrySender``),
``ClientTelemetryState`` and ``ClientTelemetryUtils``; the deliberate differences are listed in
:class:`ClientTelemetry`'s docstring.
"""

from __future__ import annotations

import enum
import logging
import math
import random
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._enums import CompressionType, ErrorCode
from .._protocol import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
    Response,
)
from ..errors import InvalidConfigError
from .otlp_encode import MetricSelector

__all__ = [
    "DEFAULT_PUSH_INTERVAL_MS",
    "INT_MAX",
    "LONG_MAX",
    "ALL_COMPRESSION_TYPES",
    "ClientTelemetryState",
    "ClientTelemetrySubscription",
    "ClientTelemetryStats",
    "ClientTelemetry",
    "TelemetryCollector",
    "accepted_compression_types",
    "choose_compression",
    "compress_payload",
    "error_interval_ms",
    "validate_interval_ms",
    "push_jitter_ms",
]

log = logging.getLogger(__name__)

#: ``ClientTelemetryReporter.DEFAULT_PUSH_INTERVAL_MS``: the wait after throttling/too-large without a
#: subscription, after UNSUPPORTED_VERSION on the wire, and the replacement for a push interval <= 0.
DEFAULT_PUSH_INTERVAL_MS = 300_000
#: Java's ``Integer.MAX_VALUE``: :meth:`ClientTelemetry.time_to_next_update` while telemetry is disabled.
INT_MAX = 2**31 - 1
#: Java's ``Long.MAX_VALUE``: :meth:`ClientTelemetry.time_to_next_update` once the terminating push is out.
LONG_MAX = 2**63 - 1

ALL_COMPRESSION_TYPES: tuple[CompressionType, ...] = tuple(CompressionType)

_ZERO_UUID = uuid.UUID(int=0)


def _error_name(code: int) -> str:
    try:
        return f"{ErrorCode(code).name} ({code})"
    except ValueError:
        return str(code)


# ---------------------------------------------------------------------------------------------------------
# Compression choice (ClientTelemetryUtils.preferredCompressionType / compress)


def accepted_compression_types(ids: Iterable[int] | None) -> tuple[CompressionType, ...]:
    """A response's ``AcceptedCompressionTypes`` as :class:`CompressionType` values: unknown ids are
    dropped (``CompressionType.forId`` would throw; Java logs and skips them), order and NONE are kept."""
    out = []
    for i in ids or ():
        try:
            out.append(CompressionType(int(i)))
        except (ValueError, TypeError):
            log.debug("ignoring unknown compression type id %r in AcceptedCompressionTypes", i)
    return tuple(out)


def choose_compression(
    accepted_types: Iterable[int] | None,
    supported: Iterable[int] = ALL_COMPRESSION_TYPES,
    payload_len: int | None = None,
) -> CompressionType:
    """The compression type for a push: the first id in ``accepted_types`` that is a known type and in
    ``supported``. NONE counts like any other type when the broker lists it. An empty list, a list with no
    usable type, or an empty payload (``payload_len == 0``) gives NONE."""
    if payload_len is not None and payload_len <= 0:
        return CompressionType.NONE
    usable = {int(s) for s in supported}
    for ct in accepted_compression_types(accepted_types):
        if int(ct) in usable:
            return ct
    return CompressionType.NONE


def compress_payload(
    payload: bytes,
    accepted_types: Iterable[int] | None,
    supported: Iterable[int] = ALL_COMPRESSION_TYPES,
    level: int | Mapping[int, int] | None = None,
) -> tuple[CompressionType, bytes]:
    """``(compression type, bytes to send)`` for an uncompressed ``payload``: :func:`choose_compression`,
    then ``kip714._codec.compress`` (Java's framings: gzip member, xerial snappy, LZ4 frame with independent
    blocks, zstd frame). If compressing fails the payload goes out uncompressed with NONE, as the Java
    client does after an ``IOException``. A ``level`` the chosen codec does not take is a configuration
    error, not a compression failure: it raises InvalidConfigError (Kafka refuses such a level when the
    client is configured).

    ``level``: ``None`` for each codec's default (Kafka's: gzip 6, lz4 9 = fast, zstd 3), a mapping
    compression type → level, or one int used for whichever of gzip/lz4/zstd is chosen (snappy and none
    take no level)."""
    payload = bytes(payload)
    ct = choose_compression(accepted_types, supported, len(payload))
    data = _compress_or_none(payload, ct, level)
    return (CompressionType.NONE, payload) if data is None else (ct, data)


def _level_for(level: int | Mapping[int, int] | None, ct: CompressionType) -> int | None:
    if level is None:
        return None
    if isinstance(level, Mapping):
        return level.get(ct)
    return level if ct in (CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD) else None


def _compress_or_none(payload: bytes, ct: CompressionType, level: int | Mapping[int, int] | None) -> bytes | None:
    """``payload`` compressed with ``ct`` (as is for NONE), or ``None`` if the codec failed."""
    if ct == CompressionType.NONE:
        return payload
    try:
        from .._codec import compress

        return bytes(compress(payload, int(ct), _level_for(level, ct)))
    except (InvalidConfigError, TypeError):  # the caller's configuration, not the codec
        raise
    except Exception as exc:  # any codec failure (Java: IOException): the caller sends it uncompressed
        log.info("compressing the telemetry payload with %s failed (%s); sending it uncompressed", ct.name, exc)
        return None


# ---------------------------------------------------------------------------------------------------------
# Intervals (ClientTelemetryUtils)


def validate_interval_ms(interval_ms: int) -> int:
    """A push interval from the broker: values <= 0 become :data:`DEFAULT_PUSH_INTERVAL_MS`."""
    return DEFAULT_PUSH_INTERVAL_MS if interval_ms <= 0 else int(interval_ms)


def error_interval_ms(error_code: int, current_interval_ms: int) -> int | None:
    """``maybeFetchErrorIntervalMs``: what to wait before the next GetTelemetrySubscriptions after a
    response with ``error_code`` (``None`` for NONE, i.e. no error). :data:`INT_MAX` means disable
    telemetry. ``current_interval_ms`` is the subscription's push interval, or -1 when there is none."""
    if error_code == ErrorCode.NONE:
        return None
    if error_code in (ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_RECORD, ErrorCode.UNSUPPORTED_VERSION):
        return INT_MAX
    if error_code in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE):
        return 0
    if error_code in (ErrorCode.TELEMETRY_TOO_LARGE, ErrorCode.THROTTLING_QUOTA_EXCEEDED):
        return current_interval_ms if current_interval_ms != -1 else DEFAULT_PUSH_INTERVAL_MS
    return INT_MAX


def push_jitter_ms(push_interval_ms: int, rng: random.Random) -> int:
    """Java's ``(int) Math.round(ThreadLocalRandom.current().nextDouble(0.5, 1.5) * pushIntervalMs)``:
    the factor is uniform in [0.5, 1.5), rounding is half-up. The result is capped at :data:`INT_MAX`
    (Java's int cast would wrap for intervals above about 16 days)."""
    factor = rng.random() + 0.5
    if factor >= 1.5:  # rounding of random() close to 1.0, as nextDouble(origin, bound) guards
        factor = math.nextafter(1.5, 0.0)
    return min(INT_MAX, math.floor(factor * push_interval_ms + 0.5))


# ---------------------------------------------------------------------------------------------------------
# State machine


class ClientTelemetryState(enum.Enum):
    """``org.apache.kafka.common.telemetry.ClientTelemetryState``."""

    SUBSCRIPTION_NEEDED = "SUBSCRIPTION_NEEDED"
    SUBSCRIPTION_IN_PROGRESS = "SUBSCRIPTION_IN_PROGRESS"
    PUSH_NEEDED = "PUSH_NEEDED"
    PUSH_IN_PROGRESS = "PUSH_IN_PROGRESS"
    TERMINATING_PUSH_NEEDED = "TERMINATING_PUSH_NEEDED"
    TERMINATING_PUSH_IN_PROGRESS = "TERMINATING_PUSH_IN_PROGRESS"
    TERMINATED = "TERMINATED"

    @property
    def valid_next_states(self) -> frozenset[ClientTelemetryState]:
        return _VALID_NEXT_STATES[self]

    def can_transition_to(self, new_state: ClientTelemetryState) -> bool:
        return new_state in _VALID_NEXT_STATES[self]

    @property
    def is_terminating(self) -> bool:
        """TERMINATING_PUSH_NEEDED, TERMINATING_PUSH_IN_PROGRESS or TERMINATED."""
        return self in (_S.TERMINATING_PUSH_NEEDED, _S.TERMINATING_PUSH_IN_PROGRESS, _S.TERMINATED)


_S = ClientTelemetryState
_VALID_NEXT_STATES: dict[ClientTelemetryState, frozenset[ClientTelemetryState]] = {
    _S.SUBSCRIPTION_NEEDED: frozenset({_S.SUBSCRIPTION_IN_PROGRESS, _S.TERMINATED}),
    _S.SUBSCRIPTION_IN_PROGRESS: frozenset(
        {_S.PUSH_NEEDED, _S.SUBSCRIPTION_NEEDED, _S.TERMINATING_PUSH_NEEDED, _S.TERMINATED}
    ),
    _S.PUSH_NEEDED: frozenset({_S.PUSH_IN_PROGRESS, _S.SUBSCRIPTION_NEEDED, _S.TERMINATING_PUSH_NEEDED, _S.TERMINATED}),
    _S.PUSH_IN_PROGRESS: frozenset({_S.PUSH_NEEDED, _S.SUBSCRIPTION_NEEDED, _S.TERMINATING_PUSH_NEEDED, _S.TERMINATED}),
    _S.TERMINATING_PUSH_NEEDED: frozenset({_S.TERMINATING_PUSH_IN_PROGRESS, _S.TERMINATED}),
    _S.TERMINATING_PUSH_IN_PROGRESS: frozenset({_S.TERMINATED}),
    _S.TERMINATED: frozenset(),
}


@dataclass(frozen=True)
class ClientTelemetrySubscription:
    """What a successful GetTelemetrySubscriptions response told the client."""

    client_instance_id: uuid.UUID
    subscription_id: int
    push_interval_ms: int
    telemetry_max_bytes: int
    accepted_compression_types: tuple[CompressionType, ...]
    delta_temporality: bool
    requested_metrics: tuple[str, ...]
    selector: MetricSelector


@dataclass
class ClientTelemetryStats:
    """Simple counters kept by :class:`ClientTelemetry`."""

    get_requests: int = 0
    push_requests: int = 0
    terminating_pushes: int = 0
    get_errors: int = 0
    push_errors: int = 0
    failed_requests: int = 0
    ignored_responses: int = 0
    invalid_transitions: int = 0
    compression_fallbacks: int = 0
    payload_errors: int = 0
    oversized_pushes: int = 0
    bytes_pushed: int = 0
    uncompressed_bytes_pushed: int = 0
    last_error_code: int = 0
    last_throttle_time_ms: int = 0
    by_compression: dict[str, int] = field(default_factory=dict)


class TelemetryCollector(Protocol):
    """What :class:`ClientTelemetry` needs from a collector (:class:`kip714.MetricsCollector`)."""

    def collect(
        self, now_ns: int | None = None, delta: bool = True, selector: Any = None
    ) -> bytes: ...  # pragma: no cover

    def reset(self) -> None: ...  # pragma: no cover


class ClientTelemetry:
    """The KIP-714 push state machine of Apache Kafka's Java client, without I/O.

    ``collector`` builds the payload (``collect(now_ns=None, delta=..., selector=...)`` → OTLP bytes,
    ``reset()``); without one the client subscribes but never pushes (Java's "no collector" path).
    ``supported_compression`` are the codecs this client may use; ``compression_level`` is as in
    :func:`compress_payload`. ``rng`` draws the push jitter. ``enabled=False`` is
    ``enable.metrics.push=false``. ``disconnect_backoff_ms`` changes what a disconnect or timeout does (see
    :meth:`handle_failed_request`); ``None`` keeps Java's behaviour.

    Attributes: :attr:`state`, :attr:`enabled`, :attr:`subscription` (the current
    :class:`ClientTelemetrySubscription` or ``None``), :attr:`client_instance_id`, :attr:`last_request_ms`,
    :attr:`interval_ms`, :attr:`stats`, :attr:`disabled_reason`.

    Differences from the Java client, all deliberate:

    * A successful GetTelemetrySubscriptions response with the zero ClientInstanceId makes Java throw an
      ``IllegalArgumentException`` out of the network poll, leaving telemetry stuck in
      SUBSCRIPTION_IN_PROGRESS. Here it disables telemetry (``disabled_reason`` says why); nothing is raised.
    * Java ignores a *successful* Get response that arrives while terminating but lets an *error* response
      attempt an invalid transition, which disables telemetry and so drops the terminating push. Here every
      response that arrives while terminating is ignored (as 3.8+ does for PushTelemetry responses).
    * If collecting the payload raises, Java has already moved to PUSH_IN_PROGRESS with nothing in flight,
      and telemetry stalls for good. Here the state stays PUSH_NEEDED and the push is retried after the
      push interval; a terminating push goes out with an empty payload instead (also when there is no
      collector, where Java would stay in TERMINATING_PUSH_NEEDED with a zero wait).
    * An empty payload is always sent with CompressionType NONE (librdkafka does the same; Java compresses
      it, e.g. into a 9-byte zstd frame).
    * Java decides a failed request by ``exception != null`` (it only ever passes UnsupportedVersionException);
      here the exception's type decides, so an exception object for a timeout still means "disconnect".
    * The jittered interval is capped at :data:`INT_MAX` where Java's ``(int)`` cast would wrap.
    * ``initiate_close`` never blocks (Java 3.7/3.8 block the caller until the terminating push is in
      flight); the driver sends that push.

    Kept although odd, because it is what Java does: a disconnect or timeout of an in-flight telemetry
    request disables telemetry for good (see :meth:`handle_failed_request`); a response that arrives in a
    state that does not expect it (e.g. a Get response with no Get in flight) is an invalid transition and
    disables telemetry.
    """

    def __init__(
        self,
        collector: TelemetryCollector | None = None,
        *,
        supported_compression: Iterable[int] = ALL_COMPRESSION_TYPES,
        compression_level: int | Mapping[int, int] | None = None,
        rng: random.Random | None = None,
        enabled: bool = True,
        disconnect_backoff_ms: int | None = None,
    ) -> None:
        self.collector = collector
        self.supported_compression = tuple(CompressionType(int(c)) for c in supported_compression)
        self.compression_level = compression_level
        from .._codec import compress

        for ct in self.supported_compression:  # a level a codec does not take: refused now, not at a push
            level = _level_for(compression_level, ct)
            if ct != CompressionType.NONE and level is not None:
                compress(b"", int(ct), level)
        self.rng = rng if rng is not None else random.Random()
        self.disconnect_backoff_ms = disconnect_backoff_ms
        self.state = ClientTelemetryState.SUBSCRIPTION_NEEDED
        self.enabled = bool(enabled)
        self.disabled_reason: str | None = None if enabled else "enable.metrics.push is false"
        self.subscription: ClientTelemetrySubscription | None = None
        self.last_request_ms = 0
        self.interval_ms = 0
        self.stats = ClientTelemetryStats()

    # -- state ---------------------------------------------------------------------------------------------

    @property
    def client_instance_id(self) -> uuid.UUID | None:
        """The id the broker assigned (from the last successful GetTelemetrySubscriptions), or ``None``."""
        return self.subscription.client_instance_id if self.subscription is not None else None

    def _disable(self, reason: str) -> None:
        if self.enabled:
            log.warning("disabling client telemetry: %s", reason)
        self.enabled = False
        if self.disabled_reason is None:
            self.disabled_reason = reason

    def _set_state(self, new_state: ClientTelemetryState) -> bool:
        """``maybeSetState``: an invalid transition disables telemetry and leaves the state as it was."""
        if not self.state.can_transition_to(new_state):
            self.stats.invalid_transitions += 1
            self._disable(f"invalid telemetry state transition from {self.state.name} to {new_state.name}")
            return False
        self.state = new_state
        return True

    def _update_error_result(self, interval_ms: int, now_ms: int, reason: str) -> None:
        """``updateErrorResult``: :data:`INT_MAX` disables telemetry."""
        self.interval_ms = interval_ms
        self.last_request_ms = now_ms
        if interval_ms == INT_MAX:
            self._disable(reason)

    # -- scheduling ----------------------------------------------------------------------------------------

    def time_to_next_update(self, request_timeout_ms: int, now_ms: int) -> int:
        """Milliseconds until :meth:`create_request` has something to send (``timeToNextUpdate``):
        :data:`INT_MAX` when disabled, ``request_timeout_ms`` while a request is in flight, 0 when the
        terminating push is due, :data:`LONG_MAX` after it (and once TERMINATED), otherwise what is left of
        the current interval."""
        if not self.enabled:
            return INT_MAX
        s = self.state
        if s in (_S.SUBSCRIPTION_IN_PROGRESS, _S.PUSH_IN_PROGRESS):
            return request_timeout_ms
        if s is _S.TERMINATING_PUSH_NEEDED:
            return 0
        if s in (_S.TERMINATING_PUSH_IN_PROGRESS, _S.TERMINATED):
            return LONG_MAX
        return max(0, self.last_request_ms + self.interval_ms - now_ms)

    # -- requests ------------------------------------------------------------------------------------------

    def create_request(self, now_ms: int) -> GetTelemetrySubscriptionsRequest | PushTelemetryRequest | None:
        """The request body to send now, or ``None`` when telemetry is disabled, nothing is due yet, or a
        request is already in flight. Moves the state to the matching *_IN_PROGRESS state."""
        if not self.enabled:
            return None
        s = self.state
        if s is _S.SUBSCRIPTION_NEEDED:
            if self.last_request_ms + self.interval_ms - now_ms > 0:
                return None
            return self._create_subscription_request()
        if s is _S.PUSH_NEEDED:
            if self.last_request_ms + self.interval_ms - now_ms > 0:
                return None
            return self._create_push_request(now_ms)
        if s is _S.TERMINATING_PUSH_NEEDED:
            return self._create_push_request(now_ms)
        return None

    def _create_subscription_request(self) -> GetTelemetrySubscriptionsRequest | None:
        instance_id = self.subscription.client_instance_id if self.subscription is not None else _ZERO_UUID
        if not self._set_state(_S.SUBSCRIPTION_IN_PROGRESS):
            return None
        self.stats.get_requests += 1
        return GetTelemetrySubscriptionsRequest(client_instance_id=instance_id)

    def _create_push_request(self, now_ms: int) -> PushTelemetryRequest | None:
        sub = self.subscription
        if sub is None:
            log.warning("telemetry state is %s but there is no subscription", self.state.name)
            self._set_state(_S.SUBSCRIPTION_NEEDED)  # disables when terminating, like Java
            return None
        terminating = self.state is _S.TERMINATING_PUSH_NEEDED
        if self.collector is None and not terminating:
            # Java: nothing to collect from; try again after the push interval.
            self.interval_ms = sub.push_interval_ms
            self.last_request_ms = now_ms
            return None
        try:
            payload = (
                b""
                if self.collector is None
                else bytes(self.collector.collect(now_ns=None, delta=sub.delta_temporality, selector=sub.selector))
            )
        except Exception:
            self.stats.payload_errors += 1
            log.warning("could not build the telemetry payload", exc_info=True)
            if not terminating:
                self.interval_ms = sub.push_interval_ms
                self.last_request_ms = now_ms
                return None
            payload = b""
        ctype = choose_compression(sub.accepted_compression_types, self.supported_compression, len(payload))
        data = _compress_or_none(payload, ctype, self.compression_level)  # before the state moves
        if not self._set_state(_S.TERMINATING_PUSH_IN_PROGRESS if terminating else _S.PUSH_IN_PROGRESS):
            return None
        if data is None:
            self.stats.compression_fallbacks += 1
            ctype, data = CompressionType.NONE, payload
        st = self.stats
        st.push_requests += 1
        st.terminating_pushes += terminating
        st.bytes_pushed += len(data)
        st.uncompressed_bytes_pushed += len(payload)
        st.by_compression[ctype.name] = st.by_compression.get(ctype.name, 0) + 1
        if 0 < sub.telemetry_max_bytes < len(data):
            st.oversized_pushes += 1  # sent anyway, like both real clients
            log.warning(
                "telemetry payload of %d bytes exceeds TelemetryMaxBytes %d", len(data), sub.telemetry_max_bytes
            )
        return PushTelemetryRequest(
            client_instance_id=sub.client_instance_id,
            subscription_id=sub.subscription_id,
            terminating=terminating,
            compression_type=int(ctype),
            metrics=data,
        )

    # -- responses -----------------------------------------------------------------------------------------

    def handle_response(self, response: GetTelemetrySubscriptionsResponse | PushTelemetryResponse, now_ms: int) -> None:
        """Apply a GetTelemetrySubscriptions or PushTelemetry response body (or a decoded
        :class:`kip714.wire.Response` holding one)."""
        if isinstance(response, Response):
            response = response.body
        if isinstance(response, GetTelemetrySubscriptionsResponse):
            self._handle_get_response(response, now_ms)
        elif isinstance(response, PushTelemetryResponse):
            self._handle_push_response(response, now_ms)
        else:
            raise TypeError(f"not a telemetry response: {type(response).__name__}")

    def _settled_before_success(
        self, r: GetTelemetrySubscriptionsResponse | PushTelemetryResponse, now_ms: int, api: str
    ) -> bool:
        """What both responses share before their success path: record the throttle time; ignore the
        response while terminating (3.8+, KAFKA-16759); on an error, count it, go back to
        SUBSCRIPTION_NEEDED and wait the error's interval. True when the response needs nothing more."""
        self.stats.last_throttle_time_ms = r.throttle_time_ms
        if self.state.is_terminating:
            self.stats.ignored_responses += 1
            return True
        current = self.subscription.push_interval_ms if self.subscription is not None else -1
        err_interval = error_interval_ms(r.error_code, current)
        if err_interval is None:
            return False
        if api == "PushTelemetry":
            self.stats.push_errors += 1
        else:
            self.stats.get_errors += 1
        self.stats.last_error_code = r.error_code
        if self._set_state(_S.SUBSCRIPTION_NEEDED):
            self._update_error_result(err_interval, now_ms, f"{api} error {_error_name(r.error_code)}")
        return True

    def _handle_get_response(self, r: GetTelemetrySubscriptionsResponse, now_ms: int) -> None:
        if self._settled_before_success(r, now_ms, "GetTelemetrySubscriptions"):
            return

        instance_id = r.client_instance_id
        if instance_id is None or instance_id.int == 0:
            self._disable("GetTelemetrySubscriptions response without a ClientInstanceId")
            return
        push_interval = validate_interval_ms(r.push_interval_ms)
        selector = MetricSelector.from_requested(r.requested_metrics)
        new = ClientTelemetrySubscription(
            client_instance_id=instance_id,
            subscription_id=r.subscription_id,
            push_interval_ms=push_interval,
            telemetry_max_bytes=r.telemetry_max_bytes,
            accepted_compression_types=accepted_compression_types(r.accepted_compression_types),
            delta_temporality=bool(r.delta_temporality),
            requested_metrics=tuple(r.requested_metrics),
            selector=selector,
        )
        old = self.subscription
        if old is not None and old.client_instance_id != new.client_instance_id:
            log.info(
                "client telemetry instance id changed from %s to %s", old.client_instance_id, new.client_instance_id
            )
        if old is not None and old.delta_temporality != new.delta_temporality and self.collector is not None:
            self.collector.reset()
        self.subscription = new
        # With no requested metrics, poll for a subscription again after the interval instead of pushing.
        if not self._set_state(_S.SUBSCRIPTION_NEEDED if selector.is_none else _S.PUSH_NEEDED):
            return
        if self.state is _S.PUSH_NEEDED:
            self.interval_ms = push_jitter_ms(push_interval, self.rng)
        else:
            self.interval_ms = push_interval
        self.last_request_ms = now_ms

    def _handle_push_response(self, r: PushTelemetryResponse, now_ms: int) -> None:
        if self._settled_before_success(r, now_ms, "PushTelemetry"):
            return
        current = self.subscription.push_interval_ms if self.subscription is not None else -1
        self.last_request_ms = now_ms
        self.interval_ms = current if current != -1 else DEFAULT_PUSH_INTERVAL_MS
        self._set_state(_S.PUSH_NEEDED)

    def handle_failed_request(self, now_ms: int, exc: BaseException | None = None) -> None:
        """The in-flight request failed without a response.

        * ``exc`` an UNSUPPORTED_VERSION error (e.g. :class:`kip714.errors.UnsupportedVersionError`, or
          anything with ``error_code == 35``; the broker does not support the API): wait
          :data:`DEFAULT_PUSH_INTERVAL_MS`, then subscribe again.
        * anything else, including ``None`` (a disconnect or request timeout): **disable telemetry for
          good**. That is what the Java client does (``handleFailedRequest(shouldWait = exception != null)``
          is called with a null exception on disconnects), odd as it looks. Pass ``disconnect_backoff_ms``
          to the constructor to wait that long and re-subscribe instead.

        Outside SUBSCRIPTION_IN_PROGRESS / PUSH_IN_PROGRESS (nothing was in flight, or the terminating push
        failed) telemetry is disabled, as in Java.
        """
        self.stats.failed_requests += 1
        if self.state not in (_S.SUBSCRIPTION_IN_PROGRESS, _S.PUSH_IN_PROGRESS):
            self._update_error_result(INT_MAX, now_ms, f"telemetry request failed in state {self.state.name}")
            return
        if getattr(exc, "error_code", None) == ErrorCode.UNSUPPORTED_VERSION:
            self._update_error_result(DEFAULT_PUSH_INTERVAL_MS, now_ms, "")
        elif self.disconnect_backoff_ms is not None:
            self._update_error_result(max(0, int(self.disconnect_backoff_ms)), now_ms, "")
        else:
            self._update_error_result(INT_MAX, now_ms, f"telemetry request failed without a response ({exc!r})")
        self._set_state(_S.SUBSCRIPTION_NEEDED)

    # -- close ---------------------------------------------------------------------------------------------

    def initiate_close(self, now_ms: int | None = None) -> bool:
        """Ask for the terminating push (``initiateClose``). Nothing happens if no subscription result was
        ever handled (``last_request_ms == 0``), in SUBSCRIPTION_NEEDED, or when already terminating.
        Otherwise the state becomes TERMINATING_PUSH_NEEDED and the next :meth:`create_request` is the push
        with ``terminating=True``. Returns whether that happened."""
        if self.last_request_ms == 0:
            log.debug("telemetry subscription not loaded; no terminating push")
            return False
        if self.state is _S.SUBSCRIPTION_NEEDED:
            log.debug("telemetry subscription needed; no terminating push")
            return False
        if self.state.is_terminating:
            return False
        return self._set_state(_S.TERMINATING_PUSH_NEEDED)

    def close(self) -> None:
        """Telemetry is over: the state becomes TERMINATED."""
        if self.state is not _S.TERMINATED:
            self._set_state(_S.TERMINATED)

    def __repr__(self) -> str:
        return (
            f"<ClientTelemetry {self.state.name} enabled={self.enabled} "
            f"instance={self.client_instance_id} interval_ms={self.interval_ms}>"
        )
