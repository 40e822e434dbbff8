"""Per-request time of the evidence presets against the default, interleaved so machine load hits all alike.

Replays every transcript in tests/data/workloads/ with the budget at 30% of its estimated size, asking for a
view before each assistant message, for each configuration in turn, `--rounds` times; prints the p50 and
p90 of `get_messages_for_request`. Run: `uv run python -m evaluation.benchmarks.bench_evidence`.

`--huge` times the default against the presets on what one message can hold: a single-line 20 MB tool
result and a 5 MB log of 200,000 lines. Per case: `add_message` of it (in evidence mode a message with
over 200,000 characters of text is read for the ledger there: a few passes in C, per-line work on a
bounded number of lines), the request that first carries it (counted, clipped to
`max_tool_result_bytes` in the view), the boundary that removes it (the ledger uses what was read) and
the median of the other boundaries.
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


def huge_session(content: str) -> list[dict]:
    """A user turn, a call answered by `content`, then rounds of small results, each asked for a view."""

    def turn(k: int, text: str) -> list[dict]:
        call = {"id": f"c{k}", "type": "function", "function": {"name": "bash", "arguments": f'{{"cmd": "step {k}"}}'}}
        return [
            {"role": "assistant", "content": f"step {k}", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": text},
        ]

    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "read the dump"}]
    messages += turn(0, content)
    for k in range(1, 40):
        messages += turn(k, f"result_{k} " + "output line of a small step\n" * 60)
    return messages


HUGE_SEQ = 3  # the huge result: after the system prompt, the user turn and the call


async def _boundaries(messages: list[dict], config: dict[str, Any]) -> dict[str, float]:
    """Ms of storing the huge result, of the request that first carries it, of the boundary that removes
    it, and the median of the other boundaries."""
    events: list[str] = []

    class Hooks:
        async def emit(self, name: str, payload: dict[str, Any]) -> None:
            events.append(name)

    ctx = SimpleContextManager(hooks=Hooks(), **config)
    ms: dict[str, float] = {}
    others = []
    for message in messages:
        if message["role"] == "assistant":
            before = events.count("context:compaction")
            gone = HUGE_SEQ in ctx._removed_seqs
            start = time.perf_counter()
            await ctx.get_messages_for_request(token_budget=20_000)
            elapsed = (time.perf_counter() - start) * 1000
            if "carry" not in ms and len(ctx.messages) > HUGE_SEQ:
                ms["carry"] = elapsed
            elif not gone and HUGE_SEQ in ctx._removed_seqs:
                ms["removal"] = elapsed
            elif events.count("context:compaction") > before:
                others.append(elapsed)
        start = time.perf_counter()
        await ctx.add_message({**message, "metadata": {"timestamp": "2026-01-01T00:00:00.000+00:00"}})
        if len(ctx.messages) == HUGE_SEQ + 1:
            ms["store"] = (time.perf_counter() - start) * 1000
    assert {"carry", "removal"} <= set(ms), "the huge result must be carried, then removed"
    return {**ms, "others": statistics.median(others) if others else 0.0}


def huge(rounds: int) -> int:
    """Ms of the default and of the presets on a 20 MB line and on a 200,000-line log."""
    cases = {
        "20 MB single line": "x" * 20_000_000,
        "5 MB, 200,000 lines": "\n".join(f"{i:06d} row_{i} value={i * 7}" for i in range(200_000)),
    }
    columns = ("store", "carry", "removal", "others")
    for case, content in cases.items():
        messages = huge_session(content)
        runs = {name: [asyncio.run(_boundaries(messages, CONFIGS[name])) for _ in range(rounds)] for name in CONFIGS}
        ms = {name: {c: statistics.median(r[c] for r in rs) for c in columns} for name, rs in runs.items()}
        print(f"{case}: median ms of add_message (store), of the request that first carries it")
        print("(carry), of the boundary that removes it (removal) and of the other boundaries (others)")
        print(f"  {'':17} " + " ".join(f"{c:>8}" for c in columns))
        for name in CONFIGS:
            print(f"  {name:17} " + " ".join(f"{ms[name][c]:8.2f}" for c in columns))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Print p50/p90 ms per request of each preset against the default."""
    p = cli.Parser(PROG, __doc__)
    p.add_argument("--rounds", type=cli.positive_int, default=3, metavar="N", help="replays of every session")
    p.add_argument("--huge", action="store_true", help="time boundaries on a 20 MB line and a 200,000-line log")
    cli.add_window_fraction(p, 0.3, "the budget as a share of each session's estimated size")
    cli.add_workload(p, "tests/data/workloads")
    return cli.guard(PROG, lambda: _run(p.parse_args(sys.argv[1:] if argv is None else argv)))


def _run(args: argparse.Namespace) -> int:
    if args.huge:
        logging.disable(logging.WARNING)
        return huge(args.rounds)
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
