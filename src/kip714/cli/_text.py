"""Plain-text output shared by the subcommands."""

from __future__ import annotations

import re
from collections.abc import Sequence

import kip714


def table(rows: Sequence[Sequence[object]], headers: Sequence[str]) -> str:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cells[0], widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells[1:]]
    return "\n".join(lines)


def codec_name(ctype: int) -> str:
    try:
        return kip714.CompressionType(ctype).name.lower()
    except ValueError:
        return f"unknown({ctype})"


_ROLE = re.compile(r":[a-z]+:`~?([^`<]*?)\s*(?:<[^>]*>)?`")


def plain(doc: str | None) -> str:
    """A docstring as plain text for ``--help``: reST roles (``:class:`~kip714.wire.Request``` →
    ``Request``) and inline literals (````x```` → ``x``) without their markup."""
    if not doc:
        return ""

    def role(m: re.Match) -> str:
        target = m.group(1)
        return target.rsplit(".", 1)[-1] if m.group(0).startswith(":", 0) and "`~" in m.group(0) else target

    return _ROLE.sub(role, doc).replace("``", "")
