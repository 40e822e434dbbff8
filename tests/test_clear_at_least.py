"""The worth-the-rebuild predicate (compact_clear_at_least): refuse, roll back, stay append-only, fail loud.

The refused escalation is checked against a twin manager with the predicate off: from the same state
the twin accepts the very escalation that was refused, so its view gives ``freed`` and the level
independently of the predicate's own bookkeeping.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest

from amplifier_module_context_simple import SimpleContextManager, mount
from amplifier_module_context_simple.config import parse_clear_at_least, parse_config, reset_warnings
from amplifier_module_context_simple.repair import view_problems
from tests.conftest import Recorder

WORKLOADS = Path(__file__).resolve().parent / "data" / "workloads"
TS = "2025-01-01T00:00:00.000+00:00"
BUDGET = 8000
EFFECTIVE = BUDGET - 800  # the notice reserve
NEVER = 10**9  # a floor no escalation can meet
SKIPPED_KEYS = {
    "freed_tokens",
    "required_tokens",
    "level_reached",
    "consecutive_skips",
    "max_consecutive_skips",
    "baseline_tokens",
    "budget",
    "protected_recent",
    "protected_tool_results",
}

Message = dict[str, Any]


def stamped(message: Message) -> Message:
    return {**message, "metadata": {**(message.get("metadata") or {}), "timestamp": TS}}


def call(i: int) -> Message:
    fn = {"name": "read_file", "arguments": json.dumps({"path": f"src/f{i}.py"})}
    return {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{i}", "type": "function", "function": fn}]}


def result(i: int, chars: int = 2400) -> Message:
    return {"role": "tool", "tool_call_id": f"c{i}", "content": f"# file {i}\n" + "x" * chars}


def session(rounds: int) -> list[Message]:
    out: list[Message] = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "Refactor the parser so it never reads a file twice; keep the tests green."},
    ]
    for i in range(rounds):
        out += [call(i), result(i)]
    return out


async def manager(messages: list[Message], **config: Any) -> tuple[SimpleContextManager, Recorder]:
    hooks = Recorder()
    ctx = SimpleContextManager(hooks=hooks, **config)
    for message in messages:
        await ctx.add_message(stamped(message))
    return ctx, hooks


def solid(view: list[Message]) -> list[Message]:
    """The non-ephemeral messages of a view (what the prompt cache sees as the prefix)."""
    return [m for m in view if not (m.get("metadata") or {}).get("ephemeral")]


def wire(stored: list[Message]) -> list[Message]:
    return [{**m, "metadata": {k: v for k, v in m["metadata"].items() if k != "_seq"}} for m in stored]


def sticky(ctx: SimpleContextManager) -> tuple[frozenset[int], ...]:
    return frozenset(ctx._removed_seqs), frozenset(ctx._truncated_seqs), frozenset(ctx._stubbed_seqs)


async def twin_escalation(ctx: SimpleContextManager) -> tuple[int, int]:
    """(freed, level) of the escalation a predicate-free copy of ``ctx`` makes at BUDGET right now."""
    twin, _ = await manager([])
    twin.messages = copy.deepcopy(ctx.messages)
    twin._next_seq = ctx._next_seq
    twin._removed_seqs, twin._truncated_seqs = set(ctx._removed_seqs), set(ctx._truncated_seqs)
    twin._stubbed_seqs, twin._sticky_level = set(ctx._stubbed_seqs), ctx._sticky_level
    baseline = twin._counts().total(twin._apply_sticky_decisions(twin.messages))
    view = await twin.get_messages_for_request(token_budget=BUDGET)
    return baseline - twin._counts().total(solid(view)), twin._last_compaction_stats["strategy_level"]


# --- the value table ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "budget", "required"),
    [
        (None, 10_000, 0),
        (0, 10_000, 0),
        (0.0, 10_000, 0),
        (-5, 10_000, 0),
        (-0.5, 10_000, 0),
        (20_000, 10_000, 20_000),
        (20_000.0, 10_000, 20_000),
        ("20000", 10_000, 20_000),
        (0.15, 10_000, 1_500),
        (0.15, 0, 0),
        (0.999, 1_000, 999),
        (1.0, 10_000, 1),
        (1, 10_000, 1),
        (2.5, 10_000, 2),
    ],
)
def test_value_table(value: Any, budget: int, required: int, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert parse_clear_at_least(value, budget) == required
        assert SimpleContextManager(compact_clear_at_least=value)._clear_at_least_required(budget) == required
    # A negative floor means off, as in the original, but is named once (issue 23): it is rarely meant; a
    # number written as a string is read as the number, said once (issue 31).
    negative = isinstance(value, int | float) and value < 0
    assert len(caplog.records) == (1 if negative or isinstance(value, str) else 0)
    assert all("compact_clear_at_least" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "value", ["twenty thousand", "", [20_000], {"tokens": 1}, object(), math.nan, math.inf, True, False]
)
def test_unparseable_is_disabled_with_a_warning(value: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="amplifier_module_context_simple"):
        parse_config({"compact_clear_at_least": value})  # never raises on config alone
    assert any("compact_clear_at_least" in r.getMessage() for r in caplog.records)
    caplog.clear()
    reset_warnings()  # a fresh start (each manager says its problems once anyway)
    with caplog.at_level(logging.WARNING, logger="amplifier_module_context_simple"):
        ctx = SimpleContextManager(compact_clear_at_least=value)
    assert [r.getMessage() for r in caplog.records if "compact_clear_at_least" in r.getMessage()]  # at mount
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="amplifier_module_context_simple"):
        assert ctx._clear_at_least_required(10_000) == 0
    assert not caplog.records  # and never again at each compaction (issue 14: it warned 5 times)


@pytest.mark.parametrize("value", [None, 0, -1, "nonsense"])
@pytest.mark.asyncio
async def test_disabled_forms_compact_exactly_like_the_default(value: Any) -> None:
    ctx, hooks = await manager(session(12), compact_clear_at_least=value, compact_max_consecutive_skips=1)
    plain, plain_hooks = await manager(session(12))
    assert await ctx.get_messages_for_request(token_budget=BUDGET) == await plain.get_messages_for_request(
        token_budget=BUDGET
    )
    assert hooks.events == plain_hooks.events and hooks.named("context:compaction")


@pytest.mark.asyncio
async def test_one_point_zero_is_one_token_not_the_whole_budget() -> None:
    ctx, hooks = await manager(session(12), compact_clear_at_least=1.0, compact_max_consecutive_skips=1)
    await ctx.get_messages_for_request(token_budget=BUDGET)
    assert len(hooks.named("context:compaction")) == 1 and not hooks.named("context:compaction-skipped")


@pytest.mark.asyncio
async def test_a_fraction_is_of_the_per_call_budget() -> None:
    freed, _ = await twin_escalation((await manager(session(12)))[0])
    fraction = (freed + 1) / EFFECTIVE  # just above what this escalation frees
    ctx, hooks = await manager(session(12), compact_clear_at_least=fraction)
    await ctx.get_messages_for_request(token_budget=BUDGET)
    (skipped,) = hooks.named("context:compaction-skipped")
    assert skipped["required_tokens"] == int(EFFECTIVE * fraction) and skipped["freed_tokens"] == freed
    ctx, hooks = await manager(session(12), compact_clear_at_least=(freed - 1) / EFFECTIVE)
    await ctx.get_messages_for_request(token_budget=BUDGET)
    assert hooks.named("context:compaction") and not hooks.named("context:compaction-skipped")


@pytest.mark.parametrize(("cap", "clamped"), [(0, 1), (-4, 1), (1, 1), (3, 3), (7, 7)])
@pytest.mark.asyncio
async def test_cap_zero_and_below_clamp_to_one(cap: int, clamped: int) -> None:
    assert SimpleContextManager(compact_max_consecutive_skips=cap).compact_max_consecutive_skips == clamped
    assert parse_config({"compact_max_consecutive_skips": cap})["compact_max_consecutive_skips"] == clamped


@pytest.mark.asyncio
async def test_cap_zero_fails_on_the_first_refusal() -> None:
    ctx, hooks = await manager(session(12), compact_clear_at_least=NEVER, compact_max_consecutive_skips=0)
    with pytest.raises(RuntimeError, match=r"could not be satisfied 1 consecutive times \(cap: 1\)"):
        await ctx.get_messages_for_request(token_budget=BUDGET)
    assert not hooks.named("context:compaction-skipped")


@pytest.mark.asyncio
async def test_the_pending_capture_is_call_scoped_even_after_the_fail_loud_error() -> None:
    # The original clears it when the call ends; a stale capture held the baseline view's messages.
    ctx, _ = await manager(session(12), compact_clear_at_least=NEVER, compact_max_consecutive_skips=2)
    await ctx.get_messages_for_request(token_budget=BUDGET)  # a refusal
    assert ctx._clear_at_least_skips == 1 and ctx._clear_at_least_pending is None
    with pytest.raises(RuntimeError):
        await ctx.get_messages_for_request(token_budget=BUDGET)
    assert ctx._clear_at_least_pending is None
    ctx.compact_clear_at_least = 1
    await ctx._compact_ephemeral(budget=EFFECTIVE)  # accepted, called directly as tests of the original do
    assert ctx._clear_at_least_pending is None


# --- refusal: rollback, the event, the baseline view ----------------------------------------------


@pytest.mark.asyncio
async def test_first_refusal_returns_the_baseline_and_emits_the_skip_event() -> None:
    ctx, hooks = await manager(session(12), compact_clear_at_least=NEVER)
    freed, level = await twin_escalation(ctx)
    uncompacted = await ctx.get_messages_for_request(token_budget=10**6)
    view = await ctx.get_messages_for_request(token_budget=BUDGET)
    assert view == uncompacted, "no notice either: no compaction was ever accepted"
    assert sticky(ctx) == (frozenset(),) * 3 and ctx._sticky_level == 0 and ctx._last_compaction_stats is None
    assert not hooks.named("context:compaction")
    (payload,) = hooks.named("context:compaction-skipped")
    assert set(payload) == SKIPPED_KEYS
    assert payload == {
        "freed_tokens": freed,
        "required_tokens": NEVER,
        "level_reached": level,
        "consecutive_skips": 1,
        "max_consecutive_skips": 3,
        "baseline_tokens": ctx._counts().total(ctx.messages),
        "budget": EFFECTIVE,
        "protected_recent": 0.3,
        "protected_tool_results": 5,
    }
    assert 0 < freed < payload["baseline_tokens"]


@pytest.mark.asyncio
async def test_refusals_after_a_boundary_roll_back_and_stay_append_only() -> None:
    ctx, hooks = await manager(session(12), compact_max_consecutive_skips=100)
    first = await ctx.get_messages_for_request(token_budget=BUDGET)
    stats, level, decisions = ctx._last_compaction_stats, ctx._sticky_level, sticky(ctx)
    assert stats is not None and decisions != (frozenset(),) * 3
    ctx.compact_clear_at_least = NEVER
    previous, seen = first, len(ctx.messages)
    quiet = 0
    for i in range(12, 40):
        await ctx.add_message(stamped(call(i)))
        await ctx.add_message(stamped(result(i, 500)))
        skips_before = ctx._clear_at_least_skips
        view = await ctx.get_messages_for_request(token_budget=BUDGET)
        assert solid(view) == solid(previous) + wire(ctx.messages[seen:]), f"request {i} is not append-only"
        assert view[-1] == first[-1], "the old notice, byte for byte"
        assert ctx._last_compaction_stats is stats and ctx._sticky_level == level and sticky(ctx) == decisions
        quiet += ctx._clear_at_least_skips == skips_before
        previous, seen = view, len(ctx.messages)
    skipped = hooks.named("context:compaction-skipped")
    assert len(hooks.named("context:compaction")) == 1
    assert [p["consecutive_skips"] for p in skipped] == list(range(1, len(skipped) + 1))
    assert skipped and quiet > 0, "both refusals and calls that decided nothing must have happened"


@pytest.mark.asyncio
async def test_calls_that_decide_nothing_never_count() -> None:
    ctx, hooks = await manager(session(12))
    await ctx.get_messages_for_request(token_budget=BUDGET)
    ctx.compact_clear_at_least = NEVER
    await ctx.get_messages_for_request(token_budget=BUDGET // 2)
    assert ctx._clear_at_least_skips == 1
    # Raw history over the threshold, sticky view under it: the compaction path runs, decides nothing.
    raw = ctx._counts().total(ctx.messages)
    sticky_only = int(raw / 0.92) + 800
    assert ctx._counts().total(ctx._apply_sticky_decisions(ctx.messages)) < 0.92 * (sticky_only - 800)
    for budget in [sticky_only] * 4 + [10**7] * 2:
        await ctx.get_messages_for_request(token_budget=budget)
    assert ctx._clear_at_least_skips == 1 and len(hooks.named("context:compaction-skipped")) == 1
    await ctx.get_messages_for_request(token_budget=BUDGET // 2)
    with pytest.raises(RuntimeError, match=r"satisfied 3 consecutive times"):
        await ctx.get_messages_for_request(token_budget=BUDGET // 2)


@pytest.mark.asyncio
async def test_an_accepted_escalation_resets_the_streak() -> None:
    ctx, hooks = await manager(session(12), compact_clear_at_least=NEVER)
    for _ in range(2):
        await ctx.get_messages_for_request(token_budget=BUDGET)
    assert ctx._clear_at_least_skips == 2
    ctx.compact_clear_at_least = 1
    await ctx.get_messages_for_request(token_budget=BUDGET)
    assert ctx._clear_at_least_skips == 0 and len(hooks.named("context:compaction")) == 1
    ctx.compact_clear_at_least = NEVER
    for _ in range(2):  # two more refusals do not reach the cap of 3
        await ctx.get_messages_for_request(token_budget=BUDGET // 2)
    assert ctx._clear_at_least_skips == 2


@pytest.mark.parametrize("reset", ["clear", "set_messages"])
@pytest.mark.asyncio
async def test_clear_and_set_messages_reset_the_streak(reset: str) -> None:
    ctx, hooks = await manager(session(12), compact_clear_at_least=NEVER)
    for _ in range(2):
        await ctx.get_messages_for_request(token_budget=BUDGET)
    assert ctx._clear_at_least_skips == 2
    if reset == "clear":
        await ctx.clear()
        for message in session(12):
            await ctx.add_message(stamped(message))
    else:
        await ctx.set_messages([stamped(m) for m in session(12)])
    assert ctx._clear_at_least_skips == 0 and ctx._clear_at_least_pending is None
    assert not ctx._clear_at_least_last_refused
    for _ in range(2):
        await ctx.get_messages_for_request(token_budget=BUDGET)
    assert len(hooks.named("context:compaction-skipped")) == 4


@pytest.mark.asyncio
async def test_first_refusal_keeps_hoisted_system_messages_in_place() -> None:
    """A hook's system message mid-history stays where the uncompacted view had it."""
    messages = session(12)
    messages.insert(5, {"role": "system", "content": "hook: lint passed", "metadata": {"source": "hook"}})
    ctx, hooks = await manager(messages, compact_clear_at_least=NEVER)
    before = await ctx.get_messages_for_request(token_budget=10**6)
    await ctx.add_message(stamped(call(50)))
    await ctx.add_message(stamped(result(50, 100)))
    view = await ctx.get_messages_for_request(token_budget=BUDGET)
    assert hooks.named("context:compaction-skipped")
    assert view == before + wire(ctx.messages[-2:])


