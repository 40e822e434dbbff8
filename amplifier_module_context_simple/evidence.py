"""Evidence-preserving compaction: the ladder, then a ledger of what it removed (opt-in).

With ``evidence_ledger_share`` > 0, a compaction boundary runs the ordinary ladder against the target
minus the ledger's share, then fills the room left (at least that share, never past 80% of the trigger)
with the key lines of every message removed or stubbed so far (``ledger.py``). The ledger is recorded
as ``(anchor seq, text, removals covered)`` and re-inserted with the same bytes, at the same place, on
every request until the next boundary; ``snapshot_state`` carries it. With the share at 0 (the default)
this module calls the ladder exactly as before and changes nothing.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any, NamedTuple

from . import evidence_text as et
from . import ledger, ledger_dense
from . import ledger_segments as segs
from .estimate import seq_of
from .floor import Goals
from .ladder import LadderPlan
from .recall import NOTE as RECALL_NOTE
from .recall import recall_traffic
from .replay import is_real_user_message

Message = dict[str, Any]
logger = logging.getLogger("amplifier_module_context_simple")
LEDGER_CEILING = 0.8  # a ledger never takes the view past this share of the trigger
# The most of a ledger's room what the agent did (its removed tool calls' lines) takes before tool
# output; the output always keeps the rest (``evidence_ledger_dense`` lets the calls take it all).
CALL_ROOM_SHARE = ledger_dense.STANDARD.call_room_share


class LedgerInputs(NamedTuple):
    """What the ledger reads besides the history's decisions (the manager builds it at a boundary)."""

    share: float  # evidence_ledger_share
    segments: bool  # evidence_ledger_segments
    dense: bool  # evidence_ledger_dense (ledger_dense.py)
    target_usage: float
    compact_threshold: float
    user_words_share: float
    messages: list[Message]  # the stored history
    recall_mounted: bool
    counts: Any  # the count cache (estimate.CountCache)
    derive: Callable[..., Message]  # the rewrite memo (tool_results.ToolResults.derive)
    faults: Counter[str]


def recall_note(recall_mounted: bool) -> str:
    """The preamble's line about ``context_recall``, only while the tool is mounted."""
    return RECALL_NOTE if recall_mounted else ""


