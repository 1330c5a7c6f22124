"""kip714._instances: the broker's per-client-instance state (rate limits, terminating flag, expiry, LRU).

The named cases port the instance-state parts of Kafka's ClientMetricsManagerTest / ClientMetricsInstanceTest
(docs/reference/kafka-java-behaviour.md §3(c), §3(d), §6) on a fake clock. A small pure-Python model of the same
semantics is checked against the native table on hypothesis-generated histories, and the batch entry
points are checked against the single-request path.
"""

from __future__ import annotations

import array
import os
import random
import threading
import uuid
from collections import OrderedDict

import pytest
from examples import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kip714._instances import (
    LOOKUP_ABSENT,
    LOOKUP_LIVE,
    LOOKUP_STALE,
    TICKET_BASE,
    InstanceTable,
    Outcome,
    java_uuid_hash,
)

NONE = 0
INVALID_REQUEST = 42
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87
THROTTLING_QUOTA_EXCEEDED = 89
UNKNOWN_SUBSCRIPTION_ID = 117
TELEMETRY_TOO_LARGE = 118

T0 = 1_700_000_000_000  # a wall-clock-like start: Kafka's timestamps start at 0, so "now - 0 >= interval"
INTERVAL = 30_000  # ClientMetricsTestUtils.DEFAULT_PUSH_INTERVAL_MS
SID = 1_234_567
MAX_BYTES = 1_048_576


def uid(n: int) -> bytes:
    return uuid.UUID(int=(0x5E0B1D6A3C4F7A21 << 64) | (0x9D3E2B7C00000000 + n)).bytes


def i32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def ref_hash(id16: bytes) -> int:
    x = int.from_bytes(id16[:8], "big") ^ int.from_bytes(id16[8:], "big")
    return i32((x >> 32) ^ x)


@pytest.fixture
def table() -> InstanceTable:
    return InstanceTable()


def fresh(t: InstanceTable, cid: bytes, now: int = T0, interval: int = INTERVAL, version: int = 0, sid: int = SID):
    assert t.lookup(cid, now, version) == LOOKUP_ABSENT
    t.create(cid, now, version, sid, interval)
    assert t.lookup(cid, now, version) == LOOKUP_LIVE


def push(t, cid, now, *, sid=SID, terminating=False, compression=0, size=10, max_bytes=MAX_BYTES):
    return t.decide_push(cid, now, sid, terminating, compression, size, max_bytes)


# ------------------------------------------------------------------------------------ typed answers


def test_single_request_answers_are_typed_in_one_numbering(table):
    """lookup / try_push / try_get answer an Outcome when no decision is made and an ErrorCode otherwise;
    the outcomes are negative below -1, so no answer can be mistaken for a Kafka error code."""
    from kip714 import ErrorCode

    assert [int(o) for o in Outcome] == [0, -2, -3, -4]
    assert not {int(o) for o in Outcome if o is not Outcome.LIVE} & {int(c) for c in ErrorCode}
    cid = uid(7)
    zero, one = bytes(16), bytes(15) + b"\x01"
    for reserved in (zero, one):
        r = table.try_push(reserved, T0, 0, SID, False, 0, 10, MAX_BYTES)
        assert r is Outcome.RESERVED and type(r) is Outcome
    assert table.lookup(cid, T0, 0) is Outcome.ABSENT is LOOKUP_ABSENT
    assert table.try_push(cid, T0, 0, SID, False, 0, 10, MAX_BYTES) is Outcome.ABSENT
    assert table.try_get(cid, T0, 0) is Outcome.ABSENT
    table.create(cid, T0, 1, SID, INTERVAL)
    assert table.lookup(cid, T0, 2) is Outcome.STALE is LOOKUP_STALE
    assert table.try_push(cid, T0, 2, SID, False, 0, 10, MAX_BYTES) is Outcome.STALE
    assert table.try_get(cid, T0, 2) is Outcome.STALE
    assert len(table) == 1 and table.lookup(cid, T0, 1) is Outcome.LIVE is LOOKUP_LIVE  # nothing was touched
    r = table.try_get(cid, T0, 1)
    assert r is ErrorCode.NONE and type(r) is ErrorCode
    assert table.try_get(cid, T0 + 1, 1) is ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert table.decide_push(cid, T0 + 2, SID + 1, False, 0, 10, MAX_BYTES) is ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    assert table.try_push(cid, T0 + 2, 1, SID, False, 0, 10, MAX_BYTES) is ErrorCode.THROTTLING_QUOTA_EXCEEDED


# ------------------------------------------------------------------------------------ Uuid.hashCode


def test_java_uuid_hash_vectors():
    assert java_uuid_hash(uuid.UUID(int=(0x5E0B1D6A3C4F7A21 << 64) | 0x9D3E2B7C8A1F4E60).bytes) == 1969554007
    assert java_uuid_hash(uuid.UUID(int=(1 << 64) | 2).bytes) == 3
    assert java_uuid_hash(uuid.UUID(int=(0xFFFFFFFF00000000 << 64) | 0x0000000100000000).bytes) == -2
    assert java_uuid_hash(bytearray(16)) == 0
    rng = random.Random(7)
    for _ in range(200):
        b = rng.randbytes(16)
        assert java_uuid_hash(b) == ref_hash(b)
    with pytest.raises(ValueError):
        java_uuid_hash(b"x" * 15)
    with pytest.raises(TypeError):
        java_uuid_hash("0" * 16)


# ------------------------------------------------------------------------------ Get rate limiting


def test_two_gets_in_a_row_second_is_throttled(table):
    cid = uid(1)
    fresh(table, cid)
    assert table.decide_get(cid, T0) == NONE
    assert table.decide_get(cid, T0 + 1) == THROTTLING_QUOTA_EXCEEDED
    state = table.get_state(cid)
    assert state["last_get_ms"] == T0
    assert state["last_known_error"] == NONE  # a throttled Get does not change lastKnownError
    assert table.decide_get(cid, T0 + INTERVAL - 1) == THROTTLING_QUOTA_EXCEEDED
    assert table.decide_get(cid, T0 + INTERVAL) == NONE


def test_push_then_immediate_get_on_new_server_is_throttled(table):
    cid = uid(2)
    fresh(table, cid)  # a server that has never seen the client: fresh instance, timestamps 0
    assert push(table, cid, T0) == NONE
    assert table.decide_get(cid, T0) == THROTTLING_QUOTA_EXCEEDED
    assert table.decide_get(cid, T0 + INTERVAL) == NONE


def test_get_shares_the_budget_with_pushes(table):
    cid = uid(3)
    fresh(table, cid)
    assert table.decide_get(cid, T0) == NONE
    assert push(table, cid, T0 + 20_000) == NONE
    # the next Get is measured from max(lastGet, lastPush)
    assert table.decide_get(cid, T0 + INTERVAL) == THROTTLING_QUOTA_EXCEEDED
    assert table.decide_get(cid, T0 + 20_000 + INTERVAL) == NONE


# ----------------------------------------------------------------------------- Push rate limiting


def test_get_push_push(table):
    cid = uid(4)
    fresh(table, cid)
    assert table.decide_get(cid, T0) == NONE
    assert push(table, cid, T0 + 1) == NONE
    assert push(table, cid, T0 + 2) == THROTTLING_QUOTA_EXCEEDED
    state = table.get_state(cid)
    assert state["last_known_error"] == THROTTLING_QUOTA_EXCEEDED
    assert state["last_push_ms"] == T0 + 1


