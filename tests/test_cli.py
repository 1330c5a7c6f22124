"""The kip714 command line, run as a user would: the console entry in a process of its own, the rest through
``cli.main`` in this process (the same code from the argument list on)."""

from __future__ import annotations

import contextlib
import io
import json
import pathlib
import subprocess
import sys

from kip714 import cli

DATA = pathlib.Path(__file__).parent / "data" / "captures"


def kip714(*args, check=True):
    """``cli.main(ARGS)`` here: (status, stdout, stderr) as a finished process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(list(args))
    proc = subprocess.CompletedProcess(["kip714", *args], status, out.getvalue(), err.getvalue())
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_help_lists_the_commands():
    proc = subprocess.run([sys.executable, "-m", "kip714", "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for cmd in ("decode", "demo", "serve"):
        assert cmd in proc.stdout


def test_demo_decodes_the_bundled_captures():
    out = kip714("demo", "--captures").stdout
    assert "Per-node request latency" in out and "kip714-probe-consumer" in out
    assert "75 data points from 7 frames" in out


def test_decode_table_and_json():
    out = kip714("decode", str(DATA / "producer_zstd_push_01_zstd.bin")).stdout
    assert "org.apache.kafka.producer.node.request.latency.avg" in out and "codec=zstd" in out
    lines = kip714("decode", "--json", str(DATA / "consumer_zstd_push_01_zstd.bin")).stdout.splitlines()
    rows = [json.loads(line) for line in lines]
    assert len(rows) == 15 and all(r["compression"] == "zstd" for r in rows)
    assert {r["attributes"].get("node.id") for r in rows if "node.request" in r["metric"]} == {"1", "-1"}


def test_decode_reports_bad_frames_with_their_kafka_error_code(tmp_path):
    good = (DATA / "producer_lz4_push_01_lz4.bin").read_bytes()
    bad = bytearray(good)
    bad[-40:-30] = b"\x00" * 10  # corrupt the lz4 payload
    (tmp_path / "bad.bin").write_bytes(bytes(bad))
    proc = kip714(
        "decode", "--summary", str(tmp_path / "bad.bin"), str(DATA / "producer_lz4_push_01_lz4.bin"), check=False
    )
    assert proc.returncode == 1
    assert "error code 87 INVALID_RECORD" in proc.stderr
    assert "producer_lz4_push_01_lz4.bin#0: PushTelemetry" in proc.stdout
    (tmp_path / "cut.bin").write_bytes(good[:-5])
    proc = kip714("decode", str(tmp_path / "cut.bin"), check=False)
    assert proc.returncode == 2 and "bytes after the last whole frame" in proc.stderr
