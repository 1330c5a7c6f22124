"""(Re)generate the seed corpora in fuzz/corpus/ from the real librdkafka captures and kip714's encoders.

    python fuzz/make_corpus.py [TARGET ...]      (default: every target)

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
    IncrementalAlterableConfig,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
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
    out.append((72, 0, True, PushTelemetryRequest(cid, 24301, True, 4, b"")))  # Metrics is not nullable
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
    # the same terminating push with its Metrics null (compact length 0), which no encoder writes: refused
    for name in ("body-72-v0-req-42", "req-72-v0-req-42"):
        assert seeds[name].endswith(b"\x01\x00")
        seeds[name + "-null-metrics"] = seeds[name][:-2] + b"\x00\x00"
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


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def push_frame(
    corr: int,
    client_id: bytes | None,
    instance: bytes,
    sid: int,
    metrics: bytes | None,
    ctype: int = 0,
    terminating: int = 0,
    version: int = 0,
    header_tags: bytes = b"\x00",
    body_tags: bytes = b"\x00",
) -> bytes:
    """A PushTelemetry request frame, byte by byte (shapes the encoder does not make: a terminating byte of 2,
    tagged fields, a client id that is not UTF-8)."""
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id)) + client_id
    body = instance + struct.pack(">ibb", sid, terminating, ctype)
    body += b"\x00" if metrics is None else _uvarint(len(metrics) + 1) + metrics
    frame = struct.pack(">hhi", 72, version, corr) + cid + header_tags + body + body_tags
    return struct.pack(">i", len(frame)) + frame


def _reads_cutting(n: int, lo: int, hi: int) -> int:
    """The first ``loop`` reads byte whose reads of an ``n``-byte stream end one within bytes ``lo..hi``."""
    import targets

    return next(k for k in range(1, 256) if any(lo <= end <= hi for _, end, _ in targets.loop_chunks(k, n)))


class _Client:
    """A client session for the ``loop`` seeds: ApiVersions, Metadata and Get of one instance, its
    subscription id read from the Get's answer (of a twin of the target's)."""

    def __init__(self, client_id: str, instance: uuid.UUID, corr: int = 1) -> None:
        import targets

        self.client_id, self.instance, self.corr = client_id, instance, corr
        twins = targets.LoopTwins()
        twins.open()
        get = kip714.encode_request(GetTelemetrySubscriptionsRequest(instance), 0, client_id)
        twins.feed(self.hello() + get)
        frames, _ = kip714.split_frames(twins.out)
        self.sid = kip714.decode_response(bytes(frames[-1]), 71, 0).body.subscription_id
        twins.close()

    def next(self) -> int:
        self.corr += 1
        return self.corr

    def hello(self) -> bytes:
        wire = kip714.encode_request(ApiVersionsRequest("librdkafka", "2.16.0"), self.next(), self.client_id, 3)
        return wire + kip714.encode_request(
            MetadataRequest([MetadataRequestTopic("t")]), self.next(), self.client_id, 12
        )

    def get(self) -> bytes:
        return kip714.encode_request(GetTelemetrySubscriptionsRequest(self.instance), self.next(), self.client_id)

    def push(self, metrics: bytes | None, ctype: int = 4, terminating: bool = False, sid: int | None = None) -> bytes:
        body = PushTelemetryRequest(self.instance, self.sid if sid is None else sid, terminating, ctype, metrics)
        return kip714.encode_request(body, self.next(), self.client_id)

    def raw(self, metrics: bytes | None, **kw) -> bytes:
        kw.setdefault("sid", self.sid)
        kw.setdefault("ctype", 4)
        cid = kw.pop("client_id", self.client_id.encode())
        return push_frame(self.next(), cid, self.instance.bytes, kw.pop("sid"), metrics, **kw)


def loop_seeds() -> dict[str, bytes]:
    """The ``loop`` target's seeds (byte 0: the twins' flags, byte 1: the reads, see fuzz/targets.py): every
    capture's session; then pushes the native loop decides (live instances that did a Get) in each way it
    can answer, and frames it must hand to Python or refuse, from librdkafka's zstd pushes."""
    import zstandard

    caps = captures()
    seeds: dict[str, bytes] = {}

    def seed(name: str, wire: bytes, flags: int = 0, reads: int = 0) -> None:
        seeds[name] = bytes([flags, reads]) + wire

    sessions = {}
    for scen in sorted({n.split("_push_")[0] for n in caps if "_push_" in n}):
        pushes = [kip714.decode_request(caps[n][4:]) for n in sorted(caps) if n.startswith(scen + "_push_")]
        client = _Client(pushes[0].client_id, pushes[0].body.client_instance_id)
        wire = client.hello() + client.get()
        for req in pushes:
            b = req.body
            wire += client.push(bytes(b.metrics), b.compression_type, b.terminating)
        sessions[scen] = (client, pushes)
        seed(f"session-{scen}", wire)
        seed(f"session-{scen}-reads-7", wire, reads=7)
    zclient, zpushes = sessions["producer_zstd"]
    zwire = [zclient.hello() + zclient.get()] + [
        zclient.push(bytes(r.body.metrics), 4, r.body.terminating) for r in zpushes
    ]
    session = b"".join(zwire)
    for reads in (1, 2, 42, 200, 255):
        seed(f"zstd-reads-{reads}", session, reads=reads)
    for flags, what in (
        (1, "export"),
        (2, "batch"),
        (3, "raise"),
        (4, "no-decompress"),
        (8, "small-table"),
        (16, "small-limit"),
        (32, "small-frames"),
        (3 | 16, "raise-small-limit"),
    ):
        seed(f"zstd-{what}", session, flags=flags)
        seed(f"zstd-{what}-reads-9", session, flags=flags, reads=9)
    payload = bytes(zpushes[0].body.metrics)
    plain = kip714.decompress(payload, 4, 1 << 20)
    c = zclient
    hello = c.hello() + c.get()
    # one read: accepted, throttled, terminating (accepted), after terminating (INVALID_REQUEST)
    seed(
        "zstd-accept-throttle-terminate",
        hello + c.push(payload) + c.push(payload) + c.push(payload, terminating=True) + c.push(payload),
    )
    seed("zstd-wrong-subscription", hello + c.push(payload, sid=c.sid + 1) + c.get() + c.push(payload), reads=3)
    for ctype in (5, 127, -1, -128):
        seed(f"bad-compression-{ctype}", hello + c.push(payload, ctype=ctype) + c.push(payload))
    seed("zstd-truncated", hello + c.push(payload[:-7]))
    flipped = bytearray(payload)
    for k in range(20, len(flipped), 37):
        flipped[k] ^= 0x5A
    seed("zstd-flipped", hello + c.push(bytes(flipped)))
    seed("zstd-bad-magic", hello + c.push(b"\x29" + payload[1:]))
    seed("zstd-checksum", hello + c.push(zstandard.ZstdCompressor(write_checksum=True).compress(plain)))
    seed("zstd-no-content-size", hello + c.push(zstandard.ZstdCompressor(write_content_size=False).compress(plain)))
    bomb = zstandard.ZstdCompressor(level=19, write_content_size=False).compress(b"\x00" * (4 << 20))
    seed("zstd-bomb", hello + c.push(bomb), flags=1)
    seed("zstd-bomb-declared", hello + c.push(zstandard.ZstdCompressor(level=19).compress(b"\x00" * (4 << 20))))
    big = zstandard.ZstdCompressor(compression_params=zstandard.ZstdCompressionParameters(window_log=27))
    obj = big.compressobj()
    seed("zstd-window-27", hello + c.push(obj.compress(plain) + obj.flush()), flags=2)
    seed("zstd-two-frames", hello + c.push(payload + payload), flags=1)
    seed("zstd-skippable", hello + c.push(struct.pack("<II", 0x184D2A50, 3) + b"abc" + payload), flags=1)
    seed("zstd-trailing", hello + c.push(payload + b"\x00"), flags=1)
    seed("zstd-empty-frame", hello + c.push(zstandard.ZstdCompressor().compress(b"")), flags=1)
    seed("empty-payload", hello + c.push(b"", ctype=4) + c.push(b"", ctype=0, terminating=True))
    seed("none-at-limit", hello + c.push(b"\x0a" * 1400, ctype=0), flags=16)
    seed("none-over-limit", hello + c.push(b"\x0a" * 1401, ctype=0), flags=16)
    # frames the loop hands to Python: another shape, an instance it does not hold, ids it must not decide
    seed("absent-instance", c.push(payload) + c.push(payload))
    seed(
        "reserved-ids",
        hello
        + push_frame(50, b"c", bytes(16), c.sid, payload, 4)
        + push_frame(51, b"c", bytes(15) + b"\x01", c.sid, payload, 4)
        + c.push(payload),
    )
    seed("terminating-byte-2", hello + c.raw(payload, terminating=2) + c.push(payload))
    seed("header-tags", hello + c.raw(payload, header_tags=b"\x01\x00\x01x") + c.push(payload))
    seed("body-tags", hello + c.raw(payload, body_tags=b"\x01\x07\x00") + c.push(payload))
    seed("null-payload", hello + c.raw(None) + c.push(payload))
    seed("null-client-id", hello + c.raw(payload, client_id=None) + c.push(payload))
    seed("client-id-not-utf8", hello + c.raw(payload, client_id=b"\xc3\x28") + c.push(payload))
    seed("push-v1", hello + c.raw(payload, version=1) + c.push(payload))
    trailing = bytearray(c.raw(payload))
    trailing[0:4] = struct.pack(">i", len(trailing) - 3)
    seed("frame-trailing-byte", hello + bytes(trailing) + b"\x00" + c.push(payload))
    for name, varint in (("varint-4-bytes", b"\x81\x80\x80\x00"), ("varint-5-bytes", b"\x81\x80\x80\x80\x00")):
        frame = struct.pack(">hhih", 72, 0, 60, 1) + b"c\x00" + c.instance.bytes + struct.pack(">ibb", c.sid, 0, 4)
        frame += varint + b"\x00"
        seed(name, hello + struct.pack(">i", len(frame)) + frame + c.push(payload))
    seed(
        "get-zero-id",
        kip714.encode_request(GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)), 70, "z") + hello + c.push(payload),
    )
    # refusals: the connection closes, the answers before it written (or none, when in the same read)
    first = hello + c.push(payload)
    before = first + c.push(payload, terminating=True)
    for name, bad, flags in (
        ("unknown-api-middle", struct.pack(">ihhih", 11, 0, 0, 99, 1) + b"x", 0),
        ("negative-length", b"\xff\xff\xff\xfe" + b"\x00" * 8, 0),
        ("negative-length-min", b"\x80\x00\x00\x00" + b"\x00" * 8, 0),
        ("frame-over-limit", b"\x7f\xff\xff\xff" + b"\x00" * 8, 0),
        ("frame-over-small-limit", c.push(b"\x0a" * 2100, ctype=0), 32),
    ):
        wire = before + bad + c.push(payload)
        seed(name, wire, flags=flags)  # one read: nothing answered
        seed(f"{name}-after-answers", wire, flags=flags, reads=_reads_cutting(len(wire), len(first), len(before) + 3))
    # several instances on one connection, a table of 4, subscriptions changed by the admin API
    clients = [_Client(f"kip714-prod-{k}", uuid.UUID(int=(k + 2) << 64 | 7), corr=100 * k) for k in range(6)]
    wire = b"".join(x.get() for x in clients[:3])
    for _ in range(2):
        wire += b"".join(x.push(payload) for x in clients[:3])
    seed("three-instances", wire, reads=13)
    seed("three-instances-one-read", wire)
    wire = b"".join(x.get() + x.push(payload) for x in clients) + b"".join(x.push(payload) for x in clients)
    seed("six-instances-table-of-4", wire, flags=8)
    seed("six-instances-table-of-4-reads", wire, flags=8, reads=77)
    alter = kip714.encode_request(
        IncrementalAlterConfigsRequest(
            [IncrementalAlterConfigsResource(16, "all", [IncrementalAlterableConfig("interval.ms", 0, "200")])]
        ),
        90,
        "admin",
        1,
    )
    seed("alter-stale", hello + c.push(payload) + alter + c.push(payload) + c.get() + c.push(payload), flags=64)
    seed(
        "alter-stale-reads",
        hello + c.push(payload) + alter + c.push(payload) + c.get() + c.push(payload),
        flags=64 | 1,
        reads=3,
    )
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


def main(names: list[str]) -> None:
    """Write the seeds of the targets named (every target when none is)."""
    makers = {"frames": frames_seeds, "stream": stream_seeds, "loop": loop_seeds}
    for i, codec in enumerate(CODECS):
        makers[f"codec_{codec}"] = lambda i=i: codec_seeds(i)
    makers["otlp"] = otlp_seeds
    makers["config"] = config_seeds
    for name in names or makers:
        print(f"{name}: {write(name, makers[name]())} seeds")


if __name__ == "__main__":
    main(sys.argv[1:])
