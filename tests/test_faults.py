"""Fault injection: every optional dependency failing, and crash-broken histories resumed.

Each fault runs a real transcript (requests before every assistant message, as an orchestrator
makes them) and checks that the turn goes on (or raises the one documented error), that every view
is one a provider accepts, that nothing stored is lost or changed, and that ``fault_stats`` counted
the fault. ``FAULT_KINDS`` lists every kind injected here (the issue asks for the figure).
"""

from __future__ import annotations

import asyncio
import copy
import errno
import json
import logging
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from amplifier_core.message_models import ChatResponse, TextBlock
from amplifier_core.models import ProviderInfo
from amplifier_core.testing import MockCoordinator

from amplifier_module_context_simple import SimpleContextManager, mount
from amplifier_module_context_simple.repair import SYNTHETIC_RESULT_TEXT, view_problems
from amplifier_module_context_simple.replay import is_real_user_message
from amplifier_module_context_simple.tool_results import spill_path
from tests.conftest import WORKLOADS, FullDisk, by_transcript, estimated_size, load_transcript, strip_seq

LOGGER = "amplifier_module_context_simple"
Message = dict[str, Any]
FAULT_KINDS: list[str] = []  # filled by the parametrizations below; reported by test_fault_kinds_are_counted

SMALL = [p for p in WORKLOADS if p.stem.startswith("taubench")][:3]
TRANSCRIPT = load_transcript(SMALL[0])
# Half the transcript's estimate: the second half of every replay compacts.
BUDGET = estimated_size(TRANSCRIPT) // 2


def kinds(group: str, names: list[str]) -> list[str]:
    FAULT_KINDS.extend(f"{group}:{name}" for name in names)
    return names


