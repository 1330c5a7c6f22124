"""``kip714 demo``: real client telemetry, collected by ``kip714 serve`` and decoded on local Spark.

1. Start a KIP-714 endpoint (:class:`~kip714.TelemetryServer`) on 127.0.0.1 that records every push
   and serves the clients' metrics for Prometheus (:class:`~kip714.PrometheusExporter`, ``/metrics``) while
   it runs; one PromQL query is shown, evaluated on a scrape of that endpoint.
2. Point clients at it for a few seconds: real librdkafka producers and a consumer (confluent-kafka, when
   installed) and a simulated fleet of Java- and librdkafka-style clients over TCP.
3. Run the bulk pipeline on local Spark over the recording: ``points/`` and ``errors/`` in Parquet.
4. Show per-client request latency by broker node and throttle/queue times as a table, and write a chart
   (``latency_by_node.png``) next to the data.
5. Write the fleet's report (``kip714 report``: conformance per client software, misbehaving clients) to
   ``report/`` and print its summary and where ``report.html`` is.

``--captures`` instead decodes the real librdkafka frames bundled with kip714, without Spark or network.
"""

from __future__ import annotations

import asyncio
import gc
import pathlib
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import confluent_kafka
    import pandas as pd

    from ..endpoint.server import TelemetryServer
    from ..operations.promql import Clients
    from ..sinks.prometheus import PrometheusExporter
    from .simulate import FleetStats

NODE_LATENCY = ".node.request.latency.avg"


def _say(started: float, message: str) -> None:
    print(f"[{time.perf_counter() - started:6.1f}s] {message}", flush=True)


class _ServerThread:
    def __init__(self, server: TelemetryServer) -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kip714-demo-serve", daemon=True)
        self.thread.start()
        if not self.ready.wait(15):
            raise RuntimeError("the telemetry endpoint did not start")

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.server.start())
        self.ready.set()
        self.loop.run_forever()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(15)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(15)


def _librdkafka_clients(bootstrap: str, seconds: float, producers: int, consumers: int) -> int:
    """Real librdkafka clients (confluent-kafka) polling for ``seconds``; returns how many ran."""
    try:
        import confluent_kafka
    except ImportError:
        return 0
    clients: list[confluent_kafka.Producer | confluent_kafka.Consumer] = []
    for i in range(producers):
        clients.append(
            confluent_kafka.Producer(
                {
                    "bootstrap.servers": bootstrap,
                    "client.id": f"rdkafka-producer-{i + 1}",
                    "log_level": 0,
                    "enable.sparse.connections": False,
                }
            )
        )
    for i in range(consumers):
        clients.append(
            confluent_kafka.Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": "demo-group",
                    "client.id": f"rdkafka-consumer-{i + 1}",
                    "log_level": 0,
                }
            )
        )
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for c in clients:
            c.poll(0.02)
    for c in clients:
        if isinstance(c, confluent_kafka.Consumer):
            c.close()
    n = len(clients)
    del clients, c
    gc.collect()  # destroying the clients sends their terminating pushes
    return n


