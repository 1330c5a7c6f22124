"""Forwarding client telemetry to an OpenTelemetry collector: :class:`OtlpForwarder` (OTLP/HTTP, protobuf).

A :class:`~kip714.TelemetryReceiver` on :class:`~kip714.broker.bounded_queue.BoundedQueueReceiver`: on the
request path an accepted payload is only appended to a bounded queue (a full queue drops it and counts
``queue-full``, logged once per episode; nothing blocks, no push is refused). A sender thread takes what is
queued, adds the chosen broker-added labels to the resource attributes of every ``ResourceMetrics``
natively (:func:`kip714._otlp_splice.add_resource_attributes`: the client's bytes are otherwise copied as
they are, a key the client set on its resource keeps the client's value), concatenates the payloads into
one ``ExportMetricsServiceRequest`` (same field number as ``MetricsData.resource_metrics``, so concatenated
messages are one request), gzips it and POSTs it to ``…/v1/metrics`` with urllib3.

Retries follow the OTLP/HTTP specification: 429, 502, 503 and 504 (and connection failures) are retried,
waiting ``Retry-After`` when the server sends one, otherwise an exponential backoff with jitter
(``initial_backoff_s`` doubling up to ``max_backoff_s``); a batch still failing after ``max_elapsed_s`` is
dropped and counted (``retries-exhausted``). Other statuses are not retried (``rejected``). While a batch
is being retried the queue keeps absorbing pushes up to ``max_queue``. What :meth:`close` cannot deliver in its
timeout is dropped and counted (``shutdown``). A collector that cannot be reached is logged once when it goes
away and once when it answers again, with what the outage cost; the first batch given up after a delivery
is logged with its count (whatever the failure: no connection, 429/5xx, TLS).
"""

from __future__ import annotations

import email.utils
import gzip
import logging
import random
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from .._extras import require
from ..broker.bounded_queue import BoundedQueueReceiver
from .labels import DEFAULT_LABELS, parse_labels

__all__ = [
    "OtlpForwarder",
    "RETRYABLE_STATUSES",
]

log = logging.getLogger("kip714.otlp")

#: The gzip level of a request body: zlib's fastest (level 6, zlib's default, spent 2.6 times its CPU on the
#: forwarder's batches of librdkafka pushes for a body 13 % smaller).
GZIP_LEVEL = 1

#: Statuses the OTLP/HTTP specification says to retry.
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})


