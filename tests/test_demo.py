"""``kip714 demo``'s PromQL query (the rest of the demo runs in tests/test_spark.py and tests/test_cli.py): it
groups as kip714's dashboards group, by the client identity and the exporter's normalised broker label."""

from __future__ import annotations

import ast
import pathlib
import re
import uuid

import pytest

pytest.importorskip("prometheus_client")
import otlp_build as ob

from kip714 import PrometheusExporter
from kip714.broker.receivers import ReceiverContext, TelemetryPayload
from kip714.broker.subscriptions import ClientInfo
from kip714.operations.promql import BROKER_NODE, BROKER_ROLE, Clients, prom_name
from kip714.tools.demo import DEMO_METRIC, _show_query, demo_query

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def _push(ex, instance, client_id, latencies):
    """One push of producer request latencies, ``{node tag attribute: (value, latency)}``."""
    data = ob.payload([ob.gauge(DEMO_METRIC, v, attrs={key: node}) for key, (node, v) in latencies.items()])
    ci = ClientInfo(client_id=client_id)
    ex.export_metrics(
        ReceiverContext(ci, 1, 1000), TelemetryPayload(instance, False, "OTLP", data, ci.labels(1, instance), 0, 1, 0)
    )


def test_the_printed_query_groups_by_the_broker_not_the_clients_tag(capsys):
    ex = PrometheusExporter(background=False)
    port = ex.start_http_server("127.0.0.1", 0)
    try:
        java, rdkafka = uuid.uuid4(), uuid.uuid4()
        # Java tags a broker node-3 (its coordinator connection node-2147483646), librdkafka 3 (its
        # coordinator -1): the query's broker label is 3 for both, and the coordinators are left out
        _push(ex, java, "java-app", {"node_id": ("node-3", 7.0)})
        _push(ex, java, "java-app", {"node_id": ("node-2147483646", 50.0)})
        _push(ex, rdkafka, "rdkafka-app", {"node.id": ("3", 5.0)})
        _push(ex, rdkafka, "rdkafka-app", {"node.id": ("-1", 40.0)})
        _show_query(ex, port)
    finally:
        ex.close()
    out = capsys.readouterr().out
    clients = Clients(ex.labels)
    query = demo_query(clients)
    assert f"  {query}\n" in out
    (grouped,) = re.findall(r" by \(([^)]*)\)", query)
    assert grouped.split(", ") == [*clients.labels, BROKER_NODE] == ["client_id", "client_instance_id", BROKER_NODE]
    assert f'{prom_name(DEMO_METRIC)}{{{BROKER_ROLE}="broker"}}' in query
    # what the demo printed as the query's result on its scrape: one broker, 3, for both clients
    rows = re.findall(r"^  \{(.*)\}  ([0-9.]+) ms$", out, re.M)
    got = {
        tuple((k, ast.literal_eval(v)) for k, v in (kv.split("=", 1) for kv in labels.split(", "))): float(value)
        for labels, value in rows
    }
    ids = {inst: ClientInfo().labels(1, inst)["client_instance_id"] for inst in (java, rdkafka)}
    assert got == {
        (("client_id", "java-app"), ("client_instance_id", ids[java]), (BROKER_NODE, "3")): 7.0,
        (("client_id", "rdkafka-app"), ("client_instance_id", ids[rdkafka]), (BROKER_NODE, "3")): 5.0,
    }


def test_the_readmes_panel_groups_as_the_demo():
    """The README's Grafana panel is the demo's grouping (and the dashboards'), not the clients' node tag."""
    (panel,) = re.findall(r"```promql\n(.*?)\n```", README.read_text(), re.S)
    assert panel == Clients().per_broker("max", prom_name(DEMO_METRIC))


def test_no_query_in_the_docs_groups_by_the_clients_node_tag():
    """Every PromQL example in the README and docs/ groups per-node metrics by kafka_node_id, never by the
    client's own node_id tag (node-3 from Java, 3 from librdkafka: one broker as two)."""
    root = README.parent
    blocks = [
        (path, block)
        for path in [README, *sorted((root / "docs").rglob("*.md"))]
        for block in re.findall(r"```promql\n(.*?)```", path.read_text(), re.S)
    ]
    assert len(blocks) >= 2
    for path, block in blocks:
        for grouped in re.findall(r"\b(?:by|on)\s*\(([^)]*)\)", block):
            assert "node_id" not in [g.strip() for g in grouped.split(",")], (path, block)
