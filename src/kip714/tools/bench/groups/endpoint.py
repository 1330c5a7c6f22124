"""The ``endpoint`` group of ``kip714 bench``: the CPU an endpoint spends per accepted push, against floors.

Each endpoint runs as a child process — ``kip714 serve`` bare, with ``--record``, ``--record --record-sync``,
``--prometheus``, ``--otlp-endpoint`` (at :mod:`..otlp_sink`, a local collector that accepts everything, in
a process of its own), ``kip714 proxy --telemetry terminate`` (in front of librdkafka's mock cluster) — and
so do the floors (:mod:`..floor`, the smallest servers on the same event loop): **the zstd floor** (frames
split, each push's payload zstd-decompressed with python-zstandard, the answers to one read in one write:
what no endpoint may skip) and two I/O-only floors (a canned answer per frame, written per frame or per
read). Each is pushed to by :class:`..loadgen.LoadGenerator` (pre-encoded frames over 64 connections from a
worker process of its own) whatever ``kip714`` the bench imports (its ``serve`` and ``proxy`` are run as
commands: the bench measures any version of them with the same code). The figure is **accepted pushes per
CPU-second**: pushes answered with error NONE in a window, over the endpoint process's CPU time in that
window (the kernel's per-process CPU clock, in nanoseconds, every thread: the event loop, the recorder's
and the exporters' workers). Wall-clock rates on a shared machine say how much CPU the endpoint got; per
CPU-second they say what a push costs.

**Against the zstd floor** (the rows ``endpoint.floor-ratio.MODE``, first in the table): each mode's CPU per
accepted push over the zstd floor's, with the load the floor is defined with — librdkafka's 1.45 KB push
(464 bytes zstd), 3 000 live client instances, each pushing once per push interval (100 ms, the shortest
Kafka allows, every push accepted), in rounds: every instance of a connection in one write — and each goal
(:data:`FLOOR_GOALS`) marked met or missed. The I/O-only floors are rows of the same table, without goals.

Payloads: librdkafka's producer push (the package's sample capture) and a Java-style one (4 KB of OTLP laid
out as Apache Kafka's Java producer sends it, zstd). Live client instances: 3 000 (the floor's load, bounded
by Kafka's rate limit at ~30 000 pushes/s) and 100 000 (grown from the 3 000 with pipelined Gets; the load
is then as much as the endpoint takes with 64 pushes in flight per connection).

The generator is shown not to be the bottleneck: its CPU in each window is compared with the endpoint's
(``gen_cpu_s`` < ``endpoint_cpu_s``), and a second generator process is added to one configuration to
see whether the rate rises (row ``endpoint.generator``, its check met when either shows it; on a machine
shared with other work a second process can raise the rate by taking a larger share of the cores, which
the CPU comparison does not depend on). Latency (send → answer, p50/p99) is measured per endpoint at half
its measured maximum rate (100 000 instances, paced sends). Memory, per endpoint: resident bytes per open
client connection (1 000 of them, the proxy's 200, each after an ApiVersions) and, for ``serve`` and the
proxy, per live client instance (the growth from 3 000 to 100 000), from ``/proc/<pid>/status``.

Rounds: every endpoint is started once per round, rounds alternate the endpoints' order, figures are medians
over rounds: 3 rounds, each measuring everything in the full run; with ``--quick`` the first round measures
everything with shorter windows (and without the one-push-per-connection rows) and two more measure the
floor comparison's load alone, so that its ratios are medians of three there too. A progress line per
endpoint and round (with the time left, once a round of its kind has run) and one per measurement go to
the log.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import loadgen
from ..harness import Bench
from ..loadgen import LoadGenerator, cpu_seconds, rss_bytes, thread_cpu_seconds
from ..payloads import java_payload, sample_capture
from ..render import fmt_ns

__all__ = ["FLOOR_GOALS", "MODES", "EndpointProcess", "Measurement", "config", "floor_rows", "measure", "report", "run"]

G = "endpoint"
_LISTENING = re.compile(r"event=listening .*?port=(\d+)")
#: The push interval of the subscription every endpoint serves (Kafka's shortest).
INTERVAL_MS = 100
#: The endpoints measured, in run order: (row label, what runs).
MODES = {
    "serve": "kip714 serve",
    "record": "kip714 serve --record",
    "record-sync": "kip714 serve --record --record-sync",
    "prometheus": "kip714 serve --prometheus",
    "otlp": "kip714 serve --otlp-endpoint (a local sink accepting everything)",
    "proxy": "kip714 proxy --telemetry terminate",
    "floor-zstd": "zstd floor: frames split, each push's payload zstd-decompressed, one write per read",
    "floor-batched": "I/O-only floor: a canned answer per frame, one write per read",
    "floor": "I/O-only floor: a canned answer per frame, one write per frame",
}
#: The floor every mode is held against, and the goals: the most CPU per accepted push each mode may spend,
#: as a multiple of that floor's (issue 40). The modes not named here are shown against it without a goal.
FLOOR = "floor-zstd"
FLOOR_GOALS = {"serve": 1.0, "record": 1.5, "prometheus": 3.0, "otlp": 3.0, "proxy": 1.2}
#: The modes' names in the plot.
_SHORT = {
    "serve": "serve",
    "record": "serve --record",
    "record-sync": "--record-sync",
    "prometheus": "serve --prometheus",
    "otlp": "serve --otlp-endpoint",
    "proxy": "proxy (terminate)",
    "floor-batched": "I/O-only floor",
    "floor": "I/O-only floor, write per frame",
}
#: The payloads: (label, capture file or None for the Java-style one).
PAYLOADS = {"rdk1450": "librdkafka 1.45 KB zstd", "java4k": "Java-style 4 KB zstd"}


def _payload(name: str) -> tuple[bytes, int]:
    import kip714

    if name == "rdk1450":
        return sample_capture("producer_zstd_push_01_zstd.bin")
    return kip714.compress(java_payload(4096), 4), 4


def _env() -> dict[str, str]:
    import kip714

    env = dict(os.environ)
    src = os.path.dirname(os.path.dirname(os.path.abspath(kip714.__file__)))
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


class EndpointProcess:
    """A child process that logs ``event=listening … port=N`` once it listens (kip714 serve/proxy, the floor,
    the OTLP sink); its stderr is drained into :attr:`log`."""

    def __init__(self, cmd: Sequence[str], timeout_s: float = 60.0) -> None:
        self.proc = subprocess.Popen(
            list(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env()
        )
        self.log: list[str] = []
        self.port = 0
        deadline = time.monotonic() + timeout_s
        assert self.proc.stderr is not None
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = _LISTENING.search(line)
            if m:
                self.port = int(m.group(1))
                break
        if not self.port:
            self.proc.kill()
            self.proc.wait(10)
            raise RuntimeError(f"{' '.join(cmd[2:5])} did not start: " + "".join(self.log[-20:]))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _kip714(*args: str) -> list[str]:
    return [sys.executable, "-m", "kip714", *args]


def _subscription() -> list[str]:
    return ["--metrics", "*", "--interval-ms", str(INTERVAL_MS), "--max-instances", "300000"]


#: The endpoints whose memory per live instance is measured: those without a sink, whose own buffers (a part
#: being written, an exporter's queue and batches) grow and shrink by more than the Gets add while they run
#: (in one run: ``--otlp-endpoint`` -125 to 191 bytes an instance, ``serve`` 224 to 232).
_INSTANCE_MEMORY = ("serve", "proxy")
_FLOOR_ARGS = {"floor": [], "floor-batched": ["--batch"], "floor-zstd": ["--zstd"]}


@contextlib.contextmanager
def _endpoint(mode: str, shared: dict[str, Any]) -> Iterator[EndpointProcess]:
    """Start the endpoint of ``mode`` (``shared``: the OTLP sink's URL, the mock cluster's bootstrap)."""
    common = ["--port", "0", "--summary-interval", "0", "--log-level", "info"]
    with tempfile.TemporaryDirectory(prefix="kip714-bench-endpoint-") as tmp:
        if mode.startswith("floor"):
            cmd = [sys.executable, "-m", "kip714.tools.bench.floor", *_FLOOR_ARGS[mode]]
        elif mode == "proxy":
            cmd = _kip714(
                "proxy",
                "--upstream",
                shared["upstream"],
                "--broker-port-base",
                "0",
                "--telemetry",
                "terminate",
                *_subscription(),
                *common,
            )
        else:
            extra = {
                "serve": [],
                "record": ["--record", tmp],
                "record-sync": ["--record", tmp, "--record-sync"],
                "prometheus": ["--prometheus", "127.0.0.1:0"],
                "otlp": ["--otlp-endpoint", shared.get("otlp", "")],
            }[mode]
            cmd = _kip714("serve", *_subscription(), *common, *extra)
        ep = EndpointProcess(cmd)
        try:
            yield ep
        finally:
            ep.stop()


@dataclass
class Measurement:
    """One window of one configuration."""

    accepted: float  # pushes answered NONE in the window
    seconds: float
    endpoint_cpu: float
    gen_cpu: float
    other: float  # answers other than NONE and THROTTLING_QUOTA_EXCEEDED
    throttled: float
    loop_cpu: float = 0.0  # the endpoint's main thread (the event loop: decode, decision, answer)
    settled: bool = True  # every instance pushed once with this payload before the window
    # pushes the exporter delivered in the window (absorbed by the Prometheus exporter, received by the OTLP
    # sink); None for the endpoints without one. Fewer than ``accepted`` when its queue was full (dropped).
    exported: float | None = None

    @property
    def rate(self) -> float:
        return self.accepted / self.seconds if self.seconds else 0.0

    @property
    def accepted_per_cpu(self) -> float:
        return self.accepted / self.endpoint_cpu if self.endpoint_cpu > 0 else 0.0

    @property
    def per_cpu(self) -> float:
        """Pushes per CPU-second of the endpoint. With an exporter: pushes taken all the way, the event
        loop's CPU per accepted push plus the workers' per exported one, so that the pushes an exporter
        dropped at its full queue do not count as done (what an endpoint sized not to drop sustains)."""
        if self.exported is None or self.accepted <= 0:
            return self.accepted_per_cpu
        if self.exported <= 0:
            return 0.0
        cost = self.loop_cpu / self.accepted + max(0.0, self.endpoint_cpu - self.loop_cpu) / self.exported
        return 1.0 / cost if cost > 0 else 0.0


def thread_cpu(pid: int) -> tuple[float, float]:
    """``(main thread, all threads)`` CPU seconds of process ``pid``: its main thread runs the event loop
    (reading, decoding, deciding, answering); the others are the sinks' workers (the recorder's flushes and
    commits, the exporters' decoding and sending)."""
    main = cpu_seconds(pid)
    try:
        loop = thread_cpu_seconds(pid, pid)
    except OSError:
        loop = main
    return loop, main


