"""Issue 29 points 1 and 2: the provider's input limit is a hard limit, and the OVER BUDGET warning names
the part of the view that is largest.

A provider that reports a window (40,000 tokens, 4,000 of output: input limit 36,000) is asked for every
view and answers with a usage reading, as ``llm:response`` does; it counts ``rate`` times what the module's
estimator counts (a tokenizer that counts more than four characters a token, as code and numbers do).
"""

from __future__ import annotations

import copy
import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.estimate import estimate_tokens
from tests.conftest import asst, asst_calls, non_ephemeral, result, stamped, system, user

LOGGER = "amplifier_module_context_simple"
Message = dict[str, Any]
WINDOW, OUTPUT = 40_000, 4_000
LIMIT = WINDOW - OUTPUT


class WindowProvider:
    """Reports a window; counts a view as ``rate`` x the module's estimator (the wire form, no ``_seq``)."""

    def __init__(self, rate: float = 1.0) -> None:
        self.rate = rate

    def get_model_info(self) -> Any:
        return SimpleNamespace(context_window=WINDOW, max_output_tokens=OUTPUT)

    def count(self, view: list[Message]) -> int:
        return int(estimate_tokens(view) * self.rate)


async def request(ctx: SimpleContextManager, provider: WindowProvider) -> list[Message]:
    """One request, then the provider's usage reading of what was sent."""
    view = await ctx.get_messages_for_request(provider=provider)
    await ctx._on_llm_response("llm:response", {"usage": {"input_tokens": provider.count(view)}})
    return view


