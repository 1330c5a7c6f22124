"""(Re)generate the seed corpora in fuzz/corpus/ from the real librdkafka captures and kip714's encoders.

    python fuzz/make_corpus.py

Seeds are named ``seed-*``; files named ``regress-*`` (inputs that once found a bug) are never touched.
Deterministic: running it twice writes the same files.
"""

from __future__ import annotations

import pathlib
import struct
import sys
import uuid

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
CAPTURES = ROOT / "tests" / "data" / "captures"
sys.path.insert(0, str(HERE))

import kip714  # noqa: E402
from kip714.wire import (  # noqa: E402
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FinalizedFeature,
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
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

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def captures() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(CAPTURES.glob("*.bin"))}


def sample_messages():
    """(api_key, version, is_request, message) covering every decoder path with non-empty fields."""
    cid = uuid.UUID("5e0b1d6a-3c4f-7a21-9d3e-2b7c8a1f4e60")
    out = []
    for v in range(5):
        out.append((18, v, True, ApiVersionsRequest("apache-kafka-java", "3.9.0", {5: b"x"} if v >= 3 else None)))
        out.append(
            (
                18,
                v,
                False,
                ApiVersionsResponse(
                    0,
                    [ApiVersion(18, 0, 4), ApiVersion(71, 0, 0, {1: b"t"} if v >= 3 else None)],
                    7,
                    [SupportedFeature("metadata.version", 1, 20)] if v >= 3 else None,
                    5 if v >= 3 else -1,
                    [FinalizedFeature("metadata.version", 20, 1)] if v >= 3 else None,
                    v >= 3,
                    {9: b"\x01\x02"} if v >= 3 else None,
                ),
            )
        )
    for v in range(14):
        topics = [MetadataRequestTopic("telemetry", cid if v >= 10 else None)]
        out.append(
            (3, v, True, MetadataRequest(topics if v == 0 or v % 2 else None if v else topics, v >= 4, v >= 8, v >= 8))
        )
        part = MetadataResponsePartition(0, 1, 2, 3, [1, 2], [1], [2] if v >= 5 else [])
        topic = MetadataResponseTopic(
            3, "telemetry", cid if v >= 10 else None, v >= 1, [part], -2147483648 if v < 8 else 8
        )
        out.append(
            (
                3,
                v,
                False,
                MetadataResponse(
                    5,
                    [MetadataResponseBroker(1, "localhost", 9092, "r1" if v >= 1 else None)],
                    "kip714" if v >= 2 else None,
                    1 if v >= 1 else -1,
                    [topic],
                    10 if 8 <= v <= 10 else -2147483648,
                    0,
                ),
            )
        )
    out.append((71, 0, True, GetTelemetrySubscriptionsRequest(cid)))
    out.append((71, 0, True, GetTelemetrySubscriptionsRequest(None, {3: b"abc"})))
    out.append(
        (
            71,
            0,
            False,
            GetTelemetrySubscriptionsResponse(
                0, 0, cid, 24301, [4, 3, 1, 2], 500, 1 << 20, True, ["*", "org.apache.kafka.producer."]
            ),
        )
    )
    out.append((72, 0, True, PushTelemetryRequest(cid, 24301, False, 0, b"\x0a\x00")))
    out.append((72, 0, True, PushTelemetryRequest(cid, 24301, True, 4, None)))
    out.append((72, 0, False, PushTelemetryResponse(0, 89)))
    return out


def frames_seeds() -> dict[str, bytes]:
    seeds = {}
    caps = captures()
    for name, raw in caps.items():
        seeds[f"req-{name}"] = b"\x00" + raw[4:]
        seeds[f"split-{name}"] = b"\x02" + raw
    names = sorted(caps)
    seeds["split-two-and-a-half"] = b"\x02" + caps[names[0]] + caps[names[1]] + caps[names[2]][:20]
    keys = (3, 18, 71, 72)
    for i, (key, v, is_req, msg) in enumerate(sample_messages()):
        tag = f"{key}-v{v}-{'req' if is_req else 'resp'}-{i}"
        body = msg.encode(v)
        seeds[f"body-{tag}"] = b"\x03" + bytes([keys.index(key), v, 1 if is_req else 0]) + body
        if is_req:
            seeds[f"req-{tag}"] = (
                b"\x00"
                + kip714.encode_request(
                    msg, 7, "kip714-fuzz", api_version=v, header_tagged_fields={0: b"h"} if v >= 9 else None
                )[4:]
            )
        else:
            seeds[f"resp-{tag}"] = b"\x01" + bytes([keys.index(key), v]) + kip714.encode_response(11, msg, v)[4:]
    return seeds


