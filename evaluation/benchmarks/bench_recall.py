"""Time of one `context_recall` search: p50/p90 over queries drawn from the history itself.

On the longest transcript of tests/data/workloads/ and on a 20,000-message session (the shipped
transcripts concatenated, as bench_scale builds it), each query is a distinctive token of a random
earlier message (found) or a token found nowhere (a full scan). Run:
`uv run python -m evaluation.benchmarks.bench_recall`.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from typing import Any

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.evidence_text import distinctive_tokens, message_text
from amplifier_module_context_simple.recall import RecallTool

from .. import cli
from .bench_scale import TRANSCRIPTS, build_session

PROG = "python -m evaluation.benchmarks.bench_recall"


async def _timings(messages: list[dict[str, Any]], queries: int, seed: int) -> dict[str, float]:
    ctx = SimpleContextManager()
    for message in messages:
        await ctx.add_message(message)
    tool, rng = RecallTool(ctx), random.Random(seed)
    found, missing = [], []
    for _ in range(queries):
        tokens = sorted(distinctive_tokens(message_text(rng.choice(ctx.messages))))
        query = rng.choice(tokens) if tokens else "loader"
        start = time.perf_counter()
        result = await tool.execute({"query": query})
        found.append((time.perf_counter() - start) * 1000)
        assert result.success
        start = time.perf_counter()
        await tool.execute({"query": f"absent-{rng.random()}"})
        missing.append((time.perf_counter() - start) * 1000)
    return {
        "messages": len(messages),
        "found_p50_ms": statistics.median(found),
        "found_p90_ms": sorted(found)[int(len(found) * 0.9)],
        "absent_p50_ms": statistics.median(missing),
        "absent_p90_ms": sorted(missing)[int(len(missing) * 0.9)],
    }


def main(argv: list[str] | None = None) -> int:
    """Print p50/p90 ms of a recall on the longest transcript and on a 20,000-message session."""
    p = cli.Parser(PROG, __doc__)
    p.add_argument("--queries", type=cli.positive_int, default=40, metavar="N", help="queries per session")
    p.add_argument("--size", type=cli.positive_int, default=20_000, metavar="N", help="messages of the long session")
    return cli.guard(PROG, lambda: _run(p.parse_args(sys.argv[1:] if argv is None else argv)))


def _run(args: argparse.Namespace) -> int:
    sessions = cli.sessions(None, TRANSCRIPTS)
    name, longest = max(sessions.items(), key=lambda item: len(item[1]))
    for label, messages in (
        (f"longest transcript ({name})", longest),
        (f"{args.size:,} messages", build_session(args.size)),
    ):
        row = asyncio.run(_timings(messages, args.queries, seed=7))
        print(f"{label}: {row['messages']:,} messages")
        print(f"  found:  p50 {row['found_p50_ms']:.1f} ms, p90 {row['found_p90_ms']:.1f} ms")
        print(f"  absent: p50 {row['absent_p50_ms']:.1f} ms, p90 {row['absent_p90_ms']:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
