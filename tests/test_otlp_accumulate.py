"""kip714.MetricsAccumulator: payloads appended one by one give exactly the table decode_metrics_batch gives
for them (and so, row for row, what decode_metrics gives for each), on the OTLP corpus (the captures, the
fuzz corpus, hand-made wire cases) and on generated and mutated payloads; a payload decode_metrics refuses
is refused at append and leaves nothing behind.

Tables are compared bit for bit (their Arrow IPC bytes, so NaN payloads and -0.0 count), not with
``Table.equals`` (which never finds NaN equal)."""

from __future__ import annotations

import glob
import os
import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_otlp_decode import CAPTURE_PAYLOADS, HOSTILE_BASES, SETTINGS, WIRE_CASES, every_kind_payload, message, mutate

import kip714
from kip714 import MetricsAccumulator, decode_metrics, decode_metrics_batch
from kip714.errors import CorruptPayloadError

FUZZ_CORPUS = os.path.join(os.path.dirname(__file__), os.pardir, "fuzz", "corpus", "otlp")


def ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def same_table(a: pa.Table, b: pa.Table) -> bool:
    return a.schema == b.schema and a.num_rows == b.num_rows and ipc(a.combine_chunks()) == ipc(b.combine_chunks())


def verdict(data) -> bool:
    try:
        decode_metrics(data)
        return True
    except CorruptPayloadError:
        return False


def accumulate(payloads, labels=None, **kw):
    """Append every payload (refused ones must raise, as decode_metrics does); the accepted ones, their
    labels and the flushed table."""
    acc = MetricsAccumulator(max_payloads=1 << 30, **kw)
    ok, ok_labels = [], []
    for i, data in enumerate(payloads):
        lab = labels[i] if labels is not None else None
        rows_before = acc.rows
        if verdict(data):
            assert acc.append(data, lab) is None
            ok.append(data)
            ok_labels.append(lab)
        else:
            with pytest.raises(CorruptPayloadError) as info:
                acc.append(data, lab)
            assert info.value.error_code == kip714.ErrorCode.INVALID_RECORD
            assert acc.rows == rows_before and len(acc) == len(ok)  # nothing of it kept
    return ok, ok_labels, acc.flush()


def check_same(payloads, labels=None) -> int:
    ok, ok_labels, table = accumulate(payloads, labels)
    want = decode_metrics_batch(ok, ok_labels if labels is not None else None)
    assert same_table(table, want)
    if ok and labels is None:  # row for row what decode_metrics gives each payload, in append order
        singles = pa.concat_tables([decode_metrics(p) for p in ok])
        assert same_table(table.drop_columns(["payload_index"]), singles)
    return len(ok)


def corpus() -> list[bytes]:
    out = [data for _, data in CAPTURE_PAYLOADS] + [every_kind_payload()] + list(WIRE_CASES.values())
    for path in sorted(glob.glob(os.path.join(FUZZ_CORPUS, "*")))[:400]:
        with open(path, "rb") as f:
            out.append(f.read())
    return out


def test_corpus_gives_the_batch_table():
    payloads = corpus()
    assert check_same(payloads) > 20
    # the captures with per-payload labels of both types (an int label stays int64 when every value is one)
    caps = [data for _, data in CAPTURE_PAYLOADS]
    labels = [{"client_id": f"c{i}", "node_id": i, "maybe": None if i % 2 else "x"} for i in range(len(caps))]
    assert check_same(caps, labels) == len(caps)


def test_mutated_corpus_gives_the_batch_table():
    rnd = random.Random(1714)
    payloads = [mutate(rnd, HOSTILE_BASES[i % len(HOSTILE_BASES)]) for i in range(400)]
    accepted = check_same(payloads)
    assert 40 < accepted < 360  # both paths exercised


