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
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, NamedTuple

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
    protected_bounds,
    response_text,
    select_span,
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


class SummarySettings(NamedTuple):
    """The summary strategy's knobs for one call (field names are the configuration keys)."""

    compaction_strategy: str
    summary_call_mode: str
    summary_trigger: float
    summary_rearm_below: float | None
    summary_cooldown_requests: int
    summary_min_absorb_tokens: int | float
    summarization_model: str | None
    summarization_prompt_path: str | None
    summarization_timeout_s: float
    target_usage: float
    protected_recent: float
    token_meter: str


class SummaryInputs(NamedTuple):
    """What the strategy reads of the history (the manager builds it for each call)."""

    settings: SummarySettings
    messages: list[Message]  # the stored history
    decisions: Any  # the history's decisions (decisions.py): pending summary, absorbed count, levers
    counts: Any  # the count cache (estimate.CountCache)
    apply_sticky: Callable[[list[Message]], list[Message]]  # the recorded decisions replayed (sticky.py)
    budget: int  # the request's effective budget
    emit: Callable[[str, dict[str, Any]], Awaitable[None]]
    faults: Counter[str]
    contains_span: Callable[[list[Message], list[Message]], bool]  # the manager's _prefix_contains_span


def fork_armed(strategy: str, call_mode: str) -> bool:
    """Fork mode is on: the summary strategy with ``summary_call_mode: fork``."""
    return strategy == COMPACTION_STRATEGY_SUMMARY and call_mode == SUMMARY_CALL_MODE_FORK


def absorb_floor(budget: int, settings: SummarySettings) -> int:
    """``summary_min_absorb_tokens`` in tokens: an int as is, a fraction of ``budget``."""
    floor = settings.summary_min_absorb_tokens
    return int(floor * budget) if isinstance(floor, float) and floor < 1 else int(floor)


def view_form(message: Message, inputs: SummaryInputs) -> Message:
    """The message as views show it (truncated or stubbed when a sticky decision says so)."""
    kept = inputs.apply_sticky([message])
    return kept[0] if kept else message


def summary_message(text: str, seq: int, guard: Any) -> Message:
    """The summary stamped with ``seq`` (the next ``_seq``, taken only when it is stored: a refused
    summary must not leave a gap; ``set_messages`` re-stamps 0..N-1, and spill names carry ``_seq``)."""
    timestamp = datetime.now(UTC).isoformat(timespec="milliseconds")
    metadata = {"timestamp": timestamp, "type": _SUMMARY_METADATA_TYPE, "_seq": seq}
    return stored_copy({"role": "user", "content": summary_content(text), "metadata": metadata}, guard)


def history_moved_on(non_system: list[Message], messages: list[Message]) -> bool:
    """Messages were added while this request awaited (a hook, the prompt factory): wait a request."""
    seen = next((seq_of(m) for m in reversed(non_system) if seq_of(m) is not None), None)
    latest = next((seq_of(m) for m in reversed(messages) if m.get("role") != "system"), None)
    return seen != latest


def history_tail_open(messages: list[Message]) -> bool:
    """The stored history ends inside a tool-call group (calls sent, results not all in)."""
    if not messages:
        return False
    return has_tool_calls(messages[-1]) or in_flight_start(messages) is not None


