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
- ``image``: the kip714 image run with podman (``make test-image``, which builds it first). ``make test``
  leaves this tier out: it runs only when ``-m`` names it.

A test module's tier is its entry in ``TIERS`` below; a module that mixes tiers marks the tests that differ
(``@pytest.mark.integration`` ...); a test that uses the ``spark`` fixture is in the ``spark`` tier. A module
without an entry fails its tests: a new module chooses its tier here. ``make test`` runs every tier but
``image``.

The tests that share the session Spark fixture run on one pytest-xdist worker (one JVM; see the scheduler);
``SLOW_FIRST`` puts the longest tests at the head of the queue so that they start at once, each on its
worker, while the rest is spread over the others.
"""

from __future__ import annotations

import gc
import logging
import os
import pathlib

import pytest
from suite_jvm import SUITE_JVM_OPTIONS

#: The tests allocate millions of short-lived objects (Hypothesis' draws, decoded messages, Arrow rows), and with
#: CPython's default thresholds (700, 10, 10) the cyclic collector took ~10 % of a worker's CPU: 9.3 of ~94
#: CPU-seconds in the unit tier (two workers, measured with gc.callbacks), 2.9 with these. Only the pytest
#: processes are affected; the library and its subprocesses keep the defaults.
gc.set_threshold(20_000, 20, 20)

TIER_NAMES = ("unit", "integration", "spark", "java", "dist", "bench", "image")
#: tiers that run only when ``-m`` names them (they need what ``make test`` does not build)
OPT_IN_TIERS = ("image",)

#: The suite's Spark JVMs (the session below, ``kip714 pipeline`` children, spark-submit, a standalone cluster's
#: daemons) take the suite's JVM options (tests/suite_jvm.py says why). Set either variable to choose otherwise.
os.environ.setdefault("SPARK_SUBMIT_OPTS", SUITE_JVM_OPTIONS)  # every driver started by spark-submit / pyspark
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", SUITE_JVM_OPTIONS)  # standalone Master and Worker

#: module (file name without .py) -> the tier of its tests, unless a test is marked otherwise
TIERS = {
    "test_admin_api": "integration",
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
    "test_demo": "unit",
    "test_distribution": "dist",
    "test_docs": "unit",
    "test_exporter_operators": "unit",
    "test_extras": "unit",
    "test_fleet": "integration",
    "test_fuzz_replay": "unit",
    "test_gzip_jdk": "java",
    "test_image": "image",
    "test_import_graph": "unit",
    "test_instance_metadata": "unit",
    "test_instances": "unit",
    "test_javaorder_jdk": "unit",
    "test_kubernetes": "integration",
    "test_limits": "unit",
    "test_memory_budget": "integration",
    "test_naming": "unit",
    "test_native": "unit",
    "test_nullability": "unit",
    "test_operations": "integration",
    "test_operations_prometheus": "integration",
    "test_otlp_accumulate": "unit",
    "test_otlp_decode": "unit",
    "test_otlp_encode": "unit",
    "test_otlp_forward": "integration",
    "test_pipeline_follow": "spark",
    "test_prometheus_export": "unit",
    "test_prometheus_server": "integration",
    "test_protocol": "unit",
    "test_proxy": "integration",
    "test_proxy_rewrite": "unit",
    "test_proxy_balancer": "integration",
    "test_proxy_faults": "integration",
    "test_proxy_protocol": "unit",
    "test_proxy_robust": "integration",
    "test_proxy_security": "integration",
    "test_proxy_telemetry": "integration",
    "test_public_paths": "unit",
    "test_public_surface": "unit",
    "test_readme": "integration",
    "test_record_sync": "integration",
    "test_replica_recordings": "spark",
    "test_request_loop": "unit",
    "test_recorder_rows": "unit",
    "test_report": "spark",
    "test_report_points": "unit",
    "test_report_streams": "spark",
    "test_self_metrics": "unit",
    "test_server": "integration",
    "test_service": "integration",
    "test_state_topic": "integration",
    "test_simulate": "unit",
    "test_snappy_java": "java",
    "test_spark": "spark",
    "test_spark_scale": "spark",
    "test_streams_simulate": "unit",
    "test_stress": "unit",
    "test_stubs": "unit",
    "test_subscriptions": "unit",
    "test_subscriptions_admin": "integration",
    "test_subscriptions_lint": "unit",
    "test_threads": "unit",
}

#: the longest tests (by their --durations), started first; a prefix of the test id
SLOW_FIRST = (
    "tests/test_distribution.py::test_sdist_to_wheel_to_venv",
    "tests/test_spark_scale.py::test_standalone_cluster_gives_the_same_points",
    "tests/test_spark_scale.py::test_pipeline_with_a_small_driver_heap",
    "tests/test_spark_scale.py::test_a_failed_job_ends_with_one_line",
    "tests/test_build_switches.py",
    "tests/test_conformance.py",
    "tests/test_fleet.py",
    "tests/test_javaorder_jdk.py::test_against_real_jdk",
    "tests/test_bench_cli.py::test_quick_record_group",
    "tests/test_readme.py::test_example_runs_as_written",
    "tests/test_otlp_decode.py::test_generated_",
    "tests/test_threads.py::test_receivers_shared_by_threads_lose_nothing",
    "tests/test_simulate.py::test_hour_of_telemetry",
    "tests/test_prometheus_export.py::test_million_series",
)

#: the group of the tests that share the ``spark`` fixture's session: one xdist worker runs them all
SPARK_GROUP = "spark-session"
#: modules whose every test runs on that worker: their module-scoped fixtures feed the Spark tests (a
#: module-scoped fixture is built once per worker that runs one of its tests)
SPARK_WORKER_MODULES = {"test_report"}
#: modules whose tests run on one worker, in order: they share a module-scoped server whose state a later
#: test reads (test_prometheus_server), or module-scoped inputs that cost seconds to make (bombs, a bomb
#: report from a child process, the conformance lab's runs against librdkafka and broken clients, the
#: operations stack: a real Prometheus scraping kip714 serve and proxy for a minute, the fleet's one run of
#: three proxy replicas behind HAProxy)
MODULE_GROUPS = {
    "test_prometheus_server",
    "test_codec",
    "test_limits",
    "test_conformance",
    "test_conformance_broken",
    "test_operations_prometheus",
    "test_fleet",
}
_GROUP = pytest.StashKey[str]()
_GROUPS_FILE = pytest.StashKey[pathlib.Path]()


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


def _slow_rank(nodeid: str) -> int:
    for i, prefix in enumerate(SLOW_FIRST):
        if nodeid.startswith(prefix):
            return i
    return len(SLOW_FIRST)


def _order(item: pytest.Item) -> int:
    """Where ``item`` goes in the queue: the ``SLOW_FIRST`` tests first, in that order; the Spark session's
    group (one long chain of tests on one worker) right after the first of them; then the rest."""
    rank = _slow_rank(item.nodeid)
    return min(rank, 1) if item.stash.get(_GROUP, None) == SPARK_GROUP else rank


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    markexpr = config.getoption("markexpr", "") or ""
    opted_out = [i for i in items if _tier(i) in OPT_IN_TIERS and _tier(i) not in markexpr]
    if opted_out:
        config.hook.pytest_deselected(items=opted_out)
        items[:] = [i for i in items if i not in opted_out]
    for item in items:
        tier = _tier(item)
        if tier is None:
            # selected by every run (make check included), and failed: the module must choose its tier
            item.add_marker(pytest.mark.unit)
            item.add_marker(pytest.mark.kip714_untiered)
            continue
        item.add_marker(getattr(pytest.mark, tier))
        module = pathlib.Path(str(item.fspath)).stem
        if (
            "spark" in getattr(item, "fixturenames", ())
            or item.get_closest_marker("spark_session")
            or module in SPARK_WORKER_MODULES
        ):
            item.stash[_GROUP] = SPARK_GROUP
        elif module in MODULE_GROUPS:
            item.stash[_GROUP] = module
    items.sort(key=_order)  # stable: the rest keep their order


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("kip714_untiered"):
        pytest.fail(
            f"{pathlib.Path(str(item.fspath)).name} has no tier: add it to TIERS in tests/conftest.py "
            f"(one of {', '.join(TIER_NAMES)}), or mark its tests",
            pytrace=False,
        )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kip714_untiered: (set by conftest.py) a test whose module has no tier")


# ------------------------------------------------------------------------------------------ pytest-xdist
# ``--dist loadgroup`` runs the tests of a group on one worker, but with pytest 9.2 xdist's own grouping
# (a suffix it writes into node ids) no longer takes effect (pytest-dev/pytest-xdist#1386). So the workers
# write each test's group to a file the controller names, and the scheduler below reads it.


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """(xdist controller) the file where a worker writes the groups of the tests it collected."""
    config = node.config
    if _GROUPS_FILE not in config.stash:
        import tempfile

        config.stash[_GROUPS_FILE] = pathlib.Path(tempfile.mkdtemp(prefix="kip714-groups-")) / "groups.json"
    node.workerinput["kip714_groups"] = str(config.stash[_GROUPS_FILE])


@pytest.hookimpl(tryfirst=True)  # before xdist's, which tells the controller that collection is done
def pytest_collection_finish(session: pytest.Session) -> None:
    path = getattr(session.config, "workerinput", {}).get("kip714_groups")
    if path is None:
        return
    import json

    groups = {item.nodeid: item.stash[_GROUP] for item in session.items if _GROUP in item.stash}
    tmp = pathlib.Path(f"{path}.{os.getpid()}")
    tmp.write_text(json.dumps(groups))
    tmp.replace(path)  # every worker collects the same tests: whichever writes last, the file is whole


def pytest_unconfigure(config: pytest.Config) -> None:
    if _GROUPS_FILE in config.stash:
        import shutil

        shutil.rmtree(config.stash[_GROUPS_FILE].parent, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadgroup``: the tests of a group (the Spark session's, a module's) as one unit for one worker,
    the others one by one; in the order of their first test (``SLOW_FIRST`` first). A worker
    busy with one of the ``SLOW_FIRST`` tests is handed the shortest unit left as the next one it holds (xdist
    gives each worker a unit beyond the one it runs), not the next long one, which would wait for the whole
    long test while other workers run out of work."""
    if config.getvalue("dist") != "loadgroup":
        return None
    import json

    from xdist.scheduler import LoadScopeScheduling

    class TierScheduling(LoadScopeScheduling):
        groups: dict[str, str] | None = None

        def __init__(self, config: pytest.Config, log) -> None:
            super().__init__(config, log)
            config.option.loadscopereorder = False  # the units in the order of their first test, not by size

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                path = config.stash.get(_GROUPS_FILE, None)
                self.groups = json.loads(path.read_text()) if path and path.exists() else {}
            return self.groups.get(nodeid, nodeid)

        def _assign_work_unit(self, node) -> None:
            held = self.assigned_work.get(node, {})
            running = next((nodeid for unit in held.values() for nodeid, done in unit.items() if not done), None)
            if running is not None and _slow_rank(running) < len(SLOW_FIRST) and len(self.workqueue) > 1:
                self.workqueue.move_to_end(next(reversed(self.workqueue)), last=False)
            super()._assign_work_unit(node)

    return TierScheduling(config, log)


@pytest.fixture
def quiet_kip714_logs():
    """kip714's loggers at CRITICAL for the test: for tests that feed servers bad input by the thousand."""
    logger = logging.getLogger("kip714")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


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
