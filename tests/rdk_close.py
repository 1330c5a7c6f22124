"""Closing a librdkafka client so that it sends its terminating push.

librdkafka sends the final PushTelemetry only when the close finds its telemetry state machine in
PUSH_SCHEDULED (``rd_kafka_telemetry_schedule_termination``); a close while a regular push is still
unanswered (PUSH_SENT) ends telemetry without one. That is a real client's behaviour, and tests that need
the terminating push would fail on it now and then (seen in CI). So they close just after a push was
answered: the next one is at least 0.8 × the push interval away (librdkafka's ±20 % jitter).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable

_names = itertools.count()


class AnsweredPushes:
    """Counts the pushes a librdkafka client saw answered, from its own telemetry debug log (for a client
    whose endpoint's recording cannot be read right away, e.g. a proxy in another process). Give the client
    ``**answered.conf``; librdkafka hands its log lines to the logger from ``poll()``. ``times``: when each
    answer was handed over (``time.monotonic()``)."""

    def __init__(self) -> None:
        self.count = 0
        self.times: list[float] = []
        self.logger = logging.getLogger(f"kip714.tests.rdkafka.{next(_names)}")
        self.logger.propagate = False
        self.logger.setLevel(logging.DEBUG)
        self.logger.addHandler(self._Handler(self))
        self.conf = {"debug": "telemetry", "logger": self.logger, "log_level": 7}

    class _Handler(logging.Handler):
        def __init__(self, owner: AnsweredPushes) -> None:
            super().__init__()
            self.owner = owner

        def emit(self, record: logging.LogRecord) -> None:
            if "PushTelemetryRequest succeeded" in record.getMessage():
                self.owner.times.append(time.monotonic())
                self.owner.count += 1

    def __call__(self) -> int:
        return self.count

    def since(self, t: float) -> int:
        """The pushes answered after ``t`` (``time.monotonic()``)."""
        return sum(1 for a in self.times if a > t)


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
