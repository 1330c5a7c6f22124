"""The push load of the ``endpoint`` group: pre-encoded, pipelined PushTelemetry frames over many connections,
from worker processes of their own (:class:`LoadGenerator`), so that the endpoint measured is the bottleneck
and not the load.

Each worker (a ``multiprocessing`` child, started with ``spawn``) opens its share of the connections and
creates its share of the client instances with pipelined GetTelemetrySubscriptions requests (a zero instance
id: a new instance each; its SubscriptionId from the answer). The push frame of every instance is then made
once: a 38-byte head (size prefix, request header, instance id, SubscriptionId) and the payload's tail,
shared by every instance and sent with ``socket.send`` of one joined buffer per connection and turn. Answers
are read as raw frames: the error code of a PushTelemetry response v0 sits at bytes 13–14, nothing is
decoded.

Kafka's rate limit accepts a push of an instance at most once per push interval (the first one after the
Get early), so an instance is sent again only a push interval (plus a margin) after its previous answer
was read: it can never be throttled by the generator's own timing. With few instances the offered load is
therefore bounded by ``instances / interval``; with many it is bounded by ``window`` pushes in flight per
connection (``run("max")``), by rounds (``run("rounds")``: each connection's instances in one write, once
per push interval) or by a paced rate (``run("paced", rate)``, sends spread over 1 ms ticks, with
the send → answer latency of each push recorded while :meth:`LoadGenerator.measuring` is on).

Counters live in shared memory (one row per worker: answers read, accepted, throttled, other error codes,
bytes sent), so the parent reads them at the edges of its measuring window without talking to the workers;
the workers' CPU time is read with :func:`cpu_seconds` like the endpoint's.
"""

from __future__ import annotations

import base64
import collections
import itertools
import json
import os
import select
import selectors
import socket
import struct
import subprocess
import sys
import time
import uuid
from typing import Any

__all__ = ["LoadGenerator", "cpu_seconds", "main", "push_frame_parts", "rss_bytes", "thread_cpu_seconds"]

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_I32 = struct.Struct(">i")
#: bytes of a push frame before the payload's tail: size, header (api key, version, correlation id, the
#: client id "kip714-load", tagged fields), the 16-byte instance id and the SubscriptionId
_HEAD = 4 + 8 + 2 + 11 + 1 + 16 + 4
_ID = _HEAD - 20
_CLIENT_ID = "kip714-load"
# counter slots of a worker's row
ANSWERED, ACCEPTED, THROTTLED, OTHER, SENT_BYTES, INSTANCES = range(6)  # (indexes into totals())
_SLOTS = 8
_THROTTLED = 89  # THROTTLING_QUOTA_EXCEEDED


def cpu_seconds(pid: int) -> float:
    """CPU seconds of process ``pid`` and all its threads, the ended ones included: the kernel's count in
    nanoseconds (the process's CPU-time clock, ``clock_gettime`` on the clock id ``clock_getcpuclockid``
    gives), or utime + stime from ``/proc/<pid>/stat`` in clock ticks (10 ms) where that clock cannot be read."""
    try:
        return time.clock_gettime(_process_clock(pid))
    except (OSError, OverflowError, AttributeError):
        pass
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def thread_cpu_seconds(pid: int, tid: int) -> float:
    """CPU seconds of thread ``tid`` of process ``pid``: nanoseconds from ``/proc/<pid>/task/<tid>/schedstat``
    (the kernel lets no other process read a thread's CPU-time clock; a running thread's count is brought up
    to date at its next tick or switch), clock ticks from its ``stat`` where schedstat is missing."""
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _process_clock(pid: int) -> int:
    """Linux's clock id of process ``pid``'s CPU time (``MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)``, what
    ``clock_getcpuclockid`` returns; Python's ``time`` module has no binding for it)."""
    if not sys.platform.startswith("linux"):
        raise OSError("a process's CPU-time clock id is known on Linux only")
    return ((~pid) << 3) | 2


