"""kip714's Prometheus alert rules and their ``promtool test rules`` unit tests, generated together.

Each rule (:class:`Alert`) carries its PromQL, a summary and a description naming the client (by the labels
chosen with ``--prometheus-labels``) and the evidence (the metric, its value, who pushes it), and the
promtool cases that show it firing for a misbehaving client and not for a healthy one (or not yet, while
pending). Thresholds and windows are :class:`AlertSettings` fields, every one a ``kip714 dashboards``
option; the defaults of the client rules are ``kip714 report``'s insight thresholds.

:func:`rules` gives the rule file's content and :func:`rule_tests` the unit tests' (both plain data for
:func:`kip714.operations.yaml_text.dump`). The expected annotations of the tests are rendered here from the
same templates (:func:`render`, the subset of Prometheus' templating the rules use: ``{{ $labels.NAME }}``
and ``{{ $value | printf "FMT" }}``), so promtool checks that Prometheus renders them as kip714 documents.
The runbook of each alert is the section of the same name on the documentation's "Dashboards and alerts"
page (``runbook_url`` when ``runbook_base`` is set).

Across a fleet of replicas (docs/fleet.md) a client rule groups by the client identity, never by
``instance`` or ``replica``: it fires once for a client whatever replicas hold its series. kip714's own
rules group by ``(job, instance, replica)``: they are about one replica, and name it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .._units import parse_duration
from ..client.catalog import STREAMS_CLIENT_STATES, metric_info, senders_text
from ..sinks.labels import DEFAULT_LABELS
from .promql import LAST_PUSH, Clients, prom_name, replica_targets

__all__ = ["Alert", "AlertSettings", "AlertTest", "alerts", "render", "rule_tests", "rules"]


@dataclass(frozen=True)
class AlertSettings:
    """Thresholds and windows of the alert rules (``kip714 dashboards`` options, same names with dashes).

    - ``evaluation_interval`` (30s): how often Prometheus evaluates the rule groups.
    - ``window`` (5m): the range of ``rate()``, ``increase()`` and ``deriv()``.
    - ``pending`` (5m): how long a client condition must hold before its alert fires (``for``).
    - ``slow_broker_ratio`` (3.0) and ``slow_broker_min_ms`` (10.0): a broker whose average request latency
      is at least this many times the client's median over its brokers, and above this many ms.
    - ``throttle_ms`` (5.0): average throttle time above which a client counts as throttled.
    - ``max_error_rate`` (0.01) / ``max_retry_rate`` (0.05): record errors / retries per record sent.
    - ``max_consumer_lag`` (10000): records of lag a growing lag must pass.
    - ``push_error_ratio`` (0.05): share of pushes answered with an error (besides throttling and
      UNKNOWN_SUBSCRIPTION_ID, which follow early pushes and subscription changes) that alerts.
    - ``queue_full_ratio`` (0.8): a sink queue this full (of its capacity).
    - ``series_limit_ratio`` (0.9): exposed series as a share of ``--prometheus-max-series``.
    - ``recording_lag_s`` (30): age of the oldest unwritten recorded push.
    - ``streams_state_pending`` (5m): how long a Kafka Streams instance may stay out of RUNNING.
    - ``replica_lookback`` (1d): how long a replica that stopped answering scrapes is still known by name
      (Kip714ReplicaDown: a replica down longer than this no longer alerts).
    - ``runbook_base`` (''): the URL of the "Dashboards and alerts" page; each alert then links its runbook
      section (``runbook_url``).
    """

    evaluation_interval: str = "30s"
    window: str = "5m"
    pending: str = "5m"
    slow_broker_ratio: float = 3.0
    slow_broker_min_ms: float = 10.0
    throttle_ms: float = 5.0
    max_error_rate: float = 0.01
    max_retry_rate: float = 0.05
    max_consumer_lag: float = 10000.0
    push_error_ratio: float = 0.05
    queue_full_ratio: float = 0.8
    series_limit_ratio: float = 0.9
    recording_lag_s: float = 30.0
    streams_state_pending: str = "5m"
    replica_lookback: str = "1d"
    runbook_base: str = ""

    def __post_init__(self) -> None:
        for name in ("evaluation_interval", "window", "pending", "streams_state_pending", "replica_lookback"):
            value = getattr(self, name)
            if not re.fullmatch(r"([0-9]+(ms|s|m|h|d|w|y))+", value):
                raise ValueError(f"{name} {value!r} is not a Prometheus duration (e.g. 30s, 5m, 1h30m)")


@dataclass(frozen=True)
class AlertTest:
    """One promtool case: input series (``{name: values}``, promtool's expanding notation, one value every
    ``interval``), and at ``eval_time`` the alerts expected firing: a list of ``(labels, value)``."""

    series: dict[str, str]
    eval_time: str
    firing: list[tuple[dict[str, str], float]]
    interval: str = "15s"


@dataclass(frozen=True)
class Alert:
    name: str
    group: str
    expr: str
    pending: str
    severity: str
    summary: str
    description: str
    tests: list[AlertTest] = field(default_factory=list)


_VALUE = re.compile(r"\{\{\s*\$value\s*(?:\|\s*printf\s+\"([^\"]+)\"\s*)?\}\}")
_LABEL = re.compile(r"\{\{\s*\$labels\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_IF = re.compile(r"\{\{\s*if\s+\$labels\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}(.*?)\{\{\s*end\s*\}\}", re.S)
#: Which kip714 an alert of its own is about: the scrape target, and the replica when it names one.
_AT = "{{ $labels.instance }}{{ if $labels.replica }} (replica {{ $labels.replica }}){{ end }}"


def render(template: str, labels: dict[str, str], value: float) -> str:
    """``template`` as Prometheus renders it for an alert with ``labels`` and ``value`` (the subset the
    rules use: ``{{ $labels.NAME }}``, ``{{ $value | printf "%.4g" }}``, and ``{{ if $labels.NAME }}…{{ end }}``
    around them, not nested: the text when the label is there and not empty)."""
    out = _IF.sub(lambda m: m.group(2) if labels.get(m.group(1)) else "", template)
    out = _LABEL.sub(lambda m: labels.get(m.group(1), "<no value>"), out)
    return _VALUE.sub(lambda m: (m.group(1) % value) if m.group(1) else repr(value), out)


# ------------------------------------------------------------------------------------------ the rules


def _series(name: str, labels: dict[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{name}{{{inner}}}" if inner else name


class _Rules:
    """Builds the alerts for one client identity and one set of settings."""

    def __init__(self, clients: Clients, s: AlertSettings) -> None:
        self.c, self.s = clients, s
        self.out: list[Alert] = []
        self.job = {"job": "kip714", "instance": "kip714:9464"}
        self.replica = {**self.job, "replica": "kip714-1"}  # kip714 proxy --replica-id kip714-1
        # the tests' clock: seconds of the windows and pending times (samples every 15 s)
        self.win = parse_duration(s.window) / 1000
        self.pend = parse_duration(s.pending) / 1000
        self.spend = parse_duration(s.streams_state_pending) / 1000

    @staticmethod
    def at(seconds: float) -> str:
        """An eval time on the 15 s sample grid."""
        return f"{int(seconds // 15 * 15)}s"

    @staticmethod
    def samples(until: float) -> int:
        """Samples (every 15 s) a series needs to reach ``until`` seconds, with room to spare."""
        return int(until // 15) + 8

    def early(self, series: dict[str, str], when: float) -> list[AlertTest]:
        """The case "the condition holds but not for long enough yet" (none when nothing is pending)."""
        return [AlertTest(series, self.at(when), [])] if when >= 30 else []

    def ident(self, who: str) -> dict[str, str]:
        """Label values of a test client named ``who`` (one per identity label)."""
        return {n: f"{who}-{n.replace('_', '-')}" if n != "client_id" else who for n in self.c.labels}

    def add(
        self,
        name: str,
        group: str,
        expr: str,
        summary: str,
        description: str,
        tests: list[AlertTest],
        pending: str | None = None,
        severity: str = "warning",
    ) -> None:
        self.out.append(
            Alert(name, group, expr.strip() + "\n", self.s.pending if pending is None else pending, severity,
                  summary, description, tests)
        )  # fmt: skip


def alerts(labels: str | Iterable[str] = DEFAULT_LABELS, settings: AlertSettings | None = None) -> list[Alert]:
    """Every alert rule, for series exported with ``--prometheus-labels`` ``labels``."""
    r = _Rules(Clients(labels), settings or AlertSettings())
    for build in (_client_rules, _streams_rules, _self_rules):
        build(r)
    return r.out


def _int(x: float) -> float:
    """A test value Prometheus and Python print alike (a whole number)."""
    return float(int(x))


def _client_rules(r: _Rules) -> None:
    c, s = r.c, r.s
    w = s.window
    who = c.name()
    job = r.job
    # -- a broker slow for one client
    lat = (
        '{__name__=~"org_apache_kafka_(producer|consumer|admin_client)_node_request_latency_avg",'
        'kafka_node_role="broker"}'
    )
    per = c.agg("max", lat, "kafka_node_id")
    bad, good = r.ident("slow-client"), r.ident("healthy-client")
    name = prom_name("org.apache.kafka.producer.node.request.latency.avg")
    slow = _int(max(s.slow_broker_ratio * 12, s.slow_broker_min_ms) * 2 + 1)
    fire, n = r.pend + 90, r.samples(r.pend + 90)

    def node(ids: dict[str, str], k: int) -> str:
        return _series(
            name, {**ids, **job, "node_id": f"node-{k}", "kafka_node_id": str(k), "kafka_node_role": "broker"}
        )

    bad_nodes = {node(bad, 1): f"10x{n}", node(bad, 2): f"12x{n}", node(bad, 3): f"{slow:g}x{n}"}
    r.add(
        "KafkaClientBrokerLatencyOutlier",
        "kip714-clients",
        f"""
  {per}
