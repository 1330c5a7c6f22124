"""Where accepted pushes go: every sink is a :class:`kip714.TelemetryReceiver` (the Parquet recorder now)."""

from __future__ import annotations

from .recorder import ParquetRecorder, read_recording

__all__ = ["ParquetRecorder", "read_recording"]
