"""A local OTLP/HTTP collector that accepts everything, for the ``endpoint`` group's ``--otlp-endpoint`` row.

``python -m kip714.tools.bench.otlp_sink`` listens on a free loopback port (printed as ``event=listening
port=N`` on stderr) and answers every POST with ``200`` and an empty ``ExportMetricsServiceResponse``
after reading its body (HTTP/1.1, keep-alive, one thread per connection): the cheapest collector there is,
in a process of its own so that its CPU is not the endpoint's. It counts requests, body bytes and the
resource attributes named ``client_instance_id`` in the (gunzipped) bodies, the label the forwarder adds to
every ``ResourceMetrics`` by default: ``GET`` answers them as JSON (``{"requests", "bytes", "resources"}``),
and they are printed on stderr when it stops (SIGTERM)."""

from __future__ import annotations

import gzip
import http.server
import json
import signal
import sys
import threading

__all__ = ["KEY", "counts", "main"]


#: The attribute key counted: the forwarder adds it to every ResourceMetrics (its default labels).
KEY = b"client_instance_id"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    requests = 0
    body_bytes = 0
    resources = 0
    lock = threading.Lock()

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        found = body.count(KEY)
        with _Handler.lock:
            _Handler.requests += 1
            _Handler.body_bytes += n
            _Handler.resources += found
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        body = json.dumps(counts()).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def counts() -> dict[str, int]:
    """What the sink has received so far."""
    with _Handler.lock:
        return {"requests": _Handler.requests, "bytes": _Handler.body_bytes, "resources": _Handler.resources}


def main() -> int:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    print(f"event=listening host=127.0.0.1 port={server.server_port}", file=sys.stderr, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        c = counts()
        print(
            f"event=stopped requests={c['requests']} bytes={c['bytes']} resources={c['resources']}",
            file=sys.stderr,
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