> {c.on()} group_left ()
  ({s.slow_broker_ratio:g} * {c.agg("quantile", f"0.5, {per}")})
and
  {per} > {s.slow_broker_min_ms:g}
""",
        f"{who} is slow to broker {{{{ $labels.kafka_node_id }}}}",
        f"{who}: average request latency to broker {{{{ $labels.kafka_node_id }}}} is "
        f"{{{{ $value | printf \"%.4g\" }}}} ms, over {s.slow_broker_ratio:g}x the client's median over its "
        f"brokers and over {s.slow_broker_min_ms:g} ms "
        "(node.request.latency.avg, pushed by every KIP-714 client). The broker is slow for this client: the network "
        "path between them, that broker's request handling, or the partitions it leads for this client.",
        [
            AlertTest(
                {**bad_nodes, **{node(good, k): f"10x{n}" for k in (1, 2, 3)}},
                r.at(fire),
                [({**bad, "kafka_node_id": "3"}, slow)],
            ),
            *r.early(bad_nodes, r.pend / 2),
        ],
    )  # fmt: skip
    # -- throttled
    for alert, metric, setting, kind in (
        (
            "KafkaProducerThrottled",
            "org.apache.kafka.producer.produce.throttle.time.avg",
            "producer_byte_rate",
            "producer",
        ),
        (
            "KafkaConsumerThrottled",
            "org.apache.kafka.consumer.fetch.manager.fetch.throttle.time.avg",
            "consumer_byte_rate",
            "consumer",
        ),
    ):
        pname = prom_name(metric)
        bad, good = r.ident(f"throttled-{kind}"), r.ident(f"free-{kind}")
        info = metric_info(metric)
        assert info is not None
        level = _int(s.throttle_ms * 2 + 10)
        throttled = {_series(pname, {**bad, **job}): f"{level:g}x{n}"}
        r.add(
            alert,
            "kip714-clients",
            f"{c.agg('max', pname)} > {s.throttle_ms:g}",
            f"{who} is throttled by the brokers",
            f'{who}: the brokers throttle its requests, {{{{ $value | printf "%.4g" }}}} ms on average '
            f"({metric.removeprefix('org.apache.kafka.')}, pushed by {senders_text(info.senders)}): it is over its "
            f"{setting} quota.",
            [
                AlertTest({**throttled, _series(pname, {**good, **job}): f"0x{n}"}, r.at(fire), [(bad, level)]),
                *r.early(throttled, r.pend / 2),
            ],
        )
    # -- record errors and retries
    send = prom_name("org.apache.kafka.producer.record.send.total")
    for alert, metric, limit, word in (
        ("KafkaProducerRecordErrors", "org.apache.kafka.producer.record.error.total", s.max_error_rate, "failed"),
        ("KafkaProducerRecordRetries", "org.apache.kafka.producer.record.retry.total", s.max_retry_rate, "retried"),
    ):
        pname = prom_name(metric)
        bad, good = r.ident(f"{word}-producer"), r.ident("fine-producer")
        per_step = int(limit * 200) + 1  # per 100 records sent
        fire_w, n_w = r.pend + r.win + 60, r.samples(r.pend + r.win + 60)
        sends = {_series(send, {**bad, **job}): f"0+100x{n_w}", _series(send, {**good, **job}): f"0+100x{n_w}"}
        failing = {**sends, _series(pname, {**bad, **job}): f"0+{per_step}x{n_w}"}
        r.add(
            alert,
            "kip714-clients",
            f"""
  {c.agg("sum", f"rate({pname}[{w}])")}
