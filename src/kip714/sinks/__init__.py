"""Where accepted pushes go: every sink is a :class:`kip714.TelemetryReceiver` (the Parquet recorder, the
Prometheus exporter, the OTLP forwarder)."""

from __future__ import annotations

from .otlp_forward import OtlpForwarder
from .prometheus import PrometheusExporter
from .recorder import ParquetRecorder, read_recording

__all__ = ["OtlpForwarder", "ParquetRecorder", "PrometheusExporter", "read_recording"]
