"""Counter arms: how each `token_counter` sizes compaction, judged in true (o200k) tokens.

Every shipped transcript is replayed through the harness driver once per counter (`estimate`,
`content`, `tiktoken:o200k_base`) at a window fixed in true tokens per transcript (the driver's
`--window-fraction` rule: the module's effective budget is that share of the session's true size).
Per arm: requests over the true window, compaction boundaries, cache-read share, peak occupancy of
the window and billed input cost; then boundaries per transcript. Run from the repository root:
`uv run python -m evaluation.studies.counter_arms [--window-fraction 0.35 0.2] [--workload PATH ...]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from evaluation import cli
from evaluation.tokens import ensure_tiktoken_cache_dir
from evaluation.wording import plural

ROOT = Path(__file__).resolve().parent.parent.parent
WORKLOADS = ROOT / "tests" / "data" / "workloads"
PROG = "python -m evaluation.studies.counter_arms"
COUNTERS = ("estimate", "content", "tiktoken:o200k_base")


@dataclass
class ArmTotals:
    """One counter's results over every transcript at one window fraction."""

    counter: str
    requests: int = 0
    over_window: int = 0
    over_floor: int = 0
    over_sessions: int = 0
    boundaries: int = 0
    read: int = 0
    total: int = 0
    cost: float = 0.0
    errors: int = 0
    peaks: list[float] | None = None
    per_workload: dict[str, int] | None = None


def run_arm(counter: str, workloads: list, fraction: float, true_counter: object) -> ArmTotals:
    """Replay every workload with `token_counter=counter`; sum what the driver measured."""
    from ..arms import Arm
    from ..driver import Settings, replay

    arm = Arm(counter, {"token_counter": counter})
    totals = ArmTotals(counter, peaks=[], per_workload={})
    for workload in workloads:
        run = replay(arm, workload, Settings(window_fraction=fraction), true_counter)
        if not run.available:
            raise SystemExit(f"arm {counter} is not available: {run.reason}")
        over = sum(r.over_window for r in run.requests)
        system = true_counter.messages([m for m in workload.messages if m.get("role") == "system"])
        totals.requests += len(run.requests)
        totals.over_window += over
        totals.over_floor += over if system > run.window.budget else 0
        totals.over_sessions += over > 0
        totals.boundaries += sum(r.boundary for r in run.requests)
        totals.read += sum(r.read for r in run.requests)
        totals.total += sum(r.true_tokens for r in run.requests)
        totals.cost += sum(r.cost for r in run.requests)
        totals.errors += sum(r.error is not None for r in run.requests)
        totals.peaks.append(max((r.true_tokens for r in run.requests), default=0) / run.window.limit)
        totals.per_workload[workload.name] = sum(r.boundary for r in run.requests)
    return totals


def print_arms(fraction: float, arms: list[ArmTotals]) -> None:
    """The per-arm table at one window fraction."""
    base_cost = arms[0].cost or 1.0
    print(f"\nwindow fraction {fraction} (effective budget = {fraction:.0%} of each session's true o200k size)")
    print(
        f"{'counter':<22} {'requests':>8} {'over window':>12} {'of which floor':>14} {'sessions over':>13} "
        f"{'boundaries':>10} "
        f"{'read share':>10} {'peak/limit med':>14} {'peak max':>8} {'cost vs est.':>12}"
    )
    for arm in arms:
        print(
            f"{arm.counter:<22} {arm.requests:>8} {arm.over_window:>12} {arm.over_floor:>14} {arm.over_sessions:>13} "
            f"{arm.boundaries:>10} "
            f"{arm.read / max(arm.total, 1):>10.3f} {statistics.median(arm.peaks):>14.3f} {max(arm.peaks):>8.3f} "
            f"{arm.cost / base_cost:>12.3f}"
        )
        if arm.errors:
            print(f"  ({plural(arm.errors, 'request')} raised)")


def print_boundaries(arms: list[ArmTotals]) -> None:
    """Compaction boundaries per transcript and counter."""
    names = list(arms[0].per_workload)
    print(f"\n{'boundaries per transcript':<72} " + " ".join(f"{a.counter[:10]:>10}" for a in arms))
    for name in names:
        print(f"{name[:72]:<72} " + " ".join(f"{a.per_workload[name]:>10}" for a in arms))


def main(argv: list[str] | None = None) -> int:
    """Print the arm table per window fraction."""
    p = cli.Parser(PROG, __doc__)
    cli.add_window_fraction(p, [0.35, 0.2], "the module's budget as a share of each session's true size")
    cli.add_workload(p, "tests/data/workloads")
    p.add_argument("--per-transcript", action="store_true", help="also print boundaries per transcript")
    return cli.guard(PROG, lambda: _run(p.parse_args(sys.argv[1:] if argv is None else argv)))


def _run(args: argparse.Namespace) -> int:
    workloads = cli.workloads(args.workload, WORKLOADS)  # checked before the work
    ensure_tiktoken_cache_dir()  # offline: the repository's copy of o200k
    from ..tokens import TokenCounter

    true_counter = TokenCounter()
    source = ", ".join(args.workload or [str(WORKLOADS.relative_to(ROOT))])
    print(f"{plural(len(workloads), 'transcript')} from {source}; true tokens: {true_counter.name}")
    print("over window = true prompt tokens > context_window - max_output_tokens (the provider would reject it);")
    print("of which floor = in sessions whose system prompt alone exceeds the effective budget (un-reducible)")
    for fraction in args.window_fraction:
        arms = [run_arm(counter, workloads, fraction, true_counter) for counter in COUNTERS]
        print_arms(fraction, arms)
        if args.per_transcript:
            print_boundaries(arms)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
