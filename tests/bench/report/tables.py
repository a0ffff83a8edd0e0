"""The markdown tables of the report."""

from __future__ import annotations

from typing import Any

from tests.bench.common import fmt, stats
from tests.bench.report.targets import profile_table, targets_table


def summary_table(report: dict[str, Any]) -> str:
    lines = [
        "| op | conc | n | err | p50 ms | p95 ms | p99 ms | OpenViking-only p50 ms "
        "| engine overhead p50 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    raw = {r["concurrency"]: r for r in report.get("openviking_raw", [])}
    for level in report.get("concurrency", []):
        c = level["concurrency"]
        raw_ops = raw.get(c, {}).get("ops", {})
        for op, equiv in (("Assemble", "ov.assemble_equivalent"), ("AfterTurn", "ov.add_messages_batch")):
            s = level["ops"].get(op)
            if not s:
                continue
            ov = raw_ops.get(equiv, {}).get("p50_ms")
            overhead = s["p50_ms"] - ov if s["p50_ms"] is not None and ov is not None else None
            lines.append(
                f"| {op} | {c} | {s['count']} | {s['errors']} | {fmt(s['p50_ms'])} | {fmt(s['p95_ms'])} | "
                f"{fmt(s['p99_ms'])} | {fmt(ov)} | {fmt(overhead)} |"
            )
    for op, s in report.get("compaction", {}).get("ops", {}).items():
        lines.append(
            f"| {op} | 1 | {s['count']} | {s['errors']} | {fmt(s['p50_ms'])} | {fmt(s['p95_ms'])} | "
            f"{fmt(s['p99_ms'])} | — | — |"
        )
    growth = report.get("growth", {})
    if growth.get("afterturn"):
        s = growth["afterturn"]
        lines.append(
            f"| AfterTurn (1 session, {growth['turns_done']} turns) | 1 | {s['count']} | {s['errors']} | "
            f"{fmt(s['p50_ms'])} | {fmt(s['p95_ms'])} | {fmt(s['p99_ms'])} | — | — |"
        )
    out = [*targets_table(report)[1:], "", "\n".join(lines), ""]
    out.append(
        "| concurrency | turns | wall s | turns/s | RPC/s | OpenViking-only turns/s "
        "| OpenViking-only + turn index turns/s | assembled tok/turn | "
        "transcript tok/turn | assembled/transcript | turns over budget: assembled / transcript tok |"
    )
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    indexed = {r["concurrency"]: r for r in report.get("openviking_raw_indexed", [])}
    for level in report.get("concurrency", []):
        t = level.get("tokens", {})
        rawl = raw.get(level["concurrency"], {})
        out.append(
            f"| {level['concurrency']} | {level['turns']} | {fmt(level['wall_s'])} "
            f"| {fmt(level['turns_per_s'])} | {fmt(level['rpcs_per_s'])} | {fmt(rawl.get('turns_per_s'))} "
            f"| {fmt(indexed.get(level['concurrency'], {}).get('turns_per_s'))} "
            f"| {fmt(t.get('assembled_tokens_mean'))} | "
            f"{fmt(t.get('transcript_tokens_mean'))} | {fmt(t.get('assembled_over_transcript_mean'))} | "
            f"{t.get('turns_transcript_over_budget', 0)}: "
            f"{fmt(t.get('over_budget_assembled_tokens_mean'))} / "
            f"{fmt(t.get('over_budget_transcript_tokens_mean'))} |"
        )
    out += (
        cpu_table(report)
        + lag_table(report)
        + growth_table(report)
        + assembly_tables(report)
        + profile_table(report)
        + compaction_table(report)
    )
    wrapped = report.get("wrapped", [])
    if wrapped:
        out += [
            "",
            "| engine spans: phase | RPC | n | server p50 ms | of which OpenViking p50 ms "
            "| engine own p50 ms | engine own p95 ms | before the first OpenViking call p50 ms "
            "| after the last p50 ms | OpenViking calls/RPC |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for w in wrapped:
            out.append(
                f"| {w['phase']} | {w['method']} | {w['count']} | {fmt(w['server_p50_ms'])} "
                f"| {fmt(w['openviking_p50_ms'])} | {fmt(w['engine_own_p50_ms'])} "
                f"| {fmt(w['engine_own_p95_ms'])} | {fmt(w.get('before_openviking_p50_ms'))} "
                f"| {fmt(w.get('after_openviking_p50_ms'))} | {fmt(w['openviking_calls_mean'])} |"
            )
    recall = report.get("recall", {}).get("hit_rate", {})
    if recall:
        out += [
            "",
            "| planted-fact hit rate | all | stored with StoreMemory | only said in conversation |",
            "|---|---:|---:|---:|",
        ]
        for method, parts in recall.items():
            cells = [
                f"{fmt(parts[k]['rate'])} ({parts[k]['hits']}/{parts[k]['n']})"
                if parts[k]["rate"] is not None
                else "—"
                for k in ("all", "stored", "conversation_only")
            ]
            out.append(f"| {method} | " + " | ".join(cells) + " |")
    rss = report.get("peak_rss", {})
    if rss:
        out += ["", "| process | peak RSS MB (VmHWM) | children peak RSS MB |", "|---|---:|---:|"]
        for name, r in rss.items():
            out.append(f"| {name} | {fmt(r.get('peak_rss_mb'))} | {fmt(r.get('children_peak_rss_mb'))} |")
    return "\n".join(out)


def _pp(s: dict[str, Any] | None) -> str:
    """ "p50 / p99" of a stats dict."""
    if not s or s.get("p50_ms") is None:
        return "—"
    return f"{fmt(s['p50_ms'])} / {fmt(s['p99_ms'])}"


def growth_table(report: dict[str, Any]) -> list[str]:
    growth, raw = report.get("growth", {}), report.get("growth_raw", {})
    if not growth:
        return []
    el = growth.get("early_late", {})
    early = el.get("early", {}).get("turns", "first 100")
    late = el.get("late", {}).get("turns", "last 100")
    lines = [
        "",
        f"| capture: one session grown to {growth['turns_done']} turns "
        f"({growth['transcript_tokens']} tokens) | calls | err | wall s | turns/s | p50 ms | p95 ms | p99 ms "
        f"| turns {early} p50 / p99 ms | turns {late} p50 / p99 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    s = growth["afterturn"]
    lines.append(
        f"| engine AfterTurn (whole transcript sent, 1 replica each) | {s['count']} | {s['errors']} "
        f"| {fmt(growth['wall_s'])} | {fmt(growth['turns_per_s'])} | {fmt(s['p50_ms'])} | {fmt(s['p95_ms'])} "
        f"| {fmt(s['p99_ms'])} | {_pp(el.get('early'))} | {_pp(el.get('late'))} |"
    )
    if raw:
        for op, label, key in (
            ("ov.add_message", "OpenViking add-message (httpx, 1 message/call)", "add_message_early_late"),
            (
                "ov.turn_append",
                "OpenViking per turn (sum of its add-message calls)",
                "turn_append_early_late",
            ),
        ):
            r = raw["ops"].get(op)
            if not r:
                continue
            rel = raw.get(key, {})
            per_s = raw["turns_per_s"] if op == "ov.turn_append" else None
            lines.append(
                f"| {label} | {r['count']} | {r['errors']} | {fmt(raw['wall_s']) if per_s else '—'} "
                f"| {fmt(per_s)} | {fmt(r['p50_ms'])} | {fmt(r['p95_ms'])} | {fmt(r['p99_ms'])} "
                f"| {_pp(rel.get('early'))} | {_pp(rel.get('late'))} |"
            )
    return lines


def _wrapped(report: dict[str, Any], phase: str, method: str) -> dict[str, Any]:
    for w in report.get("wrapped", []):
        if w["phase"] == phase and w["method"] == method:
            return w
    return {}


def assembly_tables(report: dict[str, Any]) -> list[str]:
    asm = report.get("assembly", {})
    if not asm.get("levels"):
        return []
    seed = asm.get("seed", {})
    lines = [
        "",
        f"| Assemble: {seed.get('memories')} memories, {asm['ingest']['turns']}-turn session "
        f"({asm['transcript_tokens']} tokens), budget {asm['budget']} | n | err | p50 ms | p95 ms | p99 ms "
        "| server p50 ms | OpenViking p50 / p95 ms | engine own p50 / p95 ms | OpenViking calls/RPC "
        "| assembled tok | transcript tok |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for level in asm["levels"]:
        s = level["ops"].get("Assemble", stats([]))
        w = _wrapped(report, f"assembly@{level['concurrency']}", "Assemble")
        lines.append(
            f"| {level['concurrency']} concurrent callers | {s['count']} | {s['errors']} "
            f"| {fmt(s['p50_ms'])} | {fmt(s['p95_ms'])} | {fmt(s['p99_ms'])} | {fmt(w.get('server_p50_ms'))} "
            f"| {fmt(w.get('openviking_p50_ms'))} / {fmt(w.get('openviking_p95_ms'))} "
            f"| {fmt(w.get('engine_own_p50_ms'))} / {fmt(w.get('engine_own_p95_ms'))} "
            f"| {fmt(w.get('openviking_calls_mean'))} | {fmt(level['assembled_tokens_mean'])} "
            f"| {fmt(level['transcript_tokens'])} |"
        )
    routes = report.get("openviking_routes", {})
    rows = []
    for level in asm["levels"]:
        r = routes.get(f"assembly@{level['concurrency']}", {})
        for route, v in r.get("routes", {}).items():
            rows.append(
                f"| {level['concurrency']} | `{route}` | {fmt(v['per_rpc'])} | {fmt(v['p50_ms'])} "
                f"| {fmt(v['p95_ms'])} | {fmt(v['p99_ms'])} |"
            )
    if rows:
        lines += [
            "",
            "| OpenViking calls inside Assemble: callers | route | calls/RPC | p50 ms | p95 ms | p99 ms |",
            "|---:|---|---:|---:|---:|---:|",
            *rows,
        ]
    return lines


def _commit_span(report: dict[str, Any], label: str | None) -> dict[str, Any]:
    if not label:
        return {}
    routes = report.get("openviking_routes", {}).get(label, {}).get("routes", {})
    for route, v in routes.items():
        if route.startswith("POST ") and route.endswith("/commit"):
            return v
    return {}


def compaction_table(report: dict[str, Any]) -> list[str]:
    comp = report.get("compaction", {})
    if not comp.get("sizes"):
        return []
    lines = [
        "",
        "| Compact: turns | tokens before → after | Compact RPC ms (sync) | OpenViking commit ms (in sync) "
        "| Compact RPC ms (background=true) | OpenViking commit ms (in background) "
        "| to COMPLETED ms (background) | checkpoint (sync / background) |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for size in comp["sizes"]:
        sync, bg = size["sync"], size["background"]
        cs, cb = _commit_span(report, sync.get("span_label")), _commit_span(report, bg.get("span_label"))
        lines.append(
            f"| {size['turns']} | {fmt(sync.get('tokens_before'))} → {fmt(sync.get('tokens_after'))} "
            f"| {fmt(sync.get('compact_ms'))} | {fmt(cs.get('p50_ms'))} | {fmt(bg.get('compact_ms'))} "
            f"| {fmt(cb.get('p50_ms'))} | {fmt(bg.get('to_completed_ms'))} "
            f"| {sync.get('status', sync.get('compact_error', '—'))} / "
            f"{bg.get('status', bg.get('compact_error', '—'))} |"
        )
    ex = comp.get("ops", {}).get("ExpandMemory")
    if ex:
        info = comp.get("expand", {})
        lines += [
            "",
            "| ExpandMemory | n | err | sessions | p50 ms | p95 ms | p99 ms | turns returned (mean) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
            f"| limit 2/4/6, queries from the sessions' turns | {ex['count']} | {ex['errors']} "
            f"| {info.get('sessions')} | {fmt(ex['p50_ms'])} | {fmt(ex['p95_ms'])} | {fmt(ex['p99_ms'])} "
            f"| {fmt(info.get('turns_returned_mean'))} |",
        ]
    return lines


CPU_PARTS = (
    "engine:capture",
    "engine:assembly",
    "engine:compaction",
    "openviking",
    "embeddings",
    "bench client",
)


def cpu_table(report: dict[str, Any]) -> list[str]:
    """CPU ms per turn by process: the engine's traffic beside the OpenViking-only equivalent."""
    rows = [("engine", level) for level in report.get("concurrency", [])]
    rows += [("OpenViking only", level) for level in report.get("openviking_raw", [])]
    rows += [("OpenViking only + turn index", level) for level in report.get("openviking_raw_indexed", [])]
    rows = [(who, level) for who, level in rows if level.get("cpu_ms_per_turn")]
    if not rows:
        return []
    lines = [
        "",
        "CPU ms per turn by process (background work included: read once OpenViking and the "
        "embedder were quiet again; bench client: the bench process alone, its span receiver included):",
        "",
        "| traffic | conc | " + " | ".join(CPU_PARTS) + " | total |",
        "|---|---:|" + "---:|" * (len(CPU_PARTS) + 1),
    ]
    for who, level in rows:
        cpu = level["cpu_ms_per_turn"]
        cells = " | ".join(fmt(cpu.get(part)) for part in CPU_PARTS)
        lines.append(f"| {who} | {level['concurrency']} | {cells} | {fmt(cpu.get('total'))} |")
    return lines + calls_table(report)


def lag_table(report: dict[str, Any]) -> list[str]:
    """Turn-index lag: AfterTurn's answer to the exchange findable, in a burst and after it."""
    lag = report.get("index_lag")
    if not lag:
        return []
    lines = [
        "",
        f"| turn-index lag (AfterTurn answered → findable by `find`), batch window "
        f"{lag['coalesce_ms']} ms | turns sampled | not found in 60 s (of which not written) "
        "| of those, found / not written 150 s after their turn | RPC errors "
        "| p50 s | p95 s | p99 s | max s | p50 s of the last third |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    burst = (
        f"burst: {lag['burst_turns']} turns at {lag['burst_callers']} callers ({fmt(lag['burst_wall_s'])} s)"
    )
    for label, part in (
        (burst, lag["burst"]),
        (
            f"right after it: {lag['after_burst_sessions']} sessions in turn, 0.5 s between turns",
            lag["after_burst"],
        ),
    ):
        lines.append(
            f"| {label} | {part['sampled']} | {part['not_found']} ({part['not_written']}) "
            f"| {part.get('found_after_recovery', '—')} / {part.get('not_written_after_recovery', '—')} "
            f"| {part['rpc_errors']} "
            f"| {fmt(part['p50_s'])} | {fmt(part['p95_s'])} | {fmt(part['p99_s'])} | {fmt(part['max_s'])} "
            f"| {fmt(part.get('last_p50_s'))} |"
        )
    return lines


def calls_table(report: dict[str, Any]) -> list[str]:
    """Every OpenViking call the services made per turn in the traffic phases, by route."""
    windows = report.get("openviking_calls_per_turn", {})
    if not windows:
        return []
    labels = list(windows)
    routes = [r for r in next(iter(windows.values())) if r != "all"]
    routes += sorted({r for w in windows.values() for r in w if r != "all" and r not in routes})
    lines = [
        "",
        "OpenViking calls per turn made by the services in the traffic phases (inside an RPC or after "
        "its answer; from their spans):",
        "",
        "| route | " + " | ".join(labels) + " |",
        "|---|" + "---:|" * len(labels),
    ]
    for route in [*routes, "all"]:
        cells = " | ".join(fmt(windows[label].get(route)) for label in labels)
        lines.append(f"| {route} | {cells} |")
    return lines
