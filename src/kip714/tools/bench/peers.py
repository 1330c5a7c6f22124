"""The peers kip714 is measured against: imported when a group needs them, skipped (never faked) when not
installed. A missing peer's cells say so and no number is invented."""

from __future__ import annotations

import importlib
import importlib.metadata
from types import ModuleType

__all__ = ["PEER_DISTS", "PeerMissing", "dist_version", "peer_label", "peer_module"]


class PeerMissing(Exception):
    """A peer package is not installed (or cannot be imported): its measurements are skipped."""


def peer_module(name: str) -> ModuleType:
    """Import a peer's module, or raise PeerMissing. The top-level package is imported first, so a
    package blocked or absent makes every one of its submodules count as missing too."""
    try:
        importlib.import_module(name.split(".")[0])
        return importlib.import_module(name)
    except ImportError as exc:
        raise PeerMissing(f"{name.split('.')[0]} not installed ({exc.__class__.__name__}: {exc})") from None


def dist_version(dist: str) -> str | None:
    """The installed version of distribution ``dist``, or None."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


#: The distributions whose versions every JSON result records (peers and the libraries the groups use).
PEER_DISTS = {
    "kio": "kio",
    "kafka-python": "kafka-python",
    "zstandard": "zstandard",
    "lz4": "lz4",
    "cramjam": "cramjam",
    "python-snappy": "python-snappy",
    "crc32c": "crc32c",
    "google-crc32c": "google-crc32c",
    "protobuf": "protobuf",
    "opentelemetry-proto": "opentelemetry-proto",
    "pyarrow": "pyarrow",
    "pyspark": "pyspark",
    "matplotlib": "matplotlib",
    "numpy": "numpy",
    "pandas": "pandas",
}


def peer_label(dist: str) -> str:
    """``"zstandard 0.25.0"``: a peer's name with its installed version, for a table cell."""
    v = dist_version(dist)
    return f"{dist} {v}" if v else dist
