"""Typing stub for the Cython wire codec (kip714._protocol)."""

import re
import uuid
from collections.abc import Sequence
from typing import Any, ClassVar, Literal, overload

from typing_extensions import Buffer, Self

DEFAULT_MAX_FRAME_BYTES: int
SUPPORTED_VERSIONS: dict[int, tuple[int, int, int]]
SOFTWARE_PATTERN: re.Pattern[str]

_Tags = dict[int, bytes] | None
_UuidLike = uuid.UUID | bytes | bytearray | memoryview | None

class Message:
    FIELDS: ClassVar[tuple[str, ...]]
    def to_dict(self) -> dict[str, Any]: ...
    def to_kwargs(self) -> dict[str, Any]: ...
    def encode(self, version: int | None = None) -> bytes: ...
    @classmethod
    def decode(cls, buf: Buffer, version: int | None = None) -> Self: ...

class _ApiMessage(Message):
    API_KEY: ClassVar[int]
    IS_REQUEST: ClassVar[bool]
    MIN_VERSION: ClassVar[int]
    MAX_VERSION: ClassVar[int]

class RequestHeader(Message):
    MIN_VERSION: int
    MAX_VERSION: int
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        api_key: int = 0,
        api_version: int = 0,
        correlation_id: int = 0,
        client_id: str | None = None,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...
    @property
    def header_version(self) -> int: ...

class ResponseHeader(Message):
    MIN_VERSION: int
    MAX_VERSION: int
    correlation_id: int
    unknown_tagged_fields: _Tags
    def __init__(self, correlation_id: int = 0, unknown_tagged_fields: _Tags = None) -> None: ...

class Request:
    api_key: int
    api_version: int
    correlation_id: int
    body: Any
    def __init__(self, header: RequestHeader, body: Any) -> None: ...
    @property
    def header(self) -> RequestHeader: ...
    @property
    def client_id(self) -> str | None: ...

class Response:
    header: ResponseHeader
    body: Any
    def __init__(self, header: ResponseHeader, body: Any) -> None: ...
    @property
    def correlation_id(self) -> int: ...

class GetTelemetrySubscriptionsRequest(_ApiMessage):
    client_instance_id: uuid.UUID
    unknown_tagged_fields: _Tags
    def __init__(self, client_instance_id: _UuidLike = None, unknown_tagged_fields: _Tags = None) -> None: ...
    @property
    def client_instance_id_bytes(self) -> bytes: ...

class GetTelemetrySubscriptionsResponse(_ApiMessage):
    throttle_time_ms: int
    error_code: int
    client_instance_id: uuid.UUID
    subscription_id: int
    accepted_compression_types: list[int]
    push_interval_ms: int
    telemetry_max_bytes: int
    delta_temporality: bool
    requested_metrics: list[str]
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        throttle_time_ms: int = 0,
        error_code: int = 0,
        client_instance_id: _UuidLike = None,
        subscription_id: int = 0,
        accepted_compression_types: Sequence[int] | None = None,
        push_interval_ms: int = 0,
        telemetry_max_bytes: int = 0,
        delta_temporality: bool = False,
        requested_metrics: Sequence[str] | None = None,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...
    @property
    def client_instance_id_bytes(self) -> bytes: ...

class PushTelemetryRequest(_ApiMessage):
    client_instance_id: uuid.UUID
    subscription_id: int
    terminating: bool
    compression_type: int
    metrics: Buffer  # never None when decoded (the field is not nullable)
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        client_instance_id: _UuidLike = None,
        subscription_id: int = 0,
        terminating: bool = False,
        compression_type: int = 0,
        metrics: Buffer = b"",
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...
    @property
    def client_instance_id_bytes(self) -> bytes: ...
    @property
    def metrics_size(self) -> int: ...
    def decision_fields(self) -> tuple[bytes, int, bool, int, int]:
        """``(client_instance_id_bytes, subscription_id, terminating, compression_type, metrics_size)``: what
        the broker decides on, without building a ``uuid.UUID`` or a memoryview."""

class PushTelemetryResponse(_ApiMessage):
    throttle_time_ms: int
    error_code: int
    unknown_tagged_fields: _Tags
    def __init__(self, throttle_time_ms: int = 0, error_code: int = 0, unknown_tagged_fields: _Tags = None) -> None: ...

class ApiVersionsRequest(_ApiMessage):
    client_software_name: str
    client_software_version: str
    unknown_tagged_fields: _Tags
    def __init__(
        self, client_software_name: str = "", client_software_version: str = "", unknown_tagged_fields: _Tags = None
    ) -> None: ...
    def is_valid(self) -> bool: ...

class ApiVersion(Message):
    api_key: int
    min_version: int
    max_version: int
    unknown_tagged_fields: _Tags
    def __init__(
        self, api_key: int = 0, min_version: int = 0, max_version: int = 0, unknown_tagged_fields: _Tags = None
    ) -> None: ...

