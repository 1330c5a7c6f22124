"""kip714 on Spark: decode recordings and frames into a points table (mapInArrow), SQL functions (Arrow
UDTF) and the ``kip714 pipeline`` job (:mod:`.pipeline`)."""

from __future__ import annotations

from .decode import (
    DEFAULT_MAX_OUTPUT,
    DecodeResult,
    decode_frames,
    decode_payloads,
    local_session,
    points_schema,
    register,
)

__all__ = ["DEFAULT_MAX_OUTPUT", "DecodeResult", "decode_frames", "decode_payloads", "local_session",
           "points_schema", "register"]
