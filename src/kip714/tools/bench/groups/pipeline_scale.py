"""The ``pipeline-scale`` group: ``kip714 pipeline`` on recordings of 10^5 … 3·10^7 points, each run in a
Spark process of its own with its peak memory sampled (:mod:`kip714.tools.bench.scale`), against the
straightforward peer. Minutes to tens of minutes: it runs only when asked for alone
(``--only pipeline-scale``)."""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
import time

from .. import scale
from ..harness import Bench, Goal
from ..machine import java_version
from ..peers import PeerMissing, peer_module
from ..render import size_name_points

__all__ = ["run"]


def run(bench: Bench) -> None:
    """``kip714 pipeline`` (read a recording, decode, write points/ and errors/ as Parquet, summarise) on
    10^5 … 3·10^7 points of a simulated fleet, each run in its own process on local[2] with kip714's
    session defaults, against the straightforward peer (mapInArrow + zstandard + protobuf/otlp_pb,
    the recording's columns carried, points written the same way) on the same recording. Peak memory
    is sampled from /proc: the JVM's VmHWM, the largest Python worker's VmHWM."""
    G = "pipeline-scale"
    try:
        peer_module("pyspark")
        peer_module("zstandard")
    except PeerMissing as exc:
        bench.skip(G, "pyspark/zstandard", str(exc))
        return
    env_sizes = os.environ.get("KIP714_BENCH_SCALE_SIZES")
    sizes = bench.scale_sizes or (
        [int(float(x)) for x in env_sizes.split(",")]
        if env_sizes
        else [100_000, 1_000_000]
        if bench.quick
        else [100_000, 1_000_000, 10_000_000, 30_000_000]
    )
    env_peer = os.environ.get("KIP714_BENCH_SCALE_PEER_MAX")
    peer_max = (
        bench.scale_peer_max if bench.scale_peer_max is not None else int(float(env_peer)) if env_peer else 10_000_000
    )
    bench.extra_machine["java"] = java_version()
    work = pathlib.Path(tempfile.mkdtemp(prefix="kip714-scale-"))
    try:
        t0 = time.perf_counter()
        base_rows = scale.fleet_recording(work / "base", 5, 5, "5m")
        _, base_points = scale.recording_points(work / "base")
        bench.log(
            f"[{G}] base: a simulated fleet of 10 clients (Java and librdkafka, zstd), 5 min at 1 s: "
            f"{base_rows} pushes, {base_points:,} points in {time.perf_counter() - t0:.1f} s; larger inputs "
            "replicate its rows under new client instance ids and shifted receive times"
        )
        xs: list[int] = []
        series: dict[str, list[float | None]] = {"kip714 pipeline": [], "peer": []}
        # MiB by size; the peer's are None above peer_max
        kip_mem: dict[str, list[float]] = {"kip714 JVM": [], "kip714 JVM heap after GC": [], "kip714 Python worker": []}
        peer_mem: dict[str, list[float | None]] = {"peer JVM": [], "peer Python worker": []}
        for target in sizes:
            copies = max(1, round(target / base_points))
            rec = work / f"rec-{target}"
            t0 = time.perf_counter()
            scale.replicate_recording(work / "base", rec, copies)
            rows, points = scale.recording_points(rec)
            mb = sum(f.stat().st_size for f in rec.glob("*.parquet")) / 1e6
            bench.log(
                f"[{G}] {size_name_points(target)}: {copies} copies → {rows:,} pushes, {points:,} points, "
                f"{mb:,.0f} MB ({time.perf_counter() - t0:.1f} s to build and count in process)"
            )
            runs = {}
            for job in ("kip714", "peer"):
                if job == "peer" and target > peer_max:
                    continue
                out = work / f"out-{job}"
                run = scale.run_job(job, str(rec), str(out))
                shutil.rmtree(out, ignore_errors=True)
                runs[job] = run
                pk = run.peaks
                bench.log(
                    f"[{G}] {size_name_points(target)} {job}: "
                    + (
                        f"{run.seconds:.1f} s ({points / run.seconds / 1e3:,.0f} kpoints/s)"
                        if run.seconds
                        else f"FAILED ({run.error.splitlines()[-1] if run.error else run.returncode})"
                    )
                    + f"; peak JVM {pk.jvm_hwm / 2**20:,.0f} MiB (heap after GC ≤ {pk.heap_live / 2**20:,.0f} MiB), "
                    f"Python worker {pk.worker_hwm / 2**20:,.0f} MiB "
                    f"(workers together {pk.workers_rss / 2**20:,.0f} MiB); CPU JVM {pk.jvm_cpu_s:.0f} s, "
                    f"workers {pk.workers_cpu_s:.0f} s"
                )
                if run.seconds and run.result.get("points") != points:
                    raise AssertionError(
                        f"{job} wrote {run.result.get('points')} points, in-process decode counts {points}"
                    )
            shutil.rmtree(rec, ignore_errors=True)
            kip, peer = runs["kip714"], runs.get("peer")
            xs.append(points)
            series["kip714 pipeline"].append(kip.seconds)
            series["peer"].append(peer.seconds if peer else None)
            kip_mem["kip714 JVM"].append(kip.peaks.jvm_hwm / 2**20)
            kip_mem["kip714 JVM heap after GC"].append(kip.peaks.heap_live / 2**20)
            kip_mem["kip714 Python worker"].append(kip.peaks.worker_hwm / 2**20)
            peer_mem["peer JVM"].append(peer.peaks.jvm_hwm / 2**20 if peer else None)
            peer_mem["peer Python worker"].append(peer.peaks.worker_hwm / 2**20 if peer else None)
            extra = {
                "points": points,
                "pushes": rows,
                "recording_mb": round(mb, 1),
                "kip714_run": kip.to_dict(),
                "peer_run": peer.to_dict() if peer else None,
            }
            kip_s = {"median": (kip.seconds or float("nan")) * 1e9}
            peer_s = {"median": peer.seconds * 1e9} if peer and peer.seconds else None
            goal: Goal | None = {"kind": "max_s", "value": 120, "text": "≤ 2 min"} if target == 10_000_000 else None
            bench.add_row(
                G,
                f"pipeline-scale-{target}",
                f"kip714 pipeline, local[2], {points:,} points ({rows:,} pushes, {mb:,.0f} MB)",
                kip_s,
                peer_s,
                "mapInArrow + zstandard + protobuf/otlp_pb.flatten",
                peer_skipped=None if peer else (f"skipped above {peer_max:,} points" if kip.seconds else None),
                goal=goal,
                extra=extra,
                note=f"peak JVM {kip.peaks.jvm_hwm / 2**20:,.0f} MiB (heap after GC ≤ "
                f"{kip.peaks.heap_live / 2**20:,.0f} MiB), Python worker "
                f"{kip.peaks.worker_hwm / 2**20:,.0f} MiB"
                + (
                    f"; peer {peer.peaks.jvm_hwm / 2**20:,.0f} / {peer.peaks.worker_hwm / 2**20:,.0f} MiB"
                    if peer
                    else ""
                ),
            )
        ok = [i for i, s in enumerate(series["kip714 pipeline"]) if s]
        if len(ok) >= 2:
            lo, hi = ok[0] if xs[ok[0]] >= 1_000_000 or len(ok) < 3 else ok[1], ok[-1]
            growth = kip_mem["kip714 JVM"][hi] / kip_mem["kip714 JVM"][lo]
            bench.add_row(
                G,
                "pipeline-scale-memory",
                f"peak JVM memory at {xs[hi]:,} points / at {xs[lo]:,} points",
                {"value": growth},
                None,
                unit="ratio",
                goal={"kind": "max_value", "value": 1.25, "text": "≤ 1.25 (flat)"},
                note="VmHWM of the local[2] JVM; kip714's defaults (a 768m heap committed at start)",
            )
        bench.curve(
            "pipeline_scale",
            "kip714 pipeline on local[2]: time by input size",
            "data points",
            "seconds",
            xs,
            series,
            memory={**kip_mem, **peer_mem},
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