def chars(tokens: int) -> str:
    """Text the estimator counts at about ``tokens`` tokens (numbered lines, like a file read)."""
    return "\n".join(f"{n:6d}\tvalue_{n} = read(buf, limit={n * 7})" for n in range(tokens * 4 // 40))


def newest_group_over_the_limit() -> list[Message]:
    """A task, a small turn, then one assistant message with two parallel calls whose results together
    are past the input limit (the newest tool group: protected by every level of the ladder)."""
    return [
        system("You are a careful engineer."),
        user("Find why the loader fails on an empty header and fix it; quote the lines you rely on."),
        asst("Looking."),
        user("Read both files please."),
        asst_calls("a", "b"),
        result("a", chars(20_000)),
        result("b", chars(20_000)),
    ]


@pytest.mark.asyncio
async def test_a_newest_group_past_the_input_limit_is_clipped_to_fit(caplog):
    # Old code: the ladder keeps the newest group whole at every level, and the view goes out at
    # ~40,000 tokens against a limit of 36,000: the provider rejects it and the session stops.
    ctx, provider = SimpleContextManager(max_tokens=20_000), WindowProvider()
    for message in newest_group_over_the_limit():
        await ctx.add_message(stamped(message))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        view = await request(ctx, provider)
    assert provider.count(view) <= LIMIT - 4_096  # the margin kept under the limit
    stats = ctx._last_compaction_stats
    assert stats["floor_yield_newest_results"] == 2 and stats["messages_truncated"] == 2
    clipped = [m for m in view if m.get("role") == "tool"]
    assert all("chars omitted" in m["content"] for m in clipped)  # head and tail, the call's results both kept
    assert [m.get("tool_call_id") for m in clipped] == ["a", "b"]
    assert "input limit of 36,000 tokens" in caplog.text and "results of the newest tool group clipped" in caplog.text


@pytest.mark.asyncio
async def test_the_clip_is_sticky_and_survives_a_resume():
    ctx, provider = SimpleContextManager(max_tokens=20_000), WindowProvider()
    for message in newest_group_over_the_limit():
        await ctx.add_message(stamped(message))
    first = non_ephemeral(await request(ctx, provider))
    assert ctx._clipped_seqs  # the decision, by _seq
    state = json.loads(json.dumps(ctx.snapshot_state()))
    assert state["sticky"]["clipped_seqs"]
    # Still over the budget, so the next request escalates again (as the original does): the same bytes.
    assert non_ephemeral(await request(ctx, provider)) == first

    resumed = SimpleContextManager(max_tokens=20_000)
    await resumed.set_messages(copy.deepcopy(await ctx.get_messages()))
    resumed.restore_state(state)
    assert non_ephemeral(await resumed.get_messages_for_request(provider=provider)) == first

    older = copy.deepcopy(state)  # a snapshot of an earlier version has no clips: it restores none
    del older["sticky"]["clipped_seqs"]
    again = SimpleContextManager(max_tokens=20_000)
    await again.set_messages(copy.deepcopy(await ctx.get_messages()))
    again.restore_state(older)
    assert again._clipped_seqs == {}


@pytest.mark.asyncio
async def test_with_no_window_the_original_behaviour_stands(caplog):
    # The same history with an explicit budget (no provider window): nothing yields, the view is sent
    # whole as the original sends it, and the warning says so.
    ctx = SimpleContextManager(max_tokens=20_000)
    for message in newest_group_over_the_limit():
        await ctx.add_message(stamped(message))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        view = await ctx.get_messages_for_request(token_budget=20_000)
    assert estimate_tokens(view) > LIMIT
    assert not [key for key in ctx._last_compaction_stats if key.startswith("floor_yield_")]
    assert "OVER BUDGET" in caplog.text and "yielded" not in caplog.text


@pytest.mark.asyncio
async def test_the_actual_meter_cannot_hold_back_a_view_past_the_limit():
    # Old code: in actual mode the trigger reads the provider's reading of the previous, shorter view;
    # two large results arrive in one request and the view goes out past the limit uncompacted.
    ctx, provider = SimpleContextManager(max_tokens=20_000, token_meter="actual"), WindowProvider(rate=1.35)
    for message in [system("You are a careful engineer."), user("Read the two modules and compare them.")]:
        await ctx.add_message(stamped(message))
    for index in range(3):
        await ctx.add_message(stamped(asst_calls(f"s{index}")))
        await ctx.add_message(stamped(result(f"s{index}", chars(3_000))))
        await request(ctx, provider)
    await ctx.add_message(stamped(asst_calls("x", "y")))
    await ctx.add_message(stamped(result("x", chars(10_000))))
    await ctx.add_message(stamped(result("y", chars(10_000))))
    view = await request(ctx, provider)
    assert provider.count(view) <= LIMIT


@pytest.mark.asyncio
async def test_a_view_under_the_limit_is_never_clipped():
    ctx, provider = SimpleContextManager(max_tokens=20_000), WindowProvider()
    for message in [*newest_group_over_the_limit()[:4], asst_calls("a"), result("a", chars(20_000))]:
        await ctx.add_message(stamped(message))  # one result of ~20,000: under the limit, over budget
    view = await request(ctx, provider)
    assert not ctx._clipped_seqs and any(m.get("role") == "tool" and "omitted" not in m["content"] for m in view)


def test_the_provider_count_covers_every_reading():
    from amplifier_module_context_simple.limit import PRIOR_OFFSET, PRIOR_RATE, ProviderCount

    counted = ProviderCount()
    prior = int((36_000 - PRIOR_OFFSET) / PRIOR_RATE)
    assert counted.largest_count(36_000) == prior  # no reading: a count a quarter over the module's, and more
    readings = [(4_000, 9_000), (10_000, 17_000), (16_000, 25_000)]  # 5,000 of schemas, then 1.25 a token
    for events, (module, provider) in enumerate(readings, start=1):
        counted.note(events, provider, module)
    counted.note(len(readings), 1, 1)  # the same event again: not a new reading
    rate, offset = counted.fit()
    assert all(offset + rate * module >= provider for module, provider in readings)
    largest = counted.largest_count(31_904)
    assert offset + rate * largest <= 31_904 < offset + rate * (largest + 2)


# ----- a host's provider: another tokenizer, and what the module never sees -------------------------


class HostProvider(WindowProvider):
    """As measured under loop-basic and loop-streaming: the provider counts 1.25x the module's estimate on
    dense views, plus 700 tokens of tool schemas and reminders that the module never sees."""

    def count(self, view: list[Message]) -> int:
        return int(estimate_tokens(view) * 1.25) + 700


@pytest.mark.asyncio
async def test_before_any_usage_reading_a_resumed_session_keeps_a_margin():
    # A resumed session's first request carries ~30,000 of the module's tokens: under the trigger of the
    # budget the window gives (33,904), but the host's provider counts ~38,200, past the limit of 36,000.
    # Taking the provider's count as the module's (no reading yet) sends it, and the provider rejects it.
    ctx, provider = SimpleContextManager(), HostProvider()
    history = [system("You are a careful engineer."), user("Go on with the audit.")]
    for index in range(6):
        history += [asst_calls(f"r{index}"), result(f"r{index}", chars(4_600))]
    await ctx.set_messages([stamped(m) for m in history])
    view = await request(ctx, provider)
    assert 28_500 < estimate_tokens(history) < 31_000
    assert provider.count(view) <= LIMIT


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "config",
    [
        pytest.param({}, marks=pytest.mark.slow),
        pytest.param({"token_meter": "actual"}, marks=pytest.mark.slow),
        {"preset": "evidence"},
    ],
)
async def test_the_host_provider_never_sees_a_view_past_the_limit(caplog, config):
    # The tight session with the window's own budget (no max_tokens: its trigger, ~31,000 of the module's
    # tokens, is past the limit in the host provider's count): once readings come, the calibrated limit
    # holds every request under 36,000, and before the first one the prior margin does.
    from tests.test_protect_in_tokens import tight_replay

    seen = await tight_replay(caplog, provider=HostProvider(), max_tokens=None, **config)
    assert seen["requests"] > 90 and seen["largest"] <= LIMIT


@pytest.mark.asyncio
async def test_a_resumed_session_predicts_the_provider_count_as_the_original():
    # Readings not saved: the resumed manager falls back to the prior (or to the last reading alone) and
    # sends another view than the uninterrupted one would (a cold cache, or a view past the limit).
    ctx, provider = SimpleContextManager(), HostProvider()
    for message in [system("You are a careful engineer."), user("Go on with the audit.")]:
        await ctx.add_message(stamped(message))
    for index in range(6):
        await ctx.add_message(stamped(asst_calls(f"r{index}")))
        await ctx.add_message(stamped(result(f"r{index}", chars(1_500 + 900 * index))))
        await request(ctx, provider)
    state = json.loads(json.dumps(ctx.snapshot_state()))
    assert len(state["meter"]["input_readings"]["pairs"]) >= 3
    history = copy.deepcopy(await ctx.get_messages())
    resumed = SimpleContextManager()
    await resumed.set_messages(copy.deepcopy(history))
    resumed.restore_state(state)
    for manager in (ctx, resumed):
        await manager.add_message(stamped(asst_calls("last")))
        await manager.add_message(stamped(result("last", chars(6_000))))
    ours = await ctx.get_messages_for_request(provider=provider)
    assert non_ephemeral(await resumed.get_messages_for_request(provider=provider)) == non_ephemeral(ours)
    assert resumed._limit_goal() == ctx._limit_goal()

    del state["meter"]["input_readings"]  # an earlier version's snapshot: restored with no readings
    older = SimpleContextManager()
    await older.set_messages(copy.deepcopy(history))
    older.restore_state(state)
    assert older._input_readings["pairs"] == []


# ----- point 2: the warning names the largest part --------------------------------------------


IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}


