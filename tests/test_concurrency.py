"""Concurrency: asyncio tasks interleaving ``add_message`` and ``get_messages_for_request``.

A conversation task adds turns whose parallel tool results arrive from separate tasks in random
order; reader tasks request views the whole time; a meter task feeds ``llm:response`` usage; hooks
and the system prompt factory yield to the loop, so requests are suspended mid-way while messages
arrive. Checked: every message kept exactly once, ``_seq`` unique and increasing in arrival order,
and no view with a half-added tool group (``view_problems`` clean).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from amplifier_core.message_models import ChatResponse, TextBlock

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.estimate import seq_of
from amplifier_module_context_simple.repair import view_problems

TIMESTAMP = "2025-01-01T00:00:00.000+00:00"
Message = dict[str, Any]


async def yield_some(rng: random.Random, most: int = 3) -> None:
    for _ in range(rng.randint(0, most)):
        await asyncio.sleep(0)


class YieldingHooks:
    """Every emit suspends the emitting request for a few loop turns."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.events: list[str] = []

    async def emit(self, event: str, payload: dict[str, Any]) -> None:
        self.events.append(event)
        await yield_some(self.rng)


class Summarizer:
    async def complete(self, request: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return ChatResponse(content=[TextBlock(text="Summary: the user is running a long task.")])


def message(role: str, tag: str, **extra: Any) -> Message:
    text = f"{tag} " + "lorem ipsum " * 40
    return {"role": role, "content": text, **extra, "metadata": {"timestamp": TIMESTAMP, "tag": tag}}


class World:
    """One manager, the tasks around it, and what they observed."""

    def __init__(self, ctx: SimpleContextManager, rng: random.Random, budget: int) -> None:
        self.ctx, self.rng, self.budget = ctx, rng, budget
        self.added: list[str] = []
        self.views = 0
        self.done = False
        self.provider = Summarizer()

    async def add(self, msg: Message) -> None:
        await self.ctx.add_message(msg)
        self.added.append(msg["metadata"]["tag"])

    async def conversation(self, turns: int) -> None:
        for turn in range(turns):
            await self.add(message("user", f"u{turn}"))
            await yield_some(self.rng)
            ids = [f"c{turn}_{i}" for i in range(self.rng.randint(0, 6))]
            calls = [{"id": i, "type": "function", "function": {"name": "read", "arguments": "{}"}} for i in ids]
            await self.add(message("assistant", f"a{turn}", **({"tool_calls": calls} if calls else {})))
            await asyncio.gather(*(self.tool(call_id) for call_id in ids))  # parallel tools, random finish order
            if ids:
                await self.add(message("assistant", f"f{turn}"))
        self.done = True

    async def tool(self, call_id: str) -> None:
        await yield_some(self.rng, 8)
        await self.add(message("tool", f"r{call_id}", tool_call_id=call_id, name="read"))

    async def reader(self) -> None:
        while not self.done:
            view = await self.ctx.get_messages_for_request(token_budget=self.budget, provider=self.provider)
            assert view_problems(view) == [], view_problems(view)
            self.views += 1
            await yield_some(self.rng)

    async def meter(self) -> None:
        while not self.done:
            usage = {"input_tokens": self.rng.randint(100, 3 * self.budget), "cache_write_tokens": 0}
            await self.ctx._on_llm_response("llm:response", {"status": "ok", "usage": usage})
            await yield_some(self.rng, 5)


async def prompt_factory_for(rng: random.Random) -> Any:
    async def factory() -> str:
        await yield_some(rng)
        return "You are a careful assistant."

    return factory


CONFIGS = {
    "progressive": {},
    "progressive-hybrid-replay": {"token_meter": "hybrid", "replay_last_user_on_compaction": True},
    "summary": {"compaction_strategy": "summary", "summary_trigger": 0.5},
    "tool-budgets-actual": {"tool_result_budget_tokens": 20, "token_meter": "actual", "protected_recent": 0.0},
}


@pytest.mark.asyncio
@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("seed", range(6))
async def test_interleaved_adds_and_requests_keep_every_message_and_valid_views(name: str, seed: int) -> None:
    rng = random.Random(f"{name}-{seed}")
    ctx = SimpleContextManager(hooks=YieldingHooks(rng), **CONFIGS[name])
    if seed % 2:
        await ctx.set_system_prompt_factory(await prompt_factory_for(rng))
    world = World(ctx, rng, budget=3_000)
    await asyncio.gather(world.conversation(turns=12), world.reader(), world.reader(), world.reader(), world.meter())
    if ctx._summarization_task is not None:
        await ctx._summarization_task
    stored = [m for m in ctx.messages if (m.get("metadata") or {}).get("type") != "context_summary"]
    assert [m["metadata"]["tag"] for m in stored] == world.added, "a message was lost, duplicated or reordered"
    seqs = [seq_of(m) for m in ctx.messages]
    assert seqs == sorted(set(seqs)) and len(seqs) == len(ctx.messages)
    assert world.views >= 12
    # Quiet again: the next request is valid, and the one after extends it unless it is a boundary
    # (a stale usage anchor keeps escalating in actual/hybrid mode until a new llm:response arrives).
    first = await ctx.get_messages_for_request(token_budget=world.budget, provider=world.provider)
    compactions = ctx._hooks.events.count("context:compaction")
    second = await ctx.get_messages_for_request(token_budget=world.budget, provider=world.provider)
    assert view_problems(first) == [] and view_problems(second) == []
    if ctx._hooks.events.count("context:compaction") == compactions:
        kept = [m for m in first if not _ephemeral(m)]
        assert [m for m in second if not _ephemeral(m)][: len(kept)] == kept


def _ephemeral(msg: Message) -> bool:
    return bool((msg.get("metadata") or {}).get("ephemeral"))


@pytest.mark.asyncio
async def test_a_resume_in_the_middle_of_suspended_requests_leaves_valid_views() -> None:
    rng = random.Random(7)
    ctx = SimpleContextManager(hooks=YieldingHooks(rng))
    await ctx.set_system_prompt_factory(await prompt_factory_for(rng))
    world = World(ctx, rng, budget=2_000)

    async def resumer() -> None:
        while not world.done:
            await yield_some(rng, 20)
            await ctx.set_messages(await ctx.get_messages())

    await asyncio.gather(world.conversation(turns=10), world.reader(), world.reader(), resumer())
    assert [m["metadata"]["tag"] for m in ctx.messages] == world.added
    assert [seq_of(m) for m in ctx.messages] == list(range(len(ctx.messages)))


@pytest.mark.asyncio
async def test_many_concurrent_writers_get_unique_increasing_seqs() -> None:
    ctx = SimpleContextManager()
    rng = random.Random(3)

    async def writer(w: int) -> None:
        for i in range(50):
            await ctx.add_message(message("user", f"w{w}-{i}"))
            await yield_some(rng)

    await asyncio.gather(*(writer(w) for w in range(20)))
    seqs = [seq_of(m) for m in ctx.messages]
    assert seqs == list(range(1_000))
    assert len({m["metadata"]["tag"] for m in ctx.messages}) == 1_000


# ----- a history replaced while a request awaits (issue 30 point 2) --------------------------------------


class Gate:
    """Hooks that hold the emitting request at one event until released."""

    def __init__(self, event: str) -> None:
        self.event = event
        self.held = asyncio.Event()
        self.release = asyncio.Event()
        self.events: list[str] = []

    async def emit(self, event: str, payload: dict[str, Any]) -> None:
        self.events.append(event)
        if event == self.event and not self.release.is_set():
            self.held.set()
            await self.release.wait()


def _history(tag: str, turns: int, size: int) -> list[Message]:
    out: list[Message] = [{"role": "system", "content": "You are terse."}]
    for turn in range(turns):
        out.append({"role": "user", "content": f"{tag} question {turn} " + "q" * size})
        out.append({"role": "assistant", "content": f"{tag} answer {turn} " + "a" * size})
    return [*out, {"role": "user", "content": f"{tag} last question"}]


async def _replaced_while_held(event: str, replace: Any) -> tuple[SimpleContextManager, list[Message]]:
    """A compacting request on an old history, held at ``event`` while ``replace(ctx)`` runs."""
    gate = Gate(event)
    ctx = SimpleContextManager(hooks=gate)
    await ctx.set_messages(_history("old", 30, 2_000))
    request = asyncio.create_task(ctx.get_messages_for_request(token_budget=3_000))
    await gate.held.wait()
    await replace(ctx)
    gate.release.set()
    return ctx, await request


NEW = _history("new", 10, 10)


@pytest.mark.asyncio
@pytest.mark.parametrize("event", ["context:budget", "context:token_meter", "context:compaction"])
async def test_a_request_held_in_a_hook_never_writes_into_the_history_that_replaced_it(event: str) -> None:
    """Review round 4, point 2: the held request finished on the old history and wrote its decisions
    into the new one (a new 22-message history at 200k was sent with none of its assistant messages
    and a notice). Now it starts again on the new history and returns that history's view."""

    async def replace(ctx: SimpleContextManager) -> None:
        await ctx.set_messages(NEW)

    ctx, held = await _replaced_while_held(event, replace)
    assert not any("old" in str(m.get("content")) for m in held), "the held request returned the old history"
    assert ctx._removed_seqs == set() and ctx._last_compaction_stats is None
    view = await ctx.get_messages_for_request(token_budget=200_000)
    assert [m["content"] for m in view] == [m["content"] for m in NEW]


@pytest.mark.asyncio
async def test_the_held_request_wrote_only_into_the_decisions_of_the_history_it_started_on() -> None:
    """Issue 38, point 2: the decisions about one history are one object; ``set_messages`` replaces it
    while a compacting request awaits ``context:compaction`` (its decisions already made). Everything the
    held request decided stays in the old object; the new one holds only what the restarted request
    decided about the new history (nothing: it fits)."""
    gate = Gate("context:compaction")
    ctx = SimpleContextManager(hooks=gate, token_meter="hybrid")
    await ctx.set_messages(_history("old", 30, 2_000))
    await ctx._on_llm_response("llm:response", {"usage": {"input_tokens": 40_000}})  # an anchor on the old one
    old = ctx._decisions
    request = asyncio.create_task(ctx.get_messages_for_request(token_budget=3_000))
    await gate.held.wait()
    await ctx.set_messages(NEW)
    new = ctx._decisions
    gate.release.set()
    view = await request
    assert new is not old and ctx._decisions is new
    assert old._removed_seqs and old._last_compaction_stats is not None and old._anchor_seq is not None
    assert not new.has_sticky() and new._last_compaction_stats is None and new._sticky_level == 0
    assert new._anchor_seq is None and new._ledger is None and new._provenance_refusals == 0
    assert [m["content"] for m in view] == [m["content"] for m in NEW]


@pytest.mark.asyncio
async def test_clear_while_a_request_is_held_sends_nothing_of_the_cleared_history() -> None:
    async def replace(ctx: SimpleContextManager) -> None:
        await ctx.clear()

    ctx, held = await _replaced_while_held("context:token_meter", replace)
    assert held == [] and ctx._removed_seqs == set() and ctx._last_compaction_stats is None


@pytest.mark.asyncio
async def test_restore_state_while_a_request_is_held_adopts_only_the_snapshot() -> None:
    source = SimpleContextManager()
    await source.set_messages(NEW)
    expected = await source.get_messages_for_request(token_budget=200_000)
    snapshot = source.snapshot_state()

    async def replace(ctx: SimpleContextManager) -> None:
        await ctx.set_messages(NEW)
        ctx.restore_state(snapshot)

    ctx, held = await _replaced_while_held("context:token_meter", replace)
    assert held == expected and ctx.snapshot_state()["sticky"] == snapshot["sticky"]


@pytest.mark.asyncio
async def test_a_hook_replacing_the_history_on_every_request_gets_a_clear_error() -> None:
    class Resetting:
        def __init__(self) -> None:
            self.ctx: SimpleContextManager | None = None

        async def emit(self, event: str, payload: dict[str, Any]) -> None:
            if event == "context:token_meter" and self.ctx is not None:
                await self.ctx.set_messages(NEW)

    hooks = Resetting()
    ctx = SimpleContextManager(hooks=hooks)
    hooks.ctx = ctx
    with pytest.raises(RuntimeError, match="history was replaced"):
        await ctx.get_messages_for_request(token_budget=200_000)
    hooks.ctx = None  # the hook stops: requests work again
    assert len(await ctx.get_messages_for_request(token_budget=200_000)) == len(NEW)
