"""Concurrency: the asyncio server under many concurrent raw-socket clients, and the broker / instance
table shared by threads, with every count checked to add up. Loopback only, bounded in count and time.

(The single-table thread tests are tests/test_instances.py::test_threads_share_one_table and
tests/test_broker.py::test_threads_share_a_broker; the broker test below adds shared instance ids,
configuration changes while requests run, receivers, and exact per-code accounting.)
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import pathlib
import random
import struct
import threading
import time
from collections import Counter

import pytest
from server_thread import ServerThread

import kip714
from kip714 import GetTelemetrySubscriptionsRequest, PushTelemetryRequest, SubscriptionRegistry, TelemetryBroker
from kip714.endpoint.server import TelemetryServer
from kip714.sinks.recorder import ParquetRecorder, read_recording
from kip714.wire import ApiVersionsRequest

CAPTURES = pathlib.Path(__file__).parent / "data" / "captures"
N_CLIENTS = 200


def _payloads():
    out = []
    for path in sorted(CAPTURES.glob("*_push_01_*.bin")):
        body = kip714.decode_request(path.read_bytes()[4:]).body
        if body.metrics is not None and len(body.metrics):
            out.append((body.compression_type, bytes(body.metrics)))
    assert {c for c, _ in out} >= {0, 1, 2, 3, 4}
    return out


async def _client(k: int, port: int, payloads, log: list, barrier):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    client_id = f"stress-{k}"
    corr = itertools.count(k * 1000)

    async def call(body, version, api_key):
        c = next(corr)
        writer.write(kip714.encode_request(body, c, client_id, api_version=version))
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        resp = kip714.decode_response(await reader.readexactly(size), api_key, version)
        assert resp.correlation_id == c
        return resp.body

    try:
        av = await call(ApiVersionsRequest("kip714-stress", "1.0"), 3, 18)
        assert av.error_code == 0 and {k.api_key for k in av.api_keys} >= {71, 72}
        await barrier()  # every client connected at the same time
        sub = await call(GetTelemetrySubscriptionsRequest(None), 0, 71)
        assert sub.error_code == 0 and sub.requested_metrics == ["*"]
        iid, sid = sub.client_instance_id, sub.subscription_id
        ctype, data = payloads[k % len(payloads)]
        plan = [(sid, False, 0), (sid + 1, False, 117), (sid, False, 0), (sid, True, 0), (sid, False, 42)]
        for push_sid, terminating, expect in plan:
            r = await call(PushTelemetryRequest(iid, push_sid, terminating, ctype, data), 0, 72)
            log.append((k, r.error_code, expect))
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except ConnectionError:
            pass


@pytest.mark.integration
@pytest.mark.slow
def test_200_concurrent_clients_every_request_is_answered_and_counted(tmp_path):
    registry = SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": "100"})
    clock = itertools.count(1_700_000_000_000, 1000)  # every request 1 s later: no throttling by time
    broker = TelemetryBroker(
        registry, clock=lambda: next(clock), max_instances=10_000, cache_expiry_ms=10**9
    )  # the fake clock runs ~1400 s; nothing may expire
    exported = Counter()
    recorder = ParquetRecorder(tmp_path / "rec", flush_interval_s=0.5)
    server = TelemetryServer(
        broker,
        "127.0.0.1",
        0,
        recorder=recorder,
        max_connections=N_CLIENTS + 10,
        on_payload=lambda p: exported.update([p.compression_type]),
    )
    srv = ServerThread(server)
    payloads = _payloads()
    log: list = []
    started = time.monotonic()
    try:
        peak = []

        async def main():
            arrived = [0]
            all_here = asyncio.Event()

            async def barrier():
                arrived[0] += 1
                if arrived[0] == N_CLIENTS:
                    peak.append(srv.call(lambda: len(server.connections)))
                    all_here.set()
                await asyncio.wait_for(all_here.wait(), 30)

            await asyncio.wait_for(
                asyncio.gather(*(_client(k, server.port, payloads, log, barrier) for k in range(N_CLIENTS))), 60
            )

        logging.getLogger("kip714").setLevel(logging.WARNING)
        asyncio.run(main())
        elapsed = time.monotonic() - started
        deadline = time.monotonic() + 10
        while srv.call(lambda: len(server.connections)) and time.monotonic() < deadline:
            time.sleep(0.02)
        stats = srv.call(lambda: Counter(server.stats))
        codes = srv.call(lambda: dict(server.push_codes))
        open_connections = srv.call(lambda: len(server.connections))
    finally:
        srv.stop()  # also closes (flushes) the recorder

    assert peak == [N_CLIENTS]  # 200 connections open at once
    assert len(log) == 5 * N_CLIENTS
    wrong = [(k, got, want) for k, got, want in log if got != want]
    assert not wrong, wrong[:10]
    assert codes == {0: 3 * N_CLIENTS, 117: N_CLIENTS, 42: N_CLIENTS}
    assert stats["gets"] == N_CLIENTS and stats["pushes"] == 5 * N_CLIENTS
    assert stats["connections"] == N_CLIENTS and not stats["protocol_errors"] and not stats["internal_errors"]
    assert not stats["connections_refused"] and open_connections == 0
    m = broker.metrics()
    assert m["get-request-count"] == N_CLIENTS and m["push-request-count"] == 5 * N_CLIENTS
    assert m["push-results"] == {
        "NONE": 3 * N_CLIENTS,
        "UNKNOWN_SUBSCRIPTION_ID": N_CLIENTS,
        "INVALID_REQUEST": N_CLIENTS,
    }
    assert m["plugin-export-count"] == 3 * N_CLIENTS and m["plugin-error-count"] == 0
    # every client created its instance on its own connection; each went when its connection closed
    assert m["instance-count"] == 0 and m["throttle-count"] == 0
    assert stats["instances_dropped_on_disconnect"] == N_CLIENTS
    assert sum(exported.values()) == 3 * N_CLIENTS  # every accepted payload reached on_payload
    rows = read_recording(tmp_path / "rec").to_pylist()  # and every push was recorded, none lost
    assert len(rows) == 5 * N_CLIENTS
    assert Counter(r["error_code"] for r in rows) == Counter(codes)
    assert len({r["client_instance_id"] for r in rows}) == N_CLIENTS
    assert elapsed < 45, elapsed


def test_threads_share_a_broker_with_shared_instances_and_config_changes():
    registry = SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": "100"})
    clock = itertools.count(1_700_000_000_000, 7)
    lock = threading.Lock()
    exported = []

    class Receiver:
        def export_metrics(self, context, payload):
            with lock:
                exported.append(payload.client_instance_id)

    broker = TelemetryBroker(registry, clock=lambda: next(clock), max_instances=64, receivers=[Receiver()])
    data = kip714.compress(b"\x0a\x00" * 50, 4)
    ids = []
    for _ in range(40):  # 40 instances shared by every thread
        resp, _ = broker.handle(kip714.GetTelemetrySubscriptionsRequest(None))
        ids.append((resp.client_instance_id, resp.subscription_id))
    results: list[Counter] = []
    gets: list[Counter] = []
    delivered: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def worker(seed):
        rng = random.Random(seed)
        mine, mine_gets, got = Counter(), Counter(), 0
        try:
            for _i in range(1500):
                iid, sid = rng.choice(ids)
                if rng.random() < 0.2:
                    r, _ = broker.handle(kip714.GetTelemetrySubscriptionsRequest(iid))
                    mine_gets[r.error_code] += 1
                    continue
                term = rng.random() < 0.02
                body = kip714.PushTelemetryRequest(
                    iid,
                    sid if rng.random() < 0.9 else sid ^ 1,
                    term,
                    rng.choice((0, 4, 4, 9)),
                    data if rng.random() < 0.8 else b"",
                )
                if body.compression_type == 0:
                    body.metrics = b"\x0a\x00" * 50
                r, payload = broker.handle(body)
                mine[r.error_code] += 1
                assert (payload is not None) == (r.error_code == 0 and len(body.metrics) > 0)
                got += payload is not None
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        results.append(mine)
        delivered.append(got)
        gets.append(mine_gets)

    def reconfigure():
        n = 0
        while not stop.is_set():  # config changes bump the subscription version
            registry.set("extra", {"metrics": f"m{n % 3}.", "interval.ms": "200"})
            n += 1
            time.sleep(0.002)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    changer = threading.Thread(target=reconfigure)
    changer.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    stop.set()
    changer.join(10)
    assert not errors, errors
    pushes = sum(results, Counter())
    get_codes = sum(gets, Counter())
    m = broker.metrics()
    # every answer the threads saw is counted exactly once, by code
    assert sum(pushes.values()) + sum(get_codes.values()) == 8 * 1500
    assert m["push-request-count"] == sum(pushes.values())
    assert m["get-request-count"] == sum(get_codes.values()) + 40
    assert {kip714.ErrorCode[name]: n for name, n in m["push-results"].items()} == +pushes
    assert set(pushes) <= {0, 42, 76, 89, 117}
    # every accepted non-empty push was exported once (empty ones are answered NONE without an export)
    assert m["plugin-export-count"] == len(exported) == sum(delivered) <= pushes[0]
    assert m["instance-count"] <= 64
    broker.instances._check()


def test_threads_open_and_close_connections_on_one_broker():
    """Connection tracking under threads: every instance created on a connection that closed is gone,
    every other one is there, and each close drops its instance exactly once."""
    registry = SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": "100"})
    clock = itertools.count(1_700_000_000_000, 1)
    broker = TelemetryBroker(registry, clock=lambda: next(clock), max_instances=100_000, cache_expiry_ms=10**9)
    dropped, kept, errors = Counter(), Counter(), []

    def worker(t):
        rng = random.Random(t)
        try:
            for n in range(600):
                conn = (t, n)
                resp, _ = broker.handle(kip714.GetTelemetrySubscriptionsRequest(None), None, None, conn)
                assert resp.error_code == 0
                push = kip714.PushTelemetryRequest(resp.client_instance_id, resp.subscription_id, False, 0, b"")
                assert broker.handle(push, None, None, conn)[0].error_code == 0
                if rng.random() < 0.5:
                    assert broker.connection_closed(conn) is True
                    assert broker.connection_closed(conn) is False
                    dropped[t] += 1
                else:
                    kept[t] += 1
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not errors, errors
    assert sum(dropped.values()) + sum(kept.values()) == 8 * 600
    assert broker.metrics()["instance-count"] == sum(kept.values())
    broker.instances._check()
