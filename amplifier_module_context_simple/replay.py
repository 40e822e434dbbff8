"""Last-user replay: repeat the user's most recent words at the tail after a compaction boundary.

The real-user predicate lives here and is the only one this package uses: it rejects any
``<system-reminder`` opener whatever its attributes, so a summary, replay or notice envelope is
never taken for the user's own words (amplifier-foundation's check lets attributed envelopes by).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .envelope import wrap
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
    view: list[dict[str, Any]], budget: int, count: Callable[[list[dict[str, Any]]], int]
) -> dict[str, Any] | None:
    """The replay message for this view, or None for every "deliberately does nothing" row."""
    if not view or view[-1].get("tool_calls"):
        return None
    source = next((m for m in reversed(view) if is_real_user_message(m)), None)
    if source is None or source is view[-1] or source.get("_stubbed"):
        return None
    text = replay_text(source)
    if not text.strip():
        return None
    replay = replay_message(text)
    if budget > 0 and count(view) + count([replay]) > budget:
        return None
    return replay
