"""Plain-text output shared by the subcommands (tables: :mod:`kip714._table`)."""

from __future__ import annotations

import re

import kip714


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

    def role(m: re.Match[str]) -> str:
        target = m.group(1)
        return target.rsplit(".", 1)[-1] if m.group(0).startswith(":", 0) and "`~" in m.group(0) else target

    return _ROLE.sub(role, doc).replace("``", "")
