"""The configured token counter drives every sizing decision of the manager, end to end.

The trigger, each ladder level, the tool-result budgets, the hybrid tail, the clear-at-least ``freed``
and the stats all count with ``token_counter``; per-message counts are cached by ``_seq``; an unusable
counter fails at mount; and ``"estimate"`` (the default) changes no byte of any view.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter as Tally
from pathlib import Path
from typing import Any

import pytest
from amplifier_core.testing import MockCoordinator

from amplifier_module_context_simple import SimpleContextManager, mount
from amplifier_module_context_simple.token_counter import content_count, resolve_counter
from amplifier_module_context_simple.tool_results import text_tokens
from tests.conftest import (
    WORKLOADS_DIR,
    asst,
    asst_calls,
    estimated_size,
    load_transcript,
    non_ephemeral,
    replay,
    result,
    stamped,
    system,
    user,
)

TIKTOKEN_CACHE = Path(__file__).resolve().parent.parent / "evaluation" / "tiktoken_cache"
IMAGE_BYTES = 1_000_000
BUDGET = 20_000


@pytest.fixture(autouse=True)
def _offline_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(TIKTOKEN_CACHE))


class Recorder:
    """A minimal hook registry: records every emitted event."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def emit(self, event: str, data: dict[str, Any]) -> None:
        self.events.append((event, data))

    def of(self, event: str) -> list[dict[str, Any]]:
        return [data for name, data in self.events if name == event]


def text_of(view: list[dict[str, Any]]) -> str:
    return json.dumps(view, ensure_ascii=False)


