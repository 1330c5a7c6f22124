"""Which connection attributes a subscription is matched against, as Kafka's ClientMetricsManager decides.

Kafka (server/.../ClientMetricsManager.java, ``clientInstance()``): an instance absent from the cache is
created with ``new ClientMetricsInstanceMetadata(clientInstanceId, requestContext)``, the attributes of the
request that found it absent; when a subscription change makes it stale, it is re-created with
``clientInstance.instanceMetadata()``, the metadata it already had. The attributes are captured afresh only
after the instance has left the cache (expiry, LRU eviction, or since 4.0 its connection closing). The
receiver, on the other hand, gets the context of the push being exported.

The case that tells the two rules apart: one instance id arriving from a second source port while the
instance is still live, and a subscription that selects on ``client_source_port``.
"""

from __future__ import annotations

import dataclasses
import socket
import struct
import time
import uuid

import pytest

import kip714
from kip714 import (
    ClientInfo,
    GetTelemetrySubscriptionsRequest,
    PushTelemetryRequest,
    SubscriptionRegistry,
    TelemetryBroker,
)

T0 = 1_763_700_000_000
FIRST = ClientInfo(
    client_id="c",
    client_software_name="apache-kafka-java",
    client_software_version="3.9.0",
    client_source_address="127.0.0.1",
    client_source_port=40001,
)
SECOND = dataclasses.replace(FIRST, client_source_port=40002)  # the same client after reconnecting


class Recorder:
    def __init__(self):
        self.calls = []

    def export_metrics(self, context, payload):
        self.calls.append((context, payload))


def port_registry(port, interval=1000):
    r = SubscriptionRegistry()
    r.set(
        "by-port",
        {"metrics": "org.apache.kafka.by.port", "interval.ms": str(interval), "match": f"client_source_port={port}"},
    )
    return r


def get(b, instance, info, now, connection=None):
    resp, _ = b.handle(GetTelemetrySubscriptionsRequest(instance), info, T0 + now, connection)
    assert resp.error_code == 0, resp
    return resp


def test_a_live_instance_keeps_the_attributes_it_was_created_with():
    b = TelemetryBroker(port_registry(40001), cache_expiry_ms=60000)
    first = get(b, None, FIRST, 0)
    assert first.requested_metrics == ["org.apache.kafka.by.port"]
    inst = first.client_instance_id
    # reconnected from another port: Kafka still matches the port the instance was created from
    again = get(b, inst, SECOND, 1000)
    assert again.requested_metrics == ["org.apache.kafka.by.port"]
    assert again.subscription_id == first.subscription_id
    assert b.client_metadata(inst).client_source_port == 40001
    # a push from the new port is judged against that subscription: accepted
    resp, _ = b.handle(PushTelemetryRequest(inst, first.subscription_id, False, 0, b""), SECOND, T0 + 2000)
    assert resp.error_code == 0


def test_the_reverse_a_subscription_for_the_new_port_does_not_match_a_live_instance():
    b = TelemetryBroker(port_registry(40002), cache_expiry_ms=60000)
    first = get(b, None, FIRST, 0)
    assert first.requested_metrics == []  # nothing matches port 40001
    again = get(b, first.client_instance_id, SECOND, 300_000)  # nothing matched: the default interval
    assert again.requested_metrics == [] and again.subscription_id == first.subscription_id


def test_a_subscription_change_rebuilds_the_instance_with_its_old_attributes():
    registry = port_registry(40001)
    b = TelemetryBroker(registry, cache_expiry_ms=60000)
    first = get(b, None, FIRST, 0)
    inst = first.client_instance_id
    registry.set("other", {"metrics": "org.apache.kafka.other", "interval.ms": "1000"})  # stale now
    rebuilt = get(b, inst, SECOND, 500)  # a Get right after a change is not throttled (new instance)
    assert sorted(rebuilt.requested_metrics) == ["org.apache.kafka.by.port", "org.apache.kafka.other"]
    assert b.client_metadata(inst).client_source_port == 40001


