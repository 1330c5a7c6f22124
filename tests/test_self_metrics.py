"""kip714's own metrics for its dashboard and alert rules (issue 29): the recording lag."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid

import pytest

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

from kip714 import PrometheusExporter
from kip714.broker.receivers import ReceiverContext
from kip714.broker.subscriptions import ClientInfo
from kip714.sinks.recorder import ParquetRecorder

PROMTOOL = shutil.which("promtool")


def samples(ex):
    body, _ = ex.exposition(None)
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(body.decode()) for s in f.samples]


def one(found, name, **labels):
    hits = [v for n, lab, v in found if n == name and all(lab.get(k) == w for k, w in labels.items())]
    assert len(hits) == 1, (name, labels)
    return hits[0]


def test_recording_lag_is_the_age_of_the_oldest_unwritten_row(tmp_path):
    rec = ParquetRecorder(tmp_path, flush_interval_s=3600)
    try:
        assert rec.lag_s() == 0.0
        ci = ClientInfo(client_id="r")
        rec.push_completed(ReceiverContext(ci, 1), _push_request(), 0, 1)
        time.sleep(0.05)
        assert rec.lag_s() >= 0.05
        ex = PrometheusExporter(background=False)
        ex.add_self_metrics(rec.self_metrics)
        assert one(samples(ex), "kip714_recording_lag_seconds") >= 0.05
        rec.flush()
        assert rec.lag_s() == 0.0
        found = samples(ex)
        assert one(found, "kip714_recording_rows_total") == 1
        assert one(found, "kip714_recording_lag_seconds") == 0.0
    finally:
        rec.close()


def _push_request():
    from kip714.wire import PushTelemetryRequest

    return PushTelemetryRequest(uuid.uuid4(), 1, False, 0, b"x")


def test_proxy_upstream_failures_are_exposed_from_zero():
    """A first failure toward a broker must be an increase Prometheus sees (Kip714ProxyUpstreamErrors): every
    known broker and connection failure reason is a series from the start."""
    from collections import Counter
    from types import SimpleNamespace

    from kip714.endpoint.health import UPSTREAM_FAILURES, endpoint_metric_families

    proxy = SimpleNamespace(
        connections=set(),
        stats={"connections": 0},
        upstream_failures=Counter({("2", "refused"): 3}),
        upstream_connects=Counter(),
        nodes={1: ("b1", 9092), 2: ("b2", 9092)},
        bytes_up=0,
        bytes_down=0,
        requests_by_key=[0] * 129,
        upstream_ok=True,
    )
    (errors,) = [f for f in endpoint_metric_families(proxy) if f.name == "kip714_upstream_errors"]
    got = {(s.labels["node_id"], s.labels["reason"]): s.value for s in errors.samples}
    assert got[("2", "refused")] == 3 and got[("1", "tls")] == 0 and got[("bootstrap", "closed")] == 0
    assert {r for _, r in got} == set(UPSTREAM_FAILURES)


def test_a_replica_names_itself_on_its_own_metrics_and_never_on_its_clients():
    """kip714 proxy --replica-id: every kip714_* family of two replicas carries replica="…", the endpoint's
    and the recorder's too, in both formats as Prometheus' parser reads them; the clients' series and the
    per-client families do not, so that a client that moves from one replica to the other is the same label
    set on both (aggregated over instance, it is one client), and it is gone from the old replica once that
    one expires it, after max(60 s, 3 × push interval)."""
    from types import SimpleNamespace

    import otlp_build as ob
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_families

    import kip714
    from kip714.endpoint.health import endpoint_metric_families
    from kip714.sinks.prometheus.store import PER_CLIENT_FAMILIES

    class Clock:
        t = 1000.0

        def __call__(self):
            return self.t

    clock = Clock()
    endpoint = SimpleNamespace(connections={1, 2}, stats={"connections": 2}, draining=False)
    replicas = {r: PrometheusExporter(background=False, clock=clock, self_labels={"replica": r}) for r in "ab"}
    replicas["a"].add_self_metrics(lambda: endpoint_metric_families(endpoint))
    instance = uuid.uuid4()
    ci = ClientInfo(client_id="mover")

    def push(ex, value):
        from kip714.broker.receivers import TelemetryPayload

        data = ob.payload([ob.gauge("org.apache.kafka.producer.buffer.available.bytes", value)])
        ex.export_metrics(
            ReceiverContext(ci, 1, 30_000, 90_000),
            TelemetryPayload(instance, False, "OTLP", data, ci.labels(1, instance), 0, 1, 0),
        )

    def families(ex):
        """The families as Prometheus' parsers read them; each check below holds in both formats."""
        text, _ = ex.exposition(None)
        om, _ = ex.exposition("application/openmetrics-text; version=1.0.0")
        plain = list(text_string_to_metric_families(text.decode()))
        opened = list(om_families(om.decode()))
        assert sum(len(f.samples) for f in plain) == sum(len(f.samples) for f in opened) > 0
        for f in opened:
            for s in f.samples:
                assert ("replica" in s.labels) == (f.name.startswith("kip714_") and s.name not in PER_CLIENT_FAMILIES)
        if PROMTOOL:  # Prometheus' own linter
            lint = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, timeout=30)
            assert lint.returncode == 0, lint.stdout + lint.stderr
        return plain

    push(replicas["a"], 10.0)
    clock.t += 30
    push(replicas["b"], 20.0)  # the client moved: it pushes to b, a still holds its series
    client_series = {}
    for r, ex in replicas.items():
        found = families(ex)
        names = {f.name for f in found}
        assert "kip714_build_info" in names and "kip714_pushes" in names and "kip714_client_instances" in names
        assert ("kip714_connections" in names) == (r == "a")
        for f in found:
            for s in f.samples:
                if f.name.startswith("kip714_") and f.name not in PER_CLIENT_FAMILIES:
                    assert s.labels.get("replica") == r, (r, s)
                else:
                    assert "replica" not in s.labels, (r, s)
        (build,) = [s for f in found if f.name == "kip714_build_info" for s in f.samples]
        assert build.labels == {"replica": r, "version": kip714.__version__} and build.value == 1
        client_series[r] = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for f in found
            if not f.name.startswith("kip714_") or f.name in PER_CLIENT_FAMILIES
            for s in f.samples
            if s.name != "kip714_client_last_push_timestamp_seconds"
        } | {
            (s.name, tuple(sorted(s.labels.items()))): None
            for f in found
            if f.name == "kip714_client_last_push_timestamp_seconds"
            for s in f.samples
        }
    assert client_series["a"].keys() == client_series["b"].keys() and len(client_series["a"]) == 2
    (who,) = {dict(labels)["client_instance_id"] for _, labels in client_series["a"]}
    assert sorted(client_series["a"].values(), key=str) != sorted(client_series["b"].values(), key=str)
    # a keeps the client until its expiry (3 × 30 s push interval = 90 s) after its last push there
    clock.t += 59
    assert replicas["a"].expire() == 0
    clock.t += 2
    assert replicas["a"].expire() == 1 and replicas["b"].expire() == 0
    gone = families(replicas["a"])
    assert not [f for f in gone if not f.name.startswith("kip714_")]
    (expired,) = [s for f in gone if f.name == "kip714_client_expired_timestamp_seconds" for s in f.samples]
    assert expired.labels == {"client_id": "mover", "client_instance_id": who}


def test_self_labels_are_checked():
    from kip714.errors import InvalidConfigError

    for bad in ({"__name__": "x"}, {"1replica": "x"}, {"re-plica": "x"}, {"replica": 3}):
        with pytest.raises(InvalidConfigError, match="self_labels"):
            PrometheusExporter(background=False, self_labels=bad)


def test_the_replica_id_is_the_replica_label_of_proxy_and_serve():
    import socket

    from kip714 import cli
    from kip714.cli._sinks import build_sinks

    parser = cli.build_parser(["proxy", "serve"])
    for argv, labels in (
        (["proxy", "--upstream", "127.0.0.1:9", "--replica-id", "kip714-2"], {"replica": "kip714-2"}),
        (["serve", "--replica-id", "collector-1"], {"replica": "collector-1"}),
        (["serve"], {"replica": socket.gethostname()}),  # the default, as the recording's kip714_replica
    ):
        (exporter,) = build_sinks(parser.parse_args([*argv, "--prometheus", "127.0.0.1:0"]))
        try:
            assert exporter.self_labels == labels
        finally:
            exporter.close()
