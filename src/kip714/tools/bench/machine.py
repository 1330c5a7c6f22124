"""Machine probes: what a result was measured on (CPU model, usable cores, memory, load, the Python build,
the git revision of the checkout, the Java version for the Spark groups and every peer's version)."""

from __future__ import annotations

import os
import pathlib
import platform
import subprocess
from typing import Any

import kip714

from .peers import PEER_DISTS, dist_version

__all__ = ["CHECKOUT", "cpu_model", "describe", "git_describe", "java_version", "loadavg", "mem_gib"]

#: The source checkout kip714 sits in (src/kip714/), when it runs from one.
CHECKOUT = pathlib.Path(kip714.__file__).resolve().parents[2]


def describe() -> dict[str, Any]:
    """The machine, the interpreter, kip714 and the peers' versions, as a result's ``machine`` records them."""
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": mem_gib(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "python_build": platform.python_build(),
        "kip714": kip714.__version__,
        "kip714_git": git_describe(),
        "versions": {d: dist_version(d) for d in PEER_DISTS},
    }


def cpu_model() -> str | None:
    """The CPU's model name (/proc/cpuinfo), or what platform knows."""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def mem_gib() -> float | None:
    """Physical memory in GiB, or None where sysconf cannot tell."""
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def loadavg() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, or None (Windows)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):  # not on Windows
        return None


def git_describe() -> str | None:
    """``git describe --always --dirty`` of the checkout, when running from one."""
    root = CHECKOUT
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def java_version() -> str | None:
    """The first line of ``java -version`` (the Spark groups' JVM), or None."""
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=20)
        return (out.stderr or out.stdout).splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
