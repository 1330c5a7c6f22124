"""kip714 — the wire side of Apache Kafka KIP-714 client telemetry, with a Cython core.

The public API is the union of the subpackages' ``__all__``, in the order of the data flow: the wire
(frames and messages), the codecs, broker decisions, the client half, the proxy endpoint, OTLP decoding,
the exporters (Prometheus exposition, OTLP forwarding). ``kip714.spark``
(Spark functions and pipeline) is imported on its own. ``docs/api.md`` lists every name on one page."""

__version__ = "0.1.0"

from . import broker, client, codec, errors, wire
from ._enums import ApiKey, CompressionType, ErrorCode
from .broker import *  # noqa: F403  (each subpackage's __all__ is its public part)
from .client import *  # noqa: F403
from .codec import *  # noqa: F403
from .errors import *  # noqa: F403
from .endpoint import TelemetryProxy
from .otlp import decode_metrics, decode_metrics_batch
from .sinks.otlp_forward import OtlpForwarder
from .sinks.prometheus import PrometheusExporter
from .wire import *  # noqa: F403

__all__ = [
    "__version__", "ApiKey", "CompressionType", "ErrorCode",
    *errors.__all__, *wire.__all__, *codec.__all__, *broker.__all__, *client.__all__,
    "TelemetryProxy", "decode_metrics", "decode_metrics_batch", "PrometheusExporter", "OtlpForwarder",
]
