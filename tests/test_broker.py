"""TelemetryBroker: the cases of Kafka's ClientMetricsManagerTest and the 4.1+ rules, on a fake clock."""

from __future__ import annotations

import gc
import threading
import uuid

import pytest

import kip714
from kip714 import (
    ClientInfo,
    ErrorCode,
    GetTelemetrySubscriptionsRequest,
    PushTelemetryRequest,
    SubscriptionRegistry,
    TelemetryBroker,
)
from kip714._instances import LOOKUP_ABSENT, LOOKUP_LIVE

E = ErrorCode
DEFAULT_METRICS = "org.apache.kafka.client.producer.partition.queue.,org.apache.kafka.client.producer.partition.latency"
CLIENT = ClientInfo(
    client_id="producer-1",
    client_software_name="apache-kafka-java",
    client_software_version="3.5.2",
    client_source_address="127.0.0.1",
    client_source_port=56078,
)


class Recorder:
    def __init__(self, fail=False):
        self.payloads = []
        self.fail = fail

    def export_metrics(self, context, payload):
        if self.fail:
            raise RuntimeError("plugin failure")
        self.payloads.append((context, payload))


def make_broker(registry=None, **kw):
    kw.setdefault("telemetry_max_bytes", 100)
    kw.setdefault("cache_expiry_ms", 100)
    return TelemetryBroker(registry or SubscriptionRegistry(), **kw)


def subscribed(interval=30000):
    r = SubscriptionRegistry()
    r.set(
        "sub-1",
        {
            "metrics": DEFAULT_METRICS,
            "interval.ms": str(interval),
            "match": "client_software_name=apache-kafka-java,client_software_version=3.5.*",
        },
    )
    return r


# Kafka's timestamps start at 0 and are compared with wall-clock "now", so times are offsets from an epoch.
T0 = 1_763_700_000_000


def get(broker, instance=None, now=0, client=CLIENT):
    resp, payload = broker.handle(GetTelemetrySubscriptionsRequest(instance), client, T0 + now)
    assert payload is None
    return resp


def push(broker, instance, sid, now=0, terminating=False, ctype=0, metrics=b"", client=CLIENT):
    return broker.handle(PushTelemetryRequest(instance, sid, terminating, ctype, metrics), client, T0 + now)


def test_get_without_subscriptions():
    b = make_broker()
    resp = get(b, now=1000)
    assert resp.error_code == 0 and resp.throttle_time_ms == 0
    assert resp.push_interval_ms == 300000 and resp.requested_metrics == []
    assert resp.accepted_compression_types == [4, 3, 1, 2] and resp.delta_temporality is True
    assert resp.telemetry_max_bytes == 100 and resp.subscription_id != 0
    assert resp.client_instance_id != uuid.UUID(int=0)
    assert kip714.kafka_uuid_string(resp.client_instance_id)[0] != "-"
    assert b.metrics()["instance-count"] == 1


def test_get_with_a_matching_subscription():
    b = make_broker(subscribed())
    resp = get(b, now=1000)
    assert resp.push_interval_ms == 30000
    assert resp.requested_metrics == [
        "org.apache.kafka.client.producer.partition.latency",
        "org.apache.kafka.client.producer.partition.queue.",
    ]
    assert resp.subscription_id == kip714.compute_subscription_id(
        resp.requested_metrics, 30000, resp.client_instance_id
    )
    other = get(b, now=1000, client=ClientInfo(client_software_name="librdkafka"))
    assert other.requested_metrics == [] and other.push_interval_ms == 300000


def test_two_gets_in_a_row_are_throttled():
    b = make_broker(subscribed())
    first = get(b, now=1000)
    second = get(b, first.client_instance_id, now=1001)
    assert second.error_code == E.THROTTLING_QUOTA_EXCEEDED
    # an error response carries the generated defaults, including the zero id
    assert second.client_instance_id == uuid.UUID(int=0) and second.requested_metrics == []
    assert b.metrics()["throttle-count"] == 1
    assert get(b, first.client_instance_id, now=1000 + 30000).error_code == 0