class SupportedFeature(Message):
    name: str
    min_version: int
    max_version: int
    unknown_tagged_fields: _Tags
    def __init__(
        self, name: str = "", min_version: int = 0, max_version: int = 0, unknown_tagged_fields: _Tags = None
    ) -> None: ...

class FinalizedFeature(Message):
    name: str
    max_version_level: int
    min_version_level: int
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        name: str = "",
        max_version_level: int = 0,
        min_version_level: int = 0,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class ApiVersionsResponse(_ApiMessage):
    error_code: int
    api_keys: list[ApiVersion]
    throttle_time_ms: int
    supported_features: list[SupportedFeature]
    finalized_features_epoch: int
    finalized_features: list[FinalizedFeature]
    zk_migration_ready: bool
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        error_code: int = 0,
        api_keys: Sequence[ApiVersion] | None = None,
        throttle_time_ms: int = 0,
        supported_features: Sequence[SupportedFeature] | None = None,
        finalized_features_epoch: int = -1,
        finalized_features: Sequence[FinalizedFeature] | None = None,
        zk_migration_ready: bool = False,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class MetadataRequestTopic(Message):
    topic_id: uuid.UUID
    name: str | None
    unknown_tagged_fields: _Tags
    def __init__(
        self, name: str | None = None, topic_id: uuid.UUID | None = None, unknown_tagged_fields: _Tags = None
    ) -> None: ...

class MetadataRequest(_ApiMessage):
    topics: list[MetadataRequestTopic] | None
    allow_auto_topic_creation: bool
    include_cluster_authorized_operations: bool
    include_topic_authorized_operations: bool
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        topics: Sequence[MetadataRequestTopic] | None = (),
        allow_auto_topic_creation: bool = True,
        include_cluster_authorized_operations: bool = False,
        include_topic_authorized_operations: bool = False,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class MetadataResponseBroker(Message):
    node_id: int
    host: str
    port: int
    rack: str | None
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        node_id: int = 0,
        host: str = "",
        port: int = 0,
        rack: str | None = None,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class MetadataResponsePartition(Message):
    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: list[int]
    isr_nodes: list[int]
    offline_replicas: list[int]
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        error_code: int = 0,
        partition_index: int = 0,
        leader_id: int = 0,
        leader_epoch: int = -1,
        replica_nodes: Sequence[int] | None = None,
        isr_nodes: Sequence[int] | None = None,
        offline_replicas: Sequence[int] | None = None,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class MetadataResponseTopic(Message):
    error_code: int
    name: str | None
    topic_id: uuid.UUID
    is_internal: bool
    partitions: list[MetadataResponsePartition]
    topic_authorized_operations: int
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        error_code: int = 0,
        name: str | None = None,
        topic_id: uuid.UUID | None = None,
        is_internal: bool = False,
        partitions: Sequence[MetadataResponsePartition] | None = None,
        topic_authorized_operations: int = ...,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class MetadataResponse(_ApiMessage):
    throttle_time_ms: int
    brokers: list[MetadataResponseBroker]
    cluster_id: str | None
    controller_id: int
    topics: list[MetadataResponseTopic]
    cluster_authorized_operations: int
    error_code: int
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        throttle_time_ms: int = 0,
        brokers: Sequence[MetadataResponseBroker] | None = None,
        cluster_id: str | None = None,
        controller_id: int = -1,
        topics: Sequence[MetadataResponseTopic] | None = None,
        cluster_authorized_operations: int = ...,
        error_code: int = 0,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class DescribeConfigsResource(Message):
    resource_type: int
    resource_name: str
    configuration_keys: list[str] | None
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        resource_type: int = 0,
        resource_name: str = "",
        configuration_keys: Sequence[str] | None = None,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class DescribeConfigsRequest(_ApiMessage):
    resources: list[DescribeConfigsResource]
    include_synonyms: bool
    include_documentation: bool
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        resources: Sequence[DescribeConfigsResource] | None = None,
        include_synonyms: bool = False,
        include_documentation: bool = False,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class DescribeConfigsSynonym(Message):
    name: str
    value: str | None
    source: int
    unknown_tagged_fields: _Tags
    def __init__(
        self, name: str = "", value: str | None = None, source: int = 0, unknown_tagged_fields: _Tags = None
    ) -> None: ...

