"""The search behind ``context_recall``: which stored messages hold a query, in bounded steps.

A literal query (the default) is found with ``str.find`` on each message's lowercase text, in time
linear in the text. A regular expression runs on ``recall_regex``'s linear-time automaton, and only on
the lines that hold the literal every match needs (when it has one). Nothing here backtracks.

``Search.steps()`` does the work between checkpoints (a message's text built, ``FIND_WINDOW``
characters found through, or one automaton step), so ``run`` stops at a deadline even inside one huge
message, and ``run_async`` also gives the event loop its turn at least every ``slice_s``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .evidence_text import content_texts
from .recall_regex import Pattern
from .token_counter import tool_call_parts

Message = dict[str, Any]
Span = tuple[int, int]  # (start of a matching line, the match's position) in a message's text

LINE_CHARS_SHOWN = 300  # a matching line longer than this is shown around the match
MAX_LINES_PER_MESSAGE = 40  # matching lines read from one message (the output shows far fewer)
FIND_WINDOW = 1 << 20  # characters ``str.find`` reads between two checkpoints
CACHE_CHARS = 64_000_000  # characters of searchable text kept; past it, texts are built per search
_BY_LINE_CHECKPOINT = 4_096  # lines lowered one by one between two checkpoints (the rare fallback)


@dataclass(frozen=True)
class Query:
    pattern: Pattern | None  # None: a literal query
    needle: str  # the literal, lowercased
    role: str | None
    first: int
    last: int | None
    max_results: int

    def admits(self, seq: int, role: Any) -> bool:
        """The role and range filters."""
        in_range = self.first <= seq and (self.last is None or seq <= self.last)
        return in_range and (self.role is None or role == self.role)


@dataclass(frozen=True)
class Hit:
    seq: int
    label: str
    lines: tuple[str, ...]


def message_text(message: Message) -> str:
    """What a recall searches in a message: its text (blocks included) and its tool calls."""
    parts = content_texts(message.get("content"))
    for call in message.get("tool_calls") or ():
        name, args = tool_call_parts(call)
        parts.append(f"{name}({args})")
    return "\n".join(parts)


class MessageTexts:
    """The searchable text of the current history's messages and its lowercase, built once each.

    Bounded by ``max_chars`` (past it a text is built for each search, not kept). The manager owns one
    and clears it when the history is replaced (``set_messages``, ``clear``), so it never holds a
    history that is gone. An entry is rebuilt when its message's content object was replaced.
    """

    def __init__(self, max_chars: int = CACHE_CHARS) -> None:
        self.max_chars = max_chars
        self.clear()

    def clear(self) -> None:
        self._entries: dict[int, tuple[Message, Any, str, str, int]] = {}
        self.chars = 0
        self.generation = getattr(self, "generation", -1) + 1  # a search that started before sees it changed
        self.traffic: Any = None  # recall.py's reader of the tool's own traffic in this history

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, message: Message) -> tuple[str, str]:
        """(searchable text, its lowercase)."""
        content = message.get("content")
        entry = self._entries.get(id(message))
        if entry is not None and entry[0] is message and entry[1] is content:
            return entry[2], entry[3]
        text = message_text(message)
        lowered = text.lower()
        if lowered == text:
            lowered = text  # one copy, not two
        size = (len(lowered) if lowered is not text else 0) + (len(text) if text is not content else 0)
        if entry is not None:
            del self._entries[id(message)]
            self.chars -= entry[4]
        if self.chars + size <= self.max_chars:
            self._entries[id(message)] = (message, content, text, lowered, size)
            self.chars += size
        return text, lowered


def literal_spans(text: str, lowered: str, needle: str) -> Iterator[Span | None]:
    """``(line start, match start)`` for each line of ``text`` where ``needle`` (lowercase) starts;
    ``None`` at checkpoints."""
    if len(lowered) != len(text):  # a character whose lowercase is longer: offsets differ, read by line
        yield from _literal_spans_by_line(text, needle)
        return
    at, size, width = 0, len(text), len(needle)
    while at < size:
        stop = min(size, at + FIND_WINDOW + width - 1)
        found = lowered.find(needle, at, stop)
        if found < 0:
            if stop >= size:
                return
            at = stop - width + 1  # windows overlap, so a match across their border is found
            yield None
            continue
        yield text.rfind("\n", 0, found) + 1, found
        newline = text.find("\n", found)
        if newline < 0:
            return
        at = newline + 1


def _literal_spans_by_line(text: str, needle: str) -> Iterator[Span | None]:
    start = 0
    for count, line in enumerate(text.split("\n")):
        column = line.lower().find(needle)
        if column >= 0:
            yield start, start + min(column, len(line))
        start += len(line) + 1
        if count % _BY_LINE_CHECKPOINT == _BY_LINE_CHECKPOINT - 1:
            yield None


def regex_spans(text: str, lowered: str, pattern: Pattern) -> Iterator[Span | None]:
    """``(line start, match end)`` for each line of ``text`` holding a match; ``None`` at checkpoints.
    Only lines holding the pattern's required literal are read by the automaton."""
    if not pattern.literal or len(lowered) != len(text):
        yield from pattern.matching_lines(text)
        return
    for candidate in literal_spans(text, lowered, pattern.literal):
        if candidate is None:
            yield None
            continue
        start = candidate[0]
        end = text.find("\n", start)
        for span in pattern.matching_lines(text[start : end if end >= 0 else len(text)]):
            if span is not None:
                yield start, start + span[1]
                break
            yield None


