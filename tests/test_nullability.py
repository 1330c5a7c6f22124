"""Null on the wire, field by field, as Apache Kafka's generated parsers read it.

Kafka's message parsers are generated from the JSON message definitions
(clients/src/main/resources/common/message/*.json) by ``MessageDataGenerator.generateVariableLengthReader``:
a string, bytes or array field reads its length (int16 for classic strings, int32 for classic bytes and
arrays, ``readUnsignedVarint() - 1`` in Java ``int`` arithmetic for compact ones) and, when the length is
*negative*, either stores null (the field is nullable at that version, ``nullableVersions``) or throws
``non-nullable field <name> was serialized as null``. The broker wraps that in an InvalidRequestException
("Error getting request for apiKey ...") and closes the connection (SocketServer.processChannelException).
kip714 raises :class:`kip714.errors.MalformedFrameError` (INVALID_REQUEST) with the same text and ``kip714 serve``
closes the connection.

Audit of every string, bytes and array field kip714 decodes (both directions where kip714 decodes them;
RequestHeader is v1/v2, the versions a request with a client id uses). "Nullable" is Kafka's
``nullableVersions`` intersected with the versions the field exists in. The test below derives the same
table from kio's schema classes (generated from Kafka's definitions, an independent source) and fails if
the two disagree; every row is then exercised by injecting a null at every version listed.

| Message                           | Field                              | Type   | Versions | Nullable  |
|-----------------------------------|------------------------------------|--------|----------|-----------|
| RequestHeader                     | client_id                          | string | 1-2      | 1-2       |
| ApiVersionsRequest                | client_software_name               | string | 3-4      | none      |
| ApiVersionsRequest                | client_software_version            | string | 3-4      | none      |
| ApiVersionsResponse               | api_keys                           | array  | 0-4      | none      |
| ApiVersionsResponse               | supported_features (tag 0)         | array  | 3-4      | none      |
| ApiVersionsResponse               | supported_features.name            | string | 3-4      | none      |
| ApiVersionsResponse               | finalized_features (tag 2)         | array  | 3-4      | none      |
| ApiVersionsResponse               | finalized_features.name            | string | 3-4      | none      |
| MetadataRequest                   | topics                             | array  | 0-13     | 1-13      |
| MetadataRequest                   | topics.name                        | string | 0-13     | 10-13     |
| MetadataResponse                  | brokers                            | array  | 0-13     | none      |
| MetadataResponse                  | brokers.host                       | string | 0-13     | none      |
| MetadataResponse                  | brokers.rack                       | string | 1-13     | 1-13      |
| MetadataResponse                  | cluster_id                         | string | 2-13     | 2-13      |
| MetadataResponse                  | topics                             | array  | 0-13     | none      |
| MetadataResponse                  | topics.name                        | string | 0-13     | 12-13     |
| MetadataResponse                  | topics.partitions                  | array  | 0-13     | none      |
| MetadataResponse                  | topics.partitions.replica_nodes    | array  | 0-13     | none      |
| MetadataResponse                  | topics.partitions.isr_nodes        | array  | 0-13     | none      |
| MetadataResponse                  | topics.partitions.offline_replicas | array  | 5-13     | none      |
| GetTelemetrySubscriptionsResponse | accepted_compression_types         | array  | 0        | none      |
| GetTelemetrySubscriptionsResponse | requested_metrics                  | array  | 0        | none      |
| GetTelemetrySubscriptionsResponse | requested_metrics[] (elements)     | string | 0        | none      |
| PushTelemetryRequest              | metrics                            | bytes  | 0        | none      |

GetTelemetrySubscriptionsRequest, PushTelemetryResponse and ResponseHeader have no string, bytes or array
fields (UUIDs, integers, booleans and tagged-field sections cannot be null).

Before this audit the only field kip714 got wrong was PushTelemetryRequest.metrics (null decoded to
``metrics=None``); the same reading of the generator also corrected what counts as null: *any* negative
length (a classic string length of -2, a compact length varint of 2**32 - 1) is null in Kafka, not a
malformed frame, and a compact string longer than 0x7fff bytes is refused ("string field <name> had
invalid length <n>").
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import random
import re
import socket
import struct
import time
import typing
import uuid

import pytest

import kip714
from kip714.errors import MalformedFrameError

kio_serial = pytest.importorskip("kio.serial")
from kio.schema.errors import ErrorCode as KioErrorCode  # noqa: E402

# kip714 message class -> (kio package, kind, versions)
MESSAGES = {
    "ApiVersionsRequest": ("api_versions", "request", range(5)),
    "ApiVersionsResponse": ("api_versions", "response", range(5)),
    "MetadataRequest": ("metadata", "request", range(14)),
    "MetadataResponse": ("metadata", "response", range(14)),
    "GetTelemetrySubscriptionsRequest": ("get_telemetry_subscriptions", "request", range(1)),
    "GetTelemetrySubscriptionsResponse": ("get_telemetry_subscriptions", "response", range(1)),
    "PushTelemetryRequest": ("push_telemetry", "request", range(1)),
    "PushTelemetryResponse": ("push_telemetry", "response", range(1)),
}
FLEXIBLE_FROM = {"ApiVersions": 3, "Metadata": 9}
TAGGED = {"supported_features": 0, "finalized_features": 2}  # ApiVersionsResponse tagged arrays

# Kafka's camelCase field names (what its exception text carries) for kip714's snake_case ones
CAMEL = {"requested_metrics[]": "requestedMetrics element"}


def camel(path: str) -> str:
    last = path.split(".")[-1]
    if last in CAMEL or path in CAMEL:
        return CAMEL.get(path, CAMEL.get(last))
    head, *rest = last.split("_")
    return head + "".join(w.capitalize() for w in rest)


def kio_cls(name: str, version: int):
    if name == "RequestHeader":
        return importlib.import_module(f"kio.schema.request_header.v{version}.header").RequestHeader
    package, kind, _ = MESSAGES[name]
    return getattr(importlib.import_module(f"kio.schema.{package}.v{version}.{kind}"), name)


def _unwrap(hint):
    args = typing.get_args(hint)
    nullable = type(None) in args
    inner = next((a for a in args if a is not type(None)), hint) if nullable else hint
    return inner, nullable


def kio_fields(cls, prefix=""):
    """(path, type, nullable) of every string/bytes/array field of a kio schema class, recursively."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        inner, nullable = _unwrap(hints[f.name])
        kafka_type = f.metadata.get("kafka_type")
        if typing.get_origin(inner) is tuple:
            element = typing.get_args(inner)[0]
            yield prefix + f.name, "array", nullable
            if dataclasses.is_dataclass(element):
                yield from kio_fields(element, prefix + f.name + ".")
            elif kafka_type == "string":
                yield prefix + f.name + "[]", "string", False
        elif kafka_type in ("string", "bytes"):
            yield prefix + f.name, kafka_type, nullable


