"""Client side: record metrics and encode them as the OTLP ``MetricsData`` payload KIP-714 clients push.

A :class:`MetricsCollector` holds the client's metrics (gauges, monotonic or up-down sums, explicit-bucket
histograms), each identified by its telemetry name and data-point attributes. :meth:`MetricsCollector.collect`
turns the ones a subscription selects into serialized ``opentelemetry.proto.metrics.v1.MetricsData``, built
with the official ``opentelemetry-proto`` classes, in the shape a real client sends:

``layout="java"`` (Apache Kafka's Java client, ``ClientTelemetryReporter``)
    one ``ResourceMetrics`` per data point, each carrying the shared ``Resource`` (always present, even with
    no attributes) and one ``ScopeMetrics`` (no scope) holding one ``Metric`` with one data point.
    Monotonic sums are ``as_double`` (Java's ``CumulativeSum`` is a double); gauges are ``as_int`` for
    Python ints and ``as_double`` otherwise. Gauges carry no start time. Timestamps have millisecond
    resolution.
``layout="librdkafka"``
    one ``ResourceMetrics`` (the ``Resource`` only when it has attributes) with one ``ScopeMetrics``
    (``scope.name``/``scope.version`` when given, e.g. ``"rdkafka#producer-1"`` / ``"2.16.0"``) holding one
    ``Metric`` per data point: several points of one metric (per broker, say) are several ``Metric``
    messages with the same name. Numbers keep their Python type (``as_int`` / ``as_double``). Gauges' start
    time is the previous collection. Timestamps have microsecond resolution.

Nothing is emitted for a metric that has no value yet (a gauge never set, a sum never added to, a
histogram never recorded, a callback returning ``None``): payloads are sparse. A collection that selects
nothing serializes to ``b""``, which is what both clients send.

Temporality (``collect(delta=...)``; the broker's ``DeltaTemporality``), as Java's ``KafkaMetricsCollector``:

* cumulative sums: value = the running total, ``start_time_unix_nano`` = when the metric was added;
* delta sums: value = total − total at the previous *delta* collection of that metric, start = that
  collection's time; the first delta collection reports the whole total with start = when the metric was
  added. Cumulative collections do not move the delta baseline. :meth:`MetricsCollector.reset` forgets
  every baseline (Java's ``metricsReset``, done when a new subscription flips ``DeltaTemporality``).
* histograms follow the same rule for ``count``, ``sum`` and ``bucket_counts``; a delta point's ``min``/
  ``max`` cover the observations since the previous delta collection (left out when there were none).

Example::

    c = MetricsCollector(layout="java", clock_ns=time.time_ns)
    c.set_resource(group_id="my-group")
    sent = c.counter("org.apache.kafka.consumer.coordinator.rebalance.latency.total")
    lag = c.gauge(*telemetry_metric_key("consumer-fetch-manager-metrics", "records-latency-max"))
    sent.add(3); lag.set(12.5)
    payload = c.collect(delta=True, selector=MetricSelector.from_requested(["*"]))
"""

from __future__ import annotations

import bisect
import itertools
import logging
import math
import numbers
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import EllipsisType
from typing import Any, NamedTuple, TypeVar

from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2
from opentelemetry.proto.resource.v1 import resource_pb2

__all__ = [
    "LAYOUTS",
    "RESOURCE_ATTRIBUTE_KEYS",
    "MetricSelector",
    "MetricsCollector",
    "Gauge",
    "Sum",
    "Histogram",
]

log = logging.getLogger(__name__)

LAYOUTS = ("java", "librdkafka")

#: The resource attributes Kafka clients set, in the order they are emitted by :meth:`MetricsCollector.set_resource`
#: (librdkafka names the member id ``member_id``; pass it through ``resource_attributes`` if you want that).
RESOURCE_ATTRIBUTE_KEYS = ("client_rack", "transactional_id", "group_id", "group_instance_id", "group_member_id")

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_UINT64_MAX = (1 << 64) - 1
_DELTA = metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
_CUMULATIVE = metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
_VALUE_TYPES = (None, "int", "double")
_M = TypeVar("_M", bound="_Metric")


