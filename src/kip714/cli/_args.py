"""argparse types for what only the command line reads: ports, node ids and host names (durations and sizes
have their one syntax in :mod:`kip714._units`)."""

from __future__ import annotations

import argparse


def _int_in(text: str, low: int, high: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{what} must be {low}-{high}, got {value}")
    return value


def port(text: str) -> int:
    """argparse type: a TCP port to listen on, 0-65535 (0: the system picks a free one)."""
    return _int_in(text, 0, 65535, "a port")


def advertised_port(text: str) -> int:
    """argparse type: a TCP port clients connect to, 1-65535."""
    return _int_in(text, 1, 65535, "a port clients connect to")


def node_id(text: str) -> int:
    """argparse type: a Kafka broker node id (a non-negative int32)."""
    return _int_in(text, 0, 2**31 - 1, "a node id")


def host(text: str) -> str:
    """argparse type: a host name or address without a port (IPv6 bare or in brackets)."""
    import ipaddress

    value = text.strip()
    if not value or any(c.isspace() for c in value):
        raise argparse.ArgumentTypeError(f"not a host name: {text!r}")
    if ":" in value:
        try:
            ipaddress.IPv6Address(value.strip("[]"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"give the host only, without a port: {text!r}") from None
        return value.strip("[]")
    return value
