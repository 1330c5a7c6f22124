"""``kip714 bench``: the table, the JSON, the plots, skipped peers and --only (run in-process, quick)."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sys

import pytest

from kip714 import cli
from kip714.cli import bench as bench_cli
from kip714.tools import bench

pytest.importorskip("matplotlib")

COLUMNS = ["operation", "kip714", "peer", "ratio", "goal", "met"]


def _run(argv, capsys):
    rc = cli.main(["bench", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _table_header(out: str) -> list[str]:
    for line in out.splitlines():
        if line.startswith("operation"):
            return line.split()
    raise AssertionError(f"no table in:\n{out}")


def test_quick_protocol_table_json_and_plots(tmp_path, capsys):
    json_path, plot_dir = tmp_path / "r.json", tmp_path / "plots"
    rc, out, err = _run(["--quick", "--only", "protocol", "--json", str(json_path), "--plot", str(plot_dir)], capsys)
    assert rc == 0, out + err
    assert _table_header(out) == COLUMNS
    assert "decode PushTelemetry request, header + body, 4 KB payload" in out
    assert "[protocol]" in err  # a progress line per measurement on stderr

    data = json.loads(json_path.read_text())
    assert data["mode"] == "quick" and data["groups"] == ["protocol"]
    m = data["machine"]
    for key in ("platform", "python", "cpu_count", "kip714", "versions"):
        assert m[key] is not None
    assert "kio" in m["versions"]
    rows = {r["id"]: r for r in data["rows"]}
    decode = rows["decode-push-4KB"]
    assert decode["ratio"] > 0 and decode["goal"]["value"] == 10 and decode["met"] in (True, False)
    for side in ("kip714", "peer"):
        stats = decode[side]
        assert stats["min"] <= stats["median"] <= stats["max"] and stats["rounds"] >= 3
        assert stats["calls_per_round"] >= 1
    assert rows["encode-gts-frame"]["ratio"] > 0
    # the touch-every-field row's CPython floor, from the rows of the same run
    floor, touch = rows["touch-floor"], rows["decode-push-4KB-touch"]
    assert floor["kip714"]["median"] > 0 and floor["peer"] is None
    assert floor["floor_ns"] == decode["kip714"]["median"] + floor["kip714"]["median"]
    assert floor["budget_ns"] == touch["peer"]["median"] / 10
    assert all(r["ratio"] is None or r["ratio"] > 0 for r in data["rows"])
    assert data["errors"] == []

    pngs = sorted(plot_dir.glob("*.png"))
    assert [p.name for p in pngs] == ["protocol.png"]
    assert pngs[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and pngs[0].stat().st_size > 5_000


def test_missing_peer_is_skipped_not_faked(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "kio", None)  # `import kio` now raises ImportError
    json_path = tmp_path / "r.json"
    rc, out, err = _run(["--quick", "--only", "protocol", "--json", str(json_path)], capsys)
    assert rc == 0, out + err
    data = json.loads(json_path.read_text())
    kio_rows = [r for r in data["rows"] if r["id"] in ("decode-push-4KB", "decode-push-4KB-touch", "encode-gts-frame")]
    assert len(kio_rows) == 3
    for r in kio_rows:
        assert r["peer"] is None and r["ratio"] is None and r["met"] is None
        assert r["peer_skipped"].startswith("skipped: kio not installed")
        assert r["kip714"]["median"] > 0  # kip714's own side is still measured
    assert any(s["peer"] == "kio" for s in data["skipped"])
    assert "kio" not in data["curves"]["protocol_decode"]["series"]
    assert "skipped: kio not installed" in out and "note: [protocol] peer kio skipped" in out
    # goals that need the missing peer are neither met nor missed
    assert "0 of 0 goals met" in out


def test_only_validation(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", "--only", "nope"])
    assert exc.value.code == 2
    assert "unknown group nope" in capsys.readouterr().err
    assert bench._groups("protocol,crc") == ["protocol", "crc"]
    with pytest.raises(argparse.ArgumentTypeError):
        bench._groups(",")


def test_parser_hooks_into_a_cli():
    parser = argparse.ArgumentParser(prog="kip714")
    sub = parser.add_subparsers(dest="command", required=True)
    cli.add_command(sub, "bench")
    args = parser.parse_args(["bench", "--quick", "--only", "codec,otlp", "--json", "f.json", "--plot", "d"])
    assert args.func is bench_cli.run and args.quick and args.only == ["codec", "otlp"]
    assert args.json == "f.json" and args.plot == "d"


def test_interleaved_summaries_and_goal_checks():
    calls = []
    stats = bench.interleaved([(calls.append, ("a",)), (calls.append, ("b",))], rounds=4, target_ns=20_000)
    assert len(stats) == 2 and all(s["rounds"] == 4 and s["median"] > 0 for s in stats)
    assert stats[0]["paired_ratio_median"] > 0
    assert calls.count("a") > 4 and calls.count("b") > 4
    b = bench.Bench(quick=True, groups=[], log=io.StringIO())
    fast, slow = {"median": 100.0}, {"median": 109.0}
    assert b.add_row("codec", "x", "x", slow, fast, "direct", goal={"kind": "within", "value": 0.1, "text": ""})["met"]
    assert not b.add_row(
        "codec", "y", "y", {"median": 120.0}, fast, "direct", goal={"kind": "within", "value": 0.1, "text": ""}
    )["met"]
    assert (
        b.add_row("otlp", "z", "z", fast, {"median": 900.0}, "pb", goal={"kind": "ratio", "value": 8, "text": ""})[
            "ratio"
        ]
        == 9
    )
    assert not b.add_row(
        "limiter", "r", "r", {"median": 250.0}, None, goal={"kind": "rate", "value": 5e6, "text": ""}, unit="rate"
    )["met"]
    assert b.add_row(
        "limiter", "m", "m", {"value": 92.0}, unit="bytes", goal={"kind": "max_bytes", "value": 128, "text": ""}
    )["met"]


def test_quick_proxy_group_measures_against_direct(tmp_path, monkeypatch, capsys):
    """``--only proxy --quick`` on a quarter of the quick run's bytes (its produce runs and the floor's splice
    are most of this test's CPU time; the figures are not checked, only that there are some)."""
    pytest.importorskip("confluent_kafka")
    from kip714.tools.bench.groups import proxy

    monkeypatch.setattr(proxy, "sizes", lambda quick: (2, {100: 1_000_000, 10240: 10_000_000}, 100, 64))
    json_path, plot_dir = tmp_path / "p.json", tmp_path / "plots"
    allowed = os.sched_getaffinity(0)
    rc, out, err = _run(["--quick", "--only", "proxy", "--json", str(json_path), "--plot", str(plot_dir)], capsys)
    assert rc == 0, out + err
    rows = {r["id"]: r for r in json.loads(json_path.read_text())["rows"]}
    for size in (100, 10240):
        for producers in (1, 4):
            row = rows[f"proxy.produce.{size}.{producers}"]
            assert row["peer_name"] == "direct" and row["ratio"] > 0 and row["met"] in (True, False)
            # the whole machine's CPU in each mode, beside the proxy's own (clock ticks: a short run may
            # show none of the proxy's)
            assert 0 <= row["machine_busy_direct"] <= 1 and 0 <= row["machine_busy_proxy"] <= 1
            assert row["cpu_ms_per_mb_proxy"] >= 0 and row["proxy_cpu_ms_per_mb"] >= 0
    assert sum(rows[f"proxy.produce.10240.{n}"]["cpu_ms_per_mb_proxy"] for n in (1, 4)) > 0
    if len(allowed) >= 2:  # the proxy on a core of its own, the rest on the other
        for producers in (1, 4):
            assert rows[f"proxy.pinned.10240.{producers}"]["ratio"] > 0
    assert os.sched_getaffinity(0) == allowed  # this process unpinned again
    assert rows["proxy.latency"]["kip714"]["median"] > 0 and rows["proxy.latency"]["peer"]["median"] > 0
    assert rows["proxy.latency"]["note"].startswith("100 records each")
    assert rows["proxy.cpu"]["kip714"]["value"] > 0
    floor = rows["proxy.floor"]  # raw bytes through a splice forwarder: the machine's floor, measured
    assert floor["ratio"] > 0 and floor["forwarder_cpu_ms_per_mb"] >= 0
    assert floor["cpu_ms_per_mb_direct"] >= 0 and floor["cpu_ms_per_mb_forwarded"] >= 0
    assert rows["proxy.connections"]["kip714"]["value"] == 1000
    assert [p.name for p in sorted(plot_dir.glob("*.png"))] == ["proxy.png"]


