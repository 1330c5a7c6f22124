"""Writing a :class:`~kip714.spark.report.Report`: JSON, Parquet tables, the terminal summary and one
self-contained HTML page (inline CSS, charts as base64 PNG from matplotlib; no script, no external file),
readable offline.

Only the report's aggregated tables are collected (one row per software × check, per finding, per client
instance, per error code, per minute): never the points."""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import html
import io
import json
import pathlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .report_checks import CHECKS, INSIGHTS, REQUIRED_METRICS_NOTE

if TYPE_CHECKING:
    import pyarrow as pa
    from _typeshed import DataclassInstance
    from matplotlib.figure import Figure
    from pyspark.sql import DataFrame

_SW = ("client_software_name", "client_software_version")
CONFORMANCE_FIELDS = ("client_software_name", "client_software_version", "check", "status", "failures", "examples")
INSIGHT_FIELDS = ("client_instance_id", "client_id", "insight", "metric", "value", "threshold", "setting")
_SHORT = {
    "payload_decodes": "decodes",
    "metric_naming": "naming",
    "subscribed_only": "subscribed",
    "temporality": "temporal",
    "start_time_stable": "start",
    "no_duplicate_series": "no-dup",
    "standard_coverage": "coverage",
    "resource_labels": "labels",
    "push_interval": "interval",
    "compression_accepted": "compress",
    "terminating_push": "terminate",
    "one_client_per_instance": "one-client",
    "error_responses": "errors",
}


class _ReportTables(Protocol):
    """What is written of a :class:`~kip714.spark.report.Report`: its tables and its options (a Protocol:
    :mod:`.report` imports this module)."""

    @property
    def conformance(self) -> DataFrame: ...
    @property
    def insights(self) -> DataFrame: ...
    @property
    def clients(self) -> DataFrame: ...
    @property
    def errors(self) -> DataFrame: ...
    @property
    def timeline(self) -> DataFrame: ...
    @property
    def options(self) -> DataclassInstance: ...


#: Rows of a collected table, cells as Spark gives them.
_TableRow = dict[str, Any]


def _rows(df: DataFrame, order: Sequence[str] = ()) -> list[_TableRow]:
    if order:
        df = df.orderBy(*order)
    return [r.asDict(recursive=True) for r in df.collect()]


def collect(rep: _ReportTables) -> dict[str, Any]:
    """The report's tables as lists of dicts (aggregates only)."""
    conformance = _rows(rep.conformance, (*_SW, "_order"))
    insights = _rows(rep.insights, ("_order", "client_instance_id", "metric"))
    for r in conformance + insights:
        r.pop("_order", None)
    return {
        "conformance": conformance,
        "insights": insights,
        "clients": _rows(rep.clients, ("client_software_name", "client_id", "client_instance_id")),
        "errors": _rows(rep.errors, (*_SW, "error_code")),
        "timeline": _rows(rep.timeline, ("minute_ms", *_SW)),
    }


def write_report(rep: _ReportTables, out: pathlib.Path, *, summary: bool = True) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    data = collect(rep)
    (out / "conformance.json").write_text(
        json.dumps([{k: r[k] for k in CONFORMANCE_FIELDS} for r in data["conformance"]], indent=1) + "\n"
    )
    (out / "insights.json").write_text(
        json.dumps([{k: r[k] for k in INSIGHT_FIELDS} for r in data["insights"]], indent=1) + "\n"
    )
    tables = out / "tables"
    tables.mkdir(exist_ok=True)
    for name in ("conformance", "insights", "clients", "errors", "timeline"):
        df = getattr(rep, name)
        schema = _arrow_schema(df)
        pq.write_table(pa.Table.from_pylist(data[name], schema=schema), tables / f"{name}.parquet")
    text = summary_text(data, out)
    data["summary"] = text
    (out / "summary.txt").write_text(text + "\n")
    (out / "report.html").write_text(render_html(data, rep.options), encoding="utf-8")
    return data


def _arrow_schema(df: DataFrame) -> pa.Schema:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    return pa.schema([pa.field(f.name, to_arrow_type(f.dataType)) for f in df.schema.fields if f.name != "_order"])


