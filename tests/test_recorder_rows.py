"""The recorder's rows: a push recorded through ``push_completed`` (kept as its fields until the part is
written, its columns then made in bulk), or with the other pushes of its read through ``pushes_completed`` (the
broker's ``PushBatch`` columns), gives exactly the row ``push_row`` makes for it, also mixed with rows given to
``record()``, in arrival order."""

from __future__ import annotations

import array
import uuid

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from kip714._instances import PackedBytes
from kip714.broker.receivers import ClientSubscription, PushBatch, ReceiverContext
from kip714.broker.subscriptions import ClientInfo
from kip714.sinks.recorder import RECORD_COLUMNS, ParquetRecorder, push_row, read_recording, record_schema, rows_table
from kip714.wire import PushTelemetryRequest

infos = st.builds(
    ClientInfo,
    client_id=st.sampled_from(["", "producer-1", "é\x00"]),
    client_software_name=st.sampled_from(["unknown", "apache-kafka-java"]),
    client_source_address=st.sampled_from(["", "127.0.0.1", "0:0:0:0:0:0:0:1"]),
    client_source_port=st.sampled_from(["", 0, 51234, "7"]),
    principal=st.sampled_from(["User:ANONYMOUS", "User:alice"]),
)
subscriptions = st.one_of(
    st.none(),
    st.builds(
        ClientSubscription,
        subscription_id=st.integers(-(2**31), 2**31 - 1),
        requested_metrics=st.lists(st.sampled_from(["", "org.apache.kafka.", "*"]), max_size=3).map(tuple),
        push_interval_ms=st.integers(100, 3_600_000),
        delta_temporality=st.booleans(),
        accepted_compression_types=st.lists(st.integers(0, 4), max_size=4).map(tuple),
    ),
)
pushes = st.tuples(
    infos,
    st.integers(-1, 5),  # node id
    subscriptions,
    st.binary(min_size=16, max_size=16).filter(lambda b: b not in (bytes(16), bytes(15) + b"\x01")),
    st.integers(-(2**31), 2**31 - 1),
    st.booleans(),
    st.integers(0, 4),
    st.sampled_from([0, 42, 72, 89]),
    st.binary(max_size=40),
    st.integers(0, 2**50),
    st.booleans(),  # given to record() as push_row's dict instead
)


def _reference(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pydict({c: [r.get(c) for r in rows] for c in RECORD_COLUMNS}, schema=record_schema())


@settings(max_examples=40, deadline=None)
@given(st.lists(pushes, max_size=12))
def test_pushes_record_the_rows_push_row_makes(tmp_path_factory, cases):
    directory = tmp_path_factory.mktemp("rec")
    recorder = ParquetRecorder(directory, flush_interval_s=3600, roll_interval_s=0)
    want = []
    try:
        for info, node, sub, id16, sub_id, term, ctype, code, metrics, at, as_dict in cases:
            request = PushTelemetryRequest(uuid.UUID(bytes=id16), sub_id, term, ctype, metrics)
            row = push_row(request, info, node, code, at, sub)
            want.append(row)
            if as_dict:
                recorder.record(row)
            else:
                recorder.push_completed(ReceiverContext(info, node, None, sub), request, code, at)
        recorder.flush()
        got = read_recording(directory)
    finally:
        recorder.close()
    assert got.equals(_reference(want)), (got.to_pylist(), want)


def test_the_bulk_columns_of_many_pushes():
    """One client connection and subscription shared by many pushes, others alone: the per-connection
    columns are taken for every row."""
    shared, other = ClientInfo(client_id="a", client_source_port=1), ClientInfo(client_id="b")
    sub = ClientSubscription(5, ("org.",), 1000, True, (4, 1))
    rows, want = [], []
    for i in range(300):
        info, s = (shared, sub) if i % 3 else (other, None)
        id16 = uuid.UUID(int=i + 2).bytes
        rows.append((i, id16, info, 1, i, False, 4, 0, b"x" * (i % 5), s))
        request = PushTelemetryRequest(uuid.UUID(bytes=id16), i, False, 4, b"x" * (i % 5))
        want.append(push_row(request, info, 1, 0, i, s))
    assert rows_table(rows).equals(_reference(want))
    assert rows_table([]).equals(record_schema().empty_table())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.lists(pushes, min_size=1, max_size=6), st.integers(0, 2), st.booleans()), max_size=8))