def test_quick_record_group_measures_record_sync_against_plain_recording(tmp_path, monkeypatch, capsys):
    """``--only record --quick`` with rounds of 0.5 s, not 1.5 (the quick run's load is most of this test's CPU
    time; its figures are not checked, only that there are some)."""
    pytest.importorskip("pyarrow")
    from kip714.tools.bench.groups import record

    monkeypatch.setattr(record, "windows", lambda quick: (0.5, 2))
    json_path = tmp_path / "r.json"
    rc, out, err = _run(["--quick", "--only", "record", "--json", str(json_path)], capsys)
    assert rc == 0, out + err
    row = {r["id"]: r for r in json.loads(json_path.read_text())["rows"]}["record.sync.8x4"]
    assert row["peer_name"] == "without --record-sync" and row["unit"] == "rate"
    assert row["kip714"]["median"] > 0 and row["peer"]["median"] > 0 and row["ratio"] > 0
    assert "2 alternating rounds of 0.5 s" in row["note"]


def test_the_pyarrow_floor_row_keeps_its_c_struct_alive(tmp_path):
    """The otlp group's floor row exports a batch into a C ArrowArray it allocates: the buffer must live as long
    as the call that writes into it (it was freed when the helper returned, and `kip714 bench --quick` died of a
    segmentation fault in the next group). Run in a child: a use after free kills the process."""
    import subprocess
    import textwrap

    code = textwrap.dedent("""
        import gc
        from kip714 import decode_metrics
        from kip714.tools.bench import KB, _pyarrow_round_trip, otlp_like
        round_trip = _pyarrow_round_trip(decode_metrics(otlp_like(KB, seed=KB + 11)))
        gc.collect()
        junk = [bytearray(80) for _ in range(20000)]      # reuse whatever memory was freed
        for _ in range(2000):
            round_trip()
        del junk
        gc.collect()
        import json, email.mime.text, xml.dom.minidom    # allocations and imports after the writes
        print("ok")
    """)
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the endpoint group reads Linux's CPU clocks")
def test_the_endpoint_groups_cpu_time_is_the_kernels_to_the_nanosecond():
    """The endpoint group reads another process's CPU time from the kernel's per-process clock (its id made as
    ``clock_getcpuclockid`` makes it) and a thread's from schedstat: for this process they fall between two
    readings of ``time.process_time``, where 10 ms ticks would not (a running thread's schedstat is brought up
    to date at its next tick or switch: within a tick of ``time.thread_time``)."""
    import threading
    import time

    from kip714.tools.bench.loadgen import cpu_seconds, thread_cpu_seconds

    sum(i * i for i in range(200_000))  # some CPU time, not a multiple of a tick
    before, thread_before = time.process_time(), time.thread_time()
    process, thread = cpu_seconds(os.getpid()), thread_cpu_seconds(os.getpid(), threading.get_native_id())
    after, thread_after = time.process_time(), time.thread_time()
    assert before <= process <= after and after - before < 0.005
    assert thread_before - 0.011 <= thread <= thread_after + 1e-6


