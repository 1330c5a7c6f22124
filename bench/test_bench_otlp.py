"""OTLP MetricsData → rows: kip714.decode_metrics (native walker → Arrow) against upb + Python.

Run: ``python -m pytest bench/test_bench_otlp.py --benchmark-only --benchmark-columns=min,median,mean``

One group per payload size. The payloads are KIP-714-like (``kafka_payload`` in
tests/test_otlp_decode.py): many ``org.apache.kafka.*`` gauges and sums, 1–4 points each, 1–2 string
attributes per point, one resource with two attributes and one scope — what a Kafka client pushes.
Contenders, measured the same way (the ``measure`` fixture's inner loop):

* ``native``: ``kip714.decode_metrics(payload)`` → ``pyarrow.Table`` (29 columns);
* ``upb+python``: ``kip714.otlp.reference.flatten(payload)`` — ``MetricsData.ParseFromString`` with the upb
  backend, then the reference Python walk to one dict per data point (no Arrow at all);
* ``upb-parse-only`` (100 KB group): just ``ParseFromString``, for scale.

Each native benchmark stores ``rows``, ``payload_bytes`` and ``rows_per_s`` in its extra_info.
"""

from __future__ import annotations

import pytest

from kip714.otlp import reference as otlp_pb
from kip714._otlp import decode_metrics, decode_metrics_batch
from test_otlp_decode import CAPTURE_PAYLOADS, kafka_payload

SIZES = {"1KB": 1_000, "4KB": 4_000, "100KB": 100_000, "1MB": 1_000_000}
PAYLOADS = {name: kafka_payload(size, seed=size) for name, size in SIZES.items()}


def _parse(data):
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

    return MetricsData.FromString(data)


@pytest.mark.parametrize("size", list(SIZES))
def test_native(benchmark, measure, size):
    benchmark.group = f"otlp-decode-{size}"
    data = PAYLOADS[size]
    rows = decode_metrics(data).num_rows
    measure(decode_metrics, data)
    benchmark.extra_info.update(rows=rows, payload_bytes=len(data),
                                rows_per_s=rows / benchmark.stats.stats.median)


@pytest.mark.parametrize("size", list(SIZES))
def test_upb_python(benchmark, measure, size):
    from google.protobuf.internal import api_implementation

    assert api_implementation.Type() == "upb"
    benchmark.group = f"otlp-decode-{size}"
    data = PAYLOADS[size]
    rows = len(otlp_pb.flatten(data))
    measure(otlp_pb.flatten, data)
    benchmark.extra_info.update(rows=rows, payload_bytes=len(data))


def test_upb_parse_only(benchmark, measure):
    benchmark.group = "otlp-decode-100KB"
    measure(_parse, PAYLOADS["100KB"])


def test_native_batch_of_captures(benchmark, measure):
    """All the real librdkafka payloads (decompressed) in one decode_metrics_batch call."""
    benchmark.group = "otlp-decode-captures"
    payloads = [p for _, p in CAPTURE_PAYLOADS]
    rows = decode_metrics_batch(payloads).num_rows
    measure(decode_metrics_batch, payloads)
    benchmark.extra_info.update(rows=rows, payloads=len(payloads))


def test_native_one_by_one_captures(benchmark, measure):
    benchmark.group = "otlp-decode-captures"
    payloads = [p for _, p in CAPTURE_PAYLOADS]
    measure(lambda: [decode_metrics(p) for p in payloads])


def test_upb_python_captures(benchmark, measure):
    benchmark.group = "otlp-decode-captures"
    payloads = [p for _, p in CAPTURE_PAYLOADS]
    measure(lambda: [otlp_pb.flatten(p) for p in payloads])
