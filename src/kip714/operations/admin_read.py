"""The subscriptions a running endpoint holds, read through Kafka's config admin API as
``kafka-client-metrics.sh --list`` and ``--describe`` read them: the source of ``kip714 subscriptions explain|lint
--bootstrap-server``.

It asks ``ListConfigResources`` v0 (``ListClientMetricsResources`` before Kafka 4.1: every Kafka 3.7+ broker, and
``kip714 serve`` / ``kip714 proxy --telemetry terminate``, answer it) for the subscription names, then one
``DescribeConfigs`` v1 for all of them, over one plain TCP connection (no TLS or SASL). A subscription comes back
with the keys that are set, as a subscription file holds them: what the broker describes as Kafka's default
(``DEFAULT_CONFIG``) is left out, so ``lint`` sees an unset ``metrics`` as the file would show it."""

from __future__ import annotations

import socket
import struct
from typing import Any

from .._enums import ApiKey, ConfigResourceType, ConfigSource, ErrorCode
from ..errors import Kip714Error
from ..wire import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    ListConfigResourcesRequest,
    decode_response,
    encode_request,
)

__all__ = ["read_subscriptions"]

_CLIENT_METRICS = int(ConfigResourceType.CLIENT_METRICS)
_DEFAULT = int(ConfigSource.DEFAULT_CONFIG)
#: The largest answer read (a DescribeConfigs answer for thousands of subscriptions is far below it).
_MAX_FRAME = 64 << 20


def read_subscriptions(
    host: str, port: int, timeout_s: float = 10.0, client_id: str = "kip714-subscriptions"
) -> dict[str, dict[str, str]]:
    """``{name: {config key: value}}`` of every ``CLIENT_METRICS`` subscription of the endpoint or Kafka broker at
    ``host:port``, in the order it lists them. Raises :class:`~kip714.errors.Kip714Error` with the error code
    the endpoint answered, or when it closes the connection instead of answering (a broker older than Kafka
    3.7); ``OSError`` when it cannot be reached."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        listed = _call(sock, ListConfigResourcesRequest(), ApiKey.LIST_CONFIG_RESOURCES, 0, 1, client_id)
        if listed.error_code:
            raise Kip714Error(f"{host}:{port} refused to list the subscriptions", listed.error_code)
        names = list(
            dict.fromkeys(r.resource_name for r in listed.config_resources if r.resource_type == _CLIENT_METRICS)
        )
        if not names:
            return {}
        resources = [DescribeConfigsResource(_CLIENT_METRICS, name) for name in names]
        described = _call(sock, DescribeConfigsRequest(resources), ApiKey.DESCRIBE_CONFIGS, 1, 2, client_id)
    subscriptions: dict[str, dict[str, str]] = {}
    for result in described.results:
        if result.error_code:
            raise Kip714Error(
                f"{host}:{port} refused to describe subscription {result.resource_name!r}: {result.error_message}",
                result.error_code,
            )
        subscriptions[result.resource_name] = {
            c.name: c.value for c in result.configs if c.config_source != _DEFAULT and c.value is not None
        }
    return subscriptions


def _call(sock: socket.socket, body: Any, api_key: ApiKey, version: int, correlation_id: int, client_id: str) -> Any:
    """Send one request and read its answer's body."""
    what = f"{api_key.name} v{version}"
    try:
        sock.sendall(encode_request(body, correlation_id, client_id, version))
        size = struct.unpack(">i", _read(sock, 4, what))[0]
        if not 0 <= size <= _MAX_FRAME:
            raise Kip714Error(f"an answer of {size} bytes to {what}", ErrorCode.CORRUPT_MESSAGE)
        frame = _read(sock, size, what)
    except (ConnectionResetError, BrokenPipeError):  # closed while the request was unread: reset, not EOF
        raise _closed(what) from None
    response = decode_response(frame, int(api_key), version)
    if response.correlation_id != correlation_id:
        raise Kip714Error(
            f"the answer to {what} carries correlation id {response.correlation_id}, not {correlation_id}",
            ErrorCode.CORRUPT_MESSAGE,
        )
    return response.body


def _read(sock: socket.socket, n: int, what: str) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise _closed(what)
        data += chunk
    return bytes(data)


def _closed(what: str) -> Kip714Error:
    """What a broker does with a request it does not know: it closes the connection."""
    return Kip714Error(
        f"the endpoint closed the connection instead of answering {what} (it needs Kafka 3.7+, or "
        "kip714 serve / kip714 proxy --telemetry terminate)",
        ErrorCode.UNSUPPORTED_VERSION,
    )
