"""Summary compaction strategy (``compaction_strategy: "summary"``): the state-touching half.

At ``summary_trigger`` an ``asyncio`` task asks the provider to summarize the oldest non-protected
span (chosen in :mod:`summary_span`); the next compaction pass swaps the summary in: the span is
recorded as sticky removals and the summary, a role-``user`` ``<system-reminder
source="context-summary">`` message, is appended to the history with a fresh ``_seq``. A failed,
slow, empty or oversized summary never blocks or fails a turn: that pass uses the progressive
ladder. Fork mode replays the last sent prefix so the summary call reads the provider's warm cache.
Three opt-in levers damp the refire loop: hysteresis, a cooldown and a floor on the span's size.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from datetime import UTC, datetime
from typing import Any

from .config import (
    COMPACTION_STRATEGY_SUMMARY,
    SUMMARY_CALL_MODE_FORK,
    SUMMARY_CALL_MODE_STANDALONE,
    TOKEN_METER_ESTIMATE,
)
from .estimate import seq_of, wire_form
from .replay import turn_prompt_seq
from .summary_span import (
    _SUMMARY_METADATA_TYPE,
    DEFAULT_SUMMARIZATION_PROMPT,
    fork_instruction,
    format_messages_for_summarization,
    live_messages,
    prefix_contains_span,
    protected_bounds,
    response_text,
    select_span,
    snap_absorb_boundary,
    summary_content,
)
from .tool_pairs import has_tool_calls, in_flight_start
from .wire_copy import stored_copy

logger = logging.getLogger("amplifier_module_context_simple")

Message = dict[str, Any]
FORK_PREFIX_SOURCE_WIRE = "wire_record"
# A pending summary restore_state kept: it holds its place, but its text is never adopted (not saved).
UNVERIFIED = "unverified"
FORK_PREFIX_SOURCE_VIEW = "module_view"


class SummaryMixin:
    """Summary-strategy state and methods of SimpleContextManager (which provides the rest)."""

    # ----- state -------------------------------------------------------------------------------

    def _reset_summary_state(self) -> None:
        """Forget the summary call's state (its decisions are the history's: decisions.py); a running task
        is cancelled and can no longer land."""
        task = getattr(self, "_summarization_task", None)
        if task is not None and not task.done():
            task.cancel()
        self._summary_generation = getattr(self, "_summary_generation", 0) + 1
        if not hasattr(self, "_cached_provider"):
            self._cached_provider: Any = None
        self._is_summarizing = False
        self._summarization_task: asyncio.Task[None] | None = None
        self._last_request_view: list[Message] | None = None
        self._view_serial = 0
        self._sent_messages: list[Message] | None = None
        self._sent_serial: int | None = None
        self._sent_tools: Any = None
        self._sent_tools_supplied = False
        self._sent_model: str | None = None
        self._summary_fork_fallbacks = 0
        self._fork_prefix_source: str | None = None
        self._fork_reasons_logged: set[str] = set()
        self._last_summary_call: dict[str, Any] | None = None

    def _fork_armed(self) -> bool:
        return (
            self.compaction_strategy == COMPACTION_STRATEGY_SUMMARY and self.summary_call_mode == SUMMARY_CALL_MODE_FORK
        )

    @property
    def last_summary_call_stats(self) -> dict[str, Any] | None:
        """How the last summary call was made (mode requested/used, fallback reason, prefix)."""
        return dict(self._last_summary_call) if self._last_summary_call is not None else None

    def note_request_sent(self, messages: list[Message] | None = None, *, tools: Any = None, model: Any = None) -> None:
        """Record what the orchestrator actually sent (fork mode only; history is never touched)."""
        if not self._fork_armed():
            return
        if messages is not None:
            self._sent_messages = list(messages)
            self._sent_serial = self._view_serial
        self._sent_tools = list(tools) if isinstance(tools, list) else tools
        self._sent_tools_supplied = True
        if model is not None:
            self._sent_model = model

    # ----- trigger -----------------------------------------------------------------------------

    def _maybe_trigger_summary_compaction(self, token_count: int, budget: int) -> None:
        """Start one background summary when the view's usage reaches ``summary_trigger``."""
        cooling = self._summary_cooldown_left > 0  # this request is one of the cooldown's
        if cooling:
            self._summary_cooldown_left -= 1
        if self._pending_summary is not None and self._pending_summary.get(UNVERIFIED):
            self._reask_unverified()
        if self._is_summarizing or self._pending_summary is not None or budget <= 0:
            return
        occupancy = self._summary_occupancy(token_count)
        usage = occupancy / budget
        if self.summary_rearm_below is not None and usage < self.summary_rearm_below:
            self._summary_armed = True
        if self._cached_provider is None or usage < self.summary_trigger or not self._summary_armed:
            return
        target = int(budget * self.target_usage)
        if occupancy <= target or cooling:
            return
        seqs = self._select_summary_absorb_seqs(excess_tokens=occupancy - target, min_tokens=self._absorb_floor(budget))
        if not seqs:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop, no background work: the ladder covers this pass
        fork_prefix = self._capture_fork_prefix()
        self._is_summarizing = True
        if self.summary_rearm_below is not None:
            self._summary_armed = False
        self._summarization_task = loop.create_task(
            self._run_summary_compaction_task(seqs, fork_prefix=fork_prefix, generation=self._summary_generation)
        )

    def _reask_unverified(self) -> None:
        """Ask the summarizer again for a restored pending summary's span: its answer replaces the saved text
        (the provider's own words, the same ones when it answers as before), if that pending is still there."""
        if self._is_summarizing or self._cached_provider is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        pending = self._pending_summary
        self._is_summarizing = True
        self._summarization_task = loop.create_task(
            self._run_summary_compaction_task(
                sorted(pending["seqs"]), generation=self._summary_generation, replacing=pending
            )
        )

    def _summary_occupancy(self, token_count: int) -> int:
        """The tokens the next view holds before any new decision.

        The estimate meter counts the raw history, which only grows; with sticky decisions the
        view is smaller, and judging the trigger on the raw count would refire it forever.
        """
        if self.token_meter != TOKEN_METER_ESTIMATE or not self._has_sticky_state():
            return token_count
        stored = [m for m in self.messages if m.get("role") != "system"]
        counts = self._counts()
        return max(0, token_count - counts.total(stored) + counts.total(self._apply_sticky_decisions(stored)))

    def _request_budget(self) -> int:
        """The effective budget of the request being built (the meter records it first)."""
        budget = (self._last_token_meter_stats or {}).get("budget")
        return budget if isinstance(budget, int) and budget > 0 else self._fallback_budget()

    def _absorb_floor(self, budget: int) -> int:
        """``summary_min_absorb_tokens`` in tokens: an int as is, a fraction of ``budget``."""
        floor = self.summary_min_absorb_tokens
        return int(floor * budget) if isinstance(floor, float) and floor < 1 else int(floor)

    def _select_summary_absorb_seqs(self, excess_tokens: int, min_tokens: int | None = None) -> list[int] | None:
        """The ``_seq`` of the oldest non-protected span worth ``excess_tokens``, and at least the floor.

        A span smaller than the floor is not worth a boundary: None, and the ladder handles the pass.
        """
        floor = self._absorb_floor(self._request_budget()) if min_tokens is None else min_tokens
        live = live_messages(self.messages, self._removed_seqs)
        start, boundary = protected_bounds(live, self.protected_recent, turn_prompt_seq(self.messages))
        if self._history_tail_open():  # calls in flight: results still to come must not lose their call
            boundary = min(boundary, max((i for i, m in enumerate(live) if has_tool_calls(m)), default=boundary))
        if boundary <= start:
            return None
        start, end, tokens = select_span(live, self._view_tokens, max(excess_tokens, floor, 1), start, boundary)
        if end <= start or tokens < floor:
            return None
        seqs = [seq_of(m) for m in live[start:end]]
        return [s for s in seqs if s is not None] or None

    def _snap_absorb_boundary(self, live: list[Message], end_idx: int, protected_boundary: int, start: int = 0) -> int:
        return snap_absorb_boundary(live, end_idx, protected_boundary, start)

    def _view_form(self, message: Message) -> Message:
        """The message as views show it (truncated or stubbed when a sticky decision says so)."""
        kept = self._apply_sticky_decisions([message])
        return kept[0] if kept else message

    def _view_tokens(self, message: Message) -> int:
        return self._counts().count(self._view_form(message))

    # ----- the background call -----------------------------------------------------------------

    async def _run_summary_compaction_task(
        self,
        seqs: list[int],
        fork_prefix: dict[str, Any] | None = None,
        generation: int | None = None,
        replacing: dict[str, Any] | None = None,
    ) -> None:
        """Ask the provider for the summary; store it as pending. Never raises (except cancellation).
        ``replacing``: the restored pending summary this call verifies; gone meanwhile, the answer is too."""
        generation = self._summary_generation if generation is None else generation
        try:
            wanted = set(seqs)
            span = [m for m in self.messages if seq_of(m) in wanted]
            request, mode = self._build_summary_request(span, fork_prefix)
            await self._emit("context:pre_summarize", {"message_count": len(span), "call_mode": mode})
            result = self._cached_provider.complete(request)
            if inspect.isawaitable(result):
                result = await asyncio.wait_for(result, self.summarization_timeout_s)
            text = response_text(result)
            if not text:
                raise ValueError("the summarizer returned no text")
            if generation != self._summary_generation:
                return  # the history was replaced while we waited: this summary describes another one
            if replacing is not None and self._pending_summary is not replacing:
                return  # the restored summary was refused or dropped meanwhile, as the session before it was
            self._pending_summary = {"seqs": frozenset(seqs), "text": text}
            self._summarization_failures = 0
            await self._emit("context:post_summarize", {"summary_length": len(text), "call_mode": mode})
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if generation == self._summary_generation:
                self._summarization_failures += 1
                self._fault_counts["summarization_failures"] += 1
            logger.warning(
                "context-simple: summarizer failed (%s: %s); compaction falls back to the progressive ladder",
                type(exc).__name__,
                str(exc)[:200],
            )
        finally:
            if generation == self._summary_generation:
                self._is_summarizing = False
                self._summarization_task = None

    def _get_summarization_prompt(self) -> str:
        """The prompt file when configured and readable, else the built-in five-section prompt."""
        path = self.summarization_prompt_path
        if not path:
            return DEFAULT_SUMMARIZATION_PROMPT
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError) as exc:
            if self._prompt_path_reported != path:  # once per path: config warned at mount if it was missing then
                self._prompt_path_reported = path
                logger.warning(
                    "context-simple: summarization_prompt_path %r unreadable (%s); using the default", path, exc
                )
            return DEFAULT_SUMMARIZATION_PROMPT
        if not text.strip():
            if self._prompt_path_reported != path:
                self._prompt_path_reported = path
                logger.warning("context-simple: summarization_prompt_path %r is empty; using the default", path)
            return DEFAULT_SUMMARIZATION_PROMPT
        return text

    def _format_messages_for_summarization(self, messages: list[Message]) -> str:
        return format_messages_for_summarization(messages)

    def _build_summary_request(self, span: list[Message], fork_prefix: dict[str, Any] | None) -> tuple[Any, str]:
        """(ChatRequest, mode used): forked when armed and every check passes, else standalone."""
        from amplifier_core.message_models import ChatRequest
        from amplifier_core.message_models import Message as ChatMessage

        prompt = self._get_summarization_prompt()
        requested = self.summary_call_mode
        stats = {
            "mode_requested": requested,
            "mode_used": SUMMARY_CALL_MODE_STANDALONE,
            "reason": None,
            "prefix_messages": 0,
            "prefix_source": None,
            "prefix_views_since_send": None if self._sent_serial is None else self._view_serial - self._sent_serial,
            "fork_fallbacks": self._summary_fork_fallbacks,
        }
        if self._fork_armed():
            reason = self._fork_refusal(span, fork_prefix)
            if reason is None:
                try:
                    messages = [ChatMessage(**wire_form(m)) for m in fork_prefix["messages"]]
                    messages.append(ChatMessage(role="user", content=fork_instruction(prompt, span)))
                    request = ChatRequest(messages=messages, tools=self._sent_tools, model=self._sent_model)
                except Exception as exc:
                    reason = f"the forked request could not be built ({type(exc).__name__}: {str(exc)[:120]})"
                else:
                    stats.update(mode_used=SUMMARY_CALL_MODE_FORK, prefix_messages=len(messages) - 1)
                    stats["prefix_source"] = fork_prefix["source"]
                    self._last_summary_call = stats
                    return request, SUMMARY_CALL_MODE_FORK
            self._note_fork_fallback(reason)
            stats.update(reason=reason, fork_fallbacks=self._summary_fork_fallbacks)
        formatted = self._format_messages_for_summarization(span)
        messages = [ChatMessage(role="system", content=prompt), ChatMessage(role="user", content=formatted)]
        self._last_summary_call = stats
        return ChatRequest(messages=messages, model=self.summarization_model), SUMMARY_CALL_MODE_STANDALONE

    # ----- fork mode ---------------------------------------------------------------------------

    def _capture_fork_prefix(self) -> dict[str, Any] | None:
        """The prefix a forked summary call replays, taken at trigger time (None unless armed)."""
        if not self._fork_armed():
            return None
        if self._sent_messages is not None:
            messages, source = self._sent_messages, FORK_PREFIX_SOURCE_WIRE
        elif self._last_request_view is not None:
            messages, source = self._last_request_view, FORK_PREFIX_SOURCE_VIEW
        else:
            self._fork_prefix_source = None
            return None
        self._fork_prefix_source = source
        return {"messages": list(messages), "source": source}

    def _fork_refusal(self, span: list[Message], fork_prefix: dict[str, Any] | None) -> str | None:
        """Why this summary call cannot fork (checked in order), or None."""
        if not self._sent_tools_supplied:
            return "note_request_sent() has never been called, so the tools of the cached prefix are unknown"
        if self.summarization_model is not None:
            return "summarization_model points the summarizer at a different model, whose cache the prefix cannot hit"
        prefix = (fork_prefix or {}).get("messages") or []
        if not prefix:
            return "no request has been recorded yet, so there is no prefix to fork"
        if has_tool_calls(prefix[-1]):
            return "the recorded prefix ends with unanswered tool_calls"
        if not self._prefix_contains_span(prefix, span):
            return "the span to summarize is not present in the recorded prefix"
        return None

    def _prefix_contains_span(self, prefix: list[Message], span: list[Message]) -> bool:
        return prefix_contains_span(prefix, span, [self._view_form(m) for m in span])

    def _note_fork_fallback(self, reason: str) -> None:
        """Count a refusal to fork; warn once per distinct reason."""
        self._summary_fork_fallbacks += 1
        if reason not in self._fork_reasons_logged:
            self._fork_reasons_logged.add(reason)
            logger.warning("context-simple: summary_call_mode=fork ran STANDALONE instead: %s", reason)

    # ----- the swap ----------------------------------------------------------------------------

    def _make_summary_message(self, text: str) -> Message:
        """The summary as stored history: role user, reminder envelope, a fresh ``_seq``, not ephemeral."""
        message = self._summary_message(text)
        self._next_seq += 1
        return message

    def _summary_message(self, text: str) -> Message:
        """The summary stamped with the next ``_seq``, which is taken only when it is stored: a refused
        summary must not leave a gap (``set_messages`` re-stamps 0..N-1, and spill names carry ``_seq``)."""
        seq = self._next_seq
        timestamp = datetime.now(UTC).isoformat(timespec="milliseconds")
        metadata = {"timestamp": timestamp, "type": _SUMMARY_METADATA_TYPE, "_seq": seq}
        return stored_copy({"role": "user", "content": summary_content(text), "metadata": metadata}, self._store_guard)

    async def _swap_in_pending_summary(self, non_system: list[Message]) -> tuple[list[Message], bool]:
        """Absorb the pending summary's span (sticky removals) and append the summary at the tail."""
        pending = self._pending_summary
        # Never append between a tool call and its results, in the history or in this request's
        # snapshot of it (messages may have arrived while the request awaited a hook).
        if pending is None or self._history_tail_open() or (non_system and has_tool_calls(non_system[-1])):
            return non_system, False
        if self._history_moved_on(non_system):
            return non_system, False  # appended now, the summary would not sit at this view's tail
        self._pending_summary = None
        absorbed = [m for m in self.messages if seq_of(m) in pending["seqs"] and seq_of(m) not in self._removed_seqs]
        if not absorbed:
            logger.info("context-simple: pending summary discarded: its span is already gone")
            return non_system, False
        counts = self._counts()
        replaced = counts.total([self._view_form(m) for m in absorbed])
        if replaced < self._absorb_floor(self._request_budget()):
            # The ladder took most of the span meanwhile: what is left is not worth a boundary.
            logger.info("context-simple: pending summary discarded: %d tokens left of its span", replaced)
            return non_system, False
        summary = self._summary_message(pending["text"])
        size = counts.count(summary)
        if size >= replaced:
            logger.warning(
                "context-simple: summary refused: %d tokens would replace a span of %d; progressive compaction instead",
                size,
                replaced,
            )
            return non_system, False
        if pending.get(UNVERIFIED):
            self._summary_armed = True  # the summary it was armed for is gone: ask again
            self._fault_counts["restore_summaries_dropped"] += 1
            logger.warning("context-simple: a restored pending summary was dropped instead of adopted (unverified)")
            return non_system, False
        for message in absorbed:
            self._record_removed(seq_of(message))
        self._next_seq += 1
        self.messages.append(summary)
        self._summary_absorbed_count += len(absorbed)
        self._summary_cooldown_left = self.summary_cooldown_requests
        return [*non_system, summary], True

    def _history_moved_on(self, non_system: list[Message]) -> bool:
        """Messages were added while this request awaited (a hook, the prompt factory): wait a request."""
        seen = next((seq_of(m) for m in reversed(non_system) if seq_of(m) is not None), None)
        latest = next((seq_of(m) for m in reversed(self.messages) if m.get("role") != "system"), None)
        return seen != latest

    def _history_tail_open(self) -> bool:
        """The stored history ends inside a tool-call group (calls sent, results not all in)."""
        if not self.messages:
            return False
        return has_tool_calls(self.messages[-1]) or in_flight_start(self.messages) is not None
