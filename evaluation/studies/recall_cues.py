"""`python -m evaluation.studies.recall_cues`: what one context_recall call gives back
of the evidence a view lost, per kind of query an agent would write.

Replays configurations (the default unless --arm) over the 26 transcripts of
tests/data/workloads, split in two halves (sorted by file name, taken alternately:
tune = positions 0, 2, 4, ...; report = 1, 3, 5, ...; both halves side by side unless
--split names one). At each request after the first compaction, 2 tokens that the agent's
next step used but the view lost are sampled, and the tool is asked, through its public
`execute`, once per query kind (evaluation/recall_probe.py):
  exact word        the lost word itself
  word of the line  another distinctive word of the line that held it
  call              the path or command of the call whose result held that line
  3 words           three consecutive words of that line
A query finds the token when the tool's output (which the tool bounds to ~2,000 tokens)
contains it; the table gives found/asked per kind. Tune recall on --split tune, report
on --split report.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import cli
from ..arms import ARMS, Arm, arm_by_name
from ..driver import Settings
from ..recall_probe import QUERY_KINDS, SHORT_LABELS, recall_rates
from ..report_recall import cell
from ..wording import config_words, plural

PROG = "python -m evaluation.studies.recall_cues"


def parse(argv: list[str]) -> argparse.Namespace:
    """Options: the half, the configurations, the window, the workers."""
    p = cli.Parser(PROG, __doc__)
    cli.add_workload(p, "both halves of the 26 transcripts of tests/data/workloads")
    p.add_argument(
        "--split",
        choices=cli.SPLITS,
        help="only this half of the 26 transcripts: tune = positions 0, 2, 4, ... by file name; report = 1, 3, 5, ...",
    )
    p.add_argument(
        "--arm", action="append", default=[], metavar="NAME", help="a configuration of the arm table; repeatable"
    )
    cli.add_window_fraction(p, 0.3, "the module's budget as a share of each session's true size")
    cli.add_jobs(p, "worker processes (default: the cores, at most 4)")
    cli.add_no_tiktoken(p)
    args = p.parse_args(argv)
    known = [a.name for a in ARMS]
    for name in args.arm:
        if name not in known:
            raise cli.unknown("arm", name, known)
    if args.workload and args.split:
        raise cli.UsageError("--split picks a half of the 26 transcripts of tests/data/workloads; drop --workload")
    return args


def measure(
    arms: list[Arm], loads: list[Any], window_fraction: float = 0.3, jobs: int = 1, use_tiktoken: bool = True
) -> dict[str, dict[str, dict[str, Any]]]:
    """{configuration: {query kind: {"queries", "found", "rate"}}} over these sessions."""
    from ..runner import run_all

    settings = Settings(window_fraction, 1024)
    with cli.StageProgress("replaying") as progress:
        runs = run_all(arms, loads, settings, jobs, use_tiktoken, progress)
    return {arm.name: recall_rates(r for r in runs if r.arm == arm.name) for arm in arms}


def table(arm: Arm, by_half: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """One configuration: a row per query kind, a column per half (within 80 columns)."""
    halves = list(by_half)
    lines = [
        f"{arm.name}, {config_words(arm.config, arm.engine)}:",
        f"  {'query':<18}" + "".join(f"{h:>16}" for h in halves),
    ]
    for kind in QUERY_KINDS:
        lines.append(f"  {SHORT_LABELS[kind]:<18}" + "".join(f"{cell(by_half[h][arm.name][kind]):>16}" for h in halves))
    return lines


def run(args: argparse.Namespace) -> int:
    """Replay, then print the table per configuration."""
    from ..runner import default_jobs

    arms = [arm_by_name(n) for n in args.arm] or [arm_by_name("progressive")]
    if args.workload:
        halves = {"named sessions": cli.real_workloads(args.workload, False)}
    else:
        names = [args.split] if args.split else list(cli.SPLITS)
        halves = {h: cli.real_workloads(None, False, h) for h in names}
    jobs = args.jobs or default_jobs()
    results = {h: measure(arms, loads, args.window_fraction, jobs, not args.no_tiktoken) for h, loads in halves.items()}
    sizes = ", ".join(f"{h}: {plural(len(loads), 'transcript')}" for h, loads in halves.items())
    print(f"context_recall, one call per query, found/asked; window {args.window_fraction:.0%}\n{sizes}")
    for arm in arms:
        print("", *table(arm, results), sep="\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; a bad option prints one line and exits 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return cli.guard(PROG, lambda: run(parse(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
