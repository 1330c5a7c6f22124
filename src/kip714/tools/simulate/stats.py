"""What a fleet's run did: requests, answers by error code, payload bytes, codecs; the progress line and
the summary ``kip714 simulate`` prints."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kip714._enums import ErrorCode

__all__ = ["PROTOCOL_ERROR_CODES", "FleetStats"]

#: Error codes that mean a client and the broker disagree about the protocol (not flow control).
PROTOCOL_ERROR_CODES = frozenset(
    {
        int(ErrorCode.UNSUPPORTED_VERSION),
        int(ErrorCode.INVALID_REQUEST),
        int(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
        int(ErrorCode.INVALID_RECORD),
        int(ErrorCode.UNKNOWN_SUBSCRIPTION_ID),
        int(ErrorCode.TELEMETRY_TOO_LARGE),
    }
)


def _fmt_ms(ms: int) -> str:
    s = ms // 1000
    return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"


@dataclass
class FleetStats:
    """What a run did. ``get_results`` / ``push_results`` count responses by error code."""

    clients: int = 0
    started: int = 0
    requests: Counter[str] = field(default_factory=Counter)  # API name -> count
    get_results: Counter[int] = field(default_factory=Counter)  # error code -> count
    push_results: Counter[int] = field(default_factory=Counter)
    accepted: int = 0  # pushes answered with error code 0 (including empty payloads)
    payloads: int = 0  # non-empty accepted payloads handed to receivers / callbacks
    terminating_pushes: int = 0
    payload_bytes: int = 0  # wire (compressed) bytes of every push
    uncompressed_bytes: int = 0  # OTLP bytes of the accepted payloads
    by_compression: Counter[str] = field(default_factory=Counter)
    recorded_rows: int = 0
    failed_requests: int = 0  # transport failures (TCP mode)
    connect_failures: int = 0
    simulated_ms: int = 0
    wall_s: float = 0.0

    @property
    def pushes(self) -> int:
        return self.requests["PushTelemetry"]

    @property
    def gets(self) -> int:
        return self.requests["GetTelemetrySubscriptions"]

    @property
    def errors_by_code(self) -> dict[int, int]:
        """Every non-zero error code of either API with its count."""
        out: Counter[int] = Counter()
        for results in (self.get_results, self.push_results):
            for code, n in results.items():
                if code:
                    out[code] += n
        return dict(out)

    @property
    def protocol_errors(self) -> dict[int, int]:
        """The errors in :data:`PROTOCOL_ERROR_CODES` (everything but throttling)."""
        return {c: n for c, n in self.errors_by_code.items() if c in PROTOCOL_ERROR_CODES}

    @property
    def pushes_per_s(self) -> float:
        return self.pushes / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "clients": self.clients,
            "started": self.started,
            "requests": dict(self.requests),
            "get_results": {_code_name(c): n for c, n in sorted(self.get_results.items())},
            "push_results": {_code_name(c): n for c, n in sorted(self.push_results.items())},
            "accepted": self.accepted,
            "payloads": self.payloads,
            "terminating_pushes": self.terminating_pushes,
            "payload_bytes": self.payload_bytes,
            "uncompressed_bytes": self.uncompressed_bytes,
            "by_compression": dict(self.by_compression),
            "recorded_rows": self.recorded_rows,
            "failed_requests": self.failed_requests,
            "connect_failures": self.connect_failures,
            "simulated_ms": self.simulated_ms,
            "wall_s": round(self.wall_s, 3),
            "pushes_per_s": round(self.pushes_per_s, 1),
        }

    def progress_line(self) -> str:
        errs = sum(self.errors_by_code.values())
        return (
            f"sim {_fmt_ms(self.simulated_ms)}  wall {self.wall_s:6.1f}s  gets {self.gets}  "
            f"pushes {self.pushes}  accepted {self.accepted}  errors {errs}  "
            f"{self.pushes_per_s:,.0f} pushes/s"
        )

    def summary(self) -> str:
        errs = self.errors_by_code
        err_text = ", ".join(f"{_code_name(c)}={n}" for c, n in sorted(errs.items())) or "none"
        codecs = ", ".join(f"{k.lower()}={n}" for k, n in sorted(self.by_compression.items())) or "-"
        lines = [
            f"clients: {self.clients} ({self.started} started)",
            f"simulated time: {_fmt_ms(self.simulated_ms)} in {self.wall_s:.2f} s wall "
            f"({self.pushes_per_s:,.0f} pushes/s)",
            f"requests: GetTelemetrySubscriptions={self.gets} PushTelemetry={self.pushes} "
            f"(terminating {self.terminating_pushes})",
            f"accepted pushes: {self.accepted} (payloads {self.payloads})",
            f"errors by code: {err_text}",
            f"payload bytes: {self.payload_bytes:,} on the wire, {self.uncompressed_bytes:,} OTLP; codecs: {codecs}",
        ]
        if self.failed_requests or self.connect_failures:
            lines.append(f"transport failures: {self.failed_requests}, connect failures: {self.connect_failures}")
        if self.recorded_rows:
            lines.append(f"recorded rows: {self.recorded_rows}")
        return "\n".join(lines)


def _code_name(code: int) -> str:
    try:
        return f"{ErrorCode(code).name}({code})" if code else "NONE(0)"
    except ValueError:
        return str(code)
