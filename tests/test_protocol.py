"""Wire codec: real librdkafka frames, hand-encoded vectors, and both-way agreement with kio."""

from __future__ import annotations

import functools
import json
import pathlib
import random
import struct
import tracemalloc
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode as KioErrorCode
from kio_bridge import from_kio, kio_class, kio_decode, kio_encode, ours_as_dict, to_kio

import kip714
from kip714 import Kip714Error
from kip714.wire import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    ConfigResource,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
    FinalizedFeature,
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    IncrementalAlterableConfig,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
    IncrementalAlterConfigsResponse,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
    PushTelemetryRequest,
    PushTelemetryResponse,
    SupportedFeature,
)

DATA = pathlib.Path(__file__).parent / "data" / "captures"
EXPECTED = json.loads((DATA / "expected.json").read_text())
ALL_FRAMES = sorted(p.name for p in DATA.glob("*.bin"))
GTS_FRAMES = [n for n in ALL_FRAMES if "_gts_req_" in n]
ZERO = uuid.UUID(int=0)
DOC_UUID = uuid.UUID(int=(0x5E0B1D6A3C4F7A21 << 64) | 0x9D3E2B7C8A1F4E60)


def hx(s: str) -> bytes:
    """Hex with spaces, '|' separators and "quoted" ASCII, as the spec documents write bytes."""
    out = bytearray()
    parts = s.replace("|", " ").split('"')
    for i, part in enumerate(parts):
        if i % 2:
            out += part.encode()
        else:
            out += bytes.fromhex(part.replace(" ", ""))
    return bytes(out)


# --------------------------------------------------------------------------------- real captures


