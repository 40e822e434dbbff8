"""Recall by source: a query naming a call (a path, a command, any argument) brings back what it printed.

An agent that lost a line rarely remembers its words; it remembers the file it read or the command it
ran. A tool result whose call's head (:func:`call_head`: each argument's first line) holds every word of
a literal query is a *source* of the query. Sources are shown before any other match (those the view
lacks first, then the newest), sharing their room evenly (:func:`shares`), each as its content: the
whole output when it fits its share, else its most informative lines (:func:`informative_lines`) in
their order with the gaps marked, and a last line saying how to page through the rest (``offset``, with
``from_seq``/``to_seq`` naming the message). Other matches keep a share of the output
(:func:`source_share`); the assistant messages that merely call a source give way to its output.

Pure functions over texts and numbers: recall.py's ``render`` decides the order and the budget.
"""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from . import recall_rank as rank
from .calls import arguments_value, call_name, message_calls, message_texts
from .recall_text import call_text, is_recall_call

SOURCE_SHARE = 0.4  # of the answer for the sources when other messages match too (the rest: those)
NAMING_SHARE = 0.75  # the same, for a query that reads as a path or a command
_NAMING = re.compile(r"/|\s|\.[a-z]{1,5}$")  # a path, several words, or a file name's extension
FAIR_CHARS = 2_500  # the least each shown source gets when outputs share the room (when it needs more)
ANALYSED_CHARS = 200_000  # of a huge output read to pick its lines; the rest is reached with offset
LINE_CHARS = 600  # a longer line of a selection is cut, unless a few lines share the room
PLAIN_WORD = 0.25  # what a plain word is worth beside a name that reads as code or data
GAP_CHARS = 28  # what a gap marker costs, counted when picking lines
HEAD_CHARS = 200  # of an argument's first line, read as part of the call's head
HEAD_LINE_CHARS = 400  # of a call's head in all
_CODE_NAME = re.compile(r"[_./\d]|[a-z][A-Z]")
_NAME = re.compile(r"[A-Za-z_][\w.\-/]*\w|\d{3,}")


