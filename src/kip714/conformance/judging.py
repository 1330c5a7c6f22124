"""What every scenario shares: the verdict, the timing tolerances, the :class:`Scenario` base (what the lab's
broker answers and when: :meth:`Scenario.setup`, :meth:`Scenario.on_telemetry`; how the frames are judged against
KIP-714: :meth:`Scenario.judge`), its judging helpers, and the two scripts several scenarios use.

Tolerances (``I`` is the PushIntervalMs the lab answered, in seconds; every time is the lab's own, from the
answer it wrote to the request it read, see :class:`Timing`):

* ε = max(20 ms, 0.04·I) below a lower bound. Lower bounds are strict: a client that schedules from the answer
  it received can only be later than the lab measures, whatever the load.
* late = max(250 ms, 0.25·I) above an upper bound (the KIP sets none; these only catch a client that stalls).
* "immediately" = within max(100 ms, 0.2·I) of the answer.

Quotes are from the accepted KIP-714 text (``001:N`` is the line of the KIP's page in the project's seeds).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .._enums import ErrorCode
from ..broker.manager import TelemetryBroker
from ..broker.subscriptions import kafka_uuid_string
from .lab import Directive, LabCluster
from .payload import Payload, read_payload
from .trace import ConnectionEvent, Exchange, Trace

__all__ = [
    "INVALID_RECORD",
    "INVALID_REQUEST",
    "NOMATCH_PREFIX",
    "SUBSCRIPTION",
    "THROTTLED",
    "TOO_LARGE",
    "UNKNOWN_SUB",
    "UNSUPPORTED_COMPRESSION",
    "ZERO",
    "ChangesSubscription",
    "ClosesTelemetryConnection",
    "Frame",
    "Scenario",
    "Timing",
    "Verdict",
    "fail",
    "frames_of",
    "kid",
    "ms",
    "na",
    "passed",
    "previous_telemetry",
    "regular",
]

ZERO = uuid.UUID(int=0)
SUBSCRIPTION = "kip714-conformance"
NOMATCH_PREFIX = "org.apache.kafka.kip714.conformance.nomatch."
UNKNOWN_SUB = int(ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
UNSUPPORTED_COMPRESSION = int(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
THROTTLED = int(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
TOO_LARGE = int(ErrorCode.TELEMETRY_TOO_LARGE)
INVALID_RECORD = int(ErrorCode.INVALID_RECORD)
INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
MAX_FRAMES = 40

Frame = Exchange | ConnectionEvent


@dataclass
class Verdict:
    """A scenario's outcome: ``status`` is "pass", "fail", "n/a" or "error"; ``why`` says it in one line."""

    status: str
    why: str
    notes: list[str] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)


@dataclass(frozen=True)
class Timing:
    """The tolerances for one PushIntervalMs (see the module docstring)."""

    interval_ms: int

    @property
    def interval(self) -> float:
        return self.interval_ms / 1000.0

    @property
    def eps(self) -> float:
        return max(0.020, 0.04 * self.interval)

    @property
    def late(self) -> float:
        return max(0.250, 0.25 * self.interval)

    @property
    def immediate(self) -> float:
        return max(0.100, 0.2 * self.interval)

    def first_push_window(self) -> tuple[float, float]:
        """Answer of the Get → the first push: 0.5·I − ε … 1.5·I + late."""
        return 0.5 * self.interval - self.eps, 1.5 * self.interval + self.late

    def gap_window(self) -> tuple[float, float]:
        """Answer of a push → the next push (or, with no metrics requested, Get → Get): I − ε … 1.5·I + late."""
        return self.interval - self.eps, 1.5 * self.interval + self.late

    def describe(self) -> str:
        return (
            f"PushIntervalMs {self.interval_ms}: ε {self.eps * 1000:.0f} ms, late {self.late * 1000:.0f} ms, "
            f"immediately = within {self.immediate * 1000:.0f} ms"
        )


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def kid(instance: uuid.UUID | None) -> str:
    """An instance id as Kafka prints it (``Uuid.toString()``: URL-safe base64, 22 characters)."""
    return kafka_uuid_string(instance) if instance is not None else "none"


