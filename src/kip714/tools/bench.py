"""``kip714 bench``: kip714 against its peers, measured in the same run, without pytest.

The measurements are the ones of the pytest-benchmark suites in ``bench/`` (same payloads, same peers),
grouped as ``protocol``, ``codec``, ``crc``, ``limiter``, ``broker``, ``otlp``, ``export`` (the Prometheus
exporter and the OTLP forwarder, :mod:`kip714.tools.bench_export`) and ``spark``. The result is a
table (operation, kip714, peer, ratio, goal, met), optionally a JSON file for tracking and PNG plots of how
the cost grows with the work (payload size, live instances, batch size) next to the peer's curve.

How it times:

* kip714 and its peer are measured in **alternating rounds** (kip714, peer, peer, kip714, …) so that noise
  from other processes on these small machines hits both alike; each number is the **median** over
  rounds, and the ratio is peer median / kip714 median (> 1: kip714 is faster).
* A round is an inner loop sized to about 1 ms (``time.perf_counter_ns`` around ``for _ in repeat(None, n):
  f(*args)``), so sub-microsecond calls are not dominated by the timer. Both sides pay the same loop
  overhead (~10 ns), which only lowers kip714's ratios. The garbage collector is off while timing, as in
  ``timeit``.
* Peers that are not installed are skipped with a note: their cells say so and no number is invented.

The Spark group starts a ``local[2]`` session (seconds) and decodes the same cached input DataFrame with
``kip714.spark.decode_payloads`` and with the best protobuf-based approach (``mapInArrow`` whose Python
function decompresses with the codec package and flattens with protobuf + Python, ``kip714.otlp.reference``),
each materialised with ``write.format("noop")``, interleaved, the first run of each discarded.
"""

from __future__ import annotations

import argparse
import array
import functools
import gc
import gzip
import importlib
import importlib.metadata
import importlib.util
import itertools
import math
import os
import pathlib
import platform
import random
import statistics
import subprocess
import sys
import time
import traceback
import uuid
import zlib
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Callable, Sequence

import kip714
from kip714._enums import DEFAULT_ACCEPTED_COMPRESSION_TYPES, DEFAULT_TELEMETRY_MAX_BYTES, compression_type_from_name
from kip714.tools import SAMPLES

ACCEPTED = tuple(int(c) for c in DEFAULT_ACCEPTED_COMPRESSION_TYPES)
#: The source checkout this module sits in (src/kip714/tools/bench.py), when it runs from one.
CHECKOUT = pathlib.Path(__file__).resolve().parents[3]

GROUPS = ("protocol", "codec", "crc", "limiter", "broker", "otlp", "export", "spark", "proxy", "record",
          "pipeline-scale", "report")
from . import SAMPLES
LIMIT = DEFAULT_TELEMETRY_MAX_BYTES  # the decompression cap

KB = 1024
SIZE_NAMES = {64: "64 B", 256: "256 B", KB: "1 KB", 4 * KB: "4 KB", 16 * KB: "16 KB", 64 * KB: "64 KB",
              100 * KB: "100 KB", 256 * KB: "256 KB", 1_000_000: "1 MB", 1 << 20: "1 MiB"}


def size_name(n: int) -> str:
    return SIZE_NAMES.get(n, f"{n} B")


def size_name_points(n: int) -> str:
    """10^5 points → "1e5 points"."""
    exp = int(math.log10(n)) if n > 0 else 0
    mant = n / 10 ** exp
    return f"{mant:g}e{exp} points" if mant != 1 else f"1e{exp} points"


def fmt_bytes(n: int) -> str:
    """Actual sizes, decimal units: 1450 → '1.45 kB'."""
    if n < 1000:
        return f"{n} B"
    if n < 1_000_000:
        return f"{n / 1e3:.3g} kB"
    return f"{n / 1e6:.3g} MB"


# ------------------------------------------------------------------------------------------ timing

def _loop_ns(f: Callable, args: tuple, n: int) -> int:
    it = repeat(None, n)
    t0 = time.perf_counter_ns()
    for _ in it:
        f(*args)
    return time.perf_counter_ns() - t0


def inner_loop_size(f: Callable, args: tuple = (), target_ns: int = 1_000_000) -> int:
    """Calls per round so that a round lasts about ``target_ns`` (1 for calls slower than that)."""
    f(*args)  # warm up (lazy imports, caches)
    n = 1
    while True:
        dt = _loop_ns(f, args, n)
        if dt >= target_ns // 8 or n >= 1 << 22:
            break
        n *= 8 if dt < target_ns // 64 else 2
    return max(1, round(target_ns * n / max(dt, 1)))


def _capture_payload(compression_type: int) -> bytes:
    """The compressed OTLP payload of a real librdkafka push with this codec (the package's samples)."""
    import kip714

    for path in sorted(SAMPLES.glob(f"*_{kip714.CompressionType(compression_type).name.lower()}.bin")):
        body = kip714.decode_request(path.read_bytes()[4:]).body
        if type(body) is kip714.PushTelemetryRequest and body.metrics is not None and len(body.metrics):
            return bytes(body.metrics)
    raise LookupError(f"no sample push with compression type {compression_type}")


def threaded_handle_rate(threads: int, rounds: int, payload: bytes, max_instances: int = 16384) -> tuple[float, int]:
    """Requests per second through one TelemetryBroker shared by ``threads`` threads, each doing ``rounds`` Gets
    for a new client and a zstd push from it; and how many requests raised (anything but an answer)."""
    import threading
    import uuid

    from .. import (ClientInfo, GetTelemetrySubscriptionsRequest, PushTelemetryRequest, SubscriptionRegistry,
                    TelemetryBroker)

    reg = SubscriptionRegistry()
    reg.set("all", {"metrics": "*", "interval.ms": "100"})
    broker = TelemetryBroker(reg, max_instances=max_instances)
    zero = uuid.UUID(int=0)
    errors = [0] * threads
    start = threading.Barrier(threads + 1)

    def run(k: int) -> None:
        info = ClientInfo(client_id=f"bench-{k}")
        handle = broker.handle
        start.wait()
        for _ in range(rounds):
            try:
                sub, _ = handle(GetTelemetrySubscriptionsRequest(zero), info)
                handle(PushTelemetryRequest(sub.client_instance_id, sub.subscription_id, False, 4, payload), info)
            except Exception:
                errors[k] += 1

    workers = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    start.wait()
    t0 = time.perf_counter()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t0
    return 2 * threads * rounds / elapsed, sum(errors)


def summarise(samples: Sequence[float]) -> dict:
    """Summary of per-operation samples (ns)."""
    s = sorted(samples)
    q = statistics.quantiles(s, n=4) if len(s) >= 2 else [s[0]] * 3
    return {"median": statistics.median(s), "min": s[0], "max": s[-1], "q1": q[0], "q3": q[2],
            "mean": statistics.fmean(s), "rounds": len(s)}


def interleaved(contenders: Sequence[tuple[Callable, tuple]], rounds: int, target_ns: int = 1_000_000,
                budget_s: float | None = None, min_rounds: int = 3, per_call: Sequence[float] | None = None
                ) -> list[dict]:
    """Time each ``(f, args)`` in alternating rounds (order reversed every other round); returns one summary
    per contender, in ns per call (divided by ``per_call[i]`` when given, e.g. decisions per call).

    ``budget_s`` caps the rounds so that slow calls (several ms each) do not run for minutes."""
    inners = [inner_loop_size(f, a, target_ns) for f, a in contenders]
    if budget_s is not None:
        est = sum(_loop_ns(f, a, n) for (f, a), n in zip(contenders, inners)) / 1e9
        rounds = max(min_rounds, min(rounds, int(budget_s / max(est, 1e-9))))
    samples: list[list[float]] = [[] for _ in contenders]
    order = list(range(len(contenders)))
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            for i in (order if r % 2 == 0 else order[::-1]):
                f, a = contenders[i]
                samples[i].append(_loop_ns(f, a, inners[i]) / inners[i])
    finally:
        if enabled:
            gc.enable()
    out = []
    for i, s in enumerate(samples):
        div = per_call[i] if per_call else 1
        summ = summarise([x / div for x in s])
        summ["calls_per_round"] = inners[i]
        if per_call:
            summ["ops_per_call"] = div
        out.append(summ)
    if len(out) == 2:  # a paired view: ratio of the two rounds that ran next to each other
        paired = [b / a for a, b in zip(samples[0], samples[1]) if a > 0]
        out[0]["paired_ratio_median"] = statistics.median(paired) if paired else None
    return out


def settle_allocator() -> None:
    """Put glibc's malloc in its steady state before timing. Its mmap threshold starts at 128 KiB and rises
    to the size of the largest mmapped block freed so far (up to 32 MiB): until a process has freed one big
    buffer, every output buffer above 128 KiB (zstandard's ``max_output_size`` of 1 MiB, zlib's growing
    buffers) is a fresh mmap with page faults, several times slower, and which side pays depends on what ran
    before. Allocating and freeing one 4 MiB block gives every group the state any long-running process
    reaches, whatever ran before it."""
    block = bytearray(4 << 20)
    block[::4096] = b"\x01" * len(block[::4096])
    del block


# ------------------------------------------------------------------------------------------ formatting

def fmt_ns(ns: float) -> str:
    if ns < 1_000:
        return f"{ns:,.0f} ns" if ns >= 100 else f"{ns:.1f} ns"
    if ns < 1_000_000:
        return f"{ns / 1e3:,.3g} µs" if ns < 100_000 else f"{ns / 1e3:,.0f} µs"
    if ns < 1e9:
        return f"{ns / 1e6:,.3g} ms" if ns < 1e8 else f"{ns / 1e6:,.0f} ms"
    return f"{ns / 1e9:,.3g} s"


def fmt_rate(per_s: float) -> str:
    if per_s >= 1e6:
        return f"{per_s / 1e6:.3g} M/s"
    if per_s >= 1e3:
        return f"{per_s / 1e3:.3g} k/s"
    return f"{per_s:.3g}/s"


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return "—"
    return f"{r:.3g}×" if r < 100 else f"{r:,.0f}×"


def render_table(rows: Sequence[dict]) -> str:
    headers = ("operation", "kip714", "peer", "ratio", "goal", "met")
    cells = []
    for row in rows:
        cells.append((row["operation"], row["kip714_text"], row["peer_text"], fmt_ratio(row["ratio"]),
                      row["goal"]["text"] if row["goal"] else "—",
                      {True: "yes", False: "NO", None: "—"}[row["met"]]))
    widths = [max(len(str(c[i])) for c in [headers, *cells]) for i in range(len(headers))]
    line = lambda c: "  ".join(str(x).ljust(w) for x, w in zip(c, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers), "  ".join("-" * w for w in widths)] + [line(c) for c in cells])


def render_markdown(rows: Sequence[dict]) -> str:
    out = ["| operation | kip714 | peer | ratio | goal | met |", "|---|---|---|---|---|---|"]
    for row in rows:
        met = {True: "yes", False: "**no**", None: "—"}[row["met"]]
        out.append(f"| {row['operation']} | {row['kip714_text']} | {row['peer_text']} | {fmt_ratio(row['ratio'])} "
                   f"| {row['goal']['text'] if row['goal'] else '—'} | {met} |")
    return "\n".join(out)


