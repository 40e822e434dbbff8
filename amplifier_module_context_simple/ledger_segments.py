"""Append-only ledger segments (opt-in ``evidence_ledger_segments``): a ledger that is never rewritten.

The plain ledger is decided again at every boundary from every message removed so far, and its new
text is billed again, with everything after it, as a cache write. With segments, each boundary adds
one segment covering only the messages removed since the last one; earlier segments stay byte for
byte at their place, so a boundary rewrites the view only from its own first change. When the
segments outgrow the ledger's room, the oldest are dropped first (a rewrite from there, rarely). A
segment also spends its room better: no `ls -l` rows or hex-only lines (:func:`economize`), and no
line whose identifiers the kept segments already show.

A segment is ``(anchor seq, text, removals covered, end)``: placed like the plain ledger (before the
first surviving message after its anchor), and covering the removed or stubbed messages from the
previous segment's ``end`` up to its own ``end`` (exclusive). Pure functions; the manager keeps the
state (``_ledger_segments``, and the newest segment in ``_ledger`` until the next boundary).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from . import ledger

Message = dict[str, Any]
Segment = tuple[int, str, int, int]  # (anchor seq, text, removals covered, end seq)
# Dropping segments stops once the new segment has at least this share of the ledger's room.
NEW_ROOM_SHARE = 3  # 1/3


def frozen(
    segments: tuple[Segment, ...], current: tuple[int, str, int] | None, removed: int, gone: set[int]
) -> tuple[Segment, ...]:
    """The segments to keep at a boundary: the earlier ones, and the last boundary's ledger (``current``)
    when it is still in force (it covered every removal so far; ``gone`` = the positions removed or
    stubbed then), frozen with the end of what it covered."""
    if current is None or current[2] != removed or not gone:
        return segments
    return (*segments, (*current, max(gone) + 1))


def start_of_new(segments: tuple[Segment, ...]) -> int:
    """The first position a new segment covers: after everything the kept segments covered."""
    return segments[-1][3] if segments else 0


def make_room(segments: tuple[Segment, ...], room: int, cost: Callable[[Segment], int]) -> tuple[Segment, ...]:
    """Drop the oldest segments until the new one has a third of ``room`` (the ledger's whole room)."""
    kept = list(segments)
    while kept and room - sum(map(cost, kept)) < room // NEW_ROOM_SHARE:
        kept.pop(0)
    return tuple(kept)


def known_lines(segments: tuple[Segment, ...]) -> list[str]:
    """The lines the kept segments already show (their tokens are known to a new segment)."""
    return [line for segment in segments for line in ledger.ledger_lines(segment[1]) or ()]


def insert_all(working: list[Message], placed: list[tuple[int, Message]]) -> list[Message]:
    """``working`` with each (anchor, message) inserted where the plain ledger would go, in order."""
    for anchor, message in placed:
        working = ledger.insert(working, anchor, message)
    return working


# Line economy: what a segment does not spend its room on (a priority line is always a candidate). Tried
# and dropped: near-duplicates as "the same line but for its numbers" (it merged lines whose identifiers
# differ: planted facts kept fell from 100% to 92% and the evidence miss rose).
_LISTING_ROW = re.compile(r"^[-dlcbps][rwxsStT-]{9}[.+@]?\s")  # `ls -l` rows: permissions, owner, size, date
_HEX_ONLY = re.compile(r"^[0-9a-fA-F:.\s-]{16,}$")  # hashes and hex dumps with nothing else on the line


def economize(lines: tuple[ledger.Line, ...]) -> tuple[ledger.Line, ...]:
    """``lines`` without `ls -l` rows and hex-only lines (known tokens are left out by the selection
    itself): a segment's room goes to lines that say more."""
    return tuple(line for line in lines if line[2] or not (_LISTING_ROW.match(line[0]) or _HEX_ONLY.match(line[0])))
