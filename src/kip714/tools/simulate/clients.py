"""The simulated clients: who they are (:class:`SimClient`: software, codec, ids, group membership) and
the numbers behind their metrics (:class:`MetricModel`), published with the metric names, types and
payload layout of the client each imitates (Apache Kafka's Java client or librdkafka 2.16); a Kafka Streams
application's clients add the Streams metrics of :mod:`.streams`."""

from __future__ import annotations

import math
import random
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kip714._enums import COMPRESSION_NAMES, CompressionType
from kip714.broker.subscriptions import ClientInfo
from kip714.client.catalog import JAVA_ADMIN_METRICS as CATALOG_JAVA_ADMIN
from kip714.client.catalog import JAVA_CONSUMER_METRICS as CATALOG_JAVA_CONSUMER
from kip714.client.catalog import JAVA_PRODUCER_METRICS as CATALOG_JAVA_PRODUCER
from kip714.client.catalog import LIBRDKAFKA_CONSUMER_METRICS, LIBRDKAFKA_DESCRIPTIONS, LIBRDKAFKA_PRODUCER_METRICS
from kip714.client.naming import telemetry_metric_key
from kip714.client.otlp_encode import MetricsCollector
from kip714.client.telemetry import ALL_COMPRESSION_TYPES, ClientTelemetry

from .stochastic import Bursts, Incidents, LogOU, lognormal, poisson, random_count
from .streams import StreamsRole

__all__ = [
    "CODECS",
    "JAVA_ADMIN_METRICS",
    "JAVA_CONSUMER_METRICS",
    "JAVA_PRODUCER_METRICS",
    "RDK_CONSUMER_METRICS",
    "RDK_PRODUCER_METRICS",
    "SOFTWARE_JAVA",
    "SOFTWARE_LIBRDKAFKA",
    "SOFTWARE_PRESETS",
    "FleetLayout",
    "MetricModel",
    "SimClient",
]

SOFTWARE_JAVA = ("apache-kafka-java", "3.9.0")
SOFTWARE_LIBRDKAFKA = ("confluent-kafka-python", "2.16.1-rdkafka-2.16.0")
#: Named software mixes: lists of ((name, version), weight).
SOFTWARE_PRESETS: dict[str, list[tuple[tuple[str, str], float]]] = {
    "java": [(SOFTWARE_JAVA, 1.0)],
    "librdkafka": [(SOFTWARE_LIBRDKAFKA, 1.0)],
    "mix": [
        (SOFTWARE_JAVA, 0.45),
        (("apache-kafka-java", "3.8.1"), 0.15),
        (("apache-kafka-java", "4.0.0"), 0.1),
        (SOFTWARE_LIBRDKAFKA, 0.3),
    ],
}
#: Codec names accepted by ``codec=`` / ``--codec``.
CODECS = {name: ctype for ctype, name in COMPRESSION_NAMES.items()}

_JAVA_INT_MAX = 2**31 - 1


class FleetLayout(Protocol):
    """What a client's metric model reads from its fleet: the brokers, how slow each one is, and the
    fleet-wide incidents (a :class:`~kip714.tools.simulate.Fleet` is one)."""

    nodes: tuple[int, ...]
    node_factor: dict[int, float]
    incidents: Incidents


# ------------------------------------------------------------------------------------------ metric models

#: librdkafka's metrics (name after the client-type prefix, type, value type), in its emission order
#: (kip714.client.catalog, the one home of who sends what).
RDK_PRODUCER_METRICS = LIBRDKAFKA_PRODUCER_METRICS
RDK_CONSUMER_METRICS = LIBRDKAFKA_CONSUMER_METRICS
_RDK_DESCRIPTIONS = LIBRDKAFKA_DESCRIPTIONS

