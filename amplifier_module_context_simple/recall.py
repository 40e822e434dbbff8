"""`context_recall`: an opt-in tool that searches what compaction took out of the view (``recall_tool``).

The module keeps the whole history; only the view forgets. This tool lets the model search the stored
history (full text, tool results that the view truncated included: a spill file holds the same text,
so none is read) for a literal phrase (case-insensitive) or a regular expression. Results are the
matching lines with one line of context, newest message first, each labelled with the message's
sequence number and role (and, for a tool result, the tool's name and arguments), within
``MAX_OUTPUT_TOKENS``.

It never changes the history and never raises into the orchestrator: bad input gets a failed
``ToolResult`` with one line. Nothing backtracks (recall_search.py, recall_regex.py): a literal is found
with ``str.find``, a regular expression runs on a linear-time automaton, a search stops after
``TIME_BUDGET_S`` even inside one huge message, and the event loop gets its turn every ``SLICE_S``.
Earlier recalls (the tool's own calls and results) are never searched, so results do not snowball.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .estimate import seq_of
from .recall_regex import Pattern, UnsupportedPattern
from .recall_search import Hit, MessageTexts, Query, Search, message_text, run, run_async
from .token_counter import tool_call_parts

__all__ = ["Hit", "MessageTexts", "Query", "RecallTool", "message_text", "parse", "render", "search"]

Message = dict[str, Any]
TOOL_NAME = "context_recall"
MAX_OUTPUT_TOKENS = 2_000
CHARS_PER_TOKEN = 4
DEFAULT_MAX_RESULTS = 20
MAX_RESULTS = 100
MAX_PATTERN = 200
TIME_BUDGET_S = 1.0
SLICE_S = 0.02  # the longest the async search holds the event loop before giving it a turn (plus one step)
TRAFFIC_STEP = 4_096  # messages read for the tool's own traffic between two checkpoints
ROLES = ("user", "assistant", "tool", "system", "developer")
NOTE = "Older messages removed from your view can be searched with the context_recall tool."

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "A phrase to find (case-insensitive), or a regex with regex: true"},
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
    },
    "required": ["query"],
}
DESCRIPTION = (
    "Search this conversation's full history, including messages and tool output that were removed or "
    "truncated to fit the context window. Returns matching lines with their message number and role, "
    f"newest first, at most about {MAX_OUTPUT_TOKENS} tokens."
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
    for key, value in (("from_seq", first), ("to_seq", last), ("max_results", limit)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise RecallError(f"'{key}' must be a whole number >= 0, got {value!r}")
    if not 1 <= limit <= MAX_RESULTS:
        raise RecallError(f"'max_results' must be between 1 and {MAX_RESULTS}, got {limit}")
    return Query(_compile(query) if regex else None, query.lower(), role, first, last, limit)


def _compile(query: str) -> Pattern:
    if len(query) > MAX_PATTERN:
        raise RecallError(f"the regular expression is longer than {MAX_PATTERN} characters")
    try:
        return Pattern(query)
    except UnsupportedPattern as exc:
        raise RecallError(str(exc)) from None


def is_recall_call(call: Any) -> bool:
    """A tool call of this tool (the one place that reads a call's name for recall)."""
    return isinstance(call, dict) and tool_call_parts(call)[0] == TOOL_NAME


class TrafficReader:
    """The seqs of this tool's own traffic: its results, and assistant turns that only called it.

    A result belongs to the nearest earlier assistant that declared its id (as ``tool_pairs.tool_groups``
    reads groups), so a reused id (``call_0`` in every turn) hides no other tool's result. Read
    incrementally: a history only grows until it is replaced (and its MessageTexts, which hold this
    reader, are cleared); a list that shrank or changed is read again.
    """

    def __init__(self) -> None:
        self.source: list[Message] | None = None
        self.read = 0
        self.recall_ids: set[str] = set()  # ids whose latest declaring call is this tool's
        self.own: set[int] = set()

    def update(self, messages: list[Message]) -> set[int]:
        for _ in self.steps(messages):
            pass
        return self.own

    def steps(self, messages: list[Message]) -> Iterator[None]:
        """Read what was appended since the last call, yielding every ``TRAFFIC_STEP`` messages."""
        if messages is not self.source or len(messages) < self.read:
            self.source, self.read = messages, 0
            self.recall_ids.clear()
            self.own.clear()  # in place: a search holds this set
        while self.read < len(messages):
            stop = min(len(messages), self.read + TRAFFIC_STEP)
            for message in messages[self.read : stop]:
                self._read(message)
            self.read = stop
            yield

    def _read(self, message: Message) -> None:
        role, calls = message.get("role"), message.get("tool_calls") or ()
        if role == "assistant" and calls:
            mine = [is_recall_call(call) for call in calls]
            for call, is_mine in zip(calls, mine, strict=True):
                call_id = call.get("id") if isinstance(call, dict) else None
                if isinstance(call_id, str):
                    (self.recall_ids.add if is_mine else self.recall_ids.discard)(call_id)
            if all(mine) and not message.get("content") and (seq := seq_of(message)) is not None:
                self.own.add(seq)
        elif role == "tool" and message.get("tool_call_id") in self.recall_ids:
            if (seq := seq_of(message)) is not None:
                self.own.add(seq)


def recall_traffic(messages: list[Message]) -> set[int]:
    """The seqs of this tool's own calls and results in ``messages`` (see TrafficReader)."""
    return TrafficReader().update(messages)


def _labeller(messages: list[Message]) -> Any:
    def label(index: int, seq: int) -> str:
        """ "#seq role", and for a tool result the call it answers (the nearest earlier call with its id)."""
        message = messages[index]
        if message.get("role") != "tool":
            return f"#{seq} {message.get('role')}"
        call_id = message.get("tool_call_id")
        for earlier in range(index - 1, -1, -1):
            for call in messages[earlier].get("tool_calls") or ():
                if isinstance(call, dict) and call.get("id") == call_id:
                    name, args = tool_call_parts(call)
                    return f"#{seq} tool result of {name}({args[:120]})"
        return f"#{seq} tool result of an unknown call"

    return label


def new_search(messages: list[Message], query: Query, texts: MessageTexts) -> Search:
    """A search of ``messages`` (the stored history) that skips the tool's own traffic."""
    if texts.traffic is None:
        texts.traffic = TrafficReader()
    reader, copied = texts.traffic, list(messages)  # the search reads the history as it is now
    return Search(copied, query, texts, reader.own, _labeller(copied), before=reader.steps(messages))


def search(
    messages: list[Message], query: Query, texts: MessageTexts | None = None, budget_s: float = TIME_BUDGET_S
) -> Search:
    """Search synchronously (the evaluation's probe); the tool itself runs ``run_async``."""
    return run(new_search(messages, query, texts or MessageTexts()), budget_s)


def render(found: Search, budget_chars: int) -> str:
    """The tool's output within ``budget_chars``, with a last line saying what was left out."""
    if found.replaced:
        return "The conversation's history was replaced during the search; nothing was searched. Search again."
    late = ""
    if found.stopped:
        where = f" while reading #{found.stopped_at}" if found.stopped_at >= 0 else ""
        late = f" (the search stopped at its time limit{where}; older messages were not searched)"
    if not found.hits:
        return "No message in this conversation's history matches." + late
    out, used, shown = [f"Matches, newest first ({found.matched} message(s) matched):"], 0, 0
    for hit in found.hits:
        block = "\n".join([hit.label, *hit.lines])
        if used + len(block) > budget_chars and shown:
            break
        out.append(block[: budget_chars - used])
        used += len(block)
        shown += 1
    left = found.matched - shown
    if left > 0 or found.stopped:
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
        self.time_budget_s = TIME_BUDGET_S
        self.slice_s = SLICE_S

    async def execute(self, input: dict[str, Any]) -> Any:  # noqa: A002 - the protocol's name
        from amplifier_core.models import ToolResult  # the host provides amplifier-core

        try:
            query = parse(input)
            manager = self._manager
            found = new_search(manager.messages, query, manager._recall_texts)
            await run_async(found, self.time_budget_s, self.slice_s)
            return ToolResult(success=True, output=render(found, MAX_OUTPUT_TOKENS * CHARS_PER_TOKEN))
        except RecallError as exc:
            return ToolResult(success=False, output=str(exc), error={"message": str(exc)})
        except Exception as exc:  # noqa: BLE001 - never raise into the orchestrator
            self._manager._fault_counts["recall_failures"] += 1
            message = f"context_recall failed: {type(exc).__name__}"
            return ToolResult(success=False, output=message, error={"message": message})