def test_push_then_get_on_a_new_server_is_throttled():
    a, b = make_broker(subscribed()), make_broker(subscribed())
    resp = get(a, now=1000)
    r, _ = push(b, resp.client_instance_id, resp.subscription_id, now=2000)
    assert r.error_code == 0  # a broker that never saw the client recreates the instance: same id
    assert get(b, resp.client_instance_id, now=2001).error_code == E.THROTTLING_QUOTA_EXCEEDED


def test_get_push_push():
    b = make_broker(subscribed())
    resp = get(b, now=1000)
    inst, sid = resp.client_instance_id, resp.subscription_id
    assert push(b, inst, sid, now=1000 + 24000)[0].error_code == 0  # early first push after a Get: accepted
    assert push(b, inst, sid, now=1000 + 25000)[0].error_code == E.THROTTLING_QUOTA_EXCEEDED
    assert b.instances.get_state(inst.bytes)["last_known_error"] == E.THROTTLING_QUOTA_EXCEEDED
    assert push(b, inst, sid, now=1000 + 24000 + 30000)[0].error_code == 0


def test_push_then_terminating_push_then_anything_is_invalid():
    b = make_broker(subscribed())
    resp = get(b, now=1000)
    inst, sid = resp.client_instance_id, resp.subscription_id
    assert push(b, inst, sid, now=2000)[0].error_code == 0
    assert push(b, inst, sid, now=2001, terminating=True)[0].error_code == 0  # bypasses the rate limit
    assert push(b, inst, sid, now=40000, terminating=True)[0].error_code == E.INVALID_REQUEST
    # Kafka's finally-block quirk: a rejected terminating=false push resets the flag ...
    assert push(b, inst, sid, now=80000)[0].error_code == E.INVALID_REQUEST
    # ... so the push after it is processed normally
    assert push(b, inst, sid, now=120000)[0].error_code == 0


def test_unknown_subscription_id_and_the_41_get_exemption():
    b = make_broker(subscribed())
    resp = get(b, now=1000)
    inst = resp.client_instance_id
    assert push(b, inst, 1234, now=2000)[0].error_code == E.UNKNOWN_SUBSCRIPTION_ID
    assert b.metrics()["unknown-subscription-request-count"] == 1
    # Kafka 4.1+: an immediate Get after UNKNOWN_SUBSCRIPTION_ID is not throttled
    again = get(b, inst, now=2001)
    assert again.error_code == 0 and again.subscription_id == resp.subscription_id


def test_unsupported_compression_and_too_large_and_empty():
    b = make_broker(subscribed(), receivers=[rec := Recorder()])
    resp = get(b, now=1000)
    inst, sid = resp.client_instance_id, resp.subscription_id
    assert push(b, inst, sid, now=2000, ctype=100)[0].error_code == E.UNSUPPORTED_COMPRESSION_TYPE
    # 4.1 exemption applies to 76 as well
    assert get(b, inst, now=2001).error_code == 0
    # the exempted Get did not move last_get, so the next push waits a full interval after the last one
    assert push(b, inst, sid, now=3000, metrics=None)[0].error_code == E.THROTTLING_QUOTA_EXCEEDED
    r, payload = push(b, inst, sid, now=32000, metrics=None)
    assert r.error_code == 0 and payload is None and rec.payloads == []  # null metrics: no export
    b2 = make_broker(subscribed(), telemetry_max_bytes=1)
    resp = get(b2, now=1000)
    r, _ = push(b2, resp.client_instance_id, resp.subscription_id, now=2000, metrics=b"ab")
    assert r.error_code == E.TELEMETRY_TOO_LARGE


@pytest.mark.parametrize("bad", [uuid.UUID(int=0), uuid.UUID(int=1)])
def test_push_with_reserved_ids_is_invalid(bad):
    b = make_broker()
    r, payload = push(b, bad, 0, now=1000)
    assert r.error_code == E.INVALID_REQUEST and payload is None
    assert b.metrics()["instance-count"] == 0


def test_get_after_a_subscription_update_gets_a_new_id():
    reg = subscribed()
    b = make_broker(reg)
    resp = get(b, now=1000)
    reg.set("sub-1", {"metrics": "org.apache.kafka.producer.", "interval.ms": "30000"})
    again = get(b, resp.client_instance_id, now=1001)  # rebuilt instance: rate-limit state is gone
    assert again.error_code == 0 and again.subscription_id != resp.subscription_id
    assert again.requested_metrics == ["org.apache.kafka.producer."]
    # the old id is now unknown
    assert push(b, resp.client_instance_id, resp.subscription_id, now=2000)[0].error_code == E.UNKNOWN_SUBSCRIPTION_ID


