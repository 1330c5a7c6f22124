"""``kip714 subscriptions explain|lint``: which subscription a client gets, and what in a subscription file puts
a fleet at risk.

:func:`explain` resolves a client against a set of subscriptions with the broker's own
:class:`~kip714.broker.subscriptions.SubscriptionRegistry` (so the matched subscriptions, the merged requested
metrics in Java ``HashSet`` order, the push interval and the SubscriptionId are what a Java broker with the
same subscriptions answers), and says for every subscription why it matched or not.

:func:`lint` reports :class:`Finding` s:

- ``invalid-config``: a subscription Kafka refuses (unknown key, a ``match`` entry it cannot parse);
- ``interval-out-of-bounds``: ``interval.ms`` outside Kafka's 100..3600000 (refused: INVALID_REQUEST);
  ``interval-capped``: above 300000, which the broker never sends (it answers ``min(300000, …)``);
- ``empty-metrics``: ``metrics=`` (or no ``metrics``): Kafka reads it as *no* metric (clients matched only by
  it fetch their subscription and never push), WarpStream as *all*; ``*`` means all;
  ``empty-prefix``: an empty item (``metrics=a,``) matches every metric;
- ``prefix-matches-nothing``: a prefix that matches no standard metric, no metric kip714 knows of, and (with
  a recording) no metric the fleet pushed;
- ``invalid-regex`` / ``unsafe-regex``: a ``match`` pattern that does not compile, or that a backtracking
  engine (Java's ``java.util.regex``, which the broker runs) takes exponential time on (nested or
  ambiguous quantifiers, backreferences, lookaround); ``regex-never-matches``: one that cannot match any
  value of its selector (a character the selector's values never hold), or (with a recording) no client
  the fleet has; ``glob-like-regex``: ``my-app*`` written as a glob;
- ``several-subscriptions``: clients matched by several subscriptions (their metrics are merged and the
  shortest interval wins): with a recording or ``--client``, the clients; without, a subscription with
  no ``match`` (it matches every client) beside others;
- ``known-defect``: with a recording, client software versions in the fleet with a known telemetry defect
  (:data:`~kip714.operations.defects.KNOWN_DEFECTS`) that the subscription they get would trigger.

The subscriptions come from a file (``--config``, ``kip714 serve``'s format, :func:`load_subscriptions`) or from
a running endpoint or Kafka broker through Kafka's admin API (``--bootstrap-server``,
:func:`kip714.operations.admin_read.read_subscriptions`); both give the same ``{name: {key: value}}``.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..broker.subscriptions import (
    DEFAULT_INTERVAL_MS,
    MATCH_SELECTORS,
    MAX_INTERVAL_MS,
    MIN_INTERVAL_MS,
    ClientInfo,
    SubscriptionRegistry,
    kafka_uuid_string,
    parse_kafka_list,
)
from ..client.catalog import STANDARD_CONSUMER_METRICS, STANDARD_PRODUCER_METRICS, known_metrics
from ..errors import InvalidConfigError, Kip714Error
from .defects import KNOWN_DEFECTS, Defect, family_version

__all__ = [
    "Explanation",
    "Finding",
    "Fleet",
    "SubscriptionVerdict",
    "explain",
    "lint",
    "load_subscriptions",
    "parse_client",
    "read_fleet",
]

#: The push interval a broker never exceeds in its answer (``min(300000, …)``).
BROKER_MAX_PUSH_INTERVAL_MS = DEFAULT_INTERVAL_MS
#: What each selector's values can hold (KIP-511's software name/version grammar; a port; Kafka's base64
#: instance ids; IPv4/IPv6 text); None: anything (client ids).
_SELECTOR_CHARS = {
    "client_software_name": "A-Za-z0-9.\\-",
    "client_software_version": "A-Za-z0-9.\\-",
    "client_source_port": "0-9",
    "client_instance_id": "A-Za-z0-9_\\-",
    "client_source_address": "0-9A-Fa-f.:%a-zA-Z",
}


def load_subscriptions(config: str | os.PathLike[str]) -> dict[str, dict[str, str]]:
    """The subscriptions of a ``kip714 serve --config`` file (JSON or ``NAME metrics=…`` lines); a running
    endpoint's are read by :func:`kip714.operations.admin_read.read_subscriptions`."""
    from ..endpoint.subscription_file import load_subscription_file

    return load_subscription_file(config)