def window(
    gen: LoadGenerator,
    ep: EndpointProcess,
    warm_s: float,
    seconds: float,
    settle: int = 0,
    settle_max_s: float = 90.0,
    exported: Callable[[], float] | None = None,
) -> Measurement:
    """Let the load run ``warm_s`` and until ``settle`` more pushes were answered (exported, with an
    ``exported`` counter: every instance pushed once, an exporter has made its series, a recorder has
    written its first part), at most ``settle_max_s``, then measure it for ``seconds`` (the generator keeps
    running)."""

    def done() -> float:
        return exported() if exported is not None else gen.totals()[loadgen.ANSWERED]

    start = done()
    time.sleep(warm_s)
    deadline = time.monotonic() + settle_max_s
    while done() - start < settle and time.monotonic() < deadline:
        time.sleep(0.2)
    settled = done() - start >= settle
    e0 = exported() if exported is not None else 0.0
    (l0, c0), g0, t0, a0 = thread_cpu(ep.pid), gen.cpu(), time.monotonic(), gen.totals()
    time.sleep(seconds)
    (l1, c1), g1, t1, a1 = thread_cpu(ep.pid), gen.cpu(), time.monotonic(), gen.totals()
    e1 = exported() if exported is not None else 0.0
    return Measurement(
        accepted=a1[loadgen.ACCEPTED] - a0[loadgen.ACCEPTED],
        seconds=t1 - t0,
        endpoint_cpu=c1 - c0,
        gen_cpu=g1 - g0,
        other=a1[loadgen.OTHER] - a0[loadgen.OTHER],
        throttled=a1[loadgen.THROTTLED] - a0[loadgen.THROTTLED],
        loop_cpu=l1 - l0,
        settled=settled,
        exported=None if exported is None else e1 - e0,
    )


