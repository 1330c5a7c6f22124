"""kip714's public surface: the top level, the public subpackages, and the names that moved out of the top
level (still resolvable for one release, with a DeprecationWarning naming their new home)."""

from __future__ import annotations

import importlib
import warnings

import pytest

import kip714

TOP_LEVEL = [
    "__version__",
    "ApiKey",
    "ErrorCode",
    "CompressionType",
    "Kip714Error",
    "split_frames",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "GetTelemetrySubscriptionsRequest",
    "GetTelemetrySubscriptionsResponse",
    "PushTelemetryRequest",
    "PushTelemetryResponse",
    "compress",
    "decompress",
    "crc32c",
    "compute_subscription_id",
    "SubscriptionRegistry",
    "ClientInfo",
    "TelemetryBroker",
    "kafka_uuid_string",
    "TelemetryReceiver",
    "ReceiverContext",
    "TelemetryPayload",
    "telemetry_metric_name",
    "MetricsCollector",
    "ClientTelemetry",
    "TelemetryServer",
    "TelemetryProxy",
    "ParquetRecorder",
    "read_recording",
    "PrometheusExporter",
    "OtlpForwarder",
    "decode_metrics",
    "decode_metrics_batch",
    "MetricsAccumulator",
]

#: The public subpackages (and the errors module), each documented and with an ``__all__``.
SUBPACKAGES = list(kip714._PUBLIC_SUBPACKAGES)

#: kip714.__all__ of 0.1.0 beyond TOP_LEVEL, with the new home of each name.
MOVED = {
    "MalformedFrameError": "errors",
    "FrameTooLargeError": "errors",
    "UnsupportedApiKeyError": "errors",
    "UnsupportedVersionError": "errors",
    "InvalidRequestError": "errors",
    "InvalidConfigError": "errors",
    "UnsupportedCompressionTypeError": "errors",
    "CorruptPayloadError": "errors",
    "TelemetryTooLargeError": "errors",
    "DEFAULT_MAX_FRAME_BYTES": "wire",
    "ApiVersion": "wire",
    "ApiVersionsRequest": "wire",
    "ApiVersionsResponse": "wire",
    "FinalizedFeature": "wire",
    "Message": "wire",
    "MetadataRequest": "wire",
    "MetadataRequestTopic": "wire",
    "MetadataResponse": "wire",
    "MetadataResponseBroker": "wire",
    "MetadataResponsePartition": "wire",
    "MetadataResponseTopic": "wire",
    "Request": "wire",
    "RequestHeader": "wire",
    "Response": "wire",
    "ResponseHeader": "wire",
    "SupportedFeature": "wire",
    "decode_request_header": "wire",
    "message_class": "wire",
    "uuid_hash": "codec",
    "BackgroundReceiver": "broker",
    "InstanceTable": "broker",
    "Resolution": "broker",
    "Subscription": "broker",
    "ClientTelemetryState": "client",
    "ClientTelemetrySubscription": "client",
    "MetricSelector": "client",
    "choose_compression": "client",
    "compress_payload": "client",
    "telemetry_attribute_key": "client",
    "telemetry_attributes": "client",
    "telemetry_metric_key": "client",
}

#: ../shared/spec/DESIGN.md, "Public names that outside checks import": each must stay where it is named.
DESIGN_NAMES = [
    "kip714.ApiKey",
    "kip714.ErrorCode",
    "kip714.CompressionType",
    "kip714.Kip714Error",
    "kip714.decode_request",
    "kip714.split_frames",
    "kip714.PushTelemetryRequest",
    "kip714.GetTelemetrySubscriptionsRequest",
    "kip714.GetTelemetrySubscriptionsResponse",
    "kip714.PushTelemetryResponse",
    "kip714.encode_request",
    "kip714.encode_response",
    "kip714.decompress",
    "kip714.compress",
    "kip714.crc32c",
    "kip714.compute_subscription_id",
    "kip714.SubscriptionRegistry",
    "kip714.ClientInfo",
    "kip714.TelemetryBroker",
    "kip714.decode_metrics",
    "kip714.telemetry_metric_name",
    "kip714.spark.register",
    "kip714.spark.decode_frames",
    "kip714.spark.decode_payloads",
    "kip714.TelemetryProxy",
    "kip714.PrometheusExporter",
    "kip714.OtlpForwarder",
    "kip714.TelemetryReceiver",
]


def _module(name: str):
    if name.startswith("kip714.spark"):
        pytest.importorskip("pyspark")
    return importlib.import_module(name)


def test_top_level_is_the_deliberate_surface():
    assert kip714.__all__ == TOP_LEVEL
    assert len(kip714.__all__) <= 40
    for name in TOP_LEVEL:
        assert hasattr(kip714, name), name