def test_zstd_floor_answers_a_real_push_and_decompresses_its_payload():
    """The endpoint group's zstd floor: librdkafka's captured push frame (and hand-made ones: a header with
    tagged fields, a corrupt payload, another codec), fed split at every byte boundary, answered with the
    PushTelemetry responses kip714's decoder reads back, the payload decompressed as python-zstandard does."""
    zstandard = pytest.importorskip("zstandard")
    import uuid

    import kip714
    from kip714.tools import SAMPLES
    from kip714.tools.bench.floor import ZstdFloorProtocol

    captured = (SAMPLES / "producer_zstd_push_01_zstd.bin").read_bytes()
    frames, _ = kip714.split_frames(captured)
    request = kip714.decode_request(frames[0])
    assert type(request.body) is kip714.PushTelemetryRequest and request.body.compression_type == 4
    payload = bytes(request.body.metrics)
    expected = zstandard.ZstdDecompressor().decompressobj().decompress(payload)
    assert len(payload) == 464 and len(expected) == 1450

    def push(corr, compression, data, tags=None):
        body = kip714.PushTelemetryRequest(uuid.uuid4(), 7, False, compression, data)
        return bytes(kip714.encode_request(body, corr, None if tags else "c", 0, tags))

    stream = captured + push(2, 4, payload, {3: b"abc"}) + push(3, 4, b"not zstd") + push(4, 3, b"lz4?")

    class Transport:
        def __init__(self):
            self.writes = []

        def write(self, data):
            self.writes.append(bytes(data))

    floor, transport = ZstdFloorProtocol(), Transport()
    floor.connection_made(transport)
    outputs = []
    for i in range(len(stream)):
        floor.data_received(stream[i : i + 1])
        if floor.last:
            outputs.append(floor.last)
            floor.last = b""
    assert [bytes(o) for o in outputs] == [expected, expected]
    assert bytes(kip714.decompress(payload, 4, 1 << 20)) == expected
    written = b"".join(transport.writes)
    answers, consumed = kip714.split_frames(written)
    assert consumed == len(written) == 16 * len(answers)
    got = [kip714.decode_response(a, 72, 0) for a in answers]
    assert [(r.header.correlation_id, r.body.error_code) for r in got] == [
        (request.header.correlation_id, 0),
        (2, 0),
        (3, 87),  # INVALID_RECORD: the payload does not decompress
        (4, 76),  # UNSUPPORTED_COMPRESSION_TYPE
    ]
    assert all(r.body.throttle_time_ms == 0 for r in got)

    # the frames of one read answered in one write
    transport.writes.clear()
    floor.data_received(captured * 5)
    assert len(transport.writes) == 1 and len(kip714.split_frames(transport.writes[0])[0]) == 5


