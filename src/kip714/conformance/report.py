"""The lab's outputs: the terminal table, ``results.json``, JUnit XML (one testcase per scenario) and one
self-contained ``index.html`` (no script, no outside resource)."""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .results import Client, Result

__all__ = ["client_label", "exit_status", "summary_line", "table", "write_html", "write_json", "write_junit"]

_STATUS_ORDER = ("pass", "fail", "n/a", "error")


def client_label(client: Client | None, listen: Any = None) -> str:
    if listen is not None:
        return f"client connecting to {listen if isinstance(listen, str) else ':'.join(map(str, listen))}"
    if callable(client):
        return getattr(client, "__qualname__", None) or getattr(client, "__name__", None) or repr(client)
    return str(client)


def exit_status(results: Sequence[Result]) -> int:
    """0 when every scenario passed or was n/a, 1 when one failed or could not run (error)."""
    return 1 if any(r.status in ("fail", "error") for r in results) else 0


def summary_line(results: Sequence[Result]) -> str:
    counts = Counter(r.status for r in results)
    return ", ".join(f"{counts[s]} {s}" for s in _STATUS_ORDER if counts[s]) or "no scenario ran"


def table(results: Sequence[Result], width: int = 120) -> str:
    """The terminal table: scenario, verdict, why (cut to the width)."""
    sid = max([len("scenario")] + [len(r.scenario) for r in results])
    lines = [f"{'scenario':<{sid}}  {'verdict':<7}  why", f"{'-' * sid}  {'-' * 7}  {'-' * 3}"]
    room = max(20, width - sid - 11)
    for r in results:
        why = r.why if len(r.why) <= room else r.why[: room - 1] + "…"
        lines.append(f"{r.scenario:<{sid}}  {r.status:<7}  {why}")
    software = next(
        ((r.client_software_name, r.client_software_version) for r in results if r.client_software_name), None
    )
    lines.append("")
    if software:
        lines.append(f"client software: {software[0]} {software[1]}")
    lines.append(summary_line(results))
    return "\n".join(lines)


def write_json(results: Sequence[Result], path: Path) -> None:
    path.write_text(json.dumps([r.to_json() for r in results], indent=2) + "\n")


def write_junit(results: Sequence[Result], path: Path, client: str) -> None:
    """JUnit XML: one ``<testsuite>`` with one ``<testcase>`` per scenario; fail → ``<failure>``, error →
    ``<error>``, n/a → ``<skipped>``; the evidence in ``<system-out>``."""
    counts = Counter(r.status for r in results)
    total_time = sum(r.duration_s for r in results)
    totals = {
        "name": "kip714 conformance",
        "tests": str(len(results)),
        "failures": str(counts["fail"]),
        "errors": str(counts["error"]),
        "skipped": str(counts["n/a"]),
        "time": f"{total_time:.3f}",
    }
    suites = ET.Element("testsuites", totals)  # the one suite's totals are the whole run's
    suite = ET.SubElement(suites, "testsuite", totals)
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="client", value=client)
    software = next((r for r in results if r.client_software_name), None)
    if software is not None:
        ET.SubElement(
            props,
            "property",
            name="client_software",
            value=f"{software.client_software_name} {software.client_software_version}",
        )
    for r in results:
        case = ET.SubElement(
            suite, "testcase", classname="kip714.conformance", name=r.scenario, time=f"{r.duration_s:.3f}"
        )
        detail = "\n".join([f"rule: {r.rule}", *[f"note: {n}" for n in r.evidence.get("notes", [])]])
        if r.status == "fail":
            ET.SubElement(case, "failure", message=r.why, type="fail").text = detail
        elif r.status == "error":
            ET.SubElement(case, "error", message=r.why, type="error").text = detail
        elif r.status == "n/a":
            ET.SubElement(case, "skipped", message=f"n/a: {r.why}")
        ET.SubElement(case, "system-out").text = json.dumps(r.to_json(), indent=1)
    ET.indent(suites)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)


_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #1b1b1b; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid #c8c8c8; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.pass { background: #d8f3dc; } td.fail { background: #ffd6d6; }
td.na { background: #e8e8e8; } td.error { background: #ffe8c2; }
.rule { color: #444; font-style: italic; } .why { font-weight: 600; }
code, .mono { font-family: ui-monospace, monospace; font-size: 12px; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _cls(status: str) -> str:
    return "na" if status == "n/a" else status


def _frame_row(frame: dict[str, Any]) -> str:
    what = frame.get("api") or frame.get("event", "")
    request = frame.get("request")
    answer = frame.get("answer")
    extra = [frame.get("lab", ""), frame.get("problem", ""), frame.get("by", ""), frame.get("reason", "")]
    return (
        "<tr>"
        + "".join(
            f"<td class=mono>{_e(v)}</td>"
            for v in (
                frame.get("t_ms", ""),
                frame.get("answered_ms", "") or "",
                frame.get("conn", ""),
                frame.get("node", ""),
                what,
                json.dumps(request) if request else "",
                json.dumps(answer) if answer else "",
                "; ".join(x for x in extra if x),
            )
        )
        + "</tr>"
    )


def write_html(results: Sequence[Result], path: Path, client: str) -> None:
    """One self-contained page: the summary table, then each scenario's rule, verdict, notes and frames."""
    software = next((r for r in results if r.client_software_name), None)
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        "<title>kip714 conformance</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>KIP-714 conformance</h1>",
        f"<p>Client: <code>{_e(client)}</code>",
    ]
    if software is not None:
        parts.append(f" — software <b>{_e(software.client_software_name)} {_e(software.client_software_version)}</b>")
    parts.append(f"</p><p>{_e(summary_line(results))}</p>")
    parts.append("<table id=summary><tr><th>scenario</th><th>verdict</th><th>why</th></tr>")
    for r in results:
        parts.append(
            f"<tr><td><a href='#{_e(r.scenario)}'>{_e(r.scenario)}</a></td>"
            f"<td class={_cls(r.status)}>{_e(r.status)}</td><td>{_e(r.why)}</td></tr>"
        )
    parts.append("</table>")
    for r in results:
        parts.append(f"<h2 id='{_e(r.scenario)}'>{_e(r.scenario)}</h2>")
        parts.append(
            f"<table><tr><td class={_cls(r.status)}>{_e(r.status)}</td><td class=why>{_e(r.why)}</td></tr></table>"
        )
        parts.append(f"<p class=rule>{_e(r.rule)}</p>")
        notes = r.evidence.get("notes") or []
        if notes:
            parts.append("<ul>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
        frames = r.evidence.get("frames") or []
        if frames:
            parts.append(
                "<table class=frames><tr><th>t (ms)</th><th>answered (ms)</th><th>conn</th><th>node</th>"
                "<th>request / event</th><th>fields</th><th>answer</th><th>lab</th></tr>"
            )
            parts.extend(_frame_row(f) for f in frames)
            parts.append("</table>")
        parts.append(
            f"<p class=mono>PushIntervalMs {_e(r.evidence.get('push_interval_ms'))}, client ran "
            f"{_e(r.evidence.get('client_seconds'))} s, exit status {_e(r.evidence.get('exit_status'))}"
            "</p>"
        )
    parts.append("</body></html>\n")
    path.write_text("".join(parts))