class Summary:
    """The summary strategy's call: its running task, the provider it asks, what was sent (fork mode) and
    how the last call was made. Its decisions (the pending summary, the levers) are the history's and
    come in ``inputs.decisions``; nothing here reads the manager (issue 38)."""

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None
        self.generation = 0
        self.cached_provider: Any = None
        self.prompt_path_reported: str | None = None
        self.reset()

    # ----- state -------------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget the summary call's state (its decisions are the history's: decisions.py); a running task
        is cancelled and can no longer land."""
        task = self.task
        if task is not None and not task.done():
            task.cancel()
        self.generation += 1
        self.is_summarizing = False
        self.task = None
        self.last_request_view: list[Message] | None = None
        self.view_serial = 0
        self.sent_messages: list[Message] | None = None
        self.sent_serial: int | None = None
        self.sent_tools: Any = None
        self.sent_tools_supplied = False
        self.sent_model: str | None = None
        self.fork_fallbacks = 0
        self.fork_prefix_source: str | None = None
        self.fork_reasons_logged: set[str] = set()
        self.last_call: dict[str, Any] | None = None

    def note_view(self, view: list[Message]) -> None:
        """Fork mode: the view about to be sent (the prefix a forked call replays when none was noted)."""
        self.last_request_view = list(view)
        self.view_serial += 1

    def note_request_sent(self, messages: list[Message] | None, tools: Any, model: Any) -> None:
        """Record what the orchestrator actually sent (fork mode only; history is never touched)."""
        if messages is not None:
            self.sent_messages = list(messages)
            self.sent_serial = self.view_serial
        self.sent_tools = list(tools) if isinstance(tools, list) else tools
        self.sent_tools_supplied = True
        if model is not None:
            self.sent_model = model

    # ----- trigger -----------------------------------------------------------------------------

    def maybe_trigger(self, token_count: int, budget: int, inputs: SummaryInputs) -> None:
        """Start one background summary when the view's usage reaches ``summary_trigger``."""
        decisions, settings = inputs.decisions, inputs.settings
        cooling = decisions._summary_cooldown_left > 0  # this request is one of the cooldown's
        if cooling:
            decisions._summary_cooldown_left -= 1
        if decisions._pending_summary is not None and decisions._pending_summary.get(UNVERIFIED):
            self.reask_unverified(inputs)
        if self.is_summarizing or decisions._pending_summary is not None or budget <= 0:
            return
        occupancy = self.occupancy(token_count, inputs)
        usage = occupancy / budget
        if settings.summary_rearm_below is not None and usage < settings.summary_rearm_below:
            decisions._summary_armed = True
        if self.cached_provider is None or usage < settings.summary_trigger or not decisions._summary_armed:
            return
        target = int(budget * settings.target_usage)
        if occupancy <= target or cooling:
            return
        seqs = self.select_absorb_seqs(occupancy - target, absorb_floor(budget, settings), inputs)
        if not seqs:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop, no background work: the ladder covers this pass
        fork_prefix = self.capture_fork_prefix(fork_armed(settings.compaction_strategy, settings.summary_call_mode))
        self.is_summarizing = True
        if settings.summary_rearm_below is not None:
            decisions._summary_armed = False
        self.task = loop.create_task(self.run(seqs, fork_prefix, self.generation, inputs))

    def reask_unverified(self, inputs: SummaryInputs) -> None:
        """Ask the summarizer again for a restored pending summary's span: its answer replaces the saved text
        (the provider's own words, the same ones when it answers as before), if that pending is still there."""
        if self.is_summarizing or self.cached_provider is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        pending = inputs.decisions._pending_summary
        self.is_summarizing = True
        self.task = loop.create_task(
            self.run(sorted(pending["seqs"]), None, self.generation, inputs, replacing=pending)
        )

    def occupancy(self, token_count: int, inputs: SummaryInputs) -> int:
        """The tokens the next view holds before any new decision.

        The estimate meter counts the raw history, which only grows; with sticky decisions the
        view is smaller, and judging the trigger on the raw count would refire it forever.
        """
        if inputs.settings.token_meter != TOKEN_METER_ESTIMATE or not inputs.decisions.has_sticky():
            return token_count
        stored = [m for m in inputs.messages if m.get("role") != "system"]
        counts = inputs.counts
        return max(0, token_count - counts.total(stored) + counts.total(inputs.apply_sticky(stored)))

    def select_absorb_seqs(self, excess_tokens: int, min_tokens: int | None, inputs: SummaryInputs) -> list[int] | None:
        """The ``_seq`` of the oldest non-protected span worth ``excess_tokens``, and at least the floor.

        A span smaller than the floor is not worth a boundary: None, and the ladder handles the pass.
        """
        floor = absorb_floor(inputs.budget, inputs.settings) if min_tokens is None else min_tokens
        messages = inputs.messages
        live = live_messages(messages, inputs.decisions._removed_seqs)
        start, boundary = protected_bounds(live, inputs.settings.protected_recent, turn_prompt_seq(messages))
        if history_tail_open(messages):  # calls in flight: results still to come must not lose their call
            boundary = min(boundary, max((i for i, m in enumerate(live) if has_tool_calls(m)), default=boundary))
        if boundary <= start:
            return None
        view_tokens = lambda m: inputs.counts.count(view_form(m, inputs))  # noqa: E731
        start, end, tokens = select_span(live, view_tokens, max(excess_tokens, floor, 1), start, boundary)
        if end <= start or tokens < floor:
            return None
        seqs = [seq_of(m) for m in live[start:end]]
        return [s for s in seqs if s is not None] or None

    # ----- the background call -----------------------------------------------------------------

    async def run(
        self,
        seqs: list[int],
        fork_prefix: dict[str, Any] | None,
        generation: int | None,
        inputs: SummaryInputs,
        replacing: dict[str, Any] | None = None,
    ) -> None:
        """Ask the provider for the summary; store it as pending. Never raises (except cancellation).
        ``replacing``: the restored pending summary this call verifies; gone meanwhile, the answer is too."""
        generation = self.generation if generation is None else generation
        try:
            wanted = set(seqs)
            span = [m for m in inputs.messages if seq_of(m) in wanted]
            request, mode = self.build_request(span, fork_prefix, inputs)
            await inputs.emit("context:pre_summarize", {"message_count": len(span), "call_mode": mode})
            result = self.cached_provider.complete(request)
            if inspect.isawaitable(result):
                result = await asyncio.wait_for(result, inputs.settings.summarization_timeout_s)
            text = response_text(result)
            if not text:
                raise ValueError("the summarizer returned no text")
            if generation != self.generation:
                return  # the history was replaced while we waited: this summary describes another one
            if replacing is not None and inputs.decisions._pending_summary is not replacing:
                return  # the restored summary was refused or dropped meanwhile, as the session before it was
            inputs.decisions._pending_summary = {"seqs": frozenset(seqs), "text": text}
            inputs.decisions._summarization_failures = 0
            await inputs.emit("context:post_summarize", {"summary_length": len(text), "call_mode": mode})
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if generation == self.generation:
                inputs.decisions._summarization_failures += 1
                inputs.faults["summarization_failures"] += 1
            logger.warning(
                "context-simple: summarizer failed (%s: %s); compaction falls back to the progressive ladder",
                type(exc).__name__,
                str(exc)[:200],
            )
        finally:
            if generation == self.generation:
                self.is_summarizing = False
                self.task = None

    def prompt(self, path: str | None) -> str:
        """The prompt file when configured and readable, else the built-in five-section prompt."""
        if not path:
            return DEFAULT_SUMMARIZATION_PROMPT
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError) as exc:
            if self.prompt_path_reported != path:  # once per path: config warned at mount if it was missing then
                self.prompt_path_reported = path
                logger.warning(
                    "context-simple: summarization_prompt_path %r unreadable (%s); using the default", path, exc
                )
            return DEFAULT_SUMMARIZATION_PROMPT
        if not text.strip():
            if self.prompt_path_reported != path:
                self.prompt_path_reported = path
                logger.warning("context-simple: summarization_prompt_path %r is empty; using the default", path)
            return DEFAULT_SUMMARIZATION_PROMPT
        return text

    def build_request(
        self, span: list[Message], fork_prefix: dict[str, Any] | None, inputs: SummaryInputs
    ) -> tuple[Any, str]:
        """(ChatRequest, mode used): forked when armed and every check passes, else standalone."""
        from amplifier_core.message_models import ChatRequest
        from amplifier_core.message_models import Message as ChatMessage

        settings = inputs.settings
        prompt = self.prompt(settings.summarization_prompt_path)
        requested = settings.summary_call_mode
        stats = {
            "mode_requested": requested,
            "mode_used": SUMMARY_CALL_MODE_STANDALONE,
            "reason": None,
            "prefix_messages": 0,
            "prefix_source": None,
            "prefix_views_since_send": None if self.sent_serial is None else self.view_serial - self.sent_serial,
            "fork_fallbacks": self.fork_fallbacks,
        }
        if fork_armed(settings.compaction_strategy, settings.summary_call_mode):
            reason = self.fork_refusal(span, fork_prefix, inputs)
            if reason is None:
                try:
                    messages = [ChatMessage(**wire_form(m)) for m in fork_prefix["messages"]]
                    messages.append(ChatMessage(role="user", content=fork_instruction(prompt, span)))
                    request = ChatRequest(messages=messages, tools=self.sent_tools, model=self.sent_model)
                except Exception as exc:
                    reason = f"the forked request could not be built ({type(exc).__name__}: {str(exc)[:120]})"
                else:
                    stats.update(mode_used=SUMMARY_CALL_MODE_FORK, prefix_messages=len(messages) - 1)
                    stats["prefix_source"] = fork_prefix["source"]
                    self.last_call = stats
                    return request, SUMMARY_CALL_MODE_FORK
            self.note_fork_fallback(reason)
            stats.update(reason=reason, fork_fallbacks=self.fork_fallbacks)
        formatted = format_messages_for_summarization(span)
        messages = [ChatMessage(role="system", content=prompt), ChatMessage(role="user", content=formatted)]
        self.last_call = stats
        return ChatRequest(messages=messages, model=settings.summarization_model), SUMMARY_CALL_MODE_STANDALONE

    # ----- fork mode ---------------------------------------------------------------------------

    def capture_fork_prefix(self, armed: bool) -> dict[str, Any] | None:
        """The prefix a forked summary call replays, taken at trigger time (None unless ``armed``)."""
        if not armed:
            return None
        if self.sent_messages is not None:
            messages, source = self.sent_messages, FORK_PREFIX_SOURCE_WIRE
        elif self.last_request_view is not None:
            messages, source = self.last_request_view, FORK_PREFIX_SOURCE_VIEW
        else:
            self.fork_prefix_source = None
            return None
        self.fork_prefix_source = source
        return {"messages": list(messages), "source": source}

    def fork_refusal(
        self, span: list[Message], fork_prefix: dict[str, Any] | None, inputs: SummaryInputs
    ) -> str | None:
        """Why this summary call cannot fork (checked in order), or None."""
        if not self.sent_tools_supplied:
            return "note_request_sent() has never been called, so the tools of the cached prefix are unknown"
        if inputs.settings.summarization_model is not None:
            return "summarization_model points the summarizer at a different model, whose cache the prefix cannot hit"
        prefix = (fork_prefix or {}).get("messages") or []
        if not prefix:
            return "no request has been recorded yet, so there is no prefix to fork"
        if has_tool_calls(prefix[-1]):
            return "the recorded prefix ends with unanswered tool_calls"
        if not inputs.contains_span(prefix, span):
            return "the span to summarize is not present in the recorded prefix"
        return None

    def note_fork_fallback(self, reason: str) -> None:
        """Count a refusal to fork; warn once per distinct reason."""
        self.fork_fallbacks += 1
        if reason not in self.fork_reasons_logged:
            self.fork_reasons_logged.add(reason)
            logger.warning("context-simple: summary_call_mode=fork ran STANDALONE instead: %s", reason)

    # ----- the swap ----------------------------------------------------------------------------

    def swap(
        self, non_system: list[Message], inputs: SummaryInputs, next_seq: int, guard: Any
    ) -> tuple[list[Message], bool, Message | None]:
        """Absorb the pending summary's span (sticky removals) and put the summary at the tail: (view,
        swapped, the summary for the caller to store with ``_seq`` ``next_seq``, or None)."""
        decisions, messages = inputs.decisions, inputs.messages
        pending = decisions._pending_summary
        # Never append between a tool call and its results, in the history or in this request's
        # snapshot of it (messages may have arrived while the request awaited a hook).
        if pending is None or history_tail_open(messages) or (non_system and has_tool_calls(non_system[-1])):
            return non_system, False, None
        if history_moved_on(non_system, messages):
            return non_system, False, None  # appended now, the summary would not sit at this view's tail
        decisions._pending_summary = None
        removed = decisions._removed_seqs
        absorbed = [m for m in messages if seq_of(m) in pending["seqs"] and seq_of(m) not in removed]
        if not absorbed:
            logger.info("context-simple: pending summary discarded: its span is already gone")
            return non_system, False, None
        counts = inputs.counts
        replaced = counts.total([view_form(m, inputs) for m in absorbed])
        if replaced < absorb_floor(inputs.budget, inputs.settings):
            # The ladder took most of the span meanwhile: what is left is not worth a boundary.
            logger.info("context-simple: pending summary discarded: %d tokens left of its span", replaced)
            return non_system, False, None
        summary = summary_message(pending["text"], next_seq, guard)
        size = counts.count(summary)
        if size >= replaced:
            logger.warning(
                "context-simple: summary refused: %d tokens would replace a span of %d; progressive compaction instead",
                size,
                replaced,
            )
            return non_system, False, None
        if pending.get(UNVERIFIED):
            decisions._summary_armed = True  # the summary it was armed for is gone: ask again
            inputs.faults["restore_summaries_dropped"] += 1
            logger.warning("context-simple: a restored pending summary was dropped instead of adopted (unverified)")
            return non_system, False, None
        for message in absorbed:
            decisions.record_removed(seq_of(message))
        decisions._summary_absorbed_count += len(absorbed)
        decisions._summary_cooldown_left = inputs.settings.summary_cooldown_requests
        return [*non_system, summary], True, summary
