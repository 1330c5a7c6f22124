"""The one duration syntax and the one size syntax of kip714 (the command line, the Spark job's arguments,
the simulator), with their argparse types.

- durations: ``90s``, ``10m``, ``2h``, ``1h30m``, ``250ms``, ``2d`` or a plain number of seconds (``2.5``);
- sizes: ``64MB``, ``512KiB``, ``1g`` or a plain number of bytes (``K``/``M``/``G`` are powers of 1024, as
  Spark and the JVM read them).

It sits below every layer that reads them (it imports only the standard library), so neither the tools nor
the Spark job go through the command line for them.
"""

from __future__ import annotations

import argparse
import re

__all__ = [
    "DURATION_HELP",
    "SIZE_HELP",
    "parse_duration",
    "parse_size",
    "duration",
    "size",
    "format_duration",
    "format_size",
]

_DURATION_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h|d)")
_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(i?b)?")

#: What the duration options say in their help.
DURATION_HELP = "90s, 10m, 2h, 1h30m, 500ms or plain seconds"
#: What the size options say in their help.
SIZE_HELP = "64MB, 512KiB or a number of bytes"


def parse_duration(text: str | int | float) -> int:
    """``"10m"``, ``"600s"``, ``"1h30m"``, ``"250ms"``, ``"2d"`` or a plain number of seconds → milliseconds."""
    if isinstance(text, (int, float)):
        return round(float(text) * 1000)
    s = str(text).strip().lower().replace(" ", "")
    if not s:
        raise ValueError("empty duration")
    try:
        return round(float(s) * 1000)
    except ValueError:
        pass
    total, pos = 0.0, 0
    for m in _DURATION_PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if pos != len(s) or pos == 0:
        raise ValueError(f"not a duration: {text!r} (use e.g. {DURATION_HELP})")
    return round(total)


def parse_size(text: str | int) -> int:
    """``"64MB"``, ``"512KiB"``, ``"1g"`` or a plain number of bytes → bytes (K, M, G, T are powers of 1024)."""
    if isinstance(text, int):
        return text
    m = _SIZE.fullmatch(str(text).strip().lower())
    if not m:
        raise ValueError(f"not a size: {text!r} (use e.g. {SIZE_HELP})")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2)]
    return int(float(m.group(1)) * scale)


def duration(text: str) -> float:
    """argparse type: a duration (:func:`parse_duration` syntax) in seconds; never negative."""
    try:
        ms = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if ms < 0:
        raise argparse.ArgumentTypeError(f"a duration cannot be negative: {text!r}")
    return ms / 1000.0


def size(text: str) -> int:
    """argparse type: a size (:func:`parse_size` syntax) in bytes."""
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def format_duration(seconds: float) -> str:
    """A duration as the options take it (``60s``, ``10m``, ``1.5s``), for help texts and messages."""
    for unit, scale in (("h", 3600), ("m", 60)):
        if seconds >= scale and seconds % scale == 0:
            return f"{int(seconds // scale)}{unit}"
    return f"{seconds:g}s"


def format_size(n: int) -> str:
    """A size as the options take it (``64MB``), for help texts."""
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)