def metrics_url(endpoint: str) -> str:
    """``http://host:4318`` → ``http://host:4318/v1/metrics``; a URL with a path is used as it is."""
    parts = urllib.parse.urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"OTLP endpoint must be an http:// or https:// URL, not {endpoint!r}")
    if parts.path in ("", "/"):
        parts = parts._replace(path="/v1/metrics")
    return urllib.parse.urlunsplit(parts)


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """A ``Retry-After`` header (delay seconds or an HTTP date) in seconds from now, or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class OtlpForwarder(BoundedQueueReceiver):
    """Forwards every accepted payload to an OTLP/HTTP collector (see the module docstring).

    ``OtlpForwarder("http://collector:4318", labels=("client_id", "client_instance_id"),
    headers={"Authorization": "Bearer …"})``; ``broker.add_receiver(forwarder)``.

    Options: ``compression`` ("gzip" or "none"), ``timeout_s`` per request, ``max_queue`` payloads
    waiting, ``max_batch_payloads`` / ``max_batch_bytes`` per request, ``linger_s`` (how long the sender
    waits for a fuller batch before it sends a smaller one: one request per push at a high rate would cost
    an HTTP request and a gzip call each; default 0.05), ``initial_backoff_s``,
    ``max_backoff_s`` (the ceiling), ``max_elapsed_s`` (give a batch up after), TLS: ``ca_file``,
    ``client_cert`` / ``client_key``, ``verify``.

    Counters: ``forwarded``, ``requests`` (by status), ``retries``, ``payloads_dropped`` (by reason; also
    ``dropped``, the same dict)."""

    queue_name = "otlp"
    dropped_metric = 'kip714_otlp_payloads_dropped_total{reason="queue-full"}'
    log = log

    def __init__(
        self,
        endpoint: str,
        labels: Iterable[str] | str = DEFAULT_LABELS,
        headers: Mapping[str, str] | None = None,
        compression: str = "gzip",
        timeout_s: float = 10.0,
        max_queue: int = 10_000,
        max_batch_payloads: int = 512,
        max_batch_bytes: int = 4 << 20,
        linger_s: float = 0.05,
        initial_backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        max_elapsed_s: float = 300.0,
        ca_file: str | None = None,
        client_cert: str | None = None,
        client_key: str | None = None,
        verify: bool = True,
    ) -> None:
        require("otlp", "OtlpForwarder")
        import urllib3

        if compression not in ("gzip", "none"):
            raise ValueError("compression must be 'gzip' or 'none'")
        self.url = metrics_url(endpoint)
        self.labels = parse_labels(labels)
        self.compression = compression
        self.headers = {
            "Content-Type": "application/x-protobuf",
            "User-Agent": "kip714-otlp-forwarder",
            **dict(headers or {}),
        }
        if compression == "gzip":
            self.headers["Content-Encoding"] = "gzip"
        self.max_batch_payloads = int(max_batch_payloads)
        self.max_batch_bytes = int(max_batch_bytes)
        self.initial_backoff_s = float(initial_backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.max_elapsed_s = float(max_elapsed_s)
        tls: dict[str, Any] = {}
        if self.url.startswith("https:"):
            tls = {
                "cert_reqs": "CERT_REQUIRED" if verify else "CERT_NONE",
                "ca_certs": ca_file,
                "cert_file": client_cert,
                "key_file": client_key,
            }
            if not verify:
                tls["assert_hostname"] = False
        self._http = urllib3.PoolManager(
            num_pools=1, maxsize=1, retries=False, timeout=urllib3.Timeout(total=timeout_s), **tls
        )
        self._lock = threading.Lock()  # the request and retry counters
        self._stop = threading.Event()
        # counters (self-metrics)
        self.forwarded = 0  # payloads delivered (2xx)
        self.requests: dict[str, int] = {}  # by status ("200", "503", "error")
        self.retries = 0
        self._tls_warned = False
        self._outage: dict[str, Any] | None = None  # while the collector cannot be reached: failed requests, drops
        self._gave_up_said = False  # a batch given up was logged; reset when one is delivered
        # instance → (its client info and node id when last seen, their labels' encoded attributes): the sender's
        self._by_instance: dict[bytes, tuple[Any, int, Any]] = {}
        super().__init__(max_queue=max_queue, batch=max_batch_payloads, thread_name="kip714-otlp", linger_s=linger_s)

    @property
    def dropped(self) -> dict[str, int]:
        """Payloads not delivered, by reason (:attr:`payloads_dropped`)."""
        return self.payloads_dropped

    # ------------------------------------------------------------------ queue (request path and sender)

    def _item(self, context: Any, payload: Any) -> tuple[Any, ...]:
        labels = payload.labels
        return tuple((n, labels.get(n, "")) for n in self.labels), payload.data

    def export_batch(self, batch: Any) -> None:
        """Queue the accepted pushes of one read (a :class:`~kip714.broker.receivers.AcceptedBatch`): per push,
        its instance, where its labels come from and its payload; the sender makes the labels once per instance
        (:meth:`_process`)."""
        node = batch.node_id
        self._enqueue_many(
            [
                ((instance, info, node), data)
                for instance, info, data in zip(batch.client_instance_ids, batch.client_infos, batch.payloads)
            ]
        )

    def _take(self) -> list[Any]:
        """Up to ``max_batch_payloads`` payloads, and no more once ``max_batch_bytes`` are taken."""
        q, size = self._queue, 0
        items: list[Any] = []
        while q and len(items) < self.max_batch_payloads and size < self.max_batch_bytes:
            item = q.popleft()
            items.append(item)
            size += len(item[1])
        return items

    # ------------------------------------------------------------------ sender

    def _process(self, items: list[Any]) -> None:
        from .._otlp_splice import add_resource_attributes_all, encode_attributes

        datas: list[bytes] = []
        attributes: list[Any] = []
        encoded: dict[tuple[Any, ...], Any] = {}
        by_instance = self._by_instance
        if len(by_instance) > 65536:  # (instances gone: made again when they push)
            by_instance.clear()
        for labels, data in items:
            if labels and type(labels[0]) is bytes:  # (instance, client info, node id): from export_batch
                known = by_instance.get(labels[0])
                if known is not None and known[0] is labels[1] and known[1] == labels[2]:
                    attrs = known[2]
                else:
                    made = labels[1].labels(labels[2], labels[0])
                    attrs = encode_attributes(tuple((n, made.get(n, "")) for n in self.labels))
                    by_instance[labels[0]] = (labels[1], labels[2], attrs)
            else:
                attrs = encoded.get(labels)
                if attrs is None:
                    attrs = encoded[labels] = encode_attributes(labels)
            datas.append(data if type(data) is bytes else bytes(data))
            attributes.append(attrs)
        # every payload's resources labelled into one request body at once (the malformed ones left out)
        body, malformed = add_resource_attributes_all(datas, attributes)
        if malformed:
            self._drop("malformed", len(malformed))
        count = len(datas) - len(malformed)
        if count:
            try:
                self._send(body, count)
            except Exception:  # a bug must not stop the forwarder; the batch is counted
                log.exception("OTLP forwarder failed")
                self._drop("internal-error", count)

    def _send(self, body: bytes, count: int) -> None:
        """POST ``body`` (``count`` payloads' ResourceMetrics), retried as the module docstring says."""
        if self.compression == "gzip":
            body = gzip.compress(body, compresslevel=GZIP_LEVEL)
        started = time.monotonic()
        backoff = self.initial_backoff_s
        while True:
            status, wait = self._post(body)
            if status is not None:
                self._reachable()
            if status is not None and 200 <= status < 300:
                with self._lock:
                    self.forwarded += count
                self._gave_up_said = False
                return
            if status is not None and status not in RETRYABLE_STATUSES:
                log.warning("OTLP export refused with HTTP %s: %d payloads dropped", status, count)
                self._drop("rejected", count)
                return
            if wait is None:
                wait = backoff * random.uniform(0.5, 1.0)
                backoff = min(backoff * 2, self.max_backoff_s)
            wait = min(wait, self.max_backoff_s)
            if self._closed:  # close() gave up on it: counted and said with what was queued
                self._drop("shutdown", count)
                return
            if time.monotonic() + wait - started > self.max_elapsed_s:
                self._drop("retries-exhausted", count)
                if self._outage is not None:
                    self._outage["dropped"] += count
                if not self._gave_up_said:
                    self._gave_up_said = True
                    log.warning(
                        "OTLP export to %s given up after %.0f s of retries: %d payloads dropped (counted "
                        'as kip714_otlp_dropped_total{reason="retries-exhausted"}; said again only after '
                        "a batch is delivered)",
                        self.url,
                        time.monotonic() - started,
                        count,
                    )
                return
            with self._lock:
                self.retries += 1
            self._stop.wait(wait)

    def _post(self, body: bytes) -> tuple[int | None, float | None]:
        import urllib3

        try:
            r = self._http.request("POST", self.url, body=body, headers=self.headers, preload_content=True)
        except urllib3.exceptions.SSLError as exc:
            # an untrusted or invalid certificate (or no TLS there): retried like a connection failure, a
            # certificate may be replaced meanwhile, but counted apart and said once
            if not self._tls_warned:
                self._tls_warned = True
                log.warning(
                    "OTLP export to %s failed TLS (retried; counted as kip714_otlp_requests_total"
                    '{status="tls-error"}): %s',
                    self.url,
                    exc,
                )
            self._status("tls-error")
            return None, None
        except urllib3.exceptions.HTTPError as exc:
            self._status("error")
            if self._outage is None:  # said once when the collector goes away, once when it is back
                self._outage = {"since": time.monotonic(), "failed": 0, "dropped": 0}
                log.warning(
                    "OTLP export to %s failed: %s (retried with backoff; counted as "
                    'kip714_otlp_requests_total{status="error"})',
                    self.url,
                    exc,
                )
            else:
                log.debug("OTLP export failed: %s", exc)
            self._outage["failed"] += 1
            return None, None
        self._status(str(r.status))
        return r.status, retry_after_seconds(r.headers.get("Retry-After"))

    def _reachable(self) -> None:
        """The collector answered: end an outage, saying how long it lasted and what it cost."""
        outage, self._outage = self._outage, None
        if outage is not None:
            log.warning(
                "OTLP export to %s reachable again after %.1f s: %d requests failed, %d payloads dropped",
                self.url,
                time.monotonic() - outage["since"],
                outage["failed"],
                outage["dropped"],
            )

    def _status(self, key: str) -> None:
        with self._lock:
            self.requests[key] = self.requests.get(key, 0) + 1

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until everything queued so far was sent or given up (True), or ``timeout`` passed."""
        return super().flush(timeout)

    def _stopping(self) -> None:
        self._stop.set()  # a batch being retried gives up now (counted as shutdown)

    def close(self, timeout: float | None = 5.0) -> None:
        """Send what is queued (retrying no longer than ``timeout``), then stop."""
        super().close(timeout)
        lost = self.payloads_dropped.get("shutdown", 0)
        if lost:
            log.warning(
                "OTLP forwarder closed with %d payloads not delivered to %s (dropped, "
                'kip714_otlp_dropped_total{reason="shutdown"})',
                lost,
                self.url,
            )
        self._http.clear()

    # ------------------------------------------------------------------ self-metrics

    def self_metrics(self) -> list[Any]:
        """kip714_otlp_* metric families (the Prometheus exporter exposes them when both run)."""
        from prometheus_client.core import CounterMetricFamily

        with self._lock:
            forwarded = CounterMetricFamily(
                "kip714_otlp_payloads_forwarded", "Payloads delivered to the OTLP endpoint", value=self.forwarded
            )
            dropped = CounterMetricFamily(
                "kip714_otlp_payloads_dropped", "Payloads not delivered, by reason", labels=["reason"]
            )
            for reason, n in sorted(self.dropped_counts().items()):
                dropped.add_metric([reason], n)
            requests = CounterMetricFamily(
                "kip714_otlp_requests",
                "Export requests by HTTP status ('error': no response, 'tls-error': the TLS handshake failed)",
                labels=["status"],
            )
            for status, n in sorted(self.requests.items()):
                requests.add_metric([status], n)
            retries = CounterMetricFamily("kip714_otlp_retries", "Export requests retried", value=self.retries)
        return [forwarded, dropped, requests, retries]
