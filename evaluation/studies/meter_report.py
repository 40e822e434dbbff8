"""The token meter on real transcripts: estimator error, and compaction cadence per `token_meter` mode.

A fake provider bills each request view as a real one would: the true o200k tokens of the view's
messages (`tiktoken_counter("o200k_base")`, billable parts only) plus a fixed overhead for the
system prompt and tool schemas that never appear in the messages, reported Anthropic-style through
the real hook registry (`input_tokens` = cache read + fresh, `cache_write_tokens` on top).

Per transcript it prints the estimator's error (`_last_sent_estimate` / true tokens of the same
view, over the estimate-mode requests) and, per mode, the compaction boundaries (new
`context:compaction` events), the requests whose billed total exceeded the window, and the
hybrid gate's refusals and overrides. Run from the repository root:
`uv run python -m evaluation.studies.meter_report [--workload PATH ...] [--window-fraction 0.4]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluation import cli
from evaluation.tokens import ensure_tiktoken_cache_dir

ROOT = Path(__file__).resolve().parent.parent.parent
WORKLOADS = ROOT / "tests" / "data" / "workloads"
# Varied on purpose: the estimator under-counts the first (long prose), is near right on the second
# (short airline turns) and over-counts the third (code and tool output) against o200k.
TRANSCRIPTS = (
    "agentperf__agentperf-default-v1__task_meeting_council_votes",
    "taubench__airline__task002__trial1",
    "msa__pr816__deepseek_reasoner_dev__sqlfluff__sqlfluff-1517",
)
MODES = ("estimate", "actual", "hybrid")
OVERHEAD_TOKENS = 1500  # system prompt and tool schemas: billed on every request, never in the messages
WINDOW_FRACTION = 0.4  # the window is this share of the whole session's billed size: compaction must happen
MIN_CACHEABLE = 1024  # Anthropic's smallest cacheable prefix
FIXED_TIMESTAMP = "2025-01-01T00:00:00.000+00:00"
_WIRE_KEYS = ("role", "content", "tool_calls", "name", "reasoning_content", "function_call")

Message = dict[str, Any]
PROG = "python -m evaluation.studies.meter_report"


def true_counter() -> Callable[[Message], int]:
    """Exact o200k tokens of a message's billable parts, memoized by those parts."""
    ensure_tiktoken_cache_dir()  # offline: the repository's copy of o200k
    from amplifier_module_context_simple.token_counter import tiktoken_counter

    counter = tiktoken_counter("o200k_base")
    memo: dict[str, int] = {}

    def count(message: Message) -> int:
        key = json.dumps([message.get(k) for k in _WIRE_KEYS], ensure_ascii=False, default=str)
        if key not in memo:
            memo[key] = counter(message)
        return memo[key]

    return count


def load(stem: str) -> list[Message]:
    """A shipped transcript, each message with a fixed timestamp (views are then deterministic)."""
    return stamped(cli.sessions([str(WORKLOADS / f"{stem}.jsonl")], WORKLOADS)[stem])


def stamped(messages: list[Message]) -> list[Message]:
    """Each message with a fixed timestamp."""
    return [{**m, "metadata": {"timestamp": FIXED_TIMESTAMP}} for m in messages]


def window_for(messages: list[Message], count: Callable[[Message], int], fraction: float = WINDOW_FRACTION) -> int:
    """The provider's window (largest prompt it accepts), also passed to the module as token_budget."""
    return int(fraction * (sum(count(m) for m in messages) + OVERHEAD_TOKENS))


def _ephemeral(message: Message) -> bool:
    metadata = message.get("metadata")
    return isinstance(metadata, dict) and bool(metadata.get("ephemeral"))


