"""A KIP-714 client written without kip714 — raw sockets, kafka-python's protocol classes, opentelemetry-proto and
the standard library's gzip — so that the conformance lab is not judged by itself. One flag turns on one defect.

The correct behaviour (no defect): re-Get at once on UNKNOWN_SUBSCRIPTION_ID and UNSUPPORTED_COMPRESSION_TYPE; stop
on INVALID_REQUEST and INVALID_RECORD; wait PushIntervalMs on THROTTLING_QUOTA_EXCEEDED and TELEMETRY_TOO_LARGE;
fit TelemetryMaxBytes by dropping the metrics (an empty blob); reconnect to the next broker with the same instance id
when the connection goes; a terminating push on close (abandoned on UNKNOWN_SUBSCRIPTION_ID); DeltaTemporality
followed; the first push after a Get jittered uniformly in 0.6–1.4 × PushIntervalMs.
"""

from __future__ import annotations

import gzip
import random
import select
import socket
import struct
import time
import uuid
from typing import Any

import kp_schemas
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest, MetadataResponse
from opentelemetry.proto.metrics.v1 import metrics_pb2

KP = {
    name: type(name, (ApiMessage,), {}, load_json=kp_schemas)
    for name in (
        "GetTelemetrySubscriptionsRequest",
        "GetTelemetrySubscriptionsResponse",
        "PushTelemetryRequest",
        "PushTelemetryResponse",
    )
}

#: The defects, each the opposite of one KIP-714 duty, and the scenario that must catch it.
DEFECTS = {
    "ignores_max_bytes": "telemetry_too_large",
    "oversized_terminating_push": "telemetry_too_large",
    "no_reget_after_unknown_subscription": "subscription_changed",
    "pushes_after_invalid_record": "invalid_record",
    "null_payload_when_nothing_matches": "unmatched_metrics",
    "no_terminating_push": "terminating_push",
    "new_instance_id_per_connection": "first_contact",
    "first_push_at_once": "push_interval",
}

_ZERO = uuid.UUID(int=0)
_NONE, _GZIP = 0, 1
DELTA, CUMULATIVE = 1, 2


def _metrics(requested: list[str], delta: bool, counter: int) -> metrics_pb2.MetricsData:
    """This client's metrics, those the subscription asks for (``["*"]`` all, prefixes otherwise)."""
    temporality = DELTA if delta else CUMULATIVE
    now = time.time_ns()
    data = metrics_pb2.MetricsData()
    rm = data.resource_metrics.add()
    attr = rm.resource.attributes.add()
    attr.key, attr.value.string_value = "client_id", "broken-client"
    sm = rm.scope_metrics.add()

    def wanted(name: str) -> bool:
        return "*" in requested or any(name.startswith(p) for p in requested)

    if wanted("org.apache.kafka.producer.record.send.total"):
        m = sm.metrics.add()
        m.name = "org.apache.kafka.producer.record.send.total"
        m.sum.aggregation_temporality, m.sum.is_monotonic = temporality, True
        p = m.sum.data_points.add()
        p.time_unix_nano, p.as_double = now, float(7 if delta else 7 * counter)
    if wanted("org.apache.kafka.producer.node.request.latency.avg"):
        m = sm.metrics.add()
        m.name = "org.apache.kafka.producer.node.request.latency.avg"
        p = m.gauge.data_points.add()
        p.time_unix_nano, p.as_double = now, 2.5
        a = p.attributes.add()
        a.key, a.value.int_value = "node_id", 1
    if wanted("com.example.broken.request.latency"):
        m = sm.metrics.add()
        m.name = "com.example.broken.request.latency"
        m.histogram.aggregation_temporality = temporality
        p = m.histogram.data_points.add()
        p.time_unix_nano, p.count, p.sum = now, 3, 12.0
        p.explicit_bounds.extend([1.0, 10.0])
        p.bucket_counts.extend([1, 1, 1])
    return data


class _Conn:
    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=5.0)
        self.corr = 0

    def call(self, request: Any, response_class: Any, version: int) -> Any:
        self.corr += 1
        request.with_header(correlation_id=self.corr, client_id="broken-client")
        self.sock.sendall(request.encode(header=True, framed=True))
        size_prefix = self._read(4)
        frame = self._read(struct.unpack(">i", size_prefix)[0])
        if response_class is None:
            return None
        return response_class.decode(size_prefix + frame, version=version, header=True, framed=True)

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def wait_idle(self, seconds: float) -> bool:
        """Sleep up to ``seconds`` on the socket; False when the broker closed it."""
        readable, _, _ = select.select([self.sock], [], [], max(0.0, seconds))
        if readable:
            try:
                return self.sock.recv(1, socket.MSG_PEEK) != b""
            except OSError:
                return False
        return True

    def close(self) -> None:
        self.sock.close()


