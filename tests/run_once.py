"""Inputs that every pytest-xdist worker of a run shares, built by the first worker that needs them.

A module-scoped fixture is built once per worker that runs one of its module's tests, and again each time a
worker comes back to the module after another's tests (pytest tears it down in between): test_spark_scale's
base recording was simulated four times a run (10.8 CPU-s). ``built_once`` builds into a folder of the run's
base temporary directory, which every worker of the run shares, under a file lock."""

from __future__ import annotations

import fcntl
import pathlib
import shutil
from collections.abc import Callable

import pytest


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[pathlib.Path], None]) -> pathlib.Path:
    """``<run's temporary directory>/name``, made by ``build(path)`` if no worker of this run has made it.

    ``build`` must make the same contents whichever worker runs it (a seeded simulation, say). A failed build
    is not marked done: the next worker that asks removes what it left and builds again."""
    base = factory.getbasetemp()
    # under xdist each worker's base is <run>/popen-gwN: their parent is this run's, and only this run's
    root = base.parent if base.name.startswith("popen-gw") else base
    path = root / name
    done = root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also when this worker dies
        if not done.exists():
            if path.exists():  # a build that failed in another worker
                shutil.rmtree(path)
            build(path)
            done.touch()
    return path
