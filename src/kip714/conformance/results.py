"""What a conformance run returns: one :class:`Result` per scenario, and the client under test (:data:`Client`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Client", "Result"]

#: The client under test: a command template (``{bootstrap}``, ``{seconds}``), a built-in name, or a function
#: ``client(bootstrap, seconds)`` run in a thread.
Client = str | Callable[[str, float], Any]


@dataclass
class Result:
    """One scenario's verdict, as ``results.json`` holds it."""

    scenario: str
    status: str
    why: str
    rule: str
    evidence: dict[str, Any]
    client_software_name: str | None = None
    client_software_version: str | None = None
    duration_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "status": self.status,
            "why": self.why,
            "rule": self.rule,
            "evidence": self.evidence,
            "client_software_name": self.client_software_name,
            "client_software_version": self.client_software_version,
        }
