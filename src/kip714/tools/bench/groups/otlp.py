"""The ``otlp`` group: OTLP MetricsData → Arrow rows with :func:`kip714.decode_metrics` against protobuf
(upb) parsing + Python flattening (:func:`kip714.otlp.reference.flatten`) by payload size; many small
payloads in one :func:`~kip714.decode_metrics_batch` call; and pyarrow's own fixed cost for the table,
the floor of a single small payload."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..harness import Bench
from ..payloads import KB, otlp_like
from ..peers import dist_version
from ..render import fmt_bytes

__all__ = ["run"]


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
            lambda data=data: (peer_name, otlp_pb.flatten, (data,)),
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
    bench.curve(
        "otlp",
        "OTLP decode: kip714._otlp.decode_metrics (Arrow) vs protobuf + Python",
        "payload bytes",
        "time per payload (ns)",
        xs,
        {"kip714 decode_metrics → pyarrow.Table": kip_ns, f"protobuf ({backend}) + otlp_pb.flatten → dicts": peer_ns},
        points=nrows,
    )
