"""The straightforward peer of ``kip714 report`` for ``kip714 bench --only report``: the same checks and
insights written with pandas over the decoded points (kip714's native decoder, one process).

It computes what :func:`kip714.spark.report.report` computes — per software the 12 conformance counts,
per client the 6 insights, with the same rules and default thresholds — so the two can be compared (the
bench checks that they agree) and timed against each other."""

from __future__ import annotations

import pathlib

from kip714._codec import decompress
from kip714._enums import DEFAULT_TELEMETRY_MAX_BYTES, ErrorCode
from kip714.sinks.recorder import read_closed, read_recording

_NS = "org.apache.kafka."


def decoded_points(recording: str | pathlib.Path):
    """(pushes, points) pandas DataFrames: every recorded push, and one row per decoded data point with
    the push's recording columns (maps as lists of (key, value) pairs)."""
    import pyarrow as pa

    from kip714 import _otlp

    rec = read_recording(recording)
    payloads = rec.column("payload").to_pylist()
    ctypes = rec.column("compression_type").to_pylist()
    good, rows, failed = [], [], [0] * len(payloads)
    for i, (data, ctype) in enumerate(zip(payloads, ctypes)):
        if data is None:
            continue
        try:
            good.append(decompress(data, int(ctype), DEFAULT_TELEMETRY_MAX_BYTES) if data else b"")
            rows.append(i)
        except Exception:
            failed[i] = 1
    table, bad = _otlp.decode_metrics_batch(good, errors="collect")
    for index, _, _ in bad:
        failed[rows[index]] = 1
    src = pa.array([rows[k] for k in table.column("payload_index").to_numpy()], pa.int64())
    push_cols = [c for c in rec.column_names if c != "payload"]
    carried = rec.select(push_cols).take(src)
    points = pa.Table.from_arrays(
        list(table.columns) + list(carried.columns),
        names=table.column_names + [f"push_{c}" if c == "error_code" else c for c in carried.column_names],
    ).to_pandas()
    pushes = rec.select(push_cols).to_pandas()
    pushes["payload_bytes"] = [None if p is None else len(p) for p in payloads]
    pushes["decode_failed"] = failed
    return pushes, points


