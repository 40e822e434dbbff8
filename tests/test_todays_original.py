"""Drop-in with today's original: max_tokens as a cap, a per-result byte cap, images sized as images,
loaded-tool state and persisted reminders kept (issue 24)."""

from __future__ import annotations

import base64
import copy
import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from amplifier_core.testing import MockCoordinator

import amplifier_module_context_simple
from amplifier_module_context_simple import SimpleContextManager, mount
from amplifier_module_context_simple.estimate import estimate_message
from amplifier_module_context_simple.ingress import clip_tool_result
from amplifier_module_context_simple.token_counter import resolve_counter
from tests.conftest import Recorder, add_all, asst, asst_calls, result, system, user

LOGGER = "amplifier_module_context_simple"


def provider(window: int, max_output: int) -> Any:
    info = SimpleNamespace(context_window=window, max_output_tokens=max_output)
    return SimpleNamespace(get_model_info=lambda: info)


ONE_MILLION = provider(1_000_000, 128_000)  # derived budget 1,000,000 - 64,000 - 4,096 = 931,904


# ----- 1 and 2: max_tokens --------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_max_tokens_null_mounts_and_means_no_cap(caplog):
    coordinator = MockCoordinator()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await mount(coordinator, {"max_tokens": None})
    context = coordinator.get("context")
    assert context.max_tokens is None and not caplog.records
    assert context._calculate_budget(None, ONE_MILLION) == 931_904
    assert context._calculate_budget(None, None) == 200_000  # max_tokens_fallback


@pytest.mark.parametrize(
    ("options", "with_window", "without_window"),
    [
        ({}, 931_904, 200_000),  # the original's rule, unchanged: the default is no cap
        ({"max_tokens": 300_000}, 300_000, 300_000),  # a set max_tokens caps the provider's budget
        ({"max_tokens": 4_000}, 4_000, 4_000),
        ({"max_tokens": 2_000_000}, 931_904, 2_000_000),
        ({"max_tokens_fallback": 100_000}, 931_904, 100_000),
        ({"max_tokens": 300_000, "max_tokens_fallback": 100_000}, 300_000, 100_000),
        ({"max_tokens": None, "max_tokens_fallback": 50_000}, 931_904, 50_000),
    ],
)
def test_effective_budget_is_the_derived_or_fallback_budget_capped_by_max_tokens(options, with_window, without_window):
    context = SimpleContextManager(**options)
    assert context._calculate_budget(None, ONE_MILLION) == with_window
    assert context._calculate_budget(None, None) == without_window
    assert context._calculate_budget(12_345, ONE_MILLION) == 12_345  # an explicit budget is used as given


def test_max_tokens_assigned_live_is_a_cap_from_then_on():
    context = SimpleContextManager()
    assert context.max_tokens == 200_000 and context._calculate_budget(None, ONE_MILLION) == 931_904
    context.max_tokens = 276_000
    assert context._calculate_budget(None, ONE_MILLION) == 276_000
    context.max_tokens = None
    assert context._calculate_budget(None, ONE_MILLION) == 931_904


@pytest.mark.parametrize("value", [0, -5, "lots", float("nan")])
def test_a_bad_max_tokens_warns_and_runs_uncapped(caplog, value):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        context = SimpleContextManager(max_tokens=value)
    assert "max_tokens" in caplog.text and "no limit" in caplog.text and "write" in caplog.text
    assert context.max_tokens is None
    assert context._calculate_budget(None, ONE_MILLION) == 931_904


