"""Per-request time of the evidence presets against the default, interleaved so machine load hits all alike.

Replays every transcript in tests/data/workloads/ with the budget at 30% of its estimated size, asking for a
view before each assistant message, for each configuration in turn, `--rounds` times; prints the p50 and
p90 of `get_messages_for_request`. Run: `uv run python -m evaluation.benchmarks.bench_evidence`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.estimate import estimate_tokens

from .. import cli

PROG = "python -m evaluation.benchmarks.bench_evidence"

TRANSCRIPTS = Path(__file__).resolve().parent.parent.parent / "tests" / "data" / "workloads"
CONFIGS: dict[str, dict[str, Any]] = {
    "default": {},
    "evidence": {"preset": "evidence"},
    "evidence_lean": {"preset": "evidence_lean"},
    "evidence_balanced": {"preset": "evidence_balanced"},
}
KEPT_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


async def _replay(messages: list[dict], config: dict[str, Any], out: list[float], fraction: float) -> None:
    ctx = SimpleContextManager(**config)
    budget = max(2048, int(estimate_tokens(messages) * fraction))
    for message in messages:
        if message["role"] == "assistant":
            start = time.perf_counter()
            await ctx.get_messages_for_request(token_budget=budget)
            out.append((time.perf_counter() - start) * 1000)
        kept = {k: v for k, v in message.items() if k in KEPT_KEYS}
        await ctx.add_message({**kept, "metadata": {"timestamp": "2026-01-01T00:00:00.000+00:00"}})


def main(argv: list[str] | None = None) -> int:
    """Print p50/p90 ms per request of each preset against the default."""
    p = cli.Parser(PROG, __doc__)
    p.add_argument("--rounds", type=cli.positive_int, default=3, metavar="N", help="replays of every session")
    cli.add_window_fraction(p, 0.3, "the budget as a share of each session's estimated size")
    cli.add_workload(p, "tests/data/workloads")
    return cli.guard(PROG, lambda: _run(p.parse_args(sys.argv[1:] if argv is None else argv)))


def _run(args: argparse.Namespace) -> int:
    sessions = list(cli.sessions(args.workload, TRANSCRIPTS).values())  # every file checked before the work
    logging.disable(logging.WARNING)  # over-budget warnings of tiny windows are not what is measured
    times: dict[str, list[float]] = {name: [] for name in CONFIGS}
    for _ in range(args.rounds):
        for messages in sessions:
            for name, config in CONFIGS.items():
                asyncio.run(_replay(messages, config, times[name], args.window_fraction))
    base = statistics.median(times["default"])
    for name, values in times.items():
        ordered = sorted(values)
        p50, p90 = statistics.median(values), ordered[int(len(ordered) * 0.9)]
        print(f"{name:17} requests={len(values)} p50={p50:.3f} ms ({p50 / base:.2f}x default) p90={p90:.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
