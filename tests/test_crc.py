"""CRC32C and SubscriptionId: check values, two reference packages, both code paths, Kafka's vectors."""

from __future__ import annotations

import array
import os
import random
import struct
import subprocess
import sys
import threading
import uuid

import pytest
from examples import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from kip714._crc import (
    _crc32c_sw,
    _java_utf8,
    compute_subscription_id,
    crc32c,
    hardware_accelerated,
    uuid_hash,
)

crc32c_pkg = pytest.importorskip("crc32c")
try:  # a second, independent oracle where it installs (no musllinux wheels); the crc32c package otherwise
    import google_crc32c
except ImportError:  # pragma: no cover - platform dependent
    google_crc32c = None

# The UUID shared by most vectors: XgsdajxPeiGdPit8ih9OYA
VEC_UUID = uuid.UUID(int=(0x5E0B1D6A3C4F7A21 << 64) | 0x9D3E2B7C8A1F4E60)
P = "org.apache.kafka."


def ref_crc(data: bytes, value: int = 0) -> int:
    return crc32c_pkg.crc32c(data, value)


def ref_crc2(data: bytes, value: int = 0) -> int:
    """google-crc32c when installed, else the crc32c package."""
    return google_crc32c.extend(value, data) if google_crc32c else ref_crc(data, value)


def i32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def ref_uuid_hash(u: uuid.UUID) -> int:
    x = (u.int >> 64) ^ (u.int & 0xFFFFFFFFFFFFFFFF)
    return i32((x >> 32) ^ x)


def ref_subscription_id(metrics: list[str], interval: int, u: uuid.UUID) -> int:
    """The plain-Python way: join, encode, crc32c package, xor."""
    text = "[" + ", ".join(metrics) + "]" + str(interval)
    return i32(ref_crc(_java_utf8(text)) ^ ref_uuid_hash(u))


def blob(n: int, seed: int = 0) -> bytes:
    return random.Random(n * 7919 + seed).randbytes(n)


# ------------------------------------------------------------------------------------------ CRC32C


def test_check_values():
    assert crc32c(b"123456789") == 0xE3069283
    assert _crc32c_sw(b"123456789") == 0xE3069283
    assert crc32c(b"[]300000") == 0xD4C75BDE
    assert crc32c(b"[]300000") == 0xD4C75BDE
    assert crc32c(b"") == 0
    assert crc32c(b"", 0xDEADBEEF) == 0xDEADBEEF
    assert isinstance(hardware_accelerated(), bool)


@settings(max_examples=examples(300), deadline=None)
@given(data=st.binary(min_size=0, max_size=10_000), value=st.integers(0, 0xFFFFFFFF))
def test_matches_both_packages(data, value):
    expected = ref_crc(data, value)
    assert expected == ref_crc2(data, value)
    assert crc32c(data, value) == expected
    assert _crc32c_sw(data, value) == expected
    assert crc32c(bytearray(data), value) == expected
    assert crc32c(memoryview(data), value) == expected
    if value == 0 and google_crc32c:
        assert crc32c(data) == google_crc32c.value(data)


@settings(max_examples=examples(100), deadline=None)
@given(a=st.binary(max_size=3000), b=st.binary(max_size=3000))
def test_running_value_continues(a, b):
    assert crc32c(b, crc32c(a)) == crc32c(a + b)
    assert _crc32c_sw(b, crc32c(a)) == crc32c(a + b)


# sizes around the 3-way block boundaries (3 x 64, 3 x 256 and 3 x 8192 bytes) and a few MB
@pytest.mark.parametrize(
    "n",
    [
        191,
        192,
        193,
        383,
        767,
        768,
        769,
        959,
        1535,
        1536,
        24575,
        24576,
        24577,
        49152 + 775 + 192,
        1 << 20,
        3 * (1 << 20) + 13,
    ],
)
def test_large_and_boundary_sizes(n):
    data = blob(n)
    expected = ref_crc2(data)
    assert ref_crc(data) == expected
    assert crc32c(data) == expected
    assert _crc32c_sw(data) == expected
    assert crc32c(bytearray(data)) == expected
    # an unaligned start inside a buffer
    assert crc32c(memoryview(data)[3:]) == ref_crc(data[3:])
    assert crc32c(data[5:], 0x12345678) == ref_crc(data[5:], 0x12345678)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(10_000, 4_000_000), seed=st.integers(0, 1000), value=st.integers(0, 0xFFFFFFFF))
