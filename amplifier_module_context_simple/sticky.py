"""Sticky decisions replayed (:func:`apply_decisions`) and the shapes they give a message: the user
message's stub, kept-whole messages, the protected last tool results. Moved out of ladder.py (issue 38):
the ladder plans new decisions, this module re-applies recorded ones with the same bytes."""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from typing import Any

Message = dict[str, Any]
STUB_MIN_CHARS = 80


def last_results(tool_result_indices: list[int], keep: int) -> set[int]:
    """The last ``keep`` of the tool results' positions (none when ``keep`` <= 0: ``[-0:]`` is everything)."""
    return set(tool_result_indices[-keep:]) if keep > 0 else set()


def protected_tool_indices(messages: list[Message], keep: int) -> set[int]:
    """Indices of the last ``keep`` tool results of ``messages``."""
    if keep <= 0:
        return set()
    return last_results([i for i, m in enumerate(messages) if m.get("role") == "tool"], keep)


def _is_text_block(block: Any) -> bool:
    return isinstance(block, dict) and isinstance(block.get("text"), str)


def _block_text(content: list[Any]) -> str:
    return "\n".join(b["text"] for b in content if _is_text_block(b))


def kept_whole(message: Message) -> bool:
    """A message holding a block that is not text (an image, a document, audio): a stub would drop it,
    so it is kept or removed whole, never stubbed as text."""
    content = message.get("content")
    return isinstance(content, list) and not all(map(_is_text_block, content))


def content_chars(content: Any) -> int:
    """A user message's length in characters: its text, or its text blocks plus other blocks' repr."""
    if isinstance(content, str):
        return len(content)
    if not isinstance(content, list):
        return 0
    other = sum(len(str(b)) for b in content if not _is_text_block(b))
    return len(_block_text(content)) + other


def stub_user_message(message: Message) -> Message:
    """The stub of a long user message (str or list of blocks): its first 50 characters and a marker."""
    content = message.get("content")
    text = content if isinstance(content, str) else _block_text(content)
    preview = text[:50].replace("\n", " ").strip()
    return {
        **message,
        "content": f'[User message compacted - original: "{preview}..."]',
        "_stubbed": True,
        "_original_length": content_chars(content),
    }


def apply_decisions(
    non_system: list[Message],
    removed: Container[int],
    truncated: Container[int],
    stubbed: Container[int],
    truncate: Callable[[Message], Message],
    stub: Callable[[Message], Message],
    clipped: Mapping[int, int] | None = None,
    clip: Callable[[Message, int], Message] | None = None,
) -> list[Message]:
    """``non_system`` with the recorded decisions replayed: removed messages left out, with the tool
    results that follow them (repair-made, or stored after the ladder removed their call: never an
    orphan), truncated, stubbed and clipped ones rewritten by ``truncate``, ``stub`` and ``clip``."""
    working = []
    dropping = False  # the last stored message was removed: the results that follow it go with it
    for message in non_system:
        if dropping and message.get("role") == "tool":
            continue
        metadata = message.get("metadata")  # seq_of, inlined: this loop runs over the whole history
        seq = metadata.get("_seq") if isinstance(metadata, dict) else None
        if seq is None:
            working.append(message)
            continue
        dropping = seq in removed
        if dropping:
            continue
        if seq in truncated:
            message = truncate(message)
        elif clipped and seq in clipped and clip is not None:
            message = clip(message, clipped[seq])
        elif seq in stubbed:
            message = stub(message)
        working.append(message)
    return working
