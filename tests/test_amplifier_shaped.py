"""Amplifier-shaped sessions (issue 18): what real hosts store, and the promises that must hold on it.

amplifier-core stores a hook's ``inject_context`` as a system-role message by default, often between an
assistant's tool calls and their results; OpenAI reasoning models take instructions as ``developer``;
Anthropic extended thinking puts signed ``thinking`` blocks on assistant turns; pastes arrive as lists
of text blocks. Each test below failed before its fix.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.instructions import is_injected_instruction, is_instruction
from amplifier_module_context_simple.repair import view_problems
from evaluation.shaped import shape
from tests.conftest import WORKLOADS, estimated_size, load_transcript, stamped

Message = dict[str, Any]
REMINDER = {"role": "system", "content": "<system-reminder>lint: 3 warnings</system-reminder>"}


class Events:
    def __init__(self) -> None:
        self.names: list[str] = []

    async def emit(self, name: str, payload: dict[str, Any]) -> None:
        self.names.append(name)


def hook(text: str = "lint: 3 warnings") -> Message:
    return {"role": "system", "content": f"<system-reminder>{text}</system-reminder>", "metadata": {"source": "hook"}}


def calls(call_id: str) -> Message:
    function = {"name": "bash", "arguments": "{}"}
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def result(call_id: str, size: int = 3000) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": "x" * size}


def wire(view: list[Message]) -> list[str]:
    return [
        json.dumps(m, sort_keys=True) for m in view if (m.get("metadata") or {}).get("source") != "context-compaction"
    ]


async def session_with_boundary(ctx: SimpleContextManager, inside: bool) -> list[Message]:
    await ctx.add_message(stamped({"role": "system", "content": "You are helpful."}))
    await ctx.add_message(stamped({"role": "user", "content": "do the task please"}))
    for index in range(6):
        await ctx.add_message(stamped(calls(f"c{index}")))
        if inside and index == 5:
            await ctx.add_message(stamped(hook()))  # loop-basic's order: tool:post injects before the result
        await ctx.add_message(stamped(result(f"c{index}")))
    return await ctx.get_messages_for_request(token_budget=4000)


@pytest.mark.asyncio
@pytest.mark.parametrize("inside", [False, True])
async def test_a_system_message_stored_after_a_boundary_keeps_its_place(inside: bool) -> None:
    """Item 1: it was hoisted to the front, changing the whole prefix with no compaction event."""
    events = Events()
    ctx = SimpleContextManager(hooks=events)
    first = await session_with_boundary(ctx, inside)
    boundaries = events.names.count("context:compaction")
    assert boundaries == 1
    await ctx.add_message(stamped({"role": "assistant", "content": "done step"}))
    await ctx.add_message(stamped(hook()))
    await ctx.add_message(stamped({"role": "user", "content": "next"}))
    second = await ctx.get_messages_for_request(token_budget=4000)
    assert events.names.count("context:compaction") == boundaries  # no boundary ...
    assert wire(second)[: len(wire(first))] == wire(first)  # ... so the view extends the last one
    assert second[-3]["role"] == "system" and second[-3]["content"] == hook()["content"]  # in history order


@pytest.mark.asyncio
async def test_an_instruction_stored_after_a_boundary_leads_only_from_the_next_boundary() -> None:
    ctx = SimpleContextManager()
    await session_with_boundary(ctx, False)
    late = {"role": "system", "content": "New standing instruction: answer briefly."}
    await ctx.add_message(stamped(late))
    await ctx.add_message(stamped({"role": "user", "content": "next"}))
    view = await ctx.get_messages_for_request(token_budget=4000)
    assert view[-3]["content"] == late["content"]  # in place between boundaries ("next" and the notice follow)
    for index in range(6, 14):  # grow until the next boundary
        await ctx.add_message(stamped(calls(f"c{index}")))
        await ctx.add_message(stamped(result(f"c{index}")))
    stats = ctx._last_compaction_stats
    view = await ctx.get_messages_for_request(token_budget=4000)
    assert ctx._last_compaction_stats is not stats  # a boundary ...
    assert [m["content"] for m in view[:2]] == ["You are helpful.", late["content"]]  # ... hoists it


async def hooked_rounds(role: str, rounds: int = 150, budget: int = 20_000) -> tuple[SimpleContextManager, int, int]:
    ctx = SimpleContextManager()
    await ctx.add_message(stamped({"role": "system", "content": "You are helpful. " * 50}))
    await ctx.add_message(stamped({"role": "user", "content": "do the task please"}))
    over = last = 0
    for index in range(rounds):
        await ctx.add_message(stamped(calls(f"c{index}")))
        await ctx.add_message(stamped({**hook("lint warnings: " + "w " * 150), "role": role}))
        await ctx.add_message(stamped(result(f"c{index}", 800)))
        view = await ctx.get_messages_for_request(token_budget=budget)
        assert view_problems(view) == []
        last = sum(len(str(m)) // 4 for m in view)
        over += last > budget
    return ctx, over, last


@pytest.mark.asyncio
@pytest.mark.parametrize("role", ["system", "user"])
async def test_hook_injections_are_removable_whatever_their_role(role: str) -> None:
    """Item 2: system-role injections were protected like instructions and outgrew the window."""
    ctx, over, last = await hooked_rounds(role)
    assert over == 0 and last < 20_000
    stats = ctx._last_compaction_stats
    assert stats is not None and stats["messages_removed"] > 100
    if role == "system":
        assert stats["hook_injections_removed"] > 50
        notice = (await ctx.get_messages_for_request(token_budget=20_000))[-1]["content"]
        line = f"except {stats['hook_injections_removed']} older hook reminders removed"
        assert line in notice  # "All system messages" stays true
    else:
        assert "hook_injections_removed" not in stats  # only present when it happened


@pytest.mark.asyncio
async def test_the_instructions_are_never_removed_and_the_stats_count_them_apart() -> None:
    ctx, _over, _last = await hooked_rounds("system", rounds=60, budget=8_000)
    view = await ctx.get_messages_for_request(token_budget=8_000)
    assert view[0]["content"].startswith("You are helpful.")
    assert ctx._last_compaction_stats["system_messages_preserved"] == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("role", ["system", "developer"])
async def test_the_developer_role_is_an_instruction(role: str) -> None:
    """Item 4: a developer message was removed by the ladder while the same text as system was kept."""
    ctx = SimpleContextManager()
    await ctx.add_message(stamped({"role": "user", "content": "do the task please"}))
    await ctx.add_message(stamped({"role": role, "content": "Always answer in French."}))
    for index in range(30):
        await ctx.add_message(stamped(calls(f"c{index}")))
        await ctx.add_message(stamped(result(f"c{index}")))
    await ctx.add_message(stamped({"role": "user", "content": "go on"}))
    view = await ctx.get_messages_for_request(token_budget=4_000)
    assert ctx._last_compaction_stats["messages_removed"] > 20
    assert view[0] == {"role": role, "content": "Always answer in French.", "metadata": view[0]["metadata"]}
    assert is_instruction(view[0]) and not is_injected_instruction(view[0])


@pytest.mark.asyncio
@pytest.mark.parametrize("blocks", [False, True])
async def test_a_block_content_paste_feeds_the_evidence_ledger(blocks: bool) -> None:
    """Item 5: a stubbed paste kept 0 of 6 URLs in the view as blocks, 6 of 6 as a string."""
    urls = [f"https://example.org/docs/page-{n}/section-{n * 7}" for n in range(6)]
    paste = "Please read these:\n" + "\n".join(urls)
    ctx = SimpleContextManager(preset="evidence")
    await ctx.add_message(stamped({"role": "user", "content": "first task " * 20}))
    content: Any = [{"type": "text", "text": paste}] if blocks else paste
    await ctx.add_message(stamped({"role": "user", "content": content}))
    for index in range(24):
        await ctx.add_message(stamped(calls(f"c{index}")))
        await ctx.add_message(stamped(result(f"c{index}", 2500)))
    await ctx.add_message(stamped({"role": "user", "content": "and now?"}))
    view = await ctx.get_messages_for_request(token_budget=6_000)
    text = json.dumps(view)
    assert ctx._last_compaction_stats is not None
    assert sum(url in text for url in urls) == 6


def thinking_turn(call_id: str, step: int) -> Message:
    blocks = [
        {
            "type": "thinking",
            "thinking": f"step {step}: I should run the tests",
            "signature": f"sig-{step}-" + "A" * 40,
        },
        {"type": "redacted_thinking", "data": f"opaque-{step}"},
        {"type": "text", "text": f"Running step {step}."},
    ]
    return {**calls(call_id), "content": blocks}


@pytest.mark.asyncio
async def test_thinking_blocks_are_kept_byte_for_byte_or_removed_whole() -> None:
    """Item 5: the API rejects a tool loop whose latest assistant turn has altered or missing thinking."""
    ctx = SimpleContextManager(protected_recent=0.0, protected_tool_results=0)
    await ctx.add_message(stamped({"role": "user", "content": "fix the build"}))
    for index in range(20):
        await ctx.add_message(stamped(thinking_turn(f"c{index}", index)))
        await ctx.add_message(stamped(result(f"c{index}", 4000)))
        view = await ctx.get_messages_for_request(token_budget=5_000)
        stored = {m["metadata"]["_seq"]: m for m in ctx.messages}
        assistants = [m for m in view if m.get("role") == "assistant"]
        assert assistants[-1]["content"] == ctx.messages[-2]["content"]  # the latest turn keeps its thinking
        for message in assistants:  # every kept turn is the stored one, blocks in order, unaltered
            original = next(s for s in stored.values() if s.get("tool_calls") == message.get("tool_calls"))
            assert message["content"] == original["content"]
    assert ctx._last_compaction_stats["messages_removed"] > 10


def shaped_sessions() -> list[tuple[str, list[Message]]]:
    return [(path.stem[:40], shape(load_transcript(path), seed=index)) for index, path in enumerate(WORKLOADS)]


def check_view(view: list[Message], previous: list[str] | None, boundary: bool, stored: list[Message]) -> list[str]:
    assert view_problems(view) == [], view_problems(view)
    assert [m for m in view if is_instruction(m)] == [
        {**m, "metadata": {k: v for k, v in m["metadata"].items() if k != "_seq"}} for m in stored if is_instruction(m)
    ]
    current = wire(view)
    if previous is not None and not boundary:
        assert current[: len(previous)] == previous, "a view between boundaries did not extend the last one"
    return current


@pytest.mark.slow  # long replay: `uv run pytest -m slow` (CI runs it)
@pytest.mark.asyncio
@pytest.mark.parametrize("preset", [None, "evidence_balanced"])
async def test_shaped_transcripts_keep_every_promise(preset: str | None) -> None:
    """Item 6 in the suite: 0 invalid views, 0 prefix changes without an event, instructions kept,
    no request over budget where the instructions fit, thinking turns unaltered."""
    for _name, messages in shaped_sessions():
        events = Events()
        ctx = SimpleContextManager(hooks=events, preset=preset)
        budget = int(estimated_size(messages) * 0.3)
        previous: list[str] | None = None
        given = copy.deepcopy(messages)
        for message in messages:
            if message["role"] == "assistant":
                before = events.names.count("context:compaction")
                view = await ctx.get_messages_for_request(token_budget=budget)
                boundary = events.names.count("context:compaction") > before
                previous = check_view(view, previous, boundary, ctx.messages)
                size = ctx._counts().total(view)
                instructions = sum(ctx._counts().count(m) for m in view if is_instruction(m))
                assert size <= budget + 800 or instructions > budget * 0.3, (size, budget)
                thinking = [m for m in view if m.get("role") == "assistant" and isinstance(m.get("content"), list)]
                assert all(m["content"] in [s.get("content") for s in ctx.messages] for m in thinking)
            await ctx.add_message(message)
        assert messages == given