@dataclass
class Config:
    """What one run of :func:`measure` covers."""

    modes: Sequence[str] = tuple(MODES)
    payloads: Sequence[str] = tuple(PAYLOADS)
    # the first: the floor comparison's load (pushed in rounds, bounded by the rate limit); the others grown
    # from it and pushed as fast as the endpoint takes them
    instances: Sequence[int] = (3000, 100_000)
    rounds: int = 3
    # how many of the rounds measure everything; the others measure the floor comparison's load alone (the
    # first payload, the first instance count)
    full_rounds: int = 3
    warm_s: float = 0.7
    first_warm_s: float = 2.5  # the first window of an endpoint process (one-time costs)
    seconds: float = 2.5
    comparison_seconds: float = 2.5  # the windows of the floor comparison's load (the first payload and count)
    latency: bool = True  # p50/p99 at half the maximum rate (the first payload, the largest instance count)
    latency_s: float = 2.5
    connections: int = 64
    window: int = 64
    # (mode, instances): a second generator, on the fastest kip714 endpoint (the most the generator must do)
    generator_check: tuple[str, int] | None = ("serve", 100_000)
    memory: bool = True  # resident bytes per connection (every endpoint) and per instance (serve, proxy)
    memory_connections: int = 1000
    # the proxy's: each opens one to the mock cluster, where a second thousand in one run timed out
    memory_connections_upstream: int = 200
    # the payloads measured with the larger instance counts too (None: all of them)
    large_payloads: Sequence[str] | None = None
    settle_max_s: float = 90.0  # the longest wait for every instance to have pushed (been exported) once
    # one push in flight per connection, as real clients push (each push its own read and write): these
    # modes, over UNPIPELINED_CONNECTIONS connections and UNPIPELINED_INSTANCES instances
    unpipelined: Sequence[str] = ("serve", "record")


#: ``--quick``: the payloads measured with 100 000 instances too (the goals' payload)
PAYLOADS_QUICK_LARGE = ("rdk1450",)
UNPIPELINED_CONNECTIONS = 500
UNPIPELINED_INSTANCES = 10_000


@dataclass
class Results:
    runs: dict[tuple[str, str, int], list[Measurement]] = field(default_factory=dict)
    unpipelined: dict[str, list[Measurement]] = field(default_factory=dict)
    latencies: dict[tuple[str, str, int], list[float]] = field(default_factory=dict)
    latency_rate: dict[tuple[str, str, int], list[float]] = field(default_factory=dict)
    generator: dict[int, list[Measurement]] = field(default_factory=dict)
    memory: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (what, mode): bytes per one
    memory_connections: dict[str, int] = field(default_factory=dict)  # mode: connections opened
    skipped: dict[str, str] = field(default_factory=dict)


_PROMETHEUS_URL = re.compile(r"event=prometheus url=(\S+)")
_ABSORBED = re.compile(rb"^kip714_export_payloads_total(?:\{[^}]*\})? (\S+)$", re.M)  # a replica label or none


def _http_get(url: str) -> bytes:
    import urllib.request

    with urllib.request.urlopen(url, timeout=30) as r:
        body: bytes = r.read()
        return body


