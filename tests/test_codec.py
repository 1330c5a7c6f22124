"""kip714._codec: bounded decompression of every framing real clients send, and Java-style compression.

Test data: tests/data/codec/*.bin are complete PushTelemetry request frames captured from librdkafka 2.16.0
(confluent-kafka 2.16.1); tests/data/codec/expected.json says what each Metrics field decompresses to.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import os
import pathlib
import random
import struct
import subprocess
import sys
import tracemalloc
import zlib
from concurrent.futures import ThreadPoolExecutor

import cramjam
import lz4.block
import lz4.frame
import pytest
import zstandard
from examples import examples
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.metrics.v1 import metrics_pb2

from kip714 import _codec
from kip714._codec import compress, decompress, detect_framing, xxh32
from kip714.errors import (
    CorruptPayloadError,
    InvalidConfigError,
    Kip714Error,
    TelemetryTooLargeError,
    UnsupportedCompressionTypeError,
)

DATA = pathlib.Path(__file__).parent / "data" / "codec"
EXPECTED = json.loads((DATA / "expected.json").read_text())
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
MiB = 1 << 20


# --------------------------------------------------------------------------------------------- helpers


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def metrics_field(frame: bytes) -> tuple[int, int, int]:
    """(compression_type, offset, length) of the Metrics field of a PushTelemetry v0 request frame:
    size(4) api_key(2) api_version(2) correlation_id(4) client_id(int16 + bytes) header tags(1),
    then instance id(16) subscription id(4) terminating(1) compression type(1) metrics(compact bytes)."""
    (size,) = struct.unpack_from(">i", frame, 0)
    assert size == len(frame) - 4
    api_key, _version, _corr = struct.unpack_from(">hhi", frame, 4)
    assert api_key == 72
    (n,) = struct.unpack_from(">h", frame, 12)
    pos = 14 + max(n, 0)
    assert frame[pos] == 0  # no header tagged fields
    pos += 1 + 16 + 4 + 1
    ctype = frame[pos]
    length, pos = _uvarint(frame, pos + 1)
    return ctype, pos, length - 1


def capture(name: str) -> tuple[int, bytes]:
    frame = (DATA / name).read_bytes()
    ctype, off, length = metrics_field(frame)
    return ctype, frame[off : off + length]


CAPTURES = sorted(EXPECTED)
COMPRESSED_CAPTURES = [n for n in CAPTURES if EXPECTED[n]["compression_type"] != 0]


def otlp_payloads() -> list[bytes]:
    """The distinct uncompressed OTLP payloads of the captures."""
    seen = {}
    for name in CAPTURES:
        ctype, metrics = capture(name)
        if EXPECTED[name]["uncompressed_len"]:
            out = decompress(metrics, ctype, MiB)
            seen[out] = None
    return list(seen)


def otlp_like(target: int, seed: int = 1) -> bytes:
    """A realistic OTLP MetricsData of about ``target`` bytes: capture payloads with varied values/times."""
    rnd = random.Random(seed)
    base = otlp_payloads()
    parts, total = [], 0
    while total < target:
        md = metrics_pb2.MetricsData()
        md.ParseFromString(rnd.choice(base))
        for rm in md.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    kind = metric.WhichOneof("data")
                    if kind in ("gauge", "sum"):
                        for dp in getattr(metric, kind).data_points:
                            dp.time_unix_nano += rnd.randrange(10**12)
                            if dp.WhichOneof("value") == "as_double":
                                dp.as_double = rnd.random() * 1000
                            else:
                                dp.as_int = rnd.randrange(10**6)
        blob = md.SerializeToString()
        parts.append(blob)
        total += len(blob)
    return b"".join(parts)


@functools.cache
def mixed_bytes(n: int, seed: int = 0) -> bytes:
    """Half random, half repetitive: compressible but not trivially."""
    rnd = random.Random(seed)
    out = bytearray()
    while len(out) < n:
        if rnd.random() < 0.5:
            out += rnd.randbytes(rnd.randrange(1, 300))
        else:
            out += bytes([rnd.randrange(256)]) * rnd.randrange(1, 500)
    return bytes(out[:n])


def xerial_chunks(data: bytes) -> list[bytes]:
    """Split a xerial stream into its raw snappy chunks (independent parser)."""
    assert data[:8] == b"\x82SNAPPY\x00"
    pos, chunks = 16, []
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos)
        chunks.append(data[pos + 4 : pos + 4 + length])
        pos += 4 + length
    assert pos == len(data)
    return chunks


def lz4_blocks(frame: bytes) -> tuple[bytes, list[tuple[bool, bytes]], bytes]:
    """(header, [(stored, block)], tail) of an LZ4 frame without content size or block checksums."""
    flg = frame[4]
    hlen = 7 + (8 if flg & 0x08 else 0)
    pos, blocks = hlen, []
    while True:
        (v,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if v & 0x7FFFFFFF == 0:
            break
        size = v & 0x7FFFFFFF
        blocks.append((bool(v >> 31), frame[pos : pos + size]))
        pos += size + (4 if flg & 0x10 else 0)
    return frame[:hlen], blocks, frame[pos - 4 :]


def xxh32_reference(data: bytes, seed: int = 0) -> int:
    """Straightforward Python XXH32 from the xxHash specification (test oracle)."""
    p1, p2, p3, p4, p5 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1
    m = 0xFFFFFFFF

    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & m

    def rnd(acc, lane):
        return (rotl((acc + lane * p2) & m, 13) * p1) & m

    n, i = len(data), 0
    if n >= 16:
        v = [(seed + p1 + p2) & m, (seed + p2) & m, seed & m, (seed - p1) & m]
        while i + 16 <= n:
            for k in range(4):
                v[k] = rnd(v[k], int.from_bytes(data[i + 4 * k : i + 4 * k + 4], "little"))
            i += 16
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & m
    else:
        h = (seed + p5) & m
    h = (h + n) & m
    while i + 4 <= n:
        h = (rotl((h + int.from_bytes(data[i : i + 4], "little") * p3) & m, 17) * p4) & m
        i += 4
    while i < n:
        h = (rotl((h + data[i] * p5) & m, 11) * p1) & m
        i += 1
    h ^= h >> 15
    h = (h * p2) & m
    h ^= h >> 13
    h = (h * p3) & m
    h ^= h >> 16
    return h


def reference_decompress(ctype: int, data: bytes) -> bytes:
    """Decode with the codec packages alone (unbounded; for small test inputs): the differential oracle."""
    if ctype == 1:
        d = zlib.decompressobj(31)
        out = d.decompress(data)
        while d.eof and d.unused_data:  # concatenated members
            rest = d.unused_data
            d = zlib.decompressobj(31)
            out += d.decompress(rest)
        if not d.eof:
            raise ValueError("truncated")
        return out
    if ctype == 2:
        # (cramjam refuses a literal length written with more bytes than it needs, which Google's decoder,
        # snappy-java and kip714 accept; test_snappy_blocks_match_the_format_reference covers those)
        if data[:8] == _codec.XERIAL_MAGIC:
            if struct.unpack(">i", data[8:12])[0] < 1:
                raise ValueError("snappy-java refuses stream versions below 1")
            return b"".join(bytes(cramjam.snappy.decompress_raw(c)) for c in xerial_chunks(data))
        return bytes(cramjam.snappy.decompress_raw(data))
    if ctype == 3:
        out, used = lz4.frame.decompress(data, return_bytes_read=True)
        if used != len(data):
            raise ValueError("trailing bytes")
        return out
    if ctype == 4:
        d = zstandard.ZstdDecompressor().decompressobj()
        out = d.decompress(data)
        if not d.eof or d.unused_data:
            raise ValueError("truncated or trailing bytes")
        return out
    return data


def raises_kip714(fn, *args):
    """Run fn; success or a kip714 error are fine, any other exception fails the test."""
    try:
        fn(*args)
    except Kip714Error as exc:
        return exc
    return None


# ------------------------------------------------------------------------------------ real client frames


@pytest.mark.parametrize("name", CAPTURES)
def test_capture_decompresses_to_expected_otlp(name):
    exp = EXPECTED[name]
    ctype, metrics = capture(name)
    assert ctype == exp["compression_type"]
    assert len(metrics) == exp["metrics_len"]
    out = decompress(metrics, ctype, MiB)
    assert type(out) is bytes
    assert len(out) == exp["uncompressed_len"]
    md = metrics_pb2.MetricsData()
    md.ParseFromString(out)
    if exp["uncompressed_len"]:
        assert json_format.MessageToDict(md) == exp["otlp"]
    # the limit is exact
    assert decompress(metrics, ctype, len(out)) == out
    if out:
        with pytest.raises(TelemetryTooLargeError) as info:
            decompress(metrics, ctype, len(out) - 1)
        assert info.value.error_code == 118


@pytest.mark.parametrize("name", COMPRESSED_CAPTURES)
def test_capture_zero_copy_slices_and_buffer_types(name):
    """The Metrics field can be decompressed straight out of the request frame (memoryview slice)."""
    frame = (DATA / name).read_bytes()
    ctype, off, length = metrics_field(frame)
    expected = decompress(frame[off : off + length], ctype, MiB)
    view = memoryview(frame)[off : off + length]
    assert decompress(view, ctype, MiB) == expected
    assert decompress(bytearray(view), ctype, MiB) == expected
    # a read-only memoryview of a bytearray, and a non-contiguous view of doubled bytes
    assert decompress(memoryview(bytearray(view)).toreadonly(), ctype, MiB) == expected
    doubled = bytes(b for byte in view.tobytes() for b in (byte, 0))
    assert decompress(memoryview(doubled)[::2], ctype, MiB) == expected


def test_capture_framings_are_what_librdkafka_sends():
    seen = {}
    for name in COMPRESSED_CAPTURES:
        ctype, metrics = capture(name)
        seen.setdefault(ctype, set()).add(detect_framing(metrics, ctype))
    assert seen == {1: {"gzip"}, 2: {"raw"}, 3: {"lz4-frame"}, 4: {"zstd"}}
    _, gz = capture("producer_gzip_push_01_gzip.bin")
    assert gz[:10] == bytes.fromhex("1f8b0800000000000403")  # level 0: stored deflate blocks
    _, lz = capture("producer_lz4_push_01_lz4.bin")
    assert lz[:7] == bytes.fromhex("04224d18604082")
    _, zs = capture("producer_zstd_push_01_zstd.bin")
    assert zs[4] == 0x00  # no content size: zstandard's plain decompress() cannot read it
    with pytest.raises(zstandard.ZstdError):
        zstandard.ZstdDecompressor().decompress(zs)
    assert len(decompress(zs, 4, MiB)) == 1450


def test_empty_none_payload_from_capture():
    ctype, metrics = capture("producer_unmatched_metric_push_01_none.bin")
    assert (ctype, metrics) == (0, b"")
    assert decompress(metrics, 0, 0) == b""


# --------------------------------------------------------------------------------------------- API


@pytest.mark.parametrize("bad", [-1, 5, 100, 127, -128, 2**70])
def test_unknown_compression_types(bad):
    for call in (
        lambda: decompress(b"x", bad, MiB),
        lambda: compress(b"x", bad),
        lambda: detect_framing(b"x", bad),
    ):
        with pytest.raises(UnsupportedCompressionTypeError) as info:
            call()
        assert info.value.error_code == 76
        assert isinstance(info.value, Kip714Error)


def test_compression_type_accepts_intenum_and_rejects_non_int():
    from kip714 import CompressionType

    payload = compress(b"abc" * 100, CompressionType.ZSTD)
    assert decompress(payload, CompressionType.ZSTD, 300) == b"abc" * 100
    with pytest.raises(TypeError):
        decompress(payload, "zstd", 300)
    with pytest.raises(TypeError):
        decompress(payload, 4.0, 300)


def test_max_output_validation():
    with pytest.raises(ValueError):
        decompress(b"abc", 0, -1)
    with pytest.raises(ValueError):
        decompress(b"abc", 0, -(2**80))
    with pytest.raises(TypeError):
        decompress(b"abc", 0, 3.0)
    assert decompress(b"abc", 0, 2**80) == b"abc"  # huge limits are just "no limit"
    with pytest.raises(TypeError):
        decompress("text", 0, 10)


def test_none_codec():
    data = b"payload" * 10
    assert decompress(data, 0, len(data)) is data  # bytes are returned as they are, no copy
    assert decompress(bytearray(data), 0, len(data)) == data
    assert type(decompress(bytearray(data), 0, len(data))) is bytes
    big = os.urandom(100_000)
    assert decompress(memoryview(big)[1:], 0, len(big)) == big[1:]
    with pytest.raises(TelemetryTooLargeError):
        decompress(data, 0, len(data) - 1)
    assert compress(data, 0) is data
    assert compress(bytearray(data), 0) == data


@pytest.mark.parametrize("ctype", [1, 2, 3, 4])
def test_empty_payload_with_a_codec_is_corrupt(ctype):
    """Kafka's readers all fail on an empty stream (INVALID_RECORD); a broker never decompresses an empty
    Metrics field in the first place."""
    for data in (b"", bytearray(), memoryview(b"abc")[:0]):
        with pytest.raises(CorruptPayloadError) as info:
            decompress(data, ctype, MiB)
        assert info.value.error_code == 87
    assert detect_framing(b"", ctype) == "empty"


def test_detect_framing():
    assert detect_framing(b"anything", 0) == "none"
    assert detect_framing(compress(b"x", 1), 1) == "gzip"
    assert detect_framing(b"\x00\x01", 1) == "unknown"
    assert detect_framing(compress(b"x", 2), 2) == "xerial"
    assert detect_framing(bytes(cramjam.snappy.compress_raw(b"x")), 2) == "raw"
    assert detect_framing(bytes(cramjam.snappy.compress(b"x")), 2) == "snappy-framing"
    assert detect_framing(compress(b"x", 3), 3) == "lz4-frame"
    assert detect_framing(b"\x04\x22", 3) == "unknown"
    assert detect_framing(compress(b"x", 4), 4) == "zstd"
    assert detect_framing(b"\x50\x2a\x4d\x18\x00\x00\x00\x00", 4) == "zstd-skippable"
    assert detect_framing(b"\x00\x00\x00\x00", 4) == "unknown"


def test_compress_levels():
    data = mixed_bytes(50_000)
    for level in (None, -1, 0, 1, 5, 9):
        assert decompress(compress(data, 1, level), 1, len(data)) == data
    for level in (None, 1, 3, 9, 12, 17):
        out = compress(data, 3, level)
        assert out[:7] == bytes.fromhex("04224d18604082")
        assert decompress(out, 3, len(data)) == data
    for level in (None, -5, 1, 3, 19, 22):
        assert decompress(compress(data, 4, level), 4, len(data)) == data
    for ctype, bad in ((1, 10), (1, -2), (3, 0), (3, 18), (4, 23), (0, 1), (2, 1)):
        with pytest.raises(InvalidConfigError) as info:  # INVALID_CONFIG, as Kafka's config check
            compress(data, ctype, bad)
        assert info.value.error_code.name == "INVALID_CONFIG"
    with pytest.raises(TypeError):
        compress(data, 4, "3")


@pytest.mark.parametrize("ctype", [0, 1, 2, 3, 4])
def test_compress_accepts_any_buffer(ctype):
    data = mixed_bytes(70_000, seed=2)
    expected = decompress(compress(data, ctype), ctype, len(data))
    assert expected == data
    for view in (bytearray(data), memoryview(data), memoryview(b"xx" + data)[2:], memoryview(data * 2)[::2]):
        source = bytes(view)
        assert decompress(compress(view, ctype), ctype, len(source)) == source


# ------------------------------------------------------------------------------------------ round trips

SIZES = [0, 1, 100, 65535, 65536, 65537, 1_000_000, 4_500_000]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("codec", list(CODECS))
def test_round_trip_sizes(codec, size):
    ctype = CODECS[codec]
    data = mixed_bytes(size, seed=size)
    packed = compress(data, ctype)
    assert type(packed) is bytes
    assert decompress(packed, ctype, size) == data
    assert decompress(bytearray(packed), ctype, size + 1) == data
    if size:
        with pytest.raises(TelemetryTooLargeError):
            decompress(packed, ctype, size - 1)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    small=st.binary(max_size=3000),
    big=st.one_of(st.none(), st.tuples(st.integers(60_000, 200_000), st.integers(0, 2**32), st.booleans())),
    codec=st.sampled_from(list(CODECS)),
    slack=st.integers(min_value=-2, max_value=2),
)
def test_round_trip_random(small, big, codec, slack):
    ctype = CODECS[codec]
    data = small
    if big is not None:  # large inputs come from a seeded generator (hypothesis is slow at big binaries)
        size, seed, compressible = big
        data = mixed_bytes(size, seed) if compressible else random.Random(seed).randbytes(size)
        data = small + data
    packed = compress(data, ctype)
    limit = max(len(data) + slack, 0)
    if limit >= len(data):
        assert decompress(packed, ctype, limit) == data
    else:
        with pytest.raises(TelemetryTooLargeError):
            decompress(packed, ctype, limit)


@pytest.mark.parametrize("size", [0, 1, 1000, 70_000, 300_000])
def test_compress_output_is_readable_by_independent_decoders(size):
    data = mixed_bytes(size, seed=7)
    # gzip: the stdlib, and Java's header bytes (MTIME 0, XFL 0, OS 0xff)
    gz = compress(data, 1)
    assert gz[:10] == bytes.fromhex("1f8b08000000000000ff")
    assert gzip.decompress(gz) == data
    # snappy: xerial framing, each chunk a raw snappy block of at most 32 KiB, readable by kafka-python
    sn = compress(data, 2)
    assert sn[:16] == bytes.fromhex("82534e41505059000000000100000001")
    chunks = [bytes(cramjam.snappy.decompress_raw(c)) for c in xerial_chunks(sn)]
    assert b"".join(chunks) == data
    assert [len(c) for c in chunks] == [min(32768, size - i) for i in range(0, size, 32768)]
    kafka_codec = pytest.importorskip("kafka.codec")
    if size:  # kafka-python's decoder treats the bare 16-byte header as raw snappy
        assert kafka_codec.snappy_decode(sn) == data
    # lz4: python-lz4's frame decoder, and every block decodes on its own (independent blocks)
    l4 = compress(data, 3)
    assert lz4.frame.decompress(l4) == data
    header, blocks, tail = lz4_blocks(l4)
    assert header == bytes.fromhex("04224d18604082") and tail == b"\x00\x00\x00\x00"
    pieces = [blk if stored else lz4.block.decompress(blk, uncompressed_size=65536) for stored, blk in blocks]
    assert b"".join(pieces) == data
    assert all(len(p) <= 65536 for p in pieces)
    # zstd: zstandard's reader, and the content size is recorded
    zs = compress(data, 4)
    assert zstandard.ZstdDecompressor().stream_reader(zs).read() == data
    assert zstandard.frame_content_size(zs) == size


# -------------------------------------------------------------------- payloads from independent encoders


@pytest.fixture(scope="module")
def payload():
    return otlp_like(300_000, seed=3)


def test_gzip_from_stdlib_all_levels(payload):
    for level in range(10):
        assert decompress(gzip.compress(payload, compresslevel=level), 1, len(payload)) == payload
        c = zlib.compressobj(level, zlib.DEFLATED, 31)
        assert decompress(c.compress(payload) + c.flush(), 1, len(payload)) == payload
    # header with FNAME, FCOMMENT-free, and an mtime
    buf = io.BytesIO()
    with gzip.GzipFile(filename="metrics.pb", mode="wb", fileobj=buf, mtime=1234567) as f:
        f.write(payload)
    assert decompress(buf.getvalue(), 1, len(payload)) == payload


def test_gzip_concatenated_members_trailing_garbage_truncation(payload):
    a, b = payload[:1000], payload[1000:5000]
    two = gzip.compress(a) + gzip.compress(b, compresslevel=0)
    assert decompress(two, 1, len(a) + len(b)) == a + b
    with pytest.raises(TelemetryTooLargeError):
        decompress(two, 1, len(a) + len(b) - 1)
    assert decompress(gzip.compress(b"") + gzip.compress(a), 1, len(a)) == a
    single = gzip.compress(a)
    # Kafka's GZIPInputStream: bytes after a member that are not a gzip header are ignored (and up to
    # 18 bytes in its buffer are not even looked at); a header starts a member that must be valid
    # (tests/test_gzip_jdk.py checks these rules against the JDK itself)
    for junk in (b"\x00", b"\x00" * 8, b"garbage", b"\x1f", b"\x1f\x8b", b"\x00" * 100, b"x" * 5000):
        assert decompress(single + junk, 1, MiB) == a
    for junk in (single[:20], single[:-1], single[:10] + b"\xff" * 30):
        with pytest.raises(CorruptPayloadError):
            decompress(single + junk, 1, MiB)
    for cut in (1, 9, 10, 100, len(single) - 8, len(single) - 1):
        with pytest.raises(CorruptPayloadError):
            decompress(single[:cut], 1, MiB)
    bad_crc = bytearray(single)
    bad_crc[-6] ^= 1
    with pytest.raises(CorruptPayloadError):
        decompress(bytes(bad_crc), 1, MiB)
    with pytest.raises(CorruptPayloadError):
        decompress(zlib.compress(a), 1, MiB)  # a zlib stream is not a gzip member


def test_snappy_raw_from_independent_encoders(payload):
    import snappy

    for raw in (bytes(cramjam.snappy.compress_raw(payload)), snappy.compress(payload)):
        assert detect_framing(raw, 2) == "raw"
        assert decompress(raw, 2, len(payload)) == payload
        with pytest.raises(TelemetryTooLargeError):
            decompress(raw, 2, len(payload) - 1)
    assert decompress(bytes(cramjam.snappy.compress_raw(b"")), 2, 0) == b""


def test_snappy_xerial_from_kafka_python(payload):
    kafka_codec = pytest.importorskip("kafka.codec")
    for blocksize in (32 * 1024, 4096, 1 << 20):
        x = kafka_codec.snappy_encode(payload, xerial_compatible=True, xerial_blocksize=blocksize)
        assert detect_framing(x, 2) == "xerial"
        assert decompress(x, 2, len(payload)) == payload
        with pytest.raises(TelemetryTooLargeError):
            decompress(x, 2, len(payload) - 1)


def test_snappy_xerial_details(payload):
    x = compress(payload, 2)
    # concatenated xerial streams (SnappyInputStream reads across them)
    y = compress(b"tail", 2)
    assert decompress(x + y, 2, len(payload) + 4) == payload + b"tail"
    assert decompress(_codec.XERIAL_HEADER, 2, 0) == b""  # empty stream: header only
    assert compress(b"", 2) == _codec.XERIAL_HEADER
    # as snappy-java reads it (tests/test_snappy_java.py checks every such rule against snappy-java itself):
    # 1-3 stray bytes where a chunk length is due end the stream; the first header's version is not read
    assert decompress(x + b"\x00", 2, 10 * MiB) == payload
    assert decompress(x + b"\x00\x00\x00", 2, 10 * MiB) == payload
    assert decompress(x[:8] + b"\x00\x00\x00\x00" + x[12:], 2, 10 * MiB) == payload
    bad = [
        x[:15],  # too short for a header: read as a raw block, which it is not
        x + y[:8] + b"\x00\x00\x00\x00" + y[12:],  # a concatenated stream of version 0
        x + b"\x00\x00\x00\x00",  # zero-length chunk
        x + b"\x80\x00\x00\x01",  # negative chunk length
        x + b"\x00\x00\x00\x10" + b"\x01" * 5,  # chunk longer than the data
        x[:-1],  # truncated last chunk
        x + _codec.XERIAL_MAGIC + b"\x00\x00",  # truncated concatenated header
    ]
    for data in bad:
        with pytest.raises(CorruptPayloadError):
            decompress(data, 2, 10 * MiB)
    corrupt_chunk = bytearray(x)
    corrupt_chunk[40:60] = b"\xff" * 20
    with pytest.raises(CorruptPayloadError):
        decompress(bytes(corrupt_chunk), 2, 10 * MiB)


def snappy_block_reference(block: bytes) -> bytes:
    """A raw snappy block decoded by the format description alone (google/snappy format_description.txt),
    with Google's RawUncompress verdicts: an independent, slow oracle for kip714's own block decoder."""
    n, shift, i = 0, 0, 0
    while True:
        if i >= len(block) or i >= 5:
            raise ValueError("bad preamble")
        b = block[i]
        n |= (b & 0x7F) << shift
        i += 1
        shift += 7
        if b < 0x80:
            break
    if n > 0xFFFFFFFF:
        raise ValueError("bad preamble")
    out = bytearray()
    while i < len(block):
        tag = block[i]
        i += 1
        if tag & 3 == 0:
            ln = tag >> 2
            if ln >= 60:
                nb = ln - 59
                if len(block) - i < nb:
                    raise ValueError("literal length truncated")
                ln = int.from_bytes(block[i : i + nb], "little")
                i += nb
            ln += 1
            if ln > len(block) - i or len(out) + ln > n:
                raise ValueError("literal out of bounds")
            out += block[i : i + ln]
            i += ln
            continue
        nb = {1: 1, 2: 2, 3: 4}[tag & 3]
        if len(block) - i < nb:
            raise ValueError("offset truncated")
        if tag & 3 == 1:
            ln, off = 4 + ((tag >> 2) & 7), (tag >> 5) << 8 | block[i]
        else:
            ln, off = (tag >> 2) + 1, int.from_bytes(block[i : i + nb], "little")
        i += nb
        if off == 0 or off > len(out) or len(out) + ln > n:
            raise ValueError("copy out of bounds")
        for _ in range(ln):
            out.append(out[-off])
    if len(out) != n:
        raise ValueError("short output")
    return bytes(out)


def test_snappy_blocks_match_the_format_reference():
    """kip714 decodes raw snappy blocks itself: every verdict and byte as the format says, on valid blocks
    (cramjam's encoder, hand-written tags of every kind and distance) and on random mutations of them."""
    rnd = random.Random(7140)
    text = bytes(rnd.choice(b"abcab  \n0123") for _ in range(3000))
    seeds = [bytes(cramjam.snappy.compress_raw(d)) for d in (b"", b"a", text[:40], text[:700], text, bytes(500))]
    lit = b"0123456789abcdefghij"
    for off in (1, 2, 3, 7, 8, 9, 15, 16, 17, 20):
        for n in (1, 4, 8, 11, 16, 17, 64):
            seeds.append(bytes([20 + n]) + b"\x4c" + lit + bytes([(n - 1) << 2 | 2]) + struct.pack("<H", off))
            seeds.append(bytes([20 + n]) + b"\x4c" + lit + struct.pack("<BI", (n - 1) << 2 | 3, off))
        seeds.append(b"\x18\x4c" + lit + bytes([(off >> 8) << 5 | 1]) + bytes([off]))  # 1-byte offset, 4 bytes
    seeds += [b"\x01\xf0\x00x", b"\x03\xf4\x02\x00xyz", b"\x01\xfc\x00\x00\x00\x00x", b"\x14\xf0\x13" + lit]
    cases = list(seeds)
    for _ in range(3000):
        b = bytearray(rnd.choice(seeds))
        for _ in range(rnd.choice((1, 1, 2, 3))):
            i = rnd.randrange(len(b) + 1)
            op = rnd.random()
            if op < 0.5 and i < len(b):
                b[i] ^= 1 << rnd.randrange(8)
            elif op < 0.7 and i < len(b):
                b[i] = rnd.randrange(256)
            elif op < 0.85:
                del b[i : i + rnd.randint(1, 3)]
            else:
                b[i:i] = rnd.randbytes(rnd.randint(1, 3))
        cases.append(bytes(b))
    verdicts = {"ok": 0, "corrupt": 0}
    for block in cases:
        if block[:8] == _codec.XERIAL_MAGIC or block[:4] == b"\xff\x06\x00\x00":
            continue
        try:
            want = snappy_block_reference(block)
        except ValueError:
            want = None
        try:
            got = decompress(block, 2, MiB)
        except TelemetryTooLargeError:
            continue
        except CorruptPayloadError:
            got = None
        assert got == want, block.hex()
        verdicts["ok" if got is not None else "corrupt"] += 1
    assert verdicts["ok"] > 300 and verdicts["corrupt"] > 1000, verdicts


def test_snappy_google_framing_is_rejected(payload):
    framed = bytes(cramjam.snappy.compress(payload))
    assert framed.startswith(_codec.SNAPPY_FRAMING_MAGIC)
    with pytest.raises(CorruptPayloadError, match="framing format") as info:
        decompress(framed, 2, 10 * MiB)
    assert info.value.error_code == 87
    with pytest.raises(CorruptPayloadError, match="framing format"):
        decompress(_codec.SNAPPY_FRAMING_MAGIC, 2, MiB)


@pytest.mark.parametrize("linked", [False, True])  # one block is written independent even when linked
@pytest.mark.parametrize("content_checksum", [False, True])
@pytest.mark.parametrize("block_checksum", [False, True])
@pytest.mark.parametrize("store_size", [False, True])
@pytest.mark.parametrize(
    "block_size",
    [lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX256KB, lz4.frame.BLOCKSIZE_MAX1MB, lz4.frame.BLOCKSIZE_MAX4MB],
)
def test_lz4_frames_from_python_lz4(payload, linked, content_checksum, block_checksum, store_size, block_size):
    frame = lz4.frame.compress(
        payload,
        block_linked=linked,
        content_checksum=content_checksum,
        block_checksum=block_checksum,
        store_size=store_size,
        block_size=block_size,
    )
    if not frame[4] & 0x20:
        # linked blocks: Kafka's Lz4BlockInputStream refuses the frame ("Dependent block stream is unsupported")
        with pytest.raises(CorruptPayloadError, match="linked"):
            decompress(frame, 3, 10 * MiB)
        return
    assert decompress(frame, 3, len(payload)) == payload
    with pytest.raises(TelemetryTooLargeError):
        decompress(frame, 3, len(payload) - 1)
    assert decompress(frame, 3, 10 * MiB) == payload


def test_lz4_small_limits_and_hc(payload):
    small = payload[:5000]
    for level in (0, 3, 9, 16):
        frame = lz4.frame.compress(small, compression_level=level, block_linked=False, store_size=False)
        for limit in (0, 1, 4999):
            with pytest.raises(TelemetryTooLargeError):
                decompress(frame, 3, limit)
        assert decompress(frame, 3, 5000) == small
    # an empty frame (header + end mark) is an empty payload
    assert decompress(lz4.frame.compress(b""), 3, 0) == b""
    assert decompress(compress(b"", 3), 3, 0) == b""


def test_lz4_framing_errors(payload):
    good = compress(payload[:70_000], 3)
    assert decompress(good, 3, MiB) == payload[:70_000]
    bad_hc = bytearray(good)
    bad_hc[6] ^= 0xFF
    cases = {
        "header checksum": bytes(bad_hc),
        "no end mark": good[:-4],
        "truncated end mark": good[:-2],
        "truncated block": good[: len(good) // 2],
        "header only": good[:7],
        "bad magic": b"\x05" + good[1:],
        "skippable frame": b"\x50\x2a\x4d\x18\x00\x00\x00\x00" + good,
    }
    # Kafka's reader stops at the end mark: whatever follows is never read
    for tail in (b"x", good[:5], bytes(3), good):
        assert decompress(good + tail, 3, MiB) == payload[:70_000]
    for _what, data in cases.items():
        with pytest.raises(CorruptPayloadError):
            decompress(data, 3, MiB)
    # a corrupt compressed block
    _header, blocks, _ = lz4_blocks(good)
    stored, _first = blocks[0]
    assert not stored
    corrupt = bytearray(good)
    corrupt[11 : 11 + 40] = b"\xf0" * 40
    with pytest.raises(CorruptPayloadError):
        decompress(bytes(corrupt), 3, MiB)


def _lz4_header(flg: int, bd: int, extra: bytes = b"") -> bytes:
    desc = bytes([flg, bd]) + extra
    return b"\x04\x22\x4d\x18" + desc + bytes([(xxh32(desc) >> 8) & 0xFF])


def test_lz4_descriptor_checks():
    body = b"\x05\x00\x00\x80hello\x00\x00\x00\x00"  # one stored block, then the end mark
    assert decompress(_lz4_header(0x60, 0x40) + body, 3, 5) == b"hello"
    assert decompress(_lz4_header(0x60, 0x70) + body, 3, 5) == b"hello"  # 4 MiB blocks
    with pytest.raises(CorruptPayloadError, match="linked"):  # Kafka: "Dependent block stream is unsupported"
        decompress(_lz4_header(0x40, 0x40) + body, 3, 5)
    for flg, bd, extra in [
        (0xA0, 0x40, b""),  # version 2
        (0x62, 0x40, b""),  # reserved FLG bit
        (0x61, 0x40, b"\x00\x00\x00\x00"),  # dictionary id
        (0x60, 0x30, b""),  # block max id 3
        (0x60, 0x41, b""),  # reserved BD bits
        (0x60, 0xC0, b""),
    ]:
        with pytest.raises(CorruptPayloadError):
            decompress(_lz4_header(flg, bd, extra) + body, 3, MiB)
    # a declared content size is skipped, as Kafka's reader skips it: neither checked nor used as a limit
    sized = _lz4_header(0x68, 0x40, struct.pack("<Q", 5)) + body
    assert decompress(sized, 3, 5) == b"hello"
    with pytest.raises(TelemetryTooLargeError):
        decompress(sized, 3, 4)
    for wrong in (0, 4, 6, 2**40, 2**64 - 1):
        assert decompress(_lz4_header(0x68, 0x40, struct.pack("<Q", wrong)) + body, 3, 5) == b"hello"
    with pytest.raises(CorruptPayloadError):  # but its 8 bytes must be there
        decompress(_lz4_header(0x68, 0x40, b"\x05\x00")[:-1], 3, MiB)
    # block larger than the maximum block size
    with pytest.raises(CorruptPayloadError):
        decompress(_lz4_header(0x60, 0x40) + struct.pack("<I", 0x80010001) + bytes(65537) + bytes(4), 3, MiB)
    # 0x80000000 ends the frame as Kafka's reader reads it (it masks the stored bit off, then sees 0);
    # LZ4F takes it for an empty stored block and wants a real end mark after it
    empty_stored = _lz4_header(0x60, 0x40) + b"\x05\x00\x00\x80hello\x00\x00\x00\x80"
    assert decompress(empty_stored, 3, 5) == b"hello"
    assert decompress(empty_stored + b"\x03\x00\x00\x80abc" + bytes(4), 3, 5) == b"hello"


def test_lz4_block_that_only_decodes_as_size_prefixed_is_corrupt():
    """cramjam retries a failing raw block as "4-byte size + block"; LZ4F and Kafka reject such a block."""
    block = struct.pack("<I", 5) + b"\x50hello"  # as a raw block: a match with offset 0 -> invalid
    frame = _lz4_header(0x60, 0x40) + struct.pack("<I", len(block)) + block + bytes(4)
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(frame)
    with pytest.raises(CorruptPayloadError):
        decompress(frame, 3, MiB)
    with pytest.raises(CorruptPayloadError):
        decompress(frame, 3, 4)


def test_lz4_block_walk_agrees_with_the_lz4_library():
    """The walk that sizes blocks before decoding: exact on encoder output, and never accepts a block the
    LZ4 library rejects (random and mutated blocks, with and without history)."""
    rnd = random.Random(11)
    for n in (0, 1, 12, 13, 100, 5000, 65536):
        data = mixed_bytes(n, seed=n)
        for mode in ("default", "fast", "high_compression"):
            blk = lz4.block.compress(data, store_size=False, mode=mode)
            assert _codec._lz4_block_size(blk) == n
    checked = 0
    for _ in range(20_000):
        if rnd.random() < 0.7:
            blk = bytearray(
                lz4.block.compress(mixed_bytes(rnd.randrange(0, 400), seed=rnd.randrange(50)), store_size=False)
            )
            for _ in range(rnd.randrange(0, 3)):
                blk[rnd.randrange(len(blk))] = rnd.randrange(256)
        else:
            blk = bytearray(rnd.randbytes(rnd.randrange(1, 40)))
        history = rnd.choice((0, 0, 8, 100))
        prefix = rnd.randbytes(history)
        size = _codec._lz4_block_size(bytes(blk), history)
        if size >= 0:
            out = lz4.block.decompress(bytes(blk), uncompressed_size=size, dict=prefix) if size else b""
            assert len(out) == size
            checked += 1
    assert checked > 5000


def test_lz4_block_decoders(payload):
    """Independent blocks decode exactly, with the limit enforced, and every truncation is refused cleanly."""
    for data in (payload[:1], payload[:5000], payload):
        frame = compress(data, 3)
        assert decompress(frame, 3, len(data)) == data
        with pytest.raises(TelemetryTooLargeError):
            decompress(frame, 3, len(data) - 1)
    for _, packed in fuzz_corpus():
        if packed[:4] == _codec.LZ4_FRAME_MAGIC:
            for cut in range(len(packed)):
                raises_kip714(decompress, packed[:cut], 3, MiB)


def test_lz4_checksums(payload):
    data = payload[:100_000]
    frame = lz4.frame.compress(data, content_checksum=True, block_checksum=True, block_linked=False, store_size=False)
    assert decompress(frame, 3, len(data)) == data
    # the content checksum field is XXH32 of the content
    assert struct.unpack("<I", frame[-4:])[0] == xxh32(data)
    # Kafka reads the content checksum field but does not verify it ("TODO: verify this content checksum")
    bad_content = frame[:-1] + bytes([frame[-1] ^ 1])
    assert decompress(bad_content, 3, MiB) == data
    with pytest.raises(CorruptPayloadError):  # the field must be there, though
        decompress(frame[:-1], 3, MiB)
    _, blocks, _ = lz4_blocks(frame)
    first_len = len(blocks[0][1])
    bad_block = bytearray(frame)
    bad_block[7 + 4 + first_len] ^= 1  # first block checksum
    with pytest.raises(CorruptPayloadError):
        decompress(bytes(bad_block), 3, MiB)


def test_lz4_concatenated_frames_are_not_read_past_the_first(payload):
    # Kafka's Lz4BlockInputStream is finished at the first end mark: a second frame is never read, so only
    # the first frame's content is the payload, and whatever the second holds does not matter
    a, b = payload[:70_000], payload[70_000:90_000]
    for second in (compress(b, 3), lz4.frame.compress(b, block_linked=True), compress(b, 3)[:9], b"junk"):
        assert decompress(compress(a, 3) + second, 3, len(a)) == a
    with pytest.raises(TelemetryTooLargeError):
        decompress(compress(a, 3) + compress(b, 3), 3, len(a) - 1)


def test_zstd_frames_from_zstandard(payload):
    for level in (-3, 1, 3, 9, 19):
        for content_size in (True, False):
            for checksum in (True, False):
                cctx = zstandard.ZstdCompressor(level=level, write_content_size=content_size, write_checksum=checksum)
                frame = cctx.compress(payload)
                assert decompress(frame, 4, len(payload)) == payload
                with pytest.raises(TelemetryTooLargeError):
                    decompress(frame, 4, len(payload) - 1)
    # a streamed frame as zstd-jni / librdkafka write it (no content size), with many flushed blocks
    cobj = zstandard.ZstdCompressor(level=3).compressobj()
    pieces = []
    for i in range(0, len(payload), 7000):
        pieces.append(cobj.compress(payload[i : i + 7000]))
        pieces.append(cobj.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK))
    pieces.append(cobj.flush())
    streamed = b"".join(pieces)
    assert streamed[4] & 0xC0 == 0 and not streamed[4] & 0x20  # no content size
    assert decompress(streamed, 4, len(payload)) == payload
    with pytest.raises(TelemetryTooLargeError):
        decompress(streamed, 4, len(payload) - 1)


def test_zstd_java_empty_frame_and_framing_errors(payload):
    # zstd-jni's frame for an empty payload
    assert decompress(bytes.fromhex("28b52ffd2000010000"), 4, 0) == b""
    data = payload[:50_000]
    frame = zstandard.ZstdCompressor(write_content_size=False, write_checksum=True).compress(data)
    skippable = b"\x50\x2a\x4d\x18" + struct.pack("<I", 3) + b"abc"
    assert decompress(skippable + frame + skippable, 4, len(data)) == data
    assert decompress(skippable, 4, 0) == b""
    assert decompress(frame + frame, 4, 2 * len(data)) == data + data
    with pytest.raises(TelemetryTooLargeError):
        decompress(frame + frame, 4, 2 * len(data) - 1)
    bad_checksum = frame[:-1] + bytes([frame[-1] ^ 1])
    plain = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert plain[4] == 0x00
    reserved = frame[:4] + bytes([frame[4] | 0x08]) + frame[5:]
    cases = [
        frame[:-1],
        frame[:5],
        frame[:3],
        frame + b"\x00",
        frame + b"garbage!",
        frame + frame[:6],
        bad_checksum,
        reserved,
        b"\x28\xb5\x2f\xfd",
        skippable[:-1],
        # a frame that needs dictionary 7
        plain[:4] + b"\x01" + plain[5:6] + b"\x07" + plain[6:],
    ]
    for data_ in cases:
        with pytest.raises(CorruptPayloadError):
            decompress(data_, 4, MiB)
    # a frame claiming content size 0 but holding data is corrupt (zstandard alone would return b"")
    sized = zstandard.ZstdCompressor(write_content_size=True).compress(b"x" * 10)
    assert sized[4] == 0x20  # single segment, 1-byte content size
    zero = sized[:5] + b"\x00" + sized[6:]
    assert zstandard.ZstdDecompressor().decompress(zero) == b""
    with pytest.raises(CorruptPayloadError):
        decompress(zero, 4, MiB)


def test_zstd_declared_size_refused_before_decoding():
    # a header claiming 5 GB followed by one tiny raw block: refused from the header alone
    header = b"\x28\xb5\x2f\xfd" + bytes([0xC0, 0x58]) + struct.pack("<Q", 5 * 10**9)
    frame = header + b"\x19\x00\x00" + b"abc"  # last raw block of 3 bytes
    with pytest.raises(TelemetryTooLargeError):
        decompress(frame, 4, MiB)


# ------------------------------------------------------------------------------------------------ limits


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_limit_is_exact_for_every_codec(codec, payload):
    ctype = CODECS[codec]
    for data in (payload[:1], payload[:4096], payload):
        packed = compress(data, ctype)
        assert decompress(packed, ctype, len(data)) == data
        with pytest.raises(TelemetryTooLargeError) as info:
            decompress(packed, ctype, len(data) - 1)
        assert info.value.error_code == 118
        with pytest.raises(TelemetryTooLargeError):
            decompress(packed, ctype, 0)


BOMB = 200 * MiB


def make_bombs() -> dict[str, tuple[int, bytes]]:
    """200 MB of zeros per codec and framing, built in streaming fashion (never 200 MB in memory)."""
    chunk = bytes(MiB)
    n = BOMB // MiB
    bombs = {}
    gz = zlib.compressobj(9, zlib.DEFLATED, 31)
    bombs["gzip"] = (1, b"".join([gz.compress(chunk) for _ in range(n)] + [gz.flush()]))
    block = bytes(cramjam.snappy.compress_raw(bytes(32768)))
    bombs["snappy-xerial"] = (2, _codec.XERIAL_HEADER + (struct.pack(">i", len(block)) + block) * (BOMB // 32768))
    # a raw snappy block of 200 MB of zeros: preamble, a 1-byte literal, then 64-byte copies at offset 1
    varint = bytearray()
    v = BOMB
    while v >= 0x80:
        varint.append(v & 0x7F | 0x80)
        v >>= 7
    varint.append(v)
    copies = (BOMB - 1) // 64
    rest = BOMB - 1 - copies * 64
    tail = bytes([((rest - 1) << 2) | 2, 1, 0]) if rest >= 1 else b""
    bombs["snappy-raw"] = (2, bytes(varint) + b"\x00\x00" + b"\xfe\x01\x00" * copies + tail)
    for linked in (False, True):
        comp = lz4.frame.LZ4FrameCompressor(block_linked=linked, block_size=lz4.frame.BLOCKSIZE_MAX64KB)
        bombs[f"lz4-linked={linked}"] = (
            3,
            b"".join([comp.begin()] + [comp.compress(chunk) for _ in range(n)] + [comp.flush()]),
        )
    comp = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False)
    bombs["lz4-4MB-blocks"] = (3, b"".join([comp.begin()] + [comp.compress(chunk) for _ in range(n)] + [comp.flush()]))
    zobj = zstandard.ZstdCompressor(level=3).compressobj()
    bombs["zstd-no-size"] = (4, b"".join([zobj.compress(chunk) for _ in range(n)] + [zobj.flush()]))
    zobj = zstandard.ZstdCompressor(level=3).compressobj(size=BOMB)
    bombs["zstd-sized"] = (4, b"".join([zobj.compress(chunk) for _ in range(n)] + [zobj.flush()]))
    return bombs


@pytest.fixture(scope="module")
def bombs():
    return make_bombs()


def test_bombs_are_valid(bombs):
    """The bombs really decompress to 200 MB (checked with a streaming reader: never all in memory)."""
    _, zs = bombs["zstd-no-size"]
    reader = zstandard.ZstdDecompressor().stream_reader(zs)
    total = 0
    while chunk := reader.read(8 * MiB):
        assert not chunk.strip(b"\x00")
        total += len(chunk)
    assert total == BOMB
    d = zlib.decompressobj(31)
    total, data = 0, bombs["gzip"][1]
    while data:
        total += len(d.decompress(data, 8 * MiB))
        data = d.unconsumed_tail
    assert total == BOMB and d.eof
    assert cramjam.snappy.decompress_raw_len(bombs["snappy-raw"][1]) == BOMB
    assert len(bombs["snappy-xerial"][1]) < 20 * MiB


@pytest.mark.parametrize(
    "kind",
    [
        "gzip",
        "snappy-xerial",
        "snappy-raw",
        "lz4-linked=False",
        "lz4-linked=True",
        "lz4-4MB-blocks",
        "zstd-no-size",
        "zstd-sized",
    ],
)
def test_bomb_refused_with_small_peak_memory(bombs, kind):
    ctype, data = bombs[kind]
    # linked LZ4 blocks are refused before anything is decoded (Kafka does not read them)
    expected = CorruptPayloadError if kind == "lz4-linked=True" else TelemetryTooLargeError
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        with pytest.raises(expected) as info:
            decompress(data, ctype, MiB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.error_code == (87 if kind == "lz4-linked=True" else 118)
    # about the limit (plus a chunk), whatever the bomb's size
    assert peak < 3 * MiB, f"{kind}: peak {peak} bytes"


@pytest.mark.integration
def test_bomb_resident_memory_in_subprocess():
    """Process RSS (which also sees the codec libraries' own buffers) grows by far less than the bombs."""
    script = f"""
import resource, sys
sys.path.insert(0, {str(pathlib.Path(__file__).parent)!r})
import test_codec as t
from kip714._codec import decompress
from kip714.errors import CorruptPayloadError, TelemetryTooLargeError
bombs = t.make_bombs()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
for kind, (ctype, data) in bombs.items():
    try:
        decompress(data, ctype, 1 << 20)
    except (CorruptPayloadError if kind == "lz4-linked=True" else TelemetryTooLargeError):
        pass
    else:
        raise SystemExit(kind + ' not refused')
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) * 1024)
"""
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    growth = int(res.stdout.strip().splitlines()[-1])
    assert growth < 40 * MiB, growth


# ------------------------------------------------------------------------ truncation and mutation fuzzing


def fuzz_corpus() -> list[tuple[int, bytes]]:
    corpus = {}
    for name in COMPRESSED_CAPTURES:
        ctype, metrics = capture(name)
        corpus[(ctype, metrics)] = None
    plain = otlp_payloads()[0]
    for ctype in (1, 2, 3, 4):
        corpus[(ctype, compress(plain, ctype))] = None
    corpus[(3, lz4.frame.compress(plain, block_linked=False, content_checksum=True, block_checksum=True))] = None
    corpus[(4, zstandard.ZstdCompressor(write_checksum=True).compress(plain))] = None
    corpus[(1, gzip.compress(plain))] = None
    return list(corpus)


@pytest.fixture(scope="module")
def corpus():
    return fuzz_corpus()


def test_truncation_at_every_offset(corpus):
    count = 0
    for ctype, packed in corpus:
        full = decompress(packed, ctype, MiB)
        for cut in range(len(packed)):
            try:
                out = decompress(packed[:cut], ctype, MiB)
            except CorruptPayloadError:
                pass
            else:
                # only a xerial stream cut exactly at a chunk boundary is itself a valid (shorter) stream
                assert detect_framing(packed, ctype) == "xerial" and full.startswith(out), (ctype, cut)
            count += 1
        assert decompress(packed, ctype, len(full)) == full
    assert count > 5000


def test_random_mutations(corpus):
    rnd = random.Random(714)
    outcomes = {"ok": 0, "corrupt": 0, "too-large": 0}
    for _ in range(4000):
        ctype, packed = rnd.choice(corpus)
        data = bytearray(packed)
        for _ in range(rnd.choice((1, 1, 2, 3, 8))):
            pos = rnd.randrange(len(data))
            op = rnd.random()
            if op < 0.6:
                data[pos] ^= 1 << rnd.randrange(8)
            elif op < 0.8:
                data[pos] = rnd.randrange(256)
            elif op < 0.9:
                del data[pos]
            else:
                data.insert(pos, rnd.randrange(256))
        limit = rnd.choice((MiB, 1450, 3000, 0))
        data = bytes(data)
        try:
            out = decompress(data, ctype, limit)
        except TelemetryTooLargeError:
            outcomes["too-large"] += 1
            continue
        except CorruptPayloadError:
            outcomes["corrupt"] += 1
            out = None
        # differential check against the codec packages: same verdict, same bytes
        try:
            expected = reference_decompress(ctype, data)
        except Exception:
            expected = None
        assert out == expected, (ctype, data.hex())
        if out is not None:
            outcomes["ok"] += 1
    assert outcomes["corrupt"] > 1000 and outcomes["too-large"] > 0 and outcomes["ok"] > 100


@settings(max_examples=examples(400), deadline=None)
@given(data=st.binary(max_size=200), ctype=st.integers(min_value=1, max_value=4), limit=st.integers(0, 5000))
def test_arbitrary_bytes_raise_only_kip714_errors(data, ctype, limit):
    raises_kip714(decompress, data, ctype, limit)


@settings(max_examples=examples(300), deadline=None)
@given(
    prefix=st.sampled_from(
        [b"\x04\x22\x4d\x18", b"\x28\xb5\x2f\xfd", b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01", b"\x1f\x8b\x08"]
    ),
    rest=st.binary(max_size=300),
    limit=st.integers(0, 100_000),
)
def test_arbitrary_bytes_after_magic(prefix, rest, limit):
    ctype = {4: 3, 0x28: 4, 0x82: 2, 0x1F: 1}[prefix[0]]
    raises_kip714(decompress, prefix + rest, ctype, limit)


# --------------------------------------------------------------------------------------- other details


def test_xxh32_matches_reference_and_lz4():
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF
    rnd = random.Random(5)
    for n in (0, 1, 3, 4, 15, 16, 17, 31, 32, 33, 100, 1000, 70_000):
        data = rnd.randbytes(n)
        for seed in (0, 1, 0x9E3779B1, 0xFFFFFFFF):
            assert xxh32(data, seed) == xxh32_reference(data, seed)
        frame = lz4.frame.compress(data, content_checksum=True)
        assert struct.unpack("<I", frame[-4:])[0] == xxh32(data)
    assert xxh32(memoryview(b"xabc")[1:]) == 0x32D153FF
    with pytest.raises(ValueError):
        xxh32(b"", -1)
    with pytest.raises(ValueError):
        xxh32(b"", 2**32)


def test_threads_share_nothing_mutable(payload):
    """Contexts are pooled per call; concurrent callers on every codec get correct, independent results."""
    work = []
    for ctype in (1, 2, 3, 4):
        for size in (1000, 50_000, 300_000):
            data = payload[:size]
            work.append((ctype, compress(data, ctype), data))
    errors = []

    def run(item):
        ctype, packed, data = item
        for _ in range(20):
            if decompress(packed, ctype, len(data)) != data:
                errors.append(ctype)
            try:
                decompress(packed, ctype, len(data) - 1)
            except TelemetryTooLargeError:
                pass
            else:
                errors.append(("limit", ctype))

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(run, work * 4))
    assert not errors


def test_module_constants():
    assert bytes.fromhex("82534e41505059000000000100000001") == _codec.XERIAL_HEADER
    assert _codec.XERIAL_BLOCK_SIZE == 32768
    assert (_codec.NONE, _codec.GZIP, _codec.SNAPPY, _codec.LZ4, _codec.ZSTD) == (0, 1, 2, 3, 4)
    assert _codec.LZ4_FRAME_MAGIC == b"\x04\x22\x4d\x18"
    assert _codec.ZSTD_FRAME_MAGIC == b"\x28\xb5\x2f\xfd"
    assert set(_codec.__all__) <= set(dir(_codec))


# ---- regressions found by the fuzzers (fuzz/corpus/*/regress-*) --------------------------------------


def test_lz4_block_needing_slack_is_decoded_like_kafka():
    # A block that breaks LZ4's end-of-block rule: liblz4 decodes it only with room past its 651 bytes.
    # Kafka's reader gives every block its full capacity, so it accepts it, whatever the limit.
    data = bytes.fromhex("04224d18604082110000007f6b695537ce34200700ffff703731342000000000")
    assert len(decompress(data, 3, 1 << 20)) == 651
    assert decompress(data, 3, 651) == decompress(data, 3, 1 << 20)
    with pytest.raises(TelemetryTooLargeError):
        decompress(data, 3, 650)


def test_lz4_payload_just_over_the_limit_is_too_large_not_corrupt():
    import lz4.frame as lf

    raw = bytes(range(256)) * 9 + b"x" * 52  # 2356 bytes
    data = lf.compress(raw, block_linked=False, content_checksum=False, store_size=False)
    assert decompress(data, 3, 2356) == raw
    for limit in (2355, 2353, 2000):
        with pytest.raises(TelemetryTooLargeError):
            decompress(data, 3, limit)


def test_zstd_frame_shorter_than_its_declared_size_is_corrupt():
    data = bytes.fromhex("28b52ffda000810b00010000")
    with pytest.raises(CorruptPayloadError, match="declares 753920"):
        decompress(data, 4, 1 << 20)
    with pytest.raises(TelemetryTooLargeError):
        decompress(data, 4, 0)
