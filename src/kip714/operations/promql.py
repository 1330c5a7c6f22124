"""PromQL over what kip714 exports: the Prometheus name of a telemetry metric (the exporter's own mapping),
and the client identity that dashboards and alert rules group by — the broker-added labels the exporter
puts on every series (``--prometheus-labels``), so that both follow whatever an operator chose.

Across a fleet of replicas (``kip714 proxy --replica-id``, docs/fleet.md) a client's series carry no
replica label, only the scrape target's ``instance``: grouping by the client identity aggregates a client
over the replicas that hold its series (one client, however many replicas it pushed to). kip714's own
metrics carry ``replica``; :func:`replica_targets` names the replica of each scrape target."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..client.catalog import metric_info
from ..sinks.labels import DEFAULT_LABELS, parse_labels
from ..sinks.prometheus.names import BROKER_NODE_LABEL, BROKER_ROLE_LABEL, metric_name

__all__ = ["BROKER_NODE", "BROKER_ROLE", "LAST_PUSH", "Clients", "prom_name", "replica_targets"]

#: When each live client instance last pushed, per replica (the exporter's per-client family).
LAST_PUSH = "kip714_client_last_push_timestamp_seconds"
EXPIRED = "kip714_client_expired_timestamp_seconds"
#: The label a per-node client metric is grouped by: the broker the exporter read from the client's own tag,
#: normalised (Java's ``node_id="node-3"`` and librdkafka's ``node_id="3"`` are both ``3``), not the tag.
BROKER_NODE = BROKER_NODE_LABEL
#: What that node was to the client: ``broker``, ``coordinator`` or ``bootstrap``.
BROKER_ROLE = BROKER_ROLE_LABEL


def replica_targets(lookback: str) -> str:
    """Each of kip714's scrape targets (``job``, ``instance``) with the ``replica`` it named, remembered for
    ``lookback`` after its last scrape (``kip714_build_info`` is gone from a target that stopped answering;
    ``up`` never has a replica). Join it on ``(job, instance)`` as the *many* side: a target that named two
    replicas within ``lookback`` gives two rows, never a matching error."""
    return f"max by (job, instance, replica) (last_over_time(kip714_build_info[{lookback}]))"


def prom_name(telemetry_name: str) -> str:
    """The Prometheus name kip714's exporter gives a telemetry metric kip714 knows (monotonic sums end in
    ``_total``; the sum :data:`~kip714.client.catalog.NON_MONOTONIC_SUMS` names is a gauge)."""
    info = metric_info(telemetry_name)
    if info is None:
        raise KeyError(f"{telemetry_name} is not a metric kip714 knows (kip714.client.catalog)")
    return metric_name(telemetry_name, "", info.kind, info.kind == "sum" and info.monotonic)


class Clients:
    """The labels that tell client instances apart on kip714's series: the broker-added labels chosen with
    ``--prometheus-labels`` (default ``client_id,client_instance_id``).

    ``by()`` groups by them (and extra labels), ``on()`` matches on them, ``legend()`` and ``name()`` say
    which client a series or an alert is about, ``selector()`` filters by the dashboards' variables."""

    def __init__(self, labels: str | Iterable[str] = DEFAULT_LABELS) -> None:
        self.labels: tuple[str, ...] = parse_labels(labels)

    def _join(self, extra: Sequence[str]) -> str:
        return ", ".join(dict.fromkeys([*self.labels, *extra]))

    def by(self, *extra: str) -> str:
        """``by (client_id, client_instance_id, EXTRA…)``, or ``by ()`` when there is nothing to group by."""
        return f"by ({self._join(extra)})"

    def on(self, *extra: str) -> str:
        """``on (client_id, client_instance_id, EXTRA…)``."""
        return f"on ({self._join(extra)})"

    def agg(self, op: str, expr: str, *extra: str) -> str:
        """``OP by (identity, EXTRA…) (EXPR)``."""
        return f"{op} {self.by(*extra)} ({expr})"

    def per_broker(self, op: str, metric: str) -> str:
        """``OP by (identity, kafka_node_id) (METRIC{kafka_node_role="broker"})``: a per-node client metric
        per client and broker (:data:`BROKER_NODE`), the connections to a coordinator or a bootstrap address
        left out."""
        return self.agg(op, f'{metric}{{{BROKER_ROLE}="broker"}}', BROKER_NODE)

    @property
    def has_client_id(self) -> bool:
        return "client_id" in self.labels

    @property
    def one_per_instance(self) -> bool:
        """The identity tells client instances apart (``client_instance_id`` is one of the labels)."""
        return "client_instance_id" in self.labels

    def instances(self) -> str:
        """Live client instances, each counted once however many replicas hold its series (by the identity
        when it tells instances apart; else the exporters' own count, summed over the replicas)."""
        if self.one_per_instance:
            return f"count({self.agg('max', LAST_PUSH)})"
        return "sum(kip714_export_instances)"

    def gone(self) -> str:
        """The clients a replica expired without a terminating push (when) and that push to no replica now:
        a client that moved to another replica is not gone when the old one expires it."""
        gone = self.agg("max", EXPIRED)
        return f"({gone} unless {self.on()} {LAST_PUSH})" if self.labels else gone

    def legend(self, *extra: str) -> str:
        """A Grafana legend naming the client (its id, else its instance id, else the first label) and the
        extra labels."""
        first = next((n for n in ("client_id", "client_instance_id", *self.labels) if n in self.labels), None)
        parts = ([f"{{{{{first}}}}}"] if first else []) + [f"{{{{{e}}}}}" for e in extra]
        return " ".join(parts) if parts else "{{job}}"

    def name(self) -> str:
        """An alert template naming the client: ``{{ $labels.client_id }} (instance {{ … }})``."""
        parts = []
        if "client_id" in self.labels:
            parts.append("{{ $labels.client_id }}")
        if "client_instance_id" in self.labels:
            parts.append(
                "(instance {{ $labels.client_instance_id }})" if parts else "instance {{ $labels.client_instance_id }}"
            )
        for n in self.labels:
            if n not in ("client_id", "client_instance_id") and len(parts) < 1:
                parts.append(f"{n} {{{{ $labels.{n} }}}}")
        return " ".join(parts) if parts else "a client (kip714 exports no client labels: --prometheus-labels '')"

    def selector(self, **extra: str) -> str:
        """A label selector: ``client_id=~"$client_id"`` when the client id is a label, plus ``extra``
        (already quoted matchers, e.g. ``kafka_node_role='="broker"'``)."""
        parts = ['client_id=~"$client_id"'] if self.has_client_id else []
        parts += [f"{k}{v}" for k, v in extra.items()]
        return "{" + ", ".join(parts) + "}" if parts else ""