def test_expiry_after_max_of_cache_expiry_and_three_intervals():
    reg = SubscriptionRegistry()
    reg.set("s", {"metrics": "x.", "interval.ms": "100"})
    b = make_broker(reg)
    resp = get(b, now=1000)
    inst = resp.client_instance_id
    assert b.instances.get_state(inst.bytes) is not None
    assert b.instances.lookup(inst.bytes, T0 + 1000 + 299, reg.version) == LOOKUP_LIVE
    assert b.instances.lookup(inst.bytes, T0 + 1000 + 300, reg.version) == LOOKUP_ABSENT  # max(100, 3 x 100) = 300 ms
    # with Kafka's 60 s default and a 30 s interval: 90 s
    b2 = TelemetryBroker(subscribed(30000))
    resp = get(b2, now=0)
    assert b2.instances.lookup(resp.client_instance_id.bytes, T0 + 89_999, b2.registry.version) == LOOKUP_LIVE
    assert b2.instances.lookup(resp.client_instance_id.bytes, T0 + 90_000, b2.registry.version) == LOOKUP_ABSENT


def test_accepted_push_decompresses_and_labels():
    rec = Recorder()
    b = TelemetryBroker(subscribed(), node_id=7, receivers=[rec])
    resp = get(b, now=1000)
    otlp = b"\x0a\x00" * 50
    wire = kip714.compress(otlp, 4)
    r, payload = push(b, resp.client_instance_id, resp.subscription_id, now=2000, ctype=4, metrics=wire)
    assert r.error_code == 0
    assert payload.data == otlp and payload.content_type == "OTLP" and payload.terminating is False
    assert payload.labels == {
        "client_instance_id": kip714.kafka_uuid_string(resp.client_instance_id),
        "client_id": "producer-1",
        "client_software_name": "apache-kafka-java",
        "client_software_version": "3.5.2",
        "client_source_address": "127.0.0.1",
        "client_source_port": "56078",
        "principal": "User:ANONYMOUS",
        "node_id": "7",
    }
    assert rec.payloads[0][1] is payload and b.metrics()["plugin-export-count"] == 1


def test_decompression_failure_and_plugin_failure_are_invalid_record():
    b = TelemetryBroker(subscribed(), receivers=[Recorder(fail=True)])
    resp = get(b, now=1000)
    inst, sid = resp.client_instance_id, resp.subscription_id
    r, _ = push(b, inst, sid, now=2000, ctype=4, metrics=b"not zstd")
    assert r.error_code == E.INVALID_RECORD
    r, _ = push(b, inst, sid, now=2000 + 30000, ctype=0, metrics=b"\x0a\x00")
    assert r.error_code == E.INVALID_RECORD
    assert b.metrics()["plugin-error-count"] == 2


def test_decompressed_size_over_the_limit_is_too_large():
    b = TelemetryBroker(subscribed(), telemetry_max_bytes=1000)
    resp = get(b, now=1000)
    bomb = kip714.compress(bytes(100_000), 4)
    assert len(bomb) < 1000
    r, payload = push(b, resp.client_instance_id, resp.subscription_id, now=2000, ctype=4, metrics=bomb)
    assert r.error_code == E.TELEMETRY_TOO_LARGE and payload is None


def test_lru_capacity_bounds_instances():
    b = TelemetryBroker(SubscriptionRegistry(), max_instances=50)
    ids = [get(b, now=1000 + i).client_instance_id for i in range(200)]
    assert b.metrics()["instance-count"] == 50
    assert (
        b.instances.lookup(ids[-1].bytes, T0 + 2000, 0) != LOOKUP_ABSENT
        and b.instances.lookup(ids[0].bytes, T0 + 2000, 0) == LOOKUP_ABSENT
    )


def test_threads_share_a_broker():
    b = TelemetryBroker(subscribed(), max_instances=100_000)
    results = []

    def client(k):
        codes = []
        resp = get(b, now=1000)
        for i in range(200):
            r, _ = push(b, resp.client_instance_id, resp.subscription_id, now=2000 + i * 15000)
            codes.append(r.error_code)
        results.append(codes)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 8
    for codes in results:  # pushes every 15 s with a 30 s interval: accept, throttle, accept, ...
        assert codes[0] == 0 and codes.count(0) == 100 and codes.count(89) == 100
    m = b.metrics()
    assert m["push-request-count"] == 1600 and m["throttle-count"] == 800 and m["instance-count"] == 8


