"""Resume arm: restart the manager mid-session, with and without restored state, and price the prompt cache.

Each shipped transcript is replayed three ways: uninterrupted; restarted every `--every` requests
with `set_messages(history)` then `restore_state(snapshot)` (both through JSON, as a host would
save them next to the transcript); restarted the same way without the state. The cache is a simple
prefix model: a request reads the tokens of the longest byte-identical whole-message prefix it shares
with the previous request's non-ephemeral prefix. Read share = read tokens / prompt tokens (o200k).
Run from the repository root:
`uv run python -m evaluation.studies.resume_eval [--every 10] [--workload PATH ...] [--per-transcript]`.
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

from evaluation import cli
from evaluation.tokens import ensure_tiktoken_cache_dir
from evaluation.wording import plural

ROOT = Path(__file__).resolve().parent.parent.parent
WORKLOADS = ROOT / "tests" / "data" / "workloads"
CONFIGS: dict[str, dict[str, Any]] = {
    "default": {},
    "hybrid meter": {"token_meter": "hybrid"},
    "content counter": {"token_counter": "content"},
}
PROG = "python -m evaluation.studies.resume_eval"
MODES = ("uninterrupted", "restored", "cold")


@dataclass
class Replay:
    """One way of running one transcript: per request, prompt and cache-read tokens and the view bytes."""

    total: list[int] = field(default_factory=list)
    read: list[int] = field(default_factory=list)
    views: list[str] = field(default_factory=list)
    restarts: list[int] = field(default_factory=list)

    def share(self, requests: list[int] | None = None) -> float:
        chosen = range(len(self.total)) if requests is None else requests
        return sum(self.read[i] for i in chosen) / max(1, sum(self.total[i] for i in chosen))


def is_ephemeral(message: dict[str, Any]) -> bool:
    metadata = message.get("metadata")
    return isinstance(metadata, dict) and metadata.get("ephemeral") is True


def cacheable_prefix(view: list[dict[str, Any]]) -> list[str]:
    """Wire bytes of the messages before the first ephemeral one (the notice, a replay)."""
    keys = []
    for message in view:
        if is_ephemeral(message):
            break
        keys.append(json.dumps(message, ensure_ascii=False))
    return keys


def shared_tokens(keys: list[str], tokens: list[int], previous: list[str]) -> int:
    """Tokens of the longest whole-message prefix of `keys` equal to a prefix of `previous`."""
    read = 0
    for key, count, old in zip(keys, tokens, previous, strict=False):
        if key != old:
            break
        read += count
    return read


async def restart(ctx: Any, config: dict[str, Any], restore: bool) -> Any:
    """A new manager picking the session up from `ctx`'s saved history (and state)."""
    from amplifier_module_context_simple import SimpleContextManager

    history = json.loads(json.dumps(await ctx.get_messages()))
    state = json.loads(json.dumps(ctx.snapshot_state()))
    fresh = SimpleContextManager(**config)
    await fresh.set_messages(history)
    if restore:
        fresh.restore_state(state)
    return fresh


async def run(messages: list[dict], budget: int, config: dict, mode: str, every: int, counter: Any) -> Replay:
    """Replay `messages` one way; the provider bills true tokens and reports them as usage."""
    from amplifier_module_context_simple import SimpleContextManager

    from ..driver import frozen

    out, ctx, previous = Replay(), SimpleContextManager(**config), []
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            request = len(out.total)
            if mode != "uninterrupted" and request and request % every == 0:
                ctx = await restart(ctx, config, restore=mode == "restored")
                out.restarts.append(request)
            view = await ctx.get_messages_for_request(token_budget=budget)
            keys = [json.dumps(m, ensure_ascii=False) for m in view]
            tokens = [counter.message(m) for m in view]
            out.total.append(sum(tokens))
            out.read.append(shared_tokens(keys, tokens, previous))
            out.views.append("\n".join(keys))
            previous = cacheable_prefix(view)
            usage = {"input_tokens": out.total[-1], "cache_read_tokens": out.read[-1], "cache_write_tokens": 0}
            await ctx._on_llm_response("llm:response", {"usage": usage})
        await ctx.add_message(frozen(message, index))
    return out


@dataclass
class Row:
    """One transcript under one config: the three replays."""

    name: str
    replays: dict[str, Replay]

    def differing(self, mode: str) -> int:
        base = self.replays["uninterrupted"].views
        return sum(a != b for a, b in zip(self.replays[mode].views, base, strict=True))


