"""The client half of KIP-714 (public): Kafka's metric naming (:mod:`.naming`), OTLP encoding
(:mod:`.otlp_encode`) and the Java client's push state machine without I/O (:mod:`.telemetry`).

``__all__`` is the public part: import these names from ``kip714.client`` (``ClientTelemetry``,
``MetricsCollector`` and ``telemetry_metric_name`` are also in ``kip714``), not from the modules below it."""

from __future__ import annotations

from .naming import telemetry_attribute_key, telemetry_attributes, telemetry_metric_key, telemetry_metric_name
from .otlp_encode import MetricsCollector, MetricSelector
from .telemetry import (
    ClientTelemetry,
    ClientTelemetryState,
    ClientTelemetrySubscription,
    choose_compression,
    compress_payload,
)

__all__ = [
    "telemetry_metric_name",
    "telemetry_metric_key",
    "telemetry_attribute_key",
    "telemetry_attributes",
    "MetricsCollector",
    "MetricSelector",
    "ClientTelemetry",
    "ClientTelemetryState",
    "ClientTelemetrySubscription",
    "choose_compression",
    "compress_payload",
]
