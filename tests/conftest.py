"""Shared fixtures. Spark tests share one local session per test run (starting one costs seconds)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def spark():
    if os.environ.get("KIP714_SKIP_SPARK") == "1":
        # set by the wheel tests where Spark cannot run (Windows needs Hadoop's winutils); never by CI
        pytest.skip("KIP714_SKIP_SPARK=1")
    pytest.importorskip("pyspark")
    from kip714.spark import local_session

    session = local_session("local[2]", app_name="kip714-tests", partitions=4)
    yield session
    session.stop()
