"""Address rewriting of ``kip714 proxy`` (kip714.endpoint.rewrite), against kafka-python 3.0's encoders and
decoders (generated from Kafka's own message definitions) as the independent oracle."""

from __future__ import annotations

import pytest
from kafka.protocol.admin import DescribeClusterResponse
from kafka.protocol.metadata import ApiVersionsResponse as KpApiVersionsResponse
from kafka.protocol.metadata import FindCoordinatorResponse, MetadataResponse
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

import kip714
from kip714.endpoint import rewrite
from kip714.endpoint.rewrite import RewriteError

PROXY = {1: 19001, 2: 19002, 3: 19003}


def advertise(node_id, host, port):
    if node_id not in PROXY:
        raise RewriteError(f"no port for {node_id}")
    advertise.seen.append((node_id, host, port))
    return "proxy.example", PROXY[node_id]


advertise.seen = []  # the calls, for the tests that check them (each resets it): any test may run first


def identity(node_id, host, port):
    return host, port


def encode(msg, corr=42):
    msg.with_header(correlation_id=corr)
    return bytes(msg.encode(header=True, framed=True))


def decode(cls, frame, version):
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    return cls.decode(frame[4:], version=version, header=True)


def metadata(version):
    B = MetadataResponse.MetadataResponseBroker
    T = MetadataResponse.MetadataResponseTopic
    P = T.MetadataResponsePartition
    brokers = [
        B(node_id=i, host=f"broker-{i}.internal", port=9092 + i, rack=f"r{i}" if version else None) for i in (1, 2, 3)
    ]
    topics = [
        T(
            error_code=0,
            name=f"topic-{t}",
            is_internal=False,
            partitions=[
                P(
                    error_code=0,
                    partition_index=p,
                    leader_id=1 + p % 3,
                    leader_epoch=7,
                    replica_nodes=[1, 2, 3],
                    isr_nodes=[1, 2],
                    offline_replicas=[],
                )
                for p in range(4)
            ],
        )
        for t in range(3)
    ]
    return MetadataResponse[version](
        throttle_time_ms=5, brokers=brokers, cluster_id="cluster-x", controller_id=2, topics=topics
    )


@pytest.mark.parametrize("version", range(14))
def test_metadata_all_versions(version):
    frame = encode(metadata(version))
    advertise.seen = []
    out = rewrite.rewrite_metadata(frame[4:], version, advertise)
    got = decode(MetadataResponse, out, version)
    want = MetadataResponse.decode(frame[4:], version=version, header=True)
    assert [(b.node_id, b.host, b.port) for b in got.brokers] == [(i, "proxy.example", PROXY[i]) for i in (1, 2, 3)]
    assert advertise.seen == [(i, f"broker-{i}.internal", 9092 + i) for i in (1, 2, 3)]
    assert got.topics == want.topics and got.cluster_id == want.cluster_id
    assert got.controller_id == want.controller_id and got.header.correlation_id == 42
    # splicing changes nothing else: with the upstream's own addresses the bytes are identical
    assert rewrite.rewrite_metadata(frame[4:], version, identity) == frame


def test_metadata_tagged_fields_survive():
    # a flexible answer with unknown tagged fields in a broker entry and at the top level (kafka-python
    # decodes unknown tags but does not encode them: the frame comes from kip714's encoder)
    brokers = [
        kip714.wire.MetadataResponseBroker(1, "b1", 9092, None, {7: b"\x01\x02"}),
        kip714.wire.MetadataResponseBroker(2, "b2", 9093, "rack", None),
    ]
    frame = kip714.encode_response(
        42,
        kip714.wire.MetadataResponse(
            brokers=brokers, cluster_id="c", controller_id=1, unknown_tagged_fields={9: b"xyz"}
        ),
        12,
    )
    out = rewrite.rewrite_metadata(frame[4:], 12, advertise)
    got = decode(MetadataResponse, out, 12)
    assert got.brokers[0].unknown_tags == {"_7": b"\x01\x02"} and got.unknown_tags == {"_9": b"xyz"}
    assert [(b.host, b.port, b.rack) for b in got.brokers] == [
        ("proxy.example", 19001, None),
        ("proxy.example", 19002, "rack"),
    ]


def test_metadata_unmapped_node_is_an_error():
    B = MetadataResponse.MetadataResponseBroker
    msg = MetadataResponse[9](
        throttle_time_ms=0,
        brokers=[B(node_id=99, host="secret", port=1, rack=None)],
        cluster_id="c",
        controller_id=99,
        topics=[],
    )
    with pytest.raises(RewriteError):
        rewrite.rewrite_metadata(encode(msg)[4:], 9, advertise)


