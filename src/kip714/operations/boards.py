"""kip714's Grafana dashboards, panel by panel: producers, consumers, Kafka Streams applications, the client
fleet and kip714 itself, described with :class:`~kip714.operations.panels.Board` (the model and who pushes
what: :mod:`kip714.operations.panels`).

Every panel over the clients' series groups by the client identity, never by ``instance``: a client whose
series two replicas hold (it moved, and the old replica has not expired it yet) is one client. Fleet totals
sum over every replica; per-replica panels (the fleet dashboard's replicas row, kip714's own) split by the
``replica`` label of kip714's own metrics."""

from __future__ import annotations

from collections.abc import Iterable

from ..client.catalog import STREAM_THREAD_STATES, STREAMS_CLIENT_STATES
from ..sinks.labels import DEFAULT_LABELS
from .panels import Board, Dashboard, Query
from .promql import LAST_PUSH, Clients, prom_name, replica_targets

__all__ = ["DASHBOARDS", "dashboards"]

#: The dashboards, by uid (:func:`dashboards` builds them).
DASHBOARDS = ("kip714-producers", "kip714-consumers", "kip714-streams", "kip714-fleet", "kip714-self")
R = "$__rate_interval"


def _client_variable(b: Board, metric: str) -> None:
    if b.c.has_client_id:
        b.variable("client_id", "Client", f"label_values({metric}, client_id)")


def dashboards(labels: str | Iterable[str] = DEFAULT_LABELS) -> list[Dashboard]:
    """kip714's dashboards for series exported with ``--prometheus-labels`` ``labels``."""
    c = Clients(labels)
    return [_producers(c), _consumers(c), _streams(c), _fleet(c), _self(c)]


# ------------------------------------------------------------------------------------------ producers


def _latency_rows(b: Board, kind: str) -> None:
    c = b.c
    lat = prom_name(f"org.apache.kafka.{kind}.node.request.latency.avg")
    lat_max = prom_name(f"org.apache.kafka.{kind}.node.request.latency.max")
    sel = c.selector(kafka_node_role='="broker"')
    per_node = c.agg("max", f"{lat}{sel}", "kafka_node_id")
    b.row("Request latency by broker")
    b.panel(
        "Request latency by broker (avg)",
        "Average request latency of each client to each broker (kafka_node_id: the broker the client talked to, "
        "the same label for Java's node_id=\"node-3\" and librdkafka's node.id=3).",
        "timeseries",
        Query(per_node, c.legend("kafka_node_id")),
        unit="ms",
    )
    b.panel(
        "Slowest broker over the client's median",
        "Each client's latency to a broker divided by its median over its brokers: one broker well above 1 is "
        "slow for that client (the KafkaClientBrokerLatencyOutlier alert fires at the rules' ratio).",
        "timeseries",
        Query(
            f"{per_node} / {c.on()} group_left () {c.agg('quantile', f'0.5, {per_node}')}", c.legend("kafka_node_id")
        ),
    )
    b.panel(
        "Request latency by broker (max)",
        "Maximum request latency of each client to each broker.",
        "timeseries",
        Query(c.agg("max", f"{lat_max}{sel}", "kafka_node_id"), c.legend("kafka_node_id")),
        unit="ms",
    )
    b.panel(
        "Request latency by broker, over the fleet",
        "Average request latency to each broker, averaged over the clients that talk to it: a broker slow for "
        "everyone rather than for one client.",
        "timeseries",
        Query(f"avg by (kafka_node_id) ({lat}{sel})", "broker {{kafka_node_id}}"),
        unit="ms",
    )


