"""Client-metrics subscriptions, parsed, validated, matched and resolved exactly as Apache Kafka does.

A :class:`SubscriptionRegistry` holds the broker's ``CLIENT_METRICS`` resources (Kafka's
``ClientMetricsManager`` subscription map). ``set(name, config)`` takes the config entries as Kafka's
config strings — ``metrics`` (a LIST of metric-name prefixes, ``*`` for all), ``interval.ms``
(100–3600000, default 300000) and ``match`` (a LIST of ``selector=regex``) — and validates them like
Kafka's ``ClientMetricsConfigs.validate``. ``resolve(client)`` answers what a broker would put in the
GetTelemetrySubscriptions response for that client: the requested metrics in Java ``HashSet`` order, the
push interval, and the SubscriptionId — bit-identical to a Java broker with the same configuration
history (JDK 17 ordering by default, ``jdk=19`` for JDK 19+).

Kafka's quirks, followed on purpose:

- LIST values are trimmed and split on commas with the whitespace around them; empty items are kept
  (``"a,"`` is ``["a", ""]``), so a ``match`` regex cannot contain a comma.
- A ``match`` entry splits on ``=`` the way Java's ``String.split`` does (trailing empty parts dropped):
  it must give exactly two parts, so a regex cannot contain ``=``; ``k=`` is refused; ``k=v=`` is ``k``/``v``.
- Patterns match the whole attribute (Java ``matches()`` = Python ``re.fullmatch``). Python's ``re`` syntax
  stands in for ``java.util.regex``; the syntax both share (the patterns people write) behaves the same.
- The push interval in a response is ``min(300000, intervals of the matching subscriptions)``: never above
  300000 even though the config allows up to 3600000.
- Any matching subscription containing ``*`` collapses the whole set to ``["*"]``.
- Every change (add, replace, delete of an existing name) bumps :attr:`version`; brokers rebuild an
  instance whose subscription is older, so its SubscriptionId changes.

Regular-expression complexity: ``match`` patterns run in linear time (:mod:`kip714.broker.patterns`).
"""

from __future__ import annotations

import binascii
import re
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._crc import compute_subscription_id, uuid_hash
from ..errors import InvalidConfigError, InvalidRequestError
from .javaorder import JavaConcurrentHashMap, JavaHashSet, resolve_order, to_i32
from .patterns import SafePattern, UnsafePatternError

#: Kafka's principal for a connection without authentication.
ANONYMOUS_PRINCIPAL = "User:ANONYMOUS"

__all__ = [
    "ANONYMOUS_PRINCIPAL",
    "ClientInfo",
    "Resolution",
    "SubscriptionRegistry",
    "Subscription",
    "DEFAULT_INTERVAL_MS",
    "MIN_INTERVAL_MS",
    "MAX_INTERVAL_MS",
    "MATCH_SELECTORS",
    "kafka_uuid_string",
    "parse_kafka_list",
    "parse_config_string",
    "validate_subscription",
    "CONFIG_KEYS",
]

DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3_600_000
CONFIG_KEYS = ("metrics", "interval.ms", "match")
MATCH_SELECTORS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)
_JAVA_WS = "".join(chr(c) for c in range(33))  # String.trim() removes every char <= ' '
_LIST_SPLIT = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")  # ConfigDef's "\\s*,\\s*"


_URLSAFE = bytes.maketrans(b"+/", b"-_")


