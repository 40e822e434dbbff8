"""Hot-path benchmark: milliseconds per `get_messages_for_request` with and without the count cache.

Replays the longest shipped transcripts and a ~2,200-message session built by concatenating them
(tool-call ids made unique), the same session Amplifier-shaped (evaluation/shaped.py: hook injections
stored inside tool groups, blocks, thinking), with the budget at 30% of each session's estimated size, and compares
the module against a reference that re-estimates the whole history on every call (the original's
approach). `ser ms` is one full re-serialization of the history: every stored message rebuilt in
its wire form (`_seq` stripped), which the request path used to do on every request; `p50/ser` is
our p50 request against it, and `json ms` one `json.dumps` of that history, all in the same run.
Run: `uv run python -m evaluation.benchmarks.bench_request_path [--longest 3] [--workload PATH ...]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import time
import timeit
from pathlib import Path
from typing import Any

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.estimate import CountCache, estimate_message, wire_form

from .. import cli
from ..shaped import shape

ROOT = Path(__file__).resolve().parent.parent.parent
TRANSCRIPTS = ROOT / "tests" / "data" / "workloads"
PROG = "python -m evaluation.benchmarks.bench_request_path"
STAMP = "2026-01-01T00:00:00.000+00:00"


class _NoCache(CountCache):
    """Counts every message afresh: what a cache-less implementation does on every call."""

    def count(self, message: dict[str, Any]) -> int:
        return self.counter(wire_form(message))


class ReferenceManager(SimpleContextManager):
    """The same module with the per-`_seq` cache switched off (the straightforward version)."""

    def _counts(self) -> CountCache:
        return _NoCache(estimate_message)


def concatenate(sessions: list[list[dict[str, Any]]], target_messages: int) -> list[dict[str, Any]]:
    """One long session: the first system prompt, then every session's turns with unique call ids."""
    out: list[dict[str, Any]] = [sessions[0][0]]
    round_no = 0
    while len(out) < target_messages:
        for index, session in enumerate(sessions):
            tag = f"r{round_no}s{index}-"
            for message in session:
                if message["role"] == "system":
                    continue
                message = dict(message)
                if message.get("tool_calls"):
                    message["tool_calls"] = [{**call, "id": tag + call["id"]} for call in message["tool_calls"]]
                if message.get("tool_call_id"):
                    message["tool_call_id"] = tag + message["tool_call_id"]
                out.append(message)
        round_no += 1
    return out[:target_messages]


async def replay(cls: type[SimpleContextManager], messages: list[dict[str, Any]], budget: int) -> list[float]:
    """Milliseconds of every request of one replay."""
    manager = cls(max_tokens=budget + 800)
    timings = []
    for message in messages:
        if message["role"] == "assistant":
            start = time.perf_counter()
            await manager.get_messages_for_request()
            timings.append((time.perf_counter() - start) * 1000)
        await manager.add_message({**message, "metadata": {"timestamp": STAMP}})
    return timings


def reserialize_ms(messages: list[dict[str, Any]]) -> tuple[float, float]:
    """Median milliseconds of one wire-form pass over the whole stored history, and of one `json.dumps`."""
    stored = [{**m, "metadata": {"timestamp": STAMP, "_seq": i}} for i, m in enumerate(messages)]
    wire = [wire_form(m) for m in stored]
    passes = timeit.repeat(lambda: [wire_form(m) for m in stored], number=1, repeat=9)
    dumps = timeit.repeat(lambda: json.dumps(wire), number=1, repeat=5)
    return statistics.median(passes) * 1000, statistics.median(dumps) * 1000


def summarize(timings: list[float]) -> dict[str, float]:
    ordered = sorted(timings)
    return {
        "requests": len(ordered),
        "p50": statistics.median(ordered),
        "p90": ordered[int(0.9 * (len(ordered) - 1))],
        "total": sum(ordered),
    }


async def run(longest: int, paths: list[str] | None = None) -> list[dict[str, Any]]:
    sessions = sorted(cli.sessions(paths, TRANSCRIPTS).values(), key=len, reverse=True)
    cases = [(f"longest #{i + 1} ({len(s)} msgs)", s) for i, s in enumerate(sessions[:longest])]
    big = concatenate(sessions[:6], 2200)
    cases.append((f"concatenated ({len(big)} msgs)", big))
    shaped = shape(big, seed=1)
    cases.append((f"shaped concat. ({len(shaped)} msgs)", shaped))  # hook injections inside groups
    rows = []
    for name, messages in cases:
        budget = int(sum(estimate_message(m) for m in messages) * 0.30)
        ours = summarize(await replay(SimpleContextManager, messages, budget))
        ref = summarize(await replay(ReferenceManager, messages, budget))
        serialize, dumps = reserialize_ms(messages)
        row = {"session": name, "budget": budget, "ours": ours, "reference": ref, "serialize_ms": serialize}
        rows.append({**row, "json_ms": dumps})
    return rows


def main(argv: list[str] | None = None) -> int:
    """Print milliseconds per request, ours against the cache-less reference."""
    p = cli.Parser(PROG, __doc__)
    p.add_argument("--longest", type=cli.positive_int, default=3, metavar="N", help="how many of the longest sessions")
    cli.add_workload(p, "tests/data/workloads")
    return cli.guard(PROG, lambda: _run(p.parse_args(sys.argv[1:] if argv is None else argv)))


def _run(args: argparse.Namespace) -> int:
    cli.sessions(args.workload, TRANSCRIPTS)  # every file checked before the work
    logging.disable(logging.WARNING)
    rows = asyncio.run(run(args.longest, args.workload))
    header = (
        f"{'session':32} {'budget':>8} {'p50 ms':>8} {'p90 ms':>8} {'ref p50':>8} {'ref p90':>8} {'p50 x':>6}"
        f" {'ser ms':>7} {'p50/ser':>7} {'json ms':>7}"
    )
    print(header)
    for row in rows:
        ours, ref = row["ours"], row["reference"]
        print(
            f"{row['session']:32} {row['budget']:>8,} {ours['p50']:>8.3f} {ours['p90']:>8.3f} "
            f"{ref['p50']:>8.3f} {ref['p90']:>8.3f} {ref['p50'] / ours['p50']:>6.1f}"
            f" {row['serialize_ms']:>7.3f} {ours['p50'] / row['serialize_ms']:>7.1%} {row['json_ms']:>7.2f}"
        )
        print(f"{'':32} total ms: ours {ours['total']:,.1f}, reference {ref['total']:,.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