def _head(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = text.lstrip()
    newline = text.find("\n")
    return " ".join(text[: min(HEAD_CHARS, newline if newline >= 0 else len(text))].split())


def call_head(call: Any) -> str:
    """What names a call: ``name(key=value, ...)`` with each value's first line (cut to ``HEAD_CHARS``),
    so a path or a command line names it and a word deep in a script it runs does not."""
    value = arguments_value(call)
    if isinstance(value, dict):
        inner = ", ".join(f"{key}={_head(item)}" for key, item in value.items())
    else:
        inner = "" if value is None else _head(value)
    return f"{call_name(call)}({inner})"[:HEAD_LINE_CHARS]


def only_calls_named(message: dict[str, Any], starts: Sequence[int], names: Callable[[Any], bool]) -> bool:
    """Whether every line at ``starts`` (in the message's searchable text: its texts, then each call but
    this tool's own, as recall_text.message_text joins them) is the first line of a call ``names``."""
    texts = [text for text in message_texts(message) if text]
    at, named = len("\n".join(texts)) + 1 if texts else 0, set()
    for call in message_calls(message):
        if is_recall_call(call):
            continue
        if names(call):
            named.add(at)
        at += len(call_text(call)) + 1
    return all(start in named for start in starts)


def source_share(query: str) -> float:
    """The share of the answer for the sources when other messages match too: more when the query reads
    as a path or a command (what names a call) than as a word (which may as well be a word of a line)."""
    return NAMING_SHARE if _NAMING.search(query.strip()) else SOURCE_SHARE


def source_key(seq: int, hidden: bool, phrase: bool) -> tuple[bool, bool, int]:
    """How sources rank (higher first): the view lacks it, the call holds the query as typed, newest."""
    return hidden, phrase, seq


def _names(line: str) -> set[str]:
    """The names a line holds: identifiers, paths, dotted names, numbers of 3+ digits (3+ characters)."""
    return {name for name in _NAME.findall(line) if len(name) >= 3}


def _worth(names: set[str]) -> float:
    """What names say: one that reads as code or data (``snake_case``, ``a.b``, a path, a number,
    ``camelCase``) counts 1, a plain word ``PLAIN_WORD`` (prose says less per character)."""
    return sum(1.0 if _CODE_NAME.search(name) else PLAIN_WORD for name in names)


def _cut(line: str, width: int) -> str:
    return line if len(line) <= width else rank.excerpt(line, 0, len(line), (), width)


def _page(lines: Sequence[str], first: int, chars: int) -> tuple[list[str], int]:
    """Lines from ``first`` on, each cut to ``chars``, as many as fit in ``chars``; and the next line's
    index."""
    out, used, at = [], 0, first
    while at < len(lines):
        shown = "  " + _cut(lines[at], max(chars - used - 3, rank.MIN_PIECE))
        if used + len(shown) + 1 > chars and out:
            break
        out.append(shown)
        used += len(shown) + 1
        at += 1
    return out, at


def _pick(lines: Sequence[str], chars: int, width: int, seen: set[str]) -> list[int]:
    """The indexes of the most informative lines that fit in ``chars`` (greedy, lazily re-scored): the
    names a line holds that no line picked before (nor ``seen``: shown above) holds, per character it
    costs. The names of the lines picked are added to ``seen``."""
    names = [_names(line) for line in lines]
    cost = [min(len(line), width) + 3 + GAP_CHARS // 2 for line in lines]
    heap = [(-_worth(n) / cost[i], i) for i, n in enumerate(names) if n]
    heapq.heapify(heap)
    picked, used = [0], cost[0]  # the first line says what the output is
    seen |= names[0]
    while heap and used < chars:
        negative, index = heapq.heappop(heap)
        fresh = _worth(names[index] - seen)
        if not fresh:
            continue
        value = -fresh / cost[index]
        if value > negative + 1e-12 and heap and value > heap[0][0]:
            heapq.heappush(heap, (value, index))  # its score fell: back in line
            continue
        if used + cost[index] > chars:
            continue
        picked.append(index)
        used += cost[index]
        seen |= names[index]
    return sorted(set(picked))


def _close_gaps(lines: Sequence[str], picked: list[int]) -> list[int]:
    """``picked`` with the lines of each gap that costs less shown than marked (a blank line, an
    ``else:``) put back."""
    out: list[int] = []
    for index in picked:
        if out and index > out[-1] + 1:
            gap = range(out[-1] + 1, index)
            if sum(len(lines[at]) + 3 for at in gap) <= GAP_CHARS:
                out.extend(gap)
        out.append(index)
    return out


def shown_size(text: str) -> int:
    """The characters ``text`` takes shown whole (each line indented by two spaces)."""
    return len(text) + 3 * (text.count("\n") + 1)


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    while len(lines) > 1 and not lines[-1].strip():
        lines.pop()
    return lines


def informative_lines(
    text: str, offset: int, chars: int, hint: str = "", seen: set[str] | None = None
) -> tuple[list[str], str]:
    """A source's content within about ``chars``: its lines from line ``offset`` (0-based) when paging,
    else all of them when they fit, else its most informative lines in order with the gaps marked; and a
    note saying which lines were shown and what ``offset`` (then ``hint``) brings the next ones ("" when
    all were). ``seen``: the names shown above (in other sources), which make a line say less."""
    if offset or shown_size(text) <= chars:
        lines = _lines(text)
        if offset >= len(lines):
            return [], f"[the output has {len(lines)} line(s); offset {offset} is past its end]"
        out, after = _page(lines, offset, chars)
        if after < len(lines):
            return out, f"[lines {offset + 1}-{after} of {len(lines)} shown; the next: offset={after}{hint}]"
        return out, f"[lines {offset + 1}-{after} of {len(lines)}]" if offset else ""
    lines = _lines(text[:ANALYSED_CHARS])
    total = len(lines) + text.count("\n", ANALYSED_CHARS)
    width = max(LINE_CHARS, chars // len(lines) - GAP_CHARS)  # few long lines: each gets its share
    picked = _close_gaps(lines, _pick(lines, chars, width, set() if seen is None else seen))
    out, last = [], -1
    for index in picked:
        if index > last + 1:
            out.append(f"  [... lines {last + 2}-{index} left out]")
        out.append("  " + _cut(lines[index], width))
        last = index
    if len(picked) == total:
        return out, ""
    gap = next((i for i, index in enumerate(picked) if index != i), len(picked))
    shown = f"{len(picked)} of {total} lines shown, the most informative"
    return out, f"[{shown}; in order from line {gap + 1}: offset={gap}{hint}]"


def _level(sizes: Sequence[int], chars: int) -> float:
    """The most each of ``sizes`` may take so that all of them take at most ``chars`` (water filling)."""
    left, count = float(chars), len(sizes)
    for size in sorted(sizes):
        if size * count > left:
            return left / count
        left -= size
        count -= 1
    return float("inf")


def shares(sizes: Sequence[int], chars: int) -> list[int]:
    """The characters each source may take of ``chars``, in rank order: the first sources, as many as can
    each have ``FAIR_CHARS`` (or what they need, when less), share ``chars`` evenly (a small output whole,
    the rest cut to one level); the others get 0 (not shown)."""
    count = len(sizes)
    while count > 1 and _level(sizes[:count], chars) < FAIR_CHARS:
        count -= 1
    level = _level(sizes[:count], chars)
    return [int(min(size, level, chars)) for size in sizes[:count]] + [0] * (len(sizes) - count)
