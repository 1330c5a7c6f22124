"""The fleet: N simulated producers and M consumers with their software mix, codecs, consumer groups and
brokers, and the in-process driver that runs them against a :class:`~kip714.TelemetryBroker` on a
simulated clock (hours of telemetry in seconds). The TCP driver is :mod:`kip714.tools.simulate.tcp`."""

from __future__ import annotations

import asyncio
import heapq
import math
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kip714._enums import CompressionType
from kip714._protocol import ApiVersionsRequest, PushTelemetryRequest
from kip714._units import parse_duration  # kip714's one duration syntax (re-exported here)
from kip714.broker.manager import TelemetryBroker
from kip714.broker.receivers import ReceiverContext, TelemetryPayload
from kip714.broker.subscriptions import ClientInfo
from kip714.client.telemetry import INT_MAX
from kip714.sinks.recorder import push_row

from .clients import CODECS, SOFTWARE_JAVA, SOFTWARE_PRESETS, SimClient
from .stats import FleetStats
from .stochastic import Incidents, lognormal
from .streams import StreamsApp, StreamsRole, new_app
from .tcp import drive

__all__ = ["Fleet", "parse_duration"]

_REQUEST_TIMEOUT_MS = 30_000

_SERVICES = (
    "orders",
    "payments",
    "inventory",
    "clickstream",
    "billing",
    "search-indexer",
    "fraud-check",
    "notifications",
    "shipping",
    "audit-log",
    "recommendations",
    "user-profile",
)
_RACKS = ("use1-az1", "use1-az2", "use1-az4")
_PARTITION_CHOICES = (6, 12, 12, 24, 24, 32, 48, 64)


_START, _POLL, _RESPONSE = 0, 1, 2


def _software_choices(software: Any) -> list[tuple[tuple[str, str, str | None], float]]:
    """Normalise ``software`` into [((name, version, layout or None), weight)]."""
    if isinstance(software, str):
        if software not in SOFTWARE_PRESETS:
            raise ValueError(f"software preset must be one of {sorted(SOFTWARE_PRESETS)}, not {software!r}")
        software = SOFTWARE_PRESETS[software]
    if isinstance(software, Mapping):
        items = list(software.items())
    elif isinstance(software, tuple) and software and all(isinstance(x, str) for x in software):
        items = [(software, 1.0)]
    else:
        items = []
        for entry in software:
            if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], tuple):
                items.append((entry[0], float(entry[1])))
            else:
                items.append((tuple(entry), 1.0))
    out = []
    for sw, w in items:
        if len(sw) not in (2, 3):
            raise ValueError(f"software entries are (name, version) or (name, version, layout), not {sw!r}")
        name, version = str(sw[0]), str(sw[1])
        layout = sw[2] if len(sw) == 3 else None
        if not ApiVersionsRequest(name, version).is_valid():
            raise ValueError(f"{name!r}/{version!r} is not a valid KIP-511 client software name/version")
        out.append(((name, version, layout), float(w)))
    if not out or sum(w for _, w in out) <= 0:
        raise ValueError("software needs at least one entry with a positive weight")
    return out


def _layout_for(name: str, version: str) -> str:
    return "librdkafka" if "rdkafka" in name.lower() or "rdkafka" in version.lower() else "java"