def test_megabyte_inputs(n, seed, value):
    data = blob(n, seed)
    expected = ref_crc2(data, value)
    assert crc32c(data, value) == expected
    assert _crc32c_sw(data, value) == expected


def test_buffer_kinds():
    data = blob(1000)
    expected = ref_crc(data)
    assert crc32c(memoryview(bytearray(data))) == expected
    assert crc32c(memoryview(data).cast("B", (10, 100))) == expected  # contiguous 2-D
    arr = array.array("I", data[:996])
    assert crc32c(arr) == ref_crc(data[:996])
    assert crc32c(memoryview(data)[10:20]) == ref_crc(data[10:20])


def test_bad_inputs():
    with pytest.raises((TypeError, ValueError)):
        crc32c(memoryview(b"abcdefgh")[::2])  # not contiguous
    with pytest.raises((TypeError, ValueError)):
        _crc32c_sw(memoryview(b"abcdefgh")[::2])
    with pytest.raises(TypeError):
        crc32c("text")
    with pytest.raises(TypeError):
        crc32c(None)
    with pytest.raises(TypeError):
        crc32c(12)
    with pytest.raises(OverflowError):
        crc32c(b"x", -1)
    with pytest.raises(OverflowError):
        crc32c(b"x", 1 << 32)


def test_parallel_threads_agree():
    """Big inputs run with the GIL released; several threads at once must still be right."""
    data = [blob(300_000, s) for s in range(4)]
    expected = [ref_crc(d) for d in data]
    results: dict[int, list[int]] = {}

    def work(i: int) -> None:
        results[i] = [crc32c(data[i]) for _ in range(20)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        assert results[i] == [expected[i]] * 20


@pytest.mark.integration
def test_environment_forces_software():
    code = (
        "from kip714._crc import crc32c, hardware_accelerated;"
        "import sys; sys.stdout.write('%s %x' % (hardware_accelerated(), crc32c(b'123456789' * 5000)))"
    )
    env = dict(os.environ, KIP714_CRC32C_SOFTWARE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "False {:x}".format(ref_crc(b"123456789" * 5000))


# ------------------------------------------------------------------------------------ Uuid.hashCode


def test_uuid_hash_vectors():
    assert uuid_hash(VEC_UUID) == 1969554007
    assert uuid_hash(VEC_UUID.bytes) == 1969554007
    assert uuid_hash(bytearray(VEC_UUID.bytes)) == 1969554007
    assert uuid_hash(memoryview(VEC_UUID.bytes)) == 1969554007
    assert uuid_hash(uuid.UUID(int=(1 << 64) | 2)) == 3
    assert uuid_hash(uuid.UUID(int=(0xFFFFFFFF00000000 << 64) | 0x0000000100000000)) == -2
    assert uuid_hash(uuid.UUID(int=0)) == 0


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(0, (1 << 128) - 1))
def test_uuid_hash_random(n):
    u = uuid.UUID(int=n)
    assert uuid_hash(u) == ref_uuid_hash(u) == uuid_hash(u.bytes)


def test_uuid_hash_bad_inputs():
    with pytest.raises(ValueError):
        uuid_hash(b"\x00" * 15)
    with pytest.raises(ValueError):
        uuid_hash(bytearray(17))
    with pytest.raises(TypeError):
        uuid_hash(str(VEC_UUID))
    with pytest.raises(TypeError):
        uuid_hash(12)


# ----------------------------------------------------------------------------------- SubscriptionId

VEC8 = [
    P + "producer.record.queue.time.avg",
    P + "producer.node.request.latency.max",
    P + "consumer.node.request.latency.max",
    P + "producer.produce.throttle.time.avg",
    P + "consumer.poll.idle.ratio.avg",
    P + "producer.connection.creation.total",
    P + "producer.connection.creation.rate",
    P + "producer.produce.throttle.time.max",
    P + "producer.record.queue.time.max",
    P + "consumer.node.request.latency.avg",
    P + "producer.node.request.latency.avg",
    P + "consumer.connection.creation.total",
    P + "consumer.connection.creation.rate",
]
GREEK_17 = ["alpha", "kappa", "gamma", "lambda", "iota", "epsilon", "beta", "sigma", "phi", "delta", "mu", "nu"]
GREEK_19 = ["alpha", "kappa", "gamma", "lambda", "epsilon", "beta", "iota", "phi", "sigma", "delta", "mu", "nu"]

# docs/reference/kafka-java-behaviour.md §6, rows 1-11: (requested metrics in order, interval, uuid, id)
SUBSCRIPTION_VECTORS = [
    pytest.param([], 300000, VEC_UUID, -1583195767, id="1-none"),
    pytest.param(
        [P + "client.producer.partition.latency", P + "client.producer.partition.queue."],
        30000,
        VEC_UUID,
        -111713672,
        id="2-two-prefixes",
    ),
    pytest.param(["*"], 30000, VEC_UUID, -1387469480, id="3-star"),
    pytest.param([P + "producer.", P + "consumer.", P + "producer.node."], 10000, VEC_UUID, 881785404, id="4-union"),
    pytest.param([P + "producer."], 300000, VEC_UUID, -1446181002, id="5-capped"),
    pytest.param([P + "producer.", ""], 1000, VEC_UUID, 38142455, id="6-empty-item"),
    pytest.param([""], 5000, VEC_UUID, 1691415660, id="7-only-empty"),
    pytest.param(VEC8, 100, VEC_UUID, 1179564880, id="8-kip-standard"),
    pytest.param([], 300000, uuid.UUID(int=(1 << 64) | 2), -725132323, id="9-none"),
    pytest.param(["*"], 30000, uuid.UUID(int=(1 << 64) | 2), -668342516, id="9-star"),
    pytest.param([], 300000, uuid.UUID(int=(0xFFFFFFFF00000000 << 64) | 0x0000000100000000), 725132320, id="10"),
    pytest.param([P + "producer." + g for g in GREEK_17], 60000, VEC_UUID, -1939838256, id="11-jdk17"),
    pytest.param([P + "producer." + g for g in GREEK_19], 60000, VEC_UUID, -836231277, id="11-jdk19"),
]


@pytest.mark.parametrize("metrics, interval, client_id, expected", SUBSCRIPTION_VECTORS)
def test_subscription_id_vectors(metrics, interval, client_id, expected):
    assert compute_subscription_id(metrics, interval, client_id) == expected
    assert compute_subscription_id(tuple(metrics), interval, client_id.bytes) == expected
    assert compute_subscription_id(iter(metrics), interval, client_id) == expected
    assert ref_subscription_id(metrics, interval, client_id) == expected


def test_appendix_b_wire_bytes():
    sid = compute_subscription_id(
        [P + "client.producer.partition.latency", P + "client.producer.partition.queue."], 30000, VEC_UUID
    )
    assert struct.pack(">i", sid) == bytes.fromhex("f9 57 62 78")


def test_worked_example_vector_9():
    assert i32(0xD4C75BDE) == -725132322
    assert compute_subscription_id([], 300000, uuid.UUID(int=(1 << 64) | 2)) == -725132322 ^ 3


metric_names = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["*", "", P + "producer.", P + "consumer.node.request.latency.avg"]),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3),
    st.text(min_size=300, max_size=700),  # longer than the 512-byte staging buffer on its own
)


