"""Known telemetry defects of Kafka clients that a subscription can trigger (``kip714 subscriptions lint``).

Each :class:`Defect` says which client software and versions have it, when it was fixed, where that is
written down, and which requested metrics trigger it (:meth:`Defect.triggered`). The versions are the
clients' own KIP-511 ``ClientSoftwareVersion``: librdkafka's is the part after ``rdkafka-`` in bindings'
versions (confluent-kafka-python sends ``2.5.0-rdkafka-2.5.0``), Confluent Platform's Java clients
(``7.6.0-ccs``) are mapped to the Apache Kafka release they carry (7.x → 3.x, 8.x → 4.x).

Not traced: confluent-kafka-python #2185, cited for the librdkafka 2.5.0 crash in issue 29, is in neither
that project's issues nor its history; its CHANGELOG (the 2.5.0 warning, the 2.5.3 fix) is cited instead.
KAFKA-19747's fix versions come from the branch history (the JIRA fixVersion was not checked).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..client.catalog import KAFKA_METRIC_PREFIX, LIBRDKAFKA_CONSUMER_METRICS, LIBRDKAFKA_PRODUCER_METRICS

__all__ = ["KNOWN_DEFECTS", "Defect", "family_version", "parse_version"]

Version = tuple[int, int, int]

_RDK_PRODUCER = tuple(KAFKA_METRIC_PREFIX + "producer." + n for n, _, _ in LIBRDKAFKA_PRODUCER_METRICS)
_RDK_CONSUMER = tuple(KAFKA_METRIC_PREFIX + "consumer." + n for n, _, _ in LIBRDKAFKA_CONSUMER_METRICS)


def parse_version(text: str) -> Version | None:
    """``2.10.1`` → (2, 10, 1); ``4.1.0-SNAPSHOT`` → (4, 1, 0); None when it does not start with a number."""
    m = re.match(r"\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?", text)
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0)


def family_version(name: str, version: str) -> tuple[str, Version] | None:
    """(``librdkafka`` or ``java``, the version that decides a defect) of a client's KIP-511 software name
    and version; None for software kip714 has no defect table for."""
    low_name, low_version = name.lower(), version.lower()
    if "rdkafka-" in low_version:
        v = parse_version(low_version.rsplit("rdkafka-", 1)[1])
        return ("librdkafka", v) if v else None
    if "rdkafka" in low_name:
        v = parse_version(version)
        return ("librdkafka", v) if v else None
    if name == "apache-kafka-java" or "kafka-java" in low_name:
        v = parse_version(version)
        if v is None:
            return None
        if low_version.split("-", 1)[-1].startswith("ccs") and v[0] in (7, 8):  # Confluent Platform → Apache Kafka
            v = (v[0] - 4, v[1], v[2])
        return "java", v
    return None


def _matches(requested: Sequence[str], names: Sequence[str]) -> list[str]:
    return [n for n in names if any(p == "*" or n.startswith(p) for p in requested)]


def _all(requested: Sequence[str]) -> bool:
    return any(p in ("*", "") for p in requested)


@dataclass(frozen=True)
class Defect:
    """A client telemetry defect: ``family`` (``librdkafka``/``java``), the affected version ranges
    (``[low, high)``), the fix, the source, and what triggers it (``trigger`` in words, ``triggered`` on the
    requested metrics of a subscription)."""

    id: str
    title: str
    family: str
    affected: tuple[tuple[Version, Version], ...]
    fixed_in: str
    source: str
    trigger: str
    test: Callable[[Sequence[str]], bool]
    severity: str = "error"

    def affects(self, family: str, version: Version) -> bool:
        return family == self.family and any(lo <= version < hi for lo, hi in self.affected)

    def triggered(self, requested: Sequence[str]) -> bool:
        """Whether a subscription requesting ``requested`` (after merging, as the broker sends them)
        triggers the defect in an affected client."""
        return bool(requested) and self.test(requested)


def _rdk_no_match(requested: Sequence[str]) -> bool:
    return not _all(requested) and not _matches(requested, _RDK_PRODUCER + _RDK_CONSUMER)


def _rdk_one_sided(requested: Sequence[str]) -> bool:
    if _all(requested):
        return False
    return bool(_matches(requested, _RDK_PRODUCER)) != bool(_matches(requested, _RDK_CONSUMER))


def _overlapping(requested: Sequence[str]) -> bool:
    ps = [p for p in requested if p != "*"]
    return any(i != j and ps[j].startswith(ps[i]) for i in range(len(ps)) for j in range(len(ps)))


def _large(requested: Sequence[str]) -> bool:
    return _all(requested) or any(
        p.startswith(KAFKA_METRIC_PREFIX + "stream") or KAFKA_METRIC_PREFIX.startswith(p) for p in requested
    )


def _streams(requested: Sequence[str]) -> bool:
    return _all(requested) or any(
        (KAFKA_METRIC_PREFIX + "stream.").startswith(p) or p.startswith(KAFKA_METRIC_PREFIX + "stream.")
        for p in requested
    )


#: The defects kip714 knows, with their sources.
KNOWN_DEFECTS: tuple[Defect, ...] = (
    Defect(
        "librdkafka#4833",
        "librdkafka aborts (assert) when a subscription requests metrics and none of them is one librdkafka has",
        "librdkafka",
        (((2, 5, 0), (2, 5, 3)),),
        "2.5.3",
        "librdkafka CHANGELOG v2.5.3 'Telemetry fixes' (PR #4826); confluent-kafka-python CHANGELOG 2.5.0 "
        "(warning) and 2.5.3 (fix)",
        "requested metrics that match none of librdkafka's (e.g. only Java names such as producer.record.error)",
        _rdk_no_match,
    ),
    Defect(
        "librdkafka#4912",
        "librdkafka sends a NULL payload, and the broker closes the connection on every push",
        "librdkafka",
        (((2, 5, 0), (2, 10, 1)),),
        "2.10.1",
        "librdkafka CHANGELOG v2.10.1 'Telemetry fixes' (#4912, issue #5106)",
        "requested metrics that match some of librdkafka's producer metrics but none of its consumer metrics, "
        "or the other way round (the client of the other kind has nothing to send)",
        _rdk_one_sided,
    ),
    Defect(
        "librdkafka#5104",
        "librdkafka pushes a metric twice when two requested prefixes overlap",
        "librdkafka",
        (((2, 5, 0), (2, 10, 1)),),
        "2.10.1",
        "librdkafka CHANGELOG v2.10.1 'Telemetry fixes' (#5104; also #5105, an out-of-bounds read of metric names)",
        "two requested prefixes where one starts with the other",
        _overlapping,
        "warning",
    ),
    Defect(
        "KAFKA-19747",
        "the Java client turns telemetry off until restart after any failed push (a request without an answer)",
        "java",
        (((3, 7, 0), (4, 0, 1)), ((4, 1, 0), (4, 1, 1))),
        "4.0.1, 4.1.1, 4.2.0 (per the branch history; the JIRA fixVersion was not checked)",
        "KAFKA-19747, apache/kafka PR #20661 (docs/conformance.md)",
        "any subscription that makes the client push: one push lost to a dropped connection or a timeout stops "
        "its telemetry for good",
        lambda requested: True,
        "warning",
    ),
    Defect(
        "KAFKA-21077",
        "the Java client ignores TelemetryMaxBytes: after TELEMETRY_TOO_LARGE it sends the same payload again every "
        "interval, forever",
        "java",
        (((0, 0, 0), (99, 0, 0)),),
        "not released (apache/kafka PR #23452, open)",
        "KAFKA-21077 (and KAFKA-21076: brokers 4.3.1+ answer a payload over telemetry.max.bytes decompressed with "
        "INVALID_RECORD; seen for every Kafka Streams stream-thread consumer)",
        "requesting every metric, or the Kafka Streams metrics, whose payloads can pass telemetry.max.bytes",
        _large,
        "warning",
    ),
    Defect(
        "KAFKA-19882",
        "Kafka Streams puts process_id on every client-level metric (alive/failed stream threads), not only on "
        "client-state and recording-level",
        "java",
        (((4, 0, 0), (4, 0, 2)), ((4, 1, 0), (4, 1, 2))),
        "4.0.2, 4.1.2, 4.2.0",
        "KAFKA-19882 (commits 65a1f267c5, 1647610736, bb95e3ab19)",
        "requesting the Kafka Streams client metrics (org.apache.kafka.stream.): their series carry an extra "
        "process_id label on these versions",
        _streams,
        "warning",
    ),
)