def _producers(c: Clients) -> Dashboard:
    b = Board(
        "kip714-producers",
        "kip714 / Kafka producers",
        "Kafka producers' own view, from the KIP-714 telemetry they push to kip714 (kip714 serve or proxy with "
        "--prometheus).",
        c,
    )
    conn_total = prom_name("org.apache.kafka.producer.connection.creation.total")
    _client_variable(b, conn_total)
    s = c.selector()
    throttle = prom_name("org.apache.kafka.producer.produce.throttle.time.avg")
    send = prom_name("org.apache.kafka.producer.record.send.total")
    err = prom_name("org.apache.kafka.producer.record.error.total")
    retry = prom_name("org.apache.kafka.producer.record.retry.total")
    b.row("Overview")
    b.panel(
        "Producers pushing",
        "Producer instances with live series.",
        "stat",
        Query(f"count({c.agg('count', conn_total + s)})", instant=True),
        width=6,
        height=4,
    )
    b.panel(
        "Producers throttled",
        "Producer instances whose average produce throttle time is above 0 ms now.",
        "stat",
        Query(f"count({c.agg('max', throttle + s)} > 0) or vector(0)", instant=True),
        width=6,
        height=4,
    )
    b.panel(
        "Records sent/s",
        "Records the producers send per second, over all of them.",
        "stat",
        Query(f"sum(rate({send}{s}[{R}]))", instant=True),
        unit="ops",
        width=6,
        height=4,
    )
    b.panel(
        "Record errors/s",
        "Records that failed to send per second, over all producers.",
        "stat",
        Query(f"sum(rate({err}{s}[{R}]))", instant=True),
        unit="ops",
        width=6,
        height=4,
    )
    _latency_rows(b, "producer")
    b.row("Queueing and throttling")
    for stat, what in (("avg", "Average"), ("max", "Maximum")):
        q = prom_name(f"org.apache.kafka.producer.record.queue.time.{stat}")
        b.panel(
            f"Record queue time ({stat})",
            f"{what} time a record waits in the producer's accumulator before it is sent (linger.ms, a full "
            "buffer, slow brokers).",
            "timeseries",
            Query(c.agg("max", q + s), c.legend()),
            unit="ms",
        )
    b.panel(
        "Produce throttle time (avg)",
        "Average time the brokers throttled the producer's requests (producer_byte_rate quota).",
        "timeseries",
        Query(c.agg("max", throttle + s), c.legend()),
        unit="ms",
    )
    b.panel(
        "Produce request latency (avg)",
        "Average latency of produce requests (librdkafka: produce requests only; Java: every request).",
        "timeseries",
        Query(c.agg("max", prom_name("org.apache.kafka.producer.request.latency.avg") + s), c.legend()),
        unit="ms",
    )
    b.row("Throughput, errors and retries")
    b.panel(
        "Records sent/s by client",
        "Records sent per second.",
        "timeseries",
        Query(c.agg("sum", f"rate({send}{s}[{R}])"), c.legend()),
        unit="ops",
    )
    b.panel(
        "Record errors and retries per record sent",
        "Records that failed (record.error.total) and retries (record.retry.total) per record sent (the "
        "KafkaProducerRecordErrors/Retries alerts fire above the rules' rates).",
        "timeseries",
        Query(
            f"{c.agg('sum', f'rate({err}{s}[{R}])')} / {c.agg('sum', f'rate({send}{s}[{R}])')}",
            c.legend() + " errors",
        ),
        Query(
            f"{c.agg('sum', f'rate({retry}{s}[{R}])')} / {c.agg('sum', f'rate({send}{s}[{R}])')}",
            c.legend() + " retries",
        ),
        unit="percentunit",
    )
    b.panel(
        "Batch size (avg)",
        "Average bytes per partition batch (small batches: raise linger.ms / batch.size).",
        "timeseries",
        Query(c.agg("max", prom_name("org.apache.kafka.producer.batch.size.avg") + s), c.legend()),
        unit="bytes",
    )
    b.panel(
        "Buffer available",
        "Bytes left in the producer's buffer.memory (near 0: send() blocks).",
        "timeseries",
        Query(c.agg("min", prom_name("org.apache.kafka.producer.buffer.available.bytes") + s), c.legend()),
        unit="bytes",
    )
    b.row("Connections")
    b.panel(
        "Connections opened/s",
        "New connections per second (a steady rate after start-up is churn: connections.max.idle.ms, "
        "auth failures, brokers closing connections).",
        "timeseries",
        Query(c.agg("max", prom_name("org.apache.kafka.producer.connection.creation.rate") + s), c.legend()),
        unit="ops",
    )
    return b.build()


