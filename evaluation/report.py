"""The report: a terminal table (rich), `report.md` and `report.json`."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .arms import Arm
from .driver import Run, Settings
from .metrics import arm_totals, run_metrics

COLUMNS = [
    ("arm", "arm"),
    ("reqs", "requests"),
    ("errors", "errors"),
    ("warnings", "warnings"),
    ("boundaries", "boundaries"),
    ("read share", "cache_read_share"),
    ("waste", "cache_waste"),
    ("cost", "cost"),
    ("vs none", "vs_none"),
    ("evidence line miss", "evidence_line_miss"),
    ("evidence token miss", "evidence_token_miss"),
    ("over window", "over_window"),
    ("peak/limit", "peak_over_limit"),
    ("orphans", "orphan_tool_results"),
    ("unanswered", "unanswered_tool_calls"),
    ("sys hashes", "max_system_prompt_hashes"),
    ("facts end", "facts_final"),
    ("facts probes", "facts_probes"),
    ("tail kept", "tail_retention"),
    ("est err", "estimator_error_mean"),
    ("ms p50", "ms_p50"),
    ("ms p90", "ms_p90"),
]
PERCENT = {"evidence_line_miss", "evidence_token_miss"}
PERCENT |= {"cache_read_share", "facts_final", "facts_probes", "tail_retention", "peak_over_limit"}
SIGNED = {"vs_none", "estimator_error_mean"}


def fmt(key: str, value: Any) -> str:
    """One table cell."""
    if value is None:
        return "n/a"
    if key in PERCENT:
        return f"{value:.0%}"
    if key in SIGNED:
        return f"{value:+.0%}"
    if key in ("ms_p50", "ms_p90"):
        return f"{value:.2f}"
    if isinstance(value, float):
        return f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def build(arms: list[Arm], runs: list[Run], settings: Settings, engines: dict[str, str]) -> dict[str, Any]:
    """Everything the report says, as plain data."""
    rows = [run_metrics(r) for r in runs]
    totals = {a.name: arm_totals(_of(rows, a.name), [r for r in runs if r.arm == a.name]) for a in arms}
    base = totals.get("none", {}).get("cost")
    for t in totals.values():
        t["vs_none"] = (t["cost"] / base - 1) if base and t["available"] else None
    counter = runs[0].counter if runs else "n/a"
    return {
        "token_counter": counter,
        "settings": asdict(settings),
        "engines": engines,
        "estimate_source": sorted({r.estimate_source for r in runs if r.estimate_source}),
        "arms": {a.name: {"engine": a.engine, "config": a.config, "notes": a.notes} for a in arms},
        "totals": totals,
        "rows": rows,
        "series": {f"{r.arm}|{r.workload}": _series(r) for r in runs if r.available},
        "windows": {r.workload: asdict(r.window) for r in runs},
    }


def _of(rows: list[dict], arm: str) -> list[dict]:
    return [r for r in rows if r["arm"] == arm]


def _series(run: Run) -> dict[str, list]:
    ok = [q for q in run.requests if q.error is None]
    return {
        "index": [q.index for q in ok],
        "true_tokens": [q.true_tokens for q in ok],
        "boundary": [q.boundary for q in ok],
        "cost": [q.cost for q in ok],
    }


def table_cells(data: dict[str, Any]) -> list[list[str]]:
    """The per-arm table as strings, one list per arm."""
    out = []
    for name, t in data["totals"].items():
        if not t["available"]:
            out.append([name] + ["-"] * (len(COLUMNS) - 1))
            continue
        out.append([name] + [fmt(key, t.get(key)) for _, key in COLUMNS[1:]])
    return out


def print_table(data: dict[str, Any]) -> None:
    """The per-arm table in the terminal."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"context managers on {_n_workloads(data)} workloads ({data['token_counter']})")
    width = max((len(n) for n in data["totals"]), default=3)
    table.add_column("arm", no_wrap=True, min_width=width)
    for head, _ in COLUMNS[1:]:
        table.add_column(head, justify="right")
    for cells in table_cells(data):
        table.add_row(*cells)
    console = Console()
    if not console.is_terminal:
        console = Console(width=220)
    console.print(table)
    for name, t in data["totals"].items():
        if not t["available"]:
            console.print(f"{name}: not available ({t['reason']})")


def _n_workloads(data: dict[str, Any]) -> int:
    return len({r["workload"] for r in data["rows"]})


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def write(data: dict[str, Any], out: Path, plots: list[str]) -> tuple[Path, Path]:
    """Write report.json and report.md into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / "report.json", out / "report.md"
    json_path.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")
    md_path.write_text(_markdown(data, plots), encoding="utf-8")
    return json_path, md_path


def _markdown(data: dict[str, Any], plots: list[str]) -> str:
    from .report_text import explain

    parts = ["# Evaluation report", "", *explain(data), "", "## Per arm (pooled over workloads)", ""]
    parts.append(markdown_table([h for h, _ in COLUMNS], table_cells(data)))
    parts += ["", "A row of '-' is an arm that was not available; the reason is listed above."]
    parts += ["", "## Per arm and workload", "", _per_workload(data), ""]
    parts += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    return "\n".join(parts)


def _per_workload(data: dict[str, Any]) -> str:
    keys = ["requests", "errors", "boundaries", "cache_read_share", "cost", "over_window", "peak_true_tokens"]
    keys += ["window_limit", "facts_final", "tail_retention", "estimator_error_mean"]
    rows = [[r["arm"], r["workload"]] + [fmt(k, r[k]) for k in keys] for r in data["rows"] if r["available"]]
    return markdown_table(["arm", "workload", *keys], rows)
