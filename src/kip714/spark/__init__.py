"""kip714 on Spark (public): read recordings (one, a fleet's root of them, several: :func:`read_recording_df`),
decode them and frames into a points table (mapInArrow), SQL functions
(Arrow UDTF), the ``kip714 pipeline`` job (:mod:`.pipeline`) and the ``kip714 report`` job (:mod:`.report`).

``__all__`` is the public part. ``import kip714`` does not import this package (it needs pyspark, the
``spark`` extra): ``import kip714.spark``."""

from __future__ import annotations

from .decode import (
    DEFAULT_MAX_OUTPUT,
    MAX_BATCH_BYTES,
    MAX_BATCH_ROWS,
    DecodeResult,
    decode_frames,
    decode_payloads,
    points_schema,
    read_recording_df,
    register,
)
from .report import Report, ReportOptions, report
from .session import default_driver_memory, local_session, session_defaults

__all__ = [
    "DEFAULT_MAX_OUTPUT",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_ROWS",
    "DecodeResult",
    "decode_frames",
    "decode_payloads",
    "default_driver_memory",
    "local_session",
    "points_schema",
    "read_recording_df",
    "register",
    "session_defaults",
    "Report",
    "ReportOptions",
    "report",
]
