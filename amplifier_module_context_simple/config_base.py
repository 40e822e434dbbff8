"""What every configuration check shares: value tests, the refusal, the once-per-session warning,
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


# One warning per distinct problem per session, never per process: amplifier-core mounts a module twice
# for one session (its validator mounts it on a mock coordinator with the same config object, then the
# session mounts it), and a live assignment may repeat a value; a second session, or a second test, is
# told again, as the original tells every mount. The scope is a set of texts already said: mount() takes
# the one of its config object (session_warnings), a constructor without one opens its own.
_SCOPE: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("context_simple_said", default=None)
_SAID_LIMIT = 4096  # bounded, so endless distinct values cannot grow a scope
# The scopes of the config objects mount() saw last, by identity (the object is kept, so its id is not
# reused while it is listed); a few suffice: the two mounts of one session follow each other.
_SESSIONS: dict[int, tuple[Any, set[str]]] = {}
_SESSIONS_LIMIT = 64
# Set while a caller collects the warnings instead (evaluation commands refuse a config that warns).
_COLLECTING: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("context_simple_collect", default=None)


def warn(message: str, *args: Any) -> None:
    """One configuration warning, said once per session (``warning_scope``); outside one, always."""
    text = "context-simple: " + (message % args if args else message)
    collected = _COLLECTING.get()
    if collected is not None:
        collected.append(text)
        return
    said = _SCOPE.get()
    if said is not None:
        if text in said:
            return
        if len(said) < _SAID_LIMIT:
            said.add(text)
    logger.warning("%s", text)


def session_warnings(config: Any) -> set[str]:
    """The scope of one session: the same config object (the validator's mount and the session's) shares
    one set; another object, even an equal one, gets its own."""
    if not config:
        return set()  # nothing to warn about, nothing to share
    entry = _SESSIONS.get(id(config))
    if entry is not None and entry[0] is config:
        return entry[1]
    if len(_SESSIONS) >= _SESSIONS_LIMIT:
        del _SESSIONS[next(iter(_SESSIONS))]  # the oldest
    _SESSIONS[id(config)] = (config, set())
    return _SESSIONS[id(config)][1]


def current_scope() -> set[str] | None:
    return _SCOPE.get()


@contextlib.contextmanager
def warning_scope(said: set[str]) -> Iterator[set[str]]:
    """Say each configuration warning inside at most once into ``said``."""
    token = _SCOPE.set(said)
    try:
        yield said
    finally:
        _SCOPE.reset(token)


def reset_warnings() -> None:
    """Forget the sessions' scopes (tests use this; a new session or manager starts fresh anyway)."""
    _SESSIONS.clear()


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