def screenshots(turns: int, system_chars: int = 6_000) -> list[Message]:
    """A task, then turns whose user message pastes a screenshot (1,600 tokens each)."""
    messages = [system("s" * system_chars), user("Make the settings page match the screenshots I paste.")]
    for index in range(turns):
        messages.append(user([{"type": "text", "text": f"Here is screen {index}."}, IMAGE]))
        messages.append(asst(f"Screen {index} noted."))
    messages.append(user("Now go."))
    return messages


@pytest.mark.asyncio
async def test_the_warning_names_the_user_words_that_hold_the_floor(caplog):
    # Old code names "system messages, first and last user message, protected_recent, protected_tool_results"
    # whatever holds the floor; here it is the screenshots user_words_share keeps.
    ctx = SimpleContextManager(user_words_share=0.9)
    for message in screenshots(8):
        await ctx.add_message(stamped(message))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await ctx.get_messages_for_request(token_budget=12_000)
    warning = next(r.getMessage() for r in caplog.records if "OVER BUDGET" in r.getMessage())
    assert "the floor's largest part is user messages kept by user_words_share: " in warning
    words = warning.split("user_words_share: ")[1]
    tokens, images = int(words.split(" tokens")[0].replace(",", "")), int(words.split("(")[1].split(" image")[0])
    assert images >= 5 and tokens >= images * 1_600


