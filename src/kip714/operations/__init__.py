"""What operators look at: Grafana dashboards and Prometheus alert rules over what kip714 exports, and
subscription explain and lint (``kip714 dashboards``, ``kip714 subscriptions``).

It sits beside :mod:`kip714.conformance` in the layers: it reads the library (the broker's subscriptions, the
client catalog of who pushes what, the Prometheus sink's names and labels, the recording) and the command line
ships its output; nothing of the library imports it. Modules, in the order they build on each other:

- :mod:`.promql`: the Prometheus name of a telemetry metric and the client identity to group by;
- :mod:`.panels`, :mod:`.boards`: a dashboard as plain data, and kip714's dashboards (no optional package);
- :mod:`.grafana`: the same built with Grafana's ``grafana-foundation-sdk`` (the ``dashboards`` extra);
- :mod:`.alerts`: the alert rules and their promtool unit tests;
- :mod:`.yaml_text`, :mod:`.deploy`: the files ``kip714 dashboards`` writes (``deploy/`` holds the defaults);
- :mod:`.defects`, :mod:`.subscriptions`: known client telemetry defects, explain and lint;
- :mod:`.admin_read`: the subscriptions of a running endpoint, read through Kafka's admin API.
"""

from __future__ import annotations

from .alerts import AlertSettings, alerts, rule_tests, rules
from .boards import dashboards
from .deploy import generate
from .subscriptions import explain, lint

__all__ = ["AlertSettings", "alerts", "dashboards", "explain", "generate", "lint", "rule_tests", "rules"]
