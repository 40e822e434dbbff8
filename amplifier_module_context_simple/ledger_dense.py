"""A denser ledger ranking (opt-in ``evidence_ledger_dense``; off by default): more evidence lines per token.

The ledger ranks a removed message's lines by the identifiers it would newly show per token of line
(ledger.py). Off, that ranking is today's: an error, ``file:line`` or summary line earns a bonus of
three identifiers, and the agent's own calls take at most 0.75 of the room. Measured on the "tune" half
of the transcripts (``evaluation.studies.bill_split``), three changes each keep more of what the agent
used next in the same room (line miss of ``evidence_lean``, 0.067 before):

- the agent's calls may take the whole room (0.060): the lines of what it did are what it reuses most;
- no priority bonus (0.058; 0.052 with the calls' whole room): a priority line whose identifiers the
  view already shows is a line the next step rarely needs, and each costs the room of a fresh one;
- a line's price grows a little faster than its length (tokens ** 1.3; 0.057 at a 0.13 target against
  0.061): of two lines with the same new identifiers, the shorter is more often the one needed.

So a preset can compact deeper (a smaller view re-read on every request) and still miss less. The cost:
in the tight-window scenario (generated sessions whose evidence is mostly error lines) the miss rises
(``evidence_lean``: above the default's on 5 of 6 runs, by up to 0.05); keeping the bonus there held the
miss as before but lost the held-out goal (docs/evidence-compaction.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import evidence_text as et


@dataclass(frozen=True)
class Ranking:
    """How the ledger ranks lines: the priority bonus (in identifiers), the most of the room the agent's
    calls may take, and the exponent of a line's token price in its score."""

    priority_bonus: float
    call_room_share: float
    length_exponent: float

    def score(self, new_tokens: int, priority: bool, recency: float, line: str) -> float:
        """A line's rank: its new identifiers (and bonus), weighted toward later messages, per price."""
        bonus = self.priority_bonus if priority else 0
        return (new_tokens + bonus) * recency / (len(line) // et.CHARS_PER_TOKEN + 1) ** self.length_exponent


# Today's ranking: the same scores, bit for bit (x ** 1.0 == x). The calls' most of the room was tuned on
# one half of the shipped transcripts (0.25 to 1.0) before the presets compacted this deep.
STANDARD = Ranking(priority_bonus=et.PRIORITY_BONUS, call_room_share=0.75, length_exponent=1.0)
DENSE = Ranking(priority_bonus=0, call_room_share=1.0, length_exponent=1.3)


def ranking(dense: bool) -> Ranking:
    """The ranking ``evidence_ledger_dense`` asks for."""
    return DENSE if dense else STANDARD
