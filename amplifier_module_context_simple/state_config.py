"""Which configuration a snapshot was taken under, and the two things ``restore_state`` tells about it.

A state saved under one configuration (``preset: evidence``) restored into a manager without it is valid
(the decisions are tied to the history, not to the keys), but the views then follow the new keys: said,
not silent. A refusal because the host dropped the messages' ``metadata`` names metadata.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from .config import DEFAULTS

logger = logging.getLogger("amplifier_module_context_simple")

CONFIG_KEY = "config"  # optional in a snapshot: states saved before it restore as they did
# Keys that change nothing in a view.
_NOT_SHAPING = frozenset({"auto_compact", "max_messages", "recall_tool", "summarization_timeout_s"})


def _plain(value: Any) -> Any:
    """A JSON-safe, comparable form of a key's value (a callable counter by its name)."""
    if isinstance(value, frozenset | set):
        return sorted(map(str, value))
    if callable(value):
        return f"callable {getattr(value, '__qualname__', type(value).__name__)}"
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda item: str(item[0]))}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def config_fingerprint(manager: Any) -> dict[str, Any]:
    """The view-shaping keys this manager holds at values other than the defaults."""
    saved = {}
    for key in sorted(DEFAULTS):
        if key in _NOT_SHAPING:
            continue
        value = _plain(getattr(manager, key, DEFAULTS[key]))
        if value != _plain(DEFAULTS[key]):
            saved[key] = value
    return saved


def warn_config_differs(state: dict[str, Any], manager: Any) -> None:
    """Warn when ``state`` names a configuration other than ``manager``'s (the state is adopted)."""
    saved = state.get(CONFIG_KEY)
    if not isinstance(saved, dict):
        return  # a state saved before the fingerprint existed: nothing to compare
    current = config_fingerprint(manager)
    differing = sorted(key for key in set(saved) | set(current) if saved.get(key) != current.get(key))
    if not differing:
        return
    shown = ", ".join(
        f"{key}: {saved.get(key, DEFAULTS.get(key))!r} -> {current.get(key, DEFAULTS.get(key))!r}"
        for key in differing[:6]
    )
    logger.warning(
        "context-simple: restore_state adopted a state saved under another configuration (%s%s); its "
        "decisions are kept, and later views follow this manager's configuration. Restore into a manager "
        "configured as the one that saved it for the same views.",
        shown,
        ", ..." if len(differing) > 6 else "",
    )


def metadata_hint(messages: Sequence[dict[str, Any]]) -> str:
    """Why a digest may not match: the host stored the messages without the metadata they gained."""
    bare = sum(1 for m in messages if "timestamp" not in (m.get("metadata") or {}))
    if bare:
        return (
            f" ({bare} of the stored messages carry no metadata timestamp: the digest covers each message's "
            "metadata, so save and restore the messages get_messages() returned, metadata included)"
        )
    return " (the digest covers each message's content and metadata, timestamps included)"
