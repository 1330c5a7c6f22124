"""The ``record`` group of ``kip714 bench``, and the push load it (and the ``--record-sync`` test) drives.

``kip714 serve --record DIR`` runs in a child process, with and without ``--record-sync``, rounds alternating
in the same run; :func:`push_load` drives it from this process with several concurrent raw Kafka-protocol
clients (asyncio, one connection each). Every accepted push needs its own client instance (Kafka's rate limit
accepts the first push after a GetTelemetrySubscriptions early, the next only a push interval later), so a
client pipelines ``depth`` Gets (zero instance id: a new instance each), then the ``depth`` pushes of those
instances (each a unique ~1 KB payload), and keeps every push whose response it read with error code 0. The
rate measured is accepted pushes per second, answers read by the client.
"""

from __future__ import annotations

import asyncio
import re
import signal
import struct
import sys
import tempfile
import time
from typing import Any

from kip714._protocol import (
    GetTelemetrySubscriptionsRequest,
    PushTelemetryRequest,
    decode_response,
    encode_request,
)

from ..harness import Bench
from .endpoint import EndpointProcess

__all__ = ["PushLoad", "ServeProcess", "push_load", "push_load_async", "run"]

_GET, _PUSH = 71, 72
_SIZE = struct.Struct(">i")


class PushLoad:
    """What a :func:`push_load` saw: ``accepted`` maps each payload (bytes) whose response the client read
    with error code 0 to its client instance id; ``codes`` counts every push answer read by error code;
    ``errors`` counts connections that ended in an error (e.g. the server was killed); ``latencies``: seconds
    from sending each accepted push to reading its answer."""

    def __init__(self) -> None:
        self.accepted: dict[bytes, Any] = {}
        self.latencies: list[float] = []
        self.codes: dict[int, int] = {}
        self.errors = 0
        self.seconds = 0.0


async def _read(reader: asyncio.StreamReader, api_key: int, corr: int):
    size = _SIZE.unpack(await reader.readexactly(4))[0]
    resp = decode_response(await reader.readexactly(size), api_key, 0)
    if resp.correlation_id != corr:
        raise AssertionError(f"response {resp.correlation_id} out of order, expected {corr}")
    return resp.body


async def _client(
    n: int, host: str, port: int, deadline: float, depth: int, payload_bytes: int, out: PushLoad, stop: asyncio.Event
) -> None:
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        out.errors += 1
        return
    corr = 0
    seq = 0
    pad = b"x" * max(0, payload_bytes - 32)
    try:
        while time.monotonic() < deadline and not stop.is_set():
            first = corr
            writer.write(
                b"".join(
                    encode_request(GetTelemetrySubscriptionsRequest(), corr + i, f"load-{n}", 0) for i in range(depth)
                )
            )
            corr += depth
            subs = [await _read(reader, _GET, first + i) for i in range(depth)]
            pushes = []
            sent = time.perf_counter()
            for sub in subs:
                if sub.error_code:
                    continue
                payload = b"%d-%d|" % (n, seq) + pad
                seq += 1
                pushes.append((corr, payload, sub.client_instance_id))
                writer.write(
                    encode_request(
                        PushTelemetryRequest(sub.client_instance_id, sub.subscription_id, metrics=payload),
                        corr,
                        f"load-{n}",
                        0,
                    )
                )
                corr += 1
            for c, payload, instance in pushes:
                code = (await _read(reader, _PUSH, c)).error_code
                out.codes[code] = out.codes.get(code, 0) + 1
                if code == 0:
                    out.accepted[payload] = instance
                    out.latencies.append(time.perf_counter() - sent)
    except (OSError, asyncio.IncompleteReadError):
        out.errors += 1
    finally:
        writer.close()


async def push_load_async(
    host: str,
    port: int,
    seconds: float,
    clients: int = 8,
    depth: int = 4,
    payload_bytes: int = 1024,
    stop: asyncio.Event | None = None,
    out: PushLoad | None = None,
) -> PushLoad:
    """Push to ``host:port`` from ``clients`` connections for ``seconds`` (or until ``stop`` is set, or the
    server goes away); ``out`` (filled as answers are read) lets the caller watch the load."""
    out = out if out is not None else PushLoad()
    stop = stop or asyncio.Event()
    started = time.monotonic()
    await asyncio.gather(
        *(_client(n, host, port, started + seconds, depth, payload_bytes, out, stop) for n in range(clients))
    )
    out.seconds = time.monotonic() - started
    return out