async def evaluate(workloads: list, config: dict, every: int, fraction: float, counter: Any) -> list[Row]:
    from ..driver import NOTICE_RESERVE, Settings, size_window

    rows = []
    for workload in workloads:
        window = size_window(counter.messages(workload.messages), Settings(window_fraction=fraction))
        budget = window.budget + NOTICE_RESERVE  # the module reserves the notice's share itself
        replays = {mode: await run(workload.messages, budget, config, mode, every, counter) for mode in MODES}
        rows.append(Row(workload.name, replays))
    return rows


def print_config(label: str, rows: list[Row], per_transcript: bool) -> None:
    """Read shares (all requests; first request after each restart) and views changed by restarts."""

    def pooled(mode: str, first_only: bool = False) -> float:
        read = total = 0
        for row in rows:
            replay = row.replays[mode]
            # Restarts happen at the same requests in both restarted modes; uninterrupted is read there too.
            picks = row.replays["restored"].restarts if first_only else range(len(replay.total))
            read += sum(replay.read[i] for i in picks)
            total += sum(replay.total[i] for i in picks)
        return read / max(1, total)

    restarts = sum(len(r.replays["restored"].restarts) for r in rows)
    requests = sum(len(r.replays["uninterrupted"].total) for r in rows)
    counts = f"{plural(len(rows), 'transcript')}, {plural(requests, 'request')}, {plural(restarts, 'restart')}"
    print(f"\n[{label}] {counts}")
    print(f"{'':<34} {'uninterrupted':>13} {'restored':>9} {'cold':>9}")
    print(
        f"{'read share, all requests':<34} {pooled('uninterrupted'):>13.3f} {pooled('restored'):>9.3f} "
        f"{pooled('cold'):>9.3f}"
    )
    print(
        f"{'read share, first after restart':<34} {pooled('uninterrupted', True):>13.3f} "
        f"{pooled('restored', True):>9.3f} {pooled('cold', True):>9.3f}"
    )
    changed = {mode: sum(r.differing(mode) for r in rows) for mode in ("restored", "cold")}
    print(f"{'views differing from uninterrupted':<34} {0:>13} {changed['restored']:>9} {changed['cold']:>9}")
    if per_transcript:
        print(f"{'transcript':<66} {'req':>4} {'rst':>4} {'uninterr.':>9} {'restored':>9} {'cold':>6} {'cold diff':>9}")
        for row in rows:
            r = row.replays
            print(
                f"{row.name[:66]:<66} {len(r['uninterrupted'].total):>4} {len(r['restored'].restarts):>4} "
                f"{r['uninterrupted'].share():>9.3f} {r['restored'].share():>9.3f} {r['cold'].share():>6.3f} "
                f"{row.differing('cold'):>9}"
            )


def main(argv: list[str] | None = None) -> int:
    """Print read shares per config: uninterrupted, restored, cold."""
    p = cli.Parser(PROG, __doc__)
    p.add_argument("--every", type=cli.positive_int, default=10, metavar="N", help="restart before every N-th request")
    cli.add_window_fraction(p, 0.35, "the module's budget as a share of each session's true size")
    cli.add_workload(p, "tests/data/workloads")
    p.add_argument("--per-transcript", action="store_true", help="also print one row per transcript")
    return cli.guard(PROG, lambda: _run(p.parse_args(sys.argv[1:] if argv is None else argv)))


def _run(args: argparse.Namespace) -> int:
    workloads = cli.workloads(args.workload, WORKLOADS)  # checked before the work
    ensure_tiktoken_cache_dir()
    logging.getLogger("amplifier_module_context_simple").setLevel(logging.ERROR)  # over-budget warnings: noise here
    from ..tokens import TokenCounter

    counter = TokenCounter()
    every = f"restart before every {args.every}th request"
    print(f"{plural(len(workloads), 'transcript')}; {every}; tokens: {counter.name}")
    print(f"effective budget = {args.window_fraction:.0%} of each session's true size; restored/cold = with/without")
    print("restore_state() after set_messages(); cache read = longest byte-identical prefix with the previous request")
    for label, config in CONFIGS.items():
        rows = asyncio.run(evaluate(workloads, config, args.every, args.window_fraction, counter))
        print_config(label, rows, args.per_transcript and label == "default")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