def kafka_uuid_string(value: uuid.UUID | bytes) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, no padding (22 characters). Takes a
    :class:`uuid.UUID` or the 16 raw bytes."""
    raw = value.bytes if isinstance(value, uuid.UUID) else bytes(value)
    if len(raw) != 16:
        raise ValueError(f"a client instance id is 16 bytes, got {len(raw)}")
    # (base64.urlsafe_b64encode(raw).rstrip(b"=") in one C call and a translation: this runs per push)
    return binascii.b2a_base64(raw, newline=False)[:22].translate(_URLSAFE).decode("ascii")


def parse_kafka_list(value: str | None) -> list[str]:
    """Kafka's ``ConfigDef`` LIST parsing: trim, ``[]`` when empty, else split on ``\\s*,\\s*`` keeping
    empty items."""
    if value is None:
        return []
    value = value.strip(_JAVA_WS)
    if not value:
        return []
    return _LIST_SPLIT.split(value)


def _java_split_eq(text: str) -> list[str]:
    parts = text.split("=")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


_ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True)
class ClientInfo:
    """The connection attributes a broker matches subscriptions against and adds as labels.

    ``client_software_name`` / ``_version`` come from a valid ApiVersions v3+ request and are
    ``"unknown"`` otherwise, as in Kafka. ``client_source_address`` should be in Java's textual form
    (IPv6 uncompressed, e.g. ``0:0:0:0:0:0:0:1``)."""

    client_instance_id: uuid.UUID = _ZERO_UUID  # immutable, shared
    client_id: str = ""
    client_software_name: str = "unknown"
    client_software_version: str = "unknown"
    client_source_address: str = ""
    client_source_port: int | str = ""
    principal: str = ANONYMOUS_PRINCIPAL

    def attribute(self, selector: str) -> str | None:
        """The text a ``match`` selector is tested against (None when not known)."""
        if selector == "client_instance_id":
            return kafka_uuid_string(self.client_instance_id)
        if selector == "client_source_port":
            return None if self.client_source_port in ("", None) else str(self.client_source_port)
        value = getattr(self, selector)
        return None if value is None else str(value)

    def labels(self, node_id: int, instance: uuid.UUID | bytes | None = None) -> dict[str, str]:
        """The KIP's broker-added labels for this client as broker ``node_id`` sees it (``instance``, a
        ``uuid.UUID`` or its 16 bytes, overrides ``client_instance_id``), in the order recordings store
        them."""
        return {
            "client_instance_id": kafka_uuid_string(self.client_instance_id if instance is None else instance),
            "client_id": self.client_id,
            "client_software_name": self.client_software_name,
            "client_software_version": self.client_software_version,
            "client_source_address": self.client_source_address,
            "client_source_port": str(self.client_source_port),
            "principal": self.principal,
            "node_id": str(node_id),
        }

    def with_instance_id(self, client_instance_id: uuid.UUID) -> ClientInfo:
        from dataclasses import replace

        return replace(self, client_instance_id=client_instance_id)


@dataclass(frozen=True)
class Subscription:
    """One validated CLIENT_METRICS resource."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: Mapping[str, re.Pattern[str]] = field(default_factory=dict)
    config: Mapping[str, str] = field(default_factory=dict)
    #: the ``match`` patterns compiled for bounded-time matching (built from ``match`` when not given)
    matchers: Mapping[str, SafePattern] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if set(self.matchers) != set(self.match):
            object.__setattr__(self, "matchers", {k: SafePattern(p.pattern, p.flags) for k, p in self.match.items()})

    def matches(self, client: ClientInfo) -> bool:
        for selector, pattern in self.matchers.items():
            value = client.attribute(selector)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


@dataclass(frozen=True)
class Resolution:
    """What the broker answers a client with: metrics in Java order, interval, SubscriptionId."""

    requested_metrics: tuple[str, ...]
    push_interval_ms: int
    subscription_id: int
    version: int
    crc_base: int  # the SubscriptionId of the zero UUID: subscription_id == crc_base ^ uuid_hash(id)
    matched: tuple[str, ...]  # names of the subscriptions that matched, in Java map order


