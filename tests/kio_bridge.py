"""Convert between kip714 messages and kio's dataclasses (the independent codec used as an oracle).

kio names a few fields differently (``throttle_time`` as a timedelta for ``throttle_time_ms``), keeps
error codes as an enum, UUIDs as ``uuid.UUID | None`` (None for the zero UUID) and arrays as tuples.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import importlib
import io
import typing
import uuid

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial import entity_reader, entity_writer

import kip714

ZERO = uuid.UUID(int=0)

# kip714 message class name -> (kio schema package, kio class name)
KIO_NAMES = {
    "GetTelemetrySubscriptionsRequest": ("get_telemetry_subscriptions", "request"),
    "GetTelemetrySubscriptionsResponse": ("get_telemetry_subscriptions", "response"),
    "PushTelemetryRequest": ("push_telemetry", "request"),
    "PushTelemetryResponse": ("push_telemetry", "response"),
    "ApiVersionsRequest": ("api_versions", "request"),
    "ApiVersionsResponse": ("api_versions", "response"),
    "MetadataRequest": ("metadata", "request"),
    "MetadataResponse": ("metadata", "response"),
    "DescribeConfigsRequest": ("describe_configs", "request"),
    "DescribeConfigsResponse": ("describe_configs", "response"),
    "AlterConfigsRequest": ("alter_configs", "request"),
    "AlterConfigsResponse": ("alter_configs", "response"),
    "IncrementalAlterConfigsRequest": ("incremental_alter_configs", "request"),
    "IncrementalAlterConfigsResponse": ("incremental_alter_configs", "response"),
    "ListConfigResourcesRequest": ("list_config_resources", "request"),
    "ListConfigResourcesResponse": ("list_config_resources", "response"),
}
RENAMED = {"throttle_time": "throttle_time_ms", "push_interval": "push_interval_ms"}


def kio_class(ours: type, version: int) -> type:
    package, kind = KIO_NAMES[ours.__name__]
    module = importlib.import_module(f"kio.schema.{package}.v{version}.{kind}")
    return getattr(module, ours.__name__)


def _nested_kio_type(hint):
    """tuple[X, ...] -> X when X is a kio dataclass, else None."""
    args = typing.get_args(hint)
    if type(None) in args:  # Optional[tuple[X, ...]]
        hint = next(a for a in args if a is not type(None))
        args = typing.get_args(hint)
    if args and dataclasses.is_dataclass(args[0]):
        return args[0]
    return None


@functools.cache
def _hints(kcls: type) -> dict:
    """kio's resolved field types of ``kcls`` (typing.get_type_hints per call was most of the oracle's time)."""
    return typing.get_type_hints(kcls)


def to_kio(msg, kcls):
    hints = _hints(kcls)
    kwargs = {}
    for f in dataclasses.fields(kcls):
        value = getattr(msg, RENAMED.get(f.name, f.name))
        hint = hints[f.name]
        if f.name in ("throttle_time", "push_interval"):
            value = datetime.timedelta(milliseconds=value)
        elif f.name == "error_code":
            value = KioErrorCode(value)
        elif isinstance(value, uuid.UUID):
            value = None if value == ZERO else value
        elif isinstance(value, list):
            inner = _nested_kio_type(hint)
            value = tuple(to_kio(v, inner) for v in value) if inner else tuple(value)
        elif f.name == "error_code" or value is None:
            pass
        elif isinstance(value, memoryview):
            value = value.tobytes()
        kwargs[f.name] = value
    return kcls(**kwargs)


def from_kio(kobj) -> dict:
    """kio dataclass -> dict keyed by kip714 field names with kip714's value conventions."""
    out = {}
    for f in dataclasses.fields(kobj):
        value = getattr(kobj, f.name)
        if isinstance(value, datetime.timedelta):
            value = round(value.total_seconds() * 1000)
        elif isinstance(value, KioErrorCode):
            value = value.value
        elif value is None and "uuid" in str(f.type).lower():
            value = ZERO
        elif isinstance(value, tuple):
            value = [from_kio(v) if dataclasses.is_dataclass(v) else v for v in value]
        out[RENAMED.get(f.name, f.name)] = value
    return out


def ours_as_dict(msg, kcls) -> dict:
    """Our message restricted to the fields kio has at that version."""
    full = msg.to_dict()
    out = {}
    for f in dataclasses.fields(kcls):
        name = RENAMED.get(f.name, f.name)
        value = full[name]
        inner = _nested_kio_type(_hints(kcls)[f.name])
        if inner is not None and value is not None:
            value = [_restrict(v, inner) for v in value]
        if isinstance(value, memoryview):
            value = value.tobytes()
        out[name] = value
    return out


def _restrict(d: dict, kcls) -> dict:
    out = {}
    hints = _hints(kcls)
    for f in dataclasses.fields(kcls):
        value = d[RENAMED.get(f.name, f.name)]
        inner = _nested_kio_type(hints[f.name])
        if inner is not None and value is not None:
            value = [_restrict(v, inner) for v in value]
        out[RENAMED.get(f.name, f.name)] = value
    return out


def kio_encode(kobj) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(kobj))(buf, kobj)
    return buf.getvalue()


def kio_decode(kcls, data: bytes):
    obj, used = entity_reader(kcls)(bytes(data), 0)
    assert used == len(data), f"kio consumed {used} of {len(data)} bytes"
    return obj


__all__ = ["kio_class", "to_kio", "from_kio", "ours_as_dict", "kio_encode", "kio_decode", "kip714"]
