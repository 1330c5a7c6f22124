"""The client half of KIP-714: Kafka's metric naming (:mod:`.naming`), OTLP encoding (:mod:`.otlp_encode`)
and the Java client's push state machine without I/O (:mod:`.telemetry`)."""

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
    "ClientTelemetry", "ClientTelemetryState", "ClientTelemetrySubscription", "MetricSelector", "MetricsCollector",
    "choose_compression", "compress_payload", "telemetry_attribute_key", "telemetry_attributes",
    "telemetry_metric_key", "telemetry_metric_name",
]
