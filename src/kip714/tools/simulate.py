"""A simulated fleet of Kafka clients that push realistic KIP-714 telemetry.

:class:`Fleet` holds N producers and M consumers. Each one is a real :class:`~kip714.ClientTelemetry` (the
Java client's push state machine) fed by a real :class:`~kip714.MetricsCollector`, with the metric names,
types and payload layout of the client it imitates:

* Apache Kafka Java clients (``("apache-kafka-java", "3.9.0")``, layout ``"java"``): names from Kafka's
  (group, name) pairs through :func:`kip714.telemetry_metric_name`, per-node metrics with the
  ``node_id`` attribute (``"node-1"``; the group coordinator connection is ``node-2147483646`` for broker 1,
  as Java names it), monotonic sums as doubles, gauges as doubles, no descriptions.
* librdkafka clients (``("confluent-kafka-python", "2.16.1-rdkafka-2.16.0")``, layout ``"librdkafka"``):
  exactly librdkafka 2.16's 10 producer and 13 consumer metrics, their descriptions and int/double types,
  per-node metrics with the int attribute ``node.id`` (consumers also report ``-1``, the group coordinator
  logical broker), scope ``<client.id>#producer-1`` / version ``2.16.0``.

Values are realistic and evolve: per-client latency levels that drift (a mean-reverting random walk in
log space), per-node request latency log-normal around that level, one *slow broker* with higher latency,
occasional per-client spikes, fleet-wide broker incidents that every client sees on the same node at the
same time, produce throttling in rare bursts, monotonic connection / record / rebalance counters, consumer
groups whose members split the partitions, poll idle ratios in [0, 1]. Everything a client does comes from
its own seeded random stream, so a fleet with the same seed behaves the same way.

Two ways to drive it:

``Fleet.run_in_process(broker, duration_ms)``
    against a :class:`~kip714.TelemetryBroker` on a simulated clock: hours of telemetry in seconds. The
    clock jumps from event to event (client starts, requests on ``step_ms`` ticks, responses after a
    per-client round trip), then every client initiates close and sends its terminating push. Accepted
    payloads can be handed to a callback, collected, and/or recorded (every push, in the Parquet schema
    ``kip714 serve --record`` writes, with ``received_at_ms`` from the simulated clock).
``Fleet.run_tcp(host, port, duration_s)``
    against a ``kip714 serve`` endpoint (or anything speaking the protocol), in real time, with asyncio:
    one connection per client, ApiVersions v3 with the client's software name/version, Metadata, then the
    telemetry requests, and a terminating push when the time is up. Every wait is bounded; only loopback
    addresses unless ``allow_remote=True``.

Command line: ``kip714 simulate`` (see :func:`add_simulate_parser`).
"""

from __future__ import annotations

import asyncio
import heapq
import ipaddress
import math
import random
import struct
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._enums import COMPRESSION_NAMES, ApiKey, CompressionType, ErrorCode
from .._protocol import (
    ApiVersionsRequest,
    MetadataRequest,
    PushTelemetryRequest,
    decode_response,
    encode_request,
)
from ..broker.manager import TelemetryBroker, TelemetryPayload
from ..broker.receivers import ReceiverContext
from ..client.telemetry import ALL_COMPRESSION_TYPES, INT_MAX, ClientTelemetry
from ..errors import Kip714Error
from ..client.naming import telemetry_metric_key
from ..client.otlp_encode import MetricsCollector
from ..sinks.recorder import push_row
from ..broker.subscriptions import ClientInfo

__all__ = [
    "SOFTWARE_JAVA",
    "SOFTWARE_LIBRDKAFKA",
    "SOFTWARE_PRESETS",
    "CODECS",
    "PROTOCOL_ERROR_CODES",
    "RDK_PRODUCER_METRICS",
    "RDK_CONSUMER_METRICS",
    "JAVA_PRODUCER_METRICS",
    "JAVA_CONSUMER_METRICS",
    "Fleet",
    "FleetStats",
    "SimClient",
    "parse_duration",
]

SOFTWARE_JAVA = ("apache-kafka-java", "3.9.0")
SOFTWARE_LIBRDKAFKA = ("confluent-kafka-python", "2.16.1-rdkafka-2.16.0")
#: Named software mixes: lists of ((name, version), weight).
SOFTWARE_PRESETS: dict[str, list[tuple[tuple[str, str], float]]] = {
    "java": [(SOFTWARE_JAVA, 1.0)],
    "librdkafka": [(SOFTWARE_LIBRDKAFKA, 1.0)],
    "mix": [(SOFTWARE_JAVA, 0.45), (("apache-kafka-java", "3.8.1"), 0.15), (("apache-kafka-java", "4.0.0"), 0.1),
            (SOFTWARE_LIBRDKAFKA, 0.3)],
}
#: Codec names accepted by ``codec=`` / ``--codec``.
CODECS = {name: ctype for ctype, name in COMPRESSION_NAMES.items()}
#: Error codes that mean a client and the broker disagree about the protocol (not flow control).
PROTOCOL_ERROR_CODES = frozenset({int(ErrorCode.UNSUPPORTED_VERSION), int(ErrorCode.INVALID_REQUEST),
                                  int(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE), int(ErrorCode.INVALID_RECORD),
                                  int(ErrorCode.UNKNOWN_SUBSCRIPTION_ID), int(ErrorCode.TELEMETRY_TOO_LARGE)})

_API_NAMES = {int(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS): "GetTelemetrySubscriptions",
              int(ApiKey.PUSH_TELEMETRY): "PushTelemetry"}
_REQUEST_TIMEOUT_MS = 30_000
_JAVA_INT_MAX = 2**31 - 1
_SERVICES = ("orders", "payments", "inventory", "clickstream", "billing", "search-indexer", "fraud-check",
             "notifications", "shipping", "audit-log", "recommendations", "user-profile")
_RACKS = ("use1-az1", "use1-az2", "use1-az4")
_PARTITION_CHOICES = (6, 12, 12, 24, 24, 32, 48, 64)


# ------------------------------------------------------------------------------------------ small helpers

def parse_duration(text: str | int | float) -> int:
    """``"10m"``, ``"600s"``, ``"1h30m"``, ``"250ms"``, ``"2d"`` or a plain number of seconds → milliseconds
    (kip714's one duration syntax, whose home is ``kip714._units``)."""
    from .._units import parse_duration as parse

    return parse(text)


def _fmt_ms(ms: int) -> str:
    s = ms // 1000
    return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"


