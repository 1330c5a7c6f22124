"""Kafka's config admin API for CLIENT_METRICS resources, decided as an Apache Kafka 4.1+ cluster decides it.

:class:`ClientMetricsAdmin` answers DescribeConfigs (32), IncrementalAlterConfigs (44), AlterConfigs (33) and
ListConfigResources (74) for resource type 16 (``CLIENT_METRICS``): ``kafka-client-metrics.sh``,
``kafka-configs.sh --entity-type client-metrics``, the Java ``Admin`` and kafka-python's ``KafkaAdminClient``
manage kip714's subscriptions as they manage a cluster's. Its changes go through
:class:`~kip714.broker.subscription_layers.SubscriptionLayers` (stored in the state folder first, then applied:
the SubscriptionIds of the changed subscriptions change, and clients pushing with an old one get
UNKNOWN_SUBSCRIPTION_ID and ask again, as after a config change in Kafka).

What Kafka does, followed here (docs/production.md lists it with the error codes):

* checks in Kafka's order: a resource named twice in one request (INVALID_REQUEST ``Each resource must appear
  at most once.``, both copies), a config key named twice (``Error due to duplicate config keys``), a null value
  where one is needed (``Null value not supported for : k1, k2``), an unknown resource type (``Unknown
  resource type N``), authorization (CLUSTER_AUTHORIZATION_FAILED with a null message), the operations
  (APPEND/SUBTRACT: INVALID_CONFIG ``Can't APPEND to key metrics because its type is not LIST.``: Kafka's
  config schema knows no list keys for this type), then ``ClientMetricsConfigs.validate`` on the resulting
  config (unknown keys, ``interval.ms`` bounds, bad ``match`` patterns: the registry's checks and messages);
* a resulting config without keys deletes the subscription; a SET to the value already there changes nothing
  (the SubscriptionIds stay); ``validate_only`` runs every check and changes nothing;
* AlterConfigs (the legacy API) replaces the whole config with the given set;
* DescribeConfigs returns all three keys, also for a name that does not exist (KAFKA-17516): the value
  normalised as Kafka prints it (``a,b``), source 7 (CLIENT_METRICS_CONFIG) when set and 5 (DEFAULT_CONFIG)
  otherwise, types INT/LIST, documentation when asked;
* ListConfigResources v0 lists the subscriptions; v1 lists them for an empty type list or one naming
  CLIENT_METRICS, and fails the request with UNSUPPORTED_VERSION for a type outside {2, 4, 8, 16, 32}.

Authorization: describing and listing are open to every client (Kafka would ask for DESCRIBE_CONFIGS on the
cluster); altering needs ``alter_open`` or a principal in ``principals`` (SASL's ``User:NAME``), otherwise each
resource gets CLUSTER_AUTHORIZATION_FAILED (31) with a null message, as Kafka's controller answers.

Resources of other types: ``kip714 serve`` holds no topics, brokers or groups, so it answers them per resource
(:meth:`ClientMetricsAdmin.other_resource_error`): TOPIC UNKNOWN_TOPIC_OR_PARTITION, BROKER, BROKER_LOGGER and
GROUP INVALID_REQUEST; ``kip714 proxy`` sends them on to its cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from .._enums import AlterConfigOp, ApiKey, ConfigResourceType, ConfigSource, ConfigType, ErrorCode
from .._protocol import (
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
    ConfigResource,
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)
from ..errors import Kip714Error
from .subscription_layers import SubscriptionLayers
from .subscriptions import DEFAULT_INTERVAL_MS, parse_kafka_list, validate_subscription

__all__ = ["ADMIN_APIS", "CLIENT_METRICS", "DESCRIBE_ORDER", "LIST_V1_TYPES", "ClientMetricsAdmin"]

log = logging.getLogger("kip714.admin")

CLIENT_METRICS = int(ConfigResourceType.CLIENT_METRICS)
#: (api key, min version, max version) of the admin APIs answered, as Kafka 4.1 advertises them (and as
#: kip714's codec reads them): DescribeConfigs 1-4, AlterConfigs 0-2, IncrementalAlterConfigs 0-1,
#: ListConfigResources 0-1.
ADMIN_APIS = (
    (int(ApiKey.DESCRIBE_CONFIGS), 1, 4),
    (int(ApiKey.ALTER_CONFIGS), 0, 2),
    (int(ApiKey.INCREMENTAL_ALTER_CONFIGS), 0, 1),
    (int(ApiKey.LIST_CONFIG_RESOURCES), 0, 1),
)
#: The types ListConfigResources v1 may name (``ListConfigResourcesRequest.supportedResourceTypes()``).
LIST_V1_TYPES = frozenset(
    int(t)
    for t in (
        ConfigResourceType.TOPIC,
        ConfigResourceType.BROKER,
        ConfigResourceType.BROKER_LOGGER,
        ConfigResourceType.CLIENT_METRICS,
        ConfigResourceType.GROUP,
    )
)
#: The order Kafka's DescribeConfigs lists the three keys in (a Java HashMap of 16 buckets).
DESCRIBE_ORDER = ("interval.ms", "match", "metrics")
_KNOWN_TYPES = frozenset(int(t) for t in ConfigResourceType if t != ConfigResourceType.UNKNOWN)
_DEFAULTS = {"interval.ms": str(DEFAULT_INTERVAL_MS), "match": "", "metrics": ""}
_TYPES = {"interval.ms": int(ConfigType.INT), "match": int(ConfigType.LIST), "metrics": int(ConfigType.LIST)}
_DOCS = {
    "interval.ms": "Metrics push interval in milliseconds",
    "match": "Client match criteria",
    "metrics": "Telemetry metric name prefix list",
}
_STORED = int(ConfigSource.CLIENT_METRICS_CONFIG)
_DEFAULT = int(ConfigSource.DEFAULT_CONFIG)
_NONE = int(ErrorCode.NONE)
_INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
_INVALID_CONFIG = int(ErrorCode.INVALID_CONFIG)
_UNAUTHORIZED = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
_STORAGE = int(ErrorCode.KAFKA_STORAGE_ERROR)
_OP_NAMES = {int(op): op.name for op in AlterConfigOp}

#: (error code, message) of one resource; (0, None) when it succeeded
Outcome = tuple[int, "str | None"]


def _refused(code: int, message: str | None) -> Kip714Error:
    """One resource's error: its Kafka error code and message (an empty message is sent as null)."""
    return Kip714Error(message or "", code)