def test_first_push_after_get_is_accepted_at_0_8_interval(table):
    cid = uid(5)
    fresh(table, cid)
    assert table.decide_get(cid, T0) == NONE
    t1 = T0 + int(0.8 * INTERVAL)  # librdkafka's jitter can make the first push early
    assert push(table, cid, t1) == NONE
    assert table.get_state(cid)["last_push_ms"] == t1
    # the one after it is measured against the push interval again
    assert push(table, cid, t1 + int(0.8 * INTERVAL)) == THROTTLING_QUOTA_EXCEEDED
    assert push(table, cid, t1 + INTERVAL) == NONE


def test_get_and_push_in_the_same_millisecond(table):
    cid = uid(35)
    fresh(table, cid)
    assert table.decide_get(cid, T0) == NONE
    assert push(table, cid, T0) == NONE  # lastGet (T0) > lastPush (0)
    assert push(table, cid, T0 + 1) == THROTTLING_QUOTA_EXCEEDED  # lastGet == lastPush: not "after a Get"


def test_push_interval_boundary(table):
    cid = uid(6)
    fresh(table, cid)
    assert push(table, cid, T0) == NONE
    assert push(table, cid, T0 + INTERVAL - 1) == THROTTLING_QUOTA_EXCEEDED
    assert push(table, cid, T0 + INTERVAL) == NONE


def test_throttled_push_does_not_move_last_push(table):
    cid = uid(7)
    fresh(table, cid)
    assert push(table, cid, T0) == NONE
    assert push(table, cid, T0 + 10) == THROTTLING_QUOTA_EXCEEDED
    assert table.get_state(cid)["last_push_ms"] == T0


# ----------------------------------------------------------------------------------- terminating


def test_push_then_terminating_push_both_accepted(table):
    cid = uid(8)
    fresh(table, cid)
    assert push(table, cid, T0) == NONE
    assert push(table, cid, T0 + 1, terminating=True) == NONE  # bypasses the rate limit
    state = table.get_state(cid)
    assert state["terminating"] is True
    assert state["last_push_ms"] == T0  # the rate-limit function ran but could not accept


def test_terminating_push_can_move_last_push(table):
    cid = uid(9)
    fresh(table, cid)
    assert table.decide_get(cid, T0) == NONE
    assert push(table, cid, T0 + 5, terminating=True) == NONE  # lastGet > lastPush → canAccept → moves
    assert table.get_state(cid)["last_push_ms"] == T0 + 5


def test_terminating_then_terminating_is_invalid_request(table):
    cid = uid(10)
    fresh(table, cid)
    assert push(table, cid, T0, terminating=True) == NONE
    assert push(table, cid, T0 + INTERVAL, terminating=True) == INVALID_REQUEST
    state = table.get_state(cid)
    assert state["last_known_error"] == INVALID_REQUEST
    assert state["terminating"] is True
    assert state["last_push_ms"] == T0  # step 4 fails before the rate limit runs


def test_rejected_non_terminating_push_resets_the_flag(table):
    cid = uid(11)
    fresh(table, cid)
    assert push(table, cid, T0, terminating=True) == NONE
    assert push(table, cid, T0 + 1) == INVALID_REQUEST  # the finally copies terminating=false in
    assert table.get_state(cid)["terminating"] is False
    # processed normally from here on: rate limited as usual, then accepted
    assert push(table, cid, T0 + 2) == THROTTLING_QUOTA_EXCEEDED
    assert push(table, cid, T0 + INTERVAL) == NONE


def test_terminating_push_failing_validation_still_sets_terminating(table):
    cid = uid(12)
    fresh(table, cid)
    assert push(table, cid, T0, terminating=True, sid=SID + 1) == UNKNOWN_SUBSCRIPTION_ID
    assert table.get_state(cid)["terminating"] is True
    assert push(table, cid, T0 + INTERVAL, terminating=True) == INVALID_REQUEST


def test_terminating_does_not_affect_gets(table):
    cid = uid(13)
    fresh(table, cid)
    assert push(table, cid, T0, terminating=True) == NONE
    assert table.decide_get(cid, T0 + INTERVAL) == NONE
    assert table.get_state(cid)["terminating"] is True


# ------------------------------------------------------------------------------ validation order


def test_wrong_subscription_id(table):
    cid = uid(14)
    fresh(table, cid)
    assert push(table, cid, T0, sid=1234) == UNKNOWN_SUBSCRIPTION_ID
    state = table.get_state(cid)
    assert state["last_known_error"] == UNKNOWN_SUBSCRIPTION_ID
    assert state["last_push_ms"] == T0  # the rate limit (step 5) passed before step 6 failed


@pytest.mark.parametrize("ctype", [100, -1, 5, 127, -128])
def test_unsupported_compression_type(table, ctype):
    cid = uid(15)
    fresh(table, cid)
    assert push(table, cid, T0, compression=ctype) == UNSUPPORTED_COMPRESSION_TYPE
    assert table.get_state(cid)["last_known_error"] == UNSUPPORTED_COMPRESSION_TYPE


@pytest.mark.parametrize("ctype", [0, 1, 2, 3, 4])
def test_every_known_compression_type_passes(table, ctype):
    cid = uid(16)
    fresh(table, cid)
    assert push(table, cid, T0, compression=ctype) == NONE


def test_telemetry_too_large(table):
    cid = uid(17)
    fresh(table, cid)
    assert push(table, cid, T0, size=2, max_bytes=1) == TELEMETRY_TOO_LARGE
    assert table.get_state(cid)["last_known_error"] == TELEMETRY_TOO_LARGE
    cid2 = uid(18)
    fresh(table, cid2)
    assert push(table, cid2, T0, size=100, max_bytes=100) == NONE


def test_validation_order():
    t = InstanceTable()
    a = uid(19)
    fresh(t, a)
    assert push(t, a, T0) == NONE
    # throttling (5) wins over a wrong id (6), bad compression (7) and size (8)
    assert push(t, a, T0 + 1, sid=1, compression=100, size=10, max_bytes=1) == THROTTLING_QUOTA_EXCEEDED
    # a terminating push skips the throttle; then the wrong id (6) comes before compression (7) and size (8)
    assert push(t, a, T0 + 2, sid=1, compression=100, size=10, max_bytes=1, terminating=True) == UNKNOWN_SUBSCRIPTION_ID
    b = uid(20)
    fresh(t, b)
    assert push(t, b, T0, compression=100, size=10, max_bytes=1) == UNSUPPORTED_COMPRESSION_TYPE
    c = uid(21)
    fresh(t, c)
    assert push(t, c, T0, terminating=True) == NONE
    # already terminating (4) comes first of all
    assert push(t, c, T0 + 1, sid=1, compression=100, size=10, max_bytes=1) == INVALID_REQUEST


