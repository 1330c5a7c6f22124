"""The native core's copy of Kafka's numbers (src/_native/common/kafka_constants.pxd) equals their one home,
kip714._enums: every error code and compression id the C code compares against."""

from __future__ import annotations

import pathlib
import re

import pytest

from kip714 import CompressionType, ErrorCode

PXD = pathlib.Path(__file__).parents[1] / "src" / "_native" / "common" / "kafka_constants.pxd"


@pytest.mark.skipif(not PXD.is_file(), reason="the native sources are not beside an installed wheel")
def test_native_constants_match_enums():
    pairs = re.findall(r"^\s+([EC])_([A-Z_]+) = (-?\d+)$", PXD.read_text(), flags=re.M)
    assert len(pairs) >= 10
    for kind, name, value in pairs:
        enum = ErrorCode if kind == "E" else CompressionType
        assert enum[name] == int(value), f"{kind}_{name} = {value} but {enum.__name__}.{name} = {int(enum[name])}"


def test_instance_cache_defaults_have_one_home():
    """Kafka's instance cache (CACHE_MAX_SIZE 16384, DEFAULT_CACHE_EXPIRY_MS 60000) lives in kip714._enums; the
    native table (whose signature shows the numbers), the broker and the Prometheus exporter agree with it."""
    import inspect

    from kip714._enums import INSTANCE_CACHE_EXPIRY_MS, INSTANCE_CACHE_MAX_SIZE
    from kip714._instances import InstanceTable
    from kip714.broker import TelemetryBroker

    table = InstanceTable()
    assert (table.max_instances, table.cache_expiry_ms) == (INSTANCE_CACHE_MAX_SIZE, INSTANCE_CACHE_EXPIRY_MS)
    assert InstanceTable.__doc__.startswith(
        f"InstanceTable(max_instances={INSTANCE_CACHE_MAX_SIZE}, cache_expiry_ms={INSTANCE_CACHE_EXPIRY_MS})"
    )
    params = inspect.signature(TelemetryBroker).parameters
    assert params["max_instances"].default == INSTANCE_CACHE_MAX_SIZE
    assert params["cache_expiry_ms"].default == INSTANCE_CACHE_EXPIRY_MS
    broker = TelemetryBroker()
    assert (broker.instances.max_instances, broker.instances.cache_expiry_ms) == (
        INSTANCE_CACHE_MAX_SIZE,
        INSTANCE_CACHE_EXPIRY_MS,
    )
