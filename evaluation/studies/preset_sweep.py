"""`python -m evaluation.studies.preset_sweep`: cost against evidence miss for many configurations at once.

Each configuration is a JSON object of module config keys (`--config NAME='{"target_usage": 0.2}'`,
repeatable), or a named grid (`--grid NAME`). Every configuration runs as an arm beside the default
through the main harness (same workloads, driver and metrics as `python -m evaluation`), and one line
per configuration prints: cost vs the default, line and token miss, facts kept, requests over the
window, invalid views, boundaries, and whether it reaches the cost goal: at most 0.70 of the default's
cost with at most half its evidence miss.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Any

from .. import cli
from ..arms import ARMS, Arm, arm_by_name
from ..cache import Prices
from ..driver import Settings
from ..scenarios import generated_scenarios

COST_TARGET = 0.70
MISS_TARGET = 0.5
_OFF = {"compaction_notice_enabled": False}
_MIN = {"compaction_notice_verbosity": "minimal"}
_BAL = {"evidence_ledger_share": 0.75, "target_usage": 0.2, **_OFF, "protected_tool_results": 1}
_HT = {"tool_result_budget_tokens": 250, "tool_result_shape": "head_tail"}
GRIDS: dict[str, dict[str, dict[str, Any]]] = {
    # The shipped presets, then each lever moved alone around `evidence_balanced` (ledger room
    # R = target_usage x evidence_ledger_share of the budget), then the cheapest points measured.
    "frontier": {
        "evidence": {"preset": "evidence"},
        "evidence_balanced": {"preset": "evidence_balanced"},
        "evidence_lean": {"preset": "evidence_lean"},
        "evidence+segments": {"preset": "evidence", "evidence_ledger_segments": True},
        "evidence_balanced+segments": {"preset": "evidence_balanced", "evidence_ledger_segments": True},
        "evidence_lean+segments": {"preset": "evidence_lean", "evidence_ledger_segments": True},
        "lean_no_notice": {"preset": "evidence_lean", **_OFF},
        "bal_minimal_notice": {**_BAL, "compaction_notice_enabled": True, **_MIN},
        "bal_R0.12": {**_BAL, "evidence_ledger_share": 0.6},
        "bal_R0.18": {**_BAL, "evidence_ledger_share": 0.9},
        "bal_threshold0.8": {**_BAL, "compact_threshold": 0.8},
        "bal_threshold1.0": {**_BAL, "compact_threshold": 1.0},
        "bal_recent0.1": {**_BAL, "protected_recent": 0.1},
        "bal_tools5": {**_BAL, "protected_tool_results": 5},
        "bal_tools0": {**_BAL, "protected_tool_results": 0},
        "bal_head_tail250": {**_BAL, **_HT},
        "bal_content": {**_BAL, "token_counter": "content"},
        "content_R0.12": {**_BAL, "evidence_ledger_share": 0.6, "token_counter": "content"},
        "cheap_R0.06": {**_BAL, "evidence_ledger_share": 0.6, "target_usage": 0.1, "compact_threshold": 0.85},
        "no_ledger_0.6_0.15": {"compact_threshold": 0.6, "target_usage": 0.15, **_MIN},
    },
}


def parse(argv: list[str]) -> argparse.Namespace:
    """Options: configurations or a grid, the window, --all-workloads, --jobs."""
    p = cli.Parser("python -m evaluation.studies.preset_sweep", __doc__)
    p.add_argument("--config", action="append", default=[], metavar="NAME=JSON", help="a configuration; repeatable")
    p.add_argument("--grid", choices=sorted(GRIDS), help="a named grid of configurations")
    p.add_argument("--arm", action="append", default=[], metavar="NAME", help="an arm of the table; repeatable")
    cli.add_workload(p, "the shipped sessions")
    p.add_argument("--all-workloads", action="store_true", help="the 26 transcripts in tests/data/workloads/")
    p.add_argument("--no-scenario", action="store_true", help="leave the generated scenarios out")
    cli.add_window_fraction(p, 0.3, "the module's budget as a share of each session's true size")
    cli.add_jobs(p, "worker processes (default 2)")
    cli.add_no_tiktoken(p)
    cli.add_out(p, cli.DEFAULT_OUT, "folder for preset_sweep.md (the table)")
    return p.parse_args(argv)


def configurations(args: argparse.Namespace) -> list[Arm]:
    """The default arm, then the named arms, the grid's and the --config ones: every one checked
    before anything runs (a name that is not an arm, a configuration the module would warn about)."""
    known = [a.name for a in ARMS]
    for name in args.arm:
        if name not in known:
            raise cli.unknown("arm", name, known)
    arms = [arm_by_name("progressive")] + [arm_by_name(n) for n in args.arm]
    for name, config in GRIDS.get(args.grid or "", {}).items():
        arms.append(Arm(name, dict(config)))
    arms += [Arm(name, config) for name, config in cli.named_configs(args.config, checked=False)]
    names = [a.name for a in arms]
    for arm in arms:
        if names.count(arm.name) > 1:
            raise cli.UsageError(f"configuration {arm.name!r} named twice")
        cli.check_module_config(f"--config {arm.name}", arm.config)
    return arms


def breakdown(runs: list[Any], arm: str) -> tuple[float, float, float, float]:
    """An arm's billed cost on real transcripts split: writes at boundaries, other writes, reads, plain."""
    p = Prices()
    parts = [0.0, 0.0, 0.0, 0.0]
    for run in runs:
        if run.arm != arm or run.synthetic:
            continue
        for q in run.requests:
            parts[0 if q.boundary else 1] += q.write * p.cache_write
            parts[2] += q.read * p.cache_read
            parts[3] += q.plain * p.input
    return tuple(parts)  # type: ignore[return-value]


