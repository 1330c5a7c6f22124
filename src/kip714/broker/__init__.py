"""Broker decisions as Apache Kafka 4.1+ makes them: subscriptions (:mod:`.subscriptions`, in Java's
iteration order, :mod:`.javaorder`), the native per-instance table (``kip714._instances``), the
``ClientMetricsManager`` equivalent (:mod:`.manager`) and the receiver contract accepted pushes leave by
(:mod:`.receivers`)."""

from __future__ import annotations

from .._instances import InstanceTable
from .manager import TelemetryBroker
from .receivers import BackgroundReceiver, ReceiverContext, TelemetryPayload, TelemetryReceiver
from .subscriptions import ClientInfo, Resolution, Subscription, SubscriptionRegistry, kafka_uuid_string

__all__ = [
    "BackgroundReceiver", "ClientInfo", "InstanceTable", "ReceiverContext", "Resolution",
    "Subscription", "SubscriptionRegistry", "TelemetryBroker", "TelemetryPayload", "TelemetryReceiver",
    "kafka_uuid_string",
]
