"""``kip714 dashboards``: kip714's Grafana dashboards and Prometheus alert rules, generated for the labels and
thresholds you use (:mod:`kip714.operations`)."""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys

from .._extras import require
from ..operations.alerts import AlertSettings
from ..operations.deploy import generate, write
from ..operations.grafana import DEFAULT_DATASOURCE
from ..sinks.labels import BROKER_LABELS, DEFAULT_LABELS, parse_labels

_HELP = {  # AlertSettings field → help (the defaults are added from the dataclass)
    "evaluation_interval": "how often Prometheus evaluates the rule groups",
    "window": "range of rate(), increase() and deriv() in the rules",
    "pending": "how long a client condition must hold before its alert fires (the rules' for:)",
    "slow_broker_ratio": "a broker this many times slower than the client's median over its brokers is an outlier",
    "slow_broker_min_ms": "... and slower than this many ms",
    "throttle_ms": "average throttle time (ms) above which a client is throttled",
    "max_error_rate": "record errors per record sent above which a producer alerts",
    "max_retry_rate": "record retries per record sent above which a producer alerts",
    "max_consumer_lag": "records of lag a growing consumer lag must pass",
    "push_error_ratio": "share of pushes answered with an error that alerts (throttling and "
    "UNKNOWN_SUBSCRIPTION_ID not counted)",
    "queue_full_ratio": "a sink queue this full (of its capacity) alerts",
    "series_limit_ratio": "exposed series as a share of --prometheus-max-series that alerts",
    "recording_lag_s": "seconds the oldest unwritten recorded push may wait",
    "streams_state_pending": "how long a Kafka Streams instance may stay out of RUNNING",
    "replica_lookback": "how long a replica that stopped answering scrapes is still known by name (Kip714ReplicaDown)",
    "runbook_base": "URL of the 'Dashboards and alerts' docs page: each alert links its runbook section",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``kip714 dashboards``."""
    p.description = (
        "Write kip714's Grafana dashboards (producers, consumers, Kafka Streams applications, the client fleet, "
        "kip714 itself; built with Grafana's grafana-foundation-sdk, the dashboards extra, Python 3.11+), their "
        "provisioning files, and Prometheus alert rules with their promtool unit tests, for the labels and "
        "thresholds given. Panels over metrics only some clients push say so in their title."
    )
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write grafana/ and prometheus/ into")
    p.add_argument(
        "--datasource",
        default=DEFAULT_DATASOURCE,
        metavar="NAME",
        help=f"the Prometheus data source the dashboards select by default (default {DEFAULT_DATASOURCE})",
    )
    p.add_argument(
        "--labels",
        default=",".join(DEFAULT_LABELS),
        metavar="LIST",
        help=f"the broker-added labels kip714 exports, as given to --prometheus-labels (default "
        f"{','.join(DEFAULT_LABELS)}; any of {', '.join(BROKER_LABELS)}): the client identity panels and rules "
        "group by",
    )
    p.add_argument(
        "--only",
        choices=["dashboards", "rules"],
        help="write only the Grafana dashboards or only the Prometheus rules (default both)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing: exit 1 when a file in DIR differs from what would be written (DIR up to date?)",
    )
    g = p.add_argument_group("alert thresholds and windows")
    for f in dataclasses.fields(AlertSettings):
        flag = "--" + f.name.replace("_", "-")
        kind = float if isinstance(f.default, float) else str
        g.add_argument(flag, type=kind, default=f.default, metavar="X", help=f"{_HELP[f.name]} (default {f.default!r})")


def run(args: argparse.Namespace) -> int:
    """Entry point of ``kip714 dashboards``: 0, or 1 with ``--check`` when something differs."""
    labels = parse_labels(args.labels)
    if args.only != "rules" and sys.version_info < (3, 11):
        raise ValueError(
            "Grafana's grafana-foundation-sdk needs Python 3.11+: run this with Python 3.11 or later, use --only "
            "rules, or take the generated dashboards from deploy/grafana/ in kip714's source"
        )
    if args.only != "rules":
        require("dashboards", "this command (or --only rules)")
    settings = AlertSettings(**{f.name: getattr(args, f.name) for f in dataclasses.fields(AlertSettings)})
    files = generate(labels, args.datasource, settings, args.only or "all")
    root = pathlib.Path(args.out)
    if args.check:
        stale = [rel for rel, text in files.items() if not (root / rel).is_file() or (root / rel).read_text() != text]
        for rel in stale:
            print(f"{root / rel}: differs from what kip714 dashboards would write")
        return 1 if stale else 0
    for path in write(files, root):
        print(path)
    return 0
