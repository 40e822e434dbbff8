"""``context_recall`` without a session: the tool for a host that runs its own tool loop.

mount() registers the tool at ``tools`` when ``recall_tool`` is true. A manager built directly has no
coordinator to register it with: ``SimpleContextManager.get_recall_tool()`` hands the same tool to the
caller (its ``name``, ``description`` and ``input_schema`` describe it to a model, ``await
tool.execute(arguments)`` runs it), and ``recall_tool: true`` with no tool taken is said once.
"""

from __future__ import annotations

import logging
from typing import Any

from .recall import RecallTool

logger = logging.getLogger("amplifier_module_context_simple")

TOLD = "recall_tool_not_taken"


def offer(manager: Any) -> RecallTool:
    """The tool over ``manager``'s history; from now on the notice and the ledger mention it, as they do
    when mount() registers it (the model can call it)."""
    manager._recall_mounted = True
    return RecallTool(manager)


def warn_if_not_taken(manager: Any, told: set[str]) -> None:
    """``recall_tool`` is true but no tool exists (a manager used directly): say once how to get it."""
    if TOLD in told or not manager.recall_tool or manager._recall_mounted:
        return
    told.add(TOLD)
    if manager._fault_counts["recall_failures"]:
        return  # mount() tried and said why it could not
    logger.warning(
        "context-simple: recall_tool is true, but only mount() registers the context_recall tool; used "
        "directly, call context.get_recall_tool() and offer the tool it returns to the model in your own "
        "tool loop (await tool.execute(arguments))"
    )