HEADERS = (
    "configuration",
    "cost vs default",
    "line miss",
    "token miss",
    "facts kept",
    "corrections kept",
    "over window",
    "invalid",
    "boundaries",
    "ms p50",
    "<= 0.70x cost, <= half miss",
    "boundary writes",
    "new writes",
    "reads",
    "plain",
)


def meets_target(t: dict[str, Any], base: dict[str, Any]) -> bool:
    """The cost goal: cost <= 0.70 of the default's with at most half its evidence line miss."""
    miss, base_miss = t["evidence_line_miss"], base["evidence_line_miss"]
    return t["cost"] / base["cost"] <= COST_TARGET and miss is not None and miss <= MISS_TARGET * base_miss


def line(name: str, t: dict[str, Any], base: dict[str, Any], parts: tuple[float, ...] = ()) -> str:
    """One configuration's figures as a markdown row, with whether it reaches the cost goal."""
    if not t["available"] or t["evidence_line_miss"] is None:
        return f"| {name} | not available: {t['reason'] or 'no evidence measured'} |"
    facts = "n/a" if t["facts_final"] is None else f"{t['facts_final']:.0%}"
    cells = [
        name,
        f"{t['cost'] / base['cost']:.3f}",
        f"{t['evidence_line_miss']:.3f}",
        f"{t['evidence_token_miss']:.3f}",
        facts,
        t.get("corrections") or "n/a",
        str(t["over_window"]),
        str(t["invalid_views"]),
        str(t["boundaries"]),
        f"{t['ms_p50']:.3f}",
        "yes" if meets_target(t, base) else "no",
        *(f"{x / base['cost']:.3f}" for x in parts),
    ]
    return "| " + " | ".join(cells) + " |"


def block(name: str, t: dict[str, Any], base: dict[str, Any], parts: tuple[float, ...] = ()) -> list[str]:
    """One configuration's figures for the terminal: lines of at most 80 characters."""
    if not t["available"] or t["evidence_line_miss"] is None:
        return textwrap.wrap(f"{name}: not available: {t['reason'] or 'no evidence measured'}", 80)
    facts = "n/a" if t["facts_final"] is None else f"{t['facts_final']:.0%}"
    goal = "reaches" if meets_target(t, base) else "misses"
    lines = [
        f"{name}: cost {t['cost'] / base['cost']:.3f}x the default",
        f"  {goal} the cost goal (<= {COST_TARGET}x the default's cost, <= half its miss)",
        f"  miss {t['evidence_line_miss']:.3f} by line, {t['evidence_token_miss']:.3f} by token; facts "
        f"{facts}; corrections {t.get('corrections') or 'n/a'}",
        f"  over window {t['over_window']}, invalid {t['invalid_views']}, boundaries {t['boundaries']}, "
        f"ms p50 {t['ms_p50']:.3f}",
    ]
    if parts:
        split = ", ".join(f"{label} {x / base['cost']:.3f}" for label, x in zip(BILL, parts, strict=True))
        lines.append(f"  bill: {split}")
    return lines


