"""SimpleContextManager: the stored history, the components it owns, and one request's path.

The history is the source of truth, never rewritten; each request gets a new *view*. The manager owns one
of each component and the history's :class:`Decisions`, and calls them with explicit inputs; none reads
the manager (docs/architecture.md). ``get_messages_for_request`` reads top to bottom.
"""

from __future__ import annotations

import logging
import operator
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from .budget import Budget, effective_budget
from .caller_names import install_caller_names
from .compaction import Compaction
from .config import COMPACTION_STRATEGY_SUMMARY, DEFAULTS, check_token_budget
from .decisions import Decisions, HistoryReplaced, install, restarts_when_replaced
from .estimate import CountCache
from .evidence import EvidenceLedger
from .faults import FAULT_KEYS as FAULT_KEYS
from .history import History
from .hook_emit import emit_event
from .ingress import IngressClipper
from .limit import InputLimit
from .live_options import LiveOptions, apply_preset
from .notice import notice_message
from .original_names import max_tokens_with_explicit_flag
from .recall import RecallTool
from .recall_direct import RecallInputs, view_gaps, warn_if_not_taken
from .recall_search import MessageTexts
from .refusal import RefusalLimit
from .repair_mirror import RepairMirror, repair_working
from .result_share import ingress_limit
from .state import FIELDS, adopt_snapshot, build_snapshot, validate_snapshot
from .state_config import warn_config_differs
from .summary import Summary
from .system_prompt import kept_with_factory, read_prompt
from .token_meter import TokenMeter
from .tool_pairs import in_flight_start
from .tool_results import ToolResults
from .view_cache import CONFIG_KEYS, ViewCache

logger = logging.getLogger("amplifier_module_context_simple")

Message = dict[str, Any]
_D = DEFAULTS
_CONFIG = operator.attrgetter(*CONFIG_KEYS)
# A request starts again when the history is replaced while it awaits; this many times in a row is a
# host replacing it from a hook on every request, which no view can follow.
REQUEST_ATTEMPTS = 8


