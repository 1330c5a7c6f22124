"""The command line speaks one language: durations and sizes, help on every option with its default, no reST
in --help, errors as one line naming the input with a documented exit status, never a traceback."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import pathlib
import socket
import subprocess
import sys
import uuid

import pytest

import kip714
from kip714 import cli
from kip714._units import duration, parse_duration, parse_size, size
from kip714.cli import EXIT_STATUS, build_parser
from kip714.sinks.recorder import OPEN_DIR, ParquetRecorder, read_recording

DATA = pathlib.Path(__file__).parent / "data" / "captures"
PUSH = DATA / "producer_zstd_push_01_zstd.bin"


def kip714_cli(*args, timeout=120):
    """``python -m kip714 ARGS`` in a process of its own (for what needs one: a run, a pipe, a socket)."""
    return subprocess.run([sys.executable, "-m", "kip714", *args], capture_output=True, text=True, timeout=timeout)


def kip714_here(*args) -> subprocess.CompletedProcess:
    """``cli.main(ARGS)`` in this process, as a finished process (for argument parsing and the error lines of
    commands that fail before they start anything)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli.main([str(a) for a in args])
        except SystemExit as exc:  # argparse: usage errors
            status = exc.code
    return subprocess.CompletedProcess(["kip714", *args], status, out.getvalue(), err.getvalue())


def one_line_error(proc, status, *needles):
    assert proc.returncode == status, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


# ------------------------------------------------------------------------------------------ durations


@pytest.mark.parametrize(
    "text,ms",
    [
        ("90s", 90_000),
        ("10m", 600_000),
        ("2h", 7_200_000),
        ("1h30m", 5_400_000),
        ("500ms", 500),
        ("2.5", 2500),
        ("3", 3000),
        ("1d", 86_400_000),
    ],
)
def test_one_duration_syntax(text, ms):
    assert parse_duration(text) == ms
    assert duration(text) == ms / 1000


@pytest.mark.parametrize("bad", ["", "2x", "s", "10m5", "-5s"])
def test_bad_durations_are_refused(bad):
    with pytest.raises((ValueError, argparse.ArgumentTypeError)):
        duration(bad)


def test_sizes():
    assert parse_size("64MB") == 64 << 20 and parse_size("512KiB") == 512 << 10 and parse_size("1g") == 1 << 30
    assert size("1000") == 1000
    with pytest.raises(argparse.ArgumentTypeError):
        size("lots")


def test_every_duration_option_takes_the_same_syntax():
    parser = build_parser()
    for argv, dest in [
        (["serve", "--duration", "2s"], "duration"),
        (["serve", "--idle-timeout", "10m"], "idle_timeout"),
        (["serve", "--summary-interval", "1.5"], "summary_interval"),
        (["serve", "--record-roll-interval", "1h"], "record_roll_interval"),
        (["simulate", "--duration", "2h"], "duration"),
        (["demo", "--duration", "3s"], "duration"),
        (["demo", "--seconds", "3"], "duration"),
    ]:
        got = getattr(parser.parse_args(argv), dest)
        assert got == duration(argv[-1]), argv


# ------------------------------------------------------------------------------------------ --help


def _subparsers(parser):
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_help_is_plain_text_with_help_and_defaults_on_every_option():
    parser = build_parser()
    for name, sub in _subparsers(parser).items():
        text = sub.format_help()
        for markup in ("``", ":class:", ":mod:", ":func:", ":meth:"):
            assert markup not in text, f"kip714 {name} --help shows reST {markup}"
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"kip714 {name} {action.option_strings or action.dest} has no help"
            if action.option_strings and action.default not in (None, False, [], argparse.SUPPRESS):
                assert "default" in action.help, f"kip714 {name} {action.option_strings[0]} hides its default"


def test_top_help_documents_the_exit_statuses():
    text = build_parser().format_help()
    for code, meaning in EXIT_STATUS.items():
        assert f"{code:<4} {meaning.split()[0]}" in text


def test_pipeline_help_names_the_working_spark_submit_entry_point():
    text = _subparsers(build_parser())["pipeline"].format_help()
    assert "kip714.spark.submit" in text and "kip714.pipeline" not in text


# ------------------------------------------------------------------------------------------ errors


def test_missing_file_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    proc = kip714_here("decode", "nonexist.bin")
    one_line_error(proc, 2, "kip714 decode:", "nonexist.bin", "No such file")


def test_text_file_is_named(tmp_path):
    (tmp_path / "notes.txt").write_text("hello, this is not a Kafka frame\n")
    proc = kip714_here("decode", str(tmp_path / "notes.txt"))
    one_line_error(proc, 2, "notes.txt", "not a file of size-prefixed Kafka request frames", "INVALID_REQUEST")


