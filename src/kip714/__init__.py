"""kip714 — the wire side of Apache Kafka KIP-714 client telemetry, with a Cython core.

The public API, in the order of the data flow: the wire (frames and messages), the codecs, broker decisions,
the client half, endpoints, sinks, OTLP decoding. ``kip714.spark`` (Spark functions and pipeline) is imported
on its own. ``docs/api.md`` lists every name on one page."""


__version__ = "0.1.0"

from ._enums import ApiKey, CompressionType, ErrorCode
from .errors import (
    CorruptPayloadError,
    FrameTooLargeError,
    InvalidConfigError,
    InvalidRequestError,
    Kip714Error,
    MalformedFrameError,
    TelemetryTooLargeError,
    UnsupportedApiKeyError,
    UnsupportedCompressionTypeError,
    UnsupportedVersionError,
)
from .wire import (
    DEFAULT_MAX_FRAME_BYTES,
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FinalizedFeature,
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    Message,
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
    PushTelemetryRequest,
    PushTelemetryResponse,
    Request,
    RequestHeader,
    Response,
    ResponseHeader,
    SupportedFeature,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    message_class,
    split_frames,
)
from .codec import compress, crc32c, decompress
from ._crc import compute_subscription_id, uuid_hash
from ._instances import InstanceTable
from .broker import (
    BackgroundReceiver,
    ClientInfo,
    ReceiverContext,
    Resolution,
    Subscription,
    SubscriptionRegistry,
    TelemetryBroker,
    TelemetryPayload,
    TelemetryReceiver,
    kafka_uuid_string,
)
from .client import (
    ClientTelemetry,
    ClientTelemetryState,
    ClientTelemetrySubscription,
    MetricSelector,
    MetricsCollector,
    choose_compression,
    compress_payload,
    telemetry_attribute_key,
    telemetry_attributes,
    telemetry_metric_key,
    telemetry_metric_name,
)
from .otlp import decode_metrics, decode_metrics_batch

__all__ = [
    "__version__",
    # Kafka's numbers and the exceptions
    "ApiKey", "CompressionType", "ErrorCode",
    "Kip714Error", "CorruptPayloadError", "FrameTooLargeError", "InvalidConfigError", "InvalidRequestError",
    "MalformedFrameError", "TelemetryTooLargeError", "UnsupportedApiKeyError", "UnsupportedCompressionTypeError",
    "UnsupportedVersionError",
    # wire
    "DEFAULT_MAX_FRAME_BYTES", "ApiVersion", "ApiVersionsRequest", "ApiVersionsResponse", "FinalizedFeature",
    "GetTelemetrySubscriptionsRequest", "GetTelemetrySubscriptionsResponse", "Message", "MetadataRequest",
    "MetadataRequestTopic", "MetadataResponse", "MetadataResponseBroker", "MetadataResponsePartition",
    "MetadataResponseTopic", "PushTelemetryRequest", "PushTelemetryResponse", "Request", "RequestHeader",
    "Response", "ResponseHeader", "SupportedFeature", "decode_request", "decode_request_header",
    "decode_response", "encode_request", "encode_response", "message_class", "split_frames",
    # codecs, CRC32C and SubscriptionIds
    "compress", "decompress", "crc32c", "compute_subscription_id", "uuid_hash",
    # broker decisions
    "ClientInfo", "Resolution", "Subscription", "SubscriptionRegistry", "kafka_uuid_string", "InstanceTable",
    "TelemetryBroker", "TelemetryPayload", "TelemetryReceiver", "ReceiverContext", "BackgroundReceiver",
    # client half
    "ClientTelemetry", "ClientTelemetryState", "ClientTelemetrySubscription", "MetricSelector", "MetricsCollector",
    "choose_compression", "compress_payload", "telemetry_attribute_key", "telemetry_attributes",
    "telemetry_metric_key", "telemetry_metric_name",
    # OTLP → Arrow
    "decode_metrics", "decode_metrics_batch",
]
