"""What ``kip714 proxy`` reads and changes in the Kafka messages it forwards.

Responses that name broker addresses are rewritten to the proxy's listeners: Metadata (v0–v13),
FindCoordinator (v0–v6, the batched ``Coordinators`` of v4+ included) and DescribeCluster (v0–v2).
Each rewrite parses the response only as far as its last address and *splices*: every byte other than a
host string and its port is copied unchanged (topics, partitions, tagged fields, fields a newer version
adds after the broker list), so a rewritten response differs from the upstream's in the addresses alone.
An address that cannot be mapped (a node id outside the proxy's port range, controllers in a
DescribeCluster answer) raises :class:`RewriteError`: the proxy must never forward a real address.

Also here: the ApiVersions answer the proxy gives (versions capped to what it parses, APIs that name
addresses it cannot rewrite removed, 71/72 added when it answers telemetry itself), the ``acks`` of a
Produce request (acks=0 has no response) and the user name a SASL PLAIN or SCRAM client authenticates as.

Hand-written rather than generated: these are a handful of fixed field layouts (from Kafka's message
definitions, ``clients/src/main/resources/common/message/*.json``) read on cold paths, and splicing needs
byte offsets, which no message library exposes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Literal, overload

from .._enums import ApiKey, ErrorCode
from .._protocol import ApiVersion, decode_response, encode_response
from ..errors import MalformedFrameError, RewriteError

__all__ = [
    "RewriteError",
    "MAX_VERSIONS",
    "REMOVED_APIS",
    "rewrite_metadata",
    "rewrite_find_coordinator",
    "rewrite_describe_cluster",
    "rewrite_api_versions",
    "produce_acks",
    "sasl_mechanism",
    "sasl_user",
    "sasl_authenticate_error",
    "Advertise",
]

#: ``advertise(node_id, upstream_host, upstream_port) -> (host, port)``: the proxy listener of a node.
Advertise = Callable[[int, str, int], "tuple[str, int]"]
#: The bytes a message is read from: a frame, or a view of one (the proxy passes ``memoryview(frame)[4:]``).
_Bytes = bytes | bytearray | memoryview

#: The newest version of each API the proxy reads or rewrites (its ApiVersions answer caps them here).
#: Produce stops at v9 and Fetch at v15: from Produce v10 / Fetch v16 on (KIP-951) a broker may put the
#: leaders' addresses (``NodeEndpoints``) in the answer, and rewriting those would mean parsing every
#: produce and fetch response.
MAX_VERSIONS = {
    int(ApiKey.PRODUCE): 9,
    int(ApiKey.FETCH): 15,
    int(ApiKey.METADATA): 13,
    int(ApiKey.FIND_COORDINATOR): 6,
    int(ApiKey.SASL_HANDSHAKE): 1,
    int(ApiKey.API_VERSIONS): 4,
    int(ApiKey.SASL_AUTHENTICATE): 2,
    int(ApiKey.DESCRIBE_CLUSTER): 2,
}
#: APIs whose answers name broker or controller addresses the proxy does not rewrite: never advertised,
#: and a request for one closes the connection.
REMOVED_APIS = frozenset({int(ApiKey.DESCRIBE_QUORUM), int(ApiKey.SHARE_FETCH), int(ApiKey.SHARE_ACKNOWLEDGE)})

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class _Short(Exception):
    """Not enough bytes yet (request heads arrive in pieces). Private control flow, not an error: raised by
    :class:`_Reader` and caught in this module, so it is not a :class:`~kip714.errors.Kip714Error`."""


class _Reader:
    __slots__ = ("buf", "end", "pos", "short")

    def __init__(self, buf: _Bytes, pos: int = 0, end: int | None = None, short: bool = False) -> None:
        self.buf, self.pos, self.end = buf, pos, len(buf) if end is None else end
        self.short = short  # running out raises _Short (more bytes will come) instead of MalformedFrameError

    def need(self, n: int) -> int:
        p = self.pos
        if n < 0 or p + n > self.end:
            if self.short and n >= 0:
                raise _Short
            raise MalformedFrameError(f"truncated message: {n} bytes needed at offset {p}, {self.end - p} left")
        self.pos = p + n
        return p

    def i8(self) -> int:
        return int.from_bytes(self.buf[self.need(1) : self.pos], "big", signed=True)

    def i16(self) -> int:
        value: int = _I16.unpack_from(self.buf, self.need(2))[0]
        return value

    def i32(self) -> int:
        value: int = _I32.unpack_from(self.buf, self.need(4))[0]
        return value

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            b = self.buf[self.need(1)]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value & 0xFFFFFFFF  # a 5th byte's bits 4-6 fall out of Java's int, as in Kafka
            shift += 7
            if shift > 28:
                raise MalformedFrameError("varint longer than 5 bytes")

    def length(self, flexible: bool) -> int:
        """A string/bytes/array length: -1 for null."""
        return self.uvarint() - 1 if flexible else self.i16()

    @overload
    def string(self, flexible: bool, nullable: Literal[False] = False) -> str: ...
    @overload
    def string(self, flexible: bool, nullable: bool) -> str | None: ...
    def string(self, flexible: bool, nullable: bool = False) -> str | None:
        n = self.length(flexible)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise MalformedFrameError(f"bad string length {n}")
        start = self.need(n)
        return bytes(self.buf[start : self.pos]).decode("utf-8", "replace")

    def array(self, flexible: bool) -> int:
        n = self.uvarint() - 1 if flexible else self.i32()
        if n < 0:
            raise MalformedFrameError(f"bad array length {n}")
        return n

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.need(self.uvarint())


def _string(value: str, flexible: bool) -> bytes:
    raw = value.encode()
    if flexible:
        n = len(raw) + 1
        out = bytearray()
        while n > 0x7F:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)
        return bytes(out) + raw
    return _I16.pack(len(raw)) + raw


class _Splice:
    """Copies ``frame`` and replaces (host, port) spans; returns a size-prefixed frame."""

    __slots__ = ("advertise", "flexible", "frame", "last", "parts")

    def __init__(self, frame: _Bytes, advertise: Advertise, flexible: bool) -> None:
        self.frame, self.last = frame, 0
        self.parts: list[_Bytes] = []
        self.advertise, self.flexible = advertise, flexible

    def address(self, r: _Reader, node_id: int) -> None:
        """Read host and port at ``r`` (for ``node_id``) and replace them with the proxy's listener."""
        start = r.pos
        host = r.string(self.flexible)
        port = r.i32()
        if node_id < 0:
            # Kafka's "no node" (-1, "", -1) names no address; anything else has no listener to map to
            if host:
                raise RewriteError(f"an address {host}:{port} without a node id cannot be rewritten")
            return
        new_host, new_port = self.advertise(node_id, host, port)
        self.parts += (self.frame[self.last : start], _string(new_host, self.flexible), _I32.pack(new_port))
        self.last = r.pos

    def done(self) -> bytes:
        frame = self.frame
        if not self.parts:
            return _I32.pack(len(frame)) + frame
        self.parts.append(frame[self.last :])
        body = b"".join(self.parts)
        return _I32.pack(len(body)) + body


