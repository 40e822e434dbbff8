"""How well a message matches a literal `context_recall` query of several words, and how it is shown.

A query is split into words (a double-quoted phrase is one word); each is found case-insensitively,
anywhere in a word of the text (``port`` finds ``port=8000``). A message *matches* when it holds every
word: in its text, or, for a tool result, in the call it answers as its label shows it (a result of
``read_file(path=app.py)`` holds ``app.py``). How close the words are gives its tier:

* ``PHRASE``: the whole query, as typed, on one line (several words only)
* ``LINE``: every word on one line; a word of a result's call counts on every line of the result, so a
  result whose call holds every word matches here too (its first lines are shown)
* ``NEAR``: every word within ``NEAR_LINES`` lines of one another
* ``APART``: every word somewhere in the message

Within a tier, a BM25 score ranks messages (rarer words weigh more; a word's count saturates and long
messages are discounted), and recency breaks ties (recall.py). The work is linear in the text: one
``str.count`` per word, then the lines of the rarest word's first ``MAX_ANCHOR_LINES`` occurrences and
their neighbours, with a checkpoint (``None``) every ``CHECK_CHARS`` characters read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

APART, NEAR, LINE, PHRASE = range(4)
MAX_WORDS = 8  # more words than this: the longest are kept (the query as typed still ranks as a phrase)
NEAR_LINES = 1  # words on lines this close match "nearby" (the output shows one line of context)
MAX_ANCHOR_LINES = 200  # lines of the rarest word read for the tier of one message
MAX_SHOWN_LINES = 40  # matching lines kept per message for the output (which shows fewer)
LINE_CHARS_SHOWN = 300  # a matching line longer than this is shown in pieces around the query's words
CONTEXT_CHARS = 300  # of a line of context
MIN_PIECE = 60  # the least of a long line shown around one word
HEAD_LINES = 8  # lines shown of a tool result that matched by its call only
CHECK_CHARS = 1 << 20  # characters read between two checkpoints
K1, B = 1.2, 0.75  # BM25's usual saturation and length normalisation
_QUOTED = re.compile(r'"([^"]+)"|(\S+)')


def query_words(query: str) -> tuple[str, ...]:
    """The lowercase words of a literal query: white-space separated, a double-quoted phrase as one;
    each once; at most ``MAX_WORDS`` (the longest, in the order typed)."""
    words: list[str] = []
    for match in _QUOTED.finditer(query.lower()):
        word = " ".join((match.group(1) or match.group(2)).split())
        if word and word not in words:
            words.append(word)
    if not words:
        words = [" ".join(query.lower().split())]
    if len(words) > MAX_WORDS:
        kept = set(sorted(words, key=len, reverse=True)[:MAX_WORDS])
        words = [w for w in words if w in kept][:MAX_WORDS]
    return tuple(words)


@dataclass(frozen=True)
class Analysis:
    """One message's match: its tier, the lines to show (``(line start, tier)``, best first, then in
    text order) and each word's count (for the score)."""

    tier: int
    lines: tuple[tuple[int, int], ...]
    counts: tuple[int, ...]


def mask_of(words: Sequence[str], lowered: str) -> int:
    """Bit ``i`` set when ``words[i]`` occurs in ``lowered``."""
    mask = 0
    for bit, word in enumerate(words):
        if word in lowered:
            mask |= 1 << bit
    return mask