def _poisson(rng: random.Random, lam: float) -> int:
    if lam <= 0:
        return 0
    if lam > 30:
        return max(0, int(round(rng.gauss(lam, math.sqrt(lam)))))
    limit, k, p = math.exp(-lam), 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


def _lognormal(rng: random.Random, median: float, sigma: float) -> float:
    return median * math.exp(rng.gauss(0.0, sigma))


def _count(rng: random.Random, expected: float) -> int:
    """An integer with the given expectation (floor plus a Bernoulli remainder)."""
    base = math.floor(expected)
    return int(base) + (rng.random() < expected - base)


class _LogOU:
    """A level that drifts: an Ornstein–Uhlenbeck process in log space (mean-reverting to ``median``)."""

    __slots__ = ("mu", "x", "sigma", "tau")

    def __init__(self, rng: random.Random, median: float, sigma: float, tau_ms: float) -> None:
        self.mu = math.log(median)
        self.sigma = sigma
        self.tau = tau_ms
        self.x = self.mu + rng.gauss(0.0, sigma)

    def step(self, rng: random.Random, dt_ms: float) -> float:
        a = math.exp(-max(dt_ms, 0.0) / self.tau)
        self.x = self.mu + (self.x - self.mu) * a + self.sigma * math.sqrt(max(0.0, 1.0 - a * a)) * rng.gauss(0, 1)
        return math.exp(self.x)


class _Bursts:
    """On/off episodes (exponential gaps and lengths); ``overlap(t0, t1)`` is the covered share of a window."""

    __slots__ = ("rng", "gap", "length", "start", "end")

    def __init__(self, rng: random.Random, mean_gap_ms: float, mean_len_ms: float, from_ms: int) -> None:
        self.rng, self.gap, self.length = rng, mean_gap_ms, mean_len_ms
        self.start = from_ms + rng.expovariate(1.0 / mean_gap_ms)
        self.end = self.start + rng.expovariate(1.0 / mean_len_ms)

    def overlap(self, t0: float, t1: float) -> float:
        while self.end <= t0:
            self.start = self.end + self.rng.expovariate(1.0 / self.gap)
            self.end = self.start + self.rng.expovariate(1.0 / self.length)
        if self.start >= t1 or t1 <= t0:
            return 0.0
        return (min(self.end, t1) - max(self.start, t0)) / (t1 - t0)


class _Incidents:
    """Fleet-wide broker incidents: every client sees node ``n`` slow during the same episodes."""

    def __init__(self, seed: Any, nodes: Sequence[int], from_ms: int, mean_gap_ms: float = 45 * 60_000,
                 mean_len_ms: float = 150_000) -> None:
        self._bursts = {}
        self._mult = {}
        for n in nodes:
            rng = random.Random(f"{seed}:incident:{n}")
            self._bursts[n] = _Bursts(rng, mean_gap_ms, mean_len_ms, from_ms)
            self._mult[n] = rng
        self._level: dict[tuple[int, float], float] = {}

    def factor(self, node: int, t0: float, t1: float) -> float:
        b = self._bursts.get(node)
        if b is None:
            return 1.0
        share = b.overlap(t0, t1)
        if share <= 0.0:
            return 1.0
        key = (node, b.start)
        level = self._level.get(key)
        if level is None:
            if len(self._level) > 4096:
                self._level.clear()
            level = self._level[key] = 2.0 + _lognormal(self._mult[node], 3.0, 0.5)
        return 1.0 + (level - 1.0) * share


# ------------------------------------------------------------------------------------------ metric models

_RDK_DESCRIPTIONS = {
    "connection.creation.rate": "The rate of connections established per second.",
    "connection.creation.total": "The total number of connections established.",
    "node.request.latency.avg": "The average request latency in ms for a node.",
    "node.request.latency.max": "The maximum request latency in ms for a node.",
    "produce.throttle.time.avg": "The average throttle time in ms for a node.",
    "produce.throttle.time.max": "The maximum throttle time in ms for a node.",
    "record.queue.time.avg": "The average time in ms a record spends in the producer queue.",
    "record.queue.time.max": "The maximum time in ms a record spends in the producer queue.",
    "request.latency.avg": "The average request latency in ms for produce requests.",
    "request.latency.max": "The maximum request latency in ms for produce requests.",
    "coordinator.assigned.partitions": "The number of partitions currently assigned to this consumer.",
    "coordinator.rebalance.latency.avg": "The average rebalance latency in ms for the consumer coordinator.",
    "coordinator.rebalance.latency.max": "The maximum rebalance latency in ms for the consumer coordinator.",
    "coordinator.rebalance.latency.total": "The total rebalance latency in ms for the consumer coordinator.",
    "fetch.manager.fetch.latency.avg": "The average fetch latency in ms for the fetch manager.",
    "fetch.manager.fetch.latency.max": "The maximum fetch latency in ms for the fetch manager.",
    "poll.idle.ratio.avg": "The average ratio of idle to poll for a consumer.",
    "coordinator.commit.latency.avg": "The average commit latency in ms for the consumer coordinator.",
    "coordinator.commit.latency.max": "The maximum commit latency in ms for the consumer coordinator.",
}

#: librdkafka 2.16's metrics (name after the client-type prefix, type, value type), in its emission order.
RDK_PRODUCER_METRICS = (
    ("connection.creation.rate", "gauge", "double"), ("connection.creation.total", "sum", "int"),
    ("node.request.latency.avg", "gauge", "double"), ("node.request.latency.max", "gauge", "int"),
    ("produce.throttle.time.avg", "gauge", "double"), ("produce.throttle.time.max", "gauge", "int"),
    ("record.queue.time.avg", "gauge", "double"), ("record.queue.time.max", "gauge", "int"),
    ("request.latency.avg", "gauge", "double"), ("request.latency.max", "gauge", "int"),
)
RDK_CONSUMER_METRICS = (
    ("connection.creation.rate", "gauge", "double"), ("connection.creation.total", "sum", "int"),
    ("node.request.latency.avg", "gauge", "double"), ("node.request.latency.max", "gauge", "int"),
    ("coordinator.assigned.partitions", "gauge", "int"),
    ("coordinator.rebalance.latency.avg", "gauge", "double"), ("coordinator.rebalance.latency.max", "gauge", "int"),
    ("coordinator.rebalance.latency.total", "sum", "int"),
    ("fetch.manager.fetch.latency.avg", "gauge", "double"), ("fetch.manager.fetch.latency.max", "gauge", "int"),
    ("poll.idle.ratio.avg", "gauge", "double"),
    ("coordinator.commit.latency.avg", "gauge", "double"), ("coordinator.commit.latency.max", "gauge", "int"),
)

