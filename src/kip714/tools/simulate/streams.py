"""Simulated Kafka Streams applications: the Streams metrics a KafkaStreams instance pushes through KIP-714.

Since Kafka 4.0 (KIP-1076) a Streams application's own metrics travel with its clients' telemetry:

* the **admin client** (``<client.id>-admin``; Streams forces its ``enable.metrics.push``) pushes the
  client-level metrics of group ``stream-metrics`` (``StreamsClientMetricsDelegatingReporter``):
  ``client-state`` (the ``KafkaStreams.State`` ordinal, KIP-1091), ``alive-stream-threads``,
  ``failed-stream-threads`` (a CumulativeSum sensor: a monotonic sum) and ``recording-level`` (INFO=0);
* the **main consumer of each stream thread** (``<client.id>-StreamThread-<n>-consumer``) pushes every
  Streams metric tagged with its thread's id (``StreamsThreadMetricsDelegatingReporter``): the thread level
  (group ``stream-thread-metrics``: ``thread-state`` as the ``StreamThread.State`` ordinal, rates, totals,
  latencies, ratios, ``blocked-time-ns-total``, ``thread-start-time``) and the task level (group
  ``stream-task-metrics``: dropped records, active process ratio, ``restore-remaining-records-total``).

Tags follow the Streams version (``Fleet(streams_version=...)``): ``client-state`` carries ``process-id``,
and ``application-id`` from 4.2.0 (KIP-1221, KAFKA-19734); ``recording-level`` carries ``process-id``;
``thread-state`` carries ``thread-id`` and ``process-id`` (KAFKA-17561); 4.0.0-4.0.1 and 4.1.0-4.1.1 also put
``process-id`` on ``alive-stream-threads`` and ``failed-stream-threads`` (KAFKA-19882, fixed in 4.0.2,
4.1.2, 4.2.0). The metric names, kinds and state ordinals are :mod:`kip714.client.catalog`'s, which cites
the Kafka sources. The telemetry names follow ``TelemetryMetricNamingConvention``: ``stream-metrics`` →
``org.apache.kafka.stream.``, ``stream-thread-metrics`` → ``org.apache.kafka.stream.thread.`` (so
``thread-state`` is ``org.apache.kafka.stream.thread.thread.state``).

A :class:`StreamsApp` can misbehave on cue (tests, demos): a thread that dies (``fail_thread``), a client state
other than RUNNING (``state_change``), a thread stuck in a processor (``block_thread``: it stops polling and
processing, its process ratio goes to 1 while its state stays RUNNING).
"""

from __future__ import annotations

import math
import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from kip714.client.catalog import (
    STREAM_THREAD_STATES,
    STREAMS_CLIENT_METRICS,
    STREAMS_CLIENT_STATES,
    STREAMS_TASK_METRICS,
    STREAMS_THREAD_METRICS,
)
from kip714.client.naming import telemetry_metric_key

from .stochastic import lognormal

__all__ = ["StreamsApp", "StreamsRole", "streams_tags"]

_RUNNING = STREAMS_CLIENT_STATES.index("RUNNING")
_THREAD_RUNNING = STREAM_THREAD_STATES.index("RUNNING")
_THREAD_DEAD = STREAM_THREAD_STATES.index("DEAD")


def _version(text: str) -> tuple[int, int, int]:
    parts = [int(p) for p in (text.split("-", 1)[0].split(".") + ["0", "0"])[:3] if p.isdigit()]
    return (parts + [0, 0, 0])[0], (parts + [0, 0, 0])[1], (parts + [0, 0, 0])[2]


def streams_tags(version: str, name: str) -> tuple[str, ...]:
    """The tags (besides ``client-id``, which telemetry drops) of client-level metric ``name`` in Streams
    ``version``."""
    v = _version(version)
    if name == "client-state":
        return ("process-id", "application-id") if v >= (4, 2, 0) else ("process-id",)
    if name == "recording-level":
        return ("process-id",)
    # KAFKA-19882: every client-level metric carried process-id before the fix
    if (4, 0, 0) <= v < (4, 0, 2) or (4, 1, 0) <= v < (4, 1, 2):
        return ("process-id",)
    return ()