# ------------------------------------------------------------------------------------------ peers

class PeerMissing(Exception):
    """A peer package is not installed (or cannot be imported): its measurements are skipped."""


def peer_module(name: str):
    """Import a peer's module, or raise PeerMissing. The top-level package is imported first, so a
    package blocked or absent makes every one of its submodules count as missing too."""
    try:
        importlib.import_module(name.split(".")[0])
        return importlib.import_module(name)
    except ImportError as exc:
        raise PeerMissing(f"{name.split('.')[0]} not installed ({exc.__class__.__name__}: {exc})") from None


def dist_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


PEER_DISTS = {"kio": "kio", "kafka-python": "kafka-python", "zstandard": "zstandard", "lz4": "lz4",
              "cramjam": "cramjam", "python-snappy": "python-snappy", "crc32c": "crc32c",
              "google-crc32c": "google-crc32c", "protobuf": "protobuf", "opentelemetry-proto": "opentelemetry-proto",
              "pyarrow": "pyarrow", "pyspark": "pyspark", "matplotlib": "matplotlib", "numpy": "numpy",
              "pandas": "pandas"}


def peer_label(dist: str) -> str:
    v = dist_version(dist)
    return f"{dist} {v}" if v else dist


# ------------------------------------------------------------------------------------------ payloads

@functools.lru_cache(maxsize=None)
def sample_payloads() -> tuple[bytes, ...]:
    """The distinct uncompressed OTLP payloads of the bundled librdkafka captures."""
    seen: dict[bytes, None] = {}
    for path in sorted(SAMPLES.glob("*.bin")):
        frames, _ = kip714.split_frames(path.read_bytes())
        body = kip714.decode_request(frames[0]).body
        if body.metrics_size:
            seen[bytes(kip714.decompress(body.metrics, body.compression_type, LIMIT))] = None
    return tuple(seen)


@functools.lru_cache(maxsize=64)
def otlp_like(target: int, seed: int = 1) -> bytes:
    """A realistic OTLP MetricsData of about ``target`` bytes (at least, within one capture): the capture
    payloads concatenated (a valid MetricsData: repeated fields merge) with varied values and times."""
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    rnd = random.Random(seed)
    base = sample_payloads()
    parts, total = [], 0
    while total < target:
        md = metrics_pb2.MetricsData()
        md.ParseFromString(rnd.choice(base))
        for rm in md.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    kind = metric.WhichOneof("data")
                    if kind in ("gauge", "sum"):
                        for dp in getattr(metric, kind).data_points:
                            dp.time_unix_nano += rnd.randrange(10**12)
                            if dp.WhichOneof("value") == "as_double":
                                dp.as_double = rnd.random() * 1000
                            else:
                                dp.as_int = rnd.randrange(10**6)
        blob = md.SerializeToString()
        if parts and total + len(blob) > LIMIT:
            break
        parts.append(blob)
        total += len(blob)
    return b"".join(parts)


# ------------------------------------------------------------------------------------------ the run

# SubscriptionId inputs: a typical two-entry list and the KIP's 13 standard metrics as the broker would
# order them (spec vector 8), with the vectors' client instance id.
_P = "org.apache.kafka."
SUBSCRIPTION_LISTS = {
    "2 metric prefixes": [_P + "client.producer.partition.latency", _P + "client.producer.partition.queue."],
    "13 metrics": [_P + m for m in (
        "producer.record.queue.time.avg producer.node.request.latency.max "
        "consumer.node.request.latency.max producer.produce.throttle.time.avg consumer.poll.idle.ratio.avg "
        "producer.connection.creation.total producer.connection.creation.rate "
        "producer.produce.throttle.time.max producer.record.queue.time.max "
        "consumer.node.request.latency.avg producer.node.request.latency.avg "
        "consumer.connection.creation.total consumer.connection.creation.rate").split()],
}
SUBSCRIPTION_CLIENT = uuid.UUID(int=(0x5E0B1D6A3C4F7A21 << 64) | 0x9D3E2B7C8A1F4E60)


def _pyarrow_round_trip(table) -> Callable[[], Any]:
    """A call that exports ``table`` (one batch) to an ArrowArray and imports it back as a Table, as
    decode_metrics hands its columns to pyarrow: pyarrow's fixed cost for a table of that schema."""
    import ctypes

    import pyarrow as pa

    batch, schema = table.to_batches()[0], table.schema
    struct = ctypes.create_string_buffer(80)        # sizeof(struct ArrowArray)
    ptr = ctypes.addressof(struct)
    import_batch, from_batches = pa.RecordBatch._import_from_c, pa.Table.from_batches

    def round_trip(_keep=struct):  # the closure holds the buffer: ptr must not outlive it
        batch._export_to_c(ptr)
        return from_batches([import_batch(ptr, schema)], schema)
    return round_trip


def python_subscription_id(crc32c_fn: Callable[[bytes], int]) -> Callable:
    """The SubscriptionId peer, the straightforward Python way: join + encode + ``crc32c_fn`` (the crc32c
    package's) + Uuid.hashCode + xor. Returned as a closure so that the measured call is that function
    alone, with no wrapper around it."""

    def subscription_id(metrics, interval, client_instance_id) -> int:
        crc = crc32c_fn(("[" + ", ".join(metrics) + "]" + str(interval)).encode("utf-8"))
        n = client_instance_id.int
        x = (n >> 64) ^ (n & 0xFFFFFFFFFFFFFFFF)
        v = (crc ^ (x >> 32) ^ x) & 0xFFFFFFFF
        return v - (1 << 32) if v & 0x80000000 else v

    return subscription_id


@dataclass(frozen=True)
class Case:
    """One table row's contenders, as ``pair()`` saw them: kip714's ``(f, args)`` and the peer's
    ``(name, f, args)`` (None when the peer is missing). The pytest-benchmark front-end (``bench/``) times
    these same callables, so both harnesses measure the same thing."""

    group: str
    key: str
    operation: str
    kip714: tuple
    peer: tuple | None


