"""``kip714 conformance`` against real clients: librdkafka (the confluent-kafka producer and consumer, with each
codec first), kip714's own ClientTelemetry, and a client started by the test while the lab listens. Also the
outputs: results.json, JUnit XML read by a standard reader (junitparser), index.html rendered by headless Chromium.

Every run uses ``--jobs``/``jobs=`` (all scenarios at once, each on its own ports): the whole file runs in about
half a minute. The measured librdkafka table is written down in docs/conformance.md.
"""

from __future__ import annotations

import json
import queue
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from service_helpers import free_port_run

from kip714 import conformance
from kip714.conformance.clients import run_kip714_client

pytest.importorskip("confluent_kafka")

ALL = conformance.SCENARIO_IDS
#: librdkafka 2.16.0 breaks these two rules; everything else passes (docs/conformance.md, the compliance table)
RDKAFKA_FAILS = {"unsupported_compression", "telemetry_too_large"}
#: kip714's ClientTelemetry does not claim telemetry_too_large: it sends oversized payloads, like both real clients
KIP714_CLIENT_FAILS = {"telemetry_too_large"}
#: the push interval the lab gives kip714's own client (see test_kip714_client_telemetry_passes_what_it_claims)
KIP714_CLIENT_INTERVAL_MS = 2000


def _statuses(results):
    return {r.scenario: r.status for r in results}