def test_success_leaves_last_error_to_the_caller(table):
    cid = uid(22)
    fresh(table, cid)
    assert push(table, cid, T0, sid=1) == UNKNOWN_SUBSCRIPTION_ID
    assert push(table, cid, T0 + INTERVAL) == NONE
    assert table.get_state(cid)["last_known_error"] == UNKNOWN_SUBSCRIPTION_ID  # not yet NONE
    table.set_last_error(cid, INVALID_RECORD)  # decompression failed
    assert table.get_state(cid)["last_known_error"] == INVALID_RECORD
    table.set_last_error(cid, NONE)  # clean export
    assert table.get_state(cid)["last_known_error"] == NONE


# ------------------------------------------------------------------------- 4.1 Get exemption


@pytest.mark.parametrize("error", ["sid", "compression"])
def test_get_after_rejected_push_is_exempt_and_does_not_move_last_get(table, error):
    cid = uid(23)
    fresh(table, cid)
    assert table.decide_get(cid, T0) == NONE
    if error == "sid":
        assert push(table, cid, T0 + 100, sid=SID + 1) == UNKNOWN_SUBSCRIPTION_ID
    else:
        assert push(table, cid, T0 + 100, compression=100) == UNSUPPORTED_COMPRESSION_TYPE
    assert table.decide_get(cid, T0 + 101) == NONE  # early, but allowed (PR #19959)
    state = table.get_state(cid)
    assert state["last_get_ms"] == T0  # not updated on the exemption path
    assert state["last_known_error"] == NONE  # the Get completed: lastKnownError = NONE
    # the exemption is spent: a second early Get is throttled
    assert table.decide_get(cid, T0 + 102) == THROTTLING_QUOTA_EXCEEDED
    # and since lastGet did not move, the next push (lastGet < lastPush) is rate limited normally
    assert push(table, cid, T0 + 103) == THROTTLING_QUOTA_EXCEEDED


@pytest.mark.parametrize("code", [THROTTLING_QUOTA_EXCEEDED, TELEMETRY_TOO_LARGE, INVALID_REQUEST, INVALID_RECORD])
def test_other_errors_are_not_exempt(table, code):
    cid = uid(24)
    fresh(table, cid)
    assert push(table, cid, T0) == NONE
    table.set_last_error(cid, code)
    assert table.decide_get(cid, T0 + 1) == THROTTLING_QUOTA_EXCEEDED
    assert table.get_state(cid)["last_known_error"] == code  # a throttled Get leaves it alone


def test_typical_sequence_after_config_change():
    """§3(c): push recreates the instance, is accepted, gets 117; the immediate Get passes (4.1+)."""
    t = InstanceTable()
    cid = uid(25)
    fresh(t, cid, version=1)
    assert push(t, cid, T0) == NONE
    now = T0 + INTERVAL
    assert t.lookup(cid, now, 2) == LOOKUP_STALE
    t.create(cid, now, 2, SID + 7, 10_000)
    assert push(t, cid, now) == UNKNOWN_SUBSCRIPTION_ID
    assert t.decide_get(cid, now + 5) == NONE
    # the client's next push at 0.5 × interval is throttled because lastGet did not move
    assert push(t, cid, now + 5 + 5_000, sid=SID + 7) == THROTTLING_QUOTA_EXCEEDED
    assert push(t, cid, now + 10_000, sid=SID + 7) == NONE


# -------------------------------------------------------------------- stale subscription version


def test_stale_version_lookup_and_recreate(table):
    cid = uid(26)
    fresh(table, cid, version=3)
    assert table.decide_get(cid, T0) == NONE
    assert push(table, cid, T0 + 1, terminating=True, sid=1) == UNKNOWN_SUBSCRIPTION_ID
    assert table.lookup(cid, T0 + 2, 3) == LOOKUP_LIVE
    assert table.lookup(cid, T0 + 2, 2) == LOOKUP_LIVE  # built from a newer version than asked: current
    assert table.lookup(cid, T0 + 2, 4) == LOOKUP_STALE
    table.create(cid, T0 + 2, 4, SID + 1, 5_000)
    state = table.get_state(cid)
    assert state["last_get_ms"] == 0 and state["last_push_ms"] == 0
    assert state["terminating"] is False and state["last_known_error"] == NONE
    assert state["subscription_version"] == 4 and state["subscription_id"] == SID + 1
    assert state["push_interval_ms"] == 5_000 and state["ttl_ms"] == 60_000
    assert table.lookup(cid, T0 + 2, 4) == LOOKUP_LIVE
    # all rate-limit state is lost: an immediate Get is accepted (testGetTelemetryUpdateSubscription)
    assert table.decide_get(cid, T0 + 2) == NONE
    assert len(table) == 1


def test_lookup_changes_nothing(table):
    cid = uid(27)
    fresh(table, cid)
    before = table.get_state(cid)
    for now in (T0, T0 + 10**9):
        table.lookup(cid, now, 0)
    assert table.get_state(cid) == before
    assert table.now_ms == T0
    assert table.lookup(cid, T0 + 10**9, 0) == LOOKUP_ABSENT  # judged at the larger of its now and the table clock


def test_absent_instance_raises_keyerror(table):
    cid = uid(28)
    with pytest.raises(KeyError):
        table.decide_get(cid, T0)
    with pytest.raises(KeyError):
        push(table, cid, T0)
    with pytest.raises(KeyError):
        table.set_last_error(cid, 0)
    assert table.get_state(cid) is None
    assert table.remove(cid) is False


# ---------------------------------------------------------------------------------------- expiry


@pytest.mark.parametrize(
    ("interval", "ttl"),
    [(100, 60_000), (10_000, 60_000), (20_000, 60_000), (INTERVAL, 90_000), (300_000, 900_000)],
)
def test_expiry_boundary(interval, ttl):
    t = InstanceTable(cache_expiry_ms=60_000)
    cid = uid(29)
    fresh(t, cid, interval=interval)
    assert t.get_state(cid)["ttl_ms"] == ttl
    assert t.lookup(cid, T0 + ttl - 1, 0) == LOOKUP_LIVE
    assert t.lookup(cid, T0 + ttl, 0) == LOOKUP_ABSENT
    assert t.expire(T0 + ttl - 1) == 0
    assert len(t) == 1 and t.get_state(cid) is not None
    assert t.expire(T0 + ttl) == 1
    assert len(t) == 0 and t.get_state(cid) is None and t.expirations == 1
    with pytest.raises(KeyError):
        t.decide_get(cid, T0 + ttl)
    assert t.lookup(cid, T0 + ttl, 0) == LOOKUP_ABSENT


@pytest.mark.parametrize("interval", [10_000, INTERVAL])
def test_every_request_rearms_expiry(interval):
    t = InstanceTable()
    ttl = max(60_000, 3 * interval)
    cid = uid(30)
    fresh(t, cid, interval=interval)
    last = T0
    for step, kind in enumerate(["get", "push", "push", "get", "create", "push"]):
        now = last + ttl - 1  # just before expiry, every time
        assert t.lookup(cid, now, 0) == LOOKUP_LIVE
        if kind == "get":
            t.decide_get(cid, now)
        elif kind == "push":
            push(t, cid, now, sid=SID if step % 2 else 1)  # accepted or rejected: both re-arm
        else:
            t.create(cid, now, 0, SID, interval)
        last = now
        assert t.get_state(cid)["expires_at_ms"] == last + ttl
    assert t.lookup(cid, last + ttl - 1, 0) == LOOKUP_LIVE
    assert t.lookup(cid, last + ttl, 0) == LOOKUP_ABSENT
    t.expire(last + ttl)
    assert len(t) == 0


