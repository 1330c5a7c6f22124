"""The Kafka wire: size-prefixed frames, request/response headers and the message bodies kip714 speaks.

Implemented natively in ``kip714._protocol`` (``src/_native/``); this package is its Python face. Frames
carry no size prefix unless a function says so (``encode_request`` / ``encode_response`` return
size-prefixed frames, ``split_frames`` cuts a size-prefixed stream)."""

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
    "DEFAULT_MAX_FRAME_BYTES", "ApiVersion", "ApiVersionsRequest", "ApiVersionsResponse", "FinalizedFeature",
    "GetTelemetrySubscriptionsRequest", "GetTelemetrySubscriptionsResponse", "Message", "MetadataRequest",
    "MetadataRequestTopic", "MetadataResponse", "MetadataResponseBroker", "MetadataResponsePartition",
    "MetadataResponseTopic", "PushTelemetryRequest", "PushTelemetryResponse", "Request", "RequestHeader",
    "Response", "ResponseHeader", "SupportedFeature", "decode_request", "decode_request_header",
    "decode_response", "encode_request", "encode_response", "message_class", "split_frames",
]
