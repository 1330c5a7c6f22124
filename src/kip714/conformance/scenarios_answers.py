"""Scenarios of the broker's error answers: a changed subscription, a refused codec, throttling, a payload too
large, INVALID_RECORD / INVALID_REQUEST and recovery (quotes and tolerances: :mod:`kip714.conformance.judging`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ..broker.manager import TelemetryBroker
from .judging import (
    INVALID_RECORD,
    INVALID_REQUEST,
    THROTTLED,
    TOO_LARGE,
    UNKNOWN_SUB,
    UNSUPPORTED_COMPRESSION,
    ChangesSubscription,
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
from .trace import Exchange, Trace, code_name, codec_name

__all__ = [
    "InvalidRecord",
    "InvalidRequest",
    "RecoversAfterError",
    "SubscriptionChanged",
    "TelemetryTooLarge",
    "Throttled",
    "UnsupportedCompression",
]


class SubscriptionChanged(ChangesSubscription):
    id = "subscription_changed"
    summary = (
        "the subscription changes and the next push is answered UNKNOWN_SUBSCRIPTION_ID: the client Gets "
        "immediately, then pushes with the new SubscriptionId and subscription"
    )
    rule = (
        '001:1831 (UNKNOWN_SUBSCRIPTION_ID) "Immediately send a GetTelemetrySubscriptionsRequest to update the '
        'client\'s subscriptions and get a new SubscriptionId." 001:1839 "Retries should preferably be attempted '
        "on the same broker connection, in particular for UNKNOWN_SUBSCRIPTION_ID, but another broker connection "
        'may be utilized at the discretion of the client."'
    )

    def judge(self, trace: Trace) -> Verdict:
        get = self.first_get(trace)
        if self.switched_at is None:
            short = self.short(trace, get.answered_at, self.active_s(), "its first Get")
            if short is not None:
                return short
            return na("no accepted push with metrics, so the lab had no subscription to change", get, trace.pushes[:4])
        refused = next((p for p in trace.pushes if p.t_rx > self.switched_at and p.error_code == UNKNOWN_SUB), None)
        if refused is None:
            short = self.short(
                trace, self.switched_at, 1.5 * self.timing.interval + self.timing.late, "the subscription changed"
            )
            if short is not None:
                return short
            return na(
                "no push came after the subscription changed (cadence is judged by push_interval)",
                get,
                trace.after(self.switched_at)[:4],
            )
        after = trace.after(refused.answered_at)
        if not after:
            return fail("no request at all after UNKNOWN_SUBSCRIPTION_ID: the client must immediately Get", refused)
        nxt = after[0]
        if not nxt.is_get:
            return fail(
                f"after UNKNOWN_SUBSCRIPTION_ID the next request was a push at {ms(nxt.t_rx)}, not a Get", refused, nxt
            )
        delay = nxt.t_rx - refused.answered_at
        notes = [self.timing.describe()]
        if delay > self.timing.immediate:
            return fail(
                f"the Get came {ms(delay)} after UNKNOWN_SUBSCRIPTION_ID; 'immediately' allows "
                f"{ms(self.timing.immediate)}",
                refused,
                nxt,
                notes=notes,
            )
        if nxt.conn != refused.conn:
            notes.append(
                f"the Get came on connection {nxt.conn}, not on {refused.conn} (the KIP prefers the same connection)"
            )
        if nxt.error_code != 0:
            return fail(f"the Get was answered {code_name(nxt.error_code)}", refused, nxt, notes=notes)
        pushes = [p for p in trace.pushes if p.seq > nxt.seq]
        if not pushes:
            short = self.short(trace, nxt.answered_at, 1.5 * self.timing.interval + self.timing.late, "the new Get")
            if short is not None:
                return short
            return fail("no push after the new Get", refused, nxt, notes=notes)
        push = pushes[0]
        new_id = nxt.answer.get("subscription_id")
        if push.request.get("subscription_id") != new_id:
            return fail(
                f"the push after the new Get carried SubscriptionId {push.request.get('subscription_id')}, not "
                f"the new {new_id}",
                refused,
                nxt,
                push,
                notes=notes,
            )
        prefixes = list(nxt.answer.get("requested_metrics") or [])
        bad = self.unmatched([push], prefixes)
        if bad is not None and "*" not in prefixes:
            return fail(
                f"the push after the new Get carried metrics outside the new subscription {prefixes}, e.g. "
                f"{bad[1][:3]}",
                refused,
                nxt,
                push,
                notes=notes,
            )
        return passed(
            f"Get {ms(delay)} after UNKNOWN_SUBSCRIPTION_ID, then a push with the new SubscriptionId "
            f"{new_id} and only {prefixes}",
            refused,
            nxt,
            push,
            notes=notes,
        )


class UnsupportedCompression(Scenario):
    id = "unsupported_compression"
    summary = (
        "the client's codec is answered UNSUPPORTED_COMPRESSION_TYPE: it Gets immediately, then pushes with "
        "a type the new answer accepts"
    )
    rule = (
        '001:1837 (UNSUPPORTED_COMPRESSION_TYPE) "Immediately send a GetTelemetrySubscriptionsRequest to get an '
        "up-to-date list of the broker's supported compression types (and any subscription changes).\" 001:1451 "
        '"If the AcceptedCompressionTypes array is empty the client must send metrics uncompressed."'
    )

    def __init__(self, interval_ms: int, compression: Sequence[int]) -> None:
        super().__init__(interval_ms, compression)
        self.refused: int | None = None

    def on_telemetry(self, lab: LabCluster, exchange: Exchange, response: Any) -> Directive | None:
        ctype = int(exchange.request.get("compression_type", 0))
        if (
            self.refused is None
            and exchange.is_push
            and response.error_code == 0
            and ctype != 0
            and not exchange.request.get("terminating")
        ):
            self.refused = exchange.seq
            lab.broker.accepted_compression_types = [c for c in lab.broker.accepted_compression_types if c != ctype]
            names = [codec_name(c) for c in lab.broker.accepted_compression_types]
            return Directive(
                error_code=UNSUPPORTED_COMPRESSION, note=f"{codec_name(ctype)} refused; the next Get accepts {names}"
            )
        return None

    def active_s(self) -> float:
        t = self.timing
        return 4.5 * t.interval + 3 * t.late

    def judge(self, trace: Trace) -> Verdict:
        get = self.first_get(trace)
        refused = next((p for p in trace.pushes if p.seq == self.refused), None)
        if refused is None:
            if trace.pushes:
                return na(
                    "every push was uncompressed (CompressionType 0): there was no codec to refuse",
                    get,
                    trace.pushes[:4],
                )
            short = self.short(trace, get.answered_at, self.active_s(), "its first Get")
            return short or na("no push to refuse (cadence is judged by push_interval)", get)
        after = trace.after(refused.answered_at)
        notes = [self.timing.describe()]
        if not after:
            return fail(
                "no request at all after UNSUPPORTED_COMPRESSION_TYPE: the client must immediately Get", refused
            )
        nxt = after[0]
        if not nxt.is_get:
            return fail(
                f"after UNSUPPORTED_COMPRESSION_TYPE the next request was a push at {ms(nxt.t_rx)}, not a Get",
                refused,
                nxt,
            )
        delay = nxt.t_rx - refused.answered_at
        accepted = list(nxt.answer.get("accepted_compression_types") or [])
        push = next((p for p in trace.pushes if p.seq > nxt.seq), None)
        wrong_codec = None
        if push is not None:
            ctype = int(push.request.get("compression_type", 0))
            if ctype != 0 and ctype not in accepted:
                wrong_codec = (
                    f"the push after it used {codec_name(ctype)}, which the new answer "
                    f"{[codec_name(c) for c in accepted]} does not accept"
                )
            else:
                notes.append(f"the push after the new Get used {codec_name(ctype)}, which the new answer accepts")
        if delay > self.timing.immediate:
            if wrong_codec:
                notes.append(wrong_codec)
            return fail(
                f"the Get came {ms(delay)} after UNSUPPORTED_COMPRESSION_TYPE; 'immediately' allows "
                f"{ms(self.timing.immediate)}",
                refused,
                nxt,
                push,
                notes=notes,
            )
        if wrong_codec:
            return fail(wrong_codec, refused, nxt, push, notes=notes)
        if push is None:
            short = self.short(trace, nxt.answered_at, 1.5 * self.timing.interval + self.timing.late, "the new Get")
            return short or fail("no push after the new Get", refused, nxt, notes=notes)
        return passed(
            f"Get {ms(delay)} after UNSUPPORTED_COMPRESSION_TYPE, then a push with "
            f"{codec_name(int(push.request.get('compression_type', 0)))}",
            refused,
            nxt,
            push,
            notes=notes,
        )


class _AnswersFirstPush(Scenario):
    """The lab answers the client's first regular push with ``CODE`` (``NOTE`` says so in the trace)."""

    CODE: ClassVar[int]
    NOTE: ClassVar[str]

    def __init__(self, interval_ms: int, compression: Sequence[int]) -> None:
        super().__init__(interval_ms, compression)
        self.forced: int | None = None

    def on_telemetry(self, lab: LabCluster, exchange: Exchange, response: Any) -> Directive | None:
        if self.forced is None and exchange.is_push and not exchange.request.get("terminating"):
            self.forced = exchange.seq
            return Directive(error_code=self.CODE, note=self.NOTE)
        return None

    def forced_push(self, trace: Trace) -> Exchange | None:
        """The push the lab answered with ``CODE`` (None: the client sent no regular push)."""
        return next((p for p in trace.pushes if p.seq == self.forced), None)