def test_every_capture_has_expectations():
    push = [n for n in ALL_FRAMES if "_push_" in n]
    assert sorted(EXPECTED) == push and len(push) == 36
    assert len(GTS_FRAMES) == 8


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_capture_push_frame_decodes_to_expected_fields(name):
    exp = EXPECTED[name]
    data = (DATA / name).read_bytes()
    frames, consumed = kip714.split_frames(data)
    assert consumed == exp["consumed"] == exp["frame_len"] == len(data)
    assert [len(f) for f in frames] == [exp["size"]]
    req = kip714.decode_request(frames[0])
    h = req.header
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (
        exp["api_key"],
        exp["api_version"],
        exp["correlation_id"],
        exp["client_id"],
    )
    assert (h.unknown_tagged_fields or {}) == {} and exp["header_tags"] == 0
    assert req.api_key == kip714.ApiKey.PUSH_TELEMETRY and req.correlation_id == exp["correlation_id"]
    body = req.body
    assert isinstance(body, PushTelemetryRequest)
    assert body.client_instance_id == uuid.UUID(exp["client_instance_id"])
    assert body.client_instance_id_bytes == bytes.fromhex(exp["client_instance_id"])
    assert body.subscription_id == exp["subscription_id"]
    assert body.terminating is exp["terminating"]
    assert body.compression_type == exp["compression_type"]
    assert (body.unknown_tagged_fields or {}) == {} and exp["body_tags"] == 0
    assert body.metrics_size == exp["metrics_len"]
    metrics = body.metrics
    assert isinstance(metrics, memoryview) and metrics.readonly and metrics.nbytes == exp["metrics_len"]
    assert metrics.obj is frames[0], "metrics must be a view into the decoded frame, not a copy"
    first = exp.get("codec_header", {}).get("first_bytes")
    if first:
        assert metrics[: len(first) // 2].tobytes().hex() == first
    # Re-encoding the decoded request gives back the exact bytes the client sent.
    again = kip714.encode_request(body, h.correlation_id, h.client_id)
    assert again == data


@pytest.mark.parametrize("name", GTS_FRAMES)
def test_capture_get_subscriptions_frames(name):
    data = (DATA / name).read_bytes()
    frames, consumed = kip714.split_frames(data)
    assert consumed == len(data) == 4 + len(frames[0])
    req = kip714.decode_request(frames[0])
    assert req.header.api_key == 71 and req.header.api_version == 0
    assert req.header.client_id.startswith("kip714-probe-")
    assert isinstance(req.body, GetTelemetrySubscriptionsRequest)
    assert req.body.client_instance_id == ZERO  # first contact: the broker assigns the id
    assert kip714.encode_request(req.body, req.header.correlation_id, req.header.client_id) == data


def test_split_frames_on_a_stream_of_all_captures():
    blobs = [(DATA / n).read_bytes() for n in ALL_FRAMES]
    stream = b"".join(blobs)
    frames, consumed = kip714.split_frames(stream)
    assert consumed == len(stream)
    assert [bytes(f) for f in frames] == [b[4:] for b in blobs]
    # A partial trailing frame is left for the next call.
    frames, consumed = kip714.split_frames(stream + blobs[0][:10])
    assert consumed == len(stream) and len(frames) == len(blobs)
    # copy=False gives views into the input.
    views, consumed = kip714.split_frames(stream, copy=False)
    assert all(isinstance(v, memoryview) and v.obj is stream for v in views)
    assert [bytes(v) for v in views] == [b[4:] for b in blobs]
    for v in views:
        assert isinstance(kip714.decode_request(v).body, (PushTelemetryRequest, GetTelemetrySubscriptionsRequest))


# ----------------------------------------------------------------------------- documented vectors


def test_appendix_b_get_subscriptions_request_frame():
    frame = kip714.encode_request(GetTelemetrySubscriptionsRequest(), 1, "producer-1")
    assert frame == hx('00 00 00 26 | 00 47 00 00 00 00 00 01 00 0a "producer-1" 00') + bytes(16) + b"\x00"


def test_appendix_b_get_subscriptions_response_body():
    body = GetTelemetrySubscriptionsResponse(
        client_instance_id=DOC_UUID,
        subscription_id=-111713672,
        accepted_compression_types=[4, 3, 1, 2],
        push_interval_ms=30000,
        telemetry_max_bytes=1048576,
        delta_temporality=True,
        requested_metrics=[
            "org.apache.kafka.client.producer.partition.latency",
            "org.apache.kafka.client.producer.partition.queue.",
        ],
    )
    expected = hx(
        "00 00 00 00 | 00 00 | 5e 0b 1d 6a 3c 4f 7a 21 9d 3e 2b 7c 8a 1f 4e 60 | f9 57 62 78 | "
        "05 04 03 01 02 | 00 00 75 30 | 00 10 00 00 | 01 | 03 33 "
        '"org.apache.kafka.client.producer.partition.latency" 32 '
        '"org.apache.kafka.client.producer.partition.queue." | 00'
    )
    assert body.encode() == expected
    assert GetTelemetrySubscriptionsResponse.decode(expected) == body
    assert kip714.encode_response(9, body) == struct.pack(">iib", len(expected) + 5, 9, 0) + expected


def test_appendix_b_push_request_and_response_bodies():
    push = PushTelemetryRequest(client_instance_id=DOC_UUID, subscription_id=-111713672, metrics=b"")
    assert push.encode() == DOC_UUID.bytes + hx("f9 57 62 78 | 00 | 00 | 01 | 00")
    assert PushTelemetryResponse().encode() == bytes(7)


# Exact responses that a loopback harness fed to librdkafka 2.16 successfully (docs/reference/librdkafka-behaviour.md §3).
def test_librdkafka_harness_api_versions_v3_response():
    body = ApiVersionsResponse(
        api_keys=[
            ApiVersion(3, 0, 12),
            ApiVersion(10, 0, 2),
            ApiVersion(18, 0, 3),
            ApiVersion(71, 0, 0),
            ApiVersion(72, 0, 0),
        ]
    )
    assert kip714.encode_response(7, body, 3) == hx(
        "0000002f 00000007 | 0000 06 0003 0000 000c 00 000a 0000 0002 00 0012 0000 0003 00 "
        "0047 0000 0000 00 0048 0000 0000 00 00000000 00"
    )


def test_librdkafka_harness_metadata_responses():
    body = MetadataResponse(
        brokers=[MetadataResponseBroker(1, "127.0.0.1", 9092)], cluster_id="fake-kip714-cluster", controller_id=1
    )
    assert kip714.encode_response(7, body, 12) == hx(
        '00000038 00000007 00 | 00000000 02 00000001 0a"127.0.0.1" 00002384 00 00 '
        '14"fake-kip714-cluster" 00000001 01 00'
    )
    assert kip714.encode_response(7, body, 4) == hx(
        '0000003e 00000007 | 00000000 00000001 00000001 0009"127.0.0.1" 00002384 ffff '
        '0013"fake-kip714-cluster" 00000001 00000000'
    )


def test_librdkafka_harness_telemetry_responses():
    inst = uuid.UUID("009859c3-10db-450e-a3b7-522b0ef19df4")
    gts = GetTelemetrySubscriptionsResponse(
        client_instance_id=inst,
        subscription_id=0x5EED,
        accepted_compression_types=[4, 3, 1, 2],
        push_interval_ms=500,
        telemetry_max_bytes=1 << 20,
        delta_temporality=True,
        requested_metrics=["*"],
    )
    assert kip714.encode_response(7, gts) == (
        hx("00000031 00000007 00 | 00000000 0000")
        + inst.bytes
        + hx('00005eed 05 04 03 01 02 000001f4 00100000 01 02 02"*" 00')
    )
    assert kip714.encode_response(7, PushTelemetryResponse()) == hx("0000000c 00000007 00 | 00000000 0000 00")


def test_unsupported_api_versions_reply_in_v0_format():
    body = ApiVersionsResponse(error_code=35, api_keys=[ApiVersion(18, 0, 4)])
    frame = kip714.encode_response(3, body, 0)
    assert frame == hx("00000010 00000003 | 0023 00000001 0012 0000 0004")


# ----------------------------------------------------------------------------- kio both ways

i8 = st.integers(-128, 127)
i16 = st.integers(-32768, 32767)
i32 = st.integers(-(2**31), 2**31 - 1)
u_i32 = st.integers(0, 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
errors = st.sampled_from([e.value for e in KioErrorCode])
text = st.text(max_size=30)
uuids = st.one_of(st.just(ZERO), st.uuids())


def lists(s, max_size=6):
    return st.lists(s, max_size=max_size)


@functools.cache  # one strategy per message and version: Hypothesis validates it once
def strategy(cls, v):
    if cls is GetTelemetrySubscriptionsRequest:
        return st.builds(cls, client_instance_id=uuids)
    if cls is GetTelemetrySubscriptionsResponse:
        return st.builds(
            cls,
            throttle_time_ms=u_i32,
            error_code=errors,
            client_instance_id=uuids,
            subscription_id=i32,
            accepted_compression_types=lists(i8),
            push_interval_ms=u_i32,
            telemetry_max_bytes=i32,
            delta_temporality=st.booleans(),
            requested_metrics=lists(text),
        )
    if cls is PushTelemetryRequest:
        return st.builds(
            cls,
            client_instance_id=uuids,
            subscription_id=i32,
            terminating=st.booleans(),
            compression_type=i8,
            metrics=st.binary(max_size=300),
        )
    if cls is PushTelemetryResponse:
        return st.builds(cls, throttle_time_ms=u_i32, error_code=errors)
    if cls is ApiVersionsRequest:
        return st.builds(cls, client_software_name=text, client_software_version=text)
    if cls is ApiVersionsResponse:
        return st.builds(
            cls,
            error_code=errors,
            api_keys=lists(st.builds(ApiVersion, i16, i16, i16)),
            throttle_time_ms=u_i32,
            supported_features=lists(st.builds(SupportedFeature, text, i16, i16)),
            finalized_features_epoch=i64,
            finalized_features=lists(st.builds(FinalizedFeature, text, i16, i16)),
            zk_migration_ready=st.booleans(),
        )
    if cls is MetadataRequest:
        name = st.one_of(st.none(), text) if v >= 10 else text
        topics = lists(st.builds(MetadataRequestTopic, name=name, topic_id=uuids))
        return st.builds(
            cls,
            topics=st.one_of(st.none(), topics) if v >= 1 else topics,
            allow_auto_topic_creation=st.booleans(),
            include_cluster_authorized_operations=st.booleans(),
            include_topic_authorized_operations=st.booleans(),
        )
    if cls is MetadataResponse:
        node = i32
        partition = st.builds(
            MetadataResponsePartition,
            error_code=errors,
            partition_index=i32,
            leader_id=node,
            leader_epoch=i32,
            replica_nodes=lists(node),
            isr_nodes=lists(node),
            offline_replicas=lists(node),
        )
        topic = st.builds(
            MetadataResponseTopic,
            error_code=errors,
            name=st.one_of(st.none(), text) if v >= 12 else text,
            topic_id=uuids,
            is_internal=st.booleans(),
            partitions=lists(partition, 3),
            topic_authorized_operations=i32,
        )
        broker = st.builds(MetadataResponseBroker, node_id=node, host=text, port=i32, rack=st.one_of(st.none(), text))
        return st.builds(
            cls,
            throttle_time_ms=u_i32,
            brokers=lists(broker),
            cluster_id=st.one_of(st.none(), text),
            controller_id=node,
            topics=lists(topic, 3),
            cluster_authorized_operations=i32,
            error_code=errors,
        )
    nullable = st.one_of(st.none(), text)
    if cls is DescribeConfigsRequest:
        resource = st.builds(
            DescribeConfigsResource,
            resource_type=i8,
            resource_name=text,
            configuration_keys=st.one_of(st.none(), lists(text)),
        )
        return st.builds(
            cls,
            resources=lists(resource),
            include_synonyms=st.booleans(),
            include_documentation=st.booleans() if v >= 3 else st.just(False),
        )
    if cls is DescribeConfigsResponse:
        synonym = st.builds(DescribeConfigsSynonym, name=text, value=nullable, source=i8)
        config = st.builds(
            DescribeConfigsResourceResult,
            name=text,
            value=nullable,
            read_only=st.booleans(),
            config_source=i8,
            is_sensitive=st.booleans(),
            synonyms=lists(synonym, 3),
            config_type=i8 if v >= 3 else st.just(0),
            documentation=nullable if v >= 3 else st.none(),
        )
        result = st.builds(
            DescribeConfigsResult,
            error_code=errors,
            error_message=nullable,
            resource_type=i8,
            resource_name=text,
            configs=lists(config, 4),
        )
        return st.builds(cls, throttle_time_ms=u_i32, results=lists(result, 4))
    if cls is AlterConfigsRequest:
        resource = st.builds(
            AlterConfigsResource,
            resource_type=i8,
            resource_name=text,
            configs=lists(st.builds(AlterableConfig, name=text, value=nullable)),
        )
        return st.builds(cls, resources=lists(resource), validate_only=st.booleans())
    if cls is IncrementalAlterConfigsRequest:
        op = st.builds(IncrementalAlterableConfig, name=text, config_operation=i8, value=nullable)
        resource = st.builds(IncrementalAlterConfigsResource, resource_type=i8, resource_name=text, configs=lists(op))
        return st.builds(cls, resources=lists(resource), validate_only=st.booleans())
    if cls in (AlterConfigsResponse, IncrementalAlterConfigsResponse):
        resp = st.builds(
            AlterConfigsResourceResponse,
            error_code=errors,
            error_message=nullable,
            resource_type=i8,
            resource_name=text,
        )
        return st.builds(cls, throttle_time_ms=u_i32, responses=lists(resp))
    if cls is ListConfigResourcesRequest:
        return st.builds(cls, resource_types=lists(i8) if v >= 1 else st.just([]))
    if cls is ListConfigResourcesResponse:
        row = st.builds(ConfigResource, resource_name=text, resource_type=i8 if v >= 1 else st.just(16))
        return st.builds(cls, throttle_time_ms=u_i32, error_code=errors, config_resources=lists(row))
    raise AssertionError(cls)


MESSAGE_CLASSES = [
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
]
CASES = [(c, v) for c in MESSAGE_CLASSES for v in range(c.MIN_VERSION, c.MAX_VERSION + 1)]
#: the config admin messages (kip714 answers them for CLIENT_METRICS): every version, fewer examples each
ADMIN_CLASSES = [
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    AlterConfigsRequest,
    AlterConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
]
ADMIN_CASES = [(c, v) for c in ADMIN_CLASSES for v in range(c.MIN_VERSION, c.MAX_VERSION + 1)]
#: their oldest and newest versions, for the frame tests
ADMIN_EDGES = [(c, v) for c in ADMIN_CLASSES for v in sorted({c.MIN_VERSION, c.MAX_VERSION})]


@pytest.mark.parametrize("cls,version", CASES, ids=[f"{c.__name__}-v{v}" for c, v in CASES])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_bodies_agree_with_kio_both_ways(cls, version, data):
    _bodies_agree(cls, version, data)


@pytest.mark.parametrize("cls,version", ADMIN_CASES, ids=[f"{c.__name__}-v{v}" for c, v in ADMIN_CASES])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_admin_bodies_agree_with_kio_both_ways(cls, version, data):
    _bodies_agree(cls, version, data)


def _bodies_agree(cls, version, data):
    msg = data.draw(strategy(cls, version))
    kcls = kio_class(cls, version)
    ours = msg.encode(version)
    # kip714 -> kio
    assert from_kio(kio_decode(kcls, ours)) == ours_as_dict(msg, kcls)
    # kio -> kip714, and the two encoders agree to the byte
    theirs = kio_encode(to_kio(msg, kcls))
    assert theirs == ours
    back = cls.decode(theirs, version)
    assert ours_as_dict(back, kcls) == ours_as_dict(msg, kcls)


def test_large_arrays_and_non_ascii_agree_with_kio():
    rnd = random.Random(714)
    names = ["".join(rnd.choice("aé漢字🙂-._Z9") for _ in range(rnd.randint(0, 40))) for _ in range(1000)]
    gts = GetTelemetrySubscriptionsResponse(
        client_instance_id=uuid.uuid4(),
        accepted_compression_types=[4] * 1000,
        requested_metrics=names,
        push_interval_ms=1,
        telemetry_max_bytes=5,
    )
    kcls = kio_class(GetTelemetrySubscriptionsResponse, 0)
    assert kio_encode(to_kio(gts, kcls)) == gts.encode()
    assert GetTelemetrySubscriptionsResponse.decode(gts.encode()) == gts
    md = MetadataResponse(
        brokers=[MetadataResponseBroker(i, names[i], i, names[-i]) for i in range(1000)],
        cluster_id="ü",
        topics=[MetadataResponseTopic(name=n) for n in names[:1000]],
    )
    for version in (0, 8, 9, 12, 13):
        kcls = kio_class(MetadataResponse, version)
        assert kio_encode(to_kio(md, kcls)) == md.encode(version)
        assert ours_as_dict(MetadataResponse.decode(md.encode(version), version), kcls) == ours_as_dict(md, kcls)
    empty = GetTelemetrySubscriptionsResponse()
    assert GetTelemetrySubscriptionsResponse.decode(empty.encode()) == empty


@pytest.mark.parametrize("cls,version", CASES + ADMIN_EDGES, ids=[f"{c.__name__}-v{v}" for c, v in CASES + ADMIN_EDGES])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), correlation_id=i32, client_id=st.one_of(st.none(), text))
def test_frames_with_headers_agree_with_kio(cls, version, data, correlation_id, client_id):
    from kio.schema.request_header.v1.header import RequestHeader as KioRequestHeaderV1
    from kio.schema.request_header.v2.header import RequestHeader as KioRequestHeaderV2
    from kio.schema.response_header.v0.header import ResponseHeader as KioResponseHeaderV0
    from kio.schema.response_header.v1.header import ResponseHeader as KioResponseHeaderV1
    from kio.serial import entity_reader

    msg = data.draw(strategy(cls, version))
    kcls = kio_class(cls, version)
    flexible = kcls.__flexible__
    if cls.IS_REQUEST:
        frame = kip714.encode_request(msg, correlation_id, client_id, version)
        hcls = KioRequestHeaderV2 if flexible else KioRequestHeaderV1
        header, used = entity_reader(hcls)(frame[4:], 0)
        assert (header.request_api_key, header.request_api_version, header.correlation_id, header.client_id) == (
            cls.API_KEY,
            version,
            correlation_id,
            client_id,
        )
        decoded = kip714.decode_request(frame[4:])
        assert decoded.header.client_id == client_id and decoded.correlation_id == correlation_id
    else:
        frame = kip714.encode_response(correlation_id, msg, version)
        # ApiVersions responses always use header v0.
        hcls = KioResponseHeaderV1 if flexible and cls is not ApiVersionsResponse else KioResponseHeaderV0
        header, used = entity_reader(hcls)(frame[4:], 0)
        assert header.correlation_id == correlation_id
        decoded = kip714.decode_response(frame[4:], cls.API_KEY, version)
        assert decoded.correlation_id == correlation_id
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    assert from_kio(kio_decode(kcls, frame[4 + used :])) == ours_as_dict(msg, kcls)
    assert ours_as_dict(decoded.body, kcls) == ours_as_dict(msg, kcls)