def _versions(text: str) -> set[int]:
    if text == "none":
        return set()
    lo, _, hi = text.partition("-")
    return set(range(int(lo), int(hi or lo) + 1))


def documented_audit():
    rows = []
    for line in __doc__.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or cells[0] in ("Message",) or cells[0].startswith("-"):
            continue
        message, field, ftype, present, nullable = cells
        field = field.split(" ")[0]
        rows.append((message, field, ftype, _versions(present), _versions(nullable)))
    return rows


AUDIT = documented_audit()


def test_the_documented_audit_is_what_kafkas_definitions_say():
    derived: dict[tuple[str, str, str], tuple[set, set]] = {}
    for name, versions in [("RequestHeader", range(1, 3))] + [(n, m[2]) for n, m in MESSAGES.items()]:
        for v in versions:
            for path, ftype, nullable in kio_fields(kio_cls(name, v)):
                present, nullable_in = derived.setdefault((name, path, ftype), (set(), set()))
                present.add(v)
                if nullable:
                    nullable_in.add(v)
    documented = {(m, f, t): (p, n) for m, f, t, p, n in AUDIT}
    assert len(documented) == len(AUDIT) == 24
    assert documented == derived


# ------------------------------------------------------------------------ frames with a null injected


def _fill(cls, path: list[str], value):
    """A kio instance of ``cls`` with every field set to something small and valid; the field at
    ``path`` (and the structs leading to it, one element each) set to ``value``."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        inner, _nullable = _unwrap(hints[f.name])
        kafka_type = f.metadata.get("kafka_type")
        if path and f.name == path[0]:
            if len(path) == 1:
                kwargs[f.name] = value
            else:
                element = typing.get_args(inner)[0]
                kwargs[f.name] = (_fill(element, path[1:], value),)
            continue
        if typing.get_origin(inner) is tuple:
            kwargs[f.name] = ()
        elif kafka_type == "uuid":
            kwargs[f.name] = None
        elif kafka_type in ("string",):
            kwargs[f.name] = "s"
        elif kafka_type == "bytes":
            kwargs[f.name] = b"b"
        elif kafka_type == "bool":
            kwargs[f.name] = False
        elif kafka_type == "error_code":
            kwargs[f.name] = KioErrorCode.none
        elif kafka_type and kafka_type.startswith("timedelta"):
            kwargs[f.name] = datetime.timedelta(0)
        else:
            kwargs[f.name] = inner(0)
    return cls(**kwargs)


def _encode(obj) -> bytes:
    import io

    buf = io.BytesIO()
    kio_serial.entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


def _flexible(name: str, version: int) -> bool:
    for prefix, v in FLEXIBLE_FROM.items():
        if name.startswith(prefix):
            return version >= v
    return True


def _values(ftype: str, path: str):
    """(empty, non-empty) values for a field of that type."""
    if ftype == "string":
        return "", "zz"
    if ftype == "bytes":
        return b"", b"zz"
    return (), None  # arrays: the non-empty value is built by the caller


def null_frame(name: str, path: str, ftype: str, version: int, null: bytes | None = None) -> bytes:
    """The body of ``name`` at ``version`` (encoded by kio) with the field at ``path`` null on the wire.

    The field is located by encoding the message twice, once with the field empty and once non-empty:
    the first differing byte is the last byte of its length prefix."""
    flexible = _flexible(name, version)
    if name == "ApiVersionsResponse" and path.split(".")[0] in TAGGED:
        return _tagged_null_frame(path, version, null)
    cls = kio_cls(name, version)
    if path.endswith("[]"):  # an element of an array of strings
        parts = path[:-2].split(".")
        empty, full = ("",), ("zz",)
        width = 1  # GTS is flexible: compact lengths
        ftype = "string"
    else:
        parts = path.split(".")
        empty, full = _values(ftype, path)
        if ftype == "array":
            element = _element_type(cls, parts)
            full = (_fill(element, [], None),) if dataclasses.is_dataclass(element) else (element(1),)
        width = 1 if flexible else (2 if ftype == "string" else 4)
    e_empty, e_full = _encode(_fill(cls, parts, empty)), _encode(_fill(cls, parts, full))
    cp = next(i for i, (a, b) in enumerate(zip(e_empty, e_full)) if a != b)
    pos = cp - (width - 1)
    expected_empty = b"\x01" if width == 1 else bytes(width)
    if path.endswith("[]"):
        # the difference is in the element's own length (the array count is 2 in both)
        expected_empty = b"\x01"
    assert e_empty[pos : pos + width] == expected_empty, (name, path, version, e_empty.hex(), pos)
    if null is None:
        null = b"\x00" if width == 1 else b"\xff" * width
    return e_empty[:pos] + null + e_empty[pos + width :]


def _element_type(cls, parts):
    for part in parts:
        hint, _ = _unwrap(typing.get_type_hints(cls)[part])
        cls = typing.get_args(hint)[0] if typing.get_origin(hint) is tuple else hint
    return cls


def _uv(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _tagged_null_frame(path: str, version: int, null: bytes | None) -> bytes:
    """ApiVersionsResponse v3+ with its tag 0 or 2 array (or the name in its one element) null. Tagged
    fields are written by hand: kio leaves an empty tagged array out altogether."""
    null = null or b"\x00"
    array, _, member = path.partition(".")
    if member:  # one element: name (null), min/max (int16 each), no tagged fields
        content = b"\x02" + null + struct.pack(">hh", 0, 1) + b"\x00"
    else:
        content = null
    tags = b"\x01" + _uv(TAGGED[array]) + _uv(len(content)) + content
    return struct.pack(">h", 0) + b"\x01" + struct.pack(">i", 0) + tags  # error, no api keys, throttle


def _decode(name: str, body: bytes, version: int):
    return getattr(kip714.wire, name).decode(body, version)


def _get(msg, path: str):
    """The decoded value at a dotted path (through the first element of each array)."""
    value = msg
    for part in path.rstrip("[]").split("."):
        if isinstance(value, list):
            value = value[0]
        value = getattr(value, part)
    if path.endswith("[]"):
        value = value[0]
    return value


NULL_CASES = [
    (m, f, t, v, v in nullable) for m, f, t, present, nullable in AUDIT if m != "RequestHeader" for v in sorted(present)
]


@pytest.mark.parametrize(
    "name,path,ftype,version,nullable", NULL_CASES, ids=[f"{c[0]}-v{c[3]}-{c[1]}" for c in NULL_CASES]
)
def test_null_in_every_field_at_every_version(name, path, ftype, version, nullable):
    body = null_frame(name, path, ftype, version)
    if nullable:
        assert _get(_decode(name, body, version), path) is None
    else:
        with pytest.raises(
            MalformedFrameError, match=f"^non-nullable field {re.escape(camel(path))} was serialized as null"
        ) as e:
            _decode(name, body, version)
        assert e.value.error_code == kip714.ErrorCode.INVALID_REQUEST


def _other_negative(name: str, ftype: str, version: int, path: str) -> bytes:
    """A negative length other than -1: Kafka's readers take it as null too."""
    if _flexible(name, version) or (name == "ApiVersionsResponse" and path.split(".")[0] in TAGGED):
        return _uv(0xFFFFFFFF)  # readUnsignedVarint() - 1 == -2 in Java int arithmetic
    return struct.pack(">h", -2) if ftype == "string" else struct.pack(">i", -7)