@pytest.mark.asyncio
async def test_context_budget_is_emitted_when_the_effective_budget_changes():
    hooks = Recorder()
    context = SimpleContextManager(hooks=hooks, max_tokens=300_000)
    await add_all(context, [system(), user("hello")])
    await context.get_messages_for_request(provider=ONE_MILLION)
    await context.get_messages_for_request(provider=ONE_MILLION)  # unchanged: no second event
    await context.get_messages_for_request(provider=provider(128_000, 16_000))
    events = hooks.named("context:budget")
    assert len(events) == 2
    assert events[0] == {
        "source": "provider_defaults",
        "context_window": 1_000_000,
        "max_output_tokens": 128_000,
        "derived_budget": 931_904,
        "max_tokens": 300_000,
        "max_tokens_fallback": 300_000,
        "capped": True,
        "effective_budget": 300_000,
        "module_version": amplifier_module_context_simple.__version__,
    }
    assert events[1]["effective_budget"] == 128_000 - 8_000 - 4_096 and not events[1]["capped"]


@pytest.mark.asyncio
async def test_a_capped_budget_compacts_where_the_user_configured_it():
    """max_tokens 3,000 with a 1M window: the view is cut to the cap, not to 931,904 tokens."""
    context = SimpleContextManager(max_tokens=3_000)
    await add_all(context, [system(), *([user("question " * 80), asst("answer " * 80)] * 10), user("now?")])
    await context.get_messages_for_request(provider=ONE_MILLION)
    assert context._last_compaction_stats is not None
    assert context._last_compaction_stats["budget"] == 3_000 - 800


# ----- 3: the per-result byte cap -----------------------------------------------------------------


def big_session(content: str) -> list[dict[str, Any]]:
    return [system(), user("read the log"), asst_calls("c1", name="bash"), result("c1", content), asst("done")]


@pytest.mark.asyncio
async def test_a_multi_megabyte_result_is_clipped_in_the_view_only():
    hooks = Recorder()
    content = "é" + "line of a very long log\n" * 150_000  # ~3.6 MB, the only (so protected) result
    context = SimpleContextManager(hooks=hooks, max_tokens=10_000_000)
    await add_all(context, big_session(content))
    stored_before = copy.deepcopy(context.messages)
    first = await context.get_messages_for_request()
    second = await context.get_messages_for_request()
    clipped = next(m for m in first if m["role"] == "tool")["content"]
    assert len(clipped.encode("utf-8")) <= 131_072 and clipped.startswith("é")
    assert "max_tool_result_bytes" in clipped and content.startswith(clipped.split("\n[... tool result")[0])
    assert json.dumps(first) == json.dumps(second)  # the same bytes every request
    assert context.messages == stored_before  # the stored history keeps the full text
    events = hooks.named("context:tool_result_ingress_truncated")
    assert len(events) == 1 and events[0]["original_bytes"] == len(content.encode("utf-8"))
    assert events[0]["tool_call_id"] == "c1" and events[0]["kept_bytes"] <= 131_072


@pytest.mark.asyncio
async def test_the_byte_cap_off_sends_the_result_whole():
    content = "x" * 200_000
    context = SimpleContextManager(max_tokens=10_000_000, max_tool_result_bytes=None)
    await add_all(context, big_session(content))
    view = await context.get_messages_for_request()
    assert next(m for m in view if m["role"] == "tool")["content"] == content


def test_clipping_never_cuts_a_character_and_never_exceeds_the_cap():
    for text in ("a" * 5000, "日本語" * 2000, "🙂" * 1500, "ab🙂" * 1000):
        clip = clip_tool_result({"role": "tool", "content": text}, 1000)
        assert clip is not None
        clipped = clip.message["content"]
        head = clipped.split("\n[... tool result")[0]
        assert text.startswith(head) and len(clipped.encode("utf-8")) <= 1000
    assert clip_tool_result({"role": "tool", "content": "é" * 500}, 1000) is None  # exactly 1,000 bytes
    blocks = {"role": "tool", "content": [{"type": "text", "text": "y" * 3000}, {"type": "text", "text": "z" * 10}]}
    clip = clip_tool_result(blocks, 1000)
    assert clip is not None and sum(len(b["text"].encode()) for b in clip.message["content"]) <= 1000