# ----------------------------------------------------------------------------- errors and limits


def _push_frame():
    return kip714.split_frames((DATA / "producer_zstd_push_01_zstd.bin").read_bytes())[0][0]


def test_unknown_api_key_and_version_carry_the_header():
    frame = bytearray(_push_frame())
    frame[0:2] = (0).to_bytes(2, "big")  # Produce
    with pytest.raises(kip714.errors.UnsupportedApiKeyError) as e:
        kip714.decode_request(bytes(frame))
    assert e.value.error_code == kip714.ErrorCode.INVALID_REQUEST
    assert e.value.header.api_key == 0 and e.value.header.correlation_id == 4
    frame = bytearray(_push_frame())
    frame[2:4] = (1).to_bytes(2, "big")
    with pytest.raises(kip714.errors.UnsupportedVersionError) as e:
        kip714.decode_request(bytes(frame))
    assert e.value.error_code == 35 and e.value.header.client_id == "kip714-probe-producer"
    h = kip714.wire.decode_request_header(bytes(frame))
    assert (h.api_key, h.api_version, h.correlation_id) == (72, 1, 4)


def test_api_versions_v5_request_is_unsupported_with_header():
    frame = struct.pack(">hhih", 18, 5, 77, 3) + b"abc" + b"\x00" + b"\x01\x01\x00"
    with pytest.raises(kip714.errors.UnsupportedVersionError) as e:
        kip714.decode_request(frame)
    assert e.value.header.correlation_id == 77


