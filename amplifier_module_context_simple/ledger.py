"""The evidence ledger: what removed messages leave behind, one ephemeral message in their place.

When the ladder removes old messages, their informative lines (tool output, the assistant's notes and
the arguments of its tool calls) would be gone. The ledger keeps the lines that hold identifiers found
nowhere else in the view (what the agent did, its calls, before what its tools printed), within a token
budget, in one user-role ``<system-reminder source="context-evidence">`` message placed where the
removed span began. It is a pure function of the removed messages and the view, decided at a boundary
and re-sent with the same bytes until the next one (the manager keeps its text and anchor;
``snapshot_state`` carries them).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Container
from typing import Any

from . import envelope
from . import evidence_text as et
from .estimate import seq_of
from .ledger_dense import STANDARD, Ranking
from .recall import NOTE as RECALL_NOTE

Message = dict[str, Any]
LEDGER_SOURCE = "context-evidence"
_OPEN = f'<system-reminder source="{LEDGER_SOURCE}">'
_PREAMBLE = (
    "Lines kept verbatim from {count} earlier messages removed to fit the context window "
    "(tool output, tool-call arguments and your own notes; re-run a tool for its full output):"
)


# Bounds on the work one message costs, whatever it holds (a 20 MB line, a 200,000-line log): a longer
# line is no ledger line (it would take a ledger's whole room); a text of up to READ_WHOLE_LINES lines is
# read line by line, whole; of a longer one, the first and last EDGE_LINES lines and, between them, the
# lines naming a failure, found by a scan in C; only the best candidates of a message are kept for every
# later boundary's ranking. The analysis is memoized per ``_seq`` (evidence.py): one read per message.
MAX_LINE_CHARS = 2_000
READ_WHOLE_LINES = 2_000
EDGE_LINES = 100
MAX_MIDDLE_LINES = 200  # of a longer text's middle, the failure lines read (the first ones)
MIDDLE_KEYWORDS = ("error", "exception", "fail")
MAX_CANDIDATES = 200  # per message


def read_lines(text: str) -> list[str]:
    """The lines of ``text`` the ledger reads: all of them up to ``READ_WHOLE_LINES``; of a longer text the
    first and last ``EDGE_LINES`` and the failure lines between. Time linear in the text (a few passes in
    C), and at most ``max(READ_WHOLE_LINES, 2 * EDGE_LINES + MAX_MIDDLE_LINES)`` lines for per-line work."""
    newline = -1
    for count in range(READ_WHOLE_LINES):
        newline = text.find("\n", newline + 1)
        if newline == -1:  # at most READ_WHOLE_LINES lines: all of them
            return text.split("\n") if count else [text]
        if count == EDGE_LINES - 1:
            head_end = newline
    tail_start = len(text)
    for _ in range(EDGE_LINES):
        tail_start = text.rfind("\n", 0, tail_start)
    middle = _failure_lines(text[head_end + 1 : tail_start])
    return [*text[:head_end].split("\n"), *middle, *text[tail_start + 1 :].split("\n")]


def _failure_lines(text: str) -> list[str]:
    """The first ``MAX_MIDDLE_LINES`` lines of ``text`` holding a ``MIDDLE_KEYWORDS`` word in any (ASCII)
    case, in order: a few passes in C and a bounded number of lines, whatever the text holds."""
    if text.isascii():  # lower() keeps every offset
        return _keyword_lines(text, text.lower(), MIDDLE_KEYWORDS, "\n")
    raw = text.encode("utf-8", "surrogatepass")  # bytes.lower() changes ASCII letters only: offsets kept
    lines = _keyword_lines(raw, raw.lower(), tuple(k.encode() for k in MIDDLE_KEYWORDS), b"\n")
    return [line.decode("utf-8", "surrogatepass") for line in lines]


def _keyword_lines(source: Any, low: Any, keywords: tuple[Any, ...], newline: Any) -> list[Any]:
    """Lines of ``source`` (str or bytes) where its lowered copy ``low`` holds a keyword: each keyword's
    first ``MAX_MIDDLE_LINES``, so the first lines of any kind are among them; then the first of all."""
    found: dict[int, int] = {}
    for keyword in keywords:
        at, hits = low.find(keyword), 0
        while at != -1 and hits < MAX_MIDDLE_LINES:
            start = low.rfind(newline, 0, at) + 1
            end = low.find(newline, at)
            end = len(low) if end == -1 else end
            found[start], hits = end, hits + 1
            at = low.find(keyword, end)
    return [source[start:end] for start, end in sorted(found.items())[:MAX_MIDDLE_LINES]]


_PREAMBLE_PATTERN = re.compile(re.escape(_PREAMBLE).replace(r"\{count\}", r"\d+") + f"(?: {re.escape(RECALL_NOTE)})?")


def source_lines(texts: list[str]) -> list[str]:
    """The stripped lines of ``texts`` long enough to carry evidence and short enough to be kept, each
    once (:func:`read_lines` says which lines of a very long text are read)."""
    out = []
    for text in texts:
        for line in read_lines(text):
            if et.MIN_LINE_CHARS <= len(stripped := line.strip()) <= MAX_LINE_CHARS:
                out.append(envelope.neutralize_line(stripped))  # copied text never ends the ledger's envelope
    return list(dict.fromkeys(out))


# (stripped line, its distinctive tokens, is it a priority line, is it what the agent did: a line of a
# tool call's arguments, or a call's own line)
Line = tuple[str, frozenset[str], bool, bool]


def analyse(message: Message, arguments: bool = True) -> tuple[Line, ...]:
    """A message's evidence lines with their tokens: its text's lines, then what its tool calls did (the
    lines of their arguments, and ``name(key=value, ...)`` for a call of several arguments,
    et.call_lines; an argument line that line or the text shows whole is not repeated); at most
    ``MAX_CANDIDATES`` of them (the calls' lines, then priority lines and those with the most tokens,
    in their order). Pure, so the caller memoizes it per ``_seq``."""
    texts = source_lines(et.readable_texts(message))
    lines = [(line, frozenset(et.distinctive_tokens(line)), et.is_priority(line), False) for line in texts]
    if arguments:
        calls = [(envelope.neutralize_line(line), tokens) for line, tokens in et.call_lines(message)]
        lines += [(line, tokens, False, True) for line, tokens in calls if len(line) <= MAX_LINE_CHARS]
        shown, seen = "\n".join(line for line, _tokens in calls), set(texts)
        for line in source_lines(et.argument_texts(message)):
            if line not in seen and line not in shown:
                lines.append((line, frozenset(et.distinctive_tokens(line)), et.is_priority(line), True))
    lines = [line for line in lines if line[1] or line[2]]
    if len(lines) <= MAX_CANDIDATES:
        return tuple(lines)
    ranked = sorted(range(len(lines)), key=lambda i: (-lines[i][3], -lines[i][2], -len(lines[i][1]), i))
    return tuple(lines[i] for i in sorted(ranked[:MAX_CANDIDATES]))


def guarded(read: Callable[..., Any], message: Message, empty: Any) -> tuple[Any, Exception | None]:
    """``read(message)``, else ``read`` without the tool-call arguments, else ``empty``; with the first
    failure (None when there was none). The ledger is optional: reading a message never raises."""
    try:
        return read(message), None
    except Exception as exc:  # noqa: BLE001 - any failure of the ledger degrades
        error = exc
    try:
        return read(message, arguments=False), error
    except Exception:  # noqa: BLE001
        return empty, error


def allowed_lines(messages: list[Message]) -> set[str]:
    """Every line a ledger of ``messages`` (the removed and stubbed ones) may hold, read as the ledger
    reads them (:func:`guarded`): its candidate lines, and every line of their texts and arguments (a
    ledger written before call lines existed held argument lines a call line now shows)."""
    allowed: set[str] = set()
    for message in messages:
        allowed.update(guarded(_readable_lines, message, ())[0])
    return allowed


def _readable_lines(message: Message, arguments: bool = True) -> set[str]:
    lines = {line[0] for line in analyse(message, arguments)}
    lines.update(source_lines(et.readable_texts(message) + (et.argument_texts(message) if arguments else [])))
    return lines


def ledger_lines(text: str) -> list[str] | None:
    """The kept lines of a ledger text, or None when it is not one (envelope, preamble, closing line)."""
    parts = text.split("\n")
    if len(parts) < 3 or parts[0] != _OPEN or parts[-1] != "</system-reminder>":
        return None
    if _PREAMBLE_PATTERN.fullmatch(parts[1]) is None:
        return None
    return parts[2:-1]


def select(sources: list[tuple[Line, ...]], known: set[str], budget_tokens: int) -> list[str]:
    """Lines to keep from ``sources`` (analysed messages, oldest first): the most identifiers not in
    ``known`` per token of line, weighted toward later messages; priority lines earn a bonus."""
    return [line for _position, line in sorted(_choose(sources, known, budget_tokens))]


def select_in_turn(
    tiers: list[tuple[list[tuple[Line, ...]], int]], known: set[str], room: int, ranking: Ranking = STANDARD
) -> list[str]:
    """Lines chosen tier by tier (each a ``sources`` list aligned with the others, and the most of the
    room it may take): a tier picks as :func:`select` does within what the earlier tiers left, knowing
    the identifiers they kept, scored by ``ranking`` (ledger_dense.py). In history order, each line once."""
    chosen: list[tuple[int, str]] = []
    known = set(known)
    taken: set[str] = set()
    for sources, cap in tiers:
        left = room - sum(_line_cost(line) for _position, line in chosen)
        if left <= 0:
            break
        picked = _choose(sources, known, min(cap, left), taken, ranking)
        newly = {line for _position, line in picked}
        if newly:  # every occurrence's identifiers (a call line and a text line may read one string apart)
            known.update(token for lines in sources for line in lines if line[0] in newly for token in line[1])
        taken |= newly
        chosen += picked
    return [line for _position, line in sorted(chosen)]


def _line_cost(line: str) -> int:
    """What a kept line costs in the selection: 4 characters a token, plus one for its newline."""
    return len(line) // et.CHARS_PER_TOKEN + 1


def _choose(
    sources: list[tuple[Line, ...]],
    known: set[str],
    budget_tokens: int,
    taken: Container[str] = (),
    ranking: Ranking = STANDARD,
) -> list[tuple[int, str]]:
    """(message position, line) of the lines :func:`select` keeps, in the order they were ranked: by score
    (identifiers not in ``known``, plus a priority bonus, weighted toward later messages, per token of line),
    the later message, then the line; greedily while the budget lasts. Lines in ``taken`` are left out.

    The ranking is lazy, so a boundary's work follows the room, not the removed history: every line enters a
    heap under the score it would have if none of its identifiers were known (a bound, computed without set
    work); a popped bound is scored exactly and pushed back, and a popped exact score is the next line of the
    full ranking (no bound left in the heap can beat it). The same lines, in the same order, as ranking all."""
    heap: list[tuple[float, int, str, bool, frozenset[str], int, float]] = []
    seen: set[str] = set()
    for position, lines in enumerate(sources):
        recency = 1 + position / max(1, len(sources))
        for line, all_tokens, priority, _call in lines:
            if line in seen or line in taken or len(line) > budget_tokens * et.CHARS_PER_TOKEN:
                continue
            seen.add(line)
            bonus = ranking.priority_bonus if priority else 0
            if all_tokens or bonus:
                bound = ranking.score(len(all_tokens), priority, recency, line)
                heap.append((-bound, -position, line, False, all_tokens, bonus, recency))
    heapq.heapify(heap)
    chosen: list[tuple[int, str]] = []
    covered: set[str] = set()
    left = budget_tokens
    while heap and left > 0:  # a line costs at least 1: with nothing left, nothing more is chosen
        entry = heapq.heappop(heap)
        _key, negative_position, line, exact, tokens, bonus, recency = entry
        if not exact:
            tokens = tokens - known
            if tokens or bonus:  # else no candidate at all
                score = ranking.score(len(tokens), bonus > 0, recency, line)
                heapq.heappush(heap, (-score, negative_position, line, True, tokens, bonus, recency))
            continue
        cost = _line_cost(line)
        if cost > left or not (tokens - covered or bonus):
            continue
        chosen.append((-negative_position, line))
        covered |= tokens
        left -= cost
    return chosen


def ledger_text(lines: list[str], count: int, note: str = "") -> str:
    """The ledger's text: envelope, a preamble saying what it is (and ``note``, the recall tool's line
    when it is mounted), the kept lines in history order."""
    preamble = _PREAMBLE.format(count=count) + (f" {note}" if note else "")
    return envelope.wrap(LEDGER_SOURCE, "\n".join([preamble, *lines]))


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
    """The derived ledger message; a *stored* message with the same source is an ordinary message."""
    metadata = message.get("metadata")
    return isinstance(metadata, dict) and metadata.get("source") == LEDGER_SOURCE and "_seq" not in metadata