class DescribeConfigsResourceResult(Message):
    name: str
    value: str | None
    read_only: bool
    config_source: int
    is_sensitive: bool
    synonyms: list[DescribeConfigsSynonym]
    config_type: int
    documentation: str | None
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        name: str = "",
        value: str | None = None,
        read_only: bool = False,
        config_source: int = -1,
        is_sensitive: bool = False,
        synonyms: Sequence[DescribeConfigsSynonym] | None = None,
        config_type: int = 0,
        documentation: str | None = None,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class DescribeConfigsResult(Message):
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    configs: list[DescribeConfigsResourceResult]
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        error_code: int = 0,
        error_message: str | None = None,
        resource_type: int = 0,
        resource_name: str = "",
        configs: Sequence[DescribeConfigsResourceResult] | None = None,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class DescribeConfigsResponse(_ApiMessage):
    throttle_time_ms: int
    results: list[DescribeConfigsResult]
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        throttle_time_ms: int = 0,
        results: Sequence[DescribeConfigsResult] | None = None,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class AlterableConfig(Message):
    name: str
    value: str | None
    unknown_tagged_fields: _Tags
    def __init__(self, name: str = "", value: str | None = None, unknown_tagged_fields: _Tags = None) -> None: ...

class AlterConfigsResource(Message):
    resource_type: int
    resource_name: str
    configs: list[AlterableConfig]
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        resource_type: int = 0,
        resource_name: str = "",
        configs: Sequence[AlterableConfig] | None = None,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class AlterConfigsRequest(_ApiMessage):
    resources: list[AlterConfigsResource]
    validate_only: bool
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        resources: Sequence[AlterConfigsResource] | None = None,
        validate_only: bool = False,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class AlterConfigsResourceResponse(Message):
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        error_code: int = 0,
        error_message: str | None = None,
        resource_type: int = 0,
        resource_name: str = "",
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class AlterConfigsResponse(_ApiMessage):
    throttle_time_ms: int
    responses: list[AlterConfigsResourceResponse]
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        throttle_time_ms: int = 0,
        responses: Sequence[AlterConfigsResourceResponse] | None = None,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class IncrementalAlterableConfig(Message):
    name: str
    config_operation: int
    value: str | None
    unknown_tagged_fields: _Tags
    def __init__(
        self, name: str = "", config_operation: int = 0, value: str | None = None, unknown_tagged_fields: _Tags = None
    ) -> None: ...

class IncrementalAlterConfigsResource(Message):
    resource_type: int
    resource_name: str
    configs: list[IncrementalAlterableConfig]
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        resource_type: int = 0,
        resource_name: str = "",
        configs: Sequence[IncrementalAlterableConfig] | None = None,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class IncrementalAlterConfigsRequest(_ApiMessage):
    resources: list[IncrementalAlterConfigsResource]
    validate_only: bool
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        resources: Sequence[IncrementalAlterConfigsResource] | None = None,
        validate_only: bool = False,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class IncrementalAlterConfigsResponse(_ApiMessage):
    throttle_time_ms: int
    responses: list[AlterConfigsResourceResponse]
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        throttle_time_ms: int = 0,
        responses: Sequence[AlterConfigsResourceResponse] | None = None,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

class ListConfigResourcesRequest(_ApiMessage):
    resource_types: list[int]
    unknown_tagged_fields: _Tags
    def __init__(self, resource_types: Sequence[int] | None = None, unknown_tagged_fields: _Tags = None) -> None: ...

class ConfigResource(Message):
    resource_name: str
    resource_type: int
    unknown_tagged_fields: _Tags
    def __init__(
        self, resource_name: str = "", resource_type: int = 16, unknown_tagged_fields: _Tags = None
    ) -> None: ...

class ListConfigResourcesResponse(_ApiMessage):
    throttle_time_ms: int
    error_code: int
    config_resources: list[ConfigResource]
    unknown_tagged_fields: _Tags
    def __init__(
        self,
        throttle_time_ms: int = 0,
        error_code: int = 0,
        config_resources: Sequence[ConfigResource] | None = None,
        unknown_tagged_fields: _Tags = None,
    ) -> None: ...

def decode_request(buf: Buffer) -> Request: ...
def decode_request_header(buf: Buffer) -> RequestHeader: ...
def decode_response(buf: Buffer, api_key: int, api_version: int, *, size_prefixed: bool = False) -> Response: ...
def encode_request(
    body: _ApiMessage,
    correlation_id: int,
    client_id: str | None,
    api_version: int | None = None,
    header_tagged_fields: _Tags = None,
) -> bytes: ...
def encode_response(
    correlation_id: int, body: _ApiMessage, api_version: int | None = None, header_tagged_fields: _Tags = None
) -> bytes: ...
@overload
def split_frames(buf: Buffer, max_frame_bytes: int = ..., *, copy: Literal[True] = True) -> tuple[list[bytes], int]: ...
@overload
def split_frames(buf: Buffer, max_frame_bytes: int = ..., *, copy: Literal[False]) -> tuple[list[memoryview], int]: ...
@overload
def split_frames(
    buf: Buffer, max_frame_bytes: int = ..., *, copy: bool = True
) -> tuple[list[bytes] | list[memoryview], int]: ...
def message_class(api_key: int, is_request: bool) -> type[_ApiMessage]: ...