def test_trailing_bytes_and_bad_tags_are_malformed():
    frame = _push_frame()
    with pytest.raises(kip714.errors.MalformedFrameError, match="unexpected bytes"):
        kip714.decode_request(frame + b"\x00")
    body = GetTelemetrySubscriptionsRequest(client_instance_id=DOC_UUID).encode()
    # two tagged fields out of order
    bad = body[:16] + b"\x02" + b"\x05\x01x" + b"\x03\x01y"
    with pytest.raises(kip714.errors.MalformedFrameError, match="out of order"):
        GetTelemetrySubscriptionsRequest.decode(bad)
    good = body[:16] + b"\x02" + b"\x03\x01y" + b"\x05\x01x"
    assert GetTelemetrySubscriptionsRequest.decode(good).unknown_tagged_fields == {3: b"y", 5: b"x"}
    assert GetTelemetrySubscriptionsRequest.decode(good).encode() == good
    # a varint longer than 5 bytes
    with pytest.raises(kip714.errors.MalformedFrameError):
        GetTelemetrySubscriptionsRequest.decode(body[:16] + b"\xff\xff\xff\xff\xff\x01")


def test_counts_larger_than_the_remaining_bytes_are_refused_before_allocating():
    # RequestedMetrics claiming 2**31 entries in a tiny buffer.
    body = bytearray(GetTelemetrySubscriptionsResponse().encode())
    body[-2:] = b"\xff\xff\xff\xff\x07\x00"
    tracemalloc.start()
    try:
        with pytest.raises(kip714.errors.MalformedFrameError, match="cannot fit"):
            GetTelemetrySubscriptionsResponse.decode(bytes(body))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


