"""What a run looks like to a reader: numbers in words (``1.45 kB``, ``3.29 µs``, ``38.5 M/s``, ``18.1×``),
the result table as text or Markdown, and the JSON encoder's fallback for values JSON has no word for."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .payloads import KB

__all__ = [
    "fmt_bytes",
    "fmt_ns",
    "fmt_rate",
    "fmt_ratio",
    "json_default",
    "render_markdown",
    "render_table",
    "size_name",
    "size_name_points",
]

SIZE_NAMES = {
    64: "64 B",
    256: "256 B",
    KB: "1 KB",
    4 * KB: "4 KB",
    16 * KB: "16 KB",
    64 * KB: "64 KB",
    100 * KB: "100 KB",
    256 * KB: "256 KB",
    1_000_000: "1 MB",
    1 << 20: "1 MiB",
}


def size_name(n: int) -> str:
    """A nominal size in words: 4096 → "4 KB" (the names the groups' sizes go by)."""
    return SIZE_NAMES.get(n, f"{n} B")


def size_name_points(n: int) -> str:
    """10^5 points → "1e5 points"."""
    exp = int(math.log10(n)) if n > 0 else 0
    mant = n / 10**exp
    return f"{mant:g}e{exp} points" if mant != 1 else f"1e{exp} points"


def fmt_bytes(n: int) -> str:
    """Actual sizes, decimal units: 1450 → '1.45 kB'."""
    if n < 1000:
        return f"{n} B"
    if n < 1_000_000:
        return f"{n / 1e3:.3g} kB"
    return f"{n / 1e6:.3g} MB"


def fmt_ns(ns: float) -> str:
    """A time in nanoseconds in words, three significant digits: 3290.4 → '3.29 µs'."""
    if ns < 1_000:
        return f"{ns:,.0f} ns" if ns >= 100 else f"{ns:.1f} ns"
    if ns < 1_000_000:
        return f"{ns / 1e3:,.3g} µs" if ns < 100_000 else f"{ns / 1e3:,.0f} µs"
    if ns < 1e9:
        return f"{ns / 1e6:,.3g} ms" if ns < 1e8 else f"{ns / 1e6:,.0f} ms"
    return f"{ns / 1e9:,.3g} s"


def fmt_rate(per_s: float) -> str:
    """A rate per second in words: 38.5e6 → '38.5 M/s'."""
    if per_s >= 1e6:
        return f"{per_s / 1e6:.3g} M/s"
    if per_s >= 1e3:
        return f"{per_s / 1e3:.3g} k/s"
    return f"{per_s:.3g}/s"


def fmt_ratio(r: float | None) -> str:
    """A ratio with its × sign, or '—' when there is none (no peer)."""
    if r is None:
        return "—"
    return f"{r:.3g}×" if r < 100 else f"{r:,.0f}×"


def render_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows as an aligned text table: operation, kip714, peer, ratio, goal, met."""
    headers = ("operation", "kip714", "peer", "ratio", "goal", "met")
    cells = []
    for row in rows:
        cells.append(
            (
                row["operation"],
                row["kip714_text"],
                row["peer_text"],
                fmt_ratio(row["ratio"]),
                row["goal"]["text"] if row["goal"] else "—",
                {True: "yes", False: "NO", None: "—"}[row["met"]],
            )
        )
    widths = [max(len(str(c[i])) for c in [headers, *cells]) for i in range(len(headers))]
    line = lambda c: "  ".join(str(x).ljust(w) for x, w in zip(c, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers), "  ".join("-" * w for w in widths)] + [line(c) for c in cells])


def render_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The same table in Markdown (``kip714 bench --markdown``)."""
    out = ["| operation | kip714 | peer | ratio | goal | met |", "|---|---|---|---|---|---|"]
    for row in rows:
        met = {True: "yes", False: "**no**", None: "—"}[row["met"]]
        out.append(
            f"| {row['operation']} | {row['kip714_text']} | {row['peer_text']} | {fmt_ratio(row['ratio'])} "
            f"| {row['goal']['text'] if row['goal'] else '—'} | {met} |"
        )
    return "\n".join(out)


def json_default(obj: Any) -> Any:
    """``json.dumps(default=...)``: NaN and infinities as null, arrays as lists, anything else as text."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)
