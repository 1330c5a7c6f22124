"""Where accepted pushes go (public): every sink is a :class:`kip714.TelemetryReceiver`: the Parquet
recorder (:class:`ParquetRecorder`, read back with :func:`read_recording`, or a fleet's recordings with
:func:`read_recordings`), the Prometheus exporter, the
OTLP forwarder.

``__all__`` is the public part (all but :func:`read_recordings` are also in ``kip714``). The exporters need
the ``export`` extra."""

from __future__ import annotations

from .otlp_forward import OtlpForwarder
from .prometheus import PrometheusExporter
from .recorder import ParquetRecorder, read_recording, read_recordings

__all__ = [
    "ParquetRecorder",
    "read_recording",
    "read_recordings",
    "PrometheusExporter",
    "OtlpForwarder",
]
