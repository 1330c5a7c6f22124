"""OTLP names → Prometheus names, as the OpenTelemetry "Prometheus and OpenMetrics compatibility"
specification maps them (the behaviour of the collector's ``prometheusexporter`` with name normalisation,
i.e. ``pkg/translator/prometheus``).

Metric names (:func:`metric_name`):

* split into tokens at every character outside ``[A-Za-z0-9]`` and joined with ``_`` (invalid characters
  become ``_``, consecutive ``_`` collapse, leading/trailing ``_`` go);
* the unit, unless empty or containing ``{…}`` (an annotation: "a count of foo is unitless"), is mapped
  (``s`` → ``seconds``, ``By`` → ``bytes``, ``ms`` → ``milliseconds``, ``1`` → nothing, ``%`` →
  ``percent``, …; a ``foo/bar`` unit becomes ``foo_per_bar`` with ``bar`` mapped to ``second``,
  ``minute``, … ) and appended unless the name already contains that token;
* monotonic sums end in ``_total`` (a ``total`` token elsewhere moves to the end), gauges with unit
  ``1`` end in ``_ratio``;
* a name starting with a digit gets a leading ``_``.

Label names (:func:`label_name`): characters outside ``[A-Za-z0-9_]`` become ``_``, consecutive ``_``
collapse, a leading digit gets ``key_`` and a leading ``_`` gets ``key`` (so no label name starts with
``__``, which Prometheus reserves). Names that sanitise to the same label are merged by the spec's rule:
values joined with ``;`` in the lexicographic order of the original keys (:func:`merge_labels`).

The broker a per-node client metric is about (:func:`broker_node_labels`): Java clients tag it
``node_id="node-3"``, librdkafka ``node.id=3`` (exported as ``node_id="3"``), so one broker has two label
values. Every series with such an attribute also gets ``kafka_node_id`` (the broker's id, the same for
both) and ``kafka_node_role`` (``broker``; ``coordinator`` for Java's group-coordinator connection
``node-<2147483647 - id>`` and librdkafka's logical coordinator ``-1``; ``bootstrap`` for Java's bootstrap
connections ``node--1``, ``node--2``…); the client's own tag stays as it is. ``kafka_node_id`` is the broker
the *client* talked to, not the broker that received the push (that is the broker-added ``node_id``).

Only ASCII letters and digits are kept: the collector keeps any Unicode letter, which Prometheus' classic
name rules (and Prometheus 2.x) refuse.

This is hand-written because no Python library implements the OpenTelemetry → Prometheus name mapping
(prometheus_client only escapes names; the mapping lives in the collector's Go code).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

__all__ = [
    "UNIT_NAMES",
    "PER_UNIT_NAMES",
    "label_name",
    "merge_labels",
    "metric_name",
    "prometheus_unit",
    "BROKER_NODE_LABEL",
    "BROKER_ROLE_LABEL",
    "broker_node",
    "broker_node_labels",
]

#: UCUM unit → Prometheus unit word (the collector's table).
UNIT_NAMES = {
    "d": "days",
    "h": "hours",
    "min": "minutes",
    "s": "seconds",
    "ms": "milliseconds",
    "us": "microseconds",
    "ns": "nanoseconds",
    "By": "bytes",
    "KiBy": "kibibytes",
    "MiBy": "mebibytes",
    "GiBy": "gibibytes",
    "TiBy": "tibibytes",
    "KBy": "kilobytes",
    "MBy": "megabytes",
    "GBy": "gigabytes",
    "TBy": "terabytes",
    "m": "meters",
    "V": "volts",
    "A": "amperes",
    "J": "joules",
    "W": "watts",
    "g": "grams",
    "Cel": "celsius",
    "Hz": "hertz",
    "1": "",
    "%": "percent",
}
#: The denominator of a ``foo/bar`` unit → its word.
PER_UNIT_NAMES = {"s": "second", "m": "minute", "h": "hour", "d": "day", "w": "week", "mo": "month", "y": "year"}

_NON_ALNUM = re.compile(r"[^A-Za-z0-9]+")
_NON_LABEL = re.compile(r"[^A-Za-z0-9_]")
_UNDERSCORES = re.compile(r"__+")


def _tokens(text: str) -> list[str]:
    return [t for t in _NON_ALNUM.split(text) if t]


def _clean(text: str) -> str:
    return "_".join(_tokens(text))


@lru_cache(maxsize=65536)
def prometheus_unit(unit: str) -> str:
    """The unit suffix words a unit becomes ('' when it adds none): ``ms`` → ``milliseconds``,
    ``By/s`` → ``bytes_per_second``, ``{packets}`` → ``''``, ``1`` → ``''``."""
    parts = unit.split("/", 1)
    out = []
    main = parts[0].strip()
    if main and "{" not in main and "}" not in main:
        word = _clean(UNIT_NAMES.get(main, main))
        if word:
            out.append(word)
    if len(parts) > 1:
        per = parts[1].strip()
        if per and "{" not in per and "}" not in per:
            word = _clean(PER_UNIT_NAMES.get(per, per))
            if word:
                out += ["per", word]
    return "_".join(out)


@lru_cache(maxsize=65536)
def metric_name(name: str, unit: str, kind: str, monotonic: bool | None = None) -> str:
    """The Prometheus metric name of an OTLP metric (``kind``: gauge, sum, histogram,
    exponential_histogram, summary). ``''`` when nothing of the name survives (the caller drops it).

    For monotonic sums the result ends in ``_total`` (the sample name; prometheus_client's counter family
    is that name without ``_total``)."""
    tokens = _tokens(name)
    if not tokens:
        return ""
    parts = unit.split("/", 1)
    main = parts[0].strip()
    if main and "{" not in main and "}" not in main:
        word = _clean(UNIT_NAMES.get(main, main))
        if word and word not in tokens:
            tokens.append(word)
    if len(parts) > 1 and parts[1]:
        per = parts[1].strip()
        if per and "{" not in per and "}" not in per:
            word = _clean(PER_UNIT_NAMES.get(per, per))
            if word and word not in tokens:
                tokens += ["per", word]
    if kind == "sum" and monotonic:
        tokens = [t for t in tokens if t != "total"] + ["total"]
    if unit == "1" and kind == "gauge":
        tokens = [t for t in tokens if t != "ratio"] + ["ratio"]
    out = "_".join(tokens)
    if out[0].isdigit():
        out = "_" + out
    return out


@lru_cache(maxsize=65536)
def label_name(key: str) -> str:
    """A Prometheus label name for an attribute key ('' for an empty key: the caller drops it)."""
    if not key:
        return ""
    out = _UNDERSCORES.sub("_", _NON_LABEL.sub("_", key))
    if out[0].isdigit():
        out = "key_" + out
    elif out[0] == "_":
        out = "key" + out
    return out


def merge_labels(pairs: Iterable[tuple[str, str | None]]) -> tuple[dict[str, str], int]:
    """Label dict from ``(original key, value)`` pairs, sanitising the keys; keys that collide after
    sanitising get their values joined with ``;`` in the lexicographic order of the original keys.
    Returns the labels and how many pairs were dropped (keys that sanitise to nothing)."""
    groups: dict[str, list[tuple[str, str]]] = {}
    dropped = 0
    for key, value in pairs:
        name = label_name(key)
        if not name:
            dropped += 1
            continue
        groups.setdefault(name, []).append((key, "" if value is None else value))
    out = {}
    for name, items in groups.items():
        out[name] = items[0][1] if len(items) == 1 else ";".join(v for _, v in sorted(items))
    return out, dropped


#: The normalised label of the broker a per-node client metric is about, and its role.
BROKER_NODE_LABEL = "kafka_node_id"
BROKER_ROLE_LABEL = "kafka_node_role"
_JAVA_INT_MAX = 2**31 - 1
_NODE = re.compile(r"(node-)?(-?[0-9]{1,10})")


@lru_cache(maxsize=4096)
def broker_node(value: str) -> tuple[str, str] | None:
    """``(kafka_node_id, kafka_node_role)`` for a client's per-node tag value (Java ``node-3``, librdkafka
    ``3``), or None when it names no node: ``node-2147483646`` → ``("1", "coordinator")`` (Java's group
    coordinator connection, ``Integer.MAX_VALUE - id``), ``node--1`` → ``("-1", "bootstrap")``, librdkafka's
    ``-1`` → ``("-1", "coordinator")``."""
    m = _NODE.fullmatch(value.strip())
    if m is None:
        return None
    java, n = m.group(1) is not None, int(m.group(2))
    if n < 0:
        return str(n), "bootstrap" if java else "coordinator"
    if java and n > _JAVA_INT_MAX // 2:  # broker ids are far below 2^30: Integer.MAX_VALUE - broker id
        return str(_JAVA_INT_MAX - n), "coordinator"
    return str(n), "broker"


def broker_node_labels(attributes: Iterable[tuple[str, Any]]) -> list[tuple[str, str]]:
    """The ``kafka_node_id``/``kafka_node_role`` pairs for a data point's attributes (``(key, value)`` pairs):
    none unless an attribute whose key sanitises to ``node_id`` names a node."""
    for key, value in attributes:
        if value is not None and label_name(key) == "node_id":
            found = broker_node(str(value))
            if found is not None:
                return [(BROKER_NODE_LABEL, found[0]), (BROKER_ROLE_LABEL, found[1])]
    return []
