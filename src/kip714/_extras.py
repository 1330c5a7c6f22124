"""The optional extras: which part of kip714 needs which third-party modules, and which extra installs them
(pyproject.toml's ``[project.optional-dependencies]``). :func:`require` raises
:class:`~kip714.errors.MissingExtraError` naming the extra to install when a module is missing.

A module counts as installed when :func:`importlib.util.find_spec` finds it: an installed package that fails
to import is its own error, not a missing extra. This module imports nothing else of kip714 but the error, so
anything may use it (the library classes, the Spark functions, the command line)."""

from __future__ import annotations

import importlib.util

from .errors import MissingExtraError

__all__ = ["PARTS", "available", "require"]

#: Each optional part of kip714 → (the extra that installs it, the modules it imports from that extra).
PARTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "prometheus": ("export", ("prometheus_client", "numpy")),  # PrometheusExporter, --prometheus
    "otlp": ("export", ("urllib3",)),  # OtlpForwarder, --otlp-endpoint
    "spark": ("spark", ("pyspark", "pandas")),  # kip714.spark, pipeline, report
    "uvloop": ("fast", ("uvloop",)),  # serve/proxy --loop uvloop (auto when installed)
    # kip714 dashboards, kip714.operations.grafana (Grafana's SDK needs Python 3.11+)
    "dashboards": ("dashboards", ("grafana_foundation_sdk",)),
    "fleet": ("fleet", ("confluent_kafka",)),  # kip714 proxy --state-topic (librdkafka)
}


def _missing(part: str) -> str | None:
    """The first module ``part`` needs that is not installed, or None."""
    return next((m for m in PARTS[part][1] if importlib.util.find_spec(m) is None), None)


def available(part: str) -> bool:
    """Whether every module ``part`` (a key of :data:`PARTS`) needs is installed."""
    return _missing(part) is None


def require(part: str, what: str) -> None:
    """Raise :class:`MissingExtraError` (``WHAT needs the EXTRA extra: pip install 'kip714[EXTRA]'``) unless
    every module ``part`` needs is installed. ``what``: the class, function or option that needs it."""
    module = _missing(part)
    if module is not None:
        raise MissingExtraError(what, PARTS[part][0], module)
