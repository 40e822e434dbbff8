"""The original token estimator and the per-``_seq`` cache that keeps the hot path cheap."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

SEQ_KEY = "_seq"


def estimate_message(message: Any) -> int:
    """The original estimator for one message: a quarter of its Python repr's length."""
    return len(str(message)) // 4


def estimate_tokens(messages: Iterable[Any]) -> int:
    """The original estimator over a list: pure, no caching, any objects accepted."""
    return sum(len(str(m)) // 4 for m in messages)


def seq_of(message: Any) -> int | None:
    """The permanent sequence number stamped on a stored message, if any."""
    if not isinstance(message, dict):
        return None
    metadata = message.get("metadata")
    if isinstance(metadata, dict):
        seq = metadata.get(SEQ_KEY)
        if isinstance(seq, int) and not isinstance(seq, bool):
            return seq
    return None


def wire_form(message: dict[str, Any]) -> dict[str, Any]:
    """The message as sent: a new dict without the internal ``_seq`` (others pass by identity)."""
    metadata = message.get("metadata")
    if not isinstance(metadata, dict) or SEQ_KEY not in metadata:
        return message
    stripped = dict(message)
    stripped["metadata"] = {k: v for k, v in metadata.items() if k != SEQ_KEY}
    return stripped


class CountCache:
    """Token counts of messages' wire forms, keyed by ``_seq`` (one slot for the stored message, one
    for its truncated or stubbed rewrite).

    An entry remembers the message object it was computed for, so a message replaced under the
    same ``_seq`` (a caller editing ``messages`` directly) is recounted instead of trusted. This
    runs several times over the whole view on every request, hence the inlined lookups.
    """

    def __init__(self, counter: Callable[[dict[str, Any]], int]) -> None:
        self.counter = counter
        self._stored: dict[int, tuple[dict[str, Any], int]] = {}
        self._rewritten: dict[int, tuple[dict[str, Any], int]] = {}
        self._last_total: tuple[tuple[int, ...], list[dict[str, Any]], int] | None = None

    def count(self, message: dict[str, Any]) -> int:
        metadata = message.get("metadata")
        seq = metadata.get(SEQ_KEY) if type(metadata) is dict else None
        if seq is None:
            return self.counter(wire_form(message))
        slots = self._rewritten if ("_truncated" in message or "_stubbed" in message) else self._stored
        entry = slots.get(seq)
        if entry is not None and entry[0] is message:
            return entry[1]
        value = self.counter(wire_form(message))
        slots[seq] = (message, value)
        return value

    def total(self, messages: Iterable[dict[str, Any]]) -> int:
        """Sum of counts. One request totals the same working list several times (meter, ladder,
        stats), so the last list's total is remembered while it is the same, unchanged list."""
        if isinstance(messages, list) and messages:
            key = (id(messages), len(messages), id(messages[0]), id(messages[-1]))
            if self._last_total is not None and self._last_total[0] == key and self._last_total[1] is messages:
                return self._last_total[2]
            count = self.count
            value = sum(count(m) for m in messages)
            self._last_total = (key, messages, value)
            return value
        count = self.count
        return sum(count(m) for m in messages)

    def clear(self) -> None:
        self._stored.clear()
        self._rewritten.clear()
        self._last_total = None
