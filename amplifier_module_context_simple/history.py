"""The stored history: messages validated at the door, copied, stamped with a timestamp and a permanent
``_seq``, and watched for in-place edits (wire_copy.Guard). Moved from the manager's ``add_message`` and
``set_messages`` (issue 38); the manager forgets its decisions when the history is replaced.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from .validation import plain_message, warn_unknown_blocks
from .view_markers import warn_if_view
from .wire_copy import Guard, history_list, stored_copy

logger = logging.getLogger("amplifier_module_context_simple")
Message = dict[str, Any]


class History:
    """The messages (``messages``, the source of truth, never rewritten), the next ``_seq`` and the guard
    their stored copies report in-place edits to."""

    def __init__(self) -> None:
        self.warned_block_types: set[str] = set()  # content block types already warned about (validation.py)
        self.reset(())

    def reset(self, plain: Iterable[Message]) -> None:
        """Store ``plain`` (already validated) as a new history, ``_seq`` 0..N-1, under a new guard: a
        message of the replaced history reports elsewhere."""
        self.guard = guard = Guard([])
        stamped = (
            stored_copy({**m, "metadata": {**(m.get("metadata") or {}), "_seq": seq}}, guard)
            for seq, m in enumerate(plain)
        )
        self.messages: list[Message] = history_list(stamped, guard)
        self.next_seq = len(self.messages)

    def add(self, message: Message) -> Message:
        """Store a copy of ``message`` stamped with a timestamp (if absent) and a permanent ``_seq``."""
        plain = plain_message(message)
        warn_unknown_blocks([plain], self.warned_block_types)
        metadata = dict(plain.get("metadata") or {})
        if "timestamp" not in metadata:
            metadata["timestamp"] = datetime.now(UTC).isoformat(timespec="milliseconds")
        metadata["_seq"] = self.next_seq
        stored = stored_copy({**plain, "metadata": metadata}, self.guard)
        self.next_seq += 1
        self.messages.append(stored)
        return stored

    def replace(self, messages: Any, told: set[str]) -> None:
        """``set_messages``: every message is checked first (TypeError or ValueError, nothing changed); a
        view given instead of the history is warned about once (``told``, view_markers.py)."""
        if not isinstance(messages, list):
            raise TypeError(f"context-simple: set_messages expects a list, got {type(messages).__name__}")
        plain = [plain_message(message, where=f"message {index}") for index, message in enumerate(messages)]
        warn_unknown_blocks(plain, self.warned_block_types)
        warn_if_view(plain, told)
        self.reset(plain)

    def store(self, message: Message) -> None:
        """Append an already stamped message (a summary stamped with ``next_seq``): its ``_seq`` is taken."""
        self.next_seq += 1
        self.messages.append(message)

    def seq_now(self) -> int:
        """The ``_seq`` the next stored message takes."""
        return self.next_seq

    def take_edit(self) -> bool:
        """True once after a stored message was edited in place (a redaction through ``get_messages()``)."""
        if not self.guard.edited:
            return False
        self.guard.edited = False  # the next edit reports again
        self.guard.sink.clear()
        logger.info("context-simple: a stored message was edited in place; views are rebuilt from the history")
        return True
