""":class:`PrometheusExporter`: the receiver that wires the Prometheus sink together — a bounded queue and
worker (:class:`~kip714.broker.bounded_queue.BoundedQueueReceiver`), the series store
(:mod:`.store`), the renderers (:mod:`.exposition`), the HTTP server (:mod:`.http`) and kip714's own
self-metrics."""

from __future__ import annotations

import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..._enums import INSTANCE_CACHE_EXPIRY_MS
from ..._extras import require
from ...broker.bounded_queue import BoundedQueueReceiver
from ...errors import InvalidConfigError
from ..labels import DEFAULT_LABELS, parse_labels
from .exposition import Collected, Exposition, encoded_text
from .http import scrape_response, start_server, stop_server
from .store import SeriesStore

__all__ = ["PrometheusExporter"]

log = logging.getLogger("kip714.prometheus")

#: Error code → its name (kip714_pushes_total's label), filled as codes are seen.
_CODE_NAMES: dict[int, str] = {}
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def _check_self_labels(labels: Mapping[str, str] | None) -> dict[str, str]:
    out = dict(labels or {})
    for name, value in out.items():
        if not isinstance(name, str) or not _LABEL_NAME.fullmatch(name) or name.startswith("__"):
            raise InvalidConfigError(f"self_labels: {name!r} is not a Prometheus label name")
        if not isinstance(value, str):
            raise InvalidConfigError(f"self_labels: the value of {name} is not a string: {value!r}")
    return out


def _code_name(code: int) -> str:
    from ..._enums import ErrorCode

    try:
        name = ErrorCode(code).name
    except ValueError:
        name = str(code)
    if len(_CODE_NAMES) < 1024:
        _CODE_NAMES[code] = name
    return name


