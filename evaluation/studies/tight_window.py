"""`python -m evaluation.studies.tight_window`: the tight-window scenario alone.

One generated session as Amplifier's loop-streaming stores it (evaluation/tight_scenario.py):
40 turns, tool results of 5-60 KB, screenshots in some user turns, the hooks' reminders on
every request, a provider window of 40,000 tokens with 4,000 output tokens, and
`max_tokens: 20000` in every arm of this module. Prints, per arm: requests past the input
limit, compactions that ended OVER BUDGET, boundaries per request, cache read share and bill
vs no compaction. The main run reports the same figures in report.md; this command runs only
the scenario, and writes its section only when given --out.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import cli
from ..arms import ARMS, arm_by_name
from ..cache import Prices
from ..driver import Settings
from ..report_host import tight_markdown, tight_section, tight_table, tight_terminal
from ..runner import default_jobs, run_all
from ..tight_scenario import tight_arms, tight_workload

PROG = "python -m evaluation.studies.tight_window"


def parse(argv: list[str]) -> argparse.Namespace:
    """Options: arms, seed, jobs, the fallback counter, an optional output file."""
    p = cli.Parser(PROG, __doc__)
    p.add_argument(
        "--arms", metavar="NAMES", help="comma-separated arm names (default: every arm of the main run but none)"
    )
    p.add_argument("--seed", type=int, default=7, help="seed of the generated session")
    p.add_argument(
        "--no-screenshots", action="store_true", help="the same session without its image blocks (text only)"
    )
    cli.add_jobs(p, "worker processes (default: the cores, at most 4)")
    cli.add_no_tiktoken(p)
    p.add_argument("--out", type=Path, metavar="FILE", help="also write the section (markdown) and FILE.json here")
    args = p.parse_args(argv)
    args.arms = cli.check_arms(args.arms) if args.arms is not None else [a.name for a in ARMS]
    if not tight_arms([arm_by_name(name) for name in args.arms]):
        raise cli.UsageError("--arms: only the no-compaction reference, which the tight window leaves out")
    if args.out is not None:
        cli.check_new_file("--out", args.out)
    return args


def run(args: argparse.Namespace) -> int:
    arms = tight_arms([arm_by_name(name) for name in args.arms])
    workload, shape = tight_workload(args.seed, not args.no_screenshots)
    settings = Settings(prices=Prices())
    with cli.StageProgress("replaying the tight window") as progress:
        runs = run_all(arms, [workload], settings, args.jobs or default_jobs(), not args.no_tiktoken, progress)
    data = {"tight": tight_section(arms, runs, settings, shape)}
    print(*tight_table(data), "", *tight_terminal(data, where="per arm above"), sep="\n")
    if args.out is not None:
        args.out.write_text("\n".join(tight_markdown(data)).strip() + "\n", encoding="utf-8")
        json_path = args.out.with_name(args.out.name + ".json")
        json_path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote:\n  {cli.short_path(args.out)}\n  {cli.short_path(json_path)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    return cli.guard(PROG, lambda: run(parse(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