class ClientMetricsAdmin:
    """Kafka's config admin API over ``layers`` (see the module docstring). ``alter_open``: anyone may alter;
    ``principals``: the principals (``User:alice``) that may alter otherwise. ``role`` names the endpoint in the
    messages about resources of other types (``kip714 serve``)."""

    def __init__(
        self,
        layers: SubscriptionLayers,
        *,
        alter_open: bool = False,
        principals: Iterable[str] = (),
        role: str = "kip714 serve",
    ) -> None:
        self.layers = layers
        self.alter_open = alter_open
        self.principals = frozenset(principals)
        self.role = role
        self.changes = 0  # admin changes applied (resources), for the summary and the metrics
        self.refused = 0  # alters refused for authorization

    def may_alter(self, principal: str) -> bool:
        """Whether ``principal`` may create, change or delete subscriptions."""
        return self.alter_open or principal in self.principals

    # ------------------------------------------------------------------------------ whole requests (serve)

    def describe_configs(self, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
        """The answer to a whole DescribeConfigs request (resources of other types per
        :meth:`other_resource_error`), in request order."""
        results = []
        for res in request.resources:
            if res.resource_type == CLIENT_METRICS:
                results.append(
                    self.describe(
                        res.resource_name,
                        res.configuration_keys,
                        request.include_synonyms,
                        request.include_documentation,
                    )
                )
            else:
                code, message = self.other_resource_error(res.resource_type)
                results.append(DescribeConfigsResult(code, message, res.resource_type, res.resource_name, []))
        return DescribeConfigsResponse(0, results)

    def incremental_alter_configs(
        self, request: IncrementalAlterConfigsRequest, principal: str
    ) -> IncrementalAlterConfigsResponse:
        """The answer to a whole IncrementalAlterConfigs request, in request order."""
        return IncrementalAlterConfigsResponse(
            0, self.incremental_alter(request.resources, request.validate_only, principal, local_only=True)
        )

    def alter_configs(self, request: AlterConfigsRequest, principal: str) -> AlterConfigsResponse:
        """The answer to a whole (legacy) AlterConfigs request, in request order."""
        return AlterConfigsResponse(0, self.alter(request.resources, request.validate_only, principal, local_only=True))

    def list_config_resources(self, request: ListConfigResourcesRequest, version: int) -> ListConfigResourcesResponse:
        """The answer to a ListConfigResources request (v0: the subscriptions; v1: the subscriptions when the
        types are empty or name CLIENT_METRICS; UNSUPPORTED_VERSION for a type v1 does not list)."""
        types = list(request.resource_types) if version >= 1 else [CLIENT_METRICS]
        if any(t not in LIST_V1_TYPES for t in types):
            return ListConfigResourcesResponse(0, int(ErrorCode.UNSUPPORTED_VERSION), [])
        if types and CLIENT_METRICS not in types:
            return ListConfigResourcesResponse(0, _NONE, [])
        return ListConfigResourcesResponse(0, _NONE, self.list_resources())

    def list_resources(self) -> list[ConfigResource]:
        """One ConfigResource per subscription in force."""
        return [ConfigResource(name, CLIENT_METRICS) for name in self.layers.names()]

    def other_resource_error(self, resource_type: int) -> Outcome:
        """What ``kip714 serve`` answers for a resource that is not CLIENT_METRICS (it holds no other configs)."""
        if resource_type == int(ConfigResourceType.TOPIC):
            return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "This server does not host this topic-partition."
        if resource_type in _KNOWN_TYPES:
            name = ConfigResourceType(resource_type).name
            return _INVALID_REQUEST, f"{self.role} only holds client-metrics configs, not {name} configs"
        return _INVALID_REQUEST, f"Unknown resource type {resource_type}"

    # ------------------------------------------------------------------------------ CLIENT_METRICS resources

    def describe(
        self, name: str, keys: Sequence[str] | None, synonyms: bool = False, documentation: bool = False
    ) -> DescribeConfigsResult:
        """One CLIENT_METRICS resource of a DescribeConfigs request (``keys``: None or empty for all)."""
        if not name:
            return DescribeConfigsResult(
                _INVALID_REQUEST, "Client metrics subscription name must not be empty", CLIENT_METRICS, name, []
            )
        stored = self.layers.config(name) or {}
        configs = []
        for key in DESCRIBE_ORDER:
            if keys and key not in keys:
                continue
            is_set = key in stored
            value = _normalised(key, stored[key]) if is_set else _DEFAULTS[key]
            source = _STORED if is_set else _DEFAULT
            configs.append(
                DescribeConfigsResourceResult(
                    key,
                    value,
                    False,
                    source,
                    False,
                    [DescribeConfigsSynonym(key, value, _STORED)] if synonyms and is_set else [],
                    _TYPES[key],
                    _DOCS[key] if documentation else None,
                )
            )
        return DescribeConfigsResult(_NONE, None, CLIENT_METRICS, name, configs)

    def incremental_alter(
        self, resources: Sequence[Any], validate_only: bool, principal: str, local_only: bool = False
    ) -> list[AlterConfigsResourceResponse]:
        """IncrementalAlterConfigs for ``resources`` (``local_only``: answer other types too, as serve does;
        else they must all be CLIENT_METRICS), applied together; one response per resource, in order."""
        return self._alter(resources, validate_only, principal, local_only, incremental=True)

    def alter(
        self, resources: Sequence[Any], validate_only: bool, principal: str, local_only: bool = False
    ) -> list[AlterConfigsResourceResponse]:
        """Legacy AlterConfigs for ``resources`` (each resource's config replaced by the given set)."""
        return self._alter(resources, validate_only, principal, local_only, incremental=False)

    def _alter(
        self, resources: Sequence[Any], validate_only: bool, principal: str, local_only: bool, incremental: bool
    ) -> list[AlterConfigsResourceResponse]:
        seen: dict[tuple[int, str], int] = {}
        for res in resources:
            key = (res.resource_type, res.resource_name)
            seen[key] = seen.get(key, 0) + 1
        outcomes: list[Outcome] = []
        changes: dict[str, dict[str, str] | None] = {}
        ops: dict[str, Sequence[Any]] = {}  # name -> the configs of its resource, to compute it again
        changed_at: list[int] = []
        authorized = self.may_alter(principal)
        for i, res in enumerate(resources):
            try:
                if seen[(res.resource_type, res.resource_name)] > 1:
                    raise _refused(_INVALID_REQUEST, "Each resource must appear at most once.")
                _check_keys_and_nulls(res.configs, incremental)
                if res.resource_type != CLIENT_METRICS:
                    if not local_only:
                        raise ValueError("a resource of another type reached the client-metrics admin")
                    raise _refused(*self.other_resource_error(res.resource_type))
                if not authorized:
                    self.refused += 1
                    raise _refused(_UNAUTHORIZED, None)
                current = changes.get(res.resource_name, self.layers.config(res.resource_name)) or {}
                new = _apply_ops(current, res.configs) if incremental else {c.name: c.value for c in res.configs}
                if new:
                    _validate(res.resource_name, new)
                if not validate_only and new != current:
                    changes[res.resource_name] = new or None
                    ops[res.resource_name] = res.configs
                    changed_at.append(i)
                outcomes.append((_NONE, None))
            except Kip714Error as exc:
                outcomes.append((int(exc.error_code), str(exc) or None))
        if changes:

            def recompute(name: str) -> dict[str, str] | None:
                """The resource's change computed again from the state in force (another replica changed it
                first: a state topic's order decides, and neither change is undone)."""
                current = self.layers.config(name) or {}
                new = _apply_ops(current, ops[name]) if incremental else {c.name: c.value for c in ops[name]}
                if new:
                    _validate(name, new)
                return new or None

            try:
                self.layers.change(changes, recompute)
            except (OSError, Kip714Error) as exc:
                log.error("event=admin_change_failed error=%r names=%s", exc, ",".join(changes))
                if isinstance(exc, OSError):
                    failure: Outcome = (_STORAGE, f"kip714 could not store the change: {exc.strerror or exc}")
                else:
                    failure = (int(exc.error_code), str(exc) or None)
                for i in changed_at:
                    outcomes[i] = failure
            else:
                self.changes += len(changes)
                log.info(
                    "event=admin_change principal=%s %s version=%d",
                    principal,
                    " ".join(f"{'set' if cfg else 'deleted'}={name}" for name, cfg in changes.items()),
                    self.layers.registry.version,
                )
        return [
            AlterConfigsResourceResponse(code, message, res.resource_type, res.resource_name)
            for (code, message), res in zip(outcomes, resources, strict=True)
        ]


def _check_keys_and_nulls(configs: Sequence[Any], incremental: bool) -> None:
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise _refused(_INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [
        c.name
        for c in configs
        if c.value is None and not (incremental and c.config_operation == int(AlterConfigOp.DELETE))
    ]
    if nulls:
        raise _refused(_INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))


def _apply_ops(current: dict[str, str], configs: Sequence[Any]) -> dict[str, str]:
    """The config after IncrementalAlterConfigs' operations (Kafka's ``incrementalAlterConfigResource``)."""
    new = dict(current)
    for c in configs:
        op = c.config_operation
        if op == AlterConfigOp.SET:
            new[c.name] = c.value
        elif op == AlterConfigOp.DELETE:
            new.pop(c.name, None)
        elif op in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
            # Kafka's config schema has no LIST keys for CLIENT_METRICS (KafkaConfigSchema: BROKER and TOPIC)
            raise _refused(_INVALID_CONFIG, f"Can't {_OP_NAMES[op]} to key {c.name} because its type is not LIST.")
        else:
            raise _refused(_INVALID_REQUEST, f"Unknown alter configs operation type {op}")
    return new


def _validate(name: str, config: dict[str, str]) -> None:
    """``ClientMetricsConfigs.validate``: the registry's checks and Kafka's messages (a Kip714Error)."""
    validate_subscription(name, config)  # raises Kafka's error code and message


def _normalised(key: str, value: str) -> str:
    """A stored value as Kafka's DescribeConfigs prints it (``ConfigDef.convertToString`` of the parsed value)."""
    if key == "interval.ms":
        return str(int(value.strip()))
    return ",".join(parse_kafka_list(value))