def test_truncated_file_is_named(tmp_path):
    (tmp_path / "cut.bin").write_bytes(PUSH.read_bytes()[:30])
    proc = kip714_here("decode", str(tmp_path / "cut.bin"))
    one_line_error(proc, 2, "cut.bin", "truncated")


def test_closed_pipe_is_quiet(tmp_path):
    files = " ".join(str(p) for p in sorted(DATA.glob("*_push_*.bin")))
    proc = subprocess.run(
        f'{sys.executable} -m kip714 decode --json {files} | head -2; echo "status=${{PIPESTATUS[0]}}"',
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = proc.stdout.splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["api_key"] == 72
    assert lines[-1] == "status=141"
    assert proc.stderr == "", proc.stderr


def test_pipeline_on_a_missing_folder(tmp_path):
    proc = kip714_here("pipeline", "/nonexistent-kip714", str(tmp_path / "out"))
    one_line_error(proc, 2, "kip714 pipeline:", "/nonexistent-kip714", "does not exist")


def test_a_failed_spark_job_is_one_line_with_status_1(monkeypatch, capsys, tmp_path):
    """The job raises SparkJobError (what ran out, what to raise); kip714 pipeline and kip714.spark.submit
    print it as one line with status 1; with --verbose, the Spark error's traceback instead."""
    from kip714.spark import pipeline, submit

    def fail(*args, **kwargs):
        raise RuntimeError("boom\nmore detail")

    monkeypatch.setattr(pipeline, "run_pipeline", fail)
    monkeypatch.setattr(pipeline, "quiet_gateway_errors", lambda: None)
    monkeypatch.setattr(pipeline, "jvm_exited", lambda: False)
    argv = [str(PUSH), str(tmp_path / "out"), "--quiet"]
    line = "Spark job failed: boom (--verbose shows the traceback)"
    assert cli.main(["pipeline", *argv]) == 1
    assert capsys.readouterr().err.splitlines() == [f"kip714 pipeline: {line}"]
    assert submit.run(argv) == 1
    assert capsys.readouterr().err.splitlines() == [f"kip714.spark.submit: {line}"]
    with pytest.raises(RuntimeError, match="boom"):
        cli.main(["pipeline", *argv, "--verbose"])


def test_bad_duration_is_a_usage_error():
    proc = kip714_here("serve", "--duration", "soon")
    assert proc.returncode == 2 and "not a duration: 'soon'" in proc.stderr and "Traceback" not in proc.stderr


def test_decode_prints_kafka_instance_id_text():
    rows = [json.loads(ln) for ln in kip714_here("decode", "--json", str(PUSH)).stdout.splitlines()]
    body = kip714.decode_request(kip714.split_frames(PUSH.read_bytes())[0][0]).body
    assert {r["client_instance_id"] for r in rows} == {kip714.kafka_uuid_string(body.client_instance_id)}


# ------------------------------------------------------------------------------------------ serve, simulate


def test_serve_without_a_subscription_says_so():
    proc = kip714_cli("serve", "--port", "0", "--duration", "0.3s")
    assert proc.returncode == 0, proc.stderr
    assert "event=no_subscription" in proc.stderr and "--metrics '*'" in proc.stderr
    proc = kip714_cli("serve", "--port", "0", "--duration", "300ms", "--metrics", "*")
    assert proc.returncode == 0 and "no_subscription" not in proc.stderr
    assert proc.stderr.count("event=stopped") == 1 and proc.stdout == ""


def test_simulate_connect_last_progress_line_matches_the_summary():
    """Pushes answered after the last periodic progress line (the terminating ones) are in a final line."""
    import asyncio
    import threading

    from kip714 import SubscriptionRegistry, TelemetryBroker
    from kip714.endpoint.server import TelemetryServer
    from kip714.tools.simulate import Fleet

    registry = SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": "30000"})  # only the terminating pushes are due
    server = TelemetryServer(TelemetryBroker(registry), "127.0.0.1", 0)
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def serve():
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10)
    lines = []
    try:
        stats = Fleet(2, 2, seed=1).run_tcp(
            "127.0.0.1", server.port, 1.5, progress=lambda st: lines.append(st.progress_line())
        )
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
    assert stats.accepted == 4 and stats.terminating_pushes == 4
    assert "accepted 4 " in lines[-1]


# ------------------------------------------------------------------------------------------ recordings


def _row(i):
    return {
        "received_at_ms": i,
        "client_instance_id": "x",
        "error_code": 0,
        "payload": b"p" * 100,
        "compression_type": 0,
    }


