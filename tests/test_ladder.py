"""The 8-level ladder and its protection rules, on hand-made conversations.

Each scenario puts one dominant weight (~20k tokens) where exactly one level can shed it, with
everything else small, and a budget whose effective size is 20,000 tokens (trigger at 18,400,
target 10,000). The tests then check the level reached and what was shed or kept.
"""

from __future__ import annotations

from typing import Any

import pytest
from amplifier_core.testing import MockCoordinator

from amplifier_module_context_simple import SimpleContextManager, mount
from amplifier_module_context_simple.estimate import estimate_tokens
from tests.conftest import (
    BIG,
    EventLog,
    assert_tool_pairing,
    asst,
    asst_calls,
    build,
    is_ephemeral,
    result,
    stamped,
    system,
    user,
)

BUDGET = 20_800  # effective 20,000 after the 800-token notice reserve
STATS_KEYS = {
    "before_tokens",
    "after_tokens",
    "before_messages",
    "after_messages",
    "messages_removed",
    "messages_truncated",
    "user_messages_stubbed",
    "system_messages_preserved",
    "strategy_level",
    "budget",
    "target_tokens",
    "protected_recent",
    "protected_tool_results",
}


async def compact(
    spec: str, budget: int = BUDGET, **options: Any
) -> tuple[SimpleContextManager, list[dict[str, Any]], dict[str, Any]]:
    """Add the spec's messages and request one view; return the manager, the view and the stats."""
    options.setdefault("protected_tool_results", 1)
    ctx = SimpleContextManager(**options)
    for message in build(spec):
        await ctx.add_message(stamped(message))
    view = await ctx.get_messages_for_request(token_budget=budget)
    assert_tool_pairing(view)
    stats = ctx._last_compaction_stats
    assert stats is not None, "the scenario did not trigger compaction"
    return ctx, view, stats