@dataclass
class StreamsApp:
    """One KafkaStreams instance: its application id, process id, Streams client id and threads, what
    it reports, and the misbehaviour it is told to show (offsets in ms from its first client's start)."""

    application_id: str
    process_id: str
    client_id: str
    threads: int
    version: str = "4.2.0"
    #: (thread number, after ms): that thread dies; its consumer leaves, failed-stream-threads counts it
    fail_thread: tuple[int, int] | None = None
    #: (after ms, KafkaStreams.State ordinal): the client's state from then on
    state_change: tuple[int, int] | None = None
    #: (thread number, after ms): that thread gets stuck in a processor (no poll, no process)
    block_thread: tuple[int, int] | None = None
    start_ms: int | None = None
    tasks_per_thread: int = 2

    def thread_id(self, n: int) -> str:
        """The Streams thread id (``<client.id>-StreamThread-<n>``, KafkaStreams/StreamThread)."""
        return f"{self.client_id}-StreamThread-{n}"

    def _after(self, what: tuple[int, int] | None, now_ms: int) -> bool:
        return what is not None and self.start_ms is not None and now_ms - self.start_ms >= what[1]

    def thread_dead(self, n: int, now_ms: int) -> bool:
        return self.fail_thread is not None and self.fail_thread[0] == n and self._after(self.fail_thread, now_ms)

    def thread_blocked(self, n: int, now_ms: int) -> bool:
        return self.block_thread is not None and self.block_thread[0] == n and self._after(self.block_thread, now_ms)

    def state(self, now_ms: int) -> int:
        if (
            self.state_change is not None
            and self.start_ms is not None
            and now_ms - self.start_ms >= self.state_change[0]
        ):
            return self.state_change[1]
        return _RUNNING

    def alive_threads(self, now_ms: int) -> int:
        return sum(1 for n in range(1, self.threads + 1) if not self.thread_dead(n, now_ms))

    def failed_threads(self, now_ms: int) -> int:
        return self.threads - self.alive_threads(now_ms)

    def fail_after_ms(self, n: int) -> int | None:
        """When thread ``n``'s consumer leaves (None: it does not)."""
        return self.fail_thread[1] if self.fail_thread is not None and self.fail_thread[0] == n else None


