"""Configuration mistakes a user makes, refused or reported once at mount, and the same on assignment.

Issue 14 section 3 and issue 12 item 14: every check below failed (or stayed silent) before.
"""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path
from typing import Any

import pytest
from amplifier_core.testing import MockCoordinator

import amplifier_module_context_simple
from amplifier_module_context_simple import SimpleContextManager, mount
from amplifier_module_context_simple.config import DEFAULTS, parse_config
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


# ----- target and threshold ----------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(("target", "threshold"), [(0.95, 0.5), (0.9, 0.3), (0.5, 0.5)])
async def test_a_target_at_or_above_the_threshold_is_refused_naming_both(target, threshold):
    with pytest.raises(ValueError) as caught:
        await mounted({"target_usage": target, "compact_threshold": threshold})
    message = str(caught.value)
    assert f"target_usage={target!r}" in message and f"compact_threshold={threshold!r}" in message
    assert refusal(lambda: SimpleContextManager(target_usage=target, compact_threshold=threshold)) == message


@pytest.mark.asyncio
async def test_a_target_above_the_default_threshold_is_refused_alone():
    with pytest.raises(ValueError, match="compact_threshold=0.92"):
        await mounted({"target_usage": 0.95})


def test_assignments_keep_the_target_below_the_threshold():
    ctx = SimpleContextManager()
    mount_message = refusal(lambda: SimpleContextManager(compact_threshold=0.4))
    assert refusal(lambda: setattr(ctx, "compact_threshold", 0.4)) == mount_message
    assert (ctx.compact_threshold, ctx.target_usage) == (0.92, 0.5)  # nothing changed
    ctx.target_usage = 0.2
    ctx.compact_threshold = 0.4  # in this order both are fine
    assert (ctx.compact_threshold, ctx.target_usage) == (0.4, 0.2)


# ----- booleans ----------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("key", BOOLEAN_KEYS)
@pytest.mark.parametrize(("value", "expected"), [(v, True) for v in TRUE_WORDS] + [(v, False) for v in FALSE_WORDS])
async def test_booleans_follow_one_rule(key, value, expected):
    assert getattr(await mounted({key: value}), key) is expected


@pytest.mark.asyncio
@pytest.mark.parametrize("key", BOOLEAN_KEYS)
@pytest.mark.parametrize("value", BAD_BOOLEANS)
async def test_anything_else_is_refused_never_truthiness(key, value):
    with pytest.raises(ValueError) as caught:
        await mounted({key: value})
    assert key in str(caught.value) and repr(value) in str(caught.value)


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
@pytest.mark.parametrize("value", ["minimall", "MINIMAL", "", 1, None])
async def test_a_wrong_notice_verbosity_is_refused(value):
    with pytest.raises(ValueError) as caught:
        await mounted({"compaction_notice_verbosity": value})
    assert '"minimal", "normal" or "verbose"' in str(caught.value)


@pytest.mark.asyncio
@pytest.mark.parametrize("value", ["minimal", "normal", "verbose"])
async def test_the_documented_notice_verbosities_pass(value):
    assert (await mounted({"compaction_notice_verbosity": value})).compaction_notice_verbosity == value


@pytest.mark.asyncio
async def test_summary_min_absorb_tokens_zero_point_zero_is_off_like_zero():
    assert (await mounted({"summary_min_absorb_tokens": 0.0})).summary_min_absorb_tokens == 0
    message = refusal(lambda: parse_config({"summary_min_absorb_tokens": -1}))
    assert "0 (off)" in message


@pytest.mark.asyncio
@pytest.mark.parametrize("value", [2.7, "3", math.inf, math.nan, True, None, 3.0])
async def test_max_consecutive_skips_takes_integers_only(value):
    with pytest.raises(ValueError, match="compact_max_consecutive_skips"):
        await mounted({"compact_max_consecutive_skips": value})


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
        ("compact_threshold", 1.5),
        ("max_tokens", 0),
        ("protected_tool_results", 2.5),
        ("truncate_chars", "250"),
        ("compaction_notice_enabled", "maybe"),
        ("compact_max_consecutive_skips", 2.7),
        ("compaction_notice_verbosity", "minimall"),
        ("summarization_timeout_s", -1),
        ("tool_result_exempt_tools", [1, 2]),
        ("tool_result_spill_dir", ""),
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
    incremented = set(re.findall(r'_fault_counts\["([a-z_]+)"\]', source))
    assert len(incremented) >= 8 and incremented <= set(FAULT_KEYS)


def test_a_live_token_counter_that_cannot_load_is_refused_and_changes_nothing() -> None:
    """Review regression: the constructor refused "tiktoken:nope", a live assignment took it, and then
    every request raised."""
    ctx = SimpleContextManager()
    with pytest.raises(ValueError, match="invalid token_counter='tiktoken:nope'"):
        ctx.token_counter = "tiktoken:nope"
    assert ctx.token_counter == "estimate"


def test_a_live_preset_sets_its_keys_as_at_construction() -> None:
    """Review regression: ``ctx.preset = "evidence"`` was validated and then changed nothing."""
    ctx = SimpleContextManager()
    ctx.preset = "evidence"
    built = SimpleContextManager(preset="evidence")
    for key in ("evidence_ledger_share", "target_usage", "compaction_notice_verbosity"):
        assert getattr(ctx, key) == getattr(built, key)
    ctx = SimpleContextManager(compact_threshold=0.25, target_usage=0.2)
    with pytest.raises(ValueError, match="target_usage=0.3 with compact_threshold=0.25"):
        ctx.preset = "evidence"  # its target 0.3 is not below 0.25: refused
    assert (ctx.evidence_ledger_share, ctx.target_usage) == (0.0, 0.2)