OTHER_NEGATIVE_CASES = [c for c in NULL_CASES if c[3] in (0, 1, 9, 12, 13, 3)]


@pytest.mark.parametrize(
    "name,path,ftype,version,nullable",
    OTHER_NEGATIVE_CASES,
    ids=[f"{c[0]}-v{c[3]}-{c[1]}" for c in OTHER_NEGATIVE_CASES],
)
def test_any_negative_length_is_null_as_in_kafka(name, path, ftype, version, nullable):
    body = null_frame(name, path, ftype, version, null=_other_negative(name, ftype, version, path))
    if nullable:
        assert _get(_decode(name, body, version), path) is None
    else:
        with pytest.raises(MalformedFrameError, match=r"^non-nullable field .* was serialized as null"):
            _decode(name, body, version)


@pytest.mark.parametrize("length", [b"\xff\xff", b"\xff\xfe", b"\x80\x00"])
def test_a_null_client_id_in_the_request_header(length):
    # RequestHeader.ClientId is nullable (1+) and never flexible: any negative int16 is null
    frame = (
        struct.pack(">hhi", 72, 0, 7)
        + length
        + b"\x00"
        + kip714.PushTelemetryRequest(client_instance_id=uuid.uuid4(), metrics=b"x").encode()
    )
    req = kip714.decode_request(frame)
    assert req.client_id is None and req.correlation_id == 7 and bytes(req.body.metrics) == b"x"