def stream_seeds() -> dict[str, bytes]:
    import targets

    srv = targets._stream_server()
    caps = captures()
    seeds = {}
    scenarios = sorted({n.split("_push_")[0] for n in caps if "_push_" in n})
    for k, scen in enumerate(scenarios):
        pushes = [caps[n] for n in sorted(caps) if n.startswith(scen + "_push_")]
        first = kip714.decode_request(pushes[0][4:])
        client_id = first.client_id
        instance = first.body.client_instance_id
        info = kip714.ClientInfo(instance, client_id or "", "librdkafka", "2.16.0", "127.0.0.1", 40000)
        sid = srv.broker.registry.resolve(info).subscription_id
        wire = kip714.encode_request(ApiVersionsRequest("librdkafka", "2.16.0"), 1, client_id, 3)
        wire += kip714.encode_request(MetadataRequest([MetadataRequestTopic("t")]), 2, client_id, 12)
        wire += kip714.encode_request(GetTelemetrySubscriptionsRequest(instance), 3, client_id)
        for j, raw in enumerate(pushes):
            req = kip714.decode_request(raw[4:]).body
            req.subscription_id = sid
            wire += kip714.encode_request(req, 4 + j, client_id)
        seeds[f"{scen}"] = bytes([k]) + wire
    seeds["apiversions-v5"] = b"\x10" + struct.pack(">ihhih", 10, 18, 5, 42, 0)
    seeds["produce-not-served"] = b"\x00" + struct.pack(">ihhih", 10, 0, 0, 1, 0)
    return seeds


def payloads() -> dict[str, tuple[int, bytes]]:
    out = {}
    for name, raw in captures().items():
        if "_push_" in name:
            body = kip714.decode_request(raw[4:]).body
            out[name] = (body.compression_type, bytes(body.metrics or b""))
    return out


def codec_seeds(ctype: int) -> dict[str, bytes]:
    seeds = {}
    otlp_docs = []
    for name, (ct, data) in payloads().items():
        if not data:
            continue
        plain = kip714.decompress(data, ct, 1 << 22)
        otlp_docs.append((name, plain))
        if ct == ctype:
            seeds[f"capture-{name}"] = data
    for name, plain in otlp_docs[:4]:
        seeds[f"compress-{name}"] = kip714.compress(plain, ctype)
    seeds["compress-small"] = kip714.compress(b"kip714 " * 20, ctype)
    seeds["compress-empty"] = kip714.compress(b"", ctype)
    if ctype == 2:  # raw snappy blocks as librdkafka sends them
        import cramjam

        seeds["raw-small"] = bytes(cramjam.snappy.compress_raw(b"abc" * 100))
    return seeds


def otlp_seeds() -> dict[str, bytes]:
    seeds = {}
    for name, (ct, data) in payloads().items():
        plain = kip714.decompress(data, ct, 1 << 22) if data else b""
        seeds[name] = plain
    seeds.update(synthetic_otlp())
    return seeds


