"""Configuration mistakes a user makes, refused or reported once at mount, and the same on assignment.

Issue 14 section 3 and issue 12 item 14: every check below failed (or stayed silent) before.
"""

from __future__ import annotations

import json
import logging
import math
import re
from pathlib import Path
from typing import Any

import pytest
from amplifier_core.testing import MockCoordinator

import amplifier_module_context_simple
from amplifier_module_context_simple import SimpleContextManager, mount
from amplifier_module_context_simple.config import DEFAULTS, parse_config, reset_warnings
from amplifier_module_context_simple.manager import FAULT_KEYS
from tests.conftest import BIG, build, stamped

LOGGER = "amplifier_module_context_simple"
BOOLEAN_KEYS = ("compaction_notice_enabled", "replay_last_user_on_compaction")
TRUE_WORDS = [True, "true", "True", "yes", "on", "1", 1]
FALSE_WORDS = [False, "false", "FALSE", "no", "off", "0", 0]
BAD_BOOLEANS = ["maybe", "", "y", 2, 0.5, None, [], "enabled"]


async def mounted(config: Any) -> SimpleContextManager:
    coordinator = MockCoordinator()
    await mount(coordinator, config)
    return coordinator.get("context")


def refusal(call: Any) -> str:
    with pytest.raises(ValueError) as caught:
        call()
    return str(caught.value)


# ----- target and threshold: accepted, as the original does, with one warning ------------------


async def serve(ctx: SimpleContextManager, budgets: tuple[int, ...] = (3000, 2000, 1500)) -> list[list[Any]]:
    """Add a session and serve a request per budget: the configuration must run, not only construct."""
    for message in build("S U T* T T T A U"):
        await ctx.add_message(stamped(message))
    views = []
    for budget in budgets:
        await ctx.add_message(stamped({"role": "user", "content": "more"}))
        views.append(await ctx.get_messages_for_request(token_budget=budget))
    return views


def config_warnings(caplog: Any, *names: str) -> list[str]:
    texts = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    return [text for text in texts if all(name in text for name in names)]


@pytest.mark.asyncio
@pytest.mark.parametrize(("target", "threshold"), [(0.95, 0.5), (0.5, 0.5), (0.2, 0.1), (0.5, 0.05), (0.2, 0.01)])
async def test_a_target_at_or_above_the_threshold_runs_with_one_warning(target, threshold, caplog):
    """Issue 19: the original's own tests build such managers to compact on every request."""
    config = {"target_usage": target, "compact_threshold": threshold}
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mounted(config)
        views = await serve(ctx)
    said = config_warnings(caplog, f"compact_threshold {threshold!r} <= target_usage {target!r}")
    assert len(said) == 1 and "every request over the threshold compacts" in said[0]
    assert (ctx.target_usage, ctx.compact_threshold) == (target, threshold)
    assert all(views) and ctx._last_compaction_stats is not None  # it compacted, as the original would
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        again = SimpleContextManager(**config)  # another manager in the same process: said again
        direct = SimpleContextManager(**config)
    assert again.target_usage == direct.target_usage == target
    assert len(config_warnings(caplog, "compact_threshold")) == 2  # once each (issue 37 point 1)


