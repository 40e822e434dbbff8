"""Plain against host-shaped, one host change at a time: which part of the gap is
the module, which the session.

The main evaluation replays each real transcript twice: as stored (plain) and as
Amplifier's loop-streaming stores it (evaluation/host_shaped.py). The host-
shaped replay changes several things at once; this study replays the transcripts
once per *variant*, adding the host's changes one at a time (cumulative rows),
and with --alone also each change on its own:

* calls: tool calls as `{"id", "tool", "arguments": {...}}` beside text and
  `tool_call` content blocks (nothing else changes);
* names: results carry the tool's `name` (billed: it is on the wire);
* thinking: a thinking block with its signature on half the assistant turns;
* wrapped: every result stored as the JSON of the whole result object (one
  line);
* hook_shell: hook-shell system messages between a call and its results;
* steering: steering user messages after a share of the tool groups;
* reminders: the status and todo reminders added to every request (billed; the
  module never sees them).

Every variant faces the provider window of the plain session (the module's
budget --window-fraction of its true size, 0.3 as in `python -m evaluation`),
through the main harness's driver and metrics. Per configuration and variant it
prints the evidence line and token miss after the first compaction, the requests
whose view holds the evidence ledger (of the requests after the first
compaction) and its mean number of lines, boundaries, and the bill against the
plain replay's. `--module-counter content` runs every configuration with
`token_counter: content` (sizes read calls through calls.py): the call shape
alone must then decide exactly as plain. Nothing is written. Run: `uv run python
-m evaluation.studies.host_parity --split tune|report [--alone]`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from typing import Any

from .. import cli
from ..arms import Arm, arm_by_name
from ..driver import Run, Settings
from ..host_shaped import PARTS, host_shape
from ..metrics import arm_totals, run_metrics
from ..workloads import Workload

PROG = "python -m evaluation.studies.host_parity"
ARMS = ("progressive", "preset_evidence", "preset_evidence_balanced", "preset_evidence_lean")
COUNTERS = ("estimate", "content")


@dataclass(frozen=True)
class Variant:
    """A way to store the transcripts: the host's parts applied, and whether the reminders are billed."""

    name: str
    parts: tuple[str, ...] = ()
    reminders: bool = False


CUMULATIVE = [
    Variant("plain"),
    *(Variant(("" if i == 0 else "+ ") + part, PARTS[: i + 1]) for i, part in enumerate(PARTS)),
    Variant("+ reminders (= host)", PARTS, True),
]
ALONE = [*(Variant(f"{part} alone", (part,)) for part in PARTS[1:]), Variant("reminders alone", (), True)]


def variant_workloads(loads: list[Workload], variant: Variant) -> list[Workload]:
    """The real sessions stored as ``variant`` says, seeded by position as the main evaluation seeds them,
    each facing its plain session's window."""
    if not variant.parts and not variant.reminders:
        return loads
    return [
        Workload(
            f"{w.name} ({variant.name})",
            host_shape(w.messages, seed=i, parts=variant.parts) if variant.parts else w.messages,
            source=w.source,
            host_reminders=variant.reminders,
            sized_by=w.messages,
            recall_probe=False,
        )
        for i, w in enumerate(loads)
    ]


def figures(runs: list[Run]) -> dict[str, Any]:
    """One configuration's figures over one variant's runs."""
    totals = arm_totals([run_metrics(r) for r in runs], runs)
    after = [q for r in runs for q in _after_first_compaction(r)]
    ledgered = [q.ledger_lines for q in after if q.ledger_lines is not None]
    return {
        "line_miss": totals["evidence_line_miss"],
        "token_miss": totals["evidence_token_miss"],
        "ledger_share": len(ledgered) / len(after) if after else None,
        "ledger_lines": sum(ledgered) / len(ledgered) if ledgered else None,
        "boundaries": totals["boundaries"],
        "cost": totals["cost"],
        "invalid": totals["invalid_views"],
    }


def _after_first_compaction(run: Run) -> list[Any]:
    ok = [q for q in run.requests if q.error is None]
    first = next((i for i, q in enumerate(ok) if q.evidence is not None and not q.evidence.complete), len(ok))
    return ok[first:]


def measure(args: argparse.Namespace, variants: list[Variant]) -> dict[str, dict[str, dict[str, Any]]]:
    """{configuration: {variant: figures}} over the chosen half of the transcripts."""
    from ..runner import run_pairs

    loads = cli.real_workloads(None, True, args.split)
    extra = {} if args.module_counter == "estimate" else {"token_counter": args.module_counter}
    arms = [(lambda a: Arm(a.name, {**a.config, **extra}, a.notes, a.engine))(arm_by_name(n)) for n in ARMS]
    pairs = [(a, w) for v in variants for a in arms for w in variant_workloads(loads, v)]
    logging.disable(logging.WARNING)  # tight budgets warn by design
    with cli.StageProgress("replaying") as progress:
        runs = run_pairs(pairs, Settings(args.window_fraction), args.jobs or 2, not args.no_tiktoken, progress)
    out: dict[str, dict[str, dict[str, Any]]] = {a.name: {} for a in arms}
    n = len(loads)
    for v in variants:
        for a in arms:
            out[a.name][v.name], runs = figures(runs[:n]), runs[n:]
    return out


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def table(results: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """Per configuration, one line per variant; the bill against the same configuration's plain replay."""
    heads = ("variant", "line miss", "token miss", "ledger in", "ledger lines", "boundaries", "bill/plain")
    lines = []
    for arm, rows in results.items():
        plain = rows["plain"]
        lines += ["", arm, "  " + f"{heads[0]:<24}" + "".join(f"{h:>13}" for h in heads[1:])]
        for name, f in rows.items():
            cells = [_pct(f["line_miss"]), _pct(f["token_miss"]), _pct(f["ledger_share"])]
            cells.append("n/a" if f["ledger_lines"] is None else f"{f['ledger_lines']:.1f}")
            cells.append(f"{f['boundaries']:,}")
            cells.append(f"{f['cost'] / plain['cost']:.3f}x" if plain["cost"] else "n/a")
            lines.append("  " + f"{name:<24}" + "".join(f"{c:>13}" for c in cells))
    return lines


def main(argv: list[str] | None = None) -> int:
    """Print, per configuration and variant, the evidence miss, the ledger, boundaries and the bill."""
    p = cli.Parser(PROG, __doc__)
    cli.add_split(p)
    p.add_argument("--alone", action="store_true", help="also replay each host change on its own")
    p.add_argument(
        "--module-counter",
        choices=COUNTERS,
        default="estimate",
        help="the token_counter every configuration runs with (estimate: the module's default)",
    )
    cli.add_window_fraction(p, 0.3, "the module's budget as a share of each session's true size")
    cli.add_jobs(p, "worker processes (default 2)")
    cli.add_no_tiktoken(p)
    return cli.guard(PROG, lambda: _run(p.parse_args(sys.argv[1:] if argv is None else argv)))


def _run(args: argparse.Namespace) -> int:
    variants = CUMULATIVE + (ALONE if args.alone else [])
    results = measure(args, variants)
    half = f"the {args.split} half of the 26 transcripts" if args.split else "all 26 transcripts"
    print(
        f"{half}, window fraction {args.window_fraction}, module token_counter {args.module_counter}; "
        "miss after the first compaction"
    )
    print(*table(results), sep="\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
