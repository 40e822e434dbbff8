"""The system prompt factory's answer for one request (``set_system_prompt_factory``): a factory that
fails falls back to the last good prompt, logged and counted; with none, the request cannot be built.
Moved from the manager (issue 38)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from .tool_pairs import is_hook_injection

logger = logging.getLogger("amplifier_module_context_simple")


async def read_prompt(factory: Callable[[], Awaitable[str]], last_good: str | None, faults: Any) -> str:
    """``await factory()``, checked to be a string; on failure the last good prompt (``last_good``)."""
    try:
        prompt = await factory()
        if not isinstance(prompt, str):
            raise TypeError(f"factory returned {type(prompt).__name__}, not str")
    except Exception as exc:
        faults["system_prompt_factory_failures"] += 1
        if last_good is None:
            raise RuntimeError(
                "context-simple: the system prompt factory failed and no earlier prompt exists, "
                f"so no request can be built ({type(exc).__name__}: {exc})"
            ) from exc
        logger.warning("context-simple: system prompt factory failed (%s); reusing the last good prompt", exc)
        return last_good
    return prompt


def kept_with_factory(message: dict[str, Any]) -> bool:
    """With a system prompt factory, stored system messages give way to it, except hook-injected ones."""
    return message.get("role") != "system" or is_hook_injection(message)
