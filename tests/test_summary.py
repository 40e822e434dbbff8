"""The summary strategy: scripted summarizers of every temper, fork mode, the span, the refire levers.

Replays of real transcripts check every view: provider-valid tool pairing, the same system prompt
bytes on every request, no role-system summary, the history only ever grows by appended summaries,
and views extend each other between compaction boundaries. A summarizer that fails in any way must
leave views byte-identical to the progressive strategy's.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from typing import Any

import pytest
from amplifier_core.message_models import ChatResponse, TextBlock, ThinkingBlock
from amplifier_core.message_models import Message as ChatMessage
from hypothesis import given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import (
    DEFAULT_SUMMARIZATION_PROMPT,
    SimpleContextManager,
    _is_real_user_message,
)
from amplifier_module_context_simple.estimate import estimate_tokens, seq_of
from amplifier_module_context_simple.repair import view_problems
from amplifier_module_context_simple.tool_pairs import tool_groups
from tests.conftest import WORKLOADS_DIR, asst, asst_calls, load_transcript, result, stamped, user

LOGGER = "amplifier_module_context_simple"
ENVELOPE = '<system-reminder source="context-summary">\n'
SWE = "msa__pr814__deepseek_bench1__django__django-14155"  # one user message, 56 requests
TAU = "taubench__airline__task003__trial0"  # eleven user turns, 30 requests
RECOMMENDED = {"summary_min_absorb_tokens": 0.55}  # evaluation/studies/summary_refire.py


def transcript(name: str) -> list[dict[str, Any]]:
    return load_transcript(WORKLOADS_DIR / f"{name}.jsonl")


def budget_for(messages: list[dict[str, Any]], fraction: float = 0.3) -> int:
    """The system prompt, ``fraction`` of the rest, and the notice reserve: compaction must happen."""
    system = estimate_tokens([m for m in messages if m["role"] == "system"])
    return 800 + system + int(estimate_tokens([m for m in messages if m["role"] != "system"]) * fraction)


class Summarizer:
    """A scripted ``provider.complete``: instant, slow, hang, raise, empty, nontext or huge."""

    def __init__(self, mode: str = "instant") -> None:
        self.mode = mode
        self.requests: list[Any] = []

    async def complete(self, request: Any, **_: Any) -> Any:
        self.requests.append(request)
        span = request.messages[-1].content
        if self.mode == "slow":
            for _ in range(7):  # lands a couple of requests later
                await asyncio.sleep(0)
        elif self.mode == "hang":
            await asyncio.Event().wait()
        elif self.mode == "raise":
            raise RuntimeError("provider unavailable")
        elif self.mode == "empty":
            return ChatResponse(content=[TextBlock(text="  ")])
        elif self.mode == "nontext":
            return ChatResponse(content=[ThinkingBlock(thinking="hmm")])
        elif self.mode == "huge":
            return ChatResponse(content=[TextBlock(text=span * 2)])
        heads = [line[:80] for line in span.splitlines() if line.startswith("[")][:6]
        return ChatResponse(content=[TextBlock(text="Summary:\n" + "\n".join(heads))])


def is_summary(message: dict[str, Any]) -> bool:
    return (message.get("metadata") or {}).get("type") == "context_summary"


def is_ephemeral(message: dict[str, Any]) -> bool:
    return bool((message.get("metadata") or {}).get("ephemeral"))


class Invariants:
    """Checks every request of a summary-mode replay."""

    def __init__(self, ctx: SimpleContextManager) -> None:
        self.ctx = ctx
        self.snapshot: list[dict[str, Any]] = []
        self.previous: list[str] | None = None
        self.system: list[str] | None = None
        self.views: list[str] = []
        self.boundaries = 0

    def before(self) -> None:
        self.snapshot = copy.deepcopy(self.ctx.messages)

    def after(self, view: list[dict[str, Any]], boundary: bool) -> None:
        stored = self.ctx.messages
        assert stored[: len(self.snapshot)] == self.snapshot, "a stored message changed"
        for new in stored[len(self.snapshot) :]:
            assert is_summary(new) and new["role"] == "user" and new["content"].startswith(ENVELOPE)
            assert "ephemeral" not in new["metadata"] and seq_of(new) == max(map(seq_of, stored))
        assert view_problems(view) == []
        systems = [json.dumps(m) for m in view if m["role"] == "system"]
        self.system = self.system or systems
        assert systems == self.system, "the system prompt changed"
        last_user = next(m for m in reversed(stored) if _is_real_user_message(m))
        assert last_user["content"] in [m.get("content") for m in view if m["role"] == "user"]
        kept = [json.dumps(m, ensure_ascii=False) for m in view if not is_ephemeral(m)]
        if self.previous is not None and not boundary:
            assert kept[: len(self.previous)] == self.previous, "a view does not extend the previous one"
        self.previous = kept
        self.boundaries += boundary
        self.views.append(json.dumps(view, ensure_ascii=False))


async def drive(
    ctx: SimpleContextManager, messages: list[dict[str, Any]], provider: Any, yields: int = 3
) -> Invariants:
    """Add ``messages`` in order, asking for a view before each assistant message; yield after each."""
    check = Invariants(ctx)
    budget = budget_for(messages)
    for message in messages:
        if message["role"] == "assistant":
            check.before()
            before = ctx._last_compaction_stats
            view = await ctx.get_messages_for_request(token_budget=budget, provider=provider)
            check.after(view, ctx._last_compaction_stats is not None and ctx._last_compaction_stats is not before)
            for _ in range(yields):
                await asyncio.sleep(0)
        await ctx.add_message(message)
    return check


# ----- a summarizer of every temper --------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("name", [SWE, TAU])
@pytest.mark.parametrize("mode", ["instant", "slow"])
async def test_a_working_summarizer_absorbs_and_keeps_every_invariant(name: str, mode: str) -> None:
    ctx, provider = SimpleContextManager(compaction_strategy="summary"), Summarizer(mode)
    await drive(ctx, transcript(name), provider)
    summaries = [m for m in ctx.messages if is_summary(m)]
    assert summaries and ctx._summary_absorbed_count > 0 and ctx._summarization_failures == 0
    assert ctx._last_compaction_stats["messages_absorbed_by_summary"] == ctx._summary_absorbed_count
    spans = [r.messages[-1].content for r in provider.requests]
    assert spans and not any(ENVELOPE.strip() in span for span in spans), "a summary was re-summarized"


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["hang", "raise", "empty", "nontext", "huge"])
async def test_a_failing_summarizer_leaves_exactly_the_progressive_views(mode: str) -> None:
    messages = transcript(TAU)
    progressive = await drive(SimpleContextManager(), messages, None)
    ctx = SimpleContextManager(compaction_strategy="summary", summarization_timeout_s=0.001)
    provider = Summarizer(mode)
    check = await drive(ctx, messages, provider)
    assert check.views == progressive.views and check.boundaries == progressive.boundaries
    assert provider.requests and not any(is_summary(m) for m in ctx.messages)
    if ctx._summarization_task is not None:
        await ctx._summarization_task  # a hang ends in the timeout
    refused = mode == "huge"  # the shrink guard: not a failure
    assert (ctx._summarization_failures > 0) != refused
    assert (ctx.fault_stats.get("summarization_failures", 0) > 0) != refused
    # No refused summary took a _seq: set_messages (resume) re-stamps 0..N-1 (review regression).
    assert [m["metadata"]["_seq"] for m in ctx.messages] == list(range(len(ctx.messages))) == [*range(ctx._next_seq)]


@pytest.mark.asyncio
async def test_summary_with_a_system_prompt_factory_never_touches_the_system_prompt() -> None:
    ctx = SimpleContextManager(compaction_strategy="summary")

    async def prompt() -> str:
        return "You are the factory prompt."

    await ctx.set_system_prompt_factory(prompt)
    check = await drive(ctx, transcript(SWE), Summarizer())
    assert ctx._summary_absorbed_count > 0
    assert check.system == [json.dumps({"role": "system", "content": "You are the factory prompt."})]


@pytest.mark.asyncio
async def test_no_provider_means_exactly_progressive() -> None:
    messages = transcript(SWE)
    progressive = await drive(SimpleContextManager(), messages, None)
    summary = await drive(SimpleContextManager(compaction_strategy="summary"), messages, None)
    assert summary.views == progressive.views


@pytest.mark.asyncio
async def test_summary_knobs_change_no_byte_of_progressive() -> None:
    messages = transcript(TAU)
    plain = await drive(SimpleContextManager(), messages, Summarizer())
    knobs = {
        "summary_call_mode": "fork",
        "summary_trigger": 0.3,
        "summary_rearm_below": 0.2,
        "summary_cooldown_requests": 3,
        "summary_min_absorb_tokens": 0.5,
        "summarization_model": "m",
    }
    ctx = SimpleContextManager(**knobs)
    tuned = await drive(ctx, messages, Summarizer())
    assert tuned.views == plain.views and ctx._last_request_view is None and not ctx._sent_tools_supplied


# ----- the span ----------------------------------------------------------------------------------


def live_of(*messages: dict[str, Any]) -> list[dict[str, Any]]:
    return [stamped(m) for m in messages]


@pytest.mark.parametrize(
    ("live", "end", "boundary", "expected"),
    [
        ([user(), asst_calls("a"), result("a"), user("last"), asst()], 2, 4, 3),  # pulls the result in
        ([asst_calls("a"), user("x"), result("a"), asst()], 1, 3, 3),  # a non-adjacent straggler
        ([user(), asst_calls("a"), result("a"), asst()], 2, 2, 1),  # the result is protected: call left out
        ([asst_calls("a", "b"), result("a"), result("b"), asst()], 1, 2, 0),  # 2nd result protected
        ([user(), asst_calls("a"), result("a"), asst()], 3, 4, 3),  # a clean pair: unchanged
    ],
)
def test_snap_absorb_boundary_pinned_values(live: list[dict[str, Any]], end: int, boundary: int, expected: int) -> None:
    ctx = SimpleContextManager()
    assert ctx._snap_absorb_boundary(live, end, protected_boundary=boundary) == expected


SHAPES = st.lists(st.sampled_from(["user", "asst", "call1", "call2", "result"]), max_size=30)


@settings(max_examples=300, deadline=None)
@given(shapes=SHAPES, end=st.integers(0, 31), boundary=st.integers(0, 31), start=st.integers(0, 5))
def test_snapping_never_splits_a_tool_group(shapes: list[str], end: int, boundary: int, start: int) -> None:
    live, open_ids, serial = [], [], 0
    for shape in shapes:
        if shape.startswith("call"):
            ids = [f"c{serial + i}" for i in range(int(shape[-1]))]
            serial += len(ids)
            open_ids += ids
            live.append(asst_calls(*ids))
        elif shape == "result" and open_ids:
            live.append(result(open_ids.pop(0)))  # results may arrive late, after other messages
        else:
            live.append(user() if shape == "user" else asst())
    snapped = SimpleContextManager()._snap_absorb_boundary(live, end, protected_boundary=boundary, start=start)
    assert snapped == start or start < snapped <= min(boundary, len(live))
    for group in set(tool_groups(live).values()):
        inside = [start <= i < snapped for i in group]
        assert all(inside) or not any(inside), f"group {group} split by span [{start}, {snapped})"


@pytest.mark.asyncio
async def test_the_span_never_holds_the_first_or_last_real_user_message_or_a_summary() -> None:
    ctx = SimpleContextManager(compaction_strategy="summary", protected_recent=0.0)
    first = user("the task " * 30)
    history = [first, asst("a" * 400), user("more " * 40), asst("b" * 400), user("the latest instruction")]
    for message in history:
        await ctx.add_message(stamped(message))
    ctx.messages.append(ctx._make_summary_message("an earlier summary"))  # a role-user envelope at the tail
    seqs = ctx._select_summary_absorb_seqs(excess_tokens=10**6)
    assert seqs == [1, 2, 3]  # after the first user message, before the last real one; no summary


# ----- the swap and the shrink guard -------------------------------------------------------------


async def small_history(ctx: SimpleContextManager) -> None:
    for message in [user("task"), asst("x" * 2000), user("y" * 2000), asst("z" * 2000), user("last"), asst("ok")]:
        await ctx.add_message(stamped(message))


@pytest.mark.asyncio
async def test_a_summary_is_appended_with_a_fresh_seq_and_replayed_by_every_later_view() -> None:
    ctx = SimpleContextManager(compaction_strategy="summary", max_tokens=2400, protected_recent=0.0)
    await small_history(ctx)
    ctx._pending_summary = {"seqs": frozenset({1, 2, 3}), "text": "short summary"}
    first = await ctx.get_messages_for_request()
    summary = ctx.messages[-1]
    assert summary == {
        "role": "user",
        "content": f"{ENVELOPE}short summary\n</system-reminder>",
        "metadata": {"timestamp": summary["metadata"]["timestamp"], "type": "context_summary", "_seq": 6},
    }
    assert ctx._next_seq == 7 and {1, 2, 3} <= ctx._removed_seqs and ctx._summary_absorbed_count == 3
    assert not _is_real_user_message(summary)
    second = await ctx.get_messages_for_request()
    kept = [m for m in second if not is_ephemeral(m)]
    assert kept == [m for m in first if not is_ephemeral(m)]
    assert [m["content"][:5] for m in kept] == ["task", "last", "ok", ENVELOPE[:5]]


@pytest.mark.asyncio
async def test_the_swap_is_a_coroutine_as_in_the_original() -> None:
    # Callers and tests of the original ``await ctx._swap_in_pending_summary(non_system)``.
    ctx = SimpleContextManager(compaction_strategy="summary", max_tokens=2400, protected_recent=0.0)
    await small_history(ctx)
    ctx._pending_summary = {"seqs": frozenset({1, 2, 3}), "text": "short summary"}
    non_system = [m for m in ctx.messages if m["role"] != "system"]
    swapped, done = await ctx._swap_in_pending_summary(non_system)
    assert done and swapped[:-1] == non_system and swapped[-1] is ctx.messages[-1]
    assert {1, 2, 3} <= ctx._removed_seqs and ctx._pending_summary is None


@pytest.mark.asyncio
async def test_the_shrink_guard_refuses_a_summary_not_smaller_than_its_span(caplog: Any) -> None:
    ctx = SimpleContextManager(compaction_strategy="summary", max_tokens=2400, protected_recent=0.0)
    await small_history(ctx)
    stored = copy.deepcopy(ctx.messages)
    ctx._pending_summary = {"seqs": frozenset({1}), "text": "w" * 2100}
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        view = await ctx.get_messages_for_request()
    assert ctx.messages == stored and ctx._pending_summary is None and ctx._summary_absorbed_count == 0
    assert ctx._summarization_failures == 0 and "summary refused" in caplog.text
    # The refused summary takes no _seq (issue 12 item 2): _seq stays the position, as set_messages stamps it.
    assert ctx._next_seq == len(stored) == 6 and not any(is_summary(m) for m in view)


@pytest.mark.asyncio
async def test_a_summary_waits_while_the_history_ends_inside_a_tool_group() -> None:
    ctx = SimpleContextManager(compaction_strategy="summary", max_tokens=2400, protected_recent=0.0)
    await small_history(ctx)
    await ctx.add_message(stamped(asst_calls("a", "b")))
    await ctx.add_message(stamped(result("a")))
    ctx._pending_summary = {"seqs": frozenset({1, 2}), "text": "s"}
    await ctx.get_messages_for_request()
    assert ctx._pending_summary is not None and not any(is_summary(m) for m in ctx.messages)
    await ctx.add_message(stamped(result("b")))
    view = await ctx.get_messages_for_request()
    assert is_summary(ctx.messages[-1]) and ctx.messages[-2]["role"] == "tool" and view_problems(view) == []


@pytest.mark.asyncio
async def test_a_message_arriving_mid_request_postpones_the_swap_to_the_next_request() -> None:
    class ArrivingHooks:
        armed = True

        async def emit(self, name: str, payload: dict[str, Any]) -> None:
            if name == "context:token_meter" and self.armed:  # the request is awaiting: a message lands
                self.armed = False
                await ctx.add_message(stamped(user("arrived during the request")))

    ctx = SimpleContextManager(compaction_strategy="summary", max_tokens=2400, protected_recent=0.0)
    await small_history(ctx)
    ctx._hooks = ArrivingHooks()
    ctx._pending_summary = {"seqs": frozenset({1, 2, 3}), "text": "short summary"}
    first = await ctx.get_messages_for_request()
    assert ctx._pending_summary is not None and not any(is_summary(m) for m in first)
    stats = ctx._last_compaction_stats
    second = await ctx.get_messages_for_request()
    assert is_summary(ctx.messages[-1]) and ctx.messages[-2]["content"] == "arrived during the request"
    assert ctx._last_compaction_stats is not stats  # the swap is a boundary of its own
    assert [m for m in second if not is_ephemeral(m)][-1]["content"].startswith(ENVELOPE)


# ----- the background task -----------------------------------------------------------------------


class Hooks:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def emit(self, name: str, payload: dict[str, Any]) -> None:
        self.events.append((name, payload))


@pytest.mark.asyncio
async def test_the_standalone_call_its_prompt_and_its_events() -> None:
    hooks = Hooks()
    ctx = SimpleContextManager(compaction_strategy="summary", summarization_model="small", hooks=hooks)
    await small_history(ctx)
    provider = Summarizer()
    ctx._cached_provider = provider
    await ctx._run_summary_compaction_task([1, 2])
    (request,) = provider.requests
    assert [m.role for m in request.messages] == ["system", "user"] and request.model == "small"
    assert request.messages[0].content == DEFAULT_SUMMARIZATION_PROMPT
    assert request.messages[1].content == f"[assistant]: {'x' * 2000}\n\n[user]: {'y' * 2000}"
    summaries = [p for n, p in hooks.events if n.endswith("summarize")]
    assert summaries[0] == {"message_count": 2, "call_mode": "standalone"}
    assert summaries[1] == {"summary_length": len(ctx._pending_summary["text"]), "call_mode": "standalone"}
    assert ctx._pending_summary["seqs"] == frozenset({1, 2}) and not ctx._is_summarizing


def test_the_default_prompt_has_the_five_sections_and_a_file_overrides_it(tmp_path: Any, caplog: Any) -> None:
    for section in ("User Requests & Decisions", "Files Examined or Modified", "Errors Encountered & Resolutions"):
        assert f"## {section}" in DEFAULT_SUMMARIZATION_PROMPT
    assert "## Current Task State" in DEFAULT_SUMMARIZATION_PROMPT
    assert "## Key Technical Details" in DEFAULT_SUMMARIZATION_PROMPT
    path = tmp_path / "prompt.md"
    path.write_text("Summarize tersely.", encoding="utf-8")
    assert SimpleContextManager(summarization_prompt_path=str(path))._get_summarization_prompt() == "Summarize tersely."
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        missing = SimpleContextManager(summarization_prompt_path=str(tmp_path / "nope.md"))
        assert missing._get_summarization_prompt() == DEFAULT_SUMMARIZATION_PROMPT
    assert "not a readable file" in caplog.text  # said once, at construction (tests/test_config.py)


def test_formatting_labels_roles_tool_calls_and_results() -> None:
    long_args = {"command": "x" * 600}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "name": "bash", "input": long_args}]},
        {"role": "tool", "tool_call_id": "c", "content": "done"},
    ]
    text = SimpleContextManager()._format_messages_for_summarization(messages)
    args = json.dumps(long_args, separators=(",", ":"))[:500]
    assert text == f"[user]: a\nb\n\n[assistant]: \n  [tool_call: bash({args}...)]\n\n[tool_result for c]: done"


@pytest.mark.asyncio
async def test_set_messages_cancels_a_running_summary_and_a_late_result_never_lands() -> None:
    ctx = SimpleContextManager(compaction_strategy="summary", max_tokens=3000, protected_recent=0.0)
    await small_history(ctx)
    await ctx.get_messages_for_request(provider=Summarizer("hang"))
    task = ctx._summarization_task
    assert task is not None and ctx._is_summarizing
    await ctx.set_messages([user("a new session")])
    await asyncio.sleep(0)
    assert task.cancelled() and not ctx._is_summarizing and ctx._summarization_task is None
    stale = ctx._summary_generation - 1  # a task started before the reset, finishing after it
    ctx._cached_provider = Summarizer()
    await ctx._run_summary_compaction_task([0], generation=stale)
    assert ctx._pending_summary is None and ctx._summarization_failures == 0


# ----- fork mode ---------------------------------------------------------------------------------

TOOLS = [{"name": "bash", "description": "run a command", "parameters": {"type": "object"}}]


@pytest.mark.asyncio
async def test_fork_replays_exactly_the_last_sent_view_then_the_instruction() -> None:
    messages = transcript(SWE)
    ctx = SimpleContextManager(compaction_strategy="summary", summary_call_mode="fork")
    provider, budget = Summarizer(), budget_for(messages)
    sent: list[list[dict[str, Any]]] = []
    expected: list[list[dict[str, Any]]] = []
    for message in messages:
        if message["role"] == "assistant":
            task = ctx._summarization_task
            view = await ctx.get_messages_for_request(token_budget=budget, provider=provider)
            if ctx._summarization_task is not None and ctx._summarization_task is not task and sent:
                expected.append(sent[-1])  # the trigger replays what was sent before this request
            ctx.note_request_sent(view, tools=TOOLS, model="big")
            sent.append(view)
            for _ in range(3):
                await asyncio.sleep(0)
        await ctx.add_message(message)
    assert provider.requests and len(provider.requests) == len(expected)
    for request, prefix in zip(provider.requests, expected, strict=True):
        assert request.messages[:-1] == [ChatMessage(**m) for m in prefix]
        assert request.messages[-1].role == "user" and "SCOPE OF THIS SUMMARY" in request.messages[-1].content
        assert request.model == "big" and [t.name for t in request.tools] == ["bash"]
    stats = ctx.last_summary_call_stats
    assert stats["mode_used"] == "fork" and stats["prefix_source"] == "wire_record" and stats["reason"] is None
    assert stats["prefix_messages"] == len(expected[-1]) and ctx._summary_fork_fallbacks == 0


REFUSALS = {
    "never_noted": "note_request_sent() has never been called",
    "model": "summarization_model points the summarizer at a different model",
    "empty": "no request has been recorded yet",
    "open_calls": "ends with unanswered tool_calls",
    "span_missing": "not present in the recorded prefix",
    "unbuildable": "the forked request could not be built",
}


@pytest.mark.asyncio
@pytest.mark.parametrize("case", sorted(REFUSALS))
async def test_every_refusal_to_fork_falls_back_to_standalone_and_is_recorded(case: str, caplog: Any) -> None:
    model = "other" if case == "model" else None
    ctx = SimpleContextManager(compaction_strategy="summary", summary_call_mode="fork", summarization_model=model)
    await small_history(ctx)
    view = await ctx.get_messages_for_request()
    prefix = {
        "empty": [],
        "open_calls": [*view, asst_calls("q")],
        "span_missing": [user("something else entirely")],
    }.get(case, view)
    if case != "never_noted":
        ctx.note_request_sent(prefix, tools=[{"bogus": True}] if case == "unbuildable" else TOOLS)
    provider = Summarizer()
    ctx._cached_provider = provider
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await ctx._run_summary_compaction_task([1, 2], fork_prefix=ctx._capture_fork_prefix())
    stats = ctx.last_summary_call_stats
    assert stats["mode_requested"] == "fork" and stats["mode_used"] == "standalone"
    assert REFUSALS[case] in stats["reason"] and stats["fork_fallbacks"] == ctx._summary_fork_fallbacks == 1
    assert [m.role for m in provider.requests[0].messages] == ["system", "user"]
    assert "ran STANDALONE instead" in caplog.text and ctx._pending_summary is not None


@pytest.mark.asyncio
async def test_the_span_check_is_the_instance_method() -> None:
    ctx = SimpleContextManager(compaction_strategy="summary", summary_call_mode="fork")
    await small_history(ctx)
    await ctx.get_messages_for_request()
    ctx.note_request_sent(tools=TOOLS)  # no messages: the module's own last view is the prefix
    ctx._cached_provider = Summarizer()
    await ctx._run_summary_compaction_task([1, 2], fork_prefix=ctx._capture_fork_prefix())
    assert ctx.last_summary_call_stats["mode_used"] == "fork"
    assert ctx.last_summary_call_stats["prefix_source"] == "module_view"
    ctx._prefix_contains_span = lambda prefix, span: False
    await ctx._run_summary_compaction_task([1, 2], fork_prefix=ctx._capture_fork_prefix())
    assert REFUSALS["span_missing"] in ctx.last_summary_call_stats["reason"]


# ----- the refire levers -------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_hysteresis_rearms_only_after_usage_fell_below_the_band() -> None:
    ctx = SimpleContextManager(compaction_strategy="summary", summary_rearm_below=0.4, protected_recent=0.0)
    await small_history(ctx)
    ctx._cached_provider = Summarizer()
    budget = 2000

    async def fires(tokens: int) -> bool:
        ctx._maybe_trigger_summary_compaction(tokens, budget)
        task = ctx._summarization_task
        if task is None:
            return False
        await task
        ctx._pending_summary = None  # as if swapped in
        return True

    assert await fires(1400)
    assert not await fires(1400) and not await fires(1000)  # still disarmed above the band
    assert not await fires(700)  # below the band: re-armed, but under the trigger
    assert await fires(1300)


@pytest.mark.asyncio
async def test_cooldown_counts_requests_after_an_absorption() -> None:
    ctx = SimpleContextManager(compaction_strategy="summary", summary_cooldown_requests=2, protected_recent=0.0)
    await small_history(ctx)
    ctx._cached_provider = Summarizer()
    ctx._summary_cooldown_left = 2  # what a swap sets
    fired = []
    for _ in range(3):
        ctx._maybe_trigger_summary_compaction(1400, 2000)
        fired.append(ctx._summarization_task is not None)
    assert fired == [False, False, True]
    await ctx._summarization_task


@pytest.mark.asyncio
async def test_the_floor_refuses_small_spans_and_discards_a_summary_the_ladder_outran() -> None:
    ctx = SimpleContextManager(compaction_strategy="summary", protected_recent=0.0)
    await small_history(ctx)
    assert ctx._select_summary_absorb_seqs(excess_tokens=10, min_tokens=0) == [1]
    assert ctx._select_summary_absorb_seqs(excess_tokens=10, min_tokens=1200) == [1, 2, 3]
    assert ctx._select_summary_absorb_seqs(excess_tokens=10, min_tokens=5000) is None
    ctx.summary_min_absorb_tokens = 0.5  # of the request's effective budget (2400 - 800)
    ctx.max_tokens = 2400
    ctx._pending_summary = {"seqs": frozenset({1}), "text": "s"}
    ctx._removed_seqs.add(2)
    await ctx.get_messages_for_request()
    assert ctx._pending_summary is None and not any(is_summary(m) for m in ctx.messages)


@pytest.mark.asyncio
@pytest.mark.parametrize("name", [SWE, "msa__pr816__deepseek_chat_dev_rerun__pvlib__pvlib-python-1154", TAU])
async def test_recommended_levers_never_add_boundaries(name: str) -> None:
    """Same transcript and budget: the floor never costs a boundary against no levers or progressive."""
    messages = transcript(name)
    progressive = await drive(SimpleContextManager(), messages, None)
    bare = await drive(SimpleContextManager(compaction_strategy="summary"), messages, Summarizer())
    ctx = SimpleContextManager(compaction_strategy="summary", **RECOMMENDED)
    levers = await drive(ctx, messages, Summarizer())
    assert levers.boundaries <= bare.boundaries and levers.boundaries <= progressive.boundaries
    assert bare.boundaries > progressive.boundaries  # the refire loop is real without the levers


def test_public_constants() -> None:
    import amplifier_module_context_simple as module

    assert (module._SUMMARY_ENVELOPE_SOURCE, module._SUMMARY_METADATA_TYPE) == ("context-summary", "context_summary")
    assert (module.FORK_PREFIX_SOURCE_WIRE, module.FORK_PREFIX_SOURCE_VIEW) == ("wire_record", "module_view")
    assert module._FORK_BOUNDARY_EXCERPT_CHARS == 300
    assert ENVELOPE == f'<system-reminder source="{module._SUMMARY_ENVELOPE_SOURCE}">\n'
