"""Typing stub for the Cython codec dispatch (kip714._codec)."""

from typing import Final, Literal

from typing_extensions import Buffer

__all__ = [
    "GZIP",
    "GZIP_MAGIC",
    "LZ4",
    "LZ4_FRAME_MAGIC",
    "NONE",
    "SNAPPY",
    "SNAPPY_FRAMING_MAGIC",
    "XERIAL_BLOCK_SIZE",
    "XERIAL_HEADER",
    "XERIAL_MAGIC",
    "ZSTD",
    "ZSTD_FRAME_MAGIC",
    "compress",
    "decompress",
    "detect_framing",
    "xxh32",
]

NONE: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4

XERIAL_MAGIC: Final[bytes]
XERIAL_HEADER: Final[bytes]
XERIAL_BLOCK_SIZE: Final[int]
SNAPPY_FRAMING_MAGIC: Final[bytes]
LZ4_FRAME_MAGIC: Final[bytes]
ZSTD_FRAME_MAGIC: Final[bytes]
GZIP_MAGIC: Final[bytes]

_Framing = Literal[
    "none", "empty", "gzip", "xerial", "snappy-framing", "raw", "lz4-frame", "zstd", "zstd-skippable", "unknown"
]

def decompress(data: Buffer, compression_type: int, max_output: int) -> bytes:
    """Decompress a telemetry payload to at most ``max_output`` bytes.

    Raises CorruptPayloadError (INVALID_RECORD), TelemetryTooLargeError (TELEMETRY_TOO_LARGE) or
    UnsupportedCompressionTypeError (UNSUPPORTED_COMPRESSION_TYPE); ValueError for a negative ``max_output``.
    """

def compress(data: Buffer, compression_type: int, level: int | None = None) -> bytes:
    """Compress with the framing Kafka's Java client writes (gzip member, xerial snappy, LZ4 frame, zstd); a level
    the codec does not take raises InvalidConfigError."""

def detect_framing(data: Buffer, compression_type: int) -> _Framing:
    """Name the framing of a payload from its first bytes, without decompressing it."""

def xxh32(data: Buffer, seed: int = 0) -> int:
    """XXH32 (the LZ4 frame checksum) of ``data``."""
