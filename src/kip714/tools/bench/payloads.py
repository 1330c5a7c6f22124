"""The inputs the groups measure with: the bundled librdkafka captures and realistic OTLP payloads of any
size made from them, the same on every run."""

from __future__ import annotations

import functools
import random

import kip714
from kip714._enums import DEFAULT_ACCEPTED_COMPRESSION_TYPES, DEFAULT_TELEMETRY_MAX_BYTES
from kip714.tools import SAMPLES

__all__ = ["ACCEPTED", "KB", "LIMIT", "capture_payload", "otlp_like", "sample_payloads"]

KB = 1024
LIMIT = DEFAULT_TELEMETRY_MAX_BYTES  # the decompression cap
#: The broker's accepted compression types, as ints.
ACCEPTED = tuple(int(c) for c in DEFAULT_ACCEPTED_COMPRESSION_TYPES)


def capture_payload(compression_type: int) -> bytes:
    """The compressed OTLP payload of a real librdkafka push with this codec (the package's samples)."""
    for path in sorted(SAMPLES.glob(f"*_{kip714.CompressionType(compression_type).name.lower()}.bin")):
        body = kip714.decode_request(path.read_bytes()[4:]).body
        if type(body) is kip714.PushTelemetryRequest and body.metrics is not None and len(body.metrics):
            return bytes(body.metrics)
    raise LookupError(f"no sample push with compression type {compression_type}")


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
        if parts and total + len(blob) > LIMIT:
            break
        parts.append(blob)
        total += len(blob)
    return b"".join(parts)


# ------------------------------------------------------------------------------------------ the run