def test_kafka_cache_expiry_case():
    """ClientMetricsManagerTest: cacheExpiry 100 ms, interval 100 → expires after max(100, 300) = 300 ms."""
    t = InstanceTable(cache_expiry_ms=100)
    cid = uid(31)
    fresh(t, cid, interval=100)
    assert t.decide_get(cid, T0) == NONE
    t.expire(T0 + 299)
    assert len(t) == 1
    t.expire(T0 + 300)
    assert len(t) == 0


def test_expired_instance_behaves_as_absent():
    t = InstanceTable()
    a, b = uid(32), uid(33)
    fresh(t, a)  # expires at T0 + 90000
    fresh(t, b, now=T0 + 80_000)
    assert t.get_state(a) is not None
    fresh(t, uid(34), now=T0 + 90_000)  # the table clock reaches a's deadline
    assert t.get_state(a) is None
    assert t.lookup(a, T0, 0) == LOOKUP_ABSENT  # expiry is sticky: judged at the table clock, not the caller's
    assert t.remove(a) is False
    assert len(t) == 2
    # re-creating an expired id starts fresh
    fresh(t, a, now=T0 + 90_000)
    assert t.get_state(a)["last_push_ms"] == 0


def test_reclaim_on_hot_path_is_bounded_but_complete():
    t = InstanceTable(max_instances=100_000)
    n = 5_000
    for k in range(n):
        t.create(uid(k), T0, 0, SID, 10_000)
    assert len(t) == n
    probe = uid(10**6)
    fresh(t, probe, now=T0 + 60_000)  # every other instance is due now
    # each operation reclaims a few; len() and expire() reclaim the rest
    assert t.expirations < 100
    assert len(t) == 1 and t.expirations == n
    t._check()


def test_recreating_an_expired_instance_counts_one_expiration():
    t = InstanceTable()
    ids = [uid(k) for k in range(20)]
    for cid in ids:
        t.create(cid, T0, 0, SID, 10_000)  # all due at exactly T0 + 60000
    late = ids[-1]  # the hot path reclaims only the first few due heads; this one is still there
    assert t.lookup(late, T0 + 60_000, 0) == LOOKUP_ABSENT
    t.create(late, T0 + 60_000, 0, SID, 10_000)
    assert 0 < t.expirations < 20
    assert len(t) == 1 and t.expirations == 20
    t._check()


def test_multiple_ttl_classes_expire_independently():
    t = InstanceTable(cache_expiry_ms=1_000)
    ids = {iv: [uid(iv * 100 + k) for k in range(10)] for iv in (100, 1_000, 5_000, 20_000)}
    for k in range(10):
        for iv, group in ids.items():
            t.create(group[k], T0 + k, 0, SID, iv)
    t._check()
    for iv, group in sorted(ids.items()):
        ttl = max(1_000, 3 * iv)
        t.expire(T0 + ttl + 4)  # the first 5 of this group (created at T0 .. T0 + 4) are due
        assert [t.get_state(c) is None for c in group] == [True] * 5 + [False] * 5
        t._check()
    t.expire(T0 + 60_010)
    assert len(t) == 0
    t._check()


# ------------------------------------------------------------------------------------------ LRU


def test_lru_eviction_order_and_access_refresh():
    t = InstanceTable(max_instances=3)
    a, b, c, d, e, f = (uid(40 + k) for k in range(6))
    for k, cid in enumerate((a, b, c)):
        fresh(t, cid, now=T0 + k)
    assert t._lru_ids() == [a, b, c]
    assert t.decide_get(a, T0 + 3) == NONE  # a Get counts as an access
    assert t._lru_ids() == [b, c, a]
    fresh(t, d, now=T0 + 4)
    assert t.lookup(b, T0 + 4, 0) == LOOKUP_ABSENT and t.evictions == 1
    assert t._lru_ids() == [c, a, d]
    t.lookup(c, T0 + 4, 0)  # a lookup is not an access
    push(t, a, T0 + 5)  # a push is
    fresh(t, e, now=T0 + 6)
    assert t.lookup(c, T0 + 6, 0) == LOOKUP_ABSENT
    assert t._lru_ids() == [d, a, e]
    t.create(d, T0 + 7, 1, SID, INTERVAL)  # a re-creation is too
    fresh(t, f, now=T0 + 8)
    assert t._lru_ids() == [e, d, f]
    assert t.evictions == 3 and t.expirations == 0 and len(t) == 3
    t._check()


def test_full_table_reclaims_expired_before_evicting():
    t = InstanceTable(max_instances=3, cache_expiry_ms=1_000)
    a, b, c, d = (uid(50 + k) for k in range(4))
    fresh(t, a, interval=100)  # ttl 1000
    fresh(t, b, interval=10_000)  # ttl 30000
    fresh(t, c, interval=10_000)
    t.decide_get(a, T0 + 10)  # a is most recently used, but it expires first
    fresh(t, d, now=T0 + 1_010, interval=10_000)
    assert t.evictions == 0 and t.expirations == 1
    assert t.get_state(a) is None and all(t.get_state(x) for x in (b, c, d))


def test_remove_and_clear():
    t = InstanceTable(max_instances=5_000)
    for k in range(3_000):
        t.create(uid(k), T0, 0, SID, INTERVAL)
    grown = t.memory_bytes()
    assert t.remove(uid(5)) is True and t.remove(uid(5)) is False
    assert len(t) == 2_999
    t._check()
    t.clear()
    assert len(t) == 0 and t.get_state(uid(6)) is None
    assert t.memory_bytes() < grown
    fresh(t, uid(6))
    t._check()


# ------------------------------------------------------------------------------- memory bounds


def _ids(rng: random.Random, n: int) -> bytes:
    return rng.randbytes(16 * n)


def _push_batch(t: InstanceTable, ids: bytes, now: int, *, crc_base=0x1234, interval=INTERVAL, version=0, sids=None):
    n = len(ids) // 16
    if sids is None:
        sids = array.array("i", [i32(crc_base ^ java_uuid_hash(ids[16 * k : 16 * k + 16])) for k in range(n)])
    out = array.array("h", bytes(2 * n))
    accepted = t.decide_pushes(
        ids,
        array.array("q", [now]) * n,
        sids,
        bytes(n),
        array.array("b", [4]) * n,
        array.array("i", [100]) * n,
        out,
        subscription_version=version,
        crc_base=crc_base,
        push_interval_ms=interval,
        telemetry_max_bytes=MAX_BYTES,
    )
    return accepted, out


def test_flood_of_random_ids_stays_bounded():
    t = InstanceTable(max_instances=10_000)
    rng = random.Random(11)
    batch = 100_000
    # subscription ids are all wrong (0): each push creates an instance and gets 117; no need to compute them
    zeros = array.array("i", bytes(4 * batch))
    now = T0
    _push_batch(t, _ids(rng, batch), now, sids=zeros)
    first = t.memory_bytes()
    assert len(t) == 10_000 and t.evictions == 90_000
    for _ in range(19):
        now += 1
        _push_batch(t, _ids(rng, batch), now, sids=zeros)
    assert len(t) == 10_000
    assert t.evictions == 2_000_000 - 10_000
    assert t.memory_bytes() == first
    assert t.capacity == 10_000
    assert first / 10_000 <= 128
    t._check()