# ------------------------------------------------------------------------------------------ consumers


def _consumers(c: Clients) -> Dashboard:
    b = Board(
        "kip714-consumers",
        "kip714 / Kafka consumers",
        "Kafka consumers' own view, from the KIP-714 telemetry they push to kip714.",
        c,
    )
    conn_total = prom_name("org.apache.kafka.consumer.connection.creation.total")
    _client_variable(b, conn_total)
    s = c.selector()
    assigned = prom_name("org.apache.kafka.consumer.coordinator.assigned.partitions")
    lag = prom_name("org.apache.kafka.consumer.fetch.manager.records.lag.max")
    b.row("Overview")
    b.panel(
        "Consumers pushing",
        "Consumer instances with live series.",
        "stat",
        Query(f"count({c.agg('count', conn_total + s)})", instant=True),
        width=6,
        height=4,
    )
    b.panel(
        "Consumer groups",
        "Consumer groups (the group_id resource label) with a member pushing.",
        "stat",
        Query(f"count(count by (group_id) ({assigned}{s}))", instant=True),
        width=6,
        height=4,
    )
    b.panel(
        "Partitions assigned",
        "Partitions assigned over all consumers.",
        "stat",
        Query(f"sum({assigned}{s})", instant=True),
        width=6,
        height=4,
    )
    b.panel(
        "Largest lag",
        "The largest records-lag-max over the consumers now.",
        "stat",
        Query(f"max({lag}{s})", instant=True),
        width=6,
        height=4,
    )
    _latency_rows(b, "consumer")
    b.row("Fetching and polling")
    for name, title, unit in (
        ("fetch.manager.fetch.latency.avg", "Fetch latency (avg)", "ms"),
        ("fetch.manager.fetch.latency.max", "Fetch latency (max)", "ms"),
        ("poll.idle.ratio.avg", "Poll idle ratio (avg)", "percentunit"),
    ):
        b.panel(
            title,
            "Fetch requests' latency (a fetch waits up to fetch.max.wait.ms when there is nothing to read)."
            if "fetch" in name
            else "Share of time poll() waits for records: near 1 the consumer is idle; near 0 the application's "
            "processing between polls is the bottleneck.",
            "timeseries",
            Query(c.agg("max", prom_name("org.apache.kafka.consumer." + name) + s), c.legend()),
            unit=unit,
        )
    b.panel(
        "Fetch throttle time (avg)",
        "Average time the brokers throttled the consumer's fetches (consumer_byte_rate quota).",
        "timeseries",
        Query(
            c.agg("max", prom_name("org.apache.kafka.consumer.fetch.manager.fetch.throttle.time.avg") + s), c.legend()
        ),
        unit="ms",
    )
    b.row("Lag")
    b.panel(
        "Records lag (max over partitions)",
        "The consumer's largest lag over its partitions (records-lag-max; the KafkaConsumerLagGrowing alert fires "
        "when it passes the rules' threshold and keeps growing).",
        "timeseries",
        Query(c.agg("max", lag + s), c.legend()),
    )
    b.panel(
        "Partitions assigned by group",
        "Partitions assigned to the members of each consumer group.",
        "timeseries",
        Query(f"sum by (group_id) ({assigned}{s})", "{{group_id}}"),
    )
    b.row("Commits and rebalances")
    for name, title in (
        ("coordinator.commit.latency.avg", "Commit latency (avg)"),
        ("coordinator.rebalance.latency.avg", "Rebalance latency (avg)"),
    ):
        b.panel(
            title,
            "Offset commit latency." if "commit" in name else "Average time a rebalance took.",
            "timeseries",
            Query(c.agg("max", prom_name("org.apache.kafka.consumer." + name) + s), c.legend()),
            unit="ms",
        )
    b.panel(
        "Time spent rebalancing",
        "Share of time spent in rebalances (rate of rebalance.latency.total, in ms per ms).",
        "timeseries",
        Query(
            c.agg("sum", f"rate({prom_name('org.apache.kafka.consumer.coordinator.rebalance.latency.total')}{s}[{R}])")
            + " / 1000",
            c.legend(),
        ),
        unit="percentunit",
    )
    b.panel(
        "Connections opened/s",
        "New connections per second.",
        "timeseries",
        Query(c.agg("max", prom_name("org.apache.kafka.consumer.connection.creation.rate") + s), c.legend()),
        unit="ops",
    )
    return b.build()


