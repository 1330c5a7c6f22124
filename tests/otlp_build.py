"""Build OTLP MetricsData payloads for the exporter tests with the official opentelemetry-proto classes."""

from __future__ import annotations

from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2

DELTA, CUMULATIVE = 1, 2


def kv(key, value):
    v = common_pb2.AnyValue()
    if isinstance(value, bool):
        v.bool_value = value
    elif isinstance(value, int):
        v.int_value = value
    elif isinstance(value, float):
        v.double_value = value
    else:
        v.string_value = value
    return common_pb2.KeyValue(key=key, value=v)


def payload(metrics, resource=None, scope=("test-scope", "1.0")):
    """``metrics``: list of metrics_pb2.Metric; ``resource``: dict of attributes (None: no Resource)."""
    md = metrics_pb2.MetricsData()
    rm = md.resource_metrics.add()
    if resource is not None:
        rm.resource.attributes.extend(kv(k, v) for k, v in resource.items())
    sm = rm.scope_metrics.add()
    sm.scope.name, sm.scope.version = scope
    sm.metrics.extend(metrics)
    return md.SerializeToString()


def _point(p, value, attrs, start, time):
    if isinstance(value, int) and not isinstance(value, bool):
        p.as_int = value
    else:
        p.as_double = value
    p.attributes.extend(kv(k, v) for k, v in (attrs or {}).items())
    p.start_time_unix_nano, p.time_unix_nano = start, time


def gauge(name, value, attrs=None, unit="", start=1, time=2, description="a gauge"):
    m = metrics_pb2.Metric(name=name, unit=unit, description=description)
    _point(m.gauge.data_points.add(), value, attrs, start, time)
    return m


def sum_(name, value, attrs=None, unit="", monotonic=True, temporality=DELTA, start=1, time=2, description="a sum"):
    m = metrics_pb2.Metric(name=name, unit=unit, description=description)
    m.sum.is_monotonic = monotonic
    m.sum.aggregation_temporality = temporality
    _point(m.sum.data_points.add(), value, attrs, start, time)
    return m


def histogram(name, bounds, counts, total, attrs=None, unit="", temporality=DELTA, start=1, time=2):
    m = metrics_pb2.Metric(name=name, unit=unit, description="a histogram")
    m.histogram.aggregation_temporality = temporality
    p = m.histogram.data_points.add()
    p.explicit_bounds.extend(bounds)
    p.bucket_counts.extend(counts)
    p.count = sum(counts)
    p.sum = total
    p.attributes.extend(kv(k, v) for k, v in (attrs or {}).items())
    p.start_time_unix_nano, p.time_unix_nano = start, time
    return m


def exp_histogram(
    name,
    scale,
    offset,
    counts,
    zero=0,
    total=0.0,
    neg_offset=0,
    neg_counts=(),
    attrs=None,
    temporality=DELTA,
    start=1,
    time=2,
):
    m = metrics_pb2.Metric(name=name, unit="s", description="an exponential histogram")
    m.exponential_histogram.aggregation_temporality = temporality
    p = m.exponential_histogram.data_points.add()
    p.scale = scale
    p.zero_count = zero
    p.positive.offset = offset
    p.positive.bucket_counts.extend(counts)
    p.negative.offset = neg_offset
    p.negative.bucket_counts.extend(neg_counts)
    p.count = zero + sum(counts) + sum(neg_counts)
    p.sum = total
    p.attributes.extend(kv(k, v) for k, v in (attrs or {}).items())
    p.start_time_unix_nano, p.time_unix_nano = start, time
    return m


def summary(name, quantiles, count, total, attrs=None, start=1, time=2):
    m = metrics_pb2.Metric(name=name, unit="ms", description="a summary")
    p = m.summary.data_points.add()
    for q, v in quantiles:
        p.quantile_values.add(quantile=q, value=v)
    p.count, p.sum = count, total
    p.attributes.extend(kv(k, v) for k, v in (attrs or {}).items())
    p.start_time_unix_nano, p.time_unix_nano = start, time
    return m
