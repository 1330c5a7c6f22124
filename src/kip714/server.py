"""``kip714 serve``: a KIP-714 telemetry endpoint that real Kafka clients push to.

It is **not a Kafka broker**. It speaks the subset of the Kafka protocol a client needs before it pushes
telemetry — ApiVersions (v0–v4), Metadata (itself as the only broker, no topics), GetTelemetrySubscriptions
and PushTelemetry — and answers the telemetry requests through :class:`~kip714.TelemetryBroker`, exactly
as an Apache Kafka 4.1+ broker would. Use it as a telemetry collector, or as a test peer when developing a
client's KIP-714 support. Any other API key gets a log line and a clean disconnect.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import json
import logging
import os
import pathlib
import time
from collections import Counter
from typing import Any

from ._enums import ApiKey, ErrorCode
from ._protocol import (
    DEFAULT_MAX_FRAME_BYTES,
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    GetTelemetrySubscriptionsRequest,
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponseTopic,
    PushTelemetryRequest,
    decode_request,
    encode_response,
    split_frames,
)
from .broker import TelemetryBroker
from .recorder import push_row
from .errors import Kip714Error, UnsupportedApiKeyError, UnsupportedVersionError
from .subscriptions import ClientInfo, SubscriptionRegistry, parse_config_string

__all__ = ["TelemetryServer", "ADVERTISED_APIS", "java_host_address", "load_subscription_file"]

log = logging.getLogger("kip714.server")

#: (api_key, min_version, max_version) advertised in ApiVersions responses.
ADVERTISED_APIS = ((int(ApiKey.METADATA), 0, 12), (int(ApiKey.API_VERSIONS), 0, 4),
                   (int(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS), 0, 0), (int(ApiKey.PUSH_TELEMETRY), 0, 0))
UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_TOPIC_ID = 100


def java_host_address(host: str) -> str:
    """Java's ``InetAddress.getHostAddress()`` text: IPv4 dotted, IPv6 fully uncompressed hex groups
    without leading zeros (``0:0:0:0:0:0:0:1``), scope kept."""
    addr, _, scope = host.partition("%")
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return host
    if ip.version == 4:
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    groups = ":".join(format(int.from_bytes(ip.packed[i:i + 2], "big"), "x") for i in range(0, 16, 2))
    return groups + (f"%{scope}" if scope else "")


def load_subscription_file(path: str | os.PathLike) -> dict[str, dict[str, str]]:
    """Subscriptions from a file: JSON ``{"name": {"metrics": "...", "interval.ms": "...", "match": "..."}}``
    or lines ``name metrics=[a,b],interval.ms=1000,match=[client_id=x]`` (``#`` starts a comment)."""
    text = pathlib.Path(path).read_text()
    if str(path).endswith(".json"):
        data = json.loads(text)
        return {name: {k: str(v) if not isinstance(v, list) else ",".join(map(str, v)) for k, v in cfg.items()}
                for name, cfg in data.items()}
    subs = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, rest = line.partition(" ")
        subs[name] = parse_config_string(rest.strip())
    return subs


class _Connection(asyncio.Protocol):
    def __init__(self, server: "TelemetryServer") -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.software = ("unknown", "unknown")
        self.address = ""
        self.port = 0
        self.last_activity = time.monotonic()
        self._infos: dict[str, ClientInfo] = {}
        self.connection_id = next(server._connection_ids)   # the broker's key for this connection

    # asyncio callbacks
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername") or ("", 0)
        self.address, self.port = java_host_address(str(peer[0])), int(peer[1])
        if len(self.server.connections) >= self.server.max_connections:
            log.warning("event=refused reason=max_connections peer=%s:%s", self.address, self.port)
            self.server.stats["connections_refused"] += 1
            transport.abort()
            return
        self.server.connections.add(self)
        self.server.stats["connections"] += 1
        log.debug("event=connect peer=%s:%s", self.address, self.port)

    def connection_lost(self, exc) -> None:
        self.server.connections.discard(self)
        # Kafka 4.0+: the instance created on this connection goes with it
        if self.server.broker.connection_closed(self.connection_id):
            self.server.stats["instances_dropped_on_disconnect"] += 1
        log.debug("event=disconnect peer=%s:%s", self.address, self.port)

    # Flow control: a client that sends requests without reading the answers would otherwise make the
    # transport buffer every response; stop reading while the write buffer is above its high-water mark.
    def pause_writing(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        try:
            frames, consumed = split_frames(self.buffer, self.server.max_frame_bytes)
        except Kip714Error as exc:
            self._drop(f"bad frame: {exc}")
            return
        if consumed:
            # Idle time counts from the last *complete* request: bytes trickling into a frame that never
            # completes (slow loris) do not keep the connection open.
            self.last_activity = time.monotonic()
            del self.buffer[:consumed]
        for frame in frames:
            if self.transport is None or self.transport.is_closing():
                return
            try:
                self._handle(frame)
            except Exception:  # a bug must cost this connection, not escape into the event loop
                log.error("event=internal_error peer=%s:%s", self.address, self.port, exc_info=True)
                self.server.stats["internal_errors"] += 1
                self._drop("internal error")
                return

    # request handling
    def _drop(self, reason: str) -> None:
        log.warning("event=disconnect peer=%s:%s reason=%r", self.address, self.port, reason)
        self.server.stats["protocol_errors"] += 1
        if self.transport is not None:
            self.transport.abort()

    def _client_info(self, client_id: str | None) -> ClientInfo:
        key = client_id or ""
        info = self._infos.get(key)
        if info is None:
            info = ClientInfo(client_id=key, client_software_name=self.software[0],
                              client_software_version=self.software[1], client_source_address=self.address,
                              client_source_port=self.port)
            self._infos[key] = info
        return info

    def _handle(self, frame: bytes) -> None:
        server = self.server
        try:
            req = decode_request(frame)
        except UnsupportedVersionError as exc:
            header = exc.header
            if header.api_key == ApiKey.API_VERSIONS:
                # Kafka answers an ApiVersions version it does not know in the v0 format, listing its range
                body = ApiVersionsResponse(error_code=int(ErrorCode.UNSUPPORTED_VERSION),
                                           api_keys=[ApiVersion(18, 0, 4)])
                self.transport.write(encode_response(header.correlation_id, body, 0))
                return
            self._drop(f"unsupported version {header.api_version} of API key {header.api_key}")
            return
        except UnsupportedApiKeyError as exc:
            h = exc.header
            self._drop(f"API key {h.api_key} v{h.api_version} is not served (client_id={h.client_id!r})")
            return
        except Kip714Error as exc:
            self._drop(f"malformed request: {exc}")
            return
        body = req.body
        version = req.api_version
        if type(body) is PushTelemetryRequest or type(body) is GetTelemetrySubscriptionsRequest:
            info = self._client_info(req.header.client_id)
            now = server.broker.clock()
            response, payload = server.broker.handle(body, info, now, self.connection_id)
            if type(body) is PushTelemetryRequest:
                server.count_push(response.error_code)
                if server.recorder is not None:
                    server.record(body, info, response.error_code, now)
                if payload is not None and server.on_payload is not None:
                    server.on_payload(payload)
            else:
                server.stats["gets"] += 1
            self.transport.write(encode_response(req.correlation_id, response, version))
        elif type(body) is ApiVersionsRequest:
            error = 0
            if version >= 3:
                if body.is_valid():
                    self.software = (body.client_software_name, body.client_software_version)
                    self._infos.clear()
                else:
                    error = int(ErrorCode.INVALID_REQUEST)
            resp = ApiVersionsResponse(error_code=error,
                                       api_keys=[ApiVersion(*a) for a in ADVERTISED_APIS] if not error else [])
            self.transport.write(encode_response(req.correlation_id, resp, version))
        elif type(body) is MetadataRequest:
            if version < 12 and any(t.name is None for t in body.topics or ()):
                # Kafka: "Topic name can not be null for version 10/11" (InvalidRequestException)
                self._drop(f"Metadata v{version} request with a null topic name")
                return
            self.transport.write(encode_response(req.correlation_id, server.metadata(body), version))


class TelemetryServer:
    """The asyncio server behind ``kip714 serve``.

    ``advertised_host``/``advertised_port`` are what Metadata tells clients (set them for clients behind
    NAT); by default the bound address. ``recorder`` (a :class:`~kip714.recorder.ParquetRecorder`) records
    every push; ``on_payload`` is called with every accepted payload.

    Limits: at most ``max_connections`` open connections (more are accepted and closed at once); a size
    prefix over ``max_frame_bytes`` closes the connection before anything is buffered for the frame; a
    connection with no complete request for ``idle_timeout_s`` is closed (bytes trickling into a frame
    that never completes do not count); while a client leaves its responses unread, the server stops
    reading its requests (asyncio flow control), so neither buffer grows without bound. As in Kafka 4.0+,
    the client instance created on a connection is dropped when that connection closes
    (``stats["instances_dropped_on_disconnect"]``)."""

    def __init__(self, broker: TelemetryBroker | None = None, host: str = "127.0.0.1", port: int = 9092, *,
                 advertised_host: str | None = None, advertised_port: int | None = None,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, max_connections: int = 10000,
                 idle_timeout_s: float = 600.0, recorder=None, cluster_id: str = "kip714-telemetry",
                 summary_interval_s: float = 0.0, on_payload=None) -> None:
        self.broker = broker if broker is not None else TelemetryBroker(SubscriptionRegistry())
        self.host, self.port = host, port
        self.advertised_host, self.advertised_port = advertised_host, advertised_port
        self.max_frame_bytes = max_frame_bytes
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self.recorder = recorder
        self.cluster_id = cluster_id
        self.summary_interval_s = summary_interval_s
        self.on_payload = on_payload
        self.connections: set[_Connection] = set()
        self._connection_ids = itertools.count(1)
        self.stats: Counter[str] = Counter()
        self.push_codes: Counter[int] = Counter()
        self._server: asyncio.AbstractServer | None = None
        self._tasks: list[asyncio.Task] = []

    @property
    def node_id(self) -> int:
        return self.broker.node_id

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Connection(self), self.host, self.port,
                                                reuse_address=True, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        self._tasks.append(asyncio.create_task(self._idle_reaper()))
        if self.summary_interval_s > 0:
            self._tasks.append(asyncio.create_task(self._summaries()))
        log.info("event=listening host=%s port=%d node_id=%d advertised=%s:%d", self.host, self.port,
                 self.node_id, self.advertised_host or self.host, self.advertised_port or self.port)

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        if self._server is not None:
            self._server.close()
            for conn in list(self.connections):
                if conn.transport is not None:
                    conn.transport.close()
            await self._server.wait_closed()
        if self.recorder is not None:
            self.recorder.close()
        log.info("event=stopped %s", self.summary())

    async def serve(self, duration_s: float | None = None, stop: asyncio.Event | None = None) -> None:
        """Run until ``stop`` is set or ``duration_s`` passes (forever when neither is given)."""
        await self.start()
        try:
            stop = stop or asyncio.Event()
            try:
                await asyncio.wait_for(stop.wait(), duration_s)
            except asyncio.TimeoutError:
                pass
        finally:
            await self.close()

    # ------------------------------------------------------------------------------------ answers

    def metadata(self, request: MetadataRequest) -> MetadataResponse:
        topics = []
        for t in request.topics or ():
            # a topic asked for by id alone (v12+, name null) is an unknown topic id, as in Kafka
            code = UNKNOWN_TOPIC_OR_PARTITION if t.name is not None else UNKNOWN_TOPIC_ID
            topics.append(MetadataResponseTopic(error_code=code, name=t.name, topic_id=t.topic_id))
        me = MetadataResponseBroker(self.node_id, self.advertised_host or self.host,
                                    self.advertised_port or self.port, None)
        return MetadataResponse(brokers=[me], cluster_id=self.cluster_id, controller_id=self.node_id,
                                topics=topics)

    def count_push(self, error_code: int) -> None:
        self.stats["pushes"] += 1
        self.push_codes[error_code] += 1

    def record(self, body: PushTelemetryRequest, info: ClientInfo, error_code: int, now_ms: int) -> None:
        self.recorder.record(push_row(body, info, self.node_id, error_code, now_ms))

    def summary(self) -> str:
        codes = " ".join(f"{ErrorCode(c).name if c in ErrorCode._value2member_map_ else c}={n}"
                         for c, n in sorted(self.push_codes.items()))
        return (f"connections_open={len(self.connections)} connections_total={self.stats['connections']} "
                f"gets={self.stats['gets']} pushes={self.stats['pushes']} push_results=[{codes}] "
                f"instances={len(self.broker.instances)} protocol_errors={self.stats['protocol_errors']}")

    async def _summaries(self) -> None:
        while True:
            await asyncio.sleep(self.summary_interval_s)
            log.info("event=summary %s", self.summary())

    async def _idle_reaper(self) -> None:
        while True:
            await asyncio.sleep(min(5.0, max(0.05, self.idle_timeout_s / 4)))
            cutoff = time.monotonic() - self.idle_timeout_s
            for conn in list(self.connections):
                if conn.last_activity < cutoff and conn.transport is not None:
                    log.info("event=disconnect peer=%s:%s reason=idle", conn.address, conn.port)
                    self.stats["idle_closed"] += 1
                    conn.transport.close()


class SubscriptionFileWatcher:
    """Applies a subscription file to a registry and re-applies it when the file changes (each change
    bumps SubscriptionIds, as a config change does in Kafka)."""

    def __init__(self, registry: SubscriptionRegistry, path: str | os.PathLike) -> None:
        self.registry = registry
        self.path = pathlib.Path(path)
        self._mtime = None
        self._applied: dict[str, dict[str, str]] = {}
        self.reload()

    def reload(self) -> bool:
        stat = self.path.stat()
        key = (stat.st_mtime_ns, stat.st_size)
        if key == self._mtime:
            return False
        subs = load_subscription_file(self.path)
        for name in set(self._applied) - set(subs):
            self.registry.delete(name)
        for name, cfg in subs.items():
            if self._applied.get(name) != cfg:
                self.registry.set(name, cfg)
        self._applied = subs
        self._mtime = key
        log.info("event=subscriptions_loaded file=%s count=%d version=%d", self.path, len(subs),
                 self.registry.version)
        return True

    async def watch(self, interval_s: float = 1.0) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.reload()
            except Exception as exc:  # keep serving the last good configuration
                log.error("event=subscriptions_reload_failed file=%s error=%r", self.path, exc)


def serve_main(args: Any) -> int:
    """Entry point of ``kip714 serve`` (argparse namespace from kip714.cli)."""
    import signal

    from .recorder import ParquetRecorder

    logging.basicConfig(level=getattr(logging, args.log_level.upper()),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    registry = SubscriptionRegistry(jdk=args.jdk)
    watcher = None
    if args.config:
        watcher = SubscriptionFileWatcher(registry, args.config)
    if args.metrics is not None or args.match or args.interval_ms is not None:
        cfg = {"metrics": args.metrics if args.metrics is not None else "*"}
        if args.interval_ms is not None:
            cfg["interval.ms"] = str(args.interval_ms)
        if args.match:
            cfg["match"] = args.match
        registry.set(args.subscription_name, cfg)
    codecs = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    accepted = [codecs[c.strip().lower()] for c in args.accepted_compression.split(",") if c.strip()]
    broker = TelemetryBroker(registry, telemetry_max_bytes=args.telemetry_max_bytes,
                             accepted_compression_types=accepted, max_instances=args.max_instances,
                             node_id=args.node_id)
    recorder = ParquetRecorder(args.record) if args.record else None
    server = TelemetryServer(broker, args.host, args.port, advertised_host=args.advertised_host,
                             advertised_port=args.advertised_port, recorder=recorder,
                             max_connections=args.max_connections, idle_timeout_s=args.idle_timeout,
                             max_frame_bytes=args.max_frame_bytes, summary_interval_s=args.summary_interval)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):
                pass
        tasks = [asyncio.create_task(watcher.watch())] if watcher else []
        try:
            await server.serve(args.duration, stop)
        finally:
            for t in tasks:
                t.cancel()

    asyncio.run(run())
    print(server.summary())
    return 0