# ------------------------------------------------------------------------------------------ Kafka Streams


def _streams(c: Clients) -> Dashboard:
    b = Board(
        "kip714-streams",
        "kip714 / Kafka Streams applications",
        "Kafka Streams applications (4.0+) push their own metrics through KIP-714 (KIP-1076, KIP-1091, KIP-1221): "
        "client level through the application's admin client, thread and task level through each stream "
        "thread's main consumer. Applications are told apart by application_id (4.2+) and process_id.",
        c,
    )
    state = prom_name("org.apache.kafka.stream.client.state")
    alive = prom_name("org.apache.kafka.stream.alive.stream.threads")
    failed = prom_name("org.apache.kafka.stream.failed.stream.threads")
    t_state = prom_name("org.apache.kafka.stream.thread.thread.state")
    b.variable("application", "Application", f"label_values({state}, application_id)")
    app = '{application_id=~"$application"}'
    grp = '{group_id=~"$application"}'  # a stream thread's main consumer: group.id = application.id
    client_states = tuple(enumerate(STREAMS_CLIENT_STATES))
    thread_states = tuple(enumerate(STREAM_THREAD_STATES))
    b.row("Applications")
    b.panel(
        "Applications",
        "Kafka Streams applications (application_id) with an instance pushing.",
        "stat",
        Query(f"count(count by (application_id) ({state}))", instant=True),
        width=6,
        height=4,
    )
    b.panel(
        "Instances not RUNNING",
        "KafkaStreams instances whose client-state is not RUNNING (2) now.",
        "stat",
        Query(f"count({state}{app} != 2) or vector(0)", instant=True),
        width=6,
        height=4,
    )
    b.panel(
        "Alive stream threads",
        "Stream threads alive over all instances.",
        "stat",
        Query(f"sum({alive})", instant=True),
        width=6,
        height=4,
    )
    b.panel(
        "Stream threads failed",
        "Stream threads that failed over the dashboard's time range.",
        "stat",
        Query(f"sum(increase({failed}[$__range]))", instant=True),
        width=6,
        height=4,
    )
    b.panel(
        "Client state",
        "Each instance's KafkaStreams.State (client-state, KIP-1091: the enum's ordinal).",
        "state",
        Query(f"max by (application_id, process_id) ({state}{app})", "{{application_id}} {{process_id}}"),
        mappings=client_states,
        width=24,
    )
    b.panel(
        "Alive stream threads by instance",
        "Stream threads alive in each instance (alive-stream-threads; pushed by the admin client).",
        "timeseries",
        Query(c.agg("max", alive), c.legend()),
    )
    b.panel(
        "Stream threads failed/s",
        "Stream threads that died (failed-stream-threads; the KafkaStreamsThreadFailed alert).",
        "timeseries",
        Query(c.agg("sum", f"rate({failed}[{R}])"), c.legend()),
    )
    b.row("Stream threads")
    b.panel(
        "Thread state",
        "Each stream thread's StreamThread.State (thread-state, KIP-1091: the enum's ordinal; 4 RUNNING).",
        "state",
        Query(f"max by (thread_id) ({t_state}{grp})", "{{thread_id}}"),
        mappings=thread_states,
        width=24,
    )
    for name, title, unit, desc in (
        ("process.rate", "Records processed/s", "ops", "Records each stream thread processes per second."),
        ("poll.rate", "Polls/s", "ops", "poll() calls per second: 0 for a thread that is RUNNING means it is stuck."),
        (
            "process.ratio",
            "Time processing",
            "percentunit",
            "Share of time the thread spends processing (near 1 with no polls: blocked in a processor).",
        ),
        ("poll.ratio", "Time polling", "percentunit", "Share of time the thread spends in poll()."),
        ("commit.latency.avg", "Commit latency (avg)", "ms", "Average commit latency of each thread."),
        ("process.latency.avg", "Process latency (avg)", "ms", "Average latency of a process() call."),
    ):
        b.panel(
            title,
            desc,
            "timeseries",
            Query(f"max by (thread_id) ({prom_name('org.apache.kafka.stream.thread.' + name)}{grp})", "{{thread_id}}"),
            unit=unit,
        )
    b.panel(
        "Time blocked on Kafka",
        "Share of time each thread was blocked on Kafka (rate of blocked-time-ns-total, a gauge holding a total).",
        "timeseries",
        Query(
            f"max by (thread_id) (rate({prom_name('org.apache.kafka.stream.thread.blocked.time.ns.total')}{grp}[{R}]))"
            " / 1e9",
            "{{thread_id}}",
        ),
        unit="percentunit",
    )
    b.row("Tasks")
    b.panel(
        "Records left to restore",
        "Records each task still has to restore from its changelog (restore-remaining-records-total, exposed as "
        "a gauge; -1: not restoring).",
        "timeseries",
        Query(
            f"max by (task_id) ({prom_name('org.apache.kafka.stream.task.restore.remaining.records.total')}{grp}) >= 0",
            "{{task_id}}",
        ),
    )
    b.panel(
        "Dropped records/s",
        "Records each task dropped (deserialization, late or invalid records).",
        "timeseries",
        Query(
            f"sum by (task_id) (rate({prom_name('org.apache.kafka.stream.task.dropped.records.total')}{grp}[{R}]))",
            "{{task_id}}",
        ),
        unit="ops",
    )
    return b.build()


