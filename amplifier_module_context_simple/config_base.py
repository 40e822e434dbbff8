"""What every configuration check shares: value tests, the refusal, the once-per-process warning,
and the "did you mean" of a misspelled name."""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import logging
import math
from collections.abc import Iterator
from typing import Any

logger = logging.getLogger("amplifier_module_context_simple")


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return (is_int(value) or isinstance(value, float)) and math.isfinite(value)


def bad_value(key: str, value: Any, allowed: str) -> ValueError:
    return ValueError(f"context-simple: invalid {key}={value!r}; allowed: {allowed}")


# One warning per distinct problem per process: amplifier-core mounts a module twice (once to validate
# its config, once for real), sub-agent sessions mount it again, and a live assignment may repeat a
# value. A text already said is not said again (bounded, so endless distinct values cannot grow it).
_SAID: set[str] = set()
_SAID_LIMIT = 4096
# Set while a caller collects the warnings instead (evaluation commands refuse a config that warns).
_COLLECTING: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("context_simple_collect", default=None)


def warn(message: str, *args: Any) -> None:
    """One configuration warning, said once per process (see ``reset_warnings``)."""
    text = "context-simple: " + (message % args if args else message)
    collected = _COLLECTING.get()
    if collected is not None:
        collected.append(text)
        return
    if text in _SAID:
        return
    if len(_SAID) < _SAID_LIMIT:
        _SAID.add(text)
    logger.warning("%s", text)


def reset_warnings() -> None:
    """Forget which configuration warnings were said, so each is said again (tests use this)."""
    _SAID.clear()


@contextlib.contextmanager
def collected_warnings() -> Iterator[list[str]]:
    """Collect every configuration warning said inside, instead of logging it (said before or not)."""
    collected: list[str] = []
    token = _COLLECTING.set(collected)
    try:
        yield collected
    finally:
        _COLLECTING.reset(token)


def closest_name(name: Any, choices: Any, cutoff: float) -> str | None:
    """The known name a misspelled one most likely meant (every "did you mean" of this module)."""
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=cutoff)
    return close[0] if close else None


def closest_hint(value: Any, choices: Any) -> str:
    close = closest_name(value, choices, 0.6)
    return f" (did you mean {close!r}?)" if close else ""