def first_name_prefix(names: Sequence[str]) -> str:
    """A prefix subscription that keeps some of ``names`` and drops others: the parent namespace (a name
    without its last segment) covering the most names but not all; a whole name when they share one parent."""
    names = sorted(set(names))
    best, best_count = "", -1
    for name in names:
        cut = name.rfind(".")
        if cut <= 0:
            continue
        prefix = name[: cut + 1]
        count = sum(1 for n in names if n.startswith(prefix))
        if count < len(names) and count > best_count:
            best, best_count = prefix, count
    return best or (names[0] if names else "org.apache.kafka.")


class Scenario:
    """One scenario. A fresh object per run: it may keep state between :meth:`on_telemetry` calls."""

    id: ClassVar[str]
    #: one line: what the lab does and what it expects
    summary: ClassVar[str]
    #: the KIP sentences the verdict rests on, quoted
    rule: ClassVar[str]
    #: the PushIntervalMs this scenario always uses (None: the run's ``interval_ms``)
    fixed_interval_ms: ClassVar[int | None] = None

    def __init__(self, interval_ms: int, compression: Sequence[int]) -> None:
        self.interval_ms = self.fixed_interval_ms or int(interval_ms)
        self.timing = Timing(self.interval_ms)
        self.compression = [int(c) for c in compression]
        self.payloads: dict[int, Payload] = {}

    # ------------------------------------------------------------------------------------------ the script

    def metrics(self) -> str:
        """The subscription's ``metrics`` config: "*" unless the scenario says otherwise."""
        return "*"

    def setup(self, broker: TelemetryBroker) -> None:
        broker.registry.set(SUBSCRIPTION, {"metrics": self.metrics(), "interval.ms": str(self.interval_ms)})
        broker.accepted_compression_types = list(self.compression)

    def on_telemetry(self, lab: LabCluster, exchange: Exchange, response: Any) -> Directive | None:
        return None

    def active_s(self) -> float:
        """How long after its first Get the client must keep running for a verdict."""
        raise NotImplementedError

    # ------------------------------------------------------------------------------------------ judging

    def judge(self, trace: Trace) -> Verdict:
        raise NotImplementedError

    def first_get(self, trace: Trace) -> Exchange:
        """The first Get answered without error: where most verdicts start counting (the runner judges only a
        client that sent a Get)."""
        get = trace.first_successful_get()
        assert get is not None
        return get

    def payload(self, ex: Exchange) -> Payload:
        found = self.payloads.get(ex.seq)
        if found is None:
            found = self.payloads[ex.seq] = read_payload(ex)
        return found

    def short(self, trace: Trace, since: float, need: float, what: str) -> Verdict | None:
        """An error verdict when the client stopped less than ``need`` seconds after ``since``: the scenario
        could not see ``what``."""
        end = trace.client_end
        if end is not None and end - since < need:
            return Verdict(
                "error",
                f"the client stopped {ms(end - since)} after {what}; the scenario needs "
                f"{ms(need)} to judge (it started too late for its {{seconds}}, or does not "
                "run for {seconds})",
            )
        return None

    def cadence(self, trace: Trace, pushes: Sequence[Exchange], first: bool = True) -> list[str]:
        """Timing problems of ``pushes`` (non-terminating): each first push after a Get answer within
        :meth:`Timing.first_push_window` (unless ``first`` is False: push_interval owns that rule), each later
        one within :meth:`Timing.gap_window` of the previous push's answer."""
        problems = []
        lo1, hi1 = self.timing.first_push_window()
        lo, hi = self.timing.gap_window()
        for p in pushes:
            prev = previous_telemetry(trace, p)
            if prev is None:
                problems.append(f"push at {ms(p.t_rx)} came before any Get")
                continue
            gap = p.t_rx - prev.answered_at
            if prev.is_get:
                if first and not lo1 <= gap <= hi1:
                    problems.append(
                        f"the first push after the Get answered at {ms(prev.answered_at)} came "
                        f"{ms(gap)} after it; KIP-714 asks for 0.5–1.5 × PushIntervalMs "
                        f"(the lab allows {ms(lo1)}–{ms(hi1)})"
                    )
            elif prev.is_push and not prev.request.get("terminating") and not lo <= gap <= hi:
                problems.append(
                    f"push at {ms(p.t_rx)} came {ms(gap)} after the previous push was answered; "
                    f"the interval is {ms(self.timing.interval)} (the lab allows "
                    f"{ms(lo)}–{ms(hi)})"
                )
        return problems