def parse_client(text: str) -> ClientInfo:
    """``client_id=app-1,client_software_name=apache-kafka-java,client_software_version=3.9.0,…`` → a
    :class:`ClientInfo` (the selectors of a ``match``; ``client_instance_id`` as Kafka prints it, base64, or
    as a UUID)."""
    values: dict[str, Any] = {}
    for item in (p for p in text.split(",") if p.strip()):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in (*MATCH_SELECTORS, "principal"):
            raise InvalidConfigError(
                f"--client takes key=value pairs of {', '.join(MATCH_SELECTORS)}, principal; not {item!r}"
            )
        values[key] = value.strip()
    if "client_instance_id" in values:
        values["client_instance_id"] = _instance_id(values["client_instance_id"])
    return ClientInfo(**values)


def _instance_id(text: str) -> uuid.UUID:
    import base64

    try:
        if len(text) == 22:
            return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
        return uuid.UUID(text)
    except (ValueError, TypeError):
        raise InvalidConfigError(f"client_instance_id {text!r} is neither Kafka's base64 form nor a UUID") from None


# ------------------------------------------------------------------------------------------ explain


@dataclass
class SubscriptionVerdict:
    """One subscription against one client: matched, or the selector that did not."""

    name: str
    matched: bool
    metrics: list[str]
    interval_ms: int
    why: str


