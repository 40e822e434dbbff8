"""Last-user replay (replay_last_user_on_compaction): once per boundary, never a synthetic envelope.

Every row of docs/reference.md's "deliberately does nothing" table has a test here, and replays of real
transcripts check that the feature only ever adds one ephemeral message before the notice.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from amplifier_module_context_simple import SimpleContextManager, _is_real_user_message
from amplifier_module_context_simple.repair import view_problems
from amplifier_module_context_simple.replay import is_real_user_message
from tests.conftest import Recorder

WORKLOADS = Path(__file__).resolve().parent / "data" / "workloads"
# Smaller real sessions: the whole file replays in well under a second.
REAL = [
    "msa__pr814__deepseek_lite_dev__pylint-dev__astroid-1268",
    "msa__pr816__deepseek_chat_dev_rerun__pvlib__pvlib-python-1154",
    "msa__pr814__deepseek_bench1__django__django-14155",
    "agentperf__agentperf-default-v1__task_meeting_council_votes",
]
TS = "2025-01-01T00:00:00.000+00:00"
# Transcribed from the README / upstream notes (section 11), not computed by the module.
PREAMBLE = (
    "This is a verbatim copy of your most recent instruction, repeated here because context compaction "
    "has moved it far from the end of the conversation. It is NOT a new request -- do not answer it again "
    "if it is already handled."
)
INSTRUCTION = "Please refactor the parser so that it never reads the same file twice, and keep the tests green."

Message = dict[str, Any]


def stamped(message: Message) -> Message:
    return {**message, "metadata": {**(message.get("metadata") or {}), "timestamp": TS}}


def user(text: Any) -> Message:
    return {"role": "user", "content": text}


def call(i: int) -> Message:
    fn = {"name": "read_file", "arguments": json.dumps({"path": f"src/f{i}.py"})}
    return {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{i}", "type": "function", "function": fn}]}


def result(i: int, chars: int = 2400) -> Message:
    return {"role": "tool", "tool_call_id": f"c{i}", "content": f"# file {i}\n" + "x" * chars}


def session(rounds: int, instruction: str = INSTRUCTION) -> list[Message]:
    """A system prompt, one user instruction, then rounds of tool call + big result."""
    out: list[Message] = [{"role": "system", "content": "You are a careful coding agent."}, user(instruction)]
    for i in range(rounds):
        out += [call(i), result(i)]
    return out


async def load(ctx: SimpleContextManager, messages: list[Message]) -> None:
    for message in messages:
        await ctx.add_message(stamped(message))


def replays(view: list[Message]) -> list[Message]:
    return [m for m in view if (m.get("metadata") or {}).get("source") == "context-replay"]


def is_notice(message: Message) -> bool:
    return (message.get("metadata") or {}).get("source") == "context-compaction"


def expected_replay(text: str) -> Message:
    content = f'<system-reminder source="context-replay">\n{PREAMBLE}\n\n{text}\n</system-reminder>'
    return {"role": "user", "content": content, "metadata": {"source": "context-replay", "ephemeral": True}}


# --- the envelope and its place -------------------------------------------------------------------


@pytest.mark.asyncio
async def test_replay_envelope_text_and_place_before_the_notice() -> None:
    hooks = Recorder()
    ctx = SimpleContextManager(hooks=hooks, replay_last_user_on_compaction=True)
    await load(ctx, session(12))
    view = await ctx.get_messages_for_request(token_budget=8000)
    assert hooks.count("context:compaction") == 1
    assert view[-2] == expected_replay(INSTRUCTION)
    assert is_notice(view[-1])
    assert all("context-replay" not in json.dumps(m) for m in ctx.messages), "the replay is view-only"


@pytest.mark.asyncio
async def test_text_blocks_are_joined_with_newlines() -> None:
    ctx = SimpleContextManager(replay_last_user_on_compaction=True)
    blocks = [{"type": "text", "text": "first part"}, {"type": "image_url", "image_url": {"url": "x"}}]
    blocks.append({"type": "text", "text": "second part"})
    msgs = session(12)
    msgs[1] = user(blocks)
    await load(ctx, msgs)
    view = await ctx.get_messages_for_request(token_budget=8000)
    assert replays(view) == [expected_replay("first part\nsecond part")]


# --- "deliberately does nothing" ------------------------------------------------------------------


@pytest.mark.asyncio
async def test_no_compaction_no_replay() -> None:
    ctx = SimpleContextManager(replay_last_user_on_compaction=True)
    await load(ctx, session(12))
    view = await ctx.get_messages_for_request(token_budget=200_000)
    assert replays(view) == [] and ctx._last_compaction_stats is None


@pytest.mark.asyncio
async def test_never_compacted_boundary_never_replays() -> None:
    ctx = SimpleContextManager(replay_last_user_on_compaction=True)
    view = [{"role": "system", "content": "s"}, user(INSTRUCTION), {"role": "assistant", "content": "ok"}]
    ctx._maybe_append_last_user_replay(view, budget=100_000)
    assert len(view) == 3 and ctx._last_replayed_boundary is None
    ctx._sticky_level = 1
    ctx._maybe_append_last_user_replay(view, budget=100_000)
    assert view[-1] == expected_replay(INSTRUCTION)


@pytest.mark.asyncio
async def test_once_per_boundary_across_many_requests() -> None:
    hooks = Recorder()
    ctx = SimpleContextManager(hooks=hooks, replay_last_user_on_compaction=True)
    await load(ctx, session(12))
    raised = replayed = compactions = 0
    for i in range(12, 60):
        level, before = ctx._sticky_level, hooks.count("context:compaction")
        view = await ctx.get_messages_for_request(token_budget=8000 if i < 40 else 5000)
        compacted = hooks.count("context:compaction") > before
        compactions += compacted
        raised += ctx._sticky_level > level
        replayed += len(replays(view))
        assert len(replays(view)) == (ctx._sticky_level > level), f"request {i}: a replay iff a new boundary"
        assert compacted or not replays(view)
        await load(ctx, [call(i), result(i, 600)])
    assert replayed == raised >= 2
    assert compactions > replayed, "boundaries at an unchanged level must have happened (and not replayed)"


@pytest.mark.asyncio
async def test_a_higher_level_is_a_new_boundary() -> None:
    ctx = SimpleContextManager(replay_last_user_on_compaction=True)
    await load(ctx, session(12))
    first = await ctx.get_messages_for_request(token_budget=8_000)
    level = ctx._sticky_level
    again = await ctx.get_messages_for_request(token_budget=8_000)
    deeper = await ctx.get_messages_for_request(token_budget=3_000)
    assert len(replays(first)) == 1 and replays(again) == []
    assert ctx._sticky_level > level and replays(deeper) == [expected_replay(INSTRUCTION)]


@pytest.mark.asyncio
async def test_unanswered_tool_calls_at_the_tail_skip_then_retry() -> None:
    ctx = SimpleContextManager(replay_last_user_on_compaction=True)
    await load(ctx, [*session(12), call(99)])
    blocked = await ctx.get_messages_for_request(token_budget=8000)
    assert blocked[-1].get("tool_calls") and replays(blocked) == []
    assert ctx._last_compaction_stats is not None and ctx._last_replayed_boundary is None
    await load(ctx, [result(99, 100)])
    retried = await ctx.get_messages_for_request(token_budget=8000)
    assert retried[-2] == expected_replay(INSTRUCTION) and is_notice(retried[-1])


@pytest.mark.asyncio
async def test_last_user_message_at_the_tail_is_not_duplicated() -> None:
    ctx = SimpleContextManager(replay_last_user_on_compaction=True)
    await load(ctx, [*session(12), user("now summarise what you found")])
    view = await ctx.get_messages_for_request(token_budget=8000)
    assert ctx._last_compaction_stats is not None
    assert replays(view) == [] and view[-2]["content"] == "now summarise what you found"


def crafted(last_user: Message) -> list[Message]:
    return [{"role": "system", "content": "s"}, user(INSTRUCTION), call(1), result(1, 50), last_user, call(2)]


@pytest.mark.asyncio
async def test_a_stubbed_last_user_message_is_not_replayed() -> None:
    ctx = SimpleContextManager(replay_last_user_on_compaction=True)
    ctx._sticky_level = 8
    stub = {**user('[User message compacted - original: "do the thing..."]'), "_stubbed": True}
    view = [*crafted(stub), result(2, 50)]
    ctx._maybe_append_last_user_replay(view, budget=100_000)
    assert replays(view) == [], "no fall back to an older user message either"


@pytest.mark.parametrize(
    "content",
    [
        "   \n ",
        [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}],
        None,
        '<system-reminder source="context-summary">\nEarlier: the user asked...\n</system-reminder>',
    ],
    ids=["blank", "image-only", "no-content", "envelope-only"],
)
@pytest.mark.asyncio
async def test_no_real_user_text_no_replay(content: Any) -> None:
    ctx = SimpleContextManager(replay_last_user_on_compaction=True)
    ctx._sticky_level = 3
    view = [{"role": "system", "content": "s"}, user(content), call(1), result(1, 50)]
    ctx._maybe_append_last_user_replay(view, budget=100_000)
    assert replays(view) == [] and ctx._last_replayed_boundary is None


@pytest.mark.asyncio
async def test_envelopes_after_the_last_real_user_message_are_skipped_over() -> None:
    ctx = SimpleContextManager(replay_last_user_on_compaction=True)
    ctx._sticky_level = 3
    envelope = user('<system-reminder source="hook">lint passed</system-reminder>')
    view = [*crafted(user("the real last instruction")), result(2, 50), envelope, call(3), result(3, 50)]
    ctx._maybe_append_last_user_replay(view, budget=100_000)
    assert view[-1] == expected_replay("the real last instruction")


@pytest.mark.asyncio
async def test_a_replay_that_would_exceed_the_budget_is_skipped() -> None:
    ctx = SimpleContextManager(replay_last_user_on_compaction=True)
    ctx._sticky_level = 3
    view = [*crafted(user(INSTRUCTION * 4)), result(2, 50)]
    exact = ctx._counts().total(view) + ctx._counts().total([expected_replay(INSTRUCTION * 4)])
    tight = list(view)
    ctx._maybe_append_last_user_replay(tight, budget=exact - 1)
    assert replays(tight) == []
    ctx._maybe_append_last_user_replay(view, budget=exact)
    assert replays(view) == [expected_replay(INSTRUCTION * 4)]


# --- the real-user predicate ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "opener",
    [
        "<system-reminder>",
        '<system-reminder source="context-summary">',
        '<system-reminder source="context-replay">',
        "<system-reminder data-x='1' >",
        "<system-reminder\n>",
        "  \n\t<system-reminder>",
    ],
)
def test_any_system_reminder_opener_is_not_a_real_user_message(opener: str) -> None:
    text = f"{opener}\nsomething the harness said\n</system-reminder>"
    assert not is_real_user_message(user(text))
    assert not is_real_user_message(user([{"type": "text", "text": text}]))
    assert not is_real_user_message(user([{"type": "text", "text": "hello"}, {"type": "text", "text": text}]))
    assert not _is_real_user_message(user(text)), "the exported name is the same predicate"


@pytest.mark.parametrize(
    "message",
    [
        user("please fix the failing test"),
        user("I saw <system-reminder> in the logs, what is it?"),
        user([{"type": "text", "text": "look at this"}, {"type": "image_url", "image_url": {"url": "x"}}]),
        user(""),
    ],
)
def test_ordinary_user_messages_are_real(message: Message) -> None:
    assert is_real_user_message(message)


@pytest.mark.parametrize(
    "message",
    [
        {"role": "tool", "tool_call_id": "c1", "content": "output"},
        {"role": "user", "tool_call_id": "c1", "content": "output"},
        {"role": "assistant", "content": "please fix it"},
        {"role": "system", "content": "please fix it"},
        "not a dict",
    ],
)
def test_tool_results_and_other_roles_are_not_real_user_messages(message: Any) -> None:
    assert not is_real_user_message(message)


# --- real transcripts -----------------------------------------------------------------------------


def load_real(name: str) -> list[Message]:
    lines = (WORKLOADS / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    return [{k: v for k, v in json.loads(line).items() if v is not None} for line in lines if line.strip()]


async def drive(messages: list[Message], budget: int, **config: Any) -> tuple[list[list[Message]], Recorder]:
    """A view before every assistant message, as an orchestrator asks for them."""
    hooks = Recorder()
    ctx = SimpleContextManager(hooks=hooks, **config)
    views = []
    for message in messages:
        if message["role"] == "assistant":
            views.append(await ctx.get_messages_for_request(token_budget=budget))
        await ctx.add_message(stamped(message))
    assert all("context-replay" not in json.dumps(m) for m in ctx.messages)
    return views, hooks


def last_real_user_text(messages: list[Message]) -> str:
    """Independent of the module: the newest user turn whose text is not a reminder envelope."""
    for m in reversed(messages):
        if m["role"] == "user" and "tool_call_id" not in m:
            c = m.get("content")
            text = c if isinstance(c, str) else "\n".join(b.get("text", "") for b in c or [] if isinstance(b, dict))
            if not text.strip().startswith("<system-reminder"):
                return text
    return ""


@pytest.mark.parametrize("name", REAL)
@pytest.mark.asyncio
async def test_real_transcripts_replay_only_adds_one_ephemeral_message(name: str) -> None:
    messages = load_real(name)
    budget = 12_000
    off, _ = await drive(copy.deepcopy(messages), budget)
    on, _ = await drive(copy.deepcopy(messages), budget, replay_last_user_on_compaction=True)
    history_at = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    total = 0
    for view_on, view_off, upto in zip(on, off, history_at, strict=True):
        found = replays(view_on)
        assert len(found) <= 1
        assert [m for m in view_on if m not in found] == view_off, "nothing else in the view changes"
        assert view_problems(view_on) == []
        if found:
            total += 1
            assert found[0] == expected_replay(last_real_user_text(messages[:upto]))
            assert view_on.index(found[0]) == len(view_on) - 2 and is_notice(view_on[-1])
    assert total >= 1, f"{name}: the replay never fired at budget {budget}"


@pytest.mark.asyncio
async def test_a_replay_that_would_pass_the_input_limit_is_skipped() -> None:
    """Issue 37.7: the budget alone let a boundary view with its replay pass the provider's input limit
    (139,707 against 136,000). A window whose limit the view fits but the view and its replay do not: no replay."""
    from types import SimpleNamespace

    ctx = SimpleContextManager(replay_last_user_on_compaction=True)
    ctx._sticky_level = 3
    words = INSTRUCTION * 40
    view = [*crafted(user(words)), result(2, 50)]
    size = ctx._counts().total(view)
    with_replay = size + ctx._counts().total([expected_replay(words)])
    for window in range(4_000, 40_000, 50):
        ctx._budget_reading = SimpleNamespace(context_window=window, max_output_tokens=1_000)
        goal = ctx._limit_goal()
        if goal is not None and size < goal < with_replay:
            break
    assert goal is not None and size < goal < with_replay
    tight = list(view)
    ctx._maybe_append_last_user_replay(tight, budget=with_replay * 2)  # the budget alone would take it
    assert replays(tight) == []
    ctx._budget_reading = SimpleNamespace(context_window=window * 4, max_output_tokens=1_000)
    ctx._maybe_append_last_user_replay(view, budget=with_replay * 2)
    assert replays(view) == [expected_replay(words)]