class Throttled(_AnswersFirstPush):
    id = "throttled"
    summary = "a push is answered THROTTLING_QUOTA_EXCEEDED; the client does not push again before the interval"
    rule = (
        '001:1882 "Should the client send a push request prior to expiry of the previously calculated '
        "PushIntervalMs the broker will discard the metrics and return a PushTelemetryResponse with the ErrorCode "
        'set to THROTTLING_QUOTA_EXCEEDED." 001:1772 "...update its push interval timer according to the '
        'received PushIntervalMs."'
    )
    CODE = THROTTLED
    NOTE = "the lab throttles the first push"

    def active_s(self) -> float:
        t = self.timing
        return 4 * t.interval + 3 * t.late

    def judge(self, trace: Trace) -> Verdict:
        get = self.first_get(trace)
        throttled = self.forced_push(trace)
        if throttled is None:
            short = self.short(trace, get.answered_at, self.active_s(), "its first Get")
            return short or na("no push to throttle (cadence is judged by push_interval)", get)
        later = regular([p for p in trace.pushes if p.seq > throttled.seq])
        lo = self.timing.interval - self.timing.eps
        notes = [self.timing.describe()]
        between = [g for g in trace.gets if g.seq > throttled.seq and (not later or g.seq < later[0].seq)]
        if between:
            notes.append(f"a Get came {ms(between[0].t_rx - throttled.answered_at)} after the throttled push (allowed)")
        if later:
            gap = later[0].t_rx - throttled.answered_at
            if gap < lo:
                return fail(
                    f"the next push came {ms(gap)} after THROTTLING_QUOTA_EXCEEDED, before PushIntervalMs "
                    f"({ms(self.timing.interval)}, the lab allows from {ms(lo)})",
                    throttled,
                    between,
                    later[0],
                    notes=notes,
                )
        accepted = [p for p in later if p.error_code == 0]
        if not accepted:
            short = self.short(
                trace, throttled.answered_at, self.active_s() - 1.5 * self.timing.interval, "the throttled push"
            )
            return short or fail(
                "telemetry stopped: no push was accepted after THROTTLING_QUOTA_EXCEEDED",
                throttled,
                between,
                later[:3],
                notes=notes,
            )
        return passed(
            f"the next push came {ms(later[0].t_rx - throttled.answered_at)} after the throttled one and was accepted",
            throttled,
            between,
            later[:2],
            notes=notes,
        )


