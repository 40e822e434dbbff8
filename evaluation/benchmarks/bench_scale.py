"""Scale benchmark: a 50,000-message session and a single 20 MB tool result.

Session: the shipped transcripts concatenated (first system prompt kept, tool-call ids made unique
per copy, fixed timestamps) until 50,000 messages. At 1k, 5k, 20k and 50k messages it times
`get_messages_for_request` right after one more message is added (the steady state of a session),
in three arms: `fits` (budget far above the history: no compaction, the view is the whole history),
`compacting` (a 150k-token budget: sticky decisions replayed on every request) and
`compacting+factory` (the same with a system prompt factory, as Amplifier sessions run), and
`shaped+fits` / `shaped+compacting`: the same session as an Amplifier host stores it
(evaluation/shaped.py: system-role hook injections, half of them inside tool groups), and
`usage+estimate` / `usage+actual` / `usage+hybrid`: the compacting arm in each meter mode with the
provider's usage flowing (an `llm:response` with usage after every request, as every mounted session
receives; its input tokens are the estimate of the view sent). The first
request at each checkpoint (a compaction boundary after the bulk add) is reported apart. The slope is
a least-squares fit of milliseconds against thousands of messages; `x20k/1k` is the median at 20k
over the median at 1k, in the same run. Memory (`tracemalloc`, a separate pass since tracing slows
calls), per arm: bytes per message of the stored history alone, and retained after a long session
(the history plus every cache, after the boundary and 15 steady requests).

20 MB result: one user turn, one call and a single-line 20 MB result; first and repeated requests
per token counter, with and without spill, time and tracemalloc peak above the stored history.

Run: `uv run python -m evaluation.benchmarks.bench_scale` (`--quick` stops at 20k; `--arm NAME` runs only the
named arms; `--profile` prints the top functions of a 50k compacting request under cProfile; `--workload PATH`
picks the sessions).
Output also goes to `evaluation/out/bench_scale.json` (`--out FILE`).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import logging
import pstats
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from amplifier_module_context_simple import SimpleContextManager

from .. import cli
from ..shaped import shape

ROOT = Path(__file__).resolve().parent.parent.parent
TRANSCRIPTS = ROOT / "tests" / "data" / "workloads"
OUT = ROOT / "evaluation" / "out" / "bench_scale.json"
PROG = "python -m evaluation.benchmarks.bench_scale"
STAMP = "2026-01-01T00:00:00.000+00:00"
CHECKPOINTS = (1_000, 5_000, 20_000, 50_000)
TIMED_REQUESTS = 15
ARMS = {
    "fits": 10**9,
    "compacting": 150_000,
    "compacting+factory": 150_000,
    "shaped+fits": 10**9,  # Amplifier-shaped (evaluation/shaped.py): hook injections inside tool groups
    "shaped+compacting": 150_000,
    "usage+estimate": 150_000,  # usage events flowing, in each meter mode
    "usage+actual": 150_000,
    "usage+hybrid": 150_000,
}
USAGE_PREFIX = "usage+"
PROMPT = "You are a careful software engineer. Read before you write; run the tests you touch."
BIG = 20_000_000
Message = dict[str, Any]


def load_sessions(paths: list[str] | None = None) -> list[list[Message]]:
    """The named sessions (default: the shipped ones), checked."""
    return list(cli.sessions(paths, TRANSCRIPTS).values())


def unique_ids(message: Message, tag: str) -> Message:
    message = {**message, "metadata": {"timestamp": STAMP}}
    if message.get("tool_calls"):
        message["tool_calls"] = [{**call, "id": tag + call["id"]} for call in message["tool_calls"]]
    if message.get("tool_call_id"):
        message["tool_call_id"] = tag + message["tool_call_id"]
    return message


def build_session(target: int, paths: list[str] | None = None) -> list[Message]:
    """The shipped transcripts concatenated, one system prompt, unique call ids, `target` messages."""
    sessions = load_sessions(paths)
    out = [unique_ids(sessions[0][0], "")]
    copy_no = 0
    while len(out) < target:
        for index, session in enumerate(sessions):
            tag = f"c{copy_no}s{index}-"
            out += [unique_ids(m, tag) for m in session if m["role"] != "system"]
        copy_no += 1
    return out[:target]


async def add_range(ctx: SimpleContextManager, messages: list[Message], start: int, stop: int) -> None:
    for message in messages[start:stop]:
        await ctx.add_message(message)


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope in ms per 1,000 messages."""
    xs, ys = [n / 1_000 for n, _ in points], [ms for _, ms in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


async def manager(arm: str, messages: list[Message]) -> tuple[SimpleContextManager, list[Message]]:
    """The arm's manager and the messages to add."""
    if arm.startswith(USAGE_PREFIX):
        return SimpleContextManager(token_meter=arm.removeprefix(USAGE_PREFIX)), messages
    ctx = SimpleContextManager()
    if arm.startswith("shaped+"):
        return ctx, shape(messages, seed=1)[: len(messages)]
    if not arm.endswith("+factory"):
        return ctx, messages

    async def prompt() -> str:
        return PROMPT

    await ctx.set_system_prompt_factory(prompt)  # it replaces the stored system prompt in every view
    return ctx, messages


async def request(ctx: SimpleContextManager, arm: str) -> list[Message]:
    """One request; in a usage arm, followed by the provider's usage as a mounted session receives it."""
    view = await ctx.get_messages_for_request(token_budget=ARMS[arm])
    if arm.startswith(USAGE_PREFIX):
        await ctx._on_llm_response("llm:response", {"usage": {"input_tokens": ctx._last_sent_estimate}})
    return view


async def time_arm(arm: str, messages: list[Message], checkpoints: tuple[int, ...]) -> dict[str, Any]:
    """Per checkpoint: the boundary request after the bulk add, then steady-state requests."""
    ctx, messages = await manager(arm, messages)
    rows, added = [], 0
    for n in checkpoints:
        await add_range(ctx, messages, added, n - TIMED_REQUESTS)
        added = n - TIMED_REQUESTS
        start = time.perf_counter()
        await request(ctx, arm)
        first_ms = (time.perf_counter() - start) * 1_000
        timings = []
        for _ in range(TIMED_REQUESTS):
            await add_range(ctx, messages, added, added + 1)
            added += 1
            start = time.perf_counter()
            view = await request(ctx, arm)
            timings.append((time.perf_counter() - start) * 1_000)
        rows.append(
            {
                "messages": n,
                "view_messages": len(view),
                "first_request_ms": round(first_ms, 2),
                "median_ms": round(statistics.median(timings), 3),
                "p90_ms": round(sorted(timings)[int(len(timings) * 0.9)], 3),
                "sticky_level": ctx._sticky_level,
            }
        )
    medians = {r["messages"]: r["median_ms"] for r in rows}
    return {
        "rows": rows,
        "slope_ms_per_1k": round(slope([(r["messages"], r["median_ms"]) for r in rows]), 4),
        "x20k_over_1k": round(medians[20_000] / medians[1_000], 2) if {1_000, 20_000} <= set(medians) else None,
    }


async def memory_pass(arm: str, messages: list[Message]) -> dict[str, float]:
    """tracemalloc: the stored history, then everything retained after a long session (MB, bytes/message)."""
    ctx, messages = await manager(arm, messages)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    await add_range(ctx, messages, 0, len(messages) - TIMED_REQUESTS)
    history = tracemalloc.get_traced_memory()[0] - base
    await request(ctx, arm)  # the boundary: builds the caches
    tracemalloc.reset_peak()
    for index in range(len(messages) - TIMED_REQUESTS, len(messages)):
        await add_range(ctx, messages, index, index + 1)
        await request(ctx, arm)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    retained, n = current - base, len(messages)
    return {
        "history_mb": round(history / 1e6, 1),
        "retained_mb": round(retained / 1e6, 1),
        "history_bytes_per_message": round(history / n),
        "retained_bytes_per_message": round(retained / n),
        "caches_bytes_per_message": round((retained - history) / n),
        "steady_request_peak_above_mb": round((peak - retained) / 1e6, 2),
    }


def huge_history() -> list[Message]:
    """A user turn, one call whose result is a single 20 MB line, then three small tool turns."""

    def turn(call_id: str, content: str) -> list[Message]:
        call = {"id": call_id, "type": "function", "function": {"name": "read_file", "arguments": '{"path": "x"}'}}
        return [
            {"role": "assistant", "content": "", "tool_calls": [call], "metadata": {"timestamp": STAMP}},
            {"role": "tool", "tool_call_id": call_id, "content": content, "metadata": {"timestamp": STAMP}},
        ]

    messages = [
        {"role": "system", "content": "You are careful.", "metadata": {"timestamp": STAMP}},
        {"role": "user", "content": "read the dump, then the three small files", "metadata": {"timestamp": STAMP}},
    ]
    messages += turn("big", "x" * (BIG - 8) + "THE-TAIL")
    for i in range(3):
        messages += turn(f"small{i}", f"small file {i}")
    messages.append({"role": "assistant", "content": "The dump is large.", "metadata": {"timestamp": STAMP}})
    return messages


async def huge_arm(options: dict[str, Any], spill: bool) -> dict[str, Any]:
    """Time and traced peak of the first and of a repeated request holding one 20 MB result."""
    with tempfile.TemporaryDirectory() as spill_dir:
        extra = {"tool_result_spill_dir": spill_dir} if spill else {}
        ctx = SimpleContextManager(tool_result_budget_tokens=2_000, tool_result_shape="head_tail", **options, **extra)
        for message in huge_history():
            await ctx.add_message(message)
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        start = time.perf_counter()
        view = await ctx.get_messages_for_request(token_budget=100_000)
        first_ms = (time.perf_counter() - start) * 1_000
        first_peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        start = time.perf_counter()
        await ctx.get_messages_for_request(token_budget=100_000)
        again_ms = (time.perf_counter() - start) * 1_000
    result = next((m for m in view if m.get("tool_call_id") == "big"), None)
    return {
        "first_ms_traced": round(first_ms, 1),
        "repeat_ms": round(again_ms, 3),
        "first_request_peak_above_history_mb": round(first_peak / 1e6, 1),
        "view_messages": len(view),
        "result_chars_in_view": None if result is None else len(result["content"]),
        "spill_failures": ctx.fault_stats.get("spill_write_failures", 0),
    }


async def huge_result() -> dict[str, Any]:
    # protected_tool_results=3 leaves the big (oldest) result to level 1's truncation; the default 5
    # protects it from truncation, so the ladder removes its whole group instead (shown for contrast).
    unprotected = {"protected_tool_results": 3}
    arms = {
        "estimate": (unprotected, False),
        "estimate+spill": (unprotected, True),
        "content": ({**unprotected, "token_counter": "content"}, False),
        "estimate, defaults": ({}, False),
    }
    return {name: await huge_arm(options, spill) for name, (options, spill) in arms.items()}


async def profile_request(messages: list[Message], budget: int) -> str:
    """cProfile of steady-state requests at the largest size (top functions by own time)."""
    ctx = SimpleContextManager()
    await add_range(ctx, messages, 0, len(messages) - 5)
    await ctx.get_messages_for_request(token_budget=budget)
    profiler = cProfile.Profile()
    for index in range(len(messages) - 5, len(messages)):
        await add_range(ctx, messages, index, index + 1)
        profiler.enable()
        await ctx.get_messages_for_request(token_budget=budget)
        profiler.disable()
    stream = io.StringIO()
    pstats.Stats(profiler, stream=stream).sort_stats("tottime").print_stats(14)
    return stream.getvalue()


def print_report(report: dict[str, Any]) -> None:
    for arm, data in report["session"].items():
        print(
            f"\n[{arm}] budget={ARMS[arm]:,}  slope={data['slope_ms_per_1k']} ms per 1k messages, "
            f"median at 20k / at 1k = {data['x20k_over_1k']}"
        )
        print(f"{'messages':>9} {'view':>7} {'first ms':>9} {'median ms':>10} {'p90 ms':>8} {'level':>6}")
        for r in data["rows"]:
            print(
                f"{r['messages']:>9,} {r['view_messages']:>7,} {r['first_request_ms']:>9} "
                f"{r['median_ms']:>10} {r['p90_ms']:>8} {r['sticky_level']:>6}"
            )
    print("\nmedian at 20k / at 1k, per arm (this run):")
    for arm, data in report["session"].items():
        print(f"  {arm:20} {data['x20k_over_1k']}x")
    print("\nmemory after the whole session (tracemalloc):")
    for arm, row in report["memory"].items():
        print(f"  {arm:20} {json.dumps(row)}")
    print("\n20 MB single-line tool result:")
    for name, row in report["huge_result"].items():
        print(f"  {name:15} {json.dumps(row)}")


async def main_async(
    quick: bool, profile: bool, paths: list[str] | None = None, arms: list[str] | None = None
) -> dict[str, Any]:
    checkpoints = tuple(n for n in CHECKPOINTS if not quick or n <= 20_000)
    messages = build_session(checkpoints[-1], paths)
    arms = arms or list(ARMS)
    session = {arm: await time_arm(arm, messages, checkpoints) for arm in arms}
    report = {
        "session": session,
        "memory": {arm: await memory_pass(arm, messages) for arm in arms},
        "huge_result": await huge_result(),
    }
    print_report(report)
    if profile:
        text = await profile_request(messages, ARMS["compacting"])
        report["profile"] = text
        print(f"\ncProfile, {len(messages):,} messages, compacting arm, 5 steady-state requests:\n{text}")
    return report


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print it and write it as JSON."""
    p = cli.Parser(PROG, __doc__)
    p.add_argument("--quick", action="store_true", help="stop at 20k messages")
    p.add_argument("--profile", action="store_true", help="cProfile steady-state requests at the largest size")
    p.add_argument("--arm", action="append", default=[], metavar="NAME", help="run only this arm; repeatable")
    cli.add_workload(p, "tests/data/workloads")
    cli.add_out(p, OUT, "the JSON file written")
    return cli.guard(PROG, lambda: _run(p.parse_args(sys.argv[1:] if argv is None else argv)))


def _run(args: argparse.Namespace) -> int:
    for arm in args.arm:
        if arm not in ARMS:
            raise cli.unknown("arm", arm, ARMS)
    load_sessions(args.workload)  # every file checked before the work
    args.out.parent.mkdir(parents=True, exist_ok=True)
    cli.check_new_file("--out", args.out)
    logging.getLogger("amplifier_module_context_simple").setLevel(logging.ERROR)
    report = asyncio.run(main_async(args.quick, args.profile, args.workload, args.arm))
    args.out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