@settings(max_examples=15, **SETTINGS)
@given(st.lists(message("MetricsData", chaos=True), max_size=4), st.randoms(use_true_random=False))
def test_generated_payloads_give_the_batch_table(payloads, rnd):
    labels = [
        None if rnd.random() < 0.3 else {"client_id": rnd.choice(["a", "", "é"]), "n": rnd.choice([1, -5, "7"])}
        for _ in payloads
    ]
    check_same(payloads, labels)
    check_same(payloads)


def test_batches_are_handed_out_per_max_payloads():
    caps = [data for _, data in CAPTURE_PAYLOADS]
    acc = MetricsAccumulator(max_payloads=3)
    tables = [acc.append(p) for p in caps[:7]]
    assert [t is not None for t in tables] == [False, False, True, False, False, True, False]
    assert same_table(tables[2], decode_metrics_batch(caps[:3]))
    assert same_table(tables[5], decode_metrics_batch(caps[3:6]))
    assert len(acc) == 1 and acc.rows == decode_metrics(caps[6]).num_rows
    assert same_table(acc.flush(), decode_metrics_batch(caps[6:7]))
    empty = acc.flush()
    assert empty.num_rows == 0 and empty.schema == decode_metrics_batch([]).schema
    # a delay of 0: every append hands its payload out at once
    acc = MetricsAccumulator(max_delay_s=0)
    assert same_table(acc.append(caps[0], {"a": 1}), decode_metrics_batch([caps[0]], {"a": 1}))
    assert acc.max_delay_s == 0 and acc.max_payloads == 256


def test_buffers_are_kept_or_copied():
    data = CAPTURE_PAYLOADS[0][1]
    want = decode_metrics_batch([data, data, data])
    acc = MetricsAccumulator()
    writable = bytearray(data)
    acc.append(writable)  # copied: changing it afterwards changes nothing
    acc.append(memoryview(data))  # read-only: kept
    acc.append(pa.py_buffer(data))
    writable[:] = b"\0" * len(writable)
    del writable[:]
    assert same_table(acc.flush(), want)


def test_limits_and_bad_arguments():
    data = every_kind_payload()
    n = decode_metrics(data).num_rows
    acc = MetricsAccumulator(max_rows=n - 1)
    with pytest.raises(CorruptPayloadError, match="max_rows"):
        acc.append(data)
    assert len(acc) == 0 and acc.rows == 0
    acc = MetricsAccumulator(max_rows=n)
    acc.append(data)
    acc.append(data)  # the limit is per payload
    assert acc.rows == 2 * n
    for labels, exc in [
        ([("a", "b")], TypeError),
        ({"metric": "x"}, ValueError),
        ({"payload_index": 1}, ValueError),
        ({"a": 1.5}, TypeError),
        ({"a": True}, TypeError),
        ({1: "a"}, TypeError),
        ({"a": 1 << 63}, ValueError),
    ]:
        with pytest.raises(exc):
            acc.append(data, labels)
    assert len(acc) == 2  # refused before anything was walked
    with pytest.raises(TypeError):
        acc.append(None)
    for kw in ({"max_payloads": 0}, {"max_delay_s": -1}, {"max_rows": -1}, {"max_amplified_bytes": -1}):
        with pytest.raises(ValueError):
            MetricsAccumulator(**kw)


def test_public_names():
    assert kip714.MetricsAccumulator is kip714.otlp.MetricsAccumulator is MetricsAccumulator
    assert "MetricsAccumulator" in kip714.__all__ and "MetricsAccumulator" in kip714.otlp.__all__
    assert "payloads=0" in repr(MetricsAccumulator())


# ------------------------------------------------------------------------------------------------ layouts

_SERIES_COLUMNS = ("metric", "unit", "kind", "temporality", "monotonic", "scope_name", "scope_version")


def _series_of(table: pa.Table, index: int) -> list[tuple]:
    """What identifies each row's series (the Prometheus exporter's key, without its seed), in row order."""
    rows = table.filter(pc.equal(table.column("payload_index"), index)).to_pylist()
    return [
        tuple(r[c] for c in _SERIES_COLUMNS) + (tuple(r["attributes"] or ()), tuple(r["resource"] or ())) for r in rows
    ]