class TelemetryTooLarge(Scenario):
    """An oversized push before the first TELEMETRY_TOO_LARGE is allowed (001:1829 is the client's answer to
    the error), except a terminating one: it is the client's last push, no answer can correct it, so it must
    fit TelemetryMaxBytes (001:1948) from the start."""

    id = "telemetry_too_large"
    summary = (
        "TelemetryMaxBytes is 64 from the first Get; after TELEMETRY_TOO_LARGE, every push fits within it, and "
        "so does the terminating push (KAFKA-21077's defect fails)"
    )
    rule = (
        '001:1829 (TELEMETRY_TOO_LARGE) "Reduce the size of the metrics payload so its size does not exceed '
        'GetTelemetrySubscriptionsResponse.TelemetryMaxBytes." 001:1948 "TelemetryMaxBytes int32 // The maximum '
        'bytes of binary data the broker accepts in PushTelemetryRequest." 003:115 "telemetry.max.bytes The '
        "maximum size (after compression if compression is used) of telemetry pushed from a client to the, "
        'default: 1048576"'
    )
    MAX_BYTES = 64

    def setup(self, broker: TelemetryBroker) -> None:
        super().setup(broker)
        broker.telemetry_max_bytes = self.MAX_BYTES

    def active_s(self) -> float:
        t = self.timing
        return 4 * t.interval + 3 * t.late

    def judge(self, trace: Trace) -> Verdict:
        get = trace.first_successful_get()
        assert get is not None
        pushes = trace.pushes
        first = next((p for p in pushes if p.error_code == TOO_LARGE), None)
        if first is None:
            if pushes and all(len(p.metrics or b"") <= self.MAX_BYTES for p in pushes):
                return passed(f"every push fit within TelemetryMaxBytes {self.MAX_BYTES}", get, pushes[:4])
            short = self.short(trace, get.answered_at, self.active_s(), "its first Get")
            return short or na("no push was answered TELEMETRY_TOO_LARGE", get, pushes[:4])
        if first.request.get("terminating"):
            # its last push: nothing can follow to show the client fitting the limit, so it had to fit already
            before = [p for p in pushes if p.seq < first.seq]
            fit = all(len(p.metrics or b"") <= self.MAX_BYTES for p in before)
            return fail(
                f"the terminating push carried {len(first.metrics or b'')} bytes on the wire, over the "
                f"TelemetryMaxBytes {self.MAX_BYTES} of the Get answered at {ms(get.answered_at)} (001:1948 "
                '"The maximum bytes of binary data the broker accepts in PushTelemetryRequest"): a client\'s last '
                "push cannot be reduced after TELEMETRY_TOO_LARGE (001:1829), it must fit from the start",
                get,
                before[-3:],
                first,
                notes=[f"{len(before)} push(es) before it" + (f", each within {self.MAX_BYTES} bytes" if fit else "")],
            )
        later = [p for p in pushes if p.seq > first.seq]
        over = [p for p in later if len(p.metrics or b"") > self.MAX_BYTES]
        if over:
            sizes = ", ".join(str(len(p.metrics or b"")) for p in over[:5])
            last = [p for p in over if p.request.get("terminating")]
            among = ", the terminating push among them" if last else ""
            return fail(
                f"{len(over)} push(es) after TELEMETRY_TOO_LARGE still exceeded TelemetryMaxBytes "
                f"{self.MAX_BYTES} ({sizes} bytes on the wire{among}; 001:1829)",
                get,
                first,
                over[:4],
                last,
            )
        if not later:
            short = self.short(
                trace, first.answered_at, 1.5 * self.timing.interval + 2 * self.timing.late, "TELEMETRY_TOO_LARGE"
            )
            return short or passed(
                "the client stopped pushing after TELEMETRY_TOO_LARGE",
                get,
                first,
                notes=["stopped pushing (allowed: nothing oversized was sent again)"],
            )
        return passed(
            f"{len(later)} push(es) after TELEMETRY_TOO_LARGE, each within {self.MAX_BYTES} bytes",
            get,
            first,
            later[:4],
        )