class PrometheusExporter(BoundedQueueReceiver):
    """Exposes client telemetry for Prometheus to scrape (see :mod:`kip714.sinks.prometheus` for the mapping).

    ``exporter = PrometheusExporter(labels=("client_id",), max_series=50_000)``;
    ``broker.add_receiver(exporter)``; ``exporter.start_http_server("127.0.0.1", 9464)``, or register it
    on a ``prometheus_client`` registry (it is a collector: ``registry.register(exporter)``).

    Options: ``labels`` (broker-added labels put on every series), ``max_series`` (exposed time series
    at most), ``max_queue`` (payloads waiting to be absorbed; a full queue drops, counts ``queue-full`` and
    logs the episode once, the push is still accepted), ``batch``
    (payloads decoded per call), ``linger_s`` (how long the worker waits for a fuller batch before it
    absorbs a smaller one: a decode per push at a high rate pays pyarrow's fixed costs per push; default
    0.05), ``expiry_floor_s`` (60), ``scope_labels`` (``otel_scope_name`` /
    ``otel_scope_version``), ``max_buckets`` (per histogram point), ``background`` (False absorbs in the
    caller, for tests and tools), ``clock`` (seconds, monotonic), ``expired_retention_s`` (how long an
    instance that went silent without a terminating push stays in
    ``kip714_client_expired_timestamp_seconds``, 900), ``self_labels`` (labels put on kip714's own metrics,
    ``{"replica": "kip714-2"}``: ``kip714 proxy --replica-id``; never on the clients' series nor on the
    per-client families ``kip714_client_last_push_timestamp_seconds`` and
    ``kip714_client_expired_timestamp_seconds``, so that a client pushing to several replicas stays one
    client once the series of the replicas are aggregated)."""

    queue_name = "prometheus"
    dropped_metric = 'kip714_export_payloads_dropped_total{reason="queue-full"}'
    log = log

    def __init__(
        self,
        labels: Iterable[str] | str = DEFAULT_LABELS,
        max_series: int = 100_000,
        max_queue: int = 10_000,
        batch: int = 256,
        linger_s: float = 0.05,
        expiry_floor_s: float = INSTANCE_CACHE_EXPIRY_MS / 1000,
        scope_labels: bool = True,
        max_buckets: int = 160,
        background: bool = True,
        clock: Callable[[], float] = time.monotonic,
        expired_retention_s: float = 900.0,
        self_labels: Mapping[str, str] | None = None,
    ) -> None:
        require("prometheus", "PrometheusExporter")
        import numpy as np  # noqa: F401  (fail early: the absorb path is vectorised)
        import pyarrow  # noqa: F401

        self.clock = clock
        self.self_labels = _check_self_labels(self_labels)
        self._store = SeriesStore(
            parse_labels(labels),
            max_series,
            scope_labels,
            max_buckets,
            expiry_floor_s,
            clock,
            self._drop,
            expired_retention_s,
        )
        self._lock = self._store.lock
        self._exposition = Exposition(self._store)
        # counters (self-metrics) besides the store's and the queue's (payloads_dropped)
        self.push_codes: dict[str, int] = {}
        self._codes_lock = threading.Lock()  # push_codes
        self.scrapes = 0
        self._extra: list[Callable[[], Iterable[Any]]] = []
        self._queues: dict[str, tuple[Callable[[], int], int | None]] = {}
        self._http: tuple[Any, ...] | None = None
        self._next_expiry = clock() + 1.0
        super().__init__(
            max_queue=max_queue, batch=batch, background=background, thread_name="kip714-prometheus", linger_s=linger_s
        )

    # ------------------------------------------------------------------ the store's settings and counters

    labels = property(lambda self: self._store.labels, doc="The broker-added labels put on every series.")
    max_series = property(lambda self: self._store.max_series, doc="Exposed time series at most.")
    max_buckets = property(lambda self: self._store.max_buckets, doc="Buckets or quantiles per point at most.")
    scope_labels = property(lambda self: self._store.scope_labels, doc="Whether series carry the OTel scope.")
    expiry_floor_s = property(
        lambda self: self._store.expiry_floor_s, doc="Expiry floor for instances the broker gave no expiry for."
    )
    series_count = property(
        lambda self: self._store.series_count, doc="Time series exposed (histogram bucket lines included)."
    )
    dropped = property(lambda self: self._store.dropped, doc="Data points not exposed, by reason.")
    payloads_absorbed = property(lambda self: self._store.payloads_absorbed, doc="Payloads absorbed.")
    points_absorbed = property(lambda self: self._store.points_absorbed, doc="Data points absorbed.")
    series_refused = property(lambda self: self._store.series_refused, doc="New series refused at the cap.")
    expired = property(lambda self: self._store.expired, doc="Instances dropped for silence (no terminating push).")
    terminated = property(lambda self: self._store.terminated, doc="Instances dropped after their terminating push.")
    instances = property(lambda self: self._store.instances, doc="Client instances with series exposed.")
    _formats = property(lambda self: self._exposition.formats)  # tools/bench/groups/export.py: the first scrape

    # ------------------------------------------------------------------ receiver (request path)

    def _item(self, context: Any, payload: Any) -> tuple[Any, ...]:
        return (
            payload.client_instance_id_bytes,
            payload.labels,
            payload.data,
            payload.terminating,
            (getattr(context, "push_interval_ms", None), getattr(context, "expiry_ms", None)),
        )

    def export_batch(self, batch: Any) -> None:
        """Queue the accepted pushes of one read (a :class:`~kip714.broker.receivers.AcceptedBatch`): per push, a
        tuple of its columns; the labels are made on the worker, once per instance
        (:meth:`.store.SeriesStore.absorb`)."""
        node = batch.node_id
        self._enqueue_many(
            [
                (instance, (info, node), data, terminating, (interval, expiry))
                for instance, info, data, terminating, interval, expiry in zip(
                    batch.client_instance_ids,
                    batch.client_infos,
                    batch.payloads,
                    batch.terminating,
                    batch.push_intervals,
                    batch.expiries,
                )
            ]
        )

    def push_completed(self, context: Any, request: Any, error_code: int, received_at_ms: int) -> None:
        """Count every push by the error code it was answered with (``kip714_pushes_total``). Runs on the
        request path for every push: under a lock of its own, not the store's (which a batch being absorbed
        holds)."""
        name = _CODE_NAMES.get(error_code)
        if name is None:
            name = _code_name(error_code)
        with self._codes_lock:
            self.push_codes[name] = self.push_codes.get(name, 0) + 1

    def pushes_completed(self, batch: Any) -> None:
        """:meth:`push_completed` for the pushes of one read (a :class:`~kip714.broker.receivers.PushBatch`)."""
        counts: dict[int, int] = {}
        for code in batch.error_codes:
            counts[code] = counts.get(code, 0) + 1
        with self._codes_lock:
            for code, n in counts.items():
                name = _CODE_NAMES.get(code) or _code_name(code)
                self.push_codes[name] = self.push_codes.get(name, 0) + n

    # ------------------------------------------------------------------ worker

    def _process(self, items: list[Any]) -> None:
        self.absorb(items)  # (an exception counts the items as internal-error)

    def _tick(self) -> None:
        """Expire silent instances about once a second."""
        now = self.clock()
        if now >= self._next_expiry:
            self.expire(now)
            self._next_expiry = now + 1.0

    def absorb(self, items: list[Any]) -> None:
        """Absorb queued items ``(instance, labels, otlp bytes, terminating, timing)``
        (:meth:`.store.SeriesStore.absorb`); then render the new series' lines for the formats scraped so
        far, so that a scrape after many new series does not pay for them."""
        try:
            self._store.absorb(items)
        finally:
            if self._store.fresh:
                with self._lock:
                    self._exposition.prerender()

    def expire(self, now: float | None = None) -> int:
        """Drop instances silent for as long as the broker keeps them (``ReceiverContext.expiry_ms``: its
        instance table's ``max(60 s, 3 × push interval)``), or, when the broker did not say,
        ``max(expiry_floor_s, 3 × push interval)``; returns how many."""
        return self._store.expire(now)

    def close(self, timeout: float | None = 5.0) -> None:
        """Absorb what is queued (for up to ``timeout`` seconds), stop the worker and the HTTP server (if
        started)."""
        super().close(timeout)
        if self._http is not None:
            stop_server(*self._http)
            self._http = None

    # ------------------------------------------------------------------ self-metrics

    def watch_queue(self, name: str, depth: Callable[[], int], capacity: int | None = None) -> None:
        """Expose ``depth()`` as ``kip714_queue_depth{queue=name}`` (the recorder, the forwarder), and
        ``capacity`` (items at most, when bounded) as ``kip714_queue_capacity{queue=name}``."""
        self._queues[name] = (depth, capacity)

    def add_self_metrics(self, source: Callable[[], Iterable[Any]]) -> None:
        """Also yield the metric families ``source()`` returns on every scrape (another sink's counters)."""
        self._extra.append(source)

    def _self_metrics(self) -> tuple[list[Any], list[Any]]:
        """kip714's own metric families but the per-client ones (the exposition renders those from the
        store): those exposed before them, and those after."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily

        store = self._store
        pushes = CounterMetricFamily(
            "kip714_pushes", "PushTelemetry requests by the error code they were answered with", labels=["error_code"]
        )
        with self._codes_lock:
            codes = sorted(self.push_codes.items())
        for code, n in codes:
            pushes.add_metric([code], n)
        live = GaugeMetricFamily(
            "kip714_export_instances", "Client instances with series exposed", value=store.instances
        )
        series = GaugeMetricFamily(
            "kip714_export_series",
            "Time series exposed for clients (histogram bucket lines included)",
            value=store.series_count,
        )
        limit = GaugeMetricFamily(
            "kip714_export_series_limit", "The --prometheus-max-series cap", value=store.max_series
        )
        refused = CounterMetricFamily(
            "kip714_export_series_refused", "New series refused at the series cap", value=store.series_refused
        )
        payloads = CounterMetricFamily(
            "kip714_export_payloads",
            "Accepted payloads absorbed into the Prometheus state",
            value=store.payloads_absorbed,
        )
        points = CounterMetricFamily("kip714_export_points", "Data points absorbed", value=store.points_absorbed)
        dropped = CounterMetricFamily(
            "kip714_export_points_dropped", "Data points not exposed, by reason", labels=["reason"]
        )
        for reason, n in sorted(store.dropped.items()):
            dropped.add_metric([reason], n)
        pdropped = CounterMetricFamily(
            "kip714_export_payloads_dropped", "Accepted payloads never absorbed, by reason", labels=["reason"]
        )
        for reason, n in sorted(self.dropped_counts().items()):
            pdropped.add_metric([reason], n)
        depth = GaugeMetricFamily("kip714_queue_depth", "Items waiting in a sink's queue", labels=["queue"])
        depth.add_metric(["prometheus"], self.queue_depth)
        capacity = GaugeMetricFamily(
            "kip714_queue_capacity", "Items a bounded sink queue holds at most (more are dropped)", labels=["queue"]
        )
        capacity.add_metric(["prometheus"], self.max_queue)
        for name, (fn, cap) in self._queues.items():
            try:
                depth.add_metric([name], fn())
            except Exception:
                log.exception("queue depth of %s failed", name)
            if cap is not None:
                capacity.add_metric([name], cap)
        terminated = CounterMetricFamily(
            "kip714_instances_terminated",
            "Client instances whose series went away after their terminating push",
            value=store.terminated,
        )
        expired = CounterMetricFamily(
            "kip714_instances_expired",
            "Client instances whose series went away because they stopped pushing without a terminating push",
            value=store.expired,
        )
        software = GaugeMetricFamily(
            "kip714_client_instances",
            "Live client instances by client software name and version (KIP-511)",
            labels=["client_software_name", "client_software_version"],
        )
        for (name, version), n in sorted(store.software_counts().items()):
            software.add_metric([name, version], n)
        # the package is loaded (this module is in it); importing it from here would make a cycle
        version = str(getattr(sys.modules.get("kip714"), "__version__", "unknown"))
        build = InfoMetricFamily("kip714_build", "kip714's version", value={"version": version})
        before = [build, pushes, live, series, limit, refused, payloads, points, dropped, pdropped, depth, capacity]
        return before + [terminated, expired], [software]

    def _scraped(self, started: float) -> None:
        """After a scrape (under the lock): count it, and drop the instances whose terminating push was
        absorbed before it began (their final values have now been exposed once)."""
        self.scrapes += 1
        self._store.drop_terminated(started)

    def _extra_metrics(self) -> list[Any]:
        out: list[Any] = []
        for source in self._extra:
            try:
                out.extend(source())
            except Exception:
                log.exception("self-metrics source failed")
        return out

    def _labelled(self, families: list[Any]) -> list[Any]:
        """``families`` (kip714's own, never the per-client ones) with :attr:`self_labels` on every sample (a
        family's own label of the same name wins)."""
        labels = self.self_labels
        if labels:
            for family in families:
                family.samples = [s._replace(labels=dict(labels, **s.labels)) for s in family.samples]
        return families

    # ------------------------------------------------------------------ scrapes

    def collect(self) -> list[Any]:
        """The prometheus_client collector protocol: the clients' series, then kip714's own."""
        started = self.clock()
        with self._lock:
            out = self._exposition.families()
            before, after = self._self_metrics()
            per_client = self._exposition.per_client_families()
            self._scraped(started)
        after.extend(self._extra_metrics())
        return out + self._labelled(before) + per_client + self._labelled(after)

    def exposition(self, accept: str | None = None) -> tuple[bytes, str]:
        """One scrape: ``(body, content type)`` as prometheus_client negotiates it from ``accept``.

        The same text as ``prometheus_client``'s encoder over :meth:`collect` (byte for byte), made fast:
        each series' sample lines up to the value, and each family's ``# HELP``/``# TYPE`` lines, are
        rendered by that encoder once per format and kept while the series lives; a scrape renders only
        new series and formats the values (``prometheus_client.utils.floatToGoString``)."""
        from prometheus_client.exposition import choose_encoder

        encoder, content_type = choose_encoder(accept or "")
        try:
            return self._render(encoder, content_type), content_type
        except RuntimeError:  # the encoder wrote something unexpected (never seen): render every line
            log.exception("cached exposition failed; rendering every line this time")
            with self._lock:
                self._exposition.formats.pop(content_type, None)
            return encoder(Collected(self.collect())), content_type

    def _render(self, encoder: Callable[..., bytes], key: str) -> bytes:
        started = self.clock()
        with self._lock:
            parts = self._exposition.render(encoder, key)
            before, after = self._self_metrics()
            per_client = self._exposition.render_per_client(encoder, key)
            self._scraped(started)
        after.extend(self._extra_metrics())
        # in collect()'s order; OpenMetrics' # EOF once, at the end
        parts.append(encoded_text(encoder, self._labelled(before)))
        parts.extend(per_client)
        parts.append(encoder(Collected(self._labelled(after))).decode("utf-8"))
        return "".join(parts).encode("utf-8")

    def wsgi_app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        """A WSGI application serving the exposition (any path; ``?name[]=`` keeps the families named, by
        family or sample name, as prometheus_client's ``make_wsgi_app`` means it; gzip when accepted)."""
        return scrape_response(self, environ, start_response)

    def start_http_server(
        self,
        host: str = "127.0.0.1",
        port: int = 9464,
        certfile: str | None = None,
        keyfile: str | None = None,
        app: Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]] | None = None,
    ) -> int:
        """Serve ``/metrics`` (any path) on ``host:port`` with :meth:`wsgi_app` on prometheus_client's
        threading WSGI server; returns the port (0 picks a free one). ``certfile``/``keyfile`` serve HTTPS.
        ``app``: another WSGI application to serve instead (one that hands the scrapes to :meth:`wsgi_app`,
        such as :meth:`kip714.endpoint.health.Health.wsgi`)."""
        self._http = start_server(app or self.wsgi_app, host, port, certfile, keyfile)
        bound: int = self._http[0].server_port
        return bound

    @property
    def tls_context(self) -> Any:
        """The ``ssl.SSLContext`` of the HTTPS server (None: plain HTTP or not started); loading a new
        certificate chain into it takes effect at the next handshake."""
        return getattr(self._http[0], "ssl_context", None) if self._http is not None else None
