"""Which user messages the turn protects (issue 37.2): the newest prompt and the steering messages after it.

The last release protected every user message after the last tool-free answer, so a run of user messages
was never stubbed or removed, and a long paste followed by tool rounds and a new prompt was never reduced.
"""

from __future__ import annotations

import pytest

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.replay import turn_prompt_index
from tests.conftest import add_all, asst, asst_calls, last_real_user, result, system, user


def test_of_a_run_of_user_messages_the_newest_is_the_prompt() -> None:
    run = [system(), *(user(f"message {k} " + "x" * 200) for k in range(5))]
    assert turn_prompt_index(run) == 5
    steered = [system(), user("the prompt"), asst_calls("c1"), result("c1"), user("steer 1"), user("steer 2")]
    assert turn_prompt_index(steered) == 1  # queued steers stored one after another stay steers


@pytest.mark.asyncio
async def test_five_user_messages_in_a_row_are_compacted() -> None:
    """The original's budget-guard case: five 1,000-character user messages over the target are stubbed."""
    context = SimpleContextManager(max_tokens=10_000, compact_threshold=0.1, target_usage=0.05)
    await add_all(context, [user("x" * 1000) for _ in range(5)])
    view = await context.get_messages_for_request()
    stats = context._last_compaction_stats
    assert stats is not None and stats["after_tokens"] < stats["before_tokens"]
    stubbed = [m for m in view if m.get("role") == "user" and str(m.get("content")).startswith("[User message")]
    assert stubbed and last_real_user(view)["content"] == "x" * 1000  # the newest stays whole


def pasted_then_new_prompt() -> list[dict]:
    """A 45,000-character paste as text blocks, 12 tool calls (the turn never got its answer), a new prompt."""
    blocks = [{"type": "text", "text": f"part {k}: " + "lorem ipsum " * 750} for k in range(5)]
    paste = {"role": "user", "content": blocks}
    out = [system(), user("Help me review the design document I am about to paste."), asst("Sure, paste it."), paste]
    for k in range(12):
        out += [asst_calls(f"c{k}", name="grep"), result(f"c{k}", f"match {k}")]
    return [*out, user("Forget the document; what does grep match 3 say?")]


@pytest.mark.asyncio
async def test_a_paste_before_an_unanswered_turn_and_a_new_prompt_is_reduced() -> None:
    messages = pasted_then_new_prompt()
    assert sum(len(b["text"]) for b in messages[3]["content"]) >= 45_000
    context = SimpleContextManager(max_tokens=8_000)
    await add_all(context, messages)
    view = await context.get_messages_for_request()
    budget = context._last_compaction_stats["budget"]
    assert context._last_compaction_stats["after_tokens"] <= budget
    assert last_real_user(view)["content"] == messages[-1]["content"]  # the newest prompt stays whole
    assert all(m.get("content") != messages[3]["content"] for m in view)  # the paste was reduced
