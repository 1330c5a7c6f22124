"""Kafka-protocol endpoints that clients connect to: ``kip714 serve`` (:class:`TelemetryServer`)."""

from __future__ import annotations

from .server import TelemetryServer

__all__ = ["TelemetryServer"]
