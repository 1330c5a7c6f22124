"""A small YAML writer for the files kip714 generates (Prometheus rule files and their promtool tests,
Grafana provisioning files): block style, keys in the order given, multi-line strings as literal blocks
(PromQL stays readable), every other string plain when YAML reads it back as the same string and
double-quoted otherwise. Written here rather than taken from PyYAML so that generating them needs nothing
optional, and the output (committed under ``deploy/``) does not move with a library's style."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["dump"]

# plain scalars YAML 1.1/1.2 would read as something else, or that a YAML reader would trip over
_PLAIN = re.compile(r"[A-Za-z_/.$][A-Za-z0-9_ ./$-]*")
_SPECIAL = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, float) else str(value)
    text = str(value)
    if _PLAIN.fullmatch(text) and text.lower() not in _SPECIAL and text == text.strip() and ": " not in text:
        return text
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def _lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, Mapping):
        if not value:
            return [pad + "{}"]
        out: list[str] = []
        for key, item in value.items():
            out.extend(_entry(pad + _scalar(key) + ":", item, indent))
        return out
    if isinstance(value, Sequence) and not isinstance(value, str):
        if not value:
            return [pad + "[]"]
        out = []
        for item in value:
            sub = _lines(item, indent + 2)
            if isinstance(item, (Mapping, list, tuple)) and item:
                out.append(pad + "- " + sub[0][indent + 2 :])
                out.extend(sub[1:])
            else:
                out.extend(_entry(pad + "-", item, indent))
        return out
    return [pad + _scalar(value)]


def _entry(head: str, item: Any, indent: int) -> list[str]:
    """``head`` (``key:`` or ``-``) followed by ``item``: inline for scalars and empty collections, a
    literal block for multi-line strings, nested lines otherwise."""
    if isinstance(item, str) and "\n" in item:
        body = item.rstrip("\n")
        chomp = "" if item.endswith("\n") and not item.endswith("\n\n") else "-"
        return [f"{head} |{chomp}"] + [(" " * (indent + 2) + line).rstrip() for line in body.split("\n")]
    if isinstance(item, (Mapping, list, tuple)) and item:
        return [head] + _lines(item, indent + 2)
    return [f"{head} {_lines(item, 0)[0]}"]


def dump(value: Any) -> str:
    """``value`` (dicts, lists, strings, numbers, booleans, None) as a YAML document."""
    return "\n".join(_lines(value, 0)) + "\n"
