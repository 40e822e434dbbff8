"""Anthropic-style content blocks to the OpenAI-style messages the module and the driver expect.

An assistant message's `tool_use` blocks become its `tool_calls` (the input as a JSON string), its
text blocks its content and its `thinking` blocks `reasoning_content`; a user message's `tool_result`
blocks become one `tool` message each, followed by the user's own text if any. Anything else in
such a message is refused with a ValueError saying what (the caller adds file and line).
"""

from __future__ import annotations

import json
from typing import Any

TOOL_BLOCKS = ("tool_use", "tool_result")


def _type(block: Any) -> str | None:
    return block.get("type") if isinstance(block, dict) else None


def convert_blocks(msg: dict) -> list[dict]:
    """The message itself, or the OpenAI-style message(s) its Anthropic tool blocks stand for."""
    content = msg.get("content")
    if not isinstance(content, list) or not any(_type(b) in TOOL_BLOCKS for b in content):
        return [msg]
    if msg["role"] == "assistant":
        return [_assistant(msg, content)]
    if msg["role"] == "user":
        return _user(msg, content)
    raise ValueError(f"tool_use/tool_result blocks on a {msg['role']} message (expected assistant / user)")


def _assistant(msg: dict, content: list) -> dict:
    texts, thinking, calls = [], [], list(msg.get("tool_calls") or [])
    for block in content:
        kind = _type(block)
        if kind == "text" or isinstance(block, str):
            texts.append(block if isinstance(block, str) else str(block.get("text", "")))
        elif kind == "thinking":
            thinking.append(str(block.get("thinking", "")))
        elif kind == "tool_use":
            calls.append(_call(block))
        elif kind == "tool_result":
            raise ValueError("a tool_result block belongs on a user message, not an assistant one")
        else:
            raise ValueError(f"a {kind!r} block in an assistant message with tool_use cannot be converted")
    out = {k: v for k, v in msg.items() if k != "content"}
    out.update(content="\n".join(texts), tool_calls=calls)
    if thinking:
        out["reasoning_content"] = "\n".join(thinking)
    return out


def _call(block: dict) -> dict:
    call_id, name = block.get("id"), block.get("name")
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise ValueError("a tool_use block needs a string 'id' and 'name'")
    arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _user(msg: dict, content: list) -> list[dict]:
    results, texts = [], []
    for block in content:
        kind = _type(block)
        if kind == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str):
                raise ValueError("a tool_result block needs a string 'tool_use_id'")
            results.append({"role": "tool", "tool_call_id": call_id, "content": _result_text(block, call_id)})
        elif kind == "text" or isinstance(block, str):
            texts.append(block if isinstance(block, str) else str(block.get("text", "")))
        elif kind == "tool_use":
            raise ValueError("a tool_use block belongs on an assistant message, not a user one")
        else:
            raise ValueError(f"a {kind!r} block in a user message with tool_result cannot be converted")
    rest = {k: v for k, v in msg.items() if k not in ("content", "tool_calls")}
    return results + ([{**rest, "content": "\n".join(texts)}] if texts else [])


def _result_text(block: dict, call_id: str) -> str:
    inner = block.get("content")
    if inner is None or isinstance(inner, str):
        return inner or ""
    if not isinstance(inner, list):
        raise ValueError(f"tool_result {call_id!r}: content must be a string or a list of text blocks")
    parts = []
    for sub in inner:
        if isinstance(sub, str) or _type(sub) == "text":
            parts.append(sub if isinstance(sub, str) else str(sub.get("text", "")))
        else:
            raise ValueError(f"tool_result {call_id!r}: a {_type(sub)!r} block cannot be converted (text only)")
    return "\n".join(parts)
