"""Bad input: a clear error naming the problem, and the stored history unchanged."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from amplifier_module_context_simple import SimpleContextManager
from tests.conftest import asst, build, stamped, user

NOT_DICTS = [None, "hello", 42, ["role", "user"], ("user", "hi")]
BAD_DICTS = [
    ({}, "role"),
    ({"content": "no role"}, "role"),
    ({"role": None, "content": "x"}, "role"),
    ({"role": "robot", "content": "x"}, "'robot'"),
    ({"role": "User", "content": "x"}, "'User'"),
    ({"role": "user", "content": 42}, "content"),
    ({"role": "user", "content": {"text": "a dict"}}, "content"),
    ({"role": "user", "content": [{"type": "text", "text": "ok"}, 7]}, "content block"),
    ({"role": "user", "content": "x", "metadata": "not a dict"}, "metadata"),
    ({"role": "assistant", "content": "", "tool_calls": {"id": "a"}}, "tool_calls"),
    # Unusable tool-call ids: the view would send a call with no result and drop the real one.
    ({"role": "assistant", "content": "", "tool_calls": [{"id": 5, "name": "x"}]}, "tool_calls[0] has id 5"),
    ({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "x"}}]}, "has id missing"),
    ({"role": "assistant", "content": "", "tool_calls": [{"id": "a"}, {"id": ""}]}, "tool_calls[1] has id ''"),
    ({"role": "assistant", "content": "", "tool_calls": ["call_0"]}, "tool_calls[0] must be a dict"),
    ({"role": "tool", "tool_call_id": 5, "content": "x"}, "tool_call_id is 5"),
    ({"role": "tool", "tool_call_id": "", "content": "x"}, "tool_call_id is ''"),
    ({"role": "tool", "content": "x"}, "tool_call_id is missing"),
]
GOOD_SHAPES = [
    {"role": "developer", "content": "dev note"},
    {"role": "function", "content": "legacy"},
    {"role": "user", "content": None},
    {"role": "user", "content": [{"type": "text", "text": "blocks"}, "plain string block"]},
]


async def compacted_manager() -> SimpleContextManager:
    """A manager with history and sticky compaction state, so 'unchanged' covers both."""
    ctx = SimpleContextManager(protected_tool_results=1)
    for message in build("S U T* T T T A U"):
        await ctx.add_message(stamped(message))
    await ctx.get_messages_for_request(token_budget=20_800)
    assert ctx._truncated_seqs
    return ctx


def state(ctx: SimpleContextManager) -> tuple[Any, ...]:
    return (
        copy.deepcopy(ctx.messages),
        ctx._next_seq,
        set(ctx._removed_seqs),
        set(ctx._truncated_seqs),
        set(ctx._stubbed_seqs),
        ctx._sticky_level,
        ctx._last_compaction_stats,
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("bad", NOT_DICTS, ids=lambda v: type(v).__name__)
async def test_add_message_rejects_a_non_dict_with_type_error(bad):
    ctx = await compacted_manager()
    before = state(ctx)
    with pytest.raises(TypeError, match=type(bad).__name__):
        await ctx.add_message(bad)
    assert state(ctx) == before


@pytest.mark.asyncio
@pytest.mark.parametrize(("bad", "named"), BAD_DICTS, ids=[named for _, named in BAD_DICTS])
async def test_add_message_rejects_a_bad_dict_with_value_error_naming_the_problem(bad, named):
    ctx = await compacted_manager()
    before = state(ctx)
    with pytest.raises(ValueError) as caught:
        await ctx.add_message(bad)
    assert named in str(caught.value)
    assert state(ctx) == before


@pytest.mark.asyncio
@pytest.mark.parametrize("good", GOOD_SHAPES, ids=lambda m: m["role"])
async def test_every_amplifier_core_role_and_content_shape_is_accepted(good):
    ctx = SimpleContextManager()
    await ctx.add_message(good)
    assert ctx.messages[0]["role"] == good["role"]
    assert (await ctx.get_messages_for_request(token_budget=10**6))[0]["content"] == good["content"]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("bad", "error", "named"),
    [
        ("not a dict", TypeError, "str"),
        ({"content": "no role"}, ValueError, "role"),
        ({"role": "robot", "content": "x"}, ValueError, "'robot'"),
        ({"role": "user", "content": 3.5}, ValueError, "content"),
        ({"role": "assistant", "content": "", "tool_calls": [{"id": 7}]}, ValueError, "has id 7"),
        ({"role": "tool", "tool_call_id": None, "content": "x"}, ValueError, "tool_call_id is missing"),
    ],
)
async def test_set_messages_with_one_bad_message_changes_nothing(bad, error, named):
    ctx = await compacted_manager()
    before = state(ctx)
    replacement = [user("a"), asst("b"), bad, user("d")]
    with pytest.raises(error) as caught:
        await ctx.set_messages(replacement)
    assert named in str(caught.value) and "message 2" in str(caught.value)
    assert state(ctx) == before


@pytest.mark.asyncio
@pytest.mark.parametrize("bad", [None, {"role": "user"}, "text", (user("a"),)], ids=lambda v: type(v).__name__)
async def test_set_messages_rejects_a_non_list(bad):
    ctx = await compacted_manager()
    before = state(ctx)
    with pytest.raises(TypeError, match="list"):
        await ctx.set_messages(bad)
    assert state(ctx) == before
