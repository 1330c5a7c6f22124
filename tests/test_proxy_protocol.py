"""The PROXY protocol parser (kip714.endpoint.proxy_protocol) against an independent encoder (the
``proxy-protocol`` package's, with its TLVs), split at every byte; the peers trusted; the drain's schedule."""

from __future__ import annotations

import asyncio
import itertools
import socket
from ipaddress import IPv4Address, IPv6Address

import pytest
from proxyprotocol.result import ProxyResultIPv4, ProxyResultIPv6, ProxyResultLocal, ProxyResultUnix
from proxyprotocol.tlv import ProxyProtocolTLV
from proxyprotocol.v1 import ProxyProtocolV1
from proxyprotocol.v2 import ProxyProtocolV2

from kip714.endpoint.connection import stagger
from kip714.endpoint.proxy_protocol import (
    V1_MAX,
    V2_SIGNATURE,
    ProxyProtocol,
    parse_header,
    parse_networks,
    read_header,
)
from kip714.errors import InvalidConfigError, ProxyProtocolError
from kip714.wire import ApiVersionsRequest, encode_request

KAFKA = encode_request(ApiVersionsRequest(), 7, "after-the-header", 0)  # what follows the header
TLV = ProxyProtocolTLV(authority="kafka.example.com", unique_id=b"\x01" * 16, alpn=b"kafka")
V4 = ProxyResultIPv4((IPv4Address("203.0.113.7"), 51234), (IPv4Address("10.0.0.5"), 9092), protocol=socket.SOCK_STREAM)
V6 = ProxyResultIPv6(
    (IPv6Address("2001:db8::42"), 65535), (IPv6Address("2001:db8::1"), 9092), protocol=socket.SOCK_STREAM, tlv=TLV
)