def test_null_metrics_message_and_offset():
    body = kip714.PushTelemetryRequest(client_instance_id=uuid.uuid4(), metrics=b"").encode()
    assert body[-2:] == b"\x01\x00"
    with pytest.raises(MalformedFrameError, match=r"^non-nullable field metrics was serialized as null"):
        kip714.PushTelemetryRequest.decode(body[:-2] + b"\x00\x00")
    # a whole request frame, as serve sees it
    frame = struct.pack(">hhih", 72, 0, 1, 1) + b"c\x00" + body[:-2] + b"\x00\x00"
    with pytest.raises(MalformedFrameError, match="metrics"):
        kip714.decode_request(frame)
    with pytest.raises(ValueError, match="metrics"):
        kip714.PushTelemetryRequest(client_instance_id=uuid.uuid4(), metrics=None).encode()


def test_compact_string_longer_than_0x7fff_is_refused_like_kafka():
    name = b"a" * 0x8000
    body = _uv(len(name) + 1) + name + b"\x02v\x00"
    with pytest.raises(MalformedFrameError, match=r"^string field clientSoftwareName had invalid length 32768"):
        kip714.wire.ApiVersionsRequest.decode(body, 3)
    assert (
        kip714.wire.ApiVersionsRequest.decode(_uv(0x8000) + name[:0x7FFF] + b"\x02v\x00", 3).client_software_name
        == "a" * 0x7FFF
    )
    with pytest.raises(ValueError, match="32767"):
        kip714.wire.ApiVersionsRequest("a" * 0x8000, "1").encode(3)


