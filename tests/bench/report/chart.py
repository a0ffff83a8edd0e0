# ruff: noqa: PLR0915
"""The report's chart (when matplotlib is installed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def write_chart(report: dict[str, Any], path: Path) -> str | None:
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return "matplotlib not installed; no chart"
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    levels = report.get("concurrency", [])
    raw = {r["concurrency"]: r for r in report.get("openviking_raw", [])}
    ax = axes[0][0]
    width = 0.2
    for i, level in enumerate(levels):
        for j, (op, equiv) in enumerate(
            (("Assemble", "ov.assemble_equivalent"), ("AfterTurn", "ov.add_messages_batch"))
        ):
            s = level["ops"].get(op, {})
            ov = raw.get(level["concurrency"], {}).get("ops", {}).get(equiv, {})
            x = i + (j - 0.5) * 2 * width
            if s.get("p50_ms") is not None:
                ax.bar(
                    x - width / 2,
                    s["p95_ms"],
                    width,
                    color=("#9ecae1", "#fdae6b")[j],
                    label=f"{op} p95" if i == 0 else None,
                )
                ax.bar(
                    x - width / 2,
                    s["p50_ms"],
                    width,
                    color=("#3182bd", "#e6550d")[j],
                    label=f"{op} p50" if i == 0 else None,
                )
            if ov.get("p50_ms") is not None:
                ax.bar(
                    x + width / 2,
                    ov["p50_ms"],
                    width,
                    color="#999999",
                    label="OpenViking-only p50" if i == 0 and j == 0 else None,
                )
    ax.set_xticks(range(len(levels)), [f"{lv['concurrency']} sessions" for lv in levels])
    ax.set_ylabel("ms")
    ax.set_title("Latency by concurrency (engine vs OpenViking-only)")
    ax.legend(fontsize=7)
    ax = axes[0][1]
    xs = [lv["concurrency"] for lv in levels]
    ax.plot(xs, [lv["turns_per_s"] for lv in levels], "o-", label="engine turns/s")
    ax.plot(xs, [raw.get(x, {}).get("turns_per_s") or 0 for x in xs], "s--", label="OpenViking-only turns/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent sessions")
    ax.set_title("Throughput")
    ax.legend(fontsize=7)
    ax = axes[1][0]
    points = report.get("growth", {}).get("points", [])
    if points:
        ax.plot([p[0] for p in points], [p[1] for p in points], ".", markersize=3)
        ax.set_xlabel("turn")
        ax.set_ylabel("AfterTurn ms")
        ax2 = ax.twinx()
        ax2.plot([p[0] for p in points], [p[2] for p in points], "-", color="#999999")
        ax2.set_ylabel("transcript tokens")
    ax.set_title("Single-session growth: AfterTurn latency")
    ax = axes[1][1]
    recall = report.get("recall", {}).get("hit_rate", {})
    names = list(recall)
    for k, key in enumerate(("stored", "conversation_only")):
        vals = [recall[n][key]["rate"] or 0 for n in names]
        ax.bar([i + (k - 0.5) * 0.35 for i in range(len(names))], vals, 0.35, label=key)
    ax.set_xticks(range(len(names)), [n.replace("_", "\n") for n in names], fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_title("Planted-fact hit rate")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return None