def test_background_receiver_never_blocks_and_never_loses_silently(caplog):
    """The full-queue policy (kip714.broker.bounded_queue): a payload that finds the queue full is dropped
    and counted, the push is still accepted (a client answered INVALID_RECORD would stop pushing for
    good), and the log says it once when dropping starts and once, with the count, when it ends."""
    import logging
    import threading as _threading
    import time as _time

    class Slow:
        def __init__(self):
            self.seen = []
            self.busy = _threading.Event()
            self.gate = _threading.Event()

        def export_metrics(self, context, payload):
            self.busy.set()
            self.gate.wait(5)
            self.seen.append(payload.data)

    slow = Slow()
    bg = kip714.broker.BackgroundReceiver(slow, max_queue=2)
    b = TelemetryBroker(subscribed(), receivers=[bg])
    resp = get(b, now=0)
    inst, sid = resp.client_instance_id, resp.subscription_id
    codes = []
    started = _time.perf_counter()
    with caplog.at_level(logging.WARNING, logger="kip714.broker"):
        for i in range(6):
            codes.append(push(b, inst, sid, now=30000 * (i + 1), metrics=b"\x0a\x00" + bytes([i]))[0].error_code)
            if i == 0:  # the worker holds the first payload: the next two fill the queue, three drop
                assert slow.busy.wait(5)
                started = _time.perf_counter()
        elapsed = _time.perf_counter() - started
        assert elapsed < 0.1, "exporting must not wait for the slow receiver"
        full = [r.getMessage() for r in caplog.records if "queue is full" in r.getMessage()]
        assert len(full) == 1, full  # one line for the whole episode
        slow.gate.set()
        assert bg.flush(5)
        codes.append(push(b, inst, sid, now=30000 * 7, metrics=b"\x0a\x00\x07")[0].error_code)
        assert bg.flush(5)
    assert codes == [0] * 7  # never refused
    dropped = bg.payloads_dropped["queue-full"]
    assert dropped == 3 and len(slow.seen) == 4 and bg.dropped == dropped
    again = [r.getMessage() for r in caplog.records if "takes payloads again" in r.getMessage()]
    assert len(again) == 1 and f" {dropped} dropped" in again[0], again
    assert b.metrics()["plugin-error-count"] == 0
    bg.close()


def test_bounded_queue_close_counts_what_it_could_not_process(caplog):
    """close() gives the worker its timeout, then counts what is still queued as ``shutdown`` and ends an
    open full-queue episode in the log (with its count)."""
    import logging
    import threading as _threading

    from kip714.broker.bounded_queue import BoundedQueueReceiver

    gate, busy = _threading.Event(), _threading.Event()

    class Held(BoundedQueueReceiver):
        def __init__(self):
            self.done = []
            super().__init__(max_queue=3, batch=1)

        def _process(self, items):
            busy.set()
            gate.wait(5)
            self.done.extend(items)

    q = Held()
    with caplog.at_level(logging.WARNING, logger="kip714.broker"):
        q.export_metrics(None, 0)
        assert busy.wait(5)  # the worker holds item 0: 3 are queued, 6 dropped
        for i in range(1, 10):
            q.export_metrics(None, i)
        q.close(0.2)
    gate.set()
    counts = q.dropped_counts()
    assert counts == {"queue-full": 6, "shutdown": 3}, counts
    assert q.queue_depth == 0
    ended = [r.getMessage() for r in caplog.records if "dropped while it was full" in r.getMessage()]
    assert len(ended) == 1 and f"queue closed: {counts['queue-full']} dropped" in ended[0], ended


# ------------------------------------------------------------------- connections (Kafka 4.0+, KAFKA-17778)


