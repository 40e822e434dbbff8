"""Names an earlier version of the original exposed that hosts and their tests reach for (issue 37.4):
``_estimate_message_tokens`` (one message's count, the unit the ladder's running total moves by) and
``max_tokens_explicit`` (whether ``max_tokens`` caps the provider's budget)."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
from amplifier_core.testing import MockCoordinator

from amplifier_module_context_simple import SimpleContextManager, mount
from tests.conftest import WORKLOADS, load_transcript

LOGGER = "amplifier_module_context_simple"


def provider(window: int, max_output: int) -> Any:
    info = SimpleNamespace(context_window=window, max_output_tokens=max_output)
    return SimpleNamespace(get_model_info=lambda: info)


ONE_MILLION = provider(1_000_000, 128_000)  # derived budget 931,904


@pytest.mark.parametrize("path", WORKLOADS[:3], ids=lambda path: path.stem[:40])
def test_one_message_counts_add_up_to_the_list_count_on_real_transcripts(path):
    context = SimpleContextManager()
    messages = load_transcript(path)
    per_message = [context._estimate_message_tokens(message) for message in messages]
    assert sum(per_message) == context._estimate_tokens(messages)
    assert all(count == context._estimate_tokens([m]) for count, m in zip(per_message, messages, strict=True))


def test_one_message_count_follows_a_subclass_estimator():
    class Doubling(SimpleContextManager):
        def _estimate_tokens(self, messages: list[Any]) -> int:
            return 2 * super()._estimate_tokens(messages)

    message = {"role": "user", "content": "x" * 400}
    assert Doubling()._estimate_message_tokens(message) == 2 * SimpleContextManager()._estimate_message_tokens(message)


@pytest.mark.parametrize(
    ("options", "explicit", "with_window"),
    [
        ({}, False, 931_904),
        ({"max_tokens": 300_000}, True, 300_000),
        ({"max_tokens": 300_000, "max_tokens_explicit": True}, True, 300_000),
        ({"max_tokens": 5_000_000, "max_tokens_explicit": True}, True, 931_904),
        ({"max_tokens": 300_000, "max_tokens_explicit": False}, False, 931_904),  # a fallback only, no cap
    ],
)
def test_max_tokens_explicit_is_accepted_and_reported(options, explicit, with_window):
    context = SimpleContextManager(**options)
    assert context.max_tokens_explicit is explicit
    assert context._calculate_budget(None, ONE_MILLION) == with_window
    assert context._calculate_budget(None, None) == options.get("max_tokens", 200_000)


@pytest.mark.asyncio
async def test_mount_reports_max_tokens_explicit_from_the_config(caplog):
    for config, explicit in (({}, False), ({"max_tokens": 123_456}, True), ({"max_tokens": None}, False)):
        coordinator = MockCoordinator()
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            await mount(coordinator, config)
        assert coordinator.get("context").max_tokens_explicit is explicit
    assert not caplog.records


def test_max_tokens_explicit_of_a_wrong_type_warns_and_changes_nothing(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        context = SimpleContextManager(max_tokens=300_000, max_tokens_explicit="yes")
    assert "max_tokens_explicit" in caplog.text
    assert context.max_tokens_explicit is True
    assert context._calculate_budget(None, ONE_MILLION) == 300_000