def exported_counter(
    mode: str, ep: EndpointProcess, shared: dict[str, Any], resources_per_push: int
) -> Callable[[], float] | None:
    """For an endpoint with an exporter, a function giving the pushes it has delivered so far: the Prometheus
    exporter's ``kip714_export_payloads_total`` (payloads absorbed, scraped from its ``/metrics``), or the
    ``ResourceMetrics`` the OTLP sink received over the ``resources_per_push`` of each push (the forwarder
    labels every one). None for the other endpoints."""
    if mode == "prometheus":
        url = next((m.group(1) for line in ep.log if (m := _PROMETHEUS_URL.search(line))), None)
        if url is None:
            raise RuntimeError("kip714 serve --prometheus did not log its URL")

        def absorbed() -> float:
            m = _ABSORBED.search(_http_get(url))
            return float(m.group(1)) if m else 0.0

        return absorbed
    if mode == "otlp":
        sink = shared["otlp"]

        def received() -> float:
            counts = json.loads(_http_get(sink))
            return float(counts["resources"]) / resources_per_push

        return received
    return None


def resources_per_push(compressed: bytes, compression_type: int) -> int:
    """How many ``ResourceMetrics`` of a push the OTLP forwarder labels (the sink counts them)."""
    import kip714
    from kip714._otlp_splice import add_resource_attributes, encode_attributes

    from .. import otlp_sink

    data = bytes(kip714.decompress(compressed, compression_type, 64 << 20))
    labelled = add_resource_attributes(data, encode_attributes(((otlp_sink.KEY.decode(), ""),)))
    return max(1, labelled.count(otlp_sink.KEY) - data.count(otlp_sink.KEY))


def _open_connections(port: int, n: int) -> list[socket.socket]:
    """``n`` client connections to ``port``, each having done an ApiVersions request (answered)."""
    from kip714._protocol import ApiVersionsRequest, encode_request

    frame = encode_request(ApiVersionsRequest(), 1, "kip714-idle", 0)
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(frame)
        socks.append(s)
    for s in socks:
        s.settimeout(30)
        head = s.recv(4, socket.MSG_WAITALL)
        size = int.from_bytes(head, "big")
        got = 0
        while got < size:
            got += len(s.recv(size - got))
    return socks


def _one(
    bench: Bench, mode: str, cfg: Config, shared: dict[str, Any], res: Results, payloads: dict[str, Any], full: bool
) -> None:
    """One endpoint process of ``mode``: its memory, then each load of ``cfg`` (``full``; else the floor
    comparison's load alone: the first payload, the first instance count)."""
    floor = mode.startswith("floor")
    with _endpoint(mode, shared) as ep:
        if cfg.memory and full:
            time.sleep(0.3)
            before = rss_bytes(ep.pid)
            count = cfg.memory_connections_upstream if mode == "proxy" else cfg.memory_connections
            socks = _open_connections(ep.port, count)
            time.sleep(0.2)
            res.memory.setdefault(("connection", mode), []).append((rss_bytes(ep.pid) - before) / len(socks))
            res.memory_connections[mode] = len(socks)
            for s in socks:
                s.close()
        gen = LoadGenerator("127.0.0.1", ep.port, cfg.connections, 1, INTERVAL_MS, fake_instances=floor)
        try:
            have = 0
            started = False
            for n in cfg.instances if full else cfg.instances[:1]:
                before = rss_bytes(ep.pid)
                gen.instances(n)
                if cfg.memory and mode in _INSTANCE_MEMORY and have:
                    res.memory.setdefault(("instance", mode), []).append((rss_bytes(ep.pid) - before) / (n - have))
                for k, name in enumerate(cfg.payloads if full else cfg.payloads[:1]):
                    if have and cfg.large_payloads is not None and name not in cfg.large_payloads:
                        continue
                    gen.payload(*payloads[name])
                    counter = exported_counter(mode, ep, shared, resources_per_push(*payloads[name]))
                    # the first instance count: every instance of a connection in one write per push interval
                    # (the floor comparison's load); then as many as the endpoint takes, 64 in flight each
                    gen.run("max", cfg.window) if have else gen.run("rounds", 0)
                    try:
                        # the first window of an endpoint also waits out its one-time costs (the recorder's
                        # first part imports pandas through pyarrow; the exporter makes every series)
                        m = window(
                            gen,
                            ep,
                            cfg.warm_s if started else cfg.first_warm_s,
                            cfg.seconds if have or k else cfg.comparison_seconds,
                            settle=n,
                            settle_max_s=cfg.settle_max_s,
                            exported=counter,
                        )
                    finally:
                        gen.pause()
                    started = True
                    res.runs.setdefault((mode, name, n), []).append(m)
                    delivered = "" if m.exported is None else f", {m.exported / m.seconds:,.0f} exported/s"
                    bench.log(
                        f"[{G}] {mode} {name} {n} instances: {m.rate:,.0f} accepted/s{delivered}, "
                        f"{m.per_cpu:,.0f} per CPU-s, {1e6 / m.per_cpu if m.per_cpu else 0:.1f} µs a push "
                        f"(endpoint {m.endpoint_cpu:.2f} s, its event loop {m.loop_cpu:.2f} s; generator "
                        f"{m.gen_cpu:.2f} s){'' if m.settled else '; NOT settled'}"
                    )
                    if cfg.latency and k == 0 and n == cfg.instances[-1] and m.rate > 0 and full:
                        gen.run("paced", m.rate / 2)
                        try:
                            time.sleep(cfg.warm_s)
                            gen.measuring = True
                            time.sleep(cfg.latency_s)
                            gen.measuring = False
                        finally:
                            lat = gen.pause()
                        res.latencies.setdefault((mode, name, n), []).extend(lat)
                        res.latency_rate.setdefault((mode, name, n), []).append(m.rate / 2)
                have = n
        finally:
            gen.close()