# --- fail loud ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_cap_raises_with_the_templated_message() -> None:
    ctx, hooks = await manager(session(12), compact_clear_at_least=NEVER)
    for i in range(12, 14):
        await ctx.get_messages_for_request(token_budget=BUDGET)
        await ctx.add_message(stamped(call(i)))
        await ctx.add_message(stamped(result(i)))
    freed, level = await twin_escalation(ctx)
    stored = copy.deepcopy(ctx.messages)
    with pytest.raises(RuntimeError) as caught:
        await ctx.get_messages_for_request(token_budget=BUDGET)
    baseline = ctx._counts().total(ctx.messages)
    tools = sum(m["role"] == "tool" for m in ctx.messages)
    expected = (
        f"context-simple: compact_clear_at_least={NEVER!r} could not be satisfied 3 consecutive times "
        f"(cap: 3). The compaction ladder reached level {level} and freed only {freed:,} tokens against "
        f"a required floor of {NEVER:,}. Protected set holding the floor: protected_tool_results=5 "
        f"(of {tools} tool results in the view), protected_recent=30% of {len(ctx.messages)} messages. "
        f"Baseline view is {baseline:,} tokens against a budget of {EFFECTIVE:,}. Lower "
        "compact_clear_at_least, lower protected_recent/protected_tool_results, or raise the budget -- "
        "compacting harder will not help."
    )
    assert str(caught.value) == expected
    assert len(hooks.named("context:compaction-skipped")) == 2, "no skip event for the call that raises"
    assert not hooks.named("context:compaction") and ctx.messages == stored
    assert sticky(ctx) == (frozenset(),) * 3 and ctx._last_compaction_stats is None


