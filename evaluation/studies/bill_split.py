"""`python -m evaluation.studies.bill_split`: where the money goes, per configuration.

A prefix cache bills a compaction boundary as a rewrite of the whole view at the write price, and
every request between boundaries as a re-read of it at the read price. This study replays each
configuration beside the default (the main harness: same driver, cache and metrics) and prints per
configuration: requests, boundaries per request, the bill against the default's, and that bill split
into its parts (each a share of the default's whole bill): *boundary writes* (cache writes on the
requests whose prefix changed), *new writes* (cache writes of new messages on the other requests),
*reads* (cache reads) and *plain* (uncached input, such as what follows the cache breakpoint), with
the evidence line miss.

Two kinds of sessions: a half of the 26 test transcripts (`--split tune|report`, window 30% of each
session, as `python -m evaluation --split`), or the tight-window scenario (`--tight`: 40,000-token
window, 5-60 KB results, `max_tokens: 20000`; `--seed` repeatable, `--screenshots with|without|both`).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from .. import cli
from ..arms import Arm, arm_by_name
from ..cache import Prices
from ..driver import Run, Settings
from ..workloads import Workload

PROG = "python -m evaluation.studies.bill_split"
DEFAULT_ARMS = "progressive,preset_evidence,preset_evidence_balanced,preset_evidence_lean"
PARTS = ("boundary writes", "new writes", "reads", "plain")


@dataclass(frozen=True)
class Split:
    """One configuration's bill on a set of sessions, in price units, split by where it went."""

    requests: int
    boundaries: int
    boundary_writes: float
    new_writes: float
    reads: float
    plain: float

    @property
    def total(self) -> float:
        return self.boundary_writes + self.new_writes + self.reads + self.plain

    @property
    def boundaries_per_request(self) -> float:
        return self.boundaries / self.requests if self.requests else 0.0


def bill_split(runs: list[Run], arm: str, prices: Prices) -> Split:
    """Sum one arm's requests (real sessions only) into the four parts of its bill."""
    requests = boundaries = 0
    parts = [0.0, 0.0, 0.0, 0.0]
    for run in runs:
        if run.arm != arm or run.synthetic:
            continue
        for q in run.requests:
            requests += 1
            boundaries += q.boundary
            parts[0 if q.boundary else 1] += q.write * prices.cache_write
            parts[2] += q.read * prices.cache_read
            parts[3] += q.plain * prices.input
    return Split(requests, boundaries, *parts)


def parse(argv: list[str]) -> argparse.Namespace:
    """Options: the sessions (a split or the tight window), the configurations, the prices."""
    p = cli.Parser(PROG, __doc__)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--split", choices=cli.SPLITS, help="a half of the 26 test transcripts")
    where.add_argument("--tight", action="store_true", help="the tight-window scenario")
    p.add_argument("--seed", type=int, action="append", help="tight window: a seed; repeatable (default 7)")
    p.add_argument("--screenshots", choices=("with", "without", "both"), default="with", help="tight window")
    p.add_argument("--arms", default=DEFAULT_ARMS, metavar="NAMES", help=f"arm names (default: {DEFAULT_ARMS})")
    p.add_argument("--config", action="append", default=[], metavar="NAME=JSON", help="a configuration; repeatable")
    cli.add_window_fraction(p, 0.3, "split: the module's budget as a share of each session's true size")
    p.add_argument("--price-cache-write", type=float, default=Prices.cache_write, help="per cache-write token")
    p.add_argument("--price-cache-read", type=float, default=Prices.cache_read, help="per cache-read token")
    cli.add_jobs(p, "worker processes (default 2)")
    cli.add_no_tiktoken(p)
    args = p.parse_args(argv)
    args.arms = cli.check_arms(args.arms)
    if "progressive" not in args.arms:
        args.arms.insert(0, "progressive")
    return args


def configurations(args: argparse.Namespace) -> list[Arm]:
    """The named arms, then the --config ones, each checked before anything runs."""
    arms = [arm_by_name(n) for n in args.arms]
    return arms + [Arm(name, config) for name, config in cli.named_configs(args.config)]


def session_sets(args: argparse.Namespace) -> list[tuple[str, list[Workload], Settings, Prices]]:
    """Each set of sessions to replay, with its title, settings and prices."""
    prices = Prices(cache_write=args.price_cache_write, cache_read=args.price_cache_read)
    if args.split:
        settings = Settings(args.window_fraction, 1024, request_overhead=0, prices=prices)
        return [(f"split {args.split}", cli.real_workloads(None, False, args.split), settings, prices)]
    from ..tight_scenario import tight_workload

    shots = {"with": (True,), "without": (False,), "both": (True, False)}[args.screenshots]
    out = []
    for seed in args.seed or [7]:
        for with_shots in shots:
            workload, _ = tight_workload(seed, with_shots)
            title = f"tight window, seed {seed}, {'with' if with_shots else 'without'} screenshots"
            out.append((title, [workload], Settings(prices=prices), prices))
    return out


def table(title: str, arms: list[Arm], runs: list[Run], prices: Prices, misses: dict[str, Any]) -> list[str]:
    """One line per configuration, the bill's parts as shares of the default's whole bill."""
    base = bill_split(runs, "progressive", prices).total or 1.0
    head = f"{'configuration':28} {'req':>5} {'bnd/req':>7} {'bill':>6} " + " ".join(
        f"{h.split()[0][:8]:>8}" for h in PARTS
    )
    lines = [f"== {title} ==", head + f" {'miss':>6}"]
    for arm in arms:
        s = bill_split(runs, arm.name, prices)
        miss = misses.get(arm.name)
        cells = " ".join(f"{x / base:8.3f}" for x in (s.boundary_writes, s.new_writes, s.reads, s.plain))
        miss_text = "n/a" if miss is None else f"{miss:.3f}"
        lines.append(
            f"{arm.name[:28]:28} {s.requests:5d} {s.boundaries_per_request:7.2f} {s.total / base:6.3f} {cells} "
            f"{miss_text:>6}"
        )
    return lines


def run(args: argparse.Namespace) -> int:
    """Replay every configuration on each set of sessions and print one table per set."""
    from .. import report
    from ..runner import run_all
    from ..tight_scenario import tight_arms

    arms = configurations(args)
    for title, loads, settings, prices in session_sets(args):
        replayed = tight_arms(arms) if args.tight else arms
        with cli.StageProgress(f"replaying ({title})") as progress:
            runs = run_all(replayed, loads, settings, args.jobs or 2, not args.no_tiktoken, progress)
        totals = report.build(replayed, runs, settings, {})["totals"]
        misses = {name: t.get("evidence_line_miss") for name, t in totals.items()}
        print("\n".join(table(title, replayed, runs, prices, misses)), flush=True)
    print(
        "bnd/req: boundaries per request; bill and its parts (boundary writes, new writes, reads, plain) "
        "as shares of the default's whole bill; miss: evidence line miss."
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; a bad option prints one line and exits 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return cli.guard(PROG, lambda: run(parse(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
