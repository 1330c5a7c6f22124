"""Which metrics each kind of Kafka client pushes through KIP-714: kip714's one home for that knowledge.

Everything that must know *who sends what* reads it here: the report's coverage checks, the simulator's
metric tables, the Grafana dashboards and alert rules (a panel over a metric not every client sends says
so), ``kip714 subscriptions lint`` (a prefix that matches no metric a client has) and the Prometheus
exporter's per-name overrides.

Senders (:data:`SENDERS`):

``standard``
    the KIP-714 text's "Standard producer metrics" / "Standard consumer metrics": every conforming client
    (Java, librdkafka, any other) should push them.
``java``
    Apache Kafka's Java producer, consumer and admin client: every client metric whose name matches the
    subscription, named by ``TelemetryMetricNamingConvention`` (:mod:`kip714.client.naming`); per-node
    metrics carry ``node_id="node-<id>"``.
``librdkafka``
    librdkafka 2.6 and later (confluent-kafka-python, -go, -dotnet…): exactly 10 producer and 13 consumer
    metrics (``src/rdkafka_telemetry_encode.c``; the captures in ``docs/reference/librdkafka-behaviour.md``);
    per-node metrics carry the int attribute ``node.id`` (``node_id="3"`` once exported), and consumers also
    report ``-1``, the group coordinator as a logical broker.
``streams``
    Kafka Streams applications (4.0+): the Streams metrics registered with the admin client (client level)
    and with each stream thread's main consumer (thread, task and lower levels), KIP-1076/KIP-1091/KIP-1221.

Names are telemetry names (``org.apache.kafka.…``); :func:`kip714.sinks.prometheus.names.metric_name` turns
them into Prometheus names. Kinds are OTLP's: ``gauge`` or ``sum`` (Kafka's ``CumulativeSum``,
``CumulativeCount`` and ``WindowedCount`` are pushed as monotonic sums, everything else measurable as a
gauge; ``KafkaMetricsCollector``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .naming import telemetry_metric_name

__all__ = [
    "JAVA_ADMIN_METRICS",
    "JAVA_CONSUMER_METRICS",
    "JAVA_NODE_METRICS",
    "JAVA_PRODUCER_METRICS",
    "JAVA_PRODUCER_TOPIC_METRICS",
    "KAFKA_METRIC_PREFIX",
    "LIBRDKAFKA_CONSUMER_METRICS",
    "LIBRDKAFKA_DESCRIPTIONS",
    "LIBRDKAFKA_PRODUCER_METRICS",
    "NON_MONOTONIC_SUMS",
    "SENDERS",
    "STANDARD_CONSUMER_METRICS",
    "STANDARD_PRODUCER_METRICS",
    "STANDARD_RESOURCE_LABELS",
    "STREAMS_CLIENT_METRICS",
    "STREAMS_CLIENT_STATES",
    "STREAMS_TASK_METRICS",
    "STREAMS_THREAD_METRICS",
    "STREAM_THREAD_STATES",
    "MetricInfo",
    "known_metrics",
    "metric_info",
    "senders_text",
]

#: The namespace of Kafka's own client metrics (KIP-714 "Metrics naming and format").
KAFKA_METRIC_PREFIX = "org.apache.kafka."
#: The kinds of client a metric can come from (see the module docstring).
SENDERS = ("standard", "java", "librdkafka", "streams")

# ------------------------------------------------------------------------------------------ the KIP's lists

#: KIP-714 "Standard producer metrics" (telemetry names).
STANDARD_PRODUCER_METRICS = tuple(
    KAFKA_METRIC_PREFIX + "producer." + n
    for n in (
        "connection.creation.rate",
        "connection.creation.total",
        "node.request.latency.avg",
        "node.request.latency.max",
        "produce.throttle.time.avg",
        "produce.throttle.time.max",
        "record.queue.time.avg",
        "record.queue.time.max",
    )
)
#: KIP-714 "Standard consumer metrics" (telemetry names).
STANDARD_CONSUMER_METRICS = tuple(
    KAFKA_METRIC_PREFIX + "consumer." + n
    for n in (
        "connection.creation.rate",
        "connection.creation.total",
        "node.request.latency.avg",
        "node.request.latency.max",
        "poll.idle.ratio.avg",
        "coordinator.commit.latency.avg",
        "coordinator.commit.latency.max",
        "coordinator.assigned.partitions",
        "coordinator.rebalance.latency.avg",
        "coordinator.rebalance.latency.max",
        "coordinator.rebalance.latency.total",
        "fetch.manager.fetch.latency.avg",
        "fetch.manager.fetch.latency.max",
    )
)
#: KIP-714 "Standard client resource labels".
STANDARD_RESOURCE_LABELS = ("client_rack", "group_id", "group_instance_id", "group_member_id", "transactional_id")

# ------------------------------------------------------------------------------------------ librdkafka

#: librdkafka's descriptions of its metrics (the name after ``org.apache.kafka.<producer|consumer>.``).
LIBRDKAFKA_DESCRIPTIONS = {
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
#: librdkafka's producer metrics (name after ``org.apache.kafka.producer.``, kind, value type), in its
#: emission order (librdkafka 2.6 to 2.16; ``request.latency.*`` are produce requests only, #4847).
LIBRDKAFKA_PRODUCER_METRICS = (
    ("connection.creation.rate", "gauge", "double"),
    ("connection.creation.total", "sum", "int"),
    ("node.request.latency.avg", "gauge", "double"),
    ("node.request.latency.max", "gauge", "int"),
    ("produce.throttle.time.avg", "gauge", "double"),
    ("produce.throttle.time.max", "gauge", "int"),
    ("record.queue.time.avg", "gauge", "double"),
    ("record.queue.time.max", "gauge", "int"),
    ("request.latency.avg", "gauge", "double"),
    ("request.latency.max", "gauge", "int"),
)
#: librdkafka's consumer metrics (after ``org.apache.kafka.consumer.``): exactly the standard 13 (complete
#: since 2.6.0, #4808) — no lag, no fetch throttle.
LIBRDKAFKA_CONSUMER_METRICS = (
    ("connection.creation.rate", "gauge", "double"),
    ("connection.creation.total", "sum", "int"),
    ("node.request.latency.avg", "gauge", "double"),
    ("node.request.latency.max", "gauge", "int"),
    ("coordinator.assigned.partitions", "gauge", "int"),
    ("coordinator.rebalance.latency.avg", "gauge", "double"),
    ("coordinator.rebalance.latency.max", "gauge", "int"),
    ("coordinator.rebalance.latency.total", "sum", "int"),
    ("fetch.manager.fetch.latency.avg", "gauge", "double"),
    ("fetch.manager.fetch.latency.max", "gauge", "int"),
    ("poll.idle.ratio.avg", "gauge", "double"),
    ("coordinator.commit.latency.avg", "gauge", "double"),
    ("coordinator.commit.latency.max", "gauge", "int"),
)

# ------------------------------------------------------------------------------------------ Java clients
# (Kafka metric group, metric name, kind): the Java client metrics kip714 knows by name (its simulator
# pushes them; its dashboards and alert rules query them). The Java client has many more; any of them is
# pushed when a subscription asks for it.

JAVA_PRODUCER_METRICS = (
    ("producer-metrics", "connection-creation-rate", "gauge"),
    ("producer-metrics", "connection-creation-total", "sum"),
    ("producer-metrics", "connection-count", "gauge"),
    ("producer-metrics", "request-latency-avg", "gauge"),
    ("producer-metrics", "request-latency-max", "gauge"),
    ("producer-metrics", "request-total", "sum"),
    ("producer-metrics", "record-queue-time-avg", "gauge"),
    ("producer-metrics", "record-queue-time-max", "gauge"),
    ("producer-metrics", "produce-throttle-time-avg", "gauge"),
    ("producer-metrics", "produce-throttle-time-max", "gauge"),
    ("producer-metrics", "record-send-rate", "gauge"),
    ("producer-metrics", "record-send-total", "sum"),
    ("producer-metrics", "record-error-rate", "gauge"),
    ("producer-metrics", "record-error-total", "sum"),
    ("producer-metrics", "record-retry-total", "sum"),
    ("producer-metrics", "batch-size-avg", "gauge"),
    ("producer-metrics", "compression-rate-avg", "gauge"),
    ("producer-metrics", "buffer-available-bytes", "gauge"),
    ("producer-metrics", "outgoing-byte-total", "sum"),
    ("producer-metrics", "incoming-byte-total", "sum"),
    ("kafka-metrics-count", "count", "gauge"),
)
JAVA_CONSUMER_METRICS = (
    ("consumer-metrics", "connection-creation-rate", "gauge"),
    ("consumer-metrics", "connection-creation-total", "sum"),
    ("consumer-metrics", "connection-count", "gauge"),
    ("consumer-metrics", "poll-idle-ratio-avg", "gauge"),
    ("consumer-metrics", "time-between-poll-avg", "gauge"),
    ("consumer-metrics", "time-between-poll-max", "gauge"),
    ("consumer-metrics", "request-total", "sum"),
    ("consumer-metrics", "incoming-byte-total", "sum"),
    ("consumer-fetch-manager-metrics", "fetch-latency-avg", "gauge"),
    ("consumer-fetch-manager-metrics", "fetch-latency-max", "gauge"),
    ("consumer-fetch-manager-metrics", "fetch-total", "sum"),
    ("consumer-fetch-manager-metrics", "fetch-throttle-time-avg", "gauge"),
    ("consumer-fetch-manager-metrics", "fetch-throttle-time-max", "gauge"),
    ("consumer-fetch-manager-metrics", "records-consumed-total", "sum"),
    ("consumer-fetch-manager-metrics", "bytes-consumed-total", "sum"),
    ("consumer-fetch-manager-metrics", "records-lag-max", "gauge"),
    ("consumer-coordinator-metrics", "commit-latency-avg", "gauge"),
    ("consumer-coordinator-metrics", "commit-latency-max", "gauge"),
    ("consumer-coordinator-metrics", "commit-total", "sum"),
    ("consumer-coordinator-metrics", "assigned-partitions", "gauge"),
    ("consumer-coordinator-metrics", "rebalance-latency-avg", "gauge"),
    ("consumer-coordinator-metrics", "rebalance-latency-max", "gauge"),
    ("consumer-coordinator-metrics", "rebalance-latency-total", "sum"),
    ("consumer-coordinator-metrics", "rebalance-total", "sum"),
    ("kafka-metrics-count", "count", "gauge"),
)
#: The admin client (``Selector`` metrics under the group prefix ``admin-client``; Kafka Streams' admin
#: client pushes these besides the Streams client-level metrics).
JAVA_ADMIN_METRICS = (
    ("admin-client-metrics", "connection-creation-rate", "gauge"),
    ("admin-client-metrics", "connection-creation-total", "sum"),
    ("admin-client-metrics", "connection-count", "gauge"),
    ("admin-client-metrics", "request-latency-avg", "gauge"),
    ("admin-client-metrics", "request-latency-max", "gauge"),
    ("admin-client-metrics", "request-total", "sum"),
    ("kafka-metrics-count", "count", "gauge"),
)
#: Per-node metrics (group ``<kind>-node-metrics``, tag ``node-id`` = ``node-<id>``; Selector.java).
JAVA_NODE_METRICS = (
    ("request-latency-avg", "gauge"),
    ("request-latency-max", "gauge"),
    ("request-total", "sum"),
)
#: Per-topic producer metrics (group ``producer-topic-metrics``, tag ``topic``).
JAVA_PRODUCER_TOPIC_METRICS = (
    ("record-send-total", "sum"),
    ("byte-total", "sum"),
)

# ------------------------------------------------------------------------------------------ Kafka Streams
# Sources (Apache Kafka trunk, streams/src/main/java/org/apache/kafka/streams/):
# - KafkaStreams.java: State (ordinals below), the client-level metrics of ClientMetrics.java registered with
#   the admin client through StreamsClientMetricsDelegatingReporter (every metric of group "stream-metrics");
# - processor/internals/StreamThread.java: State; each thread's main consumer registers, through
#   StreamsThreadMetricsDelegatingReporter, every Streams metric whose thread-id tag is its thread's (or its
#   state updater's): thread, task, processor-node, state-store, record-cache and topic levels;
# - processor/internals/metrics/ThreadMetrics.java, TaskMetrics.java: names, sensors, recording levels.
# KIP-1076 (4.0.0) added the registration; KIP-1091 (4.0.0) the numeric client-state, thread-state and
# recording-level (String metrics cannot be pushed: KafkaMetricsCollector skips non-numeric gauges);
# KIP-1221 (4.2.0, KAFKA-19734) the application-id tag of client-state. KAFKA-19882: 4.0.0-4.0.1 and
# 4.1.0-4.1.1 put process-id on every client-level metric (fixed in 4.0.2, 4.1.2, 4.2.0).
# Kafka's own KafkaStreamsTelemetryIntegrationTest expects exactly the four client-level names below.

#: ``KafkaStreams.State``: the value of ``client-state`` is the ordinal (KafkaStreams.java).
STREAMS_CLIENT_STATES = (
    "CREATED",
    "REBALANCING",
    "RUNNING",
    "PENDING_SHUTDOWN",
    "NOT_RUNNING",
    "PENDING_ERROR",
    "ERROR",
)
#: ``StreamThread.State``: the value of ``thread-state`` is the ordinal (StreamThread.java).
STREAM_THREAD_STATES = (
    "CREATED",
    "STARTING",
    "PARTITIONS_REVOKED",
    "PARTITIONS_ASSIGNED",
    "RUNNING",
    "PENDING_SHUTDOWN",
    "DEAD",
)
#: Client level (group ``stream-metrics``, pushed by the admin client ``<client.id>-admin``):
#: (name, kind, tags). ``failed-stream-threads`` is a CumulativeSum sensor (a monotonic sum);
#: ``recording-level`` is INFO=0, DEBUG=1, TRACE=2.
STREAMS_CLIENT_METRICS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("client-state", "gauge", ("process-id", "application-id")),
    ("alive-stream-threads", "gauge", ()),
    ("failed-stream-threads", "sum", ()),
    ("recording-level", "gauge", ("process-id",)),
)
#: Thread level (group ``stream-thread-metrics``, tag ``thread-id``; ``thread-state`` also ``process-id``,
#: KAFKA-17561), INFO, pushed by the thread's main consumer ``<thread id>-consumer``: (name, kind).
#: ``blocked-time-ns-total`` is a Gauge computing the total (a gauge whose name ends in total).
STREAMS_THREAD_METRICS = (
    ("thread-state", "gauge"),
    ("commit-latency-avg", "gauge"),
    ("commit-latency-max", "gauge"),
    ("poll-latency-avg", "gauge"),
    ("poll-latency-max", "gauge"),
    ("process-latency-avg", "gauge"),
    ("process-latency-max", "gauge"),
    ("punctuate-latency-avg", "gauge"),
    ("punctuate-latency-max", "gauge"),
    ("commit-rate", "gauge"),
    ("commit-total", "sum"),
    ("poll-rate", "gauge"),
    ("poll-total", "sum"),
    ("process-rate", "gauge"),
    ("process-total", "sum"),
    ("punctuate-rate", "gauge"),
    ("punctuate-total", "sum"),
    ("task-created-rate", "gauge"),
    ("task-created-total", "sum"),
    ("task-closed-rate", "gauge"),
    ("task-closed-total", "sum"),
    ("poll-records-avg", "gauge"),
    ("poll-records-max", "gauge"),
    ("process-records-avg", "gauge"),
    ("process-records-max", "gauge"),
    ("process-ratio", "gauge"),
    ("punctuate-ratio", "gauge"),
    ("poll-ratio", "gauge"),
    ("commit-ratio", "gauge"),
    ("blocked-time-ns-total", "gauge"),
    ("thread-start-time", "gauge"),
)
#: Task level, INFO (group ``stream-task-metrics``, tags ``thread-id``, ``task-id``): (name, kind).
#: ``restore-remaining-records-total`` (KIP-869) is a CumulativeSum that *falls* as restoration proceeds
#: (and is -1 on a task that is not restoring), pushed as a monotonic sum: see :data:`NON_MONOTONIC_SUMS`.
STREAMS_TASK_METRICS = (
    ("dropped-records-rate", "gauge"),
    ("dropped-records-total", "sum"),
    ("active-process-ratio", "gauge"),
    ("restore-remaining-records-total", "sum"),
)
#: Sums pushed as monotonic that are not: exported as gauges (their value, never a counter's increase).
NON_MONOTONIC_SUMS = frozenset({telemetry_metric_name("stream-task-metrics", "restore-remaining-records-total")})


# ------------------------------------------------------------------------------------------ lookup


@dataclass(frozen=True)
class MetricInfo:
    """What kip714 knows of one telemetry metric: its ``kind`` (``gauge``/``sum``), whether a sum is
    monotonic, which :data:`SENDERS` push it, the point attributes it carries and a description."""

    name: str
    kind: str
    senders: frozenset[str]
    attributes: tuple[str, ...] = ()
    monotonic: bool = True
    description: str = ""

    @property
    def standard(self) -> bool:
        """In the KIP's standard lists: every conforming client pushes it."""
        return "standard" in self.senders


