"""TLS and SASL through ``kip714 proxy`` (and TLS on ``kip714 serve``): a certificate made in the test with
``openssl``, real librdkafka clients with ``security.protocol=SSL`` / ``SASL_PLAINTEXT``."""

from __future__ import annotations

import asyncio
import base64
import gc
import hashlib
import hmac
import logging
import os
import socket
import ssl
import threading
import time

import pytest

ck = pytest.importorskip("confluent_kafka")

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeResponse  # noqa: E402
from mock_cluster import MockCluster  # noqa: E402
from proxy_helpers import start_proxy, wait  # noqa: E402
from rdk_close import await_push_answered  # noqa: E402
from server_thread import ServerThread  # noqa: E402
from tls_cert import make_cert  # noqa: E402

import kip714  # noqa: E402
from kip714.sinks.recorder import ParquetRecorder, read_recording  # noqa: E402


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    return make_cert(tmp_path_factory.mktemp("tls"))


def server_context(cert) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(*cert)
    return ctx


def produce_and_consume(conf: dict, topic: str, n: int = 300) -> list[bytes]:
    p = ck.Producer({**conf, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, b"tls-%d" % i)
    assert p.flush(20) == 0
    c = ck.Consumer({**conf, "group.id": "g-" + topic, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


def test_tls_clients_and_tls_toward_the_cluster(cert):
    """librdkafka with security.protocol=SSL → proxy A (TLS listener) → proxy B (--upstream-tls to A's
    certificate) → mock cluster; and the clients see only TLS proxy ports."""
    with MockCluster(2) as mc:
        mc.create_topic("tls", 2)
        inner = start_proxy(mc.bootstraps, ssl=server_context(cert))
        try:
            upstream_ctx = ssl.create_default_context(cafile=cert[0])
            outer = start_proxy(inner.bootstrap, ssl=server_context(cert), upstream_ssl=upstream_ctx)
            try:
                conf = {
                    "bootstrap.servers": outer.bootstrap,
                    "security.protocol": "SSL",
                    "ssl.ca.location": cert[0],
                    "log_level": 0,
                }
                got = produce_and_consume(conf, "tls")
                assert sorted(got) == sorted(b"tls-%d" % i for i in range(300))
                md = ck.Producer(conf).list_topics(timeout=10)
                assert {b.port for b in md.brokers.values()} == set(
                    outer.call(lambda: outer.proxy.broker_ports).values()
                )
                assert outer.call(lambda: outer.proxy.stats["upstream_errors"]) == 0
            finally:
                outer.stop()
        finally:
            inner.stop()


def test_tls_refuses_plaintext_clients(cert):
    with MockCluster(1) as mc:
        pt = start_proxy(mc.bootstraps, ssl=server_context(cert))
        try:
            p = ck.Producer({"bootstrap.servers": pt.bootstrap, "log_level": 0, "socket.timeout.ms": 2000})
            with pytest.raises(ck.KafkaException):
                p.list_topics(timeout=1)
            # not silent: counted (and logged) as a failed handshake
            assert wait(lambda: pt.call(lambda: gc.collect() * 0 + pt.proxy.stats["tls_handshakes_failed"]) >= 1, 10)
        finally:
            pt.stop()


def test_serve_takes_tls_clients(cert, tmp_path, caplog):
    recorder = ParquetRecorder(tmp_path / "rec")
    registry = kip714.SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": "1000"})
    srv = ServerThread(
        kip714.endpoint.TelemetryServer(
            kip714.TelemetryBroker(registry), "127.0.0.1", 0, recorder=recorder, ssl=server_context(cert)
        )
    )
    try:
        p = ck.Producer(
            {"bootstrap.servers": srv.bootstrap, "security.protocol": "SSL", "ssl.ca.location": cert[0], "log_level": 0}
        )

        def rows():
            recorder.flush()
            return read_recording(recorder.directory).to_pylist()

        # its first push answered, then its close sends the terminating push
        assert await_push_answered(p, lambda: srv.server.stats["pushes"], timeout=20)
        del p
        gc.collect()
        assert wait(lambda: any(r["terminating"] for r in rows()), 10)
        assert {r["error_code"] for r in rows()} == {0}
        assert srv.call(lambda: srv.server.stats["tls_handshakes_failed"]) == 0
        # a client without TLS: refused by the handshake, counted and said (asyncio and uvloop log it at DEBUG)
        with caplog.at_level(logging.WARNING, logger="kip714.endpoint"):
            with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
                s.sendall(kip714.encode_request(kip714.wire.ApiVersionsRequest(), 1, "plain"))
                try:
                    assert s.recv(100) == b""  # closed without an answer
                except ConnectionResetError:
                    pass
            # counted when the loop lets go of the connection object (a cycle through the handshake's exception:
            # the next garbage collection, within moments on a running endpoint; forced here)
            assert srv.wait_for(
                lambda: srv.call(lambda: gc.collect() * 0 + srv.server.stats["tls_handshakes_failed"]) == 1
            )
        assert [r for r in caplog.records if "event=tls_handshake_failed total=1" in r.getMessage()]
    finally:
        srv.stop()


# ------------------------------------------------------------------------------------------------ SASL

USERS = {"alice": "alice-secret", "bob,jr": "bob-secret"}
_SCRAM_ITERATIONS = 4096


class SaslBroker:
    """A single-node upstream that requires SASL PLAIN or SCRAM-SHA-256 (librdkafka's mock has no SASL):
    ApiVersions, SaslHandshake, SaslAuthenticate and Metadata (itself as node 1), nothing else — enough
    for a client to authenticate and, through a proxy in terminate mode, push telemetry."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.authenticated: list[str] = []
        ready = threading.Event()

        def run():
            asyncio.set_event_loop(self.loop)
            self.server = self.loop.run_until_complete(asyncio.start_server(self.handle, "127.0.0.1", 0))
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert ready.wait(5)

    def stop(self) -> None:
        async def shutdown() -> None:
            self.server.close()
            handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in handlers:  # connections still open: their handlers end here, not when collected later
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    async def handle(self, reader, writer) -> None:
        state = {"authenticated": False, "mechanism": None, "scram": None}
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big")
                frame = await reader.readexactly(size)
                h = kip714.wire.decode_request_header(frame)
                out = self.answer(h, frame, state)
                if out is None:
                    break
                writer.write(out)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def answer(self, h, frame, state):
        key, version, corr = h.api_key, h.api_version, h.correlation_id
        if key == 18:
            if version > 3:
                body = kip714.wire.ApiVersionsResponse(35, [kip714.wire.ApiVersion(18, 0, 3)])
                return kip714.encode_response(corr, body, 0)
            apis = [
                kip714.wire.ApiVersion(3, 0, 12),
                kip714.wire.ApiVersion(17, 1, 1),
                kip714.wire.ApiVersion(18, 0, 3),
                kip714.wire.ApiVersion(36, 0, 2),
            ]
            return kip714.encode_response(corr, kip714.wire.ApiVersionsResponse(0, apis), version)
        if key == 17:
            mech = frame[10 + len(h.client_id or "") + 2 :].decode()
            state["mechanism"] = mech
            resp = SaslHandshakeResponse[version](
                error_code=0 if mech in ("PLAIN", "SCRAM-SHA-256") else 33, mechanisms=["PLAIN", "SCRAM-SHA-256"]
            )
            resp.with_header(correlation_id=corr)
            return bytes(resp.encode(header=True, framed=True))
        if key == 36:
            req = SaslAuthenticateRequest.decode(frame, version=version, header=True)
            error, reply = self.authenticate(state, bytes(req.auth_bytes))
            kw = {"session_lifetime_ms": 0} if version >= 1 else {}
            resp = SaslAuthenticateResponse[version](
                error_code=error, error_message=None if not error else "denied", auth_bytes=reply, **kw
            )
            resp.with_header(correlation_id=corr)
            return bytes(resp.encode(header=True, framed=True))
        if not state["authenticated"]:
            return None  # as Kafka: no request before SASL
        if key == 3:
            me = kip714.wire.MetadataResponseBroker(1, "127.0.0.1", self.port, None)
            return kip714.encode_response(
                corr, kip714.wire.MetadataResponse(brokers=[me], cluster_id="sasl", controller_id=1), version
            )
        return None

    def authenticate(self, state, data: bytes):
        if state["mechanism"] == "PLAIN":
            _, user, password = data.split(b"\0")
            ok = USERS.get(user.decode()) == password.decode()
            if ok:
                state["authenticated"] = True
                self.authenticated.append(user.decode())
            return (0 if ok else 58), b""
        # SCRAM-SHA-256 (RFC 5802, server side)
        if state["scram"] is None:
            bare = data.decode().split(",", 2)[2]
            attrs = dict(a.split("=", 1) for a in bare.split(","))
            user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
            nonce = attrs["r"] + base64.b64encode(os.urandom(12)).decode()
            salt = os.urandom(16)
            server_first = f"r={nonce},s={base64.b64encode(salt).decode()},i={_SCRAM_ITERATIONS}"
            state["scram"] = (user, bare, server_first, salt)
            return 0, server_first.encode()
        user, client_first_bare, server_first, salt = state["scram"]
        final = data.decode()
        without_proof, proof = final.rsplit(",p=", 1)
        salted = hashlib.pbkdf2_hmac("sha256", USERS[user].encode(), salt, _SCRAM_ITERATIONS)
        client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
        stored_key = hashlib.sha256(client_key).digest()
        auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, hashlib.sha256).digest()
        expected = bytes(a ^ b for a, b in zip(client_key, signature))
        if base64.b64decode(proof) != expected:
            return 58, b""
        server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
        server_signature = hmac.new(server_key, auth_message, hashlib.sha256).digest()
        state["authenticated"] = True
        self.authenticated.append(user)
        return 0, b"v=" + base64.b64encode(server_signature)


@pytest.mark.parametrize("mechanism,user", [("PLAIN", "alice"), ("SCRAM-SHA-256", "bob,jr")])
def test_sasl_passes_through_and_names_the_principal(tmp_path, mechanism, user):
    upstream = SaslBroker()
    try:
        registry = kip714.SubscriptionRegistry()
        registry.set("all", {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"})
        recorder = ParquetRecorder(tmp_path / "rec")
        pt = start_proxy(f"127.0.0.1:{upstream.port}", broker=kip714.TelemetryBroker(registry), recorder=recorder)
        try:
            assert pt.proxy.mode == "terminate"
            p = ck.Producer(
                {
                    "bootstrap.servers": pt.bootstrap,
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanisms": mechanism,
                    "sasl.username": user,
                    "sasl.password": USERS[user],
                    "log_level": 0,
                }
            )
            md = p.list_topics(timeout=10)
            assert {b.port for b in md.brokers.values()} == set(pt.call(lambda: pt.proxy.broker_ports).values())

            def rows():
                recorder.flush()
                return read_recording(recorder.directory).to_pylist()

            # its first push answered, then its close sends the terminating push
            assert await_push_answered(
                p, lambda: pt.call(lambda: pt.proxy.broker.metrics()["push-request-count"]), timeout=20
            )
            del p
            gc.collect()
            assert wait(lambda: any(r["terminating"] for r in rows()), 10)
            recorded = rows()
        finally:
            pt.stop()
    finally:
        upstream.stop()
    assert user in upstream.authenticated  # the upstream authenticated the client
    assert {r["principal"] for r in recorded} == {f"User:{user}"}
    assert {r["error_code"] for r in recorded} == {0} and {r["node_id"] for r in recorded} == {"1"}


def test_failed_authentication_leaves_the_principal_anonymous(tmp_path):
    upstream = SaslBroker()
    try:
        pt = start_proxy(f"127.0.0.1:{upstream.port}")
        try:
            p = ck.Producer(
                {
                    "bootstrap.servers": pt.bootstrap,
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanisms": "PLAIN",
                    "sasl.username": "alice",
                    "sasl.password": "wrong",
                    "log_level": 0,
                }
            )
            with pytest.raises(ck.KafkaException):
                p.list_topics(timeout=3)
            principals = pt.call(lambda: {c.identity.principal for c in pt.proxy.connections})
            del p
        finally:
            pt.stop()
    finally:
        upstream.stop()
    assert upstream.authenticated == []
    assert principals <= {"User:ANONYMOUS"}