@pytest.mark.asyncio
async def test_a_preset_lets_the_screenshots_yield_instead_of_ending_over_budget(caplog):
    # The report: screenshots pasted in user turns, max_tokens 40000, any preset: OVER BUDGET
    # (user_words_share held them; the long system prompt takes the rest). Old code: OVER BUDGET at level 8;
    # the presets let the user words yield down to the budget.
    ctx, provider = SimpleContextManager(preset="evidence", max_tokens=12_000), WindowProvider()
    for message in screenshots(8, system_chars=40_000):
        await ctx.add_message(stamped(message))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        view = await request(ctx, provider)
    assert "OVER BUDGET" not in caplog.text
    assert estimate_tokens(non_ephemeral(view)) <= 12_000 - 800
    assert ctx._last_compaction_stats["floor_yield_user_words"] >= 1
    assert "the protections yielded to fit the budget" in caplog.text


class SmallWindowProvider(WindowProvider):
    """A small local model: 4,096 tokens of window, 1,024 of output (the budget's formula leaves nothing)."""

    def get_model_info(self) -> Any:
        return SimpleNamespace(context_window=4_096, max_output_tokens=1_024)


@pytest.mark.asyncio
async def test_a_small_window_is_still_a_window():
    # Old code: 4,096 - 512 - 4,096 <= 0 dropped the window: the budget fell back to 200,000, the input limit
    # (3,072) was dropped with it, and views grew past the window with no compaction.
    ctx, provider = SimpleContextManager(), SmallWindowProvider()
    await ctx.add_message(stamped(user("Summarize each file as you read it.")))
    limit, seen = 4_096 - 1_024, []
    for index in range(12):
        await ctx.add_message(stamped(asst_calls(f"r{index}")))
        await ctx.add_message(stamped(result(f"r{index}", chars(500))))
        seen.append(provider.count(await request(ctx, provider)))
    reading = ctx._budget_reading
    assert reading.source == "provider_defaults" and reading.context_window == 4_096
    assert 0 < reading.effective_budget <= limit
    assert ctx._last_compaction_stats and max(seen) <= limit


def test_a_single_outlier_reading_is_set_aside_and_a_repeated_one_counts():
    from amplifier_module_context_simple.limit import ProviderCount

    def counted_with(readings: list[tuple[int, int]]) -> ProviderCount:
        counted = ProviderCount()
        for events, (module, provider) in enumerate(readings, start=1):
            counted.note(events, provider, module)
        return counted

    steady = [(module, int(module * 1.2) + 700) for module in (8_000, 9_500, 11_000, 12_500)]
    outlier = (14_000, 14_000 * 50)  # server-side tools counted as input, once
    clean = counted_with(steady).largest_count(31_904)
    # Old code: the outlier's excess became the offset (~700,000): no view of any size fit the limit.
    assert counted_with([*steady, outlier]).largest_count(31_904) == clean
    later = (15_000, 18_700)
    assert counted_with([*steady, outlier, later]).largest_count(31_904) == counted_with(
        [*steady, later]
    ).largest_count(31_904)
    # The same excess twice is evidence, not noise: the line follows it.
    assert counted_with([*steady, outlier, (15_000, 15_000 * 50)]).largest_count(31_904) < 0


@pytest.mark.asyncio
async def test_one_outlier_reading_does_not_make_every_later_request_a_boundary():
    ctx, provider = SimpleContextManager(max_tokens=30_000), WindowProvider(rate=1.2)
    await ctx.add_message(stamped(user("Audit the parser; quote each line you change.")))
    boundaries = []
    for index in range(16):
        await ctx.add_message(stamped(asst_calls(f"r{index}")))
        await ctx.add_message(stamped(result(f"r{index}", chars(900))))
        before = ctx._last_compaction_stats
        view = await ctx.get_messages_for_request(provider=provider)
        boundaries.append(ctx._last_compaction_stats is not before)
        tokens = provider.count(view) * (50 if index == 8 else 1)  # one reading counts server-side tools
        await ctx._on_llm_response("llm:response", {"usage": {"input_tokens": tokens}})
    # Old code: the outlier's excess became the limit's offset, and every request after it was a boundary.
    assert not any(boundaries) and len(ctx._input_limit.count.readings) > 8 - 1


