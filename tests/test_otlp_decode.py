"""kip714._otlp.decode_metrics (native OTLP MetricsData → Arrow) against the upb-based reference.

The oracle is kip714.otlp.reference: upb decides what is a valid payload, ``otlp_pb.flatten`` what its rows
are. Every comparison here goes through ``check``: if upb refuses the bytes, the native decoder must
raise CorruptPayloadError (and nothing else); if upb accepts them, the native rows must equal the
reference rows field by field (doubles compared bit for bit). One deliberate difference: the unsigned
64-bit fields (``otlp_pb.UNSIGNED_FIELDS``) are int64 columns, so a payload where upb reads one of them
as 2**63 or more must be refused (CorruptPayloadError naming the field), never wrapped negative.

Maps: the native columns keep repeated attribute keys, in order, as protobuf's repeated KeyValue does;
``otlp_pb.flatten`` builds dicts. So maps are checked twice: as dicts against ``flatten`` (a dict of
the native pairs collapses exactly like the reference's dict comprehension: first position, last
value), and as lists of pairs against ``upb_pairs`` (the same rendering, duplicates kept).
"""

from __future__ import annotations

import base64
import glob
import json
import math
import os
import random
import struct
import threading

import pyarrow as pa
import pytest
from examples import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kip714
from kip714 import _otlp
from kip714.errors import CorruptPayloadError, Kip714Error
from kip714.otlp import reference as otlp_pb

CAPTURES = os.path.join(os.path.dirname(__file__), "data", "captures")

U64 = (1 << 64) - 1


# ----------------------------------------------------------------------------------------- helpers


def same(a, b) -> bool:
    """Equality with doubles compared bit for bit (NaN == NaN, 0.0 != -0.0)."""
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def upb_pairs(data):
    """Per row (attributes, resource) as lists of (key, text) pairs, repeated keys kept."""
    msg = otlp_pb.parse_metrics_data(data)
    out = []
    for rm in msg.resource_metrics:
        res = [(kv.key, otlp_pb.render_any_value(kv.value)) for kv in rm.resource.attributes]
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                if kind is None:
                    continue
                for p in getattr(m, kind).data_points:
                    out.append(([(kv.key, otlp_pb.render_any_value(kv.value)) for kv in p.attributes], res))
    return out


def reference(data):
    """otlp_pb.flatten with the native column convention for quantiles (dicts) applied."""
    rows = otlp_pb.flatten(data)
    for r in rows:
        if r["quantiles"] is not None:
            r["quantiles"] = [{"quantile": q, "value": v} for q, v in r["quantiles"]]
    return rows


def upb_accepts(data) -> bool:
    try:
        otlp_pb.parse_metrics_data(data)
        return True
    except CorruptPayloadError:
        return False


def compare_rows(got, ref, pairs):
    assert len(got) == len(ref)
    for i, (g, r, (attrs, res)) in enumerate(zip(got, ref, pairs)):
        assert tuple(g)[: len(otlp_pb.COLUMNS)] == otlp_pb.COLUMNS
        assert g["attributes"] == attrs, i
        assert g["resource"] == res, i
        g = dict(g)
        g["attributes"] = dict(g["attributes"])
        g["resource"] = dict(g["resource"])
        for k in otlp_pb.COLUMNS:
            assert same(g[k], r[k]), (i, k, g[k], r[k])


def check(data, **kw):
    """Native vs upb: same verdict, and the same rows when accepted. Returns the table (or None)."""
    data = bytes(data)
    if not upb_accepts(data):
        with pytest.raises(CorruptPayloadError) as info:
            _otlp.decode_metrics(data, **kw)
        assert info.value.error_code == kip714.ErrorCode.INVALID_RECORD
        return None
    ref = reference(data)
    if any(otlp_pb.exceeds_int64(r) for r in ref):
        with pytest.raises(CorruptPayloadError, match=r"is 2\*\*63 or more") as info:
            _otlp.decode_metrics(data, **kw)
        assert info.value.error_code == kip714.ErrorCode.INVALID_RECORD
        return None
    table = _otlp.decode_metrics(data, **kw)
    compare_rows(table.to_pylist(), ref, upb_pairs(data))
    return table


def native_verdict(data):
    """Decode, allowing only CorruptPayloadError; returns the table or the exception."""
    try:
        return _otlp.decode_metrics(data)
    except CorruptPayloadError as exc:
        return exc


def capture_payloads():
    out = []
    for path in sorted(glob.glob(os.path.join(CAPTURES, "*_push_*.bin"))):
        with open(path, "rb") as f:
            frames, _ = kip714.split_frames(f.read())
        body = kip714.decode_request(frames[0]).body
        raw = kip714.decompress(body.metrics, body.compression_type, 1 << 24)
        out.append((os.path.basename(path), bytes(raw)))
    return out


CAPTURE_PAYLOADS = capture_payloads()


# ----------------------------------------------------------------------------- wire encoding helpers


def varint(v: int) -> bytes:
    v &= U64
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def tag(field: int, wt: int) -> bytes:
    return varint(field << 3 | wt)


def ld(field: int, body: bytes) -> bytes:
    return tag(field, 2) + varint(len(body)) + body


def fx64(field: int, v: int) -> bytes:
    return tag(field, 1) + struct.pack("<Q", v & U64)


def dbl(field: int, v: float) -> bytes:
    return tag(field, 1) + struct.pack("<d", v)


def vint(field: int, v: int) -> bytes:
    return tag(field, 0) + varint(v)


def zigzag(v: int) -> int:
    return ((v << 1) ^ (v >> 63)) & U64


# -------------------------------------------------------------------------------- realistic payloads

GROUPS = ["producer", "consumer", "producer.node", "consumer.node", "producer.topic", "consumer.coordinator"]
NAMES = [
    "request.rate",
    "request.total",
    "request.latency.avg",
    "request.latency.max",
    "record.send.rate",
    "record.send.total",
    "outgoing.byte.rate",
    "incoming.byte.total",
    "connection.creation.rate",
    "io.wait.time.ns.total",
    "commit.latency.avg",
    "fetch.size.avg",
    "bufferpool.wait.ratio",
]