@dataclass
class Explanation:
    """What the broker answers a client: the matching subscriptions, the requested metrics after merging
    (Java ``HashSet`` order), the push interval and the SubscriptionId (of ``client_instance_id``; the zero
    UUID when none was given: the broker assigns one on the first request, and the id changes with it)."""

    client: dict[str, str]
    client_instance_id: str
    matched: list[str]
    requested_metrics: list[str]
    push_interval_ms: int
    subscription_id: int
    subscription_id_of_zero_uuid: int
    subscriptions: list[SubscriptionVerdict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        lines = [f"client: {', '.join(f'{k}={v}' for k, v in self.client.items() if v)}"]
        for v in self.subscriptions:
            mark = "matches" if v.matched else "no match"
            lines.append(
                f"  {v.name}: {mark} ({v.why}); metrics={','.join(v.metrics) or '(none)'} interval.ms={v.interval_ms}"
            )
        lines.append(f"matched subscriptions: {', '.join(self.matched) or '(none)'}")
        lines.append(f"requested metrics: {', '.join(self.requested_metrics) or '(none: the client never pushes)'}")
        lines.append(f"push interval: {self.push_interval_ms} ms")
        lines.append(f"SubscriptionId: {self.subscription_id} (client instance id {self.client_instance_id})")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def _registry(subscriptions: Mapping[str, Mapping[str, str]], jdk: int) -> SubscriptionRegistry:
    reg = SubscriptionRegistry(jdk=jdk)
    for name, cfg in subscriptions.items():
        reg.set(name, dict(cfg))  # Kafka's validation: an invalid subscription is an error here
    return reg


def explain(subscriptions: Mapping[str, Mapping[str, str]], client: ClientInfo, jdk: int = 17) -> Explanation:
    """What a Java broker with ``subscriptions`` answers ``client`` (and why each subscription matched or not)."""
    reg = _registry(subscriptions, jdk)
    res = reg.resolve(client)
    verdicts = []
    for sub in reg.subscriptions():
        why = "no match selectors: every client"
        matched = True
        for selector, pattern in sub.matchers.items():
            value = client.attribute(selector)
            if value is None or pattern.fullmatch(value) is None:
                shown = "unknown" if value is None else repr(value)
                why = f"{selector}={sub.match[selector].pattern} does not match {shown}"
                matched = False
                break
        else:
            if sub.matchers:
                why = "every selector matches: " + ", ".join(f"{k}={p.pattern}" for k, p in sub.match.items())
        verdicts.append(SubscriptionVerdict(sub.name, matched, list(sub.metrics), sub.interval_ms, why))
    notes = []
    if not res.requested_metrics:
        notes.append(
            "no metric is requested: the client fetches its subscription every push interval and never pushes "
            "(metrics=* requests every metric)"
        )
    if any(v.interval_ms > BROKER_MAX_PUSH_INTERVAL_MS for v in verdicts if v.matched):
        notes.append(f"the broker never sends a push interval above {BROKER_MAX_PUSH_INTERVAL_MS} ms")
    if client.client_instance_id.int == 0:
        notes.append(
            "no client_instance_id given: the SubscriptionId shown is that of the zero UUID; a client's is "
            "SubscriptionId(zero) XOR a hash of its instance id (give client_instance_id=… for it)"
        )
    return Explanation(
        {k: client.attribute(k) or "" for k in MATCH_SELECTORS if k != "client_instance_id"},
        kafka_uuid_string(client.client_instance_id),
        list(res.matched),
        list(res.requested_metrics),
        res.push_interval_ms,
        res.subscription_id,
        res.crc_base,
        verdicts,
        notes,
    )


# ------------------------------------------------------------------------------------------ the fleet


@dataclass
class Fleet:
    """What a recording says about the fleet: its clients (the selectors' values) and the metric names they
    pushed."""

    clients: list[ClientInfo]
    metrics: set[str]
    too_large: set[str] = field(default_factory=set)  # instance ids answered TELEMETRY_TOO_LARGE


def read_fleet(recording: str | os.PathLike[str], max_payloads: int = 2000) -> Fleet:
    """The clients of a ``kip714 serve --record`` recording and the metric names they pushed (decoded from
    up to ``max_payloads`` accepted pushes, the first of each instance first)."""
    import pyarrow.compute as pc

    from .._enums import ErrorCode
    from ..codec import decompress
    from ..otlp import decode_metrics_batch
    from ..sinks.recorder import read_recording

    table = read_recording(recording)
    if table.num_rows == 0:
        raise InvalidConfigError(f"{recording}: no recorded push (a kip714 serve --record folder?)")
    keys = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
            "client_source_address", "client_source_port", "principal")  # fmt: skip
    cols = {k: table.column(k).to_pylist() for k in keys}
    codes = table.column("error_code").to_pylist()
    seen: dict[str, ClientInfo] = {}
    too_large = set()
    for i in range(table.num_rows):
        iid = cols["client_instance_id"][i] or ""
        if codes[i] == int(ErrorCode.TELEMETRY_TOO_LARGE):
            too_large.add(iid)
        if iid in seen:
            continue
        try:
            instance = _instance_id(iid) if iid else uuid.UUID(int=0)
        except InvalidConfigError:
            instance = uuid.UUID(int=0)
        seen[iid] = ClientInfo(
            instance,
            cols["client_id"][i] or "",
            cols["client_software_name"][i] or "unknown",
            cols["client_software_version"][i] or "unknown",
            cols["client_source_address"][i] or "",
            cols["client_source_port"][i] or "",
            cols["principal"][i] or "User:ANONYMOUS",
        )
    accepted = table.filter(pc.and_(pc.equal(table.column("error_code"), 0), pc.is_valid(table.column("payload"))))
    first: dict[str, int] = {}  # the first accepted push of each instance, then the others, up to max_payloads
    rest = []
    for i, iid in enumerate(accepted.column("client_instance_id").to_pylist()):
        (rest.append(i) if iid in first else first.setdefault(iid, i))
    rows = (list(first.values()) + rest)[:max_payloads]
    payloads, types = accepted.column("payload"), accepted.column("compression_type")
    data = []
    for i in rows:
        try:
            data.append(decompress(payloads[i].as_py(), types[i].as_py() or 0, 64 << 20))
        except Kip714Error:
            continue
    names: set[str] = set()
    if data:
        points, _ = decode_metrics_batch(data, errors="collect")
        names = {n for n in points.column("metric").unique().to_pylist() if n}
    return Fleet(list(seen.values()), names, too_large)


# ------------------------------------------------------------------------------------------ lint


@dataclass
class Finding:
    """One thing lint flags: ``code`` (see the module docstring), ``severity`` (``error``: Kafka refuses it or
    a client breaks; ``warning``: probably not what was meant), the ``subscription`` and/or ``client`` it is
    about, the ``message``, and for a known defect its ``source``."""

    code: str
    severity: str
    message: str
    subscription: str | None = None
    client: str | None = None
    source: str | None = None

    def text(self) -> str:
        where = " ".join(
            x for x in (self.subscription and f"[{self.subscription}]", self.client and f"<{self.client}>") if x
        )
        return f"{self.severity}: {self.code}: {where + ' ' if where else ''}{self.message}" + (
            f" (source: {self.source})" if self.source else ""
        )