def test_million_live_instances_fit_in_128_bytes_each():
    n = 1_000_000
    t = InstanceTable(max_instances=n)
    ids = os.urandom(16 * n)
    zeros = array.array("i", bytes(4 * n))
    _push_batch(t, ids, T0, sids=zeros)
    assert len(t) == n and t.evictions == 0
    per = t.memory_bytes() / n
    assert per <= 128, per
    assert t.capacity == n


# --------------------------------------------------------------------------- batch entry points


def test_decide_pushes_creates_with_the_kafka_subscription_id():
    t = InstanceTable()
    crc_base = i32(0xD4C75BDE)  # crc32c("[]300000"): no subscription matched
    cid = uuid.UUID(int=(1 << 64) | 2).bytes  # vector 9: hash 3
    accepted, out = _push_batch(t, cid, T0, crc_base=crc_base, interval=300_000, sids=array.array("i", [-725132323]))
    assert accepted == 1 and list(out) == [0]
    state = t.get_state(cid)
    assert state["subscription_id"] == -725132323 and state["push_interval_ms"] == 300_000
    assert state["last_known_error"] == NONE and state["last_push_ms"] == T0
    # a push on a "new server" with a wrong id is refused (testPushTelemetryOnNewServer's converse)
    other = uid(60)
    accepted, out = _push_batch(t, other, T0, crc_base=crc_base, interval=300_000, sids=array.array("i", [5]))
    assert accepted == 0 and list(out) == [UNKNOWN_SUBSCRIPTION_ID]


def test_decide_gets_batch():
    t = InstanceTable()
    a, b = uid(61), uid(62)
    ids = a + b + a + b + a
    now = array.array("q", [T0, T0, T0 + 1, T0 + INTERVAL - 1, T0 + INTERVAL])
    out = array.array("h", [0] * 5)
    n = t.decide_gets(ids, now, out, subscription_version=0, crc_base=7, push_interval_ms=INTERVAL)
    assert list(out) == [0, 0, 89, 89, 0] and n == 3
    assert t.get_state(a)["subscription_id"] == i32(7 ^ java_uuid_hash(a))
    # a newer subscription version recreates the instance: the Get passes at once
    out1 = array.array("h", [0])
    assert (
        t.decide_gets(
            a,
            array.array("q", [T0 + INTERVAL + 1]),
            out1,
            subscription_version=1,
            crc_base=7,
            push_interval_ms=INTERVAL,
        )
        == 1
    )


def test_empty_batches():
    t = InstanceTable()
    e = array.array("q")
    assert t.decide_gets(b"", e, array.array("h"), subscription_version=0, crc_base=0, push_interval_ms=1) == 0
    assert (
        t.decide_pushes(
            b"",
            e,
            array.array("i"),
            b"",
            array.array("b"),
            array.array("i"),
            array.array("h"),
            subscription_version=0,
            crc_base=0,
            push_interval_ms=1,
            telemetry_max_bytes=1,
        )
        == 0
    )


class Model:
    """Kafka's semantics in plain Python, with the table's clock rule (expiry judged at the largest now seen)."""

    def __init__(self, max_instances: int, cache_expiry: int):
        self.max = max_instances
        self.ce = cache_expiry
        self.clock = None
        self.d: OrderedDict[bytes, dict] = OrderedDict()
        self.evictions = 0
        self.expirations = 0

    def advance(self, now):
        self.clock = now if self.clock is None else max(self.clock, now)

    def live(self, cid):
        s = self.d.get(cid)
        return s if s is not None and s["deadline"] > self.clock else None

    def lookup(self, cid, now, version):
        clock = now if self.clock is None else max(self.clock, now)
        s = self.d.get(cid)
        if s is None or s["deadline"] <= clock:
            return LOOKUP_ABSENT
        return LOOKUP_STALE if s["version"] < version else LOOKUP_LIVE

    def create(self, cid, now, version, sid, interval):
        self.advance(now)
        old = self.d.get(cid)
        if old is not None and old["deadline"] <= self.clock:
            self.expirations += 1
        if old is None:
            for k in [k for k, s in self.d.items() if s["deadline"] <= self.clock]:
                del self.d[k]
                self.expirations += 1
            if len(self.d) >= self.max:
                self.d.popitem(last=False)
                self.evictions += 1
        ttl = max(self.ce, 3 * interval)
        self.d[cid] = {
            "last_get": 0,
            "last_push": 0,
            "interval": interval,
            "sid": sid,
            "version": version,
            "terminating": False,
            "error": 0,
            "ttl": ttl,
            "deadline": self.clock + ttl,
        }
        self.d.move_to_end(cid)

    def touch(self, cid, now):
        self.advance(now)
        s = self.live(cid)
        if s is None:
            raise KeyError(cid)
        s["deadline"] = self.clock + s["ttl"]
        self.d.move_to_end(cid)
        return s

    def get(self, cid, now):
        s = self.touch(cid, now)
        if now - max(s["last_get"], s["last_push"]) >= s["interval"]:
            s["last_get"] = now
            s["error"] = 0
            return 0
        if s["error"] in (117, 76):
            s["error"] = 0
            return 0
        return 89

    def push(self, cid, now, sid, terminating, ctype, size, max_bytes):
        s = self.touch(cid, now)
        err = 0
        if s["terminating"]:
            err = 42
        else:
            can = s["last_get"] > s["last_push"] or now - s["last_push"] >= s["interval"]
            if can:
                s["last_push"] = now
            if not can and not terminating:
                err = 89
            elif sid != s["sid"]:
                err = 117
            elif not 0 <= ctype <= 4:
                err = 76
            elif size > max_bytes:
                err = 118
        s["terminating"] = bool(terminating)
        if err:
            s["error"] = err
        return err

    def expire(self, now):
        self.advance(now)
        due = [k for k, s in self.d.items() if s["deadline"] <= self.clock]
        for k in due:
            del self.d[k]
        self.expirations += len(due)
        return len(due)

    def length(self):
        if self.clock is not None:
            self.expire(self.clock)
        return len(self.d)

    def state(self, cid):
        s = self.live(cid) if self.clock is not None else None
        if s is None:
            return None
        return (
            s["last_get"],
            s["last_push"],
            s["interval"],
            s["sid"],
            s["version"],
            s["terminating"],
            s["error"],
            s["deadline"],
        )


def table_state(t: InstanceTable, cid: bytes):
    s = t.get_state(cid)
    if s is None:
        return None
    return (
        s["last_get_ms"],
        s["last_push_ms"],
        s["push_interval_ms"],
        s["subscription_id"],
        s["subscription_version"],
        s["terminating"],
        s["last_known_error"],
        s["expires_at_ms"],
    )


POOL = [uid(1000 + k) for k in range(6)]
INTERVALS = [100, 10_000, 25_000, 40_000]

