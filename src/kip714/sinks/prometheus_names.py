"""Moved to :mod:`kip714.sinks.prometheus.names`; this old path is kept for one release."""

from __future__ import annotations

import warnings

from .prometheus.names import *  # noqa: F403
from .prometheus.names import __all__  # noqa: F401

warnings.warn("kip714.sinks.prometheus_names moved to kip714.sinks.prometheus.names", DeprecationWarning, stacklevel=2)