@pytest.mark.slow
def test_quick_endpoint_run_prints_the_floor_ratios_and_goals(tmp_path, monkeypatch, capsys):
    """``kip714 bench --only endpoint --quick`` in a tiny configuration (the real quick one runs for minutes):
    the table's rows against the zstd floor with their goals marked, pushes per CPU-second with the floor as
    peer, the latency rows, the generator check and memory, evaluated (the figures are not checked, only that
    there are some), the plot drawn."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("zstandard")
    from kip714.tools.bench.groups import endpoint

    tiny = endpoint.Config(
        modes=("serve", "prometheus", "floor-zstd", "floor-batched"),
        payloads=("rdk1450",),
        # enough pushes in a window (~10 000) that the floors' few µs each add up to CPU time
        instances=(1000,),
        rounds=2,
        full_rounds=1,
        warm_s=0.1,
        first_warm_s=0.2,
        seconds=1.0,
        comparison_seconds=1.0,
        latency_s=0.2,
        generator_check=("serve", 1000),
        unpipelined=(),
        memory_connections=100,
    )
    monkeypatch.setattr(endpoint, "config", lambda quick: tiny)
    json_path, plot_dir = tmp_path / "e.json", tmp_path / "plots"
    rc, out, err = _run(["--quick", "--only", "endpoint", "--json", str(json_path), "--plot", str(plot_dir)], capsys)
    assert rc == 0, out + err
    # progress: the round, the step, the time so far and (once a step of each kind left has run) the time left
    duration = r"(?:\d+ min )?\d+ s"
    assert re.search(rf"\[endpoint\] round 2/2, step 7/9: .+ \({duration} so far, about {duration} left\)", err)

    # the table's rows against the zstd floor: the multiple, the goal, met or not (the I/O-only floor: no goal)
    def table_row(mode):
        (line,) = [line for line in out.splitlines() if line.startswith(f"{endpoint.MODES[mode]}: CPU per")]
        return line

    assert "× zstd floor" in table_row("serve") and "≤ 1.0× the zstd floor" in table_row("serve")
    assert "≤ 3.0× the zstd floor" in table_row("prometheus")
    assert table_row("serve").endswith(("yes", "NO")) and table_row("prometheus").endswith(("yes", "NO"))
    assert "× zstd floor" in table_row("floor-batched") and table_row("floor-batched").endswith("—")
    assert table_row("floor-zstd").split()[-5:] == ["µs", "—", "—", "—", "—"]  # the floor: its µs a push

    rows = {r["id"]: r for r in json.loads(json_path.read_text())["rows"]}
    ratio = rows["endpoint.floor-ratio.serve"]
    assert ratio["goal"]["kind"] == "max_cost" and ratio["met"] is (ratio["floor_ratio"] <= 1.0)
    assert len(ratio["floor_ratio_rounds"]) == 2 and ratio["floor_us_per_push"] > 0
    assert rows["endpoint.floor-ratio.floor-batched"]["goal"] is None
    assert rows["endpoint.floor-ratio.floor-zstd"]["us_per_push"] > 0
    serve = rows["endpoint.serve.rdk1450.1k"]
    assert serve["unit"] == "rate" and serve["kip714"]["median"] > 0 and serve["peer_name"] == "zstd floor"
    assert serve["per_cpu_s"] > 0 and isinstance(serve["generator_below_endpoint"], bool)
    assert rows["endpoint.floor-zstd.rdk1450.1k"]["per_cpu_s"] > 0
    latency = rows["endpoint.latency.serve.rdk1450.1k"]
    assert latency["p99_ms"] >= latency["p50_ms"] > 0 and latency["peer_text"].startswith("p99 ")
    prometheus = rows["endpoint.prometheus.rdk1450.1k"]  # pushes counted as exported: scraped from the exporter
    assert prometheus["per_cpu_s"] > 0 and prometheus["exported_fraction"] > 0
    check = rows["endpoint.generator"]
    assert isinstance(check["not_bottleneck"], bool) and isinstance(check["generator_below_endpoint"], bool)
    assert check["second_generator_rate_ratio"] > 0 and check["met"] is check["not_bottleneck"]
    for mode in ("serve", "prometheus", "floor-zstd"):  # resident bytes per open connection
        assert rows[f"endpoint.memory.connection.{mode}"]["kip714"]["value"] > 0
    assert [p.name for p in sorted(plot_dir.glob("*.png"))] == ["endpoint_floor.png"]
