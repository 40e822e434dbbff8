"""Pure parts of the summary strategy: which span to absorb, and how the summarizer sees it.

Nothing here touches a manager. The span is chosen over the *live* history (stored, not removed,
not an earlier summary), starts after the first real user message, ends before the last real user
message and the ``protected_recent`` tail, and is snapped by tool-call identity so that an
assistant's ``tool_calls`` and every one of their results are absorbed together or not at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .calls import call_name, message_calls, stored_arguments
from .envelope import wrap
from .estimate import seq_of
from .replay import is_real_user_message
from .tool_pairs import tool_groups

Message = dict[str, Any]

_SUMMARY_ENVELOPE_SOURCE = "context-summary"
_SUMMARY_METADATA_TYPE = "context_summary"
_FORK_BOUNDARY_EXCERPT_CHARS = 300
_TOOL_ARGS_MAX_CHARS = 500

DEFAULT_SUMMARIZATION_PROMPT = """\
You are condensing the oldest part of a working session between a user and an AI assistant. \
Those messages are about to leave the assistant's context; your summary replaces them, so the \
assistant must be able to carry on from it alone. Write exactly these five sections, as markdown \
headings, in this order:

## User Requests & Decisions
Every request, constraint and preference the user stated, and every decision taken, with the \
user's exact wording for anything precise (names, numbers, limits, "never"/"always" rules).

## Files Examined or Modified
Each path, what was learned from it or what was changed in it, and why.

## Errors Encountered & Resolutions
Each error or failed attempt, its cause when known, and how it was resolved (or that it is open).

## Current Task State
What is done, what is in progress, and what was about to happen next.

## Key Technical Details
Identifiers, commands, versions, values, URLs and anything else that must be repeated exactly.

