"""Compaction boundaries per session: progressive vs the summary strategy with and without its refire levers.

Run: `uv run python -m evaluation.studies.summary_refire [--workload PATH ...] [--window-fraction 0.3]`
(`--sweep` tries a grid of lever values instead).

Each shipped transcript is replayed the way an orchestrator drives a context manager: messages are
added in order (with a frozen timestamp) and a view is requested before every assistant message; the
event loop is then yielded to a few times, as a real provider round trip would, so a background
summary lands. The summarizer is scripted and deterministic (the first line of each summarized
message, capped): a mechanism test, not a quality claim. The budget forces compaction: the system
prompt plus `--window-fraction` (30%) of the rest of the session, plus the 800-token notice reserve, so a
session whose system prompt alone would overflow the budget still measures the conversation.

A boundary is a request on which a new `context:compaction` happened (the module's own definition,
the event a grow-only prompt cache pays a cold rebuild for). Every view is also checked: no
provider-invalid tool pairing, the same system prompt bytes on every request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.estimate import estimate_tokens
from amplifier_module_context_simple.repair import view_problems

from .. import cli
from ..wording import plural

ROOT = Path(__file__).resolve().parent.parent.parent
WORKLOAD_DIRS = (ROOT / "tests" / "data" / "workloads", ROOT / "evaluation" / "workloads")
PROG = "python -m evaluation.studies.summary_refire"
NOTICE_RESERVE = 800
TIMESTAMP = "2025-01-01T00:00:00.000+00:00"
YIELDS = 10
SUMMARY_LINES, SUMMARY_LINE_CHARS = 24, 100

SUMMARY = {"compaction_strategy": "summary"}
# Each lever at its best value in --sweep; the floor is a share of the effective budget (B).
REARM_BELOW = 0.40
COOLDOWN = 16
MIN_ABSORB = 0.55
ARMS: list[tuple[str, dict[str, Any]]] = [
    ("progressive", {}),
    ("summary", SUMMARY),
    (f"rearm<{REARM_BELOW}", {**SUMMARY, "summary_rearm_below": REARM_BELOW}),
    (f"cooldown={COOLDOWN}", {**SUMMARY, "summary_cooldown_requests": COOLDOWN}),
    (f"floor={MIN_ABSORB}B", {**SUMMARY, "summary_min_absorb_tokens": MIN_ABSORB}),
    (
        "all three",
        {
            **SUMMARY,
            "summary_rearm_below": REARM_BELOW,
            "summary_cooldown_requests": COOLDOWN,
            "summary_min_absorb_tokens": MIN_ABSORB,
        },
    ),
]


class ScriptedSummarizer:
    """A deterministic provider.complete(): the header line of each summarized message, capped."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: Any, **_: Any) -> Any:
        from amplifier_core.message_models import ChatResponse, TextBlock

        self.calls += 1
        text = request.messages[-1].content
        text = text if isinstance(text, str) else ""
        heads = [line.strip()[:SUMMARY_LINE_CHARS] for line in text.splitlines() if line.startswith("[")]
        more = [f"... and {len(heads) - SUMMARY_LINES} more messages"] if len(heads) > SUMMARY_LINES else []
        body = "\n".join(["Summary of earlier conversation (scripted):", *heads[:SUMMARY_LINES], *more])
        return ChatResponse(content=[TextBlock(text=body)])


@dataclass
class Result:
    """One arm on one session."""

    requests: int = 0
    boundaries: int = 0
    summary_calls: int = 0
    absorbed: int = 0
    faults: list[str] = field(default_factory=list)