#: Java client metrics (group, name, kind, sample key); per-node and per-topic ones are added separately.
JAVA_PRODUCER_METRICS = (
    ("producer-metrics", "connection-creation-rate", "gauge", "conn_rate"),
    ("producer-metrics", "connection-creation-total", "sum", "conn_total"),
    ("producer-metrics", "connection-count", "gauge", "conn_count"),
    ("producer-metrics", "request-latency-avg", "gauge", "req_lat_avg"),
    ("producer-metrics", "request-latency-max", "gauge", "req_lat_max"),
    ("producer-metrics", "request-total", "sum", "request_total"),
    ("producer-metrics", "record-queue-time-avg", "gauge", "queue_avg"),
    ("producer-metrics", "record-queue-time-max", "gauge", "queue_max"),
    ("producer-metrics", "produce-throttle-time-avg", "gauge", "throttle_avg"),
    ("producer-metrics", "produce-throttle-time-max", "gauge", "throttle_max"),
    ("producer-metrics", "record-send-rate", "gauge", "send_rate"),
    ("producer-metrics", "record-send-total", "sum", "send_total"),
    ("producer-metrics", "record-error-rate", "gauge", "error_rate"),
    ("producer-metrics", "record-error-total", "sum", "error_total"),
    ("producer-metrics", "record-retry-total", "sum", "retry_total"),
    ("producer-metrics", "batch-size-avg", "gauge", "batch_size_avg"),
    ("producer-metrics", "compression-rate-avg", "gauge", "compression_rate"),
    ("producer-metrics", "buffer-available-bytes", "gauge", "buffer_available"),
    ("producer-metrics", "outgoing-byte-total", "sum", "out_bytes_total"),
    ("producer-metrics", "incoming-byte-total", "sum", "in_bytes_total"),
    ("kafka-metrics-count", "count", "gauge", "metrics_count"),
)
JAVA_CONSUMER_METRICS = (
    ("consumer-metrics", "connection-creation-rate", "gauge", "conn_rate"),
    ("consumer-metrics", "connection-creation-total", "sum", "conn_total"),
    ("consumer-metrics", "connection-count", "gauge", "conn_count"),
    ("consumer-metrics", "poll-idle-ratio-avg", "gauge", "poll_idle"),
    ("consumer-metrics", "time-between-poll-avg", "gauge", "poll_gap_avg"),
    ("consumer-metrics", "time-between-poll-max", "gauge", "poll_gap_max"),
    ("consumer-metrics", "request-total", "sum", "request_total"),
    ("consumer-metrics", "incoming-byte-total", "sum", "in_bytes_total"),
    ("consumer-fetch-manager-metrics", "fetch-latency-avg", "gauge", "fetch_avg"),
    ("consumer-fetch-manager-metrics", "fetch-latency-max", "gauge", "fetch_max"),
    ("consumer-fetch-manager-metrics", "fetch-total", "sum", "fetch_total"),
    ("consumer-fetch-manager-metrics", "records-consumed-total", "sum", "consumed_total"),
    ("consumer-fetch-manager-metrics", "bytes-consumed-total", "sum", "consumed_bytes_total"),
    ("consumer-fetch-manager-metrics", "records-lag-max", "gauge", "lag_max"),
    ("consumer-coordinator-metrics", "commit-latency-avg", "gauge", "commit_avg"),
    ("consumer-coordinator-metrics", "commit-latency-max", "gauge", "commit_max"),
    ("consumer-coordinator-metrics", "commit-total", "sum", "commit_total"),
    ("consumer-coordinator-metrics", "assigned-partitions", "gauge", "assigned"),
    ("consumer-coordinator-metrics", "rebalance-latency-avg", "gauge", "rebalance_avg"),
    ("consumer-coordinator-metrics", "rebalance-latency-max", "gauge", "rebalance_max"),
    ("consumer-coordinator-metrics", "rebalance-latency-total", "sum", "rebalance_total"),
    ("consumer-coordinator-metrics", "rebalance-total", "sum", "rebalance_count"),
    ("kafka-metrics-count", "count", "gauge", "metrics_count"),
)


class _SimCollector(MetricsCollector):
    """A MetricsCollector that refreshes the client's simulated values right before each collection."""

    def __init__(self, before_collect: Callable[[], None], **kw: Any) -> None:
        super().__init__(**kw)
        self._before_collect = before_collect

    def collect(self, now_ns=None, delta=True, selector=None) -> bytes:
        self._before_collect()
        return super().collect(now_ns, delta, selector)