def rewrite_metadata(frame: _Bytes, version: int, advertise: Advertise) -> bytes:
    """A Metadata response (``frame``: without its size prefix, header included) with every broker's host
    and port replaced by ``advertise(node_id, host, port)``; returned size-prefixed."""
    if not 0 <= version <= MAX_VERSIONS[int(ApiKey.METADATA)]:
        raise RewriteError(f"Metadata v{version} is not rewritten by this proxy")
    flexible = version >= 9
    r = _Reader(frame)
    r.need(4)  # correlation id
    if flexible:
        r.tags()  # response header v1
    if version >= 3:
        r.need(4)  # throttle_time_ms
    s = _Splice(frame, advertise, flexible)
    for _ in range(r.array(flexible)):
        node_id = r.i32()
        s.address(r, node_id)
        if version >= 1:
            r.string(flexible, nullable=True)  # rack
        if flexible:
            r.tags()
    return s.done()


def rewrite_find_coordinator(frame: _Bytes, version: int, advertise: Advertise) -> bytes:
    """A FindCoordinator response (v0–v6) with the coordinator addresses rewritten; size-prefixed."""
    if not 0 <= version <= MAX_VERSIONS[int(ApiKey.FIND_COORDINATOR)]:
        raise RewriteError(f"FindCoordinator v{version} is not rewritten by this proxy")
    flexible = version >= 3
    r = _Reader(frame)
    r.need(4)
    if flexible:
        r.tags()
    if version >= 1:
        r.need(4)  # throttle_time_ms
    s = _Splice(frame, advertise, flexible)
    if version <= 3:
        r.i16()  # error_code
        if version >= 1:
            r.string(flexible, nullable=True)  # error_message
        s.address(r, r.i32())
    else:
        for _ in range(r.array(True)):
            r.string(True)  # key
            node_id = r.i32()
            s.address(r, node_id)
            r.i16()  # error_code
            r.string(True, nullable=True)  # error_message
            r.tags()
    return s.done()


