"""Emitting an event to the host's ``hooks``: a failure never reaches the turn, and a hooks object whose
``emit`` is not async is told once, with the fix, not once per event."""

from __future__ import annotations

import inspect
import logging
from collections import Counter
from typing import Any

logger = logging.getLogger("amplifier_module_context_simple")

NOT_ASYNC = "not_async"


async def emit_event(hooks: Any, event: str, payload: dict[str, Any], faults: Counter[str], said: set[str]) -> None:
    """``await hooks.emit(event, payload)``; a failure is counted in ``faults`` and logged, a non-async
    ``emit`` only the first time (``said`` remembers it for this manager)."""
    try:
        result = hooks.emit(event, payload)
        if not inspect.isawaitable(result):
            raise _NotAsync(type(result).__name__)
        await result
    except _NotAsync as problem:
        faults["hook_emit_failures"] += 1
        if NOT_ASYNC not in said:
            said.add(NOT_ASYNC)
            logger.warning(
                "context-simple: hooks.emit must be async (async def emit(event, data)); it returned %s, so "
                "this module's events (%s and later ones) are not delivered",
                problem,
                event,
            )
    except Exception as exc:
        faults["hook_emit_failures"] += 1
        logger.warning("context-simple: emitting %s failed: %s", event, type(exc).__name__)


class _NotAsync(TypeError):
    """``emit`` returned something that cannot be awaited (its type name is the message)."""