@pytest.mark.parametrize("version", range(14))
def test_metadata_truncated_is_malformed(version):
    frame = encode(metadata(version))[4:]
    # cut inside the broker list: the rewrite must fail, never emit a real address
    with pytest.raises(kip714.errors.MalformedFrameError):
        rewrite.rewrite_metadata(frame[:20], version, advertise)


@pytest.mark.parametrize("version", range(4))
def test_find_coordinator_single(version):
    kw = {"error_code": 0, "node_id": 2, "host": "broker-2.internal", "port": 9094}
    if version >= 1:
        kw.update(throttle_time_ms=0, error_message=None)
    frame = encode(FindCoordinatorResponse[version](**kw))
    out = rewrite.rewrite_find_coordinator(frame[4:], version, advertise)
    got = decode(FindCoordinatorResponse, out, version)
    assert (got.node_id, got.host, got.port) == (2, "proxy.example", 19002)
    assert rewrite.rewrite_find_coordinator(frame[4:], version, identity) == frame


@pytest.mark.parametrize("version", range(4, 7))
def test_find_coordinator_batched(version):
    C = FindCoordinatorResponse.Coordinator
    coords = [
        C(key="group-a", node_id=1, host="b1", port=1, error_code=0, error_message=None),
        C(key="group-b", node_id=-1, host="", port=-1, error_code=15, error_message="not available"),
        C(key="txn-c", node_id=3, host="b3", port=3, error_code=0, error_message=None),
    ]
    frame = encode(FindCoordinatorResponse[version](throttle_time_ms=0, coordinators=coords))
    out = rewrite.rewrite_find_coordinator(frame[4:], version, advertise)
    got = decode(FindCoordinatorResponse, out, version)
    assert [(c.key, c.node_id, c.host, c.port, c.error_code) for c in got.coordinators] == [
        ("group-a", 1, "proxy.example", 19001, 0),
        ("group-b", -1, "", -1, 15),
        ("txn-c", 3, "proxy.example", 19003, 0),
    ]
    assert got.coordinators[1].error_message == "not available"


def test_find_coordinator_address_without_node_is_an_error():
    frame = encode(
        FindCoordinatorResponse[3](
            throttle_time_ms=0, error_code=15, error_message=None, node_id=-1, host="leak", port=9092
        )
    )
    with pytest.raises(RewriteError):
        rewrite.rewrite_find_coordinator(frame[4:], 3, advertise)


@pytest.mark.parametrize("version", range(3))
def test_describe_cluster(version):
    B = DescribeClusterResponse.DescribeClusterBroker
    brokers = [
        B(broker_id=i, host=f"b{i}", port=i, rack=None, **({"is_fenced": i == 3} if version >= 2 else {}))
        for i in (1, 3)
    ]
    kw = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "cluster_id": "cid",
        "controller_id": 1,
        "brokers": brokers,
    }
    if version >= 1:
        kw["endpoint_type"] = 1
    frame = encode(DescribeClusterResponse[version](**kw))
    out = rewrite.rewrite_describe_cluster(frame[4:], version, advertise)
    got = decode(DescribeClusterResponse, out, version)
    assert [(b.broker_id, b.host, b.port) for b in got.brokers] == [
        (1, "proxy.example", 19001),
        (3, "proxy.example", 19003),
    ]
    if version >= 2:
        assert [b.is_fenced for b in got.brokers] == [False, True]
    assert rewrite.rewrite_describe_cluster(frame[4:], version, identity) == frame


def test_describe_cluster_controllers_are_refused():
    B = DescribeClusterResponse.DescribeClusterBroker
    frame = encode(
        DescribeClusterResponse[1](
            throttle_time_ms=0,
            error_code=0,
            error_message=None,
            endpoint_type=2,
            cluster_id="cid",
            controller_id=1,
            brokers=[B(broker_id=1, host="ctl", port=9093, rack=None)],
        )
    )
    with pytest.raises(RewriteError):
        rewrite.rewrite_describe_cluster(frame[4:], 1, advertise)


@pytest.mark.parametrize("version", range(5))
def test_api_versions_caps_and_additions(version):
    K = KpApiVersionsResponse.ApiVersion
    keys = [
        K(api_key=0, min_version=3, max_version=12),
        K(api_key=1, min_version=4, max_version=17),
        K(api_key=3, min_version=0, max_version=13),
        K(api_key=10, min_version=0, max_version=6),
        K(api_key=55, min_version=0, max_version=2),
        K(api_key=19, min_version=2, max_version=7),
    ]
    frame = encode(
        KpApiVersionsResponse[version](error_code=0, api_keys=keys, **({"throttle_time_ms": 0} if version else {}))
    )
    out = rewrite.rewrite_api_versions(frame[4:], version, add=((71, 0, 0), (72, 0, 0)))
    got = KpApiVersionsResponse.decode(out[4:], version=version, header=True)
    assert {k.api_key: (k.min_version, k.max_version) for k in got.api_keys} == {
        0: (3, 9),
        1: (4, 15),
        3: (0, 13),
        10: (0, 6),
        19: (2, 7),
        71: (0, 0),
        72: (0, 0),
    }


