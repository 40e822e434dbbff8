"""amplifier-core integration: mount, the meter listener, the core's validator and behavioural suites,
and a real AmplifierSession that loads this package through its ``context-simple`` entry point."""

from __future__ import annotations

import copy
import importlib.metadata
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from amplifier_core import AmplifierSession
from amplifier_core.message_models import ChatRequest, ChatResponse, Message, TextBlock, ToolCall, Usage
from amplifier_core.models import HookResult, ProviderInfo
from amplifier_core.testing import MockCoordinator
from amplifier_core.validation import ContextValidator
from amplifier_core.validation.behavioral import ContextBehaviorTests
from amplifier_core.validation.structural import ContextStructuralTests

import amplifier_module_context_simple
from amplifier_module_context_simple import SimpleContextManager, mount
from amplifier_module_context_simple.repair import SYNTHETIC_RESULT_TEXT, view_problems
from tests.conftest import EventLog, assert_extends, non_ephemeral

PACKAGE_DIR = Path(amplifier_module_context_simple.__file__).resolve().parent
USAGE = {"status": "ok", "usage": {"input_tokens": 1_000, "output_tokens": 5, "cache_write_tokens": 200}}


@pytest.fixture
def module_path() -> Path:
    """Point amplifier-core's pytest plugin at this package (overrides its directory-name detection)."""
    return PACKAGE_DIR


class TestContextSimpleBehavior(ContextBehaviorTests):
    """amplifier-core's own behavioural contract tests, run against this package."""


class TestContextSimpleStructural(ContextStructuralTests):
    """amplifier-core's structural validation (ContextValidator), run against this package."""


# ----- mount through MockCoordinator ------------------------------------------------------------


@pytest.mark.asyncio
async def test_mount_puts_a_manager_at_context_and_registers_the_meter():
    coordinator = MockCoordinator()
    cleanup = await mount(coordinator, {"max_tokens": 50_000})
    ctx = coordinator.get("context")
    assert isinstance(ctx, SimpleContextManager) and ctx.max_tokens == 50_000
    assert ctx._hooks is coordinator.hooks
    assert amplifier_module_context_simple.__amplifier_module_type__ == "context"
    assert coordinator.hooks.list_handlers("llm:response") == {"llm:response": ["context-simple-meter"]}
    assert callable(cleanup)
    await cleanup()


@pytest.mark.asyncio
async def test_meter_listener_runs_at_priority_50():
    coordinator = MockCoordinator()
    cleanup = await mount(coordinator, {})
    ctx = coordinator.get("context")
    seen: dict[str, Any] = {}

    def observer(label: str):
        async def handler(event: str, data: dict[str, Any]) -> None:
            seen[label] = ctx._last_measured_prompt_tokens

        return handler

    coordinator.hooks.register("llm:response", observer("before"), priority=49, name="t-before")
    coordinator.hooks.register("llm:response", observer("after"), priority=51, name="t-after")
    result = await coordinator.hooks.emit("llm:response", USAGE)
    assert result.action == "continue"
    assert seen == {"before": None, "after": 1_200}  # gross input + cache writes, between 49 and 51
    await cleanup()


@pytest.mark.asyncio
async def test_cleanup_unregisters_the_meter():
    coordinator = MockCoordinator()
    cleanup = await mount(coordinator, {})
    ctx = coordinator.get("context")
    await cleanup()
    assert coordinator.hooks.list_handlers("llm:response") == {"llm:response": []}
    await coordinator.hooks.emit("llm:response", USAGE)
    assert ctx._last_measured_prompt_tokens is None


@pytest.mark.asyncio
async def test_mount_without_hooks_still_mounts_and_cleans_up():
    class Bare:
        def __init__(self) -> None:
            self.mounted: dict[str, Any] = {}

        async def mount(self, point: str, obj: Any) -> None:
            self.mounted[point] = obj

    coordinator = Bare()
    cleanup = await mount(coordinator, {})
    assert isinstance(coordinator.mounted["context"], SimpleContextManager)
    await cleanup()


@pytest.mark.asyncio
async def test_amplifier_core_context_validator_passes_on_the_package_dir():
    outcome = await ContextValidator().validate(PACKAGE_DIR)
    assert outcome.passed, [(c.name, c.message) for c in outcome.errors]


# ----- a real AmplifierSession -------------------------------------------------------------------

TOOL_OUTPUT = "line of tool output that takes room in the context window\n" * 40  # ~2,400 chars


