"""The search behind ``context_recall``: which stored messages match a query, in bounded steps.

A literal query's words (recall_rank.py) are found with ``str.find``/``str.count`` on each message's
lowercase text, in time linear in the text; a message holding every word is analysed line by line for
its tier. A regular expression runs on ``recall_regex``'s linear-time automaton, and only on the lines
that hold the literal every match needs (when it has one). Nothing here backtracks.

``Search.steps()`` does the work between checkpoints (a message's text built, ``FIND_WINDOW``
characters found through, or one automaton step), so ``run`` stops at a deadline even inside one huge
message, and ``run_async`` also gives the event loop its turn at least every ``slice_s``. When no
message holds every word, the messages holding the most weight of them are analysed instead (at most
``PARTIAL_ANALYSED``), so a query with one wrong word still finds the others.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import recall_rank as rank
from .recall_regex import Pattern
from .recall_source import source_key
from .recall_text import message_text

Message = dict[str, Any]
Span = tuple[int, int]  # (start of a matching line, the match's position) in a message's text

FIND_WINDOW = 1 << 20  # characters ``str.find`` reads between two checkpoints
CACHE_CHARS = 64_000_000  # characters of searchable text kept; past it, texts are built per search
PARTIAL_ANALYSED = 40  # messages holding some of the words analysed when none holds them all
_DOTTED_I = "\u0130"  # the one character whose lowercase is two characters long


@dataclass(frozen=True)
class Query:
    pattern: Pattern | None  # None: a literal query
    needle: str  # the query, lowercased, runs of white space as one space (a literal's phrase)
    role: str | None
    first: int
    last: int | None
    max_results: int
    words: tuple[str, ...] = ()  # a literal's words (recall_rank.query_words)
    offset: int = 0  # lines of each source's output skipped (paging: recall_source.py)


@dataclass
class Found:
    """A matching message: its place, tier and lines (recall_rank.Analysis; for a regular expression,
    ``(line start, match end)``), which words it holds, and its rank score."""

    index: int
    seq: int
    tier: int
    lines: tuple[tuple[int, int], ...]
    mask: int
    counts: tuple[int, ...] = ()
    size: int = 0
    score: float = 0.0


def fold(text: str) -> str:
    """``text`` in lowercase with the same length (so offsets agree): the dotted capital I reads "i"."""
    lowered = text.replace(_DOTTED_I, "i").lower()
    if len(lowered) != len(text):  # a character a later Unicode lowers to several: kept as it is
        lowered = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    return lowered


class MessageTexts:
    """The searchable text of the current history's messages and its lowercase, built once each.

    Bounded by ``max_chars`` (past it a text is built for each search, not kept). The manager owns one
    and clears it when the history is replaced (``set_messages``, ``clear``) or edited in place, so it
    never holds a history that is gone. An entry is rebuilt when its message's content object was
    replaced.
    """

    def __init__(self, max_chars: int = CACHE_CHARS) -> None:
        self.max_chars = max_chars
        self.clear()

    def clear(self) -> None:
        self._entries: dict[int, tuple[Message, Any, str, str, int]] = {}
        self.chars = 0
        self.generation = getattr(self, "generation", -1) + 1  # a search that started before sees it changed
        self.history: Any = None  # recall.py's reader of this history (own traffic, the call of each result)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, message: Message) -> tuple[str, str]:
        """(searchable text, its lowercase of the same length)."""
        content = message.get("content")
        entry = self._entries.get(id(message))
        if entry is not None and entry[0] is message and entry[1] is content:
            return entry[2], entry[3]
        text = message_text(message)
        lowered = fold(text)
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


def regex_spans(text: str, lowered: str, pattern: Pattern) -> Iterator[Span | None]:
    """``(line start, match end)`` for each line of ``text`` holding a match; ``None`` at checkpoints.
    Only lines holding the pattern's required literal are read by the automaton."""
    if not pattern.literal:
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
    """One search over ``messages`` (newest first): the messages that match, how many, and whether the
    time budget stopped it (and at which message). ``skip`` holds the seqs never searched (recall's own
    traffic, read by ``before``); ``call_texts[index]`` is the lowercase text of the call the tool result
    at ``index`` answers (none for any other message); ``hidden`` maps the seqs the current view lacks (removed,
    truncated, ...) to a word saying how; ``label(index, seq)`` names a hit."""

    messages: list[Message]
    query: Query
    texts: MessageTexts
    skip: set[int]
    label: Callable[[int, int], str]
    call_texts: Mapping[int, str] = field(default_factory=dict)
    source_texts: Mapping[int, tuple[str, str]] = field(default_factory=dict)  # a result -> what names its call
    hidden: Mapping[int, str] = field(default_factory=dict)
    before: Iterator[None] = field(default_factory=lambda: iter(()))  # steps of work first (may fill ``skip``)
    found: list[Found] = field(default_factory=list)  # every match, ranked once the search is done
    partial: list[Found] = field(default_factory=list)  # messages holding some words, when none holds all
    matched: int = 0
    documents: int = 0  # messages searched (the filters admitted)
    holding: list[int] = field(default_factory=list)  # per word, the messages holding it
    chars: int = 0  # their text, in all
    stopped_at: int | None = None  # the seq being read when the time budget ran out
    replaced: bool = False  # the history was replaced or edited (set_messages, clear, ...) during the search
    _reading: int | None = None
    some: list[Found] = field(default_factory=list)  # messages holding some of the words, not all
    sources: list[Found] = field(default_factory=list)  # results whose call holds every word (tier PHRASE:
    # the query as typed), best first (recall_source.source_key)

    def __post_init__(self) -> None:
        self.holding = [0] * len(self.query.words)

    @property
    def stopped(self) -> bool:
        return self.stopped_at is not None

    def steps(self) -> Iterator[None]:
        """Do the search, yielding at each checkpoint; the matches are ranked at the end (also when the
        deadline closes the search early, by :meth:`stop`)."""
        yield from self.before
        yield from self._scan()
        if self.query.pattern is None and not self.found and self.some:
            yield from self._partial_steps()
        self._reading = None
        self.rank()

    def _scan(self) -> Iterator[None]:
        """One pass, newest first: the filters and a C-speed test decide most messages (this loop runs over
        the whole history, so it is kept flat); a message that may match is read in steps after a
        checkpoint, as is every ``FIND_WINDOW`` characters of the others."""
        query, messages, skip, get, calls = self.query, self.messages, self.skip, self.texts.get, self.call_texts.get
        whole_call = self.source_texts.get
        first, last, only, pattern, words = query.first, query.last, query.role, query.pattern, query.words
        required = pattern.literal if pattern is not None else ""
        single = words[0] if len(words) == 1 else None
        full = (1 << len(words)) - 1 if pattern is None else 1  # a regular expression: one "word"
        unread, reads, documents, chars = FIND_WINDOW, max(1, len(words)), 0, 0
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            metadata = message.get("metadata")  # seq_of, inlined
            seq = metadata.get("_seq") if isinstance(metadata, dict) else None  # stored ones are dict subclasses
            if type(seq) is not int or seq in skip or seq < first or (last is not None and seq > last):
                continue
            if only is not None and message.get("role") != only:
                continue
            self._reading = seq
            text, lowered = get(message)
            size = len(text)
            documents += 1
            chars += size
            unread -= size * reads
            if pattern is not None:
                mask = 0 if required and required not in lowered else 1
            else:
                called = calls(index, "")
                source = whole_call(index)
                if source is not None and all(word in source[1] for word in words):
                    tier = rank.PHRASE if query.needle in source[1] else rank.LINE
                    self.sources.append(Found(index, seq, tier, (), full, size=size))
                if size > FIND_WINDOW:
                    self.documents, self.chars = documents, chars  # counted so far, for a stop meanwhile
                    mask = yield from _mask_in_steps(words, lowered, called)
                elif single is not None:
                    mask = 1 if single in lowered or (called and single in called) else 0
                else:
                    mask = rank.mask_of(words, lowered) | (rank.mask_of(words, called) if called else 0)
                if mask:
                    self._hold(mask, index, seq, size)
            if mask != full:
                if unread <= 0:
                    unread, self.documents, self.chars = FIND_WINDOW, documents, chars
                    yield
                continue
            unread, self.documents, self.chars = FIND_WINDOW, documents, chars
            yield
            if pattern is not None:
                yield from self._read_pattern(index, seq, text, lowered)
            else:
                yield from self._read_words(index, seq, lowered, called, size)
        self.documents, self.chars = documents, chars

    def _read_words(self, index: int, seq: int, lowered: str, called: str, size: int) -> Iterator[None]:
        """A message holding every word: its tier and lines (recall_rank.analyse)."""
        words = self.query.words
        self.matched += 1
        in_call = rank.mask_of(words, called) if called else 0
        phrase = self.query.needle if len(words) > 1 else ""
        analysis = yield from _analysed(rank.analyse(lowered, words, in_call, phrase))
        if analysis is not None:
            full = (1 << len(words)) - 1
            self.found.append(Found(index, seq, analysis.tier, analysis.lines, full, analysis.counts, size))

    def _read_pattern(self, index: int, seq: int, text: str, lowered: str) -> Iterator[None]:
        """A message that may match the regular expression: the lines that do (at most ``MAX_SHOWN_LINES``)."""
        assert self.query.pattern is not None
        spans: list[Span] = []
        try:
            for span in regex_spans(text, lowered, self.query.pattern):
                if span is None:
                    yield
                else:
                    spans.append(span)
                    if len(spans) >= rank.MAX_SHOWN_LINES:
                        break
        finally:  # also when the deadline closes the search here: what was found counts
            if spans:
                self.matched += 1
                self.found.append(Found(index, seq, rank.LINE, tuple(spans), 0, size=len(text)))

    def _partial_steps(self) -> Iterator[None]:
        """No message holds every word: analyse those holding the most weight of them, with the words each
        holds (at most ``PARTIAL_ANALYSED``)."""
        weights, words = self.weights(), self.query.words
        self.some.sort(key=lambda f: (_weight(f.mask, weights), f.seq), reverse=True)
        for candidate in self.some[:PARTIAL_ANALYSED]:
            self._reading = candidate.seq
            held = [w for bit, w in enumerate(words) if candidate.mask >> bit & 1]
            _text, lowered = self.texts.get(self.messages[candidate.index])
            called = self.call_texts.get(candidate.index, "")
            in_call = rank.mask_of(held, called) if called else 0
            yield
            analysis = yield from _analysed(rank.analyse(lowered, held, in_call, ""))
            if analysis is not None:
                candidate.tier, candidate.lines = analysis.tier, analysis.lines
                candidate.counts = _spread(analysis.counts, candidate.mask, len(words))
                self.partial.append(candidate)

    def _hold(self, mask: int, index: int, seq: int, size: int) -> None:
        """Count a message holding the words of ``mask`` (for their weights); keep it in case no message
        holds them all."""
        holding = self.holding
        for bit in range(len(holding)):
            holding[bit] += mask >> bit & 1
        if mask != (1 << len(holding)) - 1:
            self.some.append(Found(index, seq, rank.APART, (), mask, size=size))

    def weights(self) -> list[float]:
        """Each word's weight (BM25's idf over the messages searched)."""
        return [rank.idf(self.documents, holding) for holding in self.holding]

    def rank(self) -> None:
        """Order the matches: tier, then not in the current view, then score, then the newest."""
        weights, mean = self.weights(), self.chars / self.documents if self.documents else 0.0
        for found in (*self.found, *self.partial):
            if found.counts:
                found.score = rank.score(found.counts, weights, found.size, mean)
        hidden = self.hidden
        self.sources.sort(key=lambda f: source_key(f.seq, f.seq in hidden, f.tier == rank.PHRASE), reverse=True)
        self.found.sort(key=lambda f: (f.tier, f.seq in hidden, f.score, f.seq), reverse=True)
        self.partial.sort(
            key=lambda f: (_weight(f.mask, weights), f.tier, f.seq in hidden, f.score, f.seq), reverse=True
        )

    def stop(self, replaced: bool = False) -> None:
        """The time budget ran out (what was found is ranked); or the history was replaced meanwhile, and
        nothing found counts."""
        self.stopped_at = self._reading if self._reading is not None else -1
        if replaced:
            self.replaced = True
            self.found.clear()
            self.partial.clear()
            self.sources.clear()
            self.matched = 0
        else:
            self.rank()


