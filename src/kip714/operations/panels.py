"""A dashboard as plain data: its variables, rows and panels, each panel's PromQL, unit, and who pushes the
metrics it reads; and :class:`Board`, which :mod:`kip714.operations.boards` describes kip714's dashboards with.

From these :mod:`kip714.operations.grafana` builds the dashboards with Grafana's own
``grafana-foundation-sdk``, the tests evaluate every query in a real Prometheus, and the documentation's
pictures are drawn from the same queries. It needs no optional package.

Who pushes what comes from :mod:`kip714.client.catalog`: a panel over metrics that not every KIP-714 client
pushes is *client-specific* and says so in its title and description (``Record errors/s (Java clients
only)``), so that an empty panel explains itself. Panels over kip714's own metrics that exist only when a
part of kip714 runs (the proxy, the recording, OTLP forwarding) say which part. The client identity the
panels group by follows ``--prometheus-labels`` (:class:`~kip714.operations.promql.Clients`); the broker a
per-node metric is about is the exporter's normalised ``kafka_node_id``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..client.catalog import known_metrics, senders_text
from .promql import Clients, prom_name

__all__ = [
    "FEATURES",
    "Board",
    "Dashboard",
    "Panel",
    "Query",
    "Row",
    "Variable",
    "panel_senders",
    "substitute",
]

#: The parts of kip714 some of its own metrics need (a panel over them says so).
FEATURES = {
    "proxy": "kip714 proxy only",
    "recording": "only with --record",
    "otlp": "only with --otlp-endpoint",
    "state-topic": "only with --state-topic",
}
_OWN = "kip714"  # the "sender" of kip714's own metrics: always there
_NAME = re.compile(r"\b(org_apache_kafka_[a-z0-9_]+|kip714_[a-z0-9_]+)\b")
_PROM_TO_INFO = {prom_name(name): info for name, info in known_metrics().items()}


@dataclass(frozen=True)
class Query:
    """One PromQL query of a panel and its legend (Grafana's ``{{label}}`` syntax)."""

    expr: str
    legend: str = ""
    instant: bool = False

    @property
    def metrics(self) -> tuple[str, ...]:
        """The Prometheus metric names the query reads."""
        return tuple(dict.fromkeys(_NAME.findall(self.expr)))


@dataclass(frozen=True)
class Panel:
    """A panel: ``kind`` is ``timeseries``, ``stat``, ``table`` or ``state`` (a state timeline with value
    ``mappings``). ``senders``: who pushes what it reads (:func:`panel_senders`); ``feature``: the part of
    kip714 its own metrics need (a key of :data:`FEATURES`)."""

    id: int
    title: str
    description: str
    kind: str
    queries: tuple[Query, ...]
    unit: str = ""
    width: int = 12
    height: int = 8
    senders: frozenset[str] = frozenset()
    feature: str | None = None
    mappings: tuple[tuple[int, str], ...] = ()
    min: float | None = None
    max: float | None = None

    @property
    def client_specific(self) -> bool:
        """Only some kinds of client push what it reads (it may be empty for the others)."""
        return _OWN not in self.senders and "standard" not in self.senders


@dataclass(frozen=True)
class Row:
    title: str
    id: int
    panels: tuple[Panel, ...]


@dataclass(frozen=True)
class Variable:
    """A query variable (multi-valued, "All" = ``.*``) over the label values of a metric."""

    name: str
    label: str
    query: str


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    description: str
    variables: tuple[Variable, ...]
    rows: tuple[Row, ...]
    tags: tuple[str, ...] = ("kip714", "kafka", "kip-714")

    @property
    def panels(self) -> list[Panel]:
        return [p for r in self.rows for p in r.panels]


def _senders(prometheus_name: str) -> set[str]:
    if prometheus_name.startswith("kip714_"):
        return {_OWN}
    info = _PROM_TO_INFO.get(prometheus_name)
    if info is None:
        return set()
    return set(info.senders) | ({"java", "librdkafka"} if info.standard else set())  # standard: every client


def panel_senders(queries: Iterable[Query]) -> frozenset[str]:
    """Who pushes what a panel reads: per query, the senders every metric it reads has in common (a query
    over two metrics needs both), then the union over the queries; ``standard`` when some query reads only
    standard metrics, ``kip714`` for kip714's own."""
    out: set[str] = set()
    for q in queries:
        common: set[str] | None = None
        for name in q.metrics:
            common = _senders(name) if common is None else common & _senders(name)
        out |= common or set()
    return frozenset(out)


def substitute(expr: str, rate_interval: str = "1m", range_: str = "1h", **variables: str) -> str:
    """``expr`` with Grafana's variables replaced, as Grafana would before sending it to Prometheus:
    ``$__rate_interval``, ``$__range`` and the dashboards' variables (default ``.*``, their "All")."""
    out = expr.replace("$__rate_interval", rate_interval).replace("$__range", range_)
    return re.sub(r"\$([a-z_]+)", lambda m: variables.get(m.group(1), ".*"), out)


class Board:
    """A dashboard being described: its variables, then rows of panels in order; :meth:`panel` gives each
    panel its id and says in its title and description who pushes what it reads (or which part of kip714 its
    own metrics need)."""

    def __init__(self, uid: str, title: str, description: str, clients: Clients) -> None:
        self.uid, self.title, self.description, self.c = uid, title, description, clients
        self.rows: list[tuple[str, int, list[Panel]]] = []
        self.variables: list[Variable] = []
        self.next_id = 1

    def variable(self, name: str, label: str, query: str) -> None:
        self.variables.append(Variable(name, label, query))

    def row(self, title: str) -> None:
        self.rows.append((title, self.next_id, []))
        self.next_id += 1

    def panel(
        self,
        title: str,
        description: str,
        kind: str,
        *queries: Query,
        unit: str = "",
        width: int = 12,
        height: int = 8,
        feature: str | None = None,
        mappings: tuple[tuple[int, str], ...] = (),
        min: float | None = None,
        max: float | None = None,
    ) -> None:
        senders = panel_senders(queries)
        if feature is not None:
            title += f" ({FEATURES[feature]})"
            description += f" Shown only when {FEATURES[feature].replace(' only', '')} runs: empty otherwise."
        elif _OWN in senders:
            description += " kip714's own metric."
        elif "standard" in senders:
            description += " Standard KIP-714 metric: every client pushes it (Java, librdkafka, others)."
        else:
            who = senders_text(senders)
            title += f" ({who})"
            description += (
                f" Client-specific: pushed by {who}; empty for the other clients (kip714.client.catalog says who "
                "pushes what)."
            )
        p = Panel(
            self.next_id, title, description.strip(), kind, queries, unit, width, height, senders, feature,
            mappings, min, max,
        )  # fmt: skip
        self.next_id += 1
        self.rows[-1][2].append(p)

    def build(self) -> Dashboard:
        rows = tuple(Row(t, i, tuple(ps)) for t, i, ps in self.rows)
        return Dashboard(self.uid, self.title, self.description, tuple(self.variables), rows)