def kafka_payload(target_bytes: int, seed: int = 1) -> bytes:
    """A KIP-714-like MetricsData of about ``target_bytes``: org.apache.kafka.* gauges and sums with
    1-4 points each and 1-2 string attributes per point, under one resource and scope."""
    from opentelemetry.proto.metrics.v1 import metrics_pb2 as mp

    rnd = random.Random(seed)
    md = mp.MetricsData()
    rm = md.resource_metrics.add()
    for k, v in (("client_rack", "rack-1"), ("group_id", "kip714-group")):
        kv = rm.resource.attributes.add()
        kv.key = k
        kv.value.string_value = v
    sm = rm.scope_metrics.add()
    sm.scope.name = "org.apache.kafka.clients.producer.KafkaProducer"
    sm.scope.version = "4.1.0"
    i = 0
    size = 0
    while size < target_bytes:
        group = GROUPS[i % len(GROUPS)]
        name = NAMES[(i // len(GROUPS)) % len(NAMES)]
        i += 1
        m = sm.metrics.add()
        m.name = f"org.apache.kafka.{group}.{name}"
        m.description = f"The {name.replace('.', ' ')} of the {group}."
        total = name.endswith("total")
        if total:
            m.sum.aggregation_temporality = 2
            m.sum.is_monotonic = True
        body = m.sum if total else m.gauge
        for p in range(rnd.randint(1, 4)):
            dp = body.data_points.add()
            dp.start_time_unix_nano = 1_700_000_000_000_000_000
            dp.time_unix_nano = 1_700_000_000_000_000_000 + 1_000_000 * p
            if total:
                dp.as_int = rnd.randint(0, 10**9)
            else:
                dp.as_double = rnd.random() * 1000
            for a in range(rnd.randint(1, 2)):
                kv = dp.attributes.add()
                kv.key = ("node_id", "topic")[a]
                kv.value.string_value = f"{p}" if a == 0 else f"topic-{rnd.randint(0, 9)}"
        size += m.ByteSize() + 3
    return md.SerializeToString()


def every_kind_payload() -> bytes:
    """One payload with every point type, every AnyValue type and the optional fields set/unset."""
    from opentelemetry.proto.metrics.v1 import metrics_pb2 as mp

    def attrs(target, n=0):
        kv = target.add()
        kv.key = "s"
        kv.value.string_value = f"π-{n}"
        kv = target.add()
        kv.key = "i"
        kv.value.int_value = -(2**63)
        kv = target.add()
        kv.key = "d"
        kv.value.double_value = 0.1
        kv = target.add()
        kv.key = "b"
        kv.value.bool_value = True
        kv = target.add()
        kv.key = "y"
        kv.value.bytes_value = b"\x00\xff\x10"
        kv = target.add()
        kv.key = "a"
        kv.value.array_value.values.add().double_value = float("nan")
        kv.value.array_value.values.add().string_value = 'q"\n\x01é'
        kv.value.array_value.values.add()
        kv = target.add()
        kv.key = "k"
        inner = kv.value.kvlist_value.values.add()
        inner.key = "x"
        inner.value.array_value.values.add().int_value = 3
        kv = target.add()
        kv.key = "none"
        kv = target.add()
        kv.key = "s"
        kv.value.string_value = "dup"

    md = mp.MetricsData()
    rm = md.resource_metrics.add()
    attrs(rm.resource.attributes)
    sm = rm.scope_metrics.add()
    sm.scope.name = "scope"
    sm.scope.version = "1"
    sm.scope.attributes.add().key = "ignored"
    m = sm.metrics.add()
    m.name = "g"
    m.unit = "ms"
    dp = m.gauge.data_points.add()
    dp.as_double = -0.0
    dp.flags = 1
    attrs(dp.attributes, 1)
    ex = dp.exemplars.add()
    ex.span_id = b"\xff" * 8
    ex.filtered_attributes.add().key = "f"
    m.gauge.data_points.add().as_int = -5
    m.gauge.data_points.add()
    m = sm.metrics.add()
    m.name = "s"
    m.sum.aggregation_temporality = 1
    m.sum.data_points.add().as_int = 2**62
    m = sm.metrics.add()
    m.name = "h"
    m.histogram.aggregation_temporality = 2
    hp = m.histogram.data_points.add()
    hp.count = 2**63 - 1  # the largest count the int64 column holds
    hp.sum = float("inf")
    hp.bucket_counts.extend([1, 2, 3])
    hp.explicit_bounds.extend([0.5, 1e300])
    hp.min = -1.5
    m.histogram.data_points.add().max = 7.0
    m = sm.metrics.add()
    m.name = "e"
    m.exponential_histogram.aggregation_temporality = 5
    ep = m.exponential_histogram.data_points.add()
    ep.scale = -3
    ep.zero_count = 9
    ep.positive.offset = -2
    ep.positive.bucket_counts.extend([5, 2**63 - 1])
    ep.negative.bucket_counts.extend([0])
    ep.zero_threshold = 0.25
    ep.exemplars.add()
    m.exponential_histogram.data_points.add()
    m = sm.metrics.add()
    m.name = "q"
    qp = m.summary.data_points.add()
    qp.count = 3
    qp.quantile_values.add(quantile=0.5, value=float("-inf"))
    qp.quantile_values.add(quantile=1.0, value=2.0)
    m.summary.data_points.add()
    sm.metrics.add().name = "no-data"
    rm2 = md.resource_metrics.add()
    sm2 = rm2.scope_metrics.add()
    m = sm2.metrics.add()
    m.name = "bare"
    m.gauge.data_points.add().as_double = 1.0
    md.resource_metrics.add()
    return md.SerializeToString()


# ------------------------------------------------------------------------------------ basic contract

EXPECTED_SCHEMA = pa.schema(
    [
        ("metric", pa.string()),
        ("description", pa.string()),
        ("unit", pa.string()),
        ("kind", pa.string()),
        ("temporality", pa.string()),
        ("monotonic", pa.bool_()),
        ("attributes", pa.map_(pa.string(), pa.string())),
        ("resource", pa.map_(pa.string(), pa.string())),
        ("scope_name", pa.string()),
        ("scope_version", pa.string()),
        ("start_time_unix_nano", pa.int64()),
        ("time_unix_nano", pa.int64()),
        ("value", pa.float64()),
        ("value_int", pa.int64()),
        ("count", pa.int64()),
        ("sum", pa.float64()),
        ("min", pa.float64()),
        ("max", pa.float64()),
        ("bucket_counts", pa.list_(pa.int64())),
        ("explicit_bounds", pa.list_(pa.float64())),
        ("scale", pa.int32()),
        ("zero_count", pa.int64()),
        ("positive_offset", pa.int32()),
        ("positive_bucket_counts", pa.list_(pa.int64())),
        ("negative_offset", pa.int32()),
        ("negative_bucket_counts", pa.list_(pa.int64())),
        ("quantiles", pa.list_(pa.struct([("quantile", pa.float64()), ("value", pa.float64())]))),
        ("flags", pa.int64()),
        ("exemplar_count", pa.int32()),
    ]
)


def test_columns_match_reference():
    assert _otlp.COLUMNS == otlp_pb.COLUMNS
    assert tuple(EXPECTED_SCHEMA.names) == otlp_pb.COLUMNS


@pytest.mark.parametrize("empty", [b"", bytearray(), memoryview(b"")])
def test_empty_input_gives_empty_table_with_full_schema(empty):
    t = _otlp.decode_metrics(empty)
    assert t.num_rows == 0
    assert t.schema.equals(EXPECTED_SCHEMA)
    t.validate(full=True)


def test_schema_of_every_table():
    t = _otlp.decode_metrics(every_kind_payload())
    assert t.schema.equals(EXPECTED_SCHEMA)
    t.validate(full=True)
    assert _otlp.output_schema().equals(EXPECTED_SCHEMA)


def test_field_numbers_match_installed_descriptors():
    """The numbers and types the walker (and the generators below) use are opentelemetry-proto's."""
    from google.protobuf.descriptor import FieldDescriptor as FD
    from opentelemetry.proto.common.v1 import common_pb2 as cp
    from opentelemetry.proto.metrics.v1 import metrics_pb2 as mp
    from opentelemetry.proto.resource.v1 import resource_pb2 as rp

    types = {
        "message": FD.TYPE_MESSAGE,
        "string": FD.TYPE_STRING,
        "bytes": FD.TYPE_BYTES,
        "fixed64": FD.TYPE_FIXED64,
        "sfixed64": FD.TYPE_SFIXED64,
        "double": FD.TYPE_DOUBLE,
        "uint32": FD.TYPE_UINT32,
        "uint64": FD.TYPE_UINT64,
        "int32": FD.TYPE_INT32,
        "int64": FD.TYPE_INT64,
        "sint32": FD.TYPE_SINT32,
        "enum": FD.TYPE_ENUM,
        "bool": FD.TYPE_BOOL,
    }
    messages = {
        mp.MetricsData: {1: "message"},
        mp.ResourceMetrics: {1: "message", 2: "message", 3: "string"},
        rp.Resource: {1: "message", 2: "uint32", 3: "message"},
        cp.EntityRef: {1: "string", 2: "string", 3: "string", 4: "string"},
        mp.ScopeMetrics: {1: "message", 2: "message", 3: "string"},
        cp.InstrumentationScope: {1: "string", 2: "string", 3: "message", 4: "uint32"},
        mp.Metric: {
            1: "string",
            2: "string",
            3: "string",
            5: "message",
            7: "message",
            9: "message",
            10: "message",
            11: "message",
            12: "message",
        },
        mp.Gauge: {1: "message"},
        mp.Summary: {1: "message"},
        mp.Sum: {1: "message", 2: "enum", 3: "bool"},
        mp.Histogram: {1: "message", 2: "enum"},
        mp.ExponentialHistogram: {1: "message", 2: "enum"},
        mp.NumberDataPoint: {
            2: "fixed64",
            3: "fixed64",
            4: "double",
            5: "message",
            6: "sfixed64",
            7: "message",
            8: "uint32",
        },
        mp.HistogramDataPoint: {
            2: "fixed64",
            3: "fixed64",
            4: "fixed64",
            5: "double",
            6: "fixed64",
            7: "double",
            8: "message",
            9: "message",
            10: "uint32",
            11: "double",
            12: "double",
        },
        mp.ExponentialHistogramDataPoint: {
            1: "message",
            2: "fixed64",
            3: "fixed64",
            4: "fixed64",
            5: "double",
            6: "sint32",
            7: "fixed64",
            8: "message",
            9: "message",
            10: "uint32",
            11: "message",
            12: "double",
            13: "double",
            14: "double",
        },
        mp.ExponentialHistogramDataPoint.Buckets: {1: "sint32", 2: "uint64"},
        mp.SummaryDataPoint: {
            2: "fixed64",
            3: "fixed64",
            4: "fixed64",
            5: "double",
            6: "message",
            7: "message",
            8: "uint32",
        },
        mp.SummaryDataPoint.ValueAtQuantile: {1: "double", 2: "double"},
        mp.Exemplar: {2: "fixed64", 3: "double", 4: "bytes", 5: "bytes", 6: "sfixed64", 7: "message"},
        cp.KeyValue: {1: "string", 2: "message", 3: "int32"},
        cp.AnyValue: {
            1: "string",
            2: "bool",
            3: "int64",
            4: "double",
            5: "message",
            6: "message",
            7: "bytes",
            8: "int32",
        },
        cp.ArrayValue: {1: "message"},
        cp.KeyValueList: {1: "message"},
    }
    for cls, fields in messages.items():
        got = {f.number: f.type for f in cls.DESCRIPTOR.fields}
        assert got == {n: types[t] for n, t in fields.items()}, cls.DESCRIPTOR.full_name
    assert [f.name for f in cp.AnyValue.DESCRIPTOR.oneofs_by_name["value"].fields] == [
        "string_value",
        "bool_value",
        "int_value",
        "double_value",
        "array_value",
        "kvlist_value",
        "bytes_value",
        "string_value_strindex",
    ]
    assert [f.number for f in mp.Metric.DESCRIPTOR.oneofs_by_name["data"].fields] == [5, 7, 9, 10, 11]
    # the repeated scalars the walker accepts packed and unpacked
    packed = {
        (m.DESCRIPTOR.name, f.name)
        for m in (mp.HistogramDataPoint, mp.ExponentialHistogramDataPoint.Buckets)
        for f in m.DESCRIPTOR.fields
        if f.is_repeated and f.type != FD.TYPE_MESSAGE
    }
    assert packed == {
        ("HistogramDataPoint", "bucket_counts"),
        ("HistogramDataPoint", "explicit_bounds"),
        ("Buckets", "bucket_counts"),
    }


@pytest.mark.parametrize("name,data", CAPTURE_PAYLOADS, ids=[n for n, _ in CAPTURE_PAYLOADS])
def test_capture_payloads_match_reference(name, data):
    t = check(data)
    assert t is not None
    t.validate(full=True)


def test_captures_cover_real_shapes():
    kinds = set()
    rows = 0
    for _, data in CAPTURE_PAYLOADS:
        t = _otlp.decode_metrics(data)
        kinds |= set(t.column("kind").to_pylist())
        rows += t.num_rows
    assert rows > 100
    assert {"gauge", "sum"} <= kinds


def test_capture_content_matches_expected_json():
    """Spot check against the independent protobuf-JSON in expected.json (not via upb)."""
    with open(os.path.join(CAPTURES, "expected.json")) as f:
        expected = json.load(f)
    for name, data in CAPTURE_PAYLOADS:
        otlp = expected[name]["otlp"]
        rows = _otlp.decode_metrics(data).to_pylist()
        want = []
        for rm in otlp.get("resourceMetrics", []):
            res = [(a["key"], a["value"].get("stringValue")) for a in rm.get("resource", {}).get("attributes", [])]
            for sm in rm.get("scopeMetrics", []):
                for m in sm.get("metrics", []):
                    for kind in ("gauge", "sum"):
                        for p in m.get(kind, {}).get("dataPoints", []):
                            want.append(
                                (
                                    m["name"],
                                    kind,
                                    res,
                                    int(p.get("timeUnixNano", 0)),
                                    float(p["asDouble"]) if "asDouble" in p else float(int(p.get("asInt", 0))),
                                )
                            )
        got = [(r["metric"], r["kind"], r["resource"], r["time_unix_nano"], r["value"]) for r in rows]
        assert got == want, name


def test_every_kind_payload_matches_reference():
    t = check(every_kind_payload())
    rows = t.to_pylist()
    assert [r["kind"] for r in rows] == ["gauge"] * 3 + ["sum"] + ["histogram"] * 2 + ["exponential_histogram"] * 2 + [
        "summary"
    ] * 2 + ["gauge"]
    first = rows[0]
    attrs = first["attributes"]
    assert attrs[0] == ("s", "π-1") and attrs[-1] == ("s", "dup")  # repeated key kept, in order
    assert dict(attrs)["i"] == str(-(2**63))
    assert dict(attrs)["d"] == "0.1"
    assert dict(attrs)["b"] == "true"
    assert dict(attrs)["y"] == base64.b64encode(b"\x00\xff\x10").decode()
    assert dict(attrs)["a"] == '[nan,"q\\"\\n\\u0001é",null]'
    assert dict(attrs)["k"] == '{"x":[3]}'
    assert dict(attrs)["none"] is None
    assert first["value"] == 0.0 and math.copysign(1, first["value"]) == -1
    assert first["exemplar_count"] == 1
    assert rows[3]["temporality"] == "delta" and rows[3]["monotonic"] is False
    assert rows[4]["count"] == 2**63 - 1  # the int64 column's maximum
    assert rows[6]["temporality"] is None  # unknown enum value 5
    assert rows[6]["positive_bucket_counts"] == [5, 2**63 - 1]
    assert rows[8]["quantiles"][0]["value"] == float("-inf")
    assert rows[8]["exemplar_count"] is None and rows[8]["min"] is None
    assert rows[10]["resource"] == [] and rows[10]["scope_name"] == ""


def test_realistic_payloads_match_reference():
    for size in (1000, 4000, 100_000):
        t = check(kafka_payload(size, seed=size))
        assert t.num_rows > 5


# ------------------------------------------------------------------ wire-level cases, upb as the oracle


def wrap_metric(metric: bytes, scope: bytes = b"", resource: bytes = b"") -> bytes:
    sm = (ld(1, scope) if scope else b"") + ld(2, metric)
    rm = (ld(1, resource) if resource else b"") + ld(2, sm)
    return ld(1, rm)


def wrap_point(point: bytes, kind: int = 5, body_extra: bytes = b"") -> bytes:
    return wrap_metric(ld(1, b"m") + ld(kind, ld(1, point) + body_extra))


def attr(key: bytes, anyvalue: bytes) -> bytes:
    return ld(1, key) + ld(2, anyvalue)


def s_av(s: bytes) -> bytes:
    return ld(1, s)


def nested_array(depth: int, leaf: bytes = b"\x0a\x01x") -> bytes:
    """AnyValue with ``depth`` nested array_value levels."""
    av = leaf
    for _ in range(depth):
        av = ld(5, ld(1, av))
    return av


def nested_kvlist(depth: int) -> bytes:
    av = ld(1, b"x")
    for _ in range(depth):
        av = ld(6, ld(1, attr(b"k", av)))
    return av


def groups(depth: int, field: int = 20) -> bytes:
    b = b""
    for _ in range(depth):
        b = tag(field, 3) + b + tag(field, 4)
    return b


G = lambda body: tag(20, 3) + body + tag(20, 4)  # noqa: E731

WIRE_CASES = {
    # a known field with another wire type is unknown to upb (skipped)
    "start_time as varint": wrap_point(vint(2, 5)),
    "as_double as varint": wrap_point(vint(4, 5) + dbl(4, 1.5) + vint(4, 7)),
    "attributes as varint": wrap_point(vint(7, 5)),
    "start_time as bytes": wrap_point(ld(2, b"12345678")),
    "as_int as fixed32": wrap_point(tag(6, 5) + b"1234"),
    "flags as fixed64": wrap_point(fx64(8, 3)),
    "temporality as fixed32": wrap_point(b"", kind=7, body_extra=tag(2, 5) + b"\x01\x00\x00\x00"),
    "monotonic as bytes": wrap_point(b"", kind=7, body_extra=ld(3, b"\x01")),
    "metric name as varint": wrap_metric(vint(1, 3) + ld(5, ld(1, b""))),
    "gauge as varint": wrap_metric(ld(1, b"m") + vint(5, 1)),
    "resource_metrics as fixed64": fx64(1, 5),
    "AnyValue int as fixed64": wrap_point(ld(7, attr(b"k", fx64(3, 5)))),
    "AnyValue string as varint": wrap_point(ld(7, attr(b"k", vint(1, 5)))),
    "AnyValue double as varint": wrap_point(ld(7, attr(b"k", vint(4, 5)))),
    "AnyValue array as varint after array": wrap_point(ld(7, attr(b"k", ld(5, ld(1, s_av(b"a"))) + vint(5, 1)))),
    # tags and varints
    "overlong tag (6 bytes)": wrap_point(b"\x90\x80\x80\x80\x80\x00" + b"\x05"),
    "5-byte tag": wrap_point(b"\x90\x80\x80\x80\x00" + b"\x05"),
    "5-byte tag over 32 bits": wrap_point(b"\x90\x80\x80\x80\x10" + b"\x05"),
    "field 0 varint": wrap_point(vint(0, 0)),
    "field 0 bytes": wrap_point(ld(0, b"")),
    "field 0 at top": vint(0, 1),
    "10-byte varint": wrap_point(tag(8, 0) + b"\xff" * 9 + b"\x7f"),
    "10-byte varint, top bit 1": wrap_point(tag(8, 0) + b"\x81" + b"\x80" * 8 + b"\x01"),
    "11-byte varint": wrap_point(tag(8, 0) + b"\xff" * 10 + b"\x01"),
    "overlong varint zero": wrap_point(tag(8, 0) + b"\x80\x80\x00"),
    "truncated varint at top": tag(8, 0) + b"\x80",
    "truncated varint in a point": wrap_point(tag(8, 0) + b"\x80"),
    "wire type 6": wrap_point(tag(20, 6)),
    "wire type 7": wrap_point(tag(20, 7)),
    "wire type 6 at top": tag(20, 6),
    "truncated fixed64": wrap_point(tag(2, 1) + b"1234"),
    "truncated fixed32": wrap_point(tag(20, 5) + b"12"),
    # groups (wire types 3/4)
    "end group at top": tag(20, 4),
    "end group in a message": wrap_point(tag(20, 4)),
    "unknown group": wrap_point(G(vint(1, 1))),
    "unknown group at top": G(vint(1, 1)),
    "group, mismatched end": wrap_point(tag(20, 3) + vint(1, 1) + tag(21, 4)),
    "group, unterminated": wrap_point(tag(20, 3) + vint(1, 1)),
    "group, unterminated at top": tag(20, 3) + vint(1, 1),
    "nested groups": wrap_point(G(tag(21, 3) + tag(21, 4))),
    "known field as a group": wrap_point(tag(7, 3) + tag(7, 4)),
    "known message field as a group at top": tag(1, 3) + tag(1, 4),
    "group with wire type 7 inside": wrap_point(G(tag(1, 7))),
    "group with field 0 inside": wrap_point(G(vint(0, 0))),
    "group with field 0 bytes/fixed inside": wrap_point(G(ld(0, b"x") + fx64(0, 1) + tag(0, 5) + b"1234")),
    "group 0 inside group": wrap_point(G(tag(0, 3) + tag(0, 4))),
    "group, end of field 0": wrap_point(tag(0, 3) + tag(0, 4)),
    "group with 6-byte tag inside": wrap_point(G(b"\x88\x80\x80\x80\x80\x00\x01")),
    "group with 11-byte varint inside": wrap_point(G(tag(1, 0) + b"\xff" * 10 + b"\x01")),
    "group with length past end inside": wrap_point(G(tag(1, 2) + b"\x05")),
    "group with bad utf8 inside": wrap_point(G(ld(1, b"\xff"))),
    "group in AnyValue": wrap_point(ld(7, attr(b"k", G(b"") + s_av(b"v")))),
    # UTF-8: every proto3 string field is checked, bytes and unknown fields are not
    "bad utf8 attribute key": wrap_point(ld(7, attr(b"\xff", s_av(b"v")))),
    "bad utf8 attribute value": wrap_point(ld(7, attr(b"k", s_av(b"\xc0\x80")))),
    "surrogate in attribute value": wrap_point(ld(7, attr(b"k", s_av("\ud800".encode("utf-8", "surrogatepass"))))),
    "above U+10FFFF": wrap_point(ld(7, attr(b"k", s_av(b"\xf4\x90\x80\x80")))),
    "overlong 3-byte": wrap_point(ld(7, attr(b"k", s_av(b"\xe0\x80\xaf")))),
    "truncated 4-byte": wrap_point(ld(7, attr(b"k", s_av(b"\xf0\x9f\x98")))),
    "valid 4-byte": wrap_point(ld(7, attr(b"k", s_av("😀\x00\x7f\u07ff\uffff".encode())))),
    "bad utf8 in nested array": wrap_point(ld(7, attr(b"k", nested_array(3, s_av(b"\xff"))))),
    "bad utf8 in kvlist key": wrap_point(ld(7, attr(b"k", ld(6, ld(1, attr(b"\xff", b"")))))),
    "bad utf8 in bytes value": wrap_point(ld(7, attr(b"k", ld(7, b"\xff\xfe")))),
    "bad utf8 in an unknown field": wrap_point(ld(20, b"\xff")),
    "bad utf8 metric name": wrap_metric(ld(1, b"\xff") + ld(5, ld(1, b""))),
    "bad utf8 description": wrap_metric(ld(2, b"\xff") + ld(5, ld(1, b""))),
    "bad utf8 unit": wrap_metric(ld(3, b"\xff")),
    "bad utf8 metadata": wrap_metric(ld(12, attr(b"\xff", b""))),
    "bad utf8 metadata value": wrap_metric(ld(12, attr(b"k", s_av(b"\xff")))),
    "bad utf8 scope name": wrap_metric(ld(1, b"m"), scope=ld(1, b"\xff")),
    "bad utf8 scope version": wrap_metric(ld(1, b"m"), scope=ld(2, b"\xff")),
    "bad utf8 scope attribute": wrap_metric(ld(1, b"m"), scope=ld(3, attr(b"\xff", b""))),
    "bad utf8 resource attribute": wrap_metric(ld(1, b"m"), resource=ld(1, attr(b"k", s_av(b"\xff")))),
    "bad utf8 entity ref": wrap_metric(ld(1, b"m"), resource=ld(3, ld(3, b"ok") + ld(4, b"\xff"))),
    "entity ref ok": wrap_metric(ld(1, b"m"), resource=ld(3, ld(1, b"a") + ld(2, b"b") + ld(3, b"c"))),
    "bad utf8 rm schema_url": ld(1, ld(3, b"\xff")),
    "bad utf8 sm schema_url": ld(1, ld(2, ld(3, b"\xff"))),
    "bad utf8 exemplar attribute": wrap_point(ld(5, ld(7, attr(b"\xff", b"")))),
    "bad utf8 exemplar span id": wrap_point(ld(5, ld(4, b"\xff"))),
    # lengths
    "length 2**31": wrap_point(tag(20, 2) + varint(2**31) + b"x"),
    "length 2**31-1": wrap_point(tag(20, 2) + varint(2**31 - 1) + b"x"),
    "length past the end": wrap_point(tag(20, 2) + varint(5) + b"x"),
    "length past the submessage": ld(1, tag(2, 2) + varint(4) + b"ab") + b"cd",
    # packed and unpacked repeated scalars
    "packed fixed64, 7 bytes": wrap_point(ld(6, b"1234567"), kind=9),
    "packed fixed64, empty": wrap_point(ld(6, b""), kind=9),
    "packed fixed64 + unpacked": wrap_point(
        ld(6, struct.pack("<2Q", 1, 2)) + fx64(6, 3) + ld(6, struct.pack("<Q", 4)), kind=9
    ),
    "packed double, 9 bytes": wrap_point(ld(7, b"123456789"), kind=9),
    "bounds unpacked": wrap_point(dbl(7, 0.5) + dbl(7, float("nan")), kind=9),
    "bucket_counts as varint": wrap_point(vint(6, 5), kind=9),
    "buckets packed varint crossing the end": wrap_point(ld(8, ld(2, b"\x80")), kind=10),
    "buckets packed varint, 11 bytes": wrap_point(ld(8, ld(2, b"\xff" * 10 + b"\x01")), kind=10),
    "buckets packed + unpacked": wrap_point(ld(8, ld(2, b"\x01\x02") + vint(2, 3) + ld(2, varint(2**64 - 1))), kind=10),
    "buckets counts as fixed64": wrap_point(ld(9, fx64(2, 5)), kind=10),
    "sint32 from a 64-bit varint": wrap_point(vint(6, 2**40 + 3) + ld(8, vint(1, 2**33 + 1)), kind=10),
    "negative flags": wrap_point(vint(8, -1)),
    "temporality from a 64-bit varint": wrap_point(b"", kind=7, body_extra=vint(2, 2**32 + 1)),
    "negative temporality": wrap_point(b"", kind=9, body_extra=vint(2, -1)),
    "monotonic 2": wrap_point(b"", kind=7, body_extra=vint(3, 2)),
    "monotonic then false": wrap_point(b"", kind=7, body_extra=vint(3, 1) + vint(3, 0)),
    "gauge with temporality": wrap_point(b"", kind=5, body_extra=vint(2, 1) + vint(3, 1)),
    "summary with temporality": wrap_point(b"", kind=11, body_extra=vint(2, 1)),
    "histogram with monotonic": wrap_point(b"", kind=9, body_extra=vint(2, 2) + vint(3, 1)),
    # merges, oneofs, last-one-wins
    "sum, gauge, sum": wrap_metric(
        ld(7, ld(1, dbl(4, 1)) + vint(2, 1)) + ld(5, ld(1, dbl(4, 2))) + ld(7, ld(1, dbl(4, 3)))
    ),
    "sum, sum merged": wrap_metric(ld(7, ld(1, dbl(4, 1)) + vint(2, 1) + vint(3, 1)) + ld(7, ld(1, dbl(4, 2)))),
    "gauge, histogram": wrap_metric(ld(5, ld(1, ld(7, attr(b"a", s_av(b"b"))))) + ld(9, ld(1, ld(6, b"")))),
    "histogram, exp, histogram": wrap_metric(ld(9, ld(1, fx64(4, 1))) + ld(10, ld(1, b"")) + ld(9, ld(1, fx64(4, 2)))),
    "summary, summary": wrap_metric(ld(11, ld(1, fx64(4, 1))) + ld(11, ld(1, fx64(4, 2)))),
    "name after the data": wrap_metric(ld(5, ld(1, b"")) + ld(1, b"late") + ld(2, b"d") + ld(1, b"later")),
    "scope after the metrics": ld(
        1, ld(2, ld(2, ld(1, b"m") + ld(5, ld(1, b""))) + ld(1, ld(1, b"s")) + ld(1, ld(2, b"v")))
    ),
    "resource after the scopes, twice": ld(
        1,
        ld(2, ld(2, ld(5, ld(1, b""))))
        + ld(1, ld(1, attr(b"a", s_av(b"1"))))
        + ld(1, ld(1, attr(b"b", s_av(b"2")) + vint(2, 4))),
    ),
    "two resource_metrics": ld(1, ld(1, ld(1, attr(b"a", b""))) + ld(2, ld(2, ld(5, ld(1, b""))))) * 2,
    "point merged from two occurrences": wrap_point(
        dbl(4, 1.0) + vint(8, 1) + ld(7, attr(b"a", s_av(b"1"))) + fx64(6, 7) + ld(7, attr(b"b", b""))
    ),
    "as_int then as_double": wrap_point(fx64(6, 5) + dbl(4, 2.5)),
    "as_double then as_int": wrap_point(dbl(4, 2.5) + fx64(6, 2**64 - 5)),
    "histogram optional fields twice": wrap_point(
        dbl(5, 1.0) + dbl(5, 2.0) + dbl(11, -0.0) + dbl(12, float("inf")), kind=9
    ),
    "exp buckets merged": wrap_point(
        ld(8, vint(1, zigzag(-3)) + vint(2, 1)) + ld(9, vint(2, 9)) + ld(8, vint(2, 2)), kind=10
    ),
    "exp buckets offset last wins": wrap_point(ld(8, vint(1, zigzag(-3))) + ld(8, vint(1, zigzag(4))), kind=10),
    "quantile fields repeated": wrap_point(ld(6, dbl(1, 0.1) + dbl(1, 0.9) + dbl(2, 5.0)) + ld(6, b""), kind=11),
    "summary sum absent": wrap_point(fx64(4, 3), kind=11),
    "kv value twice (arrays merge)": wrap_point(
        ld(7, attr(b"k", ld(5, ld(1, s_av(b"a")))) + ld(2, ld(5, ld(1, s_av(b"b")))))
    ),
    "kv key twice": wrap_point(ld(7, ld(1, b"k1") + ld(2, s_av(b"v")) + ld(1, b"k2"))),
    "kv without value": wrap_point(ld(7, ld(1, b"k"))),
    "kv without key": wrap_point(ld(7, ld(2, s_av(b"v")))),
    "kv key_strindex": wrap_point(ld(7, vint(3, 5) + ld(1, b"k") + ld(2, vint(8, 1)))),
    "array, string, array": wrap_point(
        ld(7, attr(b"k", ld(5, ld(1, s_av(b"a"))) + s_av(b"s") + ld(5, ld(1, s_av(b"b")))))
    ),
    "array, kvlist, array": wrap_point(
        ld(7, attr(b"k", ld(5, ld(1, s_av(b"a"))) + ld(6, b"") + ld(5, ld(1, s_av(b"b")))))
    ),
    "kvlist, kvlist": wrap_point(
        ld(7, attr(b"k", ld(6, ld(1, attr(b"a", s_av(b"1")))) + ld(6, ld(1, attr(b"b", b"")))))
    ),
    "kvlist repeated key": wrap_point(
        ld(
            7,
            attr(
                b"k",
                ld(6, ld(1, attr(b"a", s_av(b"1"))) + ld(1, attr(b"b", s_av(b"2"))) + ld(1, attr(b"a", s_av(b"3")))),
            ),
        )
    ),
    "kvlist value merged": wrap_point(
        ld(7, attr(b"k", ld(6, ld(1, attr(b"a", ld(5, ld(1, s_av(b"1")))) + ld(2, ld(5, ld(1, b"")))))))
    ),
    "strindex then int": wrap_point(ld(7, attr(b"k", vint(8, 5) + vint(3, 7)))),
    "int then strindex": wrap_point(ld(7, attr(b"k", vint(3, 7) + vint(8, 5)))),
    "strindex in array": wrap_point(ld(7, attr(b"k", ld(5, ld(1, vint(8, 5)) + ld(1, b""))))),
    "string then bool": wrap_point(ld(7, attr(b"k", s_av(b"s") + vint(2, 5)))),
    "bool false / int min": wrap_point(ld(7, attr(b"a", vint(2, 0))) + ld(7, attr(b"b", vint(3, -(2**63))))),
    "doubles": wrap_point(
        b"".join(
            ld(7, attr(b"d", dbl(4, v)))
            for v in (
                0.0,
                -0.0,
                float("nan"),
                float("inf"),
                -float("inf"),
                1e16,
                1e-5,
                5e-324,
                1.7976931348623157e308,
                0.1,
                1 / 3,
                2.0**63,
            )
        )
    ),
    "negative NaN and NaN payload": wrap_point(
        ld(7, attr(b"d", tag(4, 1) + b"\x01\x00\x00\x00\x00\x00\xf8\xff"))
        + tag(4, 1)
        + b"\x01\x00\x00\x00\x00\x00\xf8\xff"
    ),
    "json escapes": wrap_point(ld(7, attr(b"k", ld(5, ld(1, s_av(bytes(range(0x80)) + "é\u2028😀".encode())))))),
    "json doubles and bytes in arrays": wrap_point(
        ld(
            7,
            attr(
                b"k",
                ld(
                    5,
                    b"".join(
                        ld(1, x)
                        for x in (
                            dbl(4, float("nan")),
                            dbl(4, -0.0),
                            dbl(4, 1e22),
                            ld(7, b""),
                            ld(7, b"\x00\x01"),
                            vint(2, 1),
                            vint(3, -1),
                            b"",
                        )
                    ),
                ),
            ),
        )
    ),
    "empty strings": wrap_metric(ld(1, b"") + ld(2, b"") + ld(3, b"") + ld(5, ld(1, ld(7, attr(b"", s_av(b"")))))),
    "metric without data": wrap_metric(ld(1, b"m")),
    "empty metric": wrap_metric(b""),
    "empty point": wrap_point(b""),
    "exemplars counted": wrap_point(
        ld(5, b"") + ld(5, dbl(3, 1.0) + fx64(6, 1)) + ld(5, ld(7, attr(b"a", b""))), kind=7
    ),
    "exemplar as varint not counted": wrap_point(vint(5, 1)),
}


@pytest.mark.parametrize("data", list(WIRE_CASES.values()), ids=list(WIRE_CASES))
def test_wire_cases_match_upb(data):
    check(data)


def test_some_wire_cases_are_really_accepted_or_rejected():
    # guard against a silently broken oracle: a few known verdicts
    assert upb_accepts(WIRE_CASES["start_time as varint"])
    assert upb_accepts(WIRE_CASES["unknown group"])
    assert not upb_accepts(WIRE_CASES["bad utf8 attribute key"])
    assert not upb_accepts(WIRE_CASES["packed fixed64, 7 bytes"])
    rows = _otlp.decode_metrics(WIRE_CASES["sum, gauge, sum"]).to_pylist()
    assert [(r["kind"], r["value"], r["temporality"]) for r in rows] == [("sum", 3.0, None)]
    rows = _otlp.decode_metrics(WIRE_CASES["kvlist repeated key"]).to_pylist()
    assert rows[0]["attributes"] == [("k", '{"a":"3","b":"2"}')]


@pytest.mark.parametrize("depth", range(40, 49))
def test_array_nesting_limit_matches_upb(depth):
    check(wrap_point(ld(7, attr(b"k", nested_array(depth)))))


@pytest.mark.parametrize("depth", range(28, 36))
def test_kvlist_nesting_limit_matches_upb(depth):
    check(wrap_point(ld(7, attr(b"k", nested_kvlist(depth)))))


@pytest.mark.parametrize("depth", [1, 50, 92, 93, 94, 95, 96, 99, 100, 101])
def test_group_nesting_limit_matches_upb(depth):
    check(wrap_point(groups(depth)))
    check(groups(depth) + wrap_point(b""))


def test_deep_nesting_in_resource_and_exemplar():
    for depth in range(44, 50):
        check(wrap_metric(ld(1, b"m") + ld(5, ld(1, b"")), resource=ld(1, attr(b"k", nested_array(depth)))))
        check(wrap_point(ld(5, ld(7, attr(b"k", nested_array(depth - 1))))))


# --------------------------------------------------------- generated payloads (hypothesis), upb oracle
#
# A schema-driven generator of wire bytes: every message is a list of encoded fields drawn from its
# schema. Fields come in schema order with each singular field at most once ("canonical", what real
# encoders write) or in any order with repeats, unknown fields, groups and known fields with the
# wrong wire type ("chaotic": exercises upb's merge / last-one-wins / oneof rules).

MSG = "msg"
SCHEMA = {
    "MetricsData": {1: (MSG, "ResourceMetrics", True)},
    "ResourceMetrics": {1: (MSG, "Resource", False), 2: (MSG, "ScopeMetrics", True), 3: ("string",)},
    "Resource": {1: (MSG, "KeyValue", True), 2: ("uint32",), 3: (MSG, "EntityRef", True)},
    "EntityRef": {1: ("string",), 2: ("string",), 3: ("rstring",), 4: ("rstring",)},
    "ScopeMetrics": {1: (MSG, "InstrumentationScope", False), 2: (MSG, "Metric", True), 3: ("string",)},
    "InstrumentationScope": {1: ("string",), 2: ("string",), 3: (MSG, "KeyValue", True), 4: ("uint32",)},
    "Metric": {
        1: ("string",),
        2: ("string",),
        3: ("string",),
        5: (MSG, "Gauge", False),
        7: (MSG, "Sum", False),
        9: (MSG, "Histogram", False),
        10: (MSG, "ExponentialHistogram", False),
        11: (MSG, "Summary", False),
        12: (MSG, "KeyValue", True),
    },
    "Gauge": {1: (MSG, "NumberDataPoint", True)},
    "Sum": {1: (MSG, "NumberDataPoint", True), 2: ("enum",), 3: ("bool",)},
    "Histogram": {1: (MSG, "HistogramDataPoint", True), 2: ("enum",)},
    "ExponentialHistogram": {1: (MSG, "ExponentialHistogramDataPoint", True), 2: ("enum",)},
    "Summary": {1: (MSG, "SummaryDataPoint", True)},
    "NumberDataPoint": {
        2: ("fixed64",),
        3: ("fixed64",),
        4: ("double",),
        5: (MSG, "Exemplar", True),
        6: ("fixed64",),
        7: (MSG, "KeyValue", True),
        8: ("uint32",),
    },
    "HistogramDataPoint": {
        2: ("fixed64",),
        3: ("fixed64",),
        4: ("fixed64",),
        5: ("double",),
        6: ("pfixed64",),
        7: ("pdouble",),
        8: (MSG, "Exemplar", True),
        9: (MSG, "KeyValue", True),
        10: ("uint32",),
        11: ("double",),
        12: ("double",),
    },
    "ExponentialHistogramDataPoint": {
        1: (MSG, "KeyValue", True),
        2: ("fixed64",),
        3: ("fixed64",),
        4: ("fixed64",),
        5: ("double",),
        6: ("sint32",),
        7: ("fixed64",),
        8: (MSG, "Buckets", False),
        9: (MSG, "Buckets", False),
        10: ("uint32",),
        11: (MSG, "Exemplar", True),
        12: ("double",),
        13: ("double",),
        14: ("double",),
    },
    "Buckets": {1: ("sint32",), 2: ("pvarint",)},
    "SummaryDataPoint": {
        2: ("fixed64",),
        3: ("fixed64",),
        4: ("fixed64",),
        5: ("double",),
        6: (MSG, "ValueAtQuantile", True),
        7: (MSG, "KeyValue", True),
        8: ("uint32",),
    },
    "ValueAtQuantile": {1: ("double",), 2: ("double",)},
    "Exemplar": {
        2: ("fixed64",),
        3: ("double",),
        4: ("bytes",),
        5: ("bytes",),
        6: ("fixed64",),
        7: (MSG, "KeyValue", True),
    },
    "KeyValue": {1: ("key",), 2: (MSG, "AnyValue", False), 3: ("int32",)},
    "AnyValue": {
        1: ("string",),
        2: ("bool",),
        3: ("int64",),
        4: ("double",),
        5: (MSG, "ArrayValue", False),
        6: (MSG, "KeyValueList", False),
        7: ("bytes",),
        8: ("int32",),
    },
    "ArrayValue": {1: (MSG, "AnyValue", True)},
    "KeyValueList": {1: (MSG, "KeyValue", True)},
}
WIRE_TYPE = {
    "string": 2,
    "rstring": 2,
    "key": 2,
    "bytes": 2,
    "uint32": 0,
    "int32": 0,
    "int64": 0,
    "enum": 0,
    "bool": 0,
    "sint32": 0,
    "fixed64": 1,
    "double": 1,
    "pfixed64": 2,
    "pdouble": 2,
    "pvarint": 2,
}
# how many fields a message of each type gets at most (keeps examples small)
MAX_FIELDS = {
    "MetricsData": 2,
    "ResourceMetrics": 3,
    "ScopeMetrics": 3,
    "Metric": 4,
    "KeyValue": 2,
    "AnyValue": 1,
    "ArrayValue": 2,
    "KeyValueList": 2,
}

INTERESTING_DOUBLES = [
    0.0,
    -0.0,
    float("nan"),
    float("inf"),
    -float("inf"),
    0.1,
    1e16,
    1e-7,
    5e-324,
    1.7976931348623157e308,
    -2.5,
    123456789.125,
]
INTERESTING_INTS = [0, 1, -1, 2**31 - 1, -(2**31), 2**32, 2**63 - 1, -(2**63), 2**64 - 1, 2**63]

doubles = st.one_of(st.sampled_from(INTERESTING_DOUBLES), st.floats(allow_nan=True, allow_infinity=True))
ints64 = st.one_of(st.sampled_from(INTERESTING_INTS), st.integers(-(2**63), 2**64 - 1))
texts = st.one_of(st.sampled_from(["", "a", "node_id", "π", "日本", "😀", 'q"\\\n\t\x00\x1f']), st.text(max_size=6))


def _string_bytes(draw, bad_ok):
    if bad_ok and draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from([b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"a\xf4\x90\x80\x80", b"\xe2\x82"]))
    return draw(texts).encode("utf-8")


def _scalar_field(draw, number, kind, chaos):
    if kind in ("string", "key", "rstring"):
        return ld(number, _string_bytes(draw, chaos))
    if kind == "bytes":
        return ld(number, draw(st.binary(max_size=6)))
    if kind in ("uint32", "int32", "int64", "enum"):
        return vint(number, draw(ints64 if kind != "enum" else st.sampled_from([0, 1, 2, 3, -1, 2**32 + 2])))
    if kind == "bool":
        return vint(number, draw(st.sampled_from([0, 1, 2, 2**40])))
    if kind == "sint32":
        v = draw(st.integers(-(2**31), 2**31 - 1))
        return vint(number, zigzag(v) if draw(st.booleans()) else draw(ints64))
    if kind == "fixed64":
        return fx64(number, draw(ints64))
    if kind == "double":
        return dbl(number, draw(doubles))
    # repeated scalars: packed or not (both are accepted)
    values = draw(st.lists(ints64 if kind != "pdouble" else doubles, max_size=4))
    if draw(st.booleans()):
        if kind == "pvarint":
            return ld(number, b"".join(varint(v) for v in values))
        fmt = "<d" if kind == "pdouble" else "<Q"
        return ld(number, b"".join(struct.pack(fmt, v if kind == "pdouble" else v & U64) for v in values))
    if kind == "pvarint":
        return b"".join(vint(number, v) for v in values)
    return b"".join(dbl(number, v) if kind == "pdouble" else fx64(number, v) for v in values)


def _junk_field(draw, depth):
    """An unknown field, or a known field number with a wire type upb will not take for it."""
    number = draw(st.sampled_from([1, 2, 3, 5, 7, 9, 13, 15, 99, 1000, 536870911]))
    wt = draw(st.sampled_from([0, 1, 2, 5, 3] if depth < 90 else [0, 1, 2, 5]))
    if wt == 0:
        return vint(number, draw(ints64))
    if wt == 1:
        return fx64(number, draw(ints64))
    if wt == 5:
        return tag(number, 5) + draw(st.binary(min_size=4, max_size=4))
    if wt == 2:
        return ld(number, draw(st.binary(max_size=5)))
    inner = b"".join(_junk_field(draw, depth + 1) for _ in range(draw(st.integers(0, 2))))
    return tag(number, 3) + inner + tag(number, 4)


def _message(draw, name, depth=0, chaos=False, budget=None, bad=None):
    fields = SCHEMA[name]
    if budget is None:
        budget = [25]  # total submessages in this payload
    if bad is None:  # invalid UTF-8 in this payload: in a few chaotic ones only
        bad = chaos and draw(st.integers(0, 5)) == 0
    parts = []
    if depth > 12 or budget[0] <= 0:
        return b""
    limit = MAX_FIELDS.get(name, 6)
    numbers = []
    for number in sorted(fields):
        spec = fields[number]
        if spec[0] == MSG and spec[2]:
            numbers += [number] * draw(st.integers(0, 2 if depth > 2 else 3))
        elif draw(st.booleans()):
            numbers.append(number)
    if name in ("Metric", "AnyValue"):  # a oneof: at most one member when canonical
        oneof = {5, 7, 9, 10, 11} if name == "Metric" else {1, 2, 3, 4, 5, 6, 7, 8}
        members = [n for n in numbers if n in oneof]
        if members:
            keep = draw(st.sampled_from(members))
            numbers = [n for n in numbers if n not in oneof or n == keep]
    if chaos:
        # repeats of any field (merges, last-one-wins, oneof switches), in any order below
        numbers += draw(st.lists(st.sampled_from(sorted(fields)), max_size=2))
    numbers = numbers[: limit + 2]
    for number in numbers:
        spec = fields[number]
        if spec[0] == MSG:
            budget[0] -= 1
            parts.append(ld(number, _message(draw, spec[1], depth + 1, chaos, budget, bad)))
        else:
            parts.append(_scalar_field(draw, number, spec[0], bad))
    if chaos and draw(st.integers(0, 3)) == 0:
        parts.append(_junk_field(draw, depth))
        parts = draw(st.permutations(parts))
    return b"".join(parts)


@st.composite
def message(draw, name, depth=0, chaos=False):
    """The bytes of one OTLP message ``name``: canonical, or with ``chaos`` repeats, junk fields, any order
    and now and then invalid UTF-8. (The helpers above take ``draw`` and call each other directly: a
    strategy object per nested call cost Hypothesis more than the drawing itself.)"""
    return _message(draw, name, depth, chaos)


SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}