@pytest.mark.asyncio
async def test_a_target_above_the_default_threshold_alone_is_accepted(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mounted({"target_usage": 0.95})
    assert ctx.target_usage == 0.95 and config_warnings(caplog, "compact_threshold 0.92 <= target_usage 0.95")


def test_assignments_in_either_order_are_accepted_with_a_warning(caplog):
    ctx = SimpleContextManager()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx.compact_threshold = 0.4  # the target 0.5 is now above it: the original accepts this
    assert (ctx.compact_threshold, ctx.target_usage) == (0.4, 0.5)
    assert len(config_warnings(caplog, "compact_threshold 0.4 <= target_usage 0.5")) == 1
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx.target_usage = 0.2
    assert ctx.target_usage == 0.2 and not caplog.records


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("key", "value", "used"),
    [
        ("compact_threshold", 1.5, 1.5),
        ("compact_threshold", 0.0, 0.0),
        ("target_usage", 1.2, 1.2),
        ("protected_recent", 1.5, 1.0),
        ("protected_recent", -0.2, 0.0),
        ("output_reserve_fraction", 1.5, 1.5),
        ("summary_trigger", 1.4, 1.4),
        ("protected_tool_results", -3, 0),
        ("truncate_chars", -5, 0),
        ("compaction_notice_token_reserve", -1, 0),
        ("compaction_notice_min_level", -1, 0),
        ("compact_max_consecutive_skips", -2, 1),
        ("compact_max_consecutive_skips", 2.7, 2),
        ("compact_max_consecutive_skips", "3", 3),
        ("compact_clear_at_least", -5, -5),
        ("compaction_notice_verbosity", "minimall", "normal"),
        ("compaction_notice_verbosity", None, "normal"),
        ("compaction_notice_enabled", "maybe", True),
        ("replay_last_user_on_compaction", None, False),
    ],
)
async def test_odd_values_the_original_runs_with_are_accepted_warned_once_and_served(key, value, used, caplog):
    """Issue 19 and issue 23 item 3: never refuse what the original accepts; name the key and the outcome."""
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mounted({key: value})
        views = await serve(ctx)
    assert getattr(ctx, key) == used and all(views)
    assert len(config_warnings(caplog, f"{key}={value!r}")) == 1, caplog.text
    live = SimpleContextManager()
    caplog.clear()
    reset_warnings()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        setattr(live, key, value)
    assert getattr(live, key) == used and len(config_warnings(caplog, f"{key}={value!r}")) == 1


@pytest.mark.parametrize(("value", "closest"), [("hybird", "hybrid"), ("actaul", "actual"), ("psychic", None)])
def test_an_unknown_token_meter_names_the_valid_values_and_the_closest(value, closest, caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = SimpleContextManager(token_meter=value)
    assert ctx.token_meter == "estimate"
    assert "estimate, actual, hybrid" in caplog.text
    assert (f"did you mean {closest!r}?" in caplog.text) == (closest is not None)


def test_a_misspelled_constructor_keyword_names_the_right_one():
    with pytest.raises(TypeError, match=r"'target_usgae' \(did you mean target_usage\?\)"):
        SimpleContextManager(target_usgae=0.3)
    with pytest.raises(TypeError, match="'completely_unrelated'"):
        SimpleContextManager(completely_unrelated=1)


def test_a_misspelled_live_attribute_is_named_with_the_right_one(caplog):
    ctx = SimpleContextManager()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx.target_usgae = 0.3
        ctx.my_own_note = "kept"  # an unrelated attribute is the caller's business: no warning
        ctx.messages = []
    assert ctx.target_usage == 0.5 and "did you mean target_usage?" in caplog.text
    assert len(caplog.records) == 1 and ctx.my_own_note == "kept"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("compact_threshold", "high"),
        ("compact_threshold", "nan"),
        ("target_usage", math.nan),
        ("protected_recent", None),
        ("compact_max_consecutive_skips", math.inf),
        ("compact_max_consecutive_skips", "lots"),
        ("truncate_chars", "many"),
        ("truncate_chars", 250.5),
        ("preset", 3),
        ("summarization_model", 3),
    ],
)
def test_what_cannot_work_at_all_is_still_refused(key, value):
    """Wrong types and non-finite numbers failed later in the original (mid-session, or in int())."""
    message = refusal(lambda: SimpleContextManager(**{key: value}))
    assert key in message and repr(value) in message


# ----- booleans ----------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("key", BOOLEAN_KEYS)
@pytest.mark.parametrize(("value", "expected"), [(v, True) for v in TRUE_WORDS] + [(v, False) for v in FALSE_WORDS])
async def test_booleans_follow_one_rule(key, value, expected):
    assert getattr(await mounted({key: value}), key) is expected