# ------------------------------------------------------------------------------------------ the fleet


def _fleet(c: Clients) -> Dashboard:
    b = Board(
        "kip714-fleet",
        "kip714 / Client fleet",
        "Who pushes KIP-714 telemetry to kip714: client software and versions, push errors, clients that went quiet.",
        c,
    )
    b.row("Who pushes")
    b.panel(
        "Client instances",
        "Client instances with live series at kip714, over every replica"
        + (
            ", each counted once however many replicas hold its series."
            if c.one_per_instance
            else " (summed: a client that moved is counted by both replicas until the old one expires it)."
        ),
        "stat",
        Query(c.instances(), instant=True),
        width=6,
        height=4,
    )
    b.panel(
        "Software versions",
        "Distinct client software names and versions (KIP-511) pushing.",
        "stat",
        Query(
            "count(count by (client_software_name, client_software_version) (kip714_client_instances))", instant=True
        ),
        width=6,
        height=4,
    )
    b.panel(
        "Went quiet",
        "Instances that stopped pushing without a terminating push, still within kip714's retention of that fact, "
        "and pushing to no replica now (a client that moved to another replica is not quiet).",
        "stat",
        Query(f"count({c.gone()}) or vector(0)", instant=True),
        width=6,
        height=4,
    )
    b.panel(
        "Push errors/s",
        "Pushes answered with an error code, per second.",
        "stat",
        Query(f'sum(rate(kip714_pushes_total{{error_code!="NONE"}}[{R}])) or vector(0)', instant=True),
        unit="ops",
        width=6,
        height=4,
    )
    b.panel(
        "Instances by software and version",
        "Live client instances by client software name and version, summed over the replicas (a client that "
        "moved is counted by both until the old replica expires it).",
        "timeseries",
        Query(
            "sum by (client_software_name, client_software_version) (kip714_client_instances)",
            "{{client_software_name}} {{client_software_version}}",
        ),
    )
    b.panel(
        "Instances by kind",
        "Producers, consumers and Kafka Streams instances pushing (a Streams application counts its admin client "
        "here, its stream threads' consumers under consumers).",
        "timeseries",
        Query(
            f"count({c.agg('count', prom_name('org.apache.kafka.producer.connection.creation.total'))})", "producers"
        ),
        Query(
            f"count({c.agg('count', prom_name('org.apache.kafka.consumer.connection.creation.total'))})", "consumers"
        ),
        Query(f"count({c.agg('count', prom_name('org.apache.kafka.stream.client.state'))})", "Kafka Streams"),
    )
    b.row("Pushes")
    b.panel(
        "Pushes/s by answer",
        "PushTelemetry requests per second by the error code they were answered with (NONE: accepted; "
        "THROTTLING_QUOTA_EXCEEDED: pushed early; UNKNOWN_SUBSCRIPTION_ID: after a subscription change).",
        "timeseries",
        Query(f"sum by (error_code) (rate(kip714_pushes_total[{R}]))", "{{error_code}}"),
        unit="ops",
    )
    b.panel(
        "Instances ended/s",
        "Instances whose series went away: after a terminating push (a clean close), or expired without one (also "
        "by the replica a client left for another one).",
        "timeseries",
        Query(f"sum(rate(kip714_instances_terminated_total[{R}]))", "terminated"),
        Query(f"sum(rate(kip714_instances_expired_total[{R}]))", "expired (no terminating push)"),
        unit="ops",
    )
    b.panel(
        "Longest since last push",
        "The client instances that pushed longest ago (seconds): a client well past its push interval has gone "
        "quiet; kip714 expires it after max(60 s, 3 × push interval).",
        "table",
        Query(f"topk(20, time() - {c.agg('max', LAST_PUSH)})", instant=True),
        unit="s",
    )
    b.panel(
        "Gone without a terminating push",
        "Instances kip714 expired because they stopped pushing without a terminating push (crashed, hung, or "
        "cut off), and when (the KafkaClientStoppedPushing alert); not those pushing to another replica now.",
        "table",
        Query(f"{c.gone()} * 1000", instant=True),
        unit="dateTimeAsIso",
    )
    _replicas_row(b)
    return b.build()