@settings(max_examples=examples(100), **SETTINGS)
@given(message("MetricsData"))
def test_generated_canonical_payloads(data):
    check(data)


@settings(max_examples=examples(150), **SETTINGS)
@given(message("MetricsData", chaos=True))
def test_generated_chaotic_payloads(data):
    check(data)


@settings(max_examples=examples(100), **SETTINGS)
@given(
    st.sampled_from(
        ["NumberDataPoint", "HistogramDataPoint", "ExponentialHistogramDataPoint", "SummaryDataPoint"]
    ).flatmap(lambda kind: st.tuples(st.just(kind), st.lists(message(kind, 5, True), min_size=1, max_size=3))),
    st.booleans(),
)
def test_generated_points_of_every_type(kind_points, chaos_body):
    kind, points = kind_points
    field = {
        "NumberDataPoint": 5,
        "HistogramDataPoint": 9,
        "ExponentialHistogramDataPoint": 10,
        "SummaryDataPoint": 11,
    }[kind]
    body = b"".join(ld(1, p) for p in points) + (vint(2, 1) if chaos_body else b"")
    check(wrap_metric(ld(1, b"org.apache.kafka.x") + ld(field, body)))


@settings(max_examples=examples(100), **SETTINGS)
@given(st.lists(message("AnyValue", 7, True), min_size=1, max_size=4), texts)
def test_generated_attribute_values(values, key):
    point = b"".join(ld(7, ld(1, key.encode()) + ld(2, v)) for v in values)
    check(wrap_point(point) + wrap_metric(ld(1, b"r"), resource=ld(1, ld(1, b"rk") + ld(2, values[0]))))


