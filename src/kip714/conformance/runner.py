"""Running the scenarios: one fresh lab (broker, registry, ports) and one fresh client per scenario.

The client under test is a command template (``{bootstrap}``, ``{seconds}``, ``{ms}`` filled in; run in its
own process group, killed only if it overstays), a built-in name (:data:`BUILTIN_CLIENTS`), a Python callable
``client(bootstrap, seconds)`` run in a thread, or — ``listen`` — whatever connects to fixed ports, one
session per scenario. ``jobs`` runs that many scenarios at once, each on its own ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..broker.manager import TelemetryBroker
from ..broker.subscriptions import SubscriptionRegistry
from .lab import NODE_IDS, LabCluster
from .results import Client, Result
from .scenarios import SCENARIO_IDS, Scenario, Verdict, compression_list, scenario_class
from .trace import ConnectionEvent, Exchange, Trace, codec_name

__all__ = [
    "BUILTIN_CLIENTS",
    "DEFAULT_INTERVAL_MS",
    "DEFAULT_STARTUP_S",
    "Client",
    "Result",
    "client_argv",
    "run",
]

log = logging.getLogger("kip714.conformance")

#: The default PushIntervalMs of the lab's subscriptions (the whole set then runs in under 2 minutes).
DEFAULT_INTERVAL_MS = 500
#: Seconds a client gets to start and send its first Get; ``{seconds}`` is this plus the scenario's active time.
DEFAULT_STARTUP_S = 2.5
#: How long past ``{seconds}`` the lab waits for the client to exit before it kills it (an error).
EXIT_GRACE_S = 10.0
#: How long the lab waits for the first connection after the start allowance (then: error).
CONNECT_GRACE_S = 10.0
#: In --listen, a session ends once no connection has been open for this long (and the scenario's time is up).
LISTEN_QUIET_S = 1.0
#: Client names that stand for a ready command (``python clients.py NAME {bootstrap} {seconds}``).
BUILTIN_CLIENTS = ("confluent-producer", "confluent-consumer", "kip714-client")


@dataclass
class _Options:
    interval_ms: int
    compression: list[int]
    startup_s: float
    host: str
    out: Path | None
    listen: tuple[str, int] | None
    listen_wait_s: float
    say: Callable[[str], None]
    extra: dict[str, Any] = field(default_factory=dict)


def client_argv(client: str, bootstrap: str, seconds: float) -> list[str]:
    """The command line for one run: a built-in name, or the template with its placeholders filled in."""
    text = f"{seconds:.1f}"
    if client in BUILTIN_CLIENTS:
        return [sys.executable, str(Path(__file__).with_name("clients.py")), client, bootstrap, text]
    if "{bootstrap}" not in client:
        raise ValueError(
            "the client command must contain {bootstrap} (and {seconds} or {ms}: how long to run), or "
            f"be one of {', '.join(BUILTIN_CLIENTS)}"
        )
    argv = shlex.split(client)
    return [
        a.replace("{bootstrap}", bootstrap).replace("{seconds}", text).replace("{ms}", str(round(seconds * 1000)))
        for a in argv
    ]


def _tail(path: Path | None, lines: int = 8) -> str:
    if path is None:
        return ""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class _Run:
    """One scenario against one client: the lab, the client, the trace, the verdict."""

    def __init__(self, cls: type[Scenario], opts: _Options) -> None:
        self.opts = opts
        self.scenario = cls(opts.interval_ms, opts.compression)
        self.broker = TelemetryBroker(SubscriptionRegistry(), node_id=NODE_IDS[0])
        self.scenario.setup(self.broker)
        self.seconds = round(opts.startup_s + self.scenario.active_s(), 1)
        self.trace = Trace(time.monotonic_ns())
        ports = (opts.listen[1], opts.listen[1] + 1) if opts.listen else (0, 0)
        self.lab = LabCluster(
            self.broker, self.trace, self.scenario, opts.listen[0] if opts.listen else opts.host, ports
        )
        self.launch_error: str | None = None
        self.lab_error: str | None = None
        self.log_path: Path | None = None

    async def execute(self, client: Client | None) -> Result:
        started = time.monotonic()
        await self.lab.start()
        try:
            self.trace.t0_ns = time.monotonic_ns()
            if self.opts.listen is not None:
                await self._listen_session()
            elif callable(client):
                await self._thread(client)
            elif isinstance(client, str):
                await self._process(client)
            await self._settle()
        finally:
            await self.lab.close()
        verdict = self._verdict()
        software = self.trace.software
        evidence: dict[str, Any] = {
            "notes": verdict.notes,
            "frames": [f.to_json() for f in verdict.frames],
            "push_interval_ms": self.scenario.interval_ms,
            "accepted_compression_types": [codec_name(c) for c in self.opts.compression],
            "client_seconds": self.seconds,
            "exit_status": self.trace.exit_status,
        }
        if self.log_path is not None and self.opts.out is not None:
            evidence["log"] = str(self.log_path.relative_to(self.opts.out))
        return Result(
            self.scenario.id,
            verdict.status,
            verdict.why,
            self.scenario.rule,
            evidence,
            software[0] if software else None,
            software[1] if software else None,
            time.monotonic() - started,
        )

    # -------------------------------------------------------------------------------------- the client

    def _connected(self) -> bool:
        return bool(self.trace.connections)

    async def _wait_connection(self, timeout: float, done: asyncio.Future[Any]) -> bool:
        """Wait until the client opened a connection (True) or ``done`` resolved / ``timeout`` passed."""
        deadline = time.monotonic() + timeout
        while not self._connected():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or done.done():
                return self._connected()
            self.lab.activity.clear()
            waiter = asyncio.ensure_future(self.lab.activity.wait())
            await asyncio.wait({waiter, done}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
        return True

    async def _process(self, template: str) -> None:
        argv = client_argv(template, self.lab.bootstrap, self.seconds)
        out = self.opts.out
        if out is not None:
            (out / "logs").mkdir(parents=True, exist_ok=True)
            self.log_path = out / "logs" / f"{self.scenario.id}.txt"
            sink: IO[bytes] = self.log_path.open("wb")
        else:
            handle, name = tempfile.mkstemp(prefix=f"kip714-conformance-{self.scenario.id}-", suffix=".txt")
            sink = os.fdopen(handle, "wb")
            self.log_path = Path(name)
        try:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=sink,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                self.launch_error = f"cannot start {argv[0]!r}: {exc.strerror or exc}"
                return
            exited = asyncio.ensure_future(proc.wait())
            if not await self._wait_connection(self.opts.startup_s + CONNECT_GRACE_S, exited):
                if not exited.done():
                    self._kill(proc)
                    self.trace.exit_detail = "killed by the lab: no connection"
                await exited
                self.trace.exit_status = proc.returncode
                self.launch_error = self._no_connection_reason(proc.returncode)
                return
            remaining = self.seconds + EXIT_GRACE_S - self.trace.at(time.monotonic_ns())
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(exited), max(0.1, remaining))
            if not exited.done():
                self._kill(proc)
                await exited
                self.trace.exit_detail = "killed by the lab"
                self.launch_error = (
                    f"the client did not exit within {{seconds}} ({self.seconds} s) + "
                    f"{EXIT_GRACE_S:.0f} s; it must close itself after {{seconds}}"
                )
            self.trace.client_end = self.trace.at(time.monotonic_ns())
            self.trace.exit_status = proc.returncode
        finally:
            sink.close()
            if self.log_path is not None:
                self.trace.exit_detail = "\n".join(x for x in (self.trace.exit_detail, _tail(self.log_path)) if x)
            if out is None and self.log_path is not None:
                with contextlib.suppress(OSError):
                    self.log_path.unlink()
                self.log_path = None

    def _no_connection_reason(self, status: int | None) -> str:
        tail = _tail(self.log_path) if self.log_path is not None else ""
        if status is not None and "killed" not in self.trace.exit_detail:
            why = f"the client exited with status {status} without connecting to {self.lab.bootstrap}"
        else:
            why = (
                f"the client never connected to {self.lab.bootstrap} within "
                f"{self.opts.startup_s + CONNECT_GRACE_S:.0f} s"
            )
        return f"{why}{': ' + tail.splitlines()[-1] if tail else ''}"

    @staticmethod
    def _kill(proc: asyncio.subprocess.Process) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: the client and what it started

    async def _thread(self, client: Callable[[str, float], Any]) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[BaseException | None] = loop.create_future()

        def finish(error: BaseException | None) -> None:
            if not done.done():
                done.set_result(error)

        def target() -> None:
            error: BaseException | None = None
            try:
                client(self.lab.bootstrap, self.seconds)
            except BaseException as exc:
                error = exc
            loop.call_soon_threadsafe(finish, error)

        threading.Thread(target=target, name=f"conformance-client-{self.scenario.id}", daemon=True).start()
        if not await self._wait_connection(self.opts.startup_s + CONNECT_GRACE_S, done):
            self.launch_error = f"the client never connected to {self.lab.bootstrap}"
            if done.done() and done.result() is not None:
                self.launch_error += f": {done.result()!r}"
            return
        remaining = self.seconds + EXIT_GRACE_S - self.trace.at(time.monotonic_ns())
        try:
            error = await asyncio.wait_for(asyncio.shield(done), max(0.1, remaining))
        except asyncio.TimeoutError:
            self.launch_error = f"the client was still running {EXIT_GRACE_S:.0f} s after {{seconds}}"
            return
        self.trace.client_end = self.trace.at(time.monotonic_ns())
        self.trace.exit_status = 0 if error is None else 1
        if error is not None:
            self.trace.exit_detail = "".join(traceback.format_exception_only(type(error), error)).strip()

    async def _listen_session(self) -> None:
        say = self.opts.say
        say(
            f"scenario {self.scenario.id}: start the client now with bootstrap {self.lab.bootstrap} and let it run "
            f"{self.seconds:.1f} s, then close it normally ({self.scenario.summary})"
        )
        never: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if not await self._wait_connection(self.opts.listen_wait_s, never):
            self.launch_error = f"no client connected to {self.lab.bootstrap} within {self.opts.listen_wait_s:.0f} s"
            return
        first = self.trace.at(time.monotonic_ns())
        quiet_s = LISTEN_QUIET_S
        while True:
            now = self.trace.at(time.monotonic_ns())
            if now - first >= self.seconds + 30:
                break
            if not self.lab.open_connections:
                closed_at = self.trace.connections[-1].t
                if now - closed_at >= quiet_s and now - first >= self.scenario.active_s():
                    break
                wait = max(0.05, quiet_s - (now - closed_at))
            else:
                wait = 1.0
            self.lab.activity.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.lab.activity.wait(), wait)
        closes = [c.t for c in self.trace.connections if c.kind == "close"]
        self.trace.client_end = max(closes) if closes else self.trace.at(time.monotonic_ns())
        self.trace.exit_status = None

    async def _settle(self) -> None:
        """Let the loop read what the client wrote just before it went (at most 0.3 s)."""
        deadline = time.monotonic() + 0.3
        while self.lab.open_connections and time.monotonic() < deadline:
            self.lab.activity.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.lab.activity.wait(), 0.05)
        await asyncio.sleep(0)

    # -------------------------------------------------------------------------------------- the verdict

    def _verdict(self) -> Verdict:
        trace = self.trace
        if self.launch_error is not None:
            return Verdict("error", self.launch_error, _detail(trace.exit_detail))
        if not self._connected():
            return Verdict("error", "the client never connected", _detail(trace.exit_detail))
        status = trace.exit_status
        if status not in (0, None):
            how = f"signal {-status}" if status < 0 else f"status {status}"
            return Verdict(
                "fail",
                f"the client exited with {how} at {(trace.client_end or 0) * 1000:.0f} ms (it "
                "crashed or reported an error)",
                _detail(trace.exit_detail),
                _as_frames(trace.telemetry[-5:]),
            )
        if not trace.gets:
            return Verdict(
                "n/a",
                "the client sent no GetTelemetrySubscriptions request (telemetry disabled or not supported)",
                [],
                _as_frames(trace.exchanges[:6]),
            )
        try:
            return self.scenario.judge(trace)
        except Exception as exc:  # a lab bug: say so instead of guessing a verdict
            log.exception("judging %s failed", self.scenario.id)
            return Verdict("error", f"the lab could not judge this run ({type(exc).__name__}: {exc})")


def _as_frames(items: Sequence[Exchange | ConnectionEvent]) -> list[Exchange | ConnectionEvent]:
    return list(items)


def _detail(text: str) -> list[str]:
    return [f"client output: {line}" for line in text.splitlines()[-8:] if line.strip()]


def _parse_listen(listen: str | tuple[str, int]) -> tuple[str, int]:
    if isinstance(listen, tuple):
        return listen
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65535:
        raise ValueError(f"--listen takes HOST:PORT (PORT and PORT+1 are the lab's two brokers), not {listen!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


async def run_async(
    client: Client | None,
    scenarios: Sequence[str] | None = None,
    *,
    interval_ms: int = DEFAULT_INTERVAL_MS,
    compression: Sequence[str] | str | None = None,
    jobs: int = 1,
    startup_s: float = DEFAULT_STARTUP_S,
    host: str = "127.0.0.1",
    out: str | os.PathLike[str] | None = None,
    listen: str | tuple[str, int] | None = None,
    listen_wait_s: float = 600.0,
    say: Callable[[str], None] | None = None,
    progress: Callable[[Result], None] | None = None,
) -> list[Result]:
    """:func:`run` inside a running event loop (no outputs written)."""
    ids = list(dict.fromkeys(scenarios)) if scenarios else list(SCENARIO_IDS)
    classes = [scenario_class(i) for i in ids]
    if not 100 <= interval_ms <= 3_600_000:
        raise ValueError("interval_ms must be within 100-3600000 (Kafka's interval.ms range)")
    if jobs < 1:
        raise ValueError("jobs must be at least 1")
    if listen is None and client is None:
        raise ValueError("give a client (a command, a built-in name or a callable) or listen")
    if isinstance(client, str):
        client_argv(client, "127.0.0.1:1", 1.0)  # a bad template fails now, not in every scenario
    listen_at = _parse_listen(listen) if listen is not None else None
    opts = _Options(
        interval_ms=int(interval_ms),
        compression=compression_list(compression),
        startup_s=startup_s,
        host=host,
        out=Path(out) if out is not None else None,
        listen=listen_at,
        listen_wait_s=listen_wait_s,
        say=say or (lambda text: print(text, flush=True)),
    )
    if listen_at is not None:
        jobs = 1  # fixed ports: one session at a time
    gate = asyncio.Semaphore(jobs)

    async def one(cls: type[Scenario]) -> Result:
        async with gate:
            result = await _Run(cls, opts).execute(client)
        if progress is not None:
            progress(result)
        return result

    return list(await asyncio.gather(*(one(cls) for cls in classes)))


def run(
    client: Client | None,
    scenarios: Sequence[str] | None = None,
    *,
    interval_ms: int = DEFAULT_INTERVAL_MS,
    compression: Sequence[str] | str | None = None,
    jobs: int = 1,
    startup_s: float = DEFAULT_STARTUP_S,
    host: str = "127.0.0.1",
    out: str | os.PathLike[str] | None = None,
    junit: str | os.PathLike[str] | None = None,
    listen: str | tuple[str, int] | None = None,
    listen_wait_s: float = 600.0,
    say: Callable[[str], None] | None = None,
    progress: Callable[[Result], None] | None = None,
) -> list[Result]:
    """Run the scenarios (all of them, or the ids given) against ``client`` and return one :class:`Result`
    each, in scenario order.

    ``client``: a command template with ``{bootstrap}`` and ``{seconds}`` (or ``{ms}``), a name from
    :data:`BUILTIN_CLIENTS`, or a callable ``client(bootstrap, seconds)`` that runs a client in this process
    (in a thread) and returns when it has closed. ``listen="HOST:PORT"``: the lab listens on PORT and PORT+1
    and waits for a client started by someone else, one session per scenario (``say`` gets the prompts;
    default: print). ``interval_ms``: the PushIntervalMs of the lab's subscriptions. ``compression``: the
    accepted compression types in the broker's order (names, e.g. ``"gzip,zstd"``; default Kafka's
    zstd, lz4, gzip, snappy). ``jobs``: scenarios run at once, each on its own ports. ``startup_s``: how
    long the client gets to send its first Get; ``{seconds}`` is that plus what the scenario needs.
    ``out``: write ``results.json``, ``index.html`` and the client logs there; ``junit``: write JUnit XML.
    """
    results = asyncio.run(
        run_async(
            client,
            scenarios,
            interval_ms=interval_ms,
            compression=compression,
            jobs=jobs,
            startup_s=startup_s,
            host=host,
            out=out,
            listen=listen,
            listen_wait_s=listen_wait_s,
            say=say,
            progress=progress,
        )
    )
    from .report import client_label, write_html, write_json, write_junit

    label = client_label(client, listen)
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        write_json(results, Path(out) / "results.json")
        write_html(results, Path(out) / "index.html", label)
    if junit is not None:
        write_junit(results, Path(junit), label)
    return results