def _replicas_row(b: Board) -> None:
    """One line per replica (the ``replica`` label: ``kip714 proxy --replica-id``)."""
    b.row("Replicas")
    b.panel(
        "Replicas up",
        "Whether Prometheus scrapes each replica (up), by the replica each scrape target last named "
        "(kip714_build_info, remembered for an hour): a replica that stopped answering stays here as down.",
        "state",
        Query(
            f"max by (replica) (0 * {replica_targets('1h')} + on (job, instance) group_left () up)",
            "{{replica}}",
        ),
        mappings=((0, "down"), (1, "up")),
        width=24,
    )
    b.panel(
        "Client connections by replica",
        "Client connections open at each replica: a balancer that spreads clients evenly keeps these close.",
        "timeseries",
        Query("sum by (replica) (kip714_connections)", "{{replica}}"),
        width=8,
    )
    b.panel(
        "Pushes/s by replica",
        "PushTelemetry requests each replica answers per second, whatever the answer.",
        "timeseries",
        Query(f"sum by (replica) (rate(kip714_pushes_total[{R}]))", "{{replica}}"),
        unit="ops",
        width=8,
    )
    b.panel(
        "State topic lag by replica",
        "Records of the state topic (the subscriptions shared by the replicas) each replica has not applied yet "
        "(-1: the topic's leader does not answer it): other than 0 for long, that replica answers with older "
        "subscriptions than the others (the Kip714StateTopicLagging alert).",
        "timeseries",
        Query("max by (replica) (kip714_state_topic_lag_records)", "{{replica}}"),
        feature="state-topic",
        width=8,
    )


# ------------------------------------------------------------------------------------------ kip714 itself


