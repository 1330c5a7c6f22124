"""Kafka-protocol endpoints that clients connect to: ``kip714 serve`` (:class:`TelemetryServer`) and
``kip714 proxy`` (:class:`TelemetryProxy`)."""

from __future__ import annotations

from .proxy import TelemetryProxy
from .server import TelemetryServer

__all__ = ["TelemetryProxy", "TelemetryServer"]
