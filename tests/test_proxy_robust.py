"""Robustness of ``kip714 proxy``: requests cut anywhere, pipelining, an upstream that dies mid-request, a
client that never reads, brokers that move, 1 000 connections, malformed frames."""

from __future__ import annotations

import random
import resource
import socket
import struct
import threading
import time

import pytest

pytest.importorskip("confluent_kafka")

from mock_cluster import MockCluster
from proxy_helpers import closed_by_peer, connect, recv_frame, start_proxy, wait

import kip714
from kip714.endpoint.stream import CAPTURE, STREAM, FrameStream


def metadata_request(corr: int, version: int = 9, client_id: str = "robust") -> bytes:
    return kip714.encode_request(kip714.wire.MetadataRequest(topics=[]), corr, client_id, version)


def corr_of(frame: bytes) -> int:
    return int.from_bytes(frame[:4], "big")


@pytest.fixture(scope="module")
def mock():
    with MockCluster(3) as mc:
        yield mc


@pytest.fixture
def proxy(mock):
    pt = start_proxy(mock.bootstraps, max_frame_bytes=1 << 20)
    yield pt
    pt.stop()


# ------------------------------------------------------------------------------------ FrameStream alone


def test_frame_stream_any_chunking_forwards_every_byte_and_sees_every_head():
    rng = random.Random(714)
    frames = []
    for i in range(300):
        body = struct.pack(">hhi", rng.choice((0, 1, 3, 18)), 1, i) + bytes(rng.randrange(0, 3000))
        frames.append(struct.pack(">i", len(body)) + body)
    stream_bytes = b"".join(frames)
    for _trial in range(20):
        out, heads, captured = bytearray(), [], []

        def decide(buf, start, end, size):
            if end - start < 12:
                return None
            key, _, corr = struct.unpack_from(">hhi", buf, start + 4)
            heads.append(corr)
            return CAPTURE if key == 18 else STREAM

        fs = FrameStream(decide, lambda f: (captured.append(f), out.extend(f)), out.extend, 8, 1 << 20)
        pos = 0
        while pos < len(stream_bytes):
            n = rng.choice((1, 2, 3, 5, 7, 11, 64, 1000, 5000, 70000))
            fs.feed(stream_bytes[pos : pos + n])
            pos += n
        assert bytes(out) == stream_bytes
        assert heads == list(range(300))
        assert captured == [f for f in frames if f[4:6] == b"\x00\x12"]
        assert fs.at_boundary


def test_frame_stream_refuses_bad_sizes():
    fs = FrameStream(lambda *a: STREAM, lambda f: None, lambda d: None, 8, 1000)
    with pytest.raises(kip714.errors.MalformedFrameError):
        fs.feed(struct.pack(">i", -5) + b"\0" * 10)
    fs = FrameStream(lambda *a: STREAM, lambda f: None, lambda d: None, 8, 1000)
    with pytest.raises(kip714.errors.FrameTooLargeError):
        fs.feed(struct.pack(">i", 1001) + b"\0" * 10)
    fs = FrameStream(lambda *a: STREAM, lambda f: None, lambda d: None, 8, 1000)
    with pytest.raises(kip714.errors.MalformedFrameError):
        fs.feed(struct.pack(">i", 3) + b"\0" * 10)


# ------------------------------------------------------------------------------------ through the proxy


def test_pipelined_requests_cut_into_tiny_pieces(proxy):
    frames = [metadata_request(c, version=1 + c % 12) for c in range(1, 201)]
    rng = random.Random(5)
    data = b"".join(frames)
    with connect(proxy.port) as s:
        pos = 0
        while pos < len(data):  # 1-9 byte writes: heads and frames split everywhere
            n = rng.randrange(1, 10)
            s.sendall(data[pos : pos + n])
            pos += n
        answers = [recv_frame(s) for _ in frames]
    assert [corr_of(a) for a in answers] == list(range(1, 201))