def _interval_findings(name: str, cfg: Mapping[str, str]) -> list[Finding]:
    raw = cfg.get("interval.ms")
    if raw is None:
        return []
    try:
        value = int(str(raw).strip())
    except ValueError:
        return [
            Finding("interval-out-of-bounds", "error", f"interval.ms {raw!r} is not a number (INVALID_CONFIG)", name)
        ]
    if not MIN_INTERVAL_MS <= value <= MAX_INTERVAL_MS:
        return [
            Finding(
                "interval-out-of-bounds",
                "error",
                f"interval.ms {value} is outside Kafka's bounds {MIN_INTERVAL_MS}..{MAX_INTERVAL_MS}: a broker refuses "
                "the subscription (INVALID_REQUEST)",
                name,
            )
        ]
    if value > BROKER_MAX_PUSH_INTERVAL_MS:
        return [
            Finding(
                "interval-capped",
                "warning",
                f"interval.ms {value} is above {BROKER_MAX_PUSH_INTERVAL_MS}: the broker answers min(300000, the "
                "matching subscriptions' intervals), so clients push every 300000 ms at most",
                name,
            )
        ]
    return []


def _metrics_findings(name: str, cfg: Mapping[str, str], known: set[str], seen: set[str] | None) -> list[Finding]:
    out = []
    prefixes = parse_kafka_list(cfg.get("metrics"))
    if not prefixes:
        out.append(
            Finding(
                "empty-metrics",
                "warning",
                "metrics is empty: Kafka reads that as no metric, so clients matched only by this subscription fetch "
                "it and never push (WarpStream reads an empty metrics= as all); write metrics=* for every metric",
                name,
            )
        )
    if "" in prefixes:
        out.append(
            Finding(
                "empty-prefix",
                "warning",
                "an empty item in metrics (metrics=a, or a trailing comma) matches every metric on Java and librdkafka "
                "clients; write metrics=* if every metric is meant, else remove it",
                name,
            )
        )
    for p in dict.fromkeys(prefixes):
        if p in ("", "*"):
            continue
        if any(m.startswith(p) for m in known) or (seen is not None and any(m.startswith(p) for m in seen)):
            continue
        where = "no standard metric, no metric kip714 knows of" + (
            ", and no metric the recording's clients pushed" if seen is not None else ""
        )
        hint = (
            ""
            if seen is not None
            else " (Java clients push many metrics kip714 does not list: --recording checks the fleet's)"
        )
        close = _close_to(p, known | (seen or set()))
        out.append(
            Finding(
                "prefix-matches-nothing",
                "warning",
                f"prefix {p!r} matches {where}{hint}" + (f"; did you mean {close!r}?" if close else ""),
                name,
            )
        )
    return out


def _close_to(prefix: str, names: set[str]) -> str | None:
    """A prefix of a known name the prefix was probably meant to be (a mistyped segment), cut at the end of
    the segment it reaches."""
    import difflib

    cuts: dict[str, str] = {}
    for n in names:
        for d in (-2, -1, 0, 1, 2):
            cut = n[: len(prefix) + d]
            end = n.find(".", len(cut))
            cuts.setdefault(cut, n if end < 0 else n[:end])
    hits = difflib.get_close_matches(prefix, sorted(cuts), n=1, cutoff=0.85)
    return cuts[hits[0]] if hits else None


