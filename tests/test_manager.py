"""Protocol semantics of SimpleContextManager: storage, views, budget, the notice, warnings, config."""

from __future__ import annotations

import copy
import logging
import re
from types import SimpleNamespace
from typing import Any

import pytest
from amplifier_core.models import ModelInfo, ProviderInfo
from amplifier_core.testing import MockCoordinator

from amplifier_module_context_simple import SimpleContextManager, mount
from amplifier_module_context_simple.notice import notice_text
from tests.conftest import (
    BIG,
    FIXED_TIMESTAMP,
    NOTICE_SOURCE,
    WORKLOADS_DIR,
    asst,
    asst_calls,
    build,
    estimated_size,
    is_ephemeral,
    load_transcript,
    replay,
    result,
    stamped,
    system,
    user,
)

LOGGER = "amplifier_module_context_simple"
BUDGET = 20_800
LEVEL_1 = "S U T* T T T A U"  # compacts at level 1 under BUDGET (see test_ladder)
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$")


async def filled(spec: str = LEVEL_1, **options: Any) -> SimpleContextManager:
    options.setdefault("protected_tool_results", 1)
    ctx = SimpleContextManager(**options)
    for message in build(spec):
        await ctx.add_message(stamped(message))
    return ctx


def notices(view: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in view if (m.get("metadata") or {}).get("source") == NOTICE_SOURCE]


# ----- storage -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_add_message_never_mutates_the_callers_dict():
    ctx = SimpleContextManager()
    message = {"role": "assistant", "content": "x", "tool_calls": [{"id": "a", "function": {"name": "f"}}]}
    original = copy.deepcopy(message)
    await ctx.add_message(message)
    assert message == original and "metadata" not in message
    with_metadata = {"role": "user", "content": "y", "metadata": {"source": "cli"}}
    await ctx.add_message(with_metadata)
    assert with_metadata == {"role": "user", "content": "y", "metadata": {"source": "cli"}}
    # Nothing is shared either: editing the caller's objects later does not reach the history.
    message["tool_calls"][0]["id"] = "changed"
    with_metadata["metadata"]["source"] = "changed"
    assert ctx.messages[0]["tool_calls"][0]["id"] == "a"
    assert ctx.messages[1]["metadata"]["source"] == "cli"


@pytest.mark.asyncio
async def test_add_message_stamps_a_utc_millisecond_timestamp_and_keeps_an_existing_one():
    ctx = SimpleContextManager()
    await ctx.add_message(user("a"))
    await ctx.add_message({"role": "user", "content": "b", "metadata": None})
    await ctx.add_message(stamped(user("c")))
    first, second, third = ctx.messages
    assert TIMESTAMP.match(first["metadata"]["timestamp"]), first["metadata"]["timestamp"]
    assert TIMESTAMP.match(second["metadata"]["timestamp"])
    assert third["metadata"]["timestamp"] == FIXED_TIMESTAMP


@pytest.mark.asyncio
async def test_seq_is_permanent_and_ignores_an_incoming_one():
    ctx = await filled()
    seqs = [m["metadata"]["_seq"] for m in ctx.messages]
    assert seqs == list(range(len(ctx.messages)))
    await ctx.get_messages_for_request(token_budget=BUDGET)
    await ctx.add_message({"role": "user", "content": "z", "metadata": {"_seq": 99}})
    assert [m["metadata"]["_seq"] for m in ctx.messages] == [*seqs, len(seqs)]


@pytest.mark.asyncio
async def test_views_strip_seq_are_new_lists_and_never_alias_the_history():
    ctx = await filled()
    stored = copy.deepcopy(ctx.messages)
    for budget in (10**9, BUDGET):
        view = await ctx.get_messages_for_request(token_budget=budget)
        again = await ctx.get_messages_for_request(token_budget=budget)
        assert view is not ctx.messages and view is not again and view == again
        assert all("_seq" not in (m.get("metadata") or {}) for m in view)
        assert all(m["metadata"]["timestamp"] == FIXED_TIMESTAMP for m in view if not is_ephemeral(m))
        view.append(user("appended to the view"))
        view[0]["content"] = "edited in the view"
        assert ctx.messages == stored


