"""`context_recall`: an opt-in tool that searches what compaction took out of the view (``recall_tool``).

The module keeps the whole history; only the view forgets. This tool lets the model search the stored
history (full text, tool results that the view truncated included) and the spill files this session
wrote, for a literal phrase (case-insensitive) or a regular expression. Results are the matching
lines with one line of context, newest message first, each labelled with the message's sequence number
and role (and, for a tool result, the tool's name and arguments), within ``MAX_OUTPUT_TOKENS``.

It never changes the history and never raises into the orchestrator: bad input gets a failed
``ToolResult`` with one line. A regular expression is refused when it can backtrack catastrophically
(nested or stacked quantifiers, backreferences, more than ``MAX_PATTERN`` characters), lines longer
than ``REGEX_LINE_CHARS`` are matched on their head only, and a search stops after ``TIME_BUDGET_S``.
Earlier recalls (the tool's own calls and results) are never searched, so results do not snowball.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .estimate import seq_of
from .evidence_text import content_texts
from .token_counter import tool_call_parts

Message = dict[str, Any]
TOOL_NAME = "context_recall"
MAX_OUTPUT_TOKENS = 2_000
CHARS_PER_TOKEN = 4
DEFAULT_MAX_RESULTS = 20
MAX_RESULTS = 100
MAX_PATTERN = 200
REGEX_LINE_CHARS = 1_000
TIME_BUDGET_S = 1.0
LINE_CHARS_SHOWN = 300  # a matching line longer than this is shown around the match
ROLES = ("user", "assistant", "tool", "system", "developer")
NOTE = "Older messages removed from your view can be searched with the context_recall tool."

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "A phrase to find (case-insensitive), or a regex with regex: true"},
        "regex": {"type": "boolean", "description": "Treat query as a Python regular expression", "default": False},
        "role": {"type": "string", "enum": list(ROLES), "description": "Only messages of this role"},
        "from_seq": {
            "type": "integer",
            "minimum": 0,
            "description": "Only messages with this sequence number or later",
        },
        "to_seq": {"type": "integer", "minimum": 0, "description": "Only messages up to this sequence number"},
        "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "default": DEFAULT_MAX_RESULTS},
    },
    "required": ["query"],
}
DESCRIPTION = (
    "Search this conversation's full history, including messages and tool output that were removed or "
    "truncated to fit the context window. Returns matching lines with their message number and role, "
    f"newest first, at most about {MAX_OUTPUT_TOKENS} tokens."
)

# Catastrophic backtracking needs a quantified group that itself holds a quantifier, or adjacent
# unbounded quantifiers over overlapping classes; backreferences make matching exponential too.
_NESTED = re.compile(r"\((?:[^()\\]|\\.)*[*+}](?:[^()\\]|\\.)*\)\s*[*+{?]")
_STACKED = re.compile(r"(?:\.\*|\.\+|\\[sSwWdD][*+]|\][*+])\s*(?:\.\*|\.\+|\\[sSwWdD][*+]|\[[^\]]*\][*+])")
_BACKREF = re.compile(r"\\[1-9]|\(\?P=")
_QUANTIFIED_ALTERNATION = re.compile(r"\((?:[^()\\]|\\.)*\|(?:[^()\\]|\\.)*\)\s*[*+{]")


class RecallError(ValueError):
    """Bad input: the tool answers with ``success: false`` and this one line."""


@dataclass(frozen=True)
class Query:
    pattern: re.Pattern[str]
    literal: bool
    needle: str  # the literal, lowercased (a literal query is first looked up as a substring)
    role: str | None
    first: int
    last: int | None
    max_results: int


@dataclass(frozen=True)
class Hit:
    seq: int
    label: str
    lines: tuple[str, ...]


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
    for key, value in (("from_seq", first), ("to_seq", last), ("max_results", limit)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise RecallError(f"'{key}' must be a whole number >= 0, got {value!r}")
    if not 1 <= limit <= MAX_RESULTS:
        raise RecallError(f"'max_results' must be between 1 and {MAX_RESULTS}, got {limit}")
    return Query(_compile(query, regex), not regex, query.lower(), role, first, last, limit)


def _compile(query: str, regex: bool) -> re.Pattern[str]:
    if not regex:
        return re.compile(re.escape(query), re.IGNORECASE)
    if len(query) > MAX_PATTERN:
        raise RecallError(f"the regular expression is longer than {MAX_PATTERN} characters")
    if any(p.search(query) for p in (_NESTED, _STACKED, _BACKREF, _QUANTIFIED_ALTERNATION)):
        raise RecallError(
            "the regular expression could take exponential time "
            "(nested or stacked quantifiers, a repeated alternation, backreferences); simplify it"
        )
    try:
        return re.compile(query, re.IGNORECASE)
    except re.error as exc:
        raise RecallError(f"bad regular expression: {exc}") from None


def recall_call_ids(messages: list[Message]) -> set[str]:
    """Ids of this tool's own calls: their results are never searched (no snowballing)."""
    ids = set()
    for message in messages:
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict) and tool_call_parts(call)[0] == TOOL_NAME and isinstance(call.get("id"), str):
                ids.add(call["id"])
    return ids


def is_recall_message(message: Message, own: set[str]) -> bool:
    """A result of this tool, or an assistant turn that only called it."""
    if message.get("role") == "tool":
        return message.get("tool_call_id") in own
    calls = message.get("tool_calls") or ()
    return bool(calls) and all(isinstance(c, dict) and c.get("id") in own for c in calls) and not message.get("content")


