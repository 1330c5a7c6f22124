"""The ``proxy`` group of ``kip714 bench``: librdkafka producers through ``kip714 proxy`` against the same
producers talking to the cluster directly, in the same run (rounds alternate direct and proxy).

The cluster is librdkafka's mock cluster (3 brokers, in a child process); the proxy runs as ``kip714 proxy``
in another child process (``--telemetry off``), so its CPU time is its own (``/proc/<pid>/stat`` utime +
stime around each run). Measured: produce throughput (MB/s of record values, acks=1) for 100 B and 10 KB
records with one producer and with several producers at once; produce latency (one record at a time,
send → delivery report); CPU of the proxy per MB/s forwarded (millicores per MB/s = CPU milliseconds per
MB) and of the whole machine in each mode (``/proc/stat``: when the direct run already keeps every core
busy, throughput is bounded by CPU per MB and the ratio measures contention); 10 KB records again with the
proxy on a core of its own (``sched_setaffinity``), as it would be deployed; 1 000 client connections held
at once (opened in waves of 5, then all answered together); and the machine's own floor for any
forwarder, no Kafka and no kip714: raw bytes from one socket to another through the cheapest userspace
forwarder there is (``splice(2)`` through a pipe, in a process of its own, nothing parsed) against the same
bytes sent directly (an extra loopback hop costs the kernel, and so every core, CPU per MB on both sides).
"""

from __future__ import annotations

import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

from ..harness import Bench, Row
from ..timing import Summary

__all__ = ["run"]

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (Linux /proc), seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, all cores (Linux /proc/stat: busy is
    everything but idle and iowait)."""
    with open("/proc/stat") as f:
        values = [int(x) for x in f.readline().split()[1:9]]
    total = sum(values)
    return (total - values[3] - values[4]) / _TICKS, total / _TICKS


class ProxyProcess:
    """``kip714 proxy`` in a child process in front of ``upstream``."""

    def __init__(self, upstream: str, loop: str = "auto") -> None:
        cmd = [
            sys.executable,
            "-m",
            "kip714",
            "proxy",
            "--upstream",
            upstream,
            "--port",
            "0",
            "--broker-port-base",
            "0",
            "--telemetry",
            "off",
            "--summary-interval",
            "0",
            "--log-level",
            "info",
            "--loop",
            loop,
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        stderr = self.proc.stderr
        assert stderr is not None  # stderr=PIPE
        deadline = time.monotonic() + 30
        port = None
        while port is None and time.monotonic() < deadline:
            line = stderr.readline()
            if not line and self.proc.poll() is not None:
                break
            m = re.search(r"event=listening host=\S+ port=(\d+)", line)
            if m:
                port = int(m.group(1))
        if port is None:
            self.close()
            raise RuntimeError("kip714 proxy did not start")
        self.port: int = port
        # keep draining its log so it never blocks on a full pipe
        threading.Thread(target=lambda: [None for _ in stderr], daemon=True).start()
        self.bootstrap = f"127.0.0.1:{self.port}"

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def produce_run(bootstrap: str, topic: str, size: int, total_bytes: int, producers: int) -> float:
    """Produce ``total_bytes`` of ``size``-byte records with ``producers`` producers at once; wall seconds
    from the first record to the last delivery report."""
    import confluent_kafka as ck

    n_each = max(1, total_bytes // size // producers)
    value = b"x" * size
    clients = [
        ck.Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": 1,
                "linger.ms": 5,
                "log_level": 0,
                "queue.buffering.max.kbytes": 262144,
                "queue.buffering.max.messages": 1000000,
            }
        )
        for _ in range(producers)
    ]
    for c in clients:  # connected before timing
        c.list_topics(topic, timeout=10)
    errors = []

    def work(c):
        def report(err, msg):
            if err is not None:
                errors.append(err)

        for i in range(n_each):
            while True:
                try:
                    c.produce(topic, value, on_delivery=report)
                    break
                except BufferError:
                    c.poll(0.001)
            if i % 1000 == 0:
                c.poll(0)
        c.flush(120)

    started = time.perf_counter()
    threads = [threading.Thread(target=work, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first: {errors[0]}")
    return elapsed


def latency_run(bootstrap: str, topic: str, n: int) -> list[float]:
    """``n`` records sent one at a time (the next after the previous one's delivery report); seconds each."""
    import confluent_kafka as ck

    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0, "log_level": 0})
    p.list_topics(topic, timeout=10)
    out = []
    done: list[object] = []  # the delivery report's error (None: delivered)
    for _ in range(n):
        done.clear()
        t0 = time.perf_counter()
        p.produce(topic, b"x" * 100, partition=0, on_delivery=lambda err, msg: done.append(err))
        while not done:
            p.poll(0.0005)
        out.append(time.perf_counter() - t0)
    p.flush(5)
    return out