@pytest.mark.asyncio
@pytest.mark.parametrize("cap", [1, 64, 150, 255])
async def test_a_cap_too_small_for_the_marker_warns_and_uses_the_smallest_workable_cap(cap, caplog):
    """Cap 64 turned a 100-byte result into 131 bytes, cap 150 showed none of the text (issue 30,
    point 13). Today's original refuses caps below its marker; here they warn and run at 256 bytes."""
    coordinator = MockCoordinator()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await mount(coordinator, {"max_tool_result_bytes": cap, "max_tokens": 10_000_000})
    said = [r.getMessage() for r in caplog.records if f"max_tool_result_bytes={cap}" in r.getMessage()]
    assert len(said) == 1 and "256" in said[0], [r.getMessage() for r in caplog.records]
    context = coordinator.get("context")
    assert context.max_tool_result_bytes == 256
    short, long = "r" * 100, "0123456789" * 100
    await add_all(context, [*big_session(short), user("and the other"), asst_calls("c2"), result("c2", long)])
    view = await context.get_messages_for_request()
    results = [m["content"] for m in view if m["role"] == "tool"]
    assert results[0] == short  # within the working cap: sent whole
    shown = results[1].split("\n[... tool result")[0]
    assert len(results[1].encode("utf-8")) <= 256 and long.startswith(shown) and len(shown) >= 64
    context.max_tool_result_bytes = cap  # a live assignment takes the same rule
    assert context.max_tool_result_bytes == 256


def test_every_clip_is_within_its_cap_and_shows_text():
    """From the smallest workable cap up, any text: the clipped result, marker included, fits the cap
    and keeps the text's first bytes; below it, the pure function refuses the cap."""
    from amplifier_module_context_simple.config import MIN_TOOL_RESULT_BYTES
    from amplifier_module_context_simple.ingress import MIN_TEXT_BYTES

    texts = ("a" * 5000, "日本語" * 2000, "🙂" * 1500, "ab🙂\n" * 1000, "x" * 300)
    for cap in [*range(MIN_TOOL_RESULT_BYTES, MIN_TOOL_RESULT_BYTES + 40), 300, 511, 1000, 4099]:
        for text in texts:
            clip = clip_tool_result({"role": "tool", "content": text}, cap)
            if clip is None:
                assert len(text.encode("utf-8")) <= cap
                continue
            clipped = clip.message["content"]
            head = clipped.split("\n[... tool result")[0]
            assert len(clipped.encode("utf-8")) <= cap and text.startswith(head), (cap, text[:5])
            assert len(head.encode("utf-8")) >= MIN_TEXT_BYTES - 3 and clip.kept_bytes == len(head.encode("utf-8"))
    assert MIN_TEXT_BYTES >= 64
    with pytest.raises(ValueError, match="below 256"):
        clip_tool_result({"role": "tool", "content": "x" * 500}, 150)


@pytest.mark.asyncio
async def test_a_spill_file_of_a_clipped_result_holds_the_full_text(tmp_path):
    content = "0123456789abcdef\n" * 20_000  # 340 KB
    context = SimpleContextManager(
        max_tokens=2_000, tool_result_spill_dir=str(tmp_path), protected_tool_results=0, protected_recent=0.0
    )
    small = [m for i in range(3) for m in (asst_calls(f"s{i}"), result(f"s{i}", "short"))]
    await add_all(context, [*big_session(content), *small, user("next")])
    await context.get_messages_for_request()
    assert context._last_compaction_stats["messages_truncated"] >= 1
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and files[0].read_text() == content


# ----- 4: images -----------------------------------------------------------------------------------


def screenshot(megabytes: float) -> dict[str, Any]:
    data = base64.b64encode(b"\x89PNG" + b"\x00" * int(megabytes * 750_000)).decode()
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


@pytest.mark.parametrize("counter", ["estimate", "content"])
def test_an_image_is_sized_as_an_image_not_as_its_base64_text(counter):
    count = resolve_counter(counter)
    message = {"role": "user", "content": [{"type": "text", "text": "what is wrong here?"}, screenshot(7)]}
    assert len(str(message)) // 4 > 1_500_000  # what the base64 text would claim
    assert 1_600 <= count(message) < 1_700
    sized = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}, "width": 300, "height": 250}
    assert count({"role": "user", "content": [sized]}) < 120  # 300x250/750 = 100 tokens, and the framing