class ScriptedProvider:
    """A provider that checks every request it gets, answers with tool calls, then text."""

    name = "scripted"

    def __init__(self, coordinator: Any) -> None:
        self.coordinator = coordinator
        self.requests: list[list[dict[str, Any]]] = []
        self.problems: list[str] = []
        self.calls = 0
        self.compactions: list[int] = []  # context:compaction events seen by the time of each request
        self.events: EventLog | None = None

    def get_info(self) -> ProviderInfo:
        # No context window in the defaults: the budget is the context's configured max_tokens.
        return ProviderInfo(id="scripted", display_name="Scripted", defaults={"model": "scripted-1"})

    async def list_models(self) -> list[Any]:
        return []

    def record(self, request: ChatRequest) -> None:
        messages = [m.model_dump(exclude_none=True) for m in request.messages]
        self.requests.append(messages)
        self.compactions.append(len(self.events.of("context:compaction")) if self.events else 0)
        self.problems += [f"request {len(self.requests)}: {p}" for p in view_problems(messages)]
        if not any(m["role"] == "system" for m in messages):
            self.problems.append(f"request {len(self.requests)}: no system message")

    async def complete(self, request: ChatRequest, **kwargs: Any) -> ChatResponse:
        self.record(request)
        self.calls += 1
        size = sum(len(json.dumps(m.model_dump(mode="json"))) for m in request.messages) // 4
        await self.coordinator.hooks.emit(
            "llm:response",
            {"provider": self.name, "model": "scripted-1", "status": "ok", "usage": {"input_tokens": size}},
        )
        usage = Usage(input_tokens=size, output_tokens=10, total_tokens=size + 10)
        if self.calls % 3:  # two rounds of parallel tool calls, then an answer
            calls = [ToolCall(id=f"call-{self.calls}-{i}", name="read_file", arguments={"i": i}) for i in range(2)]
            return ChatResponse(content=[TextBlock(text="")], tool_calls=calls, usage=usage)
        return ChatResponse(content=[TextBlock(text=f"answer {self.calls}")], usage=usage, finish_reason="end_turn")

    def parse_tool_calls(self, response: ChatResponse) -> list[ToolCall]:
        return response.tool_calls or []


class ToolLoopOrchestrator:
    """A minimal orchestrator: user turn, then request / tool results until the provider answers."""

    async def execute(self, prompt, context, providers, tools, hooks, coordinator=None, **kwargs) -> str:
        await context.add_message({"role": "user", "content": prompt})
        provider = next(iter(providers.values()))
        for _ in range(10):
            view = await context.get_messages_for_request(provider=provider)
            response = await provider.complete(ChatRequest(messages=[Message(**m) for m in view]))
            calls = provider.parse_tool_calls(response)
            if not calls:
                text = "".join(block.text for block in response.content)
                await context.add_message({"role": "assistant", "content": text})
                return text
            await context.add_message(
                {"role": "assistant", "content": "", "tool_calls": [openai_call(c) for c in calls]}
            )
            for call in calls:
                await context.add_message({"role": "tool", "tool_call_id": call.id, "content": TOOL_OUTPUT})
        raise AssertionError("the scripted provider never answered")


def openai_call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}


def inline_module(monkeypatch: pytest.MonkeyPatch, module_id: str, mount_fn: Any) -> None:
    """Make ``module_id`` loadable by the kernel's direct-import fallback."""
    module = types.ModuleType("amplifier_module_" + module_id.replace("-", "_"))
    module.mount = mount_fn
    monkeypatch.setitem(sys.modules, module.__name__, module)