Guidelines:
- Keep facts; drop pleasantries and narration. Quote exact strings rather than paraphrasing them.
- Never invent anything that is not in the conversation. Write "none" under an empty section.
- When a later message overrides an earlier one, record the latest state and what it replaced.
- Be much shorter than the conversation you summarize."""


def is_summary_message(message: Any) -> bool:
    """True for a summary this strategy appended (never re-selected for a later round)."""
    metadata = message.get("metadata") if isinstance(message, dict) else None
    return isinstance(metadata, dict) and metadata.get("type") == _SUMMARY_METADATA_TYPE


def live_messages(messages: list[Message], removed: set[int]) -> list[Message]:
    """Stored messages a summary may still absorb: not system, not removed, not a summary."""
    return [m for m in messages if m.get("role") != "system" and seq_of(m) not in removed and not is_summary_message(m)]


def protected_bounds(live: list[Message], protected_recent: float, turn_start: int | None = None) -> tuple[int, int]:
    """(start, protected_boundary): the span lives in ``live[start:protected_boundary]``.

    The first real user message (the task) is kept, so the span starts after it; the current turn's
    prompt (the last real user message, or the one before the steering messages stored mid-turn:
    :func:`replay.turn_prompt_index`), what follows it and everything from the ``protected_recent``
    tail on are kept too. Envelopes (summary, replay, notice) never count as the user's words.
    """
    users = [i for i, m in enumerate(live) if is_real_user_message(m)]
    start = users[0] + 1 if users else 0
    boundary = int(len(live) * (1 - protected_recent))
    # ``turn_start``: the prompt's _seq, read in the stored history (replay.turn_prompt_seq).
    turn = [i for i in users if turn_start is not None and (seq_of(live[i]) or 0) >= turn_start]
    kept = [i for i in turn or users[-1:] if i >= start]  # the span starts after the first user message
    if kept:
        boundary = min(boundary, kept[0])
    return start, boundary


def snap_absorb_boundary(live: list[Message], end_idx: int, protected_boundary: int, start: int = 0) -> int:
    """The end of ``live[start:end]`` after snapping by tool-call identity (a bounded fixed point).

    A group (an assistant's calls and every id-matched result, adjacent or not) inside the span
    pulls all its results in; a group that reaches ``protected_boundary`` (or began before
    ``start``) is excluded from its first member on. Returns ``start`` (0 by default) when nothing
    can be absorbed.
    """
    groups = tool_groups(live)
    limit = min(protected_boundary, len(live))
    end = min(end_idx, limit)
    for _ in range(2 * len(live) + 2):
        if end <= start:
            return start
        reach, offending = end, None
        for index in range(start, end):
            group = groups.get(index)
            if group is None:
                continue
            if group[0] < start or group[-1] >= limit:
                offending = index
                break
            reach = max(reach, group[-1] + 1)
        if offending is not None:
            limit = end = offending  # nothing at or after the offending group may join later
        elif reach == end:
            return end
        else:
            end = reach
    return start


def select_span(
    live: list[Message],
    size: Callable[[Message], int],
    goal_tokens: int,
    start: int,
    boundary: int,
) -> tuple[int, int, int]:
    """(start, end, tokens): the oldest snapped span of at least ``goal_tokens`` (or all there is)."""
    end, total = start, 0
    while end < boundary and total < goal_tokens:
        total += size(live[end])
        end += 1
    end = snap_absorb_boundary(live, end, boundary, start)
    return start, end, sum(size(m) for m in live[start:end])


# ----- what the summarizer reads -------------------------------------------------------------------


def content_text(content: Any) -> str:
    """Text of a message's content: a string, or its text blocks joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for block in content:
            text = block.get("text") if isinstance(block, dict) else getattr(block, "text", None)
            if isinstance(text, str):
                texts.append(text)
        return "\n".join(texts)
    return "" if content is None else str(content)


def _call_line(call: Any) -> str:
    """``  [tool_call: name(args)]`` as the original writes it: stored string arguments as they are,
    others as compact JSON (the name and arguments read by calls.py, whatever the shape)."""
    if not isinstance(call, dict):
        return f"  [tool_call: {call!r}]"
    args = stored_arguments(call)
    if not isinstance(args, str):
        args = json.dumps(args, separators=(",", ":"), default=str)
    if len(args) > _TOOL_ARGS_MAX_CHARS:
        args = args[:_TOOL_ARGS_MAX_CHARS] + "..."
    return f"  [tool_call: {call_name(call) or None}({args})]"


def format_messages_for_summarization(messages: list[Message]) -> str:
    """The span as one text: ``[role]: content`` per message, tool calls and results labelled."""
    parts = []
    for message in messages:
        text = content_text(message.get("content"))
        if message.get("role") == "tool":
            line = f"[tool_result for {message.get('tool_call_id')}]: {text}"
        else:
            line = f"[{message.get('role')}]: {text}"
        line += "".join("\n" + _call_line(call) for call in message_calls(message))
        parts.append(line)
    return "\n\n".join(parts)


def excerpt(text: str, limit: int = _FORK_BOUNDARY_EXCERPT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def fork_instruction(prompt: str, span: list[Message]) -> str:
    """The summarization instruction appended after a forked prefix, scoped to the span.

    Only the span's last message is quoted (as the original does): the request must stay smaller
    than one that re-sends the span, which is the point of forking.
    """
    last = excerpt(format_messages_for_summarization(span[-1:]))
    return (
        f"{prompt}\n\nSCOPE OF THIS SUMMARY. Summarize ONLY the OLDEST part of the conversation above: "
        f"the first {len(span)} message(s) after the user's first message (which stays as it is), "
        "ending with the message quoted below. Messages already marked as a context summary stay where "
        "they are: do not restate them. Do not summarize anything after it (the quoted message), and do not "
        f"describe this instruction.\n\n--- final message of the span (verbatim excerpt) ---\n{last}\n"
        "--- end excerpt ---"
    )


def response_text(response: Any) -> str:
    """The concatenated ``.text`` of every content block of a provider response (may be empty)."""
    content = getattr(response, "content", None)
    if content is None and isinstance(response, dict):
        content = response.get("content")
    return content_text(content).strip() if isinstance(content, list | str) else ""


def summary_content(text: str) -> str:
    """The summary as stored: in its envelope, which nothing the summarizer wrote can end."""
    return wrap(_SUMMARY_ENVELOPE_SOURCE, text)


def identity_key(message: Message) -> tuple[Any, str, Any]:
    """How a message is recognised in a wire record that carries no ``_seq``."""
    return (message.get("role"), str(message.get("content")), message.get("tool_call_id"))


def prefix_contains_span(prefix: list[Message], span: list[Message], view_forms: list[Message]) -> bool:
    """Every span message is in the prefix: by ``_seq`` when the prefix has them, else by identity."""
    prefix_seqs = {seq_of(m) for m in prefix} - {None}
    if prefix_seqs:
        return all(seq_of(m) in prefix_seqs for m in span)
    keys = {identity_key(m) for m in prefix}
    return all(identity_key(m) in keys or identity_key(v) in keys for m, v in zip(span, view_forms, strict=True))