/
  {c.agg("sum", f"rate({send}[{w}])")}
> {limit:g}
""",
            f"{who}: records {word} above {limit:g} per record sent",
            f'{who}: {{{{ $value | printf "%.4g" }}}} records {word} per record sent over {w} '
            f"({metric.removeprefix('org.apache.kafka.')} / producer.record.send.total, pushed by Java clients only). "
            + (
                "Check the producer's error log: timeouts (delivery.timeout.ms), authorization, record too large."
                if word == "failed"
                else "Retries follow broker errors and timeouts: NOT_LEADER after leadership moves, slow brokers."
            ),
            [
                AlertTest(
                    {**failing, _series(pname, {**good, **job}): f"0+0x{n_w}"}, r.at(fire_w), [(bad, per_step / 100)]
                ),
                *r.early(failing, r.pend / 2),
            ],
        )
    # -- consumer lag growing
    lag = prom_name("org.apache.kafka.consumer.fetch.manager.records.lag.max")
    bad, good = r.ident("lagging-consumer"), r.ident("keeping-up-consumer")
    base = _int(s.max_consumer_lag * 2 + 100)
    fire_w, n_w = r.pend + r.win + 60, r.samples(r.pend + r.win + 60)
    growing = {_series(lag, {**bad, **job}): f"{base:g}+100x{n_w}"}
    r.add(
        "KafkaConsumerLagGrowing",
        "kip714-clients",
        f"""
  {c.agg("max", lag)} > {s.max_consumer_lag:g}
