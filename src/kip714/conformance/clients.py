"""Ready clients for the lab, each one run per scenario: ``python clients.py KIND BOOTSTRAP SECONDS [key=value …]``.

* ``confluent-producer`` / ``confluent-consumer``: librdkafka through confluent-kafka, with its default
  configuration (``key=value`` arguments are added to it, e.g. ``enable.sparse.connections=false``). The client
  polls for SECONDS, then closes (``close()``: librdkafka's terminating push happens there).
* ``kip714-client``: kip714's own :class:`~kip714.ClientTelemetry` over a plain socket, with a small
  :class:`~kip714.MetricsCollector` (sums, gauges and a histogram). It keeps one connection for telemetry and,
  when that connection goes, opens one to the next broker Metadata named and carries on with the same instance.

The lab runs this file by path (``kip714 conformance --client confluent-producer``), so it imports nothing of
kip714 for the librdkafka clients: a scenario's client starts in the time confluent-kafka takes to import.
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
# run as a file, this folder is sys.path[0]: its module names must not shadow anything the clients import
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import random
import select
import socket
import struct
import time
from typing import Any

__all__ = ["main", "run_confluent", "run_kip714_client"]

KINDS = ("confluent-producer", "confluent-consumer", "kip714-client")


def _value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        return text


def run_confluent(kind: str, bootstrap: str, seconds: float, extra: dict[str, Any] | None = None) -> None:
    """A confluent-kafka producer or consumer that polls for ``seconds`` and closes."""
    import confluent_kafka

    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "client.id": f"kip714-conformance-{kind.split('-')[1]}"}
    conf.update(extra or {})
    client: Any
    if kind == "confluent-producer":
        client = confluent_kafka.Producer(conf)
    else:
        client = confluent_kafka.Consumer({"group.id": "kip714-conformance", **conf})
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        client.poll(min(0.05, max(0.0, end - time.monotonic())))
    client.close()


# ------------------------------------------------------------------------------------------ kip714-client


class _Connection:
    """One blocking socket to one broker, requests answered in order."""

    def __init__(self, address: tuple[str, int], client_id: str) -> None:
        self.sock = socket.create_connection(address, timeout=5.0)
        self.client_id = client_id
        self.correlation = 0

    def call(self, body: Any, api_version: int, timeout: float = 5.0) -> Any:
        from kip714 import decode_response, encode_request

        self.correlation += 1
        self.sock.settimeout(timeout)
        self.sock.sendall(encode_request(body, self.correlation, self.client_id, api_version))
        size = struct.unpack(">i", self._read(4))[0]
        return decode_response(self._read(size), type(body).API_KEY, api_version)

    def _read(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return bytes(data)

    def closed_while_idle(self, wait: float) -> bool:
        """Wait up to ``wait`` seconds; True if the broker closed the connection meanwhile."""
        readable, _, _ = select.select([self.sock], [], [], max(0.0, wait))
        if not readable:
            return False
        try:
            self.sock.setblocking(False)
            return self.sock.recv(1, socket.MSG_PEEK) == b""
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True
        finally:
            self.sock.setblocking(True)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _collector() -> tuple[Any, Any]:
    from kip714 import MetricsCollector

    collector = MetricsCollector(layout="java", resource_attributes={"client_id": "kip714-conformance"})
    sent = collector.counter("org.apache.kafka.producer.record.send.total", {"client_id": "kip714-conformance"})
    errors = collector.counter("org.apache.kafka.producer.record.error.total", {"client_id": "kip714-conformance"})
    rate = collector.gauge("org.apache.kafka.producer.node.request.latency.avg", {"node_id": "1"})
    latency = collector.histogram("io.kip714.client.request.latency", [1.0, 5.0, 25.0, 100.0])
    rng = random.Random()

    def tick() -> None:
        sent.add(rng.randint(1, 50))
        errors.add(0)
        rate.set(rng.uniform(1.0, 5.0))
        latency.record(rng.uniform(0.5, 60.0))

    return collector, tick


def run_kip714_client(bootstrap: str, seconds: float) -> None:
    """kip714's ClientTelemetry over one telemetry connection at a time (see the module docstring)."""
    import kip714
    from kip714 import ClientTelemetry
    from kip714.wire import ApiVersionsRequest, MetadataRequest

    host, _, port = bootstrap.rpartition(":")
    brokers = [(host, int(port))]
    collector, tick = _collector()

    class _Collector:
        def collect(self, now_ns: int | None = None, delta: bool = True, selector: Any = None) -> bytes:
            tick()
            return bytes(collector.collect(now_ns=now_ns, delta=delta, selector=selector))

        def reset(self) -> None:
            collector.reset()

    telemetry = ClientTelemetry(_Collector(), disconnect_backoff_ms=0)
    end = time.monotonic() + seconds

    def now_ms() -> int:
        return time.monotonic_ns() // 1_000_000

    def connect(attempt: int) -> _Connection:
        address = brokers[attempt % len(brokers)]
        conn = _Connection(address, "kip714-conformance")
        conn.call(ApiVersionsRequest("kip714-client", kip714.__version__), 3)
        meta = conn.call(MetadataRequest(topics=[]), 12).body
        learned = [(b.host, b.port) for b in meta.brokers]
        if learned:
            brokers[:] = learned
        return conn

    conn: _Connection | None = None
    attempt = 0
    while time.monotonic() < end:  # disabled telemetry: the client runs on, silent
        if conn is None:
            try:
                conn = connect(attempt)
            except OSError:
                attempt += 1
                time.sleep(min(0.2, max(0.0, end - time.monotonic())))
                continue
        wait = telemetry.time_to_next_update(5000, now_ms()) / 1000.0
        if wait > 0:
            if conn.closed_while_idle(min(wait, end - time.monotonic())):
                conn.close()
                conn, attempt = None, attempt + 1
            continue
        body = telemetry.create_request(now_ms())
        if body is None:
            continue
        try:
            telemetry.handle_response(conn.call(body, 0).body, now_ms())
        except (OSError, ConnectionError, kip714.Kip714Error) as exc:
            telemetry.handle_failed_request(now_ms(), exc if isinstance(exc, kip714.Kip714Error) else None)
            conn.close()
            conn, attempt = None, attempt + 1
    if conn is not None and telemetry.initiate_close(now_ms()):
        body = telemetry.create_request(now_ms())
        if body is not None:
            try:
                telemetry.handle_response(conn.call(body, 0, timeout=1.0).body, now_ms())
            except (OSError, ConnectionError, kip714.Kip714Error):
                pass
    telemetry.close()
    if conn is not None:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3 or args[0] not in KINDS:
        print(f"usage: clients.py {{{'|'.join(KINDS)}}} BOOTSTRAP SECONDS [key=value ...]", file=sys.stderr)
        return 2
    kind, bootstrap, seconds = args[0], args[1], float(args[2])
    extra = {}
    for item in args[3:]:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"clients.py: {item!r} is not key=value", file=sys.stderr)
            return 2
        extra[key] = _value(value)
    if kind == "kip714-client":
        run_kip714_client(bootstrap, seconds)
    else:
        run_confluent(kind, bootstrap, seconds, extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
