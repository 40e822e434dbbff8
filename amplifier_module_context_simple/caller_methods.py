"""Thin methods under the private names callers of the original use (upstream-behaviour.md section 15, and
this module's tests): each calls one component with explicit inputs built by the manager's wiring
(manager_wiring.py). Installed on the manager by caller_names.install_caller_names; no state, no policy.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .budget import fallback_budget
from .config import parse_clear_at_least
from .estimate import CountCache, estimate_tokens, seq_of
from .evidence import recall_note
from .ladder import LadderOps
from .original_names import is_max_tokens_explicit
from .refusal import parse_refusal
from .replay import append_replay, is_real_user_message, turn_prompt_seq
from .sticky import apply_decisions, last_results
from .summary import fork_armed, summary_message, view_form
from .summary_span import format_messages_for_summarization, prefix_contains_span, snap_absorb_boundary
from .token_counter import resolve_counter
from .token_meter import continue_result
from .tool_results import ToolResults

Message = dict[str, Any]
logger = logging.getLogger("amplifier_module_context_simple")


async def _on_llm_response(self: Any, event: str, data: Any) -> Any:
    """Record the provider's reported prompt occupancy; never raises, never blocks the hook chain."""
    self._meter.on_usage(data, self._next_seq, self._decisions, self._fault_counts)
    return continue_result()


def _should_compact(self: Any, token_count: int = 0, budget: int = 0, kind: str | None = None) -> bool:
    """The trigger: usage at or over the threshold; in hybrid mode only on a 'usage' count (token_meter.py)."""
    return self._meter.should_compact(
        self._decisions, self.token_meter, self.compact_threshold, token_count, budget, kind
    )


def _cache_aggregates(self: Any) -> dict[str, int] | None:
    return self._meter.cache_aggregates()


def _calculate_budget(self: Any, token_budget: int | None, provider: Any) -> int:
    """Explicit budget, else the provider's window minus reserved output, else the fallback (budget.py)."""
    reserve = self.output_reserve_fraction
    budget, failed = self._budget.calculate(token_budget, provider, self.max_tokens, self.max_tokens_fallback, reserve)
    if failed:
        self._fault_counts["provider_info_failures"] += 1
    return budget


def _fallback_budget(self: Any) -> int:
    """The budget with no explicit budget and no provider window (budget.py)."""
    return fallback_budget(self.max_tokens, self.max_tokens_fallback)


def _truncate_tool_result(self: Any, message: Message) -> Message:
    """The truncated form of a tool result, or the message itself (tool_results.py)."""
    return self._tool_results.truncate(message, self._result_inputs())


def _clip_tool_result(self: Any, message: Message, tokens: int) -> Message:
    """The last rung's clip of a result to about ``tokens`` (tool_results.py, floor.py)."""
    return self._tool_results.clip(message, tokens, self._result_inputs())


def _stub_user_message(self: Any, message: Message) -> Message:
    """The stub of a long user message, or the message itself (tool_results.py). The original's tests call
    it on a bare instance (``SimpleContextManager.__new__``): with no component yet, a fresh one stubs it."""
    return (self.__dict__.get("_tool_results") or ToolResults()).stub(message)


def _needs_tool_names(self: Any) -> bool:
    """Only per-tool budgets and exemptions read tool names (the original harvests only then)."""
    return bool(self.tool_result_budget_by_tool or self.tool_result_exempt_tools)


def _harvest_tool_names(self: Any) -> None:
    self._tool_results.harvest(self.messages, self._needs_tool_names())


def _ledger_lines(self: Any, message: Message) -> tuple[Any, ...]:
    """A stored message's evidence lines, analysed once per ``_seq`` (evidence.py)."""
    return self._evidence.lines(message, self._fault_counts)


def _pre_read(self: Any, messages: list[Message]) -> None:
    self._evidence.pre_read(messages, self.evidence_ledger_share, self._fault_counts)


def _recall_note(self: Any) -> str:
    return recall_note(self._recall_mounted)


def _fork_armed(self: Any) -> bool:
    return fork_armed(self.compaction_strategy, self.summary_call_mode)


def last_summary_call_stats(self: Any) -> dict[str, Any] | None:
    """How the last summary call was made (mode requested/used, fallback reason, prefix)."""
    last = self._summary.last_call
    return dict(last) if last is not None else None


def note_request_sent(
    self: Any, messages: list[Message] | None = None, *, tools: Any = None, model: Any = None
) -> None:
    """Record what the orchestrator actually sent (fork mode only; history is never touched)."""
    if self._fork_armed():
        self._summary.note_request_sent(messages, tools, model)


def _maybe_trigger_summary_compaction(self: Any, token_count: int, budget: int) -> None:
    self._summary.maybe_trigger(token_count, budget, self._summary_inputs())


def _select_summary_absorb_seqs(self: Any, excess_tokens: int, min_tokens: int | None = None) -> list[int] | None:
    return self._summary.select_absorb_seqs(excess_tokens, min_tokens, self._summary_inputs())


def _snap_absorb_boundary(self: Any, live: list[Message], end_idx: int, protected_boundary: int, start: int = 0) -> int:
    return snap_absorb_boundary(live, end_idx, protected_boundary, start)