class _Model:
    """The evolving numbers behind one client's metrics, and their publication into its collector."""

    def __init__(self, client: SimClient, fleet: Fleet, now_ms: int) -> None:
        self.client = client
        self.fleet = fleet
        self.rng = client.rng
        self.nodes = fleet.nodes
        self.last_ms = now_ms
        self.first = True
        rng = self.rng
        consumer = client.kind == "consumer"
        # latency level (ms) of ordinary requests to a healthy broker
        self.lat = _LogOU(rng, _lognormal(rng, 1.8 if consumer else 3.5, 0.45), 0.3, 20 * 60_000)
        self.node_factor = {n: _lognormal(rng, 1.0, 0.12) for n in self.nodes}
        self.spike_gap_ms = _lognormal(rng, 30 * 60_000, 0.5)
        self.reconnect_gap_ms = _lognormal(rng, 3 * 3_600_000, 0.7)
        self.request_rate = _lognormal(rng, 12.0 if consumer else 25.0, 0.8)  # requests/s
        share = [rng.uniform(0.6, 1.4) for _ in self.nodes]
        self.share = {n: s / sum(share) for n, s in zip(self.nodes, share)}
        self.s: dict[Any, float] = {}  # current sample, keyed as the publishers read it
        for key in ("conn_total", "request_total", "out_bytes_total", "in_bytes_total", "send_total",
                    "error_total", "retry_total", "fetch_total", "consumed_total", "consumed_bytes_total",
                    "commit_total", "rebalance_total", "rebalance_count"):
            self.s[key] = 0
        for n in self.node_keys():
            self.s[("node_req_total", n)] = 0
        if consumer:
            self._init_consumer(rng)
        else:
            self._init_producer(rng)
        self._register()

    # -- which connections the client has
    def node_keys(self) -> list[int]:
        """Node ids of the per-node metrics; -1 stands for the group coordinator connection."""
        if self.client.kind == "consumer":
            return list(self.nodes) + [-1]
        return list(self.nodes)

    def _init_producer(self, rng: random.Random) -> None:
        self.throttle = _Bursts(rng, _lognormal(rng, 4 * 3_600_000, 0.6), _lognormal(rng, 180_000, 0.5),
                                self.last_ms)
        self.throttle_level = _lognormal(rng, 60.0, 0.8)
        self.queue = _LogOU(rng, _lognormal(rng, 2.0, 0.8), 0.4, 15 * 60_000)
        self.send_rate = _LogOU(rng, _lognormal(rng, 300.0, 1.3), 0.35, 30 * 60_000)
        self.record_size = _lognormal(rng, 600.0, 0.9)
        self.compression = rng.choice((0.25, 0.4, 0.55, 1.0))
        self.topics = [f"{self.client.service}.{t}" for t in rng.sample(("events", "commands", "changes", "dlq",
                                                                          "audit"), rng.randint(1, 3))]
        weights = [rng.paretovariate(1.5) for _ in self.topics]
        self.topic_share = [w / sum(weights) for w in weights]
        for t in self.topics:
            self.s[("topic_send_total", t)] = 0
            self.s[("topic_byte_total", t)] = 0

    def _init_consumer(self, rng: random.Random) -> None:
        self.busy = _LogOU(rng, _lognormal(rng, 0.6, 1.0), 0.5, 20 * 60_000)
        self.commit = _LogOU(rng, _lognormal(rng, 4.0, 0.5), 0.3, 20 * 60_000)
        self.consume_rate = _lognormal(rng, 400.0, 1.2)
        self.record_size = _lognormal(rng, 600.0, 0.9)
        self.rebalance_gap_ms = _lognormal(rng, 90 * 60_000, 0.5)
        self.lag = _LogOU(rng, _lognormal(rng, 50.0, 1.5), 0.8, 10 * 60_000)
        self.assigned = self.client.base_assignment
        self.coordinator = self.client.coordinator

    # -- registration
    def _reader(self, key: Any, conv: Callable[[Any], Any]) -> Callable[[], Any]:
        """The collector reads every value from the current sample at collection time."""
        s = self.s
        return lambda: conv(s[key])

    def _register(self) -> None:
        c, client = self.client.collector, self.client
        if client.layout == "librdkafka":
            prefix = f"org.apache.kafka.{client.kind}."
            table = RDK_CONSUMER_METRICS if client.kind == "consumer" else RDK_PRODUCER_METRICS
            keys = {"connection.creation.rate": "conn_rate", "connection.creation.total": "conn_total",
                    "produce.throttle.time.avg": "throttle_avg", "produce.throttle.time.max": "throttle_max",
                    "record.queue.time.avg": "queue_avg", "record.queue.time.max": "queue_max",
                    "request.latency.avg": "req_lat_avg", "request.latency.max": "req_lat_max",
                    "coordinator.assigned.partitions": "assigned",
                    "coordinator.rebalance.latency.avg": "rebalance_avg",
                    "coordinator.rebalance.latency.max": "rebalance_max",
                    "coordinator.rebalance.latency.total": "rebalance_total",
                    "fetch.manager.fetch.latency.avg": "fetch_avg", "fetch.manager.fetch.latency.max": "fetch_max",
                    "poll.idle.ratio.avg": "poll_idle", "coordinator.commit.latency.avg": "commit_avg",
                    "coordinator.commit.latency.max": "commit_max"}
            for name, kind, vtype in table:
                desc = _RDK_DESCRIPTIONS[name]
                conv = _ceil_int if vtype == "int" else (_rdk_double if name != "poll.idle.ratio.avg" else _ratio)
                if name.startswith("node.request.latency."):
                    stat = "node_lat_" + name.rsplit(".", 1)[1]
                    for n in self.node_keys():
                        c.gauge(prefix + name, {"node.id": n}, description=desc, value_type=vtype,
                                value_fn=self._reader((stat, n), conv))
                elif kind == "sum":
                    c.counter(prefix + name, description=desc, value_type="int",
                              value_fn=self._reader(keys[name], int))
                else:
                    c.gauge(prefix + name, description=desc, value_type=vtype, value_fn=self._reader(keys[name], conv))
            return
        # Java client
        table = JAVA_CONSUMER_METRICS if client.kind == "consumer" else JAVA_PRODUCER_METRICS
        kind_prefix = client.kind
        for group, name, kind, key in table:
            metric, attrs = telemetry_metric_key(group, name, {"client-id": client.client_id})
            if kind == "sum":
                c.counter(metric, attrs, value_type="double", value_fn=self._reader(key, float))
            else:
                c.gauge(metric, attrs, value_type="double", value_fn=self._reader(key, float))
        node_group = f"{kind_prefix}-node-metrics"
        for stat in ("request-latency-avg", "request-latency-max", "request-total"):
            for n in self.node_keys():
                node_tag = f"node-{_JAVA_INT_MAX - self.coordinator}" if n == -1 else f"node-{n}"
                metric, attrs = telemetry_metric_key(node_group, stat, {"client-id": client.client_id,
                                                                        "node-id": node_tag})
                key = {"request-latency-avg": "node_lat_avg", "request-latency-max": "node_lat_max",
                       "request-total": "node_req_total"}[stat]
                if stat == "request-total":
                    c.counter(metric, attrs, value_type="double", value_fn=self._reader((key, n), float))
                else:
                    c.gauge(metric, attrs, value_type="double", value_fn=self._reader((key, n), float))
        if client.kind == "producer":
            for stat, key in (("record-send-total", "topic_send_total"), ("byte-total", "topic_byte_total")):
                for t in self.topics:
                    metric, attrs = telemetry_metric_key("producer-topic-metrics", stat,
                                                         {"client-id": client.client_id, "topic": t})
                    c.counter(metric, attrs, value_type="double", value_fn=self._reader((key, t), float))
        # Java's own "kafka-metrics-count": roughly what a client of this shape registers
        self.s["metrics_count"] = 130.0 + 15.0 * len(self.node_keys()) + (
            0.0 if client.kind == "consumer" else 6.0 * len(self.topics))

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
            spike = _lognormal(rng, 8.0, 0.6)
            spike_node = rng.choice(self.node_keys() + [0])  # 0: every connection
        new_conns = _poisson(rng, dt / self.reconnect_gap_ms) + (spike > 1.0 and rng.random() < 0.2)
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
            mx = avg * (1.3 + _lognormal(rng, 0.9, 0.5))
            if spike_node == 0 or spike_node == n:
                avg *= 1.0 + (spike - 1.0) * 0.15
                mx *= spike
            if n == -1:
                avg *= 0.7
                mx *= 0.7
            s[("node_lat_avg", n)] = avg
            s[("node_lat_max", n)] = max(mx, avg)
            share = 0.05 if n == -1 else self.share[n]
            k = _count(rng, requests * share)
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
        else:
            self._update_producer(rng, s, t0, now_ms, dt, spike)
        self.first = False

    def _update_producer(self, rng, s, t0, now_ms, dt, spike) -> None:
        share = self.throttle.overlap(t0, now_ms)
        if share > 0:
            level = self.throttle_level * _lognormal(rng, 1.0, 0.4)
            s["throttle_avg"] = level * share
            s["throttle_max"] = level * (1.5 + rng.random() * 2.0)
        else:
            s["throttle_avg"] = s["throttle_max"] = 0.0
        q = self.queue.step(rng, dt) + 0.5 * s["req_lat_avg"] + s["throttle_avg"] * 0.5
        s["queue_avg"] = q
        s["queue_max"] = q * (2.0 + _lognormal(rng, 2.0, 0.6)) * (spike if spike > 1 else 1.0)
        rate = self.send_rate.step(rng, dt) * (1.0 - 0.5 * (share > 0))
        sent = _count(rng, rate * dt / 1000.0)
        s["send_rate"] = sent / (dt / 1000.0)
        s["send_total"] += sent
        errors = _poisson(rng, sent * (2e-6 if spike <= 1 else 2e-4))
        s["error_total"] += errors
        s["error_rate"] = errors / (dt / 1000.0)
        s["retry_total"] += errors + _poisson(rng, sent * 1e-5 * spike)
        per_batch = max(1.0, min(16384.0 / self.record_size, rate * 0.005 + 1.0))
        s["batch_size_avg"] = per_batch * self.record_size * self.compression + 61.0
        s["compression_rate"] = self.compression
        sent_bytes = sent * self.record_size * self.compression
        s["buffer_available"] = float(max(0, 33554432 - int(rate * self.record_size * q / 1000.0)))
        s["out_bytes_total"] += int(sent_bytes + 80 * self.new_requests)
        s["in_bytes_total"] += _count(rng, sent / per_batch * 60.0)
        left = sent
        for i, t in enumerate(self.topics):
            k = left if i == len(self.topics) - 1 else min(left, int(round(sent * self.topic_share[i])))
            left -= k
            s[("topic_send_total", t)] += k
            s[("topic_byte_total", t)] += int(k * self.record_size * self.compression)

    def _update_consumer(self, rng, s, t0, now_ms, dt, base, spike) -> None:
        busy = min(1.0, self.busy.step(rng, dt))
        fetch_wait = 500.0
        avg = (1.0 - busy) * fetch_wait + busy * (base * 2.0 + _lognormal(rng, 4.0, 0.5))
        avg *= math.exp(rng.gauss(0.0, 0.08))
        if spike > 1.0:
            avg = min(fetch_wait * 1.5, avg * (1.0 + (spike - 1.0) * 0.2))
        s["fetch_avg"] = avg
        s["fetch_max"] = max(avg, min(fetch_wait + base * 4.0 * spike, avg * (1.2 + _lognormal(rng, 0.5, 0.5))))
        s["poll_idle"] = min(1.0, max(0.0, 1.0 - busy * rng.uniform(0.75, 0.95)))
        poll_gap = 100.0 + (1.0 - busy) * 400.0 + busy * _lognormal(rng, 50.0, 0.7)
        s["poll_gap_avg"] = poll_gap
        s["poll_gap_max"] = poll_gap * (1.2 + _lognormal(rng, 0.8, 0.5))
        fetches = _count(rng, dt / max(avg, 1.0))
        s["fetch_total"] += fetches
        consumed = _count(rng, self.consume_rate * busy * dt / 1000.0)
        s["consumed_total"] += consumed
        s["consumed_bytes_total"] += int(consumed * self.record_size)
        s["in_bytes_total"] += int(consumed * self.record_size) + fetches * 120
        s["lag_max"] = float(int(self.lag.step(rng, dt) * (spike if spike > 1 else 1.0)))
        commit = self.commit.step(rng, dt) + base * 0.5
        if spike > 1.0:
            commit *= 1.0 + (spike - 1.0) * 0.3
        s["commit_avg"] = commit
        s["commit_max"] = commit * (1.2 + _lognormal(rng, 0.8, 0.5))
        s["commit_total"] += max(1, _count(rng, dt / 5000.0))  # auto-commit every 5 s
        rebalances = []
        if self.first:
            rebalances.append(_lognormal(rng, 3100.0, 0.15))  # joining: group.initial.rebalance.delay.ms
        elif rng.random() < 1.0 - math.exp(-dt / self.rebalance_gap_ms):
            rebalances.append(_lognormal(rng, 350.0, 0.8))
            self.assigned = max(0, self.client.base_assignment + rng.choice((-1, 0, 0, 1)))
        if rebalances:
            s["rebalance_avg"] = sum(rebalances) / len(rebalances)
            s["rebalance_max"] = max(rebalances)
            s["rebalance_total"] += int(math.ceil(sum(rebalances)))
            s["rebalance_count"] += len(rebalances)
        else:
            s["rebalance_avg"] = s["rebalance_max"] = 0.0
        s["assigned"] = self.assigned
        if self.first and self.client.member_id:
            key = "member_id" if self.client.layout == "librdkafka" else "group_member_id"
            self.client.collector.set_resource_attribute(key, self.client.member_id)


