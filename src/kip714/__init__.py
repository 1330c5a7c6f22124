"""kip714 — the wire side of Apache Kafka KIP-714 client telemetry, with a Cython core.

The top level (``__all__``) holds what a user builds with, in the order of the data flow: Kafka's numbers
and the error base, the wire functions and the four KIP-714 messages, the codecs, the broker and its
subscription registry, the receiver contract, the client half's entry points, the endpoints
(``kip714 serve``, ``kip714 proxy``), the sinks and the OTLP → Arrow decoders.

Every subpackage is public too, each with its own ``__all__``; every top-level name but the enums and
``__version__`` is re-exported from one of them:

- ``kip714.wire``: frames, headers and every message class (ApiVersions, Metadata, ...);
- ``kip714.codec``: compression, CRC32C, SubscriptionId and Kafka's ``Uuid.hashCode``;
- ``kip714.errors``: the exception hierarchy under :class:`Kip714Error`;
- ``kip714.broker``: subscriptions, the broker's decisions, the instance table and the receiver contract;
- ``kip714.client``: the client half (metric naming, OTLP encoding, the push state machine);
- ``kip714.endpoint``: :class:`TelemetryServer` and :class:`TelemetryProxy`;
- ``kip714.sinks``: the Parquet recorder, the Prometheus exporter, the OTLP forwarder;
- ``kip714.otlp``: OTLP MetricsData → Arrow and its column contract;
- ``kip714.spark``: the same decoding on Spark, imported on its own (it needs the ``spark`` extra).

``docs/api.md`` lists every public name. The names that were top-level in 0.1.0 and now live only in a
subpackage still resolve here for one release, with a ``DeprecationWarning`` naming their new home."""

import typing as _typing

__version__ = "0.1.0"

#: The home of each top-level name. They are imported on first use: ``import kip714`` alone imports none of
#: the subpackages (asyncio, protobuf, prometheus_client, ...), so a command line or a helper process pays only
#: for what it uses (``python -c "import kip714"``: 0.374 CPU-s with every subpackage imported at once, against
#: 0.045; medians of 9 paired runs). Type checkers read the same names from the imports below.
_HOME = {
    "kip714._enums": ("ApiKey", "CompressionType", "ErrorCode"),
    "kip714.broker": (
        "ClientInfo",
        "ReceiverContext",
        "SubscriptionRegistry",
        "TelemetryBroker",
        "TelemetryPayload",
        "TelemetryReceiver",
        "kafka_uuid_string",
    ),
    "kip714.client": ("ClientTelemetry", "MetricsCollector", "telemetry_metric_name"),
    "kip714.codec": ("compress", "compute_subscription_id", "crc32c", "decompress"),
    "kip714.endpoint": ("TelemetryProxy", "TelemetryServer"),
    "kip714.errors": ("Kip714Error",),
    "kip714.otlp": ("MetricsAccumulator", "decode_metrics", "decode_metrics_batch"),
    "kip714.sinks": ("OtlpForwarder", "ParquetRecorder", "PrometheusExporter", "read_recording"),
    "kip714.wire": (
        "GetTelemetrySubscriptionsRequest",
        "GetTelemetrySubscriptionsResponse",
        "PushTelemetryRequest",
        "PushTelemetryResponse",
        "decode_request",
        "decode_response",
        "encode_request",
        "encode_response",
        "split_frames",
    ),
}

if _typing.TYPE_CHECKING:
    from ._enums import ApiKey, CompressionType, ErrorCode
    from .broker import (
        ClientInfo,
        ReceiverContext,
        SubscriptionRegistry,
        TelemetryBroker,
        TelemetryPayload,
        TelemetryReceiver,
        kafka_uuid_string,
    )
    from .client import ClientTelemetry, MetricsCollector, telemetry_metric_name
    from .codec import compress, compute_subscription_id, crc32c, decompress
    from .endpoint import TelemetryProxy, TelemetryServer
    from .errors import Kip714Error
    from .otlp import MetricsAccumulator, decode_metrics, decode_metrics_batch
    from .sinks import OtlpForwarder, ParquetRecorder, PrometheusExporter, read_recording
    from .wire import (
        GetTelemetrySubscriptionsRequest,
        GetTelemetrySubscriptionsResponse,
        PushTelemetryRequest,
        PushTelemetryResponse,
        decode_request,
        decode_response,
        encode_request,
        encode_response,
        split_frames,
    )

