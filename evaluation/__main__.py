"""`python -m evaluation`: replay transcripts through every arm and write the report.

`python -m evaluation identity` runs the byte-identity check instead (see identity.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import cli
from .arms import ARMS, Arm, arm_by_name, engine_arm, load_engine
from .cache import Prices
from .driver import Settings
from .host_shaped import host_shape
from .scenarios import generated_scenarios
from .shaped import shape
from .wording import plural
from .workloads import Workload

DEFAULT_OUT = Path(__file__).resolve().parent / "out"


def parse(argv: list[str]) -> argparse.Namespace:
    """Command-line options of the main run, checked (see cli.py); a bad one raises UsageError."""
    p = cli.main_parser()
    return cli.check_main(p.parse_args(argv))


def choose_workloads(args: argparse.Namespace) -> list[Workload]:
    """The shipped sessions (or only the user's; --all-workloads: the 26 test transcripts; --split: one
    half of them), plus the retention scenarios unless --workload/--no-scenario."""
    loads = cli.real_workloads(args.workload, args.all_workloads, args.split)
    if scenarios_on(args):
        loads += generated_scenarios(args.seed)
    return loads


def scenarios_on(args: argparse.Namespace) -> bool:
    """The generated scenarios run with --scenario, or by default when no --workload names sessions."""
    return bool(args.scenario or (args.scenario is None and not args.workload))


def shaped_workloads(workloads: list[Workload]) -> list[Workload]:
    """Amplifier-shaped variants of the real sessions (evaluation/shaped.py), seeded by position."""
    real = [w for w in workloads if not (w.facts or w.corrections)]
    return [Workload(f"{w.name} (shaped)", shape(w.messages, seed=i), source=w.source) for i, w in enumerate(real)]


def host_workloads(workloads: list[Workload], calls_only: bool = False) -> list[Workload]:
    """The real sessions as Amplifier's loop-streaming stores them (evaluation/host_shaped.py), seeded by
    position, with the hooks' reminders billed and the window of the plain session; with ``calls_only``
    only the orchestrators' call shape (and content blocks) changes, nothing else."""
    real = [w for w in workloads if not (w.facts or w.corrections)]
    return [
        Workload(
            f"{w.name} ({'calls only' if calls_only else 'host'})",
            host_shape(w.messages, seed=i, parts=("calls",)) if calls_only else host_shape(w.messages, seed=i),
            source=w.source,
            host_reminders=not calls_only,
            sized_by=w.messages,
            recall_probe=False,
        )
        for i, w in enumerate(real)
    ]


def choose_arms(args: argparse.Namespace) -> list[Arm]:
    """The arm table (or a subset), plus one arm per --engine."""
    arms = [arm_by_name(n.strip()) for n in args.arms.split(",")] if args.arms else list(ARMS)
    return arms + [engine_arm(e) for e in args.engine]


def engine_labels(arms: list[Arm]) -> dict[str, str]:
    """What each engine name resolved to (a stand-in is named as such)."""
    out = {}
    for name in sorted({a.engine for a in arms}):
        try:
            out[name] = load_engine(name)[1]
        except Exception as exc:  # reported, and its arms fail at mount
            out[name] = f"could not be loaded: {exc}"
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the evaluation; returns a process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "identity":
        from .identity import main as identity_main

        return identity_main(argv[1:])
    return cli.guard("python -m evaluation", lambda: run(parse(argv)))


def run(args: argparse.Namespace) -> int:
    """The main job: replay, measure, report, plot."""
    from . import plots, report, report_host, report_text
    from .runner import default_jobs, run_all

    prices = Prices(args.price_input, args.price_cache_write, args.price_cache_read)
    settings = Settings(
        args.window_fraction, args.max_output_tokens, request_overhead=args.request_overhead, prices=prices
    )
    arms, workloads = choose_arms(args), choose_workloads(args)  # every file checked before any worker starts
    started = time.perf_counter()
    jobs = args.jobs or default_jobs()
    with cli.StageProgress("replaying") as progress:
        runs = run_all(arms, workloads, settings, jobs, not args.no_tiktoken, progress)
    data = report.build(arms, runs, settings, engine_labels(arms))
    extra = reshaped_sections(args, arms, workloads, runs, settings, jobs)
    data.update(extra)
    data["elapsed_s"] = round(time.perf_counter() - started, 1)
    names = [] if args.no_plots else plots.write_all(data, args.out)
    if args.no_plots:
        plots.remove_stale(args.out)  # no picture of an earlier run next to this report
    json_path, md_path = report_text.write(data, args.out, names)
    report.print_table(data, md_path)
    print("\nWhat to pick (this run's numbers):", *report_text.terminal_verdict(data), sep="\n")
    report.print_shaped(data)
    print(*report_host.host_terminal(data), *report_host.tight_terminal(data), sep="\n")
    total = len(runs) + sum(s["runs"] for s in extra.values())
    print(f"{plural(total, 'run')} in {data['elapsed_s']} s; wrote:")
    for path in (md_path, json_path):
        print(f"  {cli.short_path(path)}")
    if names:
        print(f"  {plural(len(names), 'plot')} in {cli.short_path(args.out)}")
    return 0


def reshaped_sections(
    args: argparse.Namespace, arms: list[Arm], workloads: list[Workload], runs: list, settings: Settings, jobs: int
) -> dict[str, dict]:
    """The report's sections on reshaped sessions, replayed in one stage: Amplifier-shaped (issue 18),
    host-shaped beside the plain replay (issue 28), with the call shape alone for the configurations a
    user picks between, and the tight-window scenario (issue 29); each with the number of runs it took.
    The peers are not replayed here: these sections check this module's promises on other shapes."""
    from .arms import CHOICES
    from .peers import is_peer
    from .report import shaped_section
    from .report_host import calls_only_section, host_section, tight_section
    from .runner import run_pairs
    from .tight_scenario import tight_arms, tight_workload

    arms = [a for a in arms if not is_peer(a.engine)]
    tight_arm_list = tight_arms(arms)
    stages: dict[str, list] = {
        "shaped": [] if args.no_shaped else [(a, w) for a in arms for w in shaped_workloads(workloads)],
        "host": [] if args.no_host else [(a, w) for a in arms for w in host_workloads(workloads)],
        "host_calls": []
        if args.no_host
        else [(a, w) for a in arms if a.name in CHOICES for w in host_workloads(workloads, calls_only=True)],
        "tight": [],
    }
    tight_shape: dict = {}
    if scenarios_on(args) and not args.no_tight:
        tight, tight_shape = tight_workload(args.seed)
        stages["tight"] = [(a, tight) for a in tight_arm_list]
    pairs = [pair for stage in stages.values() for pair in stage]
    if not pairs:
        return {}
    with cli.StageProgress("replaying reshaped sessions") as progress:
        done = run_pairs(pairs, settings, jobs, not args.no_tiktoken, progress)
    sections = {
        "shaped": lambda done: shaped_section(arms, done, settings),
        "host": lambda done: host_section(arms, runs, done, settings),
        "host_calls": lambda done: calls_only_section(arms, done, settings),
        "tight": lambda done: tight_section(tight_arm_list, done, settings, tight_shape),
    }
    out: dict[str, dict] = {}
    for name, stage in stages.items():
        stage_runs, done = done[: len(stage)], done[len(stage) :]
        if stage_runs:
            out[name] = {**sections[name](stage_runs), "runs": len(stage_runs)}
    return out


if __name__ == "__main__":
    raise SystemExit(main())
