"""Client telemetry as a Prometheus scrape target: :class:`PrometheusExporter`.

A :class:`~kip714.TelemetryReceiver` on :class:`~kip714.broker.bounded_queue.BoundedQueueReceiver`:
accepted pushes are queued (bounded, never blocking the request path: a full queue drops the payload,
counts it and logs the episode once) and absorbed by a worker thread, many payloads at a time, with the
native Arrow decoder (:func:`kip714.decode_metrics_batch`). The state is exposed through
``prometheus_client`` (a custom collector; text format or OpenMetrics by content negotiation) on its
WSGI server, or on any registry it is registered with. ``docs/exporters.md`` documents the mapping.

Mapping (the OpenTelemetry "Prometheus and OpenMetrics compatibility" specification, names as
:mod:`kip714.sinks.prometheus.names`):

* gauge → gauge; monotonic sum → counter (``_total``); non-monotonic sum → gauge; histogram →
  histogram (``_bucket{le}``, ``_sum``, ``_count``); summary → summary (``{quantile}``, ``_sum``,
  ``_count``); exponential histogram → histogram with explicit buckets at the exponential bucket
  boundaries (see :class:`~kip714.sinks.prometheus.accumulators.ExpHistogram`).
* Temporality: every counter and histogram is kept as a cumulative accumulator per exposed series.
  Delta points add to it; cumulative points add their increase since the previous point of the same
  (client instance, series), or their whole value when the start time changed or the value fell (a
  client restart): an exposed counter never decreases, so ``rate()`` is never negative, also when
  several instances share one label set. A non-monotonic delta sum accumulates into a gauge (an
  up-down counter's current value). Cumulative exponential histograms and summaries are exposed as
  last received.
* Labels: the point's attributes, the resource attributes, ``otel_scope_name``/``otel_scope_version``
  (``scope_labels``) and the broker-added labels in ``labels`` (default ``client_id``,
  ``client_instance_id``). Keys that sanitise to the same label name are joined with ``;`` as the
  specification says (a broker label included); ``le`` on a histogram and ``quantile`` on a summary
  become ``key_le`` / ``key_quantile``.
* Life cycle: an instance's series disappear at the first scrape after its terminating push was
  absorbed (so its final values are exposed once), and when it pushed nothing for as long as the
  broker keeps it (``ReceiverContext.expiry_ms``: the instance table's ``max(60 s, 3 × push
  interval)``); without that context, ``max(expiry_floor_s, 3 × push interval)`` with the context's
  interval, otherwise the gap between its last two pushes.
* Limits: ``max_series`` exposed time series (a histogram counts its bucket lines), ``max_buckets`` per
  histogram point; everything not exposed is counted in ``kip714_export_points_dropped_total{reason}``.

Modules, in the order the data flows: :mod:`.names` (OTLP → Prometheus names), :mod:`.accumulators`
(histogram and summary values), :mod:`.store` (the series store, its absorbing and expiry),
:mod:`.exposition` (the renderers), :mod:`.http` (the WSGI application and server), :mod:`.exporter` (the
receiver wiring them).
"""

from __future__ import annotations

from ..labels import BROKER_LABELS, DEFAULT_LABELS, parse_labels
from .exporter import PrometheusExporter

__all__ = [
    "PrometheusExporter",
    "BROKER_LABELS",
    "DEFAULT_LABELS",
    "parse_labels",
]
