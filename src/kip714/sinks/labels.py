"""The KIP's broker-added labels a sink may put on what it exports (``--prometheus-labels``,
``--otlp-labels``): which exist, the default choice, and parsing a choice."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from ..broker.subscriptions import ClientInfo

__all__ = ["BROKER_LABELS", "DEFAULT_LABELS", "parse_labels"]

#: The KIP's broker-added labels, in the order the broker builds them (one home: ClientInfo.labels).
BROKER_LABELS = tuple(ClientInfo().labels(0, uuid.UUID(int=2)))
DEFAULT_LABELS = ("client_id", "client_instance_id")


def parse_labels(text: str | Iterable[str]) -> tuple[str, ...]:
    """``client_id,client_instance_id`` → a tuple of broker-added label names (ValueError for others)."""
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    bad = [n for n in names if n not in BROKER_LABELS]
    if bad:
        raise ValueError(f"unknown broker-added label {', '.join(bad)}; choose from {', '.join(BROKER_LABELS)}")
    return tuple(dict.fromkeys(names))