class Bench:
    """One ``kip714 bench`` run: groups add rows (table), curves (plots) and skipped-peer notes.

    ``collect=True`` runs every group with the fewest rounds and keeps each pair's contenders in
    :attr:`cases` (what ``bench/test_bench.py`` hands to pytest-benchmark)."""

    def __init__(self, quick: bool = False, groups: Sequence[str] = GROUPS, log=None, spark_k: int | None = None,
                 collect: bool = False, scale_sizes: Sequence[int] | None = None, scale_peer_max: int | None = None):
        self.quick = quick or collect
        self.scale_sizes = list(scale_sizes) if scale_sizes else None
        self.scale_peer_max = scale_peer_max
        self.cases: list[Case] | None = [] if collect else None
        self.groups = list(groups)
        self.log_stream = log if log is not None else sys.stderr
        self.rows: list[dict] = []
        self.curves: dict[str, dict] = {}
        self.skipped: list[dict] = []
        self.notes: list[str] = []
        self.errors: list[dict] = []
        self.group_seconds: dict[str, float] = {}
        self.spark_k = spark_k
        self.extra_machine: dict[str, Any] = {}
        # rounds: full 30, quick 9; collecting only needs the callables (and one quick look)
        self.rounds = 3 if collect else 9 if quick else 30
        self.budget = 0.02 if collect else 0.25 if quick else 1.5  # seconds per contender and measurement

    # -------------------------------------------------------------- helpers
    def log(self, msg: str) -> None:
        print(msg, file=self.log_stream, flush=True)

    def skip(self, group: str, peer: str, reason: str) -> str:
        if not any(s["peer"] == peer and s["group"] == group for s in self.skipped):
            self.skipped.append({"group": group, "peer": peer, "reason": reason})
            self.log(f"[{group}] skipping peer {peer}: {reason}")
        return f"skipped: {reason.split(' (')[0]}"

    def add_row(self, group: str, key: str, operation: str, kip: dict, peer: dict | None = None,
                peer_name: str | None = None, peer_skipped: str | None = None, goal: dict | None = None,
                unit: str = "time", note: str = "", extra: dict | None = None) -> dict:
        """``kip`` / ``peer``: summaries in ns per operation (unit time/rate) or {"value": bytes}."""
        ratio = None
        if peer is not None and unit in ("time", "rate", "throughput"):
            ratio = peer["median"] / kip["median"]
        met = None
        if goal:
            kind, target = goal["kind"], goal["value"]
            if kind == "ratio" and ratio is not None:
                met = ratio >= target
            elif kind == "within" and ratio is not None:
                met = ratio >= 1 / (1 + target)
            elif kind == "rate":
                met = 1e9 / kip["median"] >= target
            elif kind in ("max_bytes", "max_value"):
                met = kip["value"] <= target
            elif kind == "max_time":
                met = kip["median"] <= target
            elif kind == "min_value":
                met = kip["value"] >= target
            elif kind == "added_ns" and peer is not None:
                met = kip["median"] - peer["median"] <= target
            elif kind == "max_s":
                met = kip["median"] / 1e9 <= target
        if unit == "time":
            kip_text = fmt_ns(kip["median"])
            peer_text = f"{peer_name} {fmt_ns(peer['median'])}" if peer is not None else None
        elif unit == "throughput":   # medians in ns per MB
            kip_text = f"{1e9 / kip['median']:.1f} MB/s"
            peer_text = f"{peer_name} {1e9 / peer['median']:.1f} MB/s" if peer is not None else None
        elif unit == "millicores":
            kip_text = f"{kip['value']:.1f} millicores per MB/s"
            peer_text = None
        elif unit == "count":
            kip_text = f"{kip['value']:,}"
            peer_text = None
        elif unit == "rate":
            kip_text = f"{fmt_rate(1e9 / kip['median'])} ({fmt_ns(kip['median'])} each)"
            peer_text = (f"{peer_name} {fmt_rate(1e9 / peer['median'])}" if peer is not None else None)
        elif unit == "ratio":
            kip_text = f"{kip['value']:.2f}"
            peer_text = f"{peer_name} {peer['value']:.2f}" if peer is not None else None
        else:
            kip_text = f"{kip['value']:.1f} B"
            peer_text = None
        if peer_text is None:
            peer_text = peer_skipped if peer_skipped else (peer_name or "—")
        row = {"group": group, "id": key, "operation": operation, "unit": unit, "kip714": kip,
               "peer": peer, "peer_name": peer_name, "peer_skipped": peer_skipped, "ratio": ratio, "goal": goal,
               "met": met, "kip714_text": kip_text, "peer_text": peer_text, "note": note, **(extra or {})}
        self.rows.append(row)
        goal_txt = "" if not goal else f"  goal {goal['text']}: {'met' if met else 'MISSED' if met is False else 'n/a'}"
        self.log(f"[{group}] {operation}: kip714 {kip_text}; peer {peer_text}; ratio {fmt_ratio(ratio)}{goal_txt}")
        return row

    def pair(self, group: str, key: str, operation: str, kip: tuple[Callable, tuple],
             peer_factory: Callable[[], tuple[str, Callable, tuple]] | None, goal: dict | None = None,
             note: str = "", peer_dist: str | None = None, extra: dict | None = None,
             rounds: int | None = None) -> dict:
        """Measure kip714's ``(f, args)`` against the peer that ``peer_factory()`` builds (or skip it)."""
        peer_name = peer_skipped = None
        contenders = [kip]
        if peer_factory is not None:
            try:
                peer_name, pf, pa_ = peer_factory()
                contenders.append((pf, pa_))
            except PeerMissing as exc:
                peer_skipped = self.skip(group, peer_dist or "peer", str(exc))
        if self.cases is not None:
            self.cases.append(Case(group, key, operation, kip,
                                   (peer_name, *contenders[1]) if len(contenders) > 1 else None))
        stats = interleaved(contenders, rounds or self.rounds, budget_s=self.budget)
        return self.add_row(group, key, operation, stats[0], stats[1] if len(stats) > 1 else None,
                            peer_name, peer_skipped, goal, note=note, extra=extra)

    def curve(self, name: str, title: str, xlabel: str, ylabel: str, x: Sequence, series: dict[str, Sequence],
              logx: bool = True, logy: bool = True, **extra) -> None:
        self.curves[name] = {"title": title, "xlabel": xlabel, "ylabel": ylabel, "x": list(x),
                             "series": {k: list(v) for k, v in series.items()}, "logx": logx, "logy": logy, **extra}

    # -------------------------------------------------------------- driver
    def run(self) -> None:
        settle_allocator()
        for group in self.groups:
            if group == "pipeline-scale" and (self.cases is not None or
                                              set(self.groups) - {"spark", "pipeline-scale"}):
                # minutes to tens of minutes, a Spark process per size: only when asked for
                self.notes.append("pipeline-scale: runs only with --only pipeline-scale")
                continue
            if group in ("spark", "report") and self.quick and self.groups != [group]:
                self.notes.append("spark: skipped with --quick (use --only spark --quick for a tiny run)")
                self.log("[spark] skipped with --quick (run --only spark --quick for a tiny run)")
                continue
            started = time.perf_counter()
            self.log(f"[{group}] …")
            try:
                getattr(self, f"group_{group.replace('-', '_')}")()
            except Exception as exc:  # a bug or a broken environment: report it, keep going, exit non-zero
                self.errors.append({"group": group, "error": f"{type(exc).__name__}: {exc}",
                                    "traceback": traceback.format_exc()})
                self.log(f"[{group}] ERROR {type(exc).__name__}: {exc}")
                traceback.print_exc(file=self.log_stream)
            self.group_seconds[group] = round(time.perf_counter() - started, 2)
            self.log(f"[{group}] done in {self.group_seconds[group]:.1f} s")

    # ============================================================== protocol
    def group_protocol(self) -> None:
        import datetime
        import io

        G = "protocol"
        instance = uuid.UUID("009859c3-10db-450e-a3b7-522b0ef19df4")
        metrics = ["org.apache.kafka.producer.", "org.apache.kafka.consumer.node.request.latency."]

        def push_frame(payload_size: int) -> bytes:
            body = kip714.PushTelemetryRequest(client_instance_id=instance, subscription_id=24301,
                                               compression_type=4, metrics=random.Random(1).randbytes(payload_size))
            return kip714.encode_request(body, 4, "kip714-probe-producer")[4:]

        def gts(requested: Sequence[str]):
            return kip714.GetTelemetrySubscriptionsResponse(
                client_instance_id=instance, subscription_id=-111713672, accepted_compression_types=list(ACCEPTED),
                push_interval_ms=300000, telemetry_max_bytes=LIMIT, delta_temporality=True,
                requested_metrics=list(requested))

        frame = push_frame(4096)
        assert kip714.decode_request(frame).body.metrics_size == 4096
        GTS = gts(metrics)

        def kio_decoder():
            serial = peer_module("kio.serial")
            req_mod = peer_module("kio.schema.push_telemetry.v0.request")
            hdr_mod = peer_module("kio.schema.request_header.v2.header")
            read_header = serial.entity_reader(hdr_mod.RequestHeader)
            read_body = serial.entity_reader(req_mod.PushTelemetryRequest)

            def run(buf):
                header, n = read_header(buf, 0)
                return header, read_body(buf, n)[0]
            return run

        def kio_decode_peer(buf=frame):
            run = kio_decoder()
            assert run(buf)[1].client_instance_id == instance  # the peer decodes the same frame
            return peer_label("kio"), run, (buf,)

        decode_row = self.pair(G, "decode-push-4KB", "decode PushTelemetry request, header + body, 4 KB payload",
                               (kip714.decode_request, (frame,)), kio_decode_peer,
                               goal={"kind": "ratio", "value": 10, "text": "≥ 10×"}, peer_dist="kio")

        # Decode as a broker uses it: every field it reads (client id, the instance id, the SubscriptionId,
        # flags, the payload), read on both sides. kip714's broker path keys instances by the 16 id bytes and
        # never builds a uuid.UUID (text only when a label is written); kio has only uuid.UUID. The peer's
        # check below asserts both sides read the same id.
        def touch(buf):
            r = kip714.decode_request(buf)
            b = r.body
            return (r.client_id, b.client_instance_id_bytes, b.subscription_id, b.terminating,
                    b.compression_type, b.metrics)

        def kio_touch_peer(buf=frame):
            run = kio_decoder()

            def kio_touch(buf):
                header, b = run(buf)
                return (header.client_id, b.client_instance_id, b.subscription_id, b.terminating,
                        b.compression_type, b.metrics)
            got, want = kio_touch(buf), touch(buf)
            assert (got[0], got[2:5]) == (want[0], want[2:5]) and bytes(got[5]) == bytes(want[5])
            assert got[1] == uuid.UUID(bytes=want[1])  # the same instance id on both sides
            return peer_label("kio"), kio_touch, (buf,)

        touch_row = self.pair(G, "decode-push-4KB-touch", "decode PushTelemetry request and read every field (client "
                              "id, instance id, SubscriptionId, flags, payload view), 4 KB payload", (touch, (frame,)),
                              kio_touch_peer, goal={"kind": "ratio", "value": 10, "text": "≥ 10×"}, peer_dist="kio")

        # The floor of that row in CPython: the same function reading the same six attributes of an object
        # whose fields are already Python objects (plain __slots__: nothing decoded, nothing built).
        class Built:
            __slots__ = ("client_id", "body", "client_instance_id_bytes", "subscription_id", "terminating",
                         "compression_type", "metrics")
        built = Built()
        touched = touch(frame)
        built.body = built
        (built.client_id, built.client_instance_id_bytes, built.subscription_id, built.terminating,
         built.compression_type, built.metrics) = touched

        def read_built(r):
            b = r.body
            return (r.client_id, b.client_instance_id_bytes, b.subscription_id, b.terminating,
                    b.compression_type, b.metrics)
        floor = self.pair(G, "touch-floor", "the row above without decoding or building anything: the same six "
                          "reads of an object whose fields are already Python objects", (read_built, (built,)), None)
        if touch_row["peer"] is not None:
            budget = touch_row["peer"]["median"] / 10
            spent = decode_row["kip714"]["median"] + floor["kip714"]["median"]
            floor["note"] = (f"10× kio leaves {fmt_ns(budget)} per push; decode_request alone "
                             f"({fmt_ns(decode_row['kip714']['median'])}) and these reads take {fmt_ns(spent)} before "
                             "the client id str, the 16 id bytes, the SubscriptionId int and the payload memoryview "
                             "are built")
            floor["floor_ns"], floor["budget_ns"] = spent, budget

        def kio_writer(requested: Sequence[str]):
            serial = peer_module("kio.serial")
            errors = peer_module("kio.schema.errors")
            resp_mod = peer_module("kio.schema.get_telemetry_subscriptions.v0.response")
            cls = resp_mod.GetTelemetrySubscriptionsResponse
            msg = cls(throttle_time=datetime.timedelta(0), error_code=errors.ErrorCode.none,
                      client_instance_id=instance, subscription_id=-111713672,
                      accepted_compression_types=ACCEPTED, push_interval=datetime.timedelta(milliseconds=300000),
                      telemetry_max_bytes=LIMIT, delta_temporality=True, requested_metrics=tuple(requested))
            write = serial.entity_writer(cls)

            def run():
                buf = io.BytesIO()
                write(buf, msg)
                return buf.getvalue()
            assert run() == gts(requested).encode()  # byte-identical bodies
            return run

        def kio_encode_peer(requested=metrics):
            return peer_label("kio") + " (body only)", kio_writer(requested), ()

        self.pair(G, "encode-gts-frame", "encode GetTelemetrySubscriptions response (size-prefixed frame)",
                  (kip714.encode_response, (7, GTS)), kio_encode_peer,
                  goal={"kind": "ratio", "value": 20, "text": "≥ 20×"}, peer_dist="kio",
                  note="kip714 writes the whole frame (size + header + body); kio the body only")

        kp = self._kafka_python_classes(G)
        if kp is not None:
            body_only = frame[frame.index(b"producer") + len(b"producer") + 1:]
            assert kp["PushTelemetryRequest"].decode(body_only, version=0).subscription_id == 24301
            self.pair(G, "decode-push-body-kp", "decode PushTelemetry request body, 4 KB payload",
                      (kip714.PushTelemetryRequest.decode, (body_only, 0)),
                      lambda: (peer_label("kafka-python"), kp["PushTelemetryRequest"].decode, (body_only, 0)),
                      peer_dist="kafka-python")
            kp_msg = kp["GetTelemetrySubscriptionsResponse"](
                throttle_time_ms=0, error_code=0, client_instance_id=instance, subscription_id=-111713672,
                accepted_compression_types=list(ACCEPTED), push_interval_ms=300000, telemetry_max_bytes=LIMIT,
                delta_temporality=True, requested_metrics=metrics)
            assert bytes(kp_msg.encode(version=0)) == GTS.encode()
            self.pair(G, "encode-gts-body-kp", "encode GetTelemetrySubscriptions response body",
                      (GTS.encode, ()), lambda: (peer_label("kafka-python"), kp_msg.encode, (0,)),
                      peer_dist="kafka-python")

        # curves: decode cost vs payload size; encode cost vs number of requested metric prefixes
        sizes = [64, KB, 16 * KB, 1 << 20] if self.quick else [64, KB, 4 * KB, 16 * KB, 64 * KB, 256 * KB, 1 << 20]
        kip_ns, kio_ns = [], []
        for size in sizes:
            buf = push_frame(size)
            try:
                st = interleaved([(kip714.decode_request, (buf,)), (kio_decoder(), (buf,))], self.rounds,
                                 budget_s=self.budget / 2)
                kio_ns.append(st[1]["median"])
            except PeerMissing:
                st = interleaved([(kip714.decode_request, (buf,))], self.rounds, budget_s=self.budget / 2)
            kip_ns.append(st[0]["median"])
            self.log(f"[{G}] curve decode push {size_name(size)}: kip714 {fmt_ns(st[0]['median'])}"
                     + (f", kio {fmt_ns(kio_ns[-1])}" if len(kio_ns) == len(kip_ns) else ""))
        series = {"kip714.decode_request": kip_ns}
        if len(kio_ns) == len(sizes):
            series["kio"] = kio_ns
        self.curve("protocol_decode", "Decode PushTelemetry request (header + body)", "payload bytes",
                   "time per request (ns)", sizes, series)

        counts = [1, 16, 64] if self.quick else [1, 4, 16, 64, 256]
        kip_ns, kio_ns = [], []
        for count in counts:
            req = [f"org.apache.kafka.producer.metric{i:04d}." for i in range(count)]
            g = gts(req)
            try:
                st = interleaved([(kip714.encode_response, (7, g)), (kio_writer(req), ())], self.rounds,
                                 budget_s=self.budget / 2)
                kio_ns.append(st[1]["median"])
            except PeerMissing:
                st = interleaved([(kip714.encode_response, (7, g))], self.rounds, budget_s=self.budget / 2)
            kip_ns.append(st[0]["median"])
            self.log(f"[{G}] curve encode GTS {count} metrics: kip714 {fmt_ns(st[0]['median'])}"
                     + (f", kio {fmt_ns(kio_ns[-1])}" if len(kio_ns) == len(kip_ns) else ""))
        series = {"kip714.encode_response (frame)": kip_ns}
        if len(kio_ns) == len(counts):
            series["kio (body only)"] = kio_ns
        self.curve("protocol_encode", "Encode GetTelemetrySubscriptions response", "requested metric prefixes",
                   "time per response (ns)", counts, series)

    def _kafka_python_classes(self, group: str):
        """kafka-python generates codecs from Kafka's JSON schemas; it ships none for KIP-714's messages, so
        they come from the source checkout's tests/kp_schemas (skipped elsewhere)."""
        try:
            api_message = peer_module("kafka.protocol.api_message")
        except PeerMissing as exc:
            self.skip(group, "kafka-python", str(exc))
            return None
        schemas = CHECKOUT / "tests" / "kp_schemas"
        if not (schemas / "__init__.py").is_file():
            self.skip(group, "kafka-python", "kafka-python has no KIP-714 schemas outside a source checkout "
                                             "(tests/kp_schemas)")
            return None
        if "kp_schemas" not in sys.modules:
            spec = importlib.util.spec_from_file_location("kp_schemas", schemas / "__init__.py",
                                                          submodule_search_locations=[str(schemas)])
            mod = importlib.util.module_from_spec(spec)
            sys.modules["kp_schemas"] = mod
            spec.loader.exec_module(mod)
        pkg = sys.modules["kp_schemas"]
        return {name: type(name, (api_message.ApiMessage,), {}, load_json=pkg) for name in (
            "GetTelemetrySubscriptionsResponse", "PushTelemetryRequest")}

    # ============================================================== codec
    def group_codec(self) -> None:
        G = "codec"
        table_sizes = [4 * KB, 100 * KB]
        sizes = ([KB, 4 * KB, 100 * KB, 1_000_000] if self.quick
                 else [KB, 4 * KB, 16 * KB, 100 * KB, 256 * KB, 1_000_000])
        codecs = ["zstd", "lz4", "snappy", "gzip", "snappy-xerial"]
        ctype = {c: int(compression_type_from_name(c.split("-")[0])) for c in codecs}

        def direct(codec: str):
            """(label, callable, compressor) of the direct library call for a framing."""
            if codec == "zstd":
                zstandard = peer_module("zstandard")
                dctx = zstandard.ZstdDecompressor()
                cctx = zstandard.ZstdCompressor(level=3, write_content_size=False)
                return ("zstandard (reused ZstdDecompressor, max_output_size)",
                        lambda c: dctx.decompress(c, max_output_size=LIMIT), cctx.compress)
            if codec == "lz4":
                lz4_frame = peer_module("lz4.frame")
                return "lz4.frame.decompress", lz4_frame.decompress, lambda d: kip714.compress(d, 3)
            if codec in ("snappy", "snappy-xerial"):
                cramjam = peer_module("cramjam")
                comp = (lambda d: bytes(cramjam.snappy.compress_raw(d))) if codec == "snappy" else (
                    lambda d: kip714.compress(d, 2))
                return "cramjam.snappy.decompress_raw", cramjam.snappy.decompress_raw, comp
            return "zlib.decompress(wbits=31)", lambda c: zlib.decompress(c, 31), lambda d: gzip.compress(d, mtime=0)

        curve: dict[str, dict[str, list]] = {}
        for codec in codecs:
            try:
                label, fn, comp = direct(codec)
            except PeerMissing as exc:
                self.skip(G, codec, str(exc))
                continue
            dist = {"zstd": "zstandard", "lz4": "lz4", "snappy": "cramjam", "snappy-xerial": "cramjam",
                    "gzip": None}[codec]
            ver = f" {dist_version(dist)}" if dist and dist_version(dist) else ""
            c = curve.setdefault(codec, {"x": [], "kip714": [], "direct": []})
            for size in sorted(set(sizes) | set(table_sizes)):
                data = otlp_like(size, seed=size)
                packed = comp(data)
                if codec == "snappy-xerial":
                    raw_block = bytes(peer_module("cramjam").snappy.compress_raw(data))
                    peer_call, peer_args = fn, (raw_block,)
                else:
                    peer_call, peer_args = fn, (packed,)
                assert bytes(kip714.decompress(packed, ctype[codec], LIMIT)) == data
                assert bytes(peer_call(*peer_args)) == data
                extra = {"payload_bytes": len(data), "compressed_bytes": len(packed)}
                if size in table_sizes:
                    if codec == "snappy-xerial":
                        op = (f"decompress snappy xerial (Java clients), {fmt_bytes(len(data))} OTLP "
                              f"({fmt_bytes(len(packed))} compressed)")
                        goal, note = None, "peer: the same payload as one raw snappy block (no one-call xerial decoder)"
                        pl = "raw block, cramjam" + ver
                    else:
                        op = (f"decompress {codec}, {fmt_bytes(len(data))} OTLP "
                              f"({fmt_bytes(len(packed))} compressed)")
                        goal = {"kind": "within", "value": 0.10, "text": "≥ 0.91× (≤ 10% slower)"}
                        note, pl = "", label.split(" (")[0] + ver
                    row = self.pair(G, f"decompress-{codec}-{size}", op,
                                    (kip714.decompress, (packed, ctype[codec], LIMIT)),
                                    lambda: (pl, peer_call, peer_args), goal=goal, note=note, extra=extra)
                    kip_med, peer_med = row["kip714"]["median"], row["peer"]["median"]
                else:
                    st = interleaved([(kip714.decompress, (packed, ctype[codec], LIMIT)), (peer_call, peer_args)],
                                     self.rounds, budget_s=self.budget / 2)
                    kip_med, peer_med = st[0]["median"], st[1]["median"]
                    self.log(f"[{G}] curve {codec} {size_name(size)}: kip714 {fmt_ns(kip_med)}, direct "
                             f"{fmt_ns(peer_med)}")
                if size in sizes:
                    c["x"].append(len(data))
                    c["kip714"].append(kip_med)
                    c["direct"].append(peer_med)
        self.curves["codec"] = {"title": "Decompression: kip714.decompress vs the direct codec call",
                                "xlabel": "decompressed bytes", "ylabel": "time per call (ns)", "per_codec": curve}

    # ============================================================== crc
    def group_crc(self) -> None:
        G = "crc"
        client = SUBSCRIPTION_CLIENT

        def python_peer(metrics):
            peer = python_subscription_id(peer_module("crc32c").crc32c)
            assert peer(metrics, 30000, client) == kip714.compute_subscription_id(metrics, 30000, client)
            return "Python + " + peer_label("crc32c"), peer, (metrics, 30000, client)

        for name, metrics in SUBSCRIPTION_LISTS.items():
            self.pair(G, f"subscription-id-{len(metrics)}", f"SubscriptionId, {name}",
                      (kip714.compute_subscription_id, (metrics, 30000, client)),
                      functools.partial(python_peer, metrics), goal={"kind": "ratio", "value": 3, "text": "≥ 3×"},
                      peer_dist="crc32c")

        sizes = [64, KB, 100 * KB, 1 << 20] if self.quick else [64, KB, 4 * KB, 100 * KB, 1 << 20]
        peers = []
        for dist, mod, attr in (("crc32c", "crc32c", "crc32c"), ("google-crc32c", "google_crc32c", "value")):
            try:
                peers.append((peer_label(dist), getattr(peer_module(mod), attr)))
            except PeerMissing as exc:
                self.skip(G, dist, str(exc))
        series: dict[str, list] = {"kip714.crc32c": []}
        for label, _ in peers:
            series[label] = []
        for size in sizes:
            data = random.Random(size).randbytes(size)
            for _, f in peers:
                assert f(data) == kip714.crc32c(data)
            st = interleaved([(kip714.crc32c, (data,))] + [(f, (data,)) for _, f in peers], self.rounds,
                             budget_s=self.budget / 2)
            series["kip714.crc32c"].append(st[0]["median"])
            for (label, _), s in zip(peers, st[1:]):
                series[label].append(s["median"])
            if size in (64, 1 << 20):
                for (label, _), s in zip(peers, st[1:]):
                    self.add_row(G, f"crc32c-{size}-{label.split()[0]}", f"crc32c, {size_name(size)}", st[0], s,
                                 label)
            else:
                self.log(f"[{G}] curve crc32c {size_name(size)}: kip714 {fmt_ns(st[0]['median'])}, "
                         + ", ".join(f"{lb} {fmt_ns(s['median'])}" for (lb, _), s in zip(peers, st[1:])))
        self.curve("crc", "CRC32C", "bytes", "time per call (ns)", sizes, series)

    # ============================================================== limiter (InstanceTable)
    T0 = 1_700_000_000_000
    INTERVAL = 30_000
    CRC_BASE = -725132322

    def _fill(self, n: int):
        raw = os.urandom(16 * n)
        return self._fill_same(raw)

    def _decide(self, t, ids, now, sids, out, terminating=None, ctypes=None, sizes=None) -> int:
        n = len(now)
        return t.decide_pushes(ids, now, sids, terminating if terminating is not None else bytes(n),
                               ctypes if ctypes is not None else array.array("b", [4]) * n,
                               sizes if sizes is not None else array.array("i", [900]) * n, out,
                               subscription_version=0, crc_base=self.CRC_BASE, push_interval_ms=self.INTERVAL,
                               telemetry_max_bytes=LIMIT)

    def group_limiter(self) -> None:
        from .._instances import java_uuid_hash

        G = "limiter"
        sizes = [1_000, 100_000, 1_000_000] if self.quick else [1_000, 10_000, 100_000, 1_000_000]
        batch = 200_000 if self.quick else 1_000_000
        single_n = 20_000 if self.quick else 100_000
        rounds = 3 if self.quick else 7
        maxb = LIMIT
        rates_batch, rates_single, bytes_per = [], [], []
        for n in sizes:
            t_batch, raw = self._fill(n)
            t_single, _ = self._fill_same(raw)
            pool = [raw[16 * k:16 * k + 16] for k in range(n)]
            rng = random.Random(n)
            picks = rng.choices(pool, k=batch)
            ids = b"".join(picks)
            sids = array.array("i", [self.CRC_BASE ^ java_uuid_hash(p) for p in picks])
            term, ctypes, wsizes = bytes(batch), array.array("b", [4]) * batch, array.array("i", [900]) * batch
            out = array.array("h", bytes(2 * batch))
            s_picks, s_sids = picks[:single_n], list(sids[:single_n])
            try_push = t_single.try_push

            def single(now):
                for cid, sid in zip(s_picks, s_sids):
                    try_push(cid, now, 0, sid, False, 4, 900, maxb)

            samples_b, samples_s, accepted_total = [], [], 0
            gc.collect()
            for r in range(rounds + 1):  # round 0 warms up
                now_ms = self.T0 + 5_000 * (r + 1)  # rounds 5 s apart: every instance stays live (TTL 90 s)
                now = array.array("q", [now_ms]) * batch
                for which in ((0, 1) if r % 2 == 0 else (1, 0)):
                    t0 = time.perf_counter_ns()
                    if which == 0:
                        accepted = self._decide(t_batch, ids, now, sids, out, term, ctypes, wsizes)
                        dt = (time.perf_counter_ns() - t0) / batch
                        if r:
                            samples_b.append(dt)
                            accepted_total += accepted
                    else:
                        single(now_ms)
                        dt = (time.perf_counter_ns() - t0) / single_n
                        if r:
                            samples_s.append(dt)
            assert len(t_batch) == n and t_batch.evictions == 0 and t_batch.expirations == 0
            kb, ks = summarise(samples_b), summarise(samples_s)
            kb.update(batch=batch, live_instances=n, accepted_fraction=accepted_total / (batch * rounds))
            ks.update(calls_per_round=single_n, live_instances=n)
            self.add_row(G, f"decide-pushes-{n}", f"limiter decisions in batch (decide_pushes), {n:,} live instances",
                         kb, ks, "single try_push calls", goal={"kind": "rate", "value": 5e6, "text": "≥ 5 M/s"},
                         unit="rate", note="peer column: the same decisions one Python call each (no external peer)")
            rates_batch.append(1e9 / kb["median"])
            rates_single.append(1e9 / ks["median"])
            per = t_batch.memory_bytes() / n
            bytes_per.append(per)
            self.log(f"[{G}] {n:,} live instances: {per:.1f} B/instance (memory_bytes)")
            if n == sizes[-1]:
                self.add_row(G, f"memory-{n}", f"memory per live instance at {n:,} (memory_bytes()/n)",
                             {"value": per, "memory_bytes": t_batch.memory_bytes(), "live_instances": n,
                              "entry_struct_bytes": type(t_batch).entry_size()}, unit="bytes",
                             goal={"kind": "max_bytes", "value": 128, "text": "≤ 128 B"})
            del t_batch, t_single, pool, picks, ids, sids, out, s_picks, s_sids
        self.curve("limiter", "Limiter: decisions/s vs live instances", "live instances", "decisions per second",
                   sizes, {"decide_pushes (batch)": rates_batch, "single try_push calls": rates_single},
                   bytes_per_instance=bytes_per, goal_rate=5e6, goal_bytes=128)

        # (d) batch-size scaling at 100k live instances: each call takes the next batch of a stream of
        # random pushes (so small batches do not replay the same few, cache-hot instances)
        n = 100_000
        t, raw = self._fill(n)
        pool = [raw[16 * k:16 * k + 16] for k in range(n)]
        rng = random.Random(7)
        stream = 200_000
        picks = rng.choices(pool, k=stream)
        now_ms = self.T0 + self.INTERVAL  # the first push of each instance is due, repeats are throttled
        ids = memoryview(b"".join(picks))
        sids = memoryview(array.array("i", [self.CRC_BASE ^ java_uuid_hash(p) for p in picks]))
        nows = memoryview(array.array("q", [now_ms]) * stream)
        term = memoryview(bytes(stream))
        ctypes = memoryview(array.array("b", [4]) * stream)
        wsizes = memoryview(array.array("i", [900]) * stream)
        bsizes = [1, 10, 100, 1_000, 10_000, 100_000]
        dp = functools.partial(t.decide_pushes, subscription_version=0, crc_base=self.CRC_BASE,
                               push_interval_ms=self.INTERVAL, telemetry_max_bytes=maxb)

        def batched(b: int):
            out = array.array("h", bytes(2 * b))
            argsets = itertools.cycle([(ids[16 * i:16 * (i + b)], nows[i:i + b], sids[i:i + b], term[i:i + b],
                                        ctypes[i:i + b], wsizes[i:i + b], out) for i in range(0, stream, b)])

            def call():
                return dp(*next(argsets))
            return call

        contenders = [(batched(b), ()) for b in bsizes]
        per_call = list(bsizes)
        s_picks, s_sids = picks[:10_000], list(sids[:10_000])
        try_push = t.try_push
        chunks = itertools.cycle(range(0, 10_000, 1_000))

        def single_1000():
            i = next(chunks)
            for cid, sid in zip(s_picks[i:i + 1_000], s_sids[i:i + 1_000]):
                try_push(cid, now_ms, 0, sid, False, 4, 900, maxb)
        contenders.append((single_1000, ()))
        per_call.append(1_000)
        st = interleaved(contenders, 5 if self.quick else 15, per_call=per_call)
        ns_batch = [s["median"] for s in st[:-1]]
        for b, ns in zip(bsizes, ns_batch):
            self.log(f"[{G}] batch of {b:,}: {fmt_ns(ns)} per decision ({fmt_rate(1e9 / ns)})")
        self.log(f"[{G}] single try_push calls: {fmt_ns(st[-1]['median'])} per decision")
        self.curve("batch", "decide_pushes: cost per decision vs batch size (100k live instances)", "batch size",
                   "ns per decision", bsizes, {"decide_pushes (one call per batch)": ns_batch,
                                               "single try_push calls": [st[-1]["median"]] * len(bsizes)},
                   details=st)

    def _fill_same(self, raw: bytes):
        """A second table holding the same instances (so two contenders do not share state)."""
        from .._instances import InstanceTable

        from .._instances import java_uuid_hash

        n = len(raw) // 16
        t = InstanceTable(max_instances=n)
        sids = array.array("i", [self.CRC_BASE ^ java_uuid_hash(raw[16 * k:16 * k + 16]) for k in range(n)])
        out = array.array("h", bytes(2 * n))
        self._decide(t, raw, array.array("q", [self.T0]) * n, sids, out)  # every instance's first push
        assert len(t) == n and not any(out), "the first pushes were not all accepted"
        return t, raw

    # ============================================================== broker
    def group_broker(self) -> None:
        from .. import ClientInfo, PushTelemetryRequest, SubscriptionRegistry, TelemetryBroker

        G = "broker"
        T0 = 1_763_700_000_000
        client = ClientInfo(client_id="bench")
        sizes = [1_000, 100_000] if self.quick else [1_000, 100_000, 1_000_000]
        calls = 1_000
        rounds = 30 if self.quick else 100
        rates = []
        for n in sizes:
            reg = SubscriptionRegistry()
            reg.set("all", {"metrics": "*", "interval.ms": "100"})
            broker = TelemetryBroker(reg, max_instances=max(n, 16384))
            res = reg.resolve(client)
            raw = os.urandom(16 * n)
            ids = [raw[16 * k:16 * k + 16] for k in range(n)]
            requested = list(res.requested_metrics)
            sids = [kip714.compute_subscription_id(requested, res.push_interval_ms, i) for i in ids]
            create = broker.instances.create  # set-up only: the instances exist as after their first Get
            for i, s in zip(ids, sids):
                create(i, T0, res.version, s, res.push_interval_ms)
            rng = random.Random(n)
            handle = broker.handle
            variants = [("random", f"TelemetryBroker.handle, empty push, {n:,} live instances (random instance each push)")]
            if n == sizes[-1] and n > calls:
                variants.append(("hot", f"same, {n:,} live instances, the same {calls:,} instances every round"))
            now = T0  # one clock for both variants: 100 ms a round, far inside the instances' 60 s TTL
            for variant, op in variants:
                hot = rng.sample(range(n), calls) if n > calls else list(range(n))
                samples = []
                for r in range(rounds + 1):
                    now += 100  # the subscription's interval: every push is due
                    pick = hot if variant == "hot" or n <= calls else rng.sample(range(n), calls)
                    # fresh request objects, as a server decodes them per request (hot in cache)
                    bodies = [PushTelemetryRequest(ids[k], sids[k], False, 0, b"") for k in pick]
                    gc.disable()
                    t0 = time.perf_counter_ns()
                    for body in bodies:
                        handle(body, client, now)
                    dt = time.perf_counter_ns() - t0
                    gc.enable()
                    if r:
                        samples.append(dt / calls)
                m = broker.metrics()
                assert set(m["push-results"]) == {"NONE"}, m["push-results"]
                assert m["instance-count"] == n and m["instance-expirations"] == 0 and m["instance-evictions"] == 0
                st = summarise(samples)
                st.update(calls_per_round=calls, live_instances=n)
                self.add_row(G, f"handle-{variant}-{n}", op, st, None, "—", unit="rate",
                             goal={"kind": "rate", "value": 1e6, "text": "≥ 1 M/s"})
                if variant == "random":
                    rates.append(1e9 / st["median"])
            del broker, ids, sids
        self.curve("broker", "TelemetryBroker.handle, empty pushes", "live instances", "decisions per second",
                   sizes, {"TelemetryBroker.handle": rates}, goal_rate=1e6, logy=False)
        # 8 threads on one broker (docs/threads.md): each thread's rounds are a Get for a new client and a zstd
        # push from it, on Kafka's default 16 384-instance table, so evictions run all the time
        payload = _capture_payload(4)
        rounds8 = 500 if self.quick else 3_000
        samples8 = []
        for _ in range(3 if self.quick else 5):
            rate, errors = threaded_handle_rate(8, rounds8, payload)
            assert not errors, f"{errors} requests raised"
            samples8.append(1e9 / rate)
        st = summarise(samples8)
        st.update(threads=8, rounds_per_thread=rounds8)
        self.add_row(G, "handle-8-threads", "TelemetryBroker.handle, 8 threads × (Get + zstd push of a new client), "
                     "16 384-instance table (requests/s, all threads)", st, None, "—", unit="rate")

    # ============================================================== otlp
    def group_otlp(self) -> None:
        G = "otlp"
        from .. import _otlp
        from ..otlp import reference as otlp_pb

        try:
            from google.protobuf.internal import api_implementation

            backend = api_implementation.Type()
        except ImportError:
            backend = None
        self.extra_machine["protobuf_backend"] = backend
        peer_name = f"protobuf {dist_version('protobuf')} ({backend}) + Python (otlp.reference.flatten)"
        if backend != "upb":
            self.notes.append(f"otlp: protobuf backend is {backend!r}, not upb: the peer is slower than it "
                              "should be")
        sizes = ([KB, 16 * KB, 256 * KB, 1_000_000] if self.quick
                 else [KB, 4 * KB, 16 * KB, 64 * KB, 100 * KB, 256 * KB, 1_000_000])
        kip_ns, peer_ns, xs, nrows = [], [], [], []
        for size in sizes:
            data = otlp_like(size, seed=size + 11)
            n_rows = _otlp.decode_metrics(data).num_rows
            assert n_rows == len(otlp_pb.flatten(data)) > 0
            row = self.pair(G, f"decode-metrics-{size}",
                            f"OTLP MetricsData → rows, {fmt_bytes(len(data))} payload ({n_rows:,} points)",
                            (_otlp.decode_metrics, (data,)), lambda: (peer_name, otlp_pb.flatten, (data,)),
                            goal={"kind": "ratio", "value": 8, "text": "≥ 8×"},
                            extra={"payload_bytes": len(data), "points": n_rows})
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
        self.pair(G, "decode-metrics-batch-100x1KB",
                  f"same, 100 payloads of {fmt_bytes(len(data))}: one decode_metrics_batch call vs 100 flattens",
                  (_otlp.decode_metrics_batch, (many,)), lambda: (peer_name, flatten_each, (many,)),
                  extra={"payload_bytes": len(data), "points": n_rows, "payloads_per_call": 100},
                  note="informational: the goal is per single payload")
        self.rows[-1]["kip714"]["per_payload_ns"] = self.rows[-1]["kip714"]["median"] / 100
        # the floor of a single small payload: pyarrow's own fixed cost for this 29-column table (maps, lists), as
        # pyarrow exporting the finished table through the C data interface and importing it back as a Table
        self.pair(G, "decode-metrics-vs-pyarrow-round-trip",
                  f"same, one {fmt_bytes(len(data))} payload: decode_metrics vs pyarrow alone passing the finished "
                  "table through the C data interface", (_otlp.decode_metrics, (data,)),
                  lambda: ("pyarrow: export + import + Table.from_batches of the decoded table",
                           _pyarrow_round_trip(_otlp.decode_metrics(data)), ()),
                  extra={"payload_bytes": len(data), "points": n_rows},
                  note="informational: pyarrow's fixed cost for the table is the floor of a single payload")
        self.curve("otlp", "OTLP decode: kip714._otlp.decode_metrics (Arrow) vs protobuf + Python",
                   "payload bytes", "time per payload (ns)", xs,
                   {"kip714 decode_metrics → pyarrow.Table": kip_ns,
                    f"protobuf ({backend}) + otlp_pb.flatten → dicts": peer_ns}, points=nrows)

    # ============================================================== export
    def group_export(self) -> None:
        from . import bench_export

        bench_export.run(self)

    # ============================================================== proxy
    def group_proxy(self) -> None:
        """librdkafka producers through ``kip714 proxy`` vs direct to librdkafka's mock cluster (same run)."""
        try:
            import confluent_kafka  # noqa: F401
        except ImportError as exc:
            self.skip("proxy", "confluent-kafka", f"not installed ({exc})")
            return
        from .bench_proxy import run_group

        run_group(self)

    def group_record(self) -> None:
        """Accepted pushes/s of ``kip714 serve --record`` with and without ``--record-sync`` (same run)."""
        if self.cases is not None:
            self.notes.append("record: child processes and sockets, not a pytest-benchmark case")
            return
        try:
            import pyarrow  # noqa: F401
        except ImportError as exc:
            self.skip("record", "pyarrow", f"not installed ({exc})")
            return
        from .bench_record import run_group

        run_group(self)

    # ============================================================== spark
    def group_spark(self) -> None:
        G = "spark"
        try:
            peer_module("pyspark")
        except PeerMissing as exc:
            self.skip(G, "pyspark", str(exc))
            self.notes.append("spark: pyspark not installed, group skipped")
            return
        from .. import spark as kspark

        k = self.spark_k or (16 if self.quick else 400)
        runs = 2 if self.quick else 4
        self.extra_machine["java"] = _java_version()
        started = time.perf_counter()
        session = kspark.local_session("local[2]", app_name="kip714-bench", partitions=2)
        self.log(f"[{G}] local[2] session up in {time.perf_counter() - started:.1f} s; building {k} rows of "
                 "~100 KB OTLP (zstd)")
        try:
            df, n_points, raw_bytes, packed_bytes = spark_input(session, k)
            self.log(f"[{G}] input: {k} rows, {packed_bytes / 1e6:.1f} MB compressed, {raw_bytes / 1e6:.1f} MB "
                     f"OTLP, {n_points:,} points; runs: {runs} each, interleaved, first discarded")
            plans = {"kip714": lambda: spark_kip714(df), "peer": lambda: spark_peer(df),
                     "kip714-combined": lambda: spark_kip714(df, combined=True)}
            times: dict[str, list[float]] = {name: [] for name in plans}
            for r in range(runs):
                for name in (list(plans) if r % 2 == 0 else list(plans)[::-1]):
                    t = run_noop(plans[name]())
                    times[name].append(t)
                    self.log(f"[{G}] run {r + 1} {name}: {t:.2f} s ({n_points / t / 1e3:,.0f} krows/s)")
            counts = {name: plans[name]().count() for name in ("kip714", "peer")}
            assert counts["kip714"] == counts["peer"] == n_points, counts
        finally:
            session.stop()
        summ = {}
        for name, runs_s in times.items():
            s = summarise([t * 1e9 for t in runs_s[1:]])
            # "run each twice and take the second": the figure is the best run after the first
            s["median_of_runs"] = s["median"]
            s["median"] = s["min"]
            s.update(all_runs_s=runs_s, points=n_points, rows_in=k, krows_per_s=n_points / (s["min"] / 1e9) / 1e3)
            summ[name] = s
        peer_label_ = "mapInArrow + zstandard + protobuf/otlp_pb.flatten"
        extra = {"input_rows": k, "points": n_points, "compressed_bytes": packed_bytes, "otlp_bytes": raw_bytes}
        self.add_row(G, f"spark-decode-{k}",
                     f"Spark local[2] bulk decode, {k} rows × ~100 KB zstd OTLP → {n_points:,} points "
                     "(decode_payloads(df).points)", summ["kip714"], summ["peer"], peer_label_,
                     goal={"kind": "ratio", "value": 3, "text": "≥ 3×"},
                     note="kip714.spark.decode_payloads vs the best protobuf-based approach, same cached input, "
                          "noop sink; best run after the first of each", extra=extra)
        self.add_row(G, f"spark-decode-combined-{k}",
                     "same, the single decoding pass without the points/errors split (decode_payloads(df).combined)",
                     summ["kip714-combined"], summ["peer"], peer_label_, extra=extra,
                     note="points: a pass of its own whose workers emit point rows and columns only; "
                          "combined also carries the error columns")
        self.curves["spark"] = {"title": f"Spark local[2]: {k} rows → {n_points:,} points", "points": n_points,
                                "runs_s": times}

    # ============================================================== pipeline-scale
    def group_pipeline_scale(self) -> None:
        """``kip714 pipeline`` (read a recording, decode, write points/ and errors/ as Parquet, summarise) on
        10^5 … 3·10^7 points of a simulated fleet, each run in its own process on local[2] with kip714's
        session defaults, against the straightforward peer (mapInArrow + zstandard + protobuf/otlp_pb,
        the recording's columns carried, points written the same way) on the same recording. Peak memory
        is sampled from /proc: the JVM's VmHWM, the largest Python worker's VmHWM."""
        import shutil
        import tempfile

        from . import scale

        G = "pipeline-scale"
        try:
            peer_module("pyspark")
            peer_module("zstandard")
        except PeerMissing as exc:
            self.skip(G, "pyspark/zstandard", str(exc))
            return
        env_sizes = os.environ.get("KIP714_BENCH_SCALE_SIZES")
        sizes = self.scale_sizes or ([int(float(x)) for x in env_sizes.split(",")] if env_sizes else
                                     [100_000, 1_000_000] if self.quick else
                                     [100_000, 1_000_000, 10_000_000, 30_000_000])
        env_peer = os.environ.get("KIP714_BENCH_SCALE_PEER_MAX")
        peer_max = (self.scale_peer_max if self.scale_peer_max is not None else
                    int(float(env_peer)) if env_peer else 10_000_000)
        self.extra_machine["java"] = _java_version()
        work = pathlib.Path(tempfile.mkdtemp(prefix="kip714-scale-"))
        try:
            t0 = time.perf_counter()
            base_rows = scale.fleet_recording(work / "base", 5, 5, "5m")
            _, base_points = scale.recording_points(work / "base")
            self.log(f"[{G}] base: a simulated fleet of 10 clients (Java and librdkafka, zstd), 5 min at 1 s: "
                     f"{base_rows} pushes, {base_points:,} points in {time.perf_counter() - t0:.1f} s; larger inputs "
                     "replicate its rows under new client instance ids and shifted receive times")
            xs, series, mem = [], {"kip714 pipeline": [], "peer": []}, {
                "kip714 JVM": [], "kip714 JVM heap after GC": [], "kip714 Python worker": [], "peer JVM": [],
                "peer Python worker": []}
            for target in sizes:
                copies = max(1, round(target / base_points))
                rec = work / f"rec-{target}"
                t0 = time.perf_counter()
                scale.replicate_recording(work / "base", rec, copies)
                rows, points = scale.recording_points(rec)
                mb = sum(f.stat().st_size for f in rec.glob("*.parquet")) / 1e6
                self.log(f"[{G}] {size_name_points(target)}: {copies} copies → {rows:,} pushes, {points:,} points, "
                         f"{mb:,.0f} MB ({time.perf_counter() - t0:.1f} s to build and count in process)")
                runs = {}
                for job in ("kip714", "peer"):
                    if job == "peer" and target > peer_max:
                        continue
                    out = work / f"out-{job}"
                    run = scale.run_job(job, str(rec), str(out))
                    shutil.rmtree(out, ignore_errors=True)
                    runs[job] = run
                    pk = run.peaks
                    self.log(f"[{G}] {size_name_points(target)} {job}: "
                             + (f"{run.seconds:.1f} s ({points / run.seconds / 1e3:,.0f} kpoints/s)"
                                if run.seconds else f"FAILED ({run.error.splitlines()[-1] if run.error else run.returncode})")
                             + f"; peak JVM {pk.jvm_hwm / 2**20:,.0f} MiB (heap after GC ≤ {pk.heap_live / 2**20:,.0f} MiB), "
                             f"Python worker {pk.worker_hwm / 2**20:,.0f} MiB "
                             f"(workers together {pk.workers_rss / 2**20:,.0f} MiB); CPU JVM {pk.jvm_cpu_s:.0f} s, "
                             f"workers {pk.workers_cpu_s:.0f} s")
                    if run.seconds and run.result.get("points") != points:
                        raise AssertionError(f"{job} wrote {run.result.get('points')} points, in-process decode "
                                             f"counts {points}")
                shutil.rmtree(rec, ignore_errors=True)
                kip, peer = runs["kip714"], runs.get("peer")
                xs.append(points)
                series["kip714 pipeline"].append(kip.seconds)
                series["peer"].append(peer.seconds if peer else None)
                mem["kip714 JVM"].append(kip.peaks.jvm_hwm / 2**20)
                mem["kip714 JVM heap after GC"].append(kip.peaks.heap_live / 2**20)
                mem["kip714 Python worker"].append(kip.peaks.worker_hwm / 2**20)
                mem["peer JVM"].append(peer.peaks.jvm_hwm / 2**20 if peer else None)
                mem["peer Python worker"].append(peer.peaks.worker_hwm / 2**20 if peer else None)
                extra = {"points": points, "pushes": rows, "recording_mb": round(mb, 1),
                         "kip714_run": kip.to_dict(), "peer_run": peer.to_dict() if peer else None}
                kip_s = {"median": (kip.seconds or float("nan")) * 1e9}
                peer_s = {"median": peer.seconds * 1e9} if peer and peer.seconds else None
                goal = {"kind": "max_s", "value": 120, "text": "≤ 2 min"} if target == 10_000_000 else None
                self.add_row(G, f"pipeline-scale-{target}",
                             f"kip714 pipeline, local[2], {points:,} points ({rows:,} pushes, {mb:,.0f} MB)",
                             kip_s, peer_s, "mapInArrow + zstandard + protobuf/otlp_pb.flatten",
                             peer_skipped=None if peer else (f"skipped above {peer_max:,} points" if kip.seconds
                                                             else None),
                             goal=goal, extra=extra,
                             note=f"peak JVM {kip.peaks.jvm_hwm / 2**20:,.0f} MiB (heap after GC ≤ "
                                  f"{kip.peaks.heap_live / 2**20:,.0f} MiB), Python worker "
                                  f"{kip.peaks.worker_hwm / 2**20:,.0f} MiB" + (
                                      f"; peer {peer.peaks.jvm_hwm / 2**20:,.0f} / {peer.peaks.worker_hwm / 2**20:,.0f} MiB"
                                      if peer else ""))
            ok = [i for i, s in enumerate(series["kip714 pipeline"]) if s]
            if len(ok) >= 2:
                lo, hi = ok[0] if xs[ok[0]] >= 1_000_000 or len(ok) < 3 else ok[1], ok[-1]
                growth = mem["kip714 JVM"][hi] / mem["kip714 JVM"][lo]
                self.add_row(G, "pipeline-scale-memory",
                             f"peak JVM memory at {xs[hi]:,} points / at {xs[lo]:,} points",
                             {"value": growth}, None, unit="ratio",
                             goal={"kind": "max_value", "value": 1.25, "text": "≤ 1.25 (flat)"},
                             note="VmHWM of the local[2] JVM; kip714's defaults (a 768m heap committed at start)")
            self.curve("pipeline_scale", "kip714 pipeline on local[2]: time by input size", "data points",
                       "seconds", xs, series, memory=mem)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    # ============================================================== report
    def group_report(self) -> None:
        """``kip714 report`` over a recording of ≥ 1 M points (50 k with --quick) on local[2] against the
        same checks written with pandas over the decoded points (:mod:`kip714.tools.report_peer`)."""
        _bench_report_group(self)

    # -------------------------------------------------------------- output
    def machine(self) -> dict:
        info = {
            "platform": platform.platform(), "machine": platform.machine(), "processor": _cpu_model(),
            "cpu_count": os.cpu_count(),
            "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "memory_gib": _mem_gib(), "python": platform.python_version(),
            "python_implementation": platform.python_implementation(), "python_build": platform.python_build(),
            "kip714": kip714.__version__, "kip714_git": _git_describe(),
            "versions": {d: dist_version(d) for d in PEER_DISTS},
        }
        info.update(self.extra_machine)
        return info

    def to_json(self, started: float, elapsed: float, load_before, load_after) -> dict:
        def clean(row):
            return {k: v for k, v in row.items() if k not in ("kip714_text", "peer_text")} | {
                "kip714_text": row["kip714_text"], "peer_text": row["peer_text"]}
        return {
            "tool": "kip714 bench", "mode": "quick" if self.quick else "full", "groups": self.groups,
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "elapsed_s": round(elapsed, 2), "group_seconds": self.group_seconds,
            "machine": self.machine() | {"loadavg_before": load_before, "loadavg_after": load_after},
            "method": {"rounds": self.rounds, "round_target_ns": 1_000_000, "budget_s_per_measurement": self.budget,
                       "statistic": "median over interleaved rounds; ratio = peer median / kip714 median",
                       "timer": "time.perf_counter_ns", "gc": "disabled while timing",
                       "allocator": "one 4 MiB block allocated and freed first (glibc mmap threshold steady state)"},
            "rows": [clean(r) for r in self.rows], "curves": self.curves, "skipped": self.skipped,
            "notes": self.notes, "errors": self.errors,
        }