def run_demo(output: str, seconds: float = 8.0, simulated: int = 24, master: str | None = None) -> int:
    from .. import SubscriptionRegistry, TelemetryBroker
    from ..endpoint.server import TelemetryServer
    from ..sinks.recorder import ParquetRecorder
    from ..spark.pipeline import run_pipeline
    from .simulate import Fleet

    started = time.perf_counter()
    out = pathlib.Path(output)
    out.mkdir(parents=True, exist_ok=True)
    registry = SubscriptionRegistry()
    registry.set("demo", {"metrics": "*", "interval.ms": "1000"})
    broker = TelemetryBroker(registry, node_id=1)
    from ..sinks.prometheus import PrometheusExporter

    exporter = PrometheusExporter()
    broker.add_receiver(exporter)
    metrics_port = exporter.start_http_server("127.0.0.1", 0)
    recorder = ParquetRecorder(out / "recording")
    server = TelemetryServer(broker, "127.0.0.1", 0, recorder=recorder)
    srv = _ServerThread(server)
    bootstrap = f"127.0.0.1:{server.port}"
    _say(
        started,
        f"kip714 serve listening on {bootstrap} (push interval 1 s, all metrics), recording to "
        f"{out / 'recording'}; Prometheus metrics on http://127.0.0.1:{metrics_port}/metrics",
    )
    fleet = Fleet(simulated // 2, simulated - simulated // 2, seed=714, software="mix", codec="mixed")
    fleet_result: dict[str, FleetStats] = {}
    fleet_thread = threading.Thread(
        target=lambda: fleet_result.setdefault("stats", fleet.run_tcp("127.0.0.1", server.port, seconds)), daemon=True
    )
    fleet_thread.start()
    _say(
        started, f"{simulated} simulated clients (Java and librdkafka styles, mixed codecs) pushing for {seconds:.0f} s"
    )
    real = _librdkafka_clients(bootstrap, seconds, producers=2, consumers=1)
    _say(
        started,
        f"{real} real librdkafka clients (confluent-kafka) pushed for {seconds:.0f} s"
        if real
        else "confluent-kafka is not installed: no real librdkafka clients this time",
    )
    fleet_thread.join(seconds + 30)
    _show_query(exporter, metrics_port)
    exporter.close()
    srv.stop()
    _say(started, f"endpoint stopped: {server.summary()}")

    summary = run_pipeline(str(out / "recording"), str(out), master=master, progress=True)
    _say(started, f"pipeline: {summary.describe()}")
    return _report(out, master, started)


DEMO_METRIC = "org.apache.kafka.producer.node.request.latency.avg"


def demo_query(clients: Clients) -> str:
    """The PromQL query the demo shows: the five slowest (client, broker) pairs of producer request latency,
    grouped as kip714's dashboards group it (the client identity and the exporter's ``kafka_node_id``, so
    that Java's ``node-3`` and librdkafka's ``3`` are one broker)."""
    from ..operations.promql import prom_name

    return f"topk(5, {clients.per_broker('max', prom_name(DEMO_METRIC))})"


def _show_query(exporter: PrometheusExporter, port: int) -> None:
    """Scrape the demo's /metrics once and evaluate :func:`demo_query` on it (what Grafana would plot)."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from ..operations.promql import BROKER_NODE, BROKER_ROLE, Clients, prom_name

    clients = Clients(exporter.labels)
    group = (*clients.labels, BROKER_NODE)
    exporter.flush(5)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    best: dict[tuple[str, ...], float] = {}
    series = 0
    for family in text_string_to_metric_families(text):
        series += len(family.samples)
        if family.name != prom_name(DEMO_METRIC):
            continue
        for s in family.samples:
            if s.labels.get(BROKER_ROLE) == "broker":
                key = tuple(s.labels.get(n, "") for n in group)
                best[key] = max(best.get(key, float("-inf")), s.value)
    print(
        f"\nPrometheus endpoint: {series} samples in one scrape. PromQL, evaluated on that scrape:\n"
        f"  {demo_query(clients)}"
    )
    for key, v in sorted(best.items(), key=lambda kv: -kv[1])[:5]:
        print("  {" + ", ".join(f"{n}={value!r}" for n, value in zip(group, key)) + f"}}  {v:.3f} ms")
    if not best:
        print("  (no producer latency series: no librdkafka or simulated producer pushed)")


def _report(out: pathlib.Path, master: str | None, started: float) -> int:
    from pyspark.sql import functions as F

    from .._table import table as _table
    from ..spark import local_session

    spark = local_session(master)
    points = spark.read.parquet(str(out / "points"))
    node = F.coalesce(
        F.col("attributes").getItem("node.id"), F.regexp_replace(F.col("attributes").getItem("node_id"), "^node-", "")
    )
    origin = F.when(F.col("client_id").startswith("rdkafka-"), F.lit("real librdkafka")).otherwise(
        F.concat(F.lit("simulated "), F.col("client_software_name"))
    )
    # broker nodes only: coordinator connections show up as -1 (librdkafka) or 2^31-1-n (Java)
    lat = (
        points.where(F.col("metric").endswith(NODE_LATENCY))
        .withColumn("node", node.cast("int"))
        .where((F.col("node") >= 0) & (F.col("node") < 1_000_000))
        .withColumn("origin", origin)
    )
    nodes = sorted(r["node"] for r in lat.select("node").distinct().collect())
    per_client = (
        lat.groupBy("origin", "client_id")
        .pivot("node", nodes)
        .agg(F.round(F.avg("value"), 2))
        .orderBy(F.col("origin").desc(), "client_id")
    ).collect()
    by_node = lat.groupBy("node", "origin").agg(F.avg("value").alias("avg_ms")).toPandas()
    waits = (
        points.where(F.col("metric").rlike(r"(produce\.throttle\.time|record\.queue\.time)\.avg$"))
        .withColumn("what", F.regexp_extract("metric", r"(throttle|queue)", 1))
        .groupBy("client_id")
        .pivot("what", ["throttle", "queue"])
        .agg(F.round(F.avg("value"), 3))
        .orderBy(F.desc("queue"))
    ).limit(8)
    print("\nMean request latency (ms) to each broker node, per client (node.request.latency.avg):\n")
    shown = [r for r in per_client if r["origin"] == "real librdkafka"] + [
        r for r in per_client if r["origin"] != "real librdkafka"
    ][:16]
    print(
        _table(
            [(r["client_id"], r["origin"], *[r[str(n)] for n in nodes]) for r in shown],
            ("client", "origin", *[f"node {n}" for n in nodes]),
        )
    )
    if len(per_client) > len(shown):
        print(f"... and {len(per_client) - len(shown)} more clients in {out / 'points'}")
    print("\nProducers with the longest record queue times (ms):\n")
    print(
        _table(
            [(r["client_id"], r["throttle"], r["queue"]) for r in waits.collect()],
            ("client", "throttle avg", "queue avg"),
        )
    )
    chart = _chart(by_node, out / "latency_by_node.png")
    print(f"\nchart: {chart}")
    print(f"data:  {out / 'points'} (one row per data point), {out / 'errors'}")
    _say(started, "writing the fleet's report (conformance per client software, insights per client)")
    from ..spark.report import report

    closed = out / "recording" / "_closed"
    data = report(str(out), spark, closed=str(closed) if closed.is_dir() else None).write(out / "report")
    print("\n" + data["summary"])
    _say(started, "demo finished")
    return 0


def _chart(frame: pd.DataFrame, path: pathlib.Path) -> pathlib.Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nodes = sorted(frame["node"].unique())
    software = sorted(frame["origin"].unique())
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    width = 0.8 / max(1, len(software))
    for k, sw in enumerate(software):
        sub = frame[frame["origin"] == sw].set_index("node")
        xs = [i + k * width for i in range(len(nodes))]
        ax.bar(xs, [float(sub["avg_ms"].get(n, 0.0)) for n in nodes], width, label=sw)
    ax.set_xticks([i + width * (len(software) - 1) / 2 for i in range(len(nodes))])
    ax.set_xticklabels([f"node {n}" for n in nodes])
    ax.set_ylabel("mean node.request.latency.avg (ms)")
    ax.set_title("Request latency by broker node, from KIP-714 client telemetry")
    ax.legend(title="clients")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