def _generator_check(bench: Bench, cfg: Config, shared: dict[str, Any], res: Results, payloads: dict[str, Any]) -> None:
    """One configuration with one generator process, then with two (a new endpoint each time)."""
    assert cfg.generator_check is not None
    mode, n = cfg.generator_check
    name = cfg.payloads[0]
    for processes in (1, 2):
        with _endpoint(mode, shared) as ep:
            gen = LoadGenerator("127.0.0.1", ep.port, cfg.connections, processes, INTERVAL_MS)
            try:
                gen.instances(n)
                gen.payload(*payloads[name])
                gen.run("max", cfg.window)
                try:
                    m = window(gen, ep, cfg.first_warm_s, cfg.seconds, settle=n)
                finally:
                    gen.pause()
            finally:
                gen.close()
        res.generator.setdefault(processes, []).append(m)
        bench.log(
            f"[{G}] generator check, {processes} generator process(es): {m.rate:,.0f} accepted/s, "
            f"generator CPU {m.gen_cpu:.2f} s vs endpoint {m.endpoint_cpu:.2f} s"
        )


def _unpipelined(
    bench: Bench, mode: str, cfg: Config, shared: dict[str, Any], res: Results, payloads: dict[str, Any]
) -> None:
    """``mode`` with one push in flight on each of many connections (every push read and answered alone)."""
    name = cfg.payloads[0]
    with _endpoint(mode, shared) as ep:
        gen = LoadGenerator("127.0.0.1", ep.port, UNPIPELINED_CONNECTIONS, 1, INTERVAL_MS)
        try:
            gen.instances(UNPIPELINED_INSTANCES)
            gen.payload(*payloads[name])
            gen.run("max", 1)
            try:
                m = window(gen, ep, cfg.first_warm_s, cfg.seconds, settle=UNPIPELINED_INSTANCES)
            finally:
                gen.pause()
        finally:
            gen.close()
    res.unpipelined.setdefault(mode, []).append(m)
    bench.log(
        f"[{G}] {mode} unpipelined ({UNPIPELINED_CONNECTIONS} connections x 1 in flight): {m.rate:,.0f} accepted/s, "
        f"{m.per_cpu:,.0f} per CPU-s (endpoint {m.endpoint_cpu:.2f} s, generator {m.gen_cpu:.2f} s)"
    )


def measure(bench: Bench, cfg: Config) -> Results:
    """Run ``cfg`` (rounds alternate the endpoints) and return the raw measurements."""
    from kip714.tools.mock_cluster import MockCluster

    res = Results()
    payloads = {name: _payload(name) for name in cfg.payloads}
    shared: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        if "otlp" in cfg.modes:
            sink = EndpointProcess([sys.executable, "-m", "kip714.tools.bench.otlp_sink"])
            stack.callback(sink.stop)
            shared["otlp"] = f"http://127.0.0.1:{sink.port}"
        modes = list(cfg.modes)
        if "proxy" in modes:
            try:
                import confluent_kafka  # noqa: F401

                cluster = stack.enter_context(MockCluster(1))
                shared["upstream"] = cluster.bootstraps
            except Exception as exc:  # no librdkafka: the proxy row is skipped, said so
                res.skipped["proxy"] = f"no upstream cluster ({type(exc).__name__}: {exc})"
                modes.remove("proxy")
        progress = _Progress(bench, cfg, modes)
        for r in range(cfg.rounds):
            full = r < cfg.full_rounds
            order = modes if r % 2 == 0 else modes[::-1]
            for mode in order:
                with progress.step(r, full, mode, MODES[mode]):
                    _one(bench, mode, cfg, shared, res, payloads, full)
            if full:
                for mode in cfg.unpipelined:
                    with progress.step(
                        r, True, f"unpipelined-{mode}", f"{MODES[mode]}, one push in flight per connection"
                    ):
                        _unpipelined(bench, mode, cfg, shared, res, payloads)
            if cfg.generator_check is not None and r == 0:
                with progress.step(r, True, "generator", "the generator check (1, then 2 generator processes)"):
                    _generator_check(bench, cfg, shared, res, payloads)
    return res