def image_conversation() -> list[dict[str, Any]]:
    """A screenshot tool result carrying a 1 MB base64 PNG, then ordinary turns."""
    png = "data:image/png;base64," + "iVBORw0KGgo" * (IMAGE_BYTES // 11)
    shot = {
        "role": "tool",
        "tool_call_id": "shot",
        "content": [{"type": "text", "text": "screenshot"}, {"type": "image_url", "image_url": {"url": png}}],
    }
    messages = [system(), user("Take a screenshot of the login page."), asst_calls("shot", name="screenshot"), shot]
    for turn in range(12):
        messages += [asst(f"The page shows form {turn}."), user(f"Now describe element {turn} in detail.")]
    return [stamped(m) for m in messages]


async def drive(ctx: SimpleContextManager, messages: list[dict[str, Any]], budget: int = BUDGET) -> list[Any]:
    """Add every message, then ask for one view (the history never has an in-flight call here)."""
    for message in messages:
        await ctx.add_message(message)
    return await ctx.get_messages_for_request(token_budget=budget)


# ----- the trigger and the ladder follow the counter -----------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("counter", ["estimate", "content", "tiktoken:o200k_base"])
async def test_a_base64_image_is_sized_as_an_image_by_every_counter(counter: str) -> None:
    """Its base64 text (~250,000 tokens as text) would force the screenshot group out; sized as an image
    (about 1,600 tokens) nothing needs compacting and the view is the history."""
    marker = "iVBORw0KGgo" * 100
    hooks = Recorder()
    view = await drive(SimpleContextManager(hooks=hooks, token_counter=counter), image_conversation())
    assert hooks.of("context:compaction") == []
    assert marker in text_of(view)
    assert len(view) == len(image_conversation())


def huge_when_marked(message: dict[str, Any]) -> int:
    """A callable counter: 100,000 tokens for a message containing HUGE, else about a token per word."""
    text = json.dumps(message.get("content"))
    return 100_000 if "HUGE" in text else 3 + len(text.split())


def marked_conversation() -> list[dict[str, Any]]:
    messages = [system(), user("Plan the migration.")]
    for turn in range(10):
        note = "HUGE appendix follows" if turn == 1 else f"step {turn} done"
        messages += [asst(note), user(f"continue with step {turn + 1}")]
    return [stamped(m) for m in messages]


@pytest.mark.asyncio
async def test_a_callable_that_makes_one_message_huge_drives_compaction() -> None:
    quiet, loud = Recorder(), Recorder()
    plain = await drive(SimpleContextManager(hooks=quiet), marked_conversation())
    assert quiet.of("context:compaction") == [] and "HUGE" in text_of(plain)
    view = await drive(SimpleContextManager(hooks=loud, token_counter=huge_when_marked), marked_conversation())
    (stats,) = loud.of("context:compaction")
    assert "HUGE" not in text_of(view)
    # Both sides of the stats are the callable's counts, not the estimator's.
    history = [{k: v for k, v in m.items() if k != "metadata"} for m in marked_conversation()]
    assert stats["before_tokens"] == sum(map(huge_when_marked, history))
    assert stats["after_tokens"] == sum(map(huge_when_marked, non_ephemeral(view)))
    assert stats["after_tokens"] <= stats["target_tokens"]


SMALL = sorted(WORKLOADS_DIR.glob("taubench__airline__task003__trial0.jsonl"))[0]


@pytest.mark.asyncio
@pytest.mark.parametrize("counter", ["content", huge_when_marked])
async def test_every_boundary_is_sized_with_the_configured_counter(counter: Any) -> None:
    """On a real transcript: each compaction's before/after totals are the counter's, and it lands on target."""
    messages = load_transcript(SMALL)
    count = resolve_counter(counter)
    budget = int(sum(map(count, messages)) * 0.4)
    hooks = Recorder()
    ctx = SimpleContextManager(hooks=hooks, token_counter=counter)
    requests = await replay(ctx, messages, budget)
    boundaries = [r for r in requests if r.boundary]
    assert len(boundaries) >= 2, "the budget must force several compactions"
    for request in boundaries:
        stats = request.stats
        assert stats["after_tokens"] == sum(map(count, non_ephemeral(request.view)))
        assert stats["strategy_level"] == 8 or stats["after_tokens"] <= stats["target_tokens"]
    fired = [r for r in requests if r.boundary]
    for request in fired:  # the trigger: the history before this request crossed the threshold, by the counter
        assert request.stats["before_tokens"] / (budget - 800) >= ctx.compact_threshold


@pytest.mark.asyncio
async def test_hybrid_tail_and_clear_at_least_baseline_use_the_counter() -> None:
    hooks = Recorder()
    ctx = SimpleContextManager(
        hooks=hooks, token_counter=huge_when_marked, token_meter="hybrid", compact_clear_at_least=200_000
    )
    messages = marked_conversation()
    for message in messages[:4]:
        await ctx.add_message(message)
    await ctx.get_messages_for_request(token_budget=BUDGET)
    await ctx._on_llm_response("llm:response", {"usage": {"input_tokens": 500}})
    for message in messages[4:]:
        await ctx.add_message(message)
    await ctx.get_messages_for_request(token_budget=BUDGET)
    meter = hooks.of("context:token_meter")[-1]
    tail = [{k: v for k, v in m.items() if k != "metadata"} for m in messages[4:]]
    assert meter["tail_estimated_tokens"] == sum(map(huge_when_marked, tail))
    assert meter["kind"] == "usage" and meter["used_tokens"] == 500 + meter["tail_estimated_tokens"]
    # The hybrid count crosses the threshold; clear-at-least (200,000 tokens) refuses the boundary,
    # and its baseline is the callable's total of the view, never the estimator's.
    (skipped,) = hooks.of("context:compaction-skipped")
    everything = [{k: v for k, v in m.items() if k != "metadata"} for m in messages]
    assert skipped["baseline_tokens"] == sum(map(huge_when_marked, everything))
    assert 100_000 <= skipped["freed_tokens"] < 200_000  # the huge message was the one removed


@pytest.mark.asyncio
async def test_tool_result_token_budgets_are_measured_with_the_counter() -> None:
    """A token budget keeps about that many tokens *of the configured counter*, whatever the script."""
    cjk = "我们今天去公园散步然后吃晚饭" * 300  # ~0.7-1 o200k token per character: 4 chars/token is far off
    messages = [user("read it"), asst_calls("c1"), result("c1", cjk), asst("done"), user("and?")]
    budget = 100
    kept: dict[str, str] = {}
    for counter in ("estimate", "content", "tiktoken:o200k_base"):
        ctx = SimpleContextManager(token_counter=counter, tool_result_budget_tokens=budget)
        for message in messages:
            await ctx.add_message(stamped(message))
        truncated = ctx._truncate_tool_result(ctx.messages[2])
        assert truncated.get("_truncated"), counter
        kept[counter] = truncated["content"].split("] ", 1)[1].removesuffix("...")
    assert len(kept["estimate"]) == budget * 4  # the legacy conversion, byte-identical
    for counter in ("content", "tiktoken:o200k_base"):
        count = resolve_counter(counter)
        assert budget * 0.8 <= text_tokens(kept[counter], count) <= budget * 1.2, counter
    assert text_tokens(kept["estimate"], resolve_counter("tiktoken:o200k_base")) > budget * 2


@pytest.mark.asyncio
async def test_tool_result_header_reports_the_counters_tokens() -> None:
    ctx = SimpleContextManager(token_counter="content", tool_result_budget_tokens=10)
    await ctx.add_message(stamped(asst_calls("c1")))
    await ctx.add_message(stamped(result("c1", "word " * 400)))
    truncated = ctx._truncate_tool_result(ctx.messages[1])
    expected = text_tokens("word " * 400, resolve_counter("content"))
    assert truncated["content"].startswith(f"[truncated: ~{expected:,} tokens")
    assert truncated["_original_tokens"] == expected


# ----- mount-time failure --------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_unloadable_tiktoken_encoding_is_named_at_mount_and_the_estimate_counts(caplog) -> None:
    """Checked once, at mount (never per request); issue 33 item 6: a typo warns instead of stopping the
    session start, and the default counter runs."""
    coordinator = MockCoordinator()
    with caplog.at_level(logging.WARNING, logger="amplifier_module_context_simple"):
        await mount(coordinator, {"token_counter": "tiktoken:nonexistent"})
    said = [r.getMessage() for r in caplog.records if "tiktoken:nonexistent" in r.getMessage()]
    assert len(said) == 1 and "o200k_base" in said[0] and 'using "estimate"' in said[0]
    assert coordinator.get("context").token_counter == "estimate"
    assert SimpleContextManager(token_counter="tiktoken:nonexistent").token_counter == "estimate"


@pytest.mark.asyncio
async def test_mount_accepts_each_counter_form() -> None:
    for spec in ("estimate", "content", "tiktoken:o200k_base", huge_when_marked):
        coordinator = MockCoordinator()
        await mount(coordinator, {"token_counter": spec})
        assert coordinator.get("context")._counts().counter.name == resolve_counter(spec).name


# ----- caching by _seq -----------------------------------------------------------------------------


class CountingCounter:
    """A callable counter that tallies how often each message text is counted."""

    def __init__(self) -> None:
        self.calls: Tally[str] = Tally()

    def __call__(self, message: dict[str, Any]) -> int:
        text = json.dumps(message.get("content"), ensure_ascii=False)
        self.calls[text] += 1
        return content_count(message)


@pytest.mark.asyncio
async def test_each_message_is_counted_once_across_many_requests() -> None:
    counter = CountingCounter()
    ctx = SimpleContextManager(token_counter=counter)
    assert counter.calls.pop('"token counter probe"') == 1  # the constructor's one check that it counts
    messages = load_transcript(SMALL)
    requests = await replay(ctx, messages, budget=10**9)
    assert len(requests) >= 20
    last_request = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    sent = Tally(json.dumps(m.get("content"), ensure_ascii=False) for m in messages[:last_request])
    assert counter.calls == sent  # once per message, however many requests


@pytest.mark.asyncio
async def test_counts_stay_cached_through_compaction() -> None:
    """Under compaction each stored message and each rewrite (truncation, stub) is counted once."""
    counter = CountingCounter()
    messages = load_transcript(SMALL)
    ctx = SimpleContextManager(token_counter=counter)
    counter.calls.pop('"token counter probe"')
    requests = await replay(ctx, messages, budget=int(sum(map(content_count, messages)) * 0.4))
    assert sum(r.boundary for r in requests) >= 2
    rewrites = {m.get("content") for r in requests for m in r.view if m.get("_truncated") or m.get("_stubbed")}
    assert rewrites, "the replay must truncate or stub something"
    stored = Tally(json.dumps(m.get("content"), ensure_ascii=False) for m in messages)
    derived = Tally(json.dumps(d.get("content"), ensure_ascii=False) for _, _, d in ctx._derived.values())
    repeated = {text: n for text, n in counter.calls.items() if n > stored[text] + derived[text]}
    # Only messages without a _seq (the notice, a replay) may be counted again.
    assert repeated and all("system-reminder" in text for text in repeated), sorted(repeated)[:3]


# ----- "estimate" is the default, byte for byte ----------------------------------------------------

IDENTITY_WORKLOADS = ["taubench__airline__task003__trial0", "agentperf__agentperf-default-v1__task_k8s_debugging"]


async def views_digest(messages: list[dict[str, Any]], budget: int, **options: Any) -> tuple[str, int]:
    ctx = SimpleContextManager(**options)
    requests = await replay(ctx, messages, budget)
    digest = hashlib.sha256()
    for request in requests:
        digest.update(json.dumps(request.view, ensure_ascii=False).encode() + b"\n")
    return digest.hexdigest(), sum(r.boundary for r in requests)


@pytest.mark.asyncio
@pytest.mark.parametrize("name", IDENTITY_WORKLOADS)
async def test_estimate_is_byte_identical_to_the_default(name: str) -> None:
    messages = load_transcript(WORKLOADS_DIR / f"{name}.jsonl")
    budget = int(estimated_size(messages) * 0.35)
    default, boundaries = await views_digest(messages, budget)
    assert boundaries >= 2, "the replay must compact, or identity proves nothing"
    assert await views_digest(messages, budget, token_counter="estimate") == (default, boundaries)
    assert await views_digest(messages, budget, token_counter=None) == (default, boundaries)
    # Negative control: the digest sees a different counter.
    assert (await views_digest(messages, budget, token_counter="content"))[0] != default


def replay_is_huge(message: dict[str, Any]) -> int:
    """Like huge_when_marked, and a replay envelope costs more than any budget."""
    return 10**7 if "context-replay" in json.dumps(message.get("content")) else huge_when_marked(message)


@pytest.mark.asyncio
async def test_the_replay_budget_check_uses_the_counter() -> None:
    """The last-user replay is skipped when it would not fit, measured with the configured counter."""
    views = {}
    for name, counter in (("marked", huge_when_marked), ("replay huge", replay_is_huge)):
        ctx = SimpleContextManager(token_counter=counter, replay_last_user_on_compaction=True)
        working = marked_conversation() + [stamped(asst_calls("c9")), stamped(result("c9", "step output"))]
        views[name] = await drive(ctx, working)
    assert "context-replay" in text_of(views["marked"])
    assert "context-replay" not in text_of(views["replay huge"])
    assert non_ephemeral(views["marked"]) == non_ephemeral(views["replay huge"])
