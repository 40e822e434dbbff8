"""The real-usage token meter, driven through a real amplifier-core hook registry.

``llm:response`` payloads are shaped like the real Anthropic and OpenAI providers' (with and
without cache fields, error events, legacy keys, JSON strings); every mode is exercised for the
stats and the ``context:token_meter`` event, the conservatism guard, provenance refusals and the
override, one-call lag, cache aggregates, invalidation by ``clear()``/``set_messages()``, and the
sticky decisions a measured count keeps applying. Estimate mode is proven byte-identical with and
without usage events over every shipped transcript.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from amplifier_core.testing import MockCoordinator

import amplifier_module_context_simple
from amplifier_module_context_simple import SimpleContextManager, mount
from amplifier_module_context_simple.estimate import estimate_tokens, wire_form
from amplifier_module_context_simple.token_meter import parse_usage
from tests.conftest import (
    FIXED_TIMESTAMP,
    WORKLOADS,
    WORKLOADS_DIR,
    EventLog,
    assert_extends,
    asst,
    asst_calls,
    canonical_json,
    estimated_size,
    load_transcript,
    non_ephemeral,
    replay,
    result,
    stamped,
    user,
)
from tests.regen_golden import golden_key, load_golden

Message = dict[str, Any]
MODES = ("estimate", "actual", "hybrid")
STATS_KEYS = set(  # the spec's keys (upstream-behaviour section 7); more may follow
    "mode source kind used_tokens estimated_tokens measured_tokens hybrid_tokens hybrid_kind anchor_tokens "
    "anchor_estimate anchor_rejected tail_estimated_tokens tail_messages cache_aggregates provenance_refusals "
    "provenance_overrides budget ratio".split()
)
BUDGET = 6000  # token_budget: the effective budget is 5200 (800 notice reserve), the trigger 0.92 of it
EFFECTIVE = BUDGET - 800
THRESHOLD = 0.92 * EFFECTIVE
LARGE = 100_000
GOLDEN_FRACTION = 0.30  # one of tests/regen_golden.py's GOLDEN_FRACTIONS

# Shapes of real emitters (amplifier-core-contract section 2.2).
ANTHROPIC = {  # gross input (fresh + cache read), cache writes billed on top, cost stringified
    "provider": "anthropic",
    "model": "claude-sonnet-4-5",
    "status": "ok",
    "duration_ms": 812,
    "usage": {
        "input_tokens": 12_000,
        "output_tokens": 350,
        "cache_read_tokens": 10_000,
        "cache_write_tokens": 1_500,
        "cost_usd": "0.0123",
    },
}
ANTHROPIC_FIRST_WRITE = {  # a first cache write: almost all of the prompt is billed as cache_write_tokens
    **ANTHROPIC,
    "usage": {"input_tokens": 12, "output_tokens": 40, "cache_read_tokens": 0, "cache_write_tokens": 20_000},
}
OPENAI = {  # cache reads reported, no cache_write_tokens; cost may be None; envelope extras
    "provider": "openai",
    "model": "gpt-5",
    "status": "ok",
    "duration_ms": 640,
    "usage": {"input_tokens": 9_000, "output_tokens": 120, "cache_read_tokens": 8_192, "cost_usd": None},
    "continuation_count": None,
}
OPENAI_NO_CACHE = {**OPENAI, "usage": {"input_tokens": 9_000, "output_tokens": 120, "cost_usd": None}}
LEGACY = {  # older anthropic builds / litellm: the forbidden short keys
    "provider": "litellm",
    "model": "x",
    "usage": {"input": 7_000, "output": 20, "cache_read": 100, "cache_write": 50},
}
ERROR = {"provider": "anthropic", "model": "claude-sonnet-4-5", "status": "error", "duration_ms": 30, "error": "529"}


def with_usage(usage: Any) -> dict[str, Any]:
    return {"provider": "anthropic", "model": "m", "status": "ok", "duration_ms": 1, "usage": usage}


RECORDED = [  # (payload, prompt tokens recorded)
    pytest.param(ANTHROPIC, 13_500, id="anthropic-cache"),
    pytest.param(ANTHROPIC_FIRST_WRITE, 20_012, id="anthropic-first-write"),
    pytest.param(OPENAI, 9_000, id="openai-cache-read-only"),
    pytest.param(OPENAI_NO_CACHE, 9_000, id="openai-no-cache"),
    pytest.param(LEGACY, 7_050, id="legacy-keys"),
    pytest.param(json.dumps(ANTHROPIC), 13_500, id="payload-json-string"),
    pytest.param(with_usage(json.dumps(ANTHROPIC["usage"])), 13_500, id="usage-json-string"),
    pytest.param(with_usage({"input_tokens": 8_000.0, "cache_write_tokens": "n/a"}), 8_000, id="float-bad-write"),
]
IGNORED = [
    pytest.param(ERROR, id="status-error-no-usage"),
    pytest.param({**ANTHROPIC, "status": "error"}, id="status-error-with-usage"),
    pytest.param({"provider": "anthropic", "status": "ok"}, id="no-usage"),
    pytest.param(None, id="none"),
    pytest.param(with_usage({"input_tokens": None, "output_tokens": 5}), id="input-none"),
    pytest.param(with_usage({"input_tokens": "12000"}), id="input-string"),
    pytest.param(with_usage({"input_tokens": True}), id="input-bool"),
    pytest.param(with_usage({"input_tokens": -5}), id="input-negative"),
    pytest.param(with_usage({"input_tokens": 0, "output_tokens": 5}), id="input-zero"),
    pytest.param(with_usage({"input_tokens": 0, "cache_write_tokens": 0}), id="input-zero-write-zero"),
    pytest.param(with_usage("input_tokens=10 output_tokens=2"), id="usage-pydantic-repr"),
    pytest.param(with_usage([1, 2]), id="usage-list"),
    pytest.param("not json", id="payload-garbage-string"),
]


@dataclass
class Session:
    """A module mounted on a MockCoordinator, with a recorder of its events."""

    ctx: SimpleContextManager
    hooks: Any
    log: EventLog

    async def request(self, budget: int = BUDGET) -> list[dict[str, Any]]:
        return await self.ctx.get_messages_for_request(token_budget=budget)

    async def respond(self, payload: Any) -> Any:
        return await self.hooks.emit("llm:response", payload)

    async def respond_tokens(self, tokens: int) -> Any:
        return await self.respond(with_usage({"input_tokens": tokens, "output_tokens": 10}))

    async def add(self, *messages: dict[str, Any]) -> None:
        for message in messages:
            await self.ctx.add_message(stamped(message))

    @property
    def stats(self) -> dict[str, Any]:
        return self.ctx._last_token_meter_stats

    def compactions(self) -> int:
        return len(self.log.of("context:compaction"))


async def mounted(mode: str | None = "estimate", **config: Any) -> Session:
    coordinator = MockCoordinator()
    if mode is not None:
        config["token_meter"] = mode
    await mount(coordinator, config)
    hooks = coordinator.hooks
    return Session(coordinator.get("context"), hooks, EventLog(hooks, ("context:token_meter", "context:compaction")))


def rounds(count: int, chars: int = 1200, start: int = 0) -> list[dict[str, Any]]:
    """Tool rounds: an assistant call and its (large) result."""
    out: list[dict[str, Any]] = []
    for i in range(start, start + count):
        out += [asst_calls(f"c{i}"), result(f"c{i}", f"line {i}\n" + "r" * chars)]
    return out


async def grow_to(session: Session, fraction: float) -> None:
    """Add tool rounds until the history's estimate reaches ``fraction`` of the effective budget."""
    if not session.ctx.messages:
        await session.add(user("Please investigate the failing build."))
    i = len(session.ctx.messages)
    while estimate_tokens(wire_form(m) for m in session.ctx.messages) < fraction * EFFECTIVE:
        await session.add(*rounds(1, chars=300, start=i))
        i += 1


