"""Amplifier's default context manager: in-memory history, sticky and cache-friendly compaction.

``mount`` is the Amplifier entry point (``context-simple`` in group ``amplifier.modules``);
``SimpleContextManager`` can also be used directly.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import time
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
from .config_base import session_warnings, warning_scope
from .manager import SimpleContextManager
from .presets import PRESETS
from .recall import TOOL_NAME as RECALL_TOOL_NAME
from .recall import RecallTool
from .replay import REMINDER_ENVELOPE_PREFIX as _REMINDER_ENVELOPE_PREFIX
from .replay import REPLAY_ENVELOPE_SOURCE as _REPLAY_ENVELOPE_SOURCE
from .replay import is_real_user_message as _is_real_user_message
from .state import STATE_VERSION, state_capability
from .summary import FORK_PREFIX_SOURCE_VIEW, FORK_PREFIX_SOURCE_WIRE
from .summary_span import (
    _FORK_BOUNDARY_EXCERPT_CHARS,
    _SUMMARY_ENVELOPE_SOURCE,
    _SUMMARY_METADATA_TYPE,
    DEFAULT_SUMMARIZATION_PROMPT,
)
from .token_meter import METER_KIND_ESTIMATED, METER_KIND_NONE, METER_KIND_USAGE
from .tool_results import TOOL_RESULT_CHARS_PER_TOKEN as _TOOL_RESULT_CHARS_PER_TOKEN
from .version import PACKAGE_DIR, __version__

__amplifier_module_type__ = "context"

logger = logging.getLogger("amplifier_module_context_simple")

# The capability hosts use to save compaction state next to the transcript and restore it on resume.
STATE_CAPABILITY = "context.state"

# Events this module emits that amplifier-core's ALL_EVENTS does not list. They are contributed on the
# "observability.events" channel, where logging hooks collect module events to subscribe to.
OBSERVABLE_EVENTS = (
    "context:token_meter",
    "context:compaction-skipped",
    "context:pre_summarize",
    "context:post_summarize",
    "context:budget",
    "context:tool_result_ingress_truncated",
)
OBSERVABILITY_CHANNEL = "observability.events"
# How long cleanup waits for a cancelled summary call to unwind (a provider that ignores cancellation).
SUMMARY_CANCEL_TIMEOUT_S = 1.0
# How long the interpreter waits at exit, before finalizing, for amplifier-core's worker threads.
EXIT_SETTLE_S = 0.05
# Every event the module emits: the kernel's context:compaction plus its own.
CONTEXT_EVENTS = ("context:compaction", *OBSERVABLE_EVENTS)

__all__ = [
    "CONTEXT_EVENTS",
    "COMPACTION_STRATEGY_PROGRESSIVE",
    "COMPACTION_STRATEGY_SUMMARY",
    "DEFAULT_CLEAR_AT_LEAST",
    "DEFAULT_MAX_CONSECUTIVE_SKIPS",
    "DEFAULT_SUMMARIZATION_PROMPT",
    "FORK_PREFIX_SOURCE_VIEW",
    "FORK_PREFIX_SOURCE_WIRE",
    "METER_KIND_ESTIMATED",
    "METER_KIND_NONE",
    "METER_KIND_USAGE",
    "OBSERVABILITY_CHANNEL",
    "OBSERVABLE_EVENTS",
    "PRESETS",
    "RECALL_TOOL_NAME",
    "RecallTool",
    "STATE_CAPABILITY",
    "STATE_VERSION",
    "SUMMARY_CALL_MODE_FORK",
    "SUMMARY_CALL_MODE_STANDALONE",
    "SimpleContextManager",
    "TOKEN_METER_ACTUAL",
    "TOKEN_METER_ESTIMATE",
    "TOKEN_METER_HYBRID",
    "TOOL_RESULT_SHAPE_HEAD",
    "TOOL_RESULT_SHAPE_HEAD_TAIL",
    "_REMINDER_ENVELOPE_PREFIX",
    "_FORK_BOUNDARY_EXCERPT_CHARS",
    "_REPLAY_ENVELOPE_SOURCE",
    "_SUMMARY_ENVELOPE_SOURCE",
    "_SUMMARY_METADATA_TYPE",
    "_TOOL_RESULT_CHARS_PER_TOKEN",
    "_is_real_user_message",
    "__version__",
    "mount",
]


async def mount(coordinator: Any, config: dict[str, Any] | None = None) -> Any:
    """Validate ``config``, mount a SimpleContextManager at ``context`` and return its cleanup."""
    # The original shares this distribution and import name: say which copy runs (also in context:budget).
    logger.info("context-simple: mounting amplifier_module_context_simple %s from %s", __version__, PACKAGE_DIR)
    hooks = getattr(coordinator, "hooks", None)
    # One session's warnings: its two mounts (the validator's, then the session's) share the config object,
    # and the constructor validates again; each problem is said once per session (config_base.warn).
    with warning_scope(session_warnings(config)):
        options = parse_config(config)
        context = SimpleContextManager(hooks=hooks, **{k: v for k, v in options.items() if k in DEFAULTS})
    # Every option reached the constructor; the ones the config gave are the explicit ones.
    context.__dict__["_explicit_keys"] = {k for k in (config or {}) if k in DEFAULTS and k != "preset"}
    unregisters = []
    if hooks is not None:
        unregisters.append(
            hooks.register("llm:response", context._on_llm_response, priority=50, name="context-simple-meter")
        )
        # A refusal for length lowers the limit the next views fit (refusal.py).
        unregisters.append(
            hooks.register("provider:error", context._on_provider_error, priority=50, name="context-simple-refusal")
        )
    await coordinator.mount("context", context)
    if hooks is not None:
        _settle_kernel_threads_at_exit()
    _offer_state_capability(coordinator, context)
    _contribute_events(coordinator, context)
    if context.recall_tool:
        await _mount_recall_tool(coordinator, context)

    async def cleanup() -> None:
        for unregister in unregisters:
            if callable(unregister):
                unregister()
        if context._recall_mounted:
            await _unmount_recall_tool(coordinator, context)
        await _stop_summary_task(context)

    return cleanup


async def _mount_recall_tool(coordinator: Any, context: SimpleContextManager) -> None:
    """Mount ``context_recall`` at ``tools`` (recall.py); a coordinator that cannot take it is logged and
    counted, never fatal: the session runs without the tool, and the notice does not mention it."""
    try:
        await coordinator.mount("tools", RecallTool(context), name=RECALL_TOOL_NAME)
        context._recall_mounted = True
    except Exception as exc:  # noqa: BLE001 - an optional feature
        context._fault_counts["recall_failures"] += 1
        logger.warning("context-simple: could not mount the context_recall tool (%s)", type(exc).__name__)


async def _unmount_recall_tool(coordinator: Any, context: SimpleContextManager) -> None:
    try:
        await coordinator.unmount("tools", name=RECALL_TOOL_NAME)
    except Exception as exc:  # noqa: BLE001 - cleanup goes on
        logger.debug("context-simple: unmounting context_recall failed: %s", exc)
    context._recall_mounted = False


async def _stop_summary_task(context: SimpleContextManager) -> None:
    """Cancel a summary call still running, so nothing of ours outlives the session (docs/clean-exit.md)."""
    task = getattr(context, "_summarization_task", None)
    if task is None or task.done():
        return
    task.cancel()
    try:
        await asyncio.wait({task}, timeout=SUMMARY_CANCEL_TIMEOUT_S)
    except Exception as exc:  # e.g. a task of another event loop: cancelled is enough
        logger.debug("context-simple: summary task not awaited at cleanup: %s", exc)


def _offer_state_capability(coordinator: Any, context: SimpleContextManager) -> None:
    """Register ``context.state`` (snapshot/restore for resume) where the coordinator supports capabilities."""
    register = getattr(coordinator, "register_capability", None)
    if not callable(register):
        return
    try:
        register(STATE_CAPABILITY, state_capability(context))
    except Exception as exc:  # an optional offer must never fail the mount
        context._fault_counts["capability_register_failures"] += 1
        logger.warning("context-simple: could not register the %s capability: %s", STATE_CAPABILITY, exc)


def _contribute_events(coordinator: Any, context: SimpleContextManager) -> None:
    """Name the module's own events on the observability channel, where the coordinator has one."""
    register = getattr(coordinator, "register_contributor", None)
    if not callable(register):
        return
    try:
        register(OBSERVABILITY_CHANNEL, "context-simple", _observable_events)
    except Exception as exc:  # an optional offer must never fail the mount
        context._fault_counts["capability_register_failures"] += 1
        logger.warning("context-simple: could not contribute to %s: %s", OBSERVABILITY_CHANNEL, exc)


def _observable_events() -> list[str]:
    """The contribution: a fresh list, so a collector that extends it cannot change ours."""
    return list(OBSERVABLE_EVENTS)


_exit_settle_registered = False


def _settle_kernel_threads_at_exit() -> None:
    """Once per process: sleep briefly at exit so the kernel's threads finish while Python is alive.

    amplifier-core's tokio worker threads release Python objects a few ms after the last emit; if the
    interpreter is finalizing by then it dies (exit 134/139). atexit runs before finalization starts.
    """
    global _exit_settle_registered
    if not _exit_settle_registered:
        atexit.register(_exit_settle)
        _exit_settle_registered = True


def _exit_settle() -> None:
    time.sleep(EXIT_SETTLE_S)
