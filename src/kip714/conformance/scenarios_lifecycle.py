"""Scenarios of a client's telemetry life: the handshake and its instance id, the push cadence, no or unmatched
metrics, a lost connection, the terminating push (quotes and tolerances: :mod:`kip714.conformance.judging`)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from .judging import (
    INVALID_REQUEST,
    NOMATCH_PREFIX,
    UNKNOWN_SUB,
    ZERO,
    ClosesTelemetryConnection,
    Scenario,
    Verdict,
    fail,
    kid,
    ms,
    na,
    passed,
    regular,
)
from .lab import Directive, LabCluster
from .trace import Exchange, Trace, code_name

__all__ = [
    "ConnectionLost",
    "EmptySubscription",
    "FirstContact",
    "PushInterval",
    "TerminatingPush",
    "TerminatingResubscribe",
    "UnmatchedMetrics",
]


class FirstContact(ClosesTelemetryConnection):
    id = "first_contact"
    summary = (
        "the first Get carries the zero instance id; every later request carries the id it was given, also "
        "on a new connection after the lab closes the telemetry connection"
    )
    rule = (
        "001:1768 \"This handshake with a Null ClientInstanceId is only performed once for a client instance's "
        "lifetime. Subsequent GetTelemetrySubscriptionsRequests must include the ClientInstanceId returned in "
        'the first response, regardless of broker." 001:1361 "The client must use the returned client instance '
        'id for the remaining lifetime of the client instance, regardless of which broker it communicates with."'
    )

    def judge(self, trace: Trace) -> Verdict:
        telemetry = trace.telemetry
        first = telemetry[0]
        if not first.is_get:
            return fail("the first telemetry request was a push, not a GetTelemetrySubscriptions", first)
        if first.instance_id != ZERO:
            return fail(
                f"the first Get carried the instance id {kid(first.instance_id)}, not the zero (Null) id", first
            )
        given = trace.first_successful_get()
        if given is None:
            return fail("no Get was answered successfully", first)
        iid = given.given_instance
        later = [t for t in telemetry if t.seq > given.seq]
        zero_gets = [t for t in later if t.is_get and t.instance_id == ZERO]
        if zero_gets:
            return fail(
                f"a second Get with the zero (Null) instance id at {ms(zero_gets[0].t_rx)}: the handshake "
                "is done once per client lifetime",
                given,
                zero_gets[:3],
            )
        wrong = [t for t in later if t.instance_id != iid]
        if wrong:
            return fail(
                f"{len(wrong)} later request(s) carried another instance id than the {iid} given, the "
                f"first at {ms(wrong[0].t_rx)} ({kid(wrong[0].instance_id)})",
                given,
                wrong[:5],
            )
        notes = []
        close = self.close_event(trace)
        moved = [t for t in later if close is not None and t.t_rx > close.t and t.conn != close.conn]
        if moved:
            notes.append(
                f"after the lab closed connection {close.conn if close else '?'}, connection {moved[0].conn} "
                f"(node {moved[0].node}) carried the same instance id"
            )
        else:
            notes.append("second connection not exercised: no telemetry request came on another connection")
        return passed(
            f"the first Get had the zero id; all {len(later)} later requests carried {kid(iid)}",
            given,
            later[:3],
            close,
            moved[:3],
            notes=notes,
        )


class PushInterval(Scenario):
    id = "push_interval"
    summary = "the first push comes 0.5–1.5 × PushIntervalMs after the Get, later ones at the interval"
    rule = (
        '001:1772 "...update its push interval timer according to the received PushIntervalMs. The first '
        'metrics push should be randomized between 0.5 * PushIntervalMs and 1.5 * PushIntervalMs." 001:1959 '
        '"SubscriptionId int32 // SubscriptionId from the GetTelemetrySubscriptionsResponse for the collected '
        'metrics."'
    )

    def active_s(self) -> float:
        t = self.timing
        return 4.5 * t.interval + 3 * t.late

    def judge(self, trace: Trace) -> Verdict:
        get = self.first_get(trace)
        pushes = regular([p for p in trace.pushes if p.seq > get.seq])
        problems = self.cadence(trace, pushes)
        if problems:
            return fail(problems[0], get, pushes[:6], notes=problems[1:] + [self.timing.describe()])
        for p in pushes:
            told = trace.last_get_before(p.t_rx)
            if told is not None and p.request.get("subscription_id") != told.answer.get("subscription_id"):
                return fail(
                    f"push at {ms(p.t_rx)} carried SubscriptionId {p.request.get('subscription_id')}, not "
                    f"the {told.answer.get('subscription_id')} its Get was given",
                    told,
                    p,
                )
        if len(pushes) < 3:
            short = self.short(trace, get.answered_at, self.active_s(), "its first Get")
            if short is not None:
                return short
            return fail(
                f"only {len(pushes)} push(es) in {ms((trace.client_end or 0) - get.answered_at)} after "
                "the Get; pushes must continue at the interval",
                get,
                pushes,
            )
        gaps = [b.t_rx - a.answered_at for a, b in itertools.pairwise(pushes)]
        return passed(
            f"first push {ms(pushes[0].t_rx - get.answered_at)} after the Get, then every "
            f"{ms(min(gaps))}–{ms(max(gaps))}; the SubscriptionId given",
            get,
            pushes[:6],
            notes=[self.timing.describe()],
        )


class EmptySubscription(Scenario):
    id = "empty_subscription"
    summary = "with no metrics requested, no push comes, and a new Get comes once PushIntervalMs has passed"
    rule = (
        '001:1774 "If GetTelemetrySubscriptionsResponse.RequestedMetrics indicates that no metrics are desired '
        "(RequestedMetrics is Null), the client should send a new GetTelemetrySubscriptionsRequest after the "
        'PushIntervalMs has expired." 001:1952 "Empty array: No metrics subscribed."'
    )

    def metrics(self) -> str:
        return ""

    def active_s(self) -> float:
        t = self.timing
        return 3 * t.interval + 2 * t.late

    def judge(self, trace: Trace) -> Verdict:
        gets = trace.gets
        first = gets[0]
        if trace.pushes:
            p = trace.pushes[0]
            return fail(f"a push at {ms(p.t_rx)} although no metrics were requested", first, p)
        lo, hi = self.timing.gap_window()
        for a, b in itertools.pairwise(gets):
            if a.error_code != 0:
                continue
            gap = b.t_rx - a.answered_at
            if not lo <= gap <= hi:
                return fail(
                    f"a Get came {ms(gap)} after the previous one was answered; with no metrics requested "
                    f"the next Get is due after PushIntervalMs (the lab allows {ms(lo)}–{ms(hi)})",
                    a,
                    b,
                    notes=[self.timing.describe()],
                )
        if len(gets) < 3:
            short = self.short(trace, first.answered_at, self.active_s(), "its first Get")
            if short is not None:
                return short
            return fail(
                f"{len(gets) - 1} new Get(s) in {ms((trace.client_end or 0) - first.answered_at)}; a new Get "
                "is due every PushIntervalMs",
                gets,
            )
        gaps = [b.t_rx - a.answered_at for a, b in itertools.pairwise(gets)]
        return passed(
            f"no push; {len(gets) - 1} new Gets, each {ms(min(gaps))}–{ms(max(gaps))} after the previous answer",
            gets[:6],
            notes=[self.timing.describe()],
        )


class UnmatchedMetrics(Scenario):
    id = "unmatched_metrics"
    summary = (
        "with a subscription that matches nothing, the client keeps pushing at the interval, with an empty, "
        "non-null metrics blob"
    )
    rule = (
        '001:1776 "If GetTelemetrySubscriptionsResponse.RequestedMetrics is non-empty but does not match any '
        "metrics the client provides, then the client should send a PushTelemetryRequest at the indicated "
        'PushIntervalMs interval with an empty metrics blob."'
    )

    def metrics(self) -> str:
        return NOMATCH_PREFIX

    def active_s(self) -> float:
        t = self.timing
        return 3 * t.interval + 2 * t.late

    def judge(self, trace: Trace) -> Verdict:
        get = self.first_get(trace)
        pushes = trace.pushes
        for p in pushes:
            payload = self.payload(p)
            if payload.null:
                return fail(
                    f"the push at {ms(p.t_rx)} carried a null Metrics field, not an empty blob (a Kafka "
                    "broker cannot parse it and closes the connection)",
                    get,
                    p,
                )
            if payload.problem is not None:
                return fail(f"the push at {ms(p.t_rx)}: its Metrics {payload.problem}", get, p)
            if payload.names:
                return fail(
                    f"the push at {ms(p.t_rx)} carried {len(payload.names)} metric(s) although none "
                    f"matches {NOMATCH_PREFIX!r}, e.g. {payload.names[:3]}",
                    get,
                    p,
                )
        steady = regular(pushes)
        problems = self.cadence(trace, steady, first=False)  # the first push's randomisation: push_interval
        if problems:
            return fail(problems[0], get, steady[:6], notes=problems[1:] + [self.timing.describe()])
        if len(steady) < 2:
            short = self.short(trace, get.answered_at, self.active_s(), "its first Get")
            if short is not None:
                return short
            return fail(
                f"{len(steady)} push(es) in {ms((trace.client_end or 0) - get.answered_at)}; the client "
                "must push an empty blob at the interval",
                get,
                pushes[:4],
            )
        sizes = sorted({self.payload(p).wire_bytes for p in pushes})
        return passed(
            f"{len(pushes)} pushes at the interval, each with an empty non-null blob "
            f"({', '.join(str(s) for s in sizes)} bytes on the wire)",
            get,
            pushes[:6],
            notes=[self.timing.describe()],
        )


class TerminatingPush(Scenario):
    id = "terminating_push"
    summary = (
        "on close, the client sends one push with Terminating=true without waiting for the interval "
        "(PushIntervalMs is 30 s here, so no regular push is due)"
    )
    rule = (
        '001:1797 "When a client with an active metrics subscription is being shut down, it should send its final '
        'metrics without waiting for the PushIntervalMs time." 001:1799 "...the PushTelemetryRequest.Terminating '
        "field must be set to true. A broker must only allow one such unthrottled metrics push for each "
        'combination of client instance ID and SubscriptionId."'
    )
    fixed_interval_ms = 30000

    def active_s(self) -> float:
        return 1.0

    def judge(self, trace: Trace) -> Verdict:
        get = self.first_get(trace)
        later = [t for t in trace.telemetry if t.seq > get.seq]
        terminating = [p for p in later if p.is_push and p.request.get("terminating")]
        if not terminating:
            short = self.short(trace, get.answered_at, 0.2, "its first Get")
            return short or fail(
                f"the client closed ({ms(trace.client_end or 0)}) without a push with Terminating=true", get, later[:4]
            )
        if len(terminating) > 1:
            return fail(f"{len(terminating)} pushes with Terminating=true; a client sends one", get, terminating[:3])
        final = terminating[0]
        after = [t for t in later if t.seq > final.seq]
        if after:
            return fail(f"a {after[0].api} came after the terminating push", get, final, after[:2])
        notes = []
        if final.request.get("subscription_id") != (trace.last_get_before(final.t_rx) or get).answer.get(
            "subscription_id"
        ):
            notes.append("the terminating push carried another SubscriptionId than its Get was given")
        steady = regular([p for p in later if p.is_push])
        if steady:
            notes.append(f"{len(steady)} regular push(es) before it, although PushIntervalMs is 30 s")
        return passed(
            f"one push with Terminating=true at {ms(final.t_rx)}, {ms(final.t_rx - get.answered_at)} after "
            f"the Get, answered {code_name(final.error_code)}",
            get,
            final,
            notes=notes,
        )


class TerminatingResubscribe(Scenario):
    id = "terminating_resubscribe"
    summary = (
        "the terminating push is answered UNKNOWN_SUBSCRIPTION_ID: the client either Gets and pushes once "
        "more with Terminating=true and the new SubscriptionId, or abandons"
    )
    rule = (
        "001:1801 \"In the event that the client's metric subscription has changed and the final metrics push "
        "fails with error code UNKNOWN_SUBSCRIPTION_ID , the terminating client can choose to obtain a new "
        "subscription ID by sending a GetTelemetrySubscriptionsRequest and then immediately sending a "
        "PushTelemetryRequest with the Terminating flag set to true, or it can choose to abandon sending a final "
        'metrics push."'
    )
    fixed_interval_ms = 30000

    def __init__(self, interval_ms: int, compression: Sequence[int]) -> None:
        super().__init__(interval_ms, compression)
        self.forced: int | None = None
        self.resubscribed = False

    def on_telemetry(self, lab: LabCluster, exchange: Exchange, response: Any) -> Directive | None:
        if exchange.is_get and self.forced is not None:
            self.resubscribed = True
        if not exchange.is_push or not exchange.request.get("terminating"):
            return None
        if self.forced is None:
            self.forced = exchange.seq
            return Directive(error_code=UNKNOWN_SUB, note="the lab refuses the terminating push")
        if self.resubscribed and response.error_code == INVALID_REQUEST:
            return Directive(
                error_code=0,
                note="the lab accepts the re-sent terminating push (a Kafka broker with "
                "KAFKA-20898 answers INVALID_REQUEST)",
            )
        return None

    def active_s(self) -> float:
        return 1.0

    def judge(self, trace: Trace) -> Verdict:
        get = self.first_get(trace)
        refused = next((p for p in trace.pushes if p.seq == self.forced), None)
        if refused is None:
            short = self.short(trace, get.answered_at, 0.2, "its first Get")
            return short or na("the client sent no terminating push (judged by terminating_push)", get)
        after = [t for t in trace.telemetry if t.seq > refused.seq]
        if not after:
            return passed("the client abandoned its final push after UNKNOWN_SUBSCRIPTION_ID", get, refused)
        first = after[0]
        if not first.is_get:
            return fail(
                f"after UNKNOWN_SUBSCRIPTION_ID the client pushed again at {ms(first.t_rx)} without a new Get",
                refused,
                after[:3],
            )
        if first.instance_id != refused.instance_id:
            return fail(
                f"the Get after UNKNOWN_SUBSCRIPTION_ID carried {kid(first.instance_id)}, not the "
                f"client's {kid(refused.instance_id)}",
                refused,
                first,
            )
        rest = after[1:]
        if not rest:
            return fail(
                "the client sent a Get after UNKNOWN_SUBSCRIPTION_ID but no terminating push after it "
                "(neither re-sent nor abandoned)",
                refused,
                first,
            )
        push = rest[0]
        if len(rest) > 1:
            return fail(
                f"{len(rest)} requests after the new Get; the KIP allows exactly one terminating push",
                refused,
                first,
                rest[:3],
            )
        if not push.is_push or not push.request.get("terminating"):
            return fail("the request after the new Get was not a push with Terminating=true", refused, first, push)
        new_id = first.answer.get("subscription_id")
        if push.request.get("subscription_id") != new_id:
            return fail(
                f"the re-sent terminating push carried SubscriptionId {push.request.get('subscription_id')}, "
                f"not the new {new_id}",
                refused,
                first,
                push,
            )
        return passed(
            f"Get, then one push with Terminating=true and the new SubscriptionId {new_id}", refused, first, push
        )


class ConnectionLost(ClosesTelemetryConnection):
    id = "connection_lost"
    summary = (
        "the lab closes the connection that carries telemetry (while idle); telemetry continues, on that "
        "broker or another"
    )
    rule = (
        '001:1793 "It should also keep using the same broker connection for telemetry requests until the '
        "connection goes down, at which time it may choose to reconnect and continue using the same broker, or "
        'switch over to another broker connection."'
    )

    def judge(self, trace: Trace) -> Verdict:
        get = self.first_get(trace)
        close = self.close_event(trace)
        if close is None:
            short = self.short(trace, get.answered_at, self.active_s() - self.deadline(), "its first Get")
            return short or na(
                "no push was accepted, so there was no telemetry connection to close", get, trace.pushes[:3]
            )
        after = [t for t in trace.telemetry if t.t_rx > close.t]
        if not after or after[0].t_rx - close.t > self.deadline():
            short = self.short(trace, close.t, self.deadline(), "the lab closed its telemetry connection")
            if short is not None:
                return short
            if after:
                return fail(
                    f"telemetry came back {ms(after[0].t_rx - close.t)} after the lab closed connection "
                    f"{close.conn}; the lab waits {ms(self.deadline())} (2 × PushIntervalMs + 1.5 s)",
                    close,
                    after[0],
                )
            return fail(
                f"no telemetry request in the {ms((trace.client_end or 0) - close.t)} after the lab closed "
                f"connection {close.conn}",
                close,
            )
        back = after[0]
        where = "the same node" if back.node == close.node else f"node {back.node}"
        notes = [f"instance id after the close: {kid(back.instance_id)} (the id rule is judged by first_contact)"]
        return passed(
            f"a {back.api} came {ms(back.t_rx - close.t)} after the close, on connection {back.conn} ({where})",
            close,
            back,
            after[1:3],
            notes=notes,
        )
