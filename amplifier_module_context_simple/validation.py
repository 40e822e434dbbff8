"""Input checks for stored messages: a clear error naming the problem, before anything is stored."""

from __future__ import annotations

from typing import Any

# amplifier-core's Message roles.
ROLES = ("system", "developer", "user", "assistant", "function", "tool")


def validate_message(message: Any, where: str = "message") -> None:
    """Raise TypeError (not a dict) or ValueError (bad role, content, metadata, tool calls or call ids)."""
    if not isinstance(message, dict):
        raise TypeError(f"context-simple: {where} must be a dict, got {type(message).__name__}")
    role = message.get("role")
    if role is None:
        raise ValueError(f"context-simple: {where} has no 'role'")
    if role not in ROLES:
        raise ValueError(f"context-simple: {where} has role {role!r}; allowed: {', '.join(ROLES)}")
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise ValueError(
            f"context-simple: {where} content must be a str, a list of blocks or None, got {type(content).__name__}"
        )
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict | str):
                raise ValueError(
                    f"context-simple: {where} content block must be a dict or str, got {type(block).__name__}"
                )
    metadata = message.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise ValueError(f"context-simple: {where} metadata must be a dict, got {type(metadata).__name__}")
    tool_calls = message.get("tool_calls")
    if tool_calls is not None and not isinstance(tool_calls, list):
        raise ValueError(f"context-simple: {where} tool_calls must be a list, got {type(tool_calls).__name__}")
    if tool_calls:
        _validate_call_ids(tool_calls, where)
    if role == "tool" and not _usable_id(message.get("tool_call_id")):
        raise ValueError(
            f"context-simple: {where} is a tool result whose tool_call_id is "
            f"{_describe(message.get('tool_call_id'))}; it must be the non-empty string id of the call it answers"
        )


def _usable_id(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _describe(value: Any) -> str:
    return "missing" if value is None else f"{value!r} ({type(value).__name__})"


def _validate_call_ids(tool_calls: list[Any], where: str) -> None:
    """Every call must be a dict with a non-empty string id, or its result cannot be paired."""
    for index, call in enumerate(tool_calls):
        if not isinstance(call, dict):
            raise ValueError(f"context-simple: {where} tool_calls[{index}] must be a dict, got {type(call).__name__}")
        call_id = call.get("id")
        if not _usable_id(call_id):
            raise ValueError(
                f"context-simple: {where} tool_calls[{index}] has id {_describe(call_id)}; "
                "a tool call needs a non-empty string id so its result can be paired with it"
            )
