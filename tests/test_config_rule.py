"""Issue 42 points 4 and 5: one number rule for every key, and warnings that show the fix.

The rule (README, docs/configuration-checks.md): a value of the right type outside its range warns and
runs; a wrong type or a non-finite number raises ValueError, except for the keys whose every value the
original runs with (config.RUNS_ANY_VALUE), which warn and run the fallback.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest
from amplifier_core.testing import MockCoordinator

from amplifier_module_context_simple import SimpleContextManager, mount
from amplifier_module_context_simple.config import NUMERIC_KEYS, RUNS_ANY_VALUE, parse_config
from tests.conftest import build, stamped

LOGGER = "amplifier_module_context_simple"
WRONG_TYPES = [[8000], {"n": 1}, True, math.nan, math.inf, "lots"]


def warnings_of(caplog: Any) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize("key", NUMERIC_KEYS)
@pytest.mark.parametrize("value", WRONG_TYPES, ids=repr)
def test_a_wrong_type_raises_for_every_key_but_those_the_original_runs_with_any_value(key, value, caplog):
    if key in RUNS_ANY_VALUE:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            parse_config({key: value})
        assert any(key in text for text in warnings_of(caplog)), f"{key}={value!r} ran in silence"
    else:
        with pytest.raises(ValueError, match=key):
            parse_config({key: value})


@pytest.mark.parametrize("key", NUMERIC_KEYS)
def test_a_number_out_of_range_never_raises_and_warns(key, caplog):
    """user_words_share: 1.5 raised while max_tokens: [8000] warned: out of range now warns for every key."""
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert key in parse_config({key: -5})
        assert key in parse_config({key: 10**6})
    assert any(key in text and "-5" in text for text in warnings_of(caplog)), caplog.text


@pytest.mark.parametrize(("key", "value"), [("user_words_share", 1.5), ("evidence_ledger_share", -0.2)])
def test_this_modules_own_shares_out_of_range_warn_and_run_at_the_nearest_end(key, value, caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = SimpleContextManager(**{key: value})
    assert getattr(ctx, key) == min(0.9, max(0.0, value))
    assert len([t for t in warnings_of(caplog) if key in t]) == 1


@pytest.mark.asyncio
@pytest.mark.parametrize(("value", "written"), [("8k", "8000"), ("200,000 tokens", "200000"), ("1.5M", "1500000")])
async def test_max_tokens_written_in_words_says_how_to_write_it(value, written, caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await mount(MockCoordinator(), {"max_tokens": value})
    said = [t for t in warnings_of(caplog) if "max_tokens" in t]
    assert len(said) == 1 and f"write it as {written}" in said[0], said
    assert "today's original" not in said[0] and "cap" not in said[0]  # no jargon


@pytest.mark.asyncio
@pytest.mark.parametrize(("key", "value", "meant"), [("target_usage", 50, "0.5"), ("compact_threshold", 92, "0.92")])
async def test_a_share_written_as_a_percentage_is_one_line_asking_did_you_mean(key, value, meant, caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        coordinator = MockCoordinator()
        await mount(coordinator, {key: value})
        ctx = coordinator.get("context")
        for message in build("S U T* T T T A U"):
            await ctx.add_message(stamped(message))
        await ctx.get_messages_for_request(token_budget=3000)
    config_lines = [t for t in warnings_of(caplog) if "OVER BUDGET" not in t]
    assert len(config_lines) == 1 and f"did you mean {meant}?" in config_lines[0], config_lines


class SyncHooks:
    """A hooks object whose emit is a plain function: the mistake point 5 names."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def emit(self, event: str, data: dict[str, Any]) -> None:
        self.calls.append(event)


@pytest.mark.asyncio
async def test_a_hooks_object_whose_emit_is_not_async_is_told_once_with_the_fix(caplog):
    hooks = SyncHooks()
    ctx = SimpleContextManager(hooks=hooks, max_tokens=2_000)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for message in build("S U T* T T T A U T* T T A U"):
            await ctx.add_message(stamped(message))
            await ctx.get_messages_for_request()
    said = [t for t in warnings_of(caplog) if "emit" in t]
    assert len(hooks.calls) >= 3  # several events were attempted
    assert len(said) == 1 and "must be async" in said[0], said
    assert ctx.fault_stats["hook_emit_failures"] == len(hooks.calls)  # each one still counted