@dataclass
class Search:
    """One search over ``messages``, newest first: hits, how many messages matched, and whether the time
    budget stopped it (and at which message). ``skip`` holds the seqs never searched (recall's own
    traffic, read by ``before``); ``label(index, seq)`` names a hit."""

    messages: list[Message]
    query: Query
    texts: MessageTexts
    skip: set[int]
    label: Callable[[int, int], str]
    before: Iterator[None] = field(default_factory=lambda: iter(()))  # steps of work first (may fill ``skip``)
    hits: list[Hit] = field(default_factory=list)
    matched: int = 0
    stopped_at: int | None = None  # the seq being read when the time budget ran out
    replaced: bool = False  # the history was replaced (set_messages, clear) during the search
    _reading: int | None = None

    @property
    def stopped(self) -> bool:
        return self.stopped_at is not None

    def steps(self) -> Iterator[None]:
        """Do the search, yielding at each checkpoint: after ``FIND_WINDOW`` characters of skipped
        messages, before reading a message that may match, and inside a long read."""
        yield from self.before
        query, messages, skip, texts = self.query, self.messages, self.skip, self.texts
        required = query.needle if query.pattern is None else query.pattern.literal  # every match holds it
        unread = FIND_WINDOW
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            metadata = message.get("metadata")  # seq_of, inlined: this loop runs over the whole history
            seq = metadata.get("_seq") if isinstance(metadata, dict) else None  # stored ones are dict subclasses
            if type(seq) is not int or seq in skip or not query.admits(seq, message.get("role")):
                continue
            self._reading = seq
            text, lowered = texts.get(message)
            unread -= len(text)
            if required and required not in lowered:  # one C-speed pass decides most messages
                if unread <= 0:
                    unread = FIND_WINDOW
                    yield
                continue
            unread = FIND_WINDOW
            yield
            found: list[Span] = []
            enough = 1 if len(self.hits) >= query.max_results else MAX_LINES_PER_MESSAGE
            try:
                for span in self._spans(text, lowered):
                    if span is None:
                        yield
                    else:
                        found.append(span)
                        if len(found) >= enough:
                            break
            finally:  # also when the deadline closes the search here: what was found counts
                self._record(index, seq, text, found)
        self._reading = None

    def stop(self, replaced: bool = False) -> None:
        """The time budget ran out; or the history was replaced meanwhile, and nothing found counts."""
        self.stopped_at = self._reading if self._reading is not None else -1
        if replaced:
            self.replaced = True
            self.hits.clear()
            self.matched = 0

    def _spans(self, text: str, lowered: str) -> Iterator[Span | None]:
        if self.query.pattern is None:
            return literal_spans(text, lowered, self.query.needle)
        return regex_spans(text, lowered, self.query.pattern)

    def _record(self, index: int, seq: int, text: str, found: list[Span]) -> None:
        if not found:
            return
        self.matched += 1
        if len(self.hits) < self.query.max_results:
            lead = LINE_CHARS_SHOWN // 3 if self.query.pattern is None else 2 * LINE_CHARS_SHOWN // 3
            self.hits.append(Hit(seq, self.label(index, seq), shown_lines(text, found, lead)))


def run(search: Search, budget_s: float, clock: Callable[[], float] = time.monotonic) -> Search:
    """Run ``search`` until done or ``budget_s`` has passed (checked at every checkpoint)."""
    deadline = clock() + budget_s
    steps = search.steps()
    for _ in steps:
        if clock() > deadline:
            steps.close()
            search.stop()
            break
    return search


async def run_async(
    search: Search, budget_s: float, slice_s: float, clock: Callable[[], float] = time.monotonic
) -> Search:
    """``run``, giving the event loop its turn whenever ``slice_s`` has passed since the last one. A
    history replaced meanwhile (its texts cleared) ends the search with nothing found."""
    deadline = clock() + budget_s
    resume = clock() + slice_s
    generation = search.texts.generation
    steps = search.steps()
    for _ in steps:
        now = clock()
        if now >= resume:
            await asyncio.sleep(0)
            now = resume = clock()
            resume += slice_s
        replaced = search.texts.generation != generation
        if replaced or now > deadline:
            steps.close()
            search.stop(replaced)
            break
    return search


def shown_lines(text: str, found: list[Span], lead: int) -> tuple[str, ...]:
    """Each matching line (marked "> ", cut around the match) with the line before and after it."""
    matching = {start for start, _ in found}
    out: list[str] = []
    shown: set[int] = set()
    for start, at in found:
        before = text.rfind("\n", 0, start - 1) + 1 if start > 0 else None
        after = text.find("\n", start)
        for line_start in (before, start, after + 1 if after >= 0 else None):
            if line_start is None or line_start in shown or (line_start != start and line_start in matching):
                continue
            shown.add(line_start)
            end = text.find("\n", line_start)
            end = len(text) if end < 0 else end
            if line_start == start:
                out.append("> " + _excerpt(text, start, end, at, lead))
            else:
                out.append("  " + text[line_start : min(end, line_start + LINE_CHARS_SHOWN)])
    return tuple(out)


def _excerpt(text: str, start: int, end: int, at: int, lead: int) -> str:
    """The line ``text[start:end]``, or ``LINE_CHARS_SHOWN`` characters of it from ``lead`` before ``at``."""
    if end - start <= LINE_CHARS_SHOWN:
        return text[start:end]
    begin = max(start, min(at - lead, end - LINE_CHARS_SHOWN + 6))
    stop = begin + LINE_CHARS_SHOWN - 6
    return ("..." if begin > start else "") + text[begin:stop] + ("..." if stop < end else "")
