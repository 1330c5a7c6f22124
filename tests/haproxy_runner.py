"""A real HAProxy (Debian's ``haproxy``, ``make haproxy``) for the tests: TCP load balancing on loopback, one
frontend per port, every backend server health-checked over HTTP; its configuration written into a
temporary folder, run in the foreground (``haproxy -f CFG -db``), its servers' states read from its stats
socket. Every wait is bounded."""

from __future__ import annotations

import pathlib
import shutil
import socket
import subprocess
import time

from service_helpers import wait_until

HAPROXY = shutil.which("haproxy")


def _config(
    frontends: dict[int, list[tuple[str, str]]],
    check_ports: dict[str, int],
    stats: pathlib.Path,
    source: str | None,
    send_proxy: bool,
    inter_ms: int,
) -> str:
    """``frontends``: listening port on 127.0.0.1 -> [(server name, server address)], the server listening on
    the same port; ``check_ports``: server address -> the port of its ``GET /readyz``."""
    lines = [
        "global",
        "    maxconn 2000",
        f"    stats socket {stats} mode 600 level admin",
        "defaults",
        "    mode tcp",
        "    timeout connect 1s",
        "    timeout client 120s",
        "    timeout server 120s",
        "    timeout check 1s",
        # a connection refused by a dead server is tried again, on another server when the first is down
        "    retries 3",
        "    option redispatch",
        "    balance roundrobin",
        "    option httpchk GET /readyz",
        f"    default-server inter {inter_ms}ms fastinter {inter_ms}ms downinter {inter_ms}ms rise 2 fall 2",
    ]
    if source:
        lines.append(f"    source {source}")
    first = min(frontends)
    for port, servers in sorted(frontends.items()):
        lines += [f"frontend f{port}", f"    bind 127.0.0.1:{port}", f"    default_backend b{port}"]
        lines.append(f"backend b{port}")
        for name, address in servers:
            # each server checked once (in the first backend), the others track its state
            check = f"check port {check_ports[address]}" if port == first else f"track b{first}/{name}"
            proxy = " send-proxy-v2" if send_proxy else ""
            lines.append(f"    server {name} {address}:{port} {check}{proxy}")
    return "\n".join(lines) + "\n"


class HAProxy:
    """HAProxy in TCP mode in front of ``servers`` ((name, address) each), one frontend on 127.0.0.1 per port
    of ``ports``, each balanced (round robin) over every server on the same port; a server counts as up while
    ``GET /readyz`` on its ``check_ports[address]`` answers 2xx (checked every ``inter_ms``, once per server
    for every backend; two results change its state). ``source``: the address HAProxy connects from (None: the kernel's choice);
    ``send_proxy``: a PROXY protocol v2 header on each connection to a server."""

    def __init__(
        self,
        folder: pathlib.Path,
        ports: list[int],
        servers: list[tuple[str, str]],
        check_ports: dict[str, int],
        *,
        source: str | None = None,
        send_proxy: bool = False,
        inter_ms: int = 200,
    ) -> None:
        if HAPROXY is None:
            raise RuntimeError("haproxy is not installed (make haproxy)")
        folder.mkdir(parents=True, exist_ok=True)
        self.ports = list(ports)
        self.servers = list(servers)
        self.stats = folder / "stats.sock"
        self.cfg = folder / "haproxy.cfg"
        self.cfg.write_text(
            _config(dict.fromkeys(ports, self.servers), check_ports, self.stats, source, send_proxy, inter_ms)
        )
        self.log_path = folder / "haproxy.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self, timeout: float = 15.0) -> None:
        """Start HAProxy and wait until every frontend accepts connections."""
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [HAPROXY, "-f", str(self.cfg), "-db"], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        waiting: set[int | str] = set(self.ports)
        waiting.add("stats")  # HAProxy binds its stats socket under a temporary name, then renames it
        while waiting:
            if self.proc.poll() is not None:
                raise RuntimeError(f"haproxy exited {self.proc.returncode}: {self.log_path.read_text()[-2000:]}")
            if "stats" in waiting and self.stats.exists():
                waiting.discard("stats")
            for port in sorted(p for p in waiting if isinstance(p, int)):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    waiting.discard(port)
                except OSError:
                    pass
            if waiting and time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"haproxy does not listen on {sorted(map(str, waiting))}: {self.log_path.read_text()[-2000:]}"
                )
            if waiting:
                time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM: HAProxy stops at once and closes every connection it relays."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def restart(self) -> None:
        self.stop()
        self.start()

    def command(self, text: str) -> str:
        """One command on the stats socket (``show stat``, ``show servers state``...), its answer."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(self.stats))
            s.sendall(text.encode() + b"\n")
            out = b""
            while chunk := s.recv(65536):
                out += chunk
        return out.decode()

    def states(self) -> dict[tuple[str, str], str]:
        """(backend, server) -> its state as HAProxy sees it (``UP``, ``DOWN``, ``UP 1/2``...)."""
        rows = self.command("show stat").splitlines()
        if not rows or not rows[0].startswith("# "):
            return {}
        header = rows[0][2:].split(",")
        at = {name: i for i, name in enumerate(header)}
        out = {}
        for row in rows[1:]:
            cells = row.split(",")
            if len(cells) == len(header) and cells[at["svname"]] not in ("FRONTEND", "BACKEND"):
                out[(cells[at["pxname"]], cells[at["svname"]])] = cells[at["status"]]
        return out

    def wait_server(self, name: str, state: str, timeout: float = 15.0) -> float:
        """Wait until server ``name`` is in ``state`` (``UP`` or ``DOWN``) in every backend; the seconds it took."""
        started = time.monotonic()
        wait_until(
            lambda: all(s == state for (_, sv), s in self.states().items() if sv == name),
            timeout,
            0.02,
            f"haproxy: server {name} {state} in every backend",
        )
        return time.monotonic() - started

    def __enter__(self) -> HAProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
