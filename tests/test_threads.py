"""What docs/threads.md promises, tested as it says: one TelemetryBroker (its registry and instance table) and
its receivers shared by threads, under evictions, expiry and connection closes, answer every request with a
Kafka error code and lose no count.

Bounded in count: ``KIP714_STRESS_SCALE`` (default 1) multiplies the rounds; ``make sanitize`` runs it at 10.
"""

from __future__ import annotations

import os
import pathlib
import random
import threading
import uuid
from collections import Counter

import kip714
from kip714 import (
    ClientInfo,
    ErrorCode,
    GetTelemetrySubscriptionsRequest,
    Kip714Error,
    PushTelemetryRequest,
    SubscriptionRegistry,
    TelemetryBroker,
)

SCALE = max(1, int(os.environ.get("KIP714_STRESS_SCALE", "1")))
THREADS = 8
ROUNDS = 2_000 * SCALE
KAFKA_CODES = {int(c) for c in ErrorCode}
CAPTURES = pathlib.Path(__file__).parent / "data" / "captures"
T0 = 1_700_000_000_000


def _zstd_payload() -> bytes:
    body = kip714.decode_request(sorted(CAPTURES.glob("*_push_01_zstd.bin"))[0].read_bytes()[4:]).body
    return bytes(body.metrics)


class Clock:
    """The broker's injected clock (ms): the threads read it, a driver moves it on, now and then past the
    instances' expiry (60 s), so that expiry and the threads' requests interleave."""

    def __init__(self) -> None:
        self.now = T0
        self._lock = threading.Lock()

    def __call__(self) -> int:
        return self.now

    def step(self, rng: random.Random) -> None:
        with self._lock:
            self.now += 61_000 if rng.random() < 0.0002 else rng.choice((0, 0, 1, 2, 5))


def _run_threads(targets: list, timeout: float = 120.0) -> list[BaseException]:
    errors: list[BaseException] = []

    def guard(fn):
        def run():
            try:
                fn()
            except BaseException as exc:  # reported by the caller
                errors.append(exc)

        return run

    threads = [threading.Thread(target=guard(t)) for t in targets]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout)
    assert not any(th.is_alive() for th in threads), "a thread did not finish"
    return errors


