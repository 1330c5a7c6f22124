"""Typing stub for the native OTLP resource-attribute splice (kip714._otlp_splice)."""

from collections.abc import Iterable

from typing_extensions import Buffer

__all__ = ["add_resource_attributes", "add_resource_attributes_all", "encode_attributes"]

def encode_attributes(attributes: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """[(key, value)] → [(key bytes, Resource.attributes field bytes)] for add_resource_attributes."""

def add_resource_attributes(data: Buffer, attributes: list[tuple[bytes, bytes]]) -> bytes:
    """data (OTLP MetricsData) with the attributes added to the Resource of every ResourceMetrics (created
    when absent; keys the client set on that Resource are not added again). Raises
    kip714.errors.CorruptPayloadError for malformed bytes; at most 16 attributes."""

def add_resource_attributes_all(
    payloads: list[bytes], attributes: list[list[tuple[bytes, bytes]]]
) -> tuple[bytes, list[int]]:
    """add_resource_attributes for each payload with its attributes, the results joined in one buffer:
    (body, the indices of the malformed payloads left out)."""