def _ceil_int(v: float) -> int:
    return int(math.ceil(v - 1e-9))


def _rdk_double(v: float) -> float:
    return round(float(v), 3)  # librdkafka: microseconds / 1000


def _ratio(v: float) -> float:
    return round(min(1.0, max(0.0, float(v))), 6)


# ------------------------------------------------------------------------------------------ clients

@dataclass
class SimClient:
    """One simulated client. ``telemetry`` / ``collector`` exist once the client has started."""

    index: int
    kind: str  # "producer" or "consumer"
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
    telemetry: ClientTelemetry | None = None
    collector: MetricsCollector | None = None
    model: _Model | None = None
    # counters
    gets: int = 0
    pushes: int = 0
    accepted_pushes: int = 0
    terminating_pushes: int = 0
    payload_bytes: int = 0
    errors: Counter = field(default_factory=Counter)
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

    def start(self, fleet: Fleet, clock_ns: Callable[[], int], now_ms: int) -> None:
        """Create the collector, the metric model and the telemetry state machine."""
        scope_name = scope_version = ""
        if self.layout == "librdkafka":
            scope_name = f"{self.client_id}#{self.kind}-1"
            scope_version = self.software_version.rsplit("rdkafka-", 1)[-1] if "rdkafka-" in \
                self.software_version else self.software_version
        self.collector = _SimCollector(self._before_collect, layout=self.layout, clock_ns=clock_ns,
                                       scope_name=scope_name, scope_version=scope_version)
        for k, v in self.resource.items():
            self.collector.set_resource_attribute(k, v)
        self.model = _Model(self, fleet, now_ms)
        if self.tune is not None:
            self.tune(self.model)
        self._clock_ns = clock_ns
        self.telemetry = ClientTelemetry(self.collector, supported_compression=self.supported_compression,
                                         rng=self.jitter_rng)
        self.started = True

    def _before_collect(self) -> None:
        self.model.update(self._clock_ns() // 1_000_000)

    def __repr__(self) -> str:
        return (f"<SimClient {self.kind} {self.client_id} {self.software_name}/{self.software_version} "
                f"pushes={self.pushes} errors={dict(self.errors)}>")


# ------------------------------------------------------------------------------------------ stats

@dataclass
class FleetStats:
    """What a run did. ``get_results`` / ``push_results`` count responses by error code."""

    clients: int = 0
    started: int = 0
    requests: Counter = field(default_factory=Counter)  # API name -> count
    get_results: Counter = field(default_factory=Counter)  # error code -> count
    push_results: Counter = field(default_factory=Counter)
    accepted: int = 0  # pushes answered with error code 0 (including empty payloads)
    payloads: int = 0  # non-empty accepted payloads handed to receivers / callbacks
    terminating_pushes: int = 0
    payload_bytes: int = 0  # wire (compressed) bytes of every push
    uncompressed_bytes: int = 0  # OTLP bytes of the accepted payloads
    by_compression: Counter = field(default_factory=Counter)
    recorded_rows: int = 0
    failed_requests: int = 0  # transport failures (TCP mode)
    connect_failures: int = 0
    simulated_ms: int = 0
    wall_s: float = 0.0

    @property
    def pushes(self) -> int:
        return self.requests["PushTelemetry"]

    @property
    def gets(self) -> int:
        return self.requests["GetTelemetrySubscriptions"]

    @property
    def errors_by_code(self) -> dict[int, int]:
        """Every non-zero error code of either API with its count."""
        out: Counter = Counter()
        for results in (self.get_results, self.push_results):
            for code, n in results.items():
                if code:
                    out[code] += n
        return dict(out)

    @property
    def protocol_errors(self) -> dict[int, int]:
        """The errors in :data:`PROTOCOL_ERROR_CODES` (everything but throttling)."""
        return {c: n for c, n in self.errors_by_code.items() if c in PROTOCOL_ERROR_CODES}

    @property
    def pushes_per_s(self) -> float:
        return self.pushes / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "clients": self.clients, "started": self.started, "requests": dict(self.requests),
            "get_results": {_code_name(c): n for c, n in sorted(self.get_results.items())},
            "push_results": {_code_name(c): n for c, n in sorted(self.push_results.items())},
            "accepted": self.accepted, "payloads": self.payloads, "terminating_pushes": self.terminating_pushes,
            "payload_bytes": self.payload_bytes, "uncompressed_bytes": self.uncompressed_bytes,
            "by_compression": dict(self.by_compression), "recorded_rows": self.recorded_rows,
            "failed_requests": self.failed_requests, "connect_failures": self.connect_failures,
            "simulated_ms": self.simulated_ms, "wall_s": round(self.wall_s, 3),
            "pushes_per_s": round(self.pushes_per_s, 1),
        }

    def progress_line(self) -> str:
        errs = sum(self.errors_by_code.values())
        return (f"sim {_fmt_ms(self.simulated_ms)}  wall {self.wall_s:6.1f}s  gets {self.gets}  "
                f"pushes {self.pushes}  accepted {self.accepted}  errors {errs}  "
                f"{self.pushes_per_s:,.0f} pushes/s")

    def summary(self) -> str:
        errs = self.errors_by_code
        err_text = ", ".join(f"{_code_name(c)}={n}" for c, n in sorted(errs.items())) or "none"
        codecs = ", ".join(f"{k.lower()}={n}" for k, n in sorted(self.by_compression.items())) or "-"
        lines = [
            f"clients: {self.clients} ({self.started} started)",
            f"simulated time: {_fmt_ms(self.simulated_ms)} in {self.wall_s:.2f} s wall "
            f"({self.pushes_per_s:,.0f} pushes/s)",
            f"requests: GetTelemetrySubscriptions={self.gets} PushTelemetry={self.pushes} "
            f"(terminating {self.terminating_pushes})",
            f"accepted pushes: {self.accepted} (payloads {self.payloads})",
            f"errors by code: {err_text}",
            f"payload bytes: {self.payload_bytes:,} on the wire, {self.uncompressed_bytes:,} OTLP; codecs: {codecs}",
        ]
        if self.failed_requests or self.connect_failures:
            lines.append(f"transport failures: {self.failed_requests}, connect failures: {self.connect_failures}")
        if self.recorded_rows:
            lines.append(f"recorded rows: {self.recorded_rows}")
        return "\n".join(lines)


