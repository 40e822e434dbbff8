"""Pluggable per-message token counters.

A counter maps ONE message dict to a non-negative int. Three built-ins:

- ``estimate``: ``len(str(message)) // 4`` -- the original estimator, kept byte-for-byte because it is the
  default and golden hashes depend on it. It counts Python repr noise and base64 image data.
- ``content``: a pure-Python approximation of o200k over the parts a provider bills (see
  :func:`billable_parts`), with a fixed cost per image.
- ``tiktoken:NAME``: exact tiktoken counts over the same billable parts, same image and overhead rules.

Only the standard library is imported here; tiktoken is imported lazily by :func:`tiktoken_counter`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

from .calls import CALL_BLOCK_TYPES, message_calls, read_call
from .estimate import DEFAULT_IMAGE_TOKENS as DEFAULT_IMAGE_TOKENS
from .estimate import IMAGE_BLOCK_TYPES, estimate_message, image_tokens

COUNTER_ESTIMATE = "estimate"
COUNTER_CONTENT = "content"
TIKTOKEN_PREFIX = "tiktoken:"

# Chat formats wrap each message in a few framing tokens (start, role separator, end); OpenAI's
# cookbook uses 3 per message plus the role, which is counted as text.
MESSAGE_OVERHEAD_TOKENS = 3
# Each tool call adds framing (id, type, JSON keys) around its name and arguments.
TOOL_CALL_OVERHEAD_TOKENS = 3

_TEXT_BLOCK_TYPES = frozenset({"text", "input_text", "output_text"})


@dataclass(frozen=True)
class Counter:
    """A named per-message token counter; call it with one message dict."""

    name: str
    count: Callable[[dict[str, Any]], int]

    def __call__(self, message: dict[str, Any]) -> int:
        return self.count(message)


class BillableParts(NamedTuple):
    """The texts a provider tokenizes for one message, plus tokens it bills at a fixed rate."""

    texts: list[str]
    fixed_tokens: int


# The original estimator (a quarter of the message's Python repr), defined once in estimate.py.
estimate_count = estimate_message


def _json_text(value: Any) -> str:
    """JSON text of an arbitrary value, as a provider would serialize it."""
    return json.dumps(value, ensure_ascii=False, default=str)


def tool_call_parts(call: Any) -> tuple[str, str]:
    """(name, arguments text) of a tool call in any of the five shapes (calls.py's one reading)."""
    if not isinstance(call, dict):
        return "", _json_text(call)
    parsed = read_call(call)
    return parsed.name, parsed.arguments


def _block_parts(block: Any, texts: list[str], calls_read: bool = False) -> int:
    """Append the billable texts of one content block; return the tokens of the images it holds.
    ``calls_read``: the message's calls are counted on their own (:func:`billable_parts`), not here."""
    if isinstance(block, str):
        texts.append(block)
        return 0
    if not isinstance(block, dict):
        texts.append(_json_text(block))
        return 0
    kind = block.get("type")
    if kind in IMAGE_BLOCK_TYPES:
        return image_tokens(block)
    if kind in _TEXT_BLOCK_TYPES and isinstance(block.get("text"), str):
        texts.append(block["text"])
    elif kind == "thinking" and isinstance(block.get("thinking"), str):
        texts.append(block["thinking"])
    elif kind == "tool_result":
        inner = block.get("content", block.get("output"))
        return _content_parts(inner, texts)
    elif kind in CALL_BLOCK_TYPES:
        if not calls_read:
            texts.extend(tool_call_parts(block))
    else:
        texts.append(_json_text(block))
    return 0


def _content_parts(content: Any, texts: list[str], calls_read: bool = False) -> int:
    """Append the billable texts of a message's content; return the tokens of the images it holds."""
    if content is None:
        return 0
    if isinstance(content, str):
        texts.append(content)
        return 0
    if isinstance(content, list):
        return sum(_block_parts(block, texts, calls_read) for block in content)
    return _block_parts(content, texts, calls_read)


def billable_parts(message: dict[str, Any]) -> BillableParts:
    """What a provider bills for a message: role, content, tool calls, name; never metadata or ids."""
    texts: list[str] = []
    role = message.get("role")
    if isinstance(role, str):
        texts.append(role)
    # An assistant's calls, each once: a call in tool_calls and again as a content block is one call.
    calls = message_calls(message)
    images = _content_parts(message.get("content"), texts, calls_read=True)
    for call in calls:
        texts.extend(tool_call_parts(call))
    if isinstance(message.get("function_call"), dict):
        texts.extend(tool_call_parts(message["function_call"]))
    for key in ("name", "reasoning_content"):
        # Reasoning text is sent back by some providers in tool loops; counting it errs on the safe side.
        if isinstance(message.get(key), str):
            texts.append(message[key])
    fixed = MESSAGE_OVERHEAD_TOKENS + TOOL_CALL_OVERHEAD_TOKENS * len(calls) + images
    return BillableParts(texts, fixed)


# Approximates o200k's pre-tokenizer with the stdlib `re` (no \p{..} classes): words (CamelCase split,
# optional leading non-letter), 1-3 digit numbers, punctuation runs, newlines, whitespace runs.
_PIECE = re.compile(
    r"(?:[^\r\n\w]|_)?(?:[A-Z]*[a-z]+|[A-Z]+[a-z]*|[^\W\d_]+)(?:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\d{1,3}| ?(?:[^\s\w]|_)+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Piece costs fitted on the 26 workload transcripts against o200k (evaluation/studies/counter_error.py):
# common words are one token, longer ones split, ALL-CAPS words and punctuation runs split often.
_WORD_FREE_CHARS = 5
_WORD_EXTRA_PER_CHAR = 0.1
_CAPS_PER_CHAR = 0.3
_PUNCT_CHARS_PER_TOKEN = 2.5
# CJK, kana and hangul (U+2E80 and up) take most of a token per character.
_WIDE_START = "\u2e80"
_WIDE_PER_CHAR = 0.7


def _piece_cost(piece: str) -> float:
    """Approximate o200k tokens of one pre-token piece."""
    size = len(piece)
    last = piece[-1]
    if last.isalpha():
        if size > 2 and piece.isupper():
            cost = max(1.0, _CAPS_PER_CHAR * size)
        else:
            cost = 1.0 + max(0, size - _WORD_FREE_CHARS) * _WORD_EXTRA_PER_CHAR
    elif size > 2 and not last.isspace() and not last.isdigit():
        cost = max(1.0, size / _PUNCT_CHARS_PER_TOKEN)
    else:
        cost = 1.0
    if not piece.isascii():
        wide = sum(1 for ch in piece if ch >= _WIDE_START)
        cost = max(cost, _WIDE_PER_CHAR * wide)
    return cost


def approx_text_tokens(text: str) -> float:
    """Approximate o200k token count of a text, in pure Python."""
    return sum(map(_piece_cost, _PIECE.findall(text)))


def content_count(message: dict[str, Any]) -> int:
    """Approximate billed tokens of a message: o200k-calibrated text rate, fixed image cost."""
    parts = billable_parts(message)
    return parts.fixed_tokens + math.ceil(sum(approx_text_tokens(text) for text in parts.texts if text))


def _tiktoken_error(encoding_name: str, reason: str) -> ValueError:
    """A ValueError naming the encoding, the cause, and how to fix it."""
    return ValueError(
        f"token counter '{TIKTOKEN_PREFIX}{encoding_name}': cannot load tiktoken encoding "
        f"{encoding_name!r} ({reason}). Install tiktoken (`pip install tiktoken`) and use a valid "
        "encoding name such as 'o200k_base'; offline, set TIKTOKEN_CACHE_DIR to a directory holding "
        "the encoding's cached BPE file."
    )


@cache
def _load_encoding(encoding_name: str) -> Any:
    """Load a tiktoken encoding once; failures are not cached, so a fixed setup can retry."""
    try:
        import tiktoken
    except ImportError as exc:
        raise _tiktoken_error(encoding_name, "tiktoken is not installed") from exc
    try:
        return tiktoken.get_encoding(encoding_name)
    except Exception as exc:  # tiktoken raises ValueError, network and file errors alike
        raise _tiktoken_error(encoding_name, f"{type(exc).__name__}: {exc}") from exc


def tiktoken_counter(encoding_name: str) -> Counter:
    """Exact counter over the billable parts with a tiktoken encoding; ValueError if it cannot load."""
    encoding = _load_encoding(encoding_name)
    encode = encoding.encode_ordinary  # user text may contain special-token strings; count them as text

    def count(message: dict[str, Any]) -> int:
        parts = billable_parts(message)
        return parts.fixed_tokens + sum(len(encode(text)) for text in parts.texts if text)

    return Counter(f"{TIKTOKEN_PREFIX}{encoding_name}", count)


ESTIMATE_COUNTER = Counter(COUNTER_ESTIMATE, estimate_count)
CONTENT_COUNTER = Counter(COUNTER_CONTENT, content_count)


def _wrap_callable(func: Callable[[dict[str, Any]], Any]) -> Counter:
    """Wrap a user callable so that a bad result fails loudly at call time."""
    name = f"callable:{getattr(func, '__qualname__', type(func).__qualname__)}"

    def count(message: dict[str, Any]) -> int:
        result = func(message)
        if isinstance(result, bool) or not isinstance(result, int) or result < 0:
            raise TypeError(f"token counter {name} returned {result!r}; a counter must return an int >= 0")
        return result

    return Counter(name, count)


def resolve_counter(spec: Any) -> Counter:
    """Turn a config value (None, "estimate", "content", "tiktoken:NAME", a callable) into a Counter."""
    if spec is None or isinstance(spec, Counter):
        return ESTIMATE_COUNTER if spec is None else spec
    if isinstance(spec, str):
        if spec == COUNTER_ESTIMATE:
            return ESTIMATE_COUNTER
        if spec == COUNTER_CONTENT:
            return CONTENT_COUNTER
        if spec.startswith(TIKTOKEN_PREFIX) and spec[len(TIKTOKEN_PREFIX) :].strip():
            return tiktoken_counter(spec[len(TIKTOKEN_PREFIX) :].strip())
    elif callable(spec):
        return _wrap_callable(spec)
    raise ValueError(
        f"unknown token counter {spec!r}: expected None, {COUNTER_ESTIMATE!r}, {COUNTER_CONTENT!r}, "
        f"'{TIKTOKEN_PREFIX}<encoding name>' (e.g. 'tiktoken:o200k_base') or a callable(message) -> int"
    )
