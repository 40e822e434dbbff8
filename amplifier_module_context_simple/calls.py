"""One reading of what a tool call and a tool result say, whatever shape a host stored them in.

Hosts store a tool call in five shapes, and every part of this package that looks inside a call (sizing,
per-tool budgets and exemptions, the evidence ledger, recall, the summary's text, repair) reads it here:

* Amplifier's orchestrators (loop-basic, loop-streaming): ``{"id", "tool", "arguments": {...}}``
* amplifier-core's ``ToolCall``: ``{"id", "name", "arguments": {...}}``
* OpenAI: ``{"id", "type": "function", "function": {"name", "arguments": "<json>"}}``
* Anthropic content blocks: ``{"type": "tool_use", "id", "name", "input": {...}}``
* amplifier-core content blocks: ``{"type": "tool_call", "id", "name", "input": {...}}``

A call's name is ``function.name``, else ``name``, else ``tool`` (the original's order). Its arguments
read as one canonical text: a JSON string is decoded and the value written back with ``json.dumps``
(``ensure_ascii=False``, default separators, keys in their stored order), so ``'{"cmd":"ls"}'`` and
``{"cmd": "ls"}`` both read ``{"cmd": "ls"}``; a string that is not JSON reads as itself; none reads "".

Both orchestrators store an assistant's calls in ``tool_calls`` and, beside them, the provider's content
blocks, which hold the same calls again as ``tool_call`` blocks: :func:`message_calls` reads a call that
appears in both places once. Results answer calls as ``role: "tool"`` messages with ``tool_call_id``;
pairing (tool_pairs.py, repair.py) keys on ``tool_calls`` ids only, as both orchestrators store every
call there.

loop-streaming on amplifier-core 2.0.x stores a result as the JSON of the whole result object, one
line: ``{"error": ..., "output": ..., "success": ...}`` (the kernel's hook emit hands back a copy of
``ToolResult.model_dump()`` with its keys sorted, and the loop stores ``json.dumps`` of it), or in
``model_dump()``'s own order, ``{"success": ..., "output": ..., "error": ...}``. :func:`unwrap_result`
reads such a text through to its output (and error) for the ledger and recall; what is sent is always what
was stored.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

CALL_BLOCK_TYPES = frozenset({"tool_call", "tool_use"})
TEXT_BLOCK_TYPES = frozenset({"text", "input_text", "output_text"})
RESULT_BLOCK_TYPE = "tool_result"
_WRAPPED_KEYS = frozenset({"success", "output", "error", "content"})
# json.dumps of ToolResult.model_dump() opens with "success"; loop-streaming on amplifier-core 2.0.2 stores
# the kernel's JSON copy of it, whose keys are sorted: "error" first (or "content", when it has one).
_WRAPPED_OPENINGS = ('{"success"', '{"error"', '{"content"', '{"output"')


class Call(NamedTuple):
    """A tool call read whatever its shape: its id (None when unusable), tool name ("" when none) and
    arguments as canonical text ("" when none)."""

    id: str | None
    name: str
    arguments: str


def _function(call: Any) -> dict[str, Any] | None:
    function = call.get("function")
    return function if isinstance(function, dict) else None


def call_id(call: Any) -> str | None:
    """The call's id when it is a non-empty string, else None."""
    value = call.get("id") if isinstance(call, dict) else None
    return value if isinstance(value, str) and value else None


def call_name(call: Any) -> str:
    """The tool's name: ``function.name``, else ``name``, else ``tool``; "" when none is a string."""
    if not isinstance(call, dict):
        return ""
    function = _function(call)
    for name in (function.get("name") if function else None, call.get("name"), call.get("tool")):
        if isinstance(name, str) and name:
            return name
    return ""


def stored_arguments(call: Any) -> Any:
    """The call's arguments as stored (``function.arguments``, else ``arguments``, else ``input``)."""
    if not isinstance(call, dict):
        return None
    function = _function(call)
    if function is not None:
        return function.get("arguments")
    arguments = call.get("arguments")
    return call.get("input") if arguments is None else arguments


def arguments_value(call: Any) -> Any:
    """The call's arguments as a value: a JSON string decoded (a string that is not JSON stays itself)."""
    if not isinstance(call, dict):
        return None
    raw = stored_arguments(call)
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            return raw
    return raw