def _self(c: Clients) -> Dashboard:
    b = Board(
        "kip714-self",
        "kip714 / kip714 itself",
        "kip714's own health: pushes by answer, data dropped, queues, the Prometheus exporter's series, the "
        "recording, OTLP forwarding and the proxy's upstream brokers.",
        c,
    )
    b.row("Pushes and drops")
    b.panel(
        "Pushes/s by error code",
        "PushTelemetry answers per second by error code.",
        "timeseries",
        Query(f"sum by (error_code) (rate(kip714_pushes_total[{R}]))", "{{error_code}}"),
        unit="ops",
    )
    b.panel(
        "Payloads and points dropped/s",
        "Accepted payloads never absorbed and data points not exposed, by reason (queue-full, undecodable, "
        "series-limit, invalid-value…); empty while nothing was ever dropped.",
        "timeseries",
        Query(f"sum by (reason) (rate(kip714_export_payloads_dropped_total[{R}]))", "payloads {{reason}}"),
        Query(f"sum by (reason) (rate(kip714_export_points_dropped_total[{R}]))", "points {{reason}}"),
        unit="ops",
    )
    b.panel(
        "Queues",
        "Items waiting in each sink's queue, as a share of its capacity where it is bounded (a full queue drops).",
        "timeseries",
        Query("max by (queue) (kip714_queue_depth / kip714_queue_capacity)", "{{queue}} (share of capacity)"),
        unit="percentunit",
    )
    b.panel(
        "Series exposed and the cap",
        "Time series each exporter (each replica) exposes and its --prometheus-max-series cap.",
        "timeseries",
        Query("sum by (instance, replica) (kip714_export_series)", "{{instance}} {{replica}}"),
        Query("max(kip714_export_series_limit)", "cap (of each)"),
    )
    b.row("Recording")
    b.panel(
        "Recording lag",
        "Age of the oldest recorded push not yet written (what a crash would lose without --record-sync).",
        "timeseries",
        Query("max(kip714_recording_lag_seconds)", "lag"),
        unit="s",
        feature="recording",
    )
    b.panel(
        "Rows written/s",
        "Push rows written to the recording, and rows lost to failed writes.",
        "timeseries",
        Query(f"sum(rate(kip714_recording_rows_total[{R}]))", "written"),
        Query(f"sum(rate(kip714_recording_rows_failed_total[{R}]))", "failed"),
        unit="ops",
        feature="recording",
    )
    b.row("OTLP forwarding")
    b.panel(
        "OTLP export requests/s by status",
        "Export requests to the OpenTelemetry collector by status.",
        "timeseries",
        Query(f"sum by (status) (rate(kip714_otlp_requests_total[{R}]))", "{{status}}"),
        unit="ops",
        feature="otlp",
    )
    b.panel(
        "OTLP payloads forwarded and dropped/s",
        "Payloads delivered to the collector, and dropped by reason.",
        "timeseries",
        Query(f"sum(rate(kip714_otlp_payloads_forwarded_total[{R}]))", "forwarded"),
        Query(f"sum by (reason) (rate(kip714_otlp_payloads_dropped_total[{R}]))", "dropped {{reason}}"),
        unit="ops",
        feature="otlp",
    )
    b.row("Connections and the cluster")
    b.panel(
        "Client connections open",
        "Client connections open at each kip714 endpoint (serve or proxy).",
        "timeseries",
        Query("sum by (instance, replica) (kip714_connections)", "{{instance}} {{replica}}"),
    )
    b.panel(
        "Upstream errors/s",
        "Failures toward the cluster's brokers by broker node id and reason (refused, timeout, tls, unreachable, "
        "closed, unknown-node; check-*: the readiness check of the bootstrap servers).",
        "timeseries",
        Query(f"sum by (node_id, reason) (rate(kip714_upstream_errors_total[{R}]))", "{{node_id}} {{reason}}"),
        unit="ops",
        feature="proxy",
    )
    b.panel(
        "Proxy traffic",
        "Bytes per second the proxy reads from its clients and from the cluster.",
        "timeseries",
        Query(f"sum by (direction) (rate(kip714_proxy_bytes_total[{R}]))", "{{direction}}"),
        unit="Bps",
        feature="proxy",
    )
    b.panel(
        "Proxy requests/s",
        "Client requests per second the proxy forwarded or answered, by Kafka API key.",
        "timeseries",
        Query(f"sum by (api_key) (rate(kip714_proxy_requests_total[{R}]))", "api {{api_key}}"),
        unit="ops",
        feature="proxy",
    )
    b.panel(
        "Cluster reachable",
        "1 when the cluster's bootstrap servers answered the proxy's last check (the proxy's /readyz).",
        "timeseries",
        Query("min by (instance, replica) (kip714_upstream_up)", "{{instance}} {{replica}}"),
        feature="proxy",
        min=0,
        max=1,
    )
    return b.build()
