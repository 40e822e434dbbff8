"""SimpleContextManager: the stored history, its sticky compaction state, and one request's path.

The history in ``self.messages`` is the source of truth and is never rewritten; each request gets
a new *view*. Policy lives in the sibling modules (ladder, tool_results, token_meter, replay,
clear_at_least, notice, summary); this class keeps the state and reads top to bottom in
``get_messages_for_request``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from . import clear_at_least as cal
from .budget import BudgetMixin, BudgetReading, effective_budget, warn_over_budget
from .config import COMPACTION_STRATEGY_SUMMARY, DEFAULTS, check_token_budget, parse_clear_at_least
from .decisions import Decisions, Sticky, install
from .estimate import CountCache, estimate_tokens, seq_of
from .evidence import EvidenceMixin
from .floor import (
    Goals,
    Protected,
    describe_floor,
    floor_settings,
    floor_text,
    log_yields,
    typical_result,
    yields_text,
)
from .ingress import IngressClipper
from .instructions import hoist_all, is_injected_instruction, split_instructions
from .ladder import LadderOps, Protections, apply_decisions, last_results
from .limit import InputLimit, input_limit
from .live_options import LiveOptions, apply_preset
from .notice import INJECTIONS_REMOVED_KEY, RECENT_RESULTS_REMOVED_KEY, notice_message, removed_recent_results
from .recall_search import MessageTexts
from .repair import describe_repair
from .repair_mirror import RepairMirror
from .replay import build_replay, is_real_user_message, turn_prompt_seq
from .state import apply_snapshot, build_snapshot, validate_snapshot
from .summary import SummaryMixin
from .token_counter import resolve_counter
from .token_meter import TailScan, TokenMeterMixin
from .tool_pairs import in_flight_start, is_hook_injection
from .tool_results import ToolResultMixin
from .validation import plain_message, warn_unknown_blocks
from .view_cache import ViewCache
from .wire_copy import Guard, history_list, stored_copy

logger = logging.getLogger("amplifier_module_context_simple")

Message = dict[str, Any]
_D = DEFAULTS
# A request starts again when the history is replaced while it awaits; this many times in a row is a
# host replacing it from a hook on every request, which no view can follow.
REQUEST_ATTEMPTS = 8
# Every documented ``fault_stats`` key: present (0) from the start, so callers can index it.
FAULT_KEYS = (
    "hook_emit_failures",
    "provider_info_failures",
    "spill_write_failures",
    "summarization_failures",
    "system_prompt_factory_failures",
    "usage_events_ignored",
    "capability_register_failures",
    "repair_synthetic_results",
    "repair_orphans_dropped",
    "repair_duplicates_dropped",
    "evidence_failures",
    "recall_failures",
    "restore_summaries_dropped",
)


@install  # the decisions about the current history, under the names callers rely on (decisions.py)
class SimpleContextManager(LiveOptions, BudgetMixin, TokenMeterMixin, EvidenceMixin, ToolResultMixin, SummaryMixin):
    """In-memory context manager with sticky, cache-friendly, non-destructive compaction."""

    @apply_preset
    def __init__(
        self,
        max_tokens: int = _D["max_tokens"],
        compact_threshold: float = _D["compact_threshold"],
        target_usage: float = _D["target_usage"],
        protected_recent: float = _D["protected_recent"],
        truncate_chars: int = _D["truncate_chars"],
        hooks: Any = None,
        protected_tool_results: int = _D["protected_tool_results"],
        compaction_notice_enabled: bool = _D["compaction_notice_enabled"],
        compaction_notice_token_reserve: int = _D["compaction_notice_token_reserve"],
        compaction_notice_verbosity: str = _D["compaction_notice_verbosity"],
        compaction_notice_min_level: int = _D["compaction_notice_min_level"],
        output_reserve_fraction: float = _D["output_reserve_fraction"],
        token_meter: str = _D["token_meter"],
        compact_clear_at_least: Any = _D["compact_clear_at_least"],
        compact_max_consecutive_skips: int = _D["compact_max_consecutive_skips"],
        compaction_strategy: str = _D["compaction_strategy"],
        summary_trigger: float = _D["summary_trigger"],
        summary_call_mode: str = _D["summary_call_mode"],
        summarization_model: str | None = _D["summarization_model"],
        summarization_prompt_path: str | None = _D["summarization_prompt_path"],
        summarization_timeout_s: float = _D["summarization_timeout_s"],
        summary_rearm_below: float | None = _D["summary_rearm_below"],
        summary_cooldown_requests: int = _D["summary_cooldown_requests"],
        summary_min_absorb_tokens: int | float = _D["summary_min_absorb_tokens"],
        tool_result_budget_tokens: int | None = _D["tool_result_budget_tokens"],
        tool_result_shape: str = _D["tool_result_shape"],
        tool_result_budget_by_tool: dict[str, int] | None = None,
        tool_result_exempt_tools: Any = None,
        tool_result_spill_dir: str | None = _D["tool_result_spill_dir"],
        replay_last_user_on_compaction: bool = _D["replay_last_user_on_compaction"],
        max_messages: int | None = _D["max_messages"],
        token_counter: Any = _D["token_counter"],
        evidence_ledger_share: float = _D["evidence_ledger_share"],
        preset: str | None = _D["preset"],
        max_tokens_fallback: int = _D["max_tokens_fallback"],
        max_tool_result_bytes: int | None = _D["max_tool_result_bytes"],
        user_words_share: float = _D["user_words_share"],
        evidence_ledger_segments: bool = _D["evidence_ledger_segments"],
        recall_tool: bool = _D["recall_tool"],
        auto_compact: bool = _D["auto_compact"],
        protect_in_tokens: bool = _D["protect_in_tokens"],
    ) -> None:
        options = {k: v for k, v in locals().items() if k not in ("self", "hooks", "__class__")}
        self._apply_options(options)  # validated together; later assignments are validated one by one
        if self.max_messages is not None:
            logger.info("context-simple: max_messages is accepted and ignored (token budgets govern views)")
        self._hooks = hooks
        self._store_guard = Guard([])  # stored messages report in-place edits to it (wire_copy.py)
        self.messages: list[Message] = history_list((), self._store_guard)
        self._next_seq = 0
        self._system_prompt_factory: Callable[[], Awaitable[str]] | None = None
        self._last_good_system_prompt: str | None = None
        self._reset_tool_names()
        self._spilled_paths: set[str] = set()
        self._fault_counts: Counter[str] = Counter()
        self._reported_repairs: set[tuple[str, int, int, int]] = set()
        self._warned_block_types: set[str] = set()  # content block types already warned about (validation.py)
        self._counts_key: Any = None
        self._count_cache: CountCache | None = None
        self._derived: dict[tuple[int, str], tuple[Message, Any, Message]] = {}
        self._evidence_reads: dict[int, tuple[Message, Any]] = {}  # the ledger's reading per _seq: evidence.py
        self._view_cache = ViewCache()
        self._repair_mirror = RepairMirror()
        self._ingress = IngressClipper()  # tool results over max_tool_result_bytes, clipped in the view
        self._tail_scan = TailScan()  # the hybrid tail, read from where the last request stopped
        self._recall_mounted = False  # mount() set context_recall up (recall.py): notice and ledger say so
        self._recall_texts = MessageTexts()  # context_recall's text cache: dropped with the history
        self._escalation_allowed = True
        self._budget_reading: BudgetReading | None = None
        self._budget_reported: BudgetReading | None = None
        self._input_limit = InputLimit()  # the provider's input limit and its readings (limit.py)
        self._last_measured_prompt_tokens: int | None = None
        self._last_token_meter_stats: dict[str, Any] | None = None
        self._reset_meter_usage()
        self._reset_compaction_state()
        self._counts()  # an unusable token_counter fails here, at mount, not mid-session

    # ----- state resets ------------------------------------------------------------------------

    def _reset_compaction_state(self) -> None:
        """Forget every decision about the current history (``set_messages``, ``clear``, ``restore_state``):
        a new :class:`Decisions`, so a request still running on the old one starts again (decisions.py)."""
        self._decisions = Decisions()
        self._clear_at_least_pending: dict[str, Any] | None = None
        self._clear_at_least_last_refused = False
        self._derived.clear()
        self._view_cache.invalidate()
        self._repair_mirror.reset(None)
        self._ingress.reset()
        self._tail_scan.reset()
        self._recall_texts.clear()
        if self._count_cache is not None:
            self._count_cache.clear()
        self._reset_summary_state()

    # ----- the protocol ------------------------------------------------------------------------

    async def add_message(self, message: Message) -> None:
        """Store a copy of ``message`` stamped with a timestamp (if absent) and a permanent ``_seq``."""
        plain = plain_message(message)
        warn_unknown_blocks([plain], self._warned_block_types)
        metadata = dict(plain.get("metadata") or {})
        if "timestamp" not in metadata:
            metadata["timestamp"] = datetime.now(UTC).isoformat(timespec="milliseconds")
        metadata["_seq"] = self._next_seq
        stored = stored_copy({**plain, "metadata": metadata}, self._store_guard)
        self._next_seq += 1
        self.messages.append(stored)
        self._harvest_tool_names()
        self._pre_read([stored])

    async def get_messages(self) -> list[Message]:
        """The full stored history (with ``_seq`` and timestamps), never compacted. Its messages are the
        stored ones: an in-place edit (a redaction) makes the next request rebuild its view from them."""
        return list(self.messages)

    async def set_messages(self, messages: list[Message]) -> None:
        """Replace the history (session resume): re-stamp ``_seq`` 0..N-1 and forget all decisions."""
        if not isinstance(messages, list):
            raise TypeError(f"context-simple: set_messages expects a list, got {type(messages).__name__}")
        plain = [plain_message(message, where=f"message {index}") for index, message in enumerate(messages)]
        warn_unknown_blocks(plain, self._warned_block_types)
        self._store_guard = guard = Guard([])  # a message of the replaced history reports elsewhere
        self.messages = history_list(
            (
                stored_copy({**m, "metadata": {**(m.get("metadata") or {}), "_seq": seq}}, guard)
                for seq, m in enumerate(plain)
            ),
            guard,
        )
        self._next_seq = len(self.messages)
        self._reset_tool_names()
        self._harvest_tool_names()
        self._reset_compaction_state()
        self._evidence_reads = {}
        self._pre_read(self.messages)
        self._measurement_stale = True  # the reading (kept, as in the original) measured another history

    async def clear(self) -> None:
        """Empty the history and reset every piece of state (spill files are never deleted)."""
        self._store_guard = Guard([])
        self.messages = history_list((), self._store_guard)
        self._next_seq = 0
        self._reset_tool_names()
        self._spilled_paths = set()
        self._evidence_reads = {}
        self._last_measured_prompt_tokens = None
        self._last_token_meter_stats = None
        self._input_limit = InputLimit()
        self._reset_meter_usage()
        self._reset_compaction_state()

    async def set_system_prompt_factory(self, factory: Callable[[], Awaitable[str]]) -> None:
        """Use ``await factory()`` as the system prompt of every request."""
        self._system_prompt_factory = factory

    async def should_compact(self) -> bool:
        """Protocol compliance: compaction happens per request, in the view."""
        return False

    async def compact(self) -> None:
        """Protocol compliance: stored history is never compacted."""
        return None

    # ----- resume state (state.py) -------------------------------------------------------------

    def snapshot_state(self) -> dict[str, Any]:
        """A versioned, JSON-safe dict of every decision that shapes future views, tied to this history."""
        self._adopt_edits()  # the decisions the next request would hold
        return build_snapshot(self)

    def restore_state(self, state: Any) -> None:
        """Adopt a snapshot after ``set_messages()`` of its history; else ValueError, nothing changed.
        A pending summary is never adopted: dropped, logged and counted (the strategy asks again)."""
        values = validate_snapshot(state, self.messages)
        # Its text is the summarizer's: no check can tie it to the history (a ledger's lines are checked),
        # and adopted it would be appended to the history and sent in every later view.
        if values.pop("_pending_summary") is not None:
            values["_summary_armed"] = True  # the summary it was armed for is gone
            self._fault_counts["restore_summaries_dropped"] += 1
            logger.warning("context-simple: restore_state dropped a pending summary (unverifiable text)")
        apply_snapshot(self, values)
        self._measurement_stale = self._anchor_seq is None  # a reading with an anchor measured this history

    # ----- one request -------------------------------------------------------------------------

    async def get_messages_for_request(self, token_budget: int | None = None, provider: Any = None) -> list[Message]:
        """The view to send now: the history, compacted only if it no longer fits the budget."""
        check_token_budget(token_budget)
        for _attempt in range(REQUEST_ATTEMPTS):
            self._adopt_edits()
            view = await self._request_view(token_budget, provider)
            if view is not None:
                return view
        raise RuntimeError(
            "context-simple: the history was replaced (set_messages, clear, restore_state or an in-place edit) "
            f"while each of {REQUEST_ATTEMPTS} attempts to build a view awaited a hook or the system prompt factory"
        )

    def _adopt_edits(self) -> None:
        """After an in-place edit of the stored history (a redaction through ``get_messages()``), forget
        every decision and cached copy, as ``set_messages`` of the edited history would (``_seq`` kept):
        the next view is built from what is stored now, and nothing of the old text remains in it."""
        if not self._store_guard.edited:
            return
        self._store_guard.edited = False  # the next edit reports again
        self._store_guard.sink.clear()
        logger.info("context-simple: a stored message was edited in place; views are rebuilt from the history")
        self._reset_tool_names()
        self._harvest_tool_names()
        self._reset_compaction_state()
        self._evidence_reads = {}  # what the ledger read of an edited message must not outlive the edit
        self._pre_read(self.messages)
        self._measurement_stale = True  # the reading measured the history before the edit

    def _replaced(self, started: Decisions) -> bool:
        """The history was replaced (or edited in place) since a request started on ``started``."""
        return self._decisions is not started or self._store_guard.edited

    async def _request_view(self, token_budget: int | None, provider: Any) -> list[Message] | None:
        """One attempt at the view; None when the history was replaced while it awaited (a hook, the
        prompt factory): it wrote nothing into the new history's decisions, and the caller starts again."""
        started = self._decisions
        budget = self._calculate_budget(token_budget, provider)
        await self._emit_budget_change()
        if self.compaction_strategy == COMPACTION_STRATEGY_SUMMARY and provider is not None:
            self._cached_provider = provider
        budget = effective_budget(budget, self.compaction_notice_token_reserve, self.compaction_notice_enabled)
        working = await self._working_list(started)
        if working is None or self._replaced(started):
            return None
        working = self._repaired(working)
        appended_only = self._view_cache.appended_only(working)
        token_count, _source, _estimated, kind = self._measure_working_tokens(working, budget, appended_only)
        if self._hooks is not None:
            await self._emit("context:token_meter", dict(self._last_token_meter_stats or {}))
            if self._replaced(started):
                return None
        if self.compaction_strategy == COMPACTION_STRATEGY_SUMMARY:
            self._maybe_trigger_summary_compaction(token_count, budget)
        fire = self._should_compact(token_count, budget, kind)
        # Once a compaction happened, keep its view (decisions, system messages in front) even when the
        # count is low: a measured count describes the last compacted view, and a budget that grew would
        # otherwise send the full history again (a non-append change) with no boundary and no event.
        # A history past the provider's input limit takes the compacting path whatever the meter says.
        keep_sticky = self._has_sticky_state() or self._last_compaction_stats is not None
        compact = fire or keep_sticky or self._past_limit(_estimated)
        extended = self._view_cache.extend(self, working, budget, compact, fire)
        if extended is not None:
            return extended  # between boundaries: the last view plus what was appended (view_cache.py)
        if not compact:
            return self._finalize_view(working)
        self._escalation_allowed = fire
        try:
            compacted = await self._compact_ephemeral(budget, working)
        finally:
            self._escalation_allowed = True
        if self._replaced(started):
            return None  # its decisions went to the replaced history's object, with its events
        self._view_cache.note_base(working, compacted)
        return self._finalize_view(self._append_tail(compacted, budget))

    async def _working_list(self, started: Decisions) -> list[Message] | None:
        """The system prompt (factory or stored) and the history, without a tool group still in flight;
        None when the history was replaced while the factory ran."""
        prompt = await self._system_prompt() if self._system_prompt_factory is not None else None
        if self._replaced(started):
            return None  # before the view cache counts this request as one reading its list
        self._ingress.limit = self.max_tool_result_bytes
        working = self._view_cache.working(self.messages, prompt, _kept_with_factory, self._ingress)
        for payload in self._ingress.take_pending():
            await self._emit("context:tool_result_ingress_truncated", payload)
        start = in_flight_start(working)
        return working if start is None else working[:start]

    def _repaired(self, working: list[Message]) -> list[Message]:
        """``working`` repaired for the provider (repair.py), noted for the view cache."""
        repaired, rewritten = self._repair(working)
        return self._view_cache.note_repair(repaired, rewritten)

    async def _system_prompt(self) -> str:
        try:
            prompt = await self._system_prompt_factory()
            if not isinstance(prompt, str):
                raise TypeError(f"factory returned {type(prompt).__name__}, not str")
        except Exception as exc:
            self._fault_counts["system_prompt_factory_failures"] += 1
            if self._last_good_system_prompt is None:
                raise RuntimeError(
                    "context-simple: the system prompt factory failed and no earlier prompt exists, "
                    f"so no request can be built ({type(exc).__name__}: {exc})"
                ) from exc
            logger.warning("context-simple: system prompt factory failed (%s); reusing the last good prompt", exc)
            return self._last_good_system_prompt
        self._last_good_system_prompt = prompt
        return prompt

    def _repair(self, working: list[Message]) -> tuple[list[Message], bool]:
        """The view repaired for the provider, and whether an earlier repaired view changed other than
        by appends; only what was appended since the last settled point is read (repair_mirror.py)."""
        synthetic = self._synthetic_calls
        repaired, report, rewritten = self._repair_mirror.repair(working, self._view_cache.shared(), synthetic)
        synthetic.update(report.synthetic_calls)  # they stand in every later view (repair.py)
        if not report.broken:
            return repaired, rewritten  # unchanged, or only hook messages moved after their group: no fault
        self._fault_counts["repair_synthetic_results"] += report.synthetic_results
        self._fault_counts["repair_orphans_dropped"] += report.orphans_dropped
        self._fault_counts["repair_duplicates_dropped"] += report.duplicates_dropped
        # The same breakage is repaired again on every request as the history grows: log it once.
        key = ("repair", report.synthetic_results, report.orphans_dropped, report.duplicates_dropped)
        if key not in self._reported_repairs:
            self._reported_repairs.add(key)
            logger.warning(
                "context-simple: repaired a broken tool-call history in the view (stored history unchanged): %s",
                describe_repair(working, synthetic),
            )
        return repaired, rewritten

    def _finalize_view(self, view: list[Message]) -> list[Message]:
        """Strip ``_seq``; remember the estimate (and, in fork mode, the view) of what is sent."""
        self._last_sent_estimate = self._counts().total(view)
        if self._fork_armed():
            self._last_request_view = list(view)
            self._view_serial += 1
        return self._view_cache.finalize(self, view)

    def _append_tail(self, compacted: list[Message], budget: int) -> list[Message]:
        """Replay (once per boundary), then the compaction notice, at the tail of the view."""
        if self.replay_last_user_on_compaction and not self._clear_at_least_last_refused:
            self._maybe_append_last_user_replay(compacted, budget=budget)
        stats = self._last_compaction_stats
        if not self.compaction_notice_enabled or not stats:
            return compacted
        if compacted and compacted[-1].get("tool_calls"):
            return compacted  # never between a tool call and its results; back next request
        if stats["strategy_level"] >= self.compaction_notice_min_level:
            compacted.append(notice_message(stats, self.compaction_notice_verbosity, self._recall_note()))
        return compacted

    # ----- counting ----------------------------------------------------------------------------

    def _estimate_tokens(self, messages: list[Any]) -> int:
        """The original estimator: ``len(str(m)) // 4`` summed; pure, so callable on any list."""
        return estimate_tokens(messages)

    def _counts(self) -> CountCache:
        """The per-``_seq`` count cache for the configured counter (rebuilt when it changes)."""
        overridden = type(self)._estimate_tokens is not SimpleContextManager._estimate_tokens
        key = ("override", id(type(self))) if overridden else self.token_counter
        if self._count_cache is None or key != self._counts_key:
            if overridden:
                counter = lambda m: self._estimate_tokens([m])  # noqa: E731 - honour a subclass's estimator
            else:
                counter = resolve_counter(self.token_counter)
            self._count_cache, self._counts_key = CountCache(counter), key
        return self._count_cache

    # ----- compaction --------------------------------------------------------------------------

    def _has_sticky_state(self) -> bool:
        return self._decisions.has_sticky()

    async def _compact_ephemeral(self, budget: int, source_messages: list[Message] | None = None) -> list[Message]:
        """Apply sticky decisions; escalate the ladder only when they no longer keep the view under threshold."""
        try:
            return await self._compact_pass(budget, source_messages)
        finally:
            self._clear_at_least_pending = None  # call-scoped, also after the fail-loud RuntimeError

    async def _compact_pass(self, budget: int, source_messages: list[Message] | None) -> list[Message]:
        """One pass of ``_compact_ephemeral`` (which clears the clear-at-least capture when it ends)."""
        self._clear_at_least_pending = None
        self._clear_at_least_last_refused = False
        source = list(self.messages) if source_messages is None else source_messages
        counts = self._counts()
        before = (counts.total(source), len(source))
        # Instructions lead the view; one stored after the last boundary stays in place (instructions.py).
        system, non_system = split_instructions(source, self._hoist_limit)
        swapped = False
        if self.compaction_strategy == COMPACTION_STRATEGY_SUMMARY and self._pending_summary is not None:
            non_system, swapped = await self._swap_in_pending_summary(non_system)
        working = self._with_ledger(self._apply_sticky_decisions(non_system))
        current = counts.total(system) + counts.total(working)
        target = int(budget * self.target_usage)
        # The trigger's escalation, or the provider's input limit (limit.py), which no meter mode overrides.
        escalate = (self._escalation_allowed and self._exceeds_threshold(current, budget)) or self._past_limit(current)
        if not (escalate or swapped):
            return system + working
        baseline = system + working
        system, working = hoist_all(system, working)  # a boundary: every instruction moves to the front
        system_tokens = counts.total(system)
        if not escalate:
            return await self._finalize_compaction_with_stats(system, working, 0, before, budget, target)
        # A summary swap already makes this request a boundary: a further escalation costs no extra
        # rebuild, and refusing it would leave the swap's changed view without a compaction event.
        required = 0 if swapped or self._past_limit(current) else self._clear_at_least_required(budget)
        if required > 0:
            # Never compacted: the previous view was the history in place (system messages not
            # hoisted), so a refusal must return that order to stay append-only.
            untouched = not (swapped or self._has_sticky_state() or self._last_compaction_stats)
            self._clear_at_least_pending = {
                "required": required,
                "baseline_view": list(source) if untouched else baseline,
                "baseline_tokens": current,
                "sticky": self._sticky_snapshot(),
                "ledger": self._ledger,  # the refused plan may record a new one: roll it back too
                "ledger_segments": self._ledger_segments,
                "budget": budget,
            }
        plan = self._plan_compaction(working, system_tokens, target, int(budget * self.user_words_share), budget)
        for seq in plan.removed:
            self._record_removed(seq)
        self._truncated_seqs |= plan.truncated - plan.removed
        self._stubbed_seqs |= plan.stubbed - plan.removed
        self._clipped_seqs.update(plan.clipped)
        return await self._finalize_compaction_with_stats(
            system, plan.messages, plan.level, before, budget, target, plan.yields
        )

    # ----- the provider's input limit (limit.py) and the last rung (floor.py) -------------------

    def _limit_goal(self) -> int | None:
        """The largest view body the provider's input limit takes (limit.py); None with no window known."""
        tail = self.compaction_notice_token_reserve if self.compaction_notice_enabled else 0
        meter = (self._usage_events, self._last_measured_prompt_tokens, self._anchor_estimate)
        return self._input_limit.goal(self._budget_reading, *meter, tail)

    @property
    def _input_readings(self) -> dict[str, Any]:
        """The input limit's readings, as ``snapshot_state`` keeps them (state.py)."""
        return self._input_limit.count.saved()

    @_input_readings.setter
    def _input_readings(self, saved: dict[str, Any]) -> None:
        self._input_limit.count.restore(saved)

    def _past_limit(self, count: int) -> bool:
        goal = self._limit_goal()
        return goal is not None and count > goal

    def _floor_settings(self, budget: int | None) -> tuple[Protections, Goals]:
        """The ladder's protections and the last rung's goals for this budget (floor.py)."""
        if budget is None:
            return Protections(), Goals()
        typical = lambda: typical_result(self.messages, self._counts().count)  # noqa: E731
        return floor_settings(budget, self.protect_in_tokens, self._limit_goal(), self.compact_threshold, typical)

    def _ladder_ops(self) -> LadderOps:
        return LadderOps(
            count=self._counts().count,
            truncate=self._truncate_stored,
            stub=self._stub_user_message,
            is_real_user=is_real_user_message,
            turn_start=turn_prompt_seq(self.messages),
            clip=self._clip_stored,
        )

    def _clip_stored(self, message: Message, tokens: int) -> Message:
        """The last rung's clip (head and tail): only of a stored result, whose ``_seq`` keeps it sticky."""
        return message if seq_of(message) is None else self._clip_tool_result(message, tokens)

    def _truncate_stored(self, message: Message) -> Message:
        """The ladder's truncation: a repair-made result has no ``_seq`` to keep the decision sticky."""
        return message if seq_of(message) is None else self._truncate_tool_result(message)

    def _apply_sticky_decisions(self, non_system: list[Message]) -> list[Message]:
        """Replay every recorded decision, with the same bytes as when it was made (ladder.py)."""
        if not self._has_sticky_state():
            return list(non_system)
        sets = (self._removed_seqs, self._truncated_seqs, self._stubbed_seqs)
        rewrite = (self._truncate_tool_result, self._stub_user_message, self._clipped_seqs, self._clip_tool_result)
        return apply_decisions(non_system, *sets, *rewrite)

    def _sticky_snapshot(self) -> Sticky:
        return self._decisions.sticky_snapshot()

    def _record_removed(self, seq: int) -> None:
        self._decisions.record_removed(seq)

    async def _finalize_compaction_with_stats(
        self,
        system: list[Message],
        working: list[Message],
        level: int,
        before: tuple[int, int],
        budget: int,
        target: int,
        yields: dict[str, int] | None = None,
    ) -> list[Message]:
        """Judge (clear-at-least), warn if over budget, record the level and stats, emit the event."""
        final = system + working
        final_tokens = self._counts().total(final)
        pending = self._clear_at_least_pending
        if pending is not None:
            refused = await self._judge_clear_at_least(pending, final_tokens, level)
            if refused is not None:
                return refused
        if final_tokens > budget:
            system_tokens = self._system_tokens_as_stored(system)
            self._warn_over_budget(level, final_tokens, budget, system_tokens, target, working, yields)
        if yields:
            log_yields(yields, final_tokens, None if self.protect_in_tokens else input_limit(self._budget_reading))
        self._sticky_level = max(self._sticky_level, level)
        self._hoist_limit = self._next_seq
        stats = {
            "before_tokens": before[0],
            "after_tokens": final_tokens,
            "before_messages": before[1],
            "after_messages": len(final),
            "messages_removed": len(self._removed_seqs),
            "messages_truncated": len(self._truncated_seqs) + len(self._clipped_seqs),
            "user_messages_stubbed": len(self._stubbed_seqs),
            "system_messages_preserved": len(system),
            "strategy_level": self._sticky_level,
            "budget": budget,
            "target_tokens": target,
            "protected_recent": self.protected_recent,
            "protected_tool_results": self.protected_tool_results,
        }
        if self.compaction_strategy == COMPACTION_STRATEGY_SUMMARY:
            stats["messages_absorbed_by_summary"] = self._summary_absorbed_count
        if removed := removed_recent_results(self.messages, final, self.protected_tool_results, self._synthetic_calls):
            stats[RECENT_RESULTS_REMOVED_KEY] = removed  # the notice must not claim them
        if injections := self._injections_removed():
            stats[INJECTIONS_REMOVED_KEY] = injections  # nor "all system messages"
        stats.update(self._evidence_stats(working))
        stats.update(yields or {})
        self._last_compaction_stats = stats
        await self._emit("context:compaction", dict(stats))
        return final

    def _system_tokens_as_stored(self, system: list[Message]) -> int:
        """The warning's system figure as the original prints it: its estimator over the stored dicts
        (``_seq`` included); a configured counter counts as it does everywhere else."""
        if self.token_counter == "estimate":
            return self._estimate_tokens(system)
        return self._counts().total(system)

    def _injections_removed(self) -> int:
        """System-role hook injections the ladder removed (the notice names them: not instructions)."""
        removed = self._removed_seqs
        return sum(1 for m in self.messages if is_injected_instruction(m) and seq_of(m) in removed) if removed else 0

    def _warn_over_budget(
        self,
        level: int,
        final_tokens: int,
        budget: int,
        system_tokens: int,
        target: int,
        working: list[Message] | None = None,
        yields: dict[str, int] | None = None,
    ) -> None:
        """The OVER BUDGET warning; given the view's ``working`` messages, it names their largest parts."""
        knobs = (self.protected_recent, self.protected_tool_results)
        floor = ""
        if working is not None and system_tokens <= budget:
            user_words = int(budget * self.user_words_share)
            protected = Protected(self._ladder_ops(), user_words, self._floor_settings(budget)[0], *knobs)
            floor = floor_text(describe_floor(working, system_tokens, protected))
        warn_over_budget(level, final_tokens, budget, system_tokens, target, *knobs, floor, yields_text(yields or {}))

    # ----- clear-at-least ----------------------------------------------------------------------

    def _clear_at_least_required(self, budget: int) -> int:
        return parse_clear_at_least(self.compact_clear_at_least, budget)

    async def _judge_clear_at_least(
        self, pending: dict[str, Any], final_tokens: int, level: int
    ) -> list[Message] | None:
        """None when the escalation freed enough; else roll it back and return the baseline view."""
        verdict = cal.judge(pending["baseline_tokens"], final_tokens, pending["required"])
        if verdict.accepted:
            self._clear_at_least_skips = 0
            return None
        self._clear_at_least_last_refused = True
        self._clear_at_least_skips += 1
        self._decisions.restore_sticky(pending["sticky"])
        self._ledger = pending.get("ledger")
        self._ledger_segments = pending.get("ledger_segments", ())
        knobs = {
            "protected_recent": self.protected_recent,
            "protected_tool_results": self.protected_tool_results,
        }
        cap, skips = self.compact_max_consecutive_skips, self._clear_at_least_skips
        if skips >= cap:
            raise RuntimeError(
                cal.failure_message(self.compact_clear_at_least, verdict, pending, level, skips, cap, knobs)
            )
        logger.info("context-simple: compaction skipped: freed %d < required %d", verdict.freed, verdict.required)
        await self._emit("context:compaction-skipped", cal.skipped_payload(verdict, pending, level, skips, cap, knobs))
        return list(pending["baseline_view"])

    # ----- replay ------------------------------------------------------------------------------

    def _maybe_append_last_user_replay(self, view: list[Message], budget: int = 0) -> None:
        """Append the user's last words once per compaction boundary (in place)."""
        boundary = (self._sticky_level, self._summary_absorbed_count)
        if boundary == (0, 0) or boundary == self._last_replayed_boundary:
            return
        replay = build_replay(view, budget, self._counts().total)
        if replay is not None:
            view.append(replay)
            self._last_replayed_boundary = boundary

    # ----- helpers callers rely on -------------------------------------------------------------

    @staticmethod
    def _extract_seq(message: Any) -> int | None:
        return seq_of(message)

    def _protected_tool_indices(self, tool_result_indices: list[int]) -> set[int]:
        """Of the tool results' positions, those never to truncate: the last ``protected_tool_results``."""
        return last_results(tool_result_indices, self.protected_tool_results)

    async def _emit(self, event: str, payload: dict[str, Any]) -> None:
        """Emit a hook event; a failing hook is logged and counted, never raised into the turn."""
        if self._hooks is None:
            return
        try:
            await self._hooks.emit(event, payload)
        except Exception as exc:
            self._fault_counts["hook_emit_failures"] += 1
            logger.warning("context-simple: emitting %s failed: %s", event, type(exc).__name__)

    @property
    def fault_stats(self) -> dict[str, int]:
        """Counters of optional features that failed and degraded (never failed the turn); all present."""
        return {**dict.fromkeys(FAULT_KEYS, 0), **self._fault_counts}


def _kept_with_factory(message: Message) -> bool:
    """With a system prompt factory, stored system messages give way to it, except hook-injected ones."""
    return message.get("role") != "system" or is_hook_injection(message)