# ------------------------------------------------------------------------------------ hostile input


def merged_wire_payload() -> bytes:
    """A payload full of the unusual-but-valid encodings (merges, unknowns, groups, packed/unpacked)."""
    return b"".join(v for v in WIRE_CASES.values() if upb_accepts(v))


HOSTILE_BASES = [every_kind_payload(), CAPTURE_PAYLOADS[0][1], merged_wire_payload()[:3000]]


@pytest.mark.parametrize("base", range(len(HOSTILE_BASES)))
def test_truncation_at_every_offset(base):
    data = HOSTILE_BASES[base]
    for n in range(len(data)):
        check(data[:n])


def mutate(rnd: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rnd.choice((1, 1, 1, 2, 3, 8))):
        op = rnd.randrange(6)
        i = rnd.randrange(len(b) + 1)
        if op == 0 and b:  # overwrite a byte
            b[min(i, len(b) - 1)] = rnd.choice((0x00, 0x01, 0x7F, 0x80, 0xFF, rnd.randrange(256)))
        elif op == 1 and b:  # flip a bit
            b[min(i, len(b) - 1)] ^= 1 << rnd.randrange(8)
        elif op == 2:  # insert bytes
            b[i:i] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 4)))
        elif op == 3:  # delete a range
            del b[i : i + rnd.randint(1, 8)]
        elif op == 4 and b:  # duplicate a range (repeats fields: merges)
            j = rnd.randrange(len(b))
            b[i:i] = b[j : j + rnd.randint(1, 40)]
        elif b:  # bump a length/varint byte
            k = min(i, len(b) - 1)
            b[k] = (b[k] + rnd.choice((1, -1, 2, 0x40))) & 0xFF
    return bytes(b)


