"""Shared fixtures, and the suite's tiers.

Every test belongs to exactly one tier (a marker registered in pyproject.toml):

- ``unit``: pure Python and native code in this process: no subprocess, no server, no JVM; seconds at most.
  ``make check`` runs this tier.
- ``integration``: real servers (``kip714 serve``, the proxy, HTTP), librdkafka and kafka-python clients,
  subprocesses, the command line.
- ``spark``: a Spark JVM (the suite's shared session, or a pipeline/cluster of its own).
- ``java``: the JDK oracles (javac/java).
- ``dist``: building the native code, the sdist, the wheel, a fresh venv.
- ``bench``: the benchmark's rows.

A test module's tier is its entry in ``TIERS`` below; a module that mixes tiers marks the tests that differ
(``@pytest.mark.integration`` ...); a test that uses the ``spark`` fixture is in the ``spark`` tier. A module
without an entry fails its tests: a new module chooses its tier here. ``make test`` runs every tier.

"""

from __future__ import annotations

import os
import pathlib

import pytest

TIER_NAMES = ("unit", "integration", "spark", "java", "dist", "bench")

#: module (file name without .py) -> the tier of its tests, unless a test is marked otherwise
TIERS = {
    "test_bench_cli": "bench",
    "test_broker": "unit",
    "test_build_switches": "dist",
    "test_cli": "integration",
    "test_cli_imports": "integration",
    "test_cli_language": "integration",
    "test_client": "unit",
    "test_codec": "unit",
    "test_conformance": "integration",
    "test_conformance_broken": "integration",
    "test_constants": "unit",
    "test_crc": "unit",
    "test_distribution": "dist",
    "test_docs": "unit",
    "test_extras": "unit",
    "test_fuzz_replay": "unit",
    "test_gzip_jdk": "java",
    "test_import_graph": "unit",
    "test_instance_metadata": "unit",
    "test_instances": "unit",
    "test_javaorder_jdk": "unit",
    "test_limits": "unit",
    "test_memory_budget": "integration",
    "test_naming": "unit",
    "test_native": "unit",
    "test_nullability": "unit",
    "test_otlp_decode": "unit",
    "test_otlp_encode": "unit",
    "test_otlp_forward": "integration",
    "test_pipeline_follow": "spark",
    "test_prometheus_export": "unit",
    "test_prometheus_server": "integration",
    "test_protocol": "unit",
    "test_proxy": "integration",
    "test_proxy_rewrite": "unit",
    "test_proxy_robust": "integration",
    "test_proxy_security": "integration",
    "test_proxy_telemetry": "integration",
    "test_public_paths": "unit",
    "test_public_surface": "unit",
    "test_readme": "integration",
    "test_record_sync": "integration",
    "test_report": "spark",
    "test_report_points": "unit",
    "test_server": "integration",
    "test_simulate": "unit",
    "test_snappy_java": "java",
    "test_spark": "spark",
    "test_spark_scale": "spark",
    "test_stress": "unit",
    "test_stubs": "unit",
    "test_subscriptions": "unit",
    "test_threads": "unit",
}

def _tier(item: pytest.Item) -> str | None:
    """The tier of ``item``: its explicit tier marker, else ``spark`` for a user of the session, else its
    module's entry. Raises when a test names two tiers."""
    explicit = {m.name for m in item.iter_markers() if m.name in TIER_NAMES}
    if len(explicit) > 1:
        raise pytest.UsageError(f"{item.nodeid} is marked with several tiers: {sorted(explicit)}")
    if explicit:
        return explicit.pop()
    if "spark" in getattr(item, "fixturenames", ()):
        return "spark"
    return TIERS.get(pathlib.Path(str(item.fspath)).stem)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = _tier(item)
        if tier is None:
            # selected by every run (make check included), and failed: the module must choose its tier
            item.add_marker(pytest.mark.unit)
            item.add_marker(pytest.mark.kip714_untiered)
            continue
        item.add_marker(getattr(pytest.mark, tier))


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("kip714_untiered"):
        pytest.fail(f"{pathlib.Path(str(item.fspath)).name} has no tier: add it to TIERS in tests/conftest.py "
                    f"(one of {', '.join(TIER_NAMES)}), or mark its tests", pytrace=False)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kip714_untiered: (set by conftest.py) a test whose module has no tier")


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