class Hooks:
    """Records events; ``fail`` makes every emit raise."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.events: list[str] = []

    async def emit(self, event: str, payload: dict[str, Any]) -> Any:
        self.events.append(event)
        if self.fail:
            raise RuntimeError(f"hook for {event} exploded")
        return None


async def drive(
    ctx: SimpleContextManager,
    messages: list[Message],
    budget: int | None = BUDGET,
    provider: Any = None,
    settle: Callable[[], Any] | None = None,
) -> list[list[Message]]:
    """Add ``messages``, requesting a view before each assistant message and once at the end; check each."""
    given = copy.deepcopy(messages)
    earlier = [strip_seq(m) for m in ctx.messages]
    views = []
    for message in [*messages, None]:
        if message is None or message.get("role") == "assistant":
            if settle is not None:
                await settle()
            view = await ctx.get_messages_for_request(token_budget=budget, provider=provider)
            check_view(view, ctx)
            views.append(view)
        if message is not None:
            await ctx.add_message(message)
    assert messages == given, "the caller's messages were mutated"
    assert_nothing_lost(ctx, earlier + given)
    return views


def check_view(view: list[Message], ctx: SimpleContextManager) -> None:
    assert view_problems(view) == [], view_problems(view)
    last = next((m for m in reversed(ctx.messages) if is_real_user_message(m)), None)
    if last is not None:
        assert strip_seq(last) in view, "the last real user message is missing"


def assert_nothing_lost(ctx: SimpleContextManager, given: list[Message]) -> None:
    """Stored history == what the caller gave, plus (summary strategy) appended summaries only."""
    stored = [strip_seq(m) for m in ctx.messages if (m.get("metadata") or {}).get("type") != "context_summary"]
    assert stored == given


async def settle_loop() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


# ----- the summarizer ------------------------------------------------------------------------------


class Summarizer:
    """A provider whose summary call fails in one of the ways the issue lists."""

    def __init__(self, fault: str) -> None:
        self.fault = fault
        self.calls = 0

    def get_info(self) -> Any:
        return ProviderInfo(id="faulty", display_name="Faulty", defaults={})

    async def complete(self, request: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.fault == "raise":
            raise ConnectionError("summarizer backend unreachable")
        if self.fault == "hang":
            await asyncio.sleep(3600)
        if self.fault == "none":
            return None
        text = {"empty": "   ", "oversized": "A very long summary. " * 20_000}.get(self.fault, "ok")
        return ChatResponse(content=[TextBlock(text=text)])


SUMMARY_OPTIONS = {"compaction_strategy": "summary", "summary_trigger": 0.5, "summarization_timeout_s": 0.05}


@pytest.mark.asyncio
@pytest.mark.parametrize("fault", kinds("summarizer", ["raise", "hang", "empty", "none", "oversized"]))
async def test_a_failing_summarizer_never_fails_the_turn(fault: str, caplog: Any) -> None:
    hooks, provider = Hooks(), Summarizer(fault)
    ctx = SimpleContextManager(hooks=hooks, **SUMMARY_OPTIONS)

    async def settle() -> None:
        await settle_loop()
        if fault == "hang" and ctx._summarization_task is not None:
            await asyncio.sleep(0.1)  # past summarization_timeout_s

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await drive(ctx, TRANSCRIPT, provider=provider, settle=settle)
    assert provider.calls >= 1 and "context:pre_summarize" in hooks.events
    assert ctx._summary_absorbed_count == 0
    assert ("context:post_summarize" in hooks.events) == (fault == "oversized")
    assert not any((m.get("metadata") or {}).get("type") == "context_summary" for m in ctx.messages)
    assert ctx._sticky_level > 0, "the progressive ladder must have carried the compaction"
    if fault == "oversized":
        assert "summary refused" in caplog.text  # the shrink guard: not a summarizer failure
        assert ctx.fault_stats["summarization_failures"] == 0
    else:
        assert ctx.fault_stats["summarization_failures"] >= 1
        assert "summarizer failed" in caplog.text


# ----- spill -----------------------------------------------------------------------------------------

SPILL_FAULTS = kinds("spill", ["dir_is_a_file", "permission_denied", "disk_full", "dir_is_a_symlink", "target_symlink"])


def spill_fault(fault: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(configured spill dir, a directory that must stay empty) with ``fault`` in place."""
    spill, outside = tmp_path / "spill", tmp_path / "outside"
    outside.mkdir()
    if fault == "dir_is_a_file":
        blocker = tmp_path / "blocker"
        blocker.write_text("x")
        return blocker / "spill", outside  # ENOTDIR even for root
    if fault == "dir_is_a_symlink":
        spill.symlink_to(outside, target_is_directory=True)
        return spill, outside
    spill.mkdir(mode=0o700)
    if fault == "permission_denied":
        real_open = os.open

        def denied(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if flags & os.O_CREAT:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", denied)
    elif fault == "disk_full":
        monkeypatch.setattr(os, "fdopen", lambda fd, *a, **k: FullDisk(fd))
    return spill, outside


@pytest.mark.asyncio
@pytest.mark.parametrize("fault", SPILL_FAULTS)
async def test_a_failing_spill_never_fails_the_turn(
    fault: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    spill, outside = spill_fault(fault, tmp_path, monkeypatch)
    ctx = SimpleContextManager(tool_result_spill_dir=str(spill), truncate_chars=100, target_usage=0.8)
    if fault == "target_symlink":
        # A symlink under every name the module could pick (its _seq is its index): never followed.
        for seq, message in enumerate(TRANSCRIPT):
            if message["role"] == "tool" and isinstance(message.get("content"), str):
                os.symlink(outside / f"victim-{seq}", spill_path(str(spill), seq, message["content"]))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        views = await drive(ctx, TRANSCRIPT, budget=int(estimated_size(TRANSCRIPT) * 0.95))
    monkeypatch.undo()
    pointers = [m for v in views for m in v if m.get("_truncated") and "for the full result" in m["content"]]
    assert pointers, "the budget must force truncation with spill pointers"
    assert ctx.fault_stats["spill_write_failures"] >= 1
    # A directory that cannot work is named at construction; a failure seen only when writing, once.
    assert caplog.text.count("spill write failed") + caplog.text.count("cannot be used") == 1
    assert os.listdir(outside) == [], "something was written outside the spill directory"
    if spill.is_dir() and not spill.is_symlink():
        assert [n for n in os.listdir(spill) if not os.path.islink(spill / n)] == []


# ----- hooks -----------------------------------------------------------------------------------------


kinds("hooks", ["emit_raises"])


@pytest.mark.asyncio
async def test_hooks_emit_raising_changes_no_view_and_is_counted(caplog: Any) -> None:
    baseline = await drive(SimpleContextManager(hooks=Hooks()), TRANSCRIPT)
    failing = Hooks(fail=True)
    ctx = SimpleContextManager(hooks=failing)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        views = await drive(ctx, TRANSCRIPT)
    assert views == baseline
    assert {"context:token_meter", "context:compaction"} <= set(failing.events)
    assert ctx.fault_stats["hook_emit_failures"] == len(failing.events)
    assert "emitting context:compaction failed" in caplog.text


# ----- provider info ------------------------------------------------------------------------------


class InfoProvider:
    """``get_info`` / ``get_model_info`` failing or returning nonsense."""

    def __init__(self, fault: str) -> None:
        self.fault = fault
        if fault.startswith("model_info"):
            self.get_model_info = self._model_info

    def _model_info(self) -> Any:
        if self.fault == "model_info_raises":
            raise RuntimeError("model registry offline")
        return "not a model info"

    def get_info(self) -> Any:
        if self.fault == "info_raises":
            raise TimeoutError("provider metadata timed out")
        defaults: Any = {
            "info_none": None,
            "zeros": {"context_window": 0, "max_output_tokens": 0},
            "strings": {"context_window": "200000", "max_output_tokens": "8000"},
            "negative": {"context_window": -5, "max_output_tokens": -1},
            "nan": {"context_window": math.nan, "max_output_tokens": math.inf},
            "bools": {"context_window": True, "max_output_tokens": True},
            "defaults_not_a_dict": ["context_window", 1000],
        }.get(self.fault)
        if self.fault == "info_none":
            return None
        return ProviderInfo(id="x", display_name="x", defaults=defaults) if isinstance(defaults, dict) else defaults


INFO_FAULTS = kinds(
    "provider_info",
    [
        "info_raises",
        "info_none",
        "zeros",
        "strings",
        "negative",
        "nan",
        "bools",
        "defaults_not_a_dict",
        "model_info_raises",
        "model_info_garbage",
    ],
)


@pytest.mark.asyncio
@pytest.mark.parametrize("fault", INFO_FAULTS)
async def test_unusable_provider_info_falls_back_to_max_tokens(fault: str) -> None:
    max_tokens = BUDGET
    baseline = await drive(SimpleContextManager(max_tokens=max_tokens), TRANSCRIPT, budget=None)
    ctx = SimpleContextManager(max_tokens=max_tokens)
    views = await drive(ctx, TRANSCRIPT, budget=None, provider=InfoProvider(fault))
    assert views == baseline  # the same views as with no provider at all
    assert ctx._last_token_meter_stats["budget"] == max_tokens - 800
    if fault.endswith("raises"):
        assert ctx.fault_stats["provider_info_failures"] == len(views)


# ----- the system prompt factory --------------------------------------------------------------------


kinds("system_prompt_factory", ["raises_first"])


@pytest.mark.asyncio
async def test_a_factory_failing_before_any_good_prompt_is_a_clear_error_and_stores_nothing_new() -> None:
    ctx = SimpleContextManager()
    await ctx.add_message(TRANSCRIPT[1])
    before = copy.deepcopy(ctx.messages)

    async def broken() -> str:
        raise OSError("prompt template missing")

    await ctx.set_system_prompt_factory(broken)
    with pytest.raises(RuntimeError, match="system prompt factory failed and no earlier prompt exists") as info:
        await ctx.get_messages_for_request(token_budget=BUDGET)
    assert "prompt template missing" in str(info.value)
    assert ctx.messages == before
    assert ctx.fault_stats["system_prompt_factory_failures"] == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("fault", kinds("system_prompt_factory", ["raises_later", "returns_none", "returns_bytes"]))
async def test_a_factory_failing_later_reuses_the_last_good_prompt(fault: str, caplog: Any) -> None:
    calls = {"n": 0}

    async def flaky() -> Any:
        calls["n"] += 1
        if calls["n"] % 2 == 1:
            return "You are the factory prompt."
        if fault == "raises_later":
            raise ValueError("template render failed")
        return None if fault == "returns_none" else b"bytes"

    good_calls = {"n": 0}

    async def steady() -> str:
        good_calls["n"] += 1
        return "You are the factory prompt."

    baseline_ctx = SimpleContextManager()
    await baseline_ctx.set_system_prompt_factory(steady)
    baseline = await drive(baseline_ctx, TRANSCRIPT)
    ctx = SimpleContextManager()
    await ctx.set_system_prompt_factory(flaky)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        views = await drive(ctx, TRANSCRIPT)
    assert views == baseline
    assert views[-1][0] == {"role": "system", "content": "You are the factory prompt."}
    assert ctx.fault_stats["system_prompt_factory_failures"] == len(views) // 2
    assert "reusing the last good prompt" in caplog.text


# ----- llm:response payloads ----------------------------------------------------------------------

BAD_PAYLOADS: dict[str, Any] = {
    "none": None,
    "list": [{"usage": {"input_tokens": 5}}],
    "not_json": "{usage: 5",
    "json_list": json.dumps([1, 2]),
    "usage_is_list": {"usage": [1, 2, 3]},
    "usage_is_number": {"usage": 12},
    "input_is_string": {"usage": {"input_tokens": "1000"}},
    "input_is_nan": {"usage": {"input_tokens": math.nan}},
    "input_is_inf": {"usage": {"input_tokens": math.inf}},
    "input_is_negative": {"usage": {"input_tokens": -10}},
    "input_is_bool": {"usage": {"input_tokens": True}},
    "no_input_key": {"usage": {"output_tokens": 10}},
    "status_error": {"status": "error", "usage": {"input_tokens": 10}},
    "deeply_nested": {"data": {"usage": {"input_tokens": 10}}},
}
kinds("llm_response", list(BAD_PAYLOADS))


# What the real (Rust) hook registry cannot carry (it serializes payloads as JSON) reaches the
# handler only from a host calling it directly; both paths are exercised.
NOT_JSON_SAFE = {"input_is_nan", "input_is_inf"}


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", list(BAD_PAYLOADS))
async def test_a_malformed_llm_response_is_ignored_and_the_turn_goes_on(shape: str) -> None:
    coordinator = MockCoordinator()
    cleanup = await mount(coordinator, {"max_tokens": BUDGET, "token_meter": "actual"})
    ctx = coordinator.get("context")
    good = {"status": "ok", "usage": {"input_tokens": 1_234, "cache_write_tokens": 6}}
    await coordinator.hooks.emit("llm:response", good)
    if shape in NOT_JSON_SAFE:
        result = await ctx._on_llm_response("llm:response", BAD_PAYLOADS[shape])
    else:
        result = await coordinator.hooks.emit("llm:response", BAD_PAYLOADS[shape])
    assert result.action == "continue"
    assert ctx._last_measured_prompt_tokens == 1_240, "a bad payload must not move the measured anchor"
    assert ctx.fault_stats["usage_events_ignored"] == 1
    views = await drive(ctx, TRANSCRIPT, budget=None)
    assert views and ctx._last_token_meter_stats["measured_tokens"] == 1_240
    await cleanup()


# ----- view repair of resumed, crash-broken transcripts -----------------------------------------------


def break_transcript(messages: list[Message], what: str) -> tuple[list[Message], int]:
    """Delete the middle tool result, or the middle assistant that has tool calls (and say where)."""
    if what == "result":
        doomed = [i for i, m in enumerate(messages) if m["role"] == "tool"]
    else:
        doomed = [i for i, m in enumerate(messages) if m["role"] == "assistant" and m.get("tool_calls")]
    index = doomed[len(doomed) // 2]
    return messages[:index] + messages[index + 1 :], index


CONTINUATION = [
    {"role": "user", "content": "Where were we? Please continue."},
    {"role": "assistant", "content": "Picking up where we left off."},
    {"role": "user", "content": "Thanks, now wrap up."},
    {"role": "assistant", "content": "Done."},
]


@pytest.mark.asyncio
@pytest.mark.parametrize("what", kinds("resumed_history", ["result_deleted", "call_deleted"]))
@pytest.mark.parametrize("path", by_transcript(WORKLOADS), ids=lambda p: p.stem[:40])
async def test_a_resumed_broken_transcript_yields_valid_views(path: Path, what: str, caplog: Any) -> None:
    transcript = load_transcript(path)
    broken, _ = break_transcript(transcript, what.split("_")[0])
    given = copy.deepcopy(broken)
    ctx = SimpleContextManager()
    await ctx.set_messages(broken)
    assert broken == given and [strip_seq(m) for m in ctx.messages] == given
    budget = estimated_size(transcript) // 2
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        views = [await ctx.get_messages_for_request(token_budget=budget)]
        check_view(views[0], ctx)
        views += await drive(ctx, [dict(m, metadata={"timestamp": "t"}) for m in CONTINUATION], budget=budget)
    stored = [strip_seq(m) for m in ctx.messages]
    assert stored[: len(given)] == given, "the stored history must keep exactly what the caller gave"
    stats = ctx.fault_stats
    if what == "result_deleted":
        assert stats["repair_synthetic_results"] >= 1
        assert any(m.get("content") == SYNTHETIC_RESULT_TEXT for v in views for m in v) or ctx._removed_seqs
    else:
        assert stats["repair_orphans_dropped"] >= 1
    assert caplog.text.count("repaired a broken tool-call history") == 1, "a repair is logged once"


def test_fault_kinds_are_counted() -> None:
    """The figure the issue asks for: distinct fault kinds injected by this module."""
    assert len(FAULT_KINDS) == len(set(FAULT_KINDS)) >= 30
    print(f"\nfault kinds injected: {len(FAULT_KINDS)}")
