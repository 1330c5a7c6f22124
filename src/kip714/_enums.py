"""Kafka's numbers: API keys, error codes, compression types, and the defaults kip714 shares with Kafka.

Each of these facts has its home here; the native core mirrors the few it needs in
``src/_native/kafka_constants.pxd`` (checked against this module by the tests)."""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "ApiKey",
    "ErrorCode",
    "CompressionType",
    "ConfigResourceType",
    "ConfigSource",
    "ConfigType",
    "AlterConfigOp",
    "COMPRESSION_NAMES",
    "DEFAULT_ACCEPTED_COMPRESSION_TYPES",
    "DEFAULT_TELEMETRY_MAX_BYTES",
    "SERVE_FRAME_HEADROOM",
    "DEFAULT_MAX_BUFFERED_BYTES",
    "INSTANCE_CACHE_MAX_SIZE",
    "INSTANCE_CACHE_EXPIRY_MS",
    "serve_max_frame_bytes",
    "compression_type_from_name",
]


class ApiKey(IntEnum):
    """Kafka request API keys (the ones kip714 speaks plus the common ones clients send)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    FIND_COORDINATOR = 10
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    SASL_AUTHENTICATE = 36
    INCREMENTAL_ALTER_CONFIGS = 44
    DESCRIBE_QUORUM = 55
    DESCRIBE_CLUSTER = 60
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    LIST_CONFIG_RESOURCES = 74
    #: the name of key 74 before Kafka 4.1 (KIP-1142), kept as an alias
    LIST_CLIENT_METRICS_RESOURCES = 74
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79


class ErrorCode(IntEnum):
    """Kafka protocol error codes (``org.apache.kafka.common.protocol.Errors``)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    REQUEST_TIMED_OUT = 7
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_VERSION = 35
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    KAFKA_STORAGE_ERROR = 56
    UNSUPPORTED_COMPRESSION_TYPE = 76
    INVALID_RECORD = 87
    THROTTLING_QUOTA_EXCEEDED = 89
    UNKNOWN_TOPIC_ID = 100
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118


class ConfigResourceType(IntEnum):
    """Resource types of the config admin APIs (``ConfigResource.Type``)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(IntEnum):
    """Where a described config comes from (``DescribeConfigsResponse.ConfigSource``)."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigType(IntEnum):
    """The type of a described config (``DescribeConfigsResponse.ConfigType``, v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class AlterConfigOp(IntEnum):
    """The operations of IncrementalAlterConfigs (``AlterConfigOp.OpType``)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class CompressionType(IntEnum):
    """Record/telemetry compression ids (``CompressionType.forId``)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


#: Names of the compression types as Kafka's configuration spells them (``compression.type``).
COMPRESSION_NAMES = {
    CompressionType.NONE: "none",
    CompressionType.GZIP: "gzip",
    CompressionType.SNAPPY: "snappy",
    CompressionType.LZ4: "lz4",
    CompressionType.ZSTD: "zstd",
}

#: Kafka's ``telemetry.max.bytes`` default (1 MiB): the largest push a broker accepts, on the wire and,
#: in newest Kafka, decompressed.
DEFAULT_TELEMETRY_MAX_BYTES = 1048576

#: Client instances a Kafka broker keeps (``ClientMetricsManager.CACHE_MAX_SIZE``; an LRU cache: a new
#: instance beyond it evicts the least recently used one).
INSTANCE_CACHE_MAX_SIZE = 16384

#: How long a Kafka broker keeps a client instance after its last request, at least
#: (``ClientMetricsManager``'s ``DEFAULT_CACHE_EXPIRY_MS``): it expires ``max(this, 3 × push interval)``
#: after it.
INSTANCE_CACHE_EXPIRY_MS = 60000

#: Bytes a request frame of ``kip714 serve`` may hold beyond ``telemetry.max.bytes`` of metrics: the request
#: header (a client id of up to 32767 bytes), the other PushTelemetry fields, tagged fields. ApiVersions,
#: Metadata and GetTelemetrySubscriptions requests are far smaller than a full push.
SERVE_FRAME_HEADROOM = 65536


def serve_max_frame_bytes(telemetry_max_bytes: int = DEFAULT_TELEMETRY_MAX_BYTES) -> int:
    """The largest request frame an endpoint that only answers ApiVersions, Metadata and the two telemetry
    requests can need: ``telemetry.max.bytes`` plus :data:`SERVE_FRAME_HEADROOM` (a larger size prefix
    closes the connection, as Kafka's ``InvalidReceiveException`` does over ``socket.request.max.bytes``)."""
    return int(telemetry_max_bytes) + SERVE_FRAME_HEADROOM


#: kip714's default budget of bytes held in unfinished request frames across all connections of one
#: endpoint (``serve``, ``proxy``); over it the connections holding the most are dropped. Kafka's closest
#: setting, ``queued.max.request.bytes``, is unbounded by default.
DEFAULT_MAX_BUFFERED_BYTES = 64 * 1024 * 1024

#: The AcceptedCompressionTypes a Kafka broker advertises, in its preference order.
DEFAULT_ACCEPTED_COMPRESSION_TYPES = (
    CompressionType.ZSTD,
    CompressionType.LZ4,
    CompressionType.GZIP,
    CompressionType.SNAPPY,
)


def compression_type_from_name(name: str) -> CompressionType:
    """``"zstd"`` → ``CompressionType.ZSTD`` (case-insensitive); ValueError names the valid choices."""
    key = name.strip().lower()
    for ctype, text in COMPRESSION_NAMES.items():
        if text == key:
            return ctype
    raise ValueError(f"unknown compression type {name!r}; choose from {', '.join(COMPRESSION_NAMES.values())}")
