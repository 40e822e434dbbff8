"""Checks of the keys whose values are words: booleans, names (a misspelled one warns, naming the
closest, and the key's fallback runs), paths, the token counter and the preset."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from .config_base import bad_value, closest_hint, is_int, warn
from .presets import PRESETS
from .token_counter import resolve_counter

# One rule for every boolean key: real bools, and the words YAML users write (never truthiness).
_BOOLEAN_WORDS = {
    "true": True,
    "yes": True,
    "on": True,
    "1": True,
    "false": False,
    "no": False,
    "off": False,
    "0": False,
}


def boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if is_int(value) and value in (0, 1):
        return bool(value)
    word = _BOOLEAN_WORDS.get(value.strip().lower()) if isinstance(value, str) else None
    if word is None:
        # The original read any value by truthiness and ran: so does this, but says so.
        word = bool(value)
        warn(
            '%s=%r is not true or false (or "yes"/"no", "on"/"off", "1"/"0"); read as %s by truthiness',
            key,
            value,
            word,
        )
    return word


def optional_text(key: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise bad_value(key, value, "a non-empty string or null")
    if not value:  # an unset environment variable, typically: the key's default, not a failed start
        warn("%s='' is empty; read as null (the default)", key)
        return None
    return value


NOTICE_VERBOSITIES = ("minimal", "normal", "verbose")


def notice_verbosity(key: str, value: Any) -> str:
    # The original accepts any value and renders the full notice for everything but "minimal": so
    # does this module, but a typo such as "minimall" is named instead of passing in silence.
    if value not in NOTICE_VERBOSITIES:
        warn(
            "%s=%r is unknown%s; the full notice is shown (valid: %s)",
            key,
            value,
            closest_hint(value, NOTICE_VERBOSITIES),
            ", ".join(NOTICE_VERBOSITIES),
        )
        return "normal"
    return value


def choice(choices: tuple[str, ...], fallback: str, label: str) -> Callable[[str, Any], str]:
    def check(key: str, value: Any) -> str:
        if value in choices:
            return value
        warn(
            "unknown %s %r%s; falling back to %r (valid: %s)",
            label,
            value,
            closest_hint(value, choices),
            fallback,
            ", ".join(choices),
        )
        return fallback

    return check


def exempt_tools(key: str, value: Any) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset([value])
    try:
        names = list(value)
    except TypeError:
        raise bad_value(key, value, "a list of tool names") from None
    if not all(isinstance(name, str) for name in names):
        raise bad_value(key, value, "a list of tool names (strings)")
    return frozenset(names)


def spill_dir(key: str, value: Any) -> str | None:
    if value is None:
        return None
    try:
        text = os.fsdecode(os.fspath(value))  # bytes are decoded, never written as "b'...'"
    except TypeError:
        raise bad_value(key, value, "a directory path or null") from None
    if not text:  # an unset environment variable, typically: no spill, as the default
        warn("%s=%r is empty; read as null (no spill files)", key, value)
        return None
    # "~" and $VARIABLES as a shell reads them ("~/spill" made a folder literally named "~"); resolved
    # once, here: the pointers given to the model must not follow later chdir() calls.
    expanded = os.path.expandvars(os.path.expanduser(text))
    if re.search(r"\$\{?[A-Za-z_]", expanded):
        warn("%s=%r names an environment variable that is not set; used as written", key, value)
    if re.search(r"<[^<>/]+>", expanded):
        warn("%s=%r contains a placeholder (<...>): replace it with a real folder; used as written", key, value)
    return os.path.abspath(expanded)


_COUNTER_PROBE = {"role": "user", "content": "token counter probe"}


def counter_spec(key: str, value: Any) -> Any:
    if value is None:
        return "estimate"
    if callable(value):
        try:  # a counter that cannot count fails here, at mount, not on the first request
            probe = value(dict(_COUNTER_PROBE))
        except Exception as exc:
            raise bad_value(
                key, value, f"a callable that counts a message (it raised {type(exc).__name__}: {exc})"
            ) from exc
        if not is_int(probe) or probe < 0:
            raise bad_value(key, value, f"a callable returning an int >= 0 (it returned {probe!r})")
        return value
    if not isinstance(value, str):
        raise bad_value(key, value, '"estimate", "content", "tiktoken:ENCODING" or a callable')
    if value in ("estimate", "content"):
        return value
    if value.startswith("tiktoken:"):
        try:  # load the encoding now, once: not on every later request
            resolve_counter(value)
        except Exception as exc:  # a typo in the encoding, tiktoken missing, no download: run, say so
            reason = " ".join(str(exc).split())[:400]  # resolve_counter says what to install or name
            warn('token_counter=%r cannot be loaded (%s); using "estimate"', value, reason)
            return "estimate"
        return value
    warn(
        'unknown token_counter %r%s; using "estimate" (valid: estimate, content, tiktoken:ENCODING)',
        value,
        closest_hint(value, ("estimate", "content", "tiktoken:cl100k_base", "tiktoken:o200k_base")),
    )
    return "estimate"


def auto_compact(key: str, value: Any) -> bool:
    """amplifier-foundation's bundles set ``auto_compact: true``; compaction here is always per request."""
    on = boolean(key, value)
    if not on:
        warn(
            "%s=%r does not turn compaction off: each request's view is still compacted when it is over "
            "compact_threshold (raise compact_threshold to compact later)",
            key,
            value,
        )
    return on


def preset_name(key: str, value: Any) -> str | None:
    """A known preset, or None; a misspelled one warns, naming the closest, and means no preset."""
    if value is None or (isinstance(value, str) and value in PRESETS):
        return value
    known = ", ".join(sorted(PRESETS))
    if not isinstance(value, str):
        raise bad_value(key, value, f"null or one of {known}")
    warn("unknown preset %r%s; running without a preset (valid: %s)", value, closest_hint(value, PRESETS), known)
    return None


def checked_preset(value: Any) -> str | None:
    """The preset a constructor or config names, after the preset rule above."""
    return preset_name("preset", value)