def _code_name(code: int) -> str:
    try:
        return f"{ErrorCode(code).name}({code})" if code else "NONE(0)"
    except ValueError:
        return str(code)


# ------------------------------------------------------------------------------------------ fleet

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
    ``close_spread_ms``. ``incidents``: fleet-wide broker slow-downs on/off.
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
    ) -> None:
        if n_producers < 0 or n_consumers < 0:
            raise ValueError("client counts must not be negative")
        self.seed = seed
        rng = random.Random(f"{seed}:fleet")
        self.nodes: tuple[int, ...] = tuple(range(1, int(brokers) + 1)) if isinstance(brokers, int) else \
            tuple(int(b) for b in brokers)
        if not self.nodes or any(n < 0 for n in self.nodes):
            raise ValueError("brokers must be a positive count or non-negative node ids")
        if slow_broker == "auto":
            slow_broker = rng.choice(self.nodes) if len(self.nodes) > 1 else None
        if slow_broker is not None and slow_broker not in self.nodes:
            raise ValueError(f"slow_broker {slow_broker} is not one of the brokers {self.nodes}")
        self.slow_broker = slow_broker
        self.node_factor = {n: _lognormal(rng, 1.0, 0.1) * (slow_factor if n == slow_broker else 1.0)
                            for n in self.nodes}
        self.start_ms = start_ms
        self.start_spread_ms = max(0, int(start_spread_ms))
        self.close_spread_ms = max(0, int(close_spread_ms))
        self.incidents_enabled = incidents
        self.incidents: _Incidents = _Incidents(seed, (), 0)
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
        n_groups = consumer_groups if consumer_groups is not None else max(1, min(len(_SERVICES),
                                                                                 math.ceil(n_consumers / 5)))
        groups = [(f"{_SERVICES[g % len(_SERVICES)]}" + (f"-{g // len(_SERVICES)}" if g >= len(_SERVICES) else ""),
                   rng.choice(_PARTITION_CHOICES), rng.choice(self.nodes)) for g in range(max(1, n_groups))]
        members: dict[int, int] = Counter()
        self.clients: list[SimClient] = []
        for i in range(n_producers + n_consumers):
            kind = "producer" if i < n_producers else "consumer"
            crng = random.Random(f"{seed}:client:{i}")
            (name, version, layout), = crng.choices([c for c, _ in choices], [w for _, w in choices])
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
                member_id = (f"rdkafka-{member_uuid}" if layout == "librdkafka" else f"{client_id}-{member_uuid}")
                members[gi] += 1
            addr = f"10.{crng.randint(0, 31)}.{crng.randint(0, 255)}.{crng.randint(2, 254)}"
            principal = crng.choice(("User:ANONYMOUS", f"User:{service}", f"User:svc-{service}"))
            info = ClientInfo(client_id=client_id, client_software_name=name, client_software_version=version,
                              client_source_address=addr, client_source_port=crng.randint(32768, 60999),
                              principal=principal)
            self.clients.append(SimClient(
                index=i, kind=kind, client_id=client_id, software_name=name, software_version=version,
                layout=layout, codec=cdc, service=service, client_info=info, rng=crng,
                jitter_rng=random.Random(f"{seed}:jitter:{i}"), resource=resource, group_id=group_id,
                member_id=member_id, coordinator=coordinator,
                start_offset_ms=int(crng.random() * self.start_spread_ms),
                connect_delay_ms=int(_lognormal(crng, 120.0, 0.5)) + 5,
                rtt_ms=max(1, int(round(_lognormal(crng, 1.5, 0.6)))),
                close_offset_ms=int(crng.random() * self.close_spread_ms)))
        # consumers of a group split its partitions
        for gi, (_, partitions, _) in enumerate(groups):
            group_members = [c for c in self.clients if c.kind == "consumer" and
                             (c.index - n_producers) % len(groups) == gi]
            for j, c in enumerate(group_members):
                c.base_assignment = partitions // len(group_members) + (j < partitions % len(group_members))
        self.groups = groups
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
    def run_start_ms(self) -> int:
        """When the in-process run started on the simulated clock (Unix-epoch milliseconds)."""
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
        size = len(body.metrics) if body.metrics is not None else 0
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
            from ..sinks.recorder import ParquetRecorder

            recorder = ParquetRecorder(recorder)
            own_recorder = True
        ctx = _RunContext(self, broker, step, on_payload, collect_payloads, recorder, record_rejected)
        wall0 = time.perf_counter()
        if self._t0 is None:
            self._t0 = int(self.start_ms if self.start_ms is not None else time.time() * 1000)
            self._now = self._t0
            if self.incidents_enabled:
                self.incidents = _Incidents(self.seed, self.nodes, self._t0)
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

    async def run_tcp_async(
        self,
        host: str,
        port: int,
        duration_s: float,
        *,
        connect_timeout_s: float = 5.0,
        request_timeout_s: float = 10.0,
        close_timeout_s: float = 5.0,
        allow_remote: bool = False,
        progress: Callable[[FleetStats], Any] | None = None,
        progress_every_s: float = 1.0,
        max_start_spread_s: float | None = None,
    ) -> FleetStats:
        """Drive every client over its own TCP connection to ``host:port`` in real time for ``duration_s``:
        ApiVersions v3 (the client's software name and version), Metadata, then GetTelemetrySubscriptions /
        PushTelemetry as its :class:`~kip714.ClientTelemetry` schedules them, and at the end the terminating
        push. Client starts are spread over ``min(start_spread_ms, duration/4)``. Every connect, request and
        close is bounded by its timeout, and the whole run by ``duration_s`` plus those timeouts. Only
        loopback hosts unless ``allow_remote``."""
        if self._mode is not None:
            raise RuntimeError("this fleet has already run; create a new Fleet")
        self._mode = "tcp"
        if not allow_remote and not _is_loopback(host):
            raise ValueError(f"{host!r} is not a loopback address; pass allow_remote=True (--allow-remote) to "
                             "simulate against it")
        loop = asyncio.get_running_loop()
        wall0 = time.perf_counter()
        t_start = loop.time()
        stop_at = t_start + float(duration_s)
        spread = self.start_spread_ms / 1000.0
        spread = min(spread, float(duration_s) / 4.0)
        if max_start_spread_s is not None:
            spread = min(spread, max_start_spread_s)
        timeouts = (connect_timeout_s, request_timeout_s, close_timeout_s)
        tasks = [asyncio.create_task(self._tcp_client(c, host, port, t_start + spread * (
            c.start_offset_ms / max(1, self.start_spread_ms)), stop_at, timeouts)) for c in self.clients]
        reporter = None
        if progress is not None:
            async def report() -> None:
                while True:
                    await asyncio.sleep(progress_every_s)
                    self.stats.simulated_ms = int((loop.time() - t_start) * 1000)
                    self.stats.wall_s = time.perf_counter() - wall0
                    progress(self.stats)

            reporter = asyncio.create_task(report())
        budget = float(duration_s) + connect_timeout_s + request_timeout_s + close_timeout_s + 5.0
        try:
            done, not_done = await asyncio.wait(tasks, timeout=budget)
            for t in not_done:
                t.cancel()
            if not_done:
                await asyncio.wait(not_done, timeout=2.0)
            for t in done:
                if not t.cancelled() and t.exception() is not None:
                    raise t.exception()
        finally:
            if reporter is not None:
                reporter.cancel()
            self._closed = True
            self.stats.simulated_ms = int((loop.time() - t_start) * 1000)
            self.stats.wall_s = time.perf_counter() - wall0
        if progress is not None:  # the last progress line shows the final counts (terminating pushes included)
            progress(self.stats)
        return self.stats

    async def _tcp_client(self, client: SimClient, host: str, port: int, start_at: float, stop_at: float,
                          timeouts: tuple[float, float, float]) -> None:
        connect_timeout, request_timeout, close_timeout = timeouts
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, start_at - loop.time()))
        if loop.time() >= stop_at:
            return
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), connect_timeout)
        except (OSError, asyncio.TimeoutError):
            self.stats.connect_failures += 1
            return
        conn = _TcpConnection(client, reader, writer)

        def now_ms() -> int:
            return time.time_ns() // 1_000_000

        try:
            resp = await conn.call(ApiVersionsRequest(client.software_name, client.software_version), 3,
                                   request_timeout)
            apis = {a.api_key: (a.min_version, a.max_version) for a in resp.body.api_keys}
            if resp.body.error_code or int(ApiKey.PUSH_TELEMETRY) not in apis or \
                    int(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS) not in apis:
                self.stats.connect_failures += 1
                return
            meta_max = apis.get(int(ApiKey.METADATA), (0, 12))[1]
            await conn.call(MetadataRequest(topics=[]), min(12, meta_max), request_timeout)
            client.start(self, time.time_ns, now_ms())
            self.stats.started += 1
            tel = client.telemetry
            request_timeout_ms = int(request_timeout * 1000)
            while True:
                remaining = stop_at - loop.time()
                if remaining <= 0 or not tel.enabled:
                    break
                wait = tel.time_to_next_update(request_timeout_ms, now_ms())
                if wait > 0:
                    await asyncio.sleep(min(wait / 1000.0, remaining))
                    continue
                body = tel.create_request(now_ms())
                if body is None:
                    await asyncio.sleep(min(0.01, remaining))
                    continue
                if not await self._tcp_exchange(conn, client, body, request_timeout, now_ms):
                    break
            if tel.enabled and tel.initiate_close(now_ms()):
                body = tel.create_request(now_ms())
                if body is not None:
                    await self._tcp_exchange(conn, client, body, close_timeout, now_ms)
            tel.close()
            client.closed = True
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError, Kip714Error):
            self.stats.failed_requests += 1
        finally:
            writer.close()
            try:
                await asyncio.wait_for(writer.wait_closed(), 1.0)
            except (OSError, asyncio.TimeoutError, ConnectionError):
                pass

    async def _tcp_exchange(self, conn: _TcpConnection, client: SimClient, body: Any, timeout: float,
                            now_ms: Callable[[], int]) -> bool:
        api = _API_NAMES[type(body).API_KEY]
        self.stats.requests[api] += 1
        if api == "GetTelemetrySubscriptions":
            client.gets += 1
        try:
            resp = await conn.call(body, 0, timeout)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError, Kip714Error) as exc:
            self.stats.failed_requests += 1
            client.failed_requests += 1
            client.telemetry.handle_failed_request(now_ms(), exc)
            return False
        code = resp.body.error_code
        self.count_response(api, code, client)
        if type(body) is PushTelemetryRequest:
            self.count_push(client, body, code)
            otlp_total = client.telemetry.stats.uncompressed_bytes_pushed
            if code == 0:
                self.stats.payloads += 1 if body.metrics else 0
                self.stats.uncompressed_bytes += otlp_total - client._otlp_seen
            client._otlp_seen = otlp_total
        client.telemetry.handle_response(resp.body, now_ms())
        return True