@pytest.mark.asyncio
async def test_mount_config_reaches_the_predicate() -> None:
    from amplifier_core.testing import MockCoordinator

    coordinator = MockCoordinator()
    await mount(coordinator, {"compact_clear_at_least": "oops", "compact_max_consecutive_skips": 0})
    ctx = coordinator.get("context")
    assert ctx.compact_max_consecutive_skips == 1 and ctx._clear_at_least_required(10_000) == 0


# --- interplay with replay ------------------------------------------------------------------------


def replays(view: list[Message]) -> list[Message]:
    return [m for m in view if (m.get("metadata") or {}).get("source") == "context-replay"]


@pytest.mark.asyncio
async def test_a_refusal_is_not_a_boundary_for_replay() -> None:
    # The first boundary's replay is blocked (the view ends on an unanswered call), so a replay is
    # still owed when the refusal comes: it must wait for a call that is not a refusal.
    ctx, hooks = await manager([*session(12), call(99)], replay_last_user_on_compaction=True)
    blocked = await ctx.get_messages_for_request(token_budget=BUDGET)
    assert blocked[-1].get("tool_calls") and not replays(blocked) and ctx._sticky_level > 0
    await ctx.add_message(stamped(result(99, 100)))
    # A budget the sticky view just exceeds the threshold of, with room left for a replay.
    sticky_view = ctx._counts().total(ctx._apply_sticky_decisions(ctx.messages))
    budget = int(sticky_view / 0.92) + 800
    ctx.compact_clear_at_least = NEVER
    refused = await ctx.get_messages_for_request(token_budget=budget)
    assert hooks.named("context:compaction-skipped") and not replays(refused)
    ctx.compact_clear_at_least = None
    after = await ctx.get_messages_for_request(token_budget=budget)
    assert len(replays(after)) == 1 and after[-2] == replays(after)[0]


