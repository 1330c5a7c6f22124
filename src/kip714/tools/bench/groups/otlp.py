"""The ``otlp`` group: OTLP MetricsData → Arrow rows with :func:`kip714.decode_metrics` against protobuf
(upb) parsing + Python flattening (:func:`kip714.otlp.reference.flatten`) by payload size; many small
payloads in one :func:`~kip714.decode_metrics_batch` call; pyarrow's own fixed cost for the table, the
floor of a single small payload; and the per-push decode of a receiver that decodes each push as it arrives
(librdkafka's 1.45 KB producer push): :class:`kip714.MetricsAccumulator` (a table per 256 pushes) and
``decode_metrics`` (a table per push) against the plain code a receiver would write, upb parsing and a Python
loop flattening name, kind, resource, attributes, time and value; and the accumulator on large payloads (one
table each) against ``decode_metrics``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..harness import Bench
from ..payloads import KB, otlp_like
from ..peers import dist_version
from ..render import fmt_bytes

__all__ = ["run"]


def _factory(
    name: str, fn: Callable[..., Any], args: tuple[Any, ...]
) -> Callable[[], tuple[str, Any, tuple[Any, ...]]]:
    """A peer factory for :meth:`Bench.pair`: ``(name, fn, args)``."""
    return lambda: (name, fn, args)


def _pyarrow_round_trip(table: Any) -> Callable[[], Any]:
    """A call that exports ``table`` (one batch) to an ArrowArray and imports it back as a Table, as
    decode_metrics hands its columns to pyarrow: pyarrow's fixed cost for a table of that schema."""
    import ctypes

    import pyarrow as pa

    batch, schema = table.to_batches()[0], table.schema
    struct = ctypes.create_string_buffer(80)  # sizeof(struct ArrowArray)
    ptr = ctypes.addressof(struct)
    import_batch, from_batches = pa.RecordBatch._import_from_c, pa.Table.from_batches

    def round_trip(_keep=struct):  # the closure holds the buffer: ptr must not outlive it
        batch._export_to_c(ptr)
        return from_batches([import_batch(ptr, schema)], schema)

    return round_trip


def run(bench: Bench) -> None:
    """Add the OTLP decode rows and curve to ``bench``."""
    G = "otlp"
    from kip714 import _otlp
    from kip714.otlp import reference as otlp_pb

    try:
        from google.protobuf.internal import api_implementation

        backend = api_implementation.Type()
    except ImportError:
        backend = None
    bench.extra_machine["protobuf_backend"] = backend
    peer_name = f"protobuf {dist_version('protobuf')} ({backend}) + Python (otlp.reference.flatten)"
    if backend != "upb":
        bench.notes.append(f"otlp: protobuf backend is {backend!r}, not upb: the peer is slower than it should be")
    sizes = (
        [KB, 16 * KB, 256 * KB, 1_000_000]
        if bench.quick
        else [KB, 4 * KB, 16 * KB, 64 * KB, 100 * KB, 256 * KB, 1_000_000]
    )
    kip_ns, peer_ns, xs, nrows = [], [], [], []
    for size in sizes:
        data = otlp_like(size, seed=size + 11)
        n_rows = _otlp.decode_metrics(data).num_rows
        assert n_rows == len(otlp_pb.flatten(data)) > 0
        row = bench.pair(
            G,
            f"decode-metrics-{size}",
            f"OTLP MetricsData → rows, {fmt_bytes(len(data))} payload ({n_rows:,} points)",
            (_otlp.decode_metrics, (data,)),
            _factory(peer_name, otlp_pb.flatten, (data,)),
            goal={"kind": "ratio", "value": 8, "text": "≥ 8×"},
            extra={"payload_bytes": len(data), "points": n_rows},
        )
        kip_ns.append(row["kip714"]["median"])
        peer_ns.append(row["peer"]["median"])
        xs.append(len(data))
        nrows.append(n_rows)
    # small payloads: the per-call cost of building an Arrow table dominates; decode_metrics_batch pays it
    # once for many payloads (as kip714.spark does)
    data = otlp_like(KB, seed=KB + 11)
    many = [data] * 100
    n_rows = _otlp.decode_metrics(data).num_rows

    def flatten_each(payloads):
        for d in payloads:
            otlp_pb.flatten(d)

    bench.pair(
        G,
        "decode-metrics-batch-100x1KB",
        f"same, 100 payloads of {fmt_bytes(len(data))}: one decode_metrics_batch call vs 100 flattens",
        (_otlp.decode_metrics_batch, (many,)),
        lambda: (peer_name, flatten_each, (many,)),
        extra={"payload_bytes": len(data), "points": n_rows, "payloads_per_call": 100},
        note="informational: the goal is per single payload",
    )
    bench.rows[-1]["kip714"]["per_payload_ns"] = bench.rows[-1]["kip714"]["median"] / 100
    # the floor of a single small payload: pyarrow's own fixed cost for this 29-column table (maps, lists), as
    # pyarrow exporting the finished table through the C data interface and importing it back as a Table
    bench.pair(
        G,
        "decode-metrics-vs-pyarrow-round-trip",
        f"same, one {fmt_bytes(len(data))} payload: decode_metrics vs pyarrow alone passing the finished "
        "table through the C data interface",
        (_otlp.decode_metrics, (data,)),
        lambda: (
            "pyarrow: export + import + Table.from_batches of the decoded table",
            _pyarrow_round_trip(_otlp.decode_metrics(data)),
            (),
        ),
        extra={"payload_bytes": len(data), "points": n_rows},
        note="informational: pyarrow's fixed cost for the table is the floor of a single payload",
    )
    _per_push(bench, G, backend)
    bench.curve(
        "otlp",
        "OTLP decode: kip714._otlp.decode_metrics (Arrow) vs protobuf + Python",
        "payload bytes",
        "time per payload (ns)",
        xs,
        {"kip714 decode_metrics → pyarrow.Table": kip_ns, f"protobuf ({backend}) + otlp_pb.flatten → dicts": peer_ns},
        points=nrows,
    )


