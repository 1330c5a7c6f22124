"""Decompression dispatch: kip714.decompress against calling the codec package directly on the same payload.

Payloads are realistic OTLP MetricsData (the librdkafka captures' payloads with varied values and
timestamps, concatenated) of about 4 KB and 100 KB, compressed in the framing real clients send:
zstd frames without a content size, LZ4 frames with 64 KiB independent blocks, raw snappy blocks (and
xerial for Java clients), gzip members.

Run: ``python -m pytest bench/test_bench_codec.py --benchmark-only --benchmark-columns=min,median,mean``
"""

from __future__ import annotations

import gzip
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard

from kip714._codec import compress, decompress
from test_codec import otlp_like  # bench/conftest.py puts tests/ on sys.path

LIMIT = 1 << 20  # Kafka's default telemetry.max.bytes
PAYLOADS = {"4KB": otlp_like(3000, seed=4), "100KB": otlp_like(100 * 1024, seed=1)}

_dctx = zstandard.ZstdDecompressor()


def _framings(data: bytes) -> dict[str, bytes]:
    return {
        "zstd": zstandard.ZstdCompressor(level=3, write_content_size=False).compress(data),
        "lz4": compress(data, 3),
        "snappy": bytes(cramjam.snappy.compress_raw(data)),
        "snappy-xerial": compress(data, 2),
        "gzip": gzip.compress(data, mtime=0),
    }


COMPRESSED = {size: _framings(data) for size, data in PAYLOADS.items()}
CTYPE = {"zstd": 4, "lz4": 3, "snappy": 2, "snappy-xerial": 2, "gzip": 1}

# The direct library call for each framing; its output must equal the payload (as bytes or a buffer).
DIRECT = {
    "zstd": lambda c: _dctx.decompress(c, max_output_size=LIMIT),
    "lz4": lambda c: lz4.frame.decompress(c),
    "snappy": lambda c: cramjam.snappy.decompress_raw(c),
    "snappy-xerial": None,  # no library decodes xerial in one call; compared with the raw block instead
    "gzip": lambda c: zlib.decompress(c, 31),
}


def _kafka_python_xerial():
    kafka_codec = pytest.importorskip("kafka.codec")
    return kafka_codec.snappy_decode


@pytest.mark.parametrize("size", list(PAYLOADS))
@pytest.mark.parametrize("codec", list(CTYPE))
@pytest.mark.parametrize("impl", ["kip714", "direct"])
def test_decompress(benchmark, measure, impl, codec, size):
    benchmark.group = f"decompress-{codec}-{size}"
    data = PAYLOADS[size]
    packed = COMPRESSED[size][codec]
    benchmark.extra_info.update(payload=len(data), compressed=len(packed))
    if impl == "kip714":
        ctype = CTYPE[codec]
        result = measure(decompress, packed, ctype, LIMIT)
    elif codec == "snappy-xerial":
        # the nearest direct call: the same payload as one raw snappy block
        result = measure(cramjam.snappy.decompress_raw, COMPRESSED[size]["snappy"])
    else:
        result = measure(DIRECT[codec], packed)
    assert bytes(result) == data


@pytest.mark.parametrize("size", list(PAYLOADS))
def test_decompress_xerial_kafka_python(benchmark, measure, size):
    """kafka-python's xerial decoder (a Python loop over chunks), for reference."""
    snappy_decode = _kafka_python_xerial()
    benchmark.group = f"decompress-snappy-xerial-{size}"
    packed = COMPRESSED[size]["snappy-xerial"]
    assert measure(snappy_decode, packed) == PAYLOADS[size]


@pytest.mark.parametrize("size", list(PAYLOADS))
@pytest.mark.parametrize("codec", ["zstd", "lz4"])
def test_decompress_with_content_size(benchmark, measure, codec, size):
    """Frames that declare their content size (kip714.compress writes one for zstd; python-lz4 by default)."""
    benchmark.group = f"decompress-{codec}-sized-{size}"
    data = PAYLOADS[size]
    if codec == "zstd":
        packed = zstandard.ZstdCompressor(level=3).compress(data)
    else:
        packed = lz4.frame.compress(data, block_linked=False, store_size=True)
    assert measure(decompress, packed, CTYPE[codec], LIMIT) == data


@pytest.mark.parametrize("size", list(PAYLOADS))
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compress(benchmark, measure, codec, size):
    benchmark.group = f"compress-{size}"
    data = PAYLOADS[size]
    ctype = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[codec]
    packed = measure(compress, data, ctype)
    assert decompress(packed, ctype, len(data)) == data
