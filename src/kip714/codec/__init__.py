"""Payload codecs as Kafka frames them: bounded decompression, Java-framed compression, CRC32C and the
SubscriptionId built on it.

Implemented natively in ``kip714._codec`` and ``kip714._crc`` (``src/_native/``)."""

from __future__ import annotations

from .._codec import compress, decompress
from .._crc import compute_subscription_id, crc32c, uuid_hash

__all__ = ["compress", "compute_subscription_id", "crc32c", "decompress", "uuid_hash"]