def push_load(
    host: str, port: int, seconds: float, clients: int = 8, depth: int = 4, payload_bytes: int = 1024
) -> PushLoad:
    """:func:`push_load_async` in a new event loop."""
    return asyncio.run(push_load_async(host, port, seconds, clients, depth, payload_bytes))


class ServeProcess(EndpointProcess):
    """``kip714 serve --metrics '*' --record DIR [--record-sync]`` in a child process on a free loopback port
    (its stderr drained into :attr:`log`; :meth:`stop` is SIGTERM, a clean stop that flushes and closes the
    recording)."""

    def __init__(self, record_dir: str, sync: bool, extra: tuple[str, ...] = (), timeout_s: float = 60.0) -> None:
        cmd = [
            sys.executable,
            "-m",
            "kip714",
            "serve",
            "--port",
            "0",
            "--metrics",
            "*",
            "--record",
            record_dir,
            "--summary-interval",
            "0",
            "--log-level",
            "info",
            *extra,
        ]
        if sync:
            cmd.append("--record-sync")
        super().__init__(cmd, timeout_s)

    def kill(self) -> None:
        """SIGKILL (no flush, no close)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)


def windows(quick: bool) -> tuple[float, int]:
    """The seconds of each round's push load, and the rounds of each mode: a full run, or a ``--quick`` one."""
    return (1.5, 2) if quick else (5.0, 4)


def run(bench: Bench) -> None:
    """Accepted pushes/s of ``kip714 serve --record`` with and without ``--record-sync`` (rounds alternate):
    8 clients with 4 pushes in flight each, and (full run) 64 clients with 8 each — a group commit holds the
    pushes in flight, so the cost depends on how many there are."""
    import statistics

    G = "record"
    if bench.cases is not None:
        bench.notes.append("record: child processes and sockets, not a pytest-benchmark case")
        return
    try:
        import pyarrow  # noqa: F401
    except ImportError as exc:
        bench.skip(G, "pyarrow", f"not installed ({exc})")
        return
    seconds, rounds = windows(bench.quick)
    for clients, depth in [(8, 4)] + ([] if bench.quick else [(64, 8)]):
        rates: dict[bool, list[float]] = {False: [], True: []}
        latency: dict[bool, list[float]] = {False: [], True: []}
        per_commit: list[float] = []
        for _ in range(rounds):
            for sync in (False, True):
                with tempfile.TemporaryDirectory(prefix="kip714-bench-record-") as tmp:
                    serve = ServeProcess(tmp, sync)
                    try:
                        load = push_load("127.0.0.1", serve.port, seconds, clients=clients, depth=depth)
                    finally:
                        serve.stop()
                    rates[sync].append(len(load.accepted) / load.seconds)
                    latency[sync].extend(load.latencies)
                    m = re.findall(r"commits=(\d+)", "".join(serve.log))
                    if sync and m:
                        per_commit.append(len(load.accepted) / max(1, int(m[-1])))
        plain = statistics.median(rates[False])
        synced = statistics.median(rates[True])
        bench.log(
            f"[{G}] {clients}x{depth}: rounds without sync {', '.join(f'{r:,.0f}' for r in rates[False])} "
            f"pushes/s; with {', '.join(f'{r:,.0f}' for r in rates[True])} pushes/s"
        )
        note = (
            f"{clients} raw clients, each pipelining {depth} Gets then {depth} pushes of ~1 KB; serve in a child "
            f"process; {rounds} alternating rounds of {seconds:g} s, medians"
        )
        if per_commit:
            note += f"; ~{statistics.median(per_commit):.0f} pushes per group commit"
        lat = {k: statistics.median(v) * 1000 if v else float("nan") for k, v in latency.items()}
        note += f"; median push answer latency {lat[True]:.1f} ms with, {lat[False]:.1f} ms without"
        bench.log(
            f"[{G}] {clients}x{depth}: median push answer latency {lat[True]:.1f} ms with --record-sync, "
            f"{lat[False]:.1f} ms without"
        )
        bench.add_row(
            G,
            f"record.sync.{clients}x{depth}",
            f"accepted pushes/s with --record-sync vs without, {clients} clients x {depth} in flight",
            {"median": 1e9 / synced},
            {"median": 1e9 / plain},
            peer_name="without --record-sync",
            unit="rate",
            note=note,
        )