def body(view: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The view without its ephemeral tail (the compaction notice)."""
    return [m for m in view if not is_ephemeral(m)]


def contents(view: list[dict[str, Any]]) -> list[Any]:
    return [m.get("content") for m in view]


def by_call_id(view: list[dict[str, Any]], call_id: str) -> dict[str, Any] | None:
    return next((m for m in view if m.get("tool_call_id") == call_id), None)


def has_call(view: list[dict[str, Any]], call_id: str) -> bool:
    return any(c["id"] == call_id for m in view for c in m.get("tool_calls") or [])


def is_truncated(message: dict[str, Any] | None) -> bool:
    return bool(message and message.get("_truncated") and message["content"].startswith("[truncated:"))


# ----- the levels --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_level_1_truncates_the_oldest_quarter_of_tool_results():
    ctx, view, stats = await compact("S U T* T T T A U")
    assert stats["strategy_level"] == 1
    assert (stats["messages_truncated"], stats["messages_removed"], stats["user_messages_stubbed"]) == (1, 0, 0)
    huge = by_call_id(view, "m2")
    assert is_truncated(huge) and huge["_original_tokens"] == BIG // 4
    assert len(huge["content"]) < 400
    # Nothing else changed: same number of messages, the other results whole.
    assert len(body(view)) == len(ctx.messages)
    assert all(not m.get("_truncated") for m in view if m is not huge)


@pytest.mark.asyncio
async def test_level_2_truncates_the_second_quarter():
    _, view, stats = await compact("S U T T* T T A U")
    assert stats["strategy_level"] == 2
    assert is_truncated(by_call_id(view, "m3"))
    assert (stats["messages_truncated"], stats["messages_removed"]) == (1, 0)


@pytest.mark.asyncio
async def test_level_3_removes_old_messages_and_keeps_users():
    ctx, view, stats = await compact("S U A* T T T T A U")
    assert stats["strategy_level"] == 3
    assert stats["messages_removed"] == 1
    assert not any(str(c).startswith("assistant m2 ") for c in contents(view))
    assert [m["content"] for m in view if m["role"] == "user" and not is_ephemeral(m)] == [
        "user turn m1",
        "user turn m8",
    ]


@pytest.mark.asyncio
async def test_level_3_stubs_intermediate_user_messages_after_removal():
    ctx, view, stats = await compact("S U U* A T T T T T T A U")
    assert stats["strategy_level"] == 3
    assert stats["user_messages_stubbed"] == 1
    stub = next(m for m in view if m.get("_stubbed"))
    assert stub["content"] == '[User message compacted - original: "user turn m2 ' + "u" * 37 + '..."]'
    assert stub["_original_length"] == len("user turn m2 ") + BIG
    # The first and last user messages are never stubbed by this step.
    users = [m for m in body(view) if m["role"] == "user"]
    assert users[0]["content"] == "user turn m1" and users[-1]["content"] == "user turn m11"
    assert ctx._stubbed_seqs == {2}


@pytest.mark.asyncio
async def test_level_4_truncates_the_third_quarter_recomputed_after_removal():
    # Ten small tool pairs before the protected window, then four in it; the huge one is the third.
    spec = "S U " + "T " * 10 + "T T T* T U"
    _, view, stats = await compact(spec)
    assert stats["strategy_level"] == 4
    assert stats["messages_removed"] == 20 and stats["messages_truncated"] == 1
    assert is_truncated(by_call_id(view, "m14"))
    assert by_call_id(view, "m15")["content"] == "small result m15"


@pytest.mark.asyncio
async def test_level_5_removes_with_a_smaller_recent_window():
    spec = "S U " + "T " * 10 + "A* T T T A U"
    _, view, stats = await compact(spec)
    assert stats["strategy_level"] == 5
    assert not any(str(c).startswith("assistant m12 ") for c in contents(view))
    assert stats["messages_truncated"] == 0


@pytest.mark.asyncio
async def test_level_6_truncates_every_unprotected_tool_result():
    # The huge result is neither in an early quarter nor among the last protected_tool_results=1.
    spec = "S U " + "T " * 20 + "T T T T T* T U"
    _, view, stats = await compact(spec)
    assert stats["strategy_level"] == 6
    assert is_truncated(by_call_id(view, "m26"))
    assert by_call_id(view, "m27")["content"] == "small result m27"


@pytest.mark.asyncio
async def test_level_6_with_zero_protected_results_truncates_the_last_one_too():
    spec = "S U " + "T " * 10 + "T T T T* U"
    _, view, stats = await compact(spec, protected_tool_results=0)
    assert stats["strategy_level"] == 6
    assert is_truncated(by_call_id(view, "m15"))
    assert stats["protected_tool_results"] == 0


@pytest.mark.asyncio
async def test_level_7_removes_with_the_smallest_window_and_reports_level_8():
    # The original reports the last removal step as level 8 (no early return after it).
    tokens = ["S", "U+"] + ["A"] * 120 + ["U"]
    tokens[-5] = "A*"
    _, view, stats = await compact(" ".join(tokens))
    assert stats["strategy_level"] == 8
    assert not any(str(c).startswith(f"assistant m{len(tokens) - 5} ") for c in contents(view))
    # The removal sufficed: the level-8 stub of the first user message did not happen.
    assert stats["user_messages_stubbed"] == 0
    assert body(view)[1]["content"].startswith("user turn m1 xxx")


@pytest.mark.asyncio
async def test_level_8_stubs_the_first_user_message_but_keeps_it():
    ctx, view, stats = await compact("S U* T T A U")
    assert stats["strategy_level"] == 8
    assert stats["user_messages_stubbed"] == 1
    first = body(view)[1]
    assert first["role"] == "user" and first["_stubbed"] is True
    assert first["content"].startswith('[User message compacted - original: "user turn m1 uuu')
    assert body(view)[-1]["content"] == "user turn m5"
    assert ctx._stubbed_seqs == {1}


@pytest.mark.asyncio
async def test_level_8_under_extreme_pressure_never_removes_the_first_user_message(caplog):
    # The system prompt alone is over budget: everything removable goes, old stubs included.
    spec = "S U+ A U+ A U+ A U+ A U+ A U+ A U+ A U+ A U+ A U+ A U"
    huge_system = [system("s" * BIG)]
    ctx = SimpleContextManager(protected_tool_results=1)
    for message in huge_system + build(spec)[1:]:
        await ctx.add_message(stamped(message))
    view = await ctx.get_messages_for_request(token_budget=BUDGET)
    stats = ctx._last_compaction_stats
    assert stats["strategy_level"] == 8
    users = [m for m in body(view) if m["role"] == "user"]
    assert users[0]["content"].startswith('[User message compacted - original: "user turn m1 ')
    assert users[-1]["content"] == "user turn m21"
    assert 1 not in ctx._removed_seqs and 1 in ctx._stubbed_seqs
    # Intermediate users were stubbed and then dropped as old stubs.
    assert len(users) < 4 and any(seq in ctx._removed_seqs for seq in (3, 5, 7))
    assert "OVER BUDGET" in caplog.text and "system prompt ALONE" in caplog.text


# ----- protection rules --------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_system_messages_are_kept_and_moved_to_the_front():
    messages = build("S U A* T T A U")
    messages.insert(3, system("a mid-conversation system message"))  # before the tool call
    ctx = SimpleContextManager(protected_tool_results=1)
    for message in messages:
        await ctx.add_message(stamped(message))
    uncompacted = await ctx.get_messages_for_request(token_budget=10**9)
    assert uncompacted[3]["content"] == "a mid-conversation system message"
    view = await ctx.get_messages_for_request(token_budget=BUDGET)
    assert ctx._last_compaction_stats["system_messages_preserved"] == 2
    assert [m["role"] for m in view[:2]] == ["system", "system"]
    assert view[1]["content"] == "a mid-conversation system message"
    assert sum(m["role"] == "system" for m in view) == 2


@pytest.mark.asyncio
async def test_protected_recent_window_survives_level_3_untouched():
    spec = "S U " + "A* " + "A " * 12 + "T T T A U"
    ctx, view, stats = await compact(spec)
    assert stats["strategy_level"] == 3
    non_system = [m for m in ctx.messages if m["role"] != "system"]
    start = int(len(non_system) * (1 - 0.30))
    window = [{**m, "metadata": {"timestamp": m["metadata"]["timestamp"]}} for m in non_system[start:]]
    assert body(view)[-len(window) :] == window


@pytest.mark.asyncio
async def test_last_protected_tool_results_stay_whole_at_every_level():
    # A system prompt over budget drives the ladder through every level; protected_recent=1.0 keeps
    # enough tool results in the view to see that only the last five stay whole.
    medium = "r" * 2_000
    messages = [system("s" * BIG), user("the task")]
    for index in range(30):
        messages += [asst_calls(f"c{index}"), result(f"c{index}", medium)]
    messages.append(user("go on"))
    ctx = SimpleContextManager(protected_tool_results=5, protected_recent=1.0)
    for message in messages:
        await ctx.add_message(stamped(message))
    view = await ctx.get_messages_for_request(token_budget=BUDGET)
    assert ctx._last_compaction_stats["strategy_level"] == 8
    results = [m for m in view if m["role"] == "tool"]
    assert len(results) > 5
    assert all(m["content"] == medium and not m.get("_truncated") for m in results[-5:])
    assert all(is_truncated(m) for m in results[:-5])


@pytest.mark.asyncio
async def test_parallel_tool_calls_are_removed_as_one_unit():
    # An exempt huge result cannot be truncated, so its whole parallel group must go.
    spec = "S U P3* T T A U"
    ctx, view, stats = await compact(spec, tool_result_exempt_tools=["read_file"])
    assert stats["strategy_level"] == 3
    for call_id in ("m2a", "m2b", "m2c"):
        assert not has_call(view, call_id) and by_call_id(view, call_id) is None
    assert {2, 3, 4, 5} <= ctx._removed_seqs  # the assistant (seq 2) and its three results


@pytest.mark.asyncio
async def test_parallel_group_is_kept_when_its_results_are_not_removed():
    _, view, stats = await compact("S U P3* T T A U")
    assert stats["strategy_level"] == 2
    assert all(has_call(view, i) and by_call_id(view, i) for i in ("m2a", "m2b", "m2c"))
    assert is_truncated(by_call_id(view, "m2b"))


@pytest.mark.asyncio
async def test_tool_group_straddling_the_protected_window_is_kept_whole():
    # The assistant with three parallel calls sits just before the recent window, two of its results
    # inside it: the whole group stays although the assistant alone would be old enough to remove.
    spec = "S U " + "A " * 16 + "P3 T* T T U"
    ctx, view, stats = await compact(spec)
    non_system = [m for m in ctx.messages if m["role"] != "system"]
    window_start = int(len(non_system) * (1 - 0.30))
    assistant_index = next(i for i, m in enumerate(non_system) if m.get("tool_calls") and len(m["tool_calls"]) == 3)
    assert assistant_index < window_start <= assistant_index + 3  # the scenario really straddles
    assert stats["strategy_level"] == 4
    assert all(has_call(view, i) and by_call_id(view, i) for i in ("m18a", "m18b", "m18c"))


@pytest.mark.asyncio
async def test_tool_group_wholly_outside_the_window_is_removed_whole():
    spec = "S U " + "A " * 10 + "P3 T* T T U"
    _, view, stats = await compact(spec)
    assert stats["messages_removed"] >= 14
    assert not any(has_call(view, i) or by_call_id(view, i) for i in ("m12a", "m12b", "m12c"))


@pytest.mark.asyncio
async def test_exempt_tool_results_are_never_truncated():
    plain = await compact("S U E* T T T A U")
    assert plain[2]["strategy_level"] == 1 and is_truncated(by_call_id(plain[1], "m2"))
    _, view, stats = await compact("S U E* T T T A U", tool_result_exempt_tools=["big_reader"])
    assert stats["messages_truncated"] == 0 and stats["strategy_level"] == 3
    assert by_call_id(view, "m2") is None and not has_call(view, "m2")  # removed as a unit instead


# ----- stats and the event -----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_stats_keys_values_and_the_compaction_event():
    coordinator = MockCoordinator()
    log = EventLog(coordinator.hooks, ("context:compaction",))
    cleanup = await mount(coordinator, {"protected_tool_results": 1})
    ctx = coordinator.get("context")
    messages = [stamped(m) for m in build("S U T* T T T A U")]
    for message in messages:
        await ctx.add_message(message)
    full = await ctx.get_messages_for_request(token_budget=10**9)
    assert log.of("context:compaction") == []
    view = await ctx.get_messages_for_request(token_budget=BUDGET)
    stats = ctx._last_compaction_stats
    assert set(stats) == STATS_KEYS
    assert stats == {
        "before_tokens": estimate_tokens(full),
        "after_tokens": estimate_tokens(body(view)),
        "before_messages": len(messages),
        "after_messages": len(body(view)),
        "messages_removed": 0,
        "messages_truncated": 1,
        "user_messages_stubbed": 0,
        "system_messages_preserved": 1,
        "strategy_level": 1,
        "budget": BUDGET - 800,
        "target_tokens": (BUDGET - 800) // 2,
        "protected_recent": 0.30,
        "protected_tool_results": 1,
    }
    events = log.of("context:compaction")
    assert len(events) == 1
    assert {key: events[0][key] for key in STATS_KEYS} == stats
    # The same sticky decision on the next request: no new event, same stats object.
    await ctx.add_message(stamped(asst("done")))
    await ctx.get_messages_for_request(token_budget=BUDGET)
    assert len(log.of("context:compaction")) == 1 and ctx._last_compaction_stats is stats
    await cleanup()


@pytest.mark.asyncio
async def test_counts_in_stats_are_cumulative_and_decisions_are_never_undone():
    ctx, _, first = await compact("S U T* T* T T T T T T A U", budget=40_000)
    assert first["messages_truncated"] == len(ctx._truncated_seqs) == 2
    truncated_before = set(ctx._truncated_seqs)
    await ctx.add_message(stamped(asst("more")))
    for index in range(3):
        await ctx.add_message(stamped(asst_calls(f"late{index}")))
        await ctx.add_message(stamped(result(f"late{index}", "r" * BIG)))
    await ctx.add_message(stamped(user("and now?")))
    await ctx.get_messages_for_request(token_budget=40_000)
    second = ctx._last_compaction_stats
    assert second is not first and second["strategy_level"] >= first["strategy_level"]
    assert second["messages_truncated"] == len(ctx._truncated_seqs)
    assert second["messages_removed"] == len(ctx._removed_seqs) > 0
    assert second["user_messages_stubbed"] == len(ctx._stubbed_seqs)
    # A truncation is only ever superseded by a removal.
    assert truncated_before <= ctx._truncated_seqs | ctx._removed_seqs


PASTE = "pasted log line with some detail\n" * 1_400  # ~45,000 characters


async def paste_session(content: Any) -> tuple[SimpleContextManager, list[dict[str, Any]]]:
    ctx = SimpleContextManager()
    turns = [user("the task"), asst("ok"), {"role": "user", "content": content}, asst("read it")]
    turns += [m for i in range(4) for m in (user(f"follow-up {i}"), asst(f"answer {i}"))]
    for message in turns:
        await ctx.add_message(stamped(message))
    return ctx, await ctx.get_messages_for_request(token_budget=8_000 + 800)


@pytest.mark.asyncio
async def test_a_mid_conversation_paste_as_text_blocks_is_stubbed_like_a_string(caplog: Any) -> None:
    as_text, text_view = await paste_session(PASTE)
    as_blocks, block_view = await paste_session([{"type": "text", "text": PASTE}])
    assert as_text._stubbed_seqs == as_blocks._stubbed_seqs == {2}
    (stub,) = [m for m in block_view if m.get("_stubbed")]
    (text_stub,) = [m for m in text_view if m.get("_stubbed")]
    assert (
        stub["content"]
        == text_stub["content"]
        == '[User message compacted - original: "pasted log line with some detail pasted log line w..."]'
    )
    assert stub["_stubbed"] and stub["_original_length"] == len(PASTE)
    assert estimate_tokens(block_view) < 8_000 and "OVER BUDGET" not in caplog.text
    assert as_blocks.messages[2]["content"] == [{"type": "text", "text": PASTE}]  # the history keeps it


# ----- messages with images (issue 30 point 3) -------------------------------------------------------

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo" * 40}}


def with_image(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}, IMAGE]}


@pytest.mark.asyncio
@pytest.mark.parametrize("user_words_share", [0.0, 0.2])
async def test_a_user_message_with_an_image_is_kept_whole_never_stubbed(user_words_share: float) -> None:
    """Review round 4, point 3: a user message with text and an image was stubbed, its image dropped.
    Under the pressure that stubs its text-only twin, it stays whole (the README: images are never
    stubbed as text; a message is kept or removed whole)."""
    text = "here is the screenshot of the failing dashboard " + "d" * 300
    turns = [user("the task"), asst("ok"), with_image(text), asst("seen"), user(text), asst("noted")]
    turns += [m for i in range(6) for m in (user(f"follow-up {i} " + "f" * 9_000), asst(f"answer {i}"))]
    ctx = SimpleContextManager(user_words_share=user_words_share)
    for message in [*turns, user("last")]:
        await ctx.add_message(stamped(message))
    view = await ctx.get_messages_for_request(token_budget=12_000)
    assert 4 in ctx._stubbed_seqs, "the scenario must stub the text-only twin"
    assert 2 not in ctx._stubbed_seqs
    shown = [m for m in view if isinstance(m.get("content"), list)]
    assert shown == [{**with_image(text), "metadata": shown[0]["metadata"]}]  # whole, image included


@pytest.mark.asyncio
async def test_at_level_8_an_old_user_message_with_an_image_is_removed_whole() -> None:
    spec = "S U+ A U+ A U+ A U+ A U+ A U+ A U+ A U+ A U+ A U+ A U"
    messages = [system("s" * BIG), *build(spec)[1:]]
    messages[3] = with_image("an old screenshot with a caption " + "c" * 200)
    ctx = SimpleContextManager(protected_tool_results=1)
    for message in messages:
        await ctx.add_message(stamped(message))
    view = await ctx.get_messages_for_request(token_budget=BUDGET)
    assert ctx._last_compaction_stats["strategy_level"] == 8
    assert 3 in ctx._removed_seqs and 3 not in ctx._stubbed_seqs
    assert not any("old screenshot" in str(m.get("content")) for m in view)


@pytest.mark.asyncio
async def test_a_snapshot_that_stubs_a_message_with_an_image_is_refused() -> None:
    ctx = SimpleContextManager()
    await ctx.set_messages([user("first"), with_image("caption " + "c" * 200), user("last")])
    state = ctx.snapshot_state()
    state["sticky"]["stubbed_seqs"] = [1]
    with pytest.raises(ValueError, match="image"):
        ctx.restore_state(state)
    assert ctx._stubbed_seqs == set()
