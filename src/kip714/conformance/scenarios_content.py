"""Scenarios of what a push carries: only the requested metrics, the requested temporality, valid payloads in
every codec (quotes and tolerances: :mod:`kip714.conformance.judging`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..broker.manager import TelemetryBroker
from .judging import (
    UNKNOWN_SUB,
    ChangesSubscription,
    Frame,
    Scenario,
    Verdict,
    fail,
    ms,
    na,
    passed,
)
from .lab import Directive, LabCluster
from .payload import CUMULATIVE, DELTA, TEMPORALITY_NAMES, name_problems
from .trace import Exchange, Trace, codec_name

__all__ = ["PayloadValid", "RequestedOnly", "Temporality"]


class RequestedOnly(ChangesSubscription):
    id = "requested_only"
    summary = "with '*' metrics are pushed; with a prefix subscription, only metrics under the prefixes"
    rule = (
        '001:1772 "...the client shall update its internal metrics collection to match the received '
        'subscription (absolute update)..." 001:1951-1954 "RequestedMetrics Array[string] // Requested telemetry '
        'metrics prefix string match. // Empty array: No metrics subscribed. // Array[0] "*": All metrics '
        'subscribed. // Array[..]: prefix string match."'
    )

    def judge(self, trace: Trace) -> Verdict:
        get = self.first_get(trace)
        if self.switched_at is None:
            accepted = [p for p in trace.pushes if p.error_code == 0]
            if accepted and all(self.payload(p).problem is None for p in accepted):
                return fail("with '*' requested, no accepted push carried a metric", get, accepted[:4])
            short = self.short(trace, get.answered_at, self.active_s(), "its first Get")
            if short is not None:
                return short
            return na(
                "no accepted push with readable metrics under '*' (push cadence and payloads are judged by "
                "push_interval and payload_valid)",
                get,
                trace.pushes[:4],
            )
        prefixes = [self.prefix or ""]
        new_gets = [
            g
            for g in trace.gets
            if g.t_rx > self.switched_at and g.error_code == 0 and g.answer.get("requested_metrics") == prefixes
        ]
        if not new_gets:
            refused = next((p for p in trace.pushes if p.t_rx > self.switched_at and p.error_code == UNKNOWN_SUB), None)
            if refused is None:
                short = self.short(trace, self.switched_at, self.timing.gap_window()[1], "the subscription changed")
                return short or na(
                    "no push came after the subscription changed (cadence is judged by push_interval)",
                    get,
                    trace.after(self.switched_at)[:4],
                )
            short = self.short(trace, refused.answered_at, self.timing.immediate, "UNKNOWN_SUBSCRIPTION_ID")
            return short or na(
                "phase B not reached: the client sent no Get after UNKNOWN_SUBSCRIPTION_ID (judged "
                "by subscription_changed)",
                get,
                refused,
                trace.after(refused.answered_at)[:3],
            )
        new_get = new_gets[0]
        pushes = [p for p in trace.pushes if p.seq > new_get.seq]
        bad = self.unmatched(pushes, prefixes)
        if bad is not None:
            return fail(
                f"after the Get asking for {prefixes}, the push at {ms(bad[0].t_rx)} carried "
                f"{len(bad[1])} metric(s) outside it, e.g. {bad[1][:3]}",
                new_get,
                bad[0],
            )
        with_metrics = [p for p in pushes if self.payload(p).names]
        if not with_metrics:
            short = self.short(
                trace,
                new_get.answered_at,
                1.5 * self.timing.interval + self.timing.late,
                "the Get of the prefix subscription",
            )
            if short is not None:
                return short
            return fail(f"after the Get asking for {prefixes}, no push carried a metric under it", new_get, pushes[:4])
        return passed(
            f"'*' gave {len(self.payload(self._first_accepted(trace)).names)} metrics; {prefixes} gave "
            f"{len(self.payload(with_metrics[0]).names)}, all under the prefix",
            get,
            new_get,
            with_metrics[:3],
        )

    def _first_accepted(self, trace: Trace) -> Exchange:
        return next(p for p in trace.pushes if p.error_code == 0 and self.payload(p).names)


class Temporality(Scenario):
    id = "temporality"
    summary = (
        "DeltaTemporality true gives delta sums and histograms; after a forced UNKNOWN_SUBSCRIPTION_ID and a "
        "Get with false, cumulative ones"
    )
    rule = (
        '001:1437 "Metrics are to be sent as either DELTA or CUMULATIVE values, depending on the value of '
        'DeltaTemporality in the GetTelemetrySubscriptionsResponse. Clients must support both temporalities." '
        '001:1949-1950 "DeltaTemporality bool // If True; monotonic/counter metrics are to be emitted as deltas '
        "to the previous sample. // If False; monotonic/counter metrics are to be emitted as cumulative absolute "
        'values."'
    )

    def __init__(self, interval_ms: int, compression: Sequence[int]) -> None:
        super().__init__(interval_ms, compression)
        self.switched = False
        self.forced: int | None = None

    def setup(self, broker: TelemetryBroker) -> None:
        super().setup(broker)
        broker.delta_temporality = True

    def on_telemetry(self, lab: LabCluster, exchange: Exchange, response: Any) -> Directive | None:
        if not exchange.is_push or exchange.request.get("terminating"):
            return None
        if not self.switched and response.error_code == 0:
            self.switched = True
            lab.broker.delta_temporality = False
            return Directive(note="the next Get answers DeltaTemporality false")
        if self.switched and self.forced is None:
            self.forced = exchange.seq
            return Directive(error_code=UNKNOWN_SUB, note="the lab asks for a new Get (DeltaTemporality changed)")
        return None

    def active_s(self) -> float:
        t = self.timing
        return 4.5 * t.interval + 3 * t.late + t.immediate

    def judge(self, trace: Trace) -> Verdict:
        get = self.first_get(trace)
        judged = {DELTA: 0, CUMULATIVE: 0}
        kinds: set[str] = set()
        frames: list[Frame] = [get]
        for p in trace.pushes:
            told = trace.last_get_before(p.t_rx)
            if told is None:
                continue
            want = DELTA if told.answer.get("delta_temporality") else CUMULATIVE
            payload = self.payload(p)
            wrong = [(n, k, t) for n, k, t in payload.temporalities if t != want]
            if wrong:
                n, k, t = wrong[0]
                return fail(
                    f"after a Get with DeltaTemporality {want == DELTA}, the push at {ms(p.t_rx)} carried "
                    f"{len(wrong)} {TEMPORALITY_NAMES[want]}-expected metric(s) as "
                    f"{TEMPORALITY_NAMES.get(t, t)}, e.g. {k} {n}",
                    told,
                    p,
                )
            if payload.temporalities:
                judged[want] += 1
                kinds.update(k for _, k, _ in payload.temporalities)
                if len(frames) < 8 and told not in frames:
                    frames.append(told)
                if len(frames) < 8:
                    frames.append(p)
        cumulative_gets = [g for g in trace.gets if g.error_code == 0 and not g.answer.get("delta_temporality")]
        if not judged[DELTA] and not judged[CUMULATIVE]:
            short = self.short(trace, get.answered_at, self.active_s(), "its first Get")
            return short or na(
                "the client pushed no sums or histograms (nothing has a temporality)", get, trace.pushes[:3]
            )
        notes = []
        if "histogram" not in kinds and "exponential_histogram" not in kinds:
            notes.append("no histograms pushed: sums judged")
        if not cumulative_gets:
            forced = next((p for p in trace.pushes if p.seq == self.forced), None)
            if forced is None:
                short = self.short(
                    trace, get.answered_at, 3 * self.timing.interval + 2 * self.timing.late, "its first Get"
                )
                return short or na(
                    "no second push, so DeltaTemporality could not change (cadence is judged by push_interval)",
                    frames,
                    notes=notes,
                )
            short = self.short(trace, forced.answered_at, self.timing.immediate, "UNKNOWN_SUBSCRIPTION_ID")
            return short or na(
                "the cumulative phase was not reached: no Get after UNKNOWN_SUBSCRIPTION_ID (judged "
                "by subscription_changed)",
                frames,
                notes=notes,
            )
        if not judged[CUMULATIVE]:
            short = self.short(
                trace,
                cumulative_gets[0].answered_at,
                1.5 * self.timing.interval + self.timing.late,
                "the Get with DeltaTemporality false",
            )
            return short or fail(
                "no push with sums or histograms after the Get with DeltaTemporality false",
                cumulative_gets[0],
                notes=notes,
            )
        return passed(
            f"{judged[DELTA]} delta push(es) and {judged[CUMULATIVE]} cumulative push(es), each as asked "
            f"({', '.join(sorted(kinds))})",
            frames,
            notes=notes,
        )


class PayloadValid(Scenario):
    id = "payload_valid"
    summary = (
        "every payload decompresses with its declared codec and decodes as OTLP MetricsData, with names "
        "that follow KIP-714's naming rule; the lab steps the client through each accepted codec"
    )
    rule = (
        '001:1963 "Metrics binary // Metrics encoded in OpenTelemetry MetricsData v1 protobuf format." 001:1453 '
        '"The PushTelemetryRequest.CompressionType must then be set to the corresponding compression type value '
        'as defined for MessageV2." 001:1389-1393 "The telemetry metric name is derived by concatenation of: The '
        "prefix \"org.apache.kafka.\" The group name with \"-metrics\" removed, and every '-' replaced with '.' "
        "The metric name with every '-' replaced with '.'\" 001:1406 \"...using an implementation-specific "
        "reverse domain name as the namespace to avoid clashes\" 001:1422 \"...replacing '-' with '_'\""
    )

    def __init__(self, interval_ms: int, compression: Sequence[int]) -> None:
        super().__init__(interval_ms, compression)
        self.rotating = True

    def on_telemetry(self, lab: LabCluster, exchange: Exchange, response: Any) -> Directive | None:
        if not self.rotating or not exchange.is_push or response.error_code != 0 or exchange.request.get("terminating"):
            return None
        ctype = int(exchange.request.get("compression_type", 0))
        if ctype == 0 or ctype not in lab.broker.accepted_compression_types:  # uncompressed, or not following
            self.rotating = False
            return None
        remaining = [c for c in lab.broker.accepted_compression_types if c != ctype]
        lab.broker.accepted_compression_types = remaining
        return Directive(
            error_code=UNKNOWN_SUB,
            note=f"accepted, then answered so the client Gets the next codec list {[codec_name(c) for c in remaining]}",
        )

    def active_s(self) -> float:
        # a push per accepted codec, then one uncompressed; each comes after a Get, and the KIP lets a client
        # wait up to 1.5 intervals for its first push after one: room for every step at the latest (six mean
        # intervals, the earlier budget, cut the last step off in a suite run on a busy machine)
        t = self.timing
        return (len(self.compression) + 1) * (1.5 * t.interval + t.late)

    def judge(self, trace: Trace) -> Verdict:
        get = self.first_get(trace)
        notes: list[str] = []
        used: list[str] = []
        readable = 0
        for p in trace.pushes:
            payload = self.payload(p)
            ctype = int(p.request.get("compression_type", 0))
            if payload.null:
                return fail(f"the push at {ms(p.t_rx)} carried a null Metrics field", get, p)
            if payload.problem is not None:
                return fail(f"the push at {ms(p.t_rx)}: its Metrics {payload.problem}", get, p)
            told = trace.last_get_before(p.t_rx)
            accepted = list(told.answer.get("accepted_compression_types") or []) if told else []
            if ctype != 0 and ctype not in accepted:
                return fail(
                    f"the push at {ms(p.t_rx)} used {codec_name(ctype)}, which its Get's "
                    f"AcceptedCompressionTypes {[codec_name(c) for c in accepted]} does not hold",
                    told,
                    p,
                )
            if ctype != 0 and accepted and ctype != accepted[0]:
                notes.append(
                    f"the push at {ms(p.t_rx)} used {codec_name(ctype)} while {codec_name(accepted[0])} "
                    "came first (the KIP says 'should pick the first mutually supported type')"
                )
            bad = [(n, name_problems(n)) for n in payload.names if name_problems(n)]
            if bad:
                n, why = bad[0]
                return fail(f"{len(bad)} metric name(s) break the naming rule, e.g. {n!r} {', '.join(why)}", p)
            bad_keys = sorted(k for k in payload.attribute_keys if "-" in k)
            if bad_keys:
                return fail(f"attribute key(s) with '-' (the KIP replaces '-' with '_'): {bad_keys[:5]}", p)
            if payload.names:
                readable += 1
                name = codec_name(ctype)
                if name not in used:
                    used.append(name)
        keys = set().union(*(self.payload(p).attribute_keys for p in trace.pushes)) if trace.pushes else set()
        if "node.id" in keys:
            notes.append("attribute key 'node.id' (the KIP's example spells it node_id; not a rule)")
        if not readable:
            short = self.short(trace, get.answered_at, self.active_s(), "its first Get")
            return short or na("no push carried metrics", get, trace.pushes[:3])
        offered = [codec_name(c) for c in self.compression]
        missed = [c for c in offered if c not in used]
        if missed:
            notes.append(f"codecs not reached: {missed}")
        return passed(
            f"{len(trace.pushes)} payload(s) decoded ({', '.join(used)}), names and attribute keys follow "
            "the naming rule",
            get,
            trace.pushes[:8],
            notes=notes,
        )


#: Every scenario, in the order they run and are reported.