def rss_bytes(pid: int) -> int:
    """Resident set size of process ``pid`` (Linux /proc), bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def push_frame_parts(compressed: bytes, compression_type: int) -> tuple[bytes, bytes]:
    """``(head template, tail)`` of a PushTelemetry v0 frame carrying ``compressed``: the head's last 20 bytes
    are the instance id and the SubscriptionId, replaced per instance; the tail (terminating flag,
    compression type, the payload, tagged fields) is the same for every instance."""
    from kip714._protocol import PushTelemetryRequest, encode_request

    template = uuid.UUID(int=0x0123456789ABCDEF0123456789ABCDEF)
    frame = encode_request(
        PushTelemetryRequest(template, 0x7A7A7A7A, False, compression_type, compressed), 0, _CLIENT_ID, 0
    )
    assert frame[_ID:_HEAD] == template.bytes + b"\x7a" * 4, "unexpected PushTelemetry layout"
    return bytes(frame[:_HEAD]), bytes(frame[_HEAD:])


class LoadGenerator:
    """``processes`` worker processes pushing to ``host:port`` over ``connections`` connections in all (see
    the module docstring). ``fake_instances``: do not ask the endpoint for instances (for the floor server,
    which answers every frame alike): random ids, SubscriptionId 0.

    The workers are ``python -m kip714.tools.bench.loadgen`` children (commands as JSON lines on their
    stdin, answers on their stdout), their counters a ``multiprocessing.shared_memory`` block."""

    def __init__(
        self,
        host: str,
        port: int,
        connections: int = 64,
        processes: int = 1,
        interval_ms: int = 100,
        fake_instances: bool = False,
    ) -> None:
        from multiprocessing import shared_memory

        self.processes = processes
        self._shm = shared_memory.SharedMemory(create=True, size=8 * (processes * _SLOTS + 1))
        buf = self._shm.buf
        assert buf is not None
        self.counters = buf.cast("d")
        for k in range(len(self.counters)):
            self.counters[k] = 0.0
        self._procs: list[subprocess.Popen[str]] = []
        per = [connections // processes + (1 if i < connections % processes else 0) for i in range(processes)]
        env = _env()
        try:
            for i in range(processes):
                spec = {
                    "host": host,
                    "port": port,
                    "connections": max(1, per[i]),
                    "index": i,
                    "interval_s": interval_ms / 1000.0,
                    "fake": fake_instances,
                    "shm": self._shm.name,
                    "flag": processes * _SLOTS,
                }
                self._procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", __name__, json.dumps(spec)],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        text=True,
                        env=env,
                    )
                )
            self._ask("hello")
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def cpu(self) -> float:
        """CPU seconds of every worker so far."""
        return sum(cpu_seconds(pid) for pid in self.pids)

    def totals(self) -> list[float]:
        """The counters summed over the workers (indexed by ANSWERED, ACCEPTED, …)."""
        c = self.counters
        return [sum(c[w * _SLOTS + k] for w in range(self.processes)) for k in range(_SLOTS)]

    @property
    def measuring(self) -> bool:
        """While on, the workers record the send → answer latency of every accepted push."""
        return bool(self.counters[self.processes * _SLOTS])

    @measuring.setter
    def measuring(self, on: bool) -> None:
        self.counters[self.processes * _SLOTS] = 1.0 if on else 0.0

    def _send(self, procs: list[subprocess.Popen[str]], commands: list[list[Any]]) -> None:
        for p, command in zip(procs, commands):
            assert p.stdin is not None
            p.stdin.write(json.dumps(command) + "\n")
            p.stdin.flush()

    def _replies(self, what: str) -> list[Any]:
        out = []
        for p in self._procs:
            assert p.stdout is not None
            line = p.stdout.readline()
            if not line:
                raise RuntimeError(f"load generator worker {p.pid} exited during {what!r} (status {p.poll()})")
            reply = json.loads(line)
            if isinstance(reply, dict) and "error" in reply:
                raise RuntimeError(f"load generator failed during {what!r}: {reply['error']}")
            out.append(reply)
        return out

    def _ask(self, *command: Any) -> list[Any]:
        self._send(self._procs, [list(command)] * len(self._procs))
        return self._replies(str(command[0]))

    def instances(self, total: int) -> float:
        """Grow to ``total`` live client instances in all (split over the workers); returns the seconds the
        Gets took."""
        per = [total // self.processes + (1 if i < total % self.processes else 0) for i in range(self.processes)]
        started = time.monotonic()
        self._send(self._procs, [["instances", n] for n in per])
        self._replies("instances")
        return time.monotonic() - started

    def payload(self, compressed: bytes, compression_type: int) -> None:
        """Push this payload from now on."""
        self._ask("payload", base64.b64encode(compressed).decode(), compression_type)

    def run(self, mode: str, value: float) -> None:
        """Start pushing: ``("max", window)`` pushes in flight per connection, ``("rounds", 0)`` every
        instance of a connection in one write once all of them may push again, or ``("paced", rate)`` pushes
        per second in all."""
        self._ask("run", mode, value / self.processes if mode == "paced" else value)

    def pause(self) -> list[float]:
        """Stop sending and wait for the answers in flight; the send → answer latencies (seconds) recorded
        while :attr:`measuring` was on."""
        out: list[float] = []
        for reply in self._ask("pause"):
            out.extend(reply)
        return out

    def close(self) -> None:
        for p in self._procs:
            try:
                if p.poll() is None and p.stdin is not None:
                    p.stdin.write(json.dumps(["quit"]) + "\n")
                    p.stdin.flush()
            except OSError:
                pass
        for p in self._procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self.counters.release()
        self._shm.close()
        self._shm.unlink()


def _env() -> dict[str, str]:
    """The environment of a worker: this kip714 first on its path."""
    import kip714

    env = dict(os.environ)
    src = os.path.dirname(os.path.dirname(os.path.abspath(kip714.__file__)))
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


# ------------------------------------------------------------------------------------------ the worker


class _Conn:
    """One connection: its instances waiting to be eligible again and those in flight, both in batches
    (lists of instance indexes) so that the per-push work stays in C (slicing, joining, counting)."""

    __slots__ = ("flight", "in_flight", "inbuf", "outbuf", "ready", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = b""
        self.ready: collections.deque[Any] = collections.deque()  # [eligible at, [instance, ...]]
        self.flight: collections.deque[Any] = collections.deque()  # [sent at, [instance, ...]]
        self.in_flight = 0


def main(argv: list[str]) -> int:
    """A worker: ``python -m kip714.tools.bench.loadgen SPEC`` (SPEC: JSON, see :class:`LoadGenerator`)."""
    from multiprocessing import shared_memory

    spec = json.loads(argv[0])
    shm = shared_memory.SharedMemory(name=spec["shm"])
    try:
        # (the parent unlinks the block; this process must not have the resource tracker do it too)
        from multiprocessing import resource_tracker

        resource_tracker.unregister(shm._name, "shared_memory")  # type: ignore[attr-defined]
    except Exception:
        pass
    buf = shm.buf
    assert buf is not None
    counters = buf.cast("d")
    try:
        _Worker(spec, counters, sys.stdin, sys.stdout).serve()
    except BaseException as exc:  # tell the parent, which raises it
        try:
            _reply(sys.stdout, {"error": f"{type(exc).__name__}: {exc}"})
        except OSError:
            pass
        return 1
    finally:
        counters.release()
        shm.close()
    return 0


def _reply(out: Any, value: Any) -> None:
    out.write(json.dumps(value) + "\n")
    out.flush()


class _Worker:
    def __init__(self, spec: dict[str, Any], counters: Any, commands: Any, out: Any) -> None:
        self.spec = spec
        self.row = spec["index"] * _SLOTS
        self.counters = counters
        self.flag = spec["flag"]  # the slot of LoadGenerator.measuring
        self.commands = commands
        self.out = out
        self.interval = spec["interval_s"] * 1.02 + 0.002  # a margin over Kafka's push interval
        self.conns: list[_Conn] = []
        self.sel = selectors.DefaultSelector()
        self.heads: list[bytes] = []  # per instance: its frame head
        self._ids: list[bytes] = []  # per instance: its id and SubscriptionId (20 bytes)
        self.tail = b""
        self.head_template = b""
        self.latencies: list[float] = []
        self.whole = False  # pushing in rounds: a connection's instances all together (see push)
        for _ in range(spec["connections"]):
            s = socket.create_connection((spec["host"], spec["port"]))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.setblocking(False)
            c = _Conn(s)
            self.conns.append(c)
            self.sel.register(s, selectors.EVENT_READ, c)

    def serve(self) -> None:
        while True:
            line = self.commands.readline()
            if not line:
                break
            cmd = json.loads(line)
            op = cmd[0]
            if op == "quit":
                break
            if op == "hello":
                _reply(self.out, "ok")
            elif op == "instances":
                self.grow(cmd[1])
                _reply(self.out, "ok")
            elif op == "payload":
                self.head_template, self.tail = push_frame_parts(base64.b64decode(cmd[1]), cmd[2])
                self.heads = [self._head(i) for i in range(len(self.heads))]
                _reply(self.out, "ok")
            elif op == "run":
                _reply(self.out, "ok")
                self.push(cmd[1], cmd[2])
                _reply(self.out, [round(x, 7) for x in self.latencies])
                self.latencies = []
        for c in self.conns:
            c.sock.close()

    def _paused(self) -> bool:
        """A "pause" command has come (read without blocking)."""
        ready, _, _ = select.select([self.commands], [], [], 0)
        if not ready:
            return False
        line = self.commands.readline()
        return json.loads(line)[0] == "pause" if line else True

    # -------------------------------------------------------------- instances
    def _head(self, i: int) -> bytes:
        ids = self._ids[i]
        return self.head_template[:_ID] + ids

    def grow(self, total: int) -> None:
        """Create instances until this worker has ``total`` (pipelined Gets, ``depth`` in flight on each
        connection). An instance lives on the connection whose Get created it (Kafka 4.0+ drops it when
        that connection closes; they stay open)."""
        from kip714._protocol import GetTelemetrySubscriptionsRequest, decode_response, encode_request

        start = len(self._ids)
        need = total - start
        if need <= 0:
            return
        n_conns = len(self.conns)
        per_conn = [need // n_conns + (1 if j < need % n_conns else 0) for j in range(n_conns)]
        got: list[list[bytes]] = [[] for _ in range(n_conns)]
        if self.spec["fake"]:
            for j in range(n_conns):
                got[j] = [uuid.uuid4().bytes + bytes(4) for _ in range(per_conn[j])]
        else:
            get = encode_request(GetTelemetrySubscriptionsRequest(), 0, _CLIENT_ID, 0)
            depth = 256
            sent = [0] * n_conns
            index = {id(c): j for j, c in enumerate(self.conns)}

            def top_up(j: int) -> None:
                more = min(depth - (sent[j] - len(got[j])), per_conn[j] - sent[j])
                if more > 0:
                    sock = self.conns[j].sock
                    sock.setblocking(True)
                    sock.sendall(get * more)
                    sock.setblocking(False)
                    sent[j] += more

            for j in range(n_conns):
                top_up(j)
            pending = need
            while pending:
                for key, _ in self.sel.select(1.0):
                    c = key.data
                    j = index[id(c)]
                    data = c.sock.recv(1 << 18)
                    if not data:
                        raise ConnectionError("the endpoint closed a connection during set-up")
                    buf = c.inbuf
                    buf += data
                    pos = 0
                    while len(buf) - pos >= 4:
                        size = _I32.unpack_from(buf, pos)[0]
                        if len(buf) - pos - 4 < size:
                            break
                        body = decode_response(bytes(buf[pos + 4 : pos + 4 + size]), 71, 0).body
                        pos += 4 + size
                        if body.error_code:
                            raise RuntimeError(f"GetTelemetrySubscriptions answered error {body.error_code}")
                        got[j].append(body.client_instance_id.bytes + _I32.pack(body.subscription_id))
                        pending -= 1
                    del buf[:pos]
                    top_up(j)
        for j in range(n_conns):
            for ids in got[j]:
                i = len(self._ids)
                self._ids.append(ids)
                self.heads.append(self._head(i) if self.head_template else b"")
                ready = self.conns[j].ready  # the first push after a Get is accepted at once
                if ready and ready[-1][0] == 0.0:
                    ready[-1][1].append(i)
                else:
                    ready.append([0.0, [i]])
        self.counters[self.row + INSTANCES] = len(self._ids)

    # -------------------------------------------------------------- pushing
    def push(self, mode: str, value: float) -> None:
        """Push until a "pause" command comes, then wait for the answers in flight. ``max``: keep ``value``
        pushes in flight on each connection (a connection is topped up as its answers are read, and every
        2 ms when instances become eligible again); ``rounds``: rounds of pushes, every instance of a
        connection in one write once all its answers are read and a push interval has passed since the last
        one (a client-side batch per connection and interval: the endpoint's reads hold whole rounds);
        ``paced``: ``value`` pushes per second, sent each 1 ms tick, round robin over the connections."""
        paced = mode == "paced"
        self.whole = mode == "rounds"
        window = 512 if paced else 1 << 30 if self.whole else int(value)
        rate = value if paced else 0.0
        conns = self.conns
        counters = self.counters
        row = self.row
        perf = time.perf_counter
        sleep = time.sleep
        select_ = self.sel.select
        fill = self._fill
        answers = self._answers
        scratch = bytearray(1 << 18)
        scratch_view = memoryview(scratch)
        started = perf()
        sent_total = 0
        pausing = False
        n_conns = len(conns)
        rr = 0
        next_poll = next_sweep = 0.0
        while True:
            now = perf()
            if now >= next_poll:
                next_poll = now + 0.01
                if not pausing:
                    pausing = self._paused()
                if pausing and not any(c.in_flight for c in conns):
                    return
            if not pausing:
                if paced:
                    budget = int((now - started) * rate) - sent_total
                    tries = 0
                    while budget > 0 and tries < n_conns:
                        c = conns[rr]
                        rr = rr + 1 if rr + 1 < n_conns else 0
                        sent = fill(c, now, min(budget, 1 + budget // n_conns), window)
                        tries = 0 if sent else tries + 1
                        budget -= sent
                        sent_total += sent
                    if budget > 0:  # nothing eligible: do not bank the rate for later
                        sent_total += budget
                elif now >= next_sweep:
                    next_sweep = now + 0.002
                    for c in conns:
                        fill(c, now, window, window)
            if not paced:
                # let answers pile up: fewer, larger reads (the generator's cost is per read, not per push;
                # with 64 pushes in flight per connection the endpoint never runs dry meanwhile)
                sleep(0.0005)
            for key, events in select_(0.001 if paced else 0.002):
                c = key.data
                if events & 2 and c.outbuf:  # selectors.EVENT_WRITE
                    self._send(c, b"")
                if not events & 1:
                    continue
                try:
                    got = c.sock.recv_into(scratch)
                except BlockingIOError:
                    continue
                if not got:
                    raise ConnectionError("the endpoint closed a connection")
                buf = c.inbuf
                buf += scratch_view[:got]
                t = perf()
                n, accepted, throttled = answers(c, buf, t)
                counters[row + ANSWERED] += n
                counters[row + ACCEPTED] += accepted
                counters[row + THROTTLED] += throttled
                counters[row + OTHER] += n - accepted - throttled
                if not paced and not pausing:
                    fill(c, t, window, window)

    def _answers(self, c: _Conn, buf: bytearray, t: float) -> tuple[int, int, int]:
        """Take the complete answers at the start of ``buf`` (every one a 16-byte PushTelemetry response v0
        with correlation id 0, as the frames sent ask; anything else is an error): ``(answers, accepted,
        throttled)``. Their instances are eligible again a push interval from ``t``; the latencies of the
        accepted ones are recorded while measuring."""
        k = len(buf) >> 4
        if not k:
            return 0, 0, 0
        end = k << 4
        # the size prefixes are all 12 (0x0000000c), the error codes' high bytes 0 (Kafka's codes are < 256)
        if buf[3:end:16].count(12) != k or any(buf[j:end:16].count(0) != k for j in (0, 1, 2, 13)):
            raise RuntimeError("unexpected answer from the endpoint (not a PushTelemetry v0 response)")
        codes = bytes(buf[14:end:16])
        accepted = codes.count(0)
        throttled = codes.count(_THROTTLED)
        del buf[:end]
        record = self.counters[self.flag]
        lat = self.latencies
        again = t + self.interval
        flight = c.flight
        ready = c.ready
        left = k
        pos = 0
        back: list[int] = []
        while left:
            batch = flight[0]
            members = batch[1]
            m = len(members)
            if m <= left:
                flight.popleft()
                back += members
            else:
                back += members[:left]
                del members[:left]
                m = left
            if record:
                lat.extend([t - batch[0]] * codes.count(0, pos, pos + m))
            pos += m
            left -= m
        c.in_flight -= k
        ready.append([again, back])
        return k, accepted, throttled

    def _fill(self, c: _Conn, now: float, most: int, window: int) -> int:
        """Send up to ``most`` pushes of eligible instances on ``c`` (at most ``window`` in flight): one
        joined buffer. Returns how many."""
        if c.outbuf or (self.whole and (c.in_flight or not c.ready or c.ready[-1][0] > now)):
            return 0
        ready = c.ready
        room = min(most, window - c.in_flight)
        if room <= 0 or not ready or ready[0][0] > now:
            return 0
        taken: list[int] = []
        while room > 0 and ready and ready[0][0] <= now:
            members = ready[0][1]
            if len(members) <= room:
                ready.popleft()
                taken += members
                room -= len(members)
            else:
                taken += members[:room]
                del members[:room]
                room = 0
        if not taken:
            return 0
        heads = self.heads
        self._send(
            c, b"".join(itertools.chain.from_iterable(zip(map(heads.__getitem__, taken), itertools.repeat(self.tail))))
        )
        c.flight.append([now, taken])
        c.in_flight += len(taken)
        return len(taken)

    def _send(self, c: _Conn, data: bytes) -> None:
        buf = c.outbuf + data if c.outbuf else data
        try:
            n = c.sock.send(buf)
        except BlockingIOError:
            n = 0
        self.counters[self.row + SENT_BYTES] += n
        rest = buf[n:]
        if rest and not c.outbuf:
            self.sel.modify(c.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, c)
        elif not rest and c.outbuf:
            self.sel.modify(c.sock, selectors.EVENT_READ, c)
        c.outbuf = rest


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
