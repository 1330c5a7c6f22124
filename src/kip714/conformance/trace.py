"""What the lab saw during one run: every request with its answer, and every connection opened or closed.

Times are seconds since the run started (the client's spawn, or the prompt in ``--listen`` mode), taken by
the lab itself: ``t_rx`` when the request was read, ``t_tx`` when the answer was written. Judges measure
from these, never from the client's clock, so a slow machine only makes a client look later, never earlier
(a lower bound stays fair under load).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from .._enums import ApiKey, CompressionType, ErrorCode

__all__ = ["ConnectionEvent", "Exchange", "Trace", "code_name", "codec_name"]

GET = int(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS)
PUSH = int(ApiKey.PUSH_TELEMETRY)
_API_NAMES = {int(k): "".join(w.capitalize() for w in k.name.split("_")) for k in ApiKey}


def code_name(code: int | None) -> str:
    """``76 UNSUPPORTED_COMPRESSION_TYPE``."""
    if code is None:
        return "no answer"
    try:
        return f"{code} {ErrorCode(code).name}"
    except ValueError:
        return str(code)


def codec_name(ctype: int) -> str:
    try:
        return CompressionType(ctype).name.lower()
    except ValueError:
        return f"unknown({ctype})"


@dataclass
class Exchange:
    """One request the lab read, with the answer it wrote (``t_tx`` None: not answered)."""

    seq: int
    conn: int
    node: int
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    t_rx: float
    t_tx: float | None = None
    #: the request's decoded fields (telemetry: client_instance_id in Kafka's text form, subscription_id,
    #: terminating, compression_type)
    request: dict[str, Any] = field(default_factory=dict)
    #: the ClientInstanceId the request carried, and the one a successful Get answer gave
    instance: uuid.UUID | None = None
    given_instance: uuid.UUID | None = None
    #: a push's Metrics bytes as on the wire; None when the field was null (or not a push)
    metrics: bytes | None = None
    metrics_null: bool = False
    #: the answer's error code and, for a Get, what it told the client
    answer: dict[str, Any] = field(default_factory=dict)
    error_code: int | None = None
    #: what the lab's script did (a forced code, a close); empty when the broker answered alone
    lab: str = ""
    #: why the request could not be decoded (the lab then closed the connection, as Kafka does)
    problem: str | None = None

    @property
    def is_get(self) -> bool:
        return self.api_key == GET

    @property
    def is_push(self) -> bool:
        return self.api_key == PUSH

    @property
    def is_telemetry(self) -> bool:
        return self.api_key in (GET, PUSH)

    @property
    def instance_id(self) -> uuid.UUID | None:
        return self.instance

    @property
    def answered_at(self) -> float:
        """When the answer went out (when the request was read, if it was never answered)."""
        return self.t_tx if self.t_tx is not None else self.t_rx

    @property
    def api(self) -> str:
        return _API_NAMES.get(self.api_key, f"key {self.api_key}")

    def describe(self) -> str:
        """One line: ``Push #3 at 1234.5 ms on conn 2 (node 1) → 0 NONE``."""
        what = self.api
        if self.is_push:
            what += " (terminating)" if self.request.get("terminating") else ""
        answer = code_name(self.error_code) if self.t_tx is not None else "not answered"
        return f"{what} at {self.t_rx * 1000:.1f} ms on connection {self.conn} (node {self.node}) → {answer}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "t_ms": round(self.t_rx * 1000, 1),
            "answered_ms": None if self.t_tx is None else round(self.t_tx * 1000, 1),
            "conn": self.conn,
            "node": self.node,
            "api": self.api,
            "api_version": self.api_version,
            "correlation_id": self.correlation_id,
        }
        request = dict(self.request)
        if self.is_push:
            request["metrics_bytes"] = None if self.metrics_null else len(self.metrics or b"")
        if request:
            out["request"] = request
        if self.t_tx is not None:
            out["answer"] = {"error_code": self.error_code, "error": code_name(self.error_code), **self.answer}
        if self.lab:
            out["lab"] = self.lab
        if self.problem:
            out["problem"] = self.problem
        return out


@dataclass
class ConnectionEvent:
    """A connection opened or closed (``by``: "client" or "lab", with the lab's reason)."""

    t: float
    conn: int
    node: int
    kind: str  # "open" | "close"
    by: str = ""
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "t_ms": round(self.t * 1000, 1),
            "conn": self.conn,
            "node": self.node,
            "event": f"connection {'opened' if self.kind == 'open' else 'closed'}",
        }
        if self.kind == "close":
            out["by"] = self.by
        if self.reason:
            out["reason"] = self.reason
        return out


class Trace:
    """Everything of one run, in the order it happened, and the questions judges ask of it."""

    def __init__(self, t0_ns: int) -> None:
        self.t0_ns = t0_ns
        self.events: list[Exchange | ConnectionEvent] = []
        self.software: tuple[str, str] | None = None
        #: when the client was over: its process exited (or, in --listen, its last connection closed)
        self.client_end: float | None = None
        self.exit_status: int | None = None
        self.exit_detail = ""
        self._seq = 0

    def at(self, ns: int) -> float:
        return (ns - self.t0_ns) / 1e9

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    # ---------------------------------------------------------------------------------------------- queries

    @property
    def exchanges(self) -> list[Exchange]:
        return [e for e in self.events if isinstance(e, Exchange)]

    @property
    def telemetry(self) -> list[Exchange]:
        """Every Get and push, in the order the lab read them."""
        return [e for e in self.events if isinstance(e, Exchange) and e.is_telemetry]

    @property
    def gets(self) -> list[Exchange]:
        return [e for e in self.telemetry if e.is_get]

    @property
    def pushes(self) -> list[Exchange]:
        return [e for e in self.telemetry if e.is_push]

    @property
    def connections(self) -> list[ConnectionEvent]:
        return [e for e in self.events if isinstance(e, ConnectionEvent)]

    def after(self, t: float, *, telemetry_only: bool = True) -> list[Exchange]:
        """The requests read after ``t``."""
        source = self.telemetry if telemetry_only else self.exchanges
        return [e for e in source if e.t_rx > t]

    def first_successful_get(self) -> Exchange | None:
        return next((g for g in self.gets if g.error_code == 0 and g.t_tx is not None), None)

    def last_get_before(self, t: float) -> Exchange | None:
        """The last successful Get answered before ``t``."""
        found = None
        for g in self.gets:
            if g.error_code == 0 and g.t_tx is not None and g.t_tx <= t:
                found = g
        return found

    def closes_by_lab(self) -> list[ConnectionEvent]:
        return [c for c in self.connections if c.kind == "close" and c.by == "lab"]