def stamped(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of the messages with a fixed timestamp."""
    return [{**m, "metadata": {"timestamp": TIMESTAMP}} for m in messages]


def token_budget(messages: list[dict[str, Any]], fraction: float) -> int:
    """The system prompt, `fraction` of the rest, and the notice reserve (so compaction must happen)."""
    system = estimate_tokens([m for m in messages if m.get("role") == "system"])
    rest = estimate_tokens([m for m in messages if m.get("role") != "system"])
    return NOTICE_RESERVE + system + int(rest * fraction)


async def replay(messages: list[dict[str, Any]], config: dict[str, Any], budget: int) -> Result:
    ctx = SimpleContextManager(**config)
    provider = ScriptedSummarizer()
    result, system_bytes = Result(), None
    for message in messages:
        if message["role"] == "assistant":
            before = ctx._last_compaction_stats
            view = await ctx.get_messages_for_request(token_budget=budget, provider=provider)
            result.requests += 1
            stats = ctx._last_compaction_stats
            result.boundaries += stats is not None and stats is not before
            systems = json.dumps([m for m in view if m.get("role") == "system"])
            system_bytes = system_bytes or systems
            if view_problems(view) or systems != system_bytes:
                result.faults.append(f"request {result.requests}: {view_problems(view)[:1] or 'system prompt changed'}")
            for _ in range(YIELDS):
                await asyncio.sleep(0)
        await ctx.add_message(message)
    result.summary_calls, result.absorbed = provider.calls, ctx._summary_absorbed_count
    return result


def run(
    sessions: dict[str, list[dict[str, Any]]], arms: list[tuple[str, dict[str, Any]]], fraction: float
) -> dict[str, dict[str, Result]]:
    table: dict[str, dict[str, Result]] = {}
    for stem, raw in sessions.items():
        messages = stamped(raw)
        budget = token_budget(messages, fraction)
        table[stem] = {name: asyncio.run(replay(messages, config, budget)) for name, config in arms}
    return table


def render(table: dict[str, dict[str, Result]], arms: list[str]) -> str:
    """A markdown table of boundaries per session, totals, and sessions worse than progressive."""
    width = max(len(name) for name in table)
    header = f"| {'session':<{width}} | req | " + " | ".join(arms) + " |"
    lines = [header, "|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|"]
    for name, row in table.items():
        cells = [f"{row[a].boundaries:>{len(a)}}" for a in arms]
        lines.append(f"| {name:<{width}} | {row[arms[0]].requests:>3} | " + " | ".join(cells) + " |")
    totals = [f"{sum(r[a].boundaries for r in table.values()):>{len(a)}}" for a in arms]
    worse = [f"{sum(r[a].boundaries > r[arms[0]].boundaries for r in table.values()):>{len(a)}}" for a in arms]
    calls = [f"{sum(r[a].summary_calls for r in table.values()):>{len(a)}}" for a in arms]
    lines.append(f"| {'TOTAL boundaries':<{width}} |     | " + " | ".join(totals) + " |")
    lines.append(f"| {'sessions above progressive':<{width}} |     | " + " | ".join(worse) + " |")
    lines.append(f"| {'summarizer calls':<{width}} |     | " + " | ".join(calls) + " |")
    return "\n".join(lines)


def sweep_arms() -> list[tuple[str, dict[str, Any]]]:
    arms = [("progressive", {}), ("summary", SUMMARY)]
    arms += [(f"rearm<{v}", {**SUMMARY, "summary_rearm_below": v}) for v in (0.3, 0.4, 0.5, 0.55)]
    arms += [(f"cool={v}", {**SUMMARY, "summary_cooldown_requests": v}) for v in (2, 4, 8, 16)]
    arms += [(f"floor={v}B", {**SUMMARY, "summary_min_absorb_tokens": v}) for v in (0.25, 0.45, 0.5, 0.55, 0.6)]
    return arms


def main(argv: list[str] | None = None) -> int:
    """Print boundaries per session and arm; exit 1 when a view broke an invariant."""
    p = cli.Parser(PROG, __doc__)
    cli.add_workload(p, "tests/data/workloads")
    cli.add_window_fraction(p, 0.30, "share of the conversation (beside the system prompt) that fits")
    p.add_argument("--sweep", action="store_true", help="try a grid of lever values instead")
    p.add_argument("--limit", type=cli.positive_int, metavar="N", help="only the first N sessions (by name)")
    return cli.guard(PROG, lambda: _run(p.parse_args(sys.argv[1:] if argv is None else argv)))


def _run(args: argparse.Namespace) -> int:
    default = next(d for d in WORKLOAD_DIRS if d.is_dir())
    sessions = dict(list(cli.sessions(args.workload, default).items())[: args.limit])  # checked before the work
    arms = sweep_arms() if args.sweep else ARMS
    logging.getLogger("amplifier_module_context_simple").setLevel(logging.ERROR)
    table = run(sessions, arms, args.window_fraction)
    source = ", ".join(args.workload or [str(default.relative_to(ROOT))])
    fraction = args.window_fraction
    print(f"{plural(len(sessions), 'session')} from {source}, budget = system + {fraction:.0%} of the rest")
    print("B = the effective budget: summary_min_absorb_tokens=0.55 means int(0.55 * B) tokens\n")
    print(render(table, [name for name, _ in arms]))
    faults = [f"{s} / {a}: {f}" for s, row in table.items() for a, r in row.items() for f in r.faults[:1]]
    print("\ninvariant faults:", "none" if not faults else "\n" + "\n".join(faults))
    return 1 if faults else 0


if __name__ == "__main__":
    raise SystemExit(main())
