"""The harness of ``kip714 bench``: a :class:`Bench` run holds the rows (table), curves (plots), skipped
peers and notes that its groups add, runs the groups by name (:mod:`.registry`) and writes the JSON result.

A group measures with :meth:`Bench.pair` (kip714's call against its peer's, interleaved, one row) or times
by itself and reports with :meth:`Bench.add_row`; :meth:`Bench.curve` keeps a series for the plots."""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, Literal, TypedDict

from .machine import describe
from .peers import PeerMissing
from .registry import GROUPS, load
from .render import fmt_ns, fmt_rate, fmt_ratio
from .timing import Contender, Summary, interleaved, settle_allocator

__all__ = ["Bench", "Case"]

#: A peer's contender as its factory returns it: (name, f, args).
PeerContender = tuple[str, Callable[..., object], tuple[object, ...]]
#: A table row, a curve, a skipped peer or an error as the JSON result holds it.
Row = dict[str, Any]


class Goal(TypedDict):
    """A row's goal: ``kind`` decides how ``value`` is compared (see :meth:`Bench.add_row`), ``text`` is
    what the table shows."""

    kind: Literal[
        "ratio",
        "within",
        "rate",
        "max_bytes",
        "max_value",
        "max_time",
        "min_value",
        "added_ns",
        "max_s",
        "check",
        "max_cost",
    ]
    value: float
    text: str


@dataclass(frozen=True)
class Case:
    """One table row's contenders, as ``pair()`` saw them: kip714's ``(f, args)`` and the peer's
    ``(name, f, args)`` (None when the peer is missing). The pytest-benchmark front-end (``bench/``) times
    these same callables, so both harnesses measure the same thing."""

    group: str
    key: str
    operation: str
    kip714: Contender
    peer: PeerContender | None


