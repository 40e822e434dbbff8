"""A view handed back as the history: ``set_messages()`` given what ``get_messages_for_request()``
returned (this module's own notice, ledger or replay envelopes among the messages) would store those
envelopes as the user's words. They are stored as given (the host owns its history), and said once."""

from __future__ import annotations

import logging
from typing import Any

from .ledger import LEDGER_SOURCE
from .notice import NOTICE_SOURCE
from .replay import REPLAY_ENVELOPE_SOURCE

logger = logging.getLogger("amplifier_module_context_simple")

# The envelopes only a view carries (a summary's is stored in the history by the summary strategy).
VIEW_ONLY_SOURCES = {
    NOTICE_SOURCE: "compaction notice",
    LEDGER_SOURCE: "evidence ledger",
    REPLAY_ENVELOPE_SOURCE: "last-user replay",
}
_OPENERS = {f'<system-reminder source="{source}">': source for source in VIEW_ONLY_SOURCES}
TOLD = "set_messages_view"


def view_envelope_source(message: Any) -> str | None:
    """The source of the view-only envelope ``message`` is, by its metadata or its text, else None."""
    if not isinstance(message, dict):
        return None
    metadata = message.get("metadata")
    if isinstance(metadata, dict) and metadata.get("source") in VIEW_ONLY_SOURCES and "_seq" not in metadata:
        return str(metadata["source"])
    content = message.get("content")
    if isinstance(content, str) and content.startswith("<system-reminder source="):
        return _OPENERS.get(content.split("\n", 1)[0].strip())
    return None


def warn_if_view(messages: list[Any], told: set[str]) -> None:
    """Warn, once per manager (``told``), that ``messages`` hold a view's own envelopes."""
    if TOLD in told:
        return
    found = [(index, source) for index, m in enumerate(messages) if (source := view_envelope_source(m))]
    if not found:
        return
    told.add(TOLD)
    kinds = sorted({VIEW_ONLY_SOURCES[source] for _, source in found})
    logger.warning(
        "context-simple: set_messages() was given a view, not the history: %d message(s) (first at index %d) "
        "are this module's own %s, from get_messages_for_request(); they are stored as given, as user "
        "messages. To resume, pass the list get_messages() returned.",
        len(found),
        found[0][0],
        " and ".join(kinds),
    )