and
  {c.agg("max", f"deriv({lag}[{w}])")} > 0
""",
        f"{who}: consumer lag is growing",
        f'{who}: its lag is {{{{ $value | printf "%.0f" }}}} records and still growing over {w} '
        "(consumer.fetch.manager.records.lag.max, pushed by Java clients only): it consumes slower than the "
        "partitions fill. Look at its processing time between polls (poll idle ratio near 0), max.poll.records, "
        "and whether the group has enough members for its partitions.",
        [
            AlertTest(
                {**growing, _series(lag, {**good, **job}): f"{base * 2:g}x{n_w}"},
                r.at(fire_w),
                [(bad, base + 100 * (fire_w // 15))],
            ),
            *r.early(growing, r.pend / 2),
        ],
    )
    # -- stopped pushing
    bad = r.ident("gone-client")
    gone = {
        _series("kip714_client_expired_timestamp_seconds", {**bad, **job}): "_x19 1.7e9x40",
        _series("kip714_pushes_total", {"error_code": "NONE", **job}): "0+50x60",
    }
    # the client left this replica for another one, which has its series: not gone
    moved = {**gone, _series(LAST_PUSH, {**bad, **job, "instance": "kip714-2:9464"}): "1.7e9+15x60"}
    r.add(
        "KafkaClientStoppedPushing",
        "kip714-clients",
        f"""
  {c.gone()}
and on ()
  (sum(rate(kip714_pushes_total{{error_code="NONE"}}[{w}])) > 0)
""",
        f"{who} stopped pushing telemetry",
        f"{who} stopped pushing without a terminating push, and kip714 expired its series after max(60 s, 3 x push "
        "interval) of silence (kip714_client_expired_timestamp_seconds) while the rest of the fleet keeps pushing, "
        "and no replica of kip714 has its series. "
        "A client that closes cleanly sends a terminating push: this one crashed, hung, lost its connection, or "
        "disabled telemetry after an error (KAFKA-19747: Java clients before 4.0.1/4.1.1/4.2.0 stop for good after "
        "one failed push).",
        [AlertTest(gone, "360s", [(bad, 1.7e9)]), AlertTest(gone, "240s", [])]
        + ([AlertTest(moved, "360s", [])] if c.labels else []),
        pending="0s",
    )


def _streams_rules(r: _Rules) -> None:
    c, s = r.c, r.s
    w = s.window
    who = c.name()
    job = r.job
    failed = prom_name("org.apache.kafka.stream.failed.stream.threads")
    state = prom_name("org.apache.kafka.stream.client.state")
    bad, good = r.ident("orders-streams-admin"), r.ident("billing-streams-admin")
    ids = {"application_id": "orders-streams", "process_id": "7f6c"}
    increase = f"({c.agg('sum', f'increase({failed}[{w}])')} > 0)"
    failing = {_series(failed, {**bad, **job}): "0x19 1x40"}
    r.add(
        "KafkaStreamsThreadFailed",
        "kip714-streams",
        f"""
  {increase}
* {c.on()} group_left (application_id, process_id)
  (0 * {c.agg("max", state, "application_id", "process_id")} + 1)
or {c.on()}
  {increase}
