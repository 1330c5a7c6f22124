"""Every input limit kip714 enforces, each with a test that hostile input is refused cheaply.

| limit | where | tests |
|---|---|---|
| frame size (size prefix over ``max_frame_bytes``: refused before anything is allocated) | split_frames, server | test_split_frames_* , test_server_closes_on_oversized_prefix |
| decompressed size (bombs of every codec stop at ``max_output``, memory stays flat) | _codec.decompress, broker | test_decompression_bombs_*, test_broker_answers_a_bomb_with_too_large |
| array counts / string / bytes lengths inside frames (never more than the remaining bytes can hold) | kbuf.pxd readers | test_huge_count_or_length_is_refused_without_allocating, test_allocation_is_proportional_to_input |
| OTLP nesting depth, data point count, amplified bytes | _otlp.decode_metrics, otlp_pb | test_otlp_* |
| regex complexity of ``match`` selectors | broker.patterns.SafePattern | test_catastrophic_patterns_* , test_unsafe_constructs_are_refused, test_safe_pattern_agrees_with_re |
| instance-table capacity under a flood of invented ids | _instances | tests/test_instances.py::test_flood_of_random_ids_stays_bounded (memory flat) and test_broker_flood_* here |
| server: connections, per-connection buffers, idle / slow-loris, frame limit from ``telemetry.max.bytes`` | server.TelemetryServer | test_server_* |
| bytes held in unfinished frames across all connections (``max_buffered_bytes``; resident memory under 100 MiB prefixes and slow connections) | endpoint.connection.BufferBudget | tests/test_memory_budget.py, tests/test_proxy_robust.py::test_budget_* |
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import struct
import subprocess
import sys
import textwrap
import time
import tracemalloc
import uuid

import pytest
from server_thread import ServerThread

import kip714
from kip714 import ErrorCode, SubscriptionRegistry, TelemetryBroker
from kip714.broker.patterns import MAX_PATTERN_PROGRAM, SafePattern, UnsafePatternError
from kip714.errors import FrameTooLargeError, MalformedFrameError


def uv(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def peak_alloc(fn):
    """(result or exception, peak bytes Python allocated while fn ran)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        try:
            result = fn()
        except Exception as exc:
            result = exc
        return result, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


# ------------------------------------------------------------------------------------------ frame size


def test_split_frames_refuses_a_size_over_the_limit_before_the_bytes_arrive():
    for limit, size in (
        (1024, 1025),
        (kip714.wire.DEFAULT_MAX_FRAME_BYTES, kip714.wire.DEFAULT_MAX_FRAME_BYTES + 1),
        (kip714.wire.DEFAULT_MAX_FRAME_BYTES, 2**31 - 1),
    ):
        buf = struct.pack(">i", size) + b"\x00" * 10  # only the prefix and a few bytes have arrived
        result, peak = peak_alloc(lambda: kip714.split_frames(buf, limit))
        assert isinstance(result, FrameTooLargeError) and result.error_code == ErrorCode.INVALID_REQUEST
        assert peak < 16 * 1024


def test_split_frames_limit_is_inclusive_and_negative_sizes_are_malformed():
    frame = struct.pack(">i", 1024) + bytes(1024)
    assert kip714.split_frames(frame, 1024) == ([bytes(1024)], 1028)
    assert kip714.split_frames(frame[:500], 1024) == ([], 0)  # incomplete: wait for more
    with pytest.raises(MalformedFrameError):
        kip714.split_frames(struct.pack(">i", -5), 1024)
    with pytest.raises(ValueError):
        kip714.split_frames(frame, 2**31)


# ---------------------------------------------------------------------------------- decompression bombs