# ------------------------------------------------------------------------------------------ Spark pieces
# Module level so that Spark's Python workers import them by name (kip714 must be importable there).

def spark_input(spark, k: int, distinct: int = 16):
    """K rows (id, compression_type, payload) of zstd-compressed ~100 KB OTLP MetricsData (``distinct``
    different payloads, cycled), in 2 partitions, cached and materialised. Returns (df, points, otlp bytes,
    compressed bytes)."""
    from .. import _otlp

    raws = [otlp_like(100 * KB, seed=1000 + i) for i in range(min(k, distinct))]
    packed = [kip714.compress(r, 4) for r in raws]
    points = [_otlp.decode_metrics(r).num_rows for r in raws]
    rows = [(i, 4, packed[i % len(packed)]) for i in range(k)]
    df = spark.createDataFrame(rows, "id long, compression_type byte, payload binary").repartition(2).cache()
    assert df.count() == k
    total_points = sum(points[i % len(points)] for i in range(k))
    return (df, total_points, sum(len(raws[i % len(raws)]) for i in range(k)),
            sum(len(packed[i % len(packed)]) for i in range(k)))


def spark_kip714(df, combined: bool = False):
    from .. import spark as kspark

    res = kspark.decode_payloads(df)
    return res.combined if combined else res.points


