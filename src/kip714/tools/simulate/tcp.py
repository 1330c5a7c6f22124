"""The TCP driver: every client of a fleet over its own connection to a ``kip714 serve`` endpoint (or
anything speaking the protocol), in real time with asyncio: ApiVersions v3 with the client's software name
and version, Metadata, then the telemetry requests as its state machine schedules them, and a terminating
push when the time is up. Every wait is bounded."""

from __future__ import annotations

import asyncio
import ipaddress
import struct
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from kip714._enums import ApiKey
from kip714._protocol import ApiVersionsRequest, MetadataRequest, PushTelemetryRequest, decode_response, encode_request
from kip714.errors import Kip714Error

from .clients import FleetLayout, SimClient
from .stats import FleetStats

__all__ = ["TcpFleet", "drive", "is_loopback"]

_API_NAMES = {
    int(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS): "GetTelemetrySubscriptions",
    int(ApiKey.PUSH_TELEMETRY): "PushTelemetry",
}


class TcpFleet(FleetLayout, Protocol):
    """What the TCP driver uses of a :class:`~kip714.tools.simulate.Fleet`."""

    clients: list[SimClient]
    stats: FleetStats
    start_spread_ms: int

    def count_response(self, api: str, code: int, client: SimClient) -> None: ...

    def count_push(self, client: SimClient, body: PushTelemetryRequest, code: int) -> None: ...


async def drive(
    fleet: TcpFleet,
    host: str,
    port: int,
    duration_s: float,
    *,
    connect_timeout_s: float = 5.0,
    request_timeout_s: float = 10.0,
    close_timeout_s: float = 5.0,
    allow_remote: bool = False,
    progress: Callable[[FleetStats], Any] | None = None,
    progress_every_s: float = 1.0,
    max_start_spread_s: float | None = None,
    stop: threading.Event | None = None,
) -> FleetStats:
    """Drive every client over its own TCP connection to ``host:port`` in real time for ``duration_s``:
    ApiVersions v3 (the client's software name and version), Metadata, then GetTelemetrySubscriptions /
    PushTelemetry as its :class:`~kip714.ClientTelemetry` schedules them, and at the end the terminating
    push. Client starts are spread over ``min(start_spread_ms, duration/4)``. Every connect, request and
    close is bounded by its timeout, and the whole run by ``duration_s`` plus those timeouts. Only
    loopback hosts unless ``allow_remote``. ``stop`` (a ``threading.Event``) ends the run early: every client
    then closes as at the end (a terminating push, within one push interval)."""
    if not allow_remote and not is_loopback(host):
        raise ValueError(
            f"{host!r} is not a loopback address; pass allow_remote=True (--allow-remote) to simulate against it"
        )
    loop = asyncio.get_running_loop()
    wall0 = time.perf_counter()
    t_start = loop.time()
    stop_at = t_start + float(duration_s)
    spread = fleet.start_spread_ms / 1000.0
    spread = min(spread, float(duration_s) / 4.0)
    if max_start_spread_s is not None:
        spread = min(spread, max_start_spread_s)
    timeouts = (connect_timeout_s, request_timeout_s, close_timeout_s)
    tasks = [
        asyncio.create_task(
            _client(
                fleet,
                c,
                host,
                port,
                t_start + spread * (c.start_offset_ms / max(1, fleet.start_spread_ms)),
                stop_at,
                timeouts,
                stop,
            )
        )
        for c in fleet.clients
    ]
    reporter = None
    if progress is not None:

        async def report() -> None:
            while True:
                await asyncio.sleep(progress_every_s)
                fleet.stats.simulated_ms = int((loop.time() - t_start) * 1000)
                fleet.stats.wall_s = time.perf_counter() - wall0
                progress(fleet.stats)

        reporter = asyncio.create_task(report())
    budget = float(duration_s) + connect_timeout_s + request_timeout_s + close_timeout_s + 5.0
    try:
        done, not_done = await asyncio.wait(tasks, timeout=budget)
        for t in not_done:
            t.cancel()
        if not_done:
            await asyncio.wait(not_done, timeout=2.0)
        for t in done:
            exc = None if t.cancelled() else t.exception()
            if exc is not None:
                raise exc
    finally:
        if reporter is not None:
            reporter.cancel()
        fleet.stats.simulated_ms = int((loop.time() - t_start) * 1000)
        fleet.stats.wall_s = time.perf_counter() - wall0
    if progress is not None:  # the last progress line shows the final counts (terminating pushes included)
        progress(fleet.stats)
    return fleet.stats


