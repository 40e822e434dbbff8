"""What `context_recall` reads in a message and how it names a tool call: as the agent saw them.

A tool call reads as ``name(key=value, ...)`` with its arguments decoded (calls.py's one reading of the
five shapes): a string value as itself, newlines and all, so a multi-line command is searched and shown
line by line, never as escaped JSON. A tool result reads as its output, a wrapped result object
(``{"success", "output", "error"}``, as loop-streaming stores it) read through to its output text.
The tool's own calls are never part of a message's text: a recall's query would match itself.
"""

from __future__ import annotations

import json
from typing import Any

from .calls import arguments_value, call_name, message_calls, message_texts

Message = dict[str, Any]
TOOL_NAME = "context_recall"
LABEL_CHARS = 120  # of a call's text, shown in the label of the result that answers it


def is_recall_call(call: Any) -> bool:
    """A tool call of this tool, in any shape."""
    return call_name(call) == TOOL_NAME


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def call_text(call: Any) -> str:
    """``name(key=value, ...)``: the call as the agent wrote it, its arguments decoded."""
    value = arguments_value(call)
    if isinstance(value, dict):
        inner = ", ".join(f"{key}={_value_text(item)}" for key, item in value.items())
    else:
        inner = "" if value is None else _value_text(value)
    return f"{call_name(call)}({inner})"


def call_label(call: Any) -> str:
    """:func:`call_text` on one line (runs of white space as one space), cut to ``LABEL_CHARS``."""
    text = " ".join(call_text(call).split())
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 4] + "...)"


def has_text(message: Message) -> bool:
    """Whether the message holds words of its own (text blocks, a string content), calls aside."""
    return any(text.strip() for text in message_texts(message))


def message_text(message: Message) -> str:
    """What a recall searches in a message: the text the model reads in it (a wrapped result read
    through) and its tool calls decoded, this tool's own calls left out."""
    parts = [text for text in message_texts(message) if text]
    parts.extend(call_text(call) for call in message_calls(message) if not is_recall_call(call))
    return "\n".join(parts)
