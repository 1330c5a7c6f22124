"""Type stubs for kip714._crc (CRC32C and the KIP-714 SubscriptionId)."""

import uuid
from collections.abc import Iterable

from typing_extensions import Buffer

__all__ = ["compute_subscription_id", "crc32c", "hardware_accelerated", "uuid_hash"]

def crc32c(data: Buffer, value: int = 0) -> int:
    """CRC32C of a C-contiguous buffer, continuing the finished CRC ``value``; unsigned 32-bit."""

def hardware_accelerated() -> bool:
    """True when the CPU's CRC32C instructions are in use."""

def uuid_hash(client_instance_id: uuid.UUID | Buffer) -> int:
    """Kafka ``Uuid.hashCode()`` (signed int32) of a UUID or its 16 big-endian bytes."""

def compute_subscription_id(
    requested_metrics: Iterable[str], push_interval_ms: int, client_instance_id: uuid.UUID | Buffer
) -> int:
    """Kafka's SubscriptionId (signed int32) for metric names already in Java HashSet order."""
