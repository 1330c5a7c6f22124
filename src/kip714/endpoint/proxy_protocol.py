"""The PROXY protocol (HAProxy's, versions 1 and 2): the client's own address behind a TCP load balancer.

A balancer in ``mode tcp`` with ``send-proxy``/``send-proxy-v2`` starts every connection it opens to kip714
with a header naming the client's address and port. :func:`parse_header` reads one (small and bounded: a v1
line is at most 107 bytes, a v2 header 16 bytes plus its stated length); :class:`ProxyProtocol` says which
peers may send it and counts the connections refused, by reason; :class:`HeaderListener` is the listener of
an endpoint that takes it: it accepts a connection, refuses a peer outside the trusted networks, reads the
header and not one byte more (``MSG_PEEK`` first, then exactly the header's length), and only then hands the
socket to asyncio (``connect_accepted_socket``, with TLS when the listener has it: the header comes before
the TLS handshake, and the Kafka or TLS bytes that followed it in the same segment are still in the socket).
The connection's :class:`~kip714.endpoint.connection.ClientIdentity` then carries the client's address and
port (``client_source_address``/``client_source_port``); a LOCAL (v2), UNKNOWN (v1) or UNSPEC header keeps
the socket's.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import socket
import ssl as _ssl
import struct
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import NamedTuple

from ..errors import InvalidConfigError, ProxyProtocolError
from .address import java_host_address
from .connection import EndpointConnection, os_error_words

__all__ = [
    "HEADER_TIMEOUT_S",
    "LOOPBACK",
    "REFUSALS",
    "HeaderListener",
    "ProxyHeader",
    "ProxyProtocol",
    "parse_header",
    "parse_networks",
]

log = logging.getLogger("kip714.endpoint")

#: The 12 bytes that open a version 2 header.
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
#: The longest version 1 line, CRLF included.
V1_MAX = 107
#: Seconds a connection has to send its whole header (the spec asks for at least 3: one TCP retransmit).
HEADER_TIMEOUT_S = 5.0
#: The peers trusted to send a header unless ``--proxy-protocol-from`` says otherwise.
LOOPBACK = ("127.0.0.0/8", "::1/128")
#: Why a connection was refused: a peer outside the trusted networks (``untrusted``), no header (``missing``:
#: the first bytes are neither signature), a malformed one (``bad``), a v1 line without CRLF in 107 bytes
#: (``too_long``), no whole header within :data:`HEADER_TIMEOUT_S` (``timeout``), closed before its end
#: (``closed``).
REFUSALS = ("untrusted", "missing", "bad", "too_long", "timeout", "closed")

_V2_HEAD = struct.Struct(">BBH")  # ver_cmd, family and transport, length
_ADDRESS_BYTES = {1: 4, 2: 16}  # AF_INET, AF_INET6
_PORT = re.compile(r"0|[1-9][0-9]{0,4}")
_PEEK = getattr(socket, "MSG_PEEK", 2)


class ProxyHeader(NamedTuple):
    """A PROXY protocol header: its ``version`` (1 or 2), the client's ``source`` and the ``destination``
    it connected to (``(address, port)``; None for LOCAL, UNKNOWN, UNSPEC or a family other than TCP over
    IPv4/IPv6: the socket's own address stands), and ``length``, the bytes it took."""

    version: int
    source: tuple[str, int] | None
    destination: tuple[str, int] | None
    length: int


def _bad(message: str, reason: str = "bad") -> ProxyProtocolError:
    return ProxyProtocolError(message, reason)


def parse_header(data: bytes | bytearray | memoryview) -> ProxyHeader | None:
    """The PROXY protocol header at the start of ``data``; None while ``data`` is a valid beginning of one
    that is not whole yet. Raises :class:`~kip714.errors.ProxyProtocolError` (its ``reason`` one of
    :data:`REFUSALS`) as soon as ``data`` cannot begin a valid header."""
    data = bytes(data[: 16 + 65535])
    n = len(data)
    if not n:
        return None
    if data[0] == 0x0D:
        return _parse_v2(data)
    if data[0] == 0x50:  # "P"
        return _parse_v1(data)
    raise _bad("no PROXY protocol header", "missing")


def _parse_v2(data: bytes) -> ProxyHeader | None:
    n = len(data)
    if data[: min(n, 12)] != V2_SIGNATURE[: min(n, 12)]:
        raise _bad("no PROXY protocol header", "missing")
    if n >= 13:
        ver_cmd = data[12]
        if ver_cmd >> 4 != 2:
            raise _bad(f"v2 header with version {ver_cmd >> 4}")
        if ver_cmd & 0xF > 1:
            raise _bad(f"v2 header with command {ver_cmd & 0xF} (0 LOCAL and 1 PROXY are defined)")
    if n >= 14 and (data[13] >> 4 > 3 or data[13] & 0xF > 2):
        raise _bad(f"v2 header with address family and protocol 0x{data[13]:02x}")
    if n < 16:
        return None
    ver_cmd, family_protocol, length = _V2_HEAD.unpack_from(data, 12)
    total = 16 + length
    if n < total:
        return None
    family, protocol = family_protocol >> 4, family_protocol & 0xF
    size = _ADDRESS_BYTES.get(family)
    if ver_cmd & 0xF == 0 or size is None or protocol != 1:
        # LOCAL, UNSPEC, AF_UNIX or UDP: the socket's own address (the spec's UNSPEC fallback)
        return ProxyHeader(2, None, None, total)
    need = 2 * size + 4
    if length < need:
        raise _bad(f"v2 header of {length} address bytes, TCP over IPv{4 if family == 1 else 6} needs {need}")
    pos = 16 + need
    while pos < total:  # TLVs: type, 2-byte length, value; skipped, but each must fit
        if pos + 3 > total or pos + 3 + int.from_bytes(data[pos + 1 : pos + 3], "big") > total:
            raise _bad("v2 header with a TLV past its end")
        pos += 3 + int.from_bytes(data[pos + 1 : pos + 3], "big")
    src = ipaddress.ip_address(data[16 : 16 + size])
    dst = ipaddress.ip_address(data[16 + size : 16 + 2 * size])
    sport, dport = struct.unpack_from(">HH", data, 16 + 2 * size)
    return ProxyHeader(2, (str(src), sport), (str(dst), dport), total)


def _parse_v1(data: bytes) -> ProxyHeader | None:
    n = len(data)
    if data[: min(n, 5)] != b"PROXY"[: min(n, 5)]:
        raise _bad("no PROXY protocol header", "missing")
    if n >= 6 and data[5] != 0x20:
        raise _bad("v1 header without a space after PROXY")
    end = data.find(b"\r\n", 0, V1_MAX)
    if end < 0:
        if b"\n" in data[:V1_MAX] or b"\r" in data[: min(n, V1_MAX) - 1]:
            raise _bad("v1 header with a CR or LF alone")
        if n >= V1_MAX:
            raise _bad(f"v1 header without CRLF in its first {V1_MAX} bytes", "too_long")
        return None
    try:
        fields = data[6:end].decode("ascii").split(" ")
    except UnicodeDecodeError:
        raise _bad("v1 header that is not ASCII") from None
    if fields[0] == "UNKNOWN":  # anything up to CRLF is ignored
        return ProxyHeader(1, None, None, end + 2)
    if fields[0] not in ("TCP4", "TCP6") or len(fields) != 5:
        raise _bad(f"v1 header {data[:end].decode('ascii', 'replace')!r} is not 'PROXY TCP4|TCP6 src dst sport dport'")
    kind = ipaddress.IPv4Address if fields[0] == "TCP4" else ipaddress.IPv6Address
    addresses = []
    for text in fields[1:3]:
        try:
            if "%" in text:
                raise ValueError(text)
            addresses.append(str(kind(text)))
        except ValueError:
            raise _bad(f"v1 header with {text!r}, not an {fields[0]} address") from None
    ports = []
    for text in fields[3:5]:
        if not _PORT.fullmatch(text) or int(text) > 65535:
            raise _bad(f"v1 header with port {text!r} (0-65535, no leading zeros)")
        ports.append(int(text))
    return ProxyHeader(1, (addresses[0], ports[0]), (addresses[1], ports[1]), end + 2)


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(spec: str | Iterable[str]) -> list[Network]:
    """``CIDR[,CIDR...]`` (a bare address is one host) -> networks; InvalidConfigError naming a bad one."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[Network] = []
    for item in filter(None, (s.strip() for s in items)):
        try:
            out.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise InvalidConfigError(f"--proxy-protocol-from: {item!r} is not an address or CIDR block") from None
    if not out:
        raise InvalidConfigError("--proxy-protocol-from names no network")
    return out


class ProxyProtocol:
    """An endpoint's PROXY protocol: every connection must open with a header, from a peer in ``trusted``
    (CIDR blocks; default loopback only), within ``header_timeout_s``. ``refused`` counts the connections
    refused by reason (:data:`REFUSALS`); each is logged once."""

    def __init__(self, trusted: str | Iterable[str] = LOOPBACK, header_timeout_s: float = HEADER_TIMEOUT_S) -> None:
        self.networks = parse_networks(trusted)
        self.header_timeout_s = header_timeout_s
        self.refused: Counter[str] = Counter()

    def trusts(self, host: str) -> bool:
        """``host`` (a peer's address) is in a trusted network."""
        try:
            ip = ipaddress.ip_address(host.partition("%")[0])
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip in net for net in self.networks)

    def refusals(self) -> dict[str, int]:
        """Connections refused, by reason (every reason, from 0)."""
        return {reason: self.refused[reason] for reason in REFUSALS}

    def refuse(self, reason: str, peer: tuple[str, int], detail: str) -> None:
        """Count a connection from ``peer`` refused for ``reason`` and log it once (a peer that closed before
        its header at DEBUG, a timeout at INFO, the others at WARNING)."""
        self.refused[reason] += 1
        level = logging.DEBUG if reason == "closed" else logging.INFO if reason == "timeout" else logging.WARNING
        log.log(level, "event=proxy_protocol_refused reason=%s peer=%s:%d %s", reason, peer[0], peer[1], detail)

    def describe(self) -> str:
        """The trusted networks, comma separated (for the logs)."""
        return ",".join(str(n) for n in self.networks)


async def read_header(sock: socket.socket) -> ProxyHeader:
    """Read the PROXY protocol header from the non-blocking ``sock`` and not one byte past it (peeked first,
    then taken exactly). Raises ProxyProtocolError, or ConnectionError when the peer closes first."""
    loop = asyncio.get_running_loop()
    taken = bytearray()
    want = V1_MAX + 1
    while True:
        try:
            peeked = sock.recv(max(1, want - len(taken)), _PEEK)
        except (BlockingIOError, InterruptedError):
            await _readable(loop, sock)
            continue
        if not peeked:
            raise ConnectionError(f"closed after {len(taken)} bytes")
        data = taken + peeked
        header = parse_header(data)
        if header is not None:
            rest = header.length - len(taken)
            got = sock.recv(rest)
            if len(got) != rest:  # peeked bytes are in the socket's buffer: recv takes them whole
                raise ConnectionError("the socket lost peeked bytes")
            return header
        # all of it belongs to the header: take it, so the socket is not readable again until more comes
        taken += sock.recv(len(peeked))
        if len(data) >= 16 and data[0] == 0x0D:
            want = 16 + int.from_bytes(data[14:16], "big")


async def _readable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    fd = sock.fileno()
    ready: asyncio.Future[None] = loop.create_future()

    def woke() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, woke)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