async def _run_summary_compaction_task(
    self: Any,
    seqs: list[int],
    fork_prefix: dict[str, Any] | None = None,
    generation: int | None = None,
    replacing: dict[str, Any] | None = None,
) -> None:
    await self._summary.run(seqs, fork_prefix, generation, self._summary_inputs(), replacing)


def _get_summarization_prompt(self: Any) -> str:
    return self._summary.prompt(self.summarization_prompt_path)


def _format_messages_for_summarization(self: Any, messages: list[Message]) -> str:
    return format_messages_for_summarization(messages)


def _capture_fork_prefix(self: Any) -> dict[str, Any] | None:
    return self._summary.capture_fork_prefix(self._fork_armed())


def _prefix_contains_span(self: Any, prefix: list[Message], span: list[Message]) -> bool:
    inputs = self._summary_inputs()
    return prefix_contains_span(prefix, span, [view_form(m, inputs) for m in span])


def _note_fork_fallback(self: Any, reason: str) -> None:
    self._summary.note_fork_fallback(reason)


def _make_summary_message(self: Any, text: str) -> Message:
    """The summary as stored history: role user, reminder envelope, a fresh ``_seq``, not ephemeral."""
    message = summary_message(text, self._next_seq, self._store_guard)
    self._next_seq += 1
    return message


async def _swap_in_pending_summary(self: Any, non_system: list[Message]) -> tuple[list[Message], bool]:
    """Absorb the pending summary's span (sticky removals) and append the summary at the tail (summary.py)."""
    view, swapped, summary = self._summary.swap(non_system, self._summary_inputs(), self._next_seq, self._store_guard)
    if summary is not None:
        self._history.store(summary)
    return view, swapped


async def _compact_ephemeral(self: Any, budget: int, source_messages: list[Message] | None = None) -> list[Message]:
    """Apply sticky decisions; escalate the ladder only when they no longer keep the view under threshold."""
    source = list(self.messages) if source_messages is None else source_messages
    return await self._compaction.run(budget, source, self._pass_inputs())


def _clear_at_least_required(self: Any, budget: int) -> int:
    return parse_clear_at_least(self.compact_clear_at_least, budget)


def _has_sticky_state(self: Any) -> bool:
    return self._decisions.has_sticky()


def _maybe_append_last_user_replay(self: Any, view: list[Message], budget: int = 0) -> None:
    """Append the user's last words once per compaction boundary (in place; replay.py)."""
    append_replay(view, budget, self._decisions, self._counts().total, self._limit_goal())


def _estimate_tokens(self: Any, messages: list[Any]) -> int:
    """The original estimator: ``len(str(m)) // 4`` summed; pure, so callable on any list."""
    return estimate_tokens(messages)


def _counts(self: Any) -> CountCache:
    """The per-``_seq`` count cache for the configured counter (rebuilt when it changes)."""
    overridden = type(self)._estimate_tokens is not _estimate_tokens
    key = ("override", id(type(self))) if overridden else self.token_counter
    if self._count_cache is None or key != self._counts_key:
        if overridden:
            counter = lambda m: self._estimate_tokens([m])  # noqa: E731 - honour a subclass's estimator
        else:
            counter = resolve_counter(self.token_counter)
        self._count_cache, self._counts_key = CountCache(counter), key
    return self._count_cache


def _ladder_ops(self: Any) -> LadderOps:
    """Counting and the rewrites the ladder makes (ladder.py); a repair-made message (no ``_seq``) is
    never rewritten: its decision could not be sticky."""
    truncate = lambda m: m if seq_of(m) is None else self._truncate_tool_result(m)  # noqa: E731
    turn_start, clipped = turn_prompt_seq(self.messages), self._clipped_seqs
    ops = (self._counts().count, truncate, self._stub_user_message, is_real_user_message, turn_start)
    return LadderOps(*ops, self._clip_stored, clipped, self._is_exempt_result)


def _clip_stored(self: Any, message: Message, tokens: int) -> Message:
    """The last rung's clip (head and tail): only of a stored result, whose ``_seq`` keeps it sticky. A
    result an earlier boundary clipped is clipped again from the result as the view holds it whole,
    as the sticky decision replays it."""
    seq = seq_of(message)
    if seq is None:
        return message
    if seq in self._clipped_seqs and message.get("_truncated"):
        stored = next((m for m in reversed(self.messages) if seq_of(m) == seq), None)
        message = message if stored is None else self._ingress.apply(stored)
    return self._clip_tool_result(message, tokens)


def _apply_sticky_decisions(self: Any, non_system: list[Message]) -> list[Message]:
    """Replay every recorded decision, with the same bytes as when it was made (sticky.py)."""
    decisions = self._decisions
    if not decisions.has_sticky():
        return list(non_system)
    sets = (decisions._removed_seqs, decisions._truncated_seqs, decisions._stubbed_seqs)
    rewrite = (self._truncate_tool_result, self._stub_user_message, decisions._clipped_seqs, self._clip_tool_result)
    return apply_decisions(non_system, *sets, *rewrite)


