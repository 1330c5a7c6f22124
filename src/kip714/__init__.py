"""kip714 — the wire side of Apache Kafka KIP-714 client telemetry, with a Cython core."""

from __future__ import annotations

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

__version__ = "0.1.0"

from ._protocol import (
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
from ._crc import compute_subscription_id, crc32c, uuid_hash
from ._codec import compress, decompress
from .subscriptions import ClientInfo, Resolution, Subscription, SubscriptionRegistry, kafka_uuid_string
from ._instances import InstanceTable
from .broker import BackgroundReceiver, ReceiverContext, TelemetryBroker, TelemetryPayload, TelemetryReceiver
from .naming import telemetry_attribute_key, telemetry_attributes, telemetry_metric_key, telemetry_metric_name
from .otlp_encode import MetricsCollector, MetricSelector
from .client import (
    ClientTelemetry,
    ClientTelemetryState,
    ClientTelemetrySubscription,
    choose_compression,
    compress_payload,
)
from ._otlp import decode_metrics, decode_metrics_batch