@install_caller_names  # the components' state and calls, under the names callers rely on (caller_names.py)
@install  # the decisions about the current history, under the names callers rely on (decisions.py)
class SimpleContextManager(LiveOptions):
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
        max_tool_result_share: float | None = _D["max_tool_result_share"],
        user_words_share: float = _D["user_words_share"],
        evidence_ledger_segments: bool = _D["evidence_ledger_segments"],
        evidence_ledger_dense: bool = _D["evidence_ledger_dense"],
        recall_tool: bool = _D["recall_tool"],
        auto_compact: bool = _D["auto_compact"],
        protect_in_tokens: bool = _D["protect_in_tokens"],
        max_tokens_explicit: bool | None = None,  # an earlier original's flag: original_names.py
    ) -> None:
        max_tokens = max_tokens_with_explicit_flag(max_tokens, max_tokens_explicit)
        options = {k: v for k, v in locals().items() if k not in ("self", "hooks", "__class__", "max_tokens_explicit")}
        # The components first: checking the options may already note a problem on one (live_options.py).
        self._history = History()  # the stored messages, _seq, in-place edits (history.py)
        self._meter = TokenMeter()  # usage readings and the meter's stats (token_meter.py)
        self._budget = Budget()  # this request's budget and the last one reported (budget.py)
        self._input_limit = InputLimit()  # the provider's input limit and its readings (limit.py)
        self._refusal = RefusalLimit()  # what the provider's refusals for length taught (refusal.py)
        self._tool_results = ToolResults()  # truncation, stubs, spill, tool names (tool_results.py)
        self._evidence = EvidenceLedger()  # the evidence ledger's readings and messages (evidence.py)
        self._summary = Summary()  # the summary strategy's call and fork state (summary.py)
        self._view_cache = ViewCache()  # the last view, extended between boundaries (view_cache.py)
        self._repair_mirror = RepairMirror()  # view repair of what was appended (repair_mirror.py)
        self._ingress = IngressClipper()  # tool results over max_tool_result_bytes, clipped in the view
        self._recall_texts = MessageTexts()  # context_recall's text cache: dropped with the history
        self._apply_options(options)  # validated together; later assignments are validated one by one
        if self.max_messages is not None:
            logger.info("context-simple: max_messages is accepted and ignored (token budgets govern views)")
        self._hooks = hooks
        self._told_once: set[str] = set()  # problems told once per manager (hook_emit.py, view_markers.py)
        self._system_prompt_factory: Callable[[], Awaitable[str]] | None = None
        self._last_good_system_prompt: str | None = None
        self._fault_counts: Counter[str] = Counter()
        self._reported_repairs: set[tuple[str, int, int, int]] = set()
        self._counts_key: Any = None
        self._count_cache: CountCache | None = None
        self._recall_mounted = False  # mount() set context_recall up (recall.py): notice and ledger say so
        self._reset_compaction_state()
        self._counts()  # an unusable token_counter fails here, at mount, not mid-session

    # ----- state resets ------------------------------------------------------------------------

    def _reset_compaction_state(self) -> None:
        """Forget every decision about the current history (``set_messages``, ``clear``, ``restore_state``):
        a new :class:`Decisions`, so a request still running on the old one starts again (decisions.py)."""
        self._decisions = Decisions()
        self._compaction = Compaction()  # the pass's call-scoped state (compaction.py)
        self._tool_results.derived.clear()
        self._view_cache.invalidate()
        self._repair_mirror.reset(None)
        self._ingress.reset()
        self._meter.tail_scan.reset()
        self._recall_texts.clear()
        if self._count_cache is not None:
            self._count_cache.clear()
        self._summary.reset()

    def _forget_history(self) -> None:
        """The history was replaced (``set_messages``, ``clear``) or edited in place: the tool names, every
        decision and the ledger's readings are forgotten."""
        self._tool_results.reset_names()
        self._harvest_tool_names()
        self._reset_compaction_state()
        self._evidence.reads = {}  # what the ledger read of an old message must not outlive it
        self._pre_read(self.messages)

    # ----- the protocol ------------------------------------------------------------------------

    async def add_message(self, message: Message) -> None:
        """Store a copy of ``message`` stamped with a timestamp (if absent) and a permanent ``_seq``."""
        stored = self._history.add(message)
        self._harvest_tool_names()
        self._pre_read([stored])

    async def get_messages(self) -> list[Message]:
        """The full stored history (with ``_seq`` and timestamps), never compacted. Its messages are the
        stored ones: an in-place edit (a redaction) makes the next request rebuild its view from them."""
        return list(self.messages)

    async def set_messages(self, messages: list[Message]) -> None:
        """Replace the history (session resume): re-stamp ``_seq`` 0..N-1 and forget all decisions."""
        self._history.replace(messages, self._told_once)
        self._forget_history()
        self._meter.measurement_stale = True  # the reading (kept, as in the original) measured another history

    async def clear(self) -> None:
        """Empty the history and reset every piece of state (spill files are never deleted)."""
        self._history.reset(())
        self._tool_results.spilled_paths = set()
        self._meter.forget()
        self._input_limit = InputLimit()
        self._refusal = RefusalLimit()
        self._forget_history()

    async def set_system_prompt_factory(self, factory: Callable[[], Awaitable[str]]) -> None:
        """Use ``await factory()`` as the system prompt of every request."""
        self._system_prompt_factory = factory

    async def should_compact(self) -> bool:
        """Protocol compliance: compaction happens per request, in the view."""
        return False

    async def compact(self) -> None:
        """Protocol compliance: stored history is never compacted."""
        return None

    @property
    def last_compaction_stats(self) -> dict[str, Any] | None:
        """The stats of the last compaction (the ``context:compaction`` payload), or None before any; a
        copy. ``_last_compaction_stats`` stays, for the hosts that read the original's private name."""
        stats = self._last_compaction_stats
        return None if stats is None else dict(stats)

    def get_recall_tool(self) -> RecallTool:
        """The ``context_recall`` tool over this history, for your own tool loop (mount() registers it itself
        when ``recall_tool`` is true); from now on the notice and the ledger mention it (recall_direct.py)."""
        self._recall_mounted = True
        return RecallTool(self)

    # ----- resume state (state.py) -------------------------------------------------------------

    def snapshot_state(self) -> dict[str, Any]:
        """A versioned, JSON-safe dict of every decision that shapes future views, tied to this history."""
        self._adopt_edits()  # the decisions the next request would hold
        values = {field.attribute: getattr(self, field.attribute) for field in FIELDS}
        return build_snapshot(values, self.messages, self._knobs())

    def restore_state(self, state: Any) -> None:
        """Adopt a snapshot after ``set_messages()`` of its history; else ValueError, nothing changed.
        A pending summary is kept unverified: its text is never adopted into the history (summary.py)."""
        values = adopt_snapshot(validate_snapshot(state, self.messages))
        self._reset_compaction_state()
        for attribute, value in values.items():
            setattr(self, attribute, value)  # the decisions' and the meter's names (decisions.py, caller_names.py)
        warn_config_differs(state, self._knobs())
        self._meter.measurement_stale = self._anchor_seq is None  # a reading with an anchor measured this history

    # ----- one request -------------------------------------------------------------------------

    @restarts_when_replaced(REQUEST_ATTEMPTS)  # the history was replaced while this request awaited
    async def get_messages_for_request(self, token_budget: int | None = None, provider: Any = None) -> list[Message]:
        """The view to send now: the history, compacted only if it no longer fits the budget."""
        check_token_budget(token_budget)
        warn_if_not_taken(self.recall_tool, self._recall_mounted, self._fault_counts, self._told_once)
        self._adopt_edits()
        started = self._decisions  # this history's decisions: every write below goes to them, or none does
        budget = await self._budget_for(token_budget, provider)  # budget and notice reserve (budget.py)
        working = await self._working_messages(started, budget)  # working messages, repaired (view_cache.py, repair.py)
        count, estimated, kind = await self._metered(working, budget, started)  # the meter (token_meter.py)
        if self.compaction_strategy == COMPACTION_STRATEGY_SUMMARY:
            self._summary.maybe_trigger(count, budget, self._summary_inputs())  # summary.py
        fire = self._should_compact(count, budget, kind)
        # Once a compaction happened, keep its view (decisions, system messages in front) even when the
        # count is low: a measured count describes the last compacted view, and a budget that grew would
        # otherwise send the full history again (a non-append change) with no boundary and no event.
        # A history past the provider's input limit takes the compacting path whatever the meter says.
        sticky = self._has_sticky_state() or self._last_compaction_stats is not None
        compact = fire or sticky or self._past_limit(estimated)  # limit.py
        extended = self._view_cache.extend(
            self.compaction_strategy,
            working,
            budget,
            compact,
            fire,
            self._view_inputs,
            self._boundary_due,
            self._append_tail,
        )
        if extended is not None:  # between boundaries: the last view plus what was appended (view_cache.py)
            self._last_sent_estimate = self._view_cache.sent_estimate
            return extended
        if not compact:
            return self._finalize_view(working)
        # sticky decisions, the ladder and its last rung, clear-at-least (compaction.py, ladder.py, floor.py)
        compacted = await self._compaction.run(budget, working, self._pass_inputs(), escalation_allowed=fire)
        self._check(started)  # its decisions went to the replaced history's object, with its events
        self._view_cache.note_base(working, compacted)
        return self._finalize_view(self._append_tail(compacted, budget))  # replay, notice (replay.py, notice.py)

    def _adopt_edits(self) -> None:
        """After an in-place edit of the stored history (a redaction through ``get_messages()``), forget
        every decision and cached copy, as ``set_messages`` of the edited history would (``_seq`` kept):
        the next view is built from what is stored now, and nothing of the old text remains in it."""
        if self._history.take_edit():
            self._forget_history()
            self._meter.measurement_stale = True  # the reading measured the history before the edit

    def _check(self, started: Decisions) -> None:
        """Raise :class:`HistoryReplaced` when the history was replaced (or edited in place) since a
        request started on ``started``: the request starts again on the new one."""
        if self._decisions is not started or self._store_guard.edited:
            raise HistoryReplaced

    async def _budget_for(self, token_budget: int | None, provider: Any) -> int:
        """This request's budget (budget.py), ``context:budget`` when it changed, less the notice reserve."""
        budget = self._calculate_budget(token_budget, provider)
        meter = (self._meter.usage_events, self._meter.last_measured_prompt_tokens, self._anchor_estimate)
        self._refusal.note(*meter, budget)
        budget = self._refusal.cap(budget)  # what the provider's refusals and usage readings taught (refusal.py)
        payload = self._budget.change()
        if payload is not None and self._hooks is not None:
            await self._emit("context:budget", payload)
        if self.compaction_strategy == COMPACTION_STRATEGY_SUMMARY and provider is not None:
            self._summary.cached_provider = provider
        return effective_budget(budget, self.compaction_notice_token_reserve, self.compaction_notice_enabled)

    async def _working_messages(self, started: Decisions, budget: int) -> list[Message]:
        """The system prompt (factory or stored) and the history, without a tool group still in flight,
        repaired for the provider (repair_mirror.py) and noted for the view cache."""
        factory, prompt = self._system_prompt_factory, None
        if factory is not None:  # system_prompt.py
            prompt = self._last_good_system_prompt = await read_prompt(
                factory, self._last_good_system_prompt, self._fault_counts
            )
        self._check(started)  # before the view cache counts this request as one reading its list
        self._ingress.limit = ingress_limit(self.max_tool_result_bytes, self.max_tool_result_share, budget)
        working = self._view_cache.working(self.messages, prompt, kept_with_factory, self._ingress)
        for payload in self._ingress.take_pending():
            await self._emit("context:tool_result_ingress_truncated", payload)
        start = in_flight_start(working)
        working = working if start is None else working[:start]
        self._check(started)
        shared = self._view_cache.shared()
        synthetic, faults, reported = self._synthetic_calls, self._fault_counts, self._reported_repairs
        repaired, rewritten = repair_working(self._repair_mirror, working, shared, synthetic, faults, reported)
        return self._view_cache.note_repair(repaired, rewritten)

    async def _metered(self, working: list[Message], budget: int, started: Decisions) -> tuple[int, int, str]:
        """The meter's (count, estimate, kind) of ``working``, and ``context:token_meter`` with its stats."""
        appended_only = self._view_cache.appended_only(working)
        meter, counts, mode = self._meter, self._counts(), self.token_meter
        count, _source, estimated, kind = meter.measure(working, self._decisions, counts, mode, budget, appended_only)
        meter.last_stats.update(self._refusal.stats())
        if self._hooks is not None:
            await self._emit("context:token_meter", dict(meter.last_stats or {}))
            self._check(started)
        return count, estimated, kind

    def _boundary_due(self, total: int, budget: int, escalate: bool) -> bool:
        """A view extended to ``total`` tokens would be a boundary: the ladder must run (or the limit)."""
        self._clear_at_least_pending = None  # as _compact_ephemeral does on every pass
        self._clear_at_least_last_refused = False
        return (escalate and self._exceeds_threshold(total, budget)) or self._past_limit(total)

    def _finalize_view(self, view: list[Message]) -> list[Message]:
        """Strip ``_seq``; remember the estimate (and, in fork mode, the view) of what is sent."""
        self._last_sent_estimate = self._counts().total(view)
        if self._fork_armed():
            self._summary.note_view(view)
        return self._view_cache.finalize(view, self._clear_at_least_last_refused, self._view_inputs)

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

    # ----- resources shared with the components ------------------------------------------------

    def recall_inputs(self) -> RecallInputs:
        """What ``context_recall`` searches (recall.py): the history after any in-place edit, its text cache,
        what the current view lacks, the edit flag and the fault counters."""
        self._adopt_edits()  # an in-place edit (a redaction) drops the cached texts first
        gaps = view_gaps(self._decisions, self._ingress)
        return RecallInputs(self.messages, self._recall_texts, gaps, self._store_guard, self._fault_counts)

    async def _emit(self, event: str, payload: dict[str, Any]) -> None:
        """Emit a hook event; a failing hook is logged and counted, never raised into the turn."""
        if self._hooks is not None:
            await emit_event(self._hooks, event, payload, self._fault_counts, self._told_once)

    @property
    def fault_stats(self) -> dict[str, int]:
        """Counters of optional features that failed and degraded (never failed the turn); all present."""
        return {**dict.fromkeys(FAULT_KEYS, 0), **self._fault_counts}
