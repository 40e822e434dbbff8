"""Amplifier's default context manager: in-memory history, sticky and cache-friendly compaction.

``mount`` is the Amplifier entry point (``context-simple`` in group ``amplifier.modules``);
``SimpleContextManager`` can also be used directly.
"""

from __future__ import annotations

import logging
from typing import Any

from .config import (
    COMPACTION_STRATEGY_PROGRESSIVE,
    COMPACTION_STRATEGY_SUMMARY,
    DEFAULT_CLEAR_AT_LEAST,
    DEFAULT_MAX_CONSECUTIVE_SKIPS,
    DEFAULTS,
    SUMMARY_CALL_MODE_FORK,
    SUMMARY_CALL_MODE_STANDALONE,
    TOKEN_METER_ACTUAL,
    TOKEN_METER_ESTIMATE,
    TOKEN_METER_HYBRID,
    TOOL_RESULT_SHAPE_HEAD,
    TOOL_RESULT_SHAPE_HEAD_TAIL,
    parse_config,
)
from .manager import SimpleContextManager
from .replay import REMINDER_ENVELOPE_PREFIX as _REMINDER_ENVELOPE_PREFIX
from .replay import REPLAY_ENVELOPE_SOURCE as _REPLAY_ENVELOPE_SOURCE
from .replay import is_real_user_message as _is_real_user_message
from .token_meter import METER_KIND_ESTIMATED, METER_KIND_NONE, METER_KIND_USAGE
from .tool_results import TOOL_RESULT_CHARS_PER_TOKEN as _TOOL_RESULT_CHARS_PER_TOKEN

__amplifier_module_type__ = "context"
__version__ = "1.0.0"

logger = logging.getLogger("amplifier_module_context_simple")

__all__ = [
    "COMPACTION_STRATEGY_PROGRESSIVE",
    "COMPACTION_STRATEGY_SUMMARY",
    "DEFAULT_CLEAR_AT_LEAST",
    "DEFAULT_MAX_CONSECUTIVE_SKIPS",
    "METER_KIND_ESTIMATED",
    "METER_KIND_NONE",
    "METER_KIND_USAGE",
    "SUMMARY_CALL_MODE_FORK",
    "SUMMARY_CALL_MODE_STANDALONE",
    "SimpleContextManager",
    "TOKEN_METER_ACTUAL",
    "TOKEN_METER_ESTIMATE",
    "TOKEN_METER_HYBRID",
    "TOOL_RESULT_SHAPE_HEAD",
    "TOOL_RESULT_SHAPE_HEAD_TAIL",
    "_REMINDER_ENVELOPE_PREFIX",
    "_REPLAY_ENVELOPE_SOURCE",
    "_TOOL_RESULT_CHARS_PER_TOKEN",
    "_is_real_user_message",
    "mount",
]


async def mount(coordinator: Any, config: dict[str, Any] | None = None) -> Any:
    """Validate ``config``, mount a SimpleContextManager at ``context`` and return its cleanup."""
    options = parse_config(config)
    hooks = getattr(coordinator, "hooks", None)
    context = SimpleContextManager(hooks=hooks, **{k: v for k, v in options.items() if k in DEFAULTS})
    unregister = None
    if hooks is not None:
        unregister = hooks.register("llm:response", context._on_llm_response, priority=50, name="context-simple-meter")
    await coordinator.mount("context", context)

    async def cleanup() -> None:
        if unregister is not None:
            unregister()

    return cleanup