class BrokenClient:
    """``client(bootstrap, seconds)`` for :func:`kip714.conformance.run`; ``defect`` is a key of :data:`DEFECTS`
    or None for the correct client."""

    def __init__(
        self, defect: str | None = None, on_terminating_117: str = "abandon", terminate_on_118: bool = False
    ) -> None:
        """``on_terminating_117``: what follows a terminating push answered UNKNOWN_SUBSCRIPTION_ID — "abandon"
        or "resubscribe" (a Get, then the terminating push again: the KIP's two choices), or "repush" (the
        terminating push again without a Get: wrong). ``terminate_on_118``: answer TELEMETRY_TOO_LARGE with the
        terminating push at once, then nothing more (with ``ignores_max_bytes``: a terminating push still too
        large)."""
        assert defect is None or defect in DEFECTS
        assert on_terminating_117 in ("abandon", "resubscribe", "repush")
        self.defect = defect
        self.on_terminating_117 = on_terminating_117
        self.terminate_on_118 = terminate_on_118
        self.__qualname__ = f"BrokenClient({defect}, {on_terminating_117}, {terminate_on_118})"

    def __call__(self, bootstrap: str, seconds: float) -> None:
        host, _, port = bootstrap.rpartition(":")
        brokers = [(host, int(port))]
        end = time.monotonic() + seconds
        rng = random.Random()
        iid, sub = _ZERO, None
        mode, next_at, pushes = "get", time.monotonic(), 0
        conn: _Conn | None = None
        attempt = 0
        while time.monotonic() < end:
            if conn is None:
                conn = _Conn(brokers[attempt % len(brokers)])
                conn.call(
                    ApiVersionsRequest(version=3, client_software_name="broken-client", client_software_version="1.0"),
                    None,
                    3,
                )
                meta = conn.call(MetadataRequest(version=12, topics=[]), MetadataResponse, 12)
                brokers = [(b.host, b.port) for b in meta.brokers] or brokers
                if self.defect == "new_instance_id_per_connection" and iid != _ZERO:
                    iid, mode, next_at = _ZERO, "get", time.monotonic()
            wait = min(next_at, end) - time.monotonic()
            if wait > 0 or mode == "stopped":
                if not conn.wait_idle(min(max(wait, 0.05), end - time.monotonic())):
                    conn.close()
                    conn, attempt = None, attempt + 1
                continue
            now = time.monotonic()
            try:
                if mode == "get":
                    resp = conn.call(
                        KP["GetTelemetrySubscriptionsRequest"](version=0, client_instance_id=iid),
                        KP["GetTelemetrySubscriptionsResponse"],
                        0,
                    )
                    if resp.error_code:
                        next_at = now + (sub.push_interval_ms if sub else 30000) / 1000
                        continue
                    iid, sub = resp.client_instance_id, resp
                    interval = sub.push_interval_ms / 1000
                    if not sub.requested_metrics:
                        next_at = time.monotonic() + interval
                        continue
                    mode = "push"
                    factor = 0.0 if self.defect == "first_push_at_once" else rng.uniform(0.6, 1.4)
                    next_at = time.monotonic() + factor * interval
                elif mode == "push":
                    pushes += 1
                    code = self._push(conn, iid, sub, pushes, terminating=False)
                    interval = sub.push_interval_ms / 1000
                    if code == 0 or (code == 117 and self.defect == "no_reget_after_unknown_subscription"):
                        next_at = time.monotonic() + interval
                    elif code in (117, 76):
                        mode, next_at = "get", time.monotonic()
                    elif code == 87 and self.defect == "pushes_after_invalid_record":
                        next_at = time.monotonic() + interval
                    elif code in (42, 87):
                        mode = "stopped"
                    elif code == 118 and self.terminate_on_118:
                        pushes += 1
                        self._push(conn, iid, sub, pushes, terminating=True)
                        mode = "stopped"
                    else:  # 89, 118 and anything else: Get again after the interval
                        mode, next_at = "get", time.monotonic() + interval
            except (OSError, ConnectionError, ValueError):
                conn.close()
                conn, attempt = None, attempt + 1
                if mode != "stopped":
                    mode, next_at = "get", time.monotonic()
        if conn is not None and mode == "push" and self.defect != "no_terminating_push":
            try:
                pushes += 1
                code = self._push(conn, iid, sub, pushes, terminating=True)
                if code == 117 and self.on_terminating_117 != "abandon":
                    if self.on_terminating_117 == "resubscribe":
                        sub = conn.call(
                            KP["GetTelemetrySubscriptionsRequest"](version=0, client_instance_id=iid),
                            KP["GetTelemetrySubscriptionsResponse"],
                            0,
                        )
                    self._push(conn, iid, sub, pushes + 1, terminating=True)
            except (OSError, ConnectionError, ValueError):
                pass
        if conn is not None:
            conn.close()

    def _push(self, conn: _Conn, iid: uuid.UUID, sub: Any, n: int, terminating: bool) -> int:
        requested = list(sub.requested_metrics)
        data = _metrics(requested, bool(sub.delta_temporality), n)
        raw = data.SerializeToString()
        matched = bool(data.resource_metrics[0].scope_metrics[0].metrics)
        ctype = _GZIP if _GZIP in sub.accepted_compression_types else _NONE
        blob: bytes | None = gzip.compress(raw) if ctype == _GZIP and matched else raw if matched else b""
        if not matched:
            ctype = _NONE
            if self.defect == "null_payload_when_nothing_matches":
                blob = None
        oversized = self.defect == "ignores_max_bytes" or (terminating and self.defect == "oversized_terminating_push")
        if blob and len(blob) > sub.telemetry_max_bytes and not oversized:
            ctype, blob = _NONE, b""  # fit by dropping the metrics
        request = KP["PushTelemetryRequest"](
            version=0,
            client_instance_id=iid,
            subscription_id=sub.subscription_id,
            terminating=terminating,
            compression_type=ctype,
            metrics=blob,
        )
        resp = conn.call(request, KP["PushTelemetryResponse"], 0)
        return int(resp.error_code)