def _peer_schema():
    import pyarrow as pa

    from .. import _otlp

    return pa.schema(list(_otlp.output_schema()) + [pa.field("id", pa.int64()),
                                                     pa.field("compression_type", pa.int8())])


def protobuf_mapper(batches):
    """The protobuf-based decoder as a mapInArrow function: the direct codec call, protobuf (upb) parsing and
    Python flattening (kip714.otlp.reference.flatten), columns built per batch (pa.RecordBatch.from_pydict: the
    fastest way to Arrow from rows measured here). Only zstd and uncompressed rows are handled."""
    import pyarrow as pa
    import zstandard

    from ..otlp.reference import COLUMNS, flatten

    schema = _peer_schema()
    dctx = zstandard.ZstdDecompressor()
    for batch in batches:
        cols: dict[str, list] = {name: [] for name in COLUMNS}
        ids, ctypes = [], []
        for rid, ctype, payload in zip(batch.column("id").to_pylist(), batch.column("compression_type").to_pylist(),
                                       batch.column("payload").to_pylist()):
            raw = dctx.decompress(payload, max_output_size=LIMIT) if ctype == 4 else payload
            rows = flatten(raw)
            for name in COLUMNS:
                cols[name].extend([r[name] for r in rows])
            ids.extend([rid] * len(rows))
            ctypes.extend([ctype] * len(rows))
        cols["id"] = ids
        cols["compression_type"] = ctypes
        yield pa.RecordBatch.from_pydict(cols, schema=schema)


