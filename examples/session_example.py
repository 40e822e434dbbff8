"""A complete Amplifier session using context-simple, runnable offline: `uv run python examples/session_example.py`.

amplifier-core ships no provider and no orchestrator, so this file brings a scripted provider (it answers with
two rounds of tool calls, then text, and reports usage on ``llm:response`` as real providers do) and a minimal
orchestrator. In your app those come from your bundle (e.g. loop-basic and provider-anthropic); the part that
is about this module is ``MOUNT_PLAN`` and ``main()``. tests/test_examples.py runs this file.
"""

from __future__ import annotations

import asyncio
import json
import sys
import types
from typing import Any

from amplifier_core import AmplifierSession
from amplifier_core.message_models import ChatRequest, ChatResponse, Message, TextBlock, ToolCall, Usage
from amplifier_core.models import ProviderInfo

from amplifier_module_context_simple import CONTEXT_EVENTS

TOOL_OUTPUT = "a line of tool output that takes room in the context window\n" * 40


class ScriptedProvider:
    """Stands in for a real provider: tool calls twice, then an answer; emits ``llm:response`` with usage."""

    name = "scripted"

    def __init__(self, coordinator: Any) -> None:
        self.coordinator = coordinator
        self.calls = 0

    def get_info(self) -> ProviderInfo:
        return ProviderInfo(id="scripted", display_name="Scripted", defaults={"model": "scripted-1"})

    async def list_models(self) -> list[Any]:
        return []

    async def complete(self, request: ChatRequest, **kwargs: Any) -> ChatResponse:
        self.calls += 1
        size = sum(len(m.model_dump_json()) for m in request.messages) // 4
        usage = {"input_tokens": size, "output_tokens": 10, "cache_read_tokens": 0, "cache_write_tokens": 0}
        await self.coordinator.hooks.emit("llm:response", {"provider": self.name, "status": "ok", "usage": usage})
        tokens = Usage(input_tokens=size, output_tokens=10, total_tokens=size + 10)
        if self.calls % 3:
            calls = [ToolCall(id=f"call-{self.calls}-{i}", name="read_file", arguments={"i": i}) for i in range(2)]
            return ChatResponse(content=[TextBlock(text="")], tool_calls=calls, usage=tokens)
        return ChatResponse(content=[TextBlock(text=f"answer {self.calls}")], usage=tokens, finish_reason="end_turn")

    def parse_tool_calls(self, response: ChatResponse) -> list[ToolCall]:
        return response.tool_calls or []


class LoopOrchestrator:
    """Stands in for loop-basic: add the user turn, then request / run tools until the provider answers."""

    async def execute(self, prompt, context, providers, tools, hooks, coordinator=None, **kwargs) -> str:
        await context.add_message({"role": "user", "content": prompt})
        provider = next(iter(providers.values()))
        while True:
            view = await context.get_messages_for_request(provider=provider)
            response = await provider.complete(ChatRequest(messages=[Message(**m) for m in view]))
            calls = provider.parse_tool_calls(response)
            if not calls:
                text = "".join(block.text for block in response.content)
                await context.add_message({"role": "assistant", "content": text})
                return text
            wire = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for c in calls
            ]
            await context.add_message({"role": "assistant", "content": "", "tool_calls": wire})
            for c in calls:
                await context.add_message({"role": "tool", "tool_call_id": c.id, "content": TOOL_OUTPUT})


def install_stand_ins() -> None:
    """Make the stand-in provider and orchestrator loadable by the kernel (its direct-import fallback)."""

    async def provider_mount(coordinator: Any, config: dict[str, Any] | None = None) -> None:
        await coordinator.mount("providers", ScriptedProvider(coordinator), name="scripted")

    async def orchestrator_mount(coordinator: Any, config: dict[str, Any] | None = None) -> None:
        await coordinator.mount("orchestrator", LoopOrchestrator())

    for module_id, mount in (("provider-example", provider_mount), ("loop-example", orchestrator_mount)):
        module = types.ModuleType("amplifier_module_" + module_id.replace("-", "_"))
        module.mount = mount
        sys.modules[module.__name__] = module


# ----- the part about this module (shown in the README) -----------------------------------------------

# What a bundle's `session:` block becomes. Here `context-simple` is found through the package's entry point.
# A bundle also gives each module a `source:`; for this module that is your clone of this repository (a path
# while developing, `git+file:///...@<full SHA>` to pin), not the original's GitHub URL, which installs the
# original: see examples/bundle.md and docs/bundles.md.
MOUNT_PLAN: dict[str, Any] = {
    "session": {
        "orchestrator": "loop-example",
        "context": {
            "module": "context-simple",
            "config": {"max_tokens": 6_000, "token_meter": "hybrid", "tool_result_shape": "head_tail"},
        },
    },
    "providers": [{"module": "provider-example", "config": {}}],
}


async def main(turns: int = 4) -> dict[str, int]:
    """Run a few turns, print what the module reported, return how often each of its events fired."""
    install_stand_ins()  # the scripted provider and orchestrator above
    session = AmplifierSession(MOUNT_PLAN)
    await session.initialize()
    counts = dict.fromkeys(CONTEXT_EVENTS, 0)

    async def on_event(event: str, data: dict[str, Any]) -> None:
        counts[event] += 1
        if event == "context:compaction":
            print(f"  compacted: {data['before_tokens']} -> {data['after_tokens']} tokens")
        if event == "context:token_meter":
            # used_tokens is the meter's count of the history before compaction, not what was sent
            print(f"  before compaction: {data['used_tokens']} of {data['budget']} tokens ({data['kind']})")

    for event in CONTEXT_EVENTS:  # context:compaction and the module's own events
        session.coordinator.hooks.register(event, on_event, priority=100, name=f"example:{event}")
    context = session.coordinator.get("context")
    await context.add_message({"role": "system", "content": "You are a helpful coding agent."})
    try:
        for turn in range(turns):
            print(f"turn {turn}: {await session.execute(f'turn {turn}: please read the files')}")
        print(f"history: {len(await context.get_messages())} messages, events: {counts}")
    finally:
        await session.cleanup()
    return counts


if __name__ == "__main__":
    import argparse

    options = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_argument("--turns", type=int, default=4, help="user turns to run (default: 4)")
    asyncio.run(main(turns=options.parse_args().turns))