def test_text_only_messages_keep_the_original_estimate():
    message = {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "plain " * 100}]}
    assert estimate_message(message) == len(str(message)) // 4


@pytest.mark.asyncio
async def test_a_pasted_screenshot_does_not_pin_compaction():
    context = SimpleContextManager(max_tokens=50_000)
    image_turn = {"role": "user", "content": [{"type": "text", "text": "look"}, screenshot(7)]}
    await add_all(context, [system(), image_turn, asst("I see a stack trace."), user("fix it")])
    view = await context.get_messages_for_request()
    assert context._last_compaction_stats is None  # about 1,700 tokens, far below the threshold
    assert view[1]["content"][1] == image_turn["content"][1]  # the payload is sent whole


# ----- 5 and 6: loaded tools and the newest persisted reminder ----------------------------------------


def padded_session(marked: dict[str, Any], rounds: int = 30) -> list[dict[str, Any]]:
    pad = "output line\n" * 60
    messages = [system(), user("start the task " * 10), marked]
    for i in range(rounds):
        messages += [asst_calls(f"r{i}", name="bash"), result(f"r{i}", pad), asst(f"step {i}")]
    return [*messages, user("continue")]


@pytest.mark.asyncio
async def test_a_message_that_loaded_tools_is_never_removed():
    loaded = {"role": "assistant", "content": "loading tools", "metadata": {"openai:tool_search_items": [{"id": "t"}]}}
    context = SimpleContextManager(max_tokens=3_000, protected_recent=0.1)
    await add_all(context, padded_session(loaded))
    view = await context.get_messages_for_request()
    assert context._last_compaction_stats["messages_removed"] > 20
    assert any(m.get("content") == "loading tools" for m in view)


@pytest.mark.asyncio
async def test_the_newest_persisted_reminder_stays_and_older_ones_go():
    def reminder(n: int) -> dict[str, Any]:
        text = f"<system-reminder>todo list v{n}</system-reminder>"
        return {"role": "user", "content": text, "metadata": {"ephemeral": True, "persisted": True}}

    messages = padded_session(reminder(0))
    messages[40:40] = [reminder(1)]
    messages[70:70] = [reminder(2)]
    context = SimpleContextManager(max_tokens=3_000, protected_recent=0.05)
    await add_all(context, messages)
    view = await context.get_messages_for_request()
    texts = [m.get("content") for m in view]
    assert "<system-reminder>todo list v2</system-reminder>" in texts
    assert "<system-reminder>todo list v0</system-reminder>" not in texts


@pytest.mark.asyncio
async def test_todays_keys_mount_without_an_unknown_key_warning(caplog):
    config = {"max_tokens": None, "max_tokens_fallback": 150_000, "max_tool_result_bytes": 65_536}
    coordinator = MockCoordinator()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await mount(coordinator, config)
    assert not caplog.records
    context = coordinator.get("context")
    assert (context.max_tokens_fallback, context.max_tool_result_bytes) == (150_000, 65_536)


def test_a_stub_that_would_save_nothing_or_drop_an_attachment_is_not_made() -> None:
    """Today's original's _stub_user_message returns the message itself when nothing is worth compacting;
    the ladder never asks for those, but a caller of the method gets the message back, not a stub."""
    context = SimpleContextManager()
    short = {"role": "user", "content": "short"}
    image = {"role": "user", "content": [{"type": "text", "text": "look " * 40}, {"type": "image", "source": {}}]}
    long_text = {"role": "user", "content": "the project lives at ~/Desktop/ora, " * 10}
    assert context._stub_user_message(short) is short
    assert context._stub_user_message(image) is image
    assert context._stub_user_message(long_text)["_stubbed"] is True
