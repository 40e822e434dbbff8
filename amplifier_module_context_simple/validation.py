"""Input checks for stored messages: a clear error naming the problem, before anything is stored."""

from __future__ import annotations

import logging
from typing import Any

from .calls import CALL_BLOCK_TYPES, call_id

# amplifier-core's Message roles.
ROLES = ("system", "developer", "user", "assistant", "function", "tool")
# Content block types that amplifier-core's message models, Anthropic or OpenAI define. Another type is
# stored and sent unchanged (with one warning per type, manager.py): the module never drops data.
KNOWN_BLOCK_TYPES = frozenset(
    {
        # amplifier-core message_models (and content_models)
        *("text", "thinking", "redacted_thinking", "tool_call", "tool_result", "image", "reasoning"),
        # Anthropic
        *("tool_use", "document", "search_result", "server_tool_use", "web_search_tool_result"),
        *("web_fetch_tool_result", "code_execution_tool_result", "mcp_tool_use", "mcp_tool_result"),
        "container_upload",
        # OpenAI chat completions and responses
        *("image_url", "input_audio", "file", "refusal", "input_text", "output_text", "input_image", "input_file"),
    }
)


def _plain(value: Any) -> Any:
    """A pydantic model (``model_dump``) or an amplifier-core content dataclass (``to_dict``) as the dict
    an orchestrator stores; anything else as it is (validation names what is still not a dict)."""
    if isinstance(value, dict | str):
        return value
    for method in ("model_dump", "to_dict"):
        dump = getattr(value, method, None)
        if callable(dump):
            try:
                return dump()
            except Exception:  # noqa: BLE001 - an object that cannot dump itself is refused below, by name
                return value
    return value


def plain_message(message: Any, where: str = "message") -> dict[str, Any]:
    """``message`` as the orchestrators store it, validated: content blocks and tool calls given as
    objects become dicts; TypeError or ValueError (see :func:`validate_message`) otherwise. A shallow
    copy: the caller deep-copies it into the history (``wire_copy.stored_copy``)."""
    if not isinstance(message, dict):
        raise TypeError(f"context-simple: {where} must be a dict, got {type(message).__name__}")
    plain = dict(message)  # checked before it is copied: an object that cannot be copied is refused by name
    for key in ("content", "tool_calls"):
        if isinstance(plain.get(key), list):
            plain[key] = [_plain(item) for item in plain[key]]
    validate_message(plain, where)
    return plain


def unknown_block_types(message: dict[str, Any]) -> list[str]:
    """The block types of a (valid) message's content that :data:`KNOWN_BLOCK_TYPES` does not list."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b["type"] for b in content if isinstance(b, dict) and b.get("type") not in KNOWN_BLOCK_TYPES]


def warn_unknown_blocks(messages: list[dict[str, Any]], warned: set[str]) -> None:
    """Log one warning per content block type no provider model lists (``warned``: the types already told)."""
    for message in messages:
        for kind in unknown_block_types(message):
            if kind not in warned:
                warned.add(kind)
                logging.getLogger("amplifier_module_context_simple").warning(
                    "context-simple: content block type %r is not one amplifier-core, Anthropic or OpenAI "
                    "defines; it is stored and sent unchanged (a provider may reject it)",
                    kind,
                )


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
        _validate_blocks(content, where)
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


def _validate_blocks(content: list[Any], where: str) -> None:
    """Each block is a str, or a dict with a string ``type``; two call blocks never share an id."""
    call_blocks: dict[str, int] = {}
    for index, block in enumerate(content):
        if isinstance(block, str):
            continue
        if not isinstance(block, dict):
            raise ValueError(
                f"context-simple: {where} content block {index} must be a dict or str, got {type(block).__name__}"
            )
        if not isinstance(block.get("type"), str):
            raise ValueError(
                f"context-simple: {where} content block {index} has type {_describe(block.get('type'))}; "
                "a content block needs a string 'type' (text, image, tool_call, ...)"
            )
        if block["type"] in CALL_BLOCK_TYPES and (identity := call_id(block)) is not None:
            if identity in call_blocks:
                raise _repeated_id(where, f"content[{index}]", identity, f"content[{call_blocks[identity]}]")
            call_blocks[identity] = index


def _repeated_id(where: str, place: str, identity: str, first: str) -> ValueError:
    return ValueError(
        f"context-simple: {where} {place} repeats the tool-call id {identity!r} of {first}; each call of a "
        "message needs its own id, or one result would answer two calls"
    )


def _validate_call_ids(tool_calls: list[Any], where: str) -> None:
    """Every call must be a dict with its own non-empty string id, or its result cannot be paired."""
    seen: dict[str, int] = {}
    for index, call in enumerate(tool_calls):
        if not isinstance(call, dict):
            raise ValueError(f"context-simple: {where} tool_calls[{index}] must be a dict, got {type(call).__name__}")
        identity = call.get("id")
        if not _usable_id(identity):
            raise ValueError(
                f"context-simple: {where} tool_calls[{index}] has id {_describe(identity)}; "
                "a tool call needs a non-empty string id so its result can be paired with it"
            )
        if identity in seen:
            raise _repeated_id(where, f"tool_calls[{index}]", identity, f"tool_calls[{seen[identity]}]")
        seen[identity] = index