def search(
    messages: list[Message], spilled: dict[str, int], query: Query, text_of: Any = None
) -> tuple[list[Hit], int, bool]:
    """(hits newest first, how many messages matched in all, whether the time budget ran out).
    ``text_of(message)`` gives a message's searchable text and its lowercase (a caller may memoize them)."""
    text_of = text_of or _plain_texts
    own = recall_call_ids(messages)
    hits: list[Hit] = []
    matched, deadline = 0, time.monotonic() + TIME_BUDGET_S
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        seq = seq_of(message)
        if seq is None or seq < query.first or (query.last is not None and seq > query.last):
            continue
        if (query.role and message.get("role") != query.role) or is_recall_message(message, own):
            continue
        if time.monotonic() > deadline:
            return hits, matched, True
        text, lowered = text_of(message)
        if query.literal and query.needle not in lowered:
            continue  # one substring scan of the whole text; lines are split only where it is found
        lines = _matching(text, query)
        if lines:
            matched += 1
            if len(hits) < query.max_results:
                hits.append(Hit(seq, _label(messages, index, seq), lines))
    for path, seq in spilled.items():
        if len(hits) >= query.max_results or time.monotonic() > deadline:
            break
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        lines = _matching(text, query)
        if lines:
            matched += 1
            hits.append(Hit(seq, f"#{seq} spill file {Path(path).name}", lines))
    return hits, matched, False


def _plain_texts(message: Message) -> tuple[str, str]:
    text = message_text(message)
    return text, text.lower()


def message_text(message: Message) -> str:
    """What a recall searches in a message: its text (blocks included) and its tool calls."""
    parts = content_texts(message.get("content"))
    for call in message.get("tool_calls") or ():
        name, args = tool_call_parts(call)
        parts.append(f"{name}({args})")
    return "\n".join(parts)


def _matching(text: str, query: Query) -> tuple[str, ...]:
    """Each matching line with one line of context before and after; the matching one marked "> ". A
    regular expression reads at most the first ``REGEX_LINE_CHARS`` of a line (a literal reads it all)."""
    lines = text.split("\n")
    out: list[str] = []
    shown: set[int] = set()
    for index, line in enumerate(lines):
        match = query.pattern.search(line if query.literal else line[:REGEX_LINE_CHARS])
        if match is None:
            continue
        for near in (index - 1, index, index + 1):
            if 0 <= near < len(lines) and near not in shown:
                shown.add(near)
                text_line = _around(line, match.start()) if near == index else lines[near][:LINE_CHARS_SHOWN]
                out.append(("> " if near == index else "  ") + text_line)
    return tuple(out)


def _around(line: str, start: int) -> str:
    if len(line) <= LINE_CHARS_SHOWN:
        return line
    begin = max(0, start - LINE_CHARS_SHOWN // 3)
    return ("..." if begin else "") + line[begin : begin + LINE_CHARS_SHOWN - 6] + "..."


def _label(messages: list[Message], index: int, seq: int) -> str:
    """ "#seq role", and for a tool result the call it answers (the latest earlier call with its id)."""
    message = messages[index]
    if message.get("role") != "tool":
        return f"#{seq} {message.get('role')}"
    call_id = message.get("tool_call_id")
    for earlier in reversed(messages[:index]):
        for call in earlier.get("tool_calls") or ():
            if isinstance(call, dict) and call.get("id") == call_id:
                name, args = tool_call_parts(call)
                return f"#{seq} tool result of {name}({args[:120]})"
    return f"#{seq} tool result of an unknown call"


def render(hits: list[Hit], matched: int, stopped: bool, budget_chars: int) -> str:
    """The tool's output within ``budget_chars``, with a last line saying what was left out."""
    late = " (the search stopped at its time limit)" if stopped else ""
    if not hits:
        return "No message in this conversation's history matches." + late
    out, used, shown = [f"Matches, newest first ({matched} message(s) matched):"], 0, 0
    for hit in hits:
        block = "\n".join([hit.label, *hit.lines])
        if used + len(block) > budget_chars and shown:
            break
        out.append(block[: budget_chars - used])
        used += len(block)
        shown += 1
    left = matched - shown
    if left > 0 or stopped:
        more = f"{left} more matching message(s) not shown" if left > 0 else "no more shown"
        out.append(f"[{more}; narrow the query, the role or from_seq/to_seq]{late}")
    return "\n\n".join(out)


class RecallTool:
    """The ``context_recall`` tool over one manager's stored history (amplifier-core's Tool protocol)."""

    name = TOOL_NAME
    description = DESCRIPTION
    input_schema = INPUT_SCHEMA

    def __init__(self, manager: Any) -> None:
        self._manager = manager
        self._texts: dict[int, tuple[Message, str, str]] = {}  # id -> (stored message, text, lowercase)

    def _text(self, message: Message) -> tuple[str, str]:
        """A stored message's searchable text and its lowercase, built once (stored messages never change)."""
        entry = self._texts.get(id(message))
        if entry is None or entry[0] is not message:
            text = message_text(message)
            entry = self._texts[id(message)] = (message, text, text.lower())
        return entry[1], entry[2]

    async def execute(self, input: dict[str, Any]) -> Any:  # noqa: A002 - the protocol's name
        from amplifier_core.models import ToolResult  # the host provides amplifier-core

        try:
            query = parse(input)
            spilled = self._manager._spill_sources()
            hits, matched, stopped = search(list(self._manager.messages), spilled, query, self._text)
            text = render(hits, matched, stopped, MAX_OUTPUT_TOKENS * CHARS_PER_TOKEN)
            return ToolResult(success=True, output=text)
        except RecallError as exc:
            return ToolResult(success=False, output=str(exc), error={"message": str(exc)})
        except Exception as exc:  # noqa: BLE001 - never raise into the orchestrator
            self._manager._fault_counts["recall_failures"] += 1
            message = f"context_recall failed: {type(exc).__name__}"
            return ToolResult(success=False, output=message, error={"message": message})
