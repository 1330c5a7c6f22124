"""Telemetry metric names and attribute keys, as Apache Kafka's Java client derives them.

KIP-714 clients name their metrics after Kafka's (group, name) pairs: the Java client's
``TelemetryMetricNamingConvention`` turns ``("connection-creation-rate", "producer-metrics")`` into
``org.apache.kafka.producer.connection.creation.rate``, and librdkafka hard-codes the same names. The
rule (prefix ``org.apache.kafka``)::

    name      = prefix + "." + clean_group(group) + "." + clean(name)
    clean(s)  = lowercase(s) with every "-" replaced by "."
    clean_group(g) = clean(g) with every occurrence of ".metrics" removed   (so ".metricsX" -> "X")

Tag keys become data-point attribute keys as ``lowercase(key)`` with every ``"-"`` replaced by
``"_"``; tag values are kept as they are, and the key ``client_id`` is dropped (Java's
``EXCLUDE_LABELS``: the broker knows the client id already).

Lowercasing. Java uses ``String.toLowerCase(Locale.ROOT)``; this module uses Python's
:meth:`str.lower`. Checked code point by code point against OpenJDK 17, the two agree on every
character Unicode 13 (Java 17's tables) knows, including the multi-character mapping of U+0130
(``"İ"`` → ``"i̇"``) and Greek final sigma in ordinary words. They can differ only

* for the 40 capital letters added in Unicode 14 (Python 3.11 lowercases them, JDK 17 does not; newer
  JDKs do, like Python), and
* for the context-dependent final sigma, where Java looks for word boundaries with its
  ``BreakIterator`` and Python applies the Unicode ``Final_Sigma`` rule: e.g. ``"A-Σ"`` is ``"a-ς"`` in
  Java and ``"a-σ"`` in Python.

ASCII (every real Kafka metric group, name and tag key) is exact. :func:`java_ascii_lower` is the
ASCII-only variant, for callers who would rather leave every non-ASCII character untouched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "DEFAULT_PREFIX",
    "EXCLUDE_LABELS",
    "clean_name",
    "clean_group",
    "java_ascii_lower",
    "telemetry_metric_name",
    "telemetry_attribute_key",
    "telemetry_attributes",
    "telemetry_metric_key",
]

#: The prefix of every Kafka client telemetry metric name (``TelemetryMetricNamingConvention``).
DEFAULT_PREFIX = "org.apache.kafka"

#: Attribute keys (after key conversion) that are never sent as data-point attributes.
EXCLUDE_LABELS = frozenset({"client_id"})

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def java_ascii_lower(s: str) -> str:
    """Lowercase only ``A``–``Z`` (every other character is kept as it is)."""
    return s.translate(_ASCII_LOWER)


def _lower(s: str) -> str:
    # str.lower() is Unicode default full lowercasing, as Java's toLowerCase(Locale.ROOT) is (see the
    # module docstring for the two corner cases where they can differ). ASCII strings take the exact path.
    return s.translate(_ASCII_LOWER) if s.isascii() else s.lower()


def clean_name(name: str) -> str:
    """Kafka's ``clean(name)``: lowercase, then every ``-`` becomes ``.``."""
    return _lower(name).replace("-", ".")


def clean_group(group: str) -> str:
    """Kafka's ``cleanGroup(group)``: :func:`clean_name`, then every ``.metrics`` is removed.

    The removal is one left-to-right pass over non-overlapping matches, as Java's ``replaceAll`` does,
    so text that comes together after a removal is not removed again (``"a..metricsmetrics"`` →
    ``"a.metrics"``).
    """
    return clean_name(group).replace(".metrics", "")


def telemetry_metric_name(group: str, name: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The telemetry name of Kafka metric ``name`` in metric group ``group``.

    >>> telemetry_metric_name("producer-metrics", "connection-creation-rate")
    'org.apache.kafka.producer.connection.creation.rate'
    >>> telemetry_metric_name("consumer-fetch-manager-metrics", "records-latency-max")
    'org.apache.kafka.consumer.fetch.manager.records.latency.max'

    The prefix is used as given (not cleaned). Note the argument order: group first, like the name reads
    (Kafka's own test helper takes ``(name, group)``).
    """
    if not isinstance(group, str) or not isinstance(name, str) or not isinstance(prefix, str):
        raise TypeError("group, name and prefix must be str")
    return f"{prefix}.{clean_group(group)}.{clean_name(name)}"


def telemetry_attribute_key(key: str) -> str:
    """A Kafka metric tag key as a telemetry attribute key: lowercase, every ``-`` becomes ``_``."""
    if not isinstance(key, str):
        raise TypeError("key must be str")
    return _lower(key).replace("-", "_")


def telemetry_attributes(
    tags: Mapping[str, Any] | Iterable[tuple[str, Any]] | None,
    exclude: Iterable[str] = EXCLUDE_LABELS,
) -> dict[str, Any]:
    """Kafka metric tags → data-point attributes: keys converted, values unchanged, ``client_id`` dropped.

    Order is kept. Two keys that convert to the same attribute key (``"a-b"`` and ``"a_b"``) keep the
    first one's position and the last one's value, as Java's ``LinkedHashMap.put`` does. ``exclude``
    names converted keys to drop (default :data:`EXCLUDE_LABELS`).
    """
    if tags is None:
        return {}
    items = tags.items() if isinstance(tags, Mapping) else tags
    excluded = frozenset(exclude)
    out: dict[str, Any] = {}
    for key, value in items:
        k = telemetry_attribute_key(key)
        if k not in excluded:
            out[k] = value
    return out


def telemetry_metric_key(
    group: str,
    name: str,
    tags: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None,
    prefix: str = DEFAULT_PREFIX,
) -> tuple[str, dict[str, Any]]:
    """``(telemetry name, data-point attributes)`` for a Kafka metric ``(group, name, tags)``.

    The pair is what :meth:`kip714.MetricsCollector.gauge` and friends take::

        collector.gauge(*telemetry_metric_key("producer-node-metrics", "request-latency-avg",
                                              {"client-id": "p-1", "node-id": "node-1"}))
        # -> "org.apache.kafka.producer.node.request.latency.avg", {"node_id": "node-1"}
    """
    return telemetry_metric_name(group, name, prefix), telemetry_attributes(tags)