@pytest.mark.asyncio
async def test_first_ever_refusal_with_replay_on_adds_nothing() -> None:
    ctx, _ = await manager(session(12), compact_clear_at_least=NEVER, replay_last_user_on_compaction=True)
    plain, _ = await manager(session(12))
    view = await ctx.get_messages_for_request(token_budget=BUDGET)
    assert view == await plain.get_messages_for_request(token_budget=10**6)


# --- real transcripts -----------------------------------------------------------------------------


def load_real(path: Path) -> list[Message]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [{k: v for k, v in json.loads(line).items() if v is not None} for line in lines if line.strip()]


async def drive(messages: list[Message], budget: int, **config: Any) -> tuple[list[Any], Recorder]:
    """Views before every assistant message, with the events and the state after each call."""
    hooks = Recorder()
    ctx = SimpleContextManager(hooks=hooks, **config)
    trace: list[Any] = []
    for message in messages:
        if message["role"] == "assistant":
            mark = len(hooks.events)
            view = await ctx.get_messages_for_request(token_budget=budget)
            state = (sticky(ctx), ctx._sticky_level, ctx._last_compaction_stats)
            trace.append((view, hooks.events[mark:], state, len(ctx.messages), wire(ctx.messages)))
        await ctx.add_message(stamped(message))
    return trace, hooks


