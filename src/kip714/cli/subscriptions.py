"""``kip714 subscriptions explain|lint``: which subscription a client gets, and what in a subscription file, or in
a running endpoint's subscriptions, puts a fleet at risk (:mod:`kip714.operations.subscriptions`)."""

from __future__ import annotations

import argparse
import json

from ..operations.subscriptions import explain, lint, load_subscriptions, parse_client, read_fleet

_CLIENT_HELP = (
    "a client as the broker sees it: comma-separated key=value of client_id, client_software_name, "
    "client_software_version, client_source_address, client_source_port, client_instance_id (Kafka's base64 "
    "or a UUID), principal"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``kip714 subscriptions``."""
    p.description = (
        "explain: which subscriptions match a client, the requested metrics after merging, the push interval "
        "and the SubscriptionId, as a Java broker computes them. lint: what in a subscription file Kafka "
        "refuses or a fleet trips on (intervals out of bounds, an empty metrics=, prefixes that match nothing, "
        "unsafe or impossible match regexes, clients matched by several subscriptions, and with a recording "
        "the known telemetry defects of the fleet's client versions that the subscriptions trigger); exit "
        "status 1 when something is flagged."
    )
    sub = p.add_subparsers(
        dest="action", required=True, metavar="ACTION", help="explain (what a client gets) or lint (what is risky)"
    )
    e = sub.add_parser(
        "explain", help="what the broker answers a client", description="What the broker answers a client."
    )
    lt = sub.add_parser(
        "lint", help="check a subscription file (exit 1 on a finding)", description="Check a subscription file."
    )
    for q in (e, lt):
        source = q.add_mutually_exclusive_group(required=True)
        source.add_argument(
            "--config",
            metavar="FILE",
            help="the subscriptions, as kip714 serve --config reads them (JSON, or lines "
            "'NAME metrics=[..],interval.ms=..,match=[..]')",
        )
        source.add_argument(
            "--bootstrap-server",
            type=_host_port,
            metavar="HOST:PORT",
            help="read the subscriptions of a running kip714 serve, kip714 proxy --telemetry terminate or Kafka "
            "3.7+ broker through Kafka's admin API (ListConfigResources, DescribeConfigs; plain TCP)",
        )
        q.add_argument("--json", action="store_true", help="print JSON instead of text")
        q.add_argument(
            "--jdk",
            type=int,
            default=17,
            help="the brokers' Java version (the HashSet order of the metrics changed in JDK 19; default 17)",
        )
    e.add_argument("--client", required=True, action="append", metavar="K=V,...", help=_CLIENT_HELP + " (repeatable)")
    lt.add_argument(
        "--recording",
        metavar="DIR",
        help="a kip714 serve --record recording: check the prefixes against the metrics the fleet pushed, the "
        "match regexes against its clients, and its client versions against the known defects",
    )
    lt.add_argument("--client", action="append", default=[], metavar="K=V,...", help=_CLIENT_HELP + " (repeatable)")


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.removeprefix("[").removesuffix("]"), int(port)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``kip714 subscriptions``: explain 0; lint 0, or 1 when something is flagged."""
    if args.bootstrap_server is not None:
        from ..operations.admin_read import read_subscriptions

        subscriptions = read_subscriptions(*args.bootstrap_server)
    else:
        subscriptions = load_subscriptions(args.config)
    clients = [parse_client(c) for c in args.client]
    if args.action == "explain":
        found = [explain(subscriptions, c, args.jdk) for c in clients]
        if args.json:
            print(json.dumps([x.as_dict() for x in found], indent=2))
        else:
            print("\n\n".join(x.text() for x in found))
        return 0
    fleet = read_fleet(args.recording) if args.recording else None
    findings = lint(subscriptions, fleet, clients, args.jdk)
    if args.json:
        print(json.dumps([vars(f) for f in findings], indent=2))
    elif findings:
        print("\n".join(f.text() for f in findings))
    else:
        checked = f"{len(subscriptions)} subscription(s)" + (
            f" against {len(fleet.clients)} client(s) and {len(fleet.metrics)} metric name(s) of the recording"
            if fleet is not None
            else ""
        )
        print(f"no finding: {checked}")
    return 1 if findings else 0