# ---------------------------------------------------------------------------------------------------------
# RequestedMetrics → selector


class MetricSelector:
    """Which metric names a subscription wants (``ClientTelemetryUtils.getSelectorFromRequestedMetrics``).

    * ``None`` or ``[]`` → :attr:`NONE` (nothing; the client does not push at all);
    * exactly ``["*"]`` → :attr:`ALL`;
    * anything else → a name is selected when it starts with any of the strings. ``""`` therefore selects
      everything, and ``"*"`` next to other entries is an ordinary (literal) prefix.

    Instances are callables ``selector(name) -> bool``.
    """

    __slots__ = ("_kind", "_prefixes")

    ALL: MetricSelector
    NONE: MetricSelector

    def __init__(self, prefixes: Iterable[str] = (), *, _kind: str = "prefix") -> None:
        prefixes = tuple(prefixes)
        for p in prefixes:
            if not isinstance(p, str):
                raise TypeError(f"requested metric names must be str, not {type(p).__name__}")
        self._kind = _kind
        self._prefixes = prefixes

    @classmethod
    def from_requested(cls, requested_metrics: Sequence[str] | None) -> MetricSelector:
        """The selector for a GetTelemetrySubscriptions response's ``RequestedMetrics``."""
        if not requested_metrics:
            return cls.NONE
        requested = tuple(requested_metrics)
        if len(requested) == 1 and requested[0] == "*":
            return cls.ALL
        return cls(requested)

    @property
    def is_all(self) -> bool:
        """True only for the ``["*"]`` selector (a ``[""]`` prefix list also matches everything)."""
        return self._kind == "all"

    @property
    def is_none(self) -> bool:
        """True for the selector of an empty RequestedMetrics (the client does not push)."""
        return self._kind == "none"

    @property
    def prefixes(self) -> tuple[str, ...]:
        """The prefixes of a prefix selector (``()`` for :attr:`ALL` and :attr:`NONE`)."""
        return self._prefixes

    def __call__(self, name: str) -> bool:
        if self._kind == "all":
            return True
        if self._kind == "none":
            return False
        return any(name.startswith(p) for p in self._prefixes)

    matches = __call__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MetricSelector):
            return NotImplemented
        return self._kind == other._kind and self._prefixes == other._prefixes

    def __hash__(self) -> int:
        return hash((self._kind, self._prefixes))

    def __repr__(self) -> str:
        if self._kind != "prefix":
            return f"MetricSelector.{self._kind.upper()}"
        return f"MetricSelector({list(self._prefixes)!r})"


MetricSelector.ALL = MetricSelector(_kind="all")
MetricSelector.NONE = MetricSelector(_kind="none")


# ---------------------------------------------------------------------------------------------------------
# Metrics


# The plain types first: isinstance() against the numbers ABCs walks their registry, a tenth of a
# simulated fleet's encoding time when every value paid it.
def _is_number(v: object) -> bool:
    return type(v) is int or type(v) is float or isinstance(v, numbers.Real)


def _is_integral(v: object) -> bool:
    # not an isinstance() in place: typeshed does not register int as a numbers.Integral, so mypy would
    # take the test of an ``int`` parameter to be always false
    return type(v) is int or (type(v) is not float and isinstance(v, numbers.Integral))


def _check_number(v: object) -> None:
    if not _is_number(v):
        raise TypeError(f"metric values must be real numbers, not {type(v).__name__}")


def _set_number(point: Any, value: Any, value_type: str | None) -> None:
    """Fill a NumberDataPoint's value oneof."""
    if value_type == "double":
        point.as_double = float(value)
        return
    if value_type == "int":
        iv = int(value) if not isinstance(value, float) or math.isfinite(value) else None
        if iv is not None and _INT64_MIN <= iv <= _INT64_MAX:
            point.as_int = iv
        else:
            point.as_double = float(value)
        return
    # auto: Java's rule for Gauge values (Integer/Long → as_int, other numbers → as_double)
    if _is_integral(value) and _INT64_MIN <= int(value) <= _INT64_MAX:
        point.as_int = int(value)
    else:
        point.as_double = float(value)