# ----- the listener ------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("payload", "expected"), RECORDED)
async def test_usage_is_input_plus_cache_write_in_every_mode(mode, payload, expected):
    s = await mounted(mode)
    await s.add(user("hello"))
    await s.request()
    outcome = await s.respond(payload)
    assert outcome.action == "continue"
    assert s.ctx._last_measured_prompt_tokens == expected
    await s.request()
    assert s.stats["measured_tokens"] == s.stats["anchor_tokens"] == expected
    assert s.ctx.fault_stats.get("usage_events_ignored", 0) == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("payload", IGNORED)
async def test_payloads_without_trustworthy_usage_are_counted_and_change_nothing(mode, payload):
    s = await mounted(mode)
    await s.add(user("hello"))
    await s.request()
    await s.respond(ANTHROPIC)
    anchor = (s.ctx._last_measured_prompt_tokens, s.ctx._anchor_seq, s.ctx._anchor_estimate, s.ctx._usage_events)
    await s.add(asst("hi"))
    outcome = await s.respond(payload)
    assert outcome.action == "continue"
    after = (s.ctx._last_measured_prompt_tokens, s.ctx._anchor_seq, s.ctx._anchor_estimate, s.ctx._usage_events)
    assert after == anchor
    assert s.ctx.fault_stats["usage_events_ignored"] == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("value", [float("nan"), float("inf"), object()])