def test_closing_the_connection_drops_the_instance_created_on_it():
    b = make_broker(subscribed(), cache_expiry_ms=60000)
    resp = b.handle(GetTelemetrySubscriptionsRequest(None), CLIENT, T0, "conn-a")[0]
    inst, sid = resp.client_instance_id, resp.subscription_id
    assert b.metrics()["instance-count"] == 1
    assert b.connection_closed("conn-a") is True
    assert b.metrics()["instance-count"] == 0
    assert b.connection_closed("conn-a") is False  # forgotten with the instance
    # the client reconnects and pushes with its old id: a fresh instance, subscription id unchanged,
    # no rate-limit history (a new instance's first push is never throttled)
    resp, _ = b.handle(PushTelemetryRequest(inst, sid, False, 0, b""), CLIENT, T0 + 10, "conn-b")
    assert resp.error_code == 0
    assert b.metrics()["instance-count"] == 1


def test_an_instance_is_dropped_by_the_connection_that_created_it_even_after_moving():
    b = make_broker(subscribed(), cache_expiry_ms=60000)
    resp = b.handle(GetTelemetrySubscriptionsRequest(None), CLIENT, T0, "old")[0]
    inst, sid = resp.client_instance_id, resp.subscription_id
    # the client moves to another connection: the instance exists, nothing is (re)created there
    resp, _ = b.handle(PushTelemetryRequest(inst, sid, False, 0, b""), CLIENT, T0 + 30000, "new")
    assert resp.error_code == 0
    assert b.connection_closed("new") is False
    assert b.connection_closed("old") is True  # Kafka's edge case, kept
    assert b.metrics()["instance-count"] == 0


def test_recreating_an_instance_on_another_connection_records_that_connection():
    reg = subscribed()
    b = make_broker(reg, cache_expiry_ms=60000)
    resp = b.handle(GetTelemetrySubscriptionsRequest(None), CLIENT, T0, "a")[0]
    inst = resp.client_instance_id
    reg.set("sub-2", {"metrics": "org.apache.kafka.", "interval.ms": "1000"})  # stale: re-created on next use
    resp = b.handle(GetTelemetrySubscriptionsRequest(inst), CLIENT, T0 + 10, "b")[0]
    assert resp.error_code == 0 and resp.client_instance_id == inst
    assert b.connection_closed("b") is True
    assert b.metrics()["instance-count"] == 0
    assert b.connection_closed("a") is False  # "a" still names inst, which is gone


def test_without_connection_ids_instances_only_expire():
    b = make_broker(subscribed(), cache_expiry_ms=60000)
    get(b)
    assert b.connection_closed("anything") is False
    assert b.metrics()["instance-count"] == 1


def test_push_path_keeps_the_instance_id_as_16_bytes(monkeypatch):
    """A decoded push to a live instance is decided and exported without building a uuid.UUID; the
    payload carries the 16 bytes and gives the uuid.UUID (equal to the pushed id) only when asked."""
    rec = Recorder()
    b = make_broker(subscribed(), receivers=[rec], telemetry_max_bytes=1 << 20)
    resp = get(b)
    inst, sid = resp.client_instance_id, resp.subscription_id
    frame = kip714.encode_request(PushTelemetryRequest(inst, sid, False, 0, b"\x0a\x00"), 9, "producer-1")[4:]
    calls = []
    real_init = uuid.UUID.__init__

    def counting_init(self, *args, **kwargs):
        calls.append(args or kwargs)
        real_init(self, *args, **kwargs)

    def live_uuids():  # UUIDs are GC-tracked objects: count the live ones (the decoder caches its own)
        return sum(1 for o in gc.get_objects() if type(o) is uuid.UUID)  # type(): no proxy lookups

    monkeypatch.setattr(uuid.UUID, "__init__", counting_init)
    req = kip714.decode_request(frame)
    before = live_uuids()
    resp, payload = b.handle(req.body, CLIENT, T0 + 1)
    assert resp.error_code == 0 and payload is not None and rec.payloads[-1][1] is payload
    assert payload.labels["client_instance_id"] == kip714.kafka_uuid_string(inst)
    assert calls == [] and live_uuids() == before  # nothing on the push path built a UUID
    assert payload.client_instance_id_bytes == inst.bytes
    assert payload.client_instance_id == inst and isinstance(payload.client_instance_id, uuid.UUID)
    assert payload.client_instance_id is payload.client_instance_id  # built once
    with pytest.raises(AttributeError):
        payload.terminating = True
    # same value whether built from the UUID or the bytes
    again = type(payload)(
        inst,
        payload.terminating,
        payload.content_type,
        payload.data,
        payload.labels,
        payload.compression_type,
        payload.subscription_id,
        payload.received_at_ms,
    )
    assert again == payload and hash(again) == hash(payload)