def test_null_metrics_is_refused_as_kafka_refuses_it():
    # Metrics is not nullable: Kafka's parser throws "non-nullable field metrics was serialized as null"
    # (tests/test_nullability.py covers every field)
    body = PushTelemetryRequest(client_instance_id=DOC_UUID, metrics=b"").encode()
    assert body[-2:] == b"\x01\x00"
    with pytest.raises(kip714.errors.MalformedFrameError, match="non-nullable field metrics was serialized as null"):
        PushTelemetryRequest.decode(body[:-2] + b"\x00\x00")


def test_invalid_utf8_is_replaced_like_java():
    body = ApiVersionsRequest("ok", "1.0").encode(3)
    bad = body.replace(b"ok", b"o\xff")
    decoded = ApiVersionsRequest.decode(bad, 3)
    assert decoded.client_software_name == "o\ufffd"
    assert not decoded.is_valid()


@pytest.mark.parametrize(
    "name,version,valid",
    [
        ("apache-kafka-java", "3.8.0", True),
        ("apache-kafka.java", "0.0.0-SNAPSHOT", True),
        ("confluent-kafka-python", "2.16.1-rdkafka-2.16.0", True),
        ("java@apache_kafka", "1", False),
        ("apache-kafka-java", "0.0.0@java", False),
        ("-apache-kafka-java", "1", False),
        ("apache-kafka-java.", "1", False),
        ("", "1", False),
        ("a", "b", True),
    ],
)
def test_kip511_software_name_validation(name, version, valid):
    assert ApiVersionsRequest(name, version).is_valid() is valid