class UsageProvider:
    """Bills views like Anthropic: overhead + messages, a prefix cache, `llm:response` with usage."""

    def __init__(self, hooks: Any, count: Callable[[Message], int], overhead: int = OVERHEAD_TOKENS) -> None:
        self.hooks, self.count, self.overhead = hooks, count, overhead
        self._cached: list[str] = []  # wire keys of the last cached prefix

    async def respond(self, view: list[Message], output_tokens: int = 0) -> tuple[int, int]:
        """Emit `llm:response` for `view`; return (billed prompt total, true tokens of the messages)."""
        counts = [self.count(m) for m in view]
        keys = [json.dumps([m.get(k) for k in _WIRE_KEYS], ensure_ascii=False, default=str) for m in view]
        cacheable = max((i + 1 for i, m in enumerate(view) if not _ephemeral(m)), default=0)
        shared = 0
        while shared < min(len(self._cached), cacheable) and self._cached[shared] == keys[shared]:
            shared += 1
        read = self.overhead + sum(counts[:shared]) if shared or self._cached else 0
        prefix = self.overhead + sum(counts[:cacheable])
        write = prefix - read if prefix >= MIN_CACHEABLE else 0
        fresh = self.overhead + sum(counts) - read - write
        self._cached = keys[:cacheable] if prefix >= MIN_CACHEABLE else []
        usage = {
            "input_tokens": read + fresh,  # gross: cache reads are inside it
            "output_tokens": output_tokens,
            "cache_read_tokens": read,
            "cache_write_tokens": write,  # billed on top of input_tokens
            "cost_usd": "0.0",
        }
        payload = {"provider": "anthropic", "model": "fake", "status": "ok", "duration_ms": 1, "usage": usage}
        await self.hooks.emit("llm:response", payload)
        return read + fresh + write, sum(counts)


@dataclass(frozen=True)
class Step:
    """One request: what the meter said, what the provider billed, what the trigger did."""

    kind: str
    used: int
    sent_estimate: int
    hybrid: int
    hybrid_kind: str
    view_true: int
    billed: int
    boundary: bool
    override: bool
    refusal: bool
    floor: bool  # fired on a rejected anchor whose provider total alone crossed the threshold
    over_window: bool


async def replay_meter(
    messages: list[Message], mode: str, window: int, count: Callable[[Message], int], overhead: int = OVERHEAD_TOKENS
) -> list[Step]:
    """Replay a transcript through a mounted module and the fake provider; one Step per request."""
    from amplifier_core.testing import MockCoordinator

    from amplifier_module_context_simple import mount

    coordinator = MockCoordinator()
    cleanup = await mount(coordinator, {"token_meter": mode})
    ctx = coordinator.get("context")
    compactions: list[dict] = []
    coordinator.hooks.register("context:compaction", lambda _e, data: compactions.append(data), name="meter-report")
    provider = UsageProvider(coordinator.hooks, count, overhead)
    steps: list[Step] = []
    for message in messages:
        if message.get("role") == "assistant":
            seen, overrides, refusals = len(compactions), ctx._provenance_overrides, ctx._provenance_refusals
            floors = getattr(ctx, "_anchor_floor_fires", 0)
            view = await ctx.get_messages_for_request(token_budget=window)
            stats = dict(ctx._last_token_meter_stats)
            sent = ctx._last_sent_estimate
            billed, view_true = await provider.respond(view, count(message))
            steps.append(
                Step(
                    stats["kind"],
                    stats["used_tokens"],
                    sent,
                    stats["hybrid_tokens"],
                    stats["hybrid_kind"],
                    view_true,
                    billed,
                    len(compactions) > seen,
                    ctx._provenance_overrides > overrides,
                    ctx._provenance_refusals > refusals,
                    getattr(ctx, "_anchor_floor_fires", 0) > floors,
                    billed > window,
                )
            )
        await ctx.add_message(message)
    await cleanup()
    return steps


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarize(steps: list[Step]) -> dict[str, Any]:
    """Cadence and safety figures of one run."""
    usage_steps = [s for s in steps if s.hybrid_kind == "usage"]
    # A boundary request bills a freshly compacted view that no pre-compaction meter describes.
    settled = [s for s in usage_steps if not s.boundary]
    return {
        "requests": len(steps),
        "boundaries": sum(s.boundary for s in steps),
        "over_window": sum(s.over_window for s in steps),
        "refusals": sum(s.refusal for s in steps),
        "overrides": sum(s.override for s in steps),
        "floor_fires": sum(s.floor for s in steps),
        "usage_kind": len(usage_steps),
        "hybrid_error": statistics.fmean(s.hybrid / s.billed for s in settled) if settled else None,
    }