def report_pandas(recording, options=None):
    """(conformance rows, insight rows) of ``recording`` computed with pandas."""

    from kip714.spark.report import (
        CHECKS,
        NAME_PATTERN,
        STANDARD_CONSUMER_METRICS,
        STANDARD_PRODUCER_METRICS,
        ReportOptions,
    )
    from kip714.spark.report_verdicts import (
        _CONN,
        _ERR,
        _IDLE,
        _LABEL_VARIANTS,
        _LAG,
        _REQ,
        _RETRY,
        _RPR,
        _SEND,
        _THROTTLE,
    )
    from kip714.spark.report_verdicts import (
        NODE_LATENCY as _LAT,
    )

    opts = options or ReportOptions()
    pushes, pts = decoded_points(recording)
    for df in (pushes, pts):
        for c in ("client_software_name", "client_software_version"):
            df[c] = df[c].fillna("unknown")
    sw_of = pushes.groupby("client_instance_id")[["client_software_name", "client_software_version"]].first()

    # ---- per point
    std_all = set(STANDARD_PRODUCER_METRICS + STANDARD_CONSUMER_METRICS)
    bare = {m[len(_NS) :] for m in std_all}
    metric = pts["metric"]
    pts["naming_bad"] = ~metric.str.match(NAME_PATTERN) | metric.isin(bare)
    subs = pts["subscribed_metrics"]
    pts["sub_checked"] = subs.notna()
    pts["sub_bad"] = [s is not None and not any(p == "*" or m.startswith(p) for p in s) for m, s in zip(metric, subs)]
    temp_checked = pts["kind"].isin(["sum", "histogram", "exponential_histogram"]) & pts["delta_temporality"].notna()
    expected = pts["delta_temporality"].map({True: "delta", False: "cumulative"})
    pts["temp_checked"] = temp_checked
    pts["temp_bad"] = temp_checked & (pts["temporality"].fillna("unspecified") != expected)
    pts["is_p"] = metric.str.startswith(_NS + "producer.")
    pts["is_c"] = metric.str.startswith(_NS + "consumer.")
    g = pts.groupby("client_instance_id")
    inst = g.agg(
        points=("metric", "size"),
        naming_bad=("naming_bad", "sum"),
        sub_checked=("sub_checked", "sum"),
        sub_bad=("sub_bad", "sum"),
        temp_checked=("temp_checked", "sum"),
        temp_bad=("temp_bad", "sum"),
        is_p=("is_p", "any"),
        is_c=("is_c", "any"),
    )
    inst["keys"] = g["resource"].agg(lambda s: sorted({k for r in s for k, _ in r}))
    inst["seen"] = pts[pts["metric"].isin(std_all)].groupby("client_instance_id")["metric"].agg(set)
    inst["subs"] = g["subscribed_metrics"].agg(lambda s: {tuple(x) for x in s if x is not None})

    # ---- per series
    pts["attrs"] = [tuple(sorted(a)) for a in pts["attributes"]]
    pts["res"] = [tuple(sorted(r)) for r in pts["resource"]]
    pts["cum"] = pts["temporality"] == "cumulative"
    per_push = (
        pts.groupby(["client_instance_id", "node_id", "received_at_ms", "metric", "attrs", "res"], sort=False)
        .agg(
            n=("metric", "size"),
            s0=("start_time_unix_nano", "min"),
            s1=("start_time_unix_nano", "max"),
            cum=("cum", "any"),
        )
        .reset_index()
    )
    per_series = (
        per_push.groupby(["client_instance_id", "metric", "attrs", "res"], sort=False)
        .agg(
            in_pushes=("n", "size"),
            dups=("n", lambda s: int((s > 1).sum())),
            cum=("cum", "any"),
            s0=("s0", "min"),
            s1=("s1", "max"),
        )
        .reset_index()
    )
    per_series["moved"] = per_series["cum"] & (per_series["s0"] != per_series["s1"])
    ser = per_series.groupby("client_instance_id").agg(
        series=("in_pushes", "sum"), dups=("dups", "sum"), cum=("cum", "sum"), moved=("moved", "sum")
    )

    # ---- per push
    p = pushes.sort_values(["client_instance_id", "received_at_ms"], kind="stable")
    gp = p.groupby("client_instance_id", sort=False)
    prev_t, prev_err, prev_sid = gp["received_at_ms"].shift(), gp["error_code"].shift(), gp["subscription_id"].shift()
    interval = p["push_interval_ms"]
    gap = p["received_at_ms"] - prev_t
    checked = (
        prev_t.notna() & interval.notna() & ~p["terminating"] & (prev_err == 0) & (prev_sid == p["subscription_id"])
    )
    p = p.assign(
        interval_checked=checked,
        early=checked & (gap < interval * (1 - opts.interval_tolerance)),
        comp_checked=(p["payload_bytes"].fillna(0) > 0) & p["accepted_compression_types"].notna(),
    )
    p["comp_bad"] = [
        bool(c and t != 0 and t not in a)
        for c, t, a in zip(p["comp_checked"], p["compression_type"], p["accepted_compression_types"])
    ]
    code = p["error_code"]
    unknown, throttled = int(ErrorCode.UNKNOWN_SUBSCRIPTION_ID), int(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
    p["err_fault"] = (
        (code != 0)
        & (code != throttled)
        & ((code != unknown) | ((prev_err == unknown) & (prev_sid == p["subscription_id"])))
    )
    p["has_payload"] = p["payload_bytes"].notna()
    p["who"] = list(zip(p["client_id"], p["client_software_name"], p["client_software_version"]))
    pi = p.groupby("client_instance_id").agg(
        pushes=("received_at_ms", "size"),
        payload_pushes=("has_payload", "sum"),
        last=("received_at_ms", "max"),
        terminated=("terminating", "any"),
        interval_checked=("interval_checked", "sum"),
        early=("early", "sum"),
        comp_checked=("comp_checked", "sum"),
        comp_bad=("comp_bad", "sum"),
        err_fault=("err_fault", "sum"),
        decode_failed=("decode_failed", "sum"),
        clients=("who", "nunique"),
    )
    closed = read_closed(recording).to_pandas()
    closed = closed[closed["reason"].fillna("client") != "endpoint"].groupby("client_instance_id")["closed_at_ms"].max()
    pi["left"] = (closed.reindex(pi.index) >= pi["last"]).fillna(False).astype(bool)
    inst = pi.join(inst, how="left").join(ser, how="left").join(sw_of)
    for c in (
        "points",
        "naming_bad",
        "sub_checked",
        "sub_bad",
        "temp_checked",
        "temp_bad",
        "series",
        "dups",
        "cum",
        "moved",
    ):
        inst[c] = inst[c].fillna(0)
    inst["is_p"] = inst["is_p"].fillna(False).astype(bool)
    inst["is_c"] = inst["is_c"].fillna(False).astype(bool)

    def label_bad(row) -> tuple[bool, bool]:
        keys = row["keys"] if isinstance(row["keys"], list) else []
        problems = [k for k in keys if k in _LABEL_VARIANTS]
        if row["is_p"] and not row["is_c"]:
            problems += [k for k in keys if k in ("group_id", "group_instance_id", "group_member_id")]
        elif row["is_c"] and not row["is_p"]:
            problems += [k for k in keys if k == "transactional_id"]
        if ("group_instance_id" in keys or "group_member_id" in keys) and "group_id" not in keys:
            problems.append("orphan")
        applies = row["is_p"] or row["is_c"] or bool(keys)
        return applies, applies and bool(problems)

    labels = inst.apply(label_bad, axis=1, result_type="expand")
    inst["label_checked"], inst["label_bad"] = labels[0], labels[1]

    def coverage(group, flag, standard):
        sub = group[group[flag]]
        if sub.empty:
            return 0, 0
        subs = set().union(*[s for s in sub["subs"] if isinstance(s, set)]) or {("*",)}
        seen = set().union(*[s for s in sub["seen"] if isinstance(s, set)])
        wanted = [m for m in standard if any(any(p == "*" or m.startswith(p) for p in s) for s in subs)]
        return len(wanted), sum(m not in seen for m in wanted)

    conformance = []
    for (name, version), grp in inst.groupby(["client_software_name", "client_software_version"]):
        pc, pm = coverage(grp, "is_p", STANDARD_PRODUCER_METRICS)
        cc, cm = coverage(grp, "is_c", STANDARD_CONSUMER_METRICS)
        term_checked = grp["terminated"] | grp["left"]
        counts = {
            "payload_decodes": (grp["decode_failed"].sum(), grp["payload_pushes"].sum()),
            "metric_naming": (grp["naming_bad"].sum(), grp["points"].sum()),
            "subscribed_only": (grp["sub_bad"].sum(), grp["sub_checked"].sum()),
            "temporality": (grp["temp_bad"].sum(), grp["temp_checked"].sum()),
            "start_time_stable": (grp["moved"].sum(), grp["cum"].sum()),
            "no_duplicate_series": (grp["dups"].sum(), grp["series"].sum()),
            "standard_coverage": (pm + cm, pc + cc),
            "resource_labels": (grp["label_bad"].sum(), grp["label_checked"].sum()),
            "push_interval": (grp["early"].sum(), grp["interval_checked"].sum()),
            "compression_accepted": (grp["comp_bad"].sum(), grp["comp_checked"].sum()),
            "terminating_push": ((~grp["terminated"] & grp["left"]).sum(), term_checked.sum()),
            "one_client_per_instance": ((grp["clients"] > 1).sum(), len(grp)),
            "error_responses": (grp["err_fault"].sum(), grp["pushes"].sum()),
        }
        for check in CHECKS:
            failures, n = (int(x) for x in counts[check])
            conformance.append(
                {
                    "client_software_name": name,
                    "client_software_version": version,
                    "check": check,
                    "status": "n/a" if n == 0 else "fail" if failures else "pass",
                    "failures": failures,
                    "checked": n,
                }
            )

    # ---- insights
    keep = pts["metric"].isin(list(_THROTTLE) + [_RPR, _SEND, _REQ, _ERR, _RETRY] + list(_CONN) + [_LAG, _IDLE]) | pts[
        "metric"
    ].str.endswith(_LAT)
    ip = pts.loc[
        keep, ["client_instance_id", "metric", "attributes", "value", "value_int", "time_unix_nano", "temporality"]
    ].copy()
    ip["v"] = ip["value"].fillna(ip["value_int"].astype("float64"))
    ip["node"] = [
        next((v for k, v in a if k in ("node_id", "node.id")), None) if m.endswith(_LAT) else None
        for m, a in zip(ip["metric"], ip["attributes"])
    ]
    ip = ip.sort_values("time_unix_nano", kind="stable")
    agg = (
        ip.groupby(["client_instance_id", "metric", "node"], dropna=False, sort=False)
        .agg(
            avg=("v", "mean"),
            sum=("v", "sum"),
            first=("v", "first"),
            last=("v", "last"),
            t0=("time_unix_nano", "min"),
            t1=("time_unix_nano", "max"),
            temporality=("temporality", "first"),
        )
        .reset_index()
    )
    delta = agg["temporality"] == "delta"
    agg["total"] = agg["sum"].where(delta, agg["last"])
    agg["after_first"] = (agg["sum"] - agg["first"]).where(delta, agg["last"] - agg["first"])
    insights = []
    lat = agg[agg["metric"].str.endswith(_LAT) & agg["node"].notna()].copy()
    grp = lat.groupby(["client_instance_id", "metric"])["avg"]
    lat["median"] = grp.transform(lambda s: s.sort_values().iloc[(len(s) - 1) // 2])
    lat["nodes"] = grp.transform("size")
    limit = (lat["median"] * opts.slow_node_ratio).clip(lower=opts.slow_node_min_ms)
    for r in lat[(lat["nodes"] >= 2) & (lat["avg"] >= limit)].itertuples():
        insights.append((r.client_instance_id, "slow_node"))
    for r in agg[agg["metric"].isin(list(_THROTTLE)) & (agg["avg"] > opts.throttle_ms)].itertuples():
        insights.append((r.client_instance_id, "throttled"))
    flat = agg[agg["node"].isna()].set_index(["client_instance_id", "metric"])
    for inst_id, m in flat.groupby(level=0):
        m = m.droplevel(0)

        def get(name, col, m=m):
            return m[col].get(name) if name in m.index else None

        rpr = get(_RPR, "avg")
        sent, req = get(_SEND, "total"), get(_REQ, "total")
        if rpr is None and req:
            rpr = sent / req if sent is not None else None
        if rpr is not None and rpr < opts.min_records_per_request:
            insights.append((inst_id, "small_batches"))
        if sent:
            if (get(_ERR, "total") or 0) / sent > opts.max_error_rate:
                insights.append((inst_id, "retries_errors"))
            if (get(_RETRY, "total") or 0) / sent > opts.max_retry_rate:
                insights.append((inst_id, "retries_errors"))
        conn = m[m.index.isin(list(_CONN))]
        if len(conn):
            span = max((conn["t1"].iloc[0] - conn["t0"].iloc[0]) / 60e9, 1.0)
            if conn["after_first"].iloc[0] / span > opts.max_connections_per_min:
                insights.append((inst_id, "connection_churn"))
        lag_last, lag_first = get(_LAG, "last"), get(_LAG, "first")
        if lag_last is not None and lag_last > opts.max_consumer_lag and lag_last > lag_first:
            insights.append((inst_id, "consumer_lag"))
        idle = get(_IDLE, "avg")
        if idle is not None and idle >= opts.poll_idle_ratio:
            insights.append((inst_id, "consumer_lag"))
    return conformance, insights