""",
        "Kafka Streams application {{ $labels.application_id }}: a stream thread failed",
        f"Kafka Streams application {{{{ $labels.application_id }}}} (process {{{{ $labels.process_id }}}}, admin "
        f'client {who}): {{{{ $value | printf "%.0f" }}}} stream thread(s) failed in the last {w} '
        "(failed-stream-threads, pushed by Kafka Streams applications only, 4.0+). Its uncaught exception "
        "handler decides what follows (REPLACE_THREAD, SHUTDOWN_CLIENT, SHUTDOWN_APPLICATION): read the "
        "application's log for the exception.",
        [
            AlertTest(
                {
                    **failing,
                    _series(state, {**bad, **job, **ids}): "2x60",
                    _series(failed, {**good, **job}): "0x60",
                },
                "315s",
                [({**bad, **ids}, 1.0)],
            ),
            AlertTest(failing, "240s", []),
        ],
        pending="0s",
        severity="critical",
    )
    states = ", ".join(f"{i} {n}" for i, n in enumerate(STREAMS_CLIENT_STATES))
    fire, n = r.spend + 90, r.samples(r.spend + 90)
    rebalancing = {_series(state, {**bad, **job, **ids}): f"1x{n}"}
    r.add(
        "KafkaStreamsClientNotRunning",
        "kip714-streams",
        f"{c.agg('max', state, 'application_id', 'process_id')} != 2",
        "Kafka Streams application {{ $labels.application_id }} is not RUNNING",
        f"Kafka Streams application {{{{ $labels.application_id }}}} (process {{{{ $labels.process_id }}}}, admin "
        f'client {who}) has been in state {{{{ $value | printf "%.0f" }}}} for {s.streams_state_pending} '
        f"(client-state, KafkaStreams.State's ordinal: {states}; pushed by Kafka Streams applications only, "
        "4.0+). REBALANCING this long: members joining and leaving (max.poll.interval.ms, session timeouts); "
        "ERROR or NOT_RUNNING: the application stopped.",
        [
            AlertTest(
                {
                    **rebalancing,
                    _series(
                        state, {**good, **job, "application_id": "billing-streams", "process_id": "81aa"}
                    ): f"2x{n}",
                },
                r.at(fire),
                [({**bad, **ids}, 1.0)],
            ),
            *r.early(rebalancing, r.spend / 2),
        ],
        pending=s.streams_state_pending,
    )
    t_state = prom_name("org.apache.kafka.stream.thread.thread.state")
    ratio = prom_name("org.apache.kafka.stream.thread.process.ratio")
    polls = prom_name("org.apache.kafka.stream.thread.poll.total")
    bad, good = r.ident("orders-streams-StreamThread-1-consumer"), r.ident("orders-streams-StreamThread-2-consumer")
    tb, tg = {"thread_id": "orders-streams-StreamThread-1"}, {"thread_id": "orders-streams-StreamThread-2"}
    fire = 150 + r.win + r.pend + 90
    n = r.samples(fire)
    stuck = {
        _series(t_state, {**bad, **job, **tb, "process_id": "7f6c"}): f"4x{n}",
        _series(ratio, {**bad, **job, **tb}): f"1x{n}",
        _series(polls, {**bad, **job, **tb}): f"0+50x10 500x{n}",
    }
    r.add(
        "KafkaStreamsThreadBlocked",
        "kip714-streams",
        f"""
  {c.agg("max", ratio, "thread_id")}
and {c.on("thread_id")}
  ({c.agg("max", t_state, "thread_id")} == 4)
and {c.on("thread_id")}
  ({c.agg("sum", f"rate({polls}[{w}])", "thread_id")} == 0)
""",
        "Kafka Streams thread {{ $labels.thread_id }} is stuck",
        f"Kafka Streams thread {{{{ $labels.thread_id }}}} (main consumer {who}) is RUNNING but has not polled for "
        f'{w}; it spends {{{{ $value | printf "%.4g" }}}} of its time processing (thread-state, poll-total, '
        "process-ratio; pushed by Kafka Streams applications only). It is blocked inside a processor or a "
        "punctuator (a slow external call, a deadlock): take a thread dump. After max.poll.interval.ms the "
        "group evicts it.",
        [
            AlertTest(
                {
                    **stuck,
                    _series(t_state, {**good, **job, **tg, "process_id": "7f6c"}): f"4x{n}",
                    _series(ratio, {**good, **job, **tg}): f"0.3x{n}",
                    _series(polls, {**good, **job, **tg}): f"0+50x{n}",
                },
                r.at(fire),
                [({**bad, **tb}, 1.0)],
            ),
            AlertTest(stuck, r.at(150 + r.win / 2), []),
        ],
    )


def _self_rules(r: _Rules) -> None:
    s = r.s
    w = s.window
    job = r.job
    rep = r.replica  # the test series of a kip714 proxy replica (the recording's rules: kip714 serve, no replica)
    fire, n = r.pend + 90, r.samples(r.pend + 90)
    ignored = "NONE|THROTTLING_QUOTA_EXCEEDED|UNKNOWN_SUBSCRIPTION_ID"
    share = min(s.push_error_ratio, 0.99)
    invalid = int(140 * share / (1 - share)) + 2  # per 90 accepted and 50 throttled pushes
    pushes = {
        _series("kip714_pushes_total", {**job, "error_code": "NONE"}): f"0+90x{n}",
        _series("kip714_pushes_total", {**job, "error_code": "THROTTLING_QUOTA_EXCEEDED"}): f"0+50x{n}",
    }
    r.add(
        "Kip714PushErrors",
        "kip714-self",
        f"""
  sum by (error_code) (rate(kip714_pushes_total{{error_code!~"{ignored}"}}[{w}]))