def estimator_error(steps: list[Step]) -> tuple[float, float]:
    """(mean, p90) of the module's estimate of each sent view over its true o200k tokens."""
    ratios = [s.sent_estimate / s.view_true for s in steps if s.view_true > 0]
    return statistics.fmean(ratios), percentile(ratios, 0.9)


def report(sessions: dict[str, list[Message]], fraction: float = WINDOW_FRACTION) -> list[dict[str, Any]]:
    """One row per transcript and mode."""
    count = true_counter()
    rows = []
    for stem, raw in sessions.items():
        messages = stamped(raw)
        window = window_for(messages, count, fraction)
        runs = {mode: asyncio.run(replay_meter(messages, mode, window, count)) for mode in MODES}
        mean, p90 = estimator_error(runs["estimate"])
        for mode, steps in runs.items():
            rows.append({"transcript": stem, "messages": len(messages), "window": window, "mode": mode,
                         "est_mean": mean, "est_p90": p90, **summarize(steps)})  # fmt: skip
    return rows


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def main(argv: list[str] | None = None) -> int:
    """Print the table for the named sessions (default: the three of TRANSCRIPTS)."""
    p = cli.Parser(PROG, __doc__)
    cli.add_workload(p, "three varied shipped transcripts")
    cli.add_window_fraction(p, WINDOW_FRACTION, "the window as a share of each session's billed size")
    p.add_argument("stems", nargs="*", help=argparse.SUPPRESS)  # the old spelling: shipped transcript stems
    return cli.guard(PROG, lambda: _run(p.parse_args(sys.argv[1:] if argv is None else argv)))


def _run(args: argparse.Namespace) -> int:
    paths = (args.workload or []) + [_stem_path(s) for s in args.stems]
    sessions = cli.sessions(paths, WORKLOADS) if paths else {s: load(s) for s in TRANSCRIPTS}
    rows = report(sessions, args.window_fraction)
    window = f"{args.window_fraction:.0%}"
    print(f"fake provider: true o200k of the view + {OVERHEAD_TOKENS} overhead tokens, Anthropic-style cache fields")
    print(f"window = token_budget = {window} of the session's billed size; over = billed > window")
    print("est/true = module estimate of the sent view / true o200k of its messages (estimate-mode requests)")
    print("hyb/billed = hybrid count / billed total of the same request, where the hybrid kind is 'usage'")
    print("             (boundary requests excluded: they bill a freshly compacted view)\n")
    cols = ["transcript", "messages", "window", "est_mean", "est_p90", "mode", "requests", "boundaries",
            "over_window", "refusals", "overrides", "floor_fires", "usage_kind", "hybrid_error"]  # fmt: skip
    heads = ["transcript", "msgs", "window", "est/true mean", "est/true p90", "mode", "requests", "boundaries",
             "over window", "refusals", "overrides", "floor fires", "kind=usage", "hyb/billed"]  # fmt: skip
    print("| " + " | ".join(heads) + " |")
    print("|" + "---|" * len(heads))
    for row in rows:
        print("| " + " | ".join(_fmt(row[c]) for c in cols) + " |")
    return 0


def _stem_path(stem: str) -> str:
    """A shipped transcript's stem (old positional spelling), or a path as given."""
    shipped = WORKLOADS / f"{stem}.jsonl"
    return str(shipped) if shipped.is_file() else stem


if __name__ == "__main__":
    sys.exit(main())