class _StopsPushing(Scenario):
    """The second regular push is answered with ``CODE``; no push may follow (a Get may, noted)."""

    CODE: ClassVar[int]

    def __init__(self, interval_ms: int, compression: Sequence[int]) -> None:
        super().__init__(interval_ms, compression)
        self.seen = 0
        self.forced: int | None = None

    def on_telemetry(self, lab: LabCluster, exchange: Exchange, response: Any) -> Directive | None:
        if self.forced is None and exchange.is_push and not exchange.request.get("terminating"):
            self.seen += 1
            if self.seen == 2:
                self.forced = exchange.seq
                return Directive(error_code=self.CODE, note="the lab refuses the second push")
        return None

    def watch_s(self) -> float:
        return 2.5 * self.timing.interval

    def active_s(self) -> float:
        t = self.timing
        return 3 * t.interval + 2 * t.late + self.watch_s()

    def judge(self, trace: Trace) -> Verdict:
        get = self.first_get(trace)
        refused = next((p for p in trace.pushes if p.seq == self.forced), None)
        name = code_name(self.CODE)
        if refused is None:
            short = self.short(trace, get.answered_at, self.active_s() - self.watch_s(), "its first Get")
            return short or na("no second push to refuse (cadence is judged by push_interval)", get, trace.pushes[:2])
        later = [p for p in trace.pushes if p.seq > refused.seq]
        if later:
            kind = "a terminating push" if later[0].request.get("terminating") else "a push"
            return fail(
                f"{kind} came {ms(later[0].t_rx - refused.answered_at)} after {name}; the client must stop pushing",
                refused,
                later[:3],
            )
        notes = []
        gets = [g for g in trace.gets if g.seq > refused.seq]
        if gets:
            notes.append(f"{len(gets)} Get(s) after {name} (allowed; no push followed)")
        short = self.short(trace, refused.answered_at, self.watch_s(), name)
        if short is not None:
            return short
        return passed(
            f"no push in the {ms((trace.client_end or 0) - refused.answered_at)} after {name}",
            refused,
            gets[:3],
            notes=notes,
        )