def parse_config_string(text: str) -> dict[str, str]:
    """``kafka-configs.sh``/``kafka-client-metrics.sh`` style ``--add-config`` text →
    ``{"metrics": "a,b", "interval.ms": "1000", "match": "k=v,k2=v2"}``. Square brackets group a list
    value: ``metrics=[a,b],interval.ms=1000,match=[client_id=x,client_software_name=y]``."""
    out: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n:
        eq = text.find("=", i)
        if eq < 0:
            raise InvalidConfigError(f"expected key=value at {text[i:]!r}")
        key = text[i:eq].strip()
        j = eq + 1
        if j < n and text[j] == "[":
            end = text.find("]", j)
            if end < 0:
                raise InvalidConfigError(f"unclosed '[' in the value of {key!r}")
            value = text[j + 1 : end]
            j = end + 1
            if j < n and text[j] != ",":
                raise InvalidConfigError(f"expected ',' after the list value of {key!r}")
        else:
            end = text.find(",", j)
            end = n if end < 0 else end
            value = text[j:end]
            j = end
        out[key] = value
        i = j + 1 if j < n else n
    return out


def _parse_subscription(name: str, config: Mapping[str, str]) -> Subscription:
    for key in config:
        if key not in CONFIG_KEYS:
            raise InvalidRequestError(f"Unknown client metrics configuration: {key}")
    metrics = tuple(parse_kafka_list(config.get("metrics")))
    interval = DEFAULT_INTERVAL_MS
    if "interval.ms" in config:
        raw = config["interval.ms"]
        text = raw.strip(_JAVA_WS) if isinstance(raw, str) else raw
        try:
            interval = int(text)
            if isinstance(text, str) and not re.fullmatch(r"[+-]?[0-9]+", text):
                raise ValueError
        except (TypeError, ValueError):
            raise InvalidConfigError(
                f"Invalid value {raw} for configuration interval.ms: Not a number of type INT"
            ) from None
        if not -(2**31) <= interval < 2**31:
            raise InvalidConfigError(f"Invalid value {raw} for configuration interval.ms: Not a number of type INT")
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise InvalidRequestError(
                f"Invalid value {interval} for interval.ms, interval must be between 100 and 3600000 (1 hour)"
            )
    match: dict[str, re.Pattern[str]] = {}
    matchers: dict[str, SafePattern] = {}
    for entry in parse_kafka_list(config.get("match")):
        parts = _java_split_eq(entry)
        if len(parts) != 2:
            raise InvalidConfigError(f"Illegal client matching pattern: {entry}")
        key, pattern = parts[0].strip(_JAVA_WS), parts[1].strip(_JAVA_WS)
        if key not in MATCH_SELECTORS:
            raise InvalidConfigError(f"Illegal client matching pattern: {entry}")
        try:
            match[key] = re.compile(pattern)
            matchers[key] = SafePattern(pattern)
        except (re.error, RecursionError, OverflowError):
            raise InvalidConfigError(f"Illegal client matching pattern: {entry}") from None
        except UnsafePatternError as exc:
            raise InvalidConfigError(f"Illegal client matching pattern: {entry} ({exc})") from None
    return Subscription(name, metrics, interval, match, dict(config), matchers)


def validate_subscription(name: str, config: Mapping[str, str]) -> Subscription:
    """Kafka's ``ClientMetricsConfigs.validate`` on subscription ``name``'s whole config: the parsed
    :class:`Subscription`, or the :class:`~kip714.errors.Kip714Error` (INVALID_REQUEST or INVALID_CONFIG) with
    Kafka's message."""
    if not name:
        raise InvalidRequestError("Subscription name can't be empty")
    return _parse_subscription(name, config)


