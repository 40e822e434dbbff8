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
from typing import Any

from . import evidence_text as et
from . import ledger, ledger_dense
from . import ledger_segments as segs
from .estimate import seq_of
from .floor import Goals, yield_floor
from .ladder import LadderPlan, plan_compaction
from .recall import NOTE as RECALL_NOTE
from .recall import recall_traffic
from .replay import is_real_user_message

Message = dict[str, Any]
logger = logging.getLogger("amplifier_module_context_simple")
LEDGER_CEILING = 0.8  # a ledger never takes the view past this share of the trigger
# The most of a ledger's room what the agent did (its removed tool calls' lines) takes before tool
# output; the output always keeps the rest (``evidence_ledger_dense`` lets the calls take it all).
CALL_ROOM_SHARE = ledger_dense.STANDARD.call_room_share


class EvidenceMixin:
    """The ledger's state on SimpleContextManager: ``_ledger`` = (anchor seq, text, removals covered)."""

    def _plan_compaction(
        self, working: list[Message], system_tokens: int, target: int, user_words: int = 0, budget: int | None = None
    ) -> LadderPlan:
        """The ladder; in evidence mode it leaves the ledger's share free, and the ledger fills it. The
        newest user messages within ``user_words`` tokens are never stubbed. With ``budget``, the
        protections (in messages or tokens) and the last rung's goals follow it (floor.py)."""
        share = self.evidence_ledger_share
        protections, goals = self._floor_settings(budget)
        rung = functools.partial(yield_floor, goals=goals) if goals != Goals() else None
        ladder_args = (
            self.protected_recent,
            self.protected_tool_results,
            self._ladder_ops(),
            user_words,
            protections,
            rung,
        )
        if share <= 0:
            if self._ledger is not None or self._ledger_segments:
                # The ledger was turned off (preset = None, a snapshot restored into the default): what it
                # recorded leaves at this boundary, whole and for good, instead of being removed by the
                # ladder unrecorded and put back by the next request.
                working = [m for m in working if not ledger.is_ledger(m)]
                self._ledger, self._ledger_segments = None, ()
            return plan_compaction(working, system_tokens, target, *ladder_args)
        working = [m for m in working if not ledger.is_ledger(m)]  # re-decided below
        plan = plan_compaction(working, system_tokens, target - int(target * share), *ladder_args)
        self._add_ledger(plan, target, plan.goal if plan.goal is not None else min(goals.must, default=None))
        return plan

    def _add_ledger(self, plan: LadderPlan, target: int, cap: int | None = None) -> None:
        """Decide the ledger of every removed (or stubbed) message so far and put it in the plan's view;
        with ``evidence_ledger_segments``, a new segment of those gone since the kept ones (ledger_segments.py)."""
        removed = self._removed_seqs | plan.removed
        before = self._removed_seqs | self._stubbed_seqs  # gone at earlier boundaries
        # The last boundary's ledger, still in force, is frozen among the kept segments.
        kept = (
            segs.frozen(self._ledger_segments, self._ledger, len(self._removed_seqs), before)
            if self.evidence_ledger_segments
            else ()
        )
        self._ledger, self._ledger_segments = None, ()
        if not removed:
            return
        known: set[str] = set()
        for message in plan.messages:
            known |= self._evidence_tokens(message)
        # Stubbed user turns lost their words too: their full text is a source like a removed message's.
        gone = removed | self._stubbed_seqs | plan.stubbed
        empty = ledger.ledger_message(ledger.ledger_text([], len(removed), self._recall_note()))
        # The ledger's share is its own even when the protected floor already fills the rest, as long
        # as the view stays well under the trigger (else every request would compact again).
        reserve = int(target * self.evidence_ledger_share)
        ceiling = int(target / self.target_usage * self.compact_threshold * LEDGER_CEILING) - plan.total
        empty_tokens = self._counts().count(empty)
        room = min(max(target - plan.total, reserve), ceiling) - empty_tokens
        if cap is not None:
            room = min(room, cap - plan.total - empty_tokens)  # the last rung's goal holds: the ledger yields first
        kept = segs.make_room(kept, room, self._segment_cost)
        start = segs.start_of_new(kept)
        new = {q for q in gone if q >= start or q not in before}  # with those that reach back, if any
        gone_messages = [m for m in self.messages if seq_of(m) in new and m.get("role") != "system"]
        if self._recall_mounted:  # a recall's results are copies of other messages: never ledger lines
            own = recall_traffic(self.messages)
            gone_messages = [m for m in gone_messages if seq_of(m) not in own]
        shown = segs.known_lines(kept)
        for line in shown:
            known |= et.distinctive_tokens(line)
        room -= sum(map(self._segment_cost, kept))
        sources = [self._ledger_lines(m) for m in gone_messages]
        if self.evidence_ledger_segments:
            sources = [segs.economize(lines) for lines in sources]
        lines = self._select_lines(gone_messages, sources, known, room) if room > 0 and gone_messages else []
        covered = len(gone_messages) if kept else len(removed)
        lines = self._fit_lines(lines, covered, room + empty_tokens)
        self._ledger_segments = kept
        placed = [(segment[0], self._segment_message(segment)) for segment in kept]
        if lines:
            # After the kept segments, so a boundary only appends; near its own span otherwise.
            anchor = max(min(new), kept[-1][0]) if kept else min(removed)
            self._ledger = (anchor, ledger.ledger_text(lines, covered, self._recall_note()), len(removed))
            placed.append((anchor, self._ledger_message()))
        plan.messages = segs.insert_all(plan.messages, placed)
        plan.total += sum(self._counts().count(message) for _anchor, message in placed)

    def _recall_note(self) -> str:
        """The preamble's line about ``context_recall``, only while the tool is mounted."""
        return RECALL_NOTE if self._recall_mounted else ""

    def _segment_message(self, segment: segs.Segment) -> Message:
        """A kept segment as a message: the same object while it is kept (counts are cached by identity)."""
        cache = self.__dict__.setdefault("_segment_cache", {})
        message = cache.get(segment[1])
        if message is None:
            if len(cache) > 64:
                cache.clear()
            message = cache[segment[1]] = ledger.ledger_message(segment[1])
        return message

    def _segment_cost(self, segment: segs.Segment) -> int:
        return self._counts().count(self._segment_message(segment))

    def _select_lines(
        self, messages: list[Message], sources: list[tuple[ledger.Line, ...]], known: set[str], room: int
    ) -> list[str]:
        """The ledger's lines, in turn: when user words are kept (``user_words_share``), the stubbed user
        messages' lines first (the user's words that did not fit verbatim reach the ledger, never
        silently); then the removed tool calls' own lines, within ``CALL_ROOM_SHARE`` of the room (what
        the agent did outranks what its tools printed); then every other line in the room left. With
        ``evidence_ledger_dense``, the denser ranking of ledger_dense.py."""
        users = [self.user_words_share > 0 and is_real_user_message(m) for m in messages]
        tiers = [([s if u else () for s, u in zip(sources, users, strict=True)], room)] if any(users) else []
        others = [() if u else s for s, u in zip(sources, users, strict=True)]
        ranking = ledger_dense.ranking(self.evidence_ledger_dense)
        calls = [tuple(line for line in lines if line[3]) for lines in others]
        tiers.append((calls, int(room * ranking.call_room_share)))
        tiers.append((others, room))
        return ledger.select_in_turn(tiers, known, room, ranking)

    def _fit_lines(self, lines: list[str], removed: int, allowed: int) -> list[str]:
        """``lines`` cut until their ledger message fits ``allowed`` tokens of the configured counter (the
        selection prices a line at 4 characters a token; hex hashes or CJK cost more): the ceiling holds
        for every counter. The lowest-ranked lines cannot be told apart here, so the oldest go first."""
        count = self._counts().counter
        while lines:
            actual = count(ledger.ledger_message(ledger.ledger_text(lines, removed, self._recall_note())))
            if actual <= allowed:
                return lines
            keep = len(lines) * allowed // actual if actual < 2 * allowed else len(lines) // 2
            lines = lines[len(lines) - max(0, min(keep, len(lines) - 1)) :]
        return lines

    def _ledger_message(self) -> Message:
        """The recorded ledger as a message (the same object while the ledger holds, so counts are cached)."""
        cached = getattr(self, "_ledger_cache", None)
        if cached is not None and cached[0] == self._ledger:
            return cached[1]
        message = ledger.ledger_message(self._ledger[1])  # type: ignore[index]
        self._ledger_cache = (self._ledger, message)
        return message

    def _with_ledger(self, working: list[Message]) -> list[Message]:
        """Re-apply the recorded ledger and kept segments (the same bytes, the same place) between boundaries."""
        placed = [(segment[0], self._segment_message(segment)) for segment in self._ledger_segments]
        if self._ledger is not None and self._ledger[2] == len(self._removed_seqs):
            placed.append((self._ledger[0], self._ledger_message()))  # else a refusal rolled its removals back
        return segs.insert_all(working, placed) if placed else working

    def _ledger_lines(self, message: Message) -> tuple[ledger.Line, ...]:
        """A stored message's evidence lines, analysed once per ``_seq`` (kept while the history is, also
        across ``restore_state``); a message whose analysis fails (arguments nested past the
        interpreter's depth, ...) gives its content's lines, or none."""
        seq = seq_of(message)
        entry = self._evidence_reads.get(seq) if seq is not None else None
        if entry is not None and entry[0] is message:
            return entry[1]
        lines = self._guarded(message, ledger.analyse, ())
        if seq is not None:
            self._evidence_reads[seq] = (message, lines)
        return lines

    def _pre_read(self, messages: list[Message]) -> None:
        """In evidence mode, read each long message as it is stored (the read is linear in its text): a
        boundary then reads at most ``PRE_READ_CHARS`` characters of any message it had not read."""
        if self.evidence_ledger_share <= 0:
            return
        for message in messages:
            if message.get("role") != "system" and ledger.guarded(_text_chars, message, 0)[0] > PRE_READ_CHARS:
                self._ledger_lines(message)

    def _evidence_tokens(self, message: Message) -> frozenset[str]:
        """Distinctive tokens of a message's text (its head and tail when it is huge), memoized per
        ``_seq`` (and per rewrite)."""
        kind = "tokens-rewritten" if message.get("_truncated") or message.get("_stubbed") else "tokens"
        return self._derive(message, kind, None, lambda: self._guarded(message, _known_tokens, frozenset()))

    def _guarded(self, message: Message, analyse: Any, empty: Any) -> Any:
        """``analyse(message)`` degraded as ``ledger.guarded`` degrades; a failure is counted in
        ``fault_stats`` and logged once, never raised."""
        result, error = ledger.guarded(analyse, message, empty)
        if error is not None:
            self._fault_counts["evidence_failures"] += 1
            if self._fault_counts["evidence_failures"] == 1:
                logger.warning(
                    "context-simple: evidence ledger skipped a message it could not read (%s)", type(error).__name__
                )
        return result

    def _evidence_stats(self, working: list[Message]) -> dict[str, int]:
        """Stats keys of the evidence mode (none when it is off, so default stats stay as they were)."""
        if self.evidence_ledger_share <= 0:
            return {}
        in_view = [m for m in working if ledger.is_ledger(m)]
        stats = {
            "ledger_lines": sum(ledger.line_count(m["content"]) for m in in_view),
            "ledger_tokens": sum(self._counts().count(m) for m in in_view),
            "ledger_sources": self._ledger[2] if self._ledger else 0,
        }
        if self.evidence_ledger_segments:
            stats["ledger_segments"] = len(in_view)
        return stats


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