def rewrite_describe_cluster(frame: _Bytes, version: int, advertise: Advertise) -> bytes:
    """A DescribeCluster response (v0–v2) with the brokers' addresses rewritten; size-prefixed. An answer
    describing controllers (EndpointType 2) names addresses the proxy has no listener for: RewriteError."""
    if not 0 <= version <= MAX_VERSIONS[int(ApiKey.DESCRIBE_CLUSTER)]:
        raise RewriteError(f"DescribeCluster v{version} is not rewritten by this proxy")
    r = _Reader(frame)
    r.need(4)
    r.tags()
    r.need(4)  # throttle_time_ms
    r.i16()  # error_code
    r.string(True, nullable=True)  # error_message
    endpoint_type = r.i8() if version >= 1 else 1
    r.string(True)  # cluster_id
    r.i32()  # controller_id
    s = _Splice(frame, advertise, True)
    n = r.array(True)
    if n and endpoint_type != 1:
        raise RewriteError(
            f"DescribeCluster answer for endpoint type {endpoint_type} (controllers) "
            "names addresses the proxy does not serve"
        )
    for _ in range(n):
        node_id = r.i32()
        s.address(r, node_id)
        r.string(True, nullable=True)  # rack
        if version >= 2:
            r.need(1)  # is_fenced
        r.tags()
    return s.done()


#: api key -> rewrite function, for the responses that name addresses.
REWRITERS = {
    int(ApiKey.METADATA): rewrite_metadata,
    int(ApiKey.FIND_COORDINATOR): rewrite_find_coordinator,
    int(ApiKey.DESCRIBE_CLUSTER): rewrite_describe_cluster,
}


def api_versions_error(frame: _Bytes) -> int:
    """The error code of an ApiVersions response (``frame`` without size prefix): the first field of every
    version, right after the correlation id (ApiVersions responses always use header v0)."""
    if len(frame) < 6:
        return int(ErrorCode.UNKNOWN_SERVER_ERROR)
    code: int = _I16.unpack_from(frame, 4)[0]
    return code


def upstream_api_versions(frame: _Bytes, version: int) -> dict[int, tuple[int, int]]:
    """api key -> (min, max) from an ApiVersions response without error."""
    body = decode_response(frame, int(ApiKey.API_VERSIONS), version).body
    return {a.api_key: (a.min_version, a.max_version) for a in body.api_keys}


