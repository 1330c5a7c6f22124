"""Bulk decoding on local Spark: DataFrame API, SQL functions and the pipeline command.

The oracle is kip714.otlp.reference (protobuf parse + Python flattening) on the same payloads."""

from __future__ import annotations

import json
import pathlib
import uuid

import pytest

import kip714
from kip714.otlp import reference as otlp_pb

pytest.importorskip("pyspark")
from kip714 import spark as kspark

DATA = pathlib.Path(__file__).parent / "data" / "captures"
PUSH = sorted(DATA.glob("*_push_*.bin"))


def payload_rows():
    rows = []
    for p in PUSH:
        body = kip714.decode_request(kip714.split_frames(p.read_bytes())[0][0]).body
        rows.append((p.name, body.compression_type, bytes(body.metrics)))
    return rows


def expected_points(name_filter=None):
    total = 0
    for p in PUSH:
        if name_filter and not name_filter(p.name):
            continue
        body = kip714.decode_request(kip714.split_frames(p.read_bytes())[0][0]).body
        raw = kip714.decompress(body.metrics, body.compression_type, 1 << 20) if body.metrics_size else b""
        total += len(otlp_pb.flatten(raw))
    return total


BAD = [("bad-zstd", 4, b"garbage"), ("bad-otlp", 0, b"\x0a\xff"), ("too-big", 4, kip714.compress(bytes(2 << 20), 4))]


def test_decode_payloads_matches_the_protobuf_oracle(spark):
    df = spark.createDataFrame(payload_rows() + BAD, "source string, compression_type byte, payload binary")
    res = kspark.decode_payloads(df).persist()
    try:
        assert res.points.count() == expected_points()
        errors = {r["source"]: r for r in res.errors.collect()}
        assert set(errors) == {"bad-zstd", "bad-otlp", "too-big"}
        assert errors["bad-zstd"]["error_code"] == 87 and errors["bad-zstd"]["error_stage"] == "decompress"
        assert errors["bad-otlp"]["error_code"] == 87 and errors["bad-otlp"]["error_stage"] == "decode"
        assert errors["too-big"]["error_code"] == 118
        assert errors["bad-zstd"]["payload"] == b"garbage"
        # a row checked field by field against the oracle
        want = otlp_pb.flatten(kip714.decompress(payload_rows()[0][2], 4, 1 << 20))
        got = (
            res.points.where("source = 'consumer_zstd_push_01_zstd.bin'")
            .select("metric", "value", "attributes", "time_unix_nano", "compression_type")
            .collect()
        )
        assert [(r["metric"], r["value"], dict(r["attributes"]), r["time_unix_nano"]) for r in got] == [
            (w["metric"], w["value"], w["attributes"], w["time_unix_nano"]) for w in want
        ]
        assert {r["compression_type"] for r in got} == {4}
        # the points pass of its own (workers emit point rows only) equals the points read from the cache
        direct = kspark.decode_payloads(df).points
        assert direct.schema == res.points.schema
        assert sorted(map(repr, direct.collect())) == sorted(map(repr, res.points.collect()))
    finally:
        res.unpersist()


def test_decode_frames_carries_header_fields(spark):
    frames = [(p.name, p.read_bytes()) for p in sorted(DATA.glob("*.bin"))]
    two = PUSH[0].read_bytes() + PUSH[1].read_bytes()  # two size-prefixed frames in one value
    bare = PUSH[2].read_bytes()[4:]
    frames += [("two", two), ("bare", bare), ("junk", b"\x00\x00\x00\x02ab"), ("nothing", None)]
    df = spark.createDataFrame(frames, "path string, frame binary")
    res = kspark.decode_frames(df).persist()
    try:
        n = expected_points()
        n_two = expected_points(lambda name: name in (PUSH[0].name, PUSH[1].name))
        n_bare = expected_points(lambda name: name == PUSH[2].name)
        assert res.points.count() == n + n_two + n_bare
        errors = {r["path"]: (r["error_code"], r["error_stage"]) for r in res.errors.collect()}
        assert errors == {"junk": (42, "frame"), "nothing": (42, "frame")}
        row = res.points.where(f"path = '{PUSH[0].name}'").first()
        exp = json.loads((DATA / "expected.json").read_text())[PUSH[0].name]
        assert row["client_id"] == exp["client_id"] and row["subscription_id"] == exp["subscription_id"]
        assert row["client_instance_id"] == kip714.kafka_uuid_string(uuid.UUID(exp["client_instance_id"]))
        assert row["correlation_id"] == exp["correlation_id"]
    finally:
        res.unpersist()