def test_produce_acks_every_layout():
    from kafka.protocol.producer import ProduceRequest

    for version in (3, 8, 9, 11):
        for acks, txn in ((0, None), (1, "t-1"), (-1, "x" * 300)):
            req = ProduceRequest[version](transactional_id=txn, acks=acks, timeout_ms=1000, topic_data=[])
            req.with_header(correlation_id=5, client_id="c" * 40)
            frame = bytes(req.encode(header=True, framed=True))
            assert rewrite.produce_acks(frame, 0, len(frame), version) == acks
            assert rewrite.produce_acks(frame, 0, 20, version) is None  # head not complete yet


def test_sasl_user_names():
    hs = SaslHandshakeRequest[1](mechanism="SCRAM-SHA-256")
    hs.with_header(correlation_id=1, client_id="c")
    assert rewrite.sasl_mechanism(bytes(hs.encode(header=True))) == "SCRAM-SHA-256"
    for version in (0, 1, 2):

        def auth(data):
            req = SaslAuthenticateRequest[version](auth_bytes=data)
            req.with_header(correlation_id=2, client_id="c")
            return bytes(req.encode(header=True))

        assert rewrite.sasl_user(auth(b"\0alice\0secret"), version, "PLAIN") == "alice"
        assert rewrite.sasl_user(auth(b"admin\0alice\0secret"), version, "PLAIN") == "alice"
        assert rewrite.sasl_user(auth(b"n,,n=bob=2Cjr=3D,r=abc"), version, "SCRAM-SHA-512") == "bob,jr="
        assert rewrite.sasl_user(auth(b"c=biws,r=abc,p=xyz"), version, "SCRAM-SHA-256") is None
        assert rewrite.sasl_user(auth(b"token"), version, "OAUTHBEARER") is None


@pytest.mark.parametrize(
    "kw,want",
    [
        ({}, {1: 9094, 2: 9095, 3: 9096}),  # the listening ports
        ({"advertised_port": 30092}, {1: 30094, 2: 30095, 3: 30096}),  # shifted as the bootstrap port is
        ({"advertised_port": 30092, "advertised_broker_port_base": 31000}, {1: 31001, 2: 31002, 3: 31003}),
        ({"advertised_broker_ports": {1: 32001, 2: 32007, 3: 32003}}, {1: 32001, 2: 32007, 3: 32003}),
    ],
)
def test_advertised_ports_of_the_proxy(kw, want):
    """The ports the proxy's Metadata names, where a load balancer's differ from its listeners' (decoded by
    kafka-python); a port outside 1-65535 or a broker without one is the connection's error."""
    proxy = kip714.TelemetryProxy("127.0.0.1:1", port=9092, advertised_host="lb.example", **kw)
    proxy._ports = {1: 9094, 2: 9095, 3: 9096}  # the listeners, as start() opened them
    out = rewrite.rewrite_metadata(encode(metadata(9))[4:], 9, proxy.advertise)
    got = decode(MetadataResponse, out, 9)
    assert {b.node_id: (b.host, b.port) for b in got.brokers} == {n: ("lb.example", p) for n, p in want.items()}


def test_advertised_ports_out_of_range_are_errors():
    proxy = kip714.TelemetryProxy("127.0.0.1:1", port=9092, advertised_port=65534)
    proxy._ports = {1: 9094, 2: 9095, 3: 9096}
    with pytest.raises(
        kip714.errors.ListenerError, match=r"node id 1 is advertised at port 65536 \(--advertised-port\)"
    ):
        rewrite.rewrite_metadata(encode(metadata(9))[4:], 9, proxy.advertise)
    proxy = kip714.TelemetryProxy("127.0.0.1:1", port=9092, advertised_broker_ports={1: 30001})
    proxy._ports = {1: 9094, 2: 9095, 3: 9096}
    with pytest.raises(kip714.errors.ListenerError, match="node id 2 has no port in --advertised-broker-ports"):
        rewrite.rewrite_metadata(encode(metadata(9))[4:], 9, proxy.advertise)
    with pytest.raises(kip714.errors.InvalidConfigError, match="not both"):
        kip714.TelemetryProxy("127.0.0.1:1", advertised_broker_port_base=1, advertised_broker_ports={1: 2})