class EvidenceLedger:
    """The evidence ledger: what removed messages leave behind. Its decisions (``_ledger``: (anchor seq,
    text, removals covered), ``_ledger_segments``) are the history's (decisions.py) and are passed in as
    ``decisions``; this object keeps only caches: each message's reading, the ledger's message objects."""

    def __init__(self) -> None:
        self.reads: dict[int, tuple[Message, Any]] = {}  # the ledger's reading per _seq
        self._segment_cache: dict[str, Message] = {}
        self._ledger_cache: tuple[Any, Message] | None = None

    def plan(
        self,
        working: list[Message],
        target: int,
        ladder: Callable[[list[Message], int], LadderPlan],
        goals: Goals,
        decisions: Any,
        inputs: LedgerInputs,
    ) -> LadderPlan:
        """The ladder (``ladder(working, target)``); in evidence mode it leaves the ledger's share free,
        and the ledger fills it."""
        share = inputs.share
        if share <= 0:
            if decisions._ledger is not None or decisions._ledger_segments:
                # The ledger was turned off (preset = None, a snapshot restored into the default): what it
                # recorded leaves at this boundary, whole and for good, instead of being removed by the
                # ladder unrecorded and put back by the next request.
                working = [m for m in working if not ledger.is_ledger(m)]
                decisions._ledger, decisions._ledger_segments = None, ()
            return ladder(working, target)
        working = [m for m in working if not ledger.is_ledger(m)]  # re-decided below
        plan = ladder(working, target - int(target * share))
        cap = plan.goal if plan.goal is not None else min(goals.must, default=None)
        self.add(plan, target, cap, decisions, inputs)
        return plan

    def add(self, plan: LadderPlan, target: int, cap: int | None, decisions: Any, inputs: LedgerInputs) -> None:
        """Decide the ledger of every removed (or stubbed) message so far and put it in the plan's view;
        with ``evidence_ledger_segments``, a new segment of those gone since the kept ones (ledger_segments.py)."""
        removed = decisions._removed_seqs | plan.removed
        before = decisions._removed_seqs | decisions._stubbed_seqs  # gone at earlier boundaries
        # The last boundary's ledger, still in force, is frozen among the kept segments.
        kept = (
            segs.frozen(decisions._ledger_segments, decisions._ledger, len(decisions._removed_seqs), before)
            if inputs.segments
            else ()
        )
        decisions._ledger, decisions._ledger_segments = None, ()
        if not removed:
            return
        known: set[str] = set()
        for message in plan.messages:
            known |= self._evidence_tokens(message, inputs)
        # Stubbed user turns lost their words too: their full text is a source like a removed message's.
        gone = removed | decisions._stubbed_seqs | plan.stubbed
        note = recall_note(inputs.recall_mounted)
        empty = ledger.ledger_message(ledger.ledger_text([], len(removed), note))
        # The ledger's share is its own even when the protected floor already fills the rest, as long
        # as the view stays well under the trigger (else every request would compact again).
        reserve = int(target * inputs.share)
        ceiling = int(target / inputs.target_usage * inputs.compact_threshold * LEDGER_CEILING) - plan.total
        empty_tokens = inputs.counts.count(empty)
        room = min(max(target - plan.total, reserve), ceiling) - empty_tokens
        if cap is not None:
            room = min(room, cap - plan.total - empty_tokens)  # the last rung's goal holds: the ledger yields first
        cost = functools.partial(self._segment_cost, counts=inputs.counts)
        kept = segs.make_room(kept, room, cost)
        start = segs.start_of_new(kept)
        new = {q for q in gone if q >= start or q not in before}  # with those that reach back, if any
        gone_messages = [m for m in inputs.messages if seq_of(m) in new and m.get("role") != "system"]
        if inputs.recall_mounted:  # a recall's results are copies of other messages: never ledger lines
            own = recall_traffic(inputs.messages)
            gone_messages = [m for m in gone_messages if seq_of(m) not in own]
        shown = segs.known_lines(kept)
        for line in shown:
            known |= et.distinctive_tokens(line)
        room -= sum(map(cost, kept))
        sources = [self.lines(m, inputs.faults) for m in gone_messages]
        if inputs.segments:
            sources = [segs.economize(lines) for lines in sources]
        lines = self._select_lines(gone_messages, sources, known, room, inputs) if room > 0 and gone_messages else []
        covered = len(gone_messages) if kept else len(removed)
        lines = self._fit_lines(lines, covered, room + empty_tokens, inputs.counts.counter, note)
        decisions._ledger_segments = kept
        placed = [(segment[0], self._segment_message(segment)) for segment in kept]
        if lines:
            # After the kept segments, so a boundary only appends; near its own span otherwise.
            anchor = max(min(new), kept[-1][0]) if kept else min(removed)
            decisions._ledger = (anchor, ledger.ledger_text(lines, covered, note), len(removed))
            placed.append((anchor, self._ledger_message(decisions._ledger)))
        plan.messages = segs.insert_all(plan.messages, placed)
        plan.total += sum(inputs.counts.count(message) for _anchor, message in placed)

    def _segment_message(self, segment: segs.Segment) -> Message:
        """A kept segment as a message: the same object while it is kept (counts are cached by identity)."""
        cache = self._segment_cache
        message = cache.get(segment[1])
        if message is None:
            if len(cache) > 64:
                cache.clear()
            message = cache[segment[1]] = ledger.ledger_message(segment[1])
        return message

    def _segment_cost(self, segment: segs.Segment, counts: Any) -> int:
        return counts.count(self._segment_message(segment))

    def _select_lines(
        self,
        messages: list[Message],
        sources: list[tuple[ledger.Line, ...]],
        known: set[str],
        room: int,
        inputs: LedgerInputs,
    ) -> list[str]:
        """The ledger's lines, in turn: when user words are kept (``user_words_share``), the stubbed user
        messages' lines first (the user's words that did not fit verbatim reach the ledger, never
        silently); then the removed tool calls' own lines, within ``CALL_ROOM_SHARE`` of the room (what
        the agent did outranks what its tools printed); then every other line in the room left. With
        ``evidence_ledger_dense``, the denser ranking of ledger_dense.py."""
        users = [inputs.user_words_share > 0 and is_real_user_message(m) for m in messages]
        tiers = [([s if u else () for s, u in zip(sources, users, strict=True)], room)] if any(users) else []
        others = [() if u else s for s, u in zip(sources, users, strict=True)]
        ranking = ledger_dense.ranking(inputs.dense)
        calls = [tuple(line for line in lines if line[3]) for lines in others]
        tiers.append((calls, int(room * ranking.call_room_share)))
        tiers.append((others, room))
        return ledger.select_in_turn(tiers, known, room, ranking)

    def _fit_lines(self, lines: list[str], removed: int, allowed: int, count: Any, note: str) -> list[str]:
        """``lines`` cut until their ledger message fits ``allowed`` tokens of the configured counter (the
        selection prices a line at 4 characters a token; hex hashes or CJK cost more): the ceiling holds
        for every counter. The lowest-ranked lines cannot be told apart here, so the oldest go first."""
        while lines:
            actual = count(ledger.ledger_message(ledger.ledger_text(lines, removed, note)))
            if actual <= allowed:
                return lines
            keep = len(lines) * allowed // actual if actual < 2 * allowed else len(lines) // 2
            lines = lines[len(lines) - max(0, min(keep, len(lines) - 1)) :]
        return lines

    def _ledger_message(self, recorded: tuple[int, str, int]) -> Message:
        """The recorded ledger as a message (the same object while the ledger holds, so counts are cached)."""
        cached = self._ledger_cache
        if cached is not None and cached[0] == recorded:
            return cached[1]
        message = ledger.ledger_message(recorded[1])
        self._ledger_cache = (recorded, message)
        return message

    def with_ledger(self, working: list[Message], decisions: Any) -> list[Message]:
        """Re-apply the recorded ledger and kept segments (the same bytes, the same place) between boundaries."""
        recorded, segments = decisions._ledger, decisions._ledger_segments
        placed = [(segment[0], self._segment_message(segment)) for segment in segments]
        if recorded is not None and recorded[2] == len(decisions._removed_seqs):
            placed.append((recorded[0], self._ledger_message(recorded)))  # else a refusal rolled its removals back
        return segs.insert_all(working, placed) if placed else working

    def lines(self, message: Message, faults: Counter[str]) -> tuple[ledger.Line, ...]:
        """A stored message's evidence lines, analysed once per ``_seq`` (kept while the history is, also
        across ``restore_state``); a message whose analysis fails (arguments nested past the
        interpreter's depth, ...) gives its content's lines, or none."""
        seq = seq_of(message)
        entry = self.reads.get(seq) if seq is not None else None
        if entry is not None and entry[0] is message:
            return entry[1]
        lines = _guarded(message, ledger.analyse, (), faults)
        if seq is not None:
            self.reads[seq] = (message, lines)
        return lines

    def pre_read(self, messages: list[Message], share: float, faults: Counter[str]) -> None:
        """In evidence mode, read each long message as it is stored (the read is linear in its text): a
        boundary then reads at most ``PRE_READ_CHARS`` characters of any message it had not read."""
        if share <= 0:
            return
        for message in messages:
            if message.get("role") != "system" and ledger.guarded(_text_chars, message, 0)[0] > PRE_READ_CHARS:
                self.lines(message, faults)

    def _evidence_tokens(self, message: Message, inputs: LedgerInputs) -> frozenset[str]:
        """Distinctive tokens of a message's text (its head and tail when it is huge), memoized per
        ``_seq`` (and per rewrite)."""
        kind = "tokens-rewritten" if message.get("_truncated") or message.get("_stubbed") else "tokens"
        read = lambda: _guarded(message, _known_tokens, frozenset(), inputs.faults)  # noqa: E731
        return inputs.derive(message, kind, None, read)

    def stats(self, working: list[Message], decisions: Any, inputs: LedgerInputs) -> dict[str, int]:
        """Stats keys of the evidence mode (none when it is off, so default stats stay as they were)."""
        if inputs.share <= 0:
            return {}
        in_view = [m for m in working if ledger.is_ledger(m)]
        stats = {
            "ledger_lines": sum(ledger.line_count(m["content"]) for m in in_view),
            "ledger_tokens": sum(inputs.counts.count(m) for m in in_view),
            "ledger_sources": decisions._ledger[2] if decisions._ledger else 0,
        }
        if inputs.segments:
            stats["ledger_segments"] = len(in_view)
        return stats