class _Progress:
    """The progress lines of a :func:`measure` run: before each step, its place in the run, the time so far
    and, once every step left can be estimated, the time left (a step takes what it took in the last round
    of its kind, full or the floor comparison's load alone; one of the latter not yet run, their mean). A
    step that raises is reported in the run's errors (the exit status says so) and the run goes on."""

    def __init__(self, bench: Bench, cfg: Config, modes: Sequence[str]) -> None:
        self.bench = bench
        self.started = time.monotonic()
        self.took: dict[tuple[bool, str], float] = {}  # (a full round, step): seconds it took last
        self.left: list[tuple[bool, str]] = []  # the steps still to run, in order
        self.rounds = cfg.rounds
        for r in range(cfg.rounds):
            full = r < cfg.full_rounds
            self.left += [(full, m) for m in modes]
            if full:
                self.left += [(True, f"unpipelined-{m}") for m in cfg.unpipelined]
            if cfg.generator_check is not None and r == 0:
                self.left.append((True, "generator"))
        self.total = len(self.left)

    @contextlib.contextmanager
    def step(self, r: int, full: bool, key: str, what: str) -> Iterator[None]:
        # a step not yet run in a round of its kind: the mean of the steps of that kind that have
        short = [t for (f, _), t in self.took.items() if not f]
        guess = statistics.mean(short) if short else None
        known = [self.took.get(s, None if s[0] else guess) for s in self.left]
        eta = "" if None in known else f", about {_duration(sum(t for t in known if t is not None))} left"
        done = self.total - len(self.left)
        self.bench.log(
            f"[{G}] round {r + 1}/{self.rounds}, step {done + 1}/{self.total}: {what} "
            f"({_duration(time.monotonic() - self.started)} so far{eta})"
        )
        t0 = time.monotonic()
        try:
            yield
        except Exception as exc:  # one step's failure costs its figures, not the run's: reported, run on
            self.bench.errors.append(
                {"group": G, "error": f"{what}: {type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
            )
            self.bench.log(f"[{G}] ERROR in {what}: {type(exc).__name__}: {exc}; the run goes on")
        finally:
            self.took[(full, key)] = time.monotonic() - t0
            self.left.remove((full, key))


def _duration(seconds: float) -> str:
    """``75.2`` → ``"1 min 15 s"``."""
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s} s" if m else f"{s} s"


# ------------------------------------------------------------------------------------------ rows


def _median(ms: list[Measurement], attr: str) -> float:
    return statistics.median(getattr(m, attr) for m in ms)


def _instances_text(n: int) -> str:
    return f"{n // 1000:,} k" if n >= 1000 else str(n)


def _cost_ns(m: Measurement) -> float:
    """Nanoseconds of the endpoint's CPU per push of one window (per accepted push, or taken all the way with
    an exporter: :attr:`Measurement.per_cpu`)."""
    return 1e9 / m.per_cpu if m.per_cpu else float("inf")


def floor_rows(bench: Bench, cfg: Config, res: Results) -> None:
    """The floor comparison: each mode's CPU per push over the zstd floor's, with the load the floor is
    defined with (the first payload, the first instance count), each goal of :data:`FLOOR_GOALS` marked."""
    name, n = cfg.payloads[0], cfg.instances[0]
    floor = res.runs.get((FLOOR, name, n))
    if not floor:
        return
    floor_ns = statistics.median(_cost_ns(m) for m in floor)
    load = f"{PAYLOADS[name]}, {_instances_text(n)} instances pushing in rounds"
    bench.add_row(
        G,
        f"endpoint.floor-ratio.{FLOOR}",
        f"{MODES[FLOOR]}: CPU per push, {load}",
        {"median": floor_ns},
        unit="cost",
        note=f"{len(floor)} rounds; the floor every endpoint is held against",
        extra={"us_per_push": floor_ns / 1e3, "us_per_push_rounds": [_cost_ns(m) / 1e3 for m in floor]},
    )
    labels: list[str] = []
    ratios: list[float] = []
    goals: list[float | None] = []
    for mode in MODES:
        ms = res.runs.get((mode, name, n))
        if mode == FLOOR or not ms:
            continue
        cost = statistics.median(_cost_ns(m) for m in ms)
        limit = FLOOR_GOALS.get(mode)
        exported = any(m.exported is not None for m in ms)
        what = "CPU per push taken all the way (exported)" if exported else "CPU per accepted push"
        per_round = [_cost_ns(m) / _cost_ns(f) for m, f in zip(ms, floor)]
        bench.add_row(
            G,
            f"endpoint.floor-ratio.{mode}",
            f"{MODES[mode]}: {what}, against the zstd floor's, {load}",
            {"median": cost},
            {"median": floor_ns},
            peer_name="zstd floor",
            goal={"kind": "max_cost", "value": limit, "text": f"≤ {limit:.1f}× the zstd floor"} if limit else None,
            unit="cost",
            note=(
                f"{len(ms)} rounds, medians; the rounds' own ratios "
                + ", ".join(f"{r:.2f}×" for r in per_round)
                + ("; some windows were not settled" if not all(m.settled for m in ms) else "")
            ),
            extra={
                "floor_ratio": cost / floor_ns,
                "floor_ratio_rounds": per_round,
                "us_per_push": cost / 1e3,
                "floor_us_per_push": floor_ns / 1e3,
                "settled": all(m.settled for m in ms),
            },
        )
        labels.append(_SHORT.get(mode, mode))
        ratios.append(cost / floor_ns)
        goals.append(limit)
    bench.curve(
        "endpoint_floor",
        f"the zstd floor: {fmt_ns(floor_ns)} a push; {PAYLOADS[name]}, {_instances_text(n)} instances",
        "endpoint",
        "× the zstd floor's CPU per push",
        labels,
        {"endpoint": ratios},
        logx=False,
        logy=False,
        goals=goals,
    )


