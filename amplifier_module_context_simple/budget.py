"""The per-request token budget: explicit, from the provider, or the configured fallback."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("amplifier_module_context_simple")

SAFETY_MARGIN_TOKENS = 4096


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value > 0 else None


def _window_budget(window: Any, max_output: Any, reserve_fraction: float) -> int | None:
    """context_window - reserved output - safety margin, or None when the numbers are unusable."""
    cw, out = _positive_int(window), _positive_int(max_output)
    if cw is None or out is None:
        return None
    budget = cw - int(out * reserve_fraction) - SAFETY_MARGIN_TOKENS
    return budget if budget > 0 else None


def _from_model_info(provider: Any, reserve_fraction: float) -> int | None:
    getter = getattr(provider, "get_model_info", None)
    if not callable(getter):
        return None
    info = getter()
    if not info:
        return None
    return _window_budget(
        getattr(info, "context_window", None), getattr(info, "max_output_tokens", None), reserve_fraction
    )


def _from_provider_info(provider: Any, reserve_fraction: float) -> int | None:
    getter = getattr(provider, "get_info", None)
    if not callable(getter):
        return None
    info = getter()
    defaults = getattr(info, "defaults", None)
    if not isinstance(defaults, dict):
        return None
    return _window_budget(defaults.get("context_window"), defaults.get("max_output_tokens"), reserve_fraction)


def provider_budget(provider: Any, reserve_fraction: float) -> tuple[int | None, bool]:
    """Budget the provider reports, and whether asking it raised (so the caller can count it).

    ``get_model_info()`` first, then ``get_info().defaults``; a source that raises or reports
    unusable numbers (None, zeros, strings) is skipped, never fatal.
    """
    if provider is None:
        return None, False
    failed = False
    for source in (_from_model_info, _from_provider_info):
        try:
            budget = source(provider, reserve_fraction)
        except Exception as exc:  # a provider's info is optional: any failure falls back
            logger.warning("context-simple: provider budget info failed (%s)", type(exc).__name__)
            failed = True
            continue
        if budget is not None:
            return budget, failed
    return None, failed


def effective_budget(budget: int, reserve: int, notice_enabled: bool) -> int:
    """Budget minus the compaction-notice reserve; the full budget when the reserve would eat it."""
    if not notice_enabled or reserve <= 0:
        return budget
    reduced = budget - reserve
    if reduced <= 0:
        logger.warning(
            "context-simple: budget %d is not larger than the notice reserve %d; using the full budget",
            budget,
            reserve,
        )
        return budget
    return reduced
