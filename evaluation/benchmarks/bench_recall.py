"""Time of one `context_recall` search, and the longest it holds the event loop.

Sessions: the longest transcript of tests/data/workloads/ and a 20,000-message session (the shipped
transcripts concatenated, as bench_scale builds it). Queries: a distinctive token of a random earlier
message as a literal (found) and as a regular expression (the same token escaped: the automaton reads
only the lines holding it), a token found nowhere (a full scan), and a regular expression with no
literal every match holds (`[0-9]{6}[a-f]{3}`: the automaton reads every character, so the 1 s budget
may stop it).

Then the patterns a review found to take Python's `re` seconds, each on the line that did it, in a small
session: `((a)+)+$` on 27 characters (11.9 s in Python's re), `(?:(?:a)+)+$` on 41, `.*a.*a.*a.*c`
and `(a+)(a+)(a+)(a+)c` on 900, and over one 3 MB result of 3,000 lines of 1,000 word characters
`\\w+:` (20.7 s) and `[a-z]+[0-9]` (no literal: the budget stops it inside the message).

Each row: p50, p90 and worst ms of `execute()` over `--queries` searches, and the longest the event
loop went without running another task during them (a ticker task counts, in CPU time of this
process, so other programs on a busy machine do not inflate it). All in one run. Run:
`uv run python -m evaluation.benchmarks.bench_recall`.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.evidence_text import distinctive_tokens, message_text
from amplifier_module_context_simple.recall import RecallTool

from .. import cli
from .bench_scale import TRANSCRIPTS, build_session

PROG = "python -m evaluation.benchmarks.bench_recall"
NO_LITERAL = "[0-9]{6}[a-f]{3}"
HUGE = ("a" * 1_000 + "\n") * 3_000
ISSUE_ROWS = [  # (label, pattern, the line)
    ("((a)+)+$, 27 chars", "((a)+)+$", "a" * 26 + "!"),
    ("(?:(?:a)+)+$, 41 chars", "(?:(?:a)+)+$", "a" * 40 + "!"),
    (".*a.*a.*a.*c, 900 chars", ".*a.*a.*a.*c", "a" * 900),
    ("(a+)(a+)(a+)(a+)c, 900 chars", "(a+)(a+)(a+)(a+)c", "a" * 900),
    ("\\w+:, one 3 MB result", r"\w+:", HUGE),
    ("[a-z]+[0-9], one 3 MB result", "[a-z]+[0-9]", HUGE),
]


class LoopWatch:
    """A ticker task: the longest stretch the event loop ran no other task while it was watching, in CPU
    time of this process (so that other programs on a busy machine do not count)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._running = True
        self._task = asyncio.create_task(self._tick())

    async def _tick(self) -> None:
        last = time.process_time()
        while self._running:
            await asyncio.sleep(0)
            now = time.process_time()
            self.longest, last = max(self.longest, now - last), now

    async def stop(self) -> float:
        self._running = False
        await self._task
        return self.longest * 1000


async def _row(tool: RecallTool, inputs: list[dict[str, Any]]) -> dict[str, float]:
    """p50/p90/worst ms of the searches, the worst loop hold, and how many stopped at the time budget."""
    times, stopped = [], 0
    watch = LoopWatch()
    await asyncio.sleep(0)
    for arguments in inputs:
        start = time.perf_counter()
        result = await tool.execute(arguments)
        times.append((time.perf_counter() - start) * 1000)
        assert result.success, result.output
        stopped += "time limit" in result.output
        await asyncio.sleep(0)  # a host awaits between calls: a hold is one call's, not a run of them
    held = await watch.stop()
    ordered = sorted(times)
    return {
        "p50": statistics.median(times),
        "p90": ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))],
        "worst": ordered[-1],
        "held": held,
        "stopped": stopped,
        "n": len(times),
    }


async def _manager(messages: list[dict[str, Any]]) -> tuple[SimpleContextManager, RecallTool]:
    ctx = SimpleContextManager()
    for message in messages:
        await ctx.add_message(message)
    tool = RecallTool(ctx)
    await tool.execute({"query": "warm the text cache"})
    return ctx, tool


async def _session_rows(messages: list[dict[str, Any]], queries: int, seed: int) -> list[tuple[str, dict]]:
    ctx, tool = await _manager(messages)
    rng = random.Random(seed)
    tokens = []
    for _ in range(queries):
        found = sorted(distinctive_tokens(message_text(rng.choice(ctx.messages))))
        tokens.append(rng.choice(found) if found else "loader")
    kinds: list[tuple[str, Callable[[str], dict[str, Any]]]] = [
        ("literal, found", lambda token: {"query": token}),
        ("literal, absent", lambda token: {"query": f"absent-{rng.random()}"}),
        ("regex, found", lambda token: {"query": re.escape(token), "regex": True}),
        ("regex, no literal", lambda token: {"query": NO_LITERAL, "regex": True}),
    ]
    return [(label, await _row(tool, [make(token) for token in tokens])) for label, make in kinds]


async def _issue_rows(runs: int) -> list[tuple[str, dict]]:
    rows = []
    for label, pattern, line in ISSUE_ROWS:
        calls = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        messages = [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "", "tool_calls": [calls]},
            {"role": "tool", "tool_call_id": "c1", "content": line},
            {"role": "assistant", "content": "done"},
        ]
        _ctx, tool = await _manager(messages)
        rows.append((label, await _row(tool, [{"query": pattern, "regex": True}] * runs)))
    return rows


def _print(title: str, rows: list[tuple[str, dict]]) -> None:
    print(title)
    print(f"  {'query':<28}{'p50':>7}{'p90':>8}{'worst':>8}{'held':>7}  (ms)")
    for label, row in rows:
        late = f"  {row['stopped']}/{row['n']} at budget" if row["stopped"] else ""
        print(f"  {label:<28}{row['p50']:7.1f}{row['p90']:8.1f}{row['worst']:8.1f}{row['held']:7.0f}{late}")


def main(argv: list[str] | None = None) -> int:
    """Print p50/p90/worst ms of a recall, and the longest loop hold, per kind of query."""
    p = cli.Parser(PROG, __doc__)
    p.add_argument("--queries", type=cli.positive_int, default=40, metavar="N", help="queries per kind and session")
    p.add_argument("--size", type=cli.positive_int, default=20_000, metavar="N", help="messages of the long session")
    p.add_argument(
        "--runs",
        type=cli.positive_int,
        default=10,
        metavar="N",
        help="searches per pattern that made Python's re backtrack",
    )
    return cli.guard(PROG, lambda: _run(p.parse_args(sys.argv[1:] if argv is None else argv)))


def _run(args: argparse.Namespace) -> int:
    sessions = cli.sessions(None, TRANSCRIPTS)
    name, longest = max(sessions.items(), key=lambda item: len(item[1]))
    print("p50/p90/worst: one execute(); held: the longest the event loop ran no")
    print("other task (CPU ms of this process)")
    print(f"longest transcript ({len(longest):,} messages):\n  {name}")
    _print("", asyncio.run(_session_rows(longest, args.queries, seed=7)))
    _print(f"{args.size:,} messages:", asyncio.run(_session_rows(build_session(args.size), args.queries, seed=7)))
    _print("patterns that take Python's re 8 to 21 s each:", asyncio.run(_issue_rows(args.runs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
