"""The last rung (floor.py): after level 8, the protections yield in the documented order, each only as far
as the goal needs, never below the true floor."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.estimate import estimate_tokens
from amplifier_module_context_simple.floor import Goals, yield_floor
from amplifier_module_context_simple.ladder import plan_compaction
from tests.conftest import asst, asst_calls, result, user

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


def plan(goal: int) -> tuple[dict[str, int], int, list[Message]]:
    """Levels 1-8 (every message recent, the last 5 results protected: none of them acts) and the rung."""
    messages = history()
    ops = dataclasses.replace(SimpleContextManager()._ladder_ops(), turn_start=len(messages) - 3)  # the prompt
    rung = functools.partial(yield_floor, goals=Goals(must=(goal,)))
    planned = plan_compaction(messages, 0, 1, 1.0, 5, ops, user_words=20_000, last_rung=rung)
    return planned.yields, planned.total, planned.messages


def test_each_protection_yields_only_once_the_ones_before_it_are_spent():
    whole = estimate_tokens(history())
    seen: list[tuple[str, ...]] = []
    for goal in range(whole, 0, -250):
        yields, total, messages = plan(goal)
        kinds = tuple(kind for kind in ORDER if yields.get(f"floor_yield_{kind}"))
        if yields:
            assert total <= goal or "newest_results" in kinds  # only the true floor ends over a goal
        if kinds not in seen:
            seen.append(kinds)
    # Each new kind of yield joins the ones before it: the order of floor.py, with no kind skipped back.
    longest = max(seen, key=len)
    assert longest == ORDER
    assert all(kinds == ORDER[: len(kinds)] for kinds in seen), seen


def test_the_true_floor_stays():
    yields, _total, messages = plan(1)  # no goal is reachable: nothing yields at all
    assert yields == {}
    yields, total, messages = plan(1_000)  # reachable only by clipping the newest group
    texts = [m["content"] for m in messages if isinstance(m.get("content"), str)]
    assert yields["floor_yield_newest_results"] == 1 and total <= 1_000
    assert texts[0].startswith("[User message compacted")  # the task, stubbed, still first
    assert "Now compare the two renderers." in texts  # the turn's prompt, whole
    assert [m.get("tool_call_id") for m in messages if m.get("role") == "tool"] == ["n"]  # its group, clipped