@pytest.mark.asyncio
async def test_replay_false_as_a_string_leaves_replay_off():
    # Issue 14: "false" and "no" turned the feature on (bool("false") is True).
    for spelled, replays in (("false", 0), ("no", 0), ("yes", 1)):
        ctx = await mounted({"replay_last_user_on_compaction": spelled, "protected_tool_results": 1})
        for message in build("S U T* T T T U+ T A"):
            await ctx.add_message(stamped(message))
        view = await ctx.get_messages_for_request(token_budget=BIG // 8)
        assert len([m for m in view if "context-replay" in str(m.get("content"))]) == replays


# ----- values checked once, at mount -------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("value", ["lots", "20%"])
async def test_an_unparseable_clear_at_least_warns_once_at_mount(value, caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mounted({"compact_clear_at_least": value, "protected_tool_results": 1})
        for message in build("S U T* T T T A U"):
            await ctx.add_message(stamped(message))
        for budget in (3000, 2000, 1500, 1200, 1000):
            await ctx.add_message(stamped({"role": "user", "content": "more"}))
            await ctx.get_messages_for_request(token_budget=budget)
    warnings = [r for r in caplog.records if "compact_clear_at_least" in r.getMessage()]
    assert len(warnings) == 1 and ctx._last_compaction_stats is not None


@pytest.mark.asyncio
async def test_a_missing_prompt_file_warns_once_at_mount(tmp_path, caplog):
    path = str(tmp_path / "no-such-prompt.md")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mounted({"summarization_prompt_path": path})
        assert caplog.records, "nothing said at mount"
        for _ in range(12):
            ctx._get_summarization_prompt()
    assert len([r for r in caplog.records if "summarization_prompt_path" in r.getMessage()]) == 1


@pytest.mark.asyncio
async def test_a_prompt_file_that_vanishes_later_warns_once_then(tmp_path, caplog):
    path = tmp_path / "prompt.md"
    path.write_text("Summarize.", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mounted({"summarization_prompt_path": str(path)})
        assert ctx._get_summarization_prompt() == "Summarize." and not caplog.records
        path.unlink()
        for _ in range(3):
            ctx._get_summarization_prompt()
    assert len(caplog.records) == 1 and "unreadable" in caplog.text


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("key", "suggestion"),
    [("compact_treshold", "compact_threshold"), ("target_usge", "target_usage"), ("tool_result_spil_dir", None)],
)
async def test_a_misspelled_key_warns_with_a_suggestion(key, suggestion, caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await mounted({key: 0.5})
    expected = f"did you mean {suggestion or 'tool_result_spill_dir'}?"
    assert key in caplog.text and expected in caplog.text


@pytest.mark.asyncio
async def test_non_string_keys_warn_instead_of_raising(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mounted({1: "x", "bogus": 2, None: 3})
    assert ctx.max_tokens == DEFAULTS["max_tokens"] and "bogus" in caplog.text and "None" in caplog.text


@pytest.mark.asyncio
@pytest.mark.parametrize("config", ["compact_threshold: 0.5", ["compact_threshold", 0.5], 42, ("a", "b")])
async def test_a_config_that_is_not_a_mapping_gets_a_clear_error(config):
    with pytest.raises(ValueError, match="must be a mapping"):
        await mounted(config)


@pytest.mark.asyncio
@pytest.mark.parametrize("value", ["minimal", "normal", "verbose"])
async def test_the_documented_notice_verbosities_pass(value):
    assert (await mounted({"compaction_notice_verbosity": value})).compaction_notice_verbosity == value


@pytest.mark.asyncio
async def test_summary_min_absorb_tokens_zero_point_zero_is_off_like_zero():
    assert (await mounted({"summary_min_absorb_tokens": 0.0})).summary_min_absorb_tokens == 0
    assert parse_config({"summary_min_absorb_tokens": -1})["summary_min_absorb_tokens"] == 0  # warned: off
    message = refusal(lambda: parse_config({"summary_min_absorb_tokens": "lots"}))
    assert "0 (off)" in message


@pytest.mark.asyncio
@pytest.mark.parametrize(("value", "expected"), [(0, 1), (-2, 1), (4, 4)])
async def test_max_consecutive_skips_still_clamps_to_one(value, expected):
    assert (await mounted({"compact_max_consecutive_skips": value})).compact_max_consecutive_skips == expected


# ----- the token counter and the request budget --------------------------------------------------


def always_raises(message: dict[str, Any]) -> int:
    raise RuntimeError("no tokenizer here")


@pytest.mark.parametrize(
    ("counter", "named"),
    [(always_raises, "RuntimeError"), (lambda m: "3", "'3'"), (lambda m: -1, "-1"), (lambda m: True, "True")],
)
def test_a_callable_counter_that_cannot_count_fails_at_construction(counter, named):
    message = refusal(lambda: SimpleContextManager(token_counter=counter))
    assert "token_counter" in message and named in message


def test_a_working_callable_counter_is_kept():
    def words(message: dict[str, Any]) -> int:
        return len(str(message.get("content", "")).split())

    assert SimpleContextManager(token_counter=words).token_counter is words


@pytest.mark.asyncio
@pytest.mark.parametrize("budget", ["5000", 0, -100, math.nan, math.inf, True, 0.0])
async def test_an_unusable_token_budget_is_refused_naming_it(budget):
    ctx = SimpleContextManager()
    await ctx.add_message({"role": "user", "content": "hi"})
    with pytest.raises(ValueError) as caught:
        await ctx.get_messages_for_request(token_budget=budget)
    assert "token_budget" in str(caught.value) and repr(budget) in str(caught.value)


@pytest.mark.asyncio
async def test_a_float_token_budget_still_works():
    ctx = SimpleContextManager()
    await ctx.add_message({"role": "user", "content": "hi"})
    assert len(await ctx.get_messages_for_request(token_budget=5000.0)) == 1


# ----- live attributes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("target_usage", "half"),
        ("compact_threshold", "inf"),
        ("protected_tool_results", 2.5),
        ("truncate_chars", "lots"),
        ("compact_max_consecutive_skips", math.nan),
        ("summarization_timeout_s", "soon"),
        ("tool_result_exempt_tools", [1, 2]),
        ("tool_result_spill_dir", 42),
    ],
)
def test_live_assignments_are_validated_with_the_mount_message(key, value):
    ctx = SimpleContextManager()
    before = getattr(ctx, key)
    mount_message = refusal(lambda: parse_config({key: value}))
    assert refusal(lambda: setattr(ctx, key, value)) == mount_message
    assert getattr(ctx, key) == before  # refused: nothing changed


def test_live_assignments_are_normalized_like_at_mount(caplog):
    ctx = SimpleContextManager()
    ctx.replay_last_user_on_compaction = "yes"
    ctx.tool_result_exempt_tools = ["load_skill"]
    ctx.max_tokens = 2400
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx.token_meter = "psychic"
        ctx.compact_clear_at_least = "lots"
    assert ctx.replay_last_user_on_compaction is True
    assert ctx.tool_result_exempt_tools == frozenset({"load_skill"}) and ctx.max_tokens == 2400
    assert ctx.token_meter == "estimate" and "unknown token_meter" in caplog.text
    assert ctx.compact_clear_at_least is None and "compact_clear_at_least" in caplog.text


# ----- fault stats -------------------------------------------------------------------------------


def test_fault_stats_hold_every_documented_key_from_the_start():
    stats = SimpleContextManager().fault_stats
    assert stats["spill_write_failures"] == 0  # the README's own example raised KeyError
    assert set(FAULT_KEYS) <= set(stats) and not any(stats.values())


def test_every_counter_the_code_increments_is_declared():
    package = Path(amplifier_module_context_simple.__file__).parent
    source = "\n".join(path.read_text(encoding="utf-8") for path in package.glob("*.py"))
    # The manager's counters, and the ``faults`` counter the components are handed (issue 38).
    incremented = set(re.findall(r'(?:_fault_counts|faults)\["([a-z_]+)"\]', source))
    assert len(incremented) >= 8 and incremented <= set(FAULT_KEYS)


@pytest.mark.asyncio
async def test_a_token_counter_that_cannot_load_warns_and_counts_with_the_estimate(caplog) -> None:
    """Review regression: a live assignment took "tiktoken:nope" and then every request raised. Issue 33
    item 6: a typo no longer stops the session either; it warns and runs with the default counter."""
    ctx = SimpleContextManager(token_counter="content")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx.token_counter = "tiktoken:nope"
        mounted_ctx = await mounted({"token_counter": "estimat"})
    assert ctx.token_counter == mounted_ctx.token_counter == "estimate"
    assert "token_counter='tiktoken:nope' cannot be loaded" in caplog.text
    assert "unknown token_counter 'estimat' (did you mean 'estimate'?)" in caplog.text
    await ctx.add_message({"role": "user", "content": "hi"})
    assert await ctx.get_messages_for_request(token_budget=1000)


def test_a_live_preset_sets_its_keys_as_at_construction() -> None:
    """Review regression: ``ctx.preset = "evidence"`` was validated and then changed nothing."""
    ctx = SimpleContextManager()
    ctx.preset = "evidence"
    built = SimpleContextManager(preset="evidence")
    for key in ("evidence_ledger_share", "target_usage", "compaction_notice_verbosity"):
        assert getattr(ctx, key) == getattr(built, key)
    ctx = SimpleContextManager(compact_threshold=0.25)
    ctx.preset = "evidence"  # its target 0.3 is above 0.25: accepted, as the keys would be, with a warning
    assert (ctx.evidence_ledger_share, ctx.target_usage) == (0.7, 0.3)


# ----- issue 19 item 2: the remaining behavioural differences ----------------------------------------


@pytest.mark.asyncio
async def test_summary_fields_with_the_progressive_strategy_change_no_byte_of_any_view() -> None:
    """Summary keys present but the strategy left at progressive: every view as without them."""
    from tests.conftest import WORKLOADS, estimated_size, load_transcript

    extra = {
        "summary_trigger": 0.3,
        "summary_call_mode": "fork",
        "summarization_model": "m",
        "summary_rearm_below": 0.2,
        "summary_cooldown_requests": 2,
        "summary_min_absorb_tokens": 100,
        "summarization_timeout_s": 5.0,
    }
    for path in WORKLOADS[:4]:
        messages = load_transcript(path)
        budget = estimated_size(messages) // 4
        plain, with_keys = SimpleContextManager(), SimpleContextManager(**extra)
        compacted = False
        for message in messages:
            for ctx in (plain, with_keys):
                await ctx.add_message(dict(message))
            if message["role"] in ("user", "tool"):
                a = await plain.get_messages_for_request(token_budget=budget)
                b = await with_keys.get_messages_for_request(token_budget=budget)
                assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
                compacted = compacted or plain._last_compaction_stats is not None
        assert compacted


def test_the_fork_instruction_names_its_scope_and_does_not_resend_the_span() -> None:
    from amplifier_module_context_simple.summary_span import fork_instruction, format_messages_for_summarization

    span = [{"role": "tool", "tool_call_id": f"c{i}", "content": f"output line {i} " * 40} for i in range(6)]
    text = fork_instruction("Summarize.", span)
    assert "the first 6 message(s)" in text
    assert len(text) < len("Summarize.") + len(format_messages_for_summarization(span))
    assert "output line 5" in text and "output line 0" not in text  # only the final message is quoted


def test_the_fork_instruction_keeps_the_originals_stop_sentence() -> None:
    """Hosts and evaluations that grep the forked request for the original's wording find it (issue 37.4)."""
    from amplifier_module_context_simple.summary_span import fork_instruction

    span = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "LAST OF THE SPAN"}]
    text = fork_instruction("Summarize.", span)
    stop = "Do not summarize anything after it"
    assert stop in text and text.index(stop) < text.index("LAST OF THE SPAN")
