"""Reference OTLP flattening built on protobuf (upb): one row per data point.

This is the slow, obviously-correct path: it parses ``MetricsData`` with the official
``opentelemetry-proto`` classes and walks the tree in Python. kip714 uses it as the oracle that its
native decoder is tested against and as the peer it is benchmarked against.

Row fields (the columns of :func:`kip714.decode_metrics`): ``metric``, ``description``, ``unit``,
``kind`` (OTLP's oneof name: gauge, sum, histogram, exponential_histogram, summary), ``temporality``
(delta, cumulative or None), ``monotonic`` (None unless a sum), ``attributes``, ``resource`` (dicts of
str → str), ``scope_name``, ``scope_version``, ``start_time_unix_nano``, ``time_unix_nano``, ``value``
(float; None for distributions), ``value_int`` (int when the point was an int), ``count``, ``sum``,
``min``, ``max``, ``bucket_counts``, ``explicit_bounds``, ``scale``, ``zero_count``, ``positive_offset``,
``positive_bucket_counts``, ``negative_offset``, ``negative_bucket_counts``, ``quantiles`` (list of
(quantile, value)), ``flags``, ``exemplar_count``.

Attribute values are rendered as text: strings as they are, booleans ``true``/``false``, integers in
decimal, doubles as Python's ``repr`` (shortest round-trip), bytes as base64, arrays and key-value lists
as compact JSON of those renderings (an unset value is ``null``). ``string_value_strindex`` (an index
into a Profiles string table, meaningless in metrics) renders like an unset value.

Unsigned fields keep protobuf's values here, however large; the native decoder refuses payloads in
which one of :data:`UNSIGNED_FIELDS` is 2**63 or more (:func:`exceeds_int64` tells which rows).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from ..errors import CorruptPayloadError
from .schema import COLUMNS, UNSIGNED_FIELDS

if TYPE_CHECKING:  # protobuf is imported when a payload is parsed, not with this module
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData
    from typing_extensions import Buffer

_TEMPORALITY = {0: None, 1: "delta", 2: "cumulative"}


def exceeds_int64(row: Mapping[str, Any]) -> bool:
    """Whether a reference row holds an unsigned value that the native decoder's int64 columns refuse."""
    for name in UNSIGNED_FIELDS:
        v = row.get(name)
        if v is None:
            continue
        if (max(v, default=0) if isinstance(v, list) else v) >= 1 << 63:
            return True
    return False


#: An AnyValue as JSON-ready Python (doubles as :class:`_RawJson`, their repr()).
_Json: TypeAlias = str | bool | int | list["_Json"] | dict[str, "_Json"] | None


def _json_value(v: AnyValue) -> _Json:
    """``v`` inside an array or a kvlist: JSON's own types where JSON has one, otherwise its attribute text."""
    which = v.WhichOneof("value")
    if which == "bool_value":
        return v.bool_value
    if which == "int_value":
        return v.int_value
    if which == "double_value":
        return _RawJson(repr(v.double_value))
    if which == "array_value":
        return [_json_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _json_value(kv.value) for kv in v.kvlist_value.values}
    return render_any_value(v)  # none, a string or bytes


class _RawJson(str):
    """A double already rendered with repr(); emitted without quotes."""


def _dump(obj: _Json) -> str:
    if isinstance(obj, _RawJson):
        return str(obj)
    if obj is None:
        return "null"
    if isinstance(obj, bool):
        return "true" if obj else "false"
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, str):
        return json.dumps(obj, ensure_ascii=False)
    if isinstance(obj, list):
        return "[" + ",".join(_dump(x) for x in obj) + "]"
    return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _dump(v) for k, v in obj.items()) + "}"


def render_any_value(v: AnyValue) -> str | None:
    """An OTLP AnyValue as attribute text (see the module docstring)."""
    which = v.WhichOneof("value")
    if which is None or which == "string_value_strindex":
        return None
    if which == "string_value":
        return v.string_value
    if which == "bool_value":
        return "true" if v.bool_value else "false"
    if which == "int_value":
        return str(v.int_value)
    if which == "double_value":
        return repr(v.double_value)
    if which == "bytes_value":
        return base64.b64encode(v.bytes_value).decode("ascii")
    return _dump(_json_value(v))


def _attrs(kvs: Iterable[KeyValue]) -> dict[str, str | None]:
    return {kv.key: render_any_value(kv.value) for kv in kvs}


def parse_metrics_data(data: Buffer) -> MetricsData:
    """Parse bytes into ``MetricsData`` (CorruptPayloadError if protobuf refuses them)."""
    # protobuf ships no type information and types-protobuf is not installed
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

    msg = MetricsData()
    try:
        msg.ParseFromString(bytes(data))
    except DecodeError as exc:
        raise CorruptPayloadError(f"not an OTLP MetricsData message: {exc}") from None
    return msg


def flatten(data: Buffer) -> list[dict[str, Any]]:
    """One dict per data point, in document order (see the module docstring for the fields)."""
    msg = parse_metrics_data(data)
    rows: list[dict[str, Any]] = []
    for rm in msg.resource_metrics:
        resource = _attrs(rm.resource.attributes)
        for sm in rm.scope_metrics:
            scope_name = sm.scope.name
            scope_version = sm.scope.version
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                if kind is None:
                    continue
                body = getattr(m, kind)
                temporality = (
                    _TEMPORALITY.get(body.aggregation_temporality)
                    if kind in ("sum", "histogram", "exponential_histogram")
                    else None
                )
                monotonic = body.is_monotonic if kind == "sum" else None
                for p in body.data_points:
                    row = dict.fromkeys(COLUMNS)
                    row.update(
                        metric=m.name,
                        description=m.description,
                        unit=m.unit,
                        kind=kind,
                        temporality=temporality,
                        monotonic=monotonic,
                        attributes=_attrs(p.attributes),
                        resource=resource,
                        scope_name=scope_name,
                        scope_version=scope_version,
                        start_time_unix_nano=p.start_time_unix_nano,
                        time_unix_nano=p.time_unix_nano,
                        flags=p.flags,
                    )
                    if kind in ("gauge", "sum"):
                        which = p.WhichOneof("value")
                        if which == "as_int":
                            row["value_int"] = p.as_int
                            row["value"] = float(p.as_int)
                        elif which == "as_double":
                            row["value"] = p.as_double
                        row["exemplar_count"] = len(p.exemplars)
                    elif kind == "histogram":
                        row.update(
                            count=p.count,
                            sum=p.sum if p.HasField("sum") else None,
                            min=p.min if p.HasField("min") else None,
                            max=p.max if p.HasField("max") else None,
                            bucket_counts=list(p.bucket_counts),
                            explicit_bounds=list(p.explicit_bounds),
                            exemplar_count=len(p.exemplars),
                        )
                    elif kind == "exponential_histogram":
                        row.update(
                            count=p.count,
                            sum=p.sum if p.HasField("sum") else None,
                            min=p.min if p.HasField("min") else None,
                            max=p.max if p.HasField("max") else None,
                            scale=p.scale,
                            zero_count=p.zero_count,
                            positive_offset=p.positive.offset,
                            positive_bucket_counts=list(p.positive.bucket_counts),
                            negative_offset=p.negative.offset,
                            negative_bucket_counts=list(p.negative.bucket_counts),
                            exemplar_count=len(p.exemplars),
                        )
                    else:  # summary
                        row.update(
                            count=p.count, sum=p.sum, quantiles=[(q.quantile, q.value) for q in p.quantile_values]
                        )
                    rows.append(row)
    return rows
