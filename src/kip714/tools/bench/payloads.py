"""The inputs the groups measure with: the bundled librdkafka captures and realistic OTLP payloads of any
size made from them, the same on every run."""

from __future__ import annotations

import functools
import random

import kip714
from kip714._enums import DEFAULT_ACCEPTED_COMPRESSION_TYPES, DEFAULT_TELEMETRY_MAX_BYTES
from kip714.tools import SAMPLES

__all__ = [
    "ACCEPTED",
    "KB",
    "LIMIT",
    "capture_payload",
    "java_payload",
    "otlp_like",
    "sample_capture",
    "sample_payloads",
]

KB = 1024
LIMIT = DEFAULT_TELEMETRY_MAX_BYTES  # the decompression cap
#: The broker's accepted compression types, as ints.
ACCEPTED = tuple(int(c) for c in DEFAULT_ACCEPTED_COMPRESSION_TYPES)


def capture_payload(compression_type: int) -> bytes:
    """The compressed OTLP payload of a real librdkafka push with this codec (the package's samples)."""
    for path in sorted(SAMPLES.glob(f"*_{kip714.CompressionType(compression_type).name.lower()}.bin")):
        body = kip714.decode_request(path.read_bytes()[4:]).body
        if type(body) is kip714.PushTelemetryRequest and body.metrics is not None and body.metrics_size:
            return bytes(body.metrics)
    raise LookupError(f"no sample push with compression type {compression_type}")


def sample_capture(name: str) -> tuple[bytes, int]:
    """``(compressed payload, compression type)`` of the push in the bundled capture ``name`` (a file of
    ``kip714.tools.SAMPLES``, e.g. ``producer_zstd_push_01_zstd.bin``: librdkafka's 1.45 KB producer push,
    464 bytes zstd-compressed)."""
    frames, _ = kip714.split_frames((SAMPLES / name).read_bytes())
    body = kip714.decode_request(frames[0]).body
    return bytes(body.metrics), int(body.compression_type)


@functools.lru_cache(maxsize=8)
def java_payload(target: int = 4 * KB, seed: int = 7) -> bytes:
    """An uncompressed OTLP payload of at least ``target`` bytes laid out as Apache Kafka's Java producer
    sends it (``MetricsCollector(layout="java")``: one ResourceMetrics per data point; the producer's
    metrics, then per-node ones added until the size is reached; delta sums, as a broker that asks for
    delta temporality, ``kip714 serve``'s default, gets), values drawn from ``seed``."""
    from kip714.client.naming import telemetry_metric_key
    from kip714.client.otlp_encode import MetricsCollector, MetricSelector
    from kip714.tools.simulate.clients import JAVA_PRODUCER_METRICS

    rnd = random.Random(seed)
    now = [1_760_000_000_000_000_000]
    c = MetricsCollector(layout="java", clock_ns=lambda: now[0])
    c.set_resource_attribute("client_rack", "rack-1")
    attrs = {"client-id": "producer-1"}
    for group, name, kind, _ in JAVA_PRODUCER_METRICS:
        metric, labels = telemetry_metric_key(group, name, attrs)
        if kind == "sum":
            c.counter(metric, labels, value_type="double").add(float(rnd.randrange(1, 10**6)))
        else:
            c.gauge(metric, labels, value_type="double").set(rnd.random() * 100)
    everything = MetricSelector.from_requested(["*"])
    node = 0
    while True:
        now[0] += 30_000_000_000
        payload = c.collect(delta=True, selector=everything)
        if len(payload) >= target:
            return payload
        for stat in ("request-latency-avg", "request-latency-max", "request-total"):
            metric, labels = telemetry_metric_key("producer-node-metrics", stat, {**attrs, "node-id": f"node-{node}"})
            if stat == "request-total":
                c.counter(metric, labels, value_type="double").add(float(rnd.randrange(1, 10**5)))
            else:
                c.gauge(metric, labels, value_type="double").set(rnd.random() * 50)
        node += 1


@functools.cache
def sample_payloads() -> tuple[bytes, ...]:
    """The distinct uncompressed OTLP payloads of the bundled librdkafka captures."""
    seen: dict[bytes, None] = {}
    for path in sorted(SAMPLES.glob("*.bin")):
        frames, _ = kip714.split_frames(path.read_bytes())
        body = kip714.decode_request(frames[0]).body
        if body.metrics_size:
            seen[bytes(kip714.decompress(body.metrics, body.compression_type, LIMIT))] = None
    return tuple(seen)


@functools.lru_cache(maxsize=64)
def otlp_like(target: int, seed: int = 1) -> bytes:
    """A realistic OTLP MetricsData of about ``target`` bytes (at least, within one capture): the capture
    payloads concatenated (a valid MetricsData: repeated fields merge) with varied values and times."""
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    rnd = random.Random(seed)
    base = sample_payloads()
    parts: list[bytes] = []
    total = 0
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
        if parts and total + len(blob) > LIMIT:
            break
        parts.append(blob)
        total += len(blob)
    return b"".join(parts)


# ------------------------------------------------------------------------------------------ the run
