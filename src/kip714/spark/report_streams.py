"""Kafka Streams applications in ``kip714 report``: which instances are a Streams application's clients
(by the ``org.apache.kafka.stream.`` metrics they push, else by Kafka Streams' default client ids) and the
Streams insights (failed stream threads, a client state other than RUNNING, a thread blocked on processing).
"""

import re
from collections.abc import Callable
from typing import Any

from .report_checks import KAFKA_METRIC_PREFIX as _NS
from .report_checks import STREAMS_CLIENT_EXPECTED, STREAMS_THREAD_EXPECTED

__all__ = ["STREAMS_METRICS", "streams_kind", "streams_insights"]

_Row = dict[str, Any]
# Kafka Streams (kip714.client.catalog): client level through the admin client, thread level through each
# stream thread's main consumer
_S_FAILED, _S_STATE = _NS + "stream.failed.stream.threads", _NS + "stream.client.state"
_T_STATE, _T_POLL_RATE = _NS + "stream.thread.thread.state", _NS + "stream.thread.poll.rate"
_T_PROCESS_RATIO = _NS + "stream.thread.process.ratio"
STREAMS_METRICS = (_S_FAILED, _S_STATE, _T_STATE, _T_POLL_RATE, _T_PROCESS_RATIO)
_RUNNING, _THREAD_RUNNING, _ERROR_STATES = 2, 4, 5  # KafkaStreams.State / StreamThread.State ordinals
#: Kafka Streams' default client ids (KafkaStreams, ClientUtils): <application.id>-<process id>-admin and
#: <application.id>-<process id>-StreamThread-<n>-consumer; what tells a Streams client apart when its
#: subscription asks for no org.apache.kafka.stream. metric
_STREAMS_ID = re.compile(
    r"(?P<app>.+)-(?P<process>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
    r"-(?:(?P<admin>admin)|StreamThread-[0-9]+-consumer)"
)


def _streams_app(client_id: str | None) -> str | None:
    """``application <id> (process <uuid>)`` from a Kafka Streams client's default client id."""
    m = _STREAMS_ID.fullmatch(client_id or "")
    return f"application {m['app']} (process {m['process']})" if m else None


def streams_kind(r: _Row) -> str | None:
    """``streams-client`` (an application's admin client), ``streams-thread`` (a stream thread's main consumer)
    or None: by the org.apache.kafka.stream. metrics it pushed first, by Kafka Streams' client ids second."""
    seen = set(r.get("standard_seen") or ())
    if seen & set(STREAMS_CLIENT_EXPECTED):
        return "streams-client"
    if seen & set(STREAMS_THREAD_EXPECTED):
        return "streams-thread"
    m = _STREAMS_ID.fullmatch(r.get("client_id") or "")
    if m is None:
        return None
    return "streams-client" if m["admin"] else "streams-thread"


def streams_insights(
    iid: str,
    d: dict[str, _Row],
    r: _Row,
    blocked_process_ratio: float,
    out: Callable[[str, str, str, float, float, str | None, str | None], None],
) -> None:
    """The Kafka Streams insights of one instance (``d``: its agg rows by metric; ``r``: its instance row;
    ``blocked_process_ratio``: ReportOptions.streams_blocked_process_ratio), each given to ``out``."""
    from ..client.catalog import STREAMS_CLIENT_STATES

    app = _streams_app(r.get("client_id"))
    failed = d.get(_S_FAILED)
    if failed is not None and (failed["total"] or 0) > 0:
        out(iid, "streams_failed_threads", _S_FAILED, failed["total"], 0.0, "StreamsUncaughtExceptionHandler", app)
    state = d.get(_S_STATE)
    if state is not None and state["last"] is not None:

        def name(v: float) -> str:
            return STREAMS_CLIENT_STATES[int(v)] if 0 <= int(v) < len(STREAMS_CLIENT_STATES) else str(v)

        why = None
        if (state["max"] or 0) >= _ERROR_STATES:
            why = f"reached {name(state['max'])}"
        elif state["avg"] is not None and state["avg"] < _RUNNING - 0.5:
            why = "out of RUNNING (CREATED/REBALANCING) most of the time"
        elif not r.get("terminated") and state["last"] != _RUNNING:
            why = f"left in {name(state['last'])}"
        if why is not None:
            detail = ", ".join(x for x in (app, why) if x)
            value = state["max"] if (state["max"] or 0) >= _ERROR_STATES else state["last"]
            out(iid, "streams_not_running", _S_STATE, value, float(_RUNNING), "max.poll.interval.ms", detail)
    thread, polls, ratio = d.get(_T_STATE), d.get(_T_POLL_RATE), d.get(_T_PROCESS_RATIO)
    if (
        thread is not None
        and polls is not None
        and ratio is not None
        and thread["last"] == _THREAD_RUNNING
        and polls["last"] == 0
        and (ratio["last"] or 0) >= blocked_process_ratio
    ):
        out(
            iid,
            "streams_thread_blocked",
            _T_PROCESS_RATIO,
            ratio["last"],
            blocked_process_ratio,
            "max.poll.interval.ms",
            ", ".join(x for x in (app, "RUNNING, poll rate 0") if x),
        )