def test_sql_functions(spark):
    names = kspark.register(spark)
    assert "kip714_points" in names
    df = spark.createDataFrame(payload_rows() + BAD, "source string, compression_type byte, payload binary")
    df.createOrReplaceTempView("kip714_rec")
    row = spark.sql(
        "SELECT count(*) AS n, count(error_code) AS e, count(DISTINCT metric) AS m "
        "FROM kip714_points(TABLE(SELECT * FROM kip714_rec))"
    ).first()
    assert row["e"] == 3 and row["n"] == expected_points() + 3 and row["m"] > 10
    got = spark.sql(
        "SELECT source, length(kip714_decompress(payload, compression_type)) AS n, "
        "kip714_payload_error(payload, compression_type) AS err FROM kip714_rec"
    ).collect()
    by = {r["source"]: r for r in got}
    assert by["producer_zstd_push_01_zstd.bin"]["n"] == 1450 and by["producer_zstd_push_01_zstd.bin"]["err"] is None
    assert by["bad-zstd"]["n"] is None and by["bad-zstd"]["err"].startswith("INVALID_RECORD (87)")
    assert by["too-big"]["err"].startswith("TELEMETRY_TOO_LARGE (118)")
    assert (
        spark.sql("SELECT kip714_metric_name('producer-metrics', 'connection-creation-rate')").first()[0]
        == "org.apache.kafka.producer.connection.creation.rate"
    )
    inst = uuid.UUID(int=(0x5E0B1D6A3C4F7A21 << 64) | 0x9D3E2B7C8A1F4E60)
    q = (
        "SELECT kip714_subscription_id(array('org.apache.kafka.client.producer.partition.latency', "
        "'org.apache.kafka.client.producer.partition.queue.'), 30000, '{}')"
    )
    assert spark.sql(q.format("XgsdajxPeiGdPit8ih9OYA")).first()[0] == -111713672
    assert spark.sql(q.format(str(inst))).first()[0] == -111713672
    spark.createDataFrame([(PUSH[0].read_bytes(),), (b"\x01",)], "frame binary").createOrReplaceTempView("kip714_f")
    hdr = spark.sql("SELECT h.* FROM (SELECT kip714_frame_header(frame) AS h FROM kip714_f)").collect()
    assert hdr[0]["api_key"] == 72 and hdr[0]["subscription_id"] == 24301 and hdr[0]["error_code"] is None
    assert hdr[1]["error_code"] == 42


def test_pipeline_on_frames_with_corrupt_files(spark, tmp_path):
    from kip714.spark.pipeline import run_pipeline

    inp = tmp_path / "in"
    (inp / "sub").mkdir(parents=True)
    for p in PUSH[:10]:
        (inp / p.name).write_bytes(p.read_bytes())
    (inp / "sub" / "stream.bin").write_bytes(b"".join(p.read_bytes() for p in PUSH[10:20]))
    (inp / "corrupt.bin").write_bytes(PUSH[0].read_bytes()[:-30] + b"\x00" * 30)
    (inp / "notes.txt").write_text("ignored")
    summary = run_pipeline(str(inp), str(tmp_path / "out"), spark=spark, progress=False)
    assert summary.input_kind == "frames" and summary.input_rows == 12 and summary.errors == 1
    assert summary.points == expected_points(lambda n: n in {p.name for p in PUSH[:20]})
    points = spark.read.parquet(str(tmp_path / "out" / "points"))
    assert points.count() == summary.points and "date" in points.columns
    errors = spark.read.parquet(str(tmp_path / "out" / "errors")).collect()
    assert len(errors) == 1 and errors[0]["source"].endswith("corrupt.bin") and errors[0]["error_code"] == 87


