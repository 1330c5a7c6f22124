"""How many examples a property test draws: its full count in ``make test`` (and CI), a share of it in
``make check`` (``KIP714_EXAMPLES=0.25``), so that the quick loop stays quick while every run still explores."""

from __future__ import annotations

import math
import os

SCALE = float(os.environ.get("KIP714_EXAMPLES", "1"))


def examples(n: int) -> int:
    """``n`` scaled by ``KIP714_EXAMPLES`` (default 1), never fewer than 10."""
    return max(10, math.ceil(n * SCALE))