BILL = ("boundary writes", "new writes", "reads", "plain")


def verdict(arms: list[Arm], totals: dict[str, dict[str, Any]]) -> list[str]:
    """Which configuration to pick for which goal, from this sweep's numbers; says when they cannot decide."""
    base = totals["progressive"]
    ok = {a.name: totals[a.name] for a in arms if _valid(totals[a.name])}
    if not base.get("boundaries"):
        return ["The sessions were too small to compact: these numbers cannot tell the configurations apart."]
    if len(ok) < 2:
        return ["Fewer than two configurations ran validly: nothing to choose between."]
    out = []
    goals = (
        ("the lowest cost", lambda n: (ok[n]["cost"], ok[n]["evidence_line_miss"])),
        ("the fewest evidence misses", lambda n: (ok[n]["evidence_line_miss"], ok[n]["cost"])),
    )
    for goal, key in goals:
        ranked = sorted(ok, key=key)
        tie = [n for n in ranked[1:] if _same(ok[n], ok[ranked[0]])]
        if tie:
            out.append(f"For {goal}: {ranked[0]} and {', '.join(tie)} tie; these numbers cannot decide.")
        else:
            out.append(f"For {goal}: {ranked[0]}.")
    hits = [n for n in ok if meets_target(ok[n], base)]
    out.append(f"At <= {COST_TARGET}x the default's cost with <= half its miss: {', '.join(hits) or 'none'}.")
    kept = {n: t.get("corrections_kept") or 0 for n, t in ok.items() if t.get("corrections_total")}
    if kept:
        best = [n for n, k in kept.items() if k == max(kept.values())]
        out.append(f"To keep the user's corrections: {', '.join(best)} ({ok[best[0]]['corrections']}).")
    return [w for text in out for w in textwrap.wrap(text, 80, subsequent_indent="  ")]


def _valid(t: dict[str, Any]) -> bool:
    return t["available"] and t["evidence_line_miss"] is not None and not t["invalid_views"]


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return round(a["cost"] / b["cost"], 3) == 1 and round(a["evidence_line_miss"] - b["evidence_line_miss"], 3) == 0


def run(args: argparse.Namespace) -> int:
    """Replay every configuration; print a block per configuration and the verdict, write the table."""
    from .. import report
    from ..runner import run_all

    settings = Settings(args.window_fraction, 1024, request_overhead=0, prices=Prices())
    arms = configurations(args)
    cli.check_out_dir(args.out)
    loads = cli.real_workloads(args.workload, args.all_workloads)
    if not args.no_scenario:
        loads += generated_scenarios(7)
    with cli.StageProgress("sweeping") as progress:
        runs = run_all(arms, loads, settings, args.jobs or 2, not args.no_tiktoken, progress)
    totals = report.build(arms, runs, settings, {})["totals"]
    base = totals["progressive"]
    rows = ["| " + " | ".join(HEADERS) + " |", "|" + " --- |" * len(HEADERS)]
    for arm in arms:
        parts = breakdown(runs, arm.name)
        rows.append(line(arm.name, totals[arm.name], base, parts))
        print("\n".join(block(arm.name, totals[arm.name], base, parts)), flush=True)
    print("\nWhat to pick (this sweep's numbers):", *verdict(arms, totals), sep="\n")
    table = args.out / "preset_sweep.md"
    table.write_text("\n".join(rows) + "\n", encoding="utf-8")
    print(f"The table:\n  {cli.short_path(table)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; a bad option prints one line and exits 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return cli.guard("python -m evaluation.studies.preset_sweep", lambda: run(parse(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