def test_pipeline_command_on_a_recording(spark, tmp_path, capsys):
    """The command line's pipeline, in this process on the suite's session (local_session() returns it); the
    command in a process and JVM of its own is tests/test_spark_scale.py's."""
    from kip714 import SubscriptionRegistry, TelemetryBroker
    from kip714.cli import main
    from kip714.tools.simulate import Fleet

    reg = SubscriptionRegistry()
    reg.set("all", {"metrics": "*", "interval.ms": "30000"})
    stats = Fleet(5, 5, seed=3, codec="mixed").run_in_process(
        TelemetryBroker(reg), "10m", recorder=str(tmp_path / "rec")
    )
    assert stats.recorded_rows > 50
    try:
        status = main(["pipeline", str(tmp_path / "rec"), str(tmp_path / "out"), "--master", "local[2]", "--json"])
    finally:
        spark.sparkContext.setLogLevel("ERROR")  # the command turns Spark's log off
    out, err = capsys.readouterr()
    assert status == 0, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["input_kind"] == "recording" and summary["input_rows"] == stats.recorded_rows
    assert summary["errors"] == 0 and summary["clients"] == 10 and summary["points"] > 1000
    assert "decoding" in err and "writing points" in err


def test_demo_end_to_end(spark, tmp_path, capsys):
    """The README's main command: real librdkafka + simulated clients → serve → Spark → table and chart."""
    from kip714.tools.demo import run_demo

    assert run_demo(str(tmp_path), seconds=3.0, simulated=4) == 0
    out = capsys.readouterr().out
    assert "real librdkafka" in out and "simulated" in out and "node 1" in out
    png = tmp_path / "latency_by_node.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    points = spark.read.parquet(str(tmp_path / "points"))
    assert points.where("client_id LIKE 'rdkafka-%'").count() > 0
    assert points.where("client_software_name = 'apache-kafka-java'").count() > 0


def test_decode_payloads_takes_a_recording_as_it_is(spark, tmp_path):
    """A serve recording has its own error_code (the broker's answer): it comes out as push_error_code."""
    from kip714 import SubscriptionRegistry, TelemetryBroker
    from kip714.sinks.recorder import read_recording
    from kip714.tools.simulate import Fleet

    reg = SubscriptionRegistry()
    reg.set("all", {"metrics": "*", "interval.ms": "30000"})
    Fleet(2, 2, seed=5).run_in_process(TelemetryBroker(reg), "3m", recorder=str(tmp_path / "rec"))
    recorded = read_recording(tmp_path / "rec")
    res = kspark.decode_payloads(spark.read.parquet(str(tmp_path / "rec"))).persist()
    try:
        assert "push_error_code" in res.points.columns and "error_code" in res.errors.columns
        want = sum(
            len(otlp_pb.flatten(kip714.decompress(p, c, 1 << 20)))
            for p, c in zip(recorded.column("payload").to_pylist(), recorded.column("compression_type").to_pylist())
            if p
        )
        assert res.points.count() == want > 0 and res.errors.count() == 0
        assert {r[0] for r in res.points.select("push_error_code").distinct().collect()} == {0}
    finally:
        res.unpersist()


def test_a_cut_size_prefixed_frame_is_called_truncated(spark, tmp_path):
    from kip714.spark.pipeline import run_pipeline

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "cut.bin").write_bytes(PUSH[0].read_bytes()[:30])
    (tmp_path / "in" / "tail.bin").write_bytes(PUSH[0].read_bytes() + PUSH[1].read_bytes()[:9])
    summary = run_pipeline(str(tmp_path / "in"), str(tmp_path / "out"), spark=spark, progress=False)
    assert summary.errors == 2
    errors = {
        pathlib.Path(r["source"]).name: r["error"]
        for r in spark.read.parquet(str(tmp_path / "out" / "errors")).collect()
    }
    assert errors["cut.bin"].startswith("truncated frame: the size prefix says")
    assert errors["tail.bin"] == "truncated frame: 9 bytes after the last whole frame"
    assert not any("API key" in e for e in errors.values())