/ ignoring (error_code) group_left ()
  sum(rate(kip714_pushes_total[{w}]))
> {s.push_error_ratio:g}
""",
        "kip714 answers pushes with {{ $labels.error_code }}",
        '{{ $value | printf "%.4g" }} of the pushes kip714 received over ' + w + " were answered "
        "{{ $labels.error_code }} (kip714_pushes_total): clients whose payloads do not decode (INVALID_RECORD), are "
        "too large (TELEMETRY_TOO_LARGE), use a codec kip714 does not accept (UNSUPPORTED_COMPRESSION_TYPE) or "
        "send malformed requests (INVALID_REQUEST). The fleet dashboard and kip714 report name them.",
        [
            AlertTest(
                {**pushes, _series("kip714_pushes_total", {**job, "error_code": "INVALID_RECORD"}): f"0+{invalid}x{n}"},
                r.at(fire),
                [({"error_code": "INVALID_RECORD"}, invalid / (140 + invalid))],
            ),
            AlertTest(pushes, r.at(fire), []),
        ],
    )
    drops = " or ".join(
        f'label_replace(sum by (job, instance, replica, reason) (rate({m}[{w}])) > 0, "dropped", "{what}", "", "")'
        for m, what in (
            ("kip714_export_payloads_dropped_total", "Prometheus exporter payloads"),
            ("kip714_export_points_dropped_total", "Prometheus exporter data points"),
            ("kip714_otlp_payloads_dropped_total", "OTLP forwarder payloads"),
        )
    )
    fire_w, n_w = r.win + 60, r.samples(r.win + 60)  # rate() = the slope once the window is full of samples
    none = {_series("kip714_export_payloads_dropped_total", {**rep, "reason": "queue-full"}): f"0+0x{n_w}"}
    r.add(
        "Kip714DroppingData",
        "kip714-self",
        drops,
        "kip714 drops {{ $labels.dropped }} ({{ $labels.reason }})",
        "kip714 at " + _AT + " drops {{ $labels.dropped }}: {{ $value | printf \"%.4g\" }}/s over " + w + " "
        "for {{ $labels.reason }} (kip714_export_payloads_dropped_total, kip714_export_points_dropped_total, "
        "kip714_otlp_payloads_dropped_total). queue-full: the sink cannot keep up; series-limit: "
        "--prometheus-max-series reached; undecodable or invalid-*: what clients send.",
        [
            AlertTest(
                {
                    **none,
                    _series("kip714_export_points_dropped_total", {**rep, "reason": "series-limit"}): f"0+3x{n_w}",
                },
                r.at(fire_w),
                [({**rep, "reason": "series-limit", "dropped": "Prometheus exporter data points"}, 0.2)],
            ),
            AlertTest(none, r.at(fire_w), []),
        ],
        pending="0s",
    )  # fmt: skip
    full = min(s.queue_full_ratio, 0.99)
    depth = _int(10000 * (1 + full) / 2)
    queues = {
        _series("kip714_queue_depth", {**rep, "queue": "otlp"}): f"{depth:g}x{n}",
        _series("kip714_queue_capacity", {**rep, "queue": "otlp"}): f"10000x{n}",
    }
    r.add(
        "Kip714QueueFull",
        "kip714-self",
        f"max by (job, instance, replica, queue) (kip714_queue_depth / kip714_queue_capacity) > {s.queue_full_ratio:g}",
        "kip714's {{ $labels.queue }} queue is filling up",
        "kip714 at " + _AT + ': its {{ $labels.queue }} queue is {{ $value | printf "%.4g" }} full '
        "(kip714_queue_depth / kip714_queue_capacity); when full, payloads are dropped (counted as queue-full). "
        "The sink is slower than the pushes: the collector (OTLP) or the disk (recording) is slow, or the host "
        "is short of CPU.",
        [
            AlertTest(
                {
                    **queues,
                    _series("kip714_queue_depth", {**rep, "queue": "prometheus"}): f"0x{n}",
                    _series("kip714_queue_capacity", {**rep, "queue": "prometheus"}): f"10000x{n}",
                },
                r.at(fire),
                [({**rep, "queue": "otlp"}, depth / 10000)],
            ),
            *r.early(queues, r.pend / 2),
        ],
    )
    used = _int(100000 * (1 + min(s.series_limit_ratio, 0.99)) / 2)
    series = {
        _series("kip714_export_series", rep): f"{used:g}x{n}",
        _series("kip714_export_series_limit", rep): f"100000x{n}",
    }
    r.add(
        "Kip714SeriesLimit",
        "kip714-self",
        "sum by (job, instance, replica) (kip714_export_series)\n"
        "/ sum by (job, instance, replica) (kip714_export_series_limit)\n"
        f">= {s.series_limit_ratio:g}",
        "kip714 is near its series cap",
        "kip714 at " + _AT + " exposes {{ $value | printf \"%.4g\" }} of its --prometheus-max-series "
        "cap (kip714_export_series / kip714_export_series_limit); at the cap, new series are refused and counted "
        "as series-limit. Raise the cap, or lower the cardinality: fewer --prometheus-labels (client_instance_id "
        "makes one series set per client instance), narrower subscriptions.",
        [
            AlertTest(series, r.at(fire), [(rep, used / 100000)]),
            AlertTest(
                {
                    _series("kip714_export_series", rep): f"0x{n}",
                    _series("kip714_export_series_limit", rep): f"100000x{n}",
                },
                r.at(fire),
                [],
            ),
        ],
    )  # fmt: skip
    lag = _int(s.recording_lag_s * 4 + 1)
    r.add(
        "Kip714RecordingBehind",
        "kip714-self",
        f"max by (job, instance, replica) (kip714_recording_lag_seconds) > {s.recording_lag_s:g}",
        "kip714's recording is falling behind",
        "kip714 at " + _AT + ": the oldest recorded push not yet written waited {{ $value | printf "
        '"%.4g" }} s (kip714_recording_lag_seconds). The disk is slow or full: without --record-sync a crash loses '
        "that much.",
        [
            AlertTest({_series("kip714_recording_lag_seconds", job): f"{lag:g}x{n}"}, r.at(fire), [(job, lag)]),
            AlertTest({_series("kip714_recording_lag_seconds", job): f"0x{n}"}, r.at(fire), []),
        ],
    )
    r.add(
        "Kip714RecordingWriteFailures",
        "kip714-self",
        f"sum by (job, instance, replica) (increase(kip714_recording_commits_failed_total[{w}])) > 0",
        "kip714 fails to write its recording",
        "kip714 at "
        + _AT
        + ': {{ $value | printf "%.0f" }} writes of the recording failed over '
        + w
        + " (kip714_recording_commits_failed_total); their rows are lost (with --record-sync, their pushes were "
        "not answered). Disk full, permissions, or the folder gone: kip714's log says which.",
        [
            AlertTest({_series("kip714_recording_commits_failed_total", job): "0x19 1x40"}, "315s", [(job, 1.0)]),
            AlertTest({_series("kip714_recording_commits_failed_total", job): "0x60"}, "315s", []),
        ],
        pending="0s",
        severity="critical",
    )
    upstream = {**rep, "node_id": "2", "reason": "refused"}
    r.add(
        "Kip714ProxyUpstreamErrors",
        "kip714-self",
        f"sum by (job, instance, replica, node_id, reason) (rate(kip714_upstream_errors_total[{w}])) > 0",
        "kip714 proxy: upstream broker {{ $labels.node_id }} fails ({{ $labels.reason }})",
        "kip714 proxy at " + _AT + ': {{ $value | printf "%.4g" }}/s failures toward upstream broker '
        "{{ $labels.node_id }} over " + w + ", reason {{ $labels.reason }} (kip714_upstream_errors_total). "
        "Clients of that broker's listener are cut off: refused/timeout/unreachable: the broker is down or "
        "unreachable from the proxy; tls: certificates; closed: it dropped connections with requests in flight; "
        "check-*: the cluster's bootstrap servers do not answer the readiness check.",
        [
            AlertTest(
                {_series("kip714_upstream_errors_total", upstream): f"0+3x{n_w}"}, r.at(fire_w), [(upstream, 0.2)]
            ),
            AlertTest({_series("kip714_upstream_errors_total", upstream): f"3x{n_w}"}, r.at(fire_w), []),
        ],
        pending="0s",
    )
    _fleet_rules(r)


def _fleet_rules(r: _Rules) -> None:
    """A fleet of replicas: one down while the others answer, one behind on the state topic."""
    s = r.s
    fire, n = 165 + r.pend + 60, r.samples(165 + r.pend + 60)
    one, two = {**r.job, "instance": "127.0.0.2:9464"}, {**r.job, "instance": "127.0.0.3:9464"}
    named = {**one, "replica": "kip714-1"}
    info = {"version": "0.1.0"}
    dies = {
        _series("up", one): f"1x10 0x{n}",
        _series("kip714_build_info", {**named, **info}): "1x10",  # gone from its last scrape on
        _series("kip714_build_info", {**two, "replica": "kip714-2", **info}): f"1x{n + 10}",
    }
    r.add(
        "Kip714ReplicaDown",
        "kip714-self",
        f"""
  {replica_targets(s.replica_lookback)}