def arguments_text(call: Any) -> str:
    """The call's arguments as canonical text (see the module docstring); "" when it has none."""
    if not isinstance(call, dict):
        return ""
    raw = stored_arguments(call)
    if raw is None:
        return ""
    value = arguments_value(call)
    if isinstance(raw, str) and value is raw:
        return raw  # not JSON: the text itself
    return json.dumps(value, ensure_ascii=False, default=str)


def read_call(call: Any) -> Call:
    """(id, name, arguments text) of one call in any of the five shapes."""
    return Call(call_id(call), call_name(call), arguments_text(call))


def message_calls(message: dict[str, Any]) -> list[Any]:
    """Every call a message holds, as stored: its ``tool_calls`` entries, then its ``tool_call``/``tool_use``
    content blocks whose id is not among them (one call stored twice is one)."""
    calls = message.get("tool_calls")
    found = list(calls) if isinstance(calls, list) else []
    content = message.get("content")
    if isinstance(content, list):
        seen = {call_id(call) for call in found}
        for block in content:
            if isinstance(block, dict) and block.get("type") in CALL_BLOCK_TYPES:
                block_id = call_id(block)
                if block_id is None or block_id not in seen:
                    found.append(block)
                    seen.add(block_id)
    return found


def read_calls(message: dict[str, Any]) -> list[Call]:
    """:func:`read_call` of every call of a message (:func:`message_calls`)."""
    return [read_call(call) for call in message_calls(message)]


def call_names(message: dict[str, Any]) -> dict[str, str]:
    """Call id -> tool name, for every call of a message with an id and a name."""
    names: dict[str, str] = {}
    for call in message_calls(message):
        identity, name = call_id(call), call_name(call)
        if identity is not None and name:
            names[identity] = name
    return names


def _value_text(value: Any) -> str:
    """A result's output as a plain result stores it (amplifier-core ``get_serialized_output``)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, default=str)


def wrapped_output(text: str) -> tuple[dict[str, Any], str] | None:
    """A wrapped result object and its output, when ``text`` is one whose output is a string (the last
    rung clips that output and writes the object back: floor.py)."""
    if unwrap_result(text) is None:
        return None
    value = json.loads(text)
    return (value, value["output"]) if isinstance(value["output"], str) else None


def unwrap_result(text: str) -> str | None:
    """The output text (then the error's message, when the output does not already say it) of a wrapped
    result object; None when ``text`` is not one."""
    if not text.startswith(_WRAPPED_OPENINGS):  # cheap: every other text is never parsed
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not (isinstance(value, dict) and isinstance(value.get("success"), bool) and "output" in value):
        return None
    if not set(value) <= _WRAPPED_KEYS:
        return None
    parts = [_value_text(value["output"])]
    error = value.get("error")
    message = error.get("message") if isinstance(error, dict) else error
    if error is not None:
        message = message if isinstance(message, str) else _value_text(error)
        if message and message not in parts[0]:
            parts.append(message)
    parts.extend(content_texts(value.get("content")))
    return "\n".join(part for part in parts if part)


def _block_texts(block: Any, out: list[str]) -> None:
    if isinstance(block, str):
        out.append(block)
    elif isinstance(block, dict):
        kind = block.get("type")
        if kind == RESULT_BLOCK_TYPE:
            inner = block.get("content", block.get("output"))
            out.extend(content_texts(inner, unwrap=True) if isinstance(inner, str | list) else [_value_text(inner)])
        elif (
            kind not in CALL_BLOCK_TYPES
            and kind not in ("thinking", "redacted_thinking")
            and isinstance(block.get("text"), str)
        ):
            out.append(block["text"])


def content_texts(content: Any, unwrap: bool = False) -> list[str]:
    """The text a model reads in a content value: a string, the text of its blocks and of the results its
    ``tool_result`` blocks hold. Thinking and tool-call blocks are not read here (calls: :func:`read_calls`).
    With ``unwrap``, a wrapped result object reads as its output (:func:`unwrap_result`)."""
    if isinstance(content, str):
        unwrapped = unwrap_result(content) if unwrap else None
        return [content if unwrapped is None else unwrapped]
    out: list[str] = []
    if isinstance(content, list):
        for block in content:
            _block_texts(block, out)
    return out


def message_texts(message: dict[str, Any]) -> list[str]:
    """The text a model reads in a message's content; a tool result's wrapped object is read through."""
    return content_texts(message.get("content"), unwrap=message.get("role") == "tool")
