"""Kafka's numbering for API keys, error codes and compression types."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ApiKey", "ErrorCode", "CompressionType"]


class ApiKey(IntEnum):
    """Kafka request API keys (the ones kip714 speaks plus the common ones clients send)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    FIND_COORDINATOR = 10
    API_VERSIONS = 18
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    LIST_CLIENT_METRICS_RESOURCES = 74


class ErrorCode(IntEnum):
    """Kafka protocol error codes (``org.apache.kafka.common.protocol.Errors``)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    CORRUPT_MESSAGE = 2
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_VERSION = 35
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    UNSUPPORTED_COMPRESSION_TYPE = 76
    INVALID_RECORD = 87
    THROTTLING_QUOTA_EXCEEDED = 89
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118


class CompressionType(IntEnum):
    """Record/telemetry compression ids (``CompressionType.forId``)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4
