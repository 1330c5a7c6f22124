"""Broker decisions as Apache Kafka 4.1+ makes them (public): subscriptions (:mod:`.subscriptions`, in
Java's iteration order, :mod:`.javaorder`), the native per-instance table (``kip714._instances``), the
``ClientMetricsManager`` equivalent (:mod:`.manager`), the receiver contract accepted pushes leave by
(:mod:`.receivers`), and Kafka's config admin API for CLIENT_METRICS resources (:mod:`.config_admin`) over
the sources of the subscriptions (:mod:`.subscription_layers`) and the admin API's state folder
(:mod:`.admin_state`).

``__all__`` is the public part: import these names from ``kip714.broker`` (the registry, the broker and
the receiver contract are also in ``kip714``), not from the modules below it."""

from __future__ import annotations

from .._instances import InstanceTable
from .admin_state import AdminStateStore
from .config_admin import ClientMetricsAdmin
from .manager import TelemetryBroker
from .receivers import (
    BackgroundReceiver,
    CallbackReceiver,
    ClientSubscription,
    InstanceCloseObserver,
    PushObserver,
    ReceiverContext,
    TelemetryPayload,
    TelemetryReceiver,
)
from .subscription_layers import SubscriptionLayers
from .subscriptions import ClientInfo, Resolution, Subscription, SubscriptionRegistry, kafka_uuid_string

__all__ = [
    "SubscriptionRegistry",
    "Subscription",
    "Resolution",
    "ClientInfo",
    "kafka_uuid_string",
    "InstanceTable",
    "TelemetryBroker",
    "ClientSubscription",
    "TelemetryReceiver",
    "PushObserver",
    "InstanceCloseObserver",
    "ReceiverContext",
    "TelemetryPayload",
    "BackgroundReceiver",
    "CallbackReceiver",
    "ClientMetricsAdmin",
    "SubscriptionLayers",
    "AdminStateStore",
]