@pytest.mark.integration
def test_serve_closes_the_connection_on_a_null_metrics_push():
    import server_thread

    from kip714 import SubscriptionRegistry, TelemetryBroker
    from kip714.endpoint.server import TelemetryServer

    registry = SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": "1000"})
    srv = server_thread.ServerThread(TelemetryServer(TelemetryBroker(registry), "127.0.0.1", 0))
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
            s.settimeout(5)
            s.sendall(kip714.encode_request(kip714.GetTelemetrySubscriptionsRequest(), 1, "c"))
            got = _read_frame(s)
            resp = kip714.decode_response(got, 71, 0).body
            assert resp.error_code == 0
            good = kip714.PushTelemetryRequest(resp.client_instance_id, resp.subscription_id, False, 0, b"")
            frame = kip714.encode_request(good, 2, "c")
            assert frame[-2:] == b"\x01\x00"
            s.sendall(frame[:-2] + b"\x00\x00")  # the same push with Metrics null
            try:
                assert s.recv(100) == b""  # closed, nothing answered
            except ConnectionResetError:
                pass
        assert srv.call(lambda: srv.server.stats["protocol_errors"]) == 1
        assert srv.call(lambda: dict(srv.server.push_codes)) == {}
    finally:
        srv.stop()


def _read_frame(s) -> bytes:
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        assert chunk, "connection closed"
        head += chunk
    (n,) = struct.unpack(">i", head)
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


# ------------------------------------------------------------------------------- random mutation


def _non_nullable_paths(name: str, version: int):
    return [
        (f, t) for m, f, t, present, nullable in AUDIT if m == name and version in present and version not in nullable
    ]


def _assert_no_null(msg, path: str):
    """No ``None`` anywhere along a non-nullable path of a decoded message (every array element)."""

    def walk(value, parts):
        if not parts:
            assert value is not None
            return
        part = parts[0]
        if part.endswith("[]"):
            items = getattr(value, part[:-2])
            assert items is not None
            for item in items:
                assert item is not None
            return
        child = getattr(value, part)
        if len(parts) == 1:
            assert child is not None, path
            return
        if child is None:
            return  # a nullable parent (checked as its own path when it is not nullable)
        for item in child:
            walk(item, parts[1:])

    walk(
        msg,
        path.replace("[]", "").split(".")
        if not path.endswith("[]")
        else path[:-2].split(".")[:-1] + [path.split(".")[-1]],
    )


def _seed_bodies():
    """Valid bodies of every message at every version (kio-encoded), with every array non-empty."""
    for name, (_, _, versions) in MESSAGES.items():
        for v in versions:
            yield name, v, _encode(_full(kio_cls(name, v)))


def _full(cls):
    hints = typing.get_type_hints(cls)
    kwargs = {}
    base = _fill(cls, [], None)
    for f in dataclasses.fields(cls):
        inner, _ = _unwrap(hints[f.name])
        if typing.get_origin(inner) is tuple:
            element = typing.get_args(inner)[0]
            if dataclasses.is_dataclass(element):
                kwargs[f.name] = (_full(element), _full(element))
            elif f.metadata.get("kafka_type") == "string":
                kwargs[f.name] = ("a", "bc")
            else:
                kwargs[f.name] = (element(1), element(2))
        else:
            kwargs[f.name] = getattr(base, f.name)
    return cls(**kwargs)


def test_random_mutations_never_decode_a_null_into_a_non_nullable_field():
    rng = random.Random(714)
    seeds = [seed for seed in _seed_bodies() if seed[2]]  # ApiVersions v0-2 requests are empty
    decoded = refused = 0
    deadline = time.monotonic() + 20
    for i in range(20000):
        if time.monotonic() > deadline:
            break
        name, version, body = seeds[i % len(seeds)]
        data = bytearray(body)
        for _ in range(rng.randint(1, 3)):
            pos = rng.randrange(len(data))
            op = rng.random()
            if op < 0.4:
                data[pos] = 0  # compact null / zero length
            elif op < 0.6:
                data[pos : pos + 2] = b"\xff\xff"  # classic -1 (string) / start of -1
            elif op < 0.8:
                data[pos] = rng.randrange(256)
            elif op < 0.9:
                del data[pos]
            else:
                data.insert(pos, rng.randrange(256))
        try:
            msg = _decode(name, bytes(data), version)
        except MalformedFrameError:
            refused += 1
            continue
        decoded += 1
        for path, _ in _non_nullable_paths(name, version):
            _assert_no_null(msg, path)
    assert decoded > 500 and refused > 500, (decoded, refused)
