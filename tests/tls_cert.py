"""A self-signed certificate for 127.0.0.1/localhost made with the ``openssl`` CLI (TLS tests)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def make_cert(directory: Path, name: str = "cert") -> tuple[str, str]:
    """``(cert.pem, key.pem)`` of a new self-signed certificate (its own CA) in ``directory``."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = directory / f"{name}.pem", directory / f"{name}-key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)
