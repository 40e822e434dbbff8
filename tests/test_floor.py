"""The last rung (floor.py): after level 8, the protections yield in the documented order, each only as far
as the goal needs, never below the true floor."""

from __future__ import annotations

import dataclasses
import functools
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from amplifier_core.testing import MockCoordinator

from amplifier_module_context_simple import SimpleContextManager, mount
from amplifier_module_context_simple.estimate import estimate_tokens
from amplifier_module_context_simple.floor import Goals, yield_floor
from amplifier_module_context_simple.ladder import LadderPlan, plan_compaction
from tests.conftest import asst, asst_calls, result, stamped, system, user

Message = dict[str, Any]
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
ORDER = ("protected_results", "recent_messages", "user_words", "user_messages", "newest_results")


def stored(messages: list[Message]) -> list[Message]:
    return [{**m, "metadata": {"_seq": seq}} for seq, m in enumerate(messages)]


def history() -> list[Message]:
    """The task, older turns with screenshots and short thanks, two older tool groups (protected whole by the
    last-5 rule), then the turn's prompt and its newest group, the largest part."""
    messages = [user("Make the settings page match the design; keep the old behaviour. " * 4)]
    for index in range(4):
        messages += [user([{"type": "text", "text": f"Screen {index}."}, IMAGE]), asst(f"Noted {index}.")]
        messages += [user("Thanks."), asst("Sure.")]
    for index in range(2):
        messages += [asst_calls(f"o{index}"), result(f"o{index}", "old line\n" * 2_000)]
    messages += [user("Now compare the two renderers."), asst_calls("n"), result("n", "new line\n" * 4_000)]
    return stored(messages)


def planned(goal: int) -> LadderPlan:
    """Levels 1-8 (every message recent, the last 5 results protected: none of them acts) and the rung."""
    messages = history()
    ops = dataclasses.replace(SimpleContextManager()._ladder_ops(), turn_start=len(messages) - 3)  # the prompt
    rung = functools.partial(yield_floor, goals=Goals(must=(goal,), limit=goal))  # the provider's limit
    return plan_compaction(messages, 0, 1, 1.0, 5, ops, user_words=20_000, last_rung=rung)


def plan(goal: int) -> tuple[dict[str, int], int, list[Message]]:
    result = planned(goal)
    return result.yields, result.total, result.messages


def user_texts(messages: list[Message]) -> list[Any]:
    return [m["content"] for m in messages if m.get("role") == "user"]


def test_each_protection_yields_only_once_the_ones_before_it_are_spent():
    whole = estimate_tokens(history())
    seen: list[tuple[str, ...]] = []
    for goal in range(whole, 0, -250):
        yields, total, messages = plan(goal)
        kinds = tuple(kind for kind in ORDER if yields.get(f"floor_yield_{kind}"))
        if planned(goal).unfit is not None:
            continue  # under the true floor: the user's words stay (test_the_true_floor_stays)
        if yields:
            assert total <= goal or "newest_results" in kinds  # only the true floor ends over a goal
        if kinds not in seen:
            seen.append(kinds)
    # Each new kind of yield joins the ones before it: the order of floor.py, with no kind skipped back.
    longest = max(seen, key=len)
    assert longest == ORDER
    assert all(kinds == ORDER[: len(kinds)] for kinds in seen), seen


def test_the_true_floor_stays():
    # No goal is reachable: the user's words would be given up for nothing, and stay (old code: nothing
    # yielded at all, not even what is not the user's, so a floor a little over the goal's margin went
    # out whole, far past the limit). What is not theirs yields towards it.
    yields, _total, messages = plan(1)
    assert planned(1).unfit == 1
    assert user_texts(messages) == user_texts(history())
    assert yields["floor_yield_newest_results"] == 1 and not {
        "floor_yield_user_words",
        "floor_yield_user_messages",
    } & set(yields)
    yields, total, messages = plan(1_000)  # reachable only by clipping the newest group
    texts = [m["content"] for m in messages if isinstance(m.get("content"), str)]
    assert yields["floor_yield_newest_results"] == 1 and total <= 1_000
    assert texts[0].startswith("[User message compacted")  # the task, stubbed, still first
    assert "Now compare the two renderers." in texts  # the turn's prompt, whole
    assert [m.get("tool_call_id") for m in messages if m.get("role") == "tool"] == ["n"]  # its group, clipped


def test_an_exempt_result_counts_whole_in_the_floor():
    from amplifier_module_context_simple.floor import floor_tokens
    from amplifier_module_context_simple.ladder import _Run

    messages = history()
    for exempt in (False, True):
        ctx = SimpleContextManager(tool_result_exempt_tools=["read_file"] if exempt else None)
        ctx.messages = messages
        ops = dataclasses.replace(ctx._ladder_ops(), turn_start=len(messages) - 3)
        run = _Run(list(messages), estimate_tokens(messages), 1, ops, 20_000)
        floor = floor_tokens(run, 0)
        newest = estimate_tokens([messages[-1]])
        # Old code: the newest result, of an exempt tool, counted as clipped to ~300 tokens
        assert (floor > newest) if exempt else (floor < newest)


@pytest.mark.asyncio
async def test_an_exempt_result_over_the_limit_keeps_the_users_words(caplog):
    # The newest results are an exempt tool's, past the input limit of 36,000: nothing valid fits.
    # Old code: the floor counted it as clippable, so the rung gave up the user's corrections and stubbed
    # the task, and the view still went out past the limit. Now the user's words stay, and one warning says
    # the view does not fit.
    coordinator = MockCoordinator()
    # The preset's result cap (issue 39, result_share.py) would clip the big results in the view from their
    # first request, and the view would fit: off here, to see what the floor keeps past the limit.
    config = {"preset": "evidence", "tool_result_exempt_tools": ["read_file"], "max_tool_result_share": None}
    await mount(coordinator, config)
    ctx = coordinator.get("context")
    task = "Audit the loader; " + "quote the lines you rely on. " * 20
    corrections = [f"Correction {i}: never touch the parser module; " + "keep the API. " * 30 for i in range(4)]
    messages = [system("You are careful."), user(task)]
    for index, correction in enumerate(corrections):
        messages += [asst(f"Done step {index}."), user(correction)]
    messages += [asst_calls("g", name="grep"), result("g", "match\n" * 3_000), user("Now read the big file.")]
    big = "line of the big file\n" * 6_000  # under max_tool_result_bytes: two of them are past the limit
    messages += [asst_calls("a", "b"), result("a", big), result("b", big)]
    for message in messages:
        await ctx.add_message(stamped(message))
    provider = SimpleNamespace(get_model_info=lambda: SimpleNamespace(context_window=40_000, max_output_tokens=4_000))
    with caplog.at_level(logging.WARNING, logger="amplifier_module_context_simple"):
        view = await ctx.get_messages_for_request(provider=provider)
    texts = [m["content"] for m in view if m.get("role") == "user"]
    assert estimate_tokens(view) > 36_000  # nothing valid fits
    assert task in texts and all(correction in texts for correction in corrections)
    assert not {"floor_yield_user_words", "floor_yield_user_messages"} & set(ctx._last_compaction_stats)
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
