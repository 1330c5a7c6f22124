"""The ``export`` group of ``kip714 bench``: the Prometheus exporter and the OTLP forwarder against the
straightforward peers, measured in the same run.

* **Absorbing**: payloads per second into the Prometheus state, in steady state (every series known),
  librdkafka capture payloads from 1,000 client instances, 256 payloads per call (the exporter's worker
  batch). kip714: :meth:`PrometheusExporter.absorb` (native Arrow decoding of the batch, vectorised
  updates). Peer: protobuf (upb) parse of each payload and the ``prometheus_client`` data model filled in
  Python (label dicts per point, the same name and label rules, delta sums added, gauges set).
* **Exposition**: one scrape of 100,000 series (20,000 with ``--quick``) as ``/metrics`` serves it
  (:meth:`PrometheusExporter.exposition`: prometheus_client's encoder rendered each series' line prefix
  once, values are formatted every scrape), text format and OpenMetrics, against
  ``prometheus_client.generate_latest`` over the peer's families built from its state; and, for
  comparison, the first scrape (every prefix rendered) and the exporter as a plain collector.
* **Forwarding**: the request-path cost of :meth:`OtlpForwarder.export_metrics` for a 4 KB payload
  (the sender thread stopped, so only the request path is timed), against a forwarder that adds the
  labels with protobuf on the request path (parse, append attributes, serialise); and the sender's
  per-payload work off the request path (native splice + batch gzip) against protobuf's re-encoding.
"""

from __future__ import annotations

import gzip
import itertools
import uuid
from typing import Any

from kip714.broker.subscriptions import ClientInfo
from kip714.sinks.prometheus.names import merge_labels, metric_name

from ..harness import Bench
from ..payloads import KB, otlp_like, sample_payloads
from ..timing import interleaved

__all__ = ["run"]


def _render(v: Any) -> str | None:
    from kip714.otlp.reference import render_any_value

    return render_any_value(v)


#: The peer's state of one metric family: (type, help, {sorted label pairs: value}).
_Family = tuple[str, str, dict[tuple[tuple[str, str], ...], float]]


class ProtobufPeer:
    """The straightforward exporter: protobuf parse + the prometheus_client data model in Python."""

    def __init__(self, labels=("client_id", "client_instance_id")) -> None:
        self.labels = labels
        self.families: dict[str, _Family] = {}  # name → (type, help, {label tuple: value})

    def absorb(self, items) -> None:
        from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

        for _instance, blabels, data, _terminating, _ in items:
            md = MetricsData.FromString(data)
            broker = [(n, blabels.get(n, "")) for n in self.labels]
            for rm in md.resource_metrics:
                res = [(kv.key, _render(kv.value)) for kv in rm.resource.attributes]
                for sm in rm.scope_metrics:
                    scope = [("otel_scope_name", sm.scope.name), ("otel_scope_version", sm.scope.version)]
                    for m in sm.metrics:
                        kind = m.WhichOneof("data")
                        if kind not in ("gauge", "sum"):
                            continue
                        body = getattr(m, kind)
                        mono = kind == "sum" and body.is_monotonic
                        name = metric_name(m.name, m.unit, kind, mono)
                        fam = self.families.get(name)
                        if fam is None:
                            fam = self.families[name] = ("counter" if mono else "gauge", m.description, {})
                        series = fam[2]
                        delta = kind == "sum" and body.aggregation_temporality == 1
                        for p in body.data_points:
                            labels, _ = merge_labels(
                                [(kv.key, _render(kv.value)) for kv in p.attributes] + res + scope + broker
                            )
                            key = tuple(sorted(labels.items()))
                            v = p.as_double if p.WhichOneof("value") == "as_double" else float(p.as_int)
                            series[key] = series.get(key, 0.0) + v if delta else v

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        for name, (typ, help_, series) in self.families.items():
            fam: CounterMetricFamily | GaugeMetricFamily
            if typ == "counter":
                fam = CounterMetricFamily(name, help_)
            else:
                fam = GaugeMetricFamily(name, help_)
            for key, v in series.items():
                fam.add_sample(name, dict(key), v)
            yield fam


def _items(payloads, n_instances: int, rng_seed: int = 7):
    ci = ClientInfo(client_id="bench")
    out = []
    for k in range(n_instances):
        inst = uuid.UUID(int=(rng_seed << 64) | (k + 1))
        out.append((inst, ci.labels(1, inst), payloads[k % len(payloads)], False, None))
    return out