def _regex_findings(name: str, cfg: Mapping[str, str]) -> tuple[list[Finding], dict[str, re.Pattern[str]]]:
    from ..broker.patterns import SafePattern, UnsafePatternError

    out: list[Finding] = []
    compiled: dict[str, re.Pattern[str]] = {}
    for entry in parse_kafka_list(cfg.get("match")):
        parts = entry.split("=")
        while parts and parts[-1] == "":
            parts.pop()
        if len(parts) != 2 or parts[0].strip() not in MATCH_SELECTORS:
            out.append(
                Finding(
                    "invalid-config", "error", f"match entry {entry!r} is not selector=regex (INVALID_CONFIG)", name
                )
            )
            continue
        selector, pattern = parts[0].strip(), parts[1].strip()
        try:
            compiled[selector] = re.compile(pattern)
        except re.error as exc:
            out.append(
                Finding("invalid-regex", "error", f"{selector}={pattern}: not a regular expression ({exc})", name)
            )
            continue
        try:
            SafePattern(pattern)
            unsafe = _backtracking_risk(pattern)
        except UnsafePatternError as exc:
            unsafe = str(exc)
        if unsafe:
            out.append(
                Finding(
                    "unsafe-regex",
                    "error",
                    f"{selector}={pattern}: {unsafe}; the broker matches it with java.util.regex, which backtracks: "
                    "a long attribute can take it exponential time on every request",
                    name,
                )
            )
        impossible = _impossible(selector, pattern)
        if impossible:
            out.append(Finding("regex-never-matches", "error", f"{selector}={pattern}: {impossible}", name))
        if re.fullmatch(r"\*?[A-Za-z0-9_.\-]+[A-Za-z0-9_\-]\*", pattern) or pattern.startswith("*"):
            out.append(
                Finding(
                    "glob-like-regex",
                    "warning",
                    f"{selector}={pattern} reads like a glob; as a regex '*' repeats the character before it "
                    f"(for 'starts with' write {re.escape(pattern.strip('*'))}.*)",
                    name,
                )
            )
    return out, compiled


def _sre_parse() -> Any:
    """Python's regular expression parser (``re._parser``; ``sre_parse`` on Python 3.10)."""
    import importlib

    try:
        return importlib.import_module("re._parser")
    except ImportError:  # pragma: no cover - Python 3.10
        return importlib.import_module("sre_parse")


def _backtracking_risk(pattern: str) -> str | None:
    """Why a backtracking engine can take exponential time on ``pattern`` (a quantified group whose body holds
    an unbounded quantifier, or alternatives that can match the same text), or None."""
    sre_parse = _sre_parse()
    repeats = {sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT, getattr(sre_parse, "POSSESSIVE_REPEAT", None)}

    def unbounded(items: Any) -> bool:
        for op, av in items:
            if op in repeats and (av[1] == sre_parse.MAXREPEAT or av[1] > 100):
                return True
            if op == sre_parse.SUBPATTERN and unbounded(av[-1]):
                return True
            if op == sre_parse.BRANCH and any(unbounded(b) for b in av[1]):
                return True
        return False

    def walk(items: Any) -> str | None:
        for op, av in items:
            if op in repeats:
                body = av[2]
                if (av[1] == sre_parse.MAXREPEAT or av[1] > 100) and unbounded(body):
                    return "a repeated group holds an unbounded repetition (nested quantifiers)"
                found = walk(body)
                if found:
                    return found
            elif op == sre_parse.SUBPATTERN:
                found = walk(av[-1])
                if found:
                    return found
            elif op == sre_parse.BRANCH:
                for b in av[1]:
                    found = walk(b)
                    if found:
                        return found
        return None

    return walk(sre_parse.parse(pattern))


def _impossible(selector: str, pattern: str) -> str | None:
    """Why ``pattern`` can match no value of ``selector`` (it requires a character those values never hold),
    or None. Only the pattern's literal characters outside groups, classes and repetitions are looked at."""
    chars = _SELECTOR_CHARS.get(selector)
    if chars is None:
        return None
    allowed = re.compile(f"[{chars}]")
    sre_parse = _sre_parse()
    for op, av in sre_parse.parse(pattern):
        if op == sre_parse.LITERAL and not allowed.fullmatch(chr(av)):
            return f"requires {chr(av)!r}, which a {selector} never holds, so it matches no client"
    return None


def _requested(subs: Sequence[tuple[str, Mapping[str, str]]], names: Iterable[str]) -> list[str]:
    chosen = [cfg for n, cfg in subs if n in set(names)]
    out: list[str] = []
    for cfg in chosen:
        out += parse_kafka_list(cfg.get("metrics"))
    return ["*"] if "*" in out else list(dict.fromkeys(out))


