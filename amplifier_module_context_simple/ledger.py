"""The evidence ledger: what removed messages leave behind, one ephemeral message in their place.

When the ladder removes old messages, their informative lines (tool output, the assistant's notes and
the arguments of its tool calls) would be gone. The ledger keeps the lines that hold identifiers found
nowhere else in the view, verbatim, within a token budget, in one user-role
``<system-reminder source="context-evidence">`` message placed where the removed span began. It is a
pure function of the removed messages and the view, decided at a boundary and re-sent with the same
bytes until the next one (the manager keeps its text and anchor; ``snapshot_state`` carries them).
"""

from __future__ import annotations

from typing import Any

from . import evidence_text as et
from .estimate import seq_of

Message = dict[str, Any]
LEDGER_SOURCE = "context-evidence"
_OPEN = f'<system-reminder source="{LEDGER_SOURCE}">'
_PREAMBLE = (
    "Lines kept verbatim from {count} earlier messages removed to fit the context window "
    "(tool output, tool-call arguments and your own notes; re-run a tool for its full output):"
)


def source_lines(message: Message) -> list[str]:
    """The stripped lines of a message's text and arguments that are long enough to carry evidence."""
    texts = et.content_texts(message.get("content")) + et.argument_texts(message)
    return [s for text in texts for line in text.split("\n") if len(s := line.strip()) >= et.MIN_LINE_CHARS]


Line = tuple[str, frozenset[str], bool]  # (stripped line, its distinctive tokens, is it a priority line)


def analyse(message: Message) -> tuple[Line, ...]:
    """A message's evidence lines with their tokens (pure, so the caller can memoize it per ``_seq``)."""
    return tuple((line, frozenset(et.distinctive_tokens(line)), et.is_priority(line)) for line in source_lines(message))


def select(sources: list[tuple[Line, ...]], known: set[str], budget_tokens: int) -> list[str]:
    """Lines to keep from ``sources`` (analysed messages, oldest first): the most identifiers not in
    ``known`` per token of line, weighted toward later messages; priority lines earn a bonus."""
    candidates = []
    seen: set[str] = set()
    for position, lines in enumerate(sources):
        recency = 1 + position / max(1, len(sources))
        for line, all_tokens, priority in lines:
            if line in seen or len(line) > budget_tokens * et.CHARS_PER_TOKEN:
                continue
            seen.add(line)
            tokens = all_tokens - known
            bonus = et.PRIORITY_BONUS if priority else 0
            if tokens or bonus:
                cost = len(line) // et.CHARS_PER_TOKEN + 1
                candidates.append(((len(tokens) + bonus) * recency / cost, position, line, tokens, bonus))
    candidates.sort(key=lambda c: (-c[0], -c[1], c[2]))
    chosen: list[tuple[int, str]] = []
    covered: set[str] = set()
    left = budget_tokens
    for _score, position, line, tokens, bonus in candidates:
        cost = len(line) // et.CHARS_PER_TOKEN + 1
        if cost > left or not (tokens - covered or bonus):
            continue
        chosen.append((position, line))
        covered |= tokens
        left -= cost
    return [line for _position, line in sorted(chosen)]


def ledger_text(lines: list[str], count: int) -> str:
    """The ledger's text: envelope, a preamble saying what it is, the kept lines in history order."""
    return "\n".join([_OPEN, _PREAMBLE.format(count=count), *lines, "</system-reminder>"])


def line_count(text: str) -> int:
    """How many kept lines a ledger text holds (envelope and preamble excluded)."""
    return max(0, text.count("\n") - 2)


def ledger_message(text: str) -> Message:
    """The ephemeral ledger message (no ``_seq``: it is derived, never stored)."""
    return {"role": "user", "content": text, "metadata": {"source": LEDGER_SOURCE}}


def insert(working: list[Message], anchor: int, message: Message) -> list[Message]:
    """``working`` with ``message`` before the first stored message after seq ``anchor`` (never between a
    tool call and its results)."""
    index = len(working)
    for i, m in enumerate(working):
        seq = seq_of(m)
        if seq is not None and seq > anchor:
            index = i
            break
    while index < len(working) and working[index].get("role") == "tool":
        index += 1
    if index == len(working) and working and working[-1].get("tool_calls"):
        index -= 1  # a view ending on calls in flight must still end on them
    return [*working[:index], message, *working[index:]]


def is_ledger(message: Message) -> bool:
    metadata = message.get("metadata")
    return isinstance(metadata, dict) and metadata.get("source") == LEDGER_SOURCE
