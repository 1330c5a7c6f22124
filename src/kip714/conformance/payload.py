"""What is inside a push, read independently of kip714's own OTLP walker: decompression with the declared
codec (``kip714.decompress``, bounded), then opentelemetry-proto's ``MetricsData``; metric names, attribute
keys and temporalities for the judges."""

from __future__ import annotations

from dataclasses import dataclass, field

from google.protobuf.message import DecodeError
from opentelemetry.proto.metrics.v1 import metrics_pb2

from .._codec import decompress
from ..errors import Kip714Error
from .trace import Exchange, codec_name

__all__ = ["Payload", "name_problems", "read_payload"]

#: OTLP's AggregationTemporality numbers.
DELTA, CUMULATIVE = 1, 2
TEMPORALITY_NAMES = {0: "unspecified", DELTA: "delta", CUMULATIVE: "cumulative"}
#: The largest decompressed payload the lab reads (Kafka's telemetry.max.bytes default is 1 MiB).
MAX_DECOMPRESSED = 64 * 1024 * 1024


@dataclass
class Payload:
    """One push's Metrics field, read."""

    null: bool = False
    wire_bytes: int = 0
    #: why it could not be read (decompression or protobuf), None when it was
    problem: str | None = None
    names: list[str] = field(default_factory=list)
    #: (metric, kind, temporality) of every sum, histogram and exponential histogram
    temporalities: list[tuple[str, str, int]] = field(default_factory=list)
    attribute_keys: set[str] = field(default_factory=set)

    @property
    def empty(self) -> bool:
        """No metrics (a zero-byte blob, or MetricsData without metrics)."""
        return not self.null and self.problem is None and not self.names


def read_payload(ex: Exchange) -> Payload:
    """Decompress and decode the Metrics of the push ``ex``."""
    if ex.metrics_null:
        return Payload(null=True, problem="the Metrics field is null")
    data = ex.metrics or b""
    out = Payload(wire_bytes=len(data))
    if not data:
        return out
    ctype = int(ex.request.get("compression_type", 0))
    try:
        raw = bytes(decompress(data, ctype, MAX_DECOMPRESSED))
    except Kip714Error as exc:
        out.problem = f"does not decompress as {codec_name(ctype)} (its declared CompressionType {ctype}): {exc}"
        return out
    if not raw:
        return out
    message = metrics_pb2.MetricsData()
    try:
        used = message.ParseFromString(raw)
    except DecodeError as exc:
        out.problem = f"is not an OTLP MetricsData message after {codec_name(ctype)} decompression: {exc}"
        return out
    if used != len(raw):
        out.problem = f"leaves {len(raw) - used} bytes after the MetricsData message"
        return out
    for rm in message.resource_metrics:
        for attr in rm.resource.attributes:
            out.attribute_keys.add(attr.key)
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                out.names.append(metric.name)
                kind = metric.WhichOneof("data")
                points: list[object] = []
                if kind == "sum":
                    out.temporalities.append((metric.name, kind, metric.sum.aggregation_temporality))
                    points = list(metric.sum.data_points)
                elif kind == "histogram":
                    out.temporalities.append((metric.name, kind, metric.histogram.aggregation_temporality))
                    points = list(metric.histogram.data_points)
                elif kind == "exponential_histogram":
                    out.temporalities.append((metric.name, kind, metric.exponential_histogram.aggregation_temporality))
                    points = list(metric.exponential_histogram.data_points)
                elif kind == "gauge":
                    points = list(metric.gauge.data_points)
                elif kind == "summary":
                    points = list(metric.summary.data_points)
                for point in points:
                    for attr in getattr(point, "attributes", ()):
                        out.attribute_keys.add(attr.key)
    return out


def name_problems(name: str) -> list[str]:
    """What breaks KIP-714's naming rule in a metric name: every '-' of Kafka's group and metric names becomes
    '.', segments are non-empty, and a name lives under a namespace ("org.apache.kafka." for Kafka's metrics,
    a reverse domain name for others), so it has at least three segments. Case is not judged (the KIP says
    nothing of it)."""
    problems = []
    if "-" in name:
        problems.append("contains '-'")
    segments = name.split(".")
    if any(not s for s in segments):
        problems.append("has an empty dot-separated segment")
    if len(segments) < 3:
        problems.append("has no namespace (fewer than three dot-separated segments)")
    if any(c.isspace() for c in name):
        problems.append("contains whitespace")
    return problems