def _catalog() -> dict[str, MetricInfo]:
    out: dict[str, MetricInfo] = {}

    def add(name: str, kind: str, sender: str, attributes: tuple[str, ...] = (), description: str = "") -> None:
        old = out.get(name)
        senders = frozenset({sender}) | (old.senders if old else frozenset())
        attrs = tuple(dict.fromkeys((old.attributes if old else ()) + attributes))
        out[name] = MetricInfo(
            name,
            kind,
            senders,
            attrs,
            name not in NON_MONOTONIC_SUMS,
            description or (old.description if old else ""),
        )

    for name in STANDARD_PRODUCER_METRICS + STANDARD_CONSUMER_METRICS:
        kind = "sum" if name.endswith(".total") else "gauge"
        add(name, kind, "standard", ("node_id",) if ".node." in name else ())
    for kind_prefix, table in (("producer", LIBRDKAFKA_PRODUCER_METRICS), ("consumer", LIBRDKAFKA_CONSUMER_METRICS)):
        for bare, kind, _ in table:
            attrs = ("node_id",) if bare.startswith("node.") else ()
            add(f"{KAFKA_METRIC_PREFIX}{kind_prefix}.{bare}", kind, "librdkafka", attrs, LIBRDKAFKA_DESCRIPTIONS[bare])
    for kind_prefix, table3 in (
        ("producer", JAVA_PRODUCER_METRICS),
        ("consumer", JAVA_CONSUMER_METRICS),
        ("admin-client", JAVA_ADMIN_METRICS),
    ):
        for group, name, kind in table3:
            add(telemetry_metric_name(group, name), kind, "java")
        for name, kind in JAVA_NODE_METRICS:
            add(telemetry_metric_name(f"{kind_prefix}-node-metrics", name), kind, "java", ("node_id",))
    for name, kind in JAVA_PRODUCER_TOPIC_METRICS:
        add(telemetry_metric_name("producer-topic-metrics", name), kind, "java", ("topic",))
    for name, kind, tags in STREAMS_CLIENT_METRICS:
        client_attrs = tuple(t.replace("-", "_") for t in tags)
        add(telemetry_metric_name("stream-metrics", name), kind, "streams", client_attrs)
    for name, kind in STREAMS_THREAD_METRICS:
        thread_attrs = ("thread_id", "process_id") if name == "thread-state" else ("thread_id",)
        add(telemetry_metric_name("stream-thread-metrics", name), kind, "streams", thread_attrs)
    for name, kind in STREAMS_TASK_METRICS:
        add(telemetry_metric_name("stream-task-metrics", name), kind, "streams", ("thread_id", "task_id"))
    return out


_CATALOG = _catalog()


def known_metrics() -> dict[str, MetricInfo]:
    """Every metric kip714 knows by name (telemetry name → :class:`MetricInfo`)."""
    return dict(_CATALOG)


def metric_info(name: str) -> MetricInfo | None:
    """What kip714 knows of telemetry metric ``name`` (None: not one it knows by name)."""
    return _CATALOG.get(name)


def senders_text(senders: frozenset[str] | set[str]) -> str:
    """Who pushes a metric, in words for a panel or an alert: ``every KIP-714 client`` (a standard metric),
    ``Java clients only``, ``Java and librdkafka clients only``, ``Kafka Streams applications only``…"""
    if "standard" in senders:
        return "every KIP-714 client"
    if senders == {"streams"}:
        return "Kafka Streams applications only"
    named = [
        w for s, w in (("java", "Java"), ("librdkafka", "librdkafka"), ("streams", "Kafka Streams")) if s in senders
    ]
    if not named:
        return "no client kip714 knows of"
    return " and ".join(named) + " clients only"
