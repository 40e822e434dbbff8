"""Supersession: a tool result made stale by a later call of the same tool with the same arguments.

A file read again, a test suite re-run, ``git status`` asked twice: the later result is the current
one, so the earlier one can go first at no cost in evidence. Calls are matched by tool name and the
exact argument text (after JSON canonicalization when the arguments parse), never by adjacency.
"""

from __future__ import annotations

import json
from typing import Any

Message = dict[str, Any]


def _call_key(call: Any) -> tuple[str, str] | None:
    """(tool name, canonical arguments) of one tool call, or None when it has no usable name."""
    if not isinstance(call, dict):
        return None
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    name = function.get("name") or call.get("name") or call.get("tool")
    arguments = function.get("arguments", call.get("arguments", call.get("input")))
    if not isinstance(name, str) or not name:
        return None
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return name, arguments
    try:
        return name, json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return name, repr(arguments)


def _calls_by_id(messages: list[Message]) -> dict[str, tuple[int, tuple[str, str]]]:
    """call id -> (index of the assistant message, call key); a later duplicate id wins."""
    out: dict[str, tuple[int, tuple[str, str]]] = {}
    for index, message in enumerate(messages):
        if message.get("role") != "assistant" or not isinstance(message.get("tool_calls"), list):
            continue
        for call in message["tool_calls"]:
            key = _call_key(call)
            call_id = call.get("id") if isinstance(call, dict) else None
            if key is not None and isinstance(call_id, str):
                out[call_id] = (index, key)
    return out


def superseded_indices(messages: list[Message]) -> list[int]:
    """Indices of tool results whose call is repeated, with the same arguments, by a later answered call."""
    calls = _calls_by_id(messages)
    results: list[tuple[int, int, tuple[str, str]]] = []  # (result index, call index, key)
    for index, message in enumerate(messages):
        if message.get("role") == "tool":
            found = calls.get(message.get("tool_call_id"))
            if found is not None and found[0] < index:
                results.append((index, found[0], found[1]))
    latest: dict[tuple[str, str], int] = {}
    for _index, call_index, key in results:
        latest[key] = max(latest.get(key, -1), call_index)
    return [index for index, call_index, key in results if latest[key] > call_index]
