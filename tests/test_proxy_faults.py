"""Faults survived through ``kip714 proxy``: librdkafka's mock cluster (an upstream nobody here wrote) has its
faults injected through its C API (``kip714.tools.mock_cluster``) while an idempotent librdkafka producer and
a consumer group run through the proxy, which runs as the command (``kip714 proxy``, restarted mid-run):

a broker down and up, a partition leader moved, NOT_LEADER_OR_FOLLOWER / REQUEST_TIMED_OUT / a dropped
connection pushed onto Produce, every broker slow, the proxy restarted, and a broker gone for good.

After each fault the workload must make progress again, the clients' telemetry must still be recorded, and the
proxy's own ``kip714_*`` metrics must show what happened. At the end: every acknowledged record was written
once (one partition and offset per value) and consumed, no delivery failed, and no client ever saw an address
other than the proxy's.

The producer is transactional, hence idempotent: librdkafka's mock cluster checks the producer's sequence
numbers only for a transactional producer (``rd_kafka_mock_validate_records`` returns at once when the
TransactionalId is empty), so a plain idempotent producer's batch that was appended but whose answer was lost
(a broker going down) is written twice by the mock — where Kafka would deduplicate it. A record counts as
acknowledged once its transaction committed; the consumer reads committed records only."""

from __future__ import annotations

import socket
import threading
import time
import uuid

import pytest

ck = pytest.importorskip("confluent_kafka")

from mock_cluster import MockCluster  # noqa: E402
from proxy_helpers import BrokerStats  # noqa: E402
from service_helpers import KipProcess, free_ports, metric, scrape, wait_until  # noqa: E402
from txn_batch import commit_batch  # noqa: E402

import kip714  # noqa: E402

pytestmark = pytest.mark.integration

PRODUCE, METADATA = 0, 3
NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, TRANSPORT = 6, 7, -195