def test_batches_record_the_rows_push_row_makes(tmp_path_factory, reads):
    """The pushes of reads handed over as ``PushBatch`` columns (``pushes_completed``: one node and time per read,
    a client connection and subscription per push; lists, or packed as the request loop hands them:
    ``array`` s of the numbers and the payloads as ``PackedBytes``), between pushes and rows given one by one:
    the rows ``push_row`` makes, in order."""
    directory = tmp_path_factory.mktemp("rec")
    recorder = ParquetRecorder(directory, flush_interval_s=3600, roll_interval_s=0)
    want = []
    try:
        for k, (cases, alone, packed) in enumerate(reads):
            node, at = cases[0][1], cases[0][9]
            batch = PushBatch(at, node, [], [], [], [], [], [], [], [])
            for info, _, sub, id16, sub_id, term, ctype, code, metrics, _, _ in cases:
                request = PushTelemetryRequest(uuid.UUID(bytes=id16), sub_id, term, ctype, metrics)
                want.append(push_row(request, info, node, code, at, sub))
                for column, value in zip(
                    (batch.client_instance_ids, batch.client_infos, batch.subscriptions, batch.subscription_ids),
                    (id16, info, sub, sub_id),
                ):
                    column.append(value)
                batch.terminating.append(term)
                batch.compression_types.append(ctype)
                batch.error_codes.append(code)
                batch.payloads.append(metrics)
            if packed:
                batch.subscription_ids = array.array("i", batch.subscription_ids)
                batch.error_codes = array.array("q", batch.error_codes)
                batch.payloads = PackedBytes.of(batch.payloads)
            recorder.pushes_completed(batch)
            if alone:  # then one push by itself: a row dict, or a push's fields
                info, _, sub, id16, sub_id, term, ctype, code, metrics, _, _ = cases[-1]
                request = PushTelemetryRequest(uuid.UUID(bytes=id16), sub_id, term, ctype, metrics)
                row = push_row(request, info, node, code, at + 1, sub)
                want.append(row)
                if alone == 1:
                    recorder.record(row)
                else:
                    recorder.push_completed(ReceiverContext(info, node, None, sub), request, code, at + 1)
            if k == 3:
                recorder.flush()  # some in a part of their own
        assert recorder.pending() + recorder.rows_written == len(want)  # rows, not reads
        recorder.flush()
        got = read_recording(directory)
    finally:
        recorder.close()
    assert got.equals(_reference(want)), (got.to_pylist(), want)


def test_the_subscription_columns_of_many_instances():
    """Every instance's subscription an object of its own (its SubscriptionId), of few values, compression types
    given as ``CompressionType``: the columns hold each instance's values."""
    from kip714 import CompressionType

    shared = ClientInfo(client_id="a")
    subs = [
        ClientSubscription(i, ("org.",) if i % 2 else (), 1000 * (1 + i % 3), bool(i % 2), (CompressionType.ZSTD, 1))
        for i in range(50)
    ]
    batch = PushBatch(7, 1, [], [], [], [], [], [], [], [])
    want = []
    for i in range(500):
        sub, id16 = subs[i % 50], uuid.UUID(int=i % 50 + 2).bytes
        batch.client_instance_ids.append(id16)
        batch.client_infos.append(shared)
        batch.subscriptions.append(sub)
        for column in (batch.subscription_ids, batch.compression_types, batch.error_codes):
            column.append(0)
        batch.terminating.append(False)
        batch.payloads.append(b"x")
        want.append(push_row(PushTelemetryRequest(uuid.UUID(bytes=id16), 0, False, 0, b"x"), shared, 1, 0, 7, sub))
    assert rows_table([batch]).equals(_reference(want))


def test_parts_and_rolled_files_keep_statistics_but_the_payloads(tmp_path):
    """Every column of a part and of a rolled file has min/max statistics but the payload (an opaque blob no
    reader filters on), and reads back as written."""
    import pyarrow.parquet as pq

    recorder = ParquetRecorder(tmp_path, flush_interval_s=3600, roll_interval_s=3600)
    try:
        info, sub = ClientInfo(client_id="a"), ClientSubscription(5, ("org.",), 1000, True, (4,))
        want = []
        for i in range(3):
            request = PushTelemetryRequest(uuid.UUID(int=i + 2), 5, False, 4, b"p%d" % i)
            recorder.push_completed(ReceiverContext(info, 1, None, sub), request, 0, 10 + i)
            want.append(push_row(request, info, 1, 0, 10 + i, sub))
            recorder.flush()
        metas = [pq.read_metadata(f) for f in sorted((tmp_path / "_open").glob("part-*.parquet"))]
        recorder.roll()
        metas += [pq.read_metadata(f) for f in tmp_path.glob("push-*.parquet")]
        got = read_recording(tmp_path)
    finally:
        recorder.close()
    assert got.equals(_reference(want)) and len(metas) == 4
    for meta in metas:
        columns = meta.row_group(0)
        stats = {columns.column(k).path_in_schema: columns.column(k).is_stats_set for k in range(columns.num_columns)}
        assert not stats.pop("payload") and stats["client_instance_id"] and stats["received_at_ms"], stats


def test_packed_payloads_of_many_reads_are_one_column(tmp_path):
    """Payloads packed per read (``PackedBytes``, empty ones and an empty read among them) and given one by one
    in between: the payload column holds each in order, as pyarrow converts the same byte strings."""
    reads = [[b"a", b"", b"bcd"], [], [bytes(range(256)) * 3], [b"", b""]]
    batches = []
    want: list[bytes] = []
    for k, payloads in enumerate(reads + [[b"tail"]]):
        n = len(payloads)
        batch = PushBatch(
            k,
            1,
            [uuid.UUID(int=k * 10 + j + 2).bytes for j in range(n)],
            [ClientInfo()] * n,
            [None] * n,
            array.array("i", [k] * n),
            [False] * n,
            [0] * n,
            array.array("q", [0] * n),
            PackedBytes.of(payloads) if k < len(reads) else payloads,
        )
        batches.append(batch)
        want += payloads
    got = rows_table(batches).column("payload")
    assert got.to_pylist() == want
    assert got.combine_chunks().equals(pa.array(want, pa.binary()))