REFUSING = [  # (transcript, budget, floor as a fraction of the budget): refusals that later pass
    ("msa__pr816__deepseek_chat_dev_rerun__pvlib__pvlib-python-1154", 12_000, 0.5),
    ("msa__pr814__deepseek_lite_dev__pylint-dev__astroid-1268", 12_000, 0.5),
    ("msa__pr814__deepseek_bench1__django__django-14155", 12_000, 0.55),
]


@pytest.mark.parametrize(("name", "budget", "floor"), REFUSING)
@pytest.mark.parametrize("replay", [False, True])
@pytest.mark.asyncio
async def test_real_transcripts_refusals_are_append_only(name: str, budget: int, floor: float, replay: bool) -> None:
    messages = load_real(WORKLOADS / f"{name}.jsonl")
    trace, hooks = await drive(
        messages,
        budget,
        compact_clear_at_least=floor,
        compact_max_consecutive_skips=50,
        replay_last_user_on_compaction=replay,
    )
    refusals = 0
    for (prev, _, prev_state, seen, _), (view, events, state, _, stored) in zip(trace, trace[1:], strict=False):
        names = [n for n, _ in events]
        assert view_problems(view) == []
        if "context:compaction" in names:
            continue
        assert solid(view) == solid(prev) + stored[seen:], "a call that is not a boundary only appends"
        if "context:compaction-skipped" in names:
            refusals += 1
            assert state[0] == prev_state[0] and state[1] == prev_state[1] and state[2] is prev_state[2]
            assert not replays(view)
    assert refusals >= 1 and hooks.named("context:compaction"), f"{name}: the scenario must refuse and accept"