def synthetic_otlp() -> dict[str, bytes]:
    """One MetricsData per data kind, with every AnyValue variant in the attributes."""
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
    from opentelemetry.proto.metrics.v1 import metrics_pb2 as m

    def attrs():
        return [
            KeyValue(key="s", value=AnyValue(string_value="x")),
            KeyValue(key="b", value=AnyValue(bool_value=True)),
            KeyValue(key="i", value=AnyValue(int_value=-3)),
            KeyValue(key="d", value=AnyValue(double_value=0.5)),
            KeyValue(key="y", value=AnyValue(bytes_value=b"\x00\xff")),
            KeyValue(key="a", value=AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=1)]))),
            KeyValue(key="k", value=AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="n")]))),
        ]

    metrics = [
        m.Metric(name="g", gauge=m.Gauge(data_points=[m.NumberDataPoint(as_double=1.5, attributes=attrs())])),
        m.Metric(
            name="s",
            sum=m.Sum(
                aggregation_temporality=1,
                is_monotonic=True,
                data_points=[m.NumberDataPoint(as_int=7, time_unix_nano=5)],
            ),
        ),
        m.Metric(
            name="h",
            histogram=m.Histogram(
                aggregation_temporality=2,
                data_points=[
                    m.HistogramDataPoint(
                        count=3, sum=1.0, bucket_counts=[1, 2], explicit_bounds=[0.5], min=0.1, max=0.9
                    )
                ],
            ),
        ),
        m.Metric(
            name="e",
            exponential_histogram=m.ExponentialHistogram(
                data_points=[
                    m.ExponentialHistogramDataPoint(
                        count=2,
                        scale=3,
                        zero_count=1,
                        positive=m.ExponentialHistogramDataPoint.Buckets(offset=-2, bucket_counts=[1]),
                    )
                ]
            ),
        ),
        m.Metric(
            name="q",
            summary=m.Summary(
                data_points=[
                    m.SummaryDataPoint(
                        count=1, sum=2.0, quantile_values=[m.SummaryDataPoint.ValueAtQuantile(quantile=0.5, value=2.0)]
                    )
                ]
            ),
        ),
    ]
    doc = m.MetricsData(resource_metrics=[m.ResourceMetrics(scope_metrics=[m.ScopeMetrics(metrics=metrics)])])
    return {"synthetic-all-kinds": doc.SerializeToString()}


def config_seeds() -> dict[str, bytes]:
    def seed(mode, *fields):
        return bytes([mode]) + b"\x00".join(f.encode() for f in fields)

    return {
        "config-string": seed(0, "metrics=[a,b],interval.ms=1000,match=[client_id=c.*,client_software_name=x]"),
        "config-plain": seed(0, "metrics=*,interval.ms=15000"),
        "file-lines": seed(
            1, "s1 metrics=[org.apache.kafka.],interval.ms=500,match=[client_id=.*prod.*]\n# comment\ns2 metrics=*"
        ),
        "dict": seed(
            2,
            "",
            "org.apache.kafka.producer.,*",
            "500",
            "client_id=kip714-.*,client_source_port=4.*",
            "kip714-producer-1",
            "librdkafka",
            "2.16.0",
            "a",
        ),
        "nested-quantifier": seed(
            2, "", "*", "100", "client_id=(a+)+$", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", "x", "y", "a"
        ),
        "polynomial": seed(2, "", "*", "100", "client_id=.*a.*a.*a.*b", "a" * 40, "x", "y", "a"),
        "alternation": seed(2, "", "*", "100", "client_id=(a|aa)*c", "a" * 40, "x", "y", "a"),
        "backref": seed(2, "", "*", "100", r"client_id=(a*)\1b", "a" * 40, "x", "y", "a"),
        "classes": seed(
            2,
            "",
            "*",
            "100",
            r"client_id=(?i)[\w.-]{2\,9}x?\b,client_software_version=\d+\.\d+.*",
            "Kip714_x",
            "n",
            "3.5.1",
            "b",
        ),
    }


def write(target: str, seeds: dict[str, bytes]) -> int:
    d = HERE / "corpus" / target
    d.mkdir(parents=True, exist_ok=True)
    for old in d.glob("seed-*"):
        old.unlink()
    for name, data in seeds.items():
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        (d / f"seed-{safe}").write_bytes(data)
    return len(seeds)


def main() -> None:
    counts = {"frames": write("frames", frames_seeds()), "stream": write("stream", stream_seeds())}
    for i, codec in enumerate(CODECS):
        counts[f"codec_{codec}"] = write(f"codec_{codec}", codec_seeds(i))
    counts["otlp"] = write("otlp", otlp_seeds())
    counts["config"] = write("config", config_seeds())
    for k, v in counts.items():
        print(f"{k}: {v} seeds")


if __name__ == "__main__":
    main()
