"""Closing a librdkafka client so that it sends its terminating push.

librdkafka sends the final PushTelemetry only when the close finds its telemetry state machine in
PUSH_SCHEDULED (``rd_kafka_telemetry_schedule_termination``); a close while a regular push is still
unanswered (PUSH_SENT) ends telemetry without one. That is a real client's behaviour, and tests that need
the terminating push would fail on it now and then (seen in CI). So they close just after a push was
answered: the next one is at least 0.8 × the push interval away (librdkafka's ±20 % jitter).
"""

from __future__ import annotations

import time
from typing import Callable


def await_push_answered(client, pushes: Callable[[], int], timeout: float = 10.0, settle: float = 0.05) -> bool:
    """Poll ``client`` until ``pushes()`` (the pushes seen so far, e.g. rows recorded) grows, then a moment
    more for the answer to reach the client. Returns whether a push was seen within ``timeout``."""
    start = pushes()
    deadline = time.monotonic() + timeout
    seen = False
    while time.monotonic() < deadline:
        if pushes() > start:
            seen = True
            break
        client.poll(0.02)
    end = time.monotonic() + settle
    while time.monotonic() < end:
        client.poll(0.01)
    return seen