def plain_flatten(data: bytes) -> list[tuple[Any, ...]]:
    """What a receiver writes without kip714: upb parses the push, a Python loop flattens each data point to
    ``(name, kind, resource attributes, point attributes, time, value)`` (the value of a number point, the
    count of the others); attribute values as protobuf gives them."""
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

    md = MetricsData()
    md.ParseFromString(data)
    rows = []
    for rm in md.resource_metrics:
        resource = {}
        for kv in rm.resource.attributes:
            case = kv.value.WhichOneof("value")
            resource[kv.key] = getattr(kv.value, case) if case else None
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                if kind is None:
                    continue
                for p in getattr(m, kind).data_points:
                    attrs = {}
                    for kv in p.attributes:
                        case = kv.value.WhichOneof("value")
                        attrs[kv.key] = getattr(kv.value, case) if case else None
                    if kind in ("gauge", "sum"):
                        case = p.WhichOneof("value")
                        value = getattr(p, case) if case else None
                    else:
                        value = p.count
                    rows.append((m.name, kind, resource, attrs, p.time_unix_nano, value))
    return rows


def _per_push(bench: Bench, G: str, backend: str | None) -> None:
    """The per-push rows (see the module docstring)."""
    import kip714
    from kip714 import MetricsAccumulator, decode_metrics

    from ..payloads import sample_capture

    compressed, ctype = sample_capture("producer_zstd_push_01_zstd.bin")
    data = bytes(kip714.decompress(compressed, ctype, 1 << 20))
    table = decode_metrics(data)
    plain = plain_flatten(data)
    # the peer's rows are kip714's: the same points, names, times and values
    values = [
        c if v is None else v for v, c in zip(table.column("value").to_pylist(), table.column("count").to_pylist())
    ]
    assert [(r[0], r[4], float(r[5])) for r in plain] == list(
        zip(table.column("metric").to_pylist(), table.column("time_unix_nano").to_pylist(), map(float, values))
    ), "the plain peer and kip714 disagree on the rows"
    peer = f"protobuf {dist_version('protobuf')} ({backend}) + a plain Python loop"
    accumulator = MetricsAccumulator(max_payloads=256)
    bench.pair(
        G,
        "decode-per-push-accumulator-1450",
        f"one push decoded as it arrives, librdkafka's {fmt_bytes(len(data))} push ({table.num_rows} points): "
        "MetricsAccumulator.append (a table per 256 pushes)",
        (accumulator.append, (data,)),
        lambda: (peer, plain_flatten, (data,)),
        goal={"kind": "ratio", "value": 4, "text": "≤ ¼ of the peer's time"},
        extra={"payload_bytes": len(data), "points": table.num_rows, "payloads_per_table": 256},
        note="the accumulator's time per push includes its share of building and handing out each table",
    )
    bench.pair(
        G,
        "decode-per-push-decode-metrics-1450",
        "same push decoded alone: decode_metrics (a table per push)",
        (decode_metrics, (data,)),
        lambda: (peer, plain_flatten, (data,)),
        extra={"payload_bytes": len(data), "points": table.num_rows},
        note="informational: pyarrow's fixed cost of a table, paid per push",
    )
    # large payloads: one table per payload through the accumulator costs what decode_metrics costs
    sizes = [256 * KB] if bench.quick else [256 * KB, 1_000_000]
    for size in sizes:
        big = otlp_like(size, seed=size + 11)
        one = MetricsAccumulator(max_payloads=1)
        table = one.append(big)
        assert table is not None and table.num_rows == decode_metrics(big).num_rows
        bench.pair(
            G,
            f"decode-accumulator-large-{size}",
            f"a {fmt_bytes(len(big))} payload, a table of its own: MetricsAccumulator vs decode_metrics",
            (one.append, (big,)),
            _factory("decode_metrics", decode_metrics, (big,)),
            goal={"kind": "within", "value": 0.1, "text": "no slower (within 10%)"},
            extra={"payload_bytes": len(big)},
        )