# (header bytes from the independent encoder, the source kip714 must read: None keeps the socket's)
CASES = {
    "v1-tcp4": (ProxyProtocolV1().pack(V4), ("203.0.113.7", 51234)),
    "v1-tcp6": (ProxyProtocolV1().pack(V6), ("2001:db8::42", 65535)),
    "v1-unknown": (b"PROXY UNKNOWN\r\n", None),
    "v1-unknown-long": (b"PROXY UNKNOWN ffff:f::1 ffff:f::2 65535 65535\r\n", None),
    "v2-tcp4": (ProxyProtocolV2().pack(V4), ("203.0.113.7", 51234)),
    "v2-tcp6-tlvs": (ProxyProtocolV2().pack(V6), ("2001:db8::42", 65535)),
    "v2-local": (ProxyProtocolV2().pack(ProxyResultLocal()), None),
    "v2-unix": (ProxyProtocolV2().pack(ProxyResultUnix("/run/a", "/run/b", protocol=socket.SOCK_STREAM)), None),
    "v2-udp4": (
        ProxyProtocolV2().pack(
            ProxyResultIPv4((IPv4Address("1.2.3.4"), 1), (IPv4Address("5.6.7.8"), 2), protocol=socket.SOCK_DGRAM)
        ),
        None,
    ),
    "v2-inet-unspec": (
        ProxyProtocolV2().pack(ProxyResultIPv4((IPv4Address("1.2.3.4"), 1), (IPv4Address("5.6.7.8"), 2))),
        None,
    ),
    "v2-unspec": (V2_SIGNATURE + b"\x21\x00\x00\x04" + b"\x00" * 4, None),
    "v2-local-with-addresses": (V2_SIGNATURE + b"\x20\x11\x00\x0c" + bytes(range(12)), None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_split_of_a_header_waits_then_reads_it_whole(name):
    header, source = CASES[name]
    data = header + KAFKA
    for cut in range(len(header)):  # every strict prefix is a valid beginning: wait for more
        assert parse_header(data[:cut]) is None, cut
    for end in range(len(header), len(data) + 1):  # whole, with any part of what follows
        got = parse_header(data[:end])
        assert got is not None and got.length == len(header) and got.source == source
        assert got.version == (2 if header.startswith(V2_SIGNATURE) else 1)


def test_the_family_bytes_are_the_encoders():
    assert CASES["v2-udp4"][0][12:14] == b"\x21\x12" and CASES["v2-unix"][0][12:14] == b"\x21\x31"
    assert CASES["v2-tcp6-tlvs"][0][12:14] == b"\x21\x21" and CASES["v2-local"][0][12] == 0x20


def test_the_destination_is_read_too():
    got = parse_header(CASES["v2-tcp6-tlvs"][0])
    assert got is not None and got.destination == ("2001:db8::1", 9092)
    got = parse_header(CASES["v1-tcp4"][0])
    assert got is not None and got.destination == ("10.0.0.5", 9092)


BAD = {
    # no header at all: a Kafka client, TLS, HTTP
    "kafka": (KAFKA, "missing"),
    "tls": (b"\x16\x03\x01\x02\x00\x01", "missing"),
    "http": (b"GET / HTTP/1.1\r\n\r\n", "missing"),
    "near-v2": (V2_SIGNATURE[:7] + b"X", "missing"),
    "near-v1": (b"PROXZ TCP4", "missing"),
    # v1
    "v1-no-space": (b"PROXY\tTCP4 1.2.3.4 5.6.7.8 1 2\r\n", "bad"),
    "v1-udp": (b"PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n", "bad"),
    "v1-lf-alone": (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", "bad"),
    "v1-cr-alone": (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX", "bad"),
    "v1-leading-zero-port": (b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n", "bad"),
    "v1-leading-zero-address": (b"PROXY TCP4 1.2.3.04 5.6.7.8 1 2\r\n", "bad"),
    "v1-port-too-big": (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 65536\r\n", "bad"),
    "v1-v6-in-tcp4": (b"PROXY TCP4 ::1 ::1 1 2\r\n", "bad"),
    "v1-v4-in-tcp6": (b"PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n", "bad"),
    "v1-scope": (b"PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n", "bad"),
    "v1-missing-field": (b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", "bad"),
    "v1-extra-space": (b"PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n", "bad"),
    "v1-not-ascii": (b"PROXY TCP4 1.2.3.\xff 5.6.7.8 1 2\r\n", "bad"),
    "v1-too-long": (b"PROXY UNKNOWN " + b"f" * (V1_MAX - 14), "too_long"),
    # v2
    "v2-version-1": (V2_SIGNATURE + b"\x11\x11\x00\x0c" + bytes(12), "bad"),
    "v2-command-2": (V2_SIGNATURE + b"\x22\x11\x00\x0c" + bytes(12), "bad"),
    "v2-family-4": (V2_SIGNATURE + b"\x21\x41\x00\x0c" + bytes(12), "bad"),
    "v2-protocol-3": (V2_SIGNATURE + b"\x21\x13\x00\x0c" + bytes(12), "bad"),
    "v2-short-tcp4": (V2_SIGNATURE + b"\x21\x11\x00\x0b" + bytes(11), "bad"),
    "v2-short-tcp6": (V2_SIGNATURE + b"\x21\x21\x00\x0c" + bytes(12), "bad"),
    "v2-tlv-past-end": (V2_SIGNATURE + b"\x21\x11\x00\x10" + bytes(12) + b"\x04\x00\x09\x00", "bad"),
    "v2-tlv-cut-head": (V2_SIGNATURE + b"\x21\x11\x00\x0e" + bytes(12) + b"\x04\x00", "bad"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_or_missing_header_is_refused_with_its_reason(name):
    data, reason = BAD[name]
    with pytest.raises(ProxyProtocolError) as err:
        parse_header(data)
    assert err.value.reason == reason
    assert err.value.error_code.name == "INVALID_REQUEST"


def test_garbage_is_refused_as_soon_as_it_cannot_be_a_header():
    assert parse_header(b"") is None
    assert parse_header(b"PRO") is None and parse_header(V2_SIGNATURE[:5]) is None
    with pytest.raises(ProxyProtocolError):
        parse_header(b"PRX")
    with pytest.raises(ProxyProtocolError):
        parse_header(V2_SIGNATURE + b"\x31")  # version 3, known at the 13th byte
    # a v1 line is at most 107 bytes: whatever comes, 107 bytes without CRLF end it
    assert parse_header(b"PROXY UNKNOWN " + b"f" * (V1_MAX - 15)) is None
    with pytest.raises(ProxyProtocolError, match="107"):
        parse_header(b"PROXY UNKNOWN " + b"f" * 200 + b"\r\n")
    # the longest v2 header: 16 + 65535 bytes, read whole
    big = V2_SIGNATURE + b"\x21\x11\xff\xff" + bytes(12) + b"\x04\xff\xf0" + bytes(65535 - 15)
    got = parse_header(big + KAFKA)
    assert got is not None and got.length == 16 + 65535 and got.source == ("0.0.0.0", 0)


@pytest.mark.parametrize("name", ["v1-tcp4", "v2-tcp6-tlvs", "v1-unknown"])
def test_read_header_takes_the_header_and_not_one_byte_more(name):
    """Over a real socket pair, the header arriving in pieces (every split of a 3-piece send would be slow:
    a split at each byte of the header, then the Kafka bytes with the last piece), the bytes after it stay
    in the socket."""
    header, source = CASES[name]

    async def run(cut: int) -> tuple[object, bytes]:
        a, b = socket.socketpair()
        try:
            b.setblocking(False)
            a.sendall(header[:cut])
            task = asyncio.ensure_future(read_header(b))
            await asyncio.sleep(0)
            a.sendall(header[cut:] + KAFKA)
            got = await asyncio.wait_for(task, 5)
            b.setblocking(True)
            b.settimeout(5)
            rest = b""
            while len(rest) < len(KAFKA):
                rest += b.recv(len(KAFKA) - len(rest))
            return got, rest
        finally:
            a.close()
            b.close()

    for cut in range(len(header) + 1):
        got, rest = asyncio.run(run(cut))
        assert got.source == source and rest == KAFKA, cut


def test_read_header_refuses_garbage_and_a_close():
    async def run(data: bytes) -> BaseException | None:
        a, b = socket.socketpair()
        try:
            b.setblocking(False)
            a.sendall(data)
            a.shutdown(socket.SHUT_WR)
            try:
                await asyncio.wait_for(read_header(b), 5)
            except (ProxyProtocolError, ConnectionError) as exc:
                return exc
            return None
        finally:
            a.close()
            b.close()

    err = asyncio.run(run(KAFKA))
    assert isinstance(err, ProxyProtocolError) and err.reason == "missing"
    assert isinstance(asyncio.run(run(b"PROXY TCP4 1.2.")), ConnectionError)


def test_trusted_peers():
    pp = ProxyProtocol()
    assert pp.trusts("127.0.0.1") and pp.trusts("127.9.9.9") and pp.trusts("::1")
    assert pp.trusts("::ffff:127.0.0.3")  # a dual-stack listener's IPv4 peer
    assert not pp.trusts("10.0.0.1") and not pp.trusts("not-an-address")
    pp = ProxyProtocol("10.0.0.0/24, 192.168.1.5,2001:db8::/32")
    assert pp.trusts("10.0.0.200") and pp.trusts("192.168.1.5") and pp.trusts("2001:db8::9")
    assert not pp.trusts("10.0.1.1") and not pp.trusts("192.168.1.6") and not pp.trusts("127.0.0.1")
    assert pp.refusals() == dict.fromkeys(("untrusted", "missing", "bad", "too_long", "timeout", "closed"), 0)
    pp.refuse("untrusted", ("10.9.9.9", 1), "test")
    assert pp.refusals()["untrusted"] == 1
    for bad in ("10.0.0.0/33", "example.com", ",", ""):
        with pytest.raises(InvalidConfigError, match="--proxy-protocol-from"):
            parse_networks(bad)


class _Conn:
    def __init__(self, connection_id: int, address: str) -> None:
        self.connection_id, self.address = connection_id, address


def test_the_drain_spreads_closes_and_each_client_keeps_one_until_late():
    # three clients: A with 4 connections, B with 2, C with 1 (ids in the order they connected)
    conns = [_Conn(i, a) for i, a in enumerate("AABACAAB")]
    plan = stagger(conns, 4.0)
    times = [t for t, _ in plan]
    assert len(plan) == len(conns) and times == sorted(times)
    assert times[0] == 0.0 and times[-1] < 4.0
    assert all(b - a == pytest.approx(4.0 / len(conns)) for a, b in itertools.pairwise(times))  # evenly
    order = [c for _, c in plan]
    for client in "ABC":
        mine = [i for i, c in enumerate(order) if c.address == client]
        oldest = min((c for c in conns if c.address == client), key=lambda c: c.connection_id)
        assert order[mine[-1]] is oldest  # the oldest closes last...
        assert mine[-1] >= len(conns) - 3  # ...among the clients' last ones
    # the closes of a client are not back to back while another client has some left
    assert [c.address for c in order[:3]] == ["A", "B", "A"]
    assert stagger([_Conn(1, "A")], 4.0)[0][0] == 0.0  # a lone connection closes at once
    assert [t for t, _ in stagger(conns, 0.0)] == [0.0] * len(conns)