@dataclass
class StreamsRole:
    """A simulated client's part in a Streams application: its admin client (``thread`` None) or the main
    consumer of stream thread ``thread``."""

    app: StreamsApp
    thread: int | None = None
    s: dict[Any, Any] = field(default_factory=dict)

    # -- registration (once the client's collector exists)
    def register(self, collector: Any, now_ms: int, rng: random.Random) -> None:
        app = self.app
        if app.start_ms is None or now_ms < app.start_ms:
            app.start_ms = now_ms
        if self.thread is None:
            self._register_client(collector, now_ms)
        else:
            self._register_thread(collector, now_ms, rng)

    def _register_client(self, collector: Any, now_ms: int) -> None:
        app, s = self.app, self.s
        values = {
            "client-state": lambda: float(app.state(s["now"])),
            "alive-stream-threads": lambda: float(app.alive_threads(s["now"])),
            "failed-stream-threads": lambda: float(app.failed_threads(s["now"])),
            "recording-level": lambda: 0.0,  # INFO (StreamsMetricsImpl.calculateMetricsRecordingLevel)
        }
        s["now"] = now_ms
        tag_values = {"client-id": app.client_id, "process-id": app.process_id, "application-id": app.application_id}
        for name, kind, _ in STREAMS_CLIENT_METRICS:
            tags = {"client-id": app.client_id} | {t: tag_values[t] for t in streams_tags(app.version, name)}
            metric, attrs = telemetry_metric_key("stream-metrics", name, tags)
            if kind == "sum":
                collector.counter(metric, attrs, value_type="double", value_fn=values[name])
            else:
                collector.gauge(metric, attrs, value_type="double", value_fn=values[name])

    def _register_thread(self, collector: Any, now_ms: int, rng: random.Random) -> None:
        app, s = self.app, self.s
        assert self.thread is not None
        thread_id = app.thread_id(self.thread)
        s.update(
            now=now_ms,
            start=float(now_ms),
            level=lognormal(rng, 400.0, 0.7),  # records/s the thread processes
            poll_total=0.0,
            process_total=0.0,
            commit_total=0.0,
            punctuate_total=0.0,
            blocked_ns=0.0,
            task_created_total=float(app.tasks_per_thread),
        )
        for name, kind in STREAMS_THREAD_METRICS:
            tags = {"thread-id": thread_id}
            if name == "thread-state":
                tags["process-id"] = app.process_id
            metric, attrs = telemetry_metric_key("stream-thread-metrics", name, tags)
            fn = self._reader(name)
            if kind == "sum":
                collector.counter(metric, attrs, value_type="double", value_fn=fn)
            else:
                collector.gauge(metric, attrs, value_type="double", value_fn=fn)
        for t in range(app.tasks_per_thread):
            task_id = f"0_{(self.thread - 1) * app.tasks_per_thread + t}"
            s[("restore", task_id)] = float(int(lognormal(rng, 20_000.0, 1.0)))
            for name, kind in STREAMS_TASK_METRICS:
                metric, attrs = telemetry_metric_key(
                    "stream-task-metrics", name, {"thread-id": thread_id, "task-id": task_id}
                )
                fn = self._task_reader(name, task_id)
                if kind == "sum":
                    collector.counter(metric, attrs, value_type="double", value_fn=fn)
                else:
                    collector.gauge(metric, attrs, value_type="double", value_fn=fn)

    def _reader(self, name: str):
        s = self.s
        key = name.replace("-", "_")
        return lambda: float(s.get(key, 0.0))

    def _task_reader(self, name: str, task_id: str):
        s = self.s
        if name == "restore-remaining-records-total":
            return lambda: s[("restore", task_id)]
        if name == "active-process-ratio":
            return lambda: s.get("process_ratio", 0.0)
        return lambda: 0.0  # dropped-records-rate/total: none dropped

    # -- evolution (called by the client's metric model before each collection)
    def update(self, rng: random.Random, now_ms: int, dt_ms: float) -> None:
        s = self.s
        s["now"] = now_ms
        if self.thread is None:
            return
        app, n = self.app, self.thread
        sec = dt_ms / 1000.0
        dead = app.thread_dead(n, now_ms)
        blocked = app.thread_blocked(n, now_ms)
        s["thread_state"] = float(_THREAD_DEAD if dead else _THREAD_RUNNING)
        s["thread_start_time"] = s["start"]
        if blocked or dead:
            for key in ("poll_rate", "process_rate", "commit_rate", "punctuate_rate", "poll_ratio", "commit_ratio"):
                s[key] = 0.0
            s["process_ratio"] = 1.0 if blocked else 0.0
            s["punctuate_ratio"] = 0.0
            s["process_latency_max"] = s.get("process_latency_max", 0.0) + dt_ms  # the call that never returns
            return
        rate = s["level"] * math.exp(rng.gauss(0.0, 0.15))
        polls = rng.uniform(20.0, 60.0) * sec
        processed = rate * sec
        commits = sec / 30.0  # commit.interval.ms 30000
        s["poll_rate"], s["poll_total"] = polls / sec, s["poll_total"] + polls
        s["process_rate"], s["process_total"] = processed / sec, s["process_total"] + processed
        s["commit_rate"], s["commit_total"] = commits / sec, s["commit_total"] + commits
        s["punctuate_rate"], s["punctuate_total"] = 0.0, s["punctuate_total"]
        s["process_ratio"] = min(0.95, max(0.01, rate / 2000.0 * math.exp(rng.gauss(0.0, 0.1))))
        s["poll_ratio"] = max(0.0, 0.9 - s["process_ratio"])
        s["commit_ratio"] = 0.02
        s["punctuate_ratio"] = 0.0
        s["blocked_ns"] += s["poll_ratio"] * dt_ms * 1e6
        s["blocked_time_ns_total"] = s["blocked_ns"]
        per_poll = processed / max(polls, 1e-9)
        s["poll_records_avg"], s["poll_records_max"] = per_poll, per_poll * rng.uniform(1.2, 3.0)
        s["process_records_avg"], s["process_records_max"] = per_poll, per_poll * rng.uniform(1.2, 3.0)
        s["poll_latency_avg"] = 1000.0 * s["poll_ratio"] / max(s["poll_rate"], 1e-9)
        s["poll_latency_max"] = s["poll_latency_avg"] * rng.uniform(1.5, 4.0)
        s["process_latency_avg"] = 1e6 / max(rate, 1e-9) / 1000.0  # ms per record
        s["process_latency_max"] = s["process_latency_avg"] * rng.uniform(2.0, 10.0)
        s["commit_latency_avg"] = lognormal(rng, 8.0, 0.4)
        s["commit_latency_max"] = s["commit_latency_avg"] * rng.uniform(1.2, 3.0)
        s["task_created_total"] = float(app.tasks_per_thread)
        s["task_created_rate"] = s["task_closed_rate"] = 0.0
        for task in [k for k in s if isinstance(k, tuple) and k[0] == "restore"]:
            left = s[task]
            if left > 0:  # restoring: falls, then -1 once done (the task is not restoring)
                s[task] = max(0.0, left - rng.uniform(2_000.0, 6_000.0) * sec)
            elif left == 0:
                s[task] = -1.0


def new_app(rng: random.Random, index: int, threads: int, version: str, service: str) -> StreamsApp:
    """A Streams application (its ids as KafkaStreams makes them: ``client.id`` defaults to
    ``<application.id>-<process id>``)."""
    process_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    application_id = f"{service}-streams" + (f"-{index}" if index else "")
    return StreamsApp(application_id, process_id, f"{application_id}-{process_id}", threads, version)
