"""The Kafka wire (public): size-prefixed frames, request/response headers and the message bodies kip714
speaks.

``__all__`` is the public part: the frame functions, ``message_class``, the header and envelope classes
(``RequestHeader``, ``Request``, ...) and every message class: GetTelemetrySubscriptions (71) and
PushTelemetry (72) v0, ApiVersions (18) v0-v4, Metadata (3) v0-v13 with their structs. The frame functions
and the four KIP-714 messages are also in ``kip714``. Frames carry no size prefix unless a function says so
(``encode_request`` / ``encode_response`` return size-prefixed frames, ``split_frames`` cuts a
size-prefixed stream). Implemented natively in ``kip714._protocol`` (``src/_native/``); this package is its
Python face."""

from __future__ import annotations

from .._protocol import (
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

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "split_frames",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "message_class",
    "Message",
    "Request",
    "Response",
    "RequestHeader",
    "ResponseHeader",
    "GetTelemetrySubscriptionsRequest",
    "GetTelemetrySubscriptionsResponse",
    "PushTelemetryRequest",
    "PushTelemetryResponse",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "ApiVersion",
    "SupportedFeature",
    "FinalizedFeature",
    "MetadataRequest",
    "MetadataRequestTopic",
    "MetadataResponse",
    "MetadataResponseBroker",
    "MetadataResponseTopic",
    "MetadataResponsePartition",
]