def test_upstream_dying_mid_request_closes_the_client_connection(mock, proxy):
    ports = proxy.call(lambda: proxy.proxy.broker_ports)
    with connect(ports[2]) as s:
        s.sendall(metadata_request(1))
        recv_frame(s)  # connected through to broker 2
        s.sendall(metadata_request(2)[:10])  # half a request
        mock.command("down", 2)
        try:
            assert closed_by_peer(s, 5), "the client connection stayed open after its upstream died"
        finally:
            mock.command("up", 2)
    # the proxy itself is fine
    with connect(ports[2]) as s:
        s.sendall(metadata_request(3))
        assert corr_of(recv_frame(s)) == 3


def test_client_that_never_reads_bounds_the_proxy(proxy):
    n = 30000
    data = b"".join(metadata_request(c) for c in range(1, n + 1))
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", proxy.port))
    try:
        sender = threading.Thread(target=s.sendall, args=(data,), daemon=True)
        sender.start()
        # until the proxy stops taking answers from the upstream (unchanged for 0.5 s; at most 20 s)
        deadline, last, since = time.monotonic() + 20, -1, time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - since < 0.5:
            time.sleep(0.1)
            now = proxy.call(lambda: proxy.proxy.bytes_down)
            if now != last:
                last, since = now, time.monotonic()
        # the proxy holds a bounded amount for this client and stopped reading its upstream
        buffered = proxy.call(lambda: [c.transport.get_write_buffer_size() for c in proxy.proxy.connections])
        down1 = proxy.call(lambda: proxy.proxy.bytes_down)
        time.sleep(1.0)
        down2 = proxy.call(lambda: proxy.proxy.bytes_down)
        assert max(buffered) <= (1 << 20) + (1 << 18), buffered
        assert down2 == down1, "the proxy kept reading its upstream for a client that does not read"
        # then the client reads: every answer, in order, nothing lost
        s.settimeout(20)
        for c in range(1, n + 1):
            assert corr_of(recv_frame(s)) == c
        sender.join(10)
    finally:
        s.close()


def test_broker_address_change_is_followed(mock, proxy):
    from kafka.protocol.metadata import MetadataResponse

    marker = socket.create_server(("127.0.0.1", 0))
    marker.settimeout(5)
    try:
        new_port = marker.getsockname()[1]
        ports = proxy.call(lambda: proxy.proxy.broker_ports)
        old = proxy.call(lambda: proxy.proxy.nodes[2])
        mock.command("host_port", 2, "127.0.0.1", new_port)
        try:
            with connect(proxy.port) as s:
                s.sendall(metadata_request(1))
                resp = MetadataResponse.decode(recv_frame(s), version=9, header=True)
            # clients still see the same proxy port for node 2 ...
            assert {b.node_id: b.port for b in resp.brokers} == ports
            # ... which now leads to the broker's new address
            assert proxy.call(lambda: proxy.proxy.nodes[2]) == ("127.0.0.1", new_port)
            c = connect(ports[2])
            conn, _ = marker.accept()
            conn.close()
            c.close()
        finally:
            mock.command("host_port", 2, old[0], old[1])
    finally:
        marker.close()


def test_a_thousand_concurrent_connections(proxy):
    n = 1000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 4 * n + 200  # our sockets, the proxy's client and upstream sides, the rest
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {need}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    socks = []
    try:
        # opened in waves: each client connection makes the proxy open one to the mock broker, whose listen
        # backlog is 5 (a burst of 1000 connects there waits on SYN retries, seconds each on a loaded machine)
        wave = 5
        for start in range(0, n, wave):
            batch = [connect(proxy.port, timeout=30) for _ in range(wave)]
            socks += batch
            for i, s in enumerate(batch, start):
                s.sendall(metadata_request(i))
            for i, s in enumerate(batch, start):
                assert corr_of(recv_frame(s)) == i
        assert wait(lambda: proxy.call(lambda: len(proxy.proxy.connections)) == n, 30)
        for i, s in enumerate(socks):  # all 1000 held: a second request on every one at once
            s.sendall(metadata_request(n + i))
        for i, s in enumerate(socks):
            assert corr_of(recv_frame(s)) == n + i
        assert proxy.call(lambda: proxy.proxy.stats["upstream_errors"]) == 0
    finally:
        for s in socks:
            s.close()
    assert wait(lambda: proxy.call(lambda: len(proxy.proxy.connections)) == 0, 20)


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">i", -1) + b"\0" * 12,  # negative size
        struct.pack(">i", 3) + b"abc",  # shorter than a request header
        struct.pack(">i", 2 << 20) + b"\0" * 64,  # over max_frame_bytes (1 MiB)
        struct.pack(">ihhih", 10, 18, 3, 1, 5) + b"\xff" * 8,  # ApiVersions v3 that does not parse
        struct.pack(">ihhih", 10, 55, 0, 1, -1) + b"\0\0",  # DescribeQuorum: names controllers
        struct.pack(">ihhih", 8, 0, 12, 1, -1),  # Produce v12: leaders' addresses
    ],
)
def test_malformed_frames_close_that_connection_only(proxy, garbage):
    with connect(proxy.port) as good:
        with connect(proxy.port) as bad:
            bad.sendall(garbage)
            assert closed_by_peer(bad, 5)
        good.sendall(metadata_request(9))
        assert corr_of(recv_frame(good)) == 9
    assert proxy.call(lambda: proxy.proxy.stats["protocol_errors"]) == 1