op = st.one_of(
    st.tuples(
        st.just("push"),
        st.integers(0, 5),
        st.integers(-2_000, 50_000),
        st.booleans(),
        st.sampled_from([0, 4, 100]),
        st.sampled_from([10, 200]),
        st.booleans(),
    ),
    st.tuples(st.just("get"), st.integers(0, 5), st.integers(-2_000, 50_000)),
    st.tuples(
        st.just("create"), st.integers(0, 5), st.integers(0, 50_000), st.integers(0, 3), st.sampled_from(INTERVALS)
    ),
    st.tuples(st.just("expire"), st.integers(0, 120_000)),
    st.tuples(st.just("remove"), st.integers(0, 5)),
    st.tuples(st.just("error"), st.integers(0, 5), st.sampled_from([0, 76, 87, 117])),
    st.tuples(st.just("len")),
)


@settings(max_examples=examples(250), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, max_size=60), max_instances=st.integers(1, 7))
def test_table_matches_the_model(ops, max_instances):
    t = InstanceTable(max_instances=max_instances, cache_expiry_ms=30_000)
    m = Model(max_instances, 30_000)
    now = T0
    for o in ops:
        kind = o[0]
        if kind == "push":
            _, k, dt, term, ctype, size, good = o
            now += dt
            cid = POOL[k]
            try:
                want = m.push(cid, now, SID if good else SID + 1, term, ctype, size, 100)
            except KeyError:
                want = KeyError
            try:
                got = t.decide_push(cid, now, SID if good else SID + 1, term, ctype, size, 100)
            except KeyError:
                got = KeyError
            assert got == want, o
        elif kind == "get":
            _, k, dt = o
            now += dt
            try:
                want = m.get(POOL[k], now)
            except KeyError:
                want = KeyError
            try:
                got = t.decide_get(POOL[k], now)
            except KeyError:
                got = KeyError
            assert got == want
        elif kind == "create":
            _, k, dt, version, interval = o
            now += dt
            assert t.lookup(POOL[k], now, version) == m.lookup(POOL[k], now, version)
            m.create(POOL[k], now, version, SID, interval)
            t.create(POOL[k], now, version, SID, interval)
        elif kind == "expire":
            _, dt = o
            t.expire(now + dt)  # how many each one reclaims here differs (the table also reclaims on the way)
            m.expire(now + dt)
        elif kind == "remove":
            cid = POOL[o[1]]
            want = m.live(cid) is not None if m.clock is not None else False
            if cid in m.d:
                if not want:
                    m.expirations += 1
                del m.d[cid]
            assert t.remove(cid) == want
        elif kind == "error":
            cid = POOL[o[1]]
            s = m.live(cid) if m.clock is not None else None
            if s is None:
                with pytest.raises(KeyError):
                    t.set_last_error(cid, o[2])
            else:
                s["error"] = o[2]
                t.set_last_error(cid, o[2])
        else:
            assert len(t) == m.length()
            assert (t.evictions, t.expirations) == (m.evictions, m.expirations)
        for cid in POOL:
            assert table_state(t, cid) == m.state(cid)
    assert len(t) == m.length()
    assert (t.evictions, t.expirations) == (m.evictions, m.expirations)
    live_order = list(m.d)
    assert t._lru_ids() == live_order
    t._check()


batch_item = st.tuples(
    st.integers(0, 5),  # id
    st.integers(-1_000, 40_000),  # time step (may go backwards a little)
    st.booleans(),  # good subscription id
    st.booleans(),  # terminating
    st.sampled_from([0, 1, 4, 100, -1]),
    st.sampled_from([0, 50, 101]),
    st.booleans(),  # a Get instead of a push
)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(
        st.tuples(
            st.lists(batch_item, max_size=25),
            st.integers(0, 3),
            st.sampled_from(INTERVALS),
            st.sampled_from([0, -1, 0x7FFFFFFF, 12345]),
        ),
        max_size=6,
    ),
    max_instances=st.integers(1, 8),
)
def test_batch_agrees_with_single_requests(batches, max_instances):
    a = InstanceTable(max_instances=max_instances, cache_expiry_ms=20_000)
    b = InstanceTable(max_instances=max_instances, cache_expiry_ms=20_000)
    now = T0
    version = 0
    for items, dv, interval, crc_base in batches:
        version += dv
        # split into runs of pushes and runs of gets, each one batch call on table a
        runs: list[tuple[bool, list]] = []
        for it in items:
            now += it[1]
            if not runs or runs[-1][0] != it[6]:
                runs.append((it[6], []))
            runs[-1][1].append((it, now))
        for is_get, run in runs:
            ids = b"".join(POOL[it[0]] for it, _ in run)
            times = array.array("q", [t_ for _, t_ in run])
            out = array.array("h", [-1] * len(run))
            if is_get:
                acc = a.decide_gets(
                    ids, times, out, subscription_version=version, crc_base=crc_base, push_interval_ms=interval
                )
            else:
                sids = array.array("i", [i32(crc_base ^ java_uuid_hash(POOL[it[0]])) if it[2] else 0 for it, _ in run])
                acc = a.decide_pushes(
                    ids,
                    times,
                    sids,
                    bytes(int(it[3]) for it, _ in run),
                    array.array("b", [it[4] for it, _ in run]),
                    array.array("i", [it[5] for it, _ in run]),
                    out,
                    subscription_version=version,
                    crc_base=crc_base,
                    push_interval_ms=interval,
                    telemetry_max_bytes=100,
                )
            want = []
            for it, t_ in run:
                cid = POOL[it[0]]
                if b.lookup(cid, t_, version) != LOOKUP_LIVE:
                    b.create(cid, t_, version, i32(crc_base ^ java_uuid_hash(cid)), interval)
                if is_get:
                    want.append(b.decide_get(cid, t_))
                else:
                    sid = i32(crc_base ^ java_uuid_hash(cid)) if it[2] else 0
                    code = b.decide_push(cid, t_, sid, it[3], it[4], it[5], 100)
                    if code == 0:
                        b.set_last_error(cid, 0)
                    want.append(code)
            assert list(out) == want
            assert acc == want.count(0)
            for cid in POOL:
                assert a.get_state(cid) == b.get_state(cid)
    assert len(a) == len(b)
    assert (a.evictions, a.expirations) == (b.evictions, b.expirations)
    assert a._lru_ids() == b._lru_ids()
    a._check()
    b._check()


# ------------------------------------------------------------------------------------------ threads


def _thread_batches(seed: int, pool: list[bytes], rounds: int, size: int):
    rng = random.Random(seed)
    out = []
    for r in range(rounds):
        picks = [rng.choice(pool) for _ in range(size)]
        ids = b"".join(picks)
        now = array.array("q", [T0 + r * 250 + k for k in range(size)])  # no expiry within the run
        sids = array.array("i", [i32(99 ^ java_uuid_hash(p)) if rng.random() < 0.9 else 1 for p in picks])
        term = bytes(rng.random() < 0.05 for _ in range(size))
        ctypes = array.array("b", [rng.choice([0, 1, 4, 100]) for _ in range(size)])
        sizes = array.array("i", [rng.choice([10, 10, 500]) for _ in range(size)])
        out.append((ids, now, sids, term, ctypes, sizes))
    return out


def _run_batches(t: InstanceTable, batches):
    results = []
    for ids, now, sids, term, ctypes, sizes in batches:
        out = array.array("h", [-1] * len(now))
        acc = t.decide_pushes(
            ids,
            now,
            sids,
            term,
            ctypes,
            sizes,
            out,
            subscription_version=0,
            crc_base=99,
            push_interval_ms=1_000,
            telemetry_max_bytes=100,
        )
        results.append((acc, out))
    return results


