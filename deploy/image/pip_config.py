"""The host's pip configuration for the image build (deploy/image/build.sh), kept out of the image.

``python deploy/image/pip_config.py OUT SEEN_AS`` writes ``OUT/pip.conf``: every setting pip on this host
uses (its configuration files and ``PIP_*`` environment variables merged, as ``pip config list`` prints
them), with the host's CA bundle as ``cert`` when none is set, and copies every host file a setting names (the
CA bundle, a constraints file) under ``OUT/files``, the settings rewritten to name the copies as the build
container sees them (``OUT`` mounted at ``SEEN_AS``). OUT lies in the build context, which the Containerfile
only mounts (``RUN --mount=type=bind``) and never copies: no layer keeps any of it. Packages come from the
package index only: this host's local sources (a folder of wheels, a ``file://`` index) are left out."""

from __future__ import annotations

import configparser
import os
import pathlib
import shutil
import ssl
import subprocess
import sys

#: settings that name where packages come from: the build takes them from the package index only, so their
#: local entries (a folder of wheels, a file:// index on this host) are left out
SOURCES = ("index-url", "extra-index-url", "find-links")


def host_settings(python: str) -> dict[str, dict[str, str]]:
    """pip's effective settings here, by section (``:env:`` settings, from ``PIP_*``, go to ``global``)."""
    listed = subprocess.run(
        [python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    sections: dict[str, dict[str, str]] = {}
    for line in listed:
        key, sep, value = line.partition("=")
        if not sep:
            continue
        section, _, name = key.rpartition(".")
        section = "global" if section in ("", ":env:") else section
        sections.setdefault(section, {})[name] = value.strip().strip("'\"")
    return sections


def remote_only(value: str) -> str:
    """A package source setting without its local entries."""
    return " ".join(w for w in value.split() if not w.startswith(("/", "file:", ".")))


def named_files(value: str) -> list[str]:
    """The host files (that exist) a setting's value names, such as the CA bundle or a constraints file."""
    return [w for w in value.split() if w.startswith("/") and os.path.isfile(w)]


def write(out: pathlib.Path, seen_as: str, settings: dict[str, dict[str, str]]) -> None:
    """``out/pip.conf`` and the copies of the files it names, for a container that mounts ``out`` at
    ``seen_as``."""
    out.mkdir(parents=True, exist_ok=True)
    for values in settings.values():
        for name in list(values):
            value = remote_only(values[name]) if name in SOURCES else values[name]
            for path in named_files(value):
                copy = out / "files" / path.lstrip("/")
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, copy)
                value = value.replace(path, f"{seen_as}/files/{path.lstrip('/')}")
            if value:
                values[name] = value
            else:
                del values[name]
    config = configparser.ConfigParser(interpolation=None)
    for section, values in settings.items():
        config[section] = values
    with open(out / "pip.conf", "w") as f:
        config.write(f)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: pip_config.py OUT SEEN_AS", file=sys.stderr)
        return 2
    settings = host_settings(sys.executable)
    glob = settings.setdefault("global", {})
    if "cert" not in glob:
        bundle = ssl.get_default_verify_paths().cafile
        if bundle and os.path.isfile(bundle):
            glob["cert"] = bundle
    write(pathlib.Path(argv[1]), argv[2], settings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