class InvalidRecord(_StopsPushing):
    id = "invalid_record"
    summary = "a push is answered INVALID_RECORD; the client stops pushing"
    rule = (
        '001:1823 (INVALID_RECORD) "Log an error and stop pushing metrics. This is viewed as a problem in the '
        'client implementation of metrics serialization that is not likely to be resolved by retrying."'
    )
    CODE = INVALID_RECORD


class InvalidRequest(_StopsPushing):
    id = "invalid_request"
    summary = "a push is answered INVALID_REQUEST; the client stops pushing"
    rule = (
        '001:1817 (INVALID_REQUEST) "Log an error and stop pushing metrics. This is viewed as a problem in the '
        'client implementation of metrics serialization that is not likely to be resolved by retrying."'
    )
    CODE = INVALID_REQUEST


class RecoversAfterError(_AnswersFirstPush):
    id = "recovers_after_error"
    summary = (
        "a push is answered UNSUPPORTED_COMPRESSION_TYPE (an error that only asks for a new Get): a Get, then "
        "accepted pushes at the interval again"
    )
    rule = (
        '001:1837 (UNSUPPORTED_COMPRESSION_TYPE) "Immediately send a GetTelemetrySubscriptionsRequest to get an '
        "up-to-date list of the broker's supported compression types (and any subscription changes).\" 001:1772 "
        '"The first metrics push should be randomized between 0.5 * PushIntervalMs and 1.5 * PushIntervalMs."'
    )
    CODE = UNSUPPORTED_COMPRESSION
    NOTE = "the lab refuses the first push; the accepted codecs stay the same"

    def active_s(self) -> float:
        t = self.timing
        return 6 * t.interval + 4 * t.late

    def judge(self, trace: Trace) -> Verdict:
        get = self.first_get(trace)
        refused = self.forced_push(trace)
        if refused is None:
            short = self.short(trace, get.answered_at, self.active_s(), "its first Get")
            return short or na("no push to refuse (cadence is judged by push_interval)", get)
        notes = [self.timing.describe()]
        regets = [g for g in trace.gets if g.seq > refused.seq and g.error_code == 0]
        if not regets:
            early = [p for p in trace.pushes if p.seq > refused.seq]
            if early:
                return fail(
                    f"pushes came after {code_name(UNSUPPORTED_COMPRESSION)} without a new Get", refused, early[:3]
                )
            short = self.short(
                trace, refused.answered_at, self.active_s() - 1.5 * self.timing.interval, "the refused push"
            )
            return short or fail(
                f"telemetry stopped: no Get after {code_name(UNSUPPORTED_COMPRESSION)}",
                refused,
                trace.after(refused.answered_at)[:3],
            )
        reget = regets[0]
        if reget.instance_id != refused.instance_id:
            notes.append(f"the new Get carried another instance id ({kid(reget.instance_id)}); judged by first_contact")
        notes.append(
            f"the new Get came {ms(reget.t_rx - refused.answered_at)} after the error (how soon is judged "
            "by unsupported_compression)"
        )
        pushes = regular([p for p in trace.pushes if p.seq > reget.seq])
        problems = self.cadence(trace, pushes, first=False)  # the first push's randomisation: push_interval
        if problems:
            return fail(problems[0], refused, reget, pushes[:4], notes=notes + problems[1:])
        accepted = [p for p in pushes if p.error_code == 0]
        if len(accepted) < 2:
            short = self.short(trace, reget.answered_at, 3 * self.timing.interval + 2 * self.timing.late, "the new Get")
            return short or fail(
                f"{len(accepted)} accepted push(es) after the new Get; normal pushes must resume",
                refused,
                reget,
                pushes[:4],
                notes=notes,
            )
        return passed(
            f"a Get {ms(reget.t_rx - refused.answered_at)} after the error, then {len(accepted)} accepted "
            "pushes at the interval",
            refused,
            reget,
            accepted[:3],
            notes=notes,
        )