def test_frame_size_limit_raises_without_allocating():
    huge = struct.pack(">i", 2_000_000_000) + b"\x00" * 10
    tracemalloc.start()
    try:
        with pytest.raises(kip714.errors.FrameTooLargeError) as e:
            kip714.split_frames(huge)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024
    assert e.value.error_code == kip714.ErrorCode.INVALID_REQUEST
    assert kip714.wire.DEFAULT_MAX_FRAME_BYTES == 100 * 1024 * 1024
    with pytest.raises(kip714.errors.FrameTooLargeError):
        kip714.split_frames(struct.pack(">i", 101) + bytes(101), max_frame_bytes=100)
    assert kip714.split_frames(struct.pack(">i", 100) + bytes(100), max_frame_bytes=100)[1] == 104
    with pytest.raises(kip714.errors.MalformedFrameError, match="negative"):
        kip714.split_frames(struct.pack(">i", -5))
    assert kip714.split_frames(b"\x00\x00") == ([], 0)


def test_encode_rejects_values_that_do_not_fit():
    with pytest.raises(OverflowError):
        GetTelemetrySubscriptionsResponse(subscription_id=2**31)
    with pytest.raises(OverflowError):
        GetTelemetrySubscriptionsResponse(accepted_compression_types=[300]).encode()
    with pytest.raises(kip714.errors.UnsupportedVersionError):
        PushTelemetryResponse().encode(1)
    with pytest.raises(TypeError):
        kip714.encode_request(PushTelemetryResponse(), 1, "x")


