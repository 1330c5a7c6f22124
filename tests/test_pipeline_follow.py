"""``kip714 pipeline --follow``: Structured Streaming over a recording that is still being written.

The test keeps writing recording files while the stream runs, stops the stream midway (possibly inside a
micro-batch) and restarts it from its checkpoint; the final points table must equal a batch run over the
same recording: no push lost, none duplicated."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("pyspark")

import pyarrow.parquet as pq

from kip714 import SubscriptionRegistry, TelemetryBroker
from kip714.sinks.recorder import read_recording
from kip714.spark.pipeline import follow_pipeline, run_pipeline
from kip714.tools.simulate import Fleet

CHUNKS = 6


def _write_chunk(table, directory, i):
    tmp = directory / f".push-{i:04d}.parquet.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, directory / f"push-{i:04d}.parquet")  # as the recorder does: readers never see half a file


def _key(df):
    from pyspark.sql import functions as F

    return df.select(
        "client_instance_id",
        "received_at_ms",
        "metric",
        "time_unix_nano",
        "value",
        "value_int",
        F.to_json(F.array_sort(F.map_entries("attributes"))).alias("attrs"),
    )


def test_follow_survives_a_restart_without_loss_or_duplicates(spark, tmp_path):
    registry = SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": "5000"})
    Fleet(3, 2, seed=3).run_in_process(TelemetryBroker(registry), "2m", recorder=tmp_path / "staged")
    staged = read_recording(tmp_path / "staged")
    assert staged.num_rows >= 100
    step = -(-staged.num_rows // CHUNKS)
    chunks = [staged.slice(i * step, step) for i in range(CHUNKS)]
    live, out = tmp_path / "live", tmp_path / "out"
    live.mkdir()
    seen = []
    running = follow_pipeline(str(live), str(out), trigger_s=0.5, spark=spark, progress=False)
    try:
        for i in range(2):  # picked up by the running stream, batch by batch
            _write_chunk(chunks[i], live, i)
            running.process_all_available()
        _write_chunk(chunks[2], live, 2)
    finally:
        running.stop()  # at once: chunk 2 may be unread, or inside an interrupted micro-batch
    first_run = len(running.batches)
    seen += running.batches
    for i in range(3, 5):  # written while no stream runs
        _write_chunk(chunks[i], live, i)
    running = follow_pipeline(str(live), str(out), trigger_s=0.5, spark=spark, progress=False)
    try:
        for i in range(5, CHUNKS):
            _write_chunk(chunks[i], live, i)
            running.process_all_available()
    finally:
        running.stop()
    seen += running.batches
    # each run decoded at least one micro-batch (a slow machine may fold several chunks into one)
    assert first_run >= 1 and len(seen) - first_run >= 1
    assert all(b.delay_max_ms is not None and b.delay_max_ms >= b.delay_min_ms for b in seen if b.pushes)

    batch_out = tmp_path / "batch"
    summary = run_pipeline(str(live), str(batch_out), spark=spark, progress=False)
    followed = _key(spark.read.parquet(str(out / "points")))
    batch = _key(spark.read.parquet(str(batch_out / "points")))
    assert followed.count() == batch.count() == summary.points > 0
    assert followed.exceptAll(batch).count() == 0 and batch.exceptAll(followed).count() == 0
    errors = spark.read.parquet(str(out / "errors"))
    assert errors.count() == summary.errors