def hold_connections(port: int, n: int, wave: int = 5) -> int:
    """Open ``n`` connections to the proxy, ``wave`` at a time (each makes the proxy connect to the cluster,
    and librdkafka's mock broker listens with a backlog of 5: a burst of 1000 connects there waits on SYN
    retries), a Metadata request answered on each; then, all ``n`` held, a second request on every one at
    once. Returns how many answered the second request."""
    import resource

    import kip714

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 200 and (hard == resource.RLIM_INFINITY or hard >= n + 200):
        resource.setrlimit(resource.RLIMIT_NOFILE, (n + 200, hard))
    req = kip714.encode_request(kip714.wire.MetadataRequest(topics=[]), 1, "bench", 9)
    deadline = time.monotonic() + 120.0

    def answer(s: socket.socket) -> bool:
        # a connection not answered in time counts as not held (the row's goal is missed, not an error)
        s.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            head = s.recv(4, socket.MSG_WAITALL)
            size = int.from_bytes(head, "big")
            return len(head) == 4 and len(s.recv(size, socket.MSG_WAITALL)) == size
        except OSError:
            return False

    socks: list[socket.socket] = []
    answered = 0
    try:
        for start in range(0, n, wave):
            batch = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(min(wave, n - start))]
            for s in batch:
                s.sendall(req)
            for s in batch:
                if answer(s):
                    socks.append(s)
                else:
                    s.close()
        for s in socks:
            s.sendall(req)
        answered = sum(answer(s) for s in socks)
    finally:
        for s in socks:
            s.close()
    return answered


def sizes(quick: bool) -> tuple[int, dict[int, int], int, int]:
    """What a full run, or a ``--quick`` one, measures: the rounds of each row, the bytes of record values each
    produce run sends (by record size: 100 B and 10 KB), the records of the latency rows, and the MB of the
    floor's forwarded bytes."""
    if quick:
        return 2, {100: 4_000_000, 10240: 40_000_000}, 300, 256
    return 4, {100: 12_000_000, 10240: 120_000_000}, 1500, 2048


