"""Plain-text tables, as the command line and the tools print them (below both: the tools never import the
command line)."""

from __future__ import annotations

from collections.abc import Sequence


def table(rows: Sequence[Sequence[object]], headers: Sequence[str]) -> str:
    """``rows`` under ``headers`` in left-aligned columns, a dashed rule under the headers (None prints empty)."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cells[0], widths)).rstrip(), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells[1:]]
    return "\n".join(lines)