def test_an_instance_evicted_before_its_push_is_answered_as_an_unknown_instance():
    """Kafka answers a push from an instance it no longer holds by creating it afresh, then validating: the
    same SubscriptionId (same configuration, same id) is accepted as the first push of a new instance."""
    registry = SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": "60000"})
    broker = make_broker(registry, max_instances=1, telemetry_max_bytes=1 << 20)
    sub, _ = broker.handle(GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)), CLIENT, T0 + 1000)
    broker.handle(GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)), CLIENT, T0 + 1001)  # evicts the first
    assert broker.instances.get_state(sub.client_instance_id.bytes) is None
    push = PushTelemetryRequest(sub.client_instance_id, sub.subscription_id, False, 0, b"\x0a\x00")
    assert broker.handle(push, CLIENT, T0 + 1002)[0].error_code == E.NONE
    # and a second push right after it is held to the new instance's interval
    assert broker.handle(push, CLIENT, T0 + 1003)[0].error_code == E.THROTTLING_QUOTA_EXCEEDED


def test_an_instance_evicted_while_its_push_is_exported_keeps_the_answer():
    """The window the thread-safety regression was in: other requests evict the instance after its push was
    decided and before its export ended, and even bring its id back as a new instance. The push keeps its
    answer (the receiver failed: INVALID_RECORD), nothing raises, and the new incarnation's last error is
    left alone, as Kafka sets lastKnownError on the instance object it decided with, no longer cached."""
    registry = SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": "100"})
    box = {}

    class EvictingThenFailing:
        def export_metrics(self, context, payload):
            broker = box["broker"]
            broker.handle(GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)), CLIENT, T0 + 2001)  # evicts it
            assert broker.instances.get_state(payload.client_instance_id_bytes) is None
            resp, _ = broker.handle(GetTelemetrySubscriptionsRequest(payload.client_instance_id), CLIENT, T0 + 2002)
            assert resp.error_code == 0  # back, anew
            raise RuntimeError("receiver failure")

    broker = box["broker"] = make_broker(
        registry, max_instances=1, telemetry_max_bytes=1 << 20, receivers=[EvictingThenFailing()]
    )
    sub, _ = broker.handle(GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)), CLIENT, T0 + 2000)
    push = PushTelemetryRequest(sub.client_instance_id, sub.subscription_id, False, 0, b"\x0a\x00")
    resp, payload = broker.handle(push, CLIENT, T0 + 2000)
    assert resp.error_code == E.INVALID_RECORD and payload is None
    assert broker.instances.get_state(sub.client_instance_id.bytes)["last_known_error"] == E.NONE
    assert broker.metrics()["push-results"] == {"INVALID_RECORD": 1}


def test_a_delivered_push_that_fails_to_export_is_not_counted_as_this_brokers_answer():
    """deliver() feeds a push someone else answered: a payload that then fails to decompress is counted as a
    plugin error, and push-results (this broker's own answers, by code) stay as they were."""
    broker = make_broker(telemetry_max_bytes=1 << 20)
    body = PushTelemetryRequest(uuid.uuid4(), 1, False, 4, b"not zstd")
    assert broker.deliver(body, CLIENT, 0, T0) is None
    m = broker.metrics()
    assert m["push-results"] == {} and m["push-request-count"] == 0
    assert m["plugin-error-count"] == 1


def test_a_delivered_uncompressed_push_over_the_limit_is_not_exported():
    """deliver() skips the wire-size check (another broker answered): an uncompressed payload over
    telemetry_max_bytes is still too large to hand to the receivers, as a compressed one would be."""
    rec = Recorder()
    broker = make_broker(telemetry_max_bytes=100, receivers=[rec])
    for size, exported in ((100, True), (101, False)):
        body = PushTelemetryRequest(uuid.uuid4(), 1, False, 0, b"\x0a" * size)
        assert (broker.deliver(body, CLIENT, 0, T0) is not None) is exported
    assert [len(p.data) for _, p in rec.payloads] == [100]
    assert broker._counts["delivered-decompressed-too-large"] == 1