def previous_telemetry(trace: Trace, ex: Exchange) -> Exchange | None:
    prev = None
    for t in trace.telemetry:
        if t.seq == ex.seq:
            return prev
        prev = t
    return prev


def regular(pushes: Sequence[Exchange]) -> list[Exchange]:
    return [p for p in pushes if not p.request.get("terminating")]


def frames_of(*groups: Sequence[Frame] | Frame | None) -> list[Frame]:
    out: list[Frame] = []
    seen: set[int] = set()
    for group in groups:
        if group is None:
            continue
        items = [group] if isinstance(group, (Exchange, ConnectionEvent)) else group
        for item in items:
            if id(item) not in seen:
                seen.add(id(item))
                out.append(item)
    out.sort(key=lambda f: f.t_rx if isinstance(f, Exchange) else f.t)
    return out[:MAX_FRAMES]


def fail(why: str, *frames: Sequence[Frame] | Frame | None, notes: Sequence[str] = ()) -> Verdict:
    return Verdict("fail", why, list(notes), frames_of(*frames))


def passed(why: str, *frames: Sequence[Frame] | Frame | None, notes: Sequence[str] = ()) -> Verdict:
    return Verdict("pass", why, list(notes), frames_of(*frames))


def na(why: str, *frames: Sequence[Frame] | Frame | None, notes: Sequence[str] = ()) -> Verdict:
    return Verdict("n/a", why, list(notes), frames_of(*frames))


# ================================================================================================ scenarios


class ClosesTelemetryConnection(Scenario):
    """Closes the connection that carried the first accepted push, 100 ms after answering it (while idle)."""

    CLOSE_AFTER_S = 0.1

    def __init__(self, interval_ms: int, compression: Sequence[int]) -> None:
        super().__init__(interval_ms, compression)
        self.closed_conn: int | None = None

    def on_telemetry(self, lab: LabCluster, exchange: Exchange, response: Any) -> Directive | None:
        if (
            self.closed_conn is None
            and exchange.is_push
            and response.error_code == 0
            and not exchange.request.get("terminating")
        ):
            self.closed_conn = exchange.conn
            return Directive(
                close_after_s=self.CLOSE_AFTER_S,
                note=f"the lab closes this connection {ms(self.CLOSE_AFTER_S)} after the answer",
            )
        return None

    def close_event(self, trace: Trace) -> ConnectionEvent | None:
        return next((c for c in trace.closes_by_lab() if c.conn == self.closed_conn), None)

    def deadline(self) -> float:
        """How long after the close telemetry must be back: 2·I + 1.5 s (a reconnect, then a push interval)."""
        return 2 * self.timing.interval + 1.5

    def active_s(self) -> float:
        t = self.timing
        return 1.5 * t.interval + t.late + self.CLOSE_AFTER_S + self.deadline() + 0.3


class ChangesSubscription(Scenario):
    """Switches the registry to a prefix subscription after the first accepted push with metrics; the broker
    then answers the next push UNKNOWN_SUBSCRIPTION_ID by itself, as Kafka does."""

    def __init__(self, interval_ms: int, compression: Sequence[int]) -> None:
        super().__init__(interval_ms, compression)
        self.prefix: str | None = None
        self.switched_at: float | None = None

    def on_telemetry(self, lab: LabCluster, exchange: Exchange, response: Any) -> Directive | None:
        if (
            self.prefix is None
            and exchange.is_push
            and response.error_code == 0
            and not exchange.request.get("terminating")
        ):
            names = self.payload(exchange).names
            if not names:
                return None
            self.prefix = first_name_prefix(names)
            lab.broker.registry.set(SUBSCRIPTION, {"metrics": self.prefix, "interval.ms": str(self.interval_ms)})
            self.switched_at = exchange.answered_at
            return Directive(note=f"the subscription now asks for {self.prefix!r} only")
        return None

    def active_s(self) -> float:
        t = self.timing
        return 4.5 * t.interval + 3 * t.late + t.immediate

    def unmatched(self, pushes: Sequence[Exchange], prefixes: Sequence[str]) -> tuple[Exchange, list[str]] | None:
        for p in pushes:
            bad = [n for n in self.payload(p).names if not any(n.startswith(x) for x in prefixes)]
            if bad:
                return p, bad
        return None
