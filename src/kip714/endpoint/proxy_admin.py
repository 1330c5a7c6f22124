"""The proxy's half of Kafka's config admin API (``kip714 proxy --telemetry terminate``): CLIENT_METRICS
resources are kip714's subscriptions, every other resource is the cluster's.

:func:`split_admin_request` takes one decoded DescribeConfigs, IncrementalAlterConfigs, AlterConfigs or
ListConfigResources request and says what to do with it (an :class:`AdminSplit`):

* only CLIENT_METRICS resources (or ListConfigResources v0, or v1 naming CLIENT_METRICS alone): kip714
  answers it whole (``local``);
* none: the request goes to the cluster untouched (``forward`` is the original frame, no ``merge``);
* both: the request goes to the cluster without its CLIENT_METRICS resources (re-encoded at the client's
  version, same correlation id) and ``merge`` turns the cluster's answer into the one response the client
  gets: every resource in request order, the cluster's throttle time and header tags. (ListConfigResources
  v1 with no types asks for everything: it goes as it is and the cluster's CLIENT_METRICS rows are replaced by
  kip714's, placed where Kafka lists that type: after GROUP, before BROKER_LOGGER, BROKER and TOPIC.)

When the cluster does not answer the API at the client's version (librdkafka's mock cluster answers none of
them) the other resources are answered here with UNSUPPORTED_VERSION naming the API, never sent to a broker
that would close the connection.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._enums import ApiKey, ConfigResourceType, ErrorCode
from .._protocol import (
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListConfigResourcesRequest,
    decode_response,
    encode_request,
    encode_response,
)
from ..broker.config_admin import CLIENT_METRICS, LIST_V1_TYPES, ClientMetricsAdmin
from ..errors import MalformedFrameError

__all__ = ["AdminSplit", "split_admin_request"]

_GROUP = int(ConfigResourceType.GROUP)
_UNSUPPORTED_VERSION = int(ErrorCode.UNSUPPORTED_VERSION)
_NAMES = {
    int(ApiKey.DESCRIBE_CONFIGS): "DescribeConfigs",
    int(ApiKey.ALTER_CONFIGS): "AlterConfigs",
    int(ApiKey.INCREMENTAL_ALTER_CONFIGS): "IncrementalAlterConfigs",
    int(ApiKey.LIST_CONFIG_RESOURCES): "ListConfigResources",
}


@dataclass
class AdminSplit:
    """What the proxy does with one admin request: answer it (``local``, a size-prefixed response frame), or
    send ``forward`` (a size-prefixed request frame) to the cluster and, when ``merge`` is set, turn the
    cluster's response (its frame without the size prefix) into the client's with it."""

    local: bytes | None = None
    forward: bytes | None = None
    merge: Callable[[Any], bytes] | None = None


def split_admin_request(
    admin: ClientMetricsAdmin, request: Any, frame: bytes, principal: str, upstream_apis: dict[int, tuple[int, int]]
) -> AdminSplit:
    """Split one decoded admin ``request`` (a :class:`~kip714.wire.Request`; ``frame``: its size-prefixed
    frame) between kip714 and the cluster (``upstream_apis``: api key -> (min, max) the cluster advertised)."""
    body, version, corr = request.body, request.api_version, request.correlation_id
    lo, hi = upstream_apis.get(request.api_key, (0, -1))
    upstream_answers = lo <= version <= hi
    if type(body) is ListConfigResourcesRequest:
        return _split_list(admin, request, frame, upstream_answers)
    local_at = [res.resource_type == CLIENT_METRICS for res in body.resources]
    if not any(local_at):
        if upstream_answers:
            return AdminSplit(forward=frame)
    elif all(local_at) or not upstream_answers:
        pass
    else:
        return _split_resources(admin, request, local_at, principal)
    # answered here whole: the CLIENT_METRICS resources, and the others when the cluster cannot answer them
    unsupported = (
        _UNSUPPORTED_VERSION,
        f"the cluster behind kip714 proxy does not answer {_NAMES[request.api_key]} v{version}",
    )
    return AdminSplit(
        local=encode_response(corr, _local_response(admin, body, local_at, principal, unsupported), version)
    )


def _local_response(
    admin: ClientMetricsAdmin, body: Any, local_at: list[bool], principal: str, unsupported: tuple[int, str]
) -> Any:
    """The whole answer made here (resources not CLIENT_METRICS get ``unsupported``)."""
    mine = [res for res, here in zip(body.resources, local_at, strict=True) if here]
    ours = iter(_local_results(admin, body, mine, principal))
    out = []
    for res, here in zip(body.resources, local_at, strict=True):
        if here:
            out.append(next(ours))
        elif type(body) is DescribeConfigsRequest:
            out.append(DescribeConfigsResult(unsupported[0], unsupported[1], res.resource_type, res.resource_name, []))
        else:
            out.append(
                AlterConfigsResourceResponse(unsupported[0], unsupported[1], res.resource_type, res.resource_name)
            )
    return _response_of(body, 0, out)


def _local_results(admin: ClientMetricsAdmin, body: Any, resources: list[Any], principal: str) -> list[Any]:
    if type(body) is DescribeConfigsRequest:
        return [
            admin.describe(r.resource_name, r.configuration_keys, body.include_synonyms, body.include_documentation)
            for r in resources
        ]
    if type(body) is IncrementalAlterConfigsRequest:
        return admin.incremental_alter(resources, body.validate_only, principal)
    return admin.alter(resources, body.validate_only, principal)


def _response_of(body: Any, throttle: int, results: list[Any]) -> Any:
    if type(body) is DescribeConfigsRequest:
        return DescribeConfigsResponse(throttle, results)
    if type(body) is IncrementalAlterConfigsRequest:
        return IncrementalAlterConfigsResponse(throttle, results)
    return AlterConfigsResponse(throttle, results)


def _split_resources(admin: ClientMetricsAdmin, request: Any, local_at: list[bool], principal: str) -> AdminSplit:
    body, version, corr = request.body, request.api_version, request.correlation_id
    mine = [res for res, here in zip(body.resources, local_at, strict=True) if here]
    theirs = [res for res, here in zip(body.resources, local_at, strict=True) if not here]
    ours = _local_results(admin, body, mine, principal)  # applied now (a failing cluster half closes the
    if type(body) is DescribeConfigsRequest:  # client connection: Kafka would have applied too)
        rest: Any = DescribeConfigsRequest(
            theirs, body.include_synonyms, body.include_documentation, body.unknown_tagged_fields
        )
    elif type(body) is IncrementalAlterConfigsRequest:
        rest = IncrementalAlterConfigsRequest(theirs, body.validate_only, body.unknown_tagged_fields)
    else:
        rest = AlterConfigsRequest(theirs, body.validate_only, body.unknown_tagged_fields)
    forward = encode_request(rest, corr, request.client_id, version, request.header.unknown_tagged_fields)
    api_key = request.api_key

    def merge(upstream: Any) -> bytes:
        resp = decode_response(upstream, api_key, version)
        theirs_out = resp.body.results if type(body) is DescribeConfigsRequest else resp.body.responses
        by_key: dict[tuple[int, str], collections.deque[Any]] = collections.defaultdict(collections.deque)
        for r in theirs_out:
            by_key[(r.resource_type, r.resource_name)].append(r)
        mine_iter = iter(ours)
        out = []
        for res, here in zip(body.resources, local_at, strict=True):
            if here:
                out.append(next(mine_iter))
                continue
            queue = by_key.get((res.resource_type, res.resource_name))
            if not queue:
                raise MalformedFrameError(
                    f"the cluster's {_NAMES[api_key]} answer lacks resource "
                    f"{res.resource_name!r} of type {res.resource_type}"
                )
            out.append(queue.popleft())
        merged = _response_of(body, resp.body.throttle_time_ms, out)
        merged.unknown_tagged_fields = resp.body.unknown_tagged_fields
        return encode_response(corr, merged, version, resp.header.unknown_tagged_fields)

    return AdminSplit(forward=forward, merge=merge)


def _split_list(admin: ClientMetricsAdmin, request: Any, frame: bytes, upstream_answers: bool) -> AdminSplit:
    body, version, corr = request.body, request.api_version, request.correlation_id
    types = list(body.resource_types) if version >= 1 else [CLIENT_METRICS]
    local = types == [CLIENT_METRICS] * len(types) and bool(types)
    if local or not upstream_answers or any(t not in LIST_V1_TYPES for t in types):
        # kip714's own answer: its subscriptions, nothing of a cluster that does not answer, or Kafka's error
        return AdminSplit(local=encode_response(corr, admin.list_config_resources(body, version), version))
    if types and CLIENT_METRICS not in types:
        return AdminSplit(forward=frame)
    forward = frame
    if types:
        rest = ListConfigResourcesRequest([t for t in types if t != CLIENT_METRICS], body.unknown_tagged_fields)
        forward = encode_request(rest, corr, request.client_id, version, request.header.unknown_tagged_fields)

    def merge(upstream: Any) -> bytes:
        resp = decode_response(upstream, request.api_key, version)
        theirs = resp.body
        if theirs.error_code:
            return encode_response(corr, theirs, version, resp.header.unknown_tagged_fields)
        rows = [r for r in theirs.config_resources if r.resource_type != CLIENT_METRICS]
        groups = [r for r in rows if r.resource_type == _GROUP]  # Kafka lists GROUP, then CLIENT_METRICS, ...
        others = [r for r in rows if r.resource_type != _GROUP]
        theirs.config_resources = groups + admin.list_resources() + others
        return encode_response(corr, theirs, version, resp.header.unknown_tagged_fields)

    return AdminSplit(forward=forward, merge=merge)
