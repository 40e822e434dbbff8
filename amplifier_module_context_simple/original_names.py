"""Names an earlier version of the original exposed, kept for hosts that still use them (issue 37.4).

That version capped the provider-derived budget with ``max_tokens`` only when a ``max_tokens_explicit``
flag said the key was set (mount set it from the config). Here a ``max_tokens`` that was set always caps
(today's original); the flag is accepted: True changes nothing, False turns the given ``max_tokens`` into
the fallback budget only, as a key nobody set reads (config.DefaultTokens).
"""

from __future__ import annotations

from typing import Any

from .config import DefaultTokens
from .config_base import warn


def max_tokens_with_explicit_flag(max_tokens: Any, explicit: Any) -> Any:
    """``max_tokens`` as the constructor should read it given the earlier original's flag (None = not given)."""
    if explicit is None or explicit is True:
        return max_tokens
    if explicit is not False:
        warn("max_tokens_explicit=%r is not true or false; ignoring it", explicit)
        return max_tokens
    if isinstance(max_tokens, int) and not isinstance(max_tokens, (bool, DefaultTokens)) and max_tokens >= 1:
        return DefaultTokens(max_tokens)  # not a cap: only the budget when the provider reports no window
    return max_tokens


def is_max_tokens_explicit(max_tokens: Any) -> bool:
    """Whether ``max_tokens`` caps the provider's budget: a number that was set, not the default."""
    return max_tokens is not None and not isinstance(max_tokens, DefaultTokens)
