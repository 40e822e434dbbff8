"""``context_recall`` without a session: the tool for a host that runs its own tool loop; and what the tool
reads from the manager (:class:`RecallInputs`, :func:`view_gaps`; issue 38).

mount() registers the tool at ``tools`` when ``recall_tool`` is true. A manager built directly has no
coordinator to register it with: ``SimpleContextManager.get_recall_tool()`` hands the same tool to the
caller (its ``name``, ``description`` and ``input_schema`` describe it to a model, ``await
tool.execute(arguments)`` runs it), and ``recall_tool: true`` with no tool taken is said once.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from .recall_search import MessageTexts

logger = logging.getLogger("amplifier_module_context_simple")

TOLD = "recall_tool_not_taken"
Message = dict[str, Any]


def warn_if_not_taken(recall_tool: bool, mounted: bool, faults: Any, told: set[str]) -> None:
    """``recall_tool`` is true but no tool exists (a manager used directly, not ``mounted``): say once
    (``told``) how to get it. The manager's ``get_recall_tool()`` hands the tool out (issue 38: the
    manager calls this with its values; nothing here reads it)."""
    if TOLD in told or not recall_tool or mounted:
        return
    told.add(TOLD)
    if faults["recall_failures"]:
        return  # mount() tried and said why it could not
    logger.warning(
        "context-simple: recall_tool is true, but only mount() registers the context_recall tool; used "
        "directly, call context.get_recall_tool() and offer the tool it returns to the model in your own "
        "tool loop (await tool.execute(arguments))"
    )


def view_gaps(decided: Any, ingress: Any = None) -> dict[int, str]:
    """The seqs the current view lacks in full, with how (``GAP_WORDS``' keys): from the history's
    decisions (decisions.py; anything with its ``*_seqs`` sets) and the clipped results (ingress.py)."""
    gaps = dict.fromkeys(getattr(decided, "_stubbed_seqs", ()), "stubbed")
    gaps.update(dict.fromkeys(getattr(decided, "_truncated_seqs", ()), "truncated"))
    if ingress is not None:
        gaps.update(dict.fromkeys(ingress.clipped(), "truncated"))
    gaps.update(dict.fromkeys(getattr(decided, "_removed_seqs", ()), "removed"))
    return gaps


class RecallInputs(NamedTuple):
    """What one search reads, as the manager hands it over (``SimpleContextManager.recall_inputs``)."""

    messages: list[Message]  # the stored history, after any in-place edit was adopted
    texts: MessageTexts  # the searchable texts, cached while the history is
    gaps: dict[int, str]  # what the current view lacks (view_gaps)
    guard: Any  # its ``edited`` flag stops a search of a history edited meanwhile (wire_copy.Guard)
    faults: Any  # the manager's fault counters