#: The sample key each simulated Java metric reads (the metric names are kip714.client.catalog's).
_JAVA_KEYS = {
    "connection-creation-rate": "conn_rate",
    "connection-creation-total": "conn_total",
    "connection-count": "conn_count",
    "request-latency-avg": "req_lat_avg",
    "request-latency-max": "req_lat_max",
    "request-total": "request_total",
    "record-queue-time-avg": "queue_avg",
    "record-queue-time-max": "queue_max",
    "produce-throttle-time-avg": "throttle_avg",
    "produce-throttle-time-max": "throttle_max",
    "record-send-rate": "send_rate",
    "record-send-total": "send_total",
    "record-error-rate": "error_rate",
    "record-error-total": "error_total",
    "record-retry-total": "retry_total",
    "batch-size-avg": "batch_size_avg",
    "compression-rate-avg": "compression_rate",
    "buffer-available-bytes": "buffer_available",
    "outgoing-byte-total": "out_bytes_total",
    "incoming-byte-total": "in_bytes_total",
    "count": "metrics_count",
    "poll-idle-ratio-avg": "poll_idle",
    "time-between-poll-avg": "poll_gap_avg",
    "time-between-poll-max": "poll_gap_max",
    "fetch-latency-avg": "fetch_avg",
    "fetch-latency-max": "fetch_max",
    "fetch-total": "fetch_total",
    "fetch-throttle-time-avg": "fetch_throttle_avg",
    "fetch-throttle-time-max": "fetch_throttle_max",
    "records-consumed-total": "consumed_total",
    "bytes-consumed-total": "consumed_bytes_total",
    "records-lag-max": "lag_max",
    "commit-latency-avg": "commit_avg",
    "commit-latency-max": "commit_max",
    "commit-total": "commit_total",
    "assigned-partitions": "assigned",
    "rebalance-latency-avg": "rebalance_avg",
    "rebalance-latency-max": "rebalance_max",
    "rebalance-latency-total": "rebalance_total",
    "rebalance-total": "rebalance_count",
}
#: Java client metrics (group, name, kind, sample key); per-node and per-topic ones are added separately.
JAVA_PRODUCER_METRICS = tuple((g, n, k, _JAVA_KEYS[n]) for g, n, k in CATALOG_JAVA_PRODUCER)
JAVA_CONSUMER_METRICS = tuple((g, n, k, _JAVA_KEYS[n]) for g, n, k in CATALOG_JAVA_CONSUMER)
JAVA_ADMIN_METRICS = tuple((g, n, k, _JAVA_KEYS[n]) for g, n, k in CATALOG_JAVA_ADMIN)


class _SimCollector(MetricsCollector):
    """A MetricsCollector that refreshes the client's simulated values right before each collection."""

    def __init__(self, before_collect: Callable[[], None], **kw: Any) -> None:
        super().__init__(**kw)
        self._before_collect = before_collect

    def collect(self, now_ns=None, delta=True, selector=None) -> bytes:
        self._before_collect()
        return super().collect(now_ns, delta, selector)