class ThinkingWindowProvider(WindowProvider):
    """20,000 tokens of window, 4,000 of output: an input limit of 16,000."""

    def get_model_info(self) -> Any:
        return SimpleNamespace(context_window=20_000, max_output_tokens=4_000)


def thinking_call(call_id: str) -> Message:
    blocks = [
        {"type": "thinking", "thinking": "I should read it first.", "signature": "sig-" + "A" * 40},
        {"type": "text", "text": "Reading."},
    ]
    return {**asst_calls(call_id), "content": blocks}


@pytest.mark.asyncio
async def test_a_clip_made_at_an_earlier_boundary_can_shrink():
    # A thinking model reads one large file (the last rung clips it to fit), answers, and the talk goes on
    # without tools; level 3 keeps the thinking tool group and removes the answers, so the group is the
    # newest again. Then the user pastes a log. Old code: the earlier clip counted as fixed floor, the
    # floor was over every goal, nothing yielded, and the view went out past the 16,000 limit.
    ctx, provider = SimpleContextManager(), ThinkingWindowProvider()
    for message in [
        system("You are a careful engineer."),
        user("Audit the loader; " + "quote the lines you rely on. " * 20),
        thinking_call("a"),
        result("a", chars(40_000)),
    ]:
        await ctx.add_message(stamped(message))
    sent = [provider.count(await request(ctx, provider))]
    first_clip = dict(ctx._clipped_seqs)
    await ctx.add_message(stamped(asst("The loader fails because " + "of the header. " * 300)))
    for index in range(6):
        await ctx.add_message(stamped(user(f"Question {index}: " + "why is that? " * 200)))
        sent.append(provider.count(await request(ctx, provider)))
        await ctx.add_message(stamped(asst(f"Answer {index}: " + "because. " * 600)))
    await ctx.add_message(stamped(user("Here is the new log: " + chars(7_000))))
    view = await request(ctx, provider)
    sent.append(provider.count(view))
    assert max(sent) <= 16_000
    (seq, tokens), (_, before) = *ctx._clipped_seqs.items(), *first_clip.items()
    assert tokens < before  # the same result, clipped shorter
    # The shorter clip is sticky: the next request replays it byte for byte.
    again = await ctx.get_messages_for_request(provider=provider)
    clipped = [[m for m in v if m.get("role") == "tool"] for v in (view, again)]
    assert clipped[0] and json.dumps(clipped[0]) == json.dumps(clipped[1])
    assert ctx._clipped_seqs == {seq: tokens}


class WindowOf(WindowProvider):
    def __init__(self, window: int, output: int) -> None:
        super().__init__()
        self.window, self.output = window, output

    def get_model_info(self) -> Any:
        return SimpleNamespace(context_window=self.window, max_output_tokens=self.output)


@pytest.mark.asyncio
async def test_a_floor_a_little_over_the_goal_still_yields_what_is_not_the_users(caplog):
    # 32,000 tokens of window, 8,000 of output: a limit of 24,000, and a goal of ~15,400 of the module's
    # tokens before any reading (its margin and the prior rate). The turn's prompt (a spec of ~14,500) puts
    # the true floor a little over that goal. Old code: nothing yielded at all, and the view went out at
    # ~38,000; clipping the newest result alone fits the limit.
    ctx, provider = SimpleContextManager(), WindowOf(32_000, 8_000)
    spec = "Here is the spec: " + chars(14_500)
    for message in [
        system("You are a careful engineer."),
        user("Audit the loader; " + "quote the lines you rely on. " * 20),
        asst("On it."),
        user(spec),
        asst_calls("a"),
        result("a", chars(20_000)),
    ]:
        await ctx.add_message(stamped(message))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        view = await request(ctx, provider)
    assert provider.count(view) <= 32_000 - 8_000
    assert spec in [m["content"] for m in view]  # the user's words are kept
    assert ctx._last_compaction_stats["floor_yield_newest_results"] == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "nothing valid fits" in warnings[0]
