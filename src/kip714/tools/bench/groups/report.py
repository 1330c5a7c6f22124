"""The ``report`` group: ``kip714 report`` (conformance counts and insights, Spark ``local[2]``) over a
recording of a simulated fleet, against the same checks written with pandas in one process
(:mod:`kip714.tools.bench.report_peer`); the two must agree. Skipped with ``--quick`` unless asked for
alone."""

from __future__ import annotations

import pathlib
import shutil
import tempfile
import time
from typing import Any

import kip714
from kip714._enums import DEFAULT_TELEMETRY_MAX_BYTES

from ..harness import Bench
from ..peers import PeerMissing, peer_module
from ..timing import summarise

__all__ = ["run"]


def report_recording(directory: pathlib.Path, min_points: int, seed: int = 714) -> tuple[int, int]:
    """A recording of at least ``min_points`` data points in ``directory``: a simulated fleet (Java and
    librdkafka clients, a slow broker, throttling and the rest of the simulator's realism) run in process,
    then copied with renamed client instances until it is large enough. Returns (pushes, points)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from kip714.sinks.recorder import read_recording
    from kip714.tools.simulate import Fleet

    staged = directory.parent / (directory.name + "-staged")
    registry = kip714.SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": "10000"})
    Fleet(30, 20, seed=seed, software="mix").run_in_process(
        kip714.TelemetryBroker(registry, node_id=1), "20m", recorder=staged
    )
    base = read_recording(staged)
    per_copy = sum(
        _count_points(p, c)
        for p, c in zip(base.column("payload").to_pylist(), base.column("compression_type").to_pylist())
    )
    copies = max(1, -(-min_points // max(1, per_copy)))
    directory.mkdir(parents=True, exist_ok=True)
    for j in range(copies):
        t = base
        for col in ("client_instance_id", "client_id"):
            i = t.schema.get_field_index(col)
            t = t.set_column(i, col, pc.binary_join_element_wise(t.column(col), pa.scalar(f"-{j}"), ""))
        pq.write_table(t, directory / f"push-{j:04d}.parquet")
    return base.num_rows * copies, per_copy * copies


def _count_points(payload: bytes | None, ctype: int) -> int:
    from kip714 import _otlp

    if not payload:
        return 0
    return _otlp.decode_metrics(kip714.decompress(payload, ctype, DEFAULT_TELEMETRY_MAX_BYTES)).num_rows


def run(bench: Bench) -> None:
    """``kip714 report`` over a recording of ≥ 1 M points (50 k with --quick) on local[2] against the
    same checks written with pandas over the decoded points (:mod:`kip714.tools.bench.report_peer`)."""
    G = "report"
    try:
        peer_module("pyspark")
        peer_module("pandas")
    except PeerMissing as exc:
        bench.skip(G, "pyspark/pandas", str(exc))
        return
    from kip714.spark import local_session
    from kip714.spark.report import report

    from ..report_peer import report_pandas

    min_points = 50_000 if bench.quick else 1_000_000
    runs = 2 if bench.quick else 3
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="kip714-bench-report-"))
    try:
        started = time.perf_counter()
        pushes, points = report_recording(tmp / "rec", min_points)
        bench.log(
            f"[{G}] recording: {pushes:,} pushes, {points:,} points ({time.perf_counter() - started:.0f} s to simulate)"
        )
        session = local_session("local[2]", app_name="kip714-bench-report", partitions=4)
        results: dict[str, Any] = {}

        def spark_run():
            rep = report(str(tmp / "rec"), session)
            conf = [r.asDict() for r in rep.conformance.collect()]
            ins = [r.asDict() for r in rep.insights.collect()]
            rep.unpersist()
            results["spark"] = (conf, ins)

        def peer_run():
            results["peer"] = report_pandas(tmp / "rec")

        times: dict[str, list[float]] = {"spark": [], "peer": []}
        try:
            for r in range(runs):
                for name, fn in (("spark", spark_run), ("peer", peer_run))[:: 1 if r % 2 == 0 else -1]:
                    t = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - t)
                    bench.log(f"[{G}] run {r + 1} {name}: {times[name][-1]:.1f} s")
        finally:
            session.stop()
        conf, ins = results["spark"]
        pconf, pins = results["peer"]
        spark_counts = {
            (c["client_software_name"], c["client_software_version"], c["check"]): (c["failures"], c["checked"])
            for c in conf
        }
        peer_counts = {
            (c["client_software_name"], c["client_software_version"], c["check"]): (c["failures"], c["checked"])
            for c in pconf
        }
        agree_conf = spark_counts == peer_counts
        agree_ins = {(i["client_instance_id"], i["insight"]) for i in ins} == set(pins)
        note = (
            f"{points:,} points from {pushes:,} pushes; conformance counts "
            f"{'agree' if agree_conf else 'DIFFER'}, insights {'agree' if agree_ins else 'DIFFER'} "
            f"({len(ins)} findings); best run after the first (Spark warm-up)"
        )
        summ = {}
        for name, ts in times.items():
            s = summarise([t * 1e9 for t in (ts[1:] if len(ts) > 1 else ts)])
            s["median"] = s["min"]
            s["all_runs_s"] = ts
            summ[name] = s
        bench.add_row(
            G,
            f"report-{points}",
            f"kip714 report (conformance + insights) over {points:,} points, Spark local[2]",
            summ["spark"],
            summ["peer"],
            "pandas over the decoded points (one process)",
            goal={"kind": "ratio", "value": 3, "text": "≥ 3×"},
            note=note,
            extra={"points": points, "pushes": pushes, "agree_conformance": agree_conf, "agree_insights": agree_ins},
        )
        if not (agree_conf and agree_ins):
            diff = {
                k: (spark_counts.get(k), peer_counts.get(k))
                for k in set(spark_counts) | set(peer_counts)
                if spark_counts.get(k) != peer_counts.get(k)
            }
            bench.notes.append(f"report: Spark and pandas disagree: {sorted(diff.items())[:6]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