# --- defaults are byte-identical ------------------------------------------------------------------


async def digest(path: Path, **config: Any) -> str:
    messages = load_real(path)
    size = sum(len(str(m)) // 4 for m in messages)
    trace, hooks = await drive(messages, max(4000, int(size * 0.35)), **config)
    h = hashlib.sha256()
    for view, events, state, _, _ in trace:
        decisions = [sorted(s) for s in state[0]]
        h.update(json.dumps([view, events, decisions, state[1], state[2]], sort_keys=True, default=str).encode())
    return h.hexdigest()


@pytest.mark.asyncio
async def test_defaults_are_byte_identical_over_real_transcripts() -> None:
    # The 17 smaller shipped transcripts (the nine largest are left out for runtime).
    paths = [p for p in sorted(WORKLOADS.glob("*.jsonl")) if p.stat().st_size < 200_000]
    assert len(paths) >= 12
    off = {"replay_last_user_on_compaction": False, "compact_clear_at_least": None, "compact_max_consecutive_skips": 3}
    differs_replay = differs_floor = 0
    for path in paths:
        default = await digest(path)
        assert await digest(path, **off) == default, path.name
        differs_replay += await digest(path, replay_last_user_on_compaction=True) != default
        differs_floor += await digest(path, compact_clear_at_least=0.45, compact_max_consecutive_skips=50) != default
    # Negative controls: the same harness sees each feature when it is on.
    assert differs_replay >= len(paths) // 2 and differs_floor >= len(paths) // 2, (differs_replay, differs_floor)


# --- the evaluation gate script -------------------------------------------------------------------


@pytest.mark.asyncio
async def test_gate_script_counts_boundaries_and_catches_the_cap() -> None:
    from evaluation.studies.clear_at_least_gate import monotone
    from evaluation.studies.clear_at_least_gate import replay as gate_replay
    from evaluation.tokens import TokenCounter
    from evaluation.workloads import load_jsonl

    workload = load_jsonl(WORKLOADS / "msa__pr816__deepseek_chat_dev_rerun__pvlib__pvlib-python-1154.jsonl")
    counter = TokenCounter(use_tiktoken=False)
    off = await gate_replay(workload, 12_000, "estimate", None, counter, {})
    never = await gate_replay(workload, 12_000, "estimate", NEVER, counter, {})
    assert off.failed_at is None and off.skips == 0 and off.boundaries >= 3
    assert len(off.freed) == off.boundaries and all(f > 0 for f in off.freed)
    assert never.boundaries == 0 and never.skips == 2 and never.failed_at is not None
    assert "could not be satisfied 3 consecutive times" in never.error
    assert (monotone([3, 3, 2]), monotone([3, 3]), monotone([2, 3])) == ("falls", "flat", "RISES")
