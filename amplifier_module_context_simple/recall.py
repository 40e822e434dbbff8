"""`context_recall`: an opt-in tool that searches what compaction took out of the view (``recall_tool``).

The module keeps the whole history; only the view forgets. This tool lets the model search the stored
history as it saw it (tool calls with their arguments decoded, tool results as their output text, results
the view truncated in full: a spill file holds the same text, so none is read) for a few words it
remembers (recall_rank.py) or a regular expression. Results are the matching lines, whole or cut around
the words, with one line of context, best match first, each labelled with the message's sequence number
and role (for a tool result, the call it answers: ``read_file(path=src/app.py)``) and whether the
current view lacks it, within ``MAX_OUTPUT_TOKENS``; a last line says how many more matched and how to
narrow. A query naming a call (its path, command or an argument) shows the output of the calls it names
first, paged with ``offset`` (recall_source.py).

It never changes the history and never raises into the orchestrator: bad input gets a failed
``ToolResult`` with one line. Nothing backtracks (recall_search.py, recall_regex.py): words are found
with ``str.find``, a regular expression runs on a linear-time automaton, a search stops after
``TIME_BUDGET_S`` even inside one huge message, and the event loop gets its turn every ``SLICE_S``.
Earlier recalls (the tool's own calls, in any call shape, and their results) are never searched, so
results do not snowball; the rest of an assistant message that called it stays searchable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from . import recall_rank as rank
from . import recall_source as source
from .calls import call_id, message_calls
from .estimate import seq_of
from .recall_direct import RecallInputs
from .recall_direct import view_gaps as view_gaps
from .recall_regex import Pattern, UnsupportedPattern
from .recall_search import Found, MessageTexts, Query, Search, fold, run, run_async
from .recall_text import TOOL_NAME, call_label, has_text, is_recall_call, message_text

__all__ = ["Found", "MessageTexts", "Query", "RecallTool", "message_text", "parse", "render", "search"]

Message = dict[str, Any]
MAX_OUTPUT_TOKENS = 2_000
CHARS_PER_TOKEN = 4
DEFAULT_MAX_RESULTS = 20
MAX_RESULTS = 100
MAX_PATTERN = 200
TIME_BUDGET_S = 1.0
SLICE_S = 0.02  # the longest the async search holds the event loop before giving it a turn (plus one step)
TRAFFIC_STEP = 1_024  # messages read for the tool's own traffic (and results' calls) between two checkpoints
SHOWN_LINES = 4  # matching lines shown per message (best first); the rest are counted
LINES_SHARE = 0.6  # of the output, shared among the matching lines shown (the rest: labels, context)
LISTED_SEQS = 12  # numbers of the matching messages not shown, listed in the last line
FOOTER_CHARS = 400  # kept for that last line
LISTED_HEADER = "Other calls naming it (ask for one's output with from_seq and to_seq set to its number):"
NO_SOURCE = "[offset pages through the output of a call the query names; no call's path or command holds it]"
NOTE_CHARS = 100  # kept for the line under a source's output saying how to page on
ROLES = ("user", "assistant", "tool", "system", "developer")
NOTE = "Older messages removed from your view can be searched with the context_recall tool."
GAP_WORDS = {"removed": "removed from your view", "truncated": "truncated in your view", "stubbed": "shortened"}

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": (
                "Words you remember from what you look for, e.g. 'parse_config settings.py' (a name, a path, "
                'a command; case-insensitive; "a quoted phrase" is one word). Messages holding all of them '
                "match, best when they share a line. With regex: true, a regular expression"
            ),
        },
        "regex": {
            "type": "boolean",
            "description": "Treat query as a regular expression, matched per line (no backreferences or lookaround)",
            "default": False,
        },
        "role": {"type": "string", "enum": list(ROLES), "description": "Only messages of this role"},
        "from_seq": {
            "type": "integer",
            "minimum": 0,
            "description": "Only messages with this sequence number or later",
        },
        "to_seq": {"type": "integer", "minimum": 0, "description": "Only messages up to this sequence number"},
        "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "default": DEFAULT_MAX_RESULTS},
        "offset": {
            "type": "integer",
            "minimum": 0,
            "description": (
                "Page through a long output: skip this many lines of the output of each call the query names "
                "(the answer says which offset shows the next lines)"
            ),
            "default": 0,
        },
    },
    "required": ["query"],
}
DESCRIPTION = (
    "Search this conversation's full history, including messages and tool output that were removed or "
    "truncated to fit the context window. Give a few words you remember from the line you need: a name, "
    "a path, a command, a value ('ForeignKey to_field' finds lines holding both; a tool result also "
    "matches by its call, so 'settings.py DEBUG' finds DEBUG in the output of a call on settings.py). "
    "Returns the matching lines whole, with one line of context, best match first: words on one line "
    "before words on nearby lines, rarer words weigh more, messages no longer in your view first, then "
    f"the newest; at most about {MAX_OUTPUT_TOKENS} tokens. Narrow with more words, role, or "
    "from_seq/to_seq; regex: true for a regular expression. To get back what a file read or a command "
    "printed, give its path or command as the query ('src/app.py', 'pytest tests/test_api.py'): the "
    "output of the calls naming it comes first, whole or its most informative lines; page through a long "
    "one with offset (the answer says which offset and from_seq/to_seq)."
)


class RecallError(ValueError):
    """Bad input: the tool answers with ``success: false`` and this one line."""


def parse(data: Any) -> Query:
    """The checked input; RecallError names what is wrong."""
    if not isinstance(data, dict):
        raise RecallError(f"input must be an object with a 'query', got {type(data).__name__}")
    query, regex = data.get("query"), data.get("regex", False)
    if not isinstance(query, str) or not query.strip():
        raise RecallError("'query' is required: a non-empty string")
    if not isinstance(regex, bool):
        raise RecallError("'regex' must be true or false")
    role = data.get("role")
    if role is not None and role not in ROLES:
        raise RecallError(f"'role' must be one of {', '.join(ROLES)}, got {role!r}")
    first, last, limit = data.get("from_seq", 0), data.get("to_seq"), data.get("max_results", DEFAULT_MAX_RESULTS)
    offset = data.get("offset", 0)
    for key, value in (("from_seq", first), ("to_seq", last), ("max_results", limit), ("offset", offset)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise RecallError(f"'{key}' must be a whole number >= 0, got {value!r}")
    if not 1 <= limit <= MAX_RESULTS:
        raise RecallError(f"'max_results' must be between 1 and {MAX_RESULTS}, got {limit}")
    if regex:
        return Query(_compile(query), query.lower(), role, first, last, limit)
    needle = " ".join(fold(query).split())
    return Query(None, needle, role, first, last, limit, rank.query_words(fold(query)), offset or 0)


def _compile(query: str) -> Pattern:
    if len(query) > MAX_PATTERN:
        raise RecallError(f"the regular expression is longer than {MAX_PATTERN} characters")
    try:
        return Pattern(query)
    except UnsupportedPattern as exc:
        raise RecallError(str(exc)) from None


class HistoryReader:
    """What a search needs beyond each message's text, read incrementally: the seqs of this tool's own
    traffic (its results, and assistant messages that only called it and say nothing), and the call each
    other tool result answers (and its label's words).

    A result answers the nearest earlier assistant call with its id (as ``tool_pairs.tool_groups`` reads
    groups), so a reused id (``call_0`` in every turn) hides no other tool's result. Calls are read in any
    shape, in ``tool_calls`` or content blocks (calls.py). A history only grows until it is replaced (and
    its MessageTexts, which hold this reader, are cleared); a list that shrank or changed is read again.
    """

    def __init__(self) -> None:
        self.source: list[Message] | None = None
        self.read = 0
        self.latest: dict[str, Any] = {}  # call id -> the latest call declaring it
        self.own: set[int] = set()
        self.answered: dict[int, Any] = {}  # index of a tool result -> the call it answers
        self.call_texts: dict[int, str] = {}  # and that call as its label shows it, lowercase
        self.source_texts: dict[int, tuple[str, str]] = {}  # and what names that call, and its lowercase

    def update(self, messages: list[Message]) -> set[int]:
        for _ in self.steps(messages):
            pass
        return self.own

    def steps(self, messages: list[Message]) -> Iterator[None]:
        """Read what was appended since the last call, yielding every ``TRAFFIC_STEP`` messages."""
        if messages is not self.source or len(messages) < self.read:
            self.source, self.read = messages, 0
            self.latest.clear()
            self.own.clear()  # in place: a search holds this set
            self.answered.clear()
            self.call_texts.clear()
            self.source_texts.clear()
        while self.read < len(messages):
            stop = min(len(messages), self.read + TRAFFIC_STEP)
            for index in range(self.read, stop):
                self._read(index, messages[index])
            self.read = stop
            yield

    def _read(self, index: int, message: Message) -> None:
        role = message.get("role")
        if role == "assistant":
            calls = message_calls(message)
            for call in calls:
                if (identity := call_id(call)) is not None:
                    self.latest[identity] = call
            if calls and all(map(is_recall_call, calls)) and not has_text(message):
                self._own(message)
        elif role == "tool":
            call = self.latest.get(message.get("tool_call_id"))  # type: ignore[arg-type]
            if is_recall_call(call):
                self._own(message)
            elif call is not None:
                self.answered[index] = call
                # The words a result matches by: its call as the label shows it (a word deep in a long
                # script would match every result of the script).
                self.call_texts[index] = fold(call_label(call))
                head = source.call_head(call)
                self.source_texts[index] = (head, fold(head))  # recall_source.py

    def _own(self, message: Message) -> None:
        if (seq := seq_of(message)) is not None:
            self.own.add(seq)

    def label(self, messages: list[Message], index: int, seq: int) -> str:
        """``#seq role``; for a tool result, the call it answers."""
        message = messages[index]
        if message.get("role") != "tool":
            return f"#{seq} {message.get('role')}"
        call = self.answered.get(index)
        return f"#{seq} tool result of " + (call_label(call) if call is not None else "an unknown call")


def recall_traffic(messages: list[Message]) -> set[int]:
    """The seqs of this tool's own calls and results in ``messages`` (see HistoryReader)."""
    return HistoryReader().update(messages)


def new_search(
    messages: list[Message], query: Query, texts: MessageTexts, gaps: Mapping[int, str] | None = None
) -> Search:
    """A search of ``messages`` (the stored history) that skips the tool's own traffic; ``gaps``: the
    seqs the current view lacks (:func:`view_gaps`), ranked first."""
    if texts.history is None:
        texts.history = HistoryReader()
    reader, copied = texts.history, list(messages)  # the search reads the history as it is now

    def label(index: int, seq: int) -> str:
        gap = (gaps or {}).get(seq)
        return reader.label(copied, index, seq) + (f" ({GAP_WORDS[gap]})" if gap else "")

    return Search(
        copied,
        query,
        texts,
        reader.own,
        label,
        reader.call_texts,
        reader.source_texts,
        gaps or {},
        before=reader.steps(messages),
    )


def search(
    messages: list[Message],
    query: Query,
    texts: MessageTexts | None = None,
    budget_s: float = TIME_BUDGET_S,
    gaps: Mapping[int, str] | None = None,
) -> Search:
    """Search synchronously (the evaluation's probe, tests); the tool itself runs ``run_async``."""
    return run(new_search(messages, query, texts or MessageTexts(), gaps), budget_s)


def line_width(hits: list[Found], budget_chars: int) -> int:
    """How much of a long matching line to show: an even share of ``LINES_SHARE`` of the output among
    the matching lines the hits would show (a result matched by its call counts ``SHOWN_LINES``: its
    first lines are shown), at least ``LINE_CHARS_SHOWN`` (few matches: whole lines)."""
    marked = sum(min(len(hit.lines), SHOWN_LINES) if hit.lines else SHOWN_LINES for hit in hits) or 1
    return max(rank.LINE_CHARS_SHOWN, int(budget_chars * LINES_SHARE) // marked)


def _hit_lines(found: Search, hit: Found, width: int) -> list[str]:
    """The lines shown for one matching message."""
    text, lowered = found.texts.get(found.messages[hit.index])
    if found.query.pattern is not None:
        ends = dict(hit.lines)
        marked = [start for start, _ in hit.lines[:SHOWN_LINES]]
        lines = rank.shown_lines(text, marked, lambda start, end: [ends[start]], 2 / 3, width)
    elif not hit.lines:
        return rank.head_lines(text, SHOWN_LINES * width, width)
    else:
        words = [w for bit, w in enumerate(found.query.words) if hit.mask >> bit & 1]
        marked = sorted(start for start, _ in hit.lines[:SHOWN_LINES])
        spots = lambda start, end: rank.word_spots(lowered, start, end, words)  # noqa: E731
        lines = rank.shown_lines(text, marked, spots, 1 / 3, width)
    more = len(hit.lines) - SHOWN_LINES
    if more > 0:
        lines.append(f"  [{more}{'+' if len(hit.lines) >= rank.MAX_SHOWN_LINES else ''} more matching line(s) here]")
    return lines


def _header(found: Search, partial: bool) -> str:
    if not partial:
        return f"Matches, best first ({found.matched} message(s) matched):"
    words = ", ".join(f'"{word}"' for word in found.query.words)
    return f"No message holds all of {words}; messages holding some of them, best first:"


def _matches(found: Search, hits: list[Found], partial: bool, room: int) -> tuple[list[str], int]:
    """The header and the blocks of the matching messages shown within ``room``; how many were shown."""
    out = [_header(found, partial)]
    room -= len(out[0])
    width, shown = line_width(hits[: found.query.max_results], room), 0
    for hit in hits[: found.query.max_results]:
        block = "\n".join([found.label(hit.index, hit.seq), *_hit_lines(found, hit, width)])
        if len(block) + 2 > room and shown:
            break
        out.append(block[: max(room - 2, 0)])
        room -= len(out[-1]) + 2
        shown += 1
    return out, shown


def _footer(found: Search, hits: list[Found], left: int, late: str) -> str | None:
    """The last line: how many more matched (the first of them listed) and how to narrow."""
    if left <= 0 and not found.stopped:
        return None
    listed = ", ".join(f"#{hit.seq}" for hit in hits[:LISTED_SEQS])
    more = f"{left} more matching message(s) not shown ({listed}{', ...' if left > LISTED_SEQS else ''})"
    more = more if left > 0 else "no more shown"
    return f"[{more}; narrow with more words, role, or from_seq/to_seq]{late}"


def _calls_a_source(found: Search, hit: Found) -> bool:
    """An assistant message matching only on the first line of calls the query names (shown as sources)."""
    message, words = found.messages[hit.index], found.query.words
    if message.get("role") != "assistant" or not hit.lines:
        return False
    names = lambda call: all(word in fold(source.call_head(call)) for word in words)  # noqa: E731
    return source.only_calls_named(message, [start for start, _ in hit.lines], names)


def _source_label(found: Search, hit: Found) -> str:
    """``#seq tool result of`` the call's head (each argument's first line: longer than a label's)."""
    gap = found.hidden.get(hit.seq)
    head = found.source_texts[hit.index][0]
    return f"#{hit.seq} tool result of {head}" + (f" ({GAP_WORDS[gap]})" if gap else "")


def _source_blocks(found: Search, sources: list[Found], room: int) -> tuple[list[str], list[Found]]:
    """The sources shown within ``room`` (recall_source.py), and those left out."""
    labels = [_source_label(found, hit) for hit in sources]
    texts = [found.texts.get(found.messages[hit.index])[0] for hit in sources]
    needs = [len(label) + source.shown_size(text) + NOTE_CHARS for label, text in zip(labels, texts, strict=True)]
    blocks, left_out, seen = [], [], set()  # the names shown so far: a line repeating them says less
    for hit, label, text, give in zip(sources, labels, texts, source.shares(needs, room), strict=True):
        if not give:
            left_out.append(hit)
            continue
        hint = f", from_seq={hit.seq}, to_seq={hit.seq}"
        lines, note = source.informative_lines(text, found.query.offset, give - len(label) - NOTE_CHARS, hint, seen)
        blocks.append("\n".join([label, *lines, *([note] if note else [])])[:give])
    return blocks, left_out


def _render_sources(found: Search, hits: list[Found], partial: bool, budget_chars: int, late: str) -> str:
    """The sources first, then (a share of the output) the other matches: those merely calling it last."""
    sources = found.sources[: found.query.max_results]
    shown_sources = {hit.index for hit in sources}
    others = [] if found.query.offset else [hit for hit in hits if hit.index not in shown_sources]
    callers = [hit for hit in others[: found.query.max_results] if _calls_a_source(found, hit)]
    called = {id(hit) for hit in callers}
    others = [hit for hit in others if id(hit) not in called]  # their calls' output is shown instead
    header = f"Output of the {len(found.sources)} call(s) naming it, those your view lacks first, then the newest:"
    room = budget_chars - FOOTER_CHARS - len(header)
    lines_room = int(room * (1 - source.source_share(found.query.needle)))
    matches, shown = _matches(found, others, partial, lines_room) if others else ([], 0)
    room -= sum(len(block) + 2 for block in matches)
    blocks, left_out = _source_blocks(found, sources, room)
    room -= sum(len(block) + 2 for block in blocks)
    listed: list[str] = []
    for hit in left_out:  # the calls whose output did not fit: named, so one can be asked for by its seq
        label = found.label(hit.index, hit.seq)
        if len(label) + 1 > room - len(LISTED_HEADER) - 2:
            break
        listed.append(label)
        room -= len(label) + 1
    listing = ["\n".join([LISTED_HEADER, *listed])] if listed else []
    left = len(others) + len(callers) - shown + len(left_out) - len(listed) if not found.query.offset else 0
    not_shown = left_out[len(listed) :] + found.sources[len(sources) :] + others[shown:] + callers
    footer = _footer(found, not_shown, left + len(found.sources) - len(sources), late)
    return "\n\n".join([header, *blocks, *listing, *matches, *([footer] if footer else [])])


def render(found: Search, budget_chars: int) -> str:
    """The tool's output within ``budget_chars``, with a last line saying what was left out."""
    if found.query.offset and not found.sources and not found.replaced:  # paging a query naming no call
        out = _render(found, budget_chars - len(NO_SOURCE) - 2)
        return f"{NO_SOURCE}\n\n{out}"
    return _render(found, budget_chars)


def _render(found: Search, budget_chars: int) -> str:
    if found.replaced:
        return "The conversation's history was replaced or edited during the search; nothing was found. Search again."
    late = ""
    if found.stopped:
        where = f" while reading #{found.stopped_at}" if found.stopped_at >= 0 else ""
        late = f" (the search stopped at its time limit{where}; older messages were not searched)"
    hits, partial = (found.found, False) if found.found else (found.partial, True)
    if found.sources:
        return _render_sources(found, hits, partial, budget_chars, late)
    if not hits:
        return "No message in this conversation's history matches." + late
    out, shown = _matches(found, hits, partial, budget_chars - FOOTER_CHARS)
    footer = _footer(found, hits[shown:], (len(found.some) if partial else found.matched) - shown, late)
    return "\n\n".join([*out, *([footer] if footer else [])])


class RecallTool:
    """The ``context_recall`` tool over one manager's stored history (amplifier-core's Tool protocol)."""

    name = TOOL_NAME
    description = DESCRIPTION
    input_schema = INPUT_SCHEMA

    def __init__(self, source: Any) -> None:
        """``source``: a callable giving a :class:`RecallInputs` per search, or an object with such a
        ``recall_inputs`` method (the manager: ``RecallTool(context)``)."""
        self._source: Callable[[], RecallInputs] = getattr(source, "recall_inputs", source)
        self.time_budget_s = TIME_BUDGET_S
        self.slice_s = SLICE_S

    async def execute(self, input: dict[str, Any]) -> Any:  # noqa: A002 - the protocol's name
        from amplifier_core.models import ToolResult  # the host provides amplifier-core

        source: RecallInputs | None = None
        try:
            query = parse(input)
            source = self._source()  # an in-place edit (a redaction) drops the cached texts first
            guard = source.guard
            found = new_search(source.messages, query, source.texts, source.gaps)
            await run_async(found, self.time_budget_s, self.slice_s, edited=lambda: guard.edited)
            return ToolResult(success=True, output=render(found, MAX_OUTPUT_TOKENS * CHARS_PER_TOKEN))
        except RecallError as exc:
            return ToolResult(success=False, output=str(exc), error={"message": str(exc)})
        except Exception as exc:  # noqa: BLE001 - never raise into the orchestrator
            (source or self._source()).faults["recall_failures"] += 1
            message = f"context_recall failed: {type(exc).__name__}"
            return ToolResult(success=False, output=message, error={"message": message})