def run(bench: Bench) -> None:
    """Measure and add the rows and curves of the ``proxy`` group to ``bench``: librdkafka producers through
    ``kip714 proxy`` vs direct to librdkafka's mock cluster (same run)."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError as exc:
        bench.skip("proxy", "confluent-kafka", f"not installed ({exc})")
        return
    from kip714.tools.mock_cluster import MockCluster

    rounds, volume, n_lat, floor_mb = sizes(bench.quick)
    many = 4
    configs = [(100, 1), (100, many), (10240, 1), (10240, many)]
    with MockCluster(3) as mc:
        mc.create_topic("bench", 6)
        proxy = ProxyProcess(mc.bootstraps)
        try:
            produce_run(proxy.bootstrap, "bench", 100, 100_000, 1)  # warm up both paths
            produce_run(mc.bootstraps, "bench", 100, 100_000, 1)
            curve_x, curve_direct, curve_proxy = [], [], []
            cpu_total = mb_total = 0.0
            for size, producers in configs:
                direct_s, proxy_s = [], []
                mb = volume[size] / 1e6
                # the whole machine's CPU in each mode: when both runs keep every core busy, throughput
                # is bounded by CPU per MB, and the proxy's own CPU per MB is what it costs the others
                machine = {"direct": [0.0, 0.0], "proxy": [0.0, 0.0]}
                proxy_cpu = 0.0
                for r in range(rounds):
                    order = ("direct", "proxy") if r % 2 == 0 else ("proxy", "direct")
                    for which in order:
                        m0, c0 = machine_cpu(), proxy.cpu()
                        if which == "direct":
                            direct_s.append(produce_run(mc.bootstraps, "bench", size, volume[size], producers))
                        else:
                            proxy_s.append(produce_run(proxy.bootstrap, "bench", size, volume[size], producers))
                            proxy_cpu += proxy.cpu() - c0
                            mb_total += mb
                        m1 = machine_cpu()
                        machine[which][0] += m1[0] - m0[0]
                        machine[which][1] += m1[1] - m0[1]
                cpu_total += proxy_cpu
                d, p = statistics.median(direct_s), statistics.median(proxy_s)
                label = f"{'100 B' if size == 100 else '10 KB'} records, {producers} producer{'s' * (producers > 1)}"
                goal_ratio = 0.9 if size == 10240 else 0.7
                # a share of the machine: at most 1 (sums of float tick differences can round above it)
                busy = {m: min(1.0, machine[m][0] / max(machine[m][1], 1e-9)) for m in machine}
                cpu_ms = {m: machine[m][0] * 1e3 / (mb * rounds) for m in machine}
                own_ms = proxy_cpu * 1e3 / (mb * rounds)
                _throughput_row(
                    bench,
                    f"proxy.produce.{size}.{producers}",
                    f"produce {label} (MB/s)",
                    proxy_s,
                    direct_s,
                    "direct",
                    mb,
                    f"proxy {mb / p:.1f} MB/s, direct {mb / d:.1f} MB/s; machine CPU busy "
                    f"{100 * busy['direct']:.0f}% direct, {100 * busy['proxy']:.0f}% through the "
                    f"proxy; whole-machine CPU per MB {cpu_ms['direct']:.2f} ms direct, "
                    f"{cpu_ms['proxy']:.2f} ms through the proxy (the proxy's own {own_ms:.2f} ms)",
                    goal={"kind": "ratio", "value": goal_ratio, "text": f"≥ {goal_ratio}× direct"},
                    extra={
                        "machine_busy_direct": busy["direct"],
                        "machine_busy_proxy": busy["proxy"],
                        "cpu_ms_per_mb_direct": cpu_ms["direct"],
                        "cpu_ms_per_mb_proxy": cpu_ms["proxy"],
                        "proxy_cpu_ms_per_mb": own_ms,
                    },
                )
                curve_x.append(label)
                curve_direct.append(mb / d)
                curve_proxy.append(mb / p)
            bench.curve(
                "proxy_throughput",
                "Produce throughput: direct vs through kip714 proxy (mock cluster)",
                "records, producers",
                "MB/s of record values",
                curve_x,
                {"direct": curve_direct, "kip714 proxy": curve_proxy},
                logx=False,
                logy=False,
                kind="bars",
            )
            # latency
            lat_d, lat_p = [], []
            for _ in range(rounds):
                lat_d += latency_run(mc.bootstraps, "bench", n_lat // rounds)
                lat_p += latency_run(proxy.bootstrap, "bench", n_lat // rounds)
            md, mp = statistics.median(lat_d) * 1e9, statistics.median(lat_p) * 1e9
            bench.add_row(
                "proxy",
                "proxy.latency",
                "produce latency, 100 B record, acks=1 (send → delivery)",
                {"median": mp, "samples": [x * 1e9 for x in lat_p]},
                {"median": md, "samples": [x * 1e9 for x in lat_d]},
                "direct",
                goal={"kind": "added_ns", "value": 200_000, "text": "+≤ 0.2 ms"},
                note=f"{len(lat_p)} records each; added median {(mp - md) / 1e6:.3f} ms",
            )
            qs = [0.5, 0.9, 0.99]
            bench.curve(
                "proxy_latency",
                "Produce latency (send → delivery report)",
                "quantile",
                "ms",
                [f"p{int(q * 100)}" for q in qs],
                {
                    "direct": [_quantile(lat_d, q) * 1e3 for q in qs],
                    "kip714 proxy": [_quantile(lat_p, q) * 1e3 for q in qs],
                },
                logx=False,
                logy=False,
                kind="bars",
            )
            # CPU per MB/s forwarded
            mcores = cpu_total * 1000 / mb_total
            bench.add_row(
                "proxy",
                "proxy.cpu",
                "proxy CPU per MB/s forwarded (produce runs above)",
                {"value": mcores},
                unit="millicores",
                goal={"kind": "max_value", "value": 10, "text": "≤ 10 millicores per MB/s"},
                note=f"{cpu_total:.2f} CPU s for {mb_total:.0f} MB (Kroxylicious publishes ~35)",
            )
            _loop_rows(bench, mc, proxy, rounds, volume[10240] // 2)
            _floor_row(bench, rounds, floor_mb)
            _pinned_rows(bench, mc, proxy, rounds, volume[10240], many)
            # connections
            n_conn = 1000
            held = hold_connections(proxy.port, n_conn)
            bench.add_row(
                "proxy",
                "proxy.connections",
                f"client connections held at once ({n_conn} opened in waves of 5, then a request on all at once)",
                {"value": held},
                unit="count",
                goal={"kind": "min_value", "value": n_conn, "text": f"{n_conn} held"},
                note="each sent a Metadata request and got its answer while all were open",
            )
        finally:
            proxy.close()


def _loop_rows(bench: Bench, mc: Any, proxy: ProxyProcess, rounds: int, total: int) -> None:
    """The proxy on uvloop (``proxy``, ``--loop auto``) against a second proxy on asyncio's own loop in front
    of the same cluster, alternating: 10 KB records, 1 and 4 producers (what ``--loop auto`` earns)."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        bench.skip("proxy", "uvloop", "uvloop is not installed: the proxy runs on asyncio's loop")
        return
    plain = ProxyProcess(mc.bootstraps, "asyncio")
    try:
        produce_run(plain.bootstrap, "bench", 100, 100_000, 1)  # warm up
        mb = total / 1e6
        for producers in (1, 4):
            times: dict[str, list[float]] = {"uvloop": [], "asyncio": []}
            cpu = {"uvloop": 0.0, "asyncio": 0.0}
            for r in range(rounds):
                for name, px in (
                    (("uvloop", proxy), ("asyncio", plain)) if r % 2 == 0 else (("asyncio", plain), ("uvloop", proxy))
                ):
                    c0 = px.cpu()
                    times[name].append(produce_run(px.bootstrap, "bench", 10240, total, producers))
                    cpu[name] += px.cpu() - c0
            _throughput_row(
                bench,
                f"proxy.loop.10240.{producers}",
                f"produce 10 KB records through the proxy, {producers} producer{'s' * (producers > 1)}: "
                "uvloop vs asyncio's loop (MB/s)",
                times["uvloop"],
                times["asyncio"],
                "kip714 proxy --loop asyncio",
                mb,
                f"CPU per MB {cpu['uvloop'] * 1000 / (mb * rounds):.2f} ms (uvloop) vs "
                f"{cpu['asyncio'] * 1000 / (mb * rounds):.2f} ms (asyncio)",
            )
    finally:
        plain.close()


