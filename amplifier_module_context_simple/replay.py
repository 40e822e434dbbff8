"""Last-user replay: repeat the user's most recent words at the tail after a compaction boundary.

The real-user predicate lives here and is the only one this package uses: it rejects any
``<system-reminder`` opener whatever its attributes, so a summary, replay or notice envelope is
never taken for the user's own words (amplifier-foundation's check lets attributed envelopes by).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .calls import message_calls
from .envelope import wrap
from .estimate import seq_of
from .tool_pairs import is_hook_injection

REPLAY_ENVELOPE_SOURCE = "context-replay"
REMINDER_ENVELOPE_PREFIX = "<system-reminder"

_REPLAY_PREAMBLE = (
    "This is a verbatim copy of your most recent instruction, repeated here because context "
    "compaction has moved it far from the end of the conversation. It is NOT a new request -- "
    "do not answer it again if it is already handled."
)


def is_real_user_message(entry: Any) -> bool:
    """True only for the user's own words: role user, not a tool result, not a hook's injection, no
    reminder envelope."""
    if not isinstance(entry, dict) or entry.get("role") != "user" or "tool_call_id" in entry:
        return False
    if is_hook_injection(entry):
        return False  # a hook's inject_context: amplifier-core stores its text as given, often unwrapped
    return not opens_with_reminder(entry.get("content"))


def turn_prompt_index(
    messages: list[dict[str, Any]], is_real_user: Callable[[Any], bool] = is_real_user_message
) -> int | None:
    """Index of the current turn's prompt: the newest real user message that is not a steering message.

    A turn starts with the user's prompt and ends with an assistant message that calls no tool (the
    orchestrators' loops stop there; loop-streaming also stores a closing one when a turn is cancelled).
    loop-streaming's ``session.steer(text)`` stores a plain user message in the middle of a turn, after a
    tool round's results (several queued steers are stored one after the other), so the turn's prompt is no
    longer the last user message. A steering message is therefore a real user message whose nearest earlier
    message (instructions, hook injections and envelopes aside) is a tool result or another steering
    message; any other real user message is a prompt, so of a run of user messages sent one after another
    only the newest is the prompt. Only the messages after the last final answer are read; with no user
    message since then, the prompt is the last real user message.
    """
    answer = next((i for i in range(len(messages) - 1, -1, -1) if _final_answer(messages[i])), -1)
    prompt, previous = None, None  # previous: "tool", "steer", "prompt" or "calls" (the nearest earlier kind)
    for index in range(answer + 1, len(messages)):
        message = messages[index]
        if is_real_user(message):
            steering = prompt is not None and previous in ("tool", "steer")
            prompt, previous = (prompt, "steer") if steering else (index, "prompt")
        elif message.get("role") == "tool":
            previous = "tool"
        elif message.get("role") == "assistant" and not is_hook_injection(message):
            previous = "calls"
    if prompt is not None:
        return prompt
    return next((i for i in range(len(messages) - 1, -1, -1) if is_real_user(messages[i])), None)


def turn_prompt_seq(stored: list[dict[str, Any]]) -> int | None:
    """The ``_seq`` of the current turn's prompt in the stored history (read there: a view whose tool
    results were removed no longer shows that a steering message followed one)."""
    index = turn_prompt_index(stored)
    return None if index is None else seq_of(stored[index])


def _final_answer(message: dict[str, Any]) -> bool:
    """An assistant message that calls no tool (a hook's injection of that role is not an answer)."""
    return message.get("role") == "assistant" and not message_calls(message) and not is_hook_injection(message)


def opens_with_reminder(content: Any) -> bool:
    """Content (a string, or any of its text blocks) that opens with a ``<system-reminder`` envelope."""
    if isinstance(content, str):
        return content.strip().startswith(REMINDER_ENVELOPE_PREFIX)
    if isinstance(content, list):
        for block in content:
            text = block.get("text") if isinstance(block, dict) else None
            if isinstance(text, str) and text.strip().startswith(REMINDER_ENVELOPE_PREFIX):
                return True
    return False


def replay_text(message: dict[str, Any]) -> str:
    """The text a replay would repeat: str content, or the text blocks joined by newlines."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b.get("text") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
        return "\n".join(parts)
    return ""


def replay_message(text: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": wrap(REPLAY_ENVELOPE_SOURCE, f"{_REPLAY_PREAMBLE}\n\n{text}"),  # the user's words end no envelope
        "metadata": {"source": REPLAY_ENVELOPE_SOURCE, "ephemeral": True},
    }


def build_replay(
    view: list[dict[str, Any]],
    budget: int,
    count: Callable[[list[dict[str, Any]]], int],
    limit: int | None = None,
) -> dict[str, Any] | None:
    """The replay message for this view, or None for every "deliberately does nothing" row. ``limit``: the
    largest view the provider's input limit takes (limit.py), None with no window known; a replay that would
    pass it, or the budget, is left out (the provider would reject the request, not just compact again)."""
    if not view or view[-1].get("tool_calls"):
        return None
    source = next((m for m in reversed(view) if is_real_user_message(m)), None)
    if source is None or source is view[-1] or source.get("_stubbed"):
        return None
    text = replay_text(source)
    if not text.strip():
        return None
    replay = replay_message(text)
    size = count(view) + count([replay])
    if (budget > 0 and size > budget) or (limit is not None and size > limit):
        return None
    return replay


def append_replay(
    view: list[dict[str, Any]], budget: int, decisions: Any, count: Callable[..., int], limit: int | None = None
) -> None:
    """Append the user's last words to ``view`` (in place) once per compaction boundary: the history's
    ``decisions`` hold the boundary (level, messages absorbed by a summary) last replayed. Moved from the
    manager's ``_maybe_append_last_user_replay`` (issue 38)."""
    boundary = (decisions._sticky_level, decisions._summary_absorbed_count)
    if boundary == (0, 0) or boundary == decisions._last_replayed_boundary:
        return
    replay = build_replay(view, budget, count, limit)
    if replay is not None:
        view.append(replay)
        decisions._last_replayed_boundary = boundary
