"""How to write a value: the fix a configuration warning shows, in plain words (no internal terms)."""

from __future__ import annotations

import math
import re
from typing import Any

from .config_base import is_number

# "8k", "8 K", "1.5m", "200_000 tokens": what a person writes for a number of tokens.
_SPELLED_TOKENS = re.compile(r"^\s*([0-9][0-9_,]*(?:\.[0-9]+)?)\s*([kKmM]?)\s*(?:tokens?)?\s*$")
_SCALE = {"": 1, "k": 1_000, "m": 1_000_000}


def spelled_tokens(value: Any) -> int | None:
    """The whole number of tokens a string such as "8k" or "200,000 tokens" means, else None."""
    if not isinstance(value, str):
        return None
    match = _SPELLED_TOKENS.match(value)
    if match is None:
        return None
    try:
        number = float(match.group(1).replace("_", "").replace(",", "")) * _SCALE[match.group(2).lower()]
    except ValueError:
        return None
    return int(number) if math.isfinite(number) and number >= 1 else None


def how_to_write_tokens(value: Any, alternative: str) -> str:
    """The rest of a warning about a number of tokens: what is wrong and how to write it."""
    meant = spelled_tokens(value)
    example = f"{meant}" if meant is not None else "8000"
    told = "write it as" if meant is not None else "write a whole number of tokens such as"
    tail = f", {alternative}" if alternative else ""
    what = "is below 1" if is_number(value) else "is not a number of tokens"
    return f"{what}: {told} {example} (digits only){tail}"


def percent_hint(value: Any) -> str:
    """ " (did you mean 0.5?)" for a share written as a percentage (50), else "" (1.5 is no percentage)."""
    if is_number(value) and 2 <= value <= 100:
        return f" (did you mean {value / 100:g}?)"
    return ""