class Workload:
    """A transactional (idempotent) producer and a one-member consumer group through ``bootstrap``, each on its
    thread."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.stats = BrokerStats()
        self.acked: dict[bytes, tuple[int, int]] = {}  # value -> (partition, offset) of its ack
        self.failed: list[str] = []
        self.consumed: dict[bytes, set[tuple[int, int]]] = {}
        self.errors: list[str] = []
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._lock = threading.Lock()
        common = {
            "bootstrap.servers": bootstrap,
            "statistics.interval.ms": 500,
            "stats_cb": self.stats,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 500,
            "topic.metadata.refresh.interval.ms": 2000,
        }
        self.producer = ck.Producer(
            {
                **common,
                "client.id": "faults-producer",
                "enable.idempotence": True,
                "transactional.id": "faults-" + uuid.uuid4().hex[:8],
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                "transaction.timeout.ms": 60000,
            }
        )
        self.consumer = ck.Consumer(
            {
                **common,
                "client.id": "faults-consumer",
                "group.id": "g-" + uuid.uuid4().hex[:8],
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 200,
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 500,
                "fetch.wait.max.ms": 100,
                "isolation.level": "read_committed",
            }
        )
        self.consumer.subscribe([topic])
        self._threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _produce(self) -> None:
        self.producer.init_transactions(30)
        i = 0
        while not self._stop_producing.is_set():
            self._transaction([b"v%08d" % n for n in range(i, i + 10)])
            i += 10

    def _transaction(self, values: list[bytes]) -> None:
        """Produce ``values`` in one transaction, again in a new one when it must be aborted (bounded); once it
        commits, they are acknowledged at the places their delivery reports named."""
        places, problem = commit_batch(self.producer, self.topic, values, lambda n, value: b"k%d" % (n % 7))
        if problem is not None:
            self.failed.append(problem)
        with self._lock:
            self.acked.update(places)

    def _consume(self) -> None:
        while not self._stop_consuming.is_set():
            msg = self.consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error() is not None:
                if not msg.error().retriable() and msg.error().code() != ck.KafkaError._PARTITION_EOF:
                    self.errors.append(str(msg.error()))
                continue
            with self._lock:
                self.consumed.setdefault(msg.value(), set()).add((msg.partition(), msg.offset()))

    def counts(self) -> tuple[int, int]:
        with self._lock:
            return len(self.acked), sum(1 for v in self.acked if v in self.consumed)

    def progress(self, records: int, what: str, timeout: float = 25.0) -> None:
        """Wait until ``records`` more are acknowledged and consumed than now."""
        acked0, _ = self.counts()

        def moved() -> bool:
            acked, both = self.counts()
            return acked >= acked0 + records and both >= acked0 + records

        wait_until(
            moved,
            timeout,
            0.05,
            f"{what}: {records} more records acknowledged and consumed "
            f"(now {self.counts()}, failures {self.failed[:3]})",
        )

    def finish(self, timeout: float = 40.0) -> None:
        """Stop producing (flushing what is in flight), wait until every acknowledged record is consumed."""
        self._stop_producing.set()
        self._threads[0].join(70)
        wait_until(
            lambda: self.counts()[1] == self.counts()[0],
            timeout,
            0.1,
            f"every acknowledged record consumed (acked, consumed: {self.counts()})",
        )
        self.close()

    def close(self) -> None:
        self._stop_producing.set()
        self._stop_consuming.set()
        for t in self._threads:
            t.join(70)
        if not getattr(self, "_closed", False):
            self._closed = True
            self.consumer.close()


def _proxy(args: list[str]) -> tuple[KipProcess, str]:
    proc = KipProcess(args)
    url = proc.wait_for(r"event=prometheus url=(\S+)").group(1)
    proc.wait_for(r"event=ready")
    return proc, url


def _pushes(url: str) -> float:
    return metric(scrape(url), "kip714_pushes_total", error_code="NONE")


def test_faults_survived_through_the_proxy(tmp_path):
    topic = "faults"
    with MockCluster(3) as mc:
        mc.create_topic(topic, 6)
        port, *brokers = free_ports(4)
        ports = {port, *brokers}
        args = [
            "proxy",
            "--upstream",
            mc.bootstraps,
            "--port",
            str(port),
            "--broker-ports",
            ",".join(f"{i + 1}={p}" for i, p in enumerate(brokers)),
            "--telemetry",
            "terminate",
            "--metrics",
            "*",
            "--interval-ms",
            "1000",
            "--record",
            str(tmp_path / "rec"),
            "--prometheus",
            "127.0.0.1:0",
            "--summary-interval",
            "0",
            "--upstream-check-interval",
            "0.5",
            "--drain-timeout",
            "10s",
            "--loop",
            "asyncio",
        ]
        proxy, url = _proxy(args)
        work = None
        try:
            work = Workload(f"127.0.0.1:{port}", topic)
            work.progress(40, "baseline")
            wait_until(lambda: _pushes(url) >= 2, 15, 0.2, "telemetry pushes answered")

            # 1. a broker down, then up: the proxy counts the broker's closed and refused connections
            before = scrape(url)
            mc.broker_down(2)
            wait_until(
                lambda: (
                    metric(scrape(url), "kip714_upstream_errors_total", node_id="2")
                    > metric(before, "kip714_upstream_errors_total", node_id="2")
                ),
                15,
                0.1,
                "broker 2 down: counted in kip714_upstream_errors_total{node_id=2}",
            )
            mc.broker_up(2)
            work.progress(40, "broker 2 down and up")
            pushes = _pushes(url)
            wait_until(lambda: _pushes(url) > pushes, 15, 0.2, "telemetry after broker down/up")

            # 2. a partition leader moved: clients ask for Metadata again and go on
            md = work.producer.list_topics(topic, timeout=10).topics[topic].partitions
            leader = md[0].leader
            before = scrape(url)
            mc.move_leader(topic, 0, 1 if leader != 1 else 3)
            work.progress(40, "partition 0's leader moved")
            assert metric(scrape(url), "kip714_proxy_requests_total", api_key=str(METADATA)) > metric(
                before, "kip714_proxy_requests_total", api_key=str(METADATA)
            )

            # 3. NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT and a dropped connection pushed onto Produce
            before = scrape(url)
            mc.push_errors(PRODUCE, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, TRANSPORT, NOT_LEADER_OR_FOLLOWER)
            work.progress(40, "Produce errors injected")
            after = scrape(url)
            assert metric(after, "kip714_upstream_errors_total", reason="closed") > metric(
                before, "kip714_upstream_errors_total", reason="closed"
            ), "the dropped connection"
            assert metric(after, "kip714_proxy_requests_total", api_key=str(PRODUCE)) > metric(
                before, "kip714_proxy_requests_total", api_key=str(PRODUCE)
            )

            # 4. every broker slow (250 ms per response): slower, nothing lost, no error of the proxy's own
            before = scrape(url)
            for broker in (1, 2, 3):
                mc.set_rtt(broker, 250)
            work.progress(20, "slow brokers")
            for broker in (1, 2, 3):
                mc.set_rtt(broker, 0)
            after = scrape(url)
            assert metric(after, "kip714_upstream_errors_total") == metric(before, "kip714_upstream_errors_total")
            assert metric(after, "kip714_connection_events_total", event="protocol_errors") == 0

            # 5. the proxy restarted (SIGTERM: drained) on the same ports: the clients reconnect
            assert proxy.stop() == 0
            assert "event=drained" in proxy.log
            proxy, url = _proxy(args)
            work.progress(40, "proxy restarted")
            wait_until(lambda: _pushes(url) >= 1, 15, 0.2, "telemetry answered by the restarted proxy")
            assert metric(scrape(url), "kip714_connections_accepted_total") >= 2

            # 6. a broker gone for good: its listener closes a connection at once (as a gone broker refuses it),
            #    never hangs, and the clients go on with the others
            mc.decommission(3)
            started = time.monotonic()
            with socket.create_connection(("127.0.0.1", brokers[2]), timeout=10) as s:
                s.sendall(kip714.encode_request(kip714.wire.ApiVersionsRequest(), 1, "probe", 0))
                s.settimeout(10)
                try:
                    assert s.recv(100) == b""  # closed without an answer...
                except ConnectionResetError:
                    pass  # ...or reset (the request was left unread)
            assert time.monotonic() - started < 3
            work.progress(40, "broker 3 decommissioned")
            assert metric(scrape(url), "kip714_upstream_errors_total", node_id="3", reason="refused") >= 1

            work.finish()
            assert not work.failed, work.failed[:5]
            assert not work.errors, work.errors[:5]
            # written once: consumed from one place only, in the partition its ack named (the offset of the ack is
            # not compared: the mock acknowledges a resent batch it already holds with offset 0 or none)
            for value, (partition, offset) in work.acked.items():
                places = work.consumed.get(value, set())
                assert len(places) == 1 and next(iter(places))[0] == partition, (value, partition, offset, places)
            assert set(work.consumed) == set(work.acked)
            assert work.stats.ports() and work.stats.ports() <= ports, (work.stats.addresses, ports)
        finally:
            if work is not None:
                work.close()
            proxy.stop()
    rows = kip714.read_recording(tmp_path / "rec").to_pylist()
    clients = {r["client_id"] for r in rows if r["error_code"] == 0}
    assert {"faults-producer", "faults-consumer"} <= clients, clients
