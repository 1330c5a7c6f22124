"""kip714's Grafana dashboards and Prometheus alert rules as generated (kip714.operations, kip714 dashboards):
the committed deploy/ folder is the generator's output, the dashboards read back unchanged through the SDK's
typed models, every panel query parses, panels say who pushes what they show, and the rules pass
``promtool check rules`` and their own ``promtool test rules`` for any labels and thresholds.
A real Prometheus evaluating them over live clients: tests/test_operations_prometheus.py."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from kip714 import cli
from kip714.operations import AlertSettings, alerts, dashboards, generate
from kip714.operations.alerts import render
from kip714.operations.panels import substitute
from kip714.operations.yaml_text import dump

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
PROMTOOL = shutil.which("promtool")
needs_sdk = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="grafana-foundation-sdk needs Python 3.11+ (its users skip on 3.10)"
)
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (make prometheus)")


def promtool(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


@needs_sdk
def test_deploy_holds_what_the_generator_writes(capsys):
    assert cli.main(["dashboards", "--out", str(DEPLOY), "--check"]) == 0, capsys.readouterr().out
    assert {str(p.relative_to(DEPLOY)) for p in DEPLOY.rglob("*") if p.is_file()} >= set(generate())


def test_deploy_rules_are_the_generators_without_the_sdk(capsys):
    assert cli.main(["dashboards", "--out", str(DEPLOY), "--only", "rules", "--check"]) == 0


@needs_sdk
def test_dashboards_read_back_unchanged_through_the_sdk_models():
    from kip714.operations.grafana import roundtrip_problems

    for path in sorted((DEPLOY / "grafana" / "dashboards").glob("*.json")):
        text = path.read_text()
        assert roundtrip_problems(text) == [], path.name
        board = json.loads(text)
        assert board["schemaVersion"] == 41 and board["uid"] == path.stem
        panels = [p for p in board["panels"] if p["type"] != "row"]
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids)) and all(isinstance(i, int) and i > 0 for i in ids)
        for p in panels:
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
            assert all(t["datasource"]["uid"] == "${datasource}" for t in p["targets"]), p["title"]
            assert p["description"] and p["targets"], p["title"]
        assert board["templating"]["list"][0]["type"] == "datasource"


@needs_sdk
def test_a_damaged_dashboard_is_caught_by_the_round_trip():
    from kip714.operations.grafana import roundtrip_problems, to_json

    board = json.loads(to_json(dashboards()[0]))
    board["panels"][1]["titel"] = board["panels"][1].pop("title")
    board["panels"][1]["targets"][0]["legendFromat"] = "x"
    problems = roundtrip_problems(json.dumps(board))
    assert "dropped /panels[1]/titel" in problems and "dropped /panels[1]/targets[0]/legendFromat" in problems


def test_panel_ids_are_stable_and_the_datasource_is_a_variable():
    first, again = dashboards(), dashboards()
    assert [[(p.id, p.title) for p in d.panels] for d in first] == [[(p.id, p.title) for p in d.panels] for d in again]
    assert [d.uid for d in first] == [
        "kip714-producers",
        "kip714-consumers",
        "kip714-streams",
        "kip714-fleet",
        "kip714-self",
    ]


def test_panels_say_who_pushes_what_they_show():
    by_title = {(d.uid, p.title): p for d in dashboards() for p in d.panels}
    standard = by_title[("kip714-producers", "Request latency by broker (avg)")]
    assert not standard.client_specific and "every client pushes it" in standard.description
    java = by_title[("kip714-producers", "Record errors/s (Java clients only)")]
    assert java.client_specific and "Client-specific: pushed by Java clients only" in java.description
    both = by_title[("kip714-producers", "Produce request latency (avg) (Java and librdkafka clients only)")]
    assert both.senders == {"java", "librdkafka"}
    assert by_title[("kip714-consumers", "Records lag (max over partitions) (Java clients only)")].client_specific
    streams = [p for (uid, _), p in by_title.items() if uid == "kip714-streams"]
    assert streams and all(p.client_specific and p.title.endswith("(Kafka Streams applications only)") for p in streams)
    proxy = by_title[("kip714-self", "Upstream errors/s (kip714 proxy only)")]
    assert not proxy.client_specific and proxy.feature == "proxy"
    # librdkafka pushes no fetch throttle and no lag: every panel over them is marked
    for p in by_title.values():
        if any(
            m
            in (
                "org_apache_kafka_consumer_fetch_manager_records_lag_max",
                "org_apache_kafka_consumer_fetch_manager_fetch_throttle_time_avg",
            )
            for q in p.queries
            for m in q.metrics
        ):
            assert p.client_specific and "librdkafka" not in p.senders, p.title


@pytest.mark.parametrize("labels", ["client_id,client_instance_id", "client_id", "client_instance_id,principal", ""])
def test_the_client_identity_follows_prometheus_labels(labels):
    chosen = [n for n in labels.split(",") if n]
    others = {"client_id", "client_instance_id", "principal"} - set(chosen)
    exprs = [q.expr for d in dashboards(labels) for p in d.panels for q in p.queries]
    exprs += [a.expr for a in alerts(labels)]
    for name in others:
        assert not any(re.search(rf"\b{name}\b", e) for e in exprs), name
    if chosen:
        assert any(f"by ({', '.join(chosen)}" in e for e in exprs)


@needs_promtool
@pytest.mark.parametrize("labels", ["client_id,client_instance_id", "client_id", ""])
def test_every_panel_query_parses(tmp_path, labels):
    """promtool parses every query (Grafana's variables substituted) as a recording rule."""
    queries = [q for d in dashboards(labels) for p in d.panels for q in p.queries]
    rules = {
        "groups": [
            {
                "name": "panels",
                "rules": [{"record": f"panel:{i}", "expr": substitute(q.expr)} for i, q in enumerate(queries)],
            }
        ]
    }
    (tmp_path / "panels.yml").write_text(dump(rules))
    proc = promtool("check", "rules", "panels.yml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(queries)} rules found" in proc.stdout


@needs_promtool
def test_the_shipped_rules_pass_promtool_check_and_their_unit_tests():
    rules_dir = DEPLOY / "prometheus"
    check = promtool("check", "rules", "kip714-rules.yml", cwd=rules_dir)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in check.stdout
    test = promtool("test", "rules", "kip714-rules.test.yml", cwd=rules_dir)
    assert test.returncode == 0, test.stdout + test.stderr


@needs_promtool
@pytest.mark.parametrize("labels,settings", [
    ("client_instance_id,principal", AlertSettings(
        window="1m", pending="30s", evaluation_interval="15s", streams_state_pending="1m", slow_broker_ratio=10,
        throttle_ms=100, max_error_rate=0.5, max_consumer_lag=5, push_error_ratio=0.5, queue_full_ratio=0.99,
        recording_lag_s=3, runbook_base="https://docs.example/dashboards/")),
    ("client_id", AlertSettings(window="30s", pending="0s", streams_state_pending="0s")),
])  # fmt: skip
def test_generated_rules_pass_their_tests_for_any_labels_and_thresholds(tmp_path, labels, settings):
    files = generate(labels, settings=settings, what="rules")
    for rel, text in files.items():
        (tmp_path / pathlib.Path(rel).name).write_text(text)
    test = promtool("test", "rules", "kip714-rules.test.yml", cwd=tmp_path)
    assert test.returncode == 0, test.stdout + test.stderr


@needs_promtool
def test_each_alert_is_tested_firing_and_not_firing_and_a_wrong_expectation_fails(tmp_path):
    import yaml

    tests = yaml.safe_load((DEPLOY / "prometheus" / "kip714-rules.test.yml").read_text())["tests"]
    for a in alerts():
        cases = [t["alert_rule_test"][0]["exp_alerts"] for t in tests if t["alert_rule_test"][0]["alertname"] == a.name]
        assert any(cases) and any(c == [] for c in cases), a.name
    shutil.copy(DEPLOY / "prometheus" / "kip714-rules.yml", tmp_path)
    first = yaml.safe_load((DEPLOY / "prometheus" / "kip714-rules.test.yml").read_text())
    first["tests"] = first["tests"][:1]  # KafkaClientBrokerLatencyOutlier fires (1), expecting "is 73 ms"
    text = dump(first)
    assert "is 73 ms" in text
    (tmp_path / "wrong.test.yml").write_text(text.replace("is 73 ms", "is 72 ms", 1))
    wrong = promtool("test", "rules", "wrong.test.yml", cwd=tmp_path)
    assert wrong.returncode != 0 and "KafkaClientBrokerLatencyOutlier fires" in wrong.stdout + wrong.stderr


def test_every_rule_names_the_client_and_its_evidence_and_has_a_runbook():
    docs = (ROOT / "docs" / "dashboards.md").read_text()
    for a in alerts():
        assert a.summary and a.description, a.name
        if a.group != "kip714-self":
            assert "$labels.client_id" in a.description, a.name
        assert re.search(r"\b(org_apache_kafka|kip714_|[a-z]+(\.[a-z]+)+|[a-z]+-[a-z-]+)", a.description), a.name
        assert re.search(rf"^### {a.name}$", docs, re.M), f"docs/dashboards.md has no runbook for {a.name}"
    urls = generate(settings=AlertSettings(runbook_base="https://docs.example/dashboards/"), what="rules")
    assert (
        'runbook_url: "https://docs.example/dashboards/#kafkaclientbrokerlatencyoutlier"'
        in urls["prometheus/kip714-rules.yml"]
    )


def test_alert_defaults_are_the_reports_insight_thresholds():
    report = pytest.importorskip("kip714.spark.report")
    a, r = AlertSettings(), report.ReportOptions()
    assert (a.slow_broker_ratio, a.slow_broker_min_ms, a.throttle_ms) == (
        r.slow_node_ratio,
        r.slow_node_min_ms,
        r.throttle_ms,
    )
    assert (a.max_error_rate, a.max_retry_rate, a.max_consumer_lag) == (
        r.max_error_rate,
        r.max_retry_rate,
        r.max_consumer_lag,
    )


def test_settings_and_labels_are_checked(capsys):
    with pytest.raises(ValueError, match="not a Prometheus duration"):
        AlertSettings(window="5 minutes")
    with pytest.raises(ValueError, match="at least 30s"):
        generate(settings=AlertSettings(window="10s"), what="rules")
    assert cli.main(["dashboards", "--out", "x", "--labels", "client_id,nope"]) == 2
    assert "unknown broker-added label nope" in capsys.readouterr().err
    names = {f.name for f in dataclasses.fields(AlertSettings)}
    parser = cli.build_parser(["dashboards"])
    assert names <= set(vars(parser.parse_args(["dashboards", "--out", "x"])))


def test_the_template_subset_renders_like_prometheus():
    assert render('{{ $labels.a }} is {{ $value | printf "%.4g" }} ({{ $labels.b }})', {"a": "x"}, 0.066666) == (
        "x is 0.06667 (<no value>)"
    )
    replica = "at {{ $labels.instance }}{{ if $labels.replica }} (replica {{ $labels.replica }}){{ end }}"
    assert render(replica, {"instance": "h:1", "replica": "r1"}, 1) == "at h:1 (replica r1)"
    assert render(replica, {"instance": "h:1"}, 1) == render(replica, {"instance": "h:1", "replica": ""}, 1) == "at h:1"


def test_the_yaml_writer_reads_back_as_written():
    yaml = pytest.importorskip("yaml")
    data = {
        "groups": [
            {
                "name": "g",
                "interval": "30s",
                "rules": [
                    {
                        "alert": "A",
                        "expr": "max by (a) (x)\n> 3\n",
                        "labels": {"severity": "warning"},
                        "annotations": {"summary": '{{ $labels.a }}: "quoted" #1', "description": "yes"},
                    }
                ],
            }
        ],
        "empty": [],
        "none": None,
        "flag": True,
        "n": 1.5,
        "nested": [[1, 2], {"k": "on"}],
    }
    assert yaml.safe_load(dump(data)) == data
