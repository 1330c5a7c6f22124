"""``kip714 bench``: kip714 against its peers, measured in the same run, without pytest.

The groups measure what the pytest-benchmark suites in ``bench/`` measure (same payloads, same peers):
``protocol``, ``codec``, ``crc``, ``limiter``, ``broker``, ``otlp``, ``export``, ``spark``, ``proxy``,
``record``, ``endpoint``, ``pipeline-scale`` and ``report``. The result is a table (operation, kip714, peer,
ratio, goal, met), optionally a JSON file for tracking and PNG plots of how the cost grows with the work (payload size,
live instances, batch size) next to the peer's curve. How it times: :mod:`.timing`.

The package, one job per module (groups import the harness, never the reverse):

* :mod:`.harness`: :class:`Bench`, one run: its rows, curves, skipped peers and notes; runs the groups; the
  JSON result.
* :mod:`.registry`: ``GROUPS``, the groups by name; a group's module is imported only when it runs.
* ``groups/NAME.py``: one module per group, each with ``run(bench)``.
* :mod:`.timing` (interleaved rounds, medians), :mod:`.payloads` (captures and OTLP payloads of any size),
  :mod:`.peers` (import a peer or skip it), :mod:`.render` (numbers in words, the text and Markdown
  table), :mod:`.machine` (what a result was measured on), :mod:`.plots` (``--plot``).
* Support of single groups: :mod:`.spark_jobs` (the functions Spark's workers import by name; ``spark``,
  ``pipeline-scale``), :mod:`.scale` (recordings at fleet scale, Spark jobs in child processes;
  ``pipeline-scale``), :mod:`.report_peer` (the pandas peer of ``kip714 report``; ``report``),
  :mod:`.loadgen` (pre-encoded, pipelined pushes from worker processes), :mod:`.floor` (the smallest server
  on the same event loop) and :mod:`.otlp_sink` (a collector that accepts everything; all three
  ``endpoint``).

**Adding a row** to a group: in its ``run(bench)``, time kip714's call against the peer's with
:meth:`Bench.pair`, which measures both in interleaved rounds and adds the row::

    bench.pair("codec", "decompress-zstd-4096", "decompress zstd, 4 KB OTLP",
               (kip714.decompress, (packed, 4, LIMIT)),
               lambda: (peer_label("zstandard"), dctx.decompress, (packed,)),
               goal={"kind": "ratio", "value": 1, "text": "≥ 1×"}, peer_dist="zstandard")

The peer comes from a factory so that a peer that is not installed (:func:`.peers.peer_module` raises
``PeerMissing``) makes the row say "skipped" instead of failing the group. The second argument is the
row's id: the JSON result and ``bench/test_bench.py`` name the row by it, so keep it stable. A row that is
not one call against another (a rate, bytes, seconds of a child process) is timed by the group and added
with :meth:`Bench.add_row` (its ``unit`` and the goal kinds are listed there); :meth:`Bench.curve` keeps a
series for the plots (:func:`.plots.write_plots` draws the figure of each curve name it knows).

**Adding a group**: write ``groups/NAME.py`` with ``def run(bench: Bench) -> None`` (``-`` in the name
becomes ``_`` in the file name) and add ``"NAME"`` to :data:`.registry.GROUPS`, whose order is a run's
order and ``--only``'s choices. Its :meth:`Bench.pair` rows become pytest-benchmark cases of
``bench/test_bench.py`` (which runs the groups with ``collect=True``) with no more work; a group that
cannot be a case (child processes, sockets) returns early when ``bench.cases is not None``, as ``record``
does.

The names that ``kip714.cli.bench``, ``bench/`` and the tests import are re-exported here, including the
old private names of the module this package replaced (``_groups``, ``_json_default``, ``_loadavg``,
``_capture_payload``, ``_pyarrow_round_trip``). Names that belong to one group are imported with it, on
first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from .harness import Bench, Case
from .machine import CHECKOUT, loadavg
from .payloads import ACCEPTED, KB, LIMIT, capture_payload, otlp_like, sample_payloads
from .peers import PEER_DISTS, PeerMissing, dist_version, peer_label, peer_module
from .plots import write_plots
from .registry import GROUPS, parse_groups
from .render import (
    fmt_bytes,
    fmt_ns,
    fmt_rate,
    fmt_ratio,
    json_default,
    render_markdown,
    render_table,
    size_name,
    size_name_points,
)
from .spark_jobs import (
    protobuf_mapper,
    recording_peer_schema,
    recording_protobuf_mapper,
    run_noop,
    spark_input,
    spark_kip714,
    spark_peer,
)
from .timing import inner_loop_size, interleaved, settle_allocator, summarise

# the old names of the single module this package replaced
_groups = parse_groups
_json_default = json_default
_loadavg = loadavg
_capture_payload = capture_payload

#: Names that live in one group's module: imported with that group, on first use (not in ``__all__``).
_GROUP_NAMES = {
    "threaded_handle_rate": "broker",
    "_pyarrow_round_trip": "otlp",
    "SUBSCRIPTION_LISTS": "crc",
    "SUBSCRIPTION_CLIENT": "crc",
    "python_subscription_id": "crc",
    "report_recording": "report",
}

__all__ = [
    "ACCEPTED",
    "CHECKOUT",
    "GROUPS",
    "KB",
    "LIMIT",
    "PEER_DISTS",
    "Bench",
    "Case",
    "PeerMissing",
    "capture_payload",
    "dist_version",
    "fmt_bytes",
    "fmt_ns",
    "fmt_rate",
    "fmt_ratio",
    "inner_loop_size",
    "interleaved",
    "json_default",
    "loadavg",
    "otlp_like",
    "parse_groups",
    "peer_label",
    "peer_module",
    "protobuf_mapper",
    "recording_peer_schema",
    "recording_protobuf_mapper",
    "render_markdown",
    "render_table",
    "run_noop",
    "sample_payloads",
    "settle_allocator",
    "size_name",
    "size_name_points",
    "spark_input",
    "spark_kip714",
    "spark_peer",
    "summarise",
    "write_plots",
]


def __getattr__(name: str) -> Any:
    group = _GROUP_NAMES.get(name)
    if group is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.groups.{group}"), name)