def test_import_kip714_imports_no_subpackage_and_types_see_every_name():
    """The top-level names are imported on first use (``_HOME``); the imports type checkers read name the same
    names from the same homes, and every name of ``__all__`` has one."""
    import ast
    import pathlib
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", "import sys, kip714; print(sorted(m for m in sys.modules if m.startswith('kip714.')))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "[]"
    tree = ast.parse(pathlib.Path(kip714.__file__).read_text())
    (block,) = [n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "_typing.TYPE_CHECKING"]
    typed = {
        f"kip714.{n.module}": tuple(sorted(a.name for a in n.names))
        for n in block.body
        if isinstance(n, ast.ImportFrom)
    }
    assert typed == {home: tuple(sorted(names)) for home, names in kip714._HOME.items()}
    assert sorted(name for names in kip714._HOME.values() for name in names) == sorted(set(TOP_LEVEL) - {"__version__"})


def test_each_native_module_and_subpackage_imports_first():
    """With the top level imported lazily, any module can be the first one a process imports: the native
    modules import Python modules while they initialise (``kip714._otlp`` the column contract of
    ``kip714.otlp``, which imports the native decoder on first use)."""
    import pathlib
    import subprocess
    import sys

    here = pathlib.Path(kip714.__file__).parent
    natives = sorted({p.name.split(".")[0] for p in here.glob("_*.pyi")})
    for name in [*natives, *(s for s in SUBPACKAGES if s != "spark")]:
        proc = subprocess.run([sys.executable, "-c", f"import kip714.{name}"], capture_output=True, text=True)
        assert proc.returncode == 0, f"kip714.{name} first: {proc.stderr[-2000:]}"


def test_star_import_gives_the_top_level_and_no_moved_name():
    ns: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec("from kip714 import *", ns)
    assert set(ns) - {"__builtins__"} == set(TOP_LEVEL)


@pytest.mark.parametrize("sub", SUBPACKAGES)
def test_subpackage_is_public_and_documented(sub):
    mod = _module(f"kip714.{sub}")
    assert "public" in (mod.__doc__ or ""), f"kip714.{sub}'s docstring does not say it is public"
    assert mod.__all__ and len(mod.__all__) == len(set(mod.__all__)), f"kip714.{sub}.__all__"
    for name in mod.__all__:
        assert hasattr(mod, name), f"kip714.{sub}.__all__ names {name}, which it lacks"


def test_every_top_level_name_has_a_subpackage_home():
    homes = {name: sub for sub in SUBPACKAGES if sub != "spark" for name in _module(f"kip714.{sub}").__all__}
    for name in TOP_LEVEL:
        if name in ("__version__", "ApiKey", "ErrorCode", "CompressionType"):
            continue  # kip714's own: the version and Kafka's numbers
        assert name in homes, f"kip714.{name} is in no subpackage's __all__"
        assert getattr(kip714, name) is getattr(_module(f"kip714.{homes[name]}"), name)


def test_the_moved_names_are_the_old_surface_minus_the_new():
    assert {name: f"kip714.{home}" for name, home in MOVED.items()} == kip714._NEW_HOME
    assert not set(MOVED) & set(TOP_LEVEL)
    assert len(MOVED) + len(TOP_LEVEL) == 74 + 4  # 0.1.0's 74 names, plus the 4 new top-level ones
    for name, home in MOVED.items():
        assert name in importlib.import_module(f"kip714.{home}").__all__, f"{name} not in kip714.{home}.__all__"


@pytest.mark.parametrize("name", sorted(MOVED))
def test_moved_name_resolves_with_a_warning_naming_its_home(name):
    home = importlib.import_module(f"kip714.{MOVED[name]}")
    message = f"kip714.{name} moved to kip714.{MOVED[name]}.{name}; the old name goes in the next release"
    with pytest.warns(DeprecationWarning) as record:
        old = getattr(kip714, name)
    assert old is getattr(home, name)
    assert [str(w.message) for w in record] == [message]
    assert record[0].filename == __file__, "stacklevel must point at the caller"


def test_from_import_of_a_moved_name_warns_at_the_import_line():
    with pytest.warns(DeprecationWarning, match=r"kip714\.MetadataResponse moved to kip714\.wire") as record:
        from kip714 import MetadataResponse
    assert MetadataResponse is kip714.wire.MetadataResponse
    assert len(record) == 1 and record[0].filename == __file__


def test_unknown_name_is_an_attribute_error_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="module 'kip714' has no attribute 'NoSuchThing'"):
            kip714.NoSuchThing  # noqa: B018
        assert not hasattr(kip714, "annotations")
        with pytest.raises(ImportError):
            from kip714 import NoSuchThing  # noqa: F401


@pytest.mark.parametrize("path", DESIGN_NAMES)
def test_design_contract_names_stay_where_they_are_named(path):
    module, _, name = path.rpartition(".")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert getattr(_module(module), name) is not None