def spark_peer(df):
    from pyspark.sql.pandas.types import from_arrow_schema

    return df.mapInArrow(protobuf_mapper, from_arrow_schema(_peer_schema()))


def _recording_peer_schema(df):
    """The peer's output on a recording: the point columns, then the recording's other columns."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    from .. import _otlp

    return pa.schema(list(_otlp.output_schema()) + [pa.field(f.name, to_arrow_type(f.dataType))
                                                     for f in df.schema.fields if f.name != "payload"])


def recording_protobuf_mapper(batches, carry, schema):
    """:func:`protobuf_mapper` on a recording: the recording's columns (``carry``) repeated onto every point,
    one output batch per input batch (the straightforward way)."""
    import pyarrow as pa
    import zstandard

    from ..otlp.reference import COLUMNS, flatten

    dctx = zstandard.ZstdDecompressor()
    for batch in batches:
        cols: dict[str, list] = {name: [] for name in list(COLUMNS) + list(carry)}
        payloads = batch.column("payload").to_pylist()
        carried = [batch.column(c).to_pylist() for c in carry]
        for i, (ctype, payload) in enumerate(zip(batch.column("compression_type").to_pylist(), payloads)):
            raw = dctx.decompress(payload, max_output_size=LIMIT) if ctype == 4 else payload
            rows = flatten(raw)
            for name in COLUMNS:
                cols[name].extend([r[name] for r in rows])
            for name, values in zip(carry, carried):
                cols[name].extend([values[i]] * len(rows))
        yield pa.RecordBatch.from_pydict(cols, schema=schema)


def run_noop(out_df) -> float:
    """Materialise a DataFrame with the noop sink; wall seconds."""
    t0 = time.perf_counter()
    out_df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0


# ------------------------------------------------------------------------------------------ machine

def _cpu_model() -> str | None:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _mem_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):  # not on Windows
        return None


def _git_describe() -> str | None:
    root = CHECKOUT
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"], capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _java_version() -> str | None:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=20)
        return (out.stderr or out.stdout).splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


# ------------------------------------------------------------------------------------------ plots

def write_plots(bench: Bench, out_dir: pathlib.Path) -> list[pathlib.Path]:
    """PNG plots of the curves that were measured; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    c = bench.curves
    subtitle = f"kip714 {kip714.__version__}, {'--quick' if bench.quick else 'full run'}, median of interleaved rounds"

    def save(fig, name):
        fig.suptitle(fig._suptitle.get_text() if fig._suptitle else "", fontsize=11)
        fig.text(0.99, 0.005, subtitle, ha="right", va="bottom", fontsize=7, color="grey")
        fig.tight_layout(rect=(0, 0.02, 1, 1))
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)

    def line_plot(ax, cv, styles=("o-", "s--", "^:", "d-.")):
        for (label, ys), st in zip(cv["series"].items(), styles):
            ax.plot(cv["x"][:len(ys)], ys, st, label=label)
        ax.set_xscale("log" if cv.get("logx", True) else "linear")
        ax.set_yscale("log" if cv.get("logy", True) else "linear")
        ax.set_xlabel(cv["xlabel"])
        ax.set_ylabel(cv["ylabel"])
        ax.set_title(cv["title"], fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)

    if "protocol_decode" in c or "protocol_encode" in c:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, name in zip(axes, ("protocol_decode", "protocol_encode")):
            if name in c:
                line_plot(ax, c[name])
            else:
                ax.set_visible(False)
        fig.suptitle("Kafka wire codec: kip714 vs kio")
        save(fig, "protocol")

    if "codec" in c:
        per = c["codec"]["per_codec"]
        fig, axes = plt.subplots(1, len(per), figsize=(3.2 * len(per), 3.8), squeeze=False)
        for ax, (codec, cv) in zip(axes[0], per.items()):
            ax.plot(cv["x"], cv["kip714"], "o-", label="kip714.decompress")
            ax.plot(cv["x"], cv["direct"], "s--", label="direct call" + (" (raw block)" if "xerial" in codec else ""))
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(codec, fontsize=9)
            ax.set_xlabel("decompressed bytes")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        axes[0][0].set_ylabel("time per call (ns)")
        fig.suptitle(c["codec"]["title"])
        save(fig, "codec")

    if "crc" in c:
        fig, ax = plt.subplots(figsize=(6, 4))
        line_plot(ax, c["crc"])
        fig.suptitle("CRC32C")
        save(fig, "crc")

    if "limiter" in c:
        cv = c["limiter"]
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        line_plot(a1, cv)
        a1.axhline(cv["goal_rate"], color="red", lw=0.8, ls=":", label="goal 5 M/s")
        a1.legend(fontsize=7)
        a2.plot(cv["x"], cv["bytes_per_instance"], "o-", label="InstanceTable.memory_bytes() / n")
        a2.axhline(cv["goal_bytes"], color="red", lw=0.8, ls=":", label="goal ≤ 128 B")
        a2.set_xscale("log")
        a2.set_ylim(0, max(max(cv["bytes_per_instance"]), cv["goal_bytes"]) * 1.3)
        a2.set_xlabel("live instances")
        a2.set_ylabel("bytes per live instance")
        a2.set_title("Native memory per live instance", fontsize=9)
        a2.grid(True, alpha=0.3)
        a2.legend(fontsize=7)
        fig.suptitle("Limiter (InstanceTable)")
        save(fig, "limiter")

    if "batch" in c:
        fig, ax = plt.subplots(figsize=(6, 4))
        line_plot(ax, c["batch"])
        fig.suptitle("Limiter batch-size scaling")
        save(fig, "batch")

    if "broker" in c:
        cv = c["broker"]
        fig, ax = plt.subplots(figsize=(6, 4))
        scaled = dict(cv, series={k: [v / 1e6 for v in vs] for k, vs in cv["series"].items()},
                      ylabel="million decisions per second")
        line_plot(ax, scaled)
        ax.axhline(cv["goal_rate"] / 1e6, color="red", lw=0.8, ls=":", label="goal 1 M/s")
        ax.set_ylim(0, max(max(scaled["series"]["TelemetryBroker.handle"]), cv["goal_rate"] / 1e6) * 1.3)
        ax.legend(fontsize=7)
        fig.suptitle("Broker decisions")
        save(fig, "broker")

    if "otlp" in c:
        cv = c["otlp"]
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        line_plot(a1, cv)
        ys = list(cv["series"].values())
        a2.plot(cv["x"], [p / k for k, p in zip(ys[0], ys[1])], "o-", label="speed-up (protobuf / kip714)")
        a2.axhline(8, color="red", lw=0.8, ls=":", label="goal 8×")
        a2.set_xscale("log")
        a2.set_ylim(0, None)
        a2.set_xlabel("payload bytes")
        a2.set_ylabel("ratio")
        a2.set_title("Speed-up by payload size", fontsize=9)
        a2.grid(True, alpha=0.3)
        a2.legend(fontsize=7)
        fig.suptitle("OTLP MetricsData → rows")
        save(fig, "otlp")

    if "proxy_throughput" in c or "proxy_latency" in c:
        names = [n for n in ("proxy_throughput", "proxy_latency") if n in c]
        fig, axes = plt.subplots(1, len(names), figsize=(6 * len(names), 4), squeeze=False)
        for ax, name in zip(axes[0], names):
            cv = c[name]
            width = 0.8 / len(cv["series"])
            for i, (label, ys) in enumerate(cv["series"].items()):
                xs = [j + i * width for j in range(len(ys))]
                ax.bar(xs, ys, width, label=label)
            ax.set_xticks([j + width * (len(cv["series"]) - 1) / 2 for j in range(len(cv["x"]))])
            ax.set_xticklabels(cv["x"], fontsize=7, rotation=15)
            ax.set_ylabel(cv["ylabel"])
            ax.set_title(cv["title"], fontsize=9)
            ax.grid(True, axis="y", alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle("kip714 proxy vs direct (librdkafka mock cluster)")
        save(fig, "proxy")

    if "spark" in c:
        cv = c["spark"]
        fig, ax = plt.subplots(figsize=(7.5, 3.5))
        labels, vals = [], []
        names = {"kip714": "decode_payloads().points", "kip714-combined": "decode_payloads().combined",
                 "peer": "mapInArrow + protobuf/Python"}
        for name, runs in cv["runs_s"].items():
            best = min(runs[1:]) if len(runs) > 1 else runs[0]
            labels.append(names.get(name, name))
            vals.append(cv["points"] / best / 1e3)
        ax.barh(labels, vals, color=["tab:blue", "tab:orange", "tab:cyan"][:len(vals)])
        for i, v in enumerate(vals):
            ax.text(v, i, f" {v:,.0f}", va="center", fontsize=8)
        ax.set_xlabel("thousand points per second (best run after the first)")
        ax.set_xlim(0, max(vals) * 1.15)
        ax.set_title(cv["title"], fontsize=9)
        fig.suptitle("Spark bulk decode")
        save(fig, "spark")

    if "pipeline_scale" in c:
        cv = c["pipeline_scale"]
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
        for (label, ys), st in zip(cv["series"].items(), ("o-", "s--")):
            pts = [(x, y) for x, y in zip(cv["x"], ys) if y]
            if pts:
                a1.plot(*zip(*pts), st, label=label)
        a1.set_xscale("log")
        a1.set_yscale("log")
        a1.axhline(120, color="red", lw=0.8, ls=":", label="goal: 1e7 points ≤ 2 min")
        a1.set_xlabel("data points")
        a1.set_ylabel("seconds (whole job, session start excluded)")
        a1.set_title(cv["title"], fontsize=9)
        a1.grid(True, which="both", alpha=0.3)
        a1.legend(fontsize=7)
        for (label, ys), st in zip(cv["memory"].items(), ("o-", "o:", "^-", "s--", "v--")):
            pts = [(x, y) for x, y in zip(cv["x"], ys) if y]
            if pts:
                a2.plot(*zip(*pts), st, label=label)
        a2.set_xscale("log")
        a2.set_ylim(0, None)
        a2.set_xlabel("data points")
        a2.set_ylabel("MiB: peak resident (VmHWM); heap after GC")
        a2.set_title("Peak memory by input size", fontsize=9)
        a2.grid(True, alpha=0.3)
        a2.legend(fontsize=7)
        fig.suptitle("Pipeline at fleet scale")
        save(fig, "pipeline_scale")
    return written


# ------------------------------------------------------------------------------------------ command line

def _groups(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in names if x not in GROUPS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown group {', '.join(bad) or repr(text)}; choose from "
                                         f"{', '.join(GROUPS)} (comma-separated for several)")
    return names


def _json_default(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


# ------------------------------------------------------------------------------------------ report pieces

def report_recording(directory: pathlib.Path, min_points: int, seed: int = 714) -> tuple[int, int]:
    """A recording of at least ``min_points`` data points in ``directory``: a simulated fleet (Java and
    librdkafka clients, a slow broker, throttling and the rest of the simulator's realism) run in process,
    then copied with renamed client instances until it is large enough. Returns (pushes, points)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from ..sinks.recorder import read_recording
    from .simulate import Fleet

    staged = directory.parent / (directory.name + "-staged")
    registry = kip714.SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": "10000"})
    Fleet(30, 20, seed=seed, software="mix").run_in_process(kip714.TelemetryBroker(registry, node_id=1), "20m",
                                                              recorder=staged)
    base = read_recording(staged)
    per_copy = sum(_count_points(p, c) for p, c in zip(base.column("payload").to_pylist(),
                                                        base.column("compression_type").to_pylist()))
    copies = max(1, -(-min_points // max(1, per_copy)))
    directory.mkdir(parents=True, exist_ok=True)
    for j in range(copies):
        t = base
        for col in ("client_instance_id", "client_id"):
            i = t.schema.get_field_index(col)
            t = t.set_column(i, col, pc.binary_join_element_wise(t.column(col), pa.scalar(f"-{j}"), ""))
        pq.write_table(t, directory / f"push-{j:04d}.parquet")
    return base.num_rows * copies, per_copy * copies


def _count_points(payload, ctype) -> int:
    from .. import _otlp

    if not payload:
        return 0
    return _otlp.decode_metrics(kip714.decompress(payload, ctype, DEFAULT_TELEMETRY_MAX_BYTES)).num_rows


def _bench_report_group(bench: "Bench") -> None:
    import shutil
    import tempfile

    G = "report"
    try:
        peer_module("pyspark")
        peer_module("pandas")
    except PeerMissing as exc:
        bench.skip(G, "pyspark/pandas", str(exc))
        return
    from ..spark import local_session
    from ..spark.report import report
    from .report_peer import report_pandas

    min_points = 50_000 if bench.quick else 1_000_000
    runs = 2 if bench.quick else 3
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="kip714-bench-report-"))
    try:
        started = time.perf_counter()
        pushes, points = report_recording(tmp / "rec", min_points)
        bench.log(f"[{G}] recording: {pushes:,} pushes, {points:,} points ({time.perf_counter() - started:.0f} s "
                  "to simulate)")
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
        spark_counts = {(c["client_software_name"], c["client_software_version"], c["check"]):
                        (c["failures"], c["checked"]) for c in conf}
        peer_counts = {(c["client_software_name"], c["client_software_version"], c["check"]):
                       (c["failures"], c["checked"]) for c in pconf}
        agree_conf = spark_counts == peer_counts
        agree_ins = {(i["client_instance_id"], i["insight"]) for i in ins} == set(pins)
        note = (f"{points:,} points from {pushes:,} pushes; conformance counts "
                f"{'agree' if agree_conf else 'DIFFER'}, insights {'agree' if agree_ins else 'DIFFER'} "
                f"({len(ins)} findings); best run after the first (Spark warm-up)")
        summ = {}
        for name, ts in times.items():
            s = summarise([t * 1e9 for t in (ts[1:] if len(ts) > 1 else ts)])
            s["median"] = s["min"]
            s["all_runs_s"] = ts
            summ[name] = s
        bench.add_row(G, f"report-{points}", f"kip714 report (conformance + insights) over {points:,} points, "
                      "Spark local[2]", summ["spark"], summ["peer"], "pandas over the decoded points (one process)",
                      goal={"kind": "ratio", "value": 3, "text": "≥ 3×"}, note=note,
                      extra={"points": points, "pushes": pushes, "agree_conformance": agree_conf,
                             "agree_insights": agree_ins})
        if not (agree_conf and agree_ins):
            diff = {k: (spark_counts.get(k), peer_counts.get(k)) for k in set(spark_counts) | set(peer_counts)
                    if spark_counts.get(k) != peer_counts.get(k)}
            bench.notes.append(f"report: Spark and pandas disagree: {sorted(diff.items())[:6]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