class MetricModel:
    """The evolving numbers behind one client's metrics, and their publication into its collector."""

    def __init__(self, client: SimClient, fleet: FleetLayout, now_ms: int) -> None:
        collector = client.collector
        assert collector is not None  # SimClient.start() creates the collector before the model
        self.client = client
        self.collector = collector
        self.fleet = fleet
        self.rng = client.rng
        self.nodes = fleet.nodes
        self.last_ms = now_ms
        self.first = True
        rng = self.rng
        consumer = client.kind == "consumer"
        # latency level (ms) of ordinary requests to a healthy broker
        self.lat = LogOU(rng, lognormal(rng, 1.8 if consumer else 3.5, 0.45), 0.3, 20 * 60_000)
        self.node_factor = {n: lognormal(rng, 1.0, 0.12) for n in self.nodes}
        self.spike_gap_ms = lognormal(rng, 30 * 60_000, 0.5)
        self.reconnect_gap_ms = lognormal(rng, 3 * 3_600_000, 0.7)
        self.request_rate = lognormal(rng, 12.0 if consumer else 25.0, 0.8)  # requests/s
        share = [rng.uniform(0.6, 1.4) for _ in self.nodes]
        self.share = {n: s / sum(share) for n, s in zip(self.nodes, share)}
        self.s: dict[Any, float] = {}  # current sample, keyed as the publishers read it
        for key in (
            "conn_total",
            "request_total",
            "out_bytes_total",
            "in_bytes_total",
            "send_total",
            "error_total",
            "retry_total",
            "fetch_total",
            "consumed_total",
            "consumed_bytes_total",
            "commit_total",
            "rebalance_total",
            "rebalance_count",
        ):
            self.s[key] = 0
        for n in self.node_keys():
            self.s[("node_req_total", n)] = 0
        if consumer:
            self._init_consumer(rng)
        elif client.kind == "admin":
            self.coordinator = client.coordinator
        else:
            self._init_producer(rng)
        self._register()
        if client.streams is not None:
            client.streams.register(collector, now_ms, rng)

    # -- which connections the client has
    def node_keys(self) -> list[int]:
        """Node ids of the per-node metrics; -1 stands for the group coordinator connection."""
        if self.client.kind == "consumer":
            return list(self.nodes) + [-1]
        return list(self.nodes)

    def _init_producer(self, rng: random.Random) -> None:
        self.throttle = Bursts(rng, lognormal(rng, 4 * 3_600_000, 0.6), lognormal(rng, 180_000, 0.5), self.last_ms)
        self.throttle_level = lognormal(rng, 60.0, 0.8)
        self.queue = LogOU(rng, lognormal(rng, 2.0, 0.8), 0.4, 15 * 60_000)
        self.send_rate = LogOU(rng, lognormal(rng, 300.0, 1.3), 0.35, 30 * 60_000)
        self.record_size = lognormal(rng, 600.0, 0.9)
        self.compression = rng.choice((0.25, 0.4, 0.55, 1.0))
        self.error_probability = 2e-6  # per record sent (x100 during a latency spike); tests raise it
        self.topics = [
            f"{self.client.service}.{t}"
            for t in rng.sample(("events", "commands", "changes", "dlq", "audit"), rng.randint(1, 3))
        ]
        weights = [rng.paretovariate(1.5) for _ in self.topics]
        self.topic_share = [w / sum(weights) for w in weights]
        for t in self.topics:
            self.s[("topic_send_total", t)] = 0
            self.s[("topic_byte_total", t)] = 0

    def _init_consumer(self, rng: random.Random) -> None:
        self.busy = LogOU(rng, lognormal(rng, 0.6, 1.0), 0.5, 20 * 60_000)
        self.commit = LogOU(rng, lognormal(rng, 4.0, 0.5), 0.3, 20 * 60_000)
        self.consume_rate = lognormal(rng, 400.0, 1.2)
        self.record_size = lognormal(rng, 600.0, 0.9)
        self.rebalance_gap_ms = lognormal(rng, 90 * 60_000, 0.5)
        self.lag = LogOU(rng, lognormal(rng, 50.0, 1.5), 0.8, 10 * 60_000)
        self.assigned = self.client.base_assignment
        self.lag_growth = 0.0  # records/s the lag grows by (tests raise it: a consumer falling behind)
        self.lag_extra = 0.0
        self.fetch_throttle_level = 0.0  # ms of fetch throttling (tests raise it: a consumer over its quota)
        self.coordinator = self.client.coordinator

    # -- registration
    def _reader(self, key: Any, conv: Callable[[Any], Any]) -> Callable[[], Any]:
        """The collector reads every value from the current sample at collection time."""
        s = self.s
        return lambda: conv(s[key])

    def _register(self) -> None:
        c, client = self.collector, self.client
        if client.layout == "librdkafka":
            prefix = f"org.apache.kafka.{client.kind}."
            rdk_table = RDK_CONSUMER_METRICS if client.kind == "consumer" else RDK_PRODUCER_METRICS
            keys = {
                "connection.creation.rate": "conn_rate",
                "connection.creation.total": "conn_total",
                "produce.throttle.time.avg": "throttle_avg",
                "produce.throttle.time.max": "throttle_max",
                "record.queue.time.avg": "queue_avg",
                "record.queue.time.max": "queue_max",
                "request.latency.avg": "req_lat_avg",
                "request.latency.max": "req_lat_max",
                "coordinator.assigned.partitions": "assigned",
                "coordinator.rebalance.latency.avg": "rebalance_avg",
                "coordinator.rebalance.latency.max": "rebalance_max",
                "coordinator.rebalance.latency.total": "rebalance_total",
                "fetch.manager.fetch.latency.avg": "fetch_avg",
                "fetch.manager.fetch.latency.max": "fetch_max",
                "poll.idle.ratio.avg": "poll_idle",
                "coordinator.commit.latency.avg": "commit_avg",
                "coordinator.commit.latency.max": "commit_max",
            }
            for name, kind, vtype in rdk_table:
                desc = _RDK_DESCRIPTIONS[name]
                conv = _ceil_int if vtype == "int" else (_rdk_double if name != "poll.idle.ratio.avg" else _ratio)
                if name.startswith("node.request.latency."):
                    stat = "node_lat_" + name.rsplit(".", 1)[1]
                    for n in self.node_keys():
                        c.gauge(
                            prefix + name,
                            {"node.id": n},
                            description=desc,
                            value_type=vtype,
                            value_fn=self._reader((stat, n), conv),
                        )
                elif kind == "sum":
                    c.counter(prefix + name, description=desc, value_type="int", value_fn=self._reader(keys[name], int))
                else:
                    c.gauge(prefix + name, description=desc, value_type=vtype, value_fn=self._reader(keys[name], conv))
            return
        # Java client
        table = {"consumer": JAVA_CONSUMER_METRICS, "admin": JAVA_ADMIN_METRICS}.get(client.kind, JAVA_PRODUCER_METRICS)
        kind_prefix = client.kind
        for group, name, kind, key in table:
            metric, attrs = telemetry_metric_key(group, name, {"client-id": client.client_id})
            if kind == "sum":
                c.counter(metric, attrs, value_type="double", value_fn=self._reader(key, float))
            else:
                c.gauge(metric, attrs, value_type="double", value_fn=self._reader(key, float))
        node_group = f"{'admin-client' if kind_prefix == 'admin' else kind_prefix}-node-metrics"
        for stat in ("request-latency-avg", "request-latency-max", "request-total"):
            for n in self.node_keys():
                node_tag = f"node-{_JAVA_INT_MAX - self.coordinator}" if n == -1 else f"node-{n}"
                metric, attrs = telemetry_metric_key(
                    node_group, stat, {"client-id": client.client_id, "node-id": node_tag}
                )
                key = {
                    "request-latency-avg": "node_lat_avg",
                    "request-latency-max": "node_lat_max",
                    "request-total": "node_req_total",
                }[stat]
                if stat == "request-total":
                    c.counter(metric, attrs, value_type="double", value_fn=self._reader((key, n), float))
                else:
                    c.gauge(metric, attrs, value_type="double", value_fn=self._reader((key, n), float))
        if client.kind == "producer":
            for stat, key in (("record-send-total", "topic_send_total"), ("byte-total", "topic_byte_total")):
                for t in self.topics:
                    metric, attrs = telemetry_metric_key(
                        "producer-topic-metrics", stat, {"client-id": client.client_id, "topic": t}
                    )
                    c.counter(metric, attrs, value_type="double", value_fn=self._reader((key, t), float))
        # Java's own "kafka-metrics-count": roughly what a client of this shape registers
        self.s["metrics_count"] = (
            130.0 + 15.0 * len(self.node_keys()) + (6.0 * len(self.topics) if client.kind == "producer" else 0.0)
        )

    # -- evolution
    def update(self, now_ms: int) -> None:
        """Advance the model to ``now_ms`` and publish the window since the previous update."""
        t0 = self.last_ms
        dt = max(1.0, float(now_ms - t0))
        self.last_ms = now_ms
        rng, s = self.rng, self.s
        base = self.lat.step(rng, dt)
        spike, spike_node = 1.0, None
        if rng.random() < 1.0 - math.exp(-dt / self.spike_gap_ms):
            spike = lognormal(rng, 8.0, 0.6)
            spike_node = rng.choice(self.node_keys() + [0])  # 0: every connection
        new_conns = poisson(rng, dt / self.reconnect_gap_ms) + (spike > 1.0 and rng.random() < 0.2)
        if self.first:
            new_conns += len(self.node_keys()) + 1  # bootstrap + one per broker (+ coordinator)
        s["conn_total"] += new_conns
        s["conn_rate"] = new_conns / (dt / 1000.0)
        s["conn_count"] = float(len(self.node_keys()))
        incidents = self.fleet.incidents
        requests = self.request_rate * dt / 1000.0
        new_requests = 0
        lat_sum = weight = 0.0
        lat_max = 0.0
        for n in self.node_keys():
            real = self.coordinator if n == -1 else n
            f = self.fleet.node_factor[real] * self.node_factor[real] * incidents.factor(real, t0, now_ms)
            f *= math.exp(rng.gauss(0.0, 0.12))
            avg = base * f
            mx = avg * (1.3 + lognormal(rng, 0.9, 0.5))
            if spike_node == 0 or spike_node == n:
                avg *= 1.0 + (spike - 1.0) * 0.15
                mx *= spike
            if n == -1:
                avg *= 0.7
                mx *= 0.7
            s[("node_lat_avg", n)] = avg
            s[("node_lat_max", n)] = max(mx, avg)
            share = 0.05 if n == -1 else self.share[n]
            k = random_count(rng, requests * share)
            s[("node_req_total", n)] += k
            new_requests += k
            if n != -1:
                lat_sum += avg * share
                weight += share
                lat_max = max(lat_max, mx)
        s["req_lat_avg"] = lat_sum / weight if weight else base
        s["req_lat_max"] = max(lat_max, s["req_lat_avg"])
        s["request_total"] += new_requests
        self.new_requests = new_requests
        if self.client.kind == "consumer":
            self._update_consumer(rng, s, t0, now_ms, dt, base, spike)
        elif self.client.kind == "producer":
            self._update_producer(rng, s, t0, now_ms, dt, spike)
        if self.client.streams is not None:
            self.client.streams.update(rng, now_ms, dt)
        self.first = False

    def _update_producer(self, rng, s, t0, now_ms, dt, spike) -> None:
        share = self.throttle.overlap(t0, now_ms)
        if share > 0:
            level = self.throttle_level * lognormal(rng, 1.0, 0.4)
            s["throttle_avg"] = level * share
            s["throttle_max"] = level * (1.5 + rng.random() * 2.0)
        else:
            s["throttle_avg"] = s["throttle_max"] = 0.0
        q = self.queue.step(rng, dt) + 0.5 * s["req_lat_avg"] + s["throttle_avg"] * 0.5
        s["queue_avg"] = q
        s["queue_max"] = q * (2.0 + lognormal(rng, 2.0, 0.6)) * (spike if spike > 1 else 1.0)
        rate = self.send_rate.step(rng, dt) * (1.0 - 0.5 * (share > 0))
        sent = random_count(rng, rate * dt / 1000.0)
        s["send_rate"] = sent / (dt / 1000.0)
        s["send_total"] += sent
        errors = poisson(rng, sent * self.error_probability * (1 if spike <= 1 else 100))
        s["error_total"] += errors
        s["error_rate"] = errors / (dt / 1000.0)
        s["retry_total"] += errors + poisson(rng, sent * 1e-5 * spike)
        per_batch = max(1.0, min(16384.0 / self.record_size, rate * 0.005 + 1.0))
        s["batch_size_avg"] = per_batch * self.record_size * self.compression + 61.0
        s["compression_rate"] = self.compression
        sent_bytes = sent * self.record_size * self.compression
        s["buffer_available"] = float(max(0, 33554432 - int(rate * self.record_size * q / 1000.0)))
        s["out_bytes_total"] += int(sent_bytes + 80 * self.new_requests)
        s["in_bytes_total"] += random_count(rng, sent / per_batch * 60.0)
        left = sent
        for i, t in enumerate(self.topics):
            k = left if i == len(self.topics) - 1 else min(left, round(sent * self.topic_share[i]))
            left -= k
            s[("topic_send_total", t)] += k
            s[("topic_byte_total", t)] += int(k * self.record_size * self.compression)

    def _update_consumer(self, rng, s, t0, now_ms, dt, base, spike) -> None:
        busy = min(1.0, self.busy.step(rng, dt))
        fetch_wait = 500.0
        avg = (1.0 - busy) * fetch_wait + busy * (base * 2.0 + lognormal(rng, 4.0, 0.5))
        avg *= math.exp(rng.gauss(0.0, 0.08))
        if spike > 1.0:
            avg = min(fetch_wait * 1.5, avg * (1.0 + (spike - 1.0) * 0.2))
        s["fetch_avg"] = avg
        s["fetch_max"] = max(avg, min(fetch_wait + base * 4.0 * spike, avg * (1.2 + lognormal(rng, 0.5, 0.5))))
        s["poll_idle"] = min(1.0, max(0.0, 1.0 - busy * rng.uniform(0.75, 0.95)))
        poll_gap = 100.0 + (1.0 - busy) * 400.0 + busy * lognormal(rng, 50.0, 0.7)
        s["poll_gap_avg"] = poll_gap
        s["poll_gap_max"] = poll_gap * (1.2 + lognormal(rng, 0.8, 0.5))
        fetches = random_count(rng, dt / max(avg, 1.0))
        s["fetch_total"] += fetches
        consumed = random_count(rng, self.consume_rate * busy * dt / 1000.0)
        s["consumed_total"] += consumed
        s["consumed_bytes_total"] += int(consumed * self.record_size)
        s["in_bytes_total"] += int(consumed * self.record_size) + fetches * 120
        self.lag_extra += self.lag_growth * dt / 1000.0
        s["lag_max"] = float(int(self.lag.step(rng, dt) * (spike if spike > 1 else 1.0) + self.lag_extra))
        s["fetch_throttle_avg"] = self.fetch_throttle_level
        s["fetch_throttle_max"] = self.fetch_throttle_level * 1.5
        commit = self.commit.step(rng, dt) + base * 0.5
        if spike > 1.0:
            commit *= 1.0 + (spike - 1.0) * 0.3
        s["commit_avg"] = commit
        s["commit_max"] = commit * (1.2 + lognormal(rng, 0.8, 0.5))
        s["commit_total"] += max(1, random_count(rng, dt / 5000.0))  # auto-commit every 5 s
        rebalances = []
        if self.first:
            rebalances.append(lognormal(rng, 3100.0, 0.15))  # joining: group.initial.rebalance.delay.ms
        elif rng.random() < 1.0 - math.exp(-dt / self.rebalance_gap_ms):
            rebalances.append(lognormal(rng, 350.0, 0.8))
            self.assigned = max(0, self.client.base_assignment + rng.choice((-1, 0, 0, 1)))
        if rebalances:
            s["rebalance_avg"] = sum(rebalances) / len(rebalances)
            s["rebalance_max"] = max(rebalances)
            s["rebalance_total"] += math.ceil(sum(rebalances))
            s["rebalance_count"] += len(rebalances)
        else:
            s["rebalance_avg"] = s["rebalance_max"] = 0.0
        s["assigned"] = self.assigned
        if self.first and self.client.member_id:
            key = "member_id" if self.client.layout == "librdkafka" else "group_member_id"
            self.collector.set_resource_attribute(key, self.client.member_id)