@pytest.mark.asyncio
async def test_get_messages_returns_the_stored_history():
    ctx = await filled()
    await ctx.get_messages_for_request(token_budget=BUDGET)
    history = await ctx.get_messages()
    assert history == ctx.messages and history is not ctx.messages
    assert all(m["metadata"]["_seq"] == i for i, m in enumerate(history))
    assert not any(m.get("_truncated") for m in history)


@pytest.mark.asyncio
async def test_set_messages_restamps_and_resets_all_compaction_state():
    ctx = await filled()
    await ctx.get_messages_for_request(token_budget=BUDGET)
    assert ctx._truncated_seqs and ctx._sticky_level == 1 and ctx._last_compaction_stats
    incoming = [
        {"role": "user", "content": "a", "metadata": {"_seq": 40, "timestamp": "t1"}},
        {"role": "assistant", "content": "b", "metadata": {"_seq": 7}},
    ]
    await ctx.set_messages(incoming)
    assert [m["metadata"] for m in ctx.messages] == [{"_seq": 0, "timestamp": "t1"}, {"_seq": 1}]
    assert incoming[0]["metadata"]["_seq"] == 40  # the caller's list is not touched
    assert (ctx._removed_seqs, ctx._truncated_seqs, ctx._stubbed_seqs) == (set(), set(), set())
    assert ctx._sticky_level == 0 and ctx._last_compaction_stats is None
    await ctx.add_message(user("c"))
    assert ctx.messages[-1]["metadata"]["_seq"] == 2
    view = await ctx.get_messages_for_request(token_budget=BUDGET)
    assert [m["content"] for m in view] == ["a", "b", "c"]


@pytest.mark.asyncio
async def test_clear_resets_everything():
    ctx = await filled()
    await ctx._on_llm_response("llm:response", {"status": "ok", "usage": {"input_tokens": 500}})
    await ctx.get_messages_for_request(token_budget=BUDGET)
    await ctx.clear()
    assert ctx.messages == [] and await ctx.get_messages() == []
    assert ctx._next_seq == 0 and ctx._sticky_level == 0 and ctx._last_compaction_stats is None
    assert not (ctx._removed_seqs or ctx._truncated_seqs or ctx._stubbed_seqs)
    assert ctx._last_measured_prompt_tokens is None and ctx._last_token_meter_stats is None
    await ctx.add_message(user("fresh"))
    assert ctx.messages[0]["metadata"]["_seq"] == 0
    assert await ctx.get_messages_for_request(token_budget=BUDGET) == [
        {"role": "user", "content": "fresh", "metadata": {"timestamp": ctx.messages[0]["metadata"]["timestamp"]}}
    ]