def rewrite_api_versions(
    frame: _Bytes,
    version: int,
    add: tuple[tuple[int, int, int], ...] = (),
    caps: dict[int, int] | None = None,
    out_version: int | None = None,
    correlation_id: int | None = None,
) -> bytes:
    """The ApiVersions answer the proxy gives: the upstream's (``frame``, an answer to ``version``,
    without size prefix) with versions capped to ``caps`` (default :data:`MAX_VERSIONS`), the APIs in
    :data:`REMOVED_APIS` left out, and ``add`` entries (api_key, min, max) added when missing. Encoded at
    ``out_version`` (default ``version``) for ``correlation_id`` (default the frame's); size-prefixed."""
    resp = decode_response(frame, int(ApiKey.API_VERSIONS), version)
    body = resp.body
    caps = MAX_VERSIONS if caps is None else caps
    keys = []
    for a in body.api_keys:
        key = a.api_key
        if key in REMOVED_APIS:
            continue
        cap = caps.get(key)
        if cap is not None and a.max_version > cap:
            if a.min_version > cap:
                continue  # nothing the proxy can read is left
            a = ApiVersion(key, a.min_version, cap, a.unknown_tagged_fields)
        keys.append(a)
    have = {a.api_key for a in keys}
    keys.extend(ApiVersion(k, lo, hi) for k, lo, hi in add if k not in have)
    body.api_keys = keys
    corr = resp.header.correlation_id if correlation_id is None else correlation_id
    return encode_response(corr, body, version if out_version is None else out_version)


# ------------------------------------------------------------------------------------------ request heads


def _skip_request_header(r: _Reader, flexible: bool) -> None:
    r.need(8)  # api_key, api_version, correlation_id
    n = r.i16()  # client_id (nullable, never compact)
    if n > 0:
        r.need(n)
    if flexible:
        r.tags()


def produce_acks(buf: _Bytes, start: int, end: int, version: int) -> int | None:
    """The ``acks`` of a Produce request whose frame (size prefix included) starts at ``buf[start]``, with
    bytes available up to ``end``; ``None`` when more bytes are needed to reach it."""
    r = _Reader(buf, start + 4, end, short=True)
    try:
        flexible = version >= 9
        _skip_request_header(r, flexible)
        if version >= 3:
            n = r.length(flexible)  # transactional_id
            if n > 0:
                r.need(n)
        return r.i16()
    except _Short:
        return None


def sasl_mechanism(frame: _Bytes) -> str:
    """The mechanism a SaslHandshake request (v0/v1, frame without size prefix) names."""
    r = _Reader(frame)
    _skip_request_header(r, False)
    return r.string(False) or ""


def _scram_name(value: str) -> str:
    return value.replace("=2C", ",").replace("=3D", "=")


def sasl_user(frame: _Bytes, version: int, mechanism: str) -> str | None:
    """The user name a SaslAuthenticate request (frame without size prefix) authenticates as, for PLAIN
    (``authzid NUL authcid NUL passwd``: the authcid, Kafka's principal name) and SCRAM-SHA-* (the
    ``n=`` of the client-first message; later messages carry none). ``None`` for other mechanisms."""
    r = _Reader(frame)
    _skip_request_header(r, version >= 2)
    n = r.uvarint() - 1 if version >= 2 else r.i32()
    if n < 0:
        return None
    start = r.need(n)
    auth = bytes(frame[start : r.pos])
    mech = mechanism.upper()
    if mech == "PLAIN":
        parts = auth.split(b"\0")
        if len(parts) != 3 or not parts[1]:
            return None
        return parts[1].decode("utf-8", "replace")
    if mech.startswith("SCRAM-"):
        text = auth.decode("utf-8", "replace")
        # client-first-message: gs2-header ("n,," / "y,," / "p=..,", optional "a=authzid") then attributes
        pieces = text.split(",", 2)
        if len(pieces) < 3 or (pieces[0] not in ("n", "y") and not pieces[0].startswith("p=")):
            return None
        for attr in pieces[2].split(","):
            if attr.startswith("n="):
                return _scram_name(attr[2:])
        return None
    return None


def sasl_authenticate_error(frame: _Bytes, version: int) -> int:
    """The error code of a SaslAuthenticate response (frame without size prefix)."""
    r = _Reader(frame)
    r.need(4)
    if version >= 2:
        r.tags()
    return r.i16()