def _any_value(target: common_pb2.AnyValue, value: Any) -> None:
    """Fill an OTLP AnyValue from a Python value."""
    if isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bool):
        target.bool_value = value
    elif _is_integral(value) and _INT64_MIN <= int(value) <= _INT64_MAX:
        target.int_value = int(value)
    elif type(value) is float or (isinstance(value, numbers.Real) and not _is_integral(value)):
        target.double_value = float(value)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        target.bytes_value = bytes(value)
    elif isinstance(value, (list, tuple)):
        arr = target.array_value
        arr.SetInParent()
        for item in value:
            _any_value(arr.values.add(), item)
    elif isinstance(value, Mapping):
        kvl = target.kvlist_value
        kvl.SetInParent()
        for k, v in value.items():
            kv = kvl.values.add()
            kv.key = str(k)
            _any_value(kv.value, v)
    else:
        target.string_value = str(value)


def _fill_attributes(repeated: Any, items: Iterable[tuple[str, Any]]) -> None:
    for key, value in items:
        if value is None:
            continue
        kv = repeated.add()
        kv.key = key
        _any_value(kv.value, value)


def _attr_items(attributes: Mapping[str, Any] | Iterable[tuple[str, Any]] | None) -> _Attributes:
    if attributes is None:
        return ()
    items = tuple(attributes.items() if isinstance(attributes, Mapping) else attributes)
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise TypeError("attributes must map str keys to values")
    return items


_Attributes = tuple[tuple[str, Any], ...]
#: What makes a metric distinct: its name and its attributes in any order.
_Identity = tuple[str, frozenset[tuple[str, Any]]]


def _identity(name: str, items: _Attributes) -> _Identity:
    # Like Java's MetricName: tag order does not make a different metric.
    try:
        return name, frozenset(items)
    except TypeError:  # unhashable values (lists, dicts): compare by their text
        return name, frozenset((k, repr(v)) for k, v in items)


class _Registration(NamedTuple):
    """What every metric is registered with (by :meth:`MetricsCollector._register`)."""

    collector: MetricsCollector
    name: str
    attributes: _Attributes
    description: str
    unit: str
    added_ns: int


