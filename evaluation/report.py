"""The report: a terminal table that fits the terminal (rich), `report.md` and `report.json`."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from . import cli
from .arms import Arm
from .driver import Run, Settings
from .metrics import arm_totals, run_metrics
from .recall_probe import QUERY_KINDS
from .wording import plural

DEFAULT_ARM = "progressive"
TERMINAL_WIDTH = 80  # no terminal line is wider
REFERENCE_ARM = "none"
# The few columns that decide a choice: shown in the terminal and first in report.md.
KEY_COLUMNS = [
    ("configuration", "arm"),
    ("cost vs none", "vs_none"),
    ("evidence line miss", "evidence_line_miss"),
    ("evidence token miss", "evidence_token_miss"),
    ("boundaries", "boundaries"),
    ("over window", "over_window"),
    ("facts kept", "facts_final"),
    ("corrections kept", "corrections"),
    ("invalid", "invalid_views"),
]
TERMINAL_HEADS = [
    "cost\nvs none",
    "miss\nline",
    "miss\ntoken",
    "bound-\naries",
    "over\nwindow",
    "facts\nkept",
    "correc-\ntions",
    "invalid",
]
NAME_HEAD = "config-\nuration"
DROP_ORDER = [2, 5, 6, 3]  # on a narrow terminal: token miss, facts, corrections, then boundaries go first
COLUMNS = [
    ("configuration", "arm"),
    ("reqs", "requests"),
    ("errors", "errors"),
    ("warnings", "warnings"),
    ("boundaries", "boundaries"),
    ("read share", "cache_read_share"),
    ("waste", "cache_waste"),
    ("cost", "cost"),
    ("vs none", "vs_none"),
    ("vs default", "vs_default"),
    ("evidence line miss", "evidence_line_miss"),
    ("evidence token miss", "evidence_token_miss"),
    ("recall: exact word", "recall_exact"),
    ("recall: word of the line", "recall_line_cue"),
    ("recall: call", "recall_call_cue"),
    ("recall: 3 words", "recall_three_words"),
    ("over window", "over_window"),
    ("peak/limit", "peak_over_limit"),
    ("orphans", "orphan_tool_results"),
    ("unanswered", "unanswered_tool_calls"),
    ("sys hashes", "max_system_prompt_hashes"),
    ("facts end", "facts_final"),
    ("facts probes", "facts_probes"),
    ("corrections kept", "corrections"),
    ("scenario cost vs none", "scenario_vs_none"),
    ("tail kept", "tail_retention"),
    ("est err", "estimator_error_mean"),
    ("ms p50", "ms_p50"),
    ("ms p90", "ms_p90"),
]
PERCENT = {"cache_read_share", "facts_final", "facts_probes", "tail_retention", "peak_over_limit", "recoverable_miss"}
PERCENT |= {f"recall_{kind}" for kind in QUERY_KINDS}
PERCENT_1 = {"evidence_line_miss", "evidence_token_miss"}
SIGNED = {"vs_none", "vs_default", "scenario_vs_none", "estimator_error_mean"}


def fmt(key: str, value: Any) -> str:
    """One table cell."""
    if value is None:
        return "n/a"
    if key in PERCENT_1:
        return f"{value:.1%}"
    if key in PERCENT:
        return f"{value:.0%}"
    if key in SIGNED:
        return "0%" if round(value * 100) == 0 else f"{value:+.0%}"
    if key in ("ms_p50", "ms_p90"):
        return f"{value:.2f}"
    if isinstance(value, float):
        return f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def build(arms: list[Arm], runs: list[Run], settings: Settings, engines: dict[str, str]) -> dict[str, Any]:
    """Everything the report says, as plain data."""
    rows = [run_metrics(r) for r in runs]
    totals = {a.name: arm_totals(_of(rows, a.name), [r for r in runs if r.arm == a.name]) for a in arms}
    _relative(totals, "cost", "vs_none", REFERENCE_ARM)
    _relative(totals, "cost", "vs_default", DEFAULT_ARM)
    _relative(totals, "scenario_cost", "scenario_vs_none", REFERENCE_ARM)
    floor = over_window_floor(totals, rows)
    for t in totals.values():
        t["valid"] = valid(t, floor["requests"])
        total = t.get("corrections_total") or 0
        t["corrections"] = f"{t['corrections_kept']}/{total}" if total and t["available"] else None
        t.update({f"recall_{kind}": fig["rate"] for kind, fig in (t.get("recall_by_query") or {}).items()})
    counter = runs[0].counter if runs else "n/a"
    return {
        "token_counter": counter,
        "settings": asdict(settings),
        "engines": engines,
        "estimate_source": sorted({r.estimate_source for r in runs if r.estimate_source}),
        "arms": {a.name: {"engine": a.engine, "config": a.config, "notes": a.notes} for a in arms},
        "totals": totals,
        "frontier": frontier(totals),
        "over_window_floor": floor,
        "workloads": {
            "real": sorted({r.workload for r in runs if not r.synthetic}),
            "scenarios": sorted({r.workload for r in runs if r.synthetic}),
        },
        "rows": rows,
        "series": {f"{r.arm}|{r.workload}": _series(r) for r in runs if r.available},
        "windows": {r.workload: asdict(r.window) for r in runs},
    }


def _relative(totals: dict[str, dict], key: str, out: str, base_arm: str) -> None:
    base = totals.get(base_arm, {}).get(key)
    for t in totals.values():
        t[out] = (t[key] / base - 1) if base and t["available"] and t.get(key) is not None else None


def valid(t: dict[str, Any], over_floor: int = 0) -> bool:
    """An arm a user could ship: it ran, sent no broken view and no more requests over the window than
    the floor every compacting arm shares (a system prompt larger than the window is no arm's fault)."""
    if "valid" in t:
        return bool(t["valid"])
    return bool(t["available"]) and t["over_window"] <= over_floor and t["invalid_views"] == 0


def over_window_floor(totals: dict[str, dict[str, Any]], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Requests over the window that every compacting arm of this module sends, and the workloads where
    they happen (a peer's own requests over the window are held against it, not taken as the floor)."""
    from .arms import PEERS

    arms = [n for n, t in totals.items() if t["available"] and n != REFERENCE_ARM and n not in PEERS]
    if not arms:
        return {"requests": 0, "workloads": []}
    over = {n: {r["workload"] for r in rows if r["arm"] == n and r["available"] and r["over_window"]} for n in arms}
    return {
        "requests": min(totals[n]["over_window"] for n in arms),
        "workloads": sorted(set.intersection(*over.values())),
    }


def frontier(totals: dict[str, dict[str, Any]]) -> list[str]:
    """Valid arms that no other valid arm beats on both cost and evidence line miss (cheapest first)."""
    pts = {n: (t["cost"], t["evidence_line_miss"]) for n, t in totals.items()}
    pts = {n: p for n, p in pts.items() if valid(totals[n]) and p[1] is not None}

    def beaten(n: str) -> bool:
        c, m = pts[n]
        return any(c2 <= c and m2 <= m and (c2, m2) != (c, m) for c2, m2 in pts.values())

    return sorted((n for n in pts if not beaten(n)), key=lambda n: pts[n])


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


def table_cells(data: dict[str, Any], columns: list[tuple[str, str]] = COLUMNS) -> list[list[str]]:
    """The per-arm table as strings, one list per available arm."""
    return [
        [name] + [fmt(key, t.get(key)) for _, key in columns[1:]]
        for name, t in data["totals"].items()
        if t["available"]
    ]


def print_table(data: dict[str, Any], md_path: Path | None = None) -> None:
    """The key columns in the terminal, sized to it; the rest is in report.md."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=TERMINAL_WIDTH)  # piped: the width of a standard terminal
    cells = table_cells(data, KEY_COLUMNS)
    keep = _fitting_columns(cells, console.width)
    caption = "miss: evidence the next step used that the view lost (by line / by token), after the first compaction"
    if len(keep) < len(TERMINAL_HEADS):
        caption += f"; {plural(len(TERMINAL_HEADS) - len(keep), 'column')} left out to fit the terminal"
    table = Table(title=_title(data), caption=caption, box=box.SIMPLE_HEAD, pad_edge=False)
    table.title_justify = table.caption_justify = "left"
    table.add_column(NAME_HEAD, no_wrap=True)
    for i in keep:
        table.add_column(TERMINAL_HEADS[i], justify="right", no_wrap=True)
    for row in cells:
        table.add_row(row[0], *(row[i + 1] for i in keep))
    with console.capture() as captured:
        console.print(table)
    print("\n".join(line.rstrip() for line in captured.get().splitlines()).strip("\n"))
    for name, t in data["totals"].items():
        if not t["available"]:
            print(f"{name}: not available ({t['reason']})")
    if md_path is not None:
        print(f"Every column, the plots and the warnings:\n  {cli.short_path(md_path)}")


def _fitting_columns(cells: list[list[str]], width: int) -> list[int]:
    """Indices of the key columns that fit `width`, leaving out the least important first."""
    keep = list(range(len(TERMINAL_HEADS)))

    def needed() -> int:
        arm = max([len(x) for x in NAME_HEAD.split("\n")] + [len(r[0]) for r in cells])
        cols = [max([len(x) for x in TERMINAL_HEADS[i].split("\n")] + [len(r[i + 1]) for r in cells]) for i in keep]
        return arm + sum(cols) + 3 * len(cols) + 2  # padding and a separator per column, the edges

    for i in DROP_ORDER:
        if needed() <= width:
            break
        keep.remove(i)
    return keep


def _title(data: dict[str, Any]) -> str:
    w = data["workloads"]
    window = data["settings"]["window_fraction"]
    scenarios = f" + {plural(len(w['scenarios']), 'generated scenario')}" if w["scenarios"] else ""
    return (
        f"{plural(len(w['real']), 'transcript')}{scenarios}, "
        f"window {window:.0%} of each session ({data['token_counter']})"
    )


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def per_workload(data: dict[str, Any]) -> str:
    """Every configuration on every session, the main columns."""
    keys = ["requests", "errors", "boundaries", "cache_read_share", "cost", "over_window", "peak_true_tokens"]
    keys += ["window_limit", "evidence_line_miss", "facts_final", "tail_retention", "estimator_error_mean"]
    rows = [[r["arm"], r["workload"]] + [fmt(k, r[k]) for k in keys] for r in data["rows"] if r["available"]]
    return markdown_table(["configuration", "session", *keys], rows)


SHAPED_KEYS = (
    "cost",
    "vs_default",
    "evidence_line_miss",
    "silent_prefix_changes",
    "over_window_fitting",
    "invalid_views",
)


def shaped_section(arms: list[Arm], runs: list[Run], settings: Settings) -> dict[str, Any]:
    """Every arm on the Amplifier-shaped sessions: the promises that must hold there."""
    data = build(arms, runs, settings, {})
    totals = {name: {k: t.get(k) for k in SHAPED_KEYS} for name, t in data["totals"].items() if t["available"]}
    return {"workloads": data["workloads"]["real"], "totals": totals}


def shaped_rows(data: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    headers = [
        "configuration",
        "cost vs default",
        "evidence line miss",
        "prefix changes without event",
        "over window*",
        "invalid",
    ]
    keys = ("vs_default", "evidence_line_miss", "silent_prefix_changes", "over_window_fitting", "invalid_views")
    ran = {name for name, t in data["totals"].items() if t["available"]}  # one that did not run is named once
    rows = [[name, *(fmt(k, t[k]) for k in keys)] for name, t in data["shaped"]["totals"].items() if name in ran]
    return headers, rows


def print_shaped(data: dict[str, Any]) -> None:
    """One line per arm that broke a promise on the shaped sessions, or one line saying none did."""
    if "shaped" not in data:
        return
    totals = data["shaped"]["totals"]
    broken = [
        n
        for n, t in totals.items()
        if n != REFERENCE_ARM and (t["silent_prefix_changes"] or t["over_window_fitting"] or t["invalid_views"])
    ]
    n = len(data["shaped"]["workloads"])
    if broken:
        print(f"Amplifier-shaped sessions ({n}): promises broken by:\n  {', '.join(broken)}\n(see report.md)")
    else:
        print(
            f"Amplifier-shaped sessions ({n}): every compacting configuration keeps 0 prefix\n"
            "changes without an event, 0 invalid views and 0 requests over the window where\n"
            "the instructions fit (see report.md)"
        )
