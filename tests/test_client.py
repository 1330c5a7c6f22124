"""The client half: compression choice, and the Java client's telemetry state machine on a fake clock."""

from __future__ import annotations

import gzip
import io
import itertools
import random
import struct
import uuid

import cramjam
import lz4.frame
import pytest
import zstandard

import kip714
from kip714 import (
    CompressionType,
    ErrorCode,
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from kip714.client.otlp_encode import MetricsCollector, MetricSelector
from kip714.client.telemetry import (
    ALL_COMPRESSION_TYPES,
    DEFAULT_PUSH_INTERVAL_MS,
    INT_MAX,
    LONG_MAX,
    ClientTelemetry,
    ClientTelemetryState,
    accepted_compression_types,
    choose_compression,
    compress_payload,
    error_interval_ms,
    push_jitter_ms,
    validate_interval_ms,
)
from kip714.otlp.reference import flatten

St = ClientTelemetryState
INSTANCE = uuid.UUID("5e0b1d6a-3c4f-7a21-9d3e-2b7c8a1f4e60")
SECOND = 1_000_000_000
TIMEOUT = 30_000


# --------------------------------------------------------------------------------------------------------
# compression choice


def test_choose_compression():
    assert choose_compression([4, 3, 1, 2]) is CompressionType.ZSTD
    assert choose_compression([4, 3, 1, 2], payload_len=10) is CompressionType.ZSTD
    assert choose_compression([]) is CompressionType.NONE
    assert choose_compression(None) is CompressionType.NONE
    assert choose_compression([4, 3], payload_len=0) is CompressionType.NONE  # empty payload
    assert choose_compression([9, -1, 100, 3, 4]) is CompressionType.LZ4  # unknown ids skipped
    assert choose_compression([9, -1]) is CompressionType.NONE
    assert choose_compression([0, 1]) is CompressionType.NONE  # NONE kept when listed (Java test vector)
    assert choose_compression([4, 3, 1, 2], supported=[1, 2]) is CompressionType.GZIP
    assert choose_compression([4], supported=[0, 1, 2, 3]) is CompressionType.NONE
    assert accepted_compression_types([1, 3, 2, 4, 0, -1]) == (1, 3, 2, 4, 0)  # ClientTelemetryUtilsTest: 5 types
    assert tuple(CompressionType) == ALL_COMPRESSION_TYPES


PAYLOAD = (b"\x0a\x00" + bytes(range(256))) * 300  # ~77 KB: several snappy chunks and lz4 blocks


def _xerial_chunks(data: bytes) -> list[bytes]:
    assert data[:8] == b"\x82SNAPPY\x00"
    assert struct.unpack(">ii", data[8:16]) == (1, 1)
    pos, chunks = 16, []
    while pos < len(data):
        (n,) = struct.unpack(">i", data[pos : pos + 4])
        chunks.append(data[pos + 4 : pos + 4 + n])
        pos += 4 + n
    assert pos == len(data)
    return chunks


@pytest.mark.parametrize("ct", list(CompressionType))
def test_compressed_output_is_readable_by_independent_codecs(ct):
    got_type, data = compress_payload(PAYLOAD, [int(ct)])
    assert got_type is ct
    if ct is CompressionType.NONE:
        out = data
    elif ct is CompressionType.GZIP:
        assert data[:3] == b"\x1f\x8b\x08"
        out = gzip.decompress(data)
    elif ct is CompressionType.SNAPPY:
        chunks = _xerial_chunks(data)
        assert len(chunks) >= 2  # 32 KiB blocks
        out = b"".join(bytes(cramjam.snappy.decompress_raw(c)) for c in chunks)
    elif ct is CompressionType.LZ4:
        assert data[:4] == bytes.fromhex("04224d18") and data[4] == 0x60 and data[5] == 0x40
        assert data[-4:] == b"\x00\x00\x00\x00"
        out = lz4.frame.decompress(data)
    else:
        assert data[:4] == bytes.fromhex("28b52ffd")
        out = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()
    assert out == PAYLOAD


def test_compression_levels():
    assert compress_payload(PAYLOAD, [2], level=9)[0] is CompressionType.SNAPPY  # an int skips level-less codecs
    ct, data = compress_payload(PAYLOAD, [4], level={CompressionType.ZSTD: 19, CompressionType.GZIP: 1})
    assert ct is CompressionType.ZSTD and zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read() == PAYLOAD
    ct, data = compress_payload(PAYLOAD, [1], level=9)
    assert ct is CompressionType.GZIP and gzip.decompress(data) == PAYLOAD
    ct, data = compress_payload(PAYLOAD, [3], level=12)  # HC
    assert ct is CompressionType.LZ4 and lz4.frame.decompress(data) == PAYLOAD
    # a level the codec does not take is the caller's configuration error (Kafka refuses it when the client is
    # configured), not a compression failure to fall back from
    for accepted, level in (([1], 99), ([3], 0), ([4], 23), ([1], {CompressionType.GZIP: -2})):
        with pytest.raises(kip714.errors.InvalidConfigError, match="level must be in"):
            compress_payload(PAYLOAD, accepted, level=level)
    with pytest.raises(kip714.errors.InvalidConfigError, match="snappy compression takes no level"):
        kip714.compress(PAYLOAD, 2, level=1)
    # a client configured with such a level is refused when it is made, not at a push (where the error had left
    # its telemetry state stuck in PUSH_IN_PROGRESS)
    with pytest.raises(kip714.errors.InvalidConfigError, match="gzip level must be in"):
        kip714.ClientTelemetry(None, compression_level=99)
    assert kip714.ClientTelemetry(None, compression_level=99, supported_compression=[0, 2]).compression_level == 99
    assert kip714.ClientTelemetry(None, compression_level={CompressionType.ZSTD: 19}).compression_level


def test_compress_empty_payload_and_fallback(monkeypatch):
    assert compress_payload(b"", [4, 3, 1, 2]) == (CompressionType.NONE, b"")
    import kip714._codec as codec

    def broken(*args, **kwargs):
        raise OSError("codec failure")

    monkeypatch.setattr(codec, "compress", broken)
    assert compress_payload(b"abc", [4]) == (CompressionType.NONE, b"abc")  # Java: IOException → NONE


# --------------------------------------------------------------------------------------------------------
# helpers of ClientTelemetryUtils


def test_error_interval_mapping():
    assert error_interval_ms(0, 1000) is None
    for code in (42, 87, 35):
        assert error_interval_ms(code, 1000) == INT_MAX
    for code in (117, 76):
        assert error_interval_ms(code, 1000) == 0
    assert error_interval_ms(118, 20000) == 20000  # ClientTelemetryUtilsTest
    assert error_interval_ms(118, -1) == 300000
    assert error_interval_ms(89, 20000) == 20000 and error_interval_ms(89, -1) == 300000
    for code in (-1, 2, 31, 40, 44, 999):
        assert error_interval_ms(code, 1000) == INT_MAX
    assert validate_interval_ms(-1) == validate_interval_ms(0) == 300000
    assert validate_interval_ms(INT_MAX) == INT_MAX and validate_interval_ms(1) == 1


class FixedRandom(random.Random):
    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


def test_jitter_bounds_and_rounding():
    rng = random.Random(714)
    interval = 10_000
    draws = [push_jitter_ms(interval, rng) for _ in range(20_000)]
    # factor in [0.5, 1.5); Math.round of a product just under 15000 can give 15000 itself
    assert all(5_000 <= d <= 15_000 for d in draws)
    assert sum(draws) / len(draws) / interval == pytest.approx(1.0, abs=0.01)
    assert min(draws) < 5_100 and max(draws) > 14_900  # spread over the whole range
    assert push_jitter_ms(1000, FixedRandom(0.0)) == 500
    assert push_jitter_ms(1000, FixedRandom(0.9999999999999999)) == 1500  # round(1499.99...) half-up
    assert push_jitter_ms(1, FixedRandom(0.0)) == 1  # Math.round(0.5) == 1 (Python's round gives 0)
    assert push_jitter_ms(3, FixedRandom(0.0)) == 2  # Math.round(1.5) == 2
    assert push_jitter_ms(5, FixedRandom(0.0)) == 3  # Math.round(2.5) == 3 (Python's round gives 2)
    assert push_jitter_ms(INT_MAX, FixedRandom(0.99)) == INT_MAX  # capped, no int wrap


# --------------------------------------------------------------------------------------------------------
# the state machine

ALLOWED = {
    St.SUBSCRIPTION_NEEDED: {St.SUBSCRIPTION_IN_PROGRESS, St.TERMINATED},
    St.SUBSCRIPTION_IN_PROGRESS: {St.PUSH_NEEDED, St.SUBSCRIPTION_NEEDED, St.TERMINATING_PUSH_NEEDED, St.TERMINATED},
    St.PUSH_NEEDED: {St.PUSH_IN_PROGRESS, St.SUBSCRIPTION_NEEDED, St.TERMINATING_PUSH_NEEDED, St.TERMINATED},
    St.PUSH_IN_PROGRESS: {St.PUSH_NEEDED, St.SUBSCRIPTION_NEEDED, St.TERMINATING_PUSH_NEEDED, St.TERMINATED},
    St.TERMINATING_PUSH_NEEDED: {St.TERMINATING_PUSH_IN_PROGRESS, St.TERMINATED},
    St.TERMINATING_PUSH_IN_PROGRESS: {St.TERMINATED},
    St.TERMINATED: set(),
}


@pytest.mark.parametrize(("old", "new"), list(itertools.product(St, St)), ids=lambda s: s.name)
def test_transition_table(old, new):
    assert old.can_transition_to(new) == (new in ALLOWED[old])
    t = ClientTelemetry()
    t.state = old
    ok = t._set_state(new)
    if new in ALLOWED[old]:
        assert ok and t.state is new and t.enabled
    else:  # maybeSetState: the state stays, telemetry is disabled
        assert not ok and t.state is old and not t.enabled
        assert t.stats.invalid_transitions == 1 and "invalid telemetry state transition" in t.disabled_reason


def test_transition_table_size():
    assert sum(len(v) for v in ALLOWED.values()) == 17
    assert {s: set(s.valid_next_states) for s in St} == ALLOWED


class Collector(MetricsCollector):
    """A MetricsCollector on a fake clock that also counts resets."""

    def __init__(self, **kw):
        self.clock_ns_value = 1_000 * SECOND
        super().__init__(clock_ns=lambda: self.clock_ns_value, **kw)
        self.resets = 0

    def reset(self):
        self.resets += 1
        super().reset()


def get_response(
    error=0,
    *,
    instance=INSTANCE,
    interval=10_000,
    metrics=("*",),
    delta=True,
    accepted=(4, 3, 1, 2),
    sub_id=24301,
    max_bytes=1_048_576,
    throttle=0,
):
    return GetTelemetrySubscriptionsResponse(
        throttle_time_ms=throttle,
        error_code=error,
        client_instance_id=instance,
        subscription_id=sub_id,
        accepted_compression_types=list(accepted),
        push_interval_ms=interval,
        telemetry_max_bytes=max_bytes,
        delta_temporality=delta,
        requested_metrics=list(metrics),
    )


def new_client(**kw):
    collector = kw.pop("collector", None)
    if collector is None:
        collector = Collector()
        collector.counter("org.apache.kafka.producer.connection.creation.total").add(1)
        collector.gauge("org.apache.kafka.producer.record.queue.time.max").set(3)
    return ClientTelemetry(collector, rng=kw.pop("rng", random.Random(1)), **kw)


def subscribed(now=1_000, **resp):
    """A client that has sent its first Get and handled a successful response at ``now``."""
    t = new_client()
    assert isinstance(t.create_request(now), GetTelemetrySubscriptionsRequest)
    t.handle_response(get_response(**resp), now)
    return t


def test_initial_state():
    t = ClientTelemetry()
    assert t.state is St.SUBSCRIPTION_NEEDED and t.enabled and t.subscription is None
    assert t.last_request_ms == 0 and t.interval_ms == 0 and t.client_instance_id is None
    assert t.time_to_next_update(TIMEOUT, 12345) == 0  # the first Get goes out at once


def test_full_cycle():
    t = new_client()
    req = t.create_request(1_000)
    assert isinstance(req, GetTelemetrySubscriptionsRequest) and req.client_instance_id == uuid.UUID(int=0)
    assert t.state is St.SUBSCRIPTION_IN_PROGRESS
    assert t.time_to_next_update(TIMEOUT, 1_000) == TIMEOUT
    assert t.create_request(1_000) is None  # in flight

    t.handle_response(get_response(interval=10_000), 1_500)
    assert t.state is St.PUSH_NEEDED and t.client_instance_id == INSTANCE
    sub = t.subscription
    assert sub.subscription_id == 24301 and sub.push_interval_ms == 10_000 and sub.delta_temporality
    assert sub.accepted_compression_types == (4, 3, 1, 2) and sub.selector is MetricSelector.ALL
    assert 5_000 <= t.interval_ms < 15_000  # jittered first push
    assert t.last_request_ms == 1_500
    due = 1_500 + t.interval_ms
    assert t.time_to_next_update(TIMEOUT, 1_500) == t.interval_ms
    assert t.create_request(due - 1) is None and t.state is St.PUSH_NEEDED

    push = t.create_request(due)
    assert isinstance(push, PushTelemetryRequest) and t.state is St.PUSH_IN_PROGRESS
    assert push.client_instance_id == INSTANCE and push.subscription_id == 24301 and not push.terminating
    assert push.compression_type == CompressionType.ZSTD
    raw = kip714._codec.decompress(bytes(push.metrics), 4, 1 << 20)
    rows = {r["metric"]: r for r in flatten(raw)}
    assert rows["org.apache.kafka.producer.connection.creation.total"]["temporality"] == "delta"
    assert rows["org.apache.kafka.producer.record.queue.time.max"]["value_int"] == 3
    # the request encodes and decodes as a Kafka frame
    frame = kip714.encode_request(push, 7, "producer-1")
    back = kip714.decode_request(frame[4:])
    assert back.body.client_instance_id == INSTANCE and bytes(back.body.metrics) == bytes(push.metrics)

    t.handle_response(PushTelemetryResponse(), due + 5)
    assert t.state is St.PUSH_NEEDED and t.interval_ms == 10_000 and t.last_request_ms == due + 5  # no jitter
    assert t.time_to_next_update(TIMEOUT, due + 5) == 10_000
    assert t.stats.get_requests == 1 and t.stats.push_requests == 1 and t.stats.by_compression == {"ZSTD": 1}
    assert t.stats.bytes_pushed == len(push.metrics) and t.stats.uncompressed_bytes_pushed == len(raw)


def test_get_success_details():
    t = subscribed(interval=0)
    assert t.subscription.push_interval_ms == DEFAULT_PUSH_INTERVAL_MS  # <= 0 → 300000
    assert 150_000 <= t.interval_ms < 450_000
    t = subscribed(interval=-5, accepted=(7, 2, 0))
    assert t.subscription.push_interval_ms == 300_000 and t.subscription.accepted_compression_types == (2, 0)


def test_no_requested_metrics_polls_without_jitter():
    t = subscribed(now=1_000, metrics=(), interval=20_000)
    assert t.state is St.SUBSCRIPTION_NEEDED and t.interval_ms == 20_000 and t.last_request_ms == 1_000
    assert t.subscription.selector is MetricSelector.NONE
    assert t.create_request(20_999) is None
    req = t.create_request(21_000)
    assert isinstance(req, GetTelemetrySubscriptionsRequest) and req.client_instance_id == INSTANCE
    assert t.stats.push_requests == 0


def test_prefix_selector_and_empty_payload():
    t = subscribed(metrics=("org.apache.kafka.consumer.",))
    push = t.create_request(10**9)
    # nothing matches: an empty payload, sent uncompressed
    assert bytes(push.metrics) == b"" and push.compression_type == CompressionType.NONE
    t.handle_response(PushTelemetryResponse(), 10**9)
    t2 = subscribed(metrics=("org.apache.kafka.producer.record",), accepted=())
    push = t2.create_request(10**9)
    assert push.compression_type == CompressionType.NONE
    assert [r["metric"] for r in flatten(bytes(push.metrics))] == ["org.apache.kafka.producer.record.queue.time.max"]


def test_zero_instance_id_disables():
    t = new_client()
    t.create_request(0)
    t.handle_response(get_response(instance=uuid.UUID(int=0)), 5)
    assert not t.enabled and "ClientInstanceId" in t.disabled_reason
    assert t.time_to_next_update(TIMEOUT, 10) == INT_MAX
    assert t.create_request(10**9) is None


def test_delta_temporality_change_resets_the_collector():
    t = subscribed(delta=True)
    assert t.collector.resets == 0  # first subscription: nothing to reset
    t.create_request(10**6)
    t.handle_response(PushTelemetryResponse(error_code=ErrorCode.UNKNOWN_SUBSCRIPTION_ID), 10**6)
    t.create_request(10**6)
    t.handle_response(get_response(delta=True), 10**6)
    assert t.collector.resets == 0  # unchanged temporality
    t.create_request(10**7)
    t.handle_response(PushTelemetryResponse(error_code=ErrorCode.UNKNOWN_SUBSCRIPTION_ID), 10**7)
    t.create_request(10**7)
    t.handle_response(get_response(delta=False), 10**7)
    assert t.collector.resets == 1 and not t.subscription.delta_temporality
    push = t.create_request(10**8)
    rows = {r["metric"]: r for r in flatten(kip714._codec.decompress(bytes(push.metrics), 4, 1 << 20))}
    assert rows["org.apache.kafka.producer.connection.creation.total"]["temporality"] == "cumulative"


# error actions, for both responses, on a fake clock ------------------------------------------------------

DISABLING = [
    ErrorCode.INVALID_REQUEST,
    ErrorCode.INVALID_RECORD,
    ErrorCode.UNSUPPORTED_VERSION,
    ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.CORRUPT_MESSAGE,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ErrorCode.INVALID_CONFIG,
    12345,
]


@pytest.mark.parametrize("code", DISABLING, ids=str)
def test_get_error_disables(code):
    t = new_client()
    t.create_request(100)
    t.handle_response(get_response(error=int(code)), 200)
    assert t.state is St.SUBSCRIPTION_NEEDED and not t.enabled
    assert t.interval_ms == INT_MAX and t.last_request_ms == 200
    assert t.time_to_next_update(TIMEOUT, 10**12) == INT_MAX
    assert t.create_request(10**12) is None
    assert t.stats.get_errors == 1 and t.stats.last_error_code == int(code)


@pytest.mark.parametrize("code", DISABLING, ids=str)
def test_push_error_disables(code):
    t = subscribed()
    t.create_request(10**6)
    t.handle_response(PushTelemetryResponse(error_code=int(code)), 10**6 + 1)
    assert t.state is St.SUBSCRIPTION_NEEDED and not t.enabled
    assert t.time_to_next_update(TIMEOUT, 10**12) == INT_MAX
    assert t.stats.push_errors == 1


@pytest.mark.parametrize("code", [ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE])
def test_errors_that_resubscribe_at_once(code):
    t = subscribed()
    t.create_request(10**6)
    t.handle_response(PushTelemetryResponse(error_code=int(code)), 10**6 + 1)
    assert t.state is St.SUBSCRIPTION_NEEDED and t.enabled and t.interval_ms == 0
    assert t.time_to_next_update(TIMEOUT, 10**6 + 1) == 0
    req = t.create_request(10**6 + 1)
    assert isinstance(req, GetTelemetrySubscriptionsRequest) and req.client_instance_id == INSTANCE
    # the same on a Get response
    t.handle_response(get_response(error=int(code)), 10**6 + 2)
    assert t.state is St.SUBSCRIPTION_NEEDED and t.interval_ms == 0 and t.enabled


@pytest.mark.parametrize("code", [ErrorCode.TELEMETRY_TOO_LARGE, ErrorCode.THROTTLING_QUOTA_EXCEEDED])
def test_errors_that_wait_an_interval_then_resubscribe(code):
    t = subscribed(interval=20_000)
    t.create_request(10**6)
    t.handle_response(PushTelemetryResponse(error_code=int(code)), 10**6)
    assert t.state is St.SUBSCRIPTION_NEEDED and t.enabled and t.interval_ms == 20_000
    assert t.time_to_next_update(TIMEOUT, 10**6 + 5_000) == 15_000
    assert t.create_request(10**6 + 19_999) is None
    assert isinstance(t.create_request(10**6 + 20_000), GetTelemetrySubscriptionsRequest)  # a Get, not a re-push
    # a Get error keeps the old subscription's interval
    t.handle_response(get_response(error=int(code)), 10**6 + 20_000)
    assert t.interval_ms == 20_000
    # without any subscription: 300000
    fresh = new_client()
    fresh.create_request(0)
    fresh.handle_response(get_response(error=int(code)), 50)
    assert fresh.interval_ms == 300_000 and fresh.last_request_ms == 50
    assert fresh.time_to_next_update(TIMEOUT, 50) == 300_000


def test_jitter_on_every_subscription_that_leads_to_push():
    rng = random.Random(3)
    t = ClientTelemetry(Collector(), rng=rng)
    intervals = []
    now = 0
    for _ in range(2000):
        assert isinstance(t.create_request(now), GetTelemetrySubscriptionsRequest)
        t.handle_response(get_response(interval=1_000), now)
        intervals.append(t.interval_ms)
        now += t.interval_ms
        t.create_request(now)
        t.handle_response(PushTelemetryResponse(error_code=ErrorCode.UNKNOWN_SUBSCRIPTION_ID), now)
    assert all(500 <= i <= 1500 for i in intervals)  # round() of [500, 1500) can reach 1500
    assert sum(intervals) / len(intervals) == pytest.approx(1000, rel=0.03)
    assert len(set(intervals)) > 300


def test_throttle_time_is_recorded_only():
    t = subscribed(throttle=2000)
    assert t.stats.last_throttle_time_ms == 2000 and t.state is St.PUSH_NEEDED


# transport failures ---------------------------------------------------------------------------------------


def test_unsupported_version_waits_then_resubscribes():
    t = new_client()
    t.create_request(100)
    t.handle_failed_request(200, kip714.errors.UnsupportedVersionError("no key 71"))
    assert t.state is St.SUBSCRIPTION_NEEDED and t.enabled
    assert t.interval_ms == 300_000 and t.last_request_ms == 200
    assert t.time_to_next_update(TIMEOUT, 200) == 300_000
    assert isinstance(t.create_request(300_200), GetTelemetrySubscriptionsRequest)
    # also for a push
    t.handle_response(get_response(), 300_200)
    t.create_request(10**7)
    t.handle_failed_request(10**7, kip714.errors.UnsupportedVersionError())
    assert t.state is St.SUBSCRIPTION_NEEDED and t.enabled and t.interval_ms == 300_000


@pytest.mark.parametrize("exc", [None, TimeoutError("request timed out"), ConnectionResetError()])
def test_disconnect_or_timeout_disables_permanently(exc):
    t = subscribed()
    t.create_request(10**6)
    t.handle_failed_request(10**6, exc)
    assert t.state is St.SUBSCRIPTION_NEEDED and not t.enabled
    assert t.time_to_next_update(TIMEOUT, 10**12) == INT_MAX
    assert t.stats.failed_requests == 1


def test_disconnect_backoff_option():
    t = new_client(disconnect_backoff_ms=5_000)
    t.create_request(0)
    t.handle_failed_request(10, None)
    assert t.enabled and t.state is St.SUBSCRIPTION_NEEDED and t.time_to_next_update(TIMEOUT, 10) == 5_000


def test_failure_outside_in_progress_disables():
    t = subscribed()  # PUSH_NEEDED: nothing in flight
    t.handle_failed_request(10**6, kip714.errors.UnsupportedVersionError())
    assert not t.enabled and t.state is St.PUSH_NEEDED


# close ----------------------------------------------------------------------------------------------------


def test_initiate_close_no_action_cases():
    t = new_client()
    assert not t.initiate_close(0) and t.state is St.SUBSCRIPTION_NEEDED  # last_request_ms == 0
    t.create_request(0)
    assert not t.initiate_close(0) and t.state is St.SUBSCRIPTION_IN_PROGRESS  # still 0 while the first Get flies
    t.handle_response(get_response(metrics=()), 100)  # NO_METRICS → SUBSCRIPTION_NEEDED
    assert not t.initiate_close(200) and t.state is St.SUBSCRIPTION_NEEDED
    t.close()
    assert t.state is St.TERMINATED and t.enabled


def test_terminating_push_sequence():
    t = subscribed(now=1_000)
    due = 1_000 + t.interval_ms
    t.create_request(due)
    t.handle_response(PushTelemetryResponse(), due)
    assert t.initiate_close(due + 10)
    assert t.state is St.TERMINATING_PUSH_NEEDED
    assert t.time_to_next_update(TIMEOUT, due + 10) == 0  # at once, whatever the interval
    assert not t.initiate_close(due + 11)  # already terminating
    push = t.create_request(due + 10)
    assert isinstance(push, PushTelemetryRequest) and push.terminating
    assert push.client_instance_id == INSTANCE and push.compression_type == CompressionType.ZSTD
    rows = flatten(kip714._codec.decompress(bytes(push.metrics), 4, 1 << 20))
    assert {r["metric"] for r in rows} == {
        "org.apache.kafka.producer.connection.creation.total",
        "org.apache.kafka.producer.record.queue.time.max",
    }  # a normal payload
    assert t.state is St.TERMINATING_PUSH_IN_PROGRESS
    assert t.time_to_next_update(TIMEOUT, due + 10) == LONG_MAX
    assert t.create_request(due + 10) is None
    # 3.8+: the response to the terminating push (success or error) is ignored until close()
    t.handle_response(PushTelemetryResponse(), due + 20)
    t.handle_response(PushTelemetryResponse(error_code=ErrorCode.INVALID_REQUEST), due + 21)
    assert t.state is St.TERMINATING_PUSH_IN_PROGRESS and t.enabled and t.stats.ignored_responses == 2
    t.close()
    assert t.state is St.TERMINATED and t.enabled
    assert t.time_to_next_update(TIMEOUT, due + 30) == LONG_MAX
    t.close()  # idempotent
    assert t.state is St.TERMINATED and t.enabled
    assert t.stats.terminating_pushes == 1


def test_close_while_push_in_flight_and_get_in_flight():
    t = subscribed(now=1_000)
    t.create_request(10**6)  # PUSH_IN_PROGRESS
    assert t.initiate_close(10**6) and t.state is St.TERMINATING_PUSH_NEEDED
    t.handle_response(PushTelemetryResponse(), 10**6 + 1)  # the regular push's response: ignored
    assert t.state is St.TERMINATING_PUSH_NEEDED
    assert t.create_request(10**6 + 1).terminating

    t = subscribed(now=1_000)
    t.create_request(10**6)
    t.handle_response(PushTelemetryResponse(error_code=ErrorCode.UNKNOWN_SUBSCRIPTION_ID), 10**6)
    t.create_request(10**6)  # a Get (SUBSCRIPTION_IN_PROGRESS), the old subscription is kept
    assert t.initiate_close(10**6) and t.state is St.TERMINATING_PUSH_NEEDED
    # Get responses while terminating are ignored, success or error
    t.handle_response(get_response(sub_id=1), 10**6 + 1)
    t.handle_response(get_response(error=ErrorCode.INVALID_REQUEST), 10**6 + 2)
    assert t.state is St.TERMINATING_PUSH_NEEDED and t.enabled and t.subscription.subscription_id == 24301
    push = t.create_request(10**6 + 3)
    assert push.terminating and push.subscription_id == 24301


def test_close_from_every_state():
    for s in St:
        t = ClientTelemetry()
        t.state = s
        t.close()
        assert t.state is St.TERMINATED and t.enabled


def test_disabled_client_never_sends():
    t = ClientTelemetry(Collector(), enabled=False)
    assert t.time_to_next_update(TIMEOUT, 0) == INT_MAX and t.create_request(0) is None
    assert t.disabled_reason


# odd paths ------------------------------------------------------------------------------------------------


def test_no_collector_keeps_push_needed():
    t = ClientTelemetry(None, rng=random.Random(0))
    t.create_request(0)
    t.handle_response(get_response(interval=10_000), 100)
    due = 100 + t.interval_ms
    assert t.create_request(due) is None
    assert t.state is St.PUSH_NEEDED and t.interval_ms == 10_000 and t.last_request_ms == due
    assert t.initiate_close(due)
    push = t.create_request(due)
    assert push.terminating and bytes(push.metrics) == b"" and t.state is St.TERMINATING_PUSH_IN_PROGRESS


def test_collection_error_retries_later():
    class Broken:
        def collect(self, now_ns=None, delta=True, selector=None):
            raise RuntimeError("boom")

        def reset(self):
            pass

    t = ClientTelemetry(Broken(), rng=random.Random(0))
    t.create_request(0)
    t.handle_response(get_response(interval=10_000), 100)
    due = 100 + t.interval_ms
    assert t.create_request(due) is None
    assert t.state is St.PUSH_NEEDED and t.enabled and t.last_request_ms == due and t.interval_ms == 10_000
    assert t.stats.payload_errors == 1
    assert t.initiate_close(due)
    push = t.create_request(due)  # the terminating push still goes out, empty
    assert push.terminating and bytes(push.metrics) == b"" and push.compression_type == 0


def test_compression_fallback_in_client(monkeypatch):
    import kip714._codec as codec

    monkeypatch.setattr(codec, "compress", lambda *a, **k: (_ for _ in ()).throw(OSError("x")))
    t = subscribed()
    push = t.create_request(10**6)
    assert push.compression_type == CompressionType.NONE and len(flatten(bytes(push.metrics))) == 2
    assert t.stats.compression_fallbacks == 1


def test_supported_compression_and_oversized_push():
    t = new_client(supported_compression=[0, 1])
    t.create_request(0)
    t.handle_response(get_response(accepted=(4, 3, 1, 2), max_bytes=10), 0)
    push = t.create_request(10**6)
    assert push.compression_type == CompressionType.GZIP
    assert gzip.decompress(bytes(push.metrics))
    assert t.stats.oversized_pushes == 1  # logged and sent anyway


def test_unexpected_response_in_wrong_state_disables():
    # A Get response when no Get is in flight tries SUBSCRIPTION_NEEDED → PUSH_NEEDED: invalid (Java does the same).
    t = new_client()
    t.handle_response(get_response(), 0)
    assert not t.enabled and t.state is St.SUBSCRIPTION_NEEDED
    with pytest.raises(TypeError):
        t.handle_response(object(), 0)  # type: ignore[arg-type]


def test_many_cycles_with_a_real_collector():
    clock = {"ns": 1_000 * SECOND}
    c = MetricsCollector(clock_ns=lambda: clock["ns"], layout="java")
    sent = c.counter("org.apache.kafka.producer.record.send.total")
    t = ClientTelemetry(c, rng=random.Random(9))
    now = 0
    t.create_request(now)
    t.handle_response(get_response(interval=1_000), now)
    total = 0
    for i in range(50):
        sent.add(i)
        now += t.time_to_next_update(TIMEOUT, now)
        clock["ns"] = 1_000 * SECOND + now * 1_000_000
        push = t.create_request(now)
        (row,) = flatten(kip714._codec.decompress(bytes(push.metrics), push.compression_type, 1 << 20))
        total += row["value"]
        t.handle_response(PushTelemetryResponse(), now)
    assert total == sum(range(50))  # deltas add up to the total


def test_decoded_response_wrapper_is_accepted():
    t = new_client()
    t.create_request(0)
    frame = kip714.encode_response(5, get_response(interval=1_000))
    t.handle_response(kip714.decode_response(frame[4:], 71, 0), 10)
    assert t.state is St.PUSH_NEEDED and t.client_instance_id == INSTANCE


@pytest.mark.parametrize("seed", range(6))
def test_random_driving_keeps_invariants(seed):
    rng = random.Random(seed)
    t = new_client(rng=random.Random(seed))
    now = 0
    was_disabled = False
    for _ in range(1500):
        now += rng.choice([0, 1, 100, 5_000, 400_000])
        op = rng.random()
        if op < 0.35:
            before = t.state
            req = t.create_request(now)
            if isinstance(req, PushTelemetryRequest):
                assert req.terminating == (before is St.TERMINATING_PUSH_NEEDED)
                assert t.state in (St.PUSH_IN_PROGRESS, St.TERMINATING_PUSH_IN_PROGRESS)
                assert req.client_instance_id == INSTANCE
            elif isinstance(req, GetTelemetrySubscriptionsRequest):
                assert before is St.SUBSCRIPTION_NEEDED and t.state is St.SUBSCRIPTION_IN_PROGRESS
            else:
                assert req is None
        elif op < 0.55:
            code = rng.choice([0, 0, 0, 117, 76, 118, 89, 42])
            t.handle_response(
                get_response(
                    error=code,
                    interval=rng.choice([0, 1_000, 60_000]),
                    metrics=rng.choice([("*",), (), ("org.apache.kafka.producer.",)]),
                    delta=rng.random() < 0.5,
                ),
                now,
            )
        elif op < 0.8:
            t.handle_response(PushTelemetryResponse(error_code=rng.choice([0, 0, 0, 117, 118, 89, 87])), now)
        elif op < 0.87:
            t.handle_failed_request(now, rng.choice([None, kip714.errors.UnsupportedVersionError()]))
        elif op < 0.95:
            t.initiate_close(now)
        else:
            t.close()
        assert isinstance(t.state, St)
        wait = t.time_to_next_update(TIMEOUT, now)
        assert 0 <= wait <= LONG_MAX
        if not t.enabled:
            assert wait == INT_MAX
        assert not (was_disabled and t.enabled)  # disabling is for good
        was_disabled = not t.enabled
        if t.state is St.TERMINATED:
            assert t.create_request(now + 10**9) is None