def _pin(pid: int, cpus: set[int]) -> None:
    """Every thread of process ``pid`` (and the threads it starts later) on ``cpus``."""
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(task), cpus)
        except ProcessLookupError:
            pass


def _pinned_rows(bench: Bench, mc: Any, proxy: ProxyProcess, rounds: int, total: int, many: int) -> None:
    """10 KB records again with the proxy on a core of its own and the producers and the cluster on the
    other, in both modes: as deployed, a proxy does not take CPU from the clients or the brokers. On a
    machine whose cores the direct run already keeps busy, the rows above measure CPU contention as much
    as the proxy; these separate the two. Informational (no goal): the producers and brokers get one core
    here, so both figures are lower than above."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(allowed) < 2:
        bench.skip("proxy", "pinned", "needs two usable cores and sched_setaffinity")
        return
    me = os.getpid()
    try:
        _pin(me, {allowed[0]})
        _pin(mc.proc.pid, {allowed[0]})
        _pin(proxy.proc.pid, {allowed[1]})
        mb = total / 1e6
        for producers in (1, many):
            direct_s: list[float] = []
            proxy_s: list[float] = []
            for r in range(rounds):
                for which in ("direct", "proxy") if r % 2 == 0 else ("proxy", "direct"):
                    boot = mc.bootstraps if which == "direct" else proxy.bootstrap
                    (direct_s if which == "direct" else proxy_s).append(
                        produce_run(boot, "bench", 10240, total, producers)
                    )
            d, p = statistics.median(direct_s), statistics.median(proxy_s)
            _throughput_row(
                bench,
                f"proxy.pinned.10240.{producers}",
                f"produce 10 KB records, {producers} producer{'s' * (producers > 1)}, proxy on a core of "
                "its own, producers and cluster on the other (MB/s)",
                proxy_s,
                direct_s,
                "direct",
                mb,
                f"proxy {mb / p:.1f} MB/s, direct {mb / d:.1f} MB/s",
            )
    finally:
        for pid in (me, mc.proc.pid, proxy.proc.pid):
            _pin(pid, set(allowed))


_CHUNK = 1 << 20


def _splice_forwarder(conn: Any) -> None:
    """Child process: accept one connection and move its bytes to the address it is sent, with splice(2)
    through a pipe (the kernel moves pages; nothing is copied to or parsed in userspace)."""
    import fcntl

    ls = socket.create_server(("127.0.0.1", 0))
    conn.send(ls.getsockname()[1])
    target = conn.recv()
    a, _ = ls.accept()
    b = socket.create_connection(("127.0.0.1", target))
    cpu0 = time.process_time()  # the forwarding only, not the interpreter's start
    r, w = os.pipe()
    fcntl.fcntl(w, 1031, _CHUNK)  # F_SETPIPE_SZ
    while True:
        n = os.splice(a.fileno(), w, _CHUNK)
        if not n:
            break
        while n:
            n -= os.splice(r, b.fileno(), n)
    b.close()
    conn.send(time.process_time() - cpu0)


def _bytes_run(mb: int, via: Any = None) -> tuple[float, float, float]:
    """Send ``mb`` MiB in 1 MiB writes to a receiver thread, directly or through the forwarder process
    (``via``: its pipe end). (seconds, the forwarder's CPU seconds, the whole machine's busy CPU seconds)."""
    ls = socket.create_server(("127.0.0.1", 0))
    ls.settimeout(30)
    got = [0]

    def receive() -> None:
        c, _ = ls.accept()
        c.settimeout(30)
        buf = bytearray(_CHUNK)
        with c:
            while n := c.recv_into(buf):
                got[0] += n

    t = threading.Thread(target=receive, daemon=True)
    t.start()
    port = ls.getsockname()[1]
    if via is not None:
        _proc, conn = via
        conn.send(port)
        port = conn.recv()
    data = b"x" * _CHUNK
    m0 = machine_cpu()[0]
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        for _ in range(mb):
            s.sendall(data)
    t.join(60)
    elapsed = time.perf_counter() - t0
    busy = machine_cpu()[0] - m0
    ls.close()
    cpu = 0.0
    if via is not None:
        cpu = via[1].recv() if via[1].poll(30) else 0.0
        via[0].join(30)
    if got[0] != mb * _CHUNK:
        raise RuntimeError(f"the receiver got {got[0]} of {mb * _CHUNK} bytes")
    return elapsed, cpu, busy


def _floor_row(bench: Bench, rounds: int, mb: int) -> None:
    """The machine's floor for any userspace forwarder: raw bytes through a splice(2) process vs direct."""
    import multiprocessing

    if not hasattr(os, "splice"):
        bench.skip("proxy", "floor", "os.splice needs Linux and Python 3.10+")
        return
    ctx = multiprocessing.get_context("spawn")  # this process has librdkafka's threads: no fork
    times: dict[str, list[float]] = {"direct": [], "forwarder": []}
    fwd_cpu = 0.0
    machine = {"direct": 0.0, "forwarder": 0.0}
    for r in range(rounds):
        for which in ("direct", "forwarder") if r % 2 == 0 else ("forwarder", "direct"):
            via = None
            if which == "forwarder":
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=_splice_forwarder, args=(child,), daemon=True)
                proc.start()
                parent.poll(30)
                via = (proc, parent)
            elapsed, cpu, busy = _bytes_run(mb, via)
            times[which].append(elapsed)
            fwd_cpu += cpu
            machine[which] += busy
    size = mb * _CHUNK / 1e6
    own = fwd_cpu * 1e3 / (size * rounds)
    whole = {k: v * 1e3 / (size * rounds) for k, v in machine.items()}
    _throughput_row(
        bench,
        "proxy.floor",
        "the machine's floor, no Kafka and no kip714: raw bytes through a splice(2) "
        "forwarder process vs sent directly, one connection (MB/s)",
        times["forwarder"],
        times["direct"],
        "direct",
        size,
        f"1 MiB writes; whole-machine CPU per MB {whole['direct']:.3f} ms direct, "
        f"{whole['forwarder']:.3f} ms forwarded (the forwarder's own {own:.3f} ms): the extra hop costs "
        f"{whole['forwarder'] - whole['direct']:.3f} ms per MB with nothing parsed or copied in "
        "userspace, a cost every forwarder adds to the 10 KB produce rows above when the cores are shared",
        extra={
            "forwarder_cpu_ms_per_mb": own,
            "cpu_ms_per_mb_direct": whole["direct"],
            "cpu_ms_per_mb_forwarded": whole["forwarder"],
        },
    )


def _per_mb(seconds: list[float], mb: float) -> Summary:
    """A throughput row's summary from the runs' seconds: ns per MB (the bench's throughput unit)."""
    return {"median": statistics.median(seconds) / mb * 1e9, "samples": [x / mb * 1e9 for x in seconds]}


def _throughput_row(
    bench: Bench,
    key: str,
    operation: str,
    kip_s: list[float],
    peer_s: list[float],
    peer_name: str,
    mb: float,
    note: str,
    **kw: Any,
) -> Row:
    """A row of MB/s from alternating runs of ``mb`` MB each (seconds per run on each side)."""
    return bench.add_row(
        "proxy",
        key,
        operation,
        _per_mb(kip_s, mb),
        _per_mb(peer_s, mb),
        peer_name,
        unit="throughput",
        note=f"{mb:.0f} MB per run, median of {len(kip_s)} alternating runs; " + note,
        **kw,
    )


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]