class Fleet:
    """N simulated producers and M consumers (see the module docstring).

    ``software``: one ``(name, version)`` pair (optionally a third element, the layout), a preset name from
    :data:`SOFTWARE_PRESETS` (``"java"``, ``"librdkafka"``, ``"mix"``), a list of pairs (equal weights) or a
    mapping pair → weight. The layout follows the name (``rdkafka`` in the name or version → librdkafka).
    ``codec``: ``None`` (every client supports every codec, so the broker's preference decides), a name from
    :data:`CODECS` (clients support only that one; ``"none"`` sends uncompressed), ``"mixed"`` (each client
    picks one), or a list of names to pick from. ``brokers``: a count (node ids 1..n) or the node ids.
    ``slow_broker``: the node id with ``slow_factor`` × latency (``"auto"``: one chosen by the seed; ``None``:
    none). ``start_ms``: the simulated clock's Unix-epoch start (default: the wall clock when the first
    in-process run starts). Clients start spread over ``start_spread_ms`` and close spread over
    ``close_spread_ms``. ``incidents``: fleet-wide broker slow-downs on/off. ``n_streams``: Kafka Streams
    applications (``streams_version``, default 4.2.0), each an admin client and the main consumers of its
    ``streams_threads`` stream threads, pushing the Streams metrics (:mod:`kip714.tools.simulate.streams`;
    :attr:`streams_apps`).
    """

    def __init__(
        self,
        n_producers: int = 0,
        n_consumers: int = 0,
        *,
        seed: Any = 0,
        brokers: int | Sequence[int] = 3,
        software: Any = SOFTWARE_JAVA,
        codec: str | Sequence[str] | None = None,
        slow_broker: int | str | None = "auto",
        slow_factor: float = 3.0,
        start_ms: int | None = None,
        start_spread_ms: int = 5_000,
        close_spread_ms: int = 1_000,
        consumer_groups: int | None = None,
        rack_fraction: float = 0.4,
        transactional_fraction: float = 0.2,
        static_member_fraction: float = 0.2,
        incidents: bool = True,
        client_id_prefix: str = "",
        n_streams: int = 0,
        streams_threads: int = 2,
        streams_version: str = "4.2.0",
    ) -> None:
        if n_producers < 0 or n_consumers < 0 or n_streams < 0:
            raise ValueError("client counts must not be negative")
        if n_streams and streams_threads < 1:
            raise ValueError("a Kafka Streams application has at least one stream thread")
        self.seed = seed
        rng = random.Random(f"{seed}:fleet")
        self.nodes: tuple[int, ...] = (
            tuple(range(1, int(brokers) + 1)) if isinstance(brokers, int) else tuple(int(b) for b in brokers)
        )
        if not self.nodes or any(n < 0 for n in self.nodes):
            raise ValueError("brokers must be a positive count or non-negative node ids")
        if slow_broker == "auto":
            slow_broker = rng.choice(self.nodes) if len(self.nodes) > 1 else None
        if slow_broker is not None and slow_broker not in self.nodes:
            raise ValueError(f"slow_broker {slow_broker} is not one of the brokers {self.nodes}")
        self.slow_broker = slow_broker
        self.node_factor = {
            n: lognormal(rng, 1.0, 0.1) * (slow_factor if n == slow_broker else 1.0) for n in self.nodes
        }
        self.start_ms = start_ms
        self.start_spread_ms = max(0, int(start_spread_ms))
        self.close_spread_ms = max(0, int(close_spread_ms))
        self.incidents_enabled = incidents
        self.incidents: Incidents = Incidents(seed, (), 0)
        choices = _software_choices(software)
        if isinstance(codec, str) and codec == "mixed":
            codec_choices: list[str | None] = ["zstd", "lz4", "gzip", "snappy", "none"]
        elif codec is None or isinstance(codec, str):
            codec_choices = [codec]
        else:
            codec_choices = list(codec)
        for cdc in codec_choices:
            if cdc is not None and cdc not in CODECS:
                raise ValueError(f"codec must be one of {sorted(CODECS)}, 'mixed' or None, not {cdc!r}")
        self._codec_choices = codec_choices
        n_groups = (
            consumer_groups if consumer_groups is not None else max(1, min(len(_SERVICES), math.ceil(n_consumers / 5)))
        )
        groups = [
            (
                f"{_SERVICES[g % len(_SERVICES)]}" + (f"-{g // len(_SERVICES)}" if g >= len(_SERVICES) else ""),
                rng.choice(_PARTITION_CHOICES),
                rng.choice(self.nodes),
            )
            for g in range(max(1, n_groups))
        ]
        members: dict[int, int] = Counter()
        self.clients: list[SimClient] = []
        for i in range(n_producers + n_consumers):
            kind = "producer" if i < n_producers else "consumer"
            crng = random.Random(f"{seed}:client:{i}")
            ((name, version, layout),) = crng.choices([c for c, _ in choices], [w for _, w in choices])
            layout = layout or _layout_for(name, version)
            cdc = crng.choice(codec_choices)
            resource: dict[str, str] = {}
            if crng.random() < rack_fraction:
                resource["client_rack"] = crng.choice(_RACKS)
            group_id = member_id = None
            coordinator = crng.choice(self.nodes)
            if kind == "producer":
                service = crng.choice(_SERVICES)
                client_id = f"{client_id_prefix}{service}-producer-{i}"
                if crng.random() < transactional_fraction:
                    resource["transactional_id"] = f"{service}-tx-{i}"
            else:
                gi = (i - n_producers) % len(groups)
                group_id, _, coordinator = groups[gi]
                service = group_id
                client_id = f"{client_id_prefix}{service}-consumer-{i}"
                resource["group_id"] = f"{group_id}-consumers"
                group_id = resource["group_id"]
                if crng.random() < static_member_fraction:
                    resource["group_instance_id"] = f"{service}-{members[gi]}"
                member_uuid = uuid.UUID(int=crng.getrandbits(128), version=4)
                member_id = f"rdkafka-{member_uuid}" if layout == "librdkafka" else f"{client_id}-{member_uuid}"
                members[gi] += 1
            addr = f"10.{crng.randint(0, 31)}.{crng.randint(0, 255)}.{crng.randint(2, 254)}"
            principal = crng.choice(("User:ANONYMOUS", f"User:{service}", f"User:svc-{service}"))
            info = ClientInfo(
                client_id=client_id,
                client_software_name=name,
                client_software_version=version,
                client_source_address=addr,
                client_source_port=crng.randint(32768, 60999),
                principal=principal,
            )
            self.clients.append(
                SimClient(
                    index=i,
                    kind=kind,
                    client_id=client_id,
                    software_name=name,
                    software_version=version,
                    layout=layout,
                    codec=cdc,
                    service=service,
                    client_info=info,
                    rng=crng,
                    jitter_rng=random.Random(f"{seed}:jitter:{i}"),
                    resource=resource,
                    group_id=group_id,
                    member_id=member_id,
                    coordinator=coordinator,
                    start_offset_ms=int(crng.random() * self.start_spread_ms),
                    connect_delay_ms=int(lognormal(crng, 120.0, 0.5)) + 5,
                    rtt_ms=max(1, round(lognormal(crng, 1.5, 0.6))),
                    close_offset_ms=int(crng.random() * self.close_spread_ms),
                )
            )
        # consumers of a group split its partitions
        for gi, (_, partitions, _) in enumerate(groups):
            group_members = [
                c for c in self.clients if c.kind == "consumer" and (c.index - n_producers) % len(groups) == gi
            ]
            for j, c in enumerate(group_members):
                c.base_assignment = partitions // len(group_members) + (j < partitions % len(group_members))
        self.groups = groups
        #: the Kafka Streams applications (their clients are in :attr:`clients`, after the others)
        self.streams_apps: list[StreamsApp] = []
        for a in range(n_streams):
            self._add_streams_app(a, streams_threads, streams_version, client_id_prefix)
        self.stats = FleetStats(clients=len(self.clients))
        #: ``(client, payload)`` for every accepted payload of runs with ``collect_payloads=True``
        self.payloads: list[tuple[SimClient, TelemetryPayload]] = []
        # in-process run state
        self._now = 0
        self._t0: int | None = None
        self._heap: list[tuple[int, int, int, SimClient, Any]] = []
        self._seq = 0
        self._closed = False
        self._mode: str | None = None

    def _add_streams_app(self, a: int, threads: int, version: str, prefix: str) -> None:
        """A Kafka Streams application: its admin client, then the main consumer of each stream thread
        (:mod:`kip714.tools.simulate.streams`)."""
        arng = random.Random(f"{self.seed}:streams:{a}")
        service = _SERVICES[(a * 5 + 2) % len(_SERVICES)]
        app = new_app(arng, a // len(_SERVICES), threads, version, prefix + service)
        self.streams_apps.append(app)
        software = ("apache-kafka-java", version)
        for thread in [None, *range(1, threads + 1)]:
            i = len(self.clients)
            crng = random.Random(f"{self.seed}:client:{i}")
            if thread is None:
                kind, client_id, resource = "admin", f"{app.client_id}-admin", {}
            else:
                kind, client_id = "consumer", f"{app.thread_id(thread)}-consumer"
                resource = {"group_id": app.application_id}
            info = ClientInfo(
                client_id=client_id,
                client_software_name=software[0],
                client_software_version=software[1],
                client_source_address=f"10.{crng.randint(0, 31)}.{crng.randint(0, 255)}.{crng.randint(2, 254)}",
                client_source_port=crng.randint(32768, 60999),
                principal=f"User:{app.application_id}",
            )
            self.clients.append(
                SimClient(
                    index=i,
                    kind=kind,
                    client_id=client_id,
                    software_name=software[0],
                    software_version=software[1],
                    layout="java",
                    codec=crng.choice(self._codec_choices),
                    service=service,
                    client_info=info,
                    rng=crng,
                    jitter_rng=random.Random(f"{self.seed}:jitter:{i}"),
                    resource=resource,
                    group_id=resource.get("group_id"),
                    coordinator=crng.choice(self.nodes),
                    start_offset_ms=int(crng.random() * self.start_spread_ms),
                    connect_delay_ms=int(lognormal(crng, 120.0, 0.5)) + 5,
                    rtt_ms=max(1, round(lognormal(crng, 1.5, 0.6))),
                    close_offset_ms=int(crng.random() * self.close_spread_ms),
                    streams=StreamsRole(app, thread),
                )
            )

    # ---------------------------------------------------------------------------------- helpers

    def __len__(self) -> int:
        return len(self.clients)

    @property
    def producers(self) -> list[SimClient]:
        return [c for c in self.clients if c.kind == "producer"]

    @property
    def consumers(self) -> list[SimClient]:
        return [c for c in self.clients if c.kind == "consumer"]

    @property
    def run_start_ms(self) -> int | None:
        """When the in-process run started on the simulated clock (Unix-epoch milliseconds); ``None``
        before the first run."""
        return self._t0

    @property
    def now_ms(self) -> int:
        """The simulated clock (Unix-epoch milliseconds) of an in-process run."""
        return self._now

    def sim_clock_ns(self) -> int:
        """The simulated clock in nanoseconds (what simulated clients read)."""
        return self._now * 1_000_000

    def schedule(self, t: int, kind: int, client: SimClient, data: Any = None) -> None:
        """Queue an event for ``client`` at simulated time ``t``."""
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, kind, client, data))

    def count_response(self, api: str, code: int, client: SimClient) -> None:
        """Count one answer of the endpoint (by API and error code), fleet-wide and per client."""
        (self.stats.get_results if api == "GetTelemetrySubscriptions" else self.stats.push_results)[code] += 1
        if code:
            client.errors[code] += 1

    def count_push(self, client: SimClient, body: PushTelemetryRequest, code: int) -> None:
        """Count one push a client sent (sizes, codecs, terminating)."""
        st = self.stats
        size = body.metrics_size
        st.payload_bytes += size
        client.payload_bytes += size
        client.pushes += 1
        st.by_compression[CompressionType(body.compression_type).name] += 1
        if body.terminating:
            st.terminating_pushes += 1
            client.terminating_pushes += 1
        if code == 0:
            st.accepted += 1
            client.accepted_pushes += 1

    # ---------------------------------------------------------------------------------- in-process

    def run_in_process(
        self,
        broker: TelemetryBroker,
        duration_ms: int | str,
        *,
        step_ms: int = 10,
        on_payload: Callable[[TelemetryPayload, SimClient], Any] | None = None,
        collect_payloads: bool = False,
        recorder: Any = None,
        record_rejected: bool = True,
        actions: Iterable[tuple[int, Callable[[int], Any]]] = (),
        progress: Callable[[FleetStats], Any] | None = None,
        progress_every_ms: int | None = None,
        close: bool = True,
    ) -> FleetStats:
        """Drive the fleet against ``broker`` for ``duration_ms`` of simulated time (a number or a
        :func:`parse_duration` string), then (``close=True``) let every client initiate close and send its
        terminating push. Returns :attr:`stats` (cumulative over calls; ``close=False`` lets a later call
        continue the same run).

        Requests go out on ``step_ms`` ticks of the simulated clock (the clients' poll granularity); each
        response is handled one client round trip later. ``on_payload(payload, client)`` gets every accepted
        non-empty :class:`~kip714.TelemetryPayload`; ``collect_payloads=True`` also keeps them as
        ``(client, payload)`` in :attr:`payloads`. ``recorder`` (a :class:`~kip714.sinks.ParquetRecorder`,
        or a directory for one that this call creates and closes) gets one row per push in the
        ``kip714 serve --record`` schema; ``record_rejected=False`` records accepted pushes only.
        ``actions``: ``(offset_ms, fn)`` pairs, ``fn(now_ms)`` called at that offset from the start of this
        call (e.g. ``registry.set`` for a configuration change). ``progress(stats)`` is called every
        ``progress_every_ms`` of simulated time."""
        if self._closed:
            raise RuntimeError("this fleet has already closed; create a new Fleet")
        if self._mode not in (None, "in-process"):
            raise RuntimeError("this fleet was driven over TCP; create a new Fleet")
        self._mode = "in-process"
        duration = parse_duration(duration_ms) if isinstance(duration_ms, str) else int(duration_ms)
        if duration < 0:
            raise ValueError("duration must not be negative")
        step = max(1, int(step_ms))
        own_recorder = False
        if recorder is not None and not hasattr(recorder, "record"):
            from kip714.sinks.recorder import ParquetRecorder

            recorder = ParquetRecorder(recorder)
            own_recorder = True
        ctx = _RunContext(self, broker, step, on_payload, collect_payloads, recorder, record_rejected)
        wall0 = time.perf_counter()
        if self._t0 is None:
            self._t0 = int(self.start_ms if self.start_ms is not None else time.time() * 1000)
            self._now = self._t0
            if self.incidents_enabled:
                self.incidents = Incidents(self.seed, self.nodes, self._t0)
            for c in self.clients:
                self.schedule(self._t0 + c.start_offset_ms, _START, c)
        begin = self._now
        end = begin + duration
        pending = sorted(((begin + int(off), i, fn) for i, (off, fn) in enumerate(actions)), key=lambda a: a[:2])
        every = progress_every_ms if progress_every_ms else max(1, duration // 10 or 1)
        next_progress = begin + every if progress is not None else None
        heap = self._heap
        try:
            while heap and heap[0][0] <= end:
                t = heap[0][0]
                while pending and pending[0][0] <= t:
                    self._now = max(self._now, pending[0][0])
                    pending.pop(0)[2](self._now)
                    t = heap[0][0]  # an action never schedules events, but keep the order exact
                if next_progress is not None and t >= next_progress:
                    while next_progress <= t:
                        next_progress += every
                    self._progress(progress, wall0)
                t, _, kind, client, data = heapq.heappop(heap)
                self._now = t
                ctx.dispatch(kind, client, data)
            for when, _, fn in pending:
                if when <= end:
                    self._now = max(self._now, when)
                    fn(self._now)
            self._now = max(self._now, end)
            if close:
                self._close_in_process(ctx)
        finally:
            self.stats.simulated_ms = self._now - self._t0
            self.stats.wall_s += time.perf_counter() - wall0
            if own_recorder:
                recorder.close()
        if progress is not None:
            progress(self.stats)
        return self.stats

    def _progress(self, progress, wall0: float) -> None:
        assert self._t0 is not None  # progress is reported from inside a run
        wall_before = self.stats.wall_s
        self.stats.simulated_ms = self._now - self._t0
        self.stats.wall_s = wall_before + time.perf_counter() - wall0
        try:
            progress(self.stats)
        finally:
            self.stats.wall_s = wall_before

    def _close_in_process(self, ctx: _RunContext) -> None:
        # in-flight responses arrive first; polls that are not due yet are dropped
        heap = self._heap
        while heap:
            t, _, kind, client, data = heapq.heappop(heap)
            if kind == _RESPONSE:
                self._now = max(self._now, t)
                ctx.dispatch(kind, client, data, reschedule=False)
        close_at = self._now
        for c in sorted(self.clients, key=lambda c: (c.close_offset_ms, c.index)):
            self._now = close_at + c.close_offset_ms
            ctx.close_client(c)
        self._closed = True

    # ---------------------------------------------------------------------------------- TCP

    def run_tcp(self, host: str, port: int, duration_s: float, **kw: Any) -> FleetStats:
        """:meth:`run_tcp_async` in a new event loop (``asyncio.run``)."""
        return asyncio.run(self.run_tcp_async(host, port, duration_s, **kw))

    async def run_tcp_async(self, host: str, port: int, duration_s: float, **options: Any) -> FleetStats:
        """Drive every client over its own TCP connection to ``host:port`` in real time for ``duration_s``:
        :func:`kip714.tools.simulate.tcp.drive` with this fleet and its keyword ``options`` (the timeouts,
        ``allow_remote``, ``progress``, ``stop``...). A fleet runs once."""
        if self._mode is not None:
            raise RuntimeError("this fleet has already run; create a new Fleet")
        self._mode = "tcp"
        try:
            return await drive(self, host, port, duration_s, **options)
        finally:
            self._closed = True


class _RunContext:
    """One in-process run's collaborators (kept out of Fleet so runs can pass different ones)."""

    def __init__(
        self,
        fleet: Fleet,
        broker: TelemetryBroker,
        step: int,
        on_payload,
        collect: bool,
        recorder,
        record_rejected: bool,
    ) -> None:
        self.fleet = fleet
        self.broker = broker
        self.step = step
        self.on_payload = on_payload
        self.collect = collect
        self.recorder = recorder
        self.record_rejected = record_rejected
        self.node_id = str(broker.node_id)

    def tick(self, t: int) -> int:
        """The first poll tick at or after ``t``."""
        t0, step = self.fleet.run_start_ms, self.step
        assert t0 is not None  # ticks are taken during a run
        return t0 + -(-(t - t0) // step) * step

    def dispatch(self, kind: int, client: SimClient, data: Any, reschedule: bool = True) -> None:
        fleet = self.fleet
        now = fleet.now_ms
        if kind == _START:
            client.start(fleet, fleet.sim_clock_ns, now)
            fleet.stats.started += 1
            fleet.schedule(self.tick(now + client.connect_delay_ms), _POLL, client)
        elif kind == _POLL:
            self.poll(client, now)
        else:
            assert client.telemetry is not None  # responses answer the requests of started clients
            client.telemetry.handle_response(data, now)
            if reschedule:
                self.schedule(client, now)

    def schedule(self, client: SimClient, now: int, minimum: int = 0) -> None:
        tel = client.telemetry
        assert tel is not None  # only started clients are scheduled
        if not tel.enabled:
            return
        wait = tel.time_to_next_update(_REQUEST_TIMEOUT_MS, now)
        if wait >= INT_MAX:
            return
        self.fleet.schedule(self.tick(now + max(wait, minimum)), _POLL, client)

    def poll(self, client: SimClient, now: int) -> None:
        tel = client.telemetry
        assert tel is not None  # polls are scheduled for started clients only
        if not tel.enabled or client.closed:
            return
        if client.leaving(now):
            if client.leave_cleanly:
                self.close_client(client)
            else:  # gone without a word: a crash or a hang
                tel.close()
                client.closed = True
            return
        body = tel.create_request(now)
        if body is None:
            self.schedule(client, now, minimum=self.step)
            return
        self.send(client, body, now)
        self.fleet.schedule(now + client.rtt_ms, _RESPONSE, client, self._last_response)

    def send(self, client: SimClient, body: Any, now: int) -> None:
        fleet, st = self.fleet, self.fleet.stats
        response, payload = self.broker.handle(body, client.client_info, now)
        self._last_response = response
        code = response.error_code
        if type(body) is PushTelemetryRequest:
            st.requests["PushTelemetry"] += 1
            fleet.count_response("PushTelemetry", code, client)
            fleet.count_push(client, body, code)
            if self.recorder is not None and (code == 0 or self.record_rejected):
                self.record(body, client, code, now)
            if payload is not None:
                st.payloads += 1
                st.uncompressed_bytes += len(payload.data)
                if self.collect:
                    fleet.payloads.append((client, payload))
                if self.on_payload is not None:
                    self.on_payload(payload, client)
        else:
            st.requests["GetTelemetrySubscriptions"] += 1
            client.gets += 1
            fleet.count_response("GetTelemetrySubscriptions", code, client)

    def record(self, body: PushTelemetryRequest, client: SimClient, code: int, now: int) -> None:
        assert client.telemetry is not None  # only started clients push
        self.recorder.record(push_row(body, client.client_info, self.node_id, code, now, client.telemetry.subscription))
        self.fleet.stats.recorded_rows += 1

    def close_client(self, client: SimClient) -> None:
        if not client.started or client.closed:
            return
        tel = client.telemetry
        assert tel is not None  # started
        now = self.fleet.now_ms
        if tel.enabled and tel.initiate_close(now):
            body = tel.create_request(now)
            if body is not None:
                self.send(client, body, now)
                tel.handle_response(self._last_response, now + client.rtt_ms)  # ignored while terminating
        tel.close()
        client.closed = True
        if (
            self.recorder is not None
            and hasattr(self.recorder, "instance_closed")
            and client.client_instance_id is not None
        ):  # the client's connection goes with it
            self.recorder.instance_closed(
                ReceiverContext(client.client_info, self.broker.node_id),
                client.client_instance_id,
                now + client.rtt_ms,
                "client",
            )
