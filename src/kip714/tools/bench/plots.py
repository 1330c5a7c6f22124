"""``kip714 bench --plot DIR``: PNG plots of how each cost grows with the work (payload size, live
instances, batch size) next to the peer's curve, from the curves a run kept (matplotlib, Agg)."""

from __future__ import annotations

import pathlib

import kip714

from .harness import Bench

__all__ = ["write_plots"]


def write_plots(bench: Bench, out_dir: pathlib.Path) -> list[pathlib.Path]:
    """PNG plots of the curves that were measured; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    c = bench.curves
    subtitle = f"kip714 {kip714.__version__}, {'--quick' if bench.quick else 'full run'}, median of interleaved rounds"

    def save(fig, name):
        fig.suptitle(fig._suptitle.get_text() if fig._suptitle else "", fontsize=11)
        fig.text(0.99, 0.005, subtitle, ha="right", va="bottom", fontsize=7, color="grey")
        fig.tight_layout(rect=(0, 0.02, 1, 1))
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)

    def line_plot(ax, cv, styles=("o-", "s--", "^:", "d-.")):
        for (label, ys), st in zip(cv["series"].items(), styles):
            ax.plot(cv["x"][: len(ys)], ys, st, label=label)
        ax.set_xscale("log" if cv.get("logx", True) else "linear")
        ax.set_yscale("log" if cv.get("logy", True) else "linear")
        ax.set_xlabel(cv["xlabel"])
        ax.set_ylabel(cv["ylabel"])
        ax.set_title(cv["title"], fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)

    if "protocol_decode" in c or "protocol_encode" in c:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, name in zip(axes, ("protocol_decode", "protocol_encode")):
            if name in c:
                line_plot(ax, c[name])
            else:
                ax.set_visible(False)
        fig.suptitle("Kafka wire codec: kip714 vs kio")
        save(fig, "protocol")

    if "codec" in c:
        per = c["codec"]["per_codec"]
        fig, axes = plt.subplots(1, len(per), figsize=(3.2 * len(per), 3.8), squeeze=False)
        for ax, (codec, cv) in zip(axes[0], per.items()):
            ax.plot(cv["x"], cv["kip714"], "o-", label="kip714.decompress")
            ax.plot(cv["x"], cv["direct"], "s--", label="direct call" + (" (raw block)" if "xerial" in codec else ""))
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(codec, fontsize=9)
            ax.set_xlabel("decompressed bytes")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        axes[0][0].set_ylabel("time per call (ns)")
        fig.suptitle(c["codec"]["title"])
        save(fig, "codec")

    if "crc" in c:
        fig, ax = plt.subplots(figsize=(6, 4))
        line_plot(ax, c["crc"])
        fig.suptitle("CRC32C")
        save(fig, "crc")

    if "limiter" in c:
        cv = c["limiter"]
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        line_plot(a1, cv)
        a1.axhline(cv["goal_rate"], color="red", lw=0.8, ls=":", label="goal 5 M/s")
        a1.legend(fontsize=7)
        a2.plot(cv["x"], cv["bytes_per_instance"], "o-", label="InstanceTable.memory_bytes() / n")
        a2.axhline(cv["goal_bytes"], color="red", lw=0.8, ls=":", label="goal ≤ 128 B")
        a2.set_xscale("log")
        a2.set_ylim(0, max(max(cv["bytes_per_instance"]), cv["goal_bytes"]) * 1.3)
        a2.set_xlabel("live instances")
        a2.set_ylabel("bytes per live instance")
        a2.set_title("Native memory per live instance", fontsize=9)
        a2.grid(True, alpha=0.3)
        a2.legend(fontsize=7)
        fig.suptitle("Limiter (InstanceTable)")
        save(fig, "limiter")

    if "batch" in c:
        fig, ax = plt.subplots(figsize=(6, 4))
        line_plot(ax, c["batch"])
        fig.suptitle("Limiter batch-size scaling")
        save(fig, "batch")

    if "broker" in c:
        cv = c["broker"]
        fig, ax = plt.subplots(figsize=(6, 4))
        scaled = dict(
            cv,
            series={k: [v / 1e6 for v in vs] for k, vs in cv["series"].items()},
            ylabel="million decisions per second",
        )
        line_plot(ax, scaled)
        ax.axhline(cv["goal_rate"] / 1e6, color="red", lw=0.8, ls=":", label="goal 1 M/s")
        ax.set_ylim(0, max(max(scaled["series"]["TelemetryBroker.handle"]), cv["goal_rate"] / 1e6) * 1.3)
        ax.legend(fontsize=7)
        fig.suptitle("Broker decisions")
        save(fig, "broker")

    if "otlp" in c:
        cv = c["otlp"]
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        line_plot(a1, cv)
        ys = list(cv["series"].values())
        a2.plot(cv["x"], [p / k for k, p in zip(ys[0], ys[1])], "o-", label="speed-up (protobuf / kip714)")
        a2.axhline(8, color="red", lw=0.8, ls=":", label="goal 8×")
        a2.set_xscale("log")
        a2.set_ylim(0, None)
        a2.set_xlabel("payload bytes")
        a2.set_ylabel("ratio")
        a2.set_title("Speed-up by payload size", fontsize=9)
        a2.grid(True, alpha=0.3)
        a2.legend(fontsize=7)
        fig.suptitle("OTLP MetricsData → rows")
        save(fig, "otlp")

    if "proxy_throughput" in c or "proxy_latency" in c:
        names = [n for n in ("proxy_throughput", "proxy_latency") if n in c]
        fig, axes = plt.subplots(1, len(names), figsize=(6 * len(names), 4), squeeze=False)
        for ax, name in zip(axes[0], names):
            cv = c[name]
            width = 0.8 / len(cv["series"])
            for i, (label, ys) in enumerate(cv["series"].items()):
                xs = [j + i * width for j in range(len(ys))]
                ax.bar(xs, ys, width, label=label)
            ax.set_xticks([j + width * (len(cv["series"]) - 1) / 2 for j in range(len(cv["x"]))])
            ax.set_xticklabels(cv["x"], fontsize=7, rotation=15)
            ax.set_ylabel(cv["ylabel"])
            ax.set_title(cv["title"], fontsize=9)
            ax.grid(True, axis="y", alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle("kip714 proxy vs direct (librdkafka mock cluster)")
        save(fig, "proxy")

    if "endpoint_floor" in c:
        cv = c["endpoint_floor"]
        ratios = cv["series"]["endpoint"]
        fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(ratios) + 1.2))
        ys = list(range(len(ratios)))[::-1]
        colours = [
            "tab:grey" if g is None else "tab:green" if r <= g else "tab:red" for r, g in zip(ratios, cv["goals"])
        ]
        ax.barh(ys, ratios, color=colours)
        for y, r, g in zip(ys, ratios, cv["goals"]):
            ax.text(r, y, f" {r:.2f}×", va="center", fontsize=8)
            if g is not None:
                ax.plot([g, g], [y - 0.4, y + 0.4], color="black", lw=1.5)
        ax.axvline(1.0, color="black", lw=0.8, ls=":")
        ax.set_yticks(ys)
        ax.set_yticklabels(cv["x"], fontsize=8)
        ax.set_xlabel(cv["ylabel"] + " (black ticks: the goals)")
        ax.set_xlim(0, max([*ratios, *(g for g in cv["goals"] if g is not None)]) * 1.15)
        ax.set_title(cv["title"], fontsize=9)
        ax.grid(True, axis="x", alpha=0.3)
        fig.suptitle("Endpoints against the zstd floor")
        save(fig, "endpoint_floor")

    if "spark" in c:
        cv = c["spark"]
        fig, ax = plt.subplots(figsize=(7.5, 3.5))
        labels, vals = [], []
        run_labels = {
            "kip714": "decode_payloads().points",
            "kip714-combined": "decode_payloads().combined",
            "peer": "mapInArrow + protobuf/Python",
        }
        for name, runs in cv["runs_s"].items():
            best = min(runs[1:]) if len(runs) > 1 else runs[0]
            labels.append(run_labels.get(name, name))
            vals.append(cv["points"] / best / 1e3)
        ax.barh(labels, vals, color=["tab:blue", "tab:orange", "tab:cyan"][: len(vals)])
        for i, v in enumerate(vals):
            ax.text(v, i, f" {v:,.0f}", va="center", fontsize=8)
        ax.set_xlabel("thousand points per second (best run after the first)")
        ax.set_xlim(0, max(vals) * 1.15)
        ax.set_title(cv["title"], fontsize=9)
        fig.suptitle("Spark bulk decode")
        save(fig, "spark")

    if "pipeline_scale" in c:
        cv = c["pipeline_scale"]
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
        for (label, ys), st in zip(cv["series"].items(), ("o-", "s--")):
            pts = [(x, y) for x, y in zip(cv["x"], ys) if y]
            if pts:
                a1.plot(*zip(*pts), st, label=label)
        a1.set_xscale("log")
        a1.set_yscale("log")
        a1.axhline(120, color="red", lw=0.8, ls=":", label="goal: 1e7 points ≤ 2 min")
        a1.set_xlabel("data points")
        a1.set_ylabel("seconds (whole job, session start excluded)")
        a1.set_title(cv["title"], fontsize=9)
        a1.grid(True, which="both", alpha=0.3)
        a1.legend(fontsize=7)
        for (label, ys), st in zip(cv["memory"].items(), ("o-", "o:", "^-", "s--", "v--")):
            pts = [(x, y) for x, y in zip(cv["x"], ys) if y]
            if pts:
                a2.plot(*zip(*pts), st, label=label)
        a2.set_xscale("log")
        a2.set_ylim(0, None)
        a2.set_xlabel("data points")
        a2.set_ylabel("MiB: peak resident (VmHWM); heap after GC")
        a2.set_title("Peak memory by input size", fontsize=9)
        a2.grid(True, alpha=0.3)
        a2.legend(fontsize=7)
        fig.suptitle("Pipeline at fleet scale")
        save(fig, "pipeline_scale")
    return written
