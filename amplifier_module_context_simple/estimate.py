"""The original token estimator and the per-``_seq`` cache that keeps the hot path cheap."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

SEQ_KEY = "_seq"
UNSTAMPED_SLOTS = 16  # messages without _seq remembered at once (a view has a handful)


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
        self._unstamped: dict[int, tuple[dict[str, Any], int]] = {}  # by id; holds the object so ids stay unique
        self._last_total: tuple[list[dict[str, Any]], int, dict[str, Any], int] | None = None
        self._history_total: tuple[dict[str, Any], int, dict[str, Any], int] | None = None

    def count(self, message: dict[str, Any]) -> int:
        metadata = message.get("metadata")
        seq = metadata.get(SEQ_KEY) if type(metadata) is dict else None
        if seq is None:
            return self._count_unstamped(message)
        slots = self._rewritten if ("_truncated" in message or "_stubbed" in message) else self._stored
        entry = slots.get(seq)
        if entry is not None and entry[0] is message:
            return entry[1]
        value = self.counter(wire_form(message))
        slots[seq] = (message, value)
        return value

    def _count_unstamped(self, message: dict[str, Any]) -> int:
        """A message without ``_seq`` (the notice, the evidence ledger): the same object re-sent on every
        request is counted once."""
        entry = self._unstamped.get(id(message))
        if entry is not None and entry[0] is message:
            return entry[1]
        value = self.counter(wire_form(message))
        if len(self._unstamped) >= UNSTAMPED_SLOTS:
            self._unstamped.clear()
        self._unstamped[id(message)] = (message, value)
        return value

    def total(self, messages: Iterable[dict[str, Any]]) -> int:
        """Sum of counts. One request totals the same list several times (meter, ladder, stats), so
        the last list's total is kept while it is the very same, unchanged-length list."""
        if not isinstance(messages, list) or not messages:
            return sum(self.count(m) for m in messages)
        memo = self._last_total
        if memo is not None and memo[0] is messages and memo[1] == len(messages) and memo[2] is messages[-1]:
            return memo[3]
        value = sum(self.count(m) for m in messages)
        self._last_total = (messages, len(messages), messages[-1], value)
        return value

    def total_extending(self, messages: list[dict[str, Any]]) -> int:
        """Total of a list built from the append-only history: when it extends the list totalled last
        time (same first message, same message at the old end), only the new tail is counted, so the
        meter's cost per request does not grow with the session. Only for such lists: a list whose
        middle was rewritten in place would fool the check."""
        start, value = 0, 0
        memo = self._history_total
        if messages and memo is not None:
            first, length, last, known = memo
            if first is messages[0] and length <= len(messages) and messages[length - 1] is last:
                start, value = length, known
        value += sum(self.count(m) for m in messages[start:])
        if messages:
            self._history_total = (messages[0], len(messages), messages[-1], value)
            self._last_total = (messages, len(messages), messages[-1], value)
        return value

    def clear(self) -> None:
        self._unstamped.clear()
        self._stored.clear()
        self._rewritten.clear()
        self._last_total = None
        self._history_total = None
