"""kip714 behind a TCP load balancer: the PROXY protocol with HAProxy itself as the encoder (v1 and v2, the
client's address in the recording), TLS after the header, and two proxy replicas behind a balancer that
advertise the balancer's ports and drain one connection after another (a librdkafka producer moves to the
other replica without ever seeing all its brokers down)."""

from __future__ import annotations

import asyncio
import itertools
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
from ipaddress import IPv4Address

import pytest

ck = pytest.importorskip("confluent_kafka")

from mock_cluster import MockCluster  # noqa: E402
from proxy_helpers import closed_by_peer, recv_frame, start_proxy  # noqa: E402
from proxyprotocol.result import ProxyResultIPv4  # noqa: E402
from proxyprotocol.v2 import ProxyProtocolV2  # noqa: E402
from rdk_close import AnsweredPushes  # noqa: E402
from server_thread import ServerThread  # noqa: E402
from service_helpers import KipProcess, free_port_run, free_ports, metric, scrape, wait_until  # noqa: E402

import kip714  # noqa: E402
from kip714.endpoint.proxy_protocol import ProxyProtocol  # noqa: E402
from kip714.wire import (  # noqa: E402
    GetTelemetrySubscriptionsRequest,
    MetadataRequest,
    PushTelemetryRequest,
    decode_response,
    encode_request,
)

HAPROXY = shutil.which("haproxy")
#: the balancer's own address toward kip714 (HAProxy's "source"): never the client's
BALANCER = "127.0.0.3"


def _established_ports(remote_port: int) -> set[int]:
    """Local ports of the loopback connections to ``remote_port`` open now (the kernel's table)."""
    out = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            local, remote, state = line.split()[1:4]
            if state == "01" and int(remote.split(":")[1], 16) == remote_port and local.startswith("0100007F:"):
                out.add(int(local.split(":")[1], 16))
    return out


def _push(sock: socket.socket, client_id: str, payload: bytes) -> int:
    """A Get then a push on ``sock``: the push's error code."""
    sock.sendall(encode_request(GetTelemetrySubscriptionsRequest(), 1, client_id, 0))
    sub = decode_response(recv_frame(sock), 71, 0).body
    sock.sendall(
        encode_request(
            PushTelemetryRequest(sub.client_instance_id, sub.subscription_id, metrics=payload), 2, client_id, 0
        )
    )
    return decode_response(recv_frame(sock), 72, 0).body.error_code


