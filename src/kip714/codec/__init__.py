"""Payload codecs as Kafka frames them (public): bounded decompression, Java-framed compression, CRC32C,
the SubscriptionId built on it and Java's ``Uuid.hashCode`` (``uuid_hash``).

``__all__`` is the public part; all but ``uuid_hash`` are also in ``kip714``. Implemented natively in
``kip714._codec`` and ``kip714._crc`` (``src/_native/``)."""

from __future__ import annotations

from .._codec import compress, decompress
from .._crc import compute_subscription_id, crc32c, uuid_hash

__all__ = [
    "compress",
    "decompress",
    "crc32c",
    "compute_subscription_id",
    "uuid_hash",
]
