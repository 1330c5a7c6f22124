"""The report's per-point reduction in the Python workers (kip714.spark.report_points), without Spark:
streamed in small input batches (an instance's pushes spread over many batches) it gives the same rows as
in one batch, and its counts agree with decoding every payload in this process."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import kip714
from kip714.sinks.recorder import read_recording

pytest.importorskip("pyspark")  # kip714.spark needs it importable (the functions run without a session)
from kip714.spark.report import _rules
from kip714.spark.report_points import OUT_SCHEMA
from kip714.spark.report_workers import recording_worker
from kip714.tools.simulate import Fleet


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    path = tmp_path_factory.mktemp("rp") / "rec"
    registry = kip714.SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": "10000"})
    Fleet(3, 2, seed=7, software="mix").run_in_process(kip714.TelemetryBroker(registry, node_id=1), "3m", recorder=path)
    rec = read_recording(path)
    # one payload that does not decode, for the error rows
    bad = rec.slice(0, 1).set_column(
        rec.schema.get_field_index("payload"), "payload", pa.array([b"\x00\x01not zstd"], pa.binary())
    )
    return pa.concat_tables([rec, bad]).sort_by("client_instance_id")


def _rows(table: pa.Table) -> list:
    return sorted((tuple(sorted(r.items(), key=lambda kv: kv[0])) for r in table.to_pylist()), key=repr)


def test_streamed_equals_whole_and_counts_match_in_process_decoding(recording):
    run = recording_worker(_rules())
    whole = pa.Table.from_batches(list(run(iter(recording.to_batches()))), schema=OUT_SCHEMA)
    streamed = pa.Table.from_batches(
        list(recording_worker(_rules())(iter(recording.to_batches(max_chunksize=7)))), schema=OUT_SCHEMA
    )
    assert _rows(whole) == _rows(streamed)

    kinds = whole.column("row_kind").to_pylist()
    assert set(kinds) == {"inst", "agg"}  # decode failures are counted on the instance's row
    inst = whole.filter(pc.equal(whole.column("row_kind"), "inst"))
    ids = inst.column("client_instance_id").to_pylist()
    assert sorted(ids) == sorted(set(recording.column("client_instance_id").to_pylist()))  # one row per instance
    pushes = {}
    for iid in recording.column("client_instance_id").to_pylist():
        pushes[iid] = pushes.get(iid, 0) + 1
    assert dict(zip(ids, inst.column("pushes").to_pylist())) == pushes
    # the oracle: every payload decoded here, points counted per instance
    want: dict[str, int] = {}
    failed: dict[str, int] = {}
    for iid, data, ctype in zip(
        recording.column("client_instance_id").to_pylist(),
        recording.column("payload").to_pylist(),
        recording.column("compression_type").to_pylist(),
    ):
        try:
            n = kip714.decode_metrics(kip714.decompress(data, ctype, 1 << 26)).num_rows if data else 0
        except kip714.Kip714Error:
            failed[iid] = failed.get(iid, 0) + 1
            continue
        want[iid] = want.get(iid, 0) + n
    got = dict(zip(ids, inst.column("points").to_pylist()))
    assert {k: v for k, v in got.items() if v} == {k: v for k, v in want.items() if v}
    got_failed = dict(zip(ids, inst.column("decode_failed").to_pylist()))
    assert {k: v for k, v in got_failed.items() if v} == failed and failed
    # a clean simulated fleet: names, subscription, temporality, series all conform
    for col in ("naming_bad", "subscribed_bad", "temporality_bad", "duplicate_series", "start_moved"):
        assert sum(inst.column(col).to_pylist()) == 0, col
    assert sum(inst.column("series_in_pushes").to_pylist()) == sum(want.values())


def test_node_ids_are_the_recordings_strings(recording):
    """``node_id`` is a string in a recording (a proxy records the upstream's node as it names it): any text
    is a node, and pushes on different nodes are different pushes."""
    i = recording.schema.get_field_index("node_id")
    named = recording.set_column(i, "node_id", pa.array([f"broker-{k % 3}" for k in range(recording.num_rows)]))
    run = recording_worker(_rules())
    got = pa.Table.from_batches(list(run(iter(named.to_batches()))), schema=OUT_SCHEMA)
    want = pa.Table.from_batches(list(recording_worker(_rules())(iter(recording.to_batches()))), schema=OUT_SCHEMA)
    inst = pc.equal(got.column("row_kind"), "inst")
    assert (
        got.filter(inst).column("points").to_pylist()
        == want.filter(pc.equal(want.column("row_kind"), "inst")).column("points").to_pylist()
    )
    assert sum(got.filter(inst).column("duplicate_series").to_pylist()) == 0


def _inst_rows(table: pa.Table) -> dict:
    """The ``inst`` rows of recording rows, by instance id (the answers as the report hands them over)."""
    names = ["push_error_code" if n == "error_code" else n for n in table.column_names]
    batches = table.rename_columns(names).to_batches()
    out = pa.Table.from_batches(list(recording_worker(_rules())(iter(batches))), schema=OUT_SCHEMA)
    return {r["client_instance_id"]: r for r in out.to_pylist() if r["row_kind"] == "inst"}


def test_a_terminating_push_in_the_millisecond_of_the_last_push_is_a_push_of_its_own(recording):
    """A client sends its terminating push right after its last one, often within the same millisecond: the
    two are two pushes, and the series both carry are not duplicates within one push."""
    ok = pc.and_(pc.equal(recording.column("error_code"), 0), pc.invert(recording.column("terminating")))
    last = recording.filter(ok).slice(0, 1)
    iid = last.column("client_instance_id")[0].as_py()
    twin = last.set_column(last.schema.get_field_index("terminating"), "terminating", pa.array([True]))
    before = _inst_rows(recording)[iid]
    after = _inst_rows(pa.concat_tables([recording, twin]).sort_by("client_instance_id"))[iid]
    assert after["pushes"] == before["pushes"] + 1
    assert after["duplicate_series"] == before["duplicate_series"] == 0


def test_the_interval_is_checked_between_pushes_to_one_replica(recording):
    """An instance whose pushes went to two replicas is one instance; the first push after it moved is not
    checked against the last one before (the move's pause is no gap), the others are. Without the replica
    column (an older recording: null) the same pushes are one replica's, and the pause is a gap."""
    iid = recording.column("client_instance_id")[0].as_py()
    mine = pc.equal(recording.column("client_instance_id"), iid)
    pushes = recording.filter(mine).sort_by("received_at_ms")
    n = pushes.num_rows
    assert n >= 6
    half = n // 2
    times = pushes.column("received_at_ms").to_pylist()
    pause = 10 * max(pushes.column("push_interval_ms").to_pylist())  # a long pause while the client moved
    moved = pushes.set_column(
        pushes.schema.get_field_index("received_at_ms"),
        "received_at_ms",
        pa.array(times[:half] + [t + pause for t in times[half:]], pa.int64()),
    )
    replica = pa.array(["r1"] * half + ["r2"] * (n - half), pa.string())
    two = moved.set_column(moved.schema.get_field_index("kip714_replica"), "kip714_replica", replica)
    fleet, one = _inst_rows(two)[iid], _inst_rows(moved)[iid]
    assert fleet["pushes"] == one["pushes"] == n
    assert fleet["gaps"] == 0 and one["gaps"] == 1
    assert fleet["interval_checked"] == one["interval_checked"] - 1
    # the rows read in any order: r2's before r1's
    assert _inst_rows(pa.concat_tables([two.slice(half), two.slice(0, half)]))[iid] == fleet
