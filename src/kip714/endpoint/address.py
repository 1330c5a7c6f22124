"""Addresses as Kafka's broker prints them (the ``client_source_address`` label)."""

from __future__ import annotations

import ipaddress

__all__ = ["java_host_address"]


def java_host_address(host: str) -> str:
    """Java's ``InetAddress.getHostAddress()`` text: IPv4 dotted, IPv6 fully uncompressed hex groups
    without leading zeros (``0:0:0:0:0:0:0:1``), scope kept."""
    addr, _, scope = host.partition("%")
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return host
    if ip.version == 4:
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    groups = ":".join(format(int.from_bytes(ip.packed[i : i + 2], "big"), "x") for i in range(0, 16, 2))
    return groups + (f"%{scope}" if scope else "")
