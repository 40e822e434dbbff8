"""Input checks for stored messages: a clear error naming the problem, before anything is stored."""

from __future__ import annotations

from typing import Any

# amplifier-core's Message roles.
ROLES = ("system", "developer", "user", "assistant", "function", "tool")


def validate_message(message: Any, where: str = "message") -> None:
    """Raise TypeError (not a dict) or ValueError (bad role, content, metadata or tool_calls)."""
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
