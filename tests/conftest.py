"""Shared fixtures. Spark tests share one local session per test run (starting one costs seconds)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from kip714.spark import local_session

    session = local_session("local[2]", app_name="kip714-tests", partitions=4)
    yield session
    session.stop()
