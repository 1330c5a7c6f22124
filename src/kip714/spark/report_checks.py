"""What ``kip714 report`` checks, as facts from the KIP-714 text: the standard producer and consumer
metrics and resource labels, the conformance checks with the rule each cites (:data:`CHECKS`), and the
insights (:data:`INSIGHTS`). :mod:`kip714.spark.report` computes them and :mod:`kip714.spark.report_html`
writes them; both read them here."""

from __future__ import annotations

from ..client.catalog import (
    KAFKA_METRIC_PREFIX,
    STANDARD_CONSUMER_METRICS,
    STANDARD_PRODUCER_METRICS,
    STANDARD_RESOURCE_LABELS,
    STREAMS_CLIENT_METRICS,
    STREAMS_THREAD_METRICS,
)
from ..client.naming import telemetry_metric_name

__all__ = [
    "CHECKS",
    "INSIGHTS",
    "KAFKA_METRIC_PREFIX",
    "REQUIRED_METRICS",
    "REQUIRED_METRICS_NOTE",
    "STANDARD_CONSUMER_METRICS",
    "STANDARD_PRODUCER_METRICS",
    "STANDARD_RESOURCE_LABELS",
    "STREAMS_CLIENT_EXPECTED",
    "STREAMS_THREAD_EXPECTED",
]

#: What a Kafka Streams application's admin client pushes of its own (KIP-1076/1091; exactly these four in
#: Kafka's KafkaStreamsTelemetryIntegrationTest): checked like the standard metrics, when subscribed.
STREAMS_CLIENT_EXPECTED = tuple(telemetry_metric_name("stream-metrics", n) for n, _, _ in STREAMS_CLIENT_METRICS)
#: What each stream thread's main consumer pushes at the thread level (INFO level: always recorded).
STREAMS_THREAD_EXPECTED = tuple(telemetry_metric_name("stream-thread-metrics", n) for n, _ in STREAMS_THREAD_METRICS)

#: The required metrics (bold in the KIP): cannot be established from the KIP text kip714 has.
REQUIRED_METRICS: tuple[str, ...] | None = None
REQUIRED_METRICS_NOTE = (
    "required metrics: cannot be established (KIP-714 marks them in bold; the KIP text "
    "kip714 was built from has lost that marking), so the standard set is checked"
)
#: check id → (what it tests, the KIP-714 rule it cites, the unit its counts are in)
CHECKS: dict[str, tuple[str, str, str]] = {
    "payload_decodes": (
        "payloads decode",
        "PushTelemetryRequest: Metrics is an OTLP MetricsData protobuf compressed with "
        "CompressionType (a broker answers INVALID_RECORD when it cannot decompress or parse it)",
        "pushes",
    ),
    "metric_naming": (
        "metric names follow the naming rule",
        "Metrics naming and format: prefix 'org.apache.kafka.', the "
        "group without '-metrics', every '-' replaced with '.'; other metrics under a reverse-domain "
        "namespace; standard metrics only under 'org.apache.kafka.'",
        "data points",
    ),
    "subscribed_only": (
        "only subscribed metrics are pushed",
        "Client behaviour: the client pushes the metrics matching the "
        "RequestedMetrics prefixes of its GetTelemetrySubscriptions response ('*' or an empty prefix: all)",
        "data points",
    ),
    "temporality": (
        "temporality matches DeltaTemporality",
        "Metric aggregation temporality: sums and histograms are "
        "DELTA when DeltaTemporality is true, CUMULATIVE when false",
        "data points",
    ),
    "start_time_stable": (
        "cumulative start times stay fixed",
        "Metric aggregation temporality / OTLP: a CUMULATIVE series keeps its StartTimeUnixNano from push to push",
        "series",
    ),
    "no_duplicate_series": (
        "no series twice in one payload",
        "OTLP MetricsData: one data point per series (metric name, attributes, resource) in a push",
        "series in a push",
    ),
    "standard_coverage": (
        "standard metrics covered",
        "Standard producer/consumer metrics: supporting clients should provide "
        "the standard metrics (the subscribed ones are checked); " + REQUIRED_METRICS_NOTE + "; a Kafka Streams "
        "application's admin client its four client-level metrics and each stream thread's main consumer its "
        "thread-level metrics (KIP-1076, KIP-1091)",
        "standard metrics",
    ),
    "resource_labels": (
        "standard resource labels",
        "Standard client resource labels: client_rack, group_id, "
        "group_instance_id, group_member_id (consumer), transactional_id (producer), spelled so",
        "instances",
    ),
    "push_interval": (
        "push interval kept",
        "PushIntervalMs: the client pushes every PushIntervalMs (a broker throttles "
        "earlier pushes); pushes much later than the interval are counted as gaps",
        "pushes",
    ),
    "compression_accepted": (
        "compression among the accepted types",
        "AcceptedCompressionTypes: the client compresses with a "
        "type from the list, or sends uncompressed (always when the list is empty)",
        "pushes",
    ),
    "terminating_push": (
        "terminating push before leaving",
        "Client termination: a client sends a final PushTelemetry with Terminating=true before it closes",
        "instances",
    ),
    "one_client_per_instance": (
        "one client per instance id",
        "ClientInstanceId: a UUID4 the broker generates for one client instance, "
        "which the client keeps for its lifetime whichever broker it talks to; pushes under one id from several "
        "clients (client id, software name and version) are one instance to the broker (one subscription, one "
        "push-interval clock) and cannot be told apart in the collected metrics",
        "instances",
    ),
    "error_responses": (
        "no error responses",
        "PushTelemetry error codes: a conforming client is not answered INVALID_REQUEST, "
        "INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE, TELEMETRY_TOO_LARGE, nor UNKNOWN_SUBSCRIPTION_ID twice in a "
        "row (it must fetch its new subscription); THROTTLING_QUOTA_EXCEEDED answers early pushes and is "
        "counted under push_interval",
        "pushes",
    ),
}
#: insight id → what it flags
INSIGHTS: dict[str, str] = {
    "slow_node": "request latency to one broker node far above the client's other nodes",
    "throttled": "the broker throttles the client (quota)",
    "small_batches": "a producer sends few records per request (tiny batches)",
    "retries_errors": "a producer's record error or retry rate is high",
    "connection_churn": "the client keeps opening connections after start-up",
    "consumer_lag": "a consumer's lag grows past a bound, or its poll() is idle nearly all the time",
    "streams_failed_threads": "stream threads of a Kafka Streams application failed",
    "streams_not_running": "a Kafka Streams application reached ERROR, stayed out of RUNNING (rebalancing) most of "
    "the time, or was left out of RUNNING",
    "streams_thread_blocked": "a Kafka Streams thread is RUNNING but stopped polling, busy processing: stuck",
}