class _Hooks:
    """A receiver with every hook, which yields the GIL in each so that other threads run in between a push's
    decision and the end of its export (the window the regression was in)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.exported = 0
        self.completed: Counter = Counter()
        self.closed = 0

    def export_metrics(self, context, payload) -> None:
        os.sched_yield()
        with self.lock:
            self.exported += 1

    def push_completed(self, context, request, error_code, received_at_ms) -> None:
        with self.lock:
            self.completed[error_code] += 1

    def instance_closed(self, context, client_instance_id, at_ms, reason) -> None:
        with self.lock:
            self.closed += 1


def _client_loop(
    broker: TelemetryBroker,
    seed: int,
    clock: Clock,
    data: bytes,
    pushes: Counter,
    gets: Counter,
    kip_errors: Counter,
    conns: list,
    conns_lock: threading.Lock,
    accepted_payloads: list,
    delivered: Counter | None = None,
) -> None:
    """One thread's clients: new instances (which evict others from the small table), Gets and pushes on
    known ones (sometimes with a stale SubscriptionId, a bad codec, a terminating flag, an empty payload),
    each on a connection another thread may close at any moment. With ``delivered``, a few pushes are fed
    through ``deliver`` instead, as a proxy tapping a cluster does (answered NONE by "the cluster")."""
    rng = random.Random(seed)
    known: list[tuple[uuid.UUID, int]] = []
    info = ClientInfo(client_id=f"t{seed}", client_software_name="stress", client_software_version="1")
    n_payloads = 0
    for n in range(ROUNDS):
        clock.step(rng)
        conn = (seed, n // 8)
        if n % 8 == 0:
            with conns_lock:
                conns.append(conn)
        try:
            if not known or rng.random() < 0.3:
                resp, _ = broker.handle(GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)), info, None, conn)
                gets[resp.error_code] += 1
                if resp.error_code == 0:
                    known.append((resp.client_instance_id, resp.subscription_id))
                    del known[:-16]
                continue
            iid, sid = rng.choice(known)
            if rng.random() < 0.15:
                resp, _ = broker.handle(GetTelemetrySubscriptionsRequest(iid), info, None, conn)
                gets[resp.error_code] += 1
                continue
            body = PushTelemetryRequest(
                iid,
                sid if rng.random() < 0.95 else sid ^ 1,
                rng.random() < 0.02,
                rng.choice((4, 4, 4, 9)),
                data if rng.random() < 0.9 else b"",
            )
            if delivered is not None and rng.random() < 0.05:
                delivered[broker.deliver(body, info, 0) is not None] += 1
                continue
            resp, payload = broker.handle(body, info, None, conn)
            pushes[resp.error_code] += 1
            assert (payload is not None) == (resp.error_code == 0 and len(body.metrics) > 0)
            n_payloads += payload is not None
        except Kip714Error as exc:  # allowed by the promise, counted by its Kafka code
            kip_errors[int(exc.error_code)] += 1
    accepted_payloads.append(n_payloads)


def test_eight_threads_on_a_small_table_answer_every_request_with_a_kafka_code():
    """8 threads × ROUNDS Gets and pushes on a 1 024-instance table (evictions all the time), expiry driven
    by the injected clock, connections closed by a ninth thread: nothing but kip714 errors is raised, every
    answer is a Kafka error code, and every answer is counted once by the broker and by its receiver."""
    registry = SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": "100"})
    clock = Clock()
    hooks = _Hooks()
    broker = TelemetryBroker(registry, clock=clock, max_instances=1024, receivers=[hooks])
    data = _zstd_payload()
    pushes, gets, kip_errors = Counter(), Counter(), Counter()
    conns: list = []
    conns_lock = threading.Lock()
    accepted_payloads: list[int] = []
    done = threading.Event()
    closes = Counter()

    def closer():
        rng = random.Random(99)
        while not done.is_set():
            with conns_lock:
                conn = conns.pop(rng.randrange(len(conns))) if len(conns) > 256 else None
            if conn is not None:
                closes[broker.connection_closed(conn)] += 1
            else:
                os.sched_yield()

    def reconfigure():
        rng = random.Random(7)
        n = 0
        while not done.is_set() and n < 200 * SCALE:  # subscription changes: instances go stale
            registry.set("extra", {"metrics": f"m{n % 3}.", "interval.ms": str(rng.choice((100, 200)))})
            n += 1
            done.wait(0.005)

    side = [threading.Thread(target=closer), threading.Thread(target=reconfigure)]
    for th in side:
        th.start()
    # each thread has its own counters: a Counter is not shared between threads
    per_thread = [(Counter(), Counter(), Counter()) for _ in range(THREADS)]
    delivered = [Counter() for _ in range(THREADS)]
    errors = _run_threads(
        [
            (
                lambda k=k: _client_loop(
                    broker, k, clock, data, *per_thread[k], conns, conns_lock, accepted_payloads, delivered[k]
                )
            )
            for k in range(THREADS)
        ]
    )
    done.set()
    for th in side:
        th.join(30)
    assert not errors, errors
    for p, g, k in per_thread:
        pushes.update(p)
        gets.update(g)
        kip_errors.update(k)
    assert set(pushes) | set(gets) <= KAFKA_CODES
    assert not kip_errors, kip_errors  # this workload is well-formed: no request is refused by raising
    fed = sum(delivered, Counter())
    total = sum(pushes.values()) + sum(gets.values()) + sum(fed.values())
    assert total == THREADS * ROUNDS and fed[True] > 0
    m = broker.metrics()
    assert m["push-request-count"] == sum(pushes.values())
    assert m["get-request-count"] == sum(gets.values())
    assert {ErrorCode[name]: n for name, n in m["push-results"].items()} == +pushes
    assert {ErrorCode[name]: n for name, n in m["get-results"].items()} == +gets
    assert set(pushes) <= {0, 42, 76, 89, 117}  # NONE, INVALID_REQUEST, UNSUPPORTED_COMPRESSION, THROTTLED, UNKNOWN_SUB
    assert pushes[0] > 0 and pushes[117] > 0 and gets[0] > 0
    # every push reached the observer once with its answer (delivered ones with NONE); every accepted
    # payload, handled or delivered, was exported once
    assert hooks.completed == pushes + Counter({0: sum(fed.values())})
    assert hooks.exported == m["plugin-export-count"] == sum(accepted_payloads) + fed[True]
    assert m["instance-evictions"] > 0 and m["instance-expirations"] > 0 and closes[True] > 0
    assert m["instance-count"] <= 1024
    broker.instances._check()


class _Collector:
    """A loopback OTLP/HTTP endpoint that accepts everything and counts the requests' payload parts."""

    def __init__(self) -> None:
        import http.server

        outer = self
        self.requests = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests += 1
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_receivers_shared_by_threads_lose_nothing(tmp_path):
    """The recorder, the Prometheus exporter, the OTLP forwarder and a BackgroundReceiver fed by 8 threads
    calling ``handle``: every push is one recording row with its answer, the exporter counts every push by
    code, and every accepted payload is absorbed, forwarded or delivered, or counted as dropped (small queues
    make them drop)."""
    from kip714.broker.receivers import BackgroundReceiver
    from kip714.sinks.otlp_forward import OtlpForwarder
    from kip714.sinks.prometheus import PrometheusExporter
    from kip714.sinks.recorder import ParquetRecorder, read_recording

    registry = SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": "100"})
    clock = Clock()
    collector = _Collector()
    recorder = ParquetRecorder(tmp_path / "rec", flush_interval_s=0.05)
    exporter = PrometheusExporter(labels=("client_id",), max_queue=64)
    forwarder = OtlpForwarder(collector.url, labels=("client_id",), max_queue=64, compression="none")
    counted = _Hooks()
    background = BackgroundReceiver(counted, max_queue=64)
    broker = TelemetryBroker(
        registry, clock=clock, max_instances=1024, receivers=[recorder, exporter, forwarder, background]
    )
    data = _zstd_payload()
    per_thread = [(Counter(), Counter(), Counter()) for _ in range(THREADS)]
    accepted_payloads: list[int] = []
    conns: list = []
    try:
        errors = _run_threads(
            [
                (
                    lambda k=k: _client_loop(
                        broker, 100 + k, clock, data, *per_thread[k], conns, threading.Lock(), accepted_payloads
                    )
                )
                for k in range(THREADS)
            ]
        )
        assert not errors, errors
        assert exporter.flush(30) and forwarder.flush(30) and background.flush(30)
    finally:
        exporter.close()
        forwarder.close()
        background.close()
        recorder.close()
        collector.close()
    pushes: Counter = Counter()
    for p, _, k in per_thread:
        pushes.update(p)
        assert not k
    rows = read_recording(tmp_path / "rec")
    assert rows.num_rows == sum(pushes.values())
    assert Counter(rows.column("error_code").to_pylist()) == +pushes
    assert {ErrorCode[name]: n for name, n in exporter.push_codes.items()} == +pushes
    # one full-queue policy for all three: a full queue drops and counts the payload, never refuses the push
    exported = sum(accepted_payloads)
    assert pushes[87] == 0
    assert broker.metrics()["plugin-export-count"] == exported > 0
    for sink in (exporter, forwarder, background):
        assert set(sink.payloads_dropped) <= {"queue-full"}, sink.payloads_dropped
    assert exporter.payloads_absorbed + sum(exporter.payloads_dropped.values()) == exported
    assert forwarder.forwarded + sum(forwarder.payloads_dropped.values()) == exported
    assert counted.exported + background.dropped == exported and background.failed == 0


