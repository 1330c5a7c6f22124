"""Helpers of the tests that run ``kip714 serve`` / ``kip714 proxy`` as a service: the command in a child process
whose log lines are waited for (never a fixed sleep), Prometheus text scraped into numbers, free ports."""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on 127.0.0.1 right now (bound, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port_run(n: int, hosts: tuple[str, ...] = ("127.0.0.1",)) -> int:
    """The first of ``n`` consecutive ports free on every address of ``hosts`` right now (bound, then released).

    Picked below the kernel's ephemeral range, where no socket gets its port from the kernel: an outgoing
    connection or another worker's bind to port 0 cannot take one of them between this check and the use."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.Random()
    for _ in range(50):
        base = rng.randrange(max(1024, low - 8192), low - n)
        socks = []
        try:
            for host in hosts:
                for i in range(n):
                    socks.append(socket.create_server((host, base + i)))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
        return base
    raise RuntimeError(f"no run of {n} free ports below {low}")


class KipProcess:
    """``python -m kip714 ARGS`` in a child process; its stderr (the log) is read by a thread into
    :attr:`lines`, so :meth:`wait_for` waits on an event, bounded by a timeout."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        self.args = args
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kip714", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.lines: list[str] = []
        self.out = ""
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._out_reader = threading.Thread(target=self._read_out, daemon=True)
        self._out_reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _read_out(self) -> None:
        self.out = self.proc.stdout.read()

    @property
    def log(self) -> str:
        with self._cond:
            return "\n".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 20.0, start: int = 0) -> re.Match[str]:
        """The first log line (from line ``start`` on) matching ``pattern``; AssertionError after ``timeout``
        or when the process ends without one."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            i = start
            while True:
                while i < len(self.lines):
                    m = regex.search(self.lines[i])
                    if m:
                        return m
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(
                        f"no log line matching {pattern!r} within {timeout}s "
                        f"(exit {self.proc.poll()}):\n" + "\n".join(self.lines[-40:])
                    )
                self._cond.wait(min(left, 0.5))

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (the drain) and wait for the exit; its status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._reader.join(5)

    def kill(self) -> None:
        """SIGKILL (``kill -9``) and reap it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._reader.join(5)

    def __enter__(self) -> KipProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    """(status, body) of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A Prometheus text exposition as {(sample name, sorted labels): value}."""
    status, body = http_get(url)
    assert status == 200, (status, body[:300])
    out = {}
    for line in body.splitlines():
        m = _SAMPLE.match(line)
        if m:
            labels = tuple(sorted(_LABEL.findall(m.group(2) or "")))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def metric(samples: dict, name: str, **labels: str) -> float:
    """The sum of the samples named ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, lab), v in samples.items() if n == name and want <= set(lab))


def wait_until(predicate, timeout: float = 20.0, step: float = 0.05, what: str = "condition"):
    """Poll ``predicate`` until it returns something true (returned) or ``timeout`` passes (AssertionError)."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not true within {timeout}s")
        time.sleep(step)