class _RunContext:
    """One in-process run's collaborators (kept out of Fleet so runs can pass different ones)."""

    def __init__(self, fleet: Fleet, broker: TelemetryBroker, step: int, on_payload, collect: bool, recorder,
                 record_rejected: bool) -> None:
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
            client.telemetry.handle_response(data, now)
            if reschedule:
                self.schedule(client, now)

    def schedule(self, client: SimClient, now: int, minimum: int = 0) -> None:
        tel = client.telemetry
        if not tel.enabled:
            return
        wait = tel.time_to_next_update(_REQUEST_TIMEOUT_MS, now)
        if wait >= INT_MAX:
            return
        self.fleet.schedule(self.tick(now + max(wait, minimum)), _POLL, client)

    def poll(self, client: SimClient, now: int) -> None:
        tel = client.telemetry
        if not tel.enabled:
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
        self.recorder.record(push_row(body, client.client_info, self.node_id, code, now,
                                      client.telemetry.subscription))
        self.fleet.stats.recorded_rows += 1

    def close_client(self, client: SimClient) -> None:
        if not client.started or client.closed:
            return
        tel = client.telemetry
        now = self.fleet.now_ms
        if tel.enabled and tel.initiate_close(now):
            body = tel.create_request(now)
            if body is not None:
                self.send(client, body, now)
                tel.handle_response(self._last_response, now + client.rtt_ms)  # ignored while terminating
        tel.close()
        client.closed = True
        if self.recorder is not None and hasattr(self.recorder, "instance_closed") and \
                client.client_instance_id is not None:  # the client's connection goes with it
            self.recorder.instance_closed(ReceiverContext(client.client_info, self.broker.node_id),
                                          client.client_instance_id, now + client.rtt_ms, "client")


class _TcpConnection:
    """One client's connection: sequential request/response with correlation ids."""

    def __init__(self, client: SimClient, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.client = client
        self.reader = reader
        self.writer = writer
        self.correlation_id = 0

    async def call(self, body: Any, api_version: int, timeout: float):
        self.correlation_id += 1
        cid = self.correlation_id
        self.writer.write(encode_request(body, cid, self.client.client_id, api_version))

        async def exchange():
            await self.writer.drain()
            (size,) = struct.unpack(">i", await self.reader.readexactly(4))
            if size < 0 or size > 16 << 20:
                raise ConnectionError(f"bad response size {size}")
            return await self.reader.readexactly(size)

        frame = await asyncio.wait_for(exchange(), timeout)
        resp = decode_response(frame, type(body).API_KEY, api_version)
        if resp.correlation_id != cid:
            raise ConnectionError(f"correlation id {resp.correlation_id} does not match {cid}")
        return resp


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False