def test_random_mutations():
    rnd = random.Random(714)
    accepted = rejected = 0
    for n in range(3000):
        data = mutate(rnd, HOSTILE_BASES[n % len(HOSTILE_BASES)])
        if check(data) is None:
            rejected += 1
        else:
            accepted += 1
    assert accepted > 300 and rejected > 300  # both paths really exercised


def test_random_bytes():
    rnd = random.Random(42)
    for _n in range(2000):
        data = bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 48)))
        check(data)
        # random bytes as the body of a data point
        check(wrap_point(data, kind=rnd.choice((5, 7, 9, 10, 11))))


def test_only_corrupt_payload_errors_on_garbage():
    rnd = random.Random(7)
    for _n in range(300):
        data = bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 4000)))
        result = native_verdict(data)
        assert isinstance(result, (pa.Table, Kip714Error))


# ------------------------------------------------------------------------------------------ labels


def test_labels_append_constant_columns():
    data = every_kind_payload()
    t = _otlp.decode_metrics(data, labels={"broker": "b-1", "node_id": 3, "empty": "", "missing": None})
    assert t.column_names == list(otlp_pb.COLUMNS) + ["broker", "node_id", "empty", "missing"]
    assert t.schema.field("broker").type == pa.string()
    assert t.schema.field("node_id").type == pa.int64()
    assert set(t.column("broker").to_pylist()) == {"b-1"}
    assert set(t.column("node_id").to_pylist()) == {3}
    assert set(t.column("empty").to_pylist()) == {""}
    assert set(t.column("missing").to_pylist()) == {None}
    t.validate(full=True)
    assert t.drop_columns(["broker", "node_id", "empty", "missing"]).equals(_otlp.decode_metrics(data))


