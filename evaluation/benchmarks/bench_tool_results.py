"""Tool-result truncation cost on one huge single-line result: chars before lines, never lines.

A single line of 1, 5, 10 and 20 MB is truncated the way the ladder does it (`_truncate_tool_result`
on a stored message): legacy head; head_tail at 2,000 tokens; head_tail with spill to a fresh
temporary directory (sha256 of the content plus an atomic write); head_tail with
`token_counter="content"` (the token budget is converted with the configured counter, which
reads the whole content). A last arm builds a whole view (`get_messages_for_request`) that
truncates the result. The figure of merit is time per MB: flat or falling with size means cost at
most linear in the size, and no line-based scan. A 20 MB control split into 400,000 lines shows
line count does not matter. Run: `uv run python -m evaluation.benchmarks.bench_tool_results`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from amplifier_module_context_simple import SimpleContextManager

from .. import cli

PROG = "python -m evaluation.benchmarks.bench_tool_results"
MB = 1_000_000
SIZES_MB = (1, 5, 10, 20)
STAMP = "2026-01-01T00:00:00.000+00:00"


def single_line(size: int) -> str:
    """`size` chars, no newline, with a distinct tail so the kept ends are real content."""
    return "x" * (size - 8) + "THE-TAIL"


def many_lines(size: int, lines: int) -> str:
    width = size // lines
    return ("y" * (width - 1) + "\n") * lines


def stored_result(content: str) -> dict[str, Any]:
    """A tool result as the manager stores it (with its permanent `_seq`)."""
    return {"role": "tool", "tool_call_id": "c1", "content": content, "metadata": {"timestamp": STAMP, "_seq": 2}}


def truncate_once(config: dict[str, Any], content: str, spill_root: Path | None) -> float:
    """Seconds for one truncation on a fresh manager (a fresh spill directory, so the write happens)."""
    if spill_root is not None:
        config = {**config, "tool_result_spill_dir": tempfile.mkdtemp(dir=spill_root)}
    cm = SimpleContextManager(**config)
    message = stored_result(content)
    start = time.perf_counter()
    out = cm._truncate_tool_result(message)
    elapsed = time.perf_counter() - start
    assert out["_truncated"] and cm.fault_stats.get("spill_write_failures", 0) == 0
    return elapsed


def view_once(config: dict[str, Any], content: str, spill_root: Path | None) -> float:
    """Seconds for adding a session (the huge result first, three small ones after) and one view."""
    cm = SimpleContextManager(protected_tool_results=0, **config)

    async def run() -> float:
        start = time.perf_counter()
        await cm.add_message({"role": "user", "content": "go", "metadata": {"timestamp": STAMP}})
        for i, text in enumerate([content, "a", "b", "c"]):
            call = {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            await cm.add_message(
                {"role": "assistant", "content": "", "tool_calls": [call], "metadata": {"timestamp": STAMP}}
            )
            await cm.add_message(
                {"role": "tool", "tool_call_id": f"c{i}", "content": text, "metadata": {"timestamp": STAMP}}
            )
        view = await cm.get_messages_for_request(token_budget=100_000)
        elapsed = time.perf_counter() - start
        assert any(m.get("_truncated") for m in view), "the view must truncate the huge result"
        return elapsed

    return asyncio.run(run())


ARMS: dict[str, tuple[dict[str, Any], bool, Callable[..., float]]] = {
    "head (legacy 250 chars)": ({}, False, truncate_once),
    "head_tail 2000 tok": ({"tool_result_budget_tokens": 2000, "tool_result_shape": "head_tail"}, False, truncate_once),
    "head_tail + spill": ({"tool_result_budget_tokens": 2000, "tool_result_shape": "head_tail"}, True, truncate_once),
    "head_tail, content counter": (
        {"tool_result_budget_tokens": 2000, "tool_result_shape": "head_tail", "token_counter": "content"},
        False,
        truncate_once,
    ),
    "whole view (head)": ({}, False, view_once),
}


def run(reps: int, spill_root: str | None = None) -> list[tuple[str, str, float, float]]:
    """Rows (arm, input, ms, ms per MB): the best of `reps`, taken round-robin over the inputs
    so that a burst of load on a shared machine does not land on one size only."""
    rows = []
    with tempfile.TemporaryDirectory(dir=spill_root) as tmp:
        root = Path(tmp)
        inputs = [(f"{n} MB, 1 line", single_line(n * MB), n) for n in SIZES_MB]
        inputs.append(("20 MB, 400,000 lines", many_lines(20 * MB, 400_000), 20))
        for arm, (config, spill, measure) in ARMS.items():
            best = [float("inf")] * len(inputs)
            for _ in range(reps):
                for i, (_label, content, _mb) in enumerate(inputs):
                    best[i] = min(best[i], measure(config, content, root if spill else None))
            for (label, _content, size_mb), seconds in zip(inputs, best, strict=True):
                rows.append((arm, label, seconds * 1000, seconds * 1000 / size_mb))
    return rows


def report(rows: list[tuple[str, str, float, float]]) -> str:
    """The table, then per arm the growth exponent from 5 to 20 MB."""
    lines = [f"{'arm':<28}{'input':<22}{'ms':>10}{'ms/MB':>10}{'ms/MB vs 1 MB':>16}"]
    base: dict[str, float] = {}
    by_size: dict[str, dict[str, float]] = {}
    for arm, label, ms, per_mb in rows:
        base.setdefault(arm, per_mb)
        by_size.setdefault(arm, {})[label] = ms
        ratio = per_mb / base[arm] if base[arm] > 0 else float("nan")
        lines.append(f"{arm:<28}{label:<22}{ms:>10.3f}{per_mb:>10.4f}{ratio:>16.2f}")
    lines.append("")
    lines.append("growth from 5 to 20 MB (1 MB fits the CPU cache): exponent k in t ~ size^k")
    lines.append("  (k = 1 linear, k = 2 quadratic, k ~ 0 size-independent)")
    for arm, ms in by_size.items():
        ratio = ms["20 MB, 1 line"] / ms["5 MB, 1 line"]
        lines.append(f"  {arm:<28} t(20 MB)/t(5 MB) = {ratio:6.2f}   k = {math.log(ratio, 4):5.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the truncation table."""
    p = cli.Parser(PROG, __doc__)
    p.add_argument(
        "--reps", type=cli.positive_int, default=7, metavar="N", help="repetitions per cell; the best is reported"
    )
    p.add_argument(
        "--spill-root", type=Path, metavar="DIR", help="where the spill directories go (default: the system temp dir)"
    )
    return cli.guard(PROG, lambda: _run(p.parse_args(sys.argv[1:] if argv is None else argv)))


def _run(args: argparse.Namespace) -> int:
    if args.spill_root is not None and not args.spill_root.is_dir():
        raise cli.UsageError(f"--spill-root {args.spill_root}: no such folder")
    logging.disable(logging.WARNING)
    print(report(run(args.reps, args.spill_root)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