class _HAProxy:
    """HAProxy in ``mode tcp``: each (front port, back port, option) a listener that sends the PROXY header
    (``send-proxy`` v1, ``send-proxy-v2``) from :data:`BALANCER`."""

    def __init__(self, tmp_path, routes: list[tuple[int, int, str]]) -> None:
        cfg = tmp_path / "haproxy.cfg"
        text = "global\n    maxconn 256\ndefaults\n    mode tcp\n    timeout connect 5s\n"
        text += "    timeout client 60s\n    timeout server 60s\n"
        for i, (front, back, option) in enumerate(routes):
            text += f"listen f{i}\n    bind 127.0.0.1:{front}\n"
            text += f"    server s{i} 127.0.0.1:{back} {option} source {BALANCER}\n"
        cfg.write_text(text)
        self.proc = subprocess.Popen(
            [HAPROXY, "-db", "-f", str(cfg)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

        def listening() -> bool:
            assert self.proc.poll() is None, self.proc.stdout.read()
            try:
                for front, _, _ in routes:
                    socket.create_connection(("127.0.0.1", front), timeout=1).close()
                return True
            except OSError:
                return False

        wait_until(listening, 10, 0.05, "haproxy listening")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.mark.skipif(HAPROXY is None, reason="haproxy is not installed (make haproxy, or apt-get install haproxy)")
def test_haproxy_v1_and_v2_headers_put_the_clients_address_in_the_recording(tmp_path):
    serve_port, v1_port, v2_port = free_ports(3)
    rec = tmp_path / "rec"
    serve = KipProcess(
        [
            "serve",
            "--port",
            str(serve_port),
            "--advertised-port",
            str(v2_port),  # librdkafka's broker connection goes through the v2 listener
            "--proxy-protocol",
            "--proxy-protocol-from",
            f"{BALANCER}/32",
            "--metrics",
            "*",
            "--interval-ms",
            "500",
            "--record",
            str(rec),
            "--prometheus",
            "127.0.0.1:0",
            "--summary-interval",
            "0",
            "--drain-timeout",
            "4s",
        ]
    )
    haproxy = None
    with serve:
        url = serve.wait_for(r"event=prometheus url=(\S+)").group(1)
        serve.wait_for("event=ready")
        haproxy = _HAProxy(tmp_path, [(v1_port, serve_port, "send-proxy"), (v2_port, serve_port, "send-proxy-v2")])
        try:
            raw = {}
            for name, port in (("raw-v1", v1_port), ("raw-v2", v2_port)):
                with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                    assert _push(sock, name, b"pushed through " + name.encode()) == 0
                    raw[name] = sock.getsockname()[1]

            # a client straight to kip714, not through the balancer: refused, counted
            with socket.create_connection(("127.0.0.1", serve_port), timeout=10) as sock:
                sock.sendall(encode_request(GetTelemetrySubscriptionsRequest(), 1, "direct", 0))
                assert closed_by_peer(sock)
            wait_until(
                lambda: metric(scrape(url), "kip714_proxy_protocol_refused_total", reason="untrusted") == 1,
                10,
                0.05,
                "the direct connection counted as untrusted",
            )

            # librdkafka through the v2 listener: its pushes carry its own port
            answered = AnsweredPushes()
            producer = ck.Producer(
                {"bootstrap.servers": f"127.0.0.1:{v2_port}", "enable.sparse.connections": False, **answered.conf}
            )
            client_ports: set[int] = set()
            deadline = time.monotonic() + 20
            while answered() < 2 and time.monotonic() < deadline:
                producer.poll(0.05)
                client_ports |= _established_ports(v2_port)
            assert answered() >= 2, "librdkafka's pushes through HAProxy answered"
            del producer
        finally:
            haproxy.close()
        assert serve.stop() == 0
    samples = [line for line in serve.log.splitlines() if "proxy_protocol_refused" in line]
    assert len(samples) == 1 and "reason=untrusted peer=127.0.0.1:" in samples[0], samples  # logged once

    rows = kip714.read_recording(rec).to_pylist()
    assert rows and all(r["client_source_address"] == "127.0.0.1" for r in rows), {
        r["client_source_address"] for r in rows
    }
    by_id = {r["client_id"]: r for r in rows}
    for name, port in raw.items():
        assert by_id[name]["client_source_port"] == str(port), name
        assert by_id[name]["payload"] == b"pushed through " + name.encode()
    rdkafka = [r for r in rows if not r["client_id"].startswith("raw-")]
    assert {r["client_software_name"] for r in rdkafka} == {"confluent-kafka-python"}, rdkafka[:1]
    assert rdkafka and {int(r["client_source_port"]) for r in rdkafka} <= client_ports


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_tls_after_the_header_and_refusals(tmp_path, loop):
    """The header comes before the TLS handshake: the client's address is the header's, the TLS session is
    whole; a connection without a header, or with garbage, is refused and counted by reason."""
    from tls_cert import make_cert

    from kip714.cli.serve import loop_factory

    cert, key = make_cert(tmp_path, "pp")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    policy = ProxyProtocol(header_timeout_s=1.0)
    registry = kip714.SubscriptionRegistry()
    registry.set("all", {"metrics": "*"})
    server = kip714.TelemetryServer(
        kip714.TelemetryBroker(registry),
        port=0,
        ssl=server_ctx,
        proxy_protocol=policy,
    )
    st = ServerThread(server, loop_factory=loop_factory(loop))
    try:
        client_ctx = ssl.create_default_context()
        client_ctx.check_hostname, client_ctx.verify_mode = False, ssl.CERT_NONE
        header = ProxyProtocolV2().pack(
            ProxyResultIPv4(
                (IPv4Address("198.51.100.9"), 40404), (IPv4Address("10.0.0.1"), 9093), protocol=socket.SOCK_STREAM
            )
        )
        raw = socket.create_connection(("127.0.0.1", st.port), timeout=10)
        raw.sendall(header)  # the ClientHello follows in its own segment or the same: either way whole
        with client_ctx.wrap_socket(raw) as tls:
            assert _push(tls, "over-tls", b"tls payload") == 0
            peers = st.call(lambda: [(c.address, c.port) for c in server.connections])
            assert peers == [("198.51.100.9", 40404)]
        for data in (b"", encode_request(GetTelemetrySubscriptionsRequest(), 1, "no-header", 0), b"PROXY TCP4 x\r\n"):
            with socket.create_connection(("127.0.0.1", st.port), timeout=10) as sock:
                if data:
                    sock.sendall(data)
                assert closed_by_peer(sock)
        assert st.wait_for(lambda: sum(policy.refused.values()) == 3)
        assert dict(policy.refused) == {"timeout": 1, "missing": 1, "bad": 1}
        assert server.stats["pushes"] == 1
    finally:
        st.stop()


class _Balancer:
    """A TCP balancer for the fleet test: each front port forwards to the first of its back ports that accepts,
    after a PROXY v2 header naming the client (the ``proxy-protocol`` package's encoder); it notes for every
    connection the back end taken and when that back end closed it."""

    def __init__(self, routes: dict[int, list[int]]) -> None:
        self.routes = routes
        self.conns: list[dict] = []
        self.loop = asyncio.new_event_loop()
        self._servers: list[asyncio.AbstractServer] = []
        ready = threading.Event()

        async def start() -> None:
            for front in routes:
                self._servers.append(
                    await asyncio.start_server(lambda r, w, front=front: self._handle(front, r, w), "127.0.0.1", front)
                )
            ready.set()

        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)
        assert ready.is_set()

    async def _handle(self, front: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for backend, port in enumerate(self.routes[front]):
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                continue
            await self._relay(front, backend, (reader, writer), (up_reader, up_writer))
            return
        writer.close()

    async def _relay(self, front: int, backend: int, client: tuple, upstream: tuple) -> None:
        reader, writer = client
        up_reader, up_writer = upstream
        peer = writer.get_extra_info("peername")
        record = {"front": front, "backend": backend, "closed": None}
        self.conns.append(record)
        up_writer.write(
            ProxyProtocolV2().pack(
                ProxyResultIPv4(
                    (IPv4Address(peer[0]), peer[1]), (IPv4Address("127.0.0.1"), front), protocol=socket.SOCK_STREAM
                )
            )
        )

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, from_backend: bool) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except OSError:
                pass
            if from_backend and record["closed"] is None:
                record["closed"] = time.monotonic()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer, False), pipe(up_reader, writer, True))

    def close(self) -> None:
        async def stop() -> None:
            for server in self._servers:
                server.close()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def test_two_replicas_behind_a_balancer_advertise_its_ports_and_drain_one_connection_at_a_time(tmp_path):
    """Replica A (``kip714 proxy``, SIGTERM) and replica B behind a balancer whose ports differ from theirs:
    Metadata names the balancer's ports (decoded by kafka-python), a librdkafka producer reaches the
    brokers through them only; on SIGTERM A closes the producer's connections one after another over
    --drain-spread, within --drain-timeout, and the producer moves to B without ever seeing all its brokers
    down (no _ALL_BROKERS_DOWN), its records still delivered."""
    from kafka.protocol.metadata import MetadataResponse

    topic = "fleet"
    spread, drain_timeout = 3.0, 8.0
    with MockCluster(3) as mc:
        mc.create_topic(topic, 3)
        front, port_a, port_b = free_port_run(5), free_port_run(5), free_port_run(5)
        # broker N listens on PORT + 1 + N in each replica; the balancer forwards FRONT + 1 + N to it
        routes = {front: [port_a, port_b]}
        routes.update({front + 1 + n: [port_a + 1 + n, port_b + 1 + n] for n in (1, 2, 3)})
        replica_a = KipProcess(
            [
                "proxy",
                "--upstream",
                mc.bootstraps,
                "--port",
                str(port_a),
                "--advertised-port",
                str(front),
                "--proxy-protocol",
                "--drain-timeout",
                f"{drain_timeout:g}s",
                "--drain-spread",
                f"{spread:g}s",
                "--summary-interval",
                "0",
                "--log-level",
                "debug",
                "--loop",
                "asyncio",
            ]
        )
        replica_b = balancer = None
        with replica_a:
            replica_a.wait_for("event=ready")
            replica_b = start_proxy(
                mc.bootstraps, port=port_b, broker_port_base=None, advertised_port=front, proxy_protocol=ProxyProtocol()
            )
            balancer = _Balancer(routes)
            try:
                # Metadata through the balancer, decoded by kafka-python: the balancer's ports
                with socket.create_connection(("127.0.0.1", front), timeout=10) as sock:
                    sock.sendall(encode_request(MetadataRequest(topics=[]), 5, "meta", 1))
                    decoded = MetadataResponse.decode(recv_frame(sock), version=1, header=True)
                brokers = {b[0]: (b[1], b[2]) for b in decoded.brokers}
                assert brokers == {n: ("127.0.0.1", front + 1 + n) for n in (1, 2, 3)}

                errors: list = []
                delivered: list = []
                producer = ck.Producer(
                    {
                        "bootstrap.servers": f"127.0.0.1:{front}",
                        "enable.sparse.connections": False,
                        "linger.ms": 5,
                        "error_cb": errors.append,
                        "reconnect.backoff.ms": 50,
                        "reconnect.backoff.max.ms": 200,
                    }
                )

                def produce_until(producer, n: int, what: str, timeout: float = 20.0) -> None:
                    deadline = time.monotonic() + timeout
                    while len(delivered) < n and time.monotonic() < deadline:
                        producer.produce(topic, b"x", on_delivery=lambda err, msg: err or delivered.append(1))
                        producer.poll(0.02)
                    assert len(delivered) >= n, what

                produce_until(producer, 30, "delivered through replica A")
                assert {c["front"] for c in balancer.conns if c["front"] != front} == {front + 2, front + 3, front + 4}
                assert all(c["backend"] == 0 for c in balancer.conns)  # B takes nothing while A accepts
                open_on_a = [c for c in balancer.conns if c["closed"] is None]
                assert len(open_on_a) >= 3, balancer.conns

                sigterm = time.monotonic()
                replica_a.signal(signal.SIGTERM)
                end = time.monotonic() + drain_timeout + 5
                while replica_a.proc.poll() is None and time.monotonic() < end:
                    producer.produce(topic, b"y", on_delivery=lambda err, msg: err or delivered.append(1))
                    producer.poll(0.02)
                assert replica_a.proc.wait(5) == 0
                produce_until(producer, len(delivered) + 30, "delivered through replica B after A's drain")
                producer.flush(10)
                del producer
            finally:
                balancer.close()
                replica_b.stop()

        closes = sorted(c["closed"] - sigterm for c in open_on_a)
        assert all(0 <= t <= drain_timeout for t in closes), closes
        # evenly over the spread: n connections close spread * i / n after the SIGTERM
        n = len(closes)
        assert closes[-1] - closes[0] >= 0.6 * spread * (n - 1) / n, closes
        assert all(b - a >= 0.3 * spread / n for a, b in itertools.pairwise(closes)), closes
        assert "event=drain_spread" in replica_a.log and replica_a.log.count("event=drain_close") >= n
        assert any(c["backend"] == 1 for c in balancer.conns), "the producer reconnected to replica B"
        down = [e for e in errors if e.code() == ck.KafkaError._ALL_BROKERS_DOWN]
        assert not down, errors
