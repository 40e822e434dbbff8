"""A long transcript probe (minutes, not CI): every shipped transcript under the evidence
presets combined with every other option, with and without hook injections stored inside tool
groups (loop-basic's order).

Every request is checked by conftest.InvariantChecker (history unchanged, tool pairing, system
and last user message present, append-only between boundaries); a provider usage is reported
after each request; each run ends by comparing the next view with a restored twin's
(set_messages + restore_state). A clear-at-least fail-loud RuntimeError is the documented
behaviour and is counted apart. Spill files go to a temporary directory, removed at the end;
nothing else is written.

    uv run python -m tests.review_sweep                     # every configuration
    uv run python -m tests.review_sweep evidence,default    # some of them
"""

from __future__ import annotations

import asyncio
import collections
import copy
import json
import sys
import tempfile
import time
from typing import Any

from amplifier_module_context_simple import SimpleContextManager
from evaluation.cli import Parser, UsageError, guard
from tests.conftest import WORKLOADS_DIR, InvariantChecker, estimated_size, load_transcript, replay

SPILL = "{spill}"  # replaced by a temporary directory when the sweep runs (nothing is written at import)
CONFIGS: dict[str, dict[str, Any]] = {
    "evidence": {"preset": "evidence"},
    "lean+hybrid": {"preset": "evidence_lean", "token_meter": "hybrid"},
    "evidence+actual": {"preset": "evidence", "token_meter": "actual"},
    "evidence+summary": {"preset": "evidence", "compaction_strategy": "summary"},
    "evidence+replay+cal": {
        "preset": "evidence",
        "replay_last_user_on_compaction": True,
        "compact_clear_at_least": 0.2,
    },
    "evidence+budgets+spill": {
        "preset": "evidence",
        "tool_result_budget_tokens": 300,
        "tool_result_shape": "head_tail",
        "tool_result_spill_dir": SPILL,
        "tool_result_exempt_tools": ["bash"],
    },
    "share0.3+normal": {
        "evidence_ledger_share": 0.3,
        "compaction_notice_verbosity": "normal",
        "protected_tool_results": 2,
    },
    "default": {},
    "summary": {"compaction_strategy": "summary"},
}


def with_hooks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each tool round gets an assistant- and a user-role ``inject_context`` before its results."""
    out = []
    for message in messages:
        out.append(message)
        if message.get("role") == "assistant" and message.get("tool_calls"):
            out.append({"role": "assistant", "content": "hook: lint ok", "metadata": {"source": "hook"}})
            out.append({"role": "user", "content": "hook: mind the style guide", "metadata": {"source": "hook"}})
    return out


class Provider:
    async def complete(self, request: Any, **kwargs: Any) -> dict[str, Any]:
        return {"content": "Summary: the user asked for work; tools were run."}


def untimed(view: list[dict[str, Any]]) -> str:
    def clean(m: dict[str, Any]) -> dict[str, Any]:
        metadata = m.get("metadata") or {}
        return {**m, "metadata": {**metadata, "timestamp": None}} if metadata.get("type") == "context_summary" else m

    return json.dumps([clean(m) for m in view])


def with_spill_dir(cfg: dict[str, Any], spill: str) -> dict[str, Any]:
    return {key: spill if value == SPILL else value for key, value in cfg.items()}


async def one(cfg: dict[str, Any], messages: list[dict[str, Any]], share: float, hooks: bool) -> tuple[int, int]:
    """One checked replay and its restored twin; returns (views checked, boundaries)."""
    budget = max(2_000, int(estimated_size(messages) * share))
    ctx, checker = SimpleContextManager(**cfg), InvariantChecker()

    async def after(request: Any, manager: SimpleContextManager) -> None:
        summaries = manager.messages[len(checker.snapshot) :]  # the summary strategy stores its summaries
        checker.snapshot.extend(copy.deepcopy([m for m in summaries if m["metadata"].get("type") == "context_summary"]))
        checker.after(request, manager)
        if manager._summarization_task is not None:
            await manager._summarization_task
        usage = {"input_tokens": int(len(json.dumps(request.view)) / 3.7)}
        await manager._on_llm_response("llm:response", {"usage": usage})

    msgs = with_hooks(messages) if hooks else messages
    await replay(ctx, msgs, budget, on_request=after, before_request=checker.before, provider=Provider())
    twin = SimpleContextManager(**cfg)
    await twin.set_messages(
        [{**m, "metadata": {k: v for k, v in m["metadata"].items() if k != "_seq"}} for m in ctx.messages]
    )
    twin.restore_state(json.loads(json.dumps(ctx.snapshot_state())))
    here = await ctx.get_messages_for_request(token_budget=budget, provider=Provider())
    there = await twin.get_messages_for_request(token_budget=budget, provider=Provider())
    if twin.fault_stats["restore_summaries_dropped"] == 0:
        assert untimed(here) == untimed(there), "the restored twin sends a different view"
    # else: restore_state never adopts a pending summary (its text cannot be checked), so the views differ
    return checker.checked, checker.boundaries


async def sweep(names: list[str], spill: str) -> int:
    """Every transcript under each named configuration; returns how many replays broke an invariant."""
    totals, failures, started = collections.Counter(), [], time.time()
    for path in sorted(WORKLOADS_DIR.glob("*.jsonl")):
        messages = load_transcript(path)
        for name in names:
            for share in (0.25, 0.6):
                for hooks in (False, True):
                    try:
                        views, boundaries = await one(with_spill_dir(CONFIGS[name], spill), messages, share, hooks)
                        totals.update(replays=1, views=views, boundaries=boundaries)
                    except RuntimeError as exc:  # clear-at-least's documented fail-loud
                        assert "could not be satisfied" in str(exc), exc
                        totals.update(fail_loud=1)
                    except AssertionError as exc:
                        failures.append((path.stem, name, share, hooks, str(exc)[:200]))
    print(dict(totals), f"failures {len(failures)}, {time.time() - started:.0f}s")
    for failure in failures[:20]:
        print(failure)
    return len(failures)


def main(argv: list[str] | None = None) -> int:
    """Run the sweep; exit status 1 when a replay broke an invariant, 2 for a bad argument."""
    parser = Parser("python -m tests.review_sweep", __doc__)
    parser.add_argument(
        "configs",
        nargs="?",
        default=None,
        metavar="CONFIG,...",
        help=f"comma-separated configurations to sweep, of: {', '.join(CONFIGS)} (default: all)",
    )

    def run(args: Any) -> int:
        given = list(CONFIGS) if args.configs is None else args.configs.split(",")
        names = [name.strip() for name in given if name.strip()]
        unknown = [name for name in names if name not in CONFIGS]
        if unknown or not names:
            raise UsageError(f"unknown configuration {', '.join(unknown) or '(none)'}; known: {', '.join(CONFIGS)}")
        with tempfile.TemporaryDirectory(prefix="review-sweep-spill-") as spill:
            return 1 if asyncio.run(sweep(names, spill)) else 0

    return guard(parser.prog, lambda: run(parser.parse_args(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    sys.exit(main())