def test_labels_on_an_empty_table():
    t = _otlp.decode_metrics(b"", labels={"a": "x", "b": -(2**63)})
    assert t.num_rows == 0 and t.column_names[-2:] == ["a", "b"]
    assert _otlp.output_schema({"a": "x", "b": 1}).equals(t.schema)
    labels = [{"a": "x"}, {"a": 1, "b": 2}]
    tb = _otlp.decode_metrics_batch([b"", b""], labels=labels)
    assert _otlp.output_schema(labels, batch=True).equals(tb.schema)
    assert tb.schema.field("a").type == pa.string() and tb.schema.field("b").type == pa.int64()


@pytest.mark.parametrize(
    "labels,exc",
    [
        ({"metric": "x"}, ValueError),
        ({1: "x"}, TypeError),
        ({"a": 1.5}, TypeError),
        ({"a": True}, TypeError),
        ({"a": 2**63}, ValueError),
        ("a=b", TypeError),
        ([{"a": "b"}], TypeError),
    ],
)
def test_bad_labels(labels, exc):
    with pytest.raises(exc):
        _otlp.decode_metrics(b"", labels=labels)


# ------------------------------------------------------------------------------------------- batch


def test_batch_concatenates_and_indexes():
    payloads = [every_kind_payload(), b"", CAPTURE_PAYLOADS[0][1], kafka_payload(4000)]
    t = _otlp.decode_metrics_batch(payloads)
    assert t.column_names == list(otlp_pb.COLUMNS) + ["payload_index"]
    assert t.schema.field("payload_index").type == pa.int32()
    singles = [_otlp.decode_metrics(p) for p in payloads]
    assert t.drop_columns(["payload_index"]).equals(pa.concat_tables(singles))
    assert t.column("payload_index").to_pylist() == [i for i, s in enumerate(singles) for _ in range(s.num_rows)]
    t.validate(full=True)