@settings(max_examples=examples(400), deadline=None)
@given(
    metrics=st.lists(metric_names, max_size=30),
    interval=st.integers(-(1 << 31), (1 << 31) - 1),
    n=st.integers(0, (1 << 128) - 1),
)
def test_subscription_id_matches_reference(metrics, interval, n):
    u = uuid.UUID(int=n)
    assert compute_subscription_id(metrics, interval, u) == ref_subscription_id(metrics, interval, u)


def test_java_utf8_surrogates():
    # a valid pair split over two code points is one character in Java's UTF-16
    assert _java_utf8("a\ud83d\ude00b") == "a\U0001f600b".encode()
    # lone surrogates become '?', like String.getBytes(UTF_8)
    assert _java_utf8("\ud800x\udc00") == b"?x?"
    assert _java_utf8("\ude00\ud83d") == b"??"
    assert _java_utf8("é") == "é".encode()


def test_subscription_id_bad_inputs():
    with pytest.raises(TypeError):
        compute_subscription_id("abc", 1000, VEC_UUID)
    with pytest.raises(TypeError):
        compute_subscription_id([b"abc"], 1000, VEC_UUID)
    with pytest.raises(TypeError):
        compute_subscription_id(["a", None], 1000, VEC_UUID)
    with pytest.raises(TypeError):
        compute_subscription_id(5, 1000, VEC_UUID)
    with pytest.raises(OverflowError):
        compute_subscription_id([], 1 << 31, VEC_UUID)
    with pytest.raises(ValueError):
        compute_subscription_id([], 1000, b"short")
