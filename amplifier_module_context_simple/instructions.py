"""Where instructions go in a compacted view, and which system-role messages are not instructions.

Instructions (the system prompt, a ``developer`` message) are protected: the ladder never removes
them. At a compaction boundary every instruction moves to the front of the view, as the original
module does; one stored after that boundary keeps its place in history order until the next
boundary, so the views between boundaries stay append-only (a prompt cache keeps its prefix). A
hook's injection stored with the system role is no instruction: it is an ordinary message, removed
oldest first like any other (amplifier-core stores ``inject_context`` as role "system" by default).
"""

from __future__ import annotations

from typing import Any

from .estimate import seq_of
from .replay import opens_with_reminder
from .tool_pairs import is_hook_injection

Message = dict[str, Any]

# Instructions: OpenAI's reasoning models take them as "developer", everyone else as "system".
INSTRUCTION_ROLES = ("system", "developer")


def is_injected_instruction(message: dict[str, Any]) -> bool:
    """A system/developer-role message a hook injected (hook metadata or a ``<system-reminder`` envelope):
    an ordinary, removable message in history order, never hoisted or protected as instructions are."""
    if message.get("role") not in INSTRUCTION_ROLES:
        return False
    return is_hook_injection(message) or opens_with_reminder(message.get("content"))


def is_instruction(message: dict[str, Any]) -> bool:
    """The instructions (system prompt, developer message): protected, never removed by the ladder."""
    return message.get("role") in INSTRUCTION_ROLES and not is_injected_instruction(message)


def hoisted_here(message: Message, limit: int | None) -> bool:
    """Does this instruction lead the view? Every one when ``limit`` is None (the original's rule),
    else those stored before the last boundary (``_seq`` below ``limit``) and the factory's prompt."""
    if limit is None:
        return True
    seq = seq_of(message)
    return seq is None or seq < limit


def split_instructions(messages: list[Message], limit: int | None) -> tuple[list[Message], list[Message]]:
    """(instructions that lead the view, everything else in history order)."""
    front: list[Message] = []
    rest: list[Message] = []
    for message in messages:
        leads = is_instruction(message) and hoisted_here(message, limit)
        (front if leads else rest).append(message)
    return front, rest


def hoist_all(front: list[Message], rest: list[Message]) -> tuple[list[Message], list[Message]]:
    """At a boundary: every instruction still in place joins the front (same order as stored)."""
    late = [m for m in rest if is_instruction(m)]
    if not late:
        return front, rest
    return front + late, [m for m in rest if not is_instruction(m)]
