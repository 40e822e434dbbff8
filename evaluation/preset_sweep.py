"""`python -m evaluation.preset_sweep`: cost against evidence miss for many configurations at once.

Each configuration is a JSON object of module config keys (`--config NAME='{"target_usage": 0.2}'`,
repeatable), or a named grid (`--grid NAME`). Every configuration runs as an arm beside the default
through the main harness (same workloads, driver and metrics as `python -m evaluation`), and one line
per configuration prints: cost vs the default, line and token miss, facts kept, requests over the
window, invalid views, boundaries, and whether it meets target 1 (cost <= 0.70, miss <= half).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from . import cli
from .__main__ import ALL_WORKLOADS
from .arms import Arm, arm_by_name
from .cache import Prices
from .driver import Settings
from .scenarios import retention_scenarios
from .workloads import SHIPPED_DIR

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
    p = cli.Parser("python -m evaluation.preset_sweep", __doc__)
    p.add_argument("--config", action="append", default=[], metavar="NAME=JSON", help="a configuration; repeatable")
    p.add_argument("--grid", choices=sorted(GRIDS), help="a named grid of configurations")
    p.add_argument("--arm", action="append", default=[], metavar="NAME", help="an arm of the table; repeatable")
    p.add_argument("--all-workloads", action="store_true", help="the 26 transcripts in tests/data/workloads/")
    p.add_argument("--no-scenario", action="store_true", help="leave the planted-fact scenarios out")
    cli.add_window_fraction(p, 0.3, "the module's budget as a share of each session's true size")
    cli.add_jobs(p, "worker processes (default 2)")
    cli.add_no_tiktoken(p)
    return p.parse_args(argv)


def configurations(args: argparse.Namespace) -> list[Arm]:
    """The default arm, then the named arms, the grid's and the --config ones."""
    arms = [arm_by_name("progressive")] + [arm_by_name(n) for n in args.arm]
    for name, config in GRIDS.get(args.grid or "", {}).items():
        arms.append(Arm(name, dict(config)))
    for text in args.config:
        name, sep, body = text.partition("=")
        if not sep:
            raise cli.UsageError(f"--config {text!r}: expected NAME=JSON")
        try:
            config = json.loads(body)
        except json.JSONDecodeError as exc:
            raise cli.UsageError(f"--config {name}: bad JSON ({exc})") from None
        arms.append(Arm(name.strip(), config))
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


def line(name: str, t: dict[str, Any], base: dict[str, Any], parts: tuple[float, ...] = ()) -> str:
    """One configuration's figures, with the target-1 verdict."""
    if not t["available"] or t["evidence_line_miss"] is None:
        return f"| {name} | not available: {t['reason'] or 'no evidence measured'} |"
    cost = t["cost"] / base["cost"]
    miss = t["evidence_line_miss"]
    hit = cost <= COST_TARGET and miss is not None and miss <= MISS_TARGET * base["evidence_line_miss"]
    facts = "n/a" if t["facts_final"] is None else f"{t['facts_final']:.0%}"
    return (
        f"| {name} | {cost:.3f} | {miss:.3f} | {t['evidence_token_miss']:.3f} | {facts} | "
        f"{t['over_window']} | {t['invalid_views']} | {t['boundaries']} | {t['ms_p50']:.3f} | "
        f"{'yes' if hit else 'no'} |" + "".join(f" {x / base['cost']:.3f} |" for x in parts)
    )


def run(args: argparse.Namespace) -> int:
    """Replay every configuration and print the table."""
    from . import report
    from .runner import run_all

    settings = Settings(args.window_fraction, 1024, request_overhead=0, prices=Prices())
    loads = cli.workloads([str(ALL_WORKLOADS)] if args.all_workloads else None, SHIPPED_DIR)
    if not args.no_scenario:
        loads += retention_scenarios(7)
    arms = configurations(args)
    runs = run_all(arms, loads, settings, args.jobs or 2, not args.no_tiktoken)
    totals = report.build(arms, runs, settings, {})["totals"]
    base = totals["progressive"]
    print(
        "| configuration | cost vs default | line miss | token miss | facts kept | over window | invalid "
        "| boundaries | ms p50 | target 1 | boundary writes | new writes | reads | plain |"
    )
    print("|" + " --- |" * 14)
    for arm in arms:
        print(line(arm.name, totals[arm.name], base, breakdown(runs, arm.name)), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; a bad option prints one line and exits 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return cli.guard("python -m evaluation.preset_sweep", lambda: run(parse(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