def lint(
    subscriptions: Mapping[str, Mapping[str, str]],
    fleet: Fleet | None = None,
    clients: Sequence[ClientInfo] = (),
    jdk: int = 17,
) -> list[Finding]:
    """The findings for ``subscriptions`` (name → config), checked against the ``fleet`` of a recording
    (:func:`read_fleet`) and ``clients`` when given."""
    known = set(known_metrics()) | set(STANDARD_PRODUCER_METRICS) | set(STANDARD_CONSUMER_METRICS)
    seen = fleet.metrics if fleet is not None else None
    out: list[Finding] = []
    valid: list[tuple[str, Mapping[str, str]]] = []
    for name, cfg in subscriptions.items():
        unknown = [k for k in cfg if k not in ("metrics", "interval.ms", "match")]
        if unknown:
            out.append(
                Finding("invalid-config", "error", f"unknown key(s) {', '.join(unknown)} (INVALID_REQUEST)", name)
            )
        interval = _interval_findings(name, cfg)
        out += interval
        out += _metrics_findings(name, cfg, known, seen)
        regex, compiled = _regex_findings(name, cfg)
        out += regex
        if fleet is not None and compiled and not any(r.severity == "error" for r in regex):
            for selector, pattern in compiled.items():
                values = {c.attribute(selector) for c in fleet.clients}
                if not any(v is not None and pattern.fullmatch(v) for v in values):
                    out.append(
                        Finding(
                            "regex-never-matches",
                            "warning",
                            f"{selector}={pattern.pattern} matches none of the {len(fleet.clients)} clients in the "
                            "recording",
                            name,
                        )
                    )
        if not unknown and not any(f.severity == "error" for f in interval + regex):
            valid.append((name, cfg))
    try:
        reg = _registry(dict(valid), jdk)
    except Kip714Error as exc:  # what the checks above did not catch: Kafka's own words
        out.append(Finding("invalid-config", "error", str(exc)))
        return out
    targets = list(clients) + (list(fleet.clients) if fleet is not None else [])
    several: dict[tuple[str, ...], list[str]] = {}
    defects: dict[tuple[Any, ...], list[ClientInfo]] = {}
    for client in targets:
        res = reg.resolve(client)
        if len(res.matched) > 1:
            several.setdefault(res.matched, []).append(_who(client))
        for d in _defects(client, res.requested_metrics, res.matched, fleet):
            key = (d, client.client_software_name, client.client_software_version, res.matched, res.requested_metrics)
            defects.setdefault(key, []).append(client)
    for (d, sw_name, sw_version, matched, requested), hit in defects.items():
        evidence = "; the recording shows TELEMETRY_TOO_LARGE answers" if d.id == "KAFKA-21077" and fleet else ""
        out.append(
            Finding(
                "known-defect",
                d.severity,
                f"{d.id}: {len(hit)} client(s) run {sw_name} {sw_version}, where {d.title}; the subscription triggers "
                f"it: {d.trigger} (requested: {', '.join(requested)}); fixed in {d.fixed_in}{evidence}",
                ", ".join(matched),
                ", ".join(_who(c) for c in hit[:3]) + (f" and {len(hit) - 3} more" if len(hit) > 3 else ""),
                d.source,
            )
        )
    for names, who in several.items():
        out.append(
            Finding(
                "several-subscriptions",
                "warning",
                f"{len(who)} client(s) match {', '.join(names)}: their metrics are merged and the shortest interval "
                f"wins (e.g. {', '.join(who[:3])})",
                ", ".join(names),
            )
        )
    if not targets:
        catch_all = [n for n, cfg in valid if not parse_kafka_list(cfg.get("match"))]
        if catch_all and len(valid) > 1:
            for n in catch_all:
                others = [o for o, _ in valid if o != n]
                out.append(
                    Finding(
                        "several-subscriptions",
                        "warning",
                        f"no match selectors: it matches every client, so every client matched by "
                        f"{', '.join(others)} gets both (metrics merged, the shortest interval wins)",
                        n,
                    )
                )
    return out


def _who(client: ClientInfo) -> str:
    return f"{client.client_id or '?'} {client.client_software_name}/{client.client_software_version}"


def _defects(client: ClientInfo, requested: Sequence[str], matched: Sequence[str], fleet: Fleet | None) -> list[Defect]:
    """The known defects ``client``'s software version has that what it is requested triggers."""
    fv = family_version(client.client_software_name, client.client_software_version)
    if fv is None or not matched:
        return []
    out = []
    for d in KNOWN_DEFECTS:
        if not d.affects(*fv) or not d.triggered(requested):
            continue
        if (
            d.id == "KAFKA-21077"
            and fleet is not None
            and kafka_uuid_string(client.client_instance_id) not in fleet.too_large
        ):
            continue  # with a recording, only where it shows: a client answered TELEMETRY_TOO_LARGE
        out.append(d)
    return out
