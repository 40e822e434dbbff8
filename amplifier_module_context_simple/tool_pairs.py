"""Tool-call groups by identity: an assistant's ``tool_calls`` and every result that answers them.

A provider rejects a request in which a tool result has no call or a call has no result, so the
ladder and the summary absorb whole groups or nothing. Groups are keyed by ``tool_calls[].id`` and
``tool_call_id``, never by adjacency.
"""

from __future__ import annotations

from typing import Any

from .calls import call_id
from .calls import call_names as call_names  # re-exported: callers read names here


def call_ids(message: dict[str, Any]) -> list[str]:
    """Ids of an assistant message's ``tool_calls`` (any of the five shapes, calls.py), the ids its results
    answer; a call stored only as a content block is not paired (both orchestrators store every call in
    ``tool_calls``)."""
    calls = message.get("tool_calls")
    if message.get("role") != "assistant" or not isinstance(calls, list):
        return []
    return [identity for identity in map(call_id, calls) if identity is not None]


def has_tool_calls(message: dict[str, Any]) -> bool:
    return message.get("role") == "assistant" and bool(message.get("tool_calls"))


def tool_groups(messages: list[dict[str, Any]]) -> dict[int, tuple[int, ...]]:
    """Map each index that belongs to a tool group to the group's indices (assistant first).

    A result belongs to the nearest earlier assistant that declared its id, so duplicated ids in a
    long session attach to the right call. Orphan results and plain messages are not in the map.
    """
    owner_of_id: dict[str, int] = {}
    members: dict[int, list[int]] = {}
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            ids = call_ids(message)
            if ids:
                members[index] = [index]
                for call_id in ids:
                    owner_of_id[call_id] = index
        elif role == "tool":
            owner = owner_of_id.get(message.get("tool_call_id"))
            if owner is not None:
                members[owner].append(index)
    groups: dict[int, tuple[int, ...]] = {}
    for indices in members.values():
        group = tuple(indices)
        for index in group:
            groups[index] = group
    return groups


def is_persisted_reminder(message: dict[str, Any]) -> bool:
    """A hook reminder today's streaming loop stores (``ephemeral`` and ``persisted`` in its metadata)."""
    metadata = message.get("metadata")
    return isinstance(metadata, dict) and metadata.get("ephemeral") is True and metadata.get("persisted") is True


def is_hook_injection(message: dict[str, Any]) -> bool:
    """A hook's ``inject_context`` (any role: amplifier-core honours ``context_injection_role``)."""
    metadata = message.get("metadata")
    # Today's streaming loop stores hook reminders marked ephemeral and persisted instead.
    return isinstance(metadata, dict) and (metadata.get("source") == "hook" or is_persisted_reminder(message))


def _held_in_group(message: dict[str, Any]) -> bool:
    """A result, or a hook's injection (stored by loop-basic between a call and its results)."""
    return message.get("role") == "tool" or is_hook_injection(message)


def in_flight_start(messages: list[dict[str, Any]]) -> int | None:
    """Start of a trailing tool group whose results are still arriving (some, not all, present).

    Such a view would send a half-answered group; the caller leaves its results (and hook
    injections stored among them) out, so the view ends on the calls, the shape an orchestrator
    produces between a call and its results. The last message must be a result or a hook's
    injection (loop-basic stores those before any result: the results are still to come).
    """
    if not messages or not _held_in_group(messages[-1]):
        return None
    index = len(messages)
    while index > 0 and _held_in_group(messages[index - 1]):
        index -= 1
    if index == 0 or not has_tool_calls(messages[index - 1]):
        return None
    wanted = set(call_ids(messages[index - 1]))
    answered = {m.get("tool_call_id") for m in messages[index:] if m.get("role") == "tool"}
    return index if wanted - answered else None