def _limit_goal(self: Any) -> int | None:
    """The largest view body the provider's input limit takes (limit.py), or what its refusals taught
    (refusal.py); None with no window known."""
    tail = self.compaction_notice_token_reserve if self.compaction_notice_enabled else 0
    meter = (self._meter.usage_events, self._meter.last_measured_prompt_tokens, self._anchor_estimate)
    goals = (self._input_limit.goal(self._budget.reading, *meter, tail), self._refusal.goal(tail))
    return min((goal for goal in goals if goal is not None), default=None)


async def _on_provider_error(self: Any, event: str, data: Any) -> Any:
    """``provider:error``: a refusal for length lowers the limit the next views fit; never raises (refusal.py)."""
    try:
        refusal = parse_refusal(data)
        measured, anchor = self._meter.valid_measurement(), self._anchor_estimate
        rate = measured / anchor if measured and anchor else None
        if refusal is not None and self._refusal.refused(refusal, self._last_sent_estimate, rate):
            logger.warning(
                "context-simple: the provider refused a view of %s tokens as too long (%s); the next views "
                "fit %d tokens",
                self._last_sent_estimate,
                refusal.message[:120],
                self._refusal.learned.limit,
            )
    except Exception as exc:  # an observer must never fail the host's turn
        self._fault_counts["refusal_failures"] += 1
        logger.warning("context-simple: provider:error handler failed: %s", type(exc).__name__)
    return continue_result()


def _is_exempt_result(self: Any, message: Message) -> bool:
    """A result of a tool in ``tool_result_exempt_tools``: it counts whole in the floor (tool_results.py)."""
    return self._tool_results.is_exempt(message, self._result_inputs())


def _past_limit(self: Any, count: int) -> bool:
    """``count`` is past the provider's input limit (limit.py)."""
    goal = self._limit_goal()
    return goal is not None and count > goal


def _exceeds_threshold(self: Any, estimated: int, budget: int) -> bool:
    """The escalation gate inside the ladder (token_meter.py)."""
    return self._meter.exceeds_threshold(self._decisions, self.token_meter, self.compact_threshold, estimated, budget)


def _estimate_message_tokens(self: Any, message: Any) -> int:
    """One message's count (an earlier original's name): the list count is the sum of these, so a
    subclass's estimator is honoured (original_names.py)."""
    return self._estimate_tokens([message])


def _record_removed(self: Any, message_or_seq: Message | int) -> None:
    """Record a sticky removal. The spec names this path and the original passes it a stored message;
    this module's callers pass its ``_seq``: both are accepted (a message without one records nothing)."""
    seq = message_or_seq if isinstance(message_or_seq, int) else seq_of(message_or_seq)
    if seq is not None:
        self._decisions.record_removed(seq)


def max_tokens_explicit(self: Any) -> bool:
    """Whether ``max_tokens`` was set and so caps the provider-derived budget (original_names.py)."""
    return is_max_tokens_explicit(self.max_tokens)


def _extract_seq(message: Any) -> int | None:
    return seq_of(message)


def _protected_tool_indices(self: Any, tool_result_indices: list[int]) -> set[int]:
    """Of the tool results' positions, those never to truncate: the last ``protected_tool_results``."""
    return last_results(tool_result_indices, self.protected_tool_results)


def _learned_limit_get(self: Any) -> dict[str, Any] | None:
    """The learned limit, as ``snapshot_state`` keeps it (state.py, refusal.py)."""
    return self._refusal.saved()


def _learned_limit_set(self: Any, saved: dict[str, Any] | None) -> None:
    self._refusal.restore(saved)


def _input_readings_get(self: Any) -> dict[str, Any]:
    """The input limit's readings, as ``snapshot_state`` keeps them (state.py)."""
    return self._input_limit.count.saved()


def _input_readings_set(self: Any, saved: dict[str, Any]) -> None:
    self._input_limit.count.restore(saved)


METHODS: tuple[Callable[..., Any], ...] = (
    _estimate_tokens,
    _counts,
    _ladder_ops,
    _apply_sticky_decisions,
    _limit_goal,
    _past_limit,
    _on_provider_error,
    _is_exempt_result,
    _clip_stored,
    _exceeds_threshold,
    _on_llm_response,
    _should_compact,
    _cache_aggregates,
    _calculate_budget,
    _fallback_budget,
    _truncate_tool_result,
    _clip_tool_result,
    _stub_user_message,
    _needs_tool_names,
    _harvest_tool_names,
    _ledger_lines,
    _pre_read,
    _recall_note,
    _fork_armed,
    note_request_sent,
    _maybe_trigger_summary_compaction,
    _select_summary_absorb_seqs,
    _snap_absorb_boundary,
    _run_summary_compaction_task,
    _get_summarization_prompt,
    _format_messages_for_summarization,
    _capture_fork_prefix,
    _prefix_contains_span,
    _note_fork_fallback,
    _make_summary_message,
    _swap_in_pending_summary,
    _compact_ephemeral,
    _clear_at_least_required,
    _has_sticky_state,
    _maybe_append_last_user_replay,
    _protected_tool_indices,
    _estimate_message_tokens,
    _record_removed,
)
