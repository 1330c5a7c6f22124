"""``kip714 proxy`` in front of librdkafka's mock cluster (an upstream nobody here wrote), with real clients:
librdkafka (confluent-kafka) producers, consumer groups and transactions, and kafka-python."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid

import pytest

ck = pytest.importorskip("confluent_kafka")

from mock_cluster import MockCluster  # noqa: E402
from proxy_helpers import BrokerStats, connect, recv_frame, start_proxy  # noqa: E402
from service_helpers import free_port_run  # noqa: E402

import kip714  # noqa: E402


@pytest.fixture(scope="module")
def mock3():
    with MockCluster(3) as mc:
        yield mc


@pytest.fixture(params=["asyncio", "uvloop"])
def proxy3(mock3, request):
    """The proxy in front of the 3-broker mock cluster, on each event loop ``--loop`` offers (uvloop starts
    reading a connection before the proxy has its upstream: the early bytes must be kept, in order)."""
    if request.param == "uvloop":
        pytest.importorskip("uvloop")
    pt = start_proxy(mock3.bootstraps, request.param)
    yield pt
    pt.stop()


def topic_name() -> str:
    return "t-" + uuid.uuid4().hex[:10]


def consume(conf: dict, topic: str, expected: int, timeout: float = 40.0, stats: BrokerStats | None = None):
    conf = {"auto.offset.reset": "earliest", "enable.auto.commit": False, **conf}
    if stats is not None:
        conf.update({"statistics.interval.ms": 200, "stats_cb": stats})
    c = ck.Consumer(conf)
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expected and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append((m.partition(), m.offset(), m.key(), m.value()))
        # a little longer: nothing more (no duplicate) may arrive
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                got.append((m.partition(), m.offset(), m.key(), m.value()))
        if got:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def test_listeners_and_metadata_name_only_the_proxy(mock3, proxy3):
    p = ck.Producer({"bootstrap.servers": proxy3.bootstrap})
    md = p.list_topics(timeout=10)
    upstream_ports = {port for _, port in mock3.addresses}
    ports = proxy3.call(lambda: proxy3.proxy.broker_ports)
    assert set(ports) == {1, 2, 3}
    assert {b.id: b.port for b in md.brokers.values()} == ports
    assert not upstream_ports & {b.port for b in md.brokers.values()}
    assert proxy3.call(lambda: dict(proxy3.proxy.nodes)) == {i + 1: a for i, a in enumerate(mock3.addresses)}
    p.flush(1)


def test_produce_and_consume_in_order_nothing_lost_or_duplicated(mock3, proxy3):
    topic = topic_name()
    mock3.create_topic(topic, 6)
    pstats, cstats = BrokerStats(), BrokerStats()
    p = ck.Producer(
        {
            "bootstrap.servers": proxy3.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "statistics.interval.ms": 200,
            "stats_cb": pstats,
        }
    )
    sent = {}
    n = 3000
    for i in range(n):
        key = b"k%d" % (i % 37)
        p.produce(topic, value=b"v%06d" % i + b"x" * (i % 300), key=key)
        sent.setdefault(key, []).append(b"v%06d" % i)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    p.poll(0.5)
    group = "g-" + uuid.uuid4().hex[:8]
    got = consume({"bootstrap.servers": proxy3.bootstrap, "group.id": group}, topic, n, stats=cstats)
    assert len(got) == n, f"consumed {len(got)} of {n}"
    assert len({(part, off) for part, off, _, _ in got}) == n  # no duplicate
    by_key = {}
    for _part, _off, key, value in sorted(got, key=lambda g: (g[0], g[1])):
        by_key.setdefault(key, []).append(value[:7])
    assert by_key == sent  # every record, in order per key
    # offsets committed through the proxy's coordinator connection: a second consumer of the group gets nothing
    assert consume({"bootstrap.servers": proxy3.bootstrap, "group.id": group}, topic, 1, timeout=3) == []
    # librdkafka's own view: every broker it talked to is a proxy port
    proxy_ports = proxy3.proxy_ports()
    for stats in (pstats, cstats):
        assert stats.ports(), "no statistics"
        assert stats.ports() <= proxy_ports, (stats.addresses, proxy_ports)


def test_transactions_through_the_proxy(mock3, proxy3):
    topic = topic_name()
    mock3.create_topic(topic, 3)
    p = ck.Producer({"bootstrap.servers": proxy3.bootstrap, "transactional.id": "tx-" + uuid.uuid4().hex[:8]})
    p.init_transactions(20)
    p.begin_transaction()
    for i in range(100):
        p.produce(topic, value=b"committed-%d" % i, key=b"%d" % (i % 3))
    p.commit_transaction(20)
    p.begin_transaction()
    for i in range(50):
        p.produce(topic, value=b"aborted-%d" % i)
    p.flush(10)
    p.abort_transaction(20)
    conf = {"group.id": "g-" + uuid.uuid4().hex[:8], "isolation.level": "read_committed"}
    got = consume({"bootstrap.servers": proxy3.bootstrap, **conf}, topic, 150, timeout=10)
    # the mock does not filter aborted records (no AbortedTransactions in its Fetch answers): the oracle is
    # the same consumer reading the mock directly
    direct = consume(
        {"bootstrap.servers": mock3.bootstraps, **conf, "group.id": "direct-" + conf["group.id"]},
        topic,
        150,
        timeout=10,
    )
    values = sorted(v for _, _, _, v in got)
    assert values == sorted(v for _, _, _, v in direct)
    assert {b"committed-%d" % i for i in range(100)} <= set(values) and len(values) == len(set(values))


def test_kafka_python_through_the_proxy(mock3, proxy3):
    """kafka-python 3.0 opens with ApiVersions v4, which the mock answers with a body kafka-python cannot
    parse; the proxy asks the mock at a version it knows and answers kafka-python in v4."""
    kafka = pytest.importorskip("kafka")
    topic = topic_name()
    mock3.create_topic(topic, 2)
    producer = kafka.KafkaProducer(bootstrap_servers=proxy3.bootstrap, request_timeout_ms=10000, max_block_ms=20000)
    futures = [producer.send(topic, key=b"%d" % (i % 2), value=b"kp-%d" % i) for i in range(200)]
    producer.flush(20)
    assert all(f.get(10) is not None for f in futures)
    producer.close(5)
    # no consumer group: the mock reads JoinGroup v6 (flexible) with a non-compact protocol array and closes
    # the connection, directly as through the proxy; partitions are assigned by hand
    consumer = kafka.KafkaConsumer(bootstrap_servers=proxy3.bootstrap, auto_offset_reset="earliest", group_id=None)
    consumer.assign([kafka.TopicPartition(topic, 0), kafka.TopicPartition(topic, 1)])
    records = []
    deadline = time.monotonic() + 20
    while len(records) < 200 and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=200).values():
            records += batch
    end = time.monotonic() + 1.0  # a little longer: nothing more (no duplicate) may arrive
    while time.monotonic() < end:
        for batch in consumer.poll(timeout_ms=100).values():
            records += batch
    proxy_ports = proxy3.proxy_ports()
    seen_ports = {b.port for b in consumer._client.cluster.brokers()}
    consumer.close()
    assert sorted(r.value for r in records) == sorted(b"kp-%d" % i for i in range(200))
    for part in (0, 1):
        offsets = [r.offset for r in records if r.partition == part]
        assert offsets == sorted(offsets) and len(offsets) == len(set(offsets))
    assert seen_ports and seen_ports <= proxy_ports


def _metadata_request(corr: int, version: int = 9) -> bytes:
    return kip714.encode_request(kip714.wire.MetadataRequest(topics=[]), corr, "raw", version)


def test_default_port_mapping_is_base_plus_node_id(mock3):
    # the bootstrap port, the default base (port + 1) and the three brokers' ports (base + node id)
    base = free_port_run(5)
    pt = start_proxy(mock3.bootstraps, port=base, broker_port_base=None)
    try:
        assert pt.port == base
        assert pt.call(lambda: pt.proxy.broker_ports) == {1: base + 2, 2: base + 3, 3: base + 4}
    finally:
        pt.stop()


def _start_fails(upstream: str, **kw) -> Exception:
    async def run():
        proxy = kip714.TelemetryProxy(upstream, **kw)
        try:
            await proxy.start()
        finally:
            await proxy.close()

    with pytest.raises(kip714.errors.InvalidConfigError) as info:
        asyncio.run(run())
    return info.value


def test_a_broker_without_a_usable_listener_stops_the_start(mock3):
    """A node id with no port in --broker-ports, one that maps past 65535, or a port already taken: the
    proxy refuses to start, naming the broker (it had started with no broker listener, and every client
    timed out)."""
    ports = {}
    for node in (1, 2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports[node] = s.getsockname()[1]
    err = _start_fails(mock3.bootstraps, port=0, broker_ports=ports)
    assert "broker node id 3 has no port in --broker-ports" in str(err)
    assert err.error_code == kip714.ErrorCode.INVALID_CONFIG
    for port in ports.values():  # the listeners opened before the failure were let go
        socket.create_server(("127.0.0.1", port)).close()
    err = _start_fails(mock3.bootstraps, port=0, broker_port_base=65534)
    assert "broker node id 2 maps to port 65536, outside 1-65535" in str(err)
    with socket.create_server(("127.0.0.1", 0)) as taken:
        busy = {**ports, 3: taken.getsockname()[1]}
        err = _start_fails(mock3.bootstraps, port=0, broker_ports=busy)
    assert f"cannot listen on 127.0.0.1:{busy[3]} for broker node id 3" in str(err)


def test_a_broker_added_later_without_a_port_closes_the_connection(mock3):
    ports = {}
    for node in (1, 2, 3):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports[node] = s.getsockname()[1]
    pt = start_proxy(mock3.bootstraps, broker_ports=dict(ports))
    try:
        assert pt.call(lambda: pt.proxy.broker_ports) == ports

        def forget_node_3():  # as if node 3 had joined the cluster after the start, with no port given
            pt.proxy.explicit_ports.pop(3)
            pt.proxy._ports.pop(3)

        pt.call(forget_node_3)
        with connect(pt.port) as s:
            s.sendall(_metadata_request(7))
            # the answer names node 3, which the proxy cannot map: the connection closes, nothing is sent
            s.settimeout(5)
            assert s.recv(65536) == b""
        assert pt.call(lambda: pt.proxy.stats["rewrite_errors"]) == 1
    finally:
        pt.stop()


def test_raw_metadata_every_version_is_rewritten(mock3, proxy3):
    from kafka.protocol.metadata import MetadataResponse

    # (kafka-python decodes: the mock's answers to some versions carry a trailing byte kip714's strict
    # decoder refuses, and the proxy forwards them as they are apart from the addresses)
    upstream_ports = {port for _, port in mock3.addresses}
    ports = set(proxy3.call(lambda: proxy3.proxy.broker_ports).values())
    with connect(proxy3.port) as s:
        for version in range(1, 13):
            s.sendall(_metadata_request(100 + version, version))
            resp = MetadataResponse.decode(recv_frame(s), version=version, header=True)
            assert resp.header.correlation_id == 100 + version
            assert {b.port for b in resp.brokers} == ports
            assert not {b.port for b in resp.brokers} & upstream_ports


def test_find_coordinator_through_the_proxy(mock3, proxy3):
    from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

    ports = proxy3.call(lambda: proxy3.proxy.broker_ports)
    with connect(proxy3.port) as s:
        for version in (0, 1, 2, 3):
            req = FindCoordinatorRequest[version](key="group-x", **({"key_type": 0} if version else {}))
            req.with_header(correlation_id=version + 1, client_id="raw")
            s.sendall(bytes(req.encode(header=True, framed=True)))
            resp = FindCoordinatorResponse.decode(recv_frame(s), version=version, header=True)
            assert resp.header.correlation_id == version + 1
            assert resp.error_code == 0 and ports[resp.node_id] == resp.port