def _mask_in_steps(words: tuple[str, ...], lowered: str, called: str) -> Generator[None, None, int]:
    """The words the text or the call holds (:func:`recall_rank.mask_of`); a checkpoint after each word's
    pass over a huge text."""
    if len(lowered) <= FIND_WINDOW:
        return rank.mask_of(words, lowered) | (rank.mask_of(words, called) if called else 0)
    mask = 0
    for bit, word in enumerate(words):
        if word in lowered or word in called:
            mask |= 1 << bit
        yield
    return mask


def _analysed(steps: Iterator[rank.Analysis | None]) -> Generator[None, None, rank.Analysis | None]:
    """Pass ``steps``' checkpoints on; return its analysis (None when the message does not match)."""
    result = None
    for item in steps:
        if item is None:
            yield
        else:
            result = item
    return result


def _weight(mask: int, weights: list[float]) -> float:
    return sum(w for bit, w in enumerate(weights) if mask >> bit & 1)


def _spread(counts: tuple[int, ...], mask: int, size: int) -> tuple[int, ...]:
    """The counts of the words ``mask`` holds, placed at their positions among ``size`` words."""
    out, it = [0] * size, iter(counts)
    for bit in range(size):
        if mask >> bit & 1:
            out[bit] = next(it)
    return tuple(out)


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
    search: Search,
    budget_s: float,
    slice_s: float,
    clock: Callable[[], float] = time.monotonic,
    edited: Callable[[], bool] = lambda: False,
) -> Search:
    """``run``, giving the event loop its turn whenever ``slice_s`` has passed since the last one. A
    history replaced meanwhile (its texts cleared), or edited in place (``edited()``), ends the search
    with nothing found."""
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
            replaced = search.texts.generation != generation or edited()
            if replaced:
                steps.close()
                search.stop(replaced)
                break
        if now > deadline:
            steps.close()
            search.stop()
            break
    return search