def test_max_connections_refuses_the_extra_ones(mock):
    pt = start_proxy(mock.bootstraps, max_connections=3)
    try:
        socks = [connect(pt.port) for _ in range(3)]
        for i, s in enumerate(socks):
            s.sendall(metadata_request(i))
            recv_frame(s)
        with connect(pt.port) as extra:
            assert closed_by_peer(extra, 5)
        assert pt.call(lambda: pt.proxy.stats["connections_refused"]) == 1
        for s in socks:
            s.close()
    finally:
        pt.stop()


def test_idle_connections_are_closed(mock):
    pt = start_proxy(mock.bootstraps, idle_timeout_s=0.5)
    try:
        with connect(pt.port) as s:
            s.sendall(metadata_request(1))
            recv_frame(s)
            assert closed_by_peer(s, 5)
        assert pt.call(lambda: pt.proxy.stats["idle_closed"]) == 1
    finally:
        pt.stop()


def test_budget_drops_the_connections_holding_the_most_unfinished_captured_requests(mock):
    """Requests the proxy reads whole (here PushTelemetry, terminate mode) count against the endpoint's
    buffered-bytes budget; frames that stream through (anything forwarded, e.g. Produce) never do."""
    budget = 2 << 20
    pt = start_proxy(mock.bootstraps, max_frame_bytes=1 << 20, max_buffered_bytes=budget, telemetry="terminate")
    socks = []
    try:
        # a 900 KiB CreateTopics frame streaming upstream, 600 KiB of it sent: held by nobody
        streamer = connect(pt.port)
        socks.append(streamer)
        streamer.sendall(struct.pack(">ihhi", 900 << 10, 19, 5, 1) + bytes(600 << 10))
        assert wait(lambda: pt.proxy.bytes_up >= 600 << 10)
        assert pt.call(lambda: pt.proxy.budget.total) == 0
        # 40 PushTelemetry requests of 512 KiB, 128 KiB of each sent: 5 MiB against a 2 MiB budget
        part = 128 << 10
        for i in range(40):
            s = connect(pt.port)
            socks.append(s)
            s.sendall(struct.pack(">ihhi", 512 << 10, 72, 0, i) + bytes(part - 8))
        must_drop = (40 * part - budget) // part
        assert wait(lambda: pt.proxy.stats["dropped_memory_budget"] >= must_drop, 30), pt.proxy.stats
        assert pt.call(lambda: pt.proxy.budget.total) <= budget
        assert wait(lambda: len(pt.proxy.connections) <= 41 - must_drop)
        assert sum(closed_by_peer(s, 0.1) for s in socks[1:]) >= must_drop
        fresh = connect(pt.port)  # a well-behaved client is answered
        socks.append(fresh)
        fresh.sendall(metadata_request(7))
        assert corr_of(recv_frame(fresh)) == 7
        assert "dropped_memory_budget=" in pt.proxy.summary() and pt.proxy.stats["frames_too_large"] == 0
    finally:
        for s in socks:
            s.close()
        pt.stop()