def _cli(*args, timeout=240):
    return subprocess.run(
        [sys.executable, "-m", "kip714", "conformance", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def producer_run(tmp_path_factory):
    """The whole set against the confluent-kafka producer, through the command line (results.json, JUnit, HTML)."""
    out = tmp_path_factory.mktemp("producer")
    junit = out / "junit.xml"
    started = time.monotonic()
    proc = _cli("--client", "confluent-producer", "--jobs", str(len(ALL)), "--out", str(out), "--junit", str(junit))
    elapsed = time.monotonic() - started
    results = json.loads((out / "results.json").read_text())
    return proc, out, junit, results, elapsed


@pytest.fixture(scope="module")
def consumer_and_kip714_results():
    """The whole set against the confluent-kafka consumer and, at the same time, against kip714's own
    ClientTelemetry driven in this process (run_kip714_client in threads: a Python API client)."""
    results = {}

    def one(name, client, **kw):
        results[name] = conformance.run(client, jobs=len(ALL), **kw)

    threads = [
        threading.Thread(target=one, args=("consumer", "confluent-consumer")),
        threading.Thread(
            target=one,
            args=("kip714", run_kip714_client),
            kwargs={"startup_s": 1.0, "interval_ms": KIP714_CLIENT_INTERVAL_MS},
        ),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def _expect(results, fails):
    statuses = {
        r["scenario"] if isinstance(r, dict) else r.scenario: r["status"] if isinstance(r, dict) else r.status
        for r in results
    }
    assert list(statuses) == list(ALL)
    expected = {s: ("fail" if s in fails else "pass") for s in ALL}
    why = {
        r["scenario"] if isinstance(r, dict) else r.scenario: r["why"] if isinstance(r, dict) else r.why
        for r in results
    }
    assert statuses == expected, {s: (statuses[s], why[s]) for s in ALL if statuses[s] != expected[s]}


def test_librdkafka_producer_breaks_exactly_the_two_rules_it_breaks(producer_run):
    proc, _out, _junit, results, elapsed = producer_run
    assert proc.returncode == 1, proc.stderr  # something failed
    _expect(results, RDKAFKA_FAILS)
    by = {r["scenario"]: r for r in results}
    assert all(r["client_software_name"] == "confluent-kafka-python" for r in results)
    assert "rdkafka-2.16" in by["push_interval"]["client_software_version"]
    assert "unsupported_compression" in proc.stdout and "client software: confluent-kafka-python" in proc.stdout
    assert elapsed < 60


def _check_rdkafka_evidence(by):
    # 001:1837 "Immediately send a GetTelemetrySubscriptionsRequest": librdkafka waits PushIntervalMs (500 ms)
    unsupported = by["unsupported_compression"]
    assert unsupported["why"].startswith("the Get came ") and "'immediately' allows 100 ms" in unsupported["why"]
    late_ms = float(unsupported["why"].split()[3])
    assert 400 <= late_ms <= 1000
    assert any("which the new answer accepts" in n for n in unsupported["evidence"]["notes"])  # that half is right
    # 001:1829 "Reduce the size of the metrics payload": librdkafka re-sends the same size after 118
    too_large = by["telemetry_too_large"]
    assert "still exceeded TelemetryMaxBytes 64" in too_large["why"]
    oversized = [
        f
        for f in too_large["evidence"]["frames"]
        if f.get("api") == "PushTelemetry" and f["request"]["metrics_bytes"] > 64 and f["answer"]["error_code"] == 118
    ]
    assert len(oversized) >= 2
    # connection_lost: telemetry back after the lab's close (confirmed for producer and consumer, issue 27 q. 8)
    lost = by["connection_lost"]["evidence"]["frames"]
    closed = [f for f in lost if f.get("event") == "connection closed" and f.get("by") == "lab"]
    telemetry = ("PushTelemetry", "GetTelemetrySubscriptions")
    assert closed and any(f.get("api") in telemetry and f["t_ms"] > closed[0]["t_ms"] for f in lost)
    # payload_valid stepped the client through every codec of the default list, then none
    assert "zstd, lz4, gzip, snappy, none" in by["payload_valid"]["why"]


def test_librdkafka_producer_evidence(producer_run):
    _check_rdkafka_evidence({r["scenario"]: r for r in producer_run[3]})


def test_librdkafka_consumer_breaks_the_same_two_rules(consumer_and_kip714_results):
    results = consumer_and_kip714_results["consumer"]
    _expect(results, RDKAFKA_FAILS)
    _check_rdkafka_evidence({r.scenario: r.to_json() for r in results})
    assert conformance.exit_status(results) == 1


def test_librdkafka_with_each_codec_first():
    """librdkafka takes the first type it supports in the broker's order: each codec in turn carries the
    payloads, decodes, and survives the refusal of that codec (default order, zstd first: the runs above)."""
    results = {}

    def one(kind, first):
        order = ",".join([first] + [c for c in ("zstd", "lz4", "gzip", "snappy") if c != first])
        results[kind, first] = conformance.run(
            kind, ["payload_valid", "unsupported_compression"], compression=order, jobs=2
        )

    threads = [
        threading.Thread(target=one, args=(k, c))
        for k in ("confluent-producer", "confluent-consumer")
        for c in ("gzip", "snappy", "lz4")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == 6
    for (kind, first), res in results.items():
        by = {r.scenario: r for r in res}
        assert by["payload_valid"].status == "pass", (kind, first, by["payload_valid"].why)
        pushes = [f for f in by["payload_valid"].evidence["frames"] if f.get("api") == "PushTelemetry"]
        assert pushes[0]["request"]["compression_type"] == {"gzip": 1, "snappy": 2, "lz4": 3}[first]
        assert f"decoded ({first}, " in by["payload_valid"].why
        refused = by["unsupported_compression"]
        assert refused.status == "fail" and refused.why.startswith("the Get came "), (kind, first, refused.why)
        assert any("which the new answer accepts" in n for n in refused.evidence["notes"])


def test_kip714_client_telemetry_passes_what_it_claims(consumer_and_kip714_results):
    """kip714's ClientTelemetry (the Java client's state machine) over a socket: everything but
    telemetry_too_large, which it does not claim (it sends oversized payloads, like Java before KAFKA-21077)."""
    results = consumer_and_kip714_results["kip714"]
    _expect(results, KIP714_CLIENT_FAILS)
    by = {r.scenario: r for r in results}
    assert {r.client_software_name for r in results} == {"kip714-client"}
    # interval_ms=2000 (--interval-ms): every scenario but the terminating ones (always 30 s) used it. (2000,
    # not 500: "immediately" is max(100 ms, 0.2 I), and this client's threads share a process with two labs
    # running every scenario at once, on a machine the suite keeps busy: a re-Get came 156 ms after its answer
    # once at 500, 181 ms once at 800 and 256 ms once at 1000, in CI.)
    assert {s: r.evidence["push_interval_ms"] for s, r in by.items()} == {
        s: 30000 if s.startswith("terminating") else KIP714_CLIENT_INTERVAL_MS for s in ALL
    }
    # "then every 2000 ms–20xx ms": the gaps between pushes are the interval, never less
    gaps = re.search(r"then every (\d+) ms–(\d+) ms", by["push_interval"].why)
    assert gaps and KIP714_CLIENT_INTERVAL_MS - 5 <= int(gaps[1]) <= int(gaps[2]), by["push_interval"].why
    # the lab's Metadata names two brokers: after the lab closes its connection to node 1 (the bootstrap),
    # this client opens one to the next broker Metadata named
    assert by["connection_lost"].why.endswith("(node 2)")


# ------------------------------------------------------------------------------------------------- outputs


def test_junit_counts_equal_results_json(producer_run):
    from junitparser import Error, Failure, JUnitXml, Skipped

    _proc, _out, junit, results, _elapsed = producer_run
    xml = JUnitXml.fromfile(str(junit))
    suites = list(xml)
    assert len(suites) == 1
    suite = suites[0]
    cases = list(suite)
    assert [c.name for c in cases] == [r["scenario"] for r in results]
    kinds = {c.name: {type(x) for x in c.result} for c in cases}
    for r in results:
        want = {"pass": set(), "fail": {Failure}, "error": {Error}, "n/a": {Skipped}}[r["status"]]
        assert kinds[r["scenario"]] == want
    counts = {s: sum(r["status"] == s for r in results) for s in ("fail", "error", "n/a")}
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (
        len(results),
        counts["fail"],
        counts["error"],
        counts["n/a"],
    )
    for r in results:
        assert set(r) >= {"scenario", "status", "rule", "evidence", "client_software_name", "client_software_version"}
        assert r["rule"].startswith("00") and '"' in r["rule"]  # the KIP's words, with their line
        assert r["evidence"]["frames"] and all("t_ms" in f for f in r["evidence"]["frames"])


def test_html_page_is_one_self_contained_page_that_renders(producer_run, tmp_path):
    _proc, out, _junit, results, _elapsed = producer_run
    page = (out / "index.html").read_text()
    assert "<script" not in page and "http://" not in page and "https://" not in page and "<link" not in page
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("chromium is not installed (make chromium installs it)")

    def chrome(profile: str, *extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={tmp_path / profile}",
                *extra,
                (out / "index.html").as_uri(),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    shot = tmp_path / "index.png"
    dumping, shooting = chrome("dom", "--dump-dom"), chrome("shot", "--window-size=1200,1400", f"--screenshot={shot}")
    dom, _ = dumping.communicate(timeout=60)
    shooting.communicate(timeout=60)
    assert dom.count("<table") >= len(results) + 1
    assert all(f'id="{r["scenario"]}"' in dom for r in results)
    from PIL import Image

    colors = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20)
    fail_red, pass_green = (255, 214, 214), (216, 243, 220)  # the verdict cells of the stylesheet
    assert any(c == fail_red for _, c in colors) and any(c == pass_green for _, c in colors)


# ------------------------------------------------------------------------------------------------- --listen


def test_listen_mode_says_what_it_expects_and_judges_a_client_it_did_not_start(tmp_path):
    port = free_port_run(2)
    lab = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kip714",
            "conformance",
            "--listen",
            f"127.0.0.1:{port}",
            "--scenario",
            "terminating_push",
            "--scenario",
            "terminating_resubscribe",
            "--startup",
            "1.5",
            "--out",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert lab.stdout is not None
        for line in lab.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    clients = Path(conformance.__file__).with_name("clients.py")
    said, started = [], []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if line is None:
                break
            said.append(line)
            if "start the client now" in line:
                assert f"bootstrap 127.0.0.1:{port}" in line
                seconds = line.split("let it run ")[1].split(" s,")[0]
                started.append(
                    subprocess.Popen(
                        [sys.executable, str(clients), "confluent-consumer", f"127.0.0.1:{port}", seconds],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
        assert lab.wait(30) == 0, "".join(said)
    finally:
        for proc in [lab, *started]:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    prompts = [line for line in said if "start the client now" in line]
    assert [p.split(":")[0] for p in prompts] == ["scenario terminating_push", "scenario terminating_resubscribe"]
    assert any(line.startswith("terminating_push: pass") for line in said)
    results = json.loads((tmp_path / "results.json").read_text())
    assert [(r["scenario"], r["status"]) for r in results] == [
        ("terminating_push", "pass"),
        ("terminating_resubscribe", "pass"),
    ]


# ------------------------------------------------------------------------------------------------- errors


def _silent_client(bootstrap: str, seconds: float) -> None:
    """Connects, asks ApiVersions, then stays silent: a client without KIP-714 (or with it turned off)."""
    from kafka.protocol.metadata import ApiVersionsRequest

    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        request = ApiVersionsRequest(version=3, client_software_name="silent", client_software_version="1")
        request.with_header(correlation_id=1, client_id="silent")
        sock.sendall(request.encode(header=True, framed=True))
        sock.recv(65536)
        time.sleep(min(seconds, 0.3))


def test_a_client_without_telemetry_is_na_and_one_that_never_runs_is_error(capsys):
    results = conformance.run(_silent_client, ["push_interval", "terminating_push"], jobs=2, startup_s=0.5)
    assert {r.status for r in results} == {"n/a"}
    assert all("no GetTelemetrySubscriptions" in r.why and "telemetry disabled" in r.why for r in results)
    assert conformance.exit_status(results) == 0
    assert {r.client_software_name for r in results} == {"silent"}

    [missing] = conformance.run("kip714-no-such-command {bootstrap} {seconds}", ["first_contact"])
    [exits] = conformance.run(f"{sys.executable} -c pass {{bootstrap}} {{seconds}}", ["first_contact"])
    assert missing.status == "error" and "cannot start" in missing.why
    assert exits.status == "error" and "without connecting" in exits.why
    assert conformance.exit_status([missing]) == 1


def test_the_command_line_refuses_a_client_it_cannot_fill_in(capsys):
    from kip714.cli import main

    assert main(["conformance", "--client", "no placeholders here"]) == 2
    assert "{bootstrap}" in capsys.readouterr().err
    assert main(["conformance"]) == 2
    assert "--client" in capsys.readouterr().err