class Bench:
    """One ``kip714 bench`` run: groups add rows (table), curves (plots) and skipped-peer notes.

    ``collect=True`` runs every group with the fewest rounds and keeps each pair's contenders in
    :attr:`cases` (what ``bench/test_bench.py`` hands to pytest-benchmark)."""

    def __init__(
        self,
        quick: bool = False,
        groups: Sequence[str] = GROUPS,
        log: IO[str] | None = None,
        spark_k: int | None = None,
        collect: bool = False,
        scale_sizes: Sequence[int] | None = None,
        scale_peer_max: int | None = None,
    ) -> None:
        self.quick = quick or collect
        self.scale_sizes = list(scale_sizes) if scale_sizes else None
        self.scale_peer_max = scale_peer_max
        self.cases: list[Case] | None = [] if collect else None
        self.groups = list(groups)
        self.log_stream = log if log is not None else sys.stderr
        self.rows: list[Row] = []
        self.curves: dict[str, Row] = {}
        self.skipped: list[dict[str, str]] = []
        self.notes: list[str] = []
        self.errors: list[dict[str, str]] = []
        self.group_seconds: dict[str, float] = {}
        self.spark_k = spark_k
        self.extra_machine: dict[str, Any] = {}
        # rounds: full 30, quick 9; collecting only needs the callables (and one quick look)
        self.rounds = 3 if collect else 9 if quick else 30
        self.budget = 0.02 if collect else 0.25 if quick else 1.5  # seconds per contender and measurement

    # -------------------------------------------------------------- helpers
    def log(self, msg: str) -> None:
        """A progress line on the log stream (stderr by default)."""
        print(msg, file=self.log_stream, flush=True)

    def skip(self, group: str, peer: str, reason: str) -> str:
        """Note that ``peer`` is skipped in ``group`` (once) and return the text of its table cell."""
        if not any(s["peer"] == peer and s["group"] == group for s in self.skipped):
            self.skipped.append({"group": group, "peer": peer, "reason": reason})
            self.log(f"[{group}] skipping peer {peer}: {reason}")
        return f"skipped: {reason.split(' (')[0]}"

    def add_row(
        self,
        group: str,
        key: str,
        operation: str,
        kip: Summary,
        peer: Summary | None = None,
        peer_name: str | None = None,
        peer_skipped: str | None = None,
        goal: Goal | None = None,
        unit: str = "time",
        note: str = "",
        extra: Mapping[str, Any] | None = None,
    ) -> Row:
        """``kip`` / ``peer``: summaries in ns per operation (unit time/rate/cost) or {"value": bytes}.

        Units: ``time`` (ns per call), ``rate`` (ns per operation, shown as operations per second),
        ``throughput`` (ns per MB), ``cost`` (ns of CPU per operation against a floor's: shown with its multiple
        of the peer's), ``millicores``, ``count``, ``ratio``, bytes otherwise. ``ratio`` is the peer's median
        over kip714's for the first four. Goal kinds: ``ratio`` (ratio ≥ value), ``within`` (kip714 at most
        ``value`` slower), ``rate`` (operations per second ≥ value), ``max_bytes``/``max_value``,
        ``max_time``, ``min_value``, ``added_ns`` (kip714's median minus the peer's), ``max_s``, ``check`` (the
        group's verdict), ``max_cost`` (kip714's median at most ``value`` times the peer's)."""
        ratio = None
        if peer is not None and unit in ("time", "rate", "throughput", "cost"):
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
            elif kind == "check":  # evaluated by the group: the value is the verdict
                met = bool(target)
            elif kind == "max_cost" and peer is not None:
                met = kip["median"] <= target * peer["median"]
        if unit == "time":
            kip_text = fmt_ns(kip["median"])
            peer_text = f"{peer_name} {fmt_ns(peer['median'])}" if peer is not None else None
        elif unit == "throughput":  # medians in ns per MB
            kip_text = f"{1e9 / kip['median']:.1f} MB/s"
            peer_text = f"{peer_name} {1e9 / peer['median']:.1f} MB/s" if peer is not None else None
        elif unit == "cost":
            kip_text = f"{fmt_ns(kip['median'])}" + (
                f", {kip['median'] / peer['median']:.2f}× {peer_name}" if peer is not None and peer["median"] else ""
            )
            peer_text = f"{peer_name} {fmt_ns(peer['median'])}" if peer is not None else None
        elif unit == "millicores":
            kip_text = f"{kip['value']:.1f} millicores per MB/s"
            peer_text = None
        elif unit == "count":
            kip_text = f"{kip['value']:,}"
            peer_text = None
        elif unit == "rate":
            kip_text = f"{fmt_rate(1e9 / kip['median'])} ({fmt_ns(kip['median'])} each)"
            peer_text = f"{peer_name} {fmt_rate(1e9 / peer['median'])}" if peer is not None else None
        elif unit == "ratio":
            kip_text = f"{kip['value']:.2f}"
            peer_text = f"{peer_name} {peer['value']:.2f}" if peer is not None else None
        else:
            kip_text = f"{kip['value']:.1f} B"
            peer_text = None
        if peer_text is None:
            peer_text = peer_skipped if peer_skipped else (peer_name or "—")
        row = {
            "group": group,
            "id": key,
            "operation": operation,
            "unit": unit,
            "kip714": kip,
            "peer": peer,
            "peer_name": peer_name,
            "peer_skipped": peer_skipped,
            "ratio": ratio,
            "goal": goal,
            "met": met,
            "kip714_text": kip_text,
            "peer_text": peer_text,
            "note": note,
            **(extra or {}),
        }
        self.rows.append(row)
        goal_txt = "" if not goal else f"  goal {goal['text']}: {'met' if met else 'MISSED' if met is False else 'n/a'}"
        self.log(f"[{group}] {operation}: kip714 {kip_text}; peer {peer_text}; ratio {fmt_ratio(ratio)}{goal_txt}")
        return row

    def pair(
        self,
        group: str,
        key: str,
        operation: str,
        kip: Contender,
        peer_factory: Callable[[], PeerContender] | None,
        goal: Goal | None = None,
        note: str = "",
        peer_dist: str | None = None,
        extra: Mapping[str, Any] | None = None,
        rounds: int | None = None,
    ) -> Row:
        """Measure kip714's ``(f, args)`` against the peer that ``peer_factory()`` builds (or skip it)."""
        peer_name = peer_skipped = None
        peer_case: PeerContender | None = None
        contenders = [kip]
        if peer_factory is not None:
            try:
                peer_name, pf, pa_ = peer_factory()
                contenders.append((pf, pa_))
                peer_case = (peer_name, pf, pa_)
            except PeerMissing as exc:
                peer_skipped = self.skip(group, peer_dist or "peer", str(exc))
        if self.cases is not None:
            self.cases.append(Case(group, key, operation, kip, peer_case))
        stats = interleaved(contenders, rounds or self.rounds, budget_s=self.budget)
        return self.add_row(
            group,
            key,
            operation,
            stats[0],
            stats[1] if len(stats) > 1 else None,
            peer_name,
            peer_skipped,
            goal,
            note=note,
            extra=extra,
        )

    def curve(
        self,
        name: str,
        title: str,
        xlabel: str,
        ylabel: str,
        x: Sequence[object],
        series: Mapping[str, Sequence[float | None]],
        logx: bool = True,
        logy: bool = True,
        **extra: Any,
    ) -> None:
        """Keep a series for the plots (:func:`.plots.write_plots`) and the JSON result."""
        self.curves[name] = {
            "title": title,
            "xlabel": xlabel,
            "ylabel": ylabel,
            "x": list(x),
            "series": {k: list(v) for k, v in series.items()},
            "logx": logx,
            "logy": logy,
            **extra,
        }

    # -------------------------------------------------------------- driver
    def run(self) -> None:
        """Run the groups in order, each timed; a group that raises is reported and the run goes on."""
        settle_allocator()
        for group in self.groups:
            if group == "pipeline-scale" and (self.cases is not None or set(self.groups) - {"spark", "pipeline-scale"}):
                # minutes to tens of minutes, a Spark process per size: only when asked for
                self.notes.append("pipeline-scale: runs only with --only pipeline-scale")
                continue
            if group == "endpoint" and self.quick and tuple(self.groups) == GROUPS:
                # minutes even when quick (endpoint processes, 100 000 client instances each): when named
                self.notes.append("endpoint: skipped by --quick over every group (run --only endpoint --quick)")
                self.log("[endpoint] skipped by --quick over every group (run --only endpoint --quick)")
                continue
            if group in ("spark", "report") and self.quick and self.groups != [group]:
                self.notes.append("spark: skipped with --quick (use --only spark --quick for a tiny run)")
                self.log("[spark] skipped with --quick (run --only spark --quick for a tiny run)")
                continue
            started = time.perf_counter()
            self.log(f"[{group}] …")
            try:
                load(group)(self)
            except Exception as exc:  # a bug or a broken environment: report it, keep going, exit non-zero
                self.errors.append(
                    {"group": group, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
                )
                self.log(f"[{group}] ERROR {type(exc).__name__}: {exc}")
                traceback.print_exc(file=self.log_stream)
            self.group_seconds[group] = round(time.perf_counter() - started, 2)
            self.log(f"[{group}] done in {self.group_seconds[group]:.1f} s")

    # -------------------------------------------------------------- output
    def machine(self) -> dict[str, Any]:
        """What this run was measured on (:func:`.machine.describe`) and what its groups added (Java, the
        protobuf backend)."""
        return describe() | self.extra_machine

    def to_json(
        self, started: float, elapsed: float, load_before: list[float] | None, load_after: list[float] | None
    ) -> dict[str, Any]:
        """The JSON result: mode, groups, timings, machine, method, rows, curves, skipped peers, notes, errors."""

        def clean(row: Row) -> Row:
            return {k: v for k, v in row.items() if k not in ("kip714_text", "peer_text")} | {
                "kip714_text": row["kip714_text"],
                "peer_text": row["peer_text"],
            }

        return {
            "tool": "kip714 bench",
            "mode": "quick" if self.quick else "full",
            "groups": self.groups,
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "elapsed_s": round(elapsed, 2),
            "group_seconds": self.group_seconds,
            "machine": self.machine() | {"loadavg_before": load_before, "loadavg_after": load_after},
            "method": {
                "rounds": self.rounds,
                "round_target_ns": 1_000_000,
                "budget_s_per_measurement": self.budget,
                "statistic": "median over interleaved rounds; ratio = peer median / kip714 median",
                "timer": "time.perf_counter_ns",
                "gc": "disabled while timing",
                "allocator": "one 4 MiB block allocated and freed first (glibc mmap threshold steady state)",
            },
            "rows": [clean(r) for r in self.rows],
            "curves": self.curves,
            "skipped": self.skipped,
            "notes": self.notes,
            "errors": self.errors,
        }
