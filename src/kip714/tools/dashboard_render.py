"""Pictures of kip714's dashboards without Grafana: each panel drawn with matplotlib from the same PromQL,
evaluated by a real Prometheus (the documentation's pictures; ``tests/test_operations_prometheus.py`` draws
them from the Prometheus it runs, ``KIP714_DOCS_PICTURES=1`` writes them to ``docs/dashboards/``).

:func:`render` lays the panels out on Grafana's 24-column grid: time series and state timelines as lines
(a state's value mapped to its name on the axis), stats as one big number, tables as text. Client-specific
panels keep the title that says who pushes what they show."""

from __future__ import annotations

import math
import pathlib
from collections.abc import Callable, Sequence
from typing import Any

from kip714.operations.panels import Dashboard, Panel, Query

__all__ = ["Series", "render"]

#: One series a query returned: (legend text, times in seconds, values).
Series = tuple[str, Sequence[float], Sequence[float]]


def _legend(template: str, labels: dict[str, str]) -> str:
    out = template
    for k, v in labels.items():
        out = out.replace("{{" + k + "}}", v)
    return out if template else ", ".join(f"{k}={v}" for k, v in labels.items() if k != "__name__") or "value"


def legend_of(query: Query, labels: dict[str, str]) -> str:
    """The legend Grafana shows for a series of ``query`` with ``labels``."""
    return _legend(query.legend, labels)


def _draw(ax: Any, panel: Panel, data: list[list[Series]]) -> None:
    import matplotlib.dates as mdates

    ax.set_title(panel.title, fontsize=8, loc="left")
    series = [s for per_query in data for s in per_query]
    if panel.kind == "stat":
        ax.axis("off")
        values = [s[2][-1] for s in series if len(s[2])]
        text = "no data" if not values else _number(sum(values) if len(values) > 1 else values[0], panel.unit)
        ax.text(0.5, 0.4, text, ha="center", va="center", fontsize=22, color="#1f60c4" if values else "grey")
        return
    if panel.kind == "table":
        ax.axis("off")
        rows = sorted(((s[0], s[2][-1]) for s in series if len(s[2])), key=lambda r: -r[1])[:8]
        for i, (name, value) in enumerate(rows):
            ax.text(0.0, 0.9 - i * 0.11, name[:70], fontsize=6, va="top", family="monospace")
            ax.text(1.0, 0.9 - i * 0.11, _number(value, panel.unit), fontsize=6, va="top", ha="right")
        if not rows:
            ax.text(0.5, 0.5, "no data", ha="center", color="grey")
        return
    import datetime as dt

    for i, (name, xs, ys) in enumerate(series[:40]):
        times = [dt.datetime.fromtimestamp(x, dt.timezone.utc) for x in xs]
        label = name[:48] if i < 10 else None  # a legend of the first ten, as a glance shows
        ax.plot(times, ys, linewidth=1, label=label, drawstyle="steps-post" if panel.kind == "state" else "default")
    if panel.kind == "state" and panel.mappings:
        ax.set_yticks([v for v, _ in panel.mappings], [t for _, t in panel.mappings], fontsize=5)
    else:
        ax.tick_params(axis="y", labelsize=6)
    ax.tick_params(axis="x", labelsize=6)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
    if panel.unit:
        ax.set_ylabel(panel.unit, fontsize=6)
    if panel.min is not None or panel.max is not None:  # the panel's axis bounds, as Grafana draws them
        span = (panel.max or 0) - (panel.min or 0)
        ax.set_ylim(
            None if panel.min is None else panel.min - 0.05 * span,
            None if panel.max is None else panel.max + 0.05 * span,
        )
    if series:
        ax.legend(fontsize=5, loc="upper left", ncol=2, frameon=False)
    else:
        ax.text(0.5, 0.5, "no data", ha="center", transform=ax.transAxes, color="grey")


def _number(value: float, unit: str) -> str:
    if math.isnan(value):
        return "NaN"
    if unit == "percentunit":
        return f"{value * 100:.1f}%"
    suffix = {"ms": " ms", "s": " s", "ops": "/s", "bytes": " B", "Bps": " B/s"}.get(unit, "")
    if abs(value) >= 1e6:
        return f"{value / 1e6:.2f}M{suffix}"
    if abs(value) >= 1e4:
        return f"{value / 1e3:.1f}k{suffix}"
    return f"{value:.3g}{suffix}"


def render(
    dashboard: Dashboard,
    fetch: Callable[[Panel, Query], list[Series]],
    path: str | pathlib.Path,
    dpi: int = 72,
) -> pathlib.Path:
    """Draw ``dashboard`` to the PNG ``path``; ``fetch(panel, query)`` returns a query's series (stats and
    tables: their last value counts)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Grafana's grid: rows of panels 24 columns wide, each panel its width, the row as tall as its tallest
    placed: list[tuple[Panel, int, int]] = []  # (panel, x, y) in grid units
    y = 0
    for row in dashboard.rows:
        x, row_h = 0, 0
        for p in row.panels:
            if x + p.width > 24:
                x, y = 0, y + row_h
                row_h = 0
            placed.append((p, x, y))
            x += p.width
            row_h = max(row_h, p.height)
        y += row_h
    unit_in, head_in, width_in = 0.32, 0.5, 16.0
    height_in = head_in + y * unit_in
    fig = plt.figure(figsize=(width_in, height_in), dpi=dpi)
    fig.text(0.005, 1 - 0.15 / height_in, dashboard.title, fontsize=13, va="top", weight="bold")
    margin = 0.03  # of the width, left and right
    for p, px, py in placed:
        # each cell keeps room above for its title and below for the time axis
        left = margin + (1 - 2 * margin) * px / 24 + 0.012
        width = (1 - 2 * margin) * p.width / 24 - 0.02
        top_in = head_in + py * unit_in + 0.3
        bottom_in = head_in + (py + p.height) * unit_in - 0.35
        ax = fig.add_axes((left, 1 - bottom_in / height_in, width, (bottom_in - top_in) / height_in))
        _draw(ax, p, [fetch(p, q) for q in p.queries])
    out = pathlib.Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return out