class SubscriptionRegistry:
    """The broker's CLIENT_METRICS subscriptions, kept in Java ``ConcurrentHashMap`` order.

    ``jdk`` selects the ``HashSet`` capacity rule of the JDK whose broker you need to agree with
    (17: JDK ≤ 18, the default; 19: JDK 19 and later). Thread-safe. Resolutions are cached per
    (configuration version, matched attributes), so resolving a known client is a dict lookup."""

    def __init__(self, jdk: int = 17) -> None:
        if jdk not in (17, 19) and not (isinstance(jdk, int) and jdk >= 8):
            raise ValueError("jdk must be a Java version such as 17 or 21")
        self.jdk = jdk
        self._map: JavaConcurrentHashMap[tuple[Subscription, Any]] = JavaConcurrentHashMap()
        self._version = 0
        self._lock = threading.RLock()
        self._cache: dict[tuple[Any, ...], tuple[tuple[str, ...], int, int, tuple[str, ...]]] = {}
        self._selectors: tuple[str, ...] = ()

    # ------------------------------------------------------------------------------------ changes

    @property
    def version(self) -> int:
        """Bumped by every change; an instance built from an older version is rebuilt."""
        return self._version

    def set(self, name: str, config: Mapping[str, str] | str) -> None:
        """Create, replace or (with an empty config) delete subscription ``name``.

        ``config`` is a dict of Kafka config strings or a ``kafka-configs.sh`` style string."""
        if not name:
            raise InvalidRequestError("Subscription name can't be empty")
        if isinstance(config, str):
            config = parse_config_string(config)
        if not config:
            self.delete(name)
            return
        sub = _parse_subscription(name, config)
        metrics_set = JavaHashSet.from_collection(list(sub.metrics), jdk=self.jdk)
        with self._lock:
            self._map.put(name, (sub, metrics_set))
            self._changed()

    def delete(self, name: str) -> bool:
        """Remove subscription ``name``; True if it existed (only then does the version change)."""
        with self._lock:
            if name not in self._map:
                return False
            self._map.remove(name)
            self._changed()
            return True

    def clear(self) -> None:
        with self._lock:
            for name in list(self._map.keys()):
                self._map.remove(name)
                self._changed()

    def _changed(self) -> None:
        self._version += 1
        self._cache.clear()
        used: set[str] = set()
        for sub, _ in self._map.values():
            used.update(sub.match)
        self._selectors = tuple(s for s in MATCH_SELECTORS if s in used)

    def subscriptions(self) -> list[Subscription]:
        """The subscriptions in Java map iteration order."""
        with self._lock:
            return [sub for sub, _ in self._map.values()]

    def get(self, name: str) -> Subscription | None:
        """Subscription ``name`` (None when there is none)."""
        with self._lock:
            entry = self._map.get(name)
            return None if entry is None else entry[0]

    def __len__(self) -> int:
        return len(self._map)

    def __contains__(self, name: str) -> bool:
        return name in self._map

    # ---------------------------------------------------------------------------------- resolving

    def resolve(self, client: ClientInfo, client_instance_id: uuid.UUID | None = None) -> Resolution:
        """The subscription a broker would hand ``client`` (its instance id, or ``client_instance_id``)."""
        instance = client.client_instance_id if client_instance_id is None else client_instance_id
        if instance != client.client_instance_id:
            client = client.with_instance_id(instance)
        with self._lock:
            version = self._version
            key = (version,) + tuple(client.attribute(s) for s in self._selectors)
            hit = self._cache.get(key)
            if hit is None:
                matched_sets: list[Any] = []
                matched_names: list[str] = []
                interval = DEFAULT_INTERVAL_MS
                for sub, metrics_set in self._map.values():
                    if sub.matches(client):
                        matched_sets.append(metrics_set)
                        matched_names.append(sub.name)
                        interval = min(interval, sub.interval_ms)
                requested = tuple(resolve_order(matched_sets))
                crc_base = compute_subscription_id(requested, interval, uuid.UUID(int=0))
                hit = (requested, interval, crc_base, tuple(matched_names))
                if len(self._cache) > 65536:
                    self._cache.clear()
                self._cache[key] = hit
        requested, interval, crc_base, names = hit
        sid = to_i32(crc_base ^ uuid_hash(instance))
        return Resolution(requested, interval, sid, version, crc_base, names)
