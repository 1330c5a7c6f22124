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

Command line: ``kip714 simulate`` (:mod:`kip714.cli.simulate`).

The package, one job per module: :mod:`.clients` (the simulated clients and their metric models),
:mod:`.stochastic` (the random processes behind the numbers), :mod:`.stats` (what a run did),
:mod:`.fleet` (the fleet and the in-process driver), :mod:`.tcp` (the TCP driver).
"""

from .clients import (
    CODECS,
    JAVA_CONSUMER_METRICS,
    JAVA_PRODUCER_METRICS,
    RDK_CONSUMER_METRICS,
    RDK_PRODUCER_METRICS,
    SOFTWARE_JAVA,
    SOFTWARE_LIBRDKAFKA,
    SOFTWARE_PRESETS,
    SimClient,
)
from .fleet import Fleet, parse_duration
from .stats import PROTOCOL_ERROR_CODES, FleetStats

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
