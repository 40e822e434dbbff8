"""One compaction pass: the sticky decisions applied, the ladder and its last rung when the view no longer
fits, the clear-at-least verdict, the boundary's stats and ``context:compaction``.

Moved from the manager (``_compact_ephemeral``, ``_compact_pass``, ``_finalize_compaction_with_stats``,
``_judge_clear_at_least``, ``_plan_compaction``, ``_warn_over_budget``; issue 38). :class:`Compaction`
keeps only the pass's call-scoped state (the clear-at-least capture and whether the last pass was
refused); everything else comes in :class:`PassInputs`, and every decision goes to
``inputs.decisions``, the history's (decisions.py).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from . import clear_at_least as cal
from .budget import warn_over_budget
from .config import COMPACTION_STRATEGY_SUMMARY, parse_clear_at_least
from .evidence import EvidenceLedger, LedgerInputs
from .floor import (
    Goals,
    Protected,
    describe_floor,
    floor_settings,
    floor_text,
    log_yields,
    typical_result,
    yield_floor,
    yields_text,
)
from .instructions import hoist_all, split_instructions
from .ladder import LadderOps, LadderPlan, Protections, plan_compaction
from .limit import input_limit
from .stats import compaction_stats

Message = dict[str, Any]


class PassInputs(NamedTuple):
    """What a compaction pass reads (the manager builds it for each pass; nothing here reads the manager)."""

    knobs: Any  # every configuration value by its key (config_keys.Knobs)
    decisions: Any  # the history's decisions (decisions.py): read and written
    messages: list[Message]  # the stored history
    counts: Any  # the count cache (estimate.CountCache)
    ops: LadderOps  # counting and the rewrites the ladder makes (tool_results.py)
    apply_sticky: Callable[[list[Message]], list[Message]]  # the recorded decisions replayed (sticky.py)
    swap: Callable[[list[Message]], Awaitable[tuple[list[Message], bool]]]  # the pending summary's swap
    exceeds: Callable[[int, int], bool]  # the meter's escalation gate (token_meter.py): (count, budget)
    limit_goal: Callable[[], int | None]  # the largest body the provider's input limit takes (limit.py)
    budget_reading: Any  # this request's budget reading (budget.py): the input limit the last rung names
    ledger: EvidenceLedger
    ledger_inputs: LedgerInputs
    estimate: Callable[[list[Any]], int]  # the original estimator (the OVER BUDGET warning's system figure)
    emit: Callable[[str, dict[str, Any]], Awaitable[None]]
    next_seq: Callable[[], int]  # the history's next ``_seq``: instructions stored from it on stay in place
    boundary_reason: Callable[[], dict[str, Any]]  # why, when a refusal caused this boundary (refusal.py)


def settings_for(budget: int | None, inputs: PassInputs) -> tuple[Protections, Goals]:
    """The ladder's protections and the last rung's goals for this budget (floor.py)."""
    if budget is None:
        return Protections(), Goals()
    knobs = inputs.knobs
    typical = lambda: typical_result(inputs.messages, inputs.counts.count)  # noqa: E731
    return floor_settings(budget, knobs.protect_in_tokens, inputs.limit_goal(), knobs.compact_threshold, typical)


class Compaction:
    """The pass's call-scoped state: ``pending`` (the clear-at-least capture, ``_clear_at_least_pending``)
    and ``last_refused`` (``_clear_at_least_last_refused``)."""

    def __init__(self) -> None:
        self.pending: dict[str, Any] | None = None
        self.last_refused = False

    async def run(
        self, budget: int, source: list[Message], inputs: PassInputs, escalation_allowed: bool = True
    ) -> list[Message]:
        """Apply sticky decisions; escalate the ladder only when they no longer keep the view under threshold."""
        try:
            return await self._one_pass(budget, source, inputs, escalation_allowed)
        finally:
            self.pending = None  # call-scoped, also after the fail-loud RuntimeError

    def _past_limit(self, count: int, inputs: PassInputs) -> bool:
        goal = inputs.limit_goal()
        return goal is not None and count > goal

    async def _one_pass(
        self, budget: int, source: list[Message], inputs: PassInputs, escalation_allowed: bool
    ) -> list[Message]:
        self.pending = None
        self.last_refused = False
        knobs, decisions, counts = inputs.knobs, inputs.decisions, inputs.counts
        before = (counts.total(source), len(source))
        # Instructions lead the view; one stored after the last boundary stays in place (instructions.py).
        system, non_system = split_instructions(source, decisions._hoist_limit)
        swapped = False
        if knobs.compaction_strategy == COMPACTION_STRATEGY_SUMMARY and decisions._pending_summary is not None:
            non_system, swapped = await inputs.swap(non_system)
        working = inputs.ledger.with_ledger(inputs.apply_sticky(non_system), decisions)
        current = counts.total(system) + counts.total(working)
        target = int(budget * knobs.target_usage)
        # The trigger's escalation, or the provider's input limit (limit.py), which no meter mode overrides.
        escalate = (escalation_allowed and inputs.exceeds(current, budget)) or self._past_limit(current, inputs)
        if not (escalate or swapped):
            return system + working
        baseline = system + working
        system, working = hoist_all(system, working)  # a boundary: every instruction moves to the front
        system_tokens = counts.total(system)
        if not escalate:
            return await self._finalize(system, working, 0, before, budget, target, inputs)
        # A summary swap already makes this request a boundary: a further escalation costs no extra
        # rebuild, and refusing it would leave the swap's changed view without a compaction event.
        required = 0 if swapped or self._past_limit(current, inputs) else required_tokens(knobs, budget)
        if required > 0:
            # Never compacted: the previous view was the history in place (system messages not
            # hoisted), so a refusal must return that order to stay append-only.
            untouched = not (swapped or decisions.has_sticky() or decisions._last_compaction_stats)
            self.pending = {
                "required": required,
                "baseline_view": list(source) if untouched else baseline,
                "baseline_tokens": current,
                "sticky": decisions.sticky_snapshot(),
                "ledger": decisions._ledger,  # the refused plan may record a new one: roll it back too
                "ledger_segments": decisions._ledger_segments,
                "budget": budget,
            }
        plan = self.plan(working, system_tokens, target, int(budget * knobs.user_words_share), budget, inputs)
        for seq in plan.removed:
            decisions.record_removed(seq)
        decisions._truncated_seqs |= plan.truncated - plan.removed
        decisions._stubbed_seqs |= plan.stubbed - plan.removed
        decisions._clipped_seqs.update(plan.clipped)
        return await self._finalize(
            system, plan.messages, plan.level, before, budget, target, inputs, plan.yields, plan.unfit
        )

    def plan(
        self,
        working: list[Message],
        system_tokens: int,
        target: int,
        user_words: int,
        budget: int | None,
        inputs: PassInputs,
    ) -> LadderPlan:
        """The ladder; in evidence mode it leaves the ledger's share free, and the ledger fills it (evidence.py).
        The newest user messages within ``user_words`` tokens are never stubbed. With ``budget``, the
        protections (in messages or tokens) and the last rung's goals follow it (floor.py)."""
        knobs = inputs.knobs
        protections, goals = settings_for(budget, inputs)
        rung = functools.partial(yield_floor, goals=goals) if goals != Goals() else None
        ladder_args = (knobs.protected_recent, knobs.protected_tool_results, inputs.ops, user_words, protections, rung)
        ladder = lambda messages, goal: plan_compaction(messages, system_tokens, goal, *ladder_args)  # noqa: E731
        return inputs.ledger.plan(working, target, ladder, goals, inputs.decisions, inputs.ledger_inputs)

    async def _finalize(
        self,
        system: list[Message],
        working: list[Message],
        level: int,
        before: tuple[int, int],
        budget: int,
        target: int,
        inputs: PassInputs,
        yields: dict[str, int] | None = None,
        unfit: int | None = None,
    ) -> list[Message]:
        """Judge (clear-at-least), warn if over budget (or, under it, when nothing valid fits the last
        rung's goal: ``unfit``, floor.py), record the level and stats, emit the event."""
        knobs, decisions = inputs.knobs, inputs.decisions
        final = system + working
        final_tokens = inputs.counts.total(final)
        pending = self.pending
        if pending is not None:
            refused = await self._judge(pending, final_tokens, level, inputs)
            if refused is not None:
                return refused
        if final_tokens > budget:
            system_tokens = system_tokens_as_stored(system, inputs)
            self.warn_over_budget(level, final_tokens, budget, system_tokens, target, inputs, working, yields)
        forced_by = None if knobs.protect_in_tokens else input_limit(inputs.budget_reading)
        if unfit is not None and final_tokens <= budget:
            log_yields(yields or {}, final_tokens, forced_by, unfit)  # once: OVER BUDGET said it otherwise
        elif yields and unfit is None:
            log_yields(yields, final_tokens, forced_by)
        decisions._sticky_level = max(decisions._sticky_level, level)
        decisions._hoist_limit = inputs.next_seq()  # after a summary stored during the pass
        summary_mode = knobs.compaction_strategy == COMPACTION_STRATEGY_SUMMARY
        protection = (knobs.protected_recent, knobs.protected_tool_results)
        stats = compaction_stats(
            before,
            final,
            final_tokens,
            len(system),
            decisions,
            inputs.messages,
            budget,
            target,
            *protection,
            summary_mode,
        )
        stats.update(inputs.ledger.stats(working, decisions, inputs.ledger_inputs))
        stats.update(yields or {})
        stats.update(inputs.boundary_reason())  # why, when a refusal caused this boundary
        decisions._last_compaction_stats = stats
        await inputs.emit("context:compaction", dict(stats))
        return final

    async def _judge(
        self, pending: dict[str, Any], final_tokens: int, level: int, inputs: PassInputs
    ) -> list[Message] | None:
        """None when the escalation freed enough; else roll it back and return the baseline view."""
        knobs, decisions = inputs.knobs, inputs.decisions
        verdict = cal.judge(pending["baseline_tokens"], final_tokens, pending["required"])
        if verdict.accepted:
            decisions._clear_at_least_skips = 0
            return None
        self.last_refused = True
        protection = {
            "protected_recent": knobs.protected_recent,
            "protected_tool_results": knobs.protected_tool_results,
        }
        raw, cap = knobs.compact_clear_at_least, knobs.compact_max_consecutive_skips
        payload = cal.refuse(verdict, pending, level, decisions, raw, cap, protection)
        await inputs.emit("context:compaction-skipped", payload)
        return list(pending["baseline_view"])

    def warn_over_budget(
        self,
        level: int,
        final_tokens: int,
        budget: int,
        system_tokens: int,
        target: int,
        inputs: PassInputs,
        working: list[Message] | None = None,
        yields: dict[str, int] | None = None,
    ) -> None:
        """The OVER BUDGET warning; given the view's ``working`` messages, it names their largest parts."""
        knobs = inputs.knobs
        protection = (knobs.protected_recent, knobs.protected_tool_results)
        floor = ""
        if working is not None and system_tokens <= budget:
            user_words = int(budget * knobs.user_words_share)
            protected = Protected(inputs.ops, user_words, settings_for(budget, inputs)[0], *protection)
            floor = floor_text(describe_floor(working, system_tokens, protected))
        warn_over_budget(
            level, final_tokens, budget, system_tokens, target, *protection, floor, yields_text(yields or {})
        )


def required_tokens(knobs: Any, budget: int) -> int:
    """What a compaction must free (``compact_clear_at_least``; 0: no floor)."""
    return parse_clear_at_least(knobs.compact_clear_at_least, budget)


def system_tokens_as_stored(system: list[Message], inputs: PassInputs) -> int:
    """The warning's system figure as the original prints it: its estimator over the stored dicts
    (``_seq`` included); a configured counter counts as it does everywhere else."""
    if inputs.knobs.token_counter == "estimate":
        return inputs.estimate(system)
    return inputs.counts.total(system)