async def test_non_json_values_handed_directly_to_the_handler_are_ignored(value):
    ctx = SimpleContextManager()
    outcome = await ctx._on_llm_response("llm:response", with_usage({"input_tokens": value}))
    assert outcome.action == "continue"
    assert ctx._last_measured_prompt_tokens is None
    assert parse_usage({"usage": {"input_tokens": 10, "cache_write_tokens": value}}).prompt_tokens == 10


# ----- stats and the event, every mode ------------------------------------------------------------


EXPECTED_AFTER_ANCHOR = {  # mode -> (source, kind) once a usage event has arrived
    "estimate": ("estimate", "estimated"),
    "actual": ("measured", "usage"),
    "hybrid": ("hybrid", "usage"),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_stats_are_rebuilt_and_emitted_on_every_request(mode):
    s = await mounted(mode)
    snapshots = []  # a large budget: no compaction, so the view is the history
    await s.request(LARGE)  # empty history
    snapshots.append(copy.deepcopy(s.stats))
    assert (s.stats["kind"], s.stats["hybrid_kind"], s.stats["used_tokens"]) == ("none", "none", 0)

    await s.add(user("Fix the bug in parser.py"), asst_calls("a"), result("a", "x" * 900))
    view = await s.request(LARGE)
    snapshots.append(copy.deepcopy(s.stats))
    assert STATS_KEYS <= set(s.stats)
    assert s.stats["estimated_tokens"] == estimate_tokens(view)
    assert s.stats["kind"] == s.stats["hybrid_kind"] == "estimated"
    assert s.stats["measured_tokens"] is s.stats["anchor_tokens"] is None
    assert s.stats["tail_messages"] is None and s.stats["anchor_rejected"] is False
    assert s.stats["source"] == ("hybrid" if mode == "hybrid" else "estimate")

    await s.respond(ANTHROPIC)  # 13,500: far above the view's estimate, so the guard accepts it
    new = [asst("Reading it now."), user("Also check lexer.py please")]
    await s.add(*new)
    view = await s.request(LARGE)
    snapshots.append(copy.deepcopy(s.stats))
    tail = estimate_tokens(view[-2:])
    source, kind = EXPECTED_AFTER_ANCHOR[mode]
    assert (s.stats["source"], s.stats["kind"], s.stats["mode"]) == (source, kind, mode)
    assert s.stats["hybrid_kind"] == "usage" and s.stats["anchor_rejected"] is False
    assert s.stats["hybrid_tokens"] == 13_500 + tail
    assert (s.stats["tail_estimated_tokens"], s.stats["tail_messages"]) == (tail, 2)
    assert s.stats["estimated_tokens"] == estimate_tokens(view)
    used = {"estimate": s.stats["estimated_tokens"], "actual": 13_500, "hybrid": 13_500 + tail}[mode]
    assert s.stats["used_tokens"] == used
    assert (s.stats["budget"], s.stats["ratio"]) == (LARGE - 800, used / (LARGE - 800))

    events = s.log.of("context:token_meter")
    assert len(events) == 3
    for event, snapshot in zip(events, snapshots, strict=True):
        # The registry JSON round-trips payloads (its float parsing may drop the last bit) and adds its own fields.
        assert {k: event[k] for k in snapshot if k != "ratio"} == {k: v for k, v in snapshot.items() if k != "ratio"}
        assert event["ratio"] == pytest.approx(snapshot["ratio"], rel=1e-12, abs=0)


@pytest.mark.asyncio
async def test_one_call_lag_actual_misses_what_hybrid_adds():
    """The reading describes the answered request; what was appended since is only in hybrid's tail."""
    sessions = {mode: await mounted(mode) for mode in ("actual", "hybrid")}
    for s in sessions.values():
        await s.add(user("Run the test suite"))
        await s.request()
        await s.respond_tokens(3_000)
        await s.add(asst_calls("t1"), result("t1", "FAILED " * 400))  # the answer and this turn's tool output
        await s.request()
    actual, hybrid = sessions["actual"].stats, sessions["hybrid"].stats
    assert actual["used_tokens"] == 3_000
    assert hybrid["used_tokens"] == 3_000 + hybrid["tail_estimated_tokens"]
    assert hybrid["tail_messages"] == 2 and hybrid["tail_estimated_tokens"] > 700
    s = sessions["hybrid"]
    await s.respond_tokens(4_000)  # the next answer moves the anchor: the tail starts after it
    await s.add(asst("The failure is in test_parse."))
    await s.request()
    assert (s.stats["hybrid_tokens"], s.stats["tail_messages"]) == (4_000 + s.stats["tail_estimated_tokens"], 1)


# ----- the conservatism guard ---------------------------------------------------------------------


@pytest.mark.asyncio
async def test_guard_compares_the_anchor_with_the_view_sent_not_the_history():
    s = await mounted("hybrid")
    await s.add(user("Investigate the flaky test."), *rounds(10))
    await s.request()
    assert s.compactions() == 0
    await s.respond_tokens(int(EFFECTIVE * 0.95))  # over the trigger, above the sent estimate: accepted
    await s.add(user("Keep going."))
    await s.request()
    assert s.stats["kind"] == "usage" and s.compactions() == 1
    sent = s.ctx._last_sent_estimate
    full = estimate_tokens(await s.ctx.get_messages())
    assert sent < full - 500  # compaction is active: the view sent is much smaller than the history
    await s.respond_tokens((sent + full) // 2)  # below the history's estimate, above the sent view's
    await s.request()
    assert s.stats["anchor_estimate"] == sent
    assert s.stats["anchor_rejected"] is False and s.stats["kind"] == "usage"
    assert s.stats["anchor_tokens"] < s.stats["estimated_tokens"]

    sent = s.ctx._last_sent_estimate
    await s.respond_tokens(sent - 1)  # below what the heuristic priced for the very view it billed
    await s.request()
    assert s.stats["anchor_estimate"] == sent
    assert s.stats["anchor_rejected"] is True and s.stats["kind"] == "estimated"
    assert s.stats["hybrid_tokens"] == s.stats["used_tokens"] == s.stats["estimated_tokens"]
    assert s.stats["tail_messages"] == 0


@pytest.mark.asyncio
async def test_a_zero_reading_is_no_anchor():
    s = await mounted("hybrid")
    await s.add(user("hello"))
    await s.request()
    await s.respond_tokens(0)
    await s.request()
    assert s.stats["kind"] == "estimated" and s.stats["anchor_tokens"] is None  # as before any reading
    assert s.ctx._anchor_seq is None and s.ctx.fault_stats["usage_events_ignored"] == 1


# ----- G-METER-PROVENANCE -------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_hybrid_refuses_to_compact_on_an_estimate_where_other_modes_fire():
    fired = {}
    for mode in MODES:
        s = await mounted(mode)
        await grow_to(s, 0.95)
        view = await s.request()
        fired[mode] = s.compactions()
        if mode == "hybrid":
            assert len(view) == len(s.ctx.messages)  # the whole history, uncompacted
            assert (s.ctx._provenance_refusals, s.ctx._provenance_overrides) == (1, 0)
            await s.request()  # the stats are built before the trigger runs: they show the earlier refusals
            assert (s.stats["provenance_refusals"], s.ctx._provenance_refusals) == (1, 2)
            assert s.log.of("context:token_meter")[-1]["provenance_refusals"] == 1
    assert fired == {"estimate": 1, "actual": 1, "hybrid": 0}  # actual falls back to the estimator before usage


@pytest.mark.asyncio
async def test_override_fires_once_at_full_budget_when_no_anchor_ever_arrived(caplog):
    s = await mounted("hybrid")
    await grow_to(s, 1.02)
    with caplog.at_level(logging.WARNING, logger="amplifier_module_context_simple"):
        await s.request()
    assert s.compactions() == 1
    assert (s.ctx._provenance_overrides, s.ctx._provenance_refusals) == (1, 0)
    assert any("no usage yet" in r.getMessage() for r in caplog.records)
    await s.respond_tokens(s.ctx._last_sent_estimate + 1_500)  # the compacted view, billed
    await s.add(asst("Done."), user("Thanks, next step?"))
    await s.request()
    assert s.stats["kind"] == "usage" and s.stats["provenance_overrides"] == 1
    assert s.ctx._provenance_overrides == 1 and s.compactions() == 1


@pytest.mark.asyncio
async def test_override_cannot_mask_a_rejected_anchor():
    s = await mounted("hybrid")
    await grow_to(s, 0.95)
    await s.request()  # refused: no anchor yet, under 100%
    await s.respond_tokens(100)  # rejected by the guard: a measurement exists, but no trusted one
    await grow_to(s, 1.05)
    view = await s.request()
    assert s.stats["anchor_rejected"] is True and s.stats["used_tokens"] >= EFFECTIVE
    assert s.compactions() == 0 and len(view) == len(s.ctx.messages)
    assert (s.ctx._provenance_refusals, s.ctx._provenance_overrides) == (2, 0)


# ----- actual mode ---------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_actual_mode_trigger_and_gate_use_the_measurement_sizing_the_estimator():
    s = await mounted("actual")
    await s.add(user("Investigate the flaky test."), *rounds(8))
    await s.request()
    assert s.compactions() == 0 and s.stats["estimated_tokens"] < THRESHOLD
    await s.respond_tokens(EFFECTIVE)  # the provider says the window is full; the estimate disagrees
    await s.add(user("Continue."))
    await s.request()
    assert s.stats["kind"] == "usage" and s.stats["estimated_tokens"] < THRESHOLD
    assert s.compactions() == 1  # the gate escalated on the measurement, not the estimate
    assert s.ctx._last_compaction_stats["after_tokens"] <= s.ctx._last_compaction_stats["target_tokens"]


# ----- sticky decisions under a measured count (deliberate deviation) -----------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ("actual", "hybrid"))
async def test_sticky_decisions_hold_when_the_measured_count_drops_under_the_threshold(mode):
    """The original returned the raw history here (the measurement describes the compacted view) and oscillated."""
    s = await mounted(mode)
    await s.add(user("Investigate the flaky test."), *rounds(10))
    await s.request()
    await s.respond_tokens(EFFECTIVE)
    await s.add(user("Keep going."))
    compacted = await s.request()
    assert s.compactions() == 1
    previous = non_ephemeral(compacted)
    for turn in range(3):
        await s.respond_tokens(s.ctx._last_sent_estimate + 200)  # the compacted view, well under the trigger
        await s.add(asst(f"step {turn}"), user(f"next {turn}"))
        view = await s.request()
        assert s.stats["kind"] == "usage" and s.stats["used_tokens"] < THRESHOLD
        assert s.compactions() == 1
        assert len(view) < len(s.ctx.messages)  # not the raw history
        assert_extends(previous, non_ephemeral(view))
        previous = non_ephemeral(view)


# ----- cache aggregates ---------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_cache_aggregates_become_undefined_once_an_event_lacks_the_fields(mode):
    s = await mounted(mode)
    await s.add(user("hi"))
    await s.request()
    assert s.stats["cache_aggregates"] is None  # no events: nothing to aggregate
    await s.respond(ANTHROPIC)
    await s.respond(ERROR)  # ignored, not an event without fields
    await s.respond(ANTHROPIC_FIRST_WRITE)
    await s.request()
    assert s.stats["cache_aggregates"] == {"events": 2, "cache_read_tokens": 10_000, "cache_write_tokens": 21_500}
    await s.respond(OPENAI)  # no cache_write_tokens
    await s.request()
    assert s.stats["cache_aggregates"] is None
    await s.respond(ANTHROPIC)
    await s.request()
    assert s.stats["cache_aggregates"] is None  # refuse to guess: a partial sum would under-report
    await s.ctx.clear()
    await s.respond(ANTHROPIC)
    await s.add(user("again"))
    await s.request()
    assert s.stats["cache_aggregates"] == {"events": 1, "cache_read_tokens": 10_000, "cache_write_tokens": 1_500}


# ----- invalidation and configuration ------------------------------------------------------------


@pytest.mark.asyncio
async def test_set_messages_invalidates_the_hybrid_anchor():
    s = await mounted("hybrid")
    await s.add(user("hello"), asst("hi"))
    await s.request()
    await s.respond_tokens(3_000)
    await s.request()
    assert s.stats["kind"] == "usage"
    history = [stamped(m) for m in [user("resumed"), *rounds(4)]]
    await s.ctx.set_messages(history)
    await s.request()
    assert s.stats["kind"] == s.stats["hybrid_kind"] == "estimated"
    assert s.stats["tail_messages"] is None and s.stats["anchor_estimate"] is None
    assert s.stats["hybrid_tokens"] == s.stats["estimated_tokens"]
    assert s.stats["measured_tokens"] == 3_000  # the reading survives (upstream); it anchors nothing
    await grow_to(s, 1.02)
    await s.request()  # no anchor for this history: the recorded escape is available again
    assert (s.ctx._provenance_overrides, s.compactions()) == (1, 1)


@pytest.mark.asyncio
async def test_set_messages_invalidates_the_actual_reading_too():
    # Issue 12 item 10: the old history's 9,900 tokens compacted a new, much smaller history.
    s = await mounted("actual")
    await s.add(user("hello"), asst("hi"))
    await s.request()
    await s.respond_tokens(int(0.99 * EFFECTIVE))
    await s.request()
    assert s.stats["source"] == "measured" and s.compactions() == 1
    await s.ctx.set_messages([stamped(m) for m in [user("resumed"), asst("short")]])
    view = await s.request()
    assert s.stats["source"] == "estimate" and s.stats["kind"] == "estimated"
    assert s.stats["measured_tokens"] == int(0.99 * EFFECTIVE)  # still reported, as upstream; drives nothing
    assert s.compactions() == 1 and [m["content"] for m in view] == ["resumed", "short"]
    await s.respond_tokens(int(0.99 * EFFECTIVE))  # a reading of this history counts again
    await s.request()
    assert s.stats["source"] == "measured" and s.compactions() == 2


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_a_larger_budget_keeps_the_compacted_view_in_every_mode(mode):
    # Issue 12 item 9: in estimate mode a budget change sent the full history again (a non-append
    # change with no context:compaction event) and later brought the recorded decisions back silently.
    s = await mounted(mode)
    await grow_to(s, 1.05)
    first = await s.request()
    assert s.compactions() == 1
    for budget in (LARGE, BUDGET, LARGE):
        await s.add(user("next"), asst("ok"))
        view = await s.request(budget)
        assert_extends(non_ephemeral(first), view)  # no un-compaction without a boundary
        first = view
    assert s.compactions() == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_clear_forgets_the_measurement(mode):
    s = await mounted(mode)
    await s.add(user("hello"))
    await s.request()
    await s.respond(ANTHROPIC)
    await s.ctx.clear()
    assert s.ctx._last_token_meter_stats is None
    await s.add(user("fresh start"))
    await s.request()
    assert s.stats["measured_tokens"] is None and s.stats["anchor_tokens"] is None
    assert s.stats["kind"] == "estimated" and s.stats["source"] == ("hybrid" if mode == "hybrid" else "estimate")
    assert s.stats["cache_aggregates"] is None


@pytest.mark.asyncio
async def test_unknown_mode_warns_and_falls_back_to_estimate(caplog):
    with caplog.at_level(logging.WARNING, logger="amplifier_module_context_simple"):
        s = await mounted("exact")
        direct = SimpleContextManager(token_meter="bogus")
    assert sum("unknown token_meter" in r.getMessage() for r in caplog.records) == 2
    assert s.ctx.token_meter == direct.token_meter == "estimate"
    await grow_to(s, 0.95)
    await s.request()
    await s.respond_tokens(10)  # a usage far below the estimate changes nothing in estimate mode
    await s.request()
    assert s.stats["mode"] == "estimate" and s.stats["source"] == "estimate"
    assert s.compactions() == 1  # compacted on the estimate, in spite of the low usage reading


@pytest.mark.asyncio
async def test_mount_registers_the_listener_and_cleanup_removes_it():
    coordinator = MockCoordinator()
    cleanup = await mount(coordinator, {"token_meter": "hybrid"})
    names = json.dumps(coordinator.hooks.list_handlers("llm:response"), default=str)
    assert "context-simple-meter" in names
    await cleanup()
    assert "context-simple-meter" not in json.dumps(coordinator.hooks.list_handlers("llm:response"), default=str)


# ----- byte identity of estimate mode over every shipped transcript ------------------------------


def fake_usage(view: list[dict[str, Any]]) -> dict[str, Any]:
    """A usage payload that disagrees with the estimator (about 20% lower), as real ones do."""
    tokens = len(canonical_json(view)) // 5
    return with_usage({"input_tokens": tokens, "output_tokens": 10, "cache_read_tokens": 0, "cache_write_tokens": 0})


async def digest(path: Any, config: dict[str, Any], events: bool) -> tuple[str, int, int]:
    """(hash of every view's canonical JSON, requests, compaction boundaries) of one replay.

    Same hash and budget as the golden hashes of the default views (tests/regen_golden.py).
    """
    messages = load_transcript(path)
    budget = int(estimated_size(messages) * GOLDEN_FRACTION)
    coordinator = MockCoordinator()
    await mount(coordinator, config)
    ctx = coordinator.get("context")
    hasher = hashlib.sha256()

    async def on_request(request: Any, ctx: Any) -> None:
        hasher.update(canonical_json(request.view).encode("utf-8") + b"\n")
        if events:
            await coordinator.hooks.emit("llm:response", fake_usage(request.view))

    requests = await replay(ctx, messages, budget, on_request=on_request)
    return hasher.hexdigest(), len(requests), sum(r.boundary for r in requests)


@pytest.mark.slow  # long replay: `uv run pytest -m slow` (CI runs it)
@pytest.mark.parametrize("path", WORKLOADS, ids=lambda p: p.stem)
def test_estimate_mode_views_are_byte_identical_with_and_without_usage_events(path):
    default = asyncio.run(digest(path, {}, events=False))
    assert default[2] > 0, "the budget forced no compaction: the check would be vacuous"
    assert asyncio.run(digest(path, {"token_meter": "estimate"}, events=True)) == default
    assert default[0] == load_golden()[golden_key(path, GOLDEN_FRACTION)]  # and the golden default views


def test_the_identity_check_sees_a_difference_when_one_exists():
    """Negative control: "actual" mode with the same events flowing changes the views."""
    small = [path for path in WORKLOADS if len(load_transcript(path)) <= 100]  # the cheap half
    differing = [
        path.stem
        for path in small
        if asyncio.run(digest(path, {"token_meter": "actual"}, events=True))[0]
        != asyncio.run(digest(path, {}, events=False))[0]
    ]
    assert len(small) >= 10 and len(differing) >= len(small) - 2, differing


# ----- a realistic multi-turn replay in hybrid mode -----------------------------------------------


@pytest.mark.parametrize(
    "stem",
    ["taubench__airline__task002__trial1", "msa__pr814__deepseek_bench1__django__django-13401"],
)
def test_hybrid_compacts_only_on_provider_anchored_counts(stem):
    """Every compaction in hybrid mode is taken on a 'usage' count, except recorded escapes.

    Recorded escapes: the override (no anchor ever, at 100%) and the anchor-floor fire (a rejected
    anchor whose provider total plus tail crosses the threshold), each counted in the stats.
    """
    from evaluation.studies.meter_report import MODES as REPORT_MODES
    from evaluation.studies.meter_report import load, replay_meter, true_counter, window_for

    count = true_counter()
    messages = load(stem)
    window = window_for(messages, count)
    runs = {mode: asyncio.run(replay_meter(messages, mode, window, count)) for mode in REPORT_MODES}
    hybrid = runs["hybrid"]
    assert any(step.boundary for step in hybrid) or any(step.refusal for step in hybrid)
    for index, step in enumerate(hybrid):
        if step.boundary:
            assert step.kind == "usage" or step.override or step.floor, (index, step)
        if step.override:
            assert not any(earlier.hybrid_kind == "usage" for earlier in hybrid[:index])
    over = {mode: sum(step.over_window for step in steps) for mode, steps in runs.items()}
    boundaries = {mode: sum(step.boundary for step in steps) for mode, steps in runs.items()}
    print(f"\n{stem}: window {window}; requests over it {over}; compaction boundaries {boundaries}")


@pytest.mark.asyncio
async def test_hybrid_tail_counts_the_synthetic_results_repair_inserts():
    """A crash-broken history: 40 unanswered calls after the billed request. Their stand-in results
    are sent, so the hybrid count must carry them (they have no _seq)."""
    ctx = SimpleContextManager(token_meter="hybrid")
    await ctx.add_message(user("start"))
    await ctx.get_messages_for_request(token_budget=100_000)
    await ctx._on_llm_response("llm:response", {"usage": {"input_tokens": 1_000}})
    await ctx.add_message(asst_calls(*[f"c{i}" for i in range(40)]))
    await ctx.add_message(user("are you there?"))
    view = await ctx.get_messages_for_request(token_budget=100_000)
    stats = ctx._last_token_meter_stats
    assert sum(m["role"] == "tool" for m in view) == 40
    assert stats["tail_messages"] == len(view) - 1 == 42
    assert stats["tail_estimated_tokens"] == estimate_tokens(view[1:])
    assert stats["hybrid_tokens"] == 1_000 + estimate_tokens(view[1:]) and stats["hybrid_kind"] == "usage"


# ----- the request path follows what was appended, usage events included (issue 30, point 12) ------


PACKAGE_DIR = str(Path(amplifier_module_context_simple.__file__).parent)


async def _lines_run(awaitable: Any) -> int:
    """Lines of the package's code executed while ``awaitable`` runs (a measure of work, not time)."""
    executed = 0

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal executed
        executed += event == "line"
        return local

    def global_trace(frame: Any, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(PACKAGE_DIR) else None

    sys.settrace(global_trace)
    try:
        await awaitable
    finally:
        sys.settrace(None)
    return executed


async def _steady_request_lines(mode: str, size: int, budget: int) -> int:
    """A session of ``size`` real messages with the provider's usage after every request (as every
    mounted session receives it): the lines one steady request runs, a message after the last."""
    from evaluation.benchmarks.bench_scale import build_session

    messages = build_session(size + 4)
    ctx = SimpleContextManager(token_meter=mode)
    for message in messages[:size]:
        await ctx.add_message(message)

    async def request() -> None:
        await ctx.get_messages_for_request(token_budget=budget)
        await ctx._on_llm_response("llm:response", {"usage": {"input_tokens": ctx._last_sent_estimate}})

    await request()
    for message in messages[size : size + 3]:  # the boundary's aftermath: one more rebuild, then extends
        await ctx.add_message(message)
        await request()
    stats = ctx._last_compaction_stats
    await ctx.add_message(messages[size + 3])
    lines = await _lines_run(request())
    assert ctx._last_compaction_stats is stats, "the timed request must not be a compaction boundary"
    return lines


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("budget", [10**9, 150_000], ids=["fits", "compacting"])
async def test_request_with_usage_events_reads_what_was_appended(mode, budget):
    """With usage events flowing, the hybrid tail (computed in every mode, for the stats) was found by
    reading the whole working list on every request: 13x the time at 20k messages as at 1k. The work
    of one steady request is now the same at 2,000 messages as at 500 (bench_scale: usage+ arms)."""
    small = await _steady_request_lines(mode, 500, budget)
    large = await _steady_request_lines(mode, 2_000, budget)
    assert large <= small * 1.2 + 200, (small, large)


def _reference_tail(working: list[Message], anchor_seq: int) -> list[Message]:
    """The tail as defined: each message stored at or after the anchor, and each unstamped one (a
    stand-in result from repair) following one of those; read from the start."""
    tail, after = [], False
    for message in working:
        seq = (message.get("metadata") or {}).get("_seq")
        if seq is not None:
            after = seq >= anchor_seq
        if after:
            tail.append(message)
    return tail


LATE = "still there?"


def _late_results(messages: list[Message], every: int = 3) -> list[Message]:
    """Every ``every``-th single-result tool group with a user message between the call and its
    result (a late result: view repair sends a stand-in first, then moves the real result back to its
    call, rewriting earlier positions of the working list)."""
    out, groups = [], 0
    for index, message in enumerate(messages):
        late = message.get("role") == "tool" and messages[index - 1].get("tool_calls")
        if late and (groups := groups + 1) % every == 0:
            out.append({"role": "user", "content": LATE, "metadata": {"timestamp": FIXED_TIMESTAMP}})
        out.append(message)
    return out


@pytest.mark.asyncio
@pytest.mark.parametrize("variant", ["shaped", "late_results"])
async def test_incremental_hybrid_tail_equals_the_full_scan(monkeypatch, variant):
    """Read incrementally, the tail is the one a full scan of the same working list finds, on every
    request of a replay with usage events, hook injections moved by repair, late results, a resume."""
    from amplifier_module_context_simple.token_meter import TailScan  # new with the incremental read
    from evaluation.shaped import shape

    checked = []
    incremental = TailScan.tail

    def compared(self: Any, working: list[Message], anchor_seq: int, appended_only: bool) -> list[Message]:
        tail = incremental(self, working, anchor_seq, appended_only)
        full = _reference_tail(working, anchor_seq)
        assert len(tail) == len(full) and all(a is b for a, b in zip(tail, full, strict=True)), len(checked)
        checked.append(appended_only)
        return tail

    monkeypatch.setattr(TailScan, "tail", compared)
    messages = load_transcript(WORKLOADS_DIR / "msa__pr814__deepseek_bench1__django__django-13401.jsonl")
    messages = shape(messages, seed=3) if variant == "shaped" else _late_results(messages)
    ctx = SimpleContextManager(token_meter="hybrid")

    async def usage(request: Any, ctx: SimpleContextManager) -> None:
        await ctx._on_llm_response("llm:response", {"usage": {"input_tokens": ctx._last_sent_estimate}})

    budget = estimated_size(messages) // 3
    for index, message in enumerate(messages):
        if index == len(messages) // 2:
            await ctx.set_messages(copy.deepcopy(ctx.messages))  # a resume: the scan starts over
        if message.get("role") == "assistant" or messages[index - 1].get("content") == LATE:
            await ctx.get_messages_for_request(token_budget=budget)
            await ctx._on_llm_response("llm:response", {"usage": {"input_tokens": ctx._last_sent_estimate}})
        await ctx.add_message(message)
    assert len(checked) > 20 and sum(checked) > len(checked) // 2, (len(checked), sum(checked))


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ("actual", "hybrid"))
async def test_a_reading_of_zero_never_turns_compaction_off(mode):
    """A provider that reports ``input_tokens: 0`` after every call (a placeholder, an aborted call) says
    nothing about the prompt: the meter keeps compacting on its estimate, and every view fits the budget."""
    s = await mounted(mode)
    await s.add(user("Please investigate the failing build."))
    views = []
    for i in range(60):
        await s.add(*rounds(1, chars=1_200, start=i))
        views.append(await s.request())
        await s.respond_tokens(0)
    assert s.compactions() > 0
    assert max(estimate_tokens(wire_form(m) for m in view) for view in views[-20:]) <= BUDGET
    assert s.ctx._last_measured_prompt_tokens is None
    assert s.ctx.fault_stats["usage_events_ignored"] == len(views)
