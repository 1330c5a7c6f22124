"""The scenario registry: every scenario id in the order they run and are reported, and the accepted
compression list the lab answers (the scenarios themselves: :mod:`.scenarios_lifecycle`,
:mod:`.scenarios_answers`, :mod:`.scenarios_content`; what they share: :mod:`.judging`)."""

from __future__ import annotations

from collections.abc import Sequence

from .._enums import CompressionType
from .judging import Scenario, Timing, Verdict
from .scenarios_answers import (
    InvalidRecord,
    InvalidRequest,
    RecoversAfterError,
    SubscriptionChanged,
    TelemetryTooLarge,
    Throttled,
    UnsupportedCompression,
)
from .scenarios_content import PayloadValid, RequestedOnly, Temporality
from .scenarios_lifecycle import (
    ConnectionLost,
    EmptySubscription,
    FirstContact,
    PushInterval,
    TerminatingPush,
    TerminatingResubscribe,
    UnmatchedMetrics,
)

__all__ = ["SCENARIOS", "SCENARIO_IDS", "Scenario", "Timing", "Verdict", "compression_list", "scenario_class"]


#: Every scenario, in the order they run and are reported.
SCENARIOS: tuple[type[Scenario], ...] = (
    FirstContact,
    PushInterval,
    RequestedOnly,
    EmptySubscription,
    UnmatchedMetrics,
    SubscriptionChanged,
    UnsupportedCompression,
    Throttled,
    TelemetryTooLarge,
    InvalidRecord,
    InvalidRequest,
    RecoversAfterError,
    Temporality,
    TerminatingPush,
    TerminatingResubscribe,
    ConnectionLost,
    PayloadValid,
)
SCENARIO_IDS: tuple[str, ...] = tuple(s.id for s in SCENARIOS)


def scenario_class(scenario_id: str) -> type[Scenario]:
    for cls in SCENARIOS:
        if cls.id == scenario_id:
            return cls
    raise ValueError(f"unknown scenario {scenario_id!r}; choose from {', '.join(SCENARIO_IDS)}")


def compression_list(names: Sequence[str | int] | str | None) -> list[int]:
    """``"gzip,zstd"`` → [1, 4] (the accepted list, in the broker's order: names or ids); None → Kafka's
    default order."""
    from .._enums import DEFAULT_ACCEPTED_COMPRESSION_TYPES, compression_type_from_name

    if names is None:
        return [int(c) for c in DEFAULT_ACCEPTED_COMPRESSION_TYPES]
    items = names.split(",") if isinstance(names, str) else list(names)
    out = []
    for item in items:
        if isinstance(item, int):
            ctype = CompressionType(item)
        else:
            ctype = compression_type_from_name(item)
        if int(ctype) in out:
            raise ValueError(f"compression type {item!r} is listed twice")
        out.append(int(ctype))
    return out