def test_messages_compare_pickle_and_repr():
    import pickle

    a = PushTelemetryRequest(client_instance_id=DOC_UUID, subscription_id=5, metrics=b"abc")
    b = PushTelemetryRequest.decode(a.encode())
    assert a == b and isinstance(b.metrics, memoryview)
    assert pickle.loads(pickle.dumps(GetTelemetrySubscriptionsResponse(requested_metrics=["x"]))).requested_metrics == [
        "x"
    ]
    assert "subscription_id=5" in repr(b)
    assert b.to_dict()["client_instance_id"] == DOC_UUID


# ----------------------------------------------------------------------------- hostile input


def _all_frames():
    return [kip714.split_frames((DATA / n).read_bytes())[0][0] for n in ALL_FRAMES]


def test_truncation_at_every_offset_raises_only_kip714_errors():
    for frame in _all_frames():
        for cut in range(len(frame)):
            with pytest.raises(Kip714Error):
                kip714.decode_request(frame[:cut])


def test_random_mutations_raise_only_kip714_errors():
    rnd = random.Random(20261121)
    decoded = failed = 0
    for frame in _all_frames():
        for _ in range(150):
            m = bytearray(frame)
            for _ in range(rnd.randint(1, 4)):
                pos = rnd.randrange(min(len(m), 80)) if rnd.random() < 0.8 else rnd.randrange(len(m))
                m[pos] = rnd.randrange(256)
            try:
                req = kip714.decode_request(bytes(m))
                repr(req)
                decoded += 1
            except Kip714Error:
                failed += 1
    assert decoded and failed


def test_random_garbage_and_every_decoder():
    rnd = random.Random(7)
    for _ in range(3000):
        blob = rnd.randbytes(rnd.randint(0, 64))
        for cls, v in CASES + ADMIN_EDGES:
            try:
                cls.decode(blob, v)
            except Kip714Error:
                pass
        for key, version in [(3, 12), (3, 0), (18, 3), (18, 0), (71, 0), (72, 0)]:
            try:
                kip714.decode_response(blob, key, version)
            except Kip714Error:
                pass
        try:
            kip714.decode_request(blob)
        except Kip714Error:
            pass


# ----------------------------------------------------------------------------- kafka-python too


def _kafka_python_classes():
    import kp_schemas  # the four KIP-714 message schemas, in kafka-python's JSON schema format
    from kafka.protocol.api_message import ApiMessage

    return {
        name: type(name, (ApiMessage,), {}, load_json=kp_schemas)
        for name in (
            "GetTelemetrySubscriptionsRequest",
            "GetTelemetrySubscriptionsResponse",
            "PushTelemetryRequest",
            "PushTelemetryResponse",
        )
    }


KP = _kafka_python_classes()


def _snake(msg) -> dict:
    d = msg.to_dict()
    d.pop("unknown_tagged_fields", None)
    if isinstance(d.get("metrics"), memoryview):
        d["metrics"] = d["metrics"].tobytes()
    return d


@pytest.mark.parametrize(
    "cls",
    [GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse, PushTelemetryRequest, PushTelemetryResponse],
    ids=lambda c: c.__name__,
)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_telemetry_bodies_agree_with_kafka_python(cls, data):
    msg = data.draw(strategy(cls, 0))
    kp_cls = KP[cls.__name__]
    ours = msg.encode()
    expected = _snake(msg)
    theirs_obj = kp_cls.decode(ours, version=0)
    got = {k: getattr(theirs_obj, k) for k in expected}
    got = {k: (ZERO if v is None and k == "client_instance_id" else v) for k, v in got.items()}
    assert got == expected
    theirs = bytes(kp_cls(**dict(expected.items())).encode(version=0))
    assert theirs == ours
    assert _snake(cls.decode(theirs)) == expected


