"""OTLP MetricsData → Arrow (public): the native decoder's Python face and its column schema.

``__all__`` is the public part (the decoders are also in ``kip714``).

:func:`decode_metrics` (one payload), :func:`decode_metrics_batch` (many at once) and
:class:`MetricsAccumulator` (payloads appended one by one as they arrive, a table per batch: the per-push
path) are implemented in the native ``kip714._otlp``;
:mod:`kip714.otlp.schema` holds the column contract; :mod:`kip714.otlp.reference` (protobuf + Python) is the
independent reference used by the tests, the benchmark peer and ``kip714 decode``'s JSON rendering."""

from __future__ import annotations

import typing as _typing

from .schema import COLUMNS

__all__ = ["COLUMNS", "decode_metrics", "decode_metrics_batch", "MetricsAccumulator"]

#: the native decoder's names, from ``kip714._otlp`` on first use: the native module imports
#: :mod:`kip714.otlp.schema` (the column contract) while it initialises, which runs this package first
_NATIVE = ("MetricsAccumulator", "decode_metrics", "decode_metrics_batch")

if _typing.TYPE_CHECKING:
    from .._otlp import MetricsAccumulator, decode_metrics, decode_metrics_batch
else:

    def __getattr__(name: str) -> object:
        if name not in _NATIVE:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module("kip714._otlp"), name)
        globals()[name] = value
        return value