async def _client(
    fleet: TcpFleet,
    client: SimClient,
    host: str,
    port: int,
    start_at: float,
    stop_at: float,
    timeouts: tuple[float, float, float],
    stop: threading.Event | None = None,
) -> None:
    connect_timeout, request_timeout, close_timeout = timeouts
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, start_at - loop.time()))
    if loop.time() >= stop_at:
        return
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), connect_timeout)
    except (OSError, asyncio.TimeoutError):
        fleet.stats.connect_failures += 1
        return
    conn = _TcpConnection(client, reader, writer)

    def now_ms() -> int:
        return time.time_ns() // 1_000_000

    try:
        resp = await conn.call(ApiVersionsRequest(client.software_name, client.software_version), 3, request_timeout)
        apis = {a.api_key: (a.min_version, a.max_version) for a in resp.body.api_keys}
        if (
            resp.body.error_code
            or int(ApiKey.PUSH_TELEMETRY) not in apis
            or int(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS) not in apis
        ):
            fleet.stats.connect_failures += 1
            return
        meta_max = apis.get(int(ApiKey.METADATA), (0, 12))[1]
        await conn.call(MetadataRequest(topics=[]), min(12, meta_max), request_timeout)
        client.start(fleet, time.time_ns, now_ms())
        fleet.stats.started += 1
        tel = client.telemetry
        assert tel is not None  # start() made it
        request_timeout_ms = int(request_timeout * 1000)
        if client.leave_after_ms is not None:  # a client told to leave early
            stop_at = min(stop_at, loop.time() + client.leave_after_ms / 1000.0)
        while True:
            remaining = stop_at - loop.time()
            if remaining <= 0 or not tel.enabled or (stop is not None and stop.is_set()):
                break
            wait = tel.time_to_next_update(request_timeout_ms, now_ms())
            if wait > 0:
                await asyncio.sleep(min(wait / 1000.0, remaining))
                continue
            body = tel.create_request(now_ms())
            if body is None:
                await asyncio.sleep(min(0.01, remaining))
                continue
            if not await _exchange(fleet, conn, client, body, request_timeout, now_ms):
                break
        if client.leave_after_ms is not None and not client.leave_cleanly and client.leaving(now_ms()):
            tel.close()  # gone without a terminating push: a crash or a hang
            client.closed = True
            return
        if tel.enabled and tel.initiate_close(now_ms()):
            body = tel.create_request(now_ms())
            if body is not None:
                await _exchange(fleet, conn, client, body, close_timeout, now_ms)
        tel.close()
        client.closed = True
    except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError, Kip714Error):
        fleet.stats.failed_requests += 1
    finally:
        writer.close()
        try:
            await asyncio.wait_for(writer.wait_closed(), 1.0)
        except (OSError, asyncio.TimeoutError, ConnectionError):
            pass


async def _exchange(
    fleet: TcpFleet, conn: _TcpConnection, client: SimClient, body: Any, timeout: float, now_ms: Callable[[], int]
) -> bool:
    tel = client.telemetry
    assert tel is not None  # exchanges follow client.start()
    api = _API_NAMES[type(body).API_KEY]
    fleet.stats.requests[api] += 1
    if api == "GetTelemetrySubscriptions":
        client.gets += 1
    try:
        resp = await conn.call(body, 0, timeout)
    except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError, Kip714Error) as exc:
        fleet.stats.failed_requests += 1
        client.failed_requests += 1
        tel.handle_failed_request(now_ms(), exc)
        return False
    code = resp.body.error_code
    fleet.count_response(api, code, client)
    if type(body) is PushTelemetryRequest:
        fleet.count_push(client, body, code)
        otlp_total = tel.stats.uncompressed_bytes_pushed
        if code == 0:
            fleet.stats.payloads += 1 if body.metrics else 0
            fleet.stats.uncompressed_bytes += otlp_total - client._otlp_seen
        client._otlp_seen = otlp_total
    tel.handle_response(resp.body, now_ms())
    return True


class _TcpConnection:
    """One client's connection: sequential request/response with correlation ids."""

    def __init__(self, client: SimClient, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.client = client
        self.reader = reader
        self.writer = writer
        self.correlation_id = 0

    async def call(self, body: Any, api_version: int, timeout: float):
        self.correlation_id += 1
        cid = self.correlation_id
        self.writer.write(encode_request(body, cid, self.client.client_id, api_version))

        async def exchange():
            await self.writer.drain()
            (size,) = struct.unpack(">i", await self.reader.readexactly(4))
            if size < 0 or size > 16 << 20:
                raise ConnectionError(f"bad response size {size}")
            return await self.reader.readexactly(size)

        frame = await asyncio.wait_for(exchange(), timeout)
        resp = decode_response(frame, type(body).API_KEY, api_version)
        if resp.correlation_id != cid:
            raise ConnectionError(f"correlation id {resp.correlation_id} does not match {cid}")
        return resp


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address (the only targets without ``allow_remote``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False