__all__ = [
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

#: The public subpackages (and the errors module), each documented with an ``__all__``, in the order of the data
#: flow: docs/gen_api.py writes a section of docs/api.md for each, and the tests check them.
_PUBLIC_SUBPACKAGES = (
    "wire",
    "codec",
    "errors",
    "broker",
    "client",
    "endpoint",
    "sinks",
    "otlp",
    "conformance",
    "spark",
)

# Names that were in ``kip714.__all__`` in 0.1.0 and moved to a subpackage, by new home. They resolve from
# ``kip714`` until the next release, with a DeprecationWarning (``__getattr__``); docs/api.md lists them.
_MOVED = {
    "kip714.errors": (
        "MalformedFrameError",
        "FrameTooLargeError",
        "UnsupportedApiKeyError",
        "UnsupportedVersionError",
        "InvalidRequestError",
        "InvalidConfigError",
        "UnsupportedCompressionTypeError",
        "CorruptPayloadError",
        "TelemetryTooLargeError",
    ),
    "kip714.wire": (
        "DEFAULT_MAX_FRAME_BYTES",
        "ApiVersion",
        "ApiVersionsRequest",
        "ApiVersionsResponse",
        "FinalizedFeature",
        "Message",
        "MetadataRequest",
        "MetadataRequestTopic",
        "MetadataResponse",
        "MetadataResponseBroker",
        "MetadataResponsePartition",
        "MetadataResponseTopic",
        "Request",
        "RequestHeader",
        "Response",
        "ResponseHeader",
        "SupportedFeature",
        "decode_request_header",
        "message_class",
    ),
    "kip714.codec": ("uuid_hash",),
    "kip714.broker": ("BackgroundReceiver", "InstanceTable", "Resolution", "Subscription"),
    "kip714.client": (
        "ClientTelemetryState",
        "ClientTelemetrySubscription",
        "MetricSelector",
        "choose_compression",
        "compress_payload",
        "telemetry_attribute_key",
        "telemetry_attributes",
        "telemetry_metric_key",
    ),
}
_NEW_HOME = {name: home for home, names in _MOVED.items() for name in names}
_TOP_HOME = {name: home for home, names in _HOME.items() for name in names}

if not _typing.TYPE_CHECKING:  # type checkers see only the current surface: a moved name is an error for them

    def __getattr__(name: str) -> object:
        """A top-level name on first use (``_HOME``), a subpackage not imported yet, or a name moved to a
        subpackage (``_MOVED``): warn, naming its new home, and return it."""
        import importlib

        home = _TOP_HOME.get(name)
        if home is not None:
            value = getattr(importlib.import_module(home), name)
            globals()[name] = value  # later lookups find it without this call
            return value
        home = _NEW_HOME.get(name)
        if home is None:
            if not name.startswith("__"):  # a submodule that nothing has imported yet (``kip714.wire``)
                import importlib.util

                if importlib.util.find_spec(f"{__name__}.{name}") is not None:
                    return importlib.import_module(f"{__name__}.{name}")
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import sys
        import warnings

        # ``from kip714 import X`` asks twice (importlib's hasattr, then the import itself): warn once
        if sys._getframe(1).f_code.co_name != "_handle_fromlist":
            warnings.warn(
                f"kip714.{name} moved to {home}.{name}; the old name goes in the next release",
                DeprecationWarning,
                stacklevel=2,
            )
        return getattr(importlib.import_module(home), name)

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__, *_PUBLIC_SUBPACKAGES})
