"""The Prometheus exporter's HTTP side: the WSGI application a scrape reaches, and the server it runs on
(``prometheus_client``'s threading WSGI server, optionally over TLS)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["scrape_response", "start_server", "stop_server"]


def scrape_response(source: Any, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    """Answer one WSGI request from ``source`` (an exporter: ``exposition(accept)`` and ``collect()``): any
    path; ``?name[]=`` keeps the families named, by family or sample name, as prometheus_client's
    ``make_wsgi_app`` means it; gzip when accepted."""
    import gzip
    from urllib.parse import parse_qs

    from prometheus_client.exposition import choose_encoder, gzip_accepted

    from .exposition import Collected

    method = environ["REQUEST_METHOD"]
    if method == "OPTIONS":
        status, headers, body = "200 OK", [("Allow", "OPTIONS,GET")], b""
    elif method != "GET":
        status, headers = "405 Method Not Allowed", [("Allow", "OPTIONS,GET")]
        body = f"# HTTP {status}: {method}; use OPTIONS or GET\n".encode()
    elif environ.get("PATH_INFO") == "/favicon.ico":
        status, headers, body = "200 OK", [], b""
    else:
        accept = environ.get("HTTP_ACCEPT")
        params = parse_qs(environ.get("QUERY_STRING", ""))
        if "name[]" in params:  # the families named (by family or sample name)
            names = set(params["name[]"])
            encoder, ctype = choose_encoder(accept or "")
            body = encoder(
                Collected([m for m in source.collect() if m.name in names or any(x.name in names for x in m.samples)])
            )
        else:
            body, ctype = source.exposition(accept)
        status, headers = "200 OK", [("Content-Type", ctype)]
        if gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING") or ""):
            body = gzip.compress(body, 1)
            headers.append(("Content-Encoding", "gzip"))
    start_response(status, headers)
    return [body]


def start_server(
    app: Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]],
    host: str,
    port: int,
    certfile: str | None = None,
    keyfile: str | None = None,
) -> tuple[Any, threading.Thread]:
    """Serve ``app`` on ``host:port`` (0 picks a free port) on prometheus_client's threading WSGI server, in a
    daemon thread; ``certfile``/``keyfile`` serve HTTPS. Returns ``(server, thread)``."""
    import socket
    import ssl
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from prometheus_client.exposition import ThreadingWSGIServer

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]

    class _Server(ThreadingWSGIServer):
        address_family = family
        ssl_context: ssl.SSLContext | None

    server = make_server(host, port, app, _Server, handler_class=Quiet)
    server.ssl_context = None  # reloaded in place by reload_tls (each handshake reads it)
    if certfile:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(certfile, keyfile)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        server.ssl_context = ctx
    thread = threading.Thread(target=server.serve_forever, name="kip714-prometheus-http", daemon=True)
    thread.start()
    return server, thread


def stop_server(server: Any, thread: threading.Thread, timeout: float = 5.0) -> None:
    """Stop what :func:`start_server` started."""
    server.shutdown()
    server.server_close()
    thread.join(timeout)