def test_layouts_are_equal_exactly_when_the_rows_name_the_same_series():
    """flush_with_layouts: same series in the same order ⇔ same layout, whatever the values and times; the oracle is
    the decoded table's own columns."""
    from otlp_build import gauge, payload, sum_

    def made(value, host="a", extra=False, unit="", name="m.gauge", resource=None):
        metrics = [gauge(name, value, {"host": host}, unit=unit), sum_("m.sum", value * 2, {"n": 1})]
        if extra:
            metrics.append(gauge("m.extra", 1))
        return payload(metrics, resource=resource)

    variants = (
        [
            made(1.0),
            made(7.5),  # other values: same layout
            made(1.0, host="b"),
            made(1.0, extra=True),
            made(1.0, unit="ms"),
            made(1.0, name="m.other"),
            made(1.0, resource={"service.name": "x"}),
            made(2.0, resource={"service.name": "x"}),
            made(1.0, resource={"service.name": "y"}),
        ]
        + [raw for _, raw in CAPTURE_PAYLOADS[:6]]
    )
    acc = MetricsAccumulator()
    for p in variants:
        acc.append(p)
    table, layouts = acc.flush_with_layouts()
    assert len(layouts) == len(variants)
    series = [_series_of(table, i) for i in range(len(variants))]
    for i in range(len(variants)):
        for j in range(len(variants)):
            assert (layouts[i] == layouts[j]) == (series[i] == series[j]), (i, j)
    assert layouts[0] == layouts[1] and layouts[6] == layouts[7] and layouts[0] != layouts[2]


def test_equal_layouts_always_mean_the_same_series_on_mutated_payloads():
    """The direction the exporter relies on (it reuses a payload's series when the layout repeats), on mutations
    of the captures: two payloads with one layout decode to the same series, row for row."""
    rng = random.Random(714)
    bases = [raw for _, raw in CAPTURE_PAYLOADS]
    seen: dict[int, list[tuple]] = {}
    acc = MetricsAccumulator()
    kept = []
    for _ in range(600):
        data = mutate(rng, rng.choice(bases))
        try:
            acc.append(data)
        except CorruptPayloadError:
            continue
        kept.append(data)
    table, layouts = acc.flush_with_layouts()
    for i, layout in enumerate(layouts):
        series = _series_of(table, i)
        assert seen.setdefault(layout, series) == series
    assert len(set(layouts)) > 1


def test_flush_values_gives_the_tables_values_and_layouts():
    """flush_values: the same layouts as flush_with_layouts, each payload's rows, and the ``value`` column
    (NaN where it is null), without a table; last_layout is each payload's as appended. The oracle: the table
    the same payloads give (the corpus: every kind of point, null values, int and double values)."""
    import numpy as np

    payloads = [p for p in corpus() if verdict(p)]
    assert len(payloads) > 20
    acc = MetricsAccumulator(max_payloads=1 << 30)
    assert acc.last_layout is None
    last = []
    for p in payloads:
        acc.append(p)
        last.append(acc.last_layout)
    table, want_layouts = acc.flush_with_layouts()
    for p in payloads:
        acc.append(p)
    layouts, rows, values = acc.flush_values()
    assert len(acc) == 0 and acc.rows == 0 and acc.last_layout is None  # a new batch
    assert layouts == want_layouts == last
    want_rows = np.bincount(table.column("payload_index").to_numpy(), minlength=len(payloads))
    assert list(rows) == want_rows.tolist() and rows.typecode == "q"
    want = table.column("value").to_numpy(zero_copy_only=False)
    assert values.typecode == "d" and len(values) == table.num_rows
    got = np.frombuffer(values, dtype=np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert got[~np.isnan(got)].tobytes() == want[~np.isnan(want)].tobytes()  # bit for bit (-0.0 too)
    assert table.column("value").null_count > 0 and int(np.isnan(got).sum()) >= table.column("value").null_count
    assert acc.flush_values() == ([], rows[:0], values[:0])  # empty
