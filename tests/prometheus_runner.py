"""A real Prometheus (Debian's ``prometheus``, ``make prometheus``) for the tests: its own temporary storage,
loopback only, short scrape and evaluation intervals, optional rule files; queries, range queries and alerts
through its HTTP API. Every wait is bounded."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from typing import Any

PROMETHEUS = shutil.which("prometheus")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, tmp, targets: list[str], rule_files: list[str] = (), interval: str = "1s") -> None:
        self.port = free_port()
        cfg = tmp / "prometheus.yml"
        cfg.write_text(
            json.dumps(
                {  # YAML is a superset of JSON
                    "global": {"scrape_interval": interval, "scrape_timeout": "900ms", "evaluation_interval": interval},
                    "rule_files": [str(f) for f in rule_files],
                    "scrape_configs": [{"job_name": "kip714", "static_configs": [{"targets": targets}]}],
                }
            )
        )
        self.log_path = tmp / "prometheus.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={cfg}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("prometheus did not become ready: " + self.log_path.read_text()[-2000:])

    def api(self, path: str, **params: Any) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.load(r)
        except urllib.error.HTTPError as exc:  # 400 for a query that does not parse: its error
            body = json.load(exc)
        return body

    def query(self, q: str, at: float | None = None) -> list[dict]:
        body = self.api("query", query=q, **({"time": f"{at:.3f}"} if at is not None else {}))
        assert body["status"] == "success", (q, body)
        return body["data"]["result"]

    def query_range(self, q: str, start: float, end: float, step: float) -> list[dict]:
        body = self.api("query_range", query=q, start=f"{start:.3f}", end=f"{end:.3f}", step=f"{step}")
        assert body["status"] == "success", (q, body)
        return body["data"]["result"]

    def firing(self) -> list[dict]:
        """The alerts firing now (their labels and annotations)."""
        return [a for a in self.api("alerts")["data"]["alerts"] if a["state"] == "firing"]

    def wait(self, q: str, pred=bool, timeout: float = 20.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        result: list[dict] = []
        while time.monotonic() < deadline:
            result = self.query(q)
            if pred(result):
                return result
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting on {q}: last {result}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()