def test_estimate_tokens_is_a_pure_function_of_its_argument():
    bare = SimpleContextManager.__new__(SimpleContextManager)
    messages = [{"role": "user", "content": "x" * 400}, "any object"]
    assert bare._estimate_tokens(messages) == sum(len(str(m)) // 4 for m in messages)
    assert SimpleContextManager()._estimate_tokens([]) == 0


# ----- budget ------------------------------------------------------------------------------------


def model_info_provider(window: int, max_output: int) -> Any:
    info = ModelInfo(id="m", display_name="m", context_window=window, max_output_tokens=max_output)
    return SimpleNamespace(get_model_info=lambda: info)


def provider_info_provider(window: int, max_output: int) -> Any:
    defaults = {"context_window": window, "max_output_tokens": max_output}
    return SimpleNamespace(get_info=lambda: ProviderInfo(id="p", display_name="p", defaults=defaults))


@pytest.mark.parametrize("make", [model_info_provider, provider_info_provider])
@pytest.mark.parametrize(
    ("window", "max_output", "expected"), [(1_000_000, 128_000, 931_904), (200_000, 64_000, 163_904)]
)
def test_budget_from_the_provider_is_window_minus_half_the_output_minus_margin(make, window, max_output, expected):
    ctx = SimpleContextManager(max_tokens_fallback=1_000)  # the default max_tokens is no cap
    assert ctx._calculate_budget(None, make(window, max_output)) == expected


def test_budget_precedence_token_budget_then_model_info_then_defaults_then_fallback():
    ctx = SimpleContextManager(max_tokens_fallback=12_345)
    both = SimpleNamespace(
        get_model_info=model_info_provider(200_000, 64_000).get_model_info,
        get_info=provider_info_provider(1_000_000, 128_000).get_info,
    )
    assert ctx._calculate_budget(777, both) == 777
    assert ctx._calculate_budget(None, both) == 163_904
    assert ctx._calculate_budget(None, SimpleNamespace(get_model_info=lambda: None, get_info=both.get_info)) == 931_904
    assert ctx._calculate_budget(None, SimpleNamespace()) == 12_345
    assert ctx._calculate_budget(None, None) == 12_345
    assert not any(ctx.fault_stats.values())


def test_a_failing_provider_falls_back_to_max_tokens_and_is_counted(caplog):
    def boom() -> Any:
        raise RuntimeError("no info today")

    ctx = SimpleContextManager(max_tokens=5_000)
    assert ctx._calculate_budget(None, SimpleNamespace(get_model_info=boom)) == 5_000
    assert ctx.fault_stats["provider_info_failures"] == 1
    assert "provider budget info failed" in caplog.text


def test_a_raising_model_info_still_lets_the_provider_defaults_speak():
    def boom() -> Any:
        raise RuntimeError("model info unavailable")

    ctx = SimpleContextManager(max_tokens_fallback=5_000)
    provider = SimpleNamespace(get_model_info=boom, get_info=provider_info_provider(200_000, 64_000).get_info)
    assert ctx._calculate_budget(None, provider) == 163_904
    assert ctx.fault_stats["provider_info_failures"] == 1


@pytest.mark.asyncio
async def test_provider_budget_drives_compaction_and_max_tokens_is_read_at_call_time():
    ctx = await filled(max_tokens=10**9)
    view = await ctx.get_messages_for_request(provider=model_info_provider(200_000, 64_000))
    assert ctx._last_compaction_stats is None and not notices(view)
    ctx.max_tokens = BUDGET  # mutated at runtime: the next request without a provider uses it
    await ctx.get_messages_for_request()
    assert ctx._last_compaction_stats["budget"] == BUDGET - 800


@pytest.mark.asyncio
async def test_notice_reserve_that_eats_the_budget_is_logged_and_compaction_still_fires(caplog):
    ctx = SimpleContextManager(max_tokens=600, protected_tool_results=0)
    for message in build("S U T T T T A U"):
        await ctx.add_message(stamped({**message, "content": message["content"] + " pad" * 150}))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        view = await ctx.get_messages_for_request()
    assert "notice reserve" in caplog.text
    stats = ctx._last_compaction_stats
    assert stats is not None and stats["budget"] == 600  # the full budget, not 600 - 800
    assert notices(view)


# ----- the notice --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_notice_is_an_ephemeral_user_message_at_the_tail():
    ctx = await filled()
    view = await ctx.get_messages_for_request(token_budget=BUDGET)
    tail = view[-1]
    assert notices(view) == [tail]
    assert tail["role"] == "user" and tail["metadata"] == {"source": "context-compaction", "ephemeral": True}
    assert tail["content"].startswith('<system-reminder source="context-compaction">\n')
    assert tail["content"].endswith("</system-reminder>")
    assert "- Strategy level: 1/8\n" in tail["content"]
    assert "- Tool results: 1 truncated\n" in tail["content"]
    assert "- Last 1 tool results (full content)" in tail["content"]
    assert tail["content"] == notice_text(ctx._last_compaction_stats, "normal")


@pytest.mark.asyncio
@pytest.mark.parametrize("verbosity", ["minimal", "normal", "verbose"])
async def test_notice_verbosity(verbosity):
    ctx = await filled(compaction_notice_verbosity=verbosity)
    view = await ctx.get_messages_for_request(token_budget=BUDGET)
    content = view[-1]["content"]
    if verbosity == "minimal":
        assert content == (
            '<system-reminder source="context-compaction">\n'
            "Context has been compacted to fit within token budget. "
            "Some older messages and tool results may be truncated.\n"
            "</system-reminder>"
        )
    else:  # there is no distinct verbose format
        assert "Compaction summary:" in content and "What was preserved:" in content


@pytest.mark.asyncio
@pytest.mark.parametrize(("min_level", "shown"), [(0, True), (1, True), (2, False), (9, False)])
async def test_notice_min_level(min_level, shown):
    ctx = await filled(compaction_notice_min_level=min_level)
    view = await ctx.get_messages_for_request(token_budget=BUDGET)
    assert ctx._last_compaction_stats["strategy_level"] == 1
    assert bool(notices(view)) is shown


@pytest.mark.asyncio
async def test_notice_disabled_leaves_no_notice_and_no_reserve():
    ctx = await filled(compaction_notice_enabled=False)
    view = await ctx.get_messages_for_request(token_budget=BUDGET)
    assert not notices(view) and ctx._last_compaction_stats["budget"] == BUDGET


@pytest.mark.asyncio
async def test_notice_is_skipped_after_unanswered_tool_calls_and_back_next_request():
    ctx = await filled()
    first = await ctx.get_messages_for_request(token_budget=BUDGET)
    await ctx.add_message(stamped(asst_calls("pending1", "pending2")))
    waiting = await ctx.get_messages_for_request(token_budget=BUDGET)
    assert waiting[-1]["tool_calls"] and not notices(waiting)
    await ctx.add_message(stamped(result("pending1")))
    await ctx.add_message(stamped(result("pending2")))
    answered = await ctx.get_messages_for_request(token_budget=BUDGET)
    assert answered[-1] == first[-1] and answered[-2]["tool_call_id"] == "pending2"


@pytest.mark.asyncio
async def test_notice_is_byte_stable_until_the_next_boundary():
    ctx = await filled()
    stats = None
    texts = []
    for turn in range(4):
        view = await ctx.get_messages_for_request(token_budget=BUDGET)
        stats = stats or ctx._last_compaction_stats
        assert ctx._last_compaction_stats is stats
        texts.append(view[-1]["content"])
        await ctx.add_message(stamped(asst(f"reply {turn}")))
        await ctx.add_message(stamped(user(f"question {turn}")))
    assert len(set(texts)) == 1
    for index in range(3):  # enough new weight to force a new escalation
        await ctx.add_message(stamped(asst_calls(f"late{index}")))
        await ctx.add_message(stamped(result(f"late{index}", "r" * BIG)))
    view = await ctx.get_messages_for_request(token_budget=BUDGET)
    assert ctx._last_compaction_stats is not stats
    assert view[-1]["content"] != texts[0]


# ----- warnings ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_over_budget_warning_names_the_system_prompt(caplog):
    ctx = SimpleContextManager()
    for message in [system("s" * BIG), user("task"), asst("a"), user("go")]:
        await ctx.add_message(stamped(message))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await ctx.get_messages_for_request(token_budget=BUDGET // 2)
    records = [r for r in caplog.records if "OVER BUDGET" in r.getMessage()]
    assert records and all(r.name == LOGGER for r in records)
    assert "system prompt ALONE" in records[0].getMessage()


@pytest.mark.parametrize(("keep", "expected"), [(5, {9, 12, 15, 20, 30}), (2, {20, 30}), (0, set()), (-3, set())])
def test_protected_tool_indices_takes_positions_and_returns_a_set(keep, expected):
    # The original's signature: positions of the tool results in, the last N of them out, none for N <= 0.
    ctx = SimpleContextManager(protected_tool_results=keep)
    assert ctx._protected_tool_indices([1, 4, 9, 12, 15, 20, 30]) == expected


@pytest.mark.asyncio
async def test_over_budget_warning_names_the_protected_floor(caplog):
    ctx = SimpleContextManager()
    for message in [system("short"), user("task"), asst("a"), user("u" * BIG)]:
        await ctx.add_message(stamped(message))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        view = await ctx.get_messages_for_request(token_budget=BUDGET // 2)
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == LOGGER)
    assert "OVER BUDGET" in text and "floor" in text and "system prompt ALONE" not in text
    assert view[-2]["content"] == "u" * BIG  # the last user message is never shed
    stats = ctx._last_compaction_stats  # the original's wording also names the share and the target
    share = round(100 * stats["after_tokens"] / stats["budget"])
    budget = f"{stats['after_tokens']:,} tokens against a budget of {stats['budget']:,}"
    assert f"{budget} ({share}% of budget, target {stats['target_tokens']:,})" in text


@pytest.mark.asyncio
async def test_logs_at_info_and_above_carry_no_message_content(caplog):
    marker = "SECRET-CONTENT-MARKER"
    ctx = SimpleContextManager(protected_tool_results=1)
    for message in build("S U* T* T T T A U"):
        await ctx.add_message(stamped({**message, "content": marker + message["content"]}))
    await ctx.add_message(stamped(result("orphan", marker)))  # forces a repair warning
    with caplog.at_level(logging.INFO, logger=LOGGER):
        await ctx.get_messages_for_request(token_budget=BUDGET)
        await ctx.get_messages_for_request(token_budget=300)
    assert caplog.records and marker not in caplog.text


# ----- system prompt factory ---------------------------------------------------------------------


@pytest.mark.asyncio
async def test_system_prompt_factory_replaces_stored_system_messages_but_keeps_hook_ones():
    calls = []

    async def factory() -> str:
        calls.append(1)
        return f"PROMPT {len(calls)}"

    ctx = SimpleContextManager()
    await ctx.add_message(stamped(system("stored system prompt")))
    await ctx.add_message(stamped(user("task")))
    hook_message = stamped({"role": "system", "content": "from a hook", "metadata": {"source": "hook"}})
    await ctx.add_message(hook_message)
    await ctx.add_message(stamped(asst("ok")))
    await ctx.set_system_prompt_factory(factory)
    first = await ctx.get_messages_for_request(token_budget=10**9)
    second = await ctx.get_messages_for_request(token_budget=10**9)
    assert first[0] == {"role": "system", "content": "PROMPT 1"}
    assert second[0] == {"role": "system", "content": "PROMPT 2"}
    assert [m["content"] for m in first] == ["PROMPT 1", "task", "from a hook", "ok"]
    assert ctx.messages[0]["content"] == "stored system prompt"  # history untouched


@pytest.mark.asyncio
async def test_system_prompt_factory_failure_reuses_the_last_good_prompt(caplog):
    state = {"fail": False}

    async def factory() -> str:
        if state["fail"]:
            raise OSError("prompt file vanished")
        return "GOOD PROMPT"

    ctx = SimpleContextManager()
    await ctx.add_message(stamped(user("task")))
    await ctx.set_system_prompt_factory(factory)
    assert (await ctx.get_messages_for_request(token_budget=10**9))[0]["content"] == "GOOD PROMPT"
    state["fail"] = True
    view = await ctx.get_messages_for_request(token_budget=10**9)
    assert view[0]["content"] == "GOOD PROMPT"
    assert ctx.fault_stats["system_prompt_factory_failures"] == 1
    assert "system prompt factory failed" in caplog.text


@pytest.mark.asyncio
async def test_system_prompt_factory_failing_first_raises_a_clear_error():
    async def factory() -> str:
        raise OSError("no prompt")

    ctx = SimpleContextManager()
    await ctx.set_system_prompt_factory(factory)
    with pytest.raises(RuntimeError, match="system prompt factory failed"):
        await ctx.get_messages_for_request(token_budget=10**9)


# ----- config through mount ----------------------------------------------------------------------


async def mounted(config: dict[str, Any] | None) -> SimpleContextManager:
    coordinator = MockCoordinator()
    await mount(coordinator, config)
    return coordinator.get("context")


@pytest.mark.asyncio
async def test_unknown_config_keys_warn_naming_them(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mounted({"max_tokens": 1_000, "bogus_key": 1, "contexts": []})
    assert ctx.max_tokens == 1_000
    assert "bogus_key" in caplog.text and "contexts" in caplog.text


@pytest.mark.asyncio
@pytest.mark.parametrize("config", [None, {}])
async def test_empty_config_gives_the_defaults(config, caplog):
    ctx = await mounted(config)
    assert (ctx.max_tokens, ctx.compact_threshold, ctx.target_usage) == (200_000, 0.92, 0.50)
    assert (ctx.protected_recent, ctx.protected_tool_results, ctx.truncate_chars) == (0.30, 5, 250)
    assert not caplog.records


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("compact_threshold", "high"),  # a number written as a string ("0.9") is read as the number
        ("target_usage", "half"),
        ("protected_recent", None),
        ("protected_tool_results", 2.5),
        ("truncate_chars", "all"),
        ("compaction_notice_token_reserve", 1.5),
        ("output_reserve_fraction", float("nan")),
        ("token_counter", 42),  # a misspelled counter name warns (tests/test_config_rules.py)
    ],
)
async def test_bad_config_values_raise_naming_key_value_and_range(key, value):
    """Only what cannot work at all (a wrong type, a non-finite number); odd values warn (test_config.py)."""
    with pytest.raises(ValueError) as caught:
        await mounted({key: value})
    message = str(caught.value)
    assert key in message and repr(value) in message and "allowed" in message


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("key", "value", "attribute", "expected", "warning"),
    [
        ("token_meter", "psychic", "token_meter", "estimate", "unknown token_meter"),
        ("compaction_strategy", "magic", "compaction_strategy", "progressive", "unknown compaction_strategy"),
        ("summary_call_mode", "telepathy", "summary_call_mode", "standalone", "unknown summary_call_mode"),
        ("tool_result_shape", "diagonal", "tool_result_shape", "head", "tool_result_shape"),
        ("tool_result_budget_tokens", "lots", "tool_result_budget_tokens", None, "tool_result_budget_tokens"),
        ("tool_result_budget_by_tool", ["grep"], "tool_result_budget_by_tool", {}, "tool_result_budget_by_tool"),
        ("tool_result_budget_by_tool", {"grep": 0, "read": 10}, "tool_result_budget_by_tool", {"read": 10}, "grep"),
    ],
)
async def test_warn_and_fall_back_keys(key, value, attribute, expected, warning, caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mounted({key: value})
    assert getattr(ctx, attribute) == expected
    assert warning in caplog.text


@pytest.mark.asyncio
async def test_inline_summary_call_mode_is_a_silent_alias(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mounted({"summary_call_mode": "inline"})
    assert ctx.summary_call_mode == "standalone"
    assert "summary_call_mode" not in caplog.text


@pytest.mark.asyncio
async def test_max_messages_is_accepted_and_changes_no_view(caplog):
    plain = await mounted({"protected_tool_results": 1})
    capped = await mounted({"protected_tool_results": 1, "max_messages": 100})
    assert "unknown" not in caplog.text
    for ctx in (plain, capped):
        for message in build(LEVEL_1):
            await ctx.add_message(stamped(message))
    for budget in (10**9, BUDGET):
        assert await capped.get_messages_for_request(token_budget=budget) == await plain.get_messages_for_request(
            token_budget=budget
        )


NOTICE_CLAIM = re.compile(
    r"- Last (\d+) tool results \(full content\)(?:, except (\d+) of them removed by compaction)?\n"
)


@pytest.mark.asyncio
async def test_the_notice_never_claims_tool_results_the_view_does_not_hold():
    """protected_tool_results protects from truncation, not removal: the notice says what was removed."""
    messages = load_transcript(WORKLOADS_DIR / "taubench__airline__task003__trial0.jsonl")
    seen = {"checked": 0, "qualified": 0}

    def check(request: Any, ctx: SimpleContextManager) -> None:
        notice = next(
            (m["content"] for m in request.view if is_ephemeral(m) and "Compaction summary" in m["content"]), None
        )
        if notice is None:
            return
        keep, removed = (int(g or 0) for g in NOTICE_CLAIM.search(notice).groups())
        recent = [(m["tool_call_id"], m["content"]) for m in ctx.messages if m["role"] == "tool"][-keep:]
        whole = {(m["tool_call_id"], m["content"]) for m in request.view if m["role"] == "tool"}
        assert sum(r in whole for r in recent) >= len(recent) - removed, (request.index, notice)
        seen["checked"] += 1
        seen["qualified"] += removed > 0

    await replay(SimpleContextManager(), messages, int(estimated_size(messages) * 0.3), on_request=check)
    assert seen["checked"] and seen["qualified"]  # the run does remove recent results, and says so


@pytest.mark.asyncio
async def test_the_notice_does_not_blame_compaction_for_results_repair_left_out():
    """Review regression: an orphan result (dropped by the view's repair) counted among the "last N"
    and as "removed by compaction": with two real results the notice said "except 3 of them"."""
    ctx = SimpleContextManager(max_tokens=1_400, protected_recent=0.0, protected_tool_results=3)
    await ctx.add_message({"role": "user", "content": "first " * 60})
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}} for i in (1, 2)]
    await ctx.add_message({"role": "assistant", "content": "", "tool_calls": calls})
    for call_id in ("c1", "c2", "nobody"):
        await ctx.add_message({"role": "tool", "tool_call_id": call_id, "content": "output " * 300})
    await ctx.add_message({"role": "user", "content": "next"})
    view = await ctx.get_messages_for_request()
    notice = next(m["content"] for m in view if "Compaction summary" in str(m["content"]))
    assert not any(m["role"] == "tool" for m in view)  # both real results were removed
    keep, removed = (int(g or 0) for g in NOTICE_CLAIM.search(notice).groups())
    assert (keep, removed) == (3, 2)