@pytest.fixture
def session_modules(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    made: dict[str, Any] = {}

    async def provider_mount(coordinator: Any, config: dict[str, Any] | None = None) -> None:
        made["provider"] = ScriptedProvider(coordinator)
        await coordinator.mount("providers", made["provider"], name="scripted")

    async def orchestrator_mount(coordinator: Any, config: dict[str, Any] | None = None) -> None:
        await coordinator.mount("orchestrator", ToolLoopOrchestrator())

    inline_module(monkeypatch, "provider-ctxtest-scripted", provider_mount)
    inline_module(monkeypatch, "loop-ctxtest", orchestrator_mount)
    return made


def test_the_package_is_installed_with_its_entry_point():
    (entry,) = importlib.metadata.entry_points(group="amplifier.modules", name="context-simple")
    assert entry.value == "amplifier_module_context_simple:mount" and entry.load() is mount


@pytest.mark.asyncio
async def test_real_session_loads_context_simple_and_compacts_across_turns(session_modules):
    plan = {
        "session": {
            "orchestrator": "loop-ctxtest",
            # How a bundle configures it: session.context = {module, config}.
            "context": {"module": "context-simple", "config": {"max_tokens": 6_000, "protected_tool_results": 2}},
        },
        "providers": [{"module": "provider-ctxtest-scripted", "config": {}}],
    }
    session = AmplifierSession(plan)
    await session.initialize()
    ctx = session.coordinator.get("context")
    assert type(ctx) is SimpleContextManager and ctx.max_tokens == 6_000
    events = EventLog(session.coordinator.hooks, ("context:compaction",))
    session_modules["provider"].events = events
    await ctx.add_message({"role": "system", "content": "You are the test agent."})
    replies = [await session.execute(f"task {turn}: please look at the files") for turn in range(5)]
    provider = session_modules["provider"]

    assert replies == [f"answer {3 * (turn + 1)}" for turn in range(5)]
    assert provider.calls == 15 and provider.problems == []
    assert events.of("context:compaction"), "five turns of tool output never forced a compaction"
    assert ctx._last_compaction_stats["budget"] == 6_000 - 800
    # The session's history is complete and untouched; the provider saw compacted views.
    history = await ctx.get_messages()
    assert len(history) == 1 + 5 * (1 + 2 * 3 + 1) and not any(m.get("_truncated") for m in history)
    assert max(len(r) for r in provider.requests) < len(history)
    assert all(e["messages_removed"] > 0 and e["budget"] == 5_200 for e in events.of("context:compaction"))
    # Between compactions, each request extends the previous one (the provider's prompt cache holds).
    for index in range(1, len(provider.requests)):
        if provider.compactions[index] == provider.compactions[index - 1]:
            assert_extends(non_ephemeral(provider.requests[index - 1]), non_ephemeral(provider.requests[index]))
    assert all(r[-1]["role"] != "assistant" or not r[-1].get("tool_calls") for r in provider.requests)
    # The meter heard the provider's llm:response through the real hook registry.
    assert ctx._usage_events == provider.calls and ctx._last_measured_prompt_tokens > 0

    await session.cleanup()
    assert session.coordinator.hooks.list_handlers("llm:response") == {"llm:response": []}


# ----- hook injections stored inside a tool group (loop-basic's order) ---------------------------


async def loop_basic_tool_round(coordinator: Any, ctx: SimpleContextManager, ids: list[str], role: str) -> None:
    """What loop-basic stores for one round of parallel calls whose ``tool:post`` hook injects context:
    the assistant's calls, then (inside the tool tasks) the hook's injection, then the results."""
    calls = [{"id": i, "type": "function", "function": {"name": "read_file", "arguments": "{}"}} for i in ids]
    await ctx.add_message({"role": "assistant", "content": "", "tool_calls": calls})
    for call_id in ids:
        hook = HookResult(action="inject_context", context_injection=f"lint after {call_id}")
        hook.context_injection_role = role
        await coordinator.process_hook_result(hook, "tool:post", "linter")
    for call_id in ids:
        await ctx.add_message({"role": "tool", "tool_call_id": call_id, "content": f"output of {call_id} " * 50})


async def mounted(config: dict[str, Any]) -> tuple[Any, SimpleContextManager, Any]:
    """(coordinator, context, cleanup) of this package mounted on amplifier-core's MockCoordinator."""
    coordinator = MockCoordinator()
    cleanup = await mount(coordinator, config)
    return coordinator, coordinator.get("context"), cleanup


@pytest.mark.asyncio
@pytest.mark.parametrize("role", ["system", "user", "assistant"])
async def test_hook_injection_between_calls_and_results_keeps_the_real_results(role: str):
    coordinator, ctx, cleanup = await mounted({})
    await ctx.add_message({"role": "user", "content": "check the files"})
    await loop_basic_tool_round(coordinator, ctx, ["a", "b"], role)
    stored = copy.deepcopy(await ctx.get_messages())
    assert [m["role"] for m in stored] == ["user", "assistant", role, role, "tool", "tool"]  # loop-basic's order

    view = await ctx.get_messages_for_request()
    assert view_problems(view) == []
    assert [m["role"] for m in view] == ["user", "assistant", "tool", "tool", role, role]
    assert [m["content"] for m in view[2:4]] == [stored[4]["content"], stored[5]["content"]]  # the real output
    assert [m["content"] for m in view[4:]] == ["lint after a", "lint after b"]  # the injections follow
    assert not any(SYNTHETIC_RESULT_TEXT in str(m.get("content")) for m in view)
    assert await ctx.get_messages() == stored  # the stored history keeps its order
    assert ctx.fault_stats.get("repair_synthetic_results", 0) == 0
    assert ctx.fault_stats.get("repair_orphans_dropped", 0) == 0
    # The next turn's view extends this one (the prompt cache holds).
    await ctx.add_message({"role": "assistant", "content": "done"})
    assert_extends(view, await ctx.get_messages_for_request())
    await cleanup()


@pytest.mark.asyncio
async def test_a_group_whose_results_are_still_arriving_after_a_hook_injection_is_held_back():
    coordinator, ctx, cleanup = await mounted({})
    await ctx.add_message({"role": "user", "content": "check the files"})
    await loop_basic_tool_round(coordinator, ctx, ["a", "b"], "system")
    del ctx.messages[-1]  # result b not stored yet: [user, calls a+b, hook, hook, result a]
    view = await ctx.get_messages_for_request()
    assert [m["role"] for m in view] == ["user", "assistant"]  # ends on the calls, like between call and result
    assert ctx.fault_stats.get("repair_synthetic_results", 0) == 0
    await cleanup()


@pytest.mark.asyncio
@pytest.mark.parametrize("role", ["system", "user", "assistant"])
async def test_compacted_views_keep_hook_injected_groups_whole(role: str):
    """Under pressure the ladder removes and truncates; a group with an injection inside stays one unit."""
    coordinator, ctx, cleanup = await mounted({"max_tokens": 3_000, "protected_tool_results": 1})
    events = EventLog(coordinator.hooks, ("context:compaction",))
    await ctx.add_message({"role": "system", "content": "You are the test agent."})
    for turn in range(6):
        await ctx.add_message({"role": "user", "content": f"turn {turn}: check the files"})
        for round_ in range(2):
            await loop_basic_tool_round(coordinator, ctx, [f"t{turn}r{round_}a", f"t{turn}r{round_}b"], role)
            view = await ctx.get_messages_for_request()
            assert view_problems(view) == [], (turn, round_)
            assert not any(SYNTHETIC_RESULT_TEXT in str(m.get("content")) for m in view)
        await ctx.add_message({"role": "assistant", "content": f"answer {turn}"})
    assert events.of("context:compaction") and ctx._removed_seqs
    assert ctx.fault_stats.get("repair_orphans_dropped", 0) == 0
    await cleanup()


@pytest.mark.asyncio
async def test_a_user_role_injection_is_not_the_users_last_words():
    """Review regression: amplifier-core stores a user-role ``inject_context`` as plain text (no
    reminder envelope), so it counted as the user's own last message: the replay repeated the hook's
    text and the user's real last instruction lost its protection."""
    config = {"max_tokens": 3_000, "protected_recent": 0.0, "replay_last_user_on_compaction": True}
    coordinator, ctx, cleanup = await mounted(config)
    await ctx.add_message({"role": "user", "content": "first task"})
    await ctx.add_message({"role": "user", "content": "the real last instruction"})
    for turn in range(8):
        await loop_basic_tool_round(coordinator, ctx, [f"t{turn}a", f"t{turn}b"], "user")
    view = await ctx.get_messages_for_request()
    assert ctx._removed_seqs
    assert any(m.get("content") == "the real last instruction" for m in view)
    replays = [m for m in view if (m.get("metadata") or {}).get("source") == "context-replay"]
    assert replays and "the real last instruction" in replays[0]["content"]
    await cleanup()


@pytest.mark.asyncio
async def test_system_role_injections_through_the_coordinator_keep_views_append_only_and_are_removable():
    """Issue 18 through amplifier-core's own coordinator, in loop-basic's order (HookResult's default
    injection role is "system"): between compaction events every view extends the last one, and the
    ladder removes old injections instead of letting them outgrow the budget."""
    coordinator, ctx, cleanup = await mounted({"max_tokens": 4_000, "protected_tool_results": 1})
    events = EventLog(coordinator.hooks, ("context:compaction",))
    await ctx.add_message({"role": "system", "content": "You are the test agent."})
    previous: list[str] | None = None
    for turn in range(12):
        await ctx.add_message({"role": "user", "content": f"turn {turn}: check the files"})
        await loop_basic_tool_round(coordinator, ctx, [f"t{turn}a", f"t{turn}b"], "system")
        seen = len(events.of("context:compaction"))
        view = await ctx.get_messages_for_request()
        assert view_problems(view) == []
        current = [json.dumps(m, sort_keys=True) for m in view if "context-compaction" not in str(m.get("content"))]
        if previous is not None and len(events.of("context:compaction")) == seen:
            assert current[: len(previous)] == previous, f"turn {turn}: the prefix changed with no event"
        previous = current
        await ctx.add_message({"role": "assistant", "content": f"answer {turn}"})
    assert events.of("context:compaction")[-1].get("hook_injections_removed", 0) > 0
    assert view[0]["content"] == "You are the test agent."
    await cleanup()