def test_batch_labels_per_payload():
    payloads = [every_kind_payload(), CAPTURE_PAYLOADS[0][1], every_kind_payload()]
    labels = [{"broker": "a", "n": 1}, None, {"broker": 7, "extra": "z"}]
    t = _otlp.decode_metrics_batch(payloads, labels=labels)
    assert t.column_names[-4:] == ["payload_index", "broker", "n", "extra"]
    assert t.schema.field("broker").type == pa.string()  # mixed str/int → string
    assert t.schema.field("n").type == pa.int64()
    by_payload = {}
    for row in t.select(["payload_index", "broker", "n", "extra"]).to_pylist():
        by_payload.setdefault(row["payload_index"], set()).add((row["broker"], row["n"], row["extra"]))
    assert by_payload == {0: {("a", 1, None)}, 1: {(None, None, None)}, 2: {("7", None, "z")}}
    same_for_all = _otlp.decode_metrics_batch(payloads, labels={"k": "v"})
    assert set(same_for_all.column("k").to_pylist()) == {"v"}
    with pytest.raises(ValueError):
        _otlp.decode_metrics_batch(payloads, labels=labels[:2])
    with pytest.raises(ValueError):
        _otlp.decode_metrics_batch(payloads, labels={"payload_index": 1})


def test_batch_errors_raise_and_collect():
    good = every_kind_payload()
    bad = good[:-3]
    assert not upb_accepts(bad)
    with pytest.raises(CorruptPayloadError, match="payload 1"):
        _otlp.decode_metrics_batch([good, bad, good])
    t, errors = _otlp.decode_metrics_batch(
        [good, bad, None, good, b"\xff"], errors="collect", labels=[{"i": i} for i in range(5)]
    )
    assert [(i, code) for i, code, _ in errors] == [
        (1, kip714.ErrorCode.INVALID_RECORD),
        (2, kip714.ErrorCode.INVALID_RECORD),
        (4, kip714.ErrorCode.INVALID_RECORD),
    ]
    assert all(isinstance(m, str) and m for _, _, m in errors)
    single = _otlp.decode_metrics(good)
    assert t.num_rows == 2 * single.num_rows
    assert set(t.column("payload_index").to_pylist()) == {0, 3}
    assert set(t.column("i").to_pylist()) == {0, 3}
    assert t.slice(single.num_rows).drop_columns(["payload_index", "i"]).equals(single)
    t.validate(full=True)
    t2, errors2 = _otlp.decode_metrics_batch([], errors="collect")
    assert t2.num_rows == 0 and errors2 == []
    with pytest.raises(ValueError):
        _otlp.decode_metrics_batch([good], errors="ignore")