def test_wrong_types_are_refused_with_a_clear_message():
    """Found by a review: a bare string where a list belongs was split into characters, a 1-byte id gave a
    2-character 'instance id', an unknown API key escaped as KeyError, a non-str client id said 'bad argument
    type for built-in operation'."""
    with pytest.raises(TypeError, match="requested_metrics takes a list, not str"):
        kip714.GetTelemetrySubscriptionsResponse(requested_metrics="org.apache.kafka.")
    with pytest.raises(TypeError, match="accepted_compression_types takes a list, not bytes"):
        kip714.GetTelemetrySubscriptionsResponse(accepted_compression_types=b"\x04\x03")
    assert kip714.GetTelemetrySubscriptionsResponse(requested_metrics=("a.", "b.")).requested_metrics == ["a.", "b."]
    with pytest.raises(TypeError, match="client_id must be str, not int"):
        kip714.encode_request(kip714.PushTelemetryRequest(metrics=b""), 1, client_id=5)
    with pytest.raises(TypeError, match="requested_metrics item must be str, not int"):
        kip714.GetTelemetrySubscriptionsResponse(requested_metrics=[1]).encode()
    with pytest.raises(kip714.errors.UnsupportedApiKeyError, match="API key 999"):
        kip714.wire.message_class(999, True)
    with pytest.raises(ValueError, match="16 bytes, got 1"):
        kip714.kafka_uuid_string(b"x")
    assert len(kip714.kafka_uuid_string(bytes(16))) == 22


# ----------------------------------------------------------------------------- the config admin messages

#: (class, version, body) made by kafka-python 3.0.12's KafkaAdminClient classes (kip714's research note)
ADMIN_VECTORS = [
    (
        IncrementalAlterConfigsRequest,
        1,
        "0210057375623104086d657472696373001b6f72672e6170616368652e6b61666b612e70726f"
        "64756365722e000c696e74657276616c2e6d7300053130303000066d61746368010000000000",
    ),
    (
        IncrementalAlterConfigsRequest,
        0,
        "00000001100004737562310000000300076d65747269637300001a6f72672e617061636865"
        "2e6b61666b612e70726f64756365722e000b696e74657276616c2e6d730000043130303000056d6174636801ffff00",
    ),
    (DescribeConfigsRequest, 4, "021005737562310000000000"),
    (DescribeConfigsRequest, 1, "0000000110000473756231ffffffff00"),
    (AlterConfigsRequest, 2, "0210057375623102086d657472696373022a00000000"),
    (ListConfigResourcesRequest, 1, "021000"),
    (ListConfigResourcesRequest, 0, "00"),
]


@pytest.mark.parametrize("cls,version,hexbody", ADMIN_VECTORS, ids=[f"{c.__name__}-v{v}" for c, v, _ in ADMIN_VECTORS])
def test_admin_requests_of_kafka_python_decode_and_encode_back(cls, version, hexbody):
    body = bytes.fromhex(hexbody)
    msg = cls.decode(body, version)
    assert msg.encode(version) == body
    assert msg.resources[0].resource_type == 16 if hasattr(msg, "resources") else True
    if cls is IncrementalAlterConfigsRequest:
        assert [(c.name, c.config_operation, c.value) for c in msg.resources[0].configs] == [
            ("metrics", 0, "org.apache.kafka.producer."),
            ("interval.ms", 0, "1000"),
            ("match", 1, None),
        ]


def test_admin_versions_outside_kafkas_are_refused():
    """DescribeConfigs v0 left Kafka in 4.0; ListConfigResources v0 cannot carry resource types."""
    frame = kip714.encode_request(DescribeConfigsRequest([DescribeConfigsResource(16, "a")]), 7, "c", 1)
    raw = bytearray(frame[4:])
    raw[2:4] = b"\x00\x00"  # api_version 0
    with pytest.raises(kip714.errors.UnsupportedVersionError) as info:
        kip714.decode_request(bytes(raw))
    assert info.value.header.correlation_id == 7
    with pytest.raises(ValueError, match="v0 has no ResourceTypes"):
        ListConfigResourcesRequest([2]).encode(0)
