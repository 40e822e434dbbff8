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
from amplifier_module_context_simple.estimate import seq_of
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


@pytest.mark.asyncio
async def test_record_removed_takes_a_stored_message_as_the_original_did():
    """The spec names ``_record_removed()`` as the sticky-removal path; the original passes it a message."""
    context = SimpleContextManager(max_tokens=100_000, compaction_notice_enabled=False)
    for role, text in (
        ("user", "the task"),
        ("assistant", "an old answer"),
        ("user", "the next question"),
        ("assistant", "the answer"),
    ):
        await context.add_message({"role": role, "content": text})
    stored = await context.get_messages()
    context._record_removed(context.messages[1])
    context._record_removed(seq_of(context.messages[3]))  # a _seq, as this module's own callers pass
    view = await context.get_messages_for_request()
    assert [m["content"] for m in view] == ["the task", "the next question"]
    assert context._removed_seqs == {seq_of(context.messages[1]), seq_of(context.messages[3])}
    assert await context.get_messages() == stored


def test_a_bare_instance_stubs_a_user_message_as_a_built_one_does():
    """Hosts' tests probe ``_stub_user_message`` on ``SimpleContextManager.__new__(...)``, which never ran
    ``__init__``: it stubs a long message and leaves a short one alone, as a built manager does."""
    bare = SimpleContextManager.__new__(SimpleContextManager)
    built = SimpleContextManager()
    long_text = {"role": "user", "content": "please keep the parser untouched. " * 40}
    short_text = {"role": "user", "content": "go on"}
    assert bare._stub_user_message(short_text) is short_text
    stubbed = bare._stub_user_message(long_text)
    assert len(str(stubbed["content"])) < len(long_text["content"])
    assert stubbed == built._stub_user_message(long_text)