def _guarded(message: Message, analyse: Any, empty: Any, faults: Counter[str]) -> Any:
    """``analyse(message)`` degraded as ``ledger.guarded`` degrades; a failure is counted in
    ``fault_stats`` and logged once, never raised."""
    result, error = ledger.guarded(analyse, message, empty)
    if error is not None:
        faults["evidence_failures"] += 1
        if faults["evidence_failures"] == 1:
            logger.warning(
                "context-simple: evidence ledger skipped a message it could not read (%s)", type(error).__name__
            )
    return result


KNOWN_SCAN_CHARS = 200_000  # of a huge message's text, the head and tail read for known tokens
PRE_READ_CHARS = 200_000  # a message with more text is read for the ledger when it is stored


def _text_chars(message: Message, arguments: bool = True) -> int:
    texts = et.readable_texts(message) + (et.argument_texts(message) if arguments else [])
    return sum(map(len, texts))


def _known_tokens(message: Message, arguments: bool = True) -> frozenset[str]:
    text = et.message_text(message) if arguments else "\n".join(et.readable_texts(message))
    if len(text) > 2 * KNOWN_SCAN_CHARS:
        text = text[:KNOWN_SCAN_CHARS] + "\n" + text[-KNOWN_SCAN_CHARS:]
    return frozenset(et.distinctive_tokens(text))
