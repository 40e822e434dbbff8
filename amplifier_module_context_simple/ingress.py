"""A byte cap per tool result, in the view only (today's original's ``max_tool_result_bytes``).

A tool result larger than the cap would make every request that carries it fail at the provider
(the last ``protected_tool_results`` are never truncated by the ladder). Its view copy keeps the
first bytes, cut on a UTF-8 character boundary, and one marker; the stored history keeps the full
text (our rule), so a spill file or a later search still finds it. The copy is a pure function of
the content and the cap, so every request sends the same bytes (the prompt cache holds).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .config import MIN_TOOL_RESULT_BYTES
from .estimate import seq_of

Message = dict[str, Any]

MARKER = (
    "\n[... tool result clipped in this view: {kept:,} of {total:,} bytes shown (max_tool_result_bytes); "
    "the full result stays in the session history]"
)
# The marker's bytes at the largest figures it can show, so the clipped text never exceeds the cap.
_MARKER_BYTES = len(MARKER.format(kept=10**15, total=10**15).encode("utf-8"))
# At the smallest cap config.py lets through, a clipped result still shows this much of its text.
MIN_TEXT_BYTES = MIN_TOOL_RESULT_BYTES - _MARKER_BYTES


class Clip(NamedTuple):
    """A clipped view copy and the figures of ``context:tool_result_ingress_truncated``."""

    message: Message
    original_bytes: int
    kept_bytes: int


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", errors="surrogatepass"))


def _head(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` within ``max_bytes`` UTF-8 bytes, never half a character."""
    return text.encode("utf-8", errors="surrogatepass")[:max_bytes].decode("utf-8", errors="ignore")


def _over(text: str, max_bytes: int) -> bool:
    # A character is 1 to 4 bytes: the length alone decides most texts without encoding them.
    if len(text) > max_bytes:
        return True
    return len(text) * 4 > max_bytes and _utf8_size(text) > max_bytes


def _text_blocks(content: list[Any]) -> list[int]:
    return [i for i, b in enumerate(content) if isinstance(b, dict) and isinstance(b.get("text"), str)]


def clip_tool_result(message: Message, max_bytes: int) -> Clip | None:
    """The view copy of a tool result over ``max_bytes`` UTF-8 bytes of text, or None when it fits.

    String content, or the text blocks of block content (in order, sharing the cap; other blocks,
    such as images, pass whole). The clipped text, marker included, is within ``max_bytes``, which must
    be at least ``MIN_TOOL_RESULT_BYTES`` (config.py raises a smaller cap to it, with a warning).
    """
    if max_bytes < MIN_TOOL_RESULT_BYTES:
        raise ValueError(f"context-simple: a byte cap of {max_bytes} is below {MIN_TOOL_RESULT_BYTES}")
    content = message.get("content")
    room = max_bytes - _MARKER_BYTES
    if isinstance(content, str):
        if not _over(content, max_bytes):
            return None
        total = _utf8_size(content)
        head = _head(content, room)
        kept = _utf8_size(head)
        return Clip({**message, "content": head + MARKER.format(kept=kept, total=total)}, total, kept)
    if not isinstance(content, list):
        return None
    indices = _text_blocks(content)
    if not indices or sum(len(content[i]["text"]) for i in indices) * 4 <= max_bytes:
        return None
    total = sum(_utf8_size(content[i]["text"]) for i in indices)
    if total <= max_bytes:
        return None
    blocks, left, kept = list(content), room, 0
    for index in indices:
        head = _head(content[index]["text"], left)
        size = _utf8_size(head)
        left, kept = left - size, kept + size
        blocks[index] = {**content[index], "text": head}
    last = indices[-1]
    blocks[last] = {**blocks[last], "text": blocks[last]["text"] + MARKER.format(kept=kept, total=total)}
    return Clip({**message, "content": blocks}, total, kept)


class IngressClipper:
    """One manager's view copies of oversized tool results, memoized per ``_seq`` while the source and the
    cap hold, and the ``context:tool_result_ingress_truncated`` payloads still to emit (once per result)."""

    def __init__(self) -> None:
        self.limit: int | None = None
        self.pending: list[dict[str, Any]] = []
        self.reset()

    def reset(self) -> None:
        self._copies: dict[int, tuple[Message, int, Message]] = {}
        self._reported: set[tuple[int, int]] = set()

    def apply(self, message: Message) -> Message:
        """The message as the view shows it: itself, or its clipped copy."""
        limit = self.limit
        if limit is None or message.get("role") != "tool":
            return message
        seq = seq_of(message)
        entry = self._copies.get(seq) if seq is not None else None
        if entry is not None and entry[0] is message and entry[1] == limit:
            return entry[2]
        clip = clip_tool_result(message, limit)
        if clip is None:
            return message
        if seq is not None:
            self._copies[seq] = (message, limit, clip.message)
            if (seq, limit) not in self._reported:
                self._reported.add((seq, limit))
                self.pending.append(_payload(message, seq, clip, limit))
        return clip.message

    def source(self, message: Message) -> Message:
        """The stored message a clipped copy was made from (the message itself otherwise)."""
        entry = self._copies.get(seq_of(message))  # type: ignore[arg-type]
        return entry[0] if entry is not None and entry[2] is message else message

    def clipped(self) -> set[int]:
        """The seqs of the results whose view copy is clipped (context_recall says the view lacks them)."""
        return set(self._copies)

    def take_pending(self) -> list[dict[str, Any]]:
        pending, self.pending = self.pending, []
        return pending


def _payload(message: Message, seq: int, clip: Clip, limit: int) -> dict[str, Any]:
    return {
        "tool_call_id": message.get("tool_call_id"),
        "seq": seq,
        "original_bytes": clip.original_bytes,
        "kept_bytes": clip.kept_bytes,
        "max_tool_result_bytes": limit,
    }