_BOMB_SCRIPT = textwrap.dedent(r"""
    import json, sys, time, zlib
    import kip714
    from kip714 import _codec

    CHUNK = bytes(1 << 20)
    LIMIT = 1 << 20

    def maxrss_mb():
        try:
            import resource
        except ImportError:  # Windows: no getrusage; the RSS test is skipped there
            return 0.0
        r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return r / (1 << 20) if sys.platform == "darwin" else r / 1024

    def gzip_bomb(mib):
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        return b"".join([c.compress(CHUNK) for _ in range(mib)] + [c.flush()])

    def zstd_bomb(mib, content_size):
        import zstandard
        c = zstandard.ZstdCompressor(level=3, write_content_size=content_size).compressobj(
            size=(mib << 20) if content_size else -1)
        return b"".join([c.compress(CHUNK) for _ in range(mib)] + [c.flush()])

    def lz4_bomb(mib, content_size):
        import lz4.frame
        c = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX4MB, content_checksum=False,
                                        block_linked=False)  # as Java and librdkafka write (Kafka refuses linked)
        head = c.begin(source_size=(mib << 20) if content_size else 0)
        return head + b"".join(c.compress(CHUNK) for _ in range(mib)) + c.flush()

    def xerial_bomb(mib):
        import cramjam
        block = bytes(cramjam.snappy.compress_raw(bytes(32 * 1024)))
        one = len(block).to_bytes(4, "big") + block
        return _codec.XERIAL_HEADER + one * (mib * 32)

    def snappy_raw_preamble():
        # uvarint length 2**32 - 1 (the largest a raw block may declare), then a few bytes
        return b"\xff\xff\xff\xff\x0f" + b"\x00" * 16

    def raw_snappy_bomb(mib):
        import cramjam
        return bytes(cramjam.snappy.compress_raw(bytes(mib << 20)))

    bombs = [
        ("gzip", 1, gzip_bomb(256)),
        ("gzip-members", 1, gzip_bomb(64) * 16),
        ("zstd-no-size", 4, zstd_bomb(256, False)),
        ("zstd-sized", 4, zstd_bomb(256, True)),
        ("zstd-declared-2^60", 4, b"\x28\xb5\x2f\xfd\xe0" + (1 << 60).to_bytes(8, "little") + b"\x01\x00\x00"),
        ("lz4-no-size", 3, lz4_bomb(256, False)),
        ("lz4-sized", 3, lz4_bomb(256, True)),
        ("snappy-xerial", 2, xerial_bomb(256)),
        ("snappy-raw-preamble", 2, snappy_raw_preamble()),
        ("snappy-raw", 2, raw_snappy_bomb(64)),
        ("none", 0, bytes(LIMIT + 1)),
    ]
    base = maxrss_mb()
    out = {"base_mb": base, "bombs": []}
    for name, ctype, data in bombs:
        started = time.perf_counter()
        try:
            kip714.decompress(data, ctype, LIMIT)
            result = "accepted"
        except kip714.Kip714Error as exc:
            result = type(exc).__name__ + ":" + exc.error_code.name
        out["bombs"].append([name, len(data), result, time.perf_counter() - started])
    out["peak_mb"] = maxrss_mb()
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def bomb_report():
    proc = subprocess.run([sys.executable, "-c", _BOMB_SCRIPT], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.integration
def test_decompression_bombs_of_every_codec_are_refused_as_too_large(bomb_report):
    for name, size, result, seconds in bomb_report["bombs"]:
        assert result == "TelemetryTooLargeError:TELEMETRY_TOO_LARGE", (name, size, result)
        assert seconds < 5, (name, seconds)
    assert {n.split("-")[0] for n, *_ in bomb_report["bombs"]} == {"gzip", "zstd", "lz4", "snappy", "none"}


_SANITIZED = "libasan" in os.environ.get("LD_PRELOAD", "") or os.environ.get("KIP714_SANITIZED") == "1"


@pytest.mark.integration
@pytest.mark.skipif(sys.platform == "win32", reason="resource.getrusage is POSIX")
@pytest.mark.skipif(_SANITIZED, reason="ASan's shadow memory and quarantine inflate RSS")
def test_decompression_bombs_do_not_make_large_allocations(bomb_report):
    # each bomb would expand to 64 MiB - 1 GiB (or declares 2**60 bytes); the limit is 1 MiB, so memory
    # may grow by a few MiB of output and codec state, never by anything near the expanded size
    grown = bomb_report["peak_mb"] - bomb_report["base_mb"]
    assert grown < 48, f"peak RSS grew by {grown:.0f} MiB while refusing bombs"


def test_broker_answers_a_bomb_with_too_large():
    import zlib

    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = b"".join([c.compress(bytes(1 << 20)) for _ in range(64)] + [c.flush()])
    clock = [1_000_000]
    b = TelemetryBroker(SubscriptionRegistry(), telemetry_max_bytes=len(bomb) + 1000, clock=lambda: clock[0])
    resp, _ = b.handle(kip714.GetTelemetrySubscriptionsRequest(None))
    push = kip714.PushTelemetryRequest(resp.client_instance_id, resp.subscription_id, False, 1, bomb)
    result, peak = peak_alloc(lambda: b.handle(push))
    r, payload = result
    assert r.error_code == ErrorCode.TELEMETRY_TOO_LARGE and payload is None
    assert peak < 8 * (len(bomb) + 1000) + (1 << 20)
    assert b.metrics()["push-results"] == {"TELEMETRY_TOO_LARGE": 1}


# ------------------------------------------------------------------------------- counts and lengths

_UUID0 = bytes(16)
_HUGE = uv(0xFFFFFFFF)  # compact count/length N+1 = 2**32 - 1
_I32MAX = struct.pack(">i", 0x7FFFFFFF)


def _gts_response_prefix():
    return struct.pack(">ih", 0, 0) + _UUID0 + struct.pack(">i", 5)


# (name, api_key, version, is_request, body) — each body declares far more than it holds
HOSTILE_BODIES = [
    ("GTS response AcceptedCompressionTypes", 71, 0, False, _gts_response_prefix() + _HUGE),
    (
        "GTS response RequestedMetrics",
        71,
        0,
        False,
        _gts_response_prefix() + b"\x01" + struct.pack(">ii?", 1, 1, True) + _HUGE,
    ),
    (
        "GTS response RequestedMetrics item length",
        71,
        0,
        False,
        _gts_response_prefix() + b"\x01" + struct.pack(">ii?", 1, 1, True) + b"\x02" + _HUGE,
    ),
    ("GTS request tagged-field count", 71, 0, True, _UUID0 + _HUGE),
    ("GTS request tagged-field size", 71, 0, True, _UUID0 + b"\x01\x00" + _HUGE),
    ("PushTelemetry Metrics length", 72, 0, True, _UUID0 + struct.pack(">ibb", 1, 0, 0) + _HUGE),
    ("ApiVersions v3 ClientSoftwareName", 18, 3, True, _HUGE),
    ("ApiVersions v0 response ApiKeys (classic)", 18, 0, False, struct.pack(">h", 0) + _I32MAX),
    ("ApiVersions v3 response ApiKeys (compact)", 18, 3, False, struct.pack(">h", 0) + _HUGE),
    (
        "ApiVersions v3 response SupportedFeatures (tag 0)",
        18,
        3,
        False,
        struct.pack(">h", 0) + b"\x01" + struct.pack(">i", 0) + b"\x01\x00\x05" + _HUGE,
    ),
    (
        "ApiVersions v3 response FinalizedFeatures (tag 2)",
        18,
        3,
        False,
        struct.pack(">h", 0) + b"\x01" + struct.pack(">i", 0) + b"\x01\x02\x05" + _HUGE,
    ),
    (
        "ApiVersions v3 response feature name",
        18,
        3,
        False,
        struct.pack(">h", 0) + b"\x01" + struct.pack(">i", 0) + b"\x01\x00\x07\x02" + _HUGE + b"\x00",
    ),
    ("Metadata v1 request Topics (classic)", 3, 1, True, _I32MAX),
    ("Metadata v1 request topic name (int16 length)", 3, 1, True, struct.pack(">ih", 1, 32767) + b"abc"),
    ("Metadata v9 request Topics (compact)", 3, 9, True, _HUGE),
    ("Metadata v12 request topic name", 3, 12, True, b"\x02" + _UUID0 + _HUGE),
    ("Metadata v0 response Brokers", 3, 0, False, _I32MAX),
    ("Metadata v9 response Brokers", 3, 9, False, struct.pack(">i", 0) + _HUGE),
    ("Metadata v9 response broker host", 3, 9, False, struct.pack(">i", 0) + b"\x02" + struct.pack(">i", 1) + _HUGE),
    ("Metadata v9 response Topics", 3, 9, False, struct.pack(">i", 0) + b"\x01\x00" + struct.pack(">i", 1) + _HUGE),
    (
        "Metadata v9 response Partitions",
        3,
        9,
        False,
        struct.pack(">i", 0)
        + b"\x01\x00"
        + struct.pack(">i", 1)
        + b"\x02"
        + struct.pack(">h", 0)
        + b"\x02t\x00"
        + _HUGE,
    ),
    (
        "Metadata v9 response ReplicaNodes",
        3,
        9,
        False,
        struct.pack(">i", 0)
        + b"\x01\x00"
        + struct.pack(">i", 1)
        + b"\x02"
        + struct.pack(">h", 0)
        + b"\x02t\x00"
        + b"\x02"
        + struct.pack(">hiii", 0, 0, 0, 0)
        + _HUGE,
    ),
    (
        "Metadata v1 response ReplicaNodes (classic)",
        3,
        1,
        False,
        struct.pack(">i", 0)
        + struct.pack(">i", 0)
        + struct.pack(">i", 1)
        + struct.pack(">hh", 0, 1)
        + b"t\x00"
        + struct.pack(">i", 1)
        + struct.pack(">hii", 0, 0, 0)
        + _I32MAX,
    ),
    # (a negative count in a *nullable* array is null in Kafka, -7 as much as -1: tests/test_nullability.py)
    ("negative classic count, non-nullable array", 3, 0, True, struct.pack(">i", -7)),
    ("varint longer than 5 bytes", 71, 0, True, _UUID0 + b"\xff\xff\xff\xff\xff\x01"),
    ("varint over 32 bits", 71, 0, True, _UUID0 + b"\xff\xff\xff\xff\x1f"),
]


@pytest.mark.parametrize("name,api_key,version,is_request,body", HOSTILE_BODIES, ids=[c[0] for c in HOSTILE_BODIES])
def test_huge_count_or_length_is_refused_without_allocating(name, api_key, version, is_request, body):
    cls = kip714.wire.message_class(api_key, is_request)
    started = time.perf_counter()
    result, peak = peak_alloc(lambda: cls.decode(body, version))
    assert isinstance(result, MalformedFrameError), (name, result)
    assert result.error_code == ErrorCode.INVALID_REQUEST
    assert peak < 16 * 1024, (name, peak)
    assert time.perf_counter() - started < 0.5


def _java_read_unsigned_varint(buf: bytes) -> int:
    """Kafka's ``ByteUtils.readUnsignedVarint`` step by step in Java ``int``/``byte`` arithmetic (the oracle):
    signed bytes, ``tmp << 28`` truncated to 32 bits, and only a negative 5th byte refused."""

    def sbyte(b):
        return b - 256 if b >= 128 else b

    it = iter(buf)
    tmp = sbyte(next(it))
    if tmp >= 0:
        return tmp
    result = tmp & 127
    for shift in (7, 14, 21):
        tmp = sbyte(next(it))
        if tmp >= 0:
            return (result | tmp << shift) & 0xFFFFFFFF
        result |= (tmp & 127) << shift
    tmp = sbyte(next(it))
    if tmp < 0:
        raise ValueError("Varint is too long, the most significant bit in the 5th byte is set")
    return (result | tmp << 28) & 0xFFFFFFFF


@pytest.mark.parametrize("fifth", [0x00, 0x01, 0x0F, 0x10, 0x1F, 0x70, 0x7F, 0x80, 0xFF])
def test_fifth_varint_byte_is_read_as_kafka_reads_it(fifth):
    # A GetTelemetrySubscriptions v0 request is the instance id and the tagged-field count. A 5-byte count
    # whose last byte carries bits above 32 is truncated by Kafka (0x10 << 28 is 0 in a Java int), so such a
    # request has no tagged fields; a 5th byte with its top bit set is "too long" for Kafka and for kip714.
    varint = b"\x80\x80\x80\x80" + bytes([fifth])
    try:
        count = _java_read_unsigned_varint(varint)
    except ValueError:
        count = None
    if count == 0:
        result = kip714.GetTelemetrySubscriptionsRequest.decode(_UUID0 + varint, 0)
        assert result.client_instance_id == uuid.UUID(int=0) and not result.unknown_tagged_fields
    else:
        # None: Kafka refuses; a non-zero count promises tagged fields that are not there
        with pytest.raises(MalformedFrameError) as info:
            kip714.GetTelemetrySubscriptionsRequest.decode(_UUID0 + varint, 0)
        assert info.value.error_code == ErrorCode.INVALID_REQUEST


def test_huge_client_id_length_in_a_request_header_is_refused():
    frame = struct.pack(">hhih", 72, 0, 1, 32767) + b"short"
    result, peak = peak_alloc(lambda: kip714.decode_request(frame))
    assert isinstance(result, MalformedFrameError) and peak < 16 * 1024


@pytest.mark.parametrize("n_missing", [1, 7])
def test_allocation_is_proportional_to_input(n_missing):
    # RequestedMetrics declares exactly as many items as the bytes left could hold (1 byte each), then
    # the body stops short: the decoder may allocate for what it has seen, never more
    n = 100_000
    body = (
        _gts_response_prefix()
        + b"\x01"
        + struct.pack(">ii?", 1, 1, True)
        + uv(n + 1)
        + b"\x01" * (n - n_missing)
        + b"\x00" * n_missing
    )
    result, peak = peak_alloc(lambda: kip714.GetTelemetrySubscriptionsResponse.decode(body))
    assert isinstance(result, MalformedFrameError)
    assert peak < 16 * len(body) + 64 * 1024, peak


# ----------------------------------------------------------------------------------------------- OTLP


def _otlp_native():
    try:
        from kip714 import _otlp
    except ImportError:
        pytest.skip("the native OTLP decoder (kip714._otlp) is not built")
    return _otlp


def _ld(field: int, payload: bytes) -> bytes:
    return uv(field << 3 | 2) + uv(len(payload)) + payload


def _nested_anyvalue(depth: int) -> bytes:
    """An AnyValue whose kvlist holds a KeyValue whose AnyValue holds a kvlist ... ``depth`` times.
    Built from the inside out as prefixes only (linear time, whatever the depth)."""
    leaf = _ld(1, b"leaf")  # AnyValue.string_value
    prefixes, inner = [], len(leaf)
    for _ in range(depth):
        kv_head = _ld(1, b"k") + uv(2 << 3 | 2) + uv(inner)  # KeyValue{key, value: ...}
        kv_len = len(kv_head) + inner
        list_head = uv(1 << 3 | 2) + uv(kv_len)  # KeyValueList.values
        list_len = len(list_head) + kv_len
        head = uv(6 << 3 | 2) + uv(list_len) + list_head + kv_head  # AnyValue.kvlist_value
        prefixes.append(head)
        inner += len(head)
    return b"".join(reversed(prefixes)) + leaf


def _metrics_data(datapoint: bytes, n_points: int = 1, name: bytes = b"m") -> bytes:
    gauge = _ld(1, datapoint) * n_points  # Gauge.data_points
    metric = _ld(1, name) + _ld(5, gauge)  # Metric{name, gauge}
    scope_metrics = _ld(2, metric)  # ScopeMetrics.metrics
    resource_metrics = _ld(2, scope_metrics)  # ResourceMetrics.scope_metrics
    return _ld(1, resource_metrics)  # MetricsData.resource_metrics


def _point_with_attribute(value: bytes) -> bytes:
    return _ld(7, _ld(1, b"a") + _ld(2, value))  # NumberDataPoint.attributes


_DEEP_SCRIPT = textwrap.dedent("""
    import sys
    from kip714 import _otlp, CorruptPayloadError
    data = bytes.fromhex(sys.stdin.read())
    try:
        _otlp.decode_metrics(data)
        print("accepted")
    except CorruptPayloadError as exc:
        print("refused", exc)
""")


@pytest.mark.integration
@pytest.mark.parametrize("depth", [50, 200, 100_000])
def test_otlp_nesting_depth_is_bounded(depth):
    _otlp_native()
    data = _metrics_data(_point_with_attribute(_nested_anyvalue(depth)))
    # in a child process: a decoder that recursed without a bound would crash the whole test run
    proc = subprocess.run(
        [sys.executable, "-c", _DEEP_SCRIPT], input=data.hex(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    from kip714.otlp import reference as otlp_pb

    try:
        otlp_pb.flatten(data)
        reference = "accepted"
    except kip714.errors.CorruptPayloadError:
        reference = "refused"
    assert proc.stdout.split()[0] == reference, (depth, proc.stdout, reference)


def test_otlp_reference_refuses_deep_nesting_cleanly():
    from kip714.otlp import reference as otlp_pb

    with pytest.raises(kip714.errors.CorruptPayloadError):
        otlp_pb.flatten(_metrics_data(_point_with_attribute(_nested_anyvalue(5_000))))


def test_otlp_repeated_data_points_are_bounded_by_max_rows():
    otlp = _otlp_native()
    empty_point = b""  # an empty NumberDataPoint: 2 bytes each on the wire
    data = _metrics_data(empty_point, n_points=50_000)
    assert otlp.decode_metrics(data).num_rows == 50_000
    with pytest.raises(kip714.errors.CorruptPayloadError):
        otlp.decode_metrics(data, max_rows=49_999)
    assert otlp.MAX_ROWS <= 10_000_000


def test_otlp_amplified_bytes_are_bounded():
    otlp = _otlp_native()
    # a 64 KiB metric name repeated onto 20000 data points would copy 1.3 GB into the table
    data = _metrics_data(b"", n_points=20_000, name=b"n" * 65536)
    with pytest.raises(kip714.errors.CorruptPayloadError):
        otlp.decode_metrics(data, max_amplified_bytes=64 << 20)
    result, peak = peak_alloc(lambda: otlp.decode_metrics(data))
    assert isinstance(result, kip714.errors.CorruptPayloadError) or peak < (1 << 30), peak


def test_otlp_packed_field_claiming_more_than_the_input_is_refused():
    otlp = _otlp_native()
    # HistogramDataPoint.bucket_counts (field 6, packed fixed64) claiming 2**31 bytes
    point = uv(6 << 3 | 2) + uv(2**31) + b"\x00" * 16
    hist = _ld(1, point)
    metric = _ld(1, b"h") + _ld(9, hist)
    data = _ld(1, _ld(2, _ld(2, metric)))
    result, peak = peak_alloc(lambda: otlp.decode_metrics(data))
    assert isinstance(result, kip714.errors.CorruptPayloadError)
    assert peak < 1 << 20


# ------------------------------------------------------------------------------------ regex complexity

CATASTROPHIC = [
    "(a+)+$",
    "(a|a)*$",
    "(a|aa)*c",
    "(a*)*b",
    "(.*a){20}",
    ".*a.*a.*a.*a.*b",
    "(\\w+\\s?)+$",
    "((a+)+)+b",
    "(x+x+)+y",
    "([a-z]+)*[0-9]",
    "(?i)(A+)+B",
]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_patterns_match_long_client_ids_in_bounded_time(pattern):
    r = SubscriptionRegistry()
    r.set("evil", {"metrics": "*", "match": f"client_id={pattern}"})
    for client_id in ("a" * 32767, "a" * 32766 + "!", "x" * 16000 + "!", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"):
        started = time.perf_counter()
        res = r.resolve(kip714.ClientInfo(uuid.uuid4(), client_id))
        elapsed = time.perf_counter() - started
        assert elapsed < 1.0, (pattern, len(client_id), elapsed)
        assert res.requested_metrics in ((), ("*",))
    # and the answers are re.fullmatch's, checked on inputs short enough for re to finish
    sp = SafePattern(pattern)
    for s in ("aaaa", "aaab", "aab!", "", "b", "ab", "xxy", "abc1", "AAB", "a a a"):
        assert (sp.fullmatch(s) is not None) == (re.fullmatch(pattern, s) is not None), (pattern, s)


def test_matching_time_is_linear_in_the_attribute_length():
    sp = SafePattern("(a|aa)*c")
    # the best of five interleaved runs each: a busy machine's pauses only ever add time, so the minimum is
    # the matcher's own cost (one paused run of the short input must not make the long one look quadratic)
    times = [float("inf"), float("inf")]
    for _ in range(5):
        for i, n in enumerate((4000, 32000)):
            started = time.perf_counter()
            assert sp.fullmatch("a" * n) is None
            times[i] = min(times[i], time.perf_counter() - started)
    assert times[1] < 8 * times[0] * 3 + 0.05, times  # ~8x the input, not 64x or 2**n


@pytest.mark.parametrize(
    "pattern,what",
    [
        ("(a)\\1", "backreferences"),
        ("(?=a)a", "lookaround"),
        ("(?!b)a", "lookaround"),
        ("(?<=a)b", "lookaround"),
        ("(?<!a)b", "lookaround"),
        ("(a)?(?(1)b|c)", "conditional"),
        (".{0,100000}", "too large"),
        ("(abcdefghij){300}", "too complex"),
    ]
    + ([("(?>a+)b", "atomic"), ("a++b", "possessive")] if sys.version_info >= (3, 11) else []),
)
def test_unsafe_constructs_are_refused_at_config_time(pattern, what):
    with pytest.raises(UnsafePatternError, match=what):
        SafePattern(pattern)
    r = SubscriptionRegistry()
    with pytest.raises(kip714.errors.InvalidConfigError, match="Illegal client matching pattern") as info:
        r.set("s", {"metrics": "*", "match": f"client_id={pattern}"})
    assert info.value.error_code == ErrorCode.INVALID_CONFIG
    assert "s" not in r


def test_every_exception_class_lives_in_errors_and_keeps_its_old_home():
    """UnsafePatternError, RewriteError and ListenerError are defined in kip714.errors, each a Kip714Error
    with the code its callers answer (INVALID_CONFIG for a pattern or a listener), and still importable from
    where they were defined before (UnsafePatternError also stays a ValueError)."""
    import kip714.errors as errors
    from kip714.endpoint import proxy, rewrite

    assert UnsafePatternError is errors.UnsafePatternError
    assert issubclass(UnsafePatternError, errors.InvalidConfigError) and issubclass(UnsafePatternError, ValueError)
    with pytest.raises(UnsafePatternError) as info:
        SafePattern("(a)\\1")
    assert info.value.error_code == ErrorCode.INVALID_CONFIG
    assert rewrite.RewriteError is errors.RewriteError and issubclass(errors.RewriteError, errors.Kip714Error)
    assert proxy.ListenerError is errors.ListenerError
    assert issubclass(errors.ListenerError, errors.RewriteError)
    assert errors.ListenerError("x").error_code == ErrorCode.INVALID_CONFIG
    defined = {
        name
        for name, obj in vars(errors).items()
        if isinstance(obj, type) and issubclass(obj, Exception) and obj.__module__ == "kip714.errors"
    }
    assert defined == set(errors.__all__)
    # and no exception class is defined anywhere else in the library (tools aside), but the two private
    # control-flow ones that never leave their module
    import ast
    import pathlib

    root = pathlib.Path(kip714.__file__).parent
    elsewhere = set()
    for path in root.rglob("*.py"):
        if (path.name == "errors.py" and path.parent == root) or "tools" in path.relative_to(root).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                (b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")).endswith(("Error", "Exception"))
                for b in node.bases
            ):
                elsewhere.add(f"{path.relative_to(root).as_posix()}:{node.name}")
    assert elsewhere == {"endpoint/proxy_connection.py:_Drop", "endpoint/rewrite.py:_Short"}


def test_program_size_cap():
    assert SafePattern(f"a{{{MAX_PATTERN_PROGRAM - 2}}}").fullmatch("a" * (MAX_PATTERN_PROGRAM - 2))
    with pytest.raises(UnsafePatternError):
        SafePattern(f"a{{{MAX_PATTERN_PROGRAM + 1}}}")


def _random_pattern(rng: random.Random, depth: int = 0) -> str:
    atoms = [
        "a",
        "b",
        ".",
        "[ab]",
        "[^a]",
        "\\d",
        "\\w",
        "\\s",
        "\\W",
        "(?i:k)",
        "(?s:.)",
        "\\b",
        "\\B",
        "^",
        "$",
        "\\A",
        "\\Z",
        "\n",
        "[a-c\\d]",
        "é",
        "K",
        "ſ",
        "ß",
        "\\.",
        "-",
    ]
    r = rng.random()
    if depth > 3 or r < 0.3:
        return rng.choice(atoms)
    if r < 0.5:
        return _random_pattern(rng, depth + 1) + _random_pattern(rng, depth + 1)
    if r < 0.6:
        return "(?:" + _random_pattern(rng, depth + 1) + "|" + _random_pattern(rng, depth + 1) + ")"
    if r < 0.75:
        return "(" + _random_pattern(rng, depth + 1) + ")" + rng.choice(["*", "+", "?", "*?", "{2}", "{0,2}", "{1,3}?"])
    return _random_pattern(rng, depth + 1) + rng.choice(["*", "+", "?", "??"])


def test_safe_pattern_agrees_with_re_fullmatch():
    rng = random.Random(714)
    alphabet = "ab\nxA1 é_Kkſsß-.:"
    checked = 0
    for _ in range(3000):
        pattern = rng.choice(["", "(?i)", "(?m)", "(?a)", "(?s)"]) + _random_pattern(rng)
        try:
            rx = re.compile(pattern)
        except re.error:
            continue
        try:
            sp = SafePattern(pattern)
        except UnsafePatternError:
            continue
        for _ in range(12):
            s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 7)))
            assert (sp.fullmatch(s) is not None) == (rx.fullmatch(s) is not None), (pattern, s)
            checked += 1
    assert checked > 20_000


def test_subscription_built_from_plain_re_patterns_is_still_safe():
    sub = kip714.broker.Subscription("s", ("*",), 1000, {"client_id": re.compile("(a+)+$")})
    started = time.perf_counter()
    assert not sub.matches(kip714.ClientInfo(client_id="a" * 30000 + "!"))
    assert time.perf_counter() - started < 1.0
    assert sub.matches(kip714.ClientInfo(client_id="aaa"))


def test_existing_pattern_semantics_are_kept():
    r = SubscriptionRegistry()
    r.set(
        "java", {"metrics": "j.", "match": "client_software_name=apache-kafka-java,client_software_version=3\\.[5-9].*"}
    )
    r.set("rd", {"metrics": "r.", "match": "client_software_name=(?i)LIBRDKAFKA"})
    r.set("port", {"metrics": "p.", "match": "client_source_port=90[0-9]{2}"})
    assert r.resolve(
        kip714.ClientInfo(client_software_name="apache-kafka-java", client_software_version="3.7.1")
    ).requested_metrics == ("j.",)
    assert (
        r.resolve(
            kip714.ClientInfo(client_software_name="apache-kafka-java", client_software_version="3.10")
        ).requested_metrics
        == ()
    )
    assert (
        r.resolve(
            kip714.ClientInfo(client_software_name="apache-kafka-java", client_software_version="4.0")
        ).requested_metrics
        == ()
    )
    assert r.resolve(kip714.ClientInfo(client_software_name="librdkafka")).requested_metrics == ("r.",)
    assert r.resolve(kip714.ClientInfo(client_source_port=9092)).requested_metrics == ("p.",)
    assert r.resolve(kip714.ClientInfo(client_source_port=909)).requested_metrics == ()


# ------------------------------------------------------------------------------- instance-table flood
# The table itself: tests/test_instances.py::test_flood_of_random_ids_stays_bounded (2 million invented
# ids through a 10 000-slot table: count, capacity and memory_bytes() stay flat). Through the broker:


def test_broker_flood_of_invented_ids_stays_bounded():
    clock = [1_000_000]
    b = TelemetryBroker(SubscriptionRegistry(), max_instances=1000, clock=lambda: clock[0])
    rng = random.Random(3)
    for i in range(5000):  # Gets with ZERO: the broker invents an id each time
        clock[0] += 1
        b.handle(kip714.GetTelemetrySubscriptionsRequest(None))
        if i == 1500:
            mem = b.instances.memory_bytes()
    for _ in range(20000):  # pushes with ids nobody was given
        clock[0] += 1
        b.handle(kip714.PushTelemetryRequest(uuid.UUID(int=rng.getrandbits(128)), 1, False, 0, b""))
    m = b.metrics()
    assert m["instance-count"] == 1000 and b.instances.capacity == 1000
    assert b.instances.memory_bytes() == mem
    assert m["instance-evictions"] == 5000 + 20000 - 1000
    assert m["get-request-count"] == 5000 and m["push-request-count"] == 20000
    b.instances._check()


# ------------------------------------------------------------------------------------------- server


class _Server(ServerThread):
    """A TelemetryServer on a free loopback port, run in its own thread."""

    def __init__(self, **kw):
        from kip714.endpoint.server import TelemetryServer

        broker = kw.pop("broker", None) or TelemetryBroker(SubscriptionRegistry())
        super().__init__(TelemetryServer(broker, "127.0.0.1", 0, **kw), stop_timeout=10, call_timeout=5)

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.server.port), timeout=5)


@pytest.fixture
def server_factory():
    made = []

    def make(**kw):
        s = _Server(**kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


def _closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _api_versions(sock: socket.socket, corr: int = 1):
    sock.sendall(kip714.encode_request(kip714.wire.ApiVersionsRequest("kip714-test", "1.0"), corr, "t", 3))
    head = _recv_exact(sock, 4)
    return kip714.decode_response(_recv_exact(sock, struct.unpack(">i", head)[0]), 18, 3)


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


@pytest.mark.integration
def test_server_refuses_connections_over_max_connections(server_factory):
    srv = server_factory(max_connections=5)
    socks = [srv.connect() for _ in range(5)]
    for s in socks:
        assert _api_versions(s).body.error_code == 0
    extra = srv.connect()
    assert _closed_by_peer(extra, 5)
    assert srv.server.stats["connections_refused"] == 1
    socks[0].close()
    deadline = time.monotonic() + 5
    while len(srv.server.connections) > 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    again = srv.connect()  # a slot is free again
    assert _api_versions(again).body.error_code == 0
    for s in socks[1:] + [again, extra]:
        s.close()


@pytest.mark.integration
def test_server_closes_on_oversized_prefix(server_factory):
    srv = server_factory(max_frame_bytes=1024)
    s = srv.connect()
    assert _api_versions(s).body.error_code == 0
    s.sendall(struct.pack(">i", 1025) + b"x" * 100)
    assert _closed_by_peer(s, 5)
    assert srv.server.stats["protocol_errors"] == 1
    s2 = srv.connect()  # a frame exactly at the limit is read normally
    body = kip714.encode_request(kip714.wire.MetadataRequest([kip714.wire.MetadataRequestTopic("t" * 900)]), 2, "t", 4)
    assert len(body) - 4 <= 1024
    s2.sendall(body)
    head = _recv_exact(s2, 4)
    assert kip714.decode_response(_recv_exact(s2, struct.unpack(">i", head)[0]), 3, 4).correlation_id == 2
    s2.close()
    s.close()


@pytest.mark.integration
def test_server_frame_limit_defaults_to_telemetry_max_bytes_plus_headroom(server_factory):
    from kip714._enums import SERVE_FRAME_HEADROOM, serve_max_frame_bytes

    srv = server_factory(broker=TelemetryBroker(SubscriptionRegistry(), telemetry_max_bytes=4096))
    limit = srv.server.max_frame_bytes
    assert limit == serve_max_frame_bytes(4096) == 4096 + SERVE_FRAME_HEADROOM
    # the largest push a client makes — telemetry.max.bytes of metrics, the longest client id — is answered
    frame = kip714.encode_request(
        kip714.PushTelemetryRequest(uuid.UUID(int=1), 1, False, 0, bytes(4096)), 3, "c" * 32767, 0
    )
    assert len(frame) - 4 <= limit
    s = srv.connect()
    s.sendall(frame)
    head = _recv_exact(s, 4)
    assert kip714.decode_response(_recv_exact(s, struct.unpack(">i", head)[0]), 72, 0).correlation_id == 3
    # a size prefix over the limit: closed before the frame is read (Kafka's InvalidReceiveException), counted
    s2 = srv.connect()
    s2.sendall(struct.pack(">i", limit + 1) + bytes(1000))
    assert _closed_by_peer(s2, 5)
    assert srv.server.stats["frames_too_large"] == 1 and srv.server.stats["protocol_errors"] == 1
    assert "frames_too_large=1" in srv.call(srv.server.summary)
    s.close()
    s2.close()


def test_buffer_budget_drops_the_largest_holders_down_to_three_quarters():
    from kip714.endpoint.connection import BufferBudget, EndpointStats

    class Conn:
        def __init__(self):
            self.dropped = None

        def drop_for_memory(self, held):
            self.dropped = held

    stats = EndpointStats()
    budget = BufferBudget(1000, stats)
    conns = [Conn() for _ in range(6)]
    for conn, n in zip(conns, (100, 300, 50, 200, 250, 0)):
        budget.hold(conn, n)
    assert budget.total == 900 and len(budget.held) == 5 and not stats["dropped_memory_budget"]
    budget.hold(conns[2], 150)  # 1000: at the limit, nothing happens
    assert budget.total == 1000 and not stats["dropped_memory_budget"]
    budget.hold(conns[5], 10)  # 1010 > 1000: the largest go until at most 750 is held
    assert [c.dropped for c in conns] == [None, 300, None, None, None, None]
    assert budget.total == 710 and stats["dropped_memory_budget"] == 1 and conns[1] not in budget.held
    budget.hold(conns[0], 0)  # a frame completed: nothing held
    budget.release(conns[3])  # a connection gone
    budget.release(conns[1])  # already dropped: nothing more to free
    assert budget.total == 410 and set(budget.held) == {conns[2], conns[4], conns[5]}
    with pytest.raises(ValueError):
        BufferBudget(0, stats)


@pytest.mark.integration
def test_server_closes_a_slow_loris_partial_frame_on_idle_timeout(server_factory):
    srv = server_factory(idle_timeout_s=0.4)
    still = srv.connect()
    still.sendall(struct.pack(">i", 1000) + b"partial")  # a frame that never completes
    trickle = srv.connect()
    trickle.sendall(struct.pack(">i", 1000))
    started = time.monotonic()
    closed = False
    while time.monotonic() - started < 4:  # one byte every 0.1 s: never idle 0.4 s
        try:
            trickle.sendall(b"x")
        except OSError:
            closed = True
            break
        if _closed_by_peer(trickle, 0.1):
            closed = True
            break
    assert _closed_by_peer(still, 3)
    assert closed, "a frame trickling in a byte at a time kept the connection open"
    assert time.monotonic() - started < 3
    assert srv.server.stats["idle_closed"] >= 2
    still.close()
    trickle.close()


@pytest.mark.integration
def test_server_stops_reading_while_a_client_does_not_read_its_responses(server_factory):
    srv = server_factory()
    s = srv.connect()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    one = kip714.encode_request(kip714.wire.ApiVersionsRequest("kip714-test", "1.0"), 1, "t", 3)
    data = memoryview(one * 1_000_000)  # 35 MB in, ~100 MB of answers out
    s.setblocking(False)
    sent, last_progress = 0, time.monotonic()
    while sent < len(data) and time.monotonic() - last_progress < 0.5:
        try:
            sent += s.send(data[sent : sent + 65536])
            last_progress = time.monotonic()
        except BlockingIOError:
            time.sleep(0.005)
    # the client never read: the server must have paused reading instead of queueing every answer
    conn = next(iter(srv.server.connections))
    buffered = srv.call(lambda: conn.transport.get_write_buffer_size())
    assert buffered < 1 << 20, buffered
    assert sent < len(data)  # and the sender was pushed back on
    s.close()


@pytest.mark.integration
def test_server_metadata_topic_by_id_only(server_factory):
    """Found by the ``stream`` fuzzer: a Metadata v10/v11 request naming a topic by id only (null name)
    made the answer unencodable and the exception escaped into the event loop."""
    srv = server_factory()
    topic = kip714.wire.MetadataRequestTopic(None, uuid.UUID(int=7))
    s = srv.connect()
    s.sendall(kip714.encode_request(kip714.wire.MetadataRequest([topic]), 1, "t", 10))
    assert _closed_by_peer(s, 5)  # refused, as Kafka refuses it
    s = srv.connect()
    s.sendall(kip714.encode_request(kip714.wire.MetadataRequest([topic]), 2, "t", 12))
    head = _recv_exact(s, 4)
    resp = kip714.decode_response(_recv_exact(s, struct.unpack(">i", head)[0]), 3, 12)
    assert [(t.error_code, t.name, t.topic_id) for t in resp.body.topics] == [(100, None, uuid.UUID(int=7))]
    assert not srv.server.stats["internal_errors"] and srv.server.stats["protocol_errors"] == 1
    s.close()


@pytest.mark.integration
def test_server_drops_the_instance_of_a_closed_connection(server_factory):
    """Kafka 4.0+: an instance goes when the connection that created it closes (connection churn cannot
    fill the instance table); the instances of open connections stay."""
    srv = server_factory()
    socks = [srv.connect() for _ in range(3)]
    for i, s in enumerate(socks):
        s.sendall(kip714.encode_request(kip714.GetTelemetrySubscriptionsRequest(None), i, "churn", 0))
        head = _recv_exact(s, 4)
        resp = kip714.decode_response(_recv_exact(s, struct.unpack(">i", head)[0]), 71, 0)
        assert resp.body.error_code == 0
    broker = srv.server.broker
    assert len(broker.instances) == 3
    socks[0].close()
    socks[1].close()
    deadline = time.monotonic() + 5
    while srv.server.stats["instances_dropped_on_disconnect"] < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert srv.server.stats["instances_dropped_on_disconnect"] == 2
    assert len(broker.instances) == 1
    socks[2].close()
