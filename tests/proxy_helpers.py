"""Helpers of the proxy tests: a proxy on its own loop thread, raw Kafka frames over sockets."""

from __future__ import annotations

import json
import socket
import struct
import time

from server_thread import ServerThread

import kip714


class ProxyThread(ServerThread):
    """A :class:`kip714.TelemetryProxy` running on its own event loop in a thread."""

    @property
    def proxy(self) -> kip714.TelemetryProxy:
        return self.server

    def proxy_ports(self) -> set[int]:
        return {self.server.port, *self.call(lambda: self.server.broker_ports).values()}


def start_proxy(upstream: str, loop: str = "asyncio", **kw) -> ProxyThread:
    """The proxy on a thread, on asyncio's loop or (``loop="uvloop"``) on uvloop's, as ``--loop`` picks."""
    from kip714.cli.serve import loop_factory

    kw.setdefault("port", 0)
    kw.setdefault("broker_port_base", 0)
    return ProxyThread(kip714.TelemetryProxy(upstream, **kw), loop_factory=loop_factory(loop))


def recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def recv_frame(sock: socket.socket) -> bytes:
    """One response frame without its size prefix."""
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    return recv_exact(sock, size)


def closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True when the peer closes the connection (EOF or reset) within ``timeout``, reading what comes."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


class BrokerStats:
    """librdkafka's own statistics (``stats_cb``): every broker connection a client holds, with its address."""

    def __init__(self) -> None:
        self.addresses: set[str] = set()

    def __call__(self, raw: str) -> None:
        for b in json.loads(raw).get("brokers", {}).values():
            if b.get("nodeid", -1) >= 0 or b.get("source") != "logical":
                self.addresses.add(b["name"].split("/")[0])

    def ports(self) -> set[int]:
        return {int(a.rsplit(":", 1)[1]) for a in self.addresses if ":" in a}


def wait(predicate, timeout: float = 10.0, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
