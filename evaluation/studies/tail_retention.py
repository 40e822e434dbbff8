"""Tail retention: how often a truncated tool result keeps its last line, head vs head_tail.

Every shipped transcript (tests/data/workloads) is replayed message by message with a view after
each one, at a budget of 30% of the session's estimated size. Each tool result that appears
truncated in any view is checked once: does its last non-blank line survive in the truncated text?
Arms: the shipped default (250 chars, head) and head / head_tail at the same token budget (62 and
500 tokens). Results are pooled and split by source (msa, agentperf, taubench). A last line longer
than half the budget cannot fit a head_tail tail, so the share among short last lines is also given.
Run: `uv run python -m evaluation.studies.tail_retention [--window-fraction 0.3] [--workload PATH ...]`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amplifier_module_context_simple import SimpleContextManager

from .. import cli
from ..wording import plural

TRANSCRIPTS = Path(__file__).resolve().parent.parent.parent / "tests" / "data" / "workloads"
PROG = "python -m evaluation.studies.tail_retention"
STAMP = "2026-01-01T00:00:00.000+00:00"
LEGACY_CHARS = 250
ARMS: dict[str, dict[str, Any]] = {
    "default (250 chars, head)": {},
    "head, 62 tok": {"tool_result_budget_tokens": 62, "tool_result_shape": "head"},
    "head_tail, 62 tok": {"tool_result_budget_tokens": 62, "tool_result_shape": "head_tail"},
    "head, 500 tok": {"tool_result_budget_tokens": 500, "tool_result_shape": "head"},
    "head_tail, 500 tok": {"tool_result_budget_tokens": 500, "tool_result_shape": "head_tail"},
}


@dataclass
class Tally:
    """Truncated results, how many kept their last line, and the same for short last lines."""

    truncated: int = 0
    kept: int = 0
    short: int = 0
    short_kept: int = 0
    results: int = 0  # tool results in the transcripts
    absent_at_end: int = 0  # of which missing from the last view (removed by the ladder)

    def add(self, other: Tally) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


def load(path: Path) -> list[dict[str, Any]]:
    """A transcript, each message stamped with a fixed timestamp and its line index."""
    return stamped(cli.sessions([str(path)], TRANSCRIPTS)[path.stem])


def stamped(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of the messages with a fixed timestamp and their index."""
    return [{**m, "metadata": {"timestamp": STAMP, "ix": index}} for index, m in enumerate(messages)]


def last_line(text: str) -> str:
    stripped = text.rstrip()
    return stripped.rsplit("\n", 1)[-1].strip() if stripped else ""


def budget_chars(config: dict[str, Any]) -> int:
    tokens = config.get("tool_result_budget_tokens")
    return tokens * 4 if tokens else LEGACY_CHARS


async def replay(
    messages: list[dict[str, Any]], budget: int, config: dict[str, Any]
) -> tuple[dict[int, str], set[int]]:
    """Truncated text of every tool result seen truncated in any view (by line index); the last view's indices."""
    cm = SimpleContextManager(**config)
    seen: dict[int, str] = {}
    view: list[dict[str, Any]] = []
    for message in messages:
        await cm.add_message(message)
        view = await cm.get_messages_for_request(token_budget=budget)
        for item in view:
            if item.get("_truncated"):
                seen[item["metadata"]["ix"]] = item["content"]
    return seen, {m["metadata"]["ix"] for m in view if "ix" in (m.get("metadata") or {})}


def tally(messages: list[dict[str, Any]], seen: dict[int, str], last_view: set[int], half_budget: int) -> Tally:
    tools = [ix for ix, m in enumerate(messages) if m["role"] == "tool"]
    out = Tally(results=len(tools), absent_at_end=sum(ix not in last_view for ix in tools))
    for ix, text in seen.items():
        line = last_line(messages[ix]["content"])
        kept = bool(line) and line in text
        out.truncated += 1
        out.kept += kept
        if len(line) <= half_budget:
            out.short += 1
            out.short_kept += kept
    return out


def measure(fraction: float, sessions: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Tally]]:
    """Tallies by arm, then by source (the stem's prefix; and "pooled")."""
    results: dict[str, dict[str, Tally]] = {arm: {"pooled": Tally()} for arm in ARMS}
    for stem, raw in sessions.items():
        messages = stamped(raw)
        source = stem.split("__", 1)[0]
        budget = int(sum(len(str(m)) // 4 for m in messages) * fraction)
        for arm, config in ARMS.items():
            seen, last_view = asyncio.run(replay(messages, budget, config))
            counts = tally(messages, seen, last_view, budget_chars(config) // 2)
            results[arm]["pooled"].add(counts)
            results[arm].setdefault(source, Tally()).add(counts)
    return results


def share(part: int, whole: int) -> str:
    return f"{part}/{whole} = {100 * part / whole:5.1f}%" if whole else f"{part}/{whole} =   n/a"


def report(results: dict[str, dict[str, Tally]], fraction: float, sessions: int) -> str:
    lines = [
        f"{plural(sessions, 'session')}, budget {fraction:.0%} of each session's estimated tokens, "
        "a view after every message",
        f"{'arm':<27}{'source':<11}{'last line kept / truncated':>28}{'among last lines <= budget/2':>31}"
        f"{'results absent from last view':>32}",
    ]
    for arm, by_source in results.items():
        for source in ["pooled", *sorted(k for k in by_source if k != "pooled")]:
            t = by_source[source]
            lines.append(
                f"{arm:<27}{source:<11}{share(t.kept, t.truncated):>28}{share(t.short_kept, t.short):>31}"
                f"{share(t.absent_at_end, t.results):>32}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the tail-retention table."""
    p = cli.Parser(PROG, __doc__)
    cli.add_window_fraction(p, 0.3, "the budget as a share of each session's estimated size")
    cli.add_workload(p, "tests/data/workloads")
    return cli.guard(PROG, lambda: _run(p.parse_args(sys.argv[1:] if argv is None else argv)))


def _run(args: argparse.Namespace) -> int:
    sessions = cli.sessions(args.workload, TRANSCRIPTS)  # checked before the work
    logging.disable(logging.WARNING)
    print(report(measure(args.window_fraction, sessions), args.window_fraction, len(sessions)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