def test_batch_collect_agrees_with_upb_on_mutations():
    rnd = random.Random(99)
    payloads = [mutate(rnd, HOSTILE_BASES[i % 3]) for i in range(200)]
    t, errors = _otlp.decode_metrics_batch(payloads, errors="collect")
    bad = {i for i, _, _ in errors}
    assert bad == {
        i
        for i, p in enumerate(payloads)
        if not upb_accepts(p) or any(otlp_pb.exceeds_int64(r) for r in otlp_pb.flatten(p))
    }
    expected = [r for i, p in enumerate(payloads) if i not in bad for r in _otlp.decode_metrics(p).to_pylist()]
    assert len(expected) == t.num_rows
    assert same(t.drop_columns(["payload_index"]).to_pylist(), expected)


# --------------------------------------------------------------- unsigned fields and int64 columns

# (point kind, field number) of every unsigned 64-bit scalar, and how it is written
UNSIGNED_SCALARS = [
    (5, 2, "start_time_unix_nano"),
    (5, 3, "time_unix_nano"),
    (9, 2, "start_time_unix_nano"),
    (9, 3, "time_unix_nano"),
    (9, 4, "count"),
    (10, 2, "start_time_unix_nano"),
    (10, 3, "time_unix_nano"),
    (10, 4, "count"),
    (10, 7, "zero_count"),
    (11, 2, "start_time_unix_nano"),
    (11, 3, "time_unix_nano"),
    (11, 4, "count"),
]


def _unsigned_point(kind: int, field: int, v: int) -> bytes:
    point = fx64(field, v)
    if kind == 5:
        point += fx64(4, 0x3FF0000000000000)  # as_double 1.0
    return wrap_point(point, kind=kind)


@pytest.mark.parametrize("kind,field,column", UNSIGNED_SCALARS)
def test_unsigned_scalars_up_to_int64_max_are_exact(kind, field, column):
    for v in (0, 1, 2**32, 2**63 - 1):
        table = check(_unsigned_point(kind, field, v))
        assert table.column(column).to_pylist() == [v]


@pytest.mark.parametrize("kind,field,column", UNSIGNED_SCALARS)
@pytest.mark.parametrize("v", [2**63, 2**63 + 1, 2**64 - 1])
def test_unsigned_scalars_over_int64_are_refused_not_wrapped(kind, field, column, v):
    data = _unsigned_point(kind, field, v)
    assert upb_accepts(data) and otlp_pb.flatten(data)[0][column] == v  # protobuf reads it unsigned
    with pytest.raises(CorruptPayloadError, match=r"2\*\*63 or more") as info:
        _otlp.decode_metrics(data)
    assert info.value.error_code == kip714.ErrorCode.INVALID_RECORD
    assert ("time" in str(info.value)) == column.endswith("time_unix_nano")


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("where", ["histogram", "positive", "negative"])
def test_unsigned_bucket_counts_over_int64_are_refused(where, packed):
    def counts(field, values, fixed):
        if packed:
            body = b"".join(struct.pack("<Q", v) if fixed else varint(v) for v in values)
            return ld(field, body)
        return b"".join(fx64(field, v) if fixed else tag(field, 0) + varint(v) for v in values)

    def payload(values):
        if where == "histogram":
            return wrap_point(counts(6, values, True), kind=9)
        return wrap_point(ld(8 if where == "positive" else 9, counts(2, values, False)), kind=10)

    column = {"histogram": "bucket_counts"}.get(where, f"{where}_bucket_counts")
    ok = [0, 5, 2**63 - 1]
    assert check(payload(ok)).column(column).to_pylist() == [ok]
    for bad in ([2**63], [1, 2, 2**64 - 1], [2**63 + 7, 0]):
        assert check(payload(bad)) is None
        with pytest.raises(CorruptPayloadError, match="bucket count"):
            _otlp.decode_metrics(payload(bad))


def test_unsigned_check_applies_to_the_last_value():
    # a non-repeated scalar seen twice keeps the last value: only the final value must fit
    later_good = wrap_point(fx64(3, 2**64 - 1) + fx64(3, 12345) + fx64(4, 0), kind=5)
    assert check(later_good).column("time_unix_nano").to_pylist() == [12345]
    later_bad = wrap_point(fx64(3, 12345) + fx64(3, 2**63) + fx64(4, 0), kind=5)
    assert check(later_bad) is None


def test_unsigned_refusal_in_a_batch_is_one_payload_error():
    good = every_kind_payload()
    bad = _unsigned_point(11, 4, 2**64 - 1)
    t, errors = _otlp.decode_metrics_batch([good, bad, good], errors="collect")
    assert [(i, code) for i, code, _ in errors] == [(1, kip714.ErrorCode.INVALID_RECORD)]
    assert "2**63" in errors[0][2]
    assert t.num_rows == 2 * _otlp.decode_metrics(good).num_rows
    assert all(v is None or v >= 0 for v in t.column("count").to_pylist())


# ------------------------------------------------------------------------- inputs, threads, limits


def test_buffer_types():
    data = every_kind_payload()
    want = _otlp.decode_metrics(data)
    for buf in (bytearray(data), memoryview(data), memoryview(bytearray(data)), memoryview(b"xx" + data)[2:]):
        assert _otlp.decode_metrics(buf).equals(want)
    with pytest.raises(TypeError):
        _otlp.decode_metrics(None)
    with pytest.raises(TypeError):
        _otlp.decode_metrics("text")


def test_push_telemetry_metrics_view_decodes():
    """body.metrics (a zero-copy view of the frame) goes straight in for uncompressed pushes."""
    for name, _ in CAPTURE_PAYLOADS:
        if "_none" in name:
            with open(os.path.join(CAPTURES, name), "rb") as f:
                frames, _ = kip714.split_frames(f.read())
            body = kip714.decode_request(frames[0]).body
            assert _otlp.decode_metrics(body.metrics).equals(_otlp.decode_metrics(bytes(body.metrics)))


def test_threads_share_nothing():
    data = kafka_payload(200_000, seed=3)  # above the GIL-release threshold
    want = _otlp.decode_metrics(data)
    results = []

    def work():
        for _ in range(5):
            results.append(_otlp.decode_metrics(data).equals(want))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == [True] * 20


def test_row_limit():
    data = wrap_metric(ld(1, b"m") + ld(5, ld(1, b"") * 5))
    assert _otlp.decode_metrics(data, max_rows=5).num_rows == 5
    with pytest.raises(CorruptPayloadError, match="max_rows"):
        _otlp.decode_metrics(data, max_rows=4)
    t, errors = _otlp.decode_metrics_batch([data, data[:0]], max_rows=4, errors="collect")
    assert [i for i, _, _ in errors] == [0] and t.num_rows == 0
    with pytest.raises(ValueError):
        _otlp.decode_metrics(data, max_rows=_otlp.MAX_ROWS + 1)
    assert _otlp.MAX_ROWS == 10_000_000


def test_amplification_limit():
    """A big resource attribute repeated on many points is refused before anything is built."""
    resource = ld(1, attr(b"k", s_av(b"v" * 10_000)))
    data = wrap_metric(ld(1, b"m") + ld(5, ld(1, b"") * 1000), resource=resource)
    assert _otlp.decode_metrics(data).num_rows == 1000
    with pytest.raises(CorruptPayloadError, match="too large"):
        _otlp.decode_metrics(data, max_amplified_bytes=1_000_000)
    long_name = wrap_metric(ld(1, b"n" * 100_000) + ld(5, ld(1, b"") * 100))
    with pytest.raises(CorruptPayloadError, match="too large"):
        _otlp.decode_metrics(long_name, max_amplified_bytes=1_000_000)
    assert _otlp.decode_metrics(long_name).num_rows == 100


def test_large_realistic_payload():
    data = kafka_payload(1_000_000, seed=11)
    t = _otlp.decode_metrics(data)
    assert t.num_rows > 5000
    ref = reference(data)
    got = t.to_pylist()
    for i in range(0, len(ref), 97):
        g = dict(got[i], attributes=dict(got[i]["attributes"]), resource=dict(got[i]["resource"]))
        assert same(g, ref[i])