and on (job, instance)
  (up == 0)
and on (job)
  (count by (job) (up == 1 and on (job, instance) kip714_build_info) > 0)
""",
        "kip714 replica {{ $labels.replica }} is down",
        "Prometheus cannot scrape kip714 at " + _AT + ", up is 0, while other replicas of job "
        "{{ $labels.job }} answer: its clients reconnect to the others through the balancer, which take its load "
        "(kip714_build_info names the replica a target was, for " + s.replica_lookback + "). The process stopped "
        "or hangs, or its host is unreachable: its /healthz, its service manager's log.",
        [
            AlertTest({**dies, _series("up", two): f"1x{n + 10}"}, r.at(fire), [(named, 1.0)]),
            AlertTest({**dies, _series("up", two): f"1x10 0x{n}"}, r.at(fire), []),  # every replica down
            *(r.early({**dies, _series("up", two): f"1x{n + 10}"}, 165 + r.pend / 2) if r.pend >= 60 else []),
        ],
    )
    lag = {**r.replica, "instance": "127.0.0.2:9464"}
    behind = {_series("kip714_state_topic_lag_records", lag): f"0x10 25x{n}"}
    cut_off = {**r.replica, "instance": "127.0.0.4:9464", "replica": "kip714-3"}
    r.add(
        "Kip714StateTopicLagging",
        "kip714-self",
        "max by (job, instance, replica) (kip714_state_topic_lag_records) != 0",
        "kip714 replica {{ $labels.replica }} is behind on the state topic",
        "kip714 at " + _AT + ' has been {{ $value | printf "%.0f" }} records behind on the state topic for '
        + s.pending
        + " (kip714_state_topic_lag_records; -1: the topic's leader does not answer it): it answers clients with "
        "older subscriptions than the other "
        "replicas. It cannot read the topic (the cluster, the topic's ACLs, its consumer's log), or records that "
        "do not parse keep it stuck (kip714_state_topic_records_skipped_total).",
        [
            AlertTest(
                {**behind, _series("kip714_state_topic_lag_records", {**lag, "instance": "127.0.0.3:9464",
                                                                      "replica": "kip714-2"}): f"0x{n + 10}",
                 _series("kip714_state_topic_lag_records", cut_off): f"-1x{n + 10}"},
                r.at(fire),
                [(lag, 25.0), (cut_off, -1.0)],
            ),
            *(r.early(behind, 165 + r.pend / 2) if r.pend >= 60 else []),
            AlertTest({_series("kip714_state_topic_lag_records", lag): f"25x10 0x{n}"}, r.at(fire), []),
        ],
    )  # fmt: skip


# ------------------------------------------------------------------------------------------ the files


def _annotations(a: Alert, s: AlertSettings) -> dict[str, str]:
    out = {"summary": a.summary, "description": a.description}
    if s.runbook_base:
        out["runbook_url"] = f"{s.runbook_base.rstrip('#')}#{a.name.lower()}"
    return out


def rules(labels: str | Iterable[str] = DEFAULT_LABELS, settings: AlertSettings | None = None) -> dict[str, Any]:
    """The rule file (Prometheus' ``groups:`` format) as plain data."""
    s = settings or AlertSettings()
    groups: dict[str, list[dict[str, Any]]] = {}
    for a in alerts(labels, s):
        rule: dict[str, Any] = {"alert": a.name, "expr": a.expr}
        if a.pending not in ("0s", "0m", "0"):
            rule["for"] = a.pending
        rule["labels"] = {"severity": a.severity}
        rule["annotations"] = _annotations(a, s)
        groups.setdefault(a.group, []).append(rule)
    return {"groups": [{"name": g, "interval": s.evaluation_interval, "rules": rs} for g, rs in groups.items()]}


def rule_tests(
    rule_file: str,
    labels: str | Iterable[str] = DEFAULT_LABELS,
    settings: AlertSettings | None = None,
) -> dict[str, Any]:
    """``promtool test rules`` tests of the rules in ``rule_file`` (a path relative to the test file): per
    alert, the cases where it fires and where it does not (yet)."""
    s = settings or AlertSettings()
    if parse_duration(s.window) < 30_000:
        raise ValueError(f"window {s.window!r}: the unit tests need at least 30s (two samples 15 s apart)")
    tests = []
    for a in alerts(labels, s):
        for i, t in enumerate(a.tests):
            expected = [
                {
                    "exp_labels": {"severity": a.severity, **labels_},
                    "exp_annotations": {k: render(v, labels_, value) for k, v in _annotations(a, s).items()},
                }
                for labels_, value in t.firing
            ]
            tests.append(
                {
                    "name": f"{a.name} {'fires' if t.firing else 'does not fire'} ({i + 1})",
                    "interval": t.interval,
                    "input_series": [{"series": k, "values": v} for k, v in t.series.items()],
                    "alert_rule_test": [{"eval_time": t.eval_time, "alertname": a.name, "exp_alerts": expected}],
                }
            )
    return {"rule_files": [rule_file], "evaluation_interval": "15s", "tests": tests}