def test_recorder_rolls_by_time_and_keeps_rows_durable(tmp_path):
    rec = ParquetRecorder(tmp_path, flush_interval_s=3600, roll_interval_s=3600)
    for i in range(5):
        rec.record(_row(i))
        rec.flush()  # each flush is a durable part, readable at once
    assert len(list((tmp_path / OPEN_DIR).glob("part-*.parquet"))) == 5
    assert not list(tmp_path.glob("*.parquet")) and read_recording(tmp_path).num_rows == 5
    rec.roll_interval_s = 0.001  # the file is due: the next flush rolls the parts into one file
    rec.record(_row(5))
    rec.flush()
    assert len(list(tmp_path.glob("push-*.parquet"))) == 1 and not list((tmp_path / OPEN_DIR).iterdir())
    rec.close()
    assert read_recording(tmp_path).column("received_at_ms").to_pylist() == list(range(6))


def test_recorder_rolls_by_size(tmp_path):
    rec = ParquetRecorder(tmp_path, flush_interval_s=3600, roll_bytes=1, roll_interval_s=3600)
    for i in range(3):
        rec.record(_row(i))
        rec.flush()
    rec.close()
    assert len(list(tmp_path.glob("push-*.parquet"))) == 3 and rec.files_written == 3


def test_recorder_rolls_parts_a_crash_left(tmp_path):
    rec = ParquetRecorder(tmp_path, flush_interval_s=3600)
    rec.record(_row(1))
    rec.flush()
    rec._stop.set()  # "crash": never closed
    again = ParquetRecorder(tmp_path, flush_interval_s=3600)
    assert not list((tmp_path / OPEN_DIR).iterdir()) and len(list(tmp_path.glob("push-*.parquet"))) == 1
    again.close()
    assert read_recording(tmp_path).num_rows == 1


def test_serve_rolls_recordings_once_per_interval(tmp_path):
    """A second of pushes is one file at the defaults (it used to be one file per flush)."""
    from kip714 import SubscriptionRegistry, TelemetryBroker
    from kip714.tools.simulate import Fleet

    registry = SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": "1000"})
    rec = ParquetRecorder(tmp_path / "rec", flush_interval_s=0.05)
    try:
        Fleet(2, 2, seed=2).run_in_process(TelemetryBroker(registry), "2m", recorder=rec)
    finally:
        rec.close()
    assert len(list((tmp_path / "rec").glob("*.parquet"))) == 1
    assert read_recording(tmp_path / "rec").num_rows == rec.rows_written > 400


# ------------------------------------------------------------------------------------------ responses


def test_decode_response_reads_what_encode_response_writes():
    resp = kip714.PushTelemetryResponse(throttle_time_ms=7, error_code=0)
    wire = kip714.encode_response(9, resp, 0)
    assert kip714.decode_response(wire, 72, 0, size_prefixed=True).body == resp
    frames, _ = kip714.split_frames(wire)
    assert kip714.decode_response(frames[0], 72, 0).body == resp
    with pytest.raises(kip714.errors.MalformedFrameError, match="size_prefixed=True"):
        kip714.decode_response(wire, 72, 0)
    with pytest.raises(kip714.errors.MalformedFrameError, match="size prefix says"):
        kip714.decode_response(wire[:-1], 72, 0, size_prefixed=True)


@pytest.mark.parametrize(
    "body",
    [
        kip714.PushTelemetryRequest(client_instance_id=uuid.UUID(int=5), metrics=b"x" * 300),
        kip714.GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)),
        kip714.wire.ApiVersionsRequest(client_software_name="a", client_software_version="1"),
    ],
)
def test_decode_request_says_when_a_frame_still_has_its_size_prefix(body):
    wire = kip714.encode_request(body, 9, "client")
    assert kip714.decode_request(wire[4:]).body == body
    with pytest.raises(kip714.Kip714Error, match=r"starts with its own size prefix: split_frames first") as info:
        kip714.decode_request(wire)
    assert info.value.error_code in (kip714.ErrorCode.INVALID_REQUEST, kip714.ErrorCode.UNSUPPORTED_VERSION)
    # a frame that merely fails (no prefix) gets no such hint
    with pytest.raises(kip714.Kip714Error) as plain:
        kip714.decode_request(wire[4:-1])
    assert "size prefix" not in str(plain.value)


def test_no_annotations_name_in_the_public_api():
    assert "annotations" not in kip714.__all__ and not hasattr(kip714, "annotations")