@pytest.mark.parametrize("overlap", [False, True])
def test_threads_share_one_table(overlap):
    rng = random.Random(5)
    shared = [rng.randbytes(16) for _ in range(2_000)]
    pools = [shared] * 4 if overlap else [[rng.randbytes(16) for _ in range(2_000)] for _ in range(4)]
    work = [_thread_batches(100 + k, pools[k], rounds=20, size=2_000) for k in range(4)]
    t = InstanceTable(max_instances=1_000_000)
    results: list = [None] * 4
    errors: list = []

    def worker(k):
        try:
            results[k] = _run_batches(t, work[k])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    # a fifth thread uses the single-request path at the same time
    def single():
        try:
            for j in range(3_000):
                cid = uid(500_000 + j % 50)
                if t.lookup(cid, T0, 0) != LOOKUP_LIVE:
                    t.create(cid, T0, 0, SID, 5_000)
                push(t, cid, T0 + j)
                t.get_state(cid)
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)] + [threading.Thread(target=single)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    allowed = {
        NONE,
        INVALID_REQUEST,
        UNSUPPORTED_COMPRESSION_TYPE,
        THROTTLING_QUOTA_EXCEEDED,
        UNKNOWN_SUBSCRIPTION_ID,
        TELEMETRY_TOO_LARGE,
    }
    total = accepted = rejected = 0
    for res in results:
        for acc, out in res:
            codes = list(out)
            assert set(codes) <= allowed
            assert acc == codes.count(0)
            total += len(codes)
            accepted += acc
            rejected += len(codes) - codes.count(0)
    assert accepted + rejected == total == 4 * 20 * 2_000
    assert len(t) == len({i for p in pools for i in p} | {uid(500_000 + j) for j in range(50)})
    t._check()
    if not overlap:
        # every thread's instances were only touched by that thread: same answers as running it alone
        for k in range(4):
            alone = InstanceTable(max_instances=1_000_000)
            expect = _run_batches(alone, work[k])
            assert [(a, list(o)) for a, o in expect] == [(a, list(o)) for a, o in results[k]]


# ------------------------------------------------------------------------------------- bad input


def test_bad_arguments():
    with pytest.raises(ValueError):
        InstanceTable(max_instances=0)
    with pytest.raises(ValueError):
        InstanceTable(max_instances=1 << 40)
    with pytest.raises(ValueError):
        InstanceTable(cache_expiry_ms=0)
    with pytest.raises(TypeError):
        InstanceTable(max_instances="10")
    t = InstanceTable()
    for bad in (b"x" * 15, b"x" * 17, b""):
        with pytest.raises(ValueError):
            t.lookup(bad, T0, 0)
        with pytest.raises(ValueError):
            t.create(bad, T0, 0, SID, INTERVAL)
        with pytest.raises(ValueError):
            t.decide_push(bad, T0, SID, False, 0, 1, 1)
        with pytest.raises(ValueError):
            t.get_state(bad)
    for bad in (None, "0123456789abcdef", bytearray(16), 12, uuid.uuid4()):
        with pytest.raises(TypeError):
            t.lookup(bad, T0, 0)
        with pytest.raises(TypeError):
            t.decide_get(bad, T0)
        with pytest.raises(TypeError):
            t.remove(bad)
    cid = uid(70)
    with pytest.raises(ValueError):
        t.create(cid, T0, 0, SID, -1)
    with pytest.raises(ValueError):
        t.create(cid, T0, 0, SID, 1 << 31)
    with pytest.raises(TypeError):
        t.create(cid, "now", 0, SID, INTERVAL)
    t.create(cid, T0, 0, SID, INTERVAL)
    with pytest.raises(ValueError):
        t.set_last_error(cid, 40_000)
    assert len(t) == 1

    n = 3
    ids = b"".join(uid(80 + k) for k in range(n))
    good = {
        "now_ms": array.array("q", [T0] * n),
        "subscription_ids": array.array("i", [0] * n),
        "terminating": bytes(n),
        "compression_types": array.array("b", [0] * n),
        "wire_sizes": array.array("i", [1] * n),
        "out": array.array("h", [0] * n),
    }
    kw = {"subscription_version": 0, "crc_base": 0, "push_interval_ms": INTERVAL, "telemetry_max_bytes": 10}

    def call(ids_=ids, **over):
        args = {**good, **over}
        return t.decide_pushes(
            ids_,
            args["now_ms"],
            args["subscription_ids"],
            args["terminating"],
            args["compression_types"],
            args["wire_sizes"],
            args["out"],
            **kw,
        )

    assert call() == 0
    with pytest.raises(ValueError):
        call(ids_=ids[:-1])
    with pytest.raises(ValueError):
        call(ids_=ids + bytes(16))
    with pytest.raises(TypeError):
        call(ids_="x" * 48)
    with pytest.raises(TypeError):
        call(ids_=None)
    with pytest.raises(ValueError):
        call(ids_=memoryview(ids * 2)[::2])  # strided
    with pytest.raises(ValueError):
        call(subscription_ids=array.array("i", [0] * (n - 1)))
    with pytest.raises(ValueError):
        call(terminating=bytes(n + 1))
    with pytest.raises(ValueError):
        call(out=array.array("h", [0] * (n + 1)))
    with pytest.raises(ValueError):
        call(now_ms=array.array("i", [0] * n))  # wrong element type
    with pytest.raises((TypeError, ValueError, BufferError)):
        call(out=bytes(2 * n))  # read-only output
    with pytest.raises(TypeError):
        call(now_ms=None)
    with pytest.raises(TypeError):
        call(now_ms=[T0] * n)  # not a buffer
    with pytest.raises(TypeError):
        t.decide_pushes(
            ids,
            good["now_ms"],
            good["subscription_ids"],
            good["terminating"],
            good["compression_types"],
            good["wire_sizes"],
            good["out"],
        )  # keywords are required
    with pytest.raises(ValueError):
        t.decide_gets(
            ids,
            array.array("q", [T0] * n),
            array.array("h", [0] * (n - 1)),
            subscription_version=0,
            crc_base=0,
            push_interval_ms=INTERVAL,
        )
    with pytest.raises(ValueError):
        t.decide_gets(
            ids,
            array.array("q", [T0] * n),
            array.array("h", [0] * n),
            subscription_version=0,
            crc_base=0,
            push_interval_ms=-5,
        )
    t._check()


def test_table_without_init_does_not_crash():
    t = InstanceTable.__new__(InstanceTable)
    with pytest.raises(RuntimeError):
        t.lookup(uid(1), T0, 0)
    assert len(t) == 0 and t.memory_bytes() == 0


def test_reinit_resets():
    t = InstanceTable(max_instances=10)
    fresh(t, uid(1))
    t.__init__(max_instances=20)
    assert len(t) == 0 and t.max_instances == 20
    fresh(t, uid(1))
    t._check()


def test_try_push_request_answers_as_try_push_on_decoded_requests():
    """try_push_request reads a decoded PushTelemetryRequest's fields in C: on twin tables fed the same
    history (reserved ids, absent, stale, throttled, wrong SubscriptionId, bad compression, too large,
    terminating, accepted with and without a payload), it answers as try_push (a ticket for an accepted push
    with a payload, which finish_push takes back) and leaves the same instance state."""
    import kip714
    from kip714 import ErrorCode, PushTelemetryRequest

    rng = random.Random(714)
    a, b = InstanceTable(), InstanceTable()
    ids = [uid(n) for n in range(6)] + [bytes(16), (1).to_bytes(16, "big")]
    for cid in ids[:4]:
        for t in (a, b):
            t.create(cid, T0, 1, SID, 100)
    seen = set()
    now = T0
    for _ in range(600):
        now += rng.choice((0, 1, 50, 100, 150))
        cid = rng.choice(ids)
        version = rng.choice((1, 1, 1, 2)) if rng.random() < 0.05 else 1
        sid = SID if rng.random() < 0.9 else SID + 1
        terminating = rng.random() < 0.03
        ctype = rng.choice((0, 0, 1, 4, 5))
        payload = rng.choice((b"", b"", b"x" * 10, b"y" * 300))
        max_bytes = rng.choice((MAX_BYTES, 200))
        # decoded from the wire, as a server hands it over (the payload is a view into the frame)
        frame = kip714.encode_request(PushTelemetryRequest(cid, sid, terminating, ctype, payload), 7, "c")[4:]
        body = kip714.decode_request(frame).body
        want = a.try_push(cid, now, version, sid, terminating, ctype, len(payload), max_bytes)
        got = b.try_push_request(body, now, version, max_bytes)
        if want is ErrorCode.NONE and payload:
            assert got >= TICKET_BASE
            a.set_last_error(cid, NONE)
            assert b.finish_push(cid, got, NONE) is True
        else:
            assert got is want, (want, got)
        if want is Outcome.ABSENT or want is Outcome.STALE:  # the caller creates it, as the broker does
            for t in (a, b):
                t.create(cid, now, version, SID, 100)
        seen.add(want if want is not ErrorCode.NONE or not payload else None)
        assert a.get_state(cid) == b.get_state(cid)
    assert a.decision_counts() == b.decision_counts()
    assert {
        Outcome.RESERVED,
        Outcome.ABSENT,
        Outcome.STALE,
        ErrorCode.NONE,
        None,
        ErrorCode.THROTTLING_QUOTA_EXCEEDED,
        ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        ErrorCode.TELEMETRY_TOO_LARGE,
        ErrorCode.INVALID_REQUEST,
    } <= seen
    with pytest.raises(TypeError):
        b.try_push_request(kip714.GetTelemetrySubscriptionsRequest(uuid.UUID(bytes=ids[0])), now, 1, MAX_BYTES)
    with pytest.raises(TypeError):
        b.try_push_request(ids[0], now, 1, MAX_BYTES)


def _push_body(cid: bytes, sid: int = SID, payload: bytes = b"x" * 10, terminating: bool = False):
    import kip714

    frame = kip714.encode_request(kip714.PushTelemetryRequest(cid, sid, terminating, 0, payload), 7, "c")[4:]
    return kip714.decode_request(frame).body


def test_create_push_request_creates_and_decides_in_one_call():
    """An absent instance is created with the given subscription and its push decided under one hold of the
    lock: the first push after creation is accepted (a ticket), the instance carries the new SubscriptionId."""
    t = InstanceTable()
    cid = uid(1)
    ticket = t.create_push_request(_push_body(cid), T0, 3, SID, INTERVAL, MAX_BYTES)
    assert ticket >= TICKET_BASE
    state = t.get_state(cid)
    assert (state["subscription_id"], state["push_interval_ms"], state["subscription_version"]) == (SID, INTERVAL, 3)
    assert t.finish_push(cid, ticket, INVALID_RECORD) is True
    assert t.get_state(cid)["last_known_error"] == INVALID_RECORD
    # an empty push is decided with NONE, and sets the last error itself
    assert t.create_push_request(_push_body(uid(2), payload=b""), T0, 3, SID, INTERVAL, MAX_BYTES) == NONE
    # the reserved ids are answered RESERVED, nothing created
    assert t.create_push_request(_push_body(bytes(16)), T0, 3, SID, INTERVAL, MAX_BYTES) is Outcome.RESERVED
    assert len(t) == 2


def test_create_push_request_keeps_what_another_thread_created():
    """Two requests that both found the instance absent: the second one's create_push_request decides
    against the instance the first created (same or newer version), as Kafka's clientInstance() does; only
    an instance older than the caller's version is rebuilt."""
    t = InstanceTable()
    cid = uid(1)
    assert t.create_get(cid, T0, 5, SID, INTERVAL) == NONE
    # a push resolved at an older version (4) finds it current: decided as it is, so the Get counts
    assert (
        t.create_push_request(_push_body(cid, sid=SID + 9), T0 + 1, 4, SID + 9, 100, MAX_BYTES)
        == UNKNOWN_SUBSCRIPTION_ID
    )
    assert t.get_state(cid)["subscription_id"] == SID
    # one resolved at a newer version (6) rebuilds it
    assert t.create_push_request(_push_body(cid, sid=SID + 9), T0 + 2, 6, SID + 9, 100, MAX_BYTES) >= TICKET_BASE
    assert t.get_state(cid)["subscription_id"] == SID + 9


def test_create_get_creates_and_decides_in_one_call():
    t = InstanceTable()
    cid = uid(1)
    assert t.create_get(cid, T0, 0, SID, INTERVAL) == NONE
    assert t.get_state(cid)["last_get_ms"] == T0
    assert t.create_get(cid, T0 + 1, 0, SID, INTERVAL) == THROTTLING_QUOTA_EXCEEDED  # live: decided as is
    assert t.create_get(cid, T0 + 2, 1, SID + 1, INTERVAL) == NONE  # stale: rebuilt
    assert t.get_state(cid)["subscription_id"] == SID + 1


def test_finish_push_leaves_a_later_incarnation_alone():
    """A push ticket names the incarnation that accepted the push: once that instance was evicted, expired,
    removed or re-created, finish_push changes nothing and says so (Kafka drops its evicted instance object)."""
    t = InstanceTable(max_instances=1)
    cid = uid(1)
    ticket = t.create_push_request(_push_body(cid), T0, 0, SID, INTERVAL, MAX_BYTES)
    assert t.try_push(uid(2), T0, 0, SID, False, 0, 0, MAX_BYTES) is Outcome.ABSENT
    t.create(uid(2), T0, 0, SID, INTERVAL)  # evicts cid
    assert t.finish_push(cid, ticket, INVALID_RECORD) is False
    assert t.get_state(cid) is None
    again = t.create_push_request(_push_body(cid), T0, 0, SID, INTERVAL, MAX_BYTES)  # back, a new incarnation
    assert again != ticket
    assert t.finish_push(cid, ticket, INVALID_RECORD) is False
    assert t.get_state(cid)["last_known_error"] == NONE
    assert t.finish_push(cid, again, INVALID_RECORD) is True
    t.remove(cid)
    assert t.finish_push(cid, again, NONE) is False
    with pytest.raises(ValueError):
        t.finish_push(cid, 5, NONE)  # an ErrorCode is not a ticket
    with pytest.raises(ValueError):
        t.finish_push(cid, again, 1 << 20)
