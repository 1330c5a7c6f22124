"""kip714's dashboards as Grafana dashboards, built with Grafana's own ``grafana-foundation-sdk`` (the
``dashboards`` extra, Python 3.11+) from the specs of :mod:`kip714.operations.boards`.

Pinned build: ``grafana-foundation-sdk==1769699379!11.6.0`` (Grafana 11.6.x, ``schemaVersion`` 41). The
package's versions are ``<epoch>!<Grafana version>`` and each release batch gives its Grafana 10.1 build the
highest epoch, so an unpinned ``pip install -U`` moves to the 10.1 build (whose decoder cannot read its own
stat panels back): keep the pin.

Every panel and query uses the data source variable ``${datasource}`` (provisioned dashboards get no
``__inputs`` substitution); ``datasource`` sets the variable's default. Panel ids are the specs' (stable,
unique per dashboard). :func:`roundtrip_problems` reads a dashboard's JSON back through the SDK's typed
models and reports anything they dropped or changed: the SDK ships no schema validator, so that and
kip714's own checks (the tests') are how a dashboard is validated.
"""

from __future__ import annotations

import json
from typing import Any

from .._extras import require
from .panels import Dashboard, Panel, Query

__all__ = ["DEFAULT_DATASOURCE", "build", "roundtrip_problems", "to_json"]

#: The data source the dashboards' ``datasource`` variable selects by default.
DEFAULT_DATASOURCE = "Prometheus"
_GRID = 24


def _query(q: Query, ref: str, ds: Any, table: bool) -> Any:
    from grafana_foundation_sdk.builders.prometheus import Dataquery
    from grafana_foundation_sdk.models.prometheus import PromQueryFormat

    out = Dataquery().ref_id(ref).expr(q.expr).datasource(ds)
    if q.legend:
        out = out.legend_format(q.legend)
    if q.instant:
        out = out.instant()
    if table:
        out = out.format(PromQueryFormat.TABLE)
    return out


def _panel(p: Panel, ds: Any) -> Any:
    from grafana_foundation_sdk.builders import stat, statetimeline, table, timeseries
    from grafana_foundation_sdk.models.dashboard import ValueMap, ValueMappingResult

    kinds: dict[str, Any] = {
        "timeseries": timeseries.Panel,
        "stat": stat.Panel,
        "table": table.Panel,
        "state": statetimeline.Panel,
    }
    builder = kinds[p.kind]()
    builder = builder.id(p.id).title(p.title).description(p.description).datasource(ds).span(p.width).height(p.height)
    for i, q in enumerate(p.queries):
        builder = builder.with_target(_query(q, chr(ord("A") + i), ds, p.kind == "table"))
    if p.unit:
        builder = builder.unit(p.unit)
    if p.min is not None:
        builder = builder.min(p.min)
    if p.max is not None:
        builder = builder.max(p.max)
    if p.mappings:
        options = {str(v): ValueMappingResult(text=text, index=i) for i, (v, text) in enumerate(p.mappings)}
        builder = builder.mappings([ValueMap(options=options)])
    return builder


def build(spec: Dashboard, datasource: str = DEFAULT_DATASOURCE) -> Any:
    """The SDK's dashboard builder for ``spec`` (``.build()`` gives the model)."""
    require("dashboards", "kip714.operations.grafana")
    from grafana_foundation_sdk.builders.dashboard import Dashboard as DashboardBuilder
    from grafana_foundation_sdk.builders.dashboard import DatasourceVariable, QueryVariable, Row
    from grafana_foundation_sdk.models.common import TimeZoneBrowser
    from grafana_foundation_sdk.models.dashboard import DataSourceRef, VariableOption, VariableRefresh, VariableSort

    ds = DataSourceRef(type_val="prometheus", uid="${datasource}")
    dash = (
        DashboardBuilder(spec.title)
        .uid(spec.uid)
        .description(spec.description)
        .tags(list(spec.tags))
        .refresh("30s")
        .time("now-1h", "now")
        .timezone(TimeZoneBrowser)
        .with_variable(
            DatasourceVariable("datasource")
            .label("Data source")
            .type("prometheus")
            .current(VariableOption(selected=True, text=datasource, value=datasource))
        )
    )
    for v in spec.variables:
        dash = dash.with_variable(
            QueryVariable(v.name)
            .label(v.label)
            .datasource(ds)
            .query(v.query)
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(VariableSort.ALPHABETICAL_ASC)
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .current(VariableOption(selected=True, text="All", value="$__all"))
        )
    for row in spec.rows:
        dash = dash.with_row(Row(row.title).id(row.id))
        for p in row.panels:
            dash = dash.with_panel(_panel(p, ds))
    return dash


def to_json(spec: Dashboard, datasource: str = DEFAULT_DATASOURCE) -> str:
    """The dashboard's JSON (keys sorted, indented: stable text to commit and diff)."""
    from grafana_foundation_sdk.cog.encoder import JSONEncoder

    return JSONEncoder(sort_keys=True, indent=2).encode(build(spec, datasource).build()) + "\n"


def roundtrip_problems(text: str) -> list[str]:
    """What the SDK's typed models drop or change when they read a dashboard's JSON back and write it again
    (``dropped /panels[3]/titel``, ``changed /panels[0]/type: …``); empty when nothing. Keys the models add
    as defaults are allowed."""
    require("dashboards", "kip714.operations.grafana.roundtrip_problems")
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models.dashboard import Dashboard as DashboardModel

    register_default_plugins()  # panels and queries decode into their typed variants
    before = json.loads(text)
    after = json.loads(JSONEncoder().encode(DashboardModel.from_json(before)))
    out: list[str] = []

    def walk(a: Any, b: Any, path: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for k in a:
                if k not in b:
                    out.append(f"dropped {path}/{k}")
                else:
                    walk(a[k], b[k], f"{path}/{k}")
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{path}[{i}]")
        elif a != b or type(a) is not type(b):
            out.append(f"changed {path}: {a!r} -> {b!r}")

    walk(before, after, "")
    return out