def run(bench: Bench) -> None:
    """Add the export rows (absorbing, scrapes, forwarding) to ``bench``."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.exposition import choose_encoder

    from kip714 import OtlpForwarder, PrometheusExporter
    from kip714.broker.receivers import ReceiverContext, TelemetryPayload

    G = "export"
    payloads = sample_payloads()
    # ------------------------------------------------------------------ absorbing
    n_inst, per_call = 1024, 256
    items = _items(payloads, n_inst)
    batches = [items[i : i + per_call] for i in range(0, n_inst, per_call)]
    ex = PrometheusExporter(background=False, max_series=10_000_000)
    peer = ProtobufPeer()
    for b in batches:
        ex.absorb(b)
        peer.absorb(b)
    assert ex.series_count == sum(len(f[2]) for f in peer.families.values()), (
        ex.series_count,
        sum(len(f[2]) for f in peer.families.values()),
    )
    points = sum(len(_decode_rows(d)) for _, _, d, _, _ in items) / n_inst
    cyc_k, cyc_p = itertools.cycle(batches), itertools.cycle(batches)
    stats = interleaved(
        [(lambda: ex.absorb(next(cyc_k)), ()), (lambda: peer.absorb(next(cyc_p)), ())],
        bench.rounds,
        budget_s=bench.budget * 2,
        per_call=[per_call, per_call],
    )
    bench.add_row(
        G,
        "absorb",
        f"payloads absorbed into the Prometheus state (librdkafka captures, "
        f"{points:.0f} points each, {n_inst} instances, {per_call} per call)",
        stats[0],
        stats[1],
        "protobuf + prometheus_client model in Python",
        unit="rate",
        goal={"kind": "ratio", "value": 5, "text": "≥ 5×"},
        extra={"points_per_payload": points, "instances": n_inst},
    )
    # ------------------------------------------------------------------ exposition
    n_series = 20_000 if bench.quick else 100_000
    producer = payloads[1]
    per_payload = len(_decode_rows(producer))
    big = _items([producer], n_series // per_payload, rng_seed=9)
    ex = PrometheusExporter(background=False, max_series=10_000_000)
    peer = ProtobufPeer()
    for i in range(0, len(big), 512):
        ex.absorb(big[i : i + 512])
        peer.absorb(big[i : i + 512])
    reg_k, reg_p = CollectorRegistry(auto_describe=False), CollectorRegistry(auto_describe=False)
    reg_k.register(ex)
    reg_p.register(peer)
    series = ex.series_count
    text_k = ex.exposition()[0]
    generate_latest(reg_p)  # the peer's first scrape, as for kip714 (not timed)
    assert text_k == generate_latest(reg_k) and text_k.count(b"\n") >= series
    stats = interleaved([(ex.exposition, ()), (generate_latest, (reg_p,))], 5, budget_s=bench.budget * 4, min_rounds=3)
    bench.add_row(
        G,
        f"scrape-{series}",
        f"one scrape (text format) as /metrics serves it, {series:,} series "
        "(values formatted every scrape, line prefixes rendered by prometheus_client when the "
        "series appeared)",
        stats[0],
        stats[1],
        "prometheus_client families from the peer's state",
        goal={"kind": "max_time", "value": 1e9, "text": "< 1 s"},
        extra={"series": series, "bytes": len(text_k)},
    )
    om = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,text/plain;version=0.0.4;q=0.3"
    encoder, _ = choose_encoder(om)
    stats = interleaved([(ex.exposition, (om,)), (encoder, (reg_p,))], 5, budget_s=bench.budget * 4, min_rounds=3)
    bench.add_row(
        G,
        f"scrape-{series}-openmetrics",
        "same, OpenMetrics (what Prometheus negotiates)",
        stats[0],
        stats[1],
        "prometheus_client OpenMetrics encoder over the peer's families",
        goal={"kind": "max_time", "value": 1e9, "text": "< 1 s"},
    )

    def first_scrape():
        ex._formats.clear()  # forget every rendered prefix: all series are new
        return ex.exposition()

    stats = interleaved(
        [(first_scrape, ()), (generate_latest, (reg_k,)), (generate_latest, (reg_p,))],
        3,
        budget_s=bench.budget * 4,
        min_rounds=2,
    )
    bench.add_row(
        G,
        f"scrape-{series}-first",
        f"the very first scrape, {series:,} series (every line prefix "
        "rendered by prometheus_client; later series are rendered as they are absorbed)",
        stats[0],
        stats[2],
        "prometheus_client families from the peer's state",
        note="informational: only the first scrape renders every series",
        extra={"collector_path_ns": stats[1]["median"]},
    )
    bench.add_row(
        G,
        f"scrape-{series}-collector",
        "the exporter as a plain prometheus_client collector "
        "(registry.register(exporter); generate_latest: every line rendered every scrape)",
        stats[1],
        stats[2],
        "prometheus_client families from the peer's state",
        note="informational: what /metrics did before line prefixes were kept",
    )
    # ------------------------------------------------------------------ forwarding
    data = otlp_like(4 * KB, seed=41)
    ci = ClientInfo(client_id="bench")
    inst = uuid.UUID(int=42)
    ctx = ReceiverContext(ci, 1)
    payload = TelemetryPayload(inst, False, "OTLP", data, ci.labels(1, inst), 0, 1, 0)
    fwd = OtlpForwarder("http://127.0.0.1:9/v1/metrics", max_queue=1 << 62)
    fwd._closed = True  # stop the sender: only the request path is timed
    fwd._wake.set()
    assert fwd._thread is not None  # a background forwarder has its sender thread
    fwd._thread.join(5)

    def request_path():
        fwd.export_metrics(ctx, payload)
        if len(fwd._queue) > 100_000:
            fwd._queue.clear()

    def protobuf_request_path():
        from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
        from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

        md = MetricsData.FromString(payload.data)
        for rm in md.resource_metrics:
            for k in ("client_id", "client_instance_id"):
                rm.resource.attributes.append(KeyValue(key=k, value=AnyValue(string_value=payload.labels[k])))
        return md.SerializeToString()

    stats = interleaved([(request_path, ()), (protobuf_request_path, ())], bench.rounds, budget_s=bench.budget)
    bench.add_row(
        G,
        "forward-request-path-4KB",
        f"OTLP forwarding on the request path, {len(data):,} B payload",
        stats[0],
        stats[1],
        "protobuf parse + attributes + serialise",
        goal={"kind": "max_time", "value": 10_000, "text": "≤ 10 µs"},
        extra={"payload_bytes": len(data)},
    )
    fwd._queue.clear()
    from kip714._otlp_splice import add_resource_attributes, add_resource_attributes_all, encode_attributes
    from kip714.sinks.otlp_forward import GZIP_LEVEL

    labels = tuple((k, payload.labels[k]) for k in ("client_id", "client_instance_id"))
    batch = [data] * 100

    def sender_work():  # (what OtlpForwarder._process does with a batch: one splice call, the sender's gzip level)
        enc = encode_attributes(labels)
        return gzip.compress(add_resource_attributes_all(batch, [enc] * len(batch))[0], GZIP_LEVEL)

    def sender_peer():
        from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
        from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

        out = []
        for d in batch:
            md = MetricsData.FromString(d)
            for rm in md.resource_metrics:
                for k, v in labels:
                    rm.resource.attributes.append(KeyValue(key=k, value=AnyValue(string_value=v)))
            out.append(md.SerializeToString())
        return gzip.compress(b"".join(out), GZIP_LEVEL)

    stats = interleaved(
        [(sender_work, ()), (sender_peer, ())], bench.rounds, budget_s=bench.budget, per_call=[100, 100]
    )
    bench.add_row(
        G,
        "forward-sender-4KB",
        "same, the sender's work per payload (label splice + gzip, batches of 100), off the request path",
        stats[0],
        stats[1],
        "protobuf re-encode + gzip",
        note="informational: the goal is on the request path",
    )
    splice_only = interleaved(
        [(add_resource_attributes, (data, encode_attributes(labels))), (protobuf_request_path, ())],
        bench.rounds,
        budget_s=bench.budget,
    )
    bench.add_row(
        G,
        "forward-splice-4KB",
        "the native label splice alone, 4 KB payload",
        splice_only[0],
        splice_only[1],
        "protobuf parse + attributes + serialise",
    )


def _decode_rows(data: bytes) -> Any:
    from kip714.otlp.reference import flatten

    return flatten(data)
