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