def _ceil_int(v: float) -> int:
    return math.ceil(v - 1e-9)


def _rdk_double(v: float) -> float:
    return round(float(v), 3)  # librdkafka: microseconds / 1000


def _ratio(v: float) -> float:
    return round(min(1.0, max(0.0, float(v))), 6)


# ------------------------------------------------------------------------------------------ clients


@dataclass
class SimClient:
    """One simulated client. ``telemetry`` / ``collector`` exist once the client has started."""

    index: int
    kind: str  # "producer", "consumer" or "admin" (a Kafka Streams application's admin client)
    client_id: str
    software_name: str
    software_version: str
    layout: str
    codec: str | None
    service: str
    client_info: ClientInfo
    rng: random.Random
    jitter_rng: random.Random
    resource: dict[str, str]
    group_id: str | None = None
    member_id: str | None = None
    base_assignment: int = 0
    coordinator: int = 0
    start_offset_ms: int = 0
    connect_delay_ms: int = 100
    rtt_ms: int = 1
    close_offset_ms: int = 0
    #: called with the client's metric model when it starts (tests and demos make a client misbehave)
    tune: Callable[[Any], None] | None = None
    #: its part in a Kafka Streams application (the admin client or a stream thread's main consumer)
    streams: StreamsRole | None = None
    #: leave this long after starting: with a terminating push (``leave_cleanly``) or silently, as a client
    #: that crashed or hung (its series then expire at the endpoint)
    leave_after_ms: int | None = None
    leave_cleanly: bool = True
    started_ms: int | None = None
    telemetry: ClientTelemetry | None = None
    collector: MetricsCollector | None = None
    model: MetricModel | None = None
    # counters
    gets: int = 0
    pushes: int = 0
    accepted_pushes: int = 0
    terminating_pushes: int = 0
    payload_bytes: int = 0
    errors: Counter[int] = field(default_factory=Counter)  # error code -> count
    failed_requests: int = 0
    started: bool = False
    closed: bool = False
    _otlp_seen: int = 0
    _clock_ns: Callable[[], int] | None = None

    @property
    def client_instance_id(self) -> uuid.UUID | None:
        return self.telemetry.client_instance_id if self.telemetry is not None else None

    @property
    def supported_compression(self) -> tuple[CompressionType, ...]:
        if self.codec is None:
            return ALL_COMPRESSION_TYPES
        if self.codec == "none":
            return ()
        return (CODECS[self.codec],)

    def start(self, fleet: FleetLayout, clock_ns: Callable[[], int], now_ms: int) -> None:
        """Create the collector, the metric model and the telemetry state machine."""
        scope_name = scope_version = ""
        if self.layout == "librdkafka":
            scope_name = f"{self.client_id}#{self.kind}-1"
            scope_version = (
                self.software_version.rsplit("rdkafka-", 1)[-1]
                if "rdkafka-" in self.software_version
                else self.software_version
            )
        self.collector = _SimCollector(
            self._before_collect,
            layout=self.layout,
            clock_ns=clock_ns,
            scope_name=scope_name,
            scope_version=scope_version,
        )
        for k, v in self.resource.items():
            self.collector.set_resource_attribute(k, v)
        self.model = MetricModel(self, fleet, now_ms)
        if (
            self.streams is not None and self.streams.thread is not None
        ):  # a stream thread that dies: its consumer leaves
            app = self.streams.app
            fail_ms = app.fail_after_ms(self.streams.thread)
            if fail_ms is not None and app.start_ms is not None:
                self.leave_after_ms = max(0, fail_ms - (now_ms - app.start_ms))
        if self.tune is not None:
            self.tune(self.model)
        self._clock_ns = clock_ns
        self.started_ms = now_ms
        self.telemetry = ClientTelemetry(
            self.collector, supported_compression=self.supported_compression, rng=self.jitter_rng
        )
        self.started = True

    def leaving(self, now_ms: int) -> bool:
        """Whether the client is due to leave (``leave_after_ms`` after it started)."""
        return (
            self.leave_after_ms is not None
            and self.started_ms is not None
            and now_ms - self.started_ms >= self.leave_after_ms
        )

    def _before_collect(self) -> None:
        model, clock_ns = self.model, self._clock_ns
        assert model is not None and clock_ns is not None  # collections come after start()
        model.update(clock_ns() // 1_000_000)

    def __repr__(self) -> str:
        return (
            f"<SimClient {self.kind} {self.client_id} {self.software_name}/{self.software_version} "
            f"pushes={self.pushes} errors={dict(self.errors)}>"
        )
