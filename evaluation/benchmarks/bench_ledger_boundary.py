"""What a compaction boundary costs with the evidence ledger, as the history grows (issue 37.12).

The shipped transcripts concatenated (evaluation.benchmarks.bench_scale.build_session) to N messages; a
manager (`preset: evidence`, or the default) is given N of them at once, asked for a view (the first
request: a boundary that reads every removed message), then given the next 400 one at a time with a
request before each assistant message, against a 150,000-token budget. Times are the process's CPU time
(`time.process_time`), so other processes on a shared machine weigh less; `--rounds` repeats each size
and keeps the medians. Per N it prints the first request,
the median boundary and the median other request in ms, and the ratio of the largest N's boundary to the
smallest's, measured in the same run. A boundary whose work followed only what changed since the last one
would keep that ratio near 1; one that rescores the whole removed history grows with N.

Run: `uv run python -m evaluation.benchmarks.bench_ledger_boundary` (`--sizes 2000 10000`, `--preset NAME`,
`--rounds N`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time
from typing import Any

from amplifier_module_context_simple import PRESETS, SimpleContextManager

from .. import cli
from .bench_scale import build_session

PROG = "python -m evaluation.benchmarks.bench_ledger_boundary"

BUDGET = 150_000
TAIL = 400  # messages added one at a time after the bulk


async def measure(size: int, config: dict[str, Any]) -> dict[str, float]:
    """ms of the first request after the bulk add, and medians of the later boundaries and other requests."""
    messages = build_session(size + TAIL)
    ctx = SimpleContextManager(**config)
    for message in messages[:size]:
        await ctx.add_message(message)
    start = time.process_time()
    await ctx.get_messages_for_request(token_budget=BUDGET)
    first = (time.process_time() - start) * 1_000
    boundaries: list[float] = []
    others: list[float] = []
    for message in messages[size:]:
        if message["role"] == "assistant":
            before = ctx._last_compaction_stats
            start = time.process_time()
            await ctx.get_messages_for_request(token_budget=BUDGET)
            elapsed = (time.process_time() - start) * 1_000
            (boundaries if ctx._last_compaction_stats is not before else others).append(elapsed)
        await ctx.add_message(message)
    return {
        "first_ms": first,
        "boundary_ms": statistics.median(boundaries) if boundaries else float("nan"),
        "boundaries": len(boundaries),
        "other_ms": statistics.median(others) if others else float("nan"),
    }


async def _median_of(rounds: int, size: int, config: dict[str, Any]) -> dict[str, float]:
    runs = [await measure(size, config) for _ in range(rounds)]
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


async def main_async(sizes: list[int], preset: str, rounds: int = 3) -> int:
    logging.disable(logging.WARNING)  # the OVER BUDGET warnings of a concatenated session are not the point
    configs = {"default": {}, preset: {"preset": preset}}
    for name, config in configs.items():
        rows = {size: await _median_of(rounds, size, config) for size in sizes}
        for size, row in rows.items():
            print(
                f"{name:>10} {size:>6} messages: first {row['first_ms']:8.1f} ms, "
                f"boundary {row['boundary_ms']:8.1f} ms (n={row['boundaries']}), other {row['other_ms']:6.2f} ms"
            )
        small, large = rows[min(sizes)], rows[max(sizes)]
        print(f"{name:>10} boundary {max(sizes)}/{min(sizes)}: {large['boundary_ms'] / small['boundary_ms']:.2f}x")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Print, per size, the first request, a boundary and the other requests, and the boundary's growth."""
    p = cli.Parser(PROG, __doc__)
    p.add_argument("--sizes", type=cli.positive_int, nargs="+", default=[2_000, 10_000], metavar="N", help="sizes")
    p.add_argument("--preset", default="evidence", metavar="NAME", help="the ledger preset to time")
    p.add_argument("--rounds", type=cli.positive_int, default=3, metavar="N", help="runs per size (medians kept)")
    return cli.guard(PROG, lambda: _run(p.parse_args(sys.argv[1:] if argv is None else argv)))


def _run(args: argparse.Namespace) -> int:
    if args.preset not in PRESETS:
        raise cli.unknown("preset", args.preset, PRESETS)
    return asyncio.run(main_async(sorted(args.sizes), args.preset, args.rounds))


if __name__ == "__main__":
    sys.exit(main())