def test_an_instance_that_left_the_cache_captures_the_new_attributes():
    b = TelemetryBroker(port_registry(40001), cache_expiry_ms=100)
    first = get(b, None, FIRST, 0)
    inst = first.client_instance_id
    # expiry is max(cache_expiry_ms, 3 x interval) = 3000 ms after the last request
    later = get(b, inst, SECOND, 10_000)
    assert later.requested_metrics == [] and later.subscription_id != first.subscription_id
    assert b.client_metadata(inst).client_source_port == 40002


def test_closing_the_creating_connection_drops_the_instance_and_its_attributes():
    b = TelemetryBroker(port_registry(40001), cache_expiry_ms=60000)
    first = get(b, None, FIRST, 0, connection="A")
    inst = first.client_instance_id
    assert b.connection_closed("A")
    assert b.client_metadata(inst) is None
    again = get(b, inst, SECOND, 100, connection="B")
    assert again.requested_metrics == []
    assert b.client_metadata(inst).client_source_port == 40002


def test_receivers_see_the_attributes_of_the_push_itself():
    rec = Recorder()
    b = TelemetryBroker(port_registry(40001), cache_expiry_ms=60000, receivers=[rec])
    first = get(b, None, FIRST, 0)
    resp, payload = b.handle(
        PushTelemetryRequest(first.client_instance_id, first.subscription_id, False, 0, b"\x0a\x00"), SECOND, T0 + 1000
    )
    assert resp.error_code == 0
    assert payload.labels["client_source_port"] == "40002"
    assert rec.calls[0][0].client_info.client_source_port == 40002


def test_captured_metadata_stays_bounded_by_the_live_instances():
    b = TelemetryBroker(port_registry(40001), max_instances=64, cache_expiry_ms=60000)
    for i in range(5000):
        get(b, None, dataclasses.replace(FIRST, client_source_port=i), i)
    assert len(b.instances) <= 64
    assert len(b._metadata) <= 64 + 1024 + 1


# --------------------------------------------------------------------------------------- over serve


@pytest.mark.integration
def test_serve_matches_the_port_of_the_connection_that_created_the_instance():
    """Two live connections of one client: the Get on the second connection is matched against the source
    port of the first (the subscription selects on it), as a Kafka broker does."""
    import server_thread

    from kip714.endpoint.server import TelemetryServer

    registry = SubscriptionRegistry()
    srv = server_thread.ServerThread(TelemetryServer(TelemetryBroker(registry), "127.0.0.1", 0))
    try:
        a = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        b = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        with a, b:
            port_a = a.getsockname()[1]
            srv.call(
                lambda: registry.set(
                    "by-port",
                    {
                        "metrics": "org.apache.kafka.by.port",
                        "interval.ms": "100",
                        "match": f"client_source_port={port_a}",
                    },
                )
            )
            first = _call(a, GetTelemetrySubscriptionsRequest(), 1)
            assert first.error_code == 0 and first.requested_metrics == ["org.apache.kafka.by.port"]
            time.sleep(0.15)  # one push interval: the next Get is not throttled
            second = _call(b, GetTelemetrySubscriptionsRequest(first.client_instance_id), 2)
            assert second.error_code == 0
            assert second.requested_metrics == ["org.apache.kafka.by.port"]
            assert second.subscription_id == first.subscription_id
    finally:
        srv.stop()


def _call(sock, body, correlation_id):
    sock.sendall(kip714.encode_request(body, correlation_id, "c"))
    head = _recv(sock, 4)
    resp = kip714.decode_response(_recv(sock, struct.unpack(">i", head)[0]), 71, 0)
    assert resp.correlation_id == correlation_id
    return resp.body


def _recv(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


@pytest.mark.parametrize("instance", [uuid.UUID(int=0)])
def test_a_zero_id_get_always_creates_with_the_request_attributes(instance):
    b = TelemetryBroker(port_registry(40002), cache_expiry_ms=60000)
    assert get(b, instance, SECOND, 0).requested_metrics == ["org.apache.kafka.by.port"]