def report(bench: Bench, cfg: Config, res: Results) -> None:
    """The rows of a :func:`measure` run: the floor comparison first (:func:`floor_rows`), then every
    configuration's pushes per CPU-second, the floors', latency, the generator check and memory."""
    floor_rows(bench, cfg, res)
    goals = {
        ("record", "rdk1450"): 50_000,
        ("prometheus", "rdk1450"): 25_000,
    }
    # (the floor is not measured against the generator: it costs less per push than any generator can)
    kip_runs = [ms for (mode, _, _), ms in res.runs.items() if not mode.startswith("floor")]
    gen_ok = all(m.gen_cpu < m.endpoint_cpu for ms in [*kip_runs, *res.unpipelined.values()] for m in ms if m.accepted)
    for (mode, name, n), ms in res.runs.items():
        if mode.startswith("floor"):
            continue
        per_cpu = _median(ms, "per_cpu")
        floor = res.runs.get((FLOOR, name, n))
        floor_per_cpu = _median(floor, "per_cpu") if floor else None
        target = goals.get((mode, name))
        loop_us = statistics.median(m.loop_cpu / m.accepted * 1e6 for m in ms if m.accepted) if per_cpu else 0.0
        push_us = 1e6 / per_cpu if per_cpu else 0.0
        note = (
            f"{len(ms)} rounds; median {_median(ms, 'rate'):,.0f} accepted/s wall, endpoint CPU "
            f"{_median(ms, 'endpoint_cpu') / _median(ms, 'seconds'):.2f} cores, generator "
            f"{_median(ms, 'gen_cpu') / _median(ms, 'seconds'):.2f}; per push {push_us:.1f} µs: "
            f"event loop {loop_us:.1f} µs, workers {max(0.0, push_us - loop_us):.1f} µs"
        )
        exported = [m.exported / m.accepted for m in ms if m.exported is not None and m.accepted]
        if exported:
            note += (
                f"; the exporter delivered {statistics.median(exported):.0%} as many pushes as were accepted in "
                "the window (below 100%: the rest were dropped at its full queue, counted; above: it caught up "
                "on a backlog), so the figure is the event loop's CPU per accepted push plus the workers' per "
                f"exported one; accepted per CPU-s {_median(ms, 'accepted_per_cpu'):,.0f}"
            )
        if not all(m.settled for m in ms):
            note += "; some windows began before every instance had pushed once"
            note += " and been exported" if exported else ""
        if n == cfg.instances[0]:
            note += (
                f"; load bounded by Kafka's rate limit ({n} instances x 1 push per {INTERVAL_MS} ms, each "
                "connection's in one write)"
            )
        what = "pushes per CPU-s, each one exported" if exported else "accepted pushes per CPU-s"
        bench.add_row(
            G,
            f"endpoint.{mode}.{name}.{n // 1000}k",
            f"{MODES[mode]}: {what}, {PAYLOADS[name]}, {_instances_text(n)} instances",
            {"median": 1e9 / per_cpu if per_cpu else float("inf")},
            {"median": 1e9 / floor_per_cpu} if floor_per_cpu else None,
            peer_name="zstd floor" if floor_per_cpu else None,
            goal=({"kind": "rate", "value": target, "text": f"≥ {target:,} per CPU-s"} if target and per_cpu else None),
            unit="rate",
            note=note,
            extra={
                "per_cpu_s": per_cpu,
                "accepted_per_cpu_s": _median(ms, "accepted_per_cpu"),
                "exported_fraction": statistics.median(exported) if exported else None,
                "settled": all(m.settled for m in ms),
                "rates": [m.rate for m in ms],
                "per_cpu_rounds": [m.per_cpu for m in ms],
                "endpoint_cpu_s": [m.endpoint_cpu for m in ms],
                "gen_cpu_s": [m.gen_cpu for m in ms],
                "generator_below_endpoint": all(m.gen_cpu < m.endpoint_cpu for m in ms),
                "event_loop_us_per_push": loop_us,
                "other_answers": sum(m.other for m in ms),
                "throttled": sum(m.throttled for m in ms),
            },
        )
    for (mode, name, n), ms in res.runs.items():
        if not mode.startswith("floor"):
            continue
        per_cpu = _median(ms, "per_cpu")
        bench.add_row(
            G,
            f"endpoint.{mode}.{name}.{n // 1000}k",
            f"{MODES[mode]}: answered frames per CPU-s, {PAYLOADS[name]}, {_instances_text(n)} instances",
            {"median": 1e9 / per_cpu if per_cpu else float("inf")},
            unit="rate",
            note=f"{len(ms)} rounds; median {_median(ms, 'rate'):,.0f} answered/s wall",
            extra={"per_cpu_s": per_cpu, "generator_below_endpoint": all(m.gen_cpu < m.endpoint_cpu for m in ms)},
        )
    for mode, ms in res.unpipelined.items():
        per_cpu = _median(ms, "per_cpu")
        piped = res.runs.get((mode, cfg.payloads[0], cfg.instances[0]))
        bench.add_row(
            G,
            f"endpoint.{mode}.unpipelined.{cfg.payloads[0]}",
            f"{MODES[mode]}: accepted pushes per CPU-s, one push in flight per connection "
            f"({UNPIPELINED_CONNECTIONS} connections), {PAYLOADS[cfg.payloads[0]]}, "
            f"{_instances_text(UNPIPELINED_INSTANCES)} instances",
            {"median": 1e9 / per_cpu if per_cpu else float("inf")},
            {"median": 1e9 / _median(piped, "per_cpu")} if piped and _median(piped, "per_cpu") else None,
            peer_name=f"pipelined ({cfg.instances[0] // cfg.connections} per write)",
            unit="rate",
            note=(
                f"{len(ms)} rounds; every push read and answered alone, as clients pushing once per interval "
                f"send them; median {_median(ms, 'rate'):,.0f} accepted/s wall"
            ),
            extra={
                "per_cpu_s": per_cpu,
                "generator_below_endpoint": all(m.gen_cpu < m.endpoint_cpu for m in ms),
                "gen_cpu_s": [m.gen_cpu for m in ms],
                "endpoint_cpu_s": [m.endpoint_cpu for m in ms],
            },
        )
    for key, lat in res.latencies.items():
        if not lat:
            continue
        mode, name, n = key
        lat.sort()
        p50 = lat[len(lat) // 2]
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        rate = statistics.median(res.latency_rate[key])
        bench.add_row(
            G,
            f"endpoint.latency.{mode}.{name}.{n // 1000}k",
            f"{MODES[mode]}: push latency p50 (p99) at half the maximum rate, {PAYLOADS[name]}, "
            f"{_instances_text(n)} instances",
            {"median": p50 * 1e9},
            peer_name=f"p99 {fmt_ns(p99 * 1e9)}",
            unit="time",
            note=f"p99 {p99 * 1e3:.2f} ms; {len(lat):,} pushes at {rate:,.0f}/s (send → answer, generator side)",
            extra={"p50_ms": p50 * 1e3, "p99_ms": p99 * 1e3, "paced_rate": rate, "samples": len(lat)},
        )
    if res.generator:
        one = res.generator.get(1, [])
        two = res.generator.get(2, [])
        r1 = _median(one, "rate") if one else 0.0
        r2 = _median(two, "rate") if two else 0.0
        not_raised = bool(r1) and r2 <= r1 * 1.15
        # either shows it: a generator that uses less CPU than the endpoint it loads is not what limits the
        # rate, and neither is one whose twin adds nothing
        not_bottleneck = bool(gen_ok or not_raised)
        mode, n = cfg.generator_check or ("", 0)
        bench.add_row(
            G,
            "endpoint.generator",
            "the generator is not the bottleneck: accepted/s with 2 generator processes vs 1 "
            f"({MODES.get(mode, mode)}, {_instances_text(n)} instances)",
            {"median": 1e9 / r2 if r2 else float("inf")},
            {"median": 1e9 / r1 if r1 else float("inf")},
            peer_name="1 generator",
            goal={
                "kind": "check",
                "value": 1.0 if not_bottleneck else 0.0,
                "text": "generator CPU below the endpoint's, or a 2nd generator ≤ +15%",
            },
            unit="rate",
            note=(
                f"a second generator {'does not raise' if not_raised else 'RAISES'} the rate (≤ +15% counts as not); "
                f"generator CPU below the endpoint's in every window: {gen_ok}"
            ),
            extra={
                "not_bottleneck": not_bottleneck,
                "second_generator_rate_ratio": (r2 / r1) if r1 else None,
                "generator_below_endpoint": gen_ok,
                "one_generator": {
                    "gen_cpu_s": [m.gen_cpu for m in one],
                    "endpoint_cpu_s": [m.endpoint_cpu for m in one],
                },
                "two_generators": {
                    "gen_cpu_s": [m.gen_cpu for m in two],
                    "endpoint_cpu_s": [m.endpoint_cpu for m in two],
                },
            },
        )
    else:
        bench.notes.append(f"{G}: generator CPU below the endpoint's in every window: {gen_ok}")
    for (what, mode), values in sorted(res.memory.items(), key=lambda kv: (kv[0][0], list(MODES).index(kv[0][1]))):
        bench.add_row(
            G,
            f"endpoint.memory.{what}.{mode}",
            f"{MODES[mode]}: resident memory per "
            + ("open client connection" if what == "connection" else "live client instance"),
            {"value": statistics.median(values)},
            unit="bytes",
            note=(
                f"{res.memory_connections.get(mode, 0):,} connections, each after an ApiVersions request (RSS "
                "before/after)"
                if what == "connection"
                else f"RSS growth from {_instances_text(cfg.instances[0])} to "
                f"{_instances_text(cfg.instances[-1])} instances (their Gets)"
            )
            + f"; median of {len(values)}",
            extra={"rounds": values},
        )
    for mode, why in res.skipped.items():
        bench.skip(G, MODES[mode], why)


def run(bench: Bench) -> None:
    """The group as ``kip714 bench`` runs it (see the module docstring)."""
    if bench.cases is not None:
        bench.notes.append(f"{G}: child processes and sockets, not a pytest-benchmark case")
        return
    if not os.path.exists(f"/proc/{os.getpid()}/stat"):
        bench.skip(G, "endpoint", "needs Linux /proc for CPU time")
        return
    cfg = config(bench.quick)
    res = measure(bench, cfg)
    report(bench, cfg, res)


def config(quick: bool) -> Config:
    """What a full run measures, or a ``--quick`` one: shorter windows and waits (but the floor comparison's),
    the first round alone measuring everything (the Java-style payload with 3 000 instances only, no
    one-push-per-connection rows), two more for the floor comparison."""
    if not quick:
        return Config()
    return Config(
        first_warm_s=2.0,  # past the recorder's first part (1 s), which imports pandas through pyarrow
        latency_s=1.0,
        rounds=3,
        full_rounds=1,
        warm_s=0.3,
        seconds=1.0,
        large_payloads=PAYLOADS_QUICK_LARGE,
        settle_max_s=20.0,
        unpipelined=(),
    )