class HeaderListener(asyncio.AbstractServer):
    """A listener (``sock``, bound and listening) whose connections open with a PROXY protocol header:
    each is checked against ``policy`` and its header read before ``factory()``'s connection (an
    :class:`~kip714.endpoint.connection.EndpointConnection`) gets it, with the client's address as its peer,
    through TLS when ``ssl`` is given. ``close()``, ``wait_closed()`` and ``is_serving()`` as asyncio's
    servers."""

    def __init__(
        self,
        sock: socket.socket,
        factory: Callable[[], EndpointConnection],
        policy: ProxyProtocol,
        ssl: _ssl.SSLContext | None = None,
    ) -> None:
        self._sock = sock
        self._factory = factory
        self._policy = policy
        self._ssl = ssl
        self._loop = asyncio.get_running_loop()
        self._handshakes: set[asyncio.Task[None]] = set()
        self._serving = True
        sock.setblocking(False)
        self._accepting = self._loop.create_task(self._accept())

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        return (self._sock,) if self._serving else ()

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def is_serving(self) -> bool:
        return self._serving

    def close(self) -> None:
        if not self._serving:
            return
        self._serving = False
        self._accepting.cancel()
        for task in list(self._handshakes):
            task.cancel()
        self._loop.call_soon(self._sock.close)  # after the accept task let go of the socket

    async def wait_closed(self) -> None:
        await asyncio.gather(self._accepting, *self._handshakes, return_exceptions=True)

    async def start_serving(self) -> None:
        """Serving starts when the listener is made."""

    async def serve_forever(self) -> None:
        await asyncio.gather(self._accepting, return_exceptions=True)

    async def _accept(self) -> None:
        loop = self._loop
        while True:
            try:
                conn, addr = await loop.sock_accept(self._sock)
            except OSError as exc:  # out of file descriptors...: as asyncio's own servers do, wait a second
                log.warning("event=accept_failed error=%s", os_error_words(exc))
                await asyncio.sleep(1.0)
                continue
            task = loop.create_task(self._handshake(conn, (str(addr[0]), int(addr[1]))))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, conn: socket.socket, addr: tuple[str, int]) -> None:
        policy = self._policy
        peer = (java_host_address(addr[0]), addr[1])
        handed = False
        try:
            conn.setblocking(False)
            if not policy.trusts(addr[0]):
                policy.refuse("untrusted", peer, f"(not in --proxy-protocol-from {policy.describe()})")
                return
            started = time.monotonic()
            try:
                header = await asyncio.wait_for(read_header(conn), policy.header_timeout_s)
            except ProxyProtocolError as exc:
                policy.refuse(exc.reason, peer, f"error={str(exc)!r}")
                return
            except asyncio.TimeoutError:
                policy.refuse("timeout", peer, f"(no whole header within {policy.header_timeout_s:g}s)")
                return
            except OSError as exc:
                policy.refuse("closed", peer, f"after {time.monotonic() - started:.3f}s ({os_error_words(exc)})")
                return
            source = header.source
            log.debug(
                "event=proxy_protocol peer=%s:%d version=%d client=%s",
                *peer,
                header.version,
                "local" if source is None else f"{java_host_address(source[0])}:{source[1]}",
            )

            def make() -> EndpointConnection:
                connection = self._factory()
                connection.proxied_source = source
                return connection

            handed = True
            await self._loop.connect_accepted_socket(make, conn, ssl=self._ssl)
        except asyncio.CancelledError:
            if not handed:
                conn.close()
            raise
        except (OSError, _ssl.SSLError, asyncio.TimeoutError) as exc:
            # a failed TLS handshake: counted by the connection object that never saw connection_made
            log.debug("event=handshake_failed peer=%s:%d error=%s", *peer, os_error_words(exc))
        finally:
            if not handed:
                conn.close()
