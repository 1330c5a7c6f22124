"""Payload codecs as Kafka frames them: bounded decompression, Java-framed compression, CRC32C.

Implemented natively in ``kip714._codec`` and ``kip714._crc`` (``src/_native/``)."""

from __future__ import annotations

from .._codec import compress, decompress
from .._crc import crc32c

__all__ = ["compress", "crc32c", "decompress"]