def test_a_metrics_collector_shared_by_threads_loses_no_increment():
    """The client half's MetricsCollector: 8 threads add to one counter and record into one histogram while
    another collects delta payloads; the deltas, decoded with opentelemetry-proto, add up to every increment."""
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

    from kip714 import MetricsCollector

    collector = MetricsCollector()
    counter = collector.counter("org.apache.kafka.producer.record.send.total")
    hist = collector.histogram("org.apache.kafka.producer.request.latency", [1.0, 10.0, 100.0])
    n = 2_000 * SCALE
    done = threading.Event()
    payloads: list[bytes] = []

    def add():
        for i in range(n):
            counter.add(1)
            hist.record(float(i % 200))

    def collect():
        while not done.is_set():
            payloads.append(collector.collect(delta=True))

    collecting = threading.Thread(target=collect)
    collecting.start()
    errors = _run_threads([add] * THREADS)
    done.set()
    collecting.join(30)
    assert not errors, errors
    payloads.append(collector.collect(delta=True))
    total = hist_count = 0
    for raw in payloads:
        for rm in MetricsData.FromString(raw).resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.HasField("sum"):
                        total += sum(p.as_double or p.as_int for p in m.sum.data_points)
                    if m.HasField("histogram"):
                        hist_count += sum(p.count for p in m.histogram.data_points)
    assert total == hist_count == THREADS * n
