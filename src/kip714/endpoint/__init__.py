"""Kafka-protocol endpoints that clients connect to (public): ``kip714 serve`` (:class:`TelemetryServer`)
and ``kip714 proxy`` (:class:`TelemetryProxy`), and :class:`ProxyProtocol`, the PROXY protocol either takes
behind a TCP load balancer.

``__all__`` is the public part (both are also in ``kip714``); the modules below it (connections, frame
streams, address rewriting) are the endpoints' own."""

from __future__ import annotations

from .proxy import TelemetryProxy
from .proxy_protocol import ProxyProtocol
from .server import TelemetryServer

__all__ = [
    "TelemetryServer",
    "TelemetryProxy",
    "ProxyProtocol",
]