def _line_bounds(text: str, at: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return start, len(text) if end < 0 else end


def _near_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """The span of the ``NEAR_LINES`` lines before ``start`` and after ``end``."""
    for _ in range(NEAR_LINES):
        if start > 0:
            start = text.rfind("\n", 0, start - 1) + 1
        if end < len(text):
            following = text.find("\n", end + 1)
            end = len(text) if following < 0 else following
    return start, end


def analyse(lowered: str, words: Sequence[str], in_call: int, phrase: str) -> Iterator[Analysis | None]:
    """Checkpoints (``None``), then the message's :class:`Analysis` (its last item), or nothing when it
    does not hold every word. ``in_call``: the words its call holds; ``phrase``: the query as typed
    (lowercase; "" for a single word)."""
    full = (1 << len(words)) - 1
    counts = []
    for word in words:
        counts.append(lowered.count(word))
        if len(lowered) > CHECK_CHARS:
            yield None
    in_text = sum(1 << bit for bit, count in enumerate(counts) if count)
    if in_text | in_call != full:
        return
    weighed = tuple(count + (in_call >> bit & 1) for bit, count in enumerate(counts))  # the call is read too
    if not in_text:  # the call holds every word: every line of the result does (its first are shown)
        yield Analysis(LINE, (), weighed)
        return
    need = in_text & ~in_call or in_text  # the words a line must hold itself (a call's hold everywhere)
    anchor = min((bit for bit in range(len(words)) if need >> bit & 1), key=lambda bit: counts[bit])
    lines: list[tuple[int, int]] = []
    yield from _anchor_lines(lowered, words, anchor, in_text, in_call, phrase, lines)
    lines.sort(key=lambda item: (-item[1], item[0]))
    best = lines[0][1] if lines else APART
    shown = [line for line in lines if line[1] >= min(best, NEAR)]  # a line of the rarest word alone: only if
    yield Analysis(best, tuple(shown[:MAX_SHOWN_LINES]), weighed)  # no line holds more


def _anchor_lines(
    lowered: str, words: Sequence[str], anchor: int, in_text: int, in_call: int, phrase: str, out: list
) -> Iterator[None]:
    """Fill ``out`` with ``(line start, tier)`` for the lines holding the anchor word."""
    full, word, at, read = (1 << len(words)) - 1, words[anchor], 0, 0
    while len(out) < MAX_ANCHOR_LINES:
        found = lowered.find(word, at)
        if found < 0:
            return
        start, end = _line_bounds(lowered, found)
        held = in_call | _held(lowered, words, in_text, start, end)
        if held == full:
            tier = PHRASE if phrase and lowered.find(phrase, start, end) >= 0 else LINE
        else:
            near_start, near_end = _near_bounds(lowered, start, end)
            tier = NEAR if held | _held(lowered, words, in_text, near_start, near_end) == full else APART
            read += near_end - near_start
        out.append((start, tier))
        read += end - start
        if read > CHECK_CHARS:
            read = 0
            yield None
        at = end + 1


def _held(lowered: str, words: Sequence[str], candidates: int, start: int, end: int) -> int:
    mask = 0
    for bit, word in enumerate(words):
        if candidates >> bit & 1 and lowered.find(word, start, end) >= 0:
            mask |= 1 << bit
    return mask


def idf(documents: int, holding: int) -> float:
    """BM25's inverse document frequency (never negative): a word few messages hold weighs more."""
    return math.log(1 + (documents - holding + 0.5) / (holding + 0.5))


def score(counts: Sequence[int], weights: Sequence[float], size: int, mean_size: float) -> float:
    """BM25 of a message: each word's weight times its saturated count, long messages discounted."""
    norm = K1 * (1 - B + B * size / mean_size) if mean_size > 0 else K1
    return sum(w * c * (K1 + 1) / (c + norm) for c, w in zip(counts, weights, strict=True))


def excerpt(text: str, start: int, end: int, spots: Sequence[int], width: int, lead: float = 1 / 3) -> str:
    """The line ``text[start:end]``, or, when longer than ``width``, pieces of it around each of ``spots``
    (positions in it; ``lead`` of a piece before its spot) joined by "...", ``width`` characters in all."""
    if end - start <= width:
        return text[start:end]
    spots = sorted({min(max(at, start), end) for at in spots}) or [start]
    piece = max(width // len(spots), MIN_PIECE)
    spans: list[list[int]] = []
    for at in spots:
        begin = max(start, min(at - int(piece * lead), end - piece))
        stop = min(end, begin + piece)
        if spans and begin <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], stop)
        else:
            spans.append([begin, stop])
    out, left, shown_to = [], width, start
    for begin, stop in spans:
        stop = min(stop, begin + left)
        if stop <= begin:
            break
        out.append(("..." if begin > shown_to else "") + text[begin:stop])
        left, shown_to = left - (stop - begin), stop
    return "".join(out) + ("..." if shown_to < end else "")


def word_spots(lowered: str, start: int, end: int, words: Sequence[str]) -> list[int]:
    """Where each word first occurs on the line ``[start, end)``."""
    return [at for word in words if (at := lowered.find(word, start, end)) >= 0]


def shown_lines(
    text: str, marked: Sequence[int], spots: Callable[[int, int], Sequence[int]], lead: float, width: int
) -> list[str]:
    """The lines starting at ``marked`` (in text order; marked "> ", one longer than ``width`` cut around
    ``spots(start, end)``) with the line before and after each (two spaces, cut to ``CONTEXT_CHARS``)."""
    matching, shown, out = set(marked), set(), []
    for start in marked:
        before = text.rfind("\n", 0, start - 1) + 1 if start > 0 else None
        after = text.find("\n", start)
        for line_start in (before, start, after + 1 if after >= 0 else None):
            if line_start is None or line_start in shown or (line_start != start and line_start in matching):
                continue
            shown.add(line_start)
            end = text.find("\n", line_start)
            end = len(text) if end < 0 else end
            if line_start == start:
                out.append("> " + excerpt(text, start, end, spots(start, end), width, lead))
            else:
                out.append("  " + excerpt(text, line_start, end, (), CONTEXT_CHARS))
    return out


def head_lines(text: str, chars: int, width: int) -> list[str]:
    """The first lines of ``text`` (two spaces, each cut to ``width``), about ``chars`` characters in
    all (at least ``HEAD_LINES`` lines), then how many lines are left."""
    out, at, used = [], 0, 0
    while at < len(text) and (used < chars or len(out) < HEAD_LINES):
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        out.append("  " + excerpt(text, at, end, (), width))
        used += len(out[-1]) + 1
        at = end + 1
    left = text.count("\n", at) + 1 if at < len(text) else 0
    if left:
        out.append(f"  [{left} more line(s); add a word of the line you need]")
    return out
