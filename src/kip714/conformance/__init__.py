"""``kip714 conformance``: the client lab. It plays a scripted two-node Kafka cluster, provokes the client under
test with every broker answer KIP-714 defines, and judges from the frames it exchanged whether the client acted
as the KIP says (docs/conformance.md).

.. code-block:: python

    from kip714 import conformance

    results = conformance.run("confluent-producer", out="lab-out", junit="lab.xml")
    for r in results:
        print(r.scenario, r.status, r.why)

:func:`run` returns what the command line reports; :data:`SCENARIO_IDS` are the scenarios in the order they
run. The lab's broker is :class:`~kip714.TelemetryBroker` (Apache Kafka 4.1+ decisions) behind
:class:`~kip714.conformance.lab.LabCluster`.

A public subpackage: the names in ``__all__`` are kip714's API (docs/api.md).
"""

from __future__ import annotations

from .lab import Directive, LabCluster
from .report import exit_status, table
from .runner import BUILTIN_CLIENTS, DEFAULT_INTERVAL_MS, DEFAULT_STARTUP_S, Client, Result, run, run_async
from .scenarios import SCENARIO_IDS, SCENARIOS, Scenario, Timing, Verdict
from .trace import ConnectionEvent, Exchange, Trace

__all__ = [
    "BUILTIN_CLIENTS",
    "DEFAULT_INTERVAL_MS",
    "DEFAULT_STARTUP_S",
    "SCENARIOS",
    "SCENARIO_IDS",
    "Client",
    "ConnectionEvent",
    "Directive",
    "Exchange",
    "LabCluster",
    "Result",
    "Scenario",
    "Timing",
    "Trace",
    "Verdict",
    "exit_status",
    "run",
    "run_async",
    "table",
]
