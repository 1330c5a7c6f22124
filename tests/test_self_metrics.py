"""kip714's own metrics for its dashboard and alert rules (issue 29): the recording lag."""

from __future__ import annotations

import time
import uuid

import pytest

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

from kip714 import PrometheusExporter
from kip714.broker.receivers import ReceiverContext
from kip714.broker.subscriptions import ClientInfo
from kip714.sinks.recorder import ParquetRecorder


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
