"""The original token estimator and the per-``_seq`` cache that keeps the hot path cheap."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .calls import CALL_BLOCK_TYPES, call_id

SEQ_KEY = "_seq"
UNSTAMPED_SLOTS = 16  # messages without _seq remembered at once (a view has a handful)


# Providers bill an image by its pixel size, never by the length of its base64 text: Anthropic charges
# about width*height/750 tokens and downscales anything over ~1.15 megapixels (so ~1,600 at most),
# OpenAI charges 85 + 170 per 512px tile after resizing (~1,100 at most), Gemini 258 per tile. A fixed
# 1,600 sits at the top of that range; counting a 1 MB PNG's base64 as text would claim ~350,000.
DEFAULT_IMAGE_TOKENS = 1600
_PIXELS_PER_TOKEN = 750
IMAGE_BLOCK_TYPES = frozenset({"image_url", "image", "input_image"})


def image_tokens(block: dict[str, Any]) -> int:
    """An image block's cost: from its width and height where the block gives them, else the fixed cost."""
    source = block.get("source")
    sizes = [block.get(k, source.get(k) if isinstance(source, dict) else None) for k in ("width", "height")]
    if all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes):
        return min(DEFAULT_IMAGE_TOKENS, -(-sizes[0] * sizes[1] // _PIXELS_PER_TOKEN))
    return DEFAULT_IMAGE_TOKENS


def _is_image(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") in IMAGE_BLOCK_TYPES


def _without_images(content: list[Any], costs: list[int]) -> list[Any] | None:
    """``content`` with each image block reduced to its type (its cost appended to ``costs``); None when
    it holds no image. One level of nesting: a tool_result block's own content."""
    out, found = [], False
    for block in content:
        if _is_image(block):
            costs.append(image_tokens(block))
            block, found = {"type": block["type"]}, True
        elif isinstance(block, dict) and isinstance(block.get("content"), list):
            inner = _without_images(block["content"], costs)
            if inner is not None:
                block, found = {**block, "content": inner}, True
        out.append(block)
    return out if found else None


def _without_call_copies(message: dict[str, Any], content: list[Any]) -> list[Any] | None:
    """``content`` without the call blocks that repeat a ``tool_calls`` entry (same id); None when none
    does. Amplifier's orchestrators store each call both ways; a provider is sent it once."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list) or not calls:
        return None
    ids = {call_id(call) for call in calls} - {None}
    kept = [b for b in content if not (isinstance(b, dict) and b.get("type") in CALL_BLOCK_TYPES and call_id(b) in ids)]
    return kept if len(kept) < len(content) else None


def estimate_message(message: Any) -> int:
    """The original estimator for one message, a quarter of its Python repr's length, except that an
    image block is sized as an image (its base64 payload is not text the model reads) and a call stored
    twice (in ``tool_calls`` and as a content block) is counted once."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        if (unique := _without_call_copies(message, content)) is not None:
            message, content = {**message, "content": unique}, unique
        costs: list[int] = []
        stripped = _without_images(content, costs)
        if stripped is not None:
            return len(str({**message, "content": stripped})) // 4 + sum(costs)
    return len(str(message)) // 4


def estimate_tokens(messages: Iterable[Any]) -> int:
    """The original estimator over a list (images sized as images): pure, no caching, any objects."""
    return sum(map(estimate_message, messages))


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
        seq = metadata.get(SEQ_KEY) if isinstance(metadata, dict) else None
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