class _Metric:
    """Common part of a recorded metric; created by :class:`MetricsCollector`, not directly."""

    kind = ""

    def __init__(self, reg: _Registration) -> None:
        self._collector = reg.collector
        self._lock = reg.collector._lock
        self.name = reg.name
        self.attributes: dict[str, Any] = dict(reg.attributes)
        #: The attributes as (key, value) pairs in the order they were given (how they are encoded).
        self.attribute_items = reg.attributes
        self.description = reg.description
        self.unit = reg.unit
        #: When the metric was added (the start time of cumulative points and of the first delta point).
        self.added_ns = reg.added_ns

    def reset_baseline(self) -> None:
        """Forget the delta baseline (Java's ``metricsReset``); metrics without one have nothing to do."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.attributes}>"


class _Number(_Metric):
    """A metric of one number (gauges and sums): set by the client, or read from ``value_fn`` at collection.
    Python ints encode as ``as_int``, other numbers as ``as_double`` unless ``value_type`` says otherwise."""

    def __init__(self, reg: _Registration, value_fn: Callable[[], Any] | None, value_type: str | None) -> None:
        super().__init__(reg)
        self._value: Any = None
        self.value_fn = value_fn
        self.value_type = value_type

    def set(self, value: Any) -> None:
        """Set the number (a sum's running total, for a total the client already keeps); ``None`` unsets it
        (it is then not emitted)."""
        if value is not None:
            _check_number(value)
        with self._lock:
            self._value = value

    @property
    def value(self) -> Any:
        """The number the next collection would report (calls ``value_fn`` if there is one); a sum's is its
        running total (the cumulative value)."""
        return self.value_fn() if self.value_fn is not None else self._value


class Gauge(_Number):
    """The latest value of something (OTLP Gauge); a callback (``value_fn``) is read at collection."""

    kind = "gauge"


class Sum(_Number):
    """A running total (OTLP Sum): a monotonic counter (Java's ``CumulativeSum``/``CumulativeCount``/
    ``WindowedCount``) or, with ``monotonic=False``, an up-down sum. Delta points are differences between
    collections (see the module docstring)."""

    kind = "sum"

    def __init__(
        self, reg: _Registration, value_fn: Callable[[], Any] | None, value_type: str | None, monotonic: bool
    ) -> None:
        super().__init__(reg, value_fn, value_type)
        self.monotonic = bool(monotonic)
        self._last: tuple[Any, int] | None = None  # (total, time) at the previous delta collection

    def add(self, amount: Any = 1) -> None:
        """Add ``amount`` (must not be negative for a monotonic sum)."""
        _check_number(amount)
        if self.monotonic and amount < 0:
            raise ValueError("a monotonic sum cannot decrease")
        with self._lock:
            self._value = amount if self._value is None else self._value + amount

    def take(self, now: int, delta: bool) -> tuple[Any, int] | None:
        """``(value, start time)`` of the point a collection at ``now`` reports, or ``None`` when there is no
        number to report. A delta collection moves the baseline to ``now``. Call under the collector's lock."""
        total = self.value
        if total is None or not _is_number(total):
            return None
        if not delta:
            return total, self.added_ns
        if self._last is None:
            value, start = total, self.added_ns
        else:
            value, start = total - self._last[0], self._last[1]
        self._last = (total, now)
        return value, start

    def reset_baseline(self) -> None:
        self._last = None


class Histogram(_Metric):
    """An explicit-bucket histogram (OTLP Histogram). ``boundaries`` are the sorted upper bounds; bucket
    ``i`` counts values in ``(boundaries[i-1], boundaries[i]]`` and the last bucket values above the last
    bound."""

    kind = "histogram"

    def __init__(self, reg: _Registration, boundaries: Sequence[float]) -> None:
        super().__init__(reg)
        bounds = tuple(float(b) for b in boundaries)
        if any(math.isnan(b) for b in bounds) or any(a >= b for a, b in itertools.pairwise(bounds)):
            raise ValueError("histogram boundaries must be strictly increasing numbers")
        self.boundaries = bounds
        self._counts = [0] * (len(bounds) + 1)
        self._count = 0
        self._sum = 0.0
        self._min = math.inf
        self._max = -math.inf
        self._imin = math.inf  # since the previous delta collection
        self._imax = -math.inf
        self._last: tuple[list[int], int, float, int] | None = None  # (counts, count, sum, time)

    def record(self, value: Any, count: int = 1) -> None:
        """Record ``value`` (``count`` times)."""
        _check_number(value)
        if not _is_integral(count) or count < 1:
            raise ValueError("count must be a positive integer")
        v = float(value)
        if math.isnan(v):
            raise ValueError("cannot record NaN in a histogram")
        with self._lock:
            self._counts[bisect.bisect_left(self.boundaries, v)] += count
            self._count += count
            self._sum += v * count
            self._min = min(self._min, v)
            self._max = max(self._max, v)
            self._imin = min(self._imin, v)
            self._imax = max(self._imax, v)

    @property
    def count(self) -> int:
        return self._count

    @property
    def sum(self) -> float:
        return self._sum

    def take(self, now: int, delta: bool) -> tuple[list[int], int, float, int, float, float] | None:
        """``(bucket counts, count, sum, start time, min, max)`` of the point a collection at ``now`` reports,
        or ``None`` when nothing was ever recorded. A delta collection moves the baseline to ``now``. Call
        under the collector's lock."""
        if self._count == 0 and self._last is None:
            return None
        if not delta:
            return list(self._counts), self._count, self._sum, self.added_ns, self._min, self._max
        if self._last is None:
            counts, count, total, start = list(self._counts), self._count, self._sum, self.added_ns
        else:
            lc, ln, ls, start = self._last
            counts = [a - b for a, b in zip(self._counts, lc)]
            count, total = self._count - ln, self._sum - ls
        lo, hi = self._imin, self._imax
        self._last = (list(self._counts), self._count, self._sum, now)
        self._imin, self._imax = math.inf, -math.inf
        return counts, count, total, start, lo, hi

    def reset_baseline(self) -> None:
        self._last = None
        self._imin, self._imax = self._min, self._max


# ---------------------------------------------------------------------------------------------------------
# Collector


class MetricsCollector:
    """The metrics a client records, and the OTLP payload encoder (see the module docstring).

    ``clock_ns`` gives Unix-epoch nanoseconds (default :func:`time.time_ns`); it timestamps added metrics
    and collections without an explicit ``now_ns``. ``timestamp_resolution_ns`` truncates every emitted
    timestamp to a multiple of it (default 1 ms for ``layout="java"``, 1 µs for ``"librdkafka"``; 1 keeps
    nanoseconds). ``resource_attributes`` are the ``Resource`` attributes (``None`` values are left out).
    ``sum_value_type`` is how sums encode when a metric does not say: ``"double"`` (Java), ``"int"`` or
    ``None`` (by Python type); the default follows the layout.
    """

    def __init__(
        self,
        *,
        layout: str = "java",
        resource_attributes: Mapping[str, Any] | None = None,
        scope_name: str = "",
        scope_version: str = "",
        clock_ns: Callable[[], int] = time.time_ns,
        timestamp_resolution_ns: int | None = None,
        sum_value_type: str | EllipsisType | None = ...,
    ) -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
        self.layout = layout
        if timestamp_resolution_ns is None:
            timestamp_resolution_ns = 1_000_000 if layout == "java" else 1_000
        if not isinstance(timestamp_resolution_ns, int) or timestamp_resolution_ns < 1:
            raise ValueError("timestamp_resolution_ns must be a positive int")
        self.timestamp_resolution_ns = timestamp_resolution_ns
        if sum_value_type is ...:
            sum_value_type = "double" if layout == "java" else None
        if sum_value_type not in _VALUE_TYPES:
            raise ValueError(f"value types are {_VALUE_TYPES}")
        self.sum_value_type = sum_value_type
        self.scope_name = scope_name
        self.scope_version = scope_version
        self._clock_ns = clock_ns
        self._lock = threading.RLock()
        self._metrics: dict[_Identity, _Metric] = {}
        self._resource: dict[str, Any] = {}
        if resource_attributes:
            for k, v in resource_attributes.items():
                self.set_resource_attribute(k, v)
        self._last_collect_ns = self._now(None)

    # -- resource ----------------------------------------------------------------------------------------

    @property
    def resource_attributes(self) -> dict[str, Any]:
        """A copy of the current resource attributes."""
        with self._lock:
            return dict(self._resource)

    def set_resource_attribute(self, key: str, value: Any) -> None:
        """Set (or, with ``None``, remove) one resource attribute."""
        if not isinstance(key, str):
            raise TypeError("resource attribute keys must be str")
        with self._lock:
            if value is None:
                self._resource.pop(key, None)
            else:
                self._resource[key] = value

    def set_resource(
        self,
        *,
        client_rack: str | None = None,
        transactional_id: str | None = None,
        group_id: str | None = None,
        group_instance_id: str | None = None,
        group_member_id: str | None = None,
    ) -> None:
        """Set the Kafka client resource attributes; only the ones given (not ``None``) are set, in the
        Java client's key names and order. Existing other attributes are kept."""
        given = {
            "client_rack": client_rack,
            "transactional_id": transactional_id,
            "group_id": group_id,
            "group_instance_id": group_instance_id,
            "group_member_id": group_member_id,
        }
        with self._lock:
            for key in RESOURCE_ATTRIBUTE_KEYS:
                if given[key] is not None:
                    self._resource[key] = str(given[key])

    # -- registering metrics -----------------------------------------------------------------------------

    def _now(self, now_ns: int | None) -> int:
        t = int(self._clock_ns() if now_ns is None else now_ns)
        if t < 0 or t > _UINT64_MAX:
            raise ValueError("timestamps must be Unix-epoch nanoseconds in 0..2**64-1")
        return t - t % self.timestamp_resolution_ns

    def _register(
        self,
        cls: type[_M],
        name: str,
        attributes: Mapping[str, Any] | Iterable[tuple[str, Any]] | None,
        kind_args: dict[str, Any],
        description: str,
        unit: str,
        added_ns: int | None,
    ) -> _M:
        if not isinstance(name, str) or not name:
            raise ValueError("a metric needs a non-empty str name")
        items = _attr_items(attributes)
        ident = _identity(name, items)
        with self._lock:
            existing = self._metrics.get(ident)
            if existing is not None:
                if type(existing) is not cls:
                    raise ValueError(f"{name} {dict(items)} is already registered as a {existing.kind}")
                return existing
            metric = cls(_Registration(self, name, items, description, unit, self._now(added_ns)), **kind_args)
            self._metrics[ident] = metric
            return metric

    def gauge(
        self,
        name: str,
        attributes: Mapping[str, Any] | None = None,
        *,
        description: str = "",
        unit: str = "",
        value_fn: Callable[[], Any] | None = None,
        value_type: str | None = None,
        added_ns: int | None = None,
    ) -> Gauge:
        """The gauge ``name`` with these data-point attributes (created on first use)."""
        if value_type not in _VALUE_TYPES:
            raise ValueError(f"value types are {_VALUE_TYPES}")
        return self._register(
            Gauge, name, attributes, {"value_fn": value_fn, "value_type": value_type}, description, unit, added_ns
        )

    def counter(
        self,
        name: str,
        attributes: Mapping[str, Any] | None = None,
        *,
        monotonic: bool = True,
        description: str = "",
        unit: str = "",
        value_fn: Callable[[], Any] | None = None,
        value_type: str | EllipsisType | None = ...,
        added_ns: int | None = None,
    ) -> Sum:
        """The sum ``name`` with these attributes (created on first use). ``value_fn``, if given, returns the
        running total at collection time. ``value_type`` defaults to the collector's ``sum_value_type``."""
        if value_type is ...:
            value_type = self.sum_value_type
        if value_type not in _VALUE_TYPES:
            raise ValueError(f"value types are {_VALUE_TYPES}")
        return self._register(
            Sum,
            name,
            attributes,
            {"value_fn": value_fn, "value_type": value_type, "monotonic": monotonic},
            description,
            unit,
            added_ns,
        )

    def histogram(
        self,
        name: str,
        boundaries: Sequence[float],
        attributes: Mapping[str, Any] | None = None,
        *,
        description: str = "",
        unit: str = "",
        added_ns: int | None = None,
    ) -> Histogram:
        """The explicit-bucket histogram ``name`` with these attributes (created on first use)."""
        return self._register(Histogram, name, attributes, {"boundaries": boundaries}, description, unit, added_ns)

    def get(self, name: str, attributes: Mapping[str, Any] | None = None) -> _Metric | None:
        """The registered metric, or ``None``."""
        with self._lock:
            return self._metrics.get(_identity(name, _attr_items(attributes)))

    def remove(self, name: str, attributes: Mapping[str, Any] | None = None) -> bool:
        """Forget a metric (Java's ``metricRemoval``); True if it was registered."""
        with self._lock:
            return self._metrics.pop(_identity(name, _attr_items(attributes)), None) is not None

    def __iter__(self) -> Iterator[_Metric]:
        with self._lock:
            return iter(list(self._metrics.values()))

    def __len__(self) -> int:
        return len(self._metrics)

    def reset(self) -> None:
        """Forget every delta baseline (Java's ``metricsReset``): the next delta collection of each metric
        reports everything since it was added."""
        with self._lock:
            for m in self._metrics.values():
                m.reset_baseline()

    # -- collecting --------------------------------------------------------------------------------------

    def collect(
        self,
        now_ns: int | None = None,
        delta: bool = True,
        selector: MetricSelector | Callable[[str], bool] | None = None,
    ) -> bytes:
        """Serialized ``MetricsData`` for the metrics ``selector`` selects (default: all), at ``now_ns``
        (default: the clock). Delta collections move the delta baselines of the metrics they emit."""
        # (protobuf's Message has no type information here: say what SerializeToString returns)
        payload: bytes = self.collect_message(now_ns, delta, selector).SerializeToString()
        return payload

    def collect_message(
        self,
        now_ns: int | None = None,
        delta: bool = True,
        selector: MetricSelector | Callable[[str], bool] | None = None,
    ) -> metrics_pb2.MetricsData:
        """Like :meth:`collect` but returns the ``MetricsData`` message."""
        if selector is None:
            selector = MetricSelector.ALL
        with self._lock:
            now = self._now(now_ns)
            previous = self._last_collect_ns
            metrics: list[metrics_pb2.Metric] = []
            for metric in list(self._metrics.values()):
                if not selector(metric.name):
                    continue
                try:
                    out = self._point(metric, now, previous, bool(delta))
                except Exception:  # a callback failed: skip that metric, keep the payload
                    log.warning("telemetry metric %s could not be read; skipped", metric.name, exc_info=True)
                    continue
                if out is not None:
                    metrics.append(out)
            self._last_collect_ns = now
            return self._assemble(metrics)

    def _new_metric(self, metric: _Metric) -> metrics_pb2.Metric:
        m = metrics_pb2.Metric()
        m.name = metric.name
        if metric.description:
            m.description = metric.description
        if metric.unit:
            m.unit = metric.unit
        return m

    def _point(self, metric: _Metric, now: int, previous: int, delta: bool) -> metrics_pb2.Metric | None:
        if isinstance(metric, Gauge):
            value = metric.value
            if value is None or not _is_number(value):
                return None  # Java skips non-number gauge values
            m = self._new_metric(metric)
            p = m.gauge.data_points.add()
            if self.layout == "librdkafka":
                p.start_time_unix_nano = previous
            p.time_unix_nano = now
            _fill_attributes(p.attributes, metric.attribute_items)
            _set_number(p, value, metric.value_type)
            return m

        if isinstance(metric, Sum):
            taken = metric.take(now, delta)
            if taken is None:
                return None
            value, start = taken
            m = self._new_metric(metric)
            s = m.sum
            s.is_monotonic = metric.monotonic
            s.aggregation_temporality = _DELTA if delta else _CUMULATIVE
            p = s.data_points.add()
            p.start_time_unix_nano = start
            p.time_unix_nano = now
            _fill_attributes(p.attributes, metric.attribute_items)
            _set_number(p, value, metric.value_type)
            return m

        if isinstance(metric, Histogram):
            point = metric.take(now, delta)
            if point is None:
                return None
            counts, count, total, start, lo, hi = point
            m = self._new_metric(metric)
            h = m.histogram
            h.aggregation_temporality = _DELTA if delta else _CUMULATIVE
            p = h.data_points.add()
            p.start_time_unix_nano = start
            p.time_unix_nano = now
            _fill_attributes(p.attributes, metric.attribute_items)
            p.count = count
            p.sum = total
            p.bucket_counts.extend(counts)
            p.explicit_bounds.extend(metric.boundaries)
            if count > 0 and lo <= hi:
                p.min = lo
                p.max = hi
            return m

        raise TypeError(f"unknown metric kind {type(metric).__name__}")  # pragma: no cover

    def _assemble(self, metrics: list[metrics_pb2.Metric]) -> metrics_pb2.MetricsData:
        data = metrics_pb2.MetricsData()
        if not metrics:
            return data
        resource = resource_pb2.Resource()
        _fill_attributes(resource.attributes, self._resource.items())
        has_scope = bool(self.scope_name or self.scope_version)
        scope = common_pb2.InstrumentationScope(name=self.scope_name, version=self.scope_version)
        if self.layout == "java":
            for m in metrics:
                rm = data.resource_metrics.add()
                rm.resource.CopyFrom(resource)
                rm.resource.SetInParent()  # Java always sets the Resource, even an empty one
                sm = rm.scope_metrics.add()
                if has_scope:
                    sm.scope.CopyFrom(scope)
                sm.metrics.append(m)
        else:
            rm = data.resource_metrics.add()
            if len(resource.attributes):
                rm.resource.CopyFrom(resource)
            sm = rm.scope_metrics.add()
            if has_scope:
                sm.scope.CopyFrom(scope)
            sm.metrics.extend(metrics)
        return data
