"""True token counts of wire messages: tiktoken o200k_base when it loads, else a stated fallback.

What is counted per message: o200k tokens of the role, of the content (text blocks joined when the
content is a list) and of each tool call's name and arguments (whatever the call's shape, see
`read_call`), plus a fixed 3-token framing overhead (the usual chat-format allowance). An image block
costs what Anthropic bills for it (width x height / 750, at most 1,600; 1,600 when the block gives no
size), never its base64 text. Metadata and view markers never reach the wire and are not counted.
Counts are cached per distinct wire message.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

CACHE_DIR = Path(__file__).resolve().parent / "tiktoken_cache"
ENCODING = "o200k_base"
FRAMING_TOKENS = 3
FALLBACK_NAME = "fallback ceil(len(wire JSON)/4)"
IMAGE_TYPES = ("image", "image_url", "input_image")
IMAGE_MAX_TOKENS = 1600  # Anthropic downscales past ~1.15 megapixels: ~1,600 tokens at most
PIXELS_PER_TOKEN = 750


def ensure_tiktoken_cache_dir() -> str:
    """Point tiktoken at the shipped cache unless the user already chose a folder."""
    if not os.environ.get("TIKTOKEN_CACHE_DIR"):
        os.environ["TIKTOKEN_CACHE_DIR"] = str(CACHE_DIR)
    return os.environ["TIKTOKEN_CACHE_DIR"]


def content_text(content: Any) -> str:
    """The text of a message content: a str as is, a list of blocks joined, anything else as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b.get("text", "") if isinstance(b, dict) else str(b) for b in content]
        return "\n".join(p for p in parts if isinstance(p, str))
    return json.dumps(content, sort_keys=True, ensure_ascii=False)


def read_call(call: Any) -> tuple[str, Any]:
    """(name, raw arguments) of a tool call in any shape a host stores: OpenAI's
    `{"function": {"name", "arguments": "<json>"}}`, Amplifier's orchestrators' `{"tool", "arguments": {}}`,
    amplifier-core's `{"name", "arguments"}` and content blocks' `{"name", "input"}`."""
    if not isinstance(call, dict):
        return "", None
    fn = call.get("function")
    if isinstance(fn, dict):
        return str(fn.get("name") or ""), fn.get("arguments")
    name = call.get("name") or call.get("tool") or ""
    return str(name), call.get("arguments", call.get("input"))


def image_tokens(block: dict) -> int:
    """What a provider bills for one image block (Anthropic's rule), from the size the block gives."""
    source = block.get("source") if isinstance(block.get("source"), dict) else {}
    width, height = (block.get(k, source.get(k)) for k in ("width", "height"))
    if isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0:
        return min(IMAGE_MAX_TOKENS, -(-width * height // PIXELS_PER_TOKEN))
    return IMAGE_MAX_TOKENS


def _is_image(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") in IMAGE_TYPES


def wire_message(msg: dict) -> dict:
    """The part of a message a provider receives: role, content, tool calls, tool_call_id, name."""
    out: dict[str, Any] = {"role": msg.get("role"), "content": msg.get("content")}
    for key in ("tool_calls", "tool_call_id", "name"):
        if msg.get(key) is not None:
            out[key] = msg[key]
    return out


def wire_key(msg: dict) -> tuple:
    """A hashable, byte-faithful key of the wire form (equal keys mean identical wire bytes)."""
    content = msg.get("content")
    if not isinstance(content, str):
        content = json.dumps(content, sort_keys=True, ensure_ascii=False)
    calls = msg.get("tool_calls")
    calls_json = json.dumps(calls, sort_keys=True, ensure_ascii=False) if calls else None
    return (msg.get("role"), content, calls_json, msg.get("tool_call_id"), msg.get("name"))


def canonical_json(obj: Any) -> str:
    """Canonical JSON: sorted keys, compact separators, UTF-8 kept."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


class TokenCounter:
    """Counts wire-message tokens with o200k_base, or with the stated fallback when it cannot load."""

    def __init__(self, use_tiktoken: bool = True) -> None:
        ensure_tiktoken_cache_dir()  # the module under test may use tiktoken too
        self._enc = _load_encoding() if use_tiktoken else None
        self.name = f"tiktoken {ENCODING}" if self._enc is not None else FALLBACK_NAME
        self._cache: dict[tuple, int] = {}

    @property
    def exact(self) -> bool:
        """True when real o200k counts are used."""
        return self._enc is not None

    def text(self, text: str) -> int:
        """Tokens of one string."""
        if not text:
            return 0
        if self._enc is None:
            return math.ceil(len(json.dumps(text, ensure_ascii=False)) / 4)
        return len(self._enc.encode_ordinary(text))

    def message(self, msg: dict, key: tuple | None = None) -> int:
        """Tokens of one wire message, cached by its wire key."""
        key = key if key is not None else wire_key(msg)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._count(msg)
            self._cache[key] = hit
        return hit

    def messages(self, msgs: list[dict]) -> int:
        """Tokens of a request's messages."""
        return sum(self.message(m) for m in msgs)

    def _count(self, msg: dict) -> int:
        content = msg.get("content")
        images = [b for b in content if _is_image(b)] if isinstance(content, list) else []
        image_cost = sum(image_tokens(b) for b in images)
        if images:  # an image's base64 payload is not text the model reads
            content = [b for b in content if not _is_image(b)]
        if self._enc is None:
            return math.ceil(len(canonical_json(wire_message({**msg, "content": content}))) / 4) + image_cost
        total = FRAMING_TOKENS + self.text(str(msg.get("role") or "")) + image_cost
        total += self.text(content_text(content))
        for call in msg.get("tool_calls") or []:
            name, args = read_call(call)
            total += self.text(name)
            if args is not None:
                total += self.text(args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))
        return total


def _load_encoding() -> Any | None:
    """Load o200k_base from the (shipped) tiktoken cache; None when it cannot be loaded offline."""
    ensure_tiktoken_cache_dir()
    try:
        import tiktoken

        return tiktoken.get_encoding(ENCODING)
    except Exception:  # no network, no cache file, or no tiktoken: use the fallback
        return None