@pytest.mark.parametrize(
    "args,needle",
    [
        (["serve", "--port", "70000"], "argument --port: a port must be 0-65535, got 70000"),
        (["serve", "--port", "-1"], "argument --port: a port must be 0-65535, got -1"),
        (["serve", "--advertised-port", "0"], "argument --advertised-port: a port clients connect to must be 1-65535"),
        (["serve", "--node-id", "-5"], "argument --node-id: a node id must be 0-2147483647, got -5"),
        (["proxy", "--upstream", "127.0.0.1:1", "--broker-port-base", "65536"], "argument --broker-port-base"),
        (["simulate", "--node-id", "x"], "argument --node-id: not a whole number: 'x'"),
        (
            ["proxy", "--upstream", "127.0.0.1:1", "--advertised-host", "proxy.example.com:9999"],
            "argument --advertised-host: give the host only, without a port",
        ),
        (["serve", "--advertised-host", "bad host"], "argument --advertised-host: not a host name"),
        (
            ["proxy", "--upstream", "127.0.0.1:1", "--telemetry", "off", "--record", "rec"],
            "--telemetry off forwards telemetry untouched: --record would receive nothing",
        ),
        (["serve", "--proxy-protocol-from", "10.0.0.0/8"], "--proxy-protocol-from needs --proxy-protocol"),
        (
            ["proxy", "--upstream", "127.0.0.1:1", "--proxy-protocol", "--proxy-protocol-from", "10.0.0.0/33"],
            "--proxy-protocol-from: '10.0.0.0/33' is not an address or CIDR block",
        ),
        (
            [
                "proxy",
                "--upstream",
                "127.0.0.1:1",
                "--advertised-broker-port-base",
                "9",
                "--advertised-broker-ports",
                "1=2",
            ],
            "give --advertised-broker-ports or --advertised-broker-port-base, not both",
        ),
        (
            ["serve", "--drain-timeout", "4s", "--drain-spread", "3s"],
            "--drain-spread 3s is more than half of --drain-timeout 4s",
        ),
    ],
)
def test_out_of_range_ports_and_node_ids_are_usage_errors(args, needle):
    # uvloop took --port 70000 modulo 65536 and listened on 4464; asyncio raised OverflowError (status 1)
    proc = kip714_here(*args, "--duration", "1")
    assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_tls_files_are_named_in_errors(tmp_path):
    from tls_cert import make_cert

    cert, key = make_cert(tmp_path)
    (tmp_path / "cert-only.pem").write_text(pathlib.Path(cert).read_text())
    serve = ["serve", "--metrics", "*", "--port", "0", "--duration", "1"]
    one_line_error(
        kip714_here(*serve, "--tls-cert", str(tmp_path / "nonexist.pem")),
        2,
        "kip714 serve: --tls-cert",
        "nonexist.pem: no such file",
        "INVALID_CONFIG",
    )
    one_line_error(
        kip714_here(*serve, "--tls-cert", str(tmp_path / "cert-only.pem")),
        2,
        "--tls-cert",
        "cert-only.pem",
        "cannot load a certificate chain and its private key",
        "without --tls-key",
    )
    one_line_error(
        kip714_here(*serve, "--tls-cert", cert, "--tls-key", str(tmp_path / "nokey.pem")),
        2,
        "--tls-key",
        "nokey.pem: no such file",
    )
    # an option that would be ignored is refused instead
    one_line_error(
        kip714_here(*serve, "--prometheus-tls-cert", cert, "--prometheus-tls-key", key),
        2,
        "--prometheus-tls-cert needs --prometheus",
    )
    # in a process of its own: the exporter has started when its certificate fails to load
    one_line_error(
        kip714_cli(*serve, "--prometheus", "127.0.0.1:0", "--prometheus-tls-cert", str(tmp_path / "cert-only.pem")),
        2,
        "--prometheus-tls-cert",
        "cert-only.pem",
        "without --prometheus-tls-key",
    )
    one_line_error(
        kip714_here(
            "proxy",
            "--upstream",
            "127.0.0.1:1",
            "--port",
            "0",
            "--upstream-tls",
            "--upstream-ca",
            str(tmp_path / "ca.pem"),
            "--duration",
            "1",
        ),
        2,
        "--upstream-ca",
        "ca.pem: no such file",
    )


def test_a_busy_port_names_the_listener():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        one_line_error(
            kip714_cli("serve", "--metrics", "*", "--port", str(port), "--duration", "1"),
            2,
            f"kip714 serve: cannot listen on 127.0.0.1:{port}: address already in use",
        )
        one_line_error(
            kip714_cli(
                "serve", "--metrics", "*", "--port", "0", "--prometheus", f"127.0.0.1:{port}", "--duration", "1"
            ),
            2,
            f"kip714 serve: --prometheus 127.0.0.1:{port}: cannot listen: address already in use",
        )