# ------------------------------------------------------------------------------------------ text


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def summary_text(data: dict[str, Any], out: pathlib.Path | None = None) -> str:
    """The terminal summary: the conformance matrix, the failures with examples, the flagged clients."""
    clients, conf, ins = data["clients"], data["conformance"], data["insights"]
    pushes = sum(c["pushes"] for c in clients)
    points = sum(c["points"] or 0 for c in clients)
    software = sorted({(r["client_software_name"], r["client_software_version"]) for r in conf})
    lines = [
        f"kip714 report: {len(clients)} client instances, {len(software)} client software versions, "
        f"{pushes:,} pushes, {points:,} data points",
        "",
        "Conformance (per client software):",
    ]
    checks = list(CHECKS)
    width = max([len(f"{n} {v}") for n, v in software] + [8])
    lines.append("  " + "software".ljust(width) + " " + " ".join(_SHORT[c].rjust(9) for c in checks))
    by_sw: dict[tuple[str, str], dict[str, _TableRow]] = {}
    for r in conf:
        by_sw.setdefault((r["client_software_name"], r["client_software_version"]), {})[r["check"]] = r
    for sw in software:
        cells = " ".join(by_sw[sw].get(c, {}).get("status", "-").upper().rjust(9) for c in checks)
        lines.append("  " + f"{sw[0]} {sw[1]}".ljust(width) + " " + cells)
    fails = [r for r in conf if r["status"] == "fail"]
    if fails:
        lines += ["", "Failures:"]
        for r in fails:
            ex = ", ".join(r["examples"] or [])
            lines.append(
                f"  {r['client_software_name']} {r['client_software_version']}: {r['check']}: "
                f"{r['failures']:,} of {r['checked']:,} {r['unit']}" + (f" (e.g. {ex})" if ex else "")
            )
            if r.get("detail"):
                lines.append(f"      {r['detail']}")
    flagged = sorted({r["client_instance_id"] for r in ins})
    lines += ["", f"Insights: {len(flagged)} of {len(clients)} clients flagged" + (":" if ins else "")]
    for r in ins:
        setting = f"  → look at {r['setting']}" if r.get("setting") else ""
        lines.append(
            f"  {r['insight']:<16} {r['client_id'] or r['client_instance_id']:<28} {r['metric']} = "
            f"{_fmt(r['value'])} (threshold {_fmt(r['threshold'])}){setting}"
        )
    if out is not None:
        lines += [
            "",
            f"Report: {out / 'report.html'} (tables in {out / 'tables'}, "
            f"{out / 'conformance.json'}, {out / 'insights.json'})",
        ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ HTML

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:2em;color:#1d232a;
     background:#fff;max-width:1400px}
h1{font-size:1.6em;margin-bottom:.2em} h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ccd;
     padding-bottom:.2em} .muted{color:#667}
table{border-collapse:collapse;margin:.6em 0;font-size:.88em} th,td{border:1px solid #d5d9e0;padding:.3em .55em;
     text-align:left;vertical-align:top} th{background:#eef1f6} td.num{text-align:right}
td.pass{background:#d8f3dc;color:#1b4332;font-weight:600;text-align:center}
td.fail{background:#ffd6d6;color:#7a0000;font-weight:600;text-align:center}
td.na{background:#f1f1f1;color:#777;text-align:center}
.cards{display:flex;gap:1em;flex-wrap:wrap} .card{border:1px solid #d5d9e0;border-radius:6px;padding:.6em 1em;
     min-width:9em} .card b{font-size:1.5em;display:block}
img.chart{max-width:100%;border:1px solid #e3e6eb;margin:.5em 0} code{font-size:.92em}
"""


def _e(v: Any) -> str:
    return html.escape(_fmt(v) if not isinstance(v, str) else v)


def _table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], classes: Sequence[Sequence[str]] | None = None
) -> str:
    out = ["<table><thead><tr>", *[f"<th>{html.escape(h)}</th>" for h in headers], "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        out.append("<tr>")
        for j, cell in enumerate(row):
            cls = (classes[i][j] if classes else None) or (
                "num" if isinstance(cell, (int, float)) and not isinstance(cell, bool) else ""
            )
            out.append(f'<td class="{cls}">{_e(cell)}</td>' if cls else f"<td>{_e(cell)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _charts(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(title, base64 PNG) charts; none when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    charts = []

    def png(fig: Figure) -> str:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
        plt.close(fig)
        return base64.b64encode(buf.getvalue()).decode("ascii")

    timeline = data["timeline"]
    if timeline:
        series: dict[str, dict[int, int]] = {}
        for r in timeline:
            key = f"{r['client_software_name']} {r['client_software_version']}"
            series.setdefault(key, {})[r["minute_ms"]] = r["pushes"]
        minutes = sorted({r["minute_ms"] for r in timeline})
        xs = [_dt.datetime.fromtimestamp(m / 1000, _dt.timezone.utc) for m in minutes]
        fig, ax = plt.subplots(figsize=(9, 3.2))
        bottom = [0] * len(minutes)
        for key, counts in sorted(series.items()):
            ys = [counts.get(m, 0) for m in minutes]
            # matplotlib's date converter places datetimes on the axis; its stubs take numbers only
            ax.bar(xs, ys, bottom=bottom, width=1 / 1440 * 0.9, label=key)  # type: ignore[arg-type]
            bottom = [b + y for b, y in zip(bottom, ys)]
        ax.set_ylabel("pushes per minute")
        ax.legend(fontsize=7, loc="upper left")
        fig.autofmt_xdate()
        charts.append(("Pushes per minute, by client software (UTC)", png(fig)))
    ins = data["insights"]
    if ins:
        findings: dict[str, int] = {}
        for r in ins:
            findings[r["insight"]] = findings.get(r["insight"], 0) + 1
        names = [n for n in INSIGHTS if n in findings]
        fig, ax = plt.subplots(figsize=(6, 2.6))
        ax.barh(names[::-1], [findings[n] for n in names[::-1]], color="#c0392b")
        ax.set_xlabel("findings")
        charts.append(("Findings per insight", png(fig)))
    errors = data["errors"]
    if errors:
        by: dict[str, int] = {}
        for r in errors:
            by[r["error"]] = by.get(r["error"], 0) + r["count"]
        fig, ax = plt.subplots(figsize=(6, 2.6))
        ax.barh(list(by)[::-1], list(by.values())[::-1], color="#d68910")
        ax.set_xlabel("error responses")
        charts.append(("Error responses by code", png(fig)))
    return charts


def render_html(data: dict[str, Any], options: DataclassInstance) -> str:
    conf, ins, clients = data["conformance"], data["insights"], data["clients"]
    software = sorted({(r["client_software_name"], r["client_software_version"]) for r in conf})
    by_sw: dict[tuple[str, str], dict[str, _TableRow]] = {}
    for r in conf:
        by_sw.setdefault((r["client_software_name"], r["client_software_version"]), {})[r["check"]] = r
    checks = list(CHECKS)
    fails = [r for r in conf if r["status"] == "fail"]
    flagged = {r["client_instance_id"] for r in ins}
    parts = [
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>kip714 report</title>"
        f"<style>{_CSS}</style></head><body>",
        "<h1>kip714 report</h1>",
        f"<p class='muted'>KIP-714 client telemetry: conformance per client software and insights per client. "
        f"Generated {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M UTC}.</p>",
        "<div class='cards'>",
        *[
            f"<div class='card'><b>{v:,}</b>{html.escape(k)}</div>"
            for k, v in (
                ("client instances", len(clients)),
                ("client software versions", len(software)),
                ("pushes", sum(c["pushes"] for c in clients)),
                ("data points", sum(c["points"] or 0 for c in clients)),
                ("failing checks", len(fails)),
                ("clients flagged", len(flagged)),
            )
        ],
        "</div>",
        "<h2>Conformance</h2>",
    ]
    rows: list[list[Any]] = []
    classes: list[list[str]] = []
    for sw in software:
        row, cls = [sw[0], sw[1]], ["", ""]
        for c in checks:
            st = by_sw[sw].get(c, {}).get("status", "n/a")
            row.append(st)
            cls.append({"pass": "pass", "fail": "fail"}.get(st, "na"))
        rows.append(row)
        classes.append(cls)
    parts.append(_table(["software", "version"] + [_SHORT[c] for c in checks], rows, classes))
    parts.append("<h3>Failures</h3>")
    if fails:
        parts.append(
            _table(
                ["software", "version", "check", "failures", "checked", "unit", "examples", "detail"],
                [
                    [
                        r["client_software_name"],
                        r["client_software_version"],
                        r["check"],
                        r["failures"],
                        r["checked"],
                        r["unit"],
                        ", ".join(r["examples"] or []),
                        r.get("detail") or "",
                    ]
                    for r in fails
                ],
            )
        )
    else:
        parts.append("<p>No check failed.</p>")
    parts.append("<h3>The checks and the KIP-714 rules they test</h3>")
    parts.append(
        _table(
            ["check", "column", "tests", "KIP-714 rule", "counted in"],
            [[c, _SHORT[c], t, rule, unit] for c, (t, rule, unit) in CHECKS.items()],
        )
    )
    parts.append(f"<p class='muted'>{html.escape(REQUIRED_METRICS_NOTE)}.</p>")
    parts.append("<h2>Insights</h2>")
    if ins:
        parts.append(
            _table(
                [
                    "insight",
                    "client",
                    "client_instance_id",
                    "software",
                    "metric",
                    "value",
                    "threshold",
                    "setting",
                    "detail",
                ],
                [
                    [
                        r["insight"],
                        r["client_id"] or "",
                        r["client_instance_id"],
                        f"{r['client_software_name']} {r['client_software_version']}",
                        r["metric"],
                        r["value"],
                        r["threshold"],
                        r["setting"] or "",
                        r.get("detail") or "",
                    ]
                    for r in ins
                ],
            )
        )
    else:
        parts.append("<p>No client crossed a threshold.</p>")
    parts.append(_table(["insight", "flags"], [[k, v] for k, v in INSIGHTS.items()]))
    opts = ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(options).items())
    parts.append(f"<p class='muted'>Thresholds: {html.escape(opts)}</p>")
    charts = _charts(data)
    if charts:
        parts.append("<h2>Charts</h2>")
        for title, b64 in charts:
            parts.append(
                f"<h3>{html.escape(title)}</h3><img class='chart' alt='{html.escape(title)}' "
                f"src='data:image/png;base64,{b64}'>"
            )
    if data["errors"]:
        parts.append("<h2>Error responses</h2>")
        parts.append(
            _table(
                ["software", "version", "code", "error", "pushes"],
                [
                    [r["client_software_name"], r["client_software_version"], r["error_code"], r["error"], r["count"]]
                    for r in data["errors"]
                ],
            )
        )
    parts.append("<h2>Clients</h2>")
    limit = 500
    shown = sorted(clients, key=lambda c: (c["client_instance_id"] not in flagged, c["client_id"] or ""))[:limit]
    parts.append(
        _table(
            [
                "client",
                "client_instance_id",
                "software",
                "kind",
                "pushes",
                "points",
                "first push (UTC)",
                "terminated",
                "left",
                "error responses",
                "early pushes",
                "gaps",
            ],
            [
                [
                    c["client_id"] or "",
                    c["client_instance_id"],
                    f"{c['client_software_name']} {c['client_software_version']}",
                    c["kind"],
                    c["pushes"],
                    c["points"],
                    _dt.datetime.fromtimestamp(c["first_push_ms"] / 1000, _dt.timezone.utc).strftime(
                        "%Y-%m-%d %H:%M:%S"
                    ),
                    str(c["terminated"]).lower(),
                    str(c["left"]).lower(),
                    c["error_responses"],
                    c["early_pushes"],
                    c["gaps"],
                ]
                for c in shown
            ],
        )
    )
    if len(clients) > limit:
        parts.append(f"<p class='muted'>{len(clients) - limit:,} more clients in tables/clients.parquet.</p>")
    parts.append("</body></html>")
    return "\n".join(parts)
