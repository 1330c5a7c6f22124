"""The benchmark groups by name. Group ``NAME`` is the module ``groups/NAME.py`` (``-`` written ``_``),
whose ``run(bench)`` adds its rows; it is imported only when it runs. ``GROUPS`` is the order of a run and
of ``kip714 bench --only``'s choices."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["GROUPS", "load", "parse_groups"]

GROUPS = (
    "protocol",
    "codec",
    "crc",
    "limiter",
    "broker",
    "otlp",
    "export",
    "spark",
    "proxy",
    "record",
    "endpoint",
    "pipeline-scale",
    "report",
)


def load(name: str) -> Callable[[Any], None]:
    """The ``run(bench: Bench)`` function of group ``name`` (its module imported now; typed loosely so that
    this module need not import the harness, which imports it)."""
    if name not in GROUPS:
        raise KeyError(f"unknown benchmark group {name!r}")
    return importlib.import_module(f"{__package__}.groups.{name.replace('-', '_')}").run


def parse_groups(text: str) -> list[str]:
    """``--only``'s argument: one group name or several, comma-separated (argparse ``type=``)."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in names if x not in GROUPS]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown group {', '.join(bad) or repr(text)}; choose from "
            f"{', '.join(GROUPS)} (comma-separated for several)"
        )
    return names
