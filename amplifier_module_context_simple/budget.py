"""The per-request token budget: explicit, from the provider's window, or the fallback; capped by max_tokens."""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from .config import DefaultTokens
from .version import __version__

logger = logging.getLogger("amplifier_module_context_simple")

SAFETY_MARGIN_TOKENS = 4096


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value > 0 else None


class Window(NamedTuple):
    """What a provider reports, and the budget derived from it (None when the numbers are unusable)."""

    context_window: int | None
    max_output_tokens: int | None
    budget: int | None


class BudgetReading(NamedTuple):
    """One request's budget and where it came from: the payload of ``context:budget``."""

    source: str  # "token_budget", "provider_defaults" or "max_tokens_fallback" (today's original's names)
    context_window: int | None
    max_output_tokens: int | None
    derived_budget: int | None
    max_tokens: int | None
    max_tokens_fallback: int
    capped: bool
    effective_budget: int

    def payload(self) -> dict[str, Any]:
        # module_version: which copy of the module runs (the original shares its name; version.py)
        return {**self._asdict(), "module_version": __version__}


def _window(window: Any, max_output: Any, reserve_fraction: float) -> Window:
    """context_window - reserved output - safety margin, or no budget when the numbers are unusable.

    A window too small for the whole margin (4,096 tokens, 1,024 of output) is still a window: the margin
    shrinks to an eighth of it (the input limit's own, limit.py), rather than the budget falling back to
    200,000 and the limit being dropped. Only a window the reserved output fills has no budget."""
    cw, out = _positive_int(window), _positive_int(max_output)
    if cw is None or out is None:
        return Window(cw, out, None)
    reserved = int(out * reserve_fraction)
    budget = cw - reserved - SAFETY_MARGIN_TOKENS
    if budget <= 0:
        budget = cw - reserved - min(SAFETY_MARGIN_TOKENS, cw // 8)
    return Window(cw, out, budget if budget > 0 else None)


def _from_model_info(provider: Any, reserve_fraction: float) -> Window | None:
    getter = getattr(provider, "get_model_info", None)
    if not callable(getter):
        return None
    info = getter()
    if not info:
        return None
    return _window(getattr(info, "context_window", None), getattr(info, "max_output_tokens", None), reserve_fraction)


def _from_provider_info(provider: Any, reserve_fraction: float) -> Window | None:
    getter = getattr(provider, "get_info", None)
    if not callable(getter):
        return None
    info = getter()
    defaults = getattr(info, "defaults", None)
    if not isinstance(defaults, dict):
        return None
    return _window(defaults.get("context_window"), defaults.get("max_output_tokens"), reserve_fraction)


def provider_window(provider: Any, reserve_fraction: float) -> tuple[Window | None, bool]:
    """The window the provider reports, and whether asking it raised (so the caller can count it).

    ``get_model_info()`` first, then ``get_info().defaults``; a source that raises or reports
    unusable numbers (None, zeros, strings) is skipped, never fatal.
    """
    if provider is None:
        return None, False
    failed = False
    for source in (_from_model_info, _from_provider_info):
        try:
            window = source(provider, reserve_fraction)
        except Exception as exc:  # a provider's info is optional: any failure falls back
            logger.warning("context-simple: provider budget info failed (%s)", type(exc).__name__)
            failed = True
            continue
        if window is not None and window.budget is not None:
            return window, failed
    return None, failed


def cap_and_fallback(max_tokens: Any, max_tokens_fallback: Any) -> tuple[int | None, int]:
    """(cap, budget without a provider window) from the two keys.

    ``max_tokens`` left at its default is the original's fallback budget and no cap; set, it caps
    the provider's budget too (today's original), and None means no cap. ``max_tokens_fallback``
    left at its default follows ``max_tokens`` (so ``max_tokens=4000`` alone still budgets 4,000).
    """
    cap = None if max_tokens is None or isinstance(max_tokens, DefaultTokens) else int(max_tokens)
    fallback = int(max_tokens_fallback)
    if isinstance(max_tokens_fallback, DefaultTokens) and max_tokens is not None:
        fallback = int(max_tokens)
    return cap, fallback


def read_budget(window: Window | None, max_tokens: Any, max_tokens_fallback: Any) -> BudgetReading:
    """The effective budget: the provider's derived budget or the fallback, capped by ``max_tokens``."""
    cap, fallback = cap_and_fallback(max_tokens, max_tokens_fallback)
    derived = window.budget if window is not None else None
    base = derived if derived is not None else fallback
    effective = base if cap is None else min(base, cap)
    return BudgetReading(
        "provider_defaults" if derived is not None else "max_tokens_fallback",  # today's original's names
        window.context_window if window is not None else None,
        window.max_output_tokens if window is not None else None,
        derived,
        cap,
        fallback,
        effective < base,
        effective,
    )


def explicit_budget(token_budget: int, max_tokens: Any, max_tokens_fallback: Any) -> BudgetReading:
    """A caller's explicit ``token_budget`` is used as given (the original's rule), never capped."""
    cap, fallback = cap_and_fallback(max_tokens, max_tokens_fallback)
    return BudgetReading("token_budget", None, None, None, cap, fallback, False, token_budget)


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


def warn_over_budget(
    level: int,
    final_tokens: int,
    budget: int,
    system_tokens: int,
    target: int,
    protected_recent: float,
    protected_tool_results: int,
    floor: str = "",
    yields: str = "",
) -> None:
    """The OVER BUDGET warning, naming what could not be reduced: the original's wording, or with ``floor``
    (floor.floor_text) the parts of the view, largest first; ``yields`` names what the last rung gave up."""
    if system_tokens > budget:
        cause = f"the system prompt ALONE is {system_tokens:,} tokens, an un-reducible floor"
    elif floor:
        cause = f"what no level may reduce does not fit: the floor's largest part is {floor}"
    else:
        cause = (
            "what no level may reduce does not fit: the protected floor (system messages, first and last "
            f"user message, protected_recent={protected_recent:.0%}, "
            f"protected_tool_results={protected_tool_results}), tool groups reaching into it, and "
            "content no level rewrites (results of exempt tools, non-text results)"
        )
    if yields:
        cause += f"; the protections yielded: {yields}"
    logger.warning(
        "context-simple: Compaction finished OVER BUDGET at level %d: %s tokens against a budget of %s "
        "(%.0f%% of budget, target %s); %s",
        level,
        f"{final_tokens:,}",
        f"{budget:,}",
        100 * final_tokens / budget if budget > 0 else 0.0,
        f"{target:,}",
        cause,
    )


class Budget:
    """The request's budget (``_calculate_budget``, a name callers of the original rely on, is the manager's
    thin call of :meth:`calculate`), the last one reported in ``context:budget``, and the fallback. The
    provider's input limit (limit.py) is the manager's, beside it. Nothing here reads the manager."""

    def __init__(self) -> None:
        self.reading: BudgetReading | None = None
        self.reported: BudgetReading | None = None

    def calculate(
        self, token_budget: int | None, provider: Any, max_tokens: Any, max_tokens_fallback: Any, reserve: float
    ) -> tuple[int, bool]:
        """(effective budget, whether asking the provider failed): explicit budget, else the provider's
        window minus reserved output, else the fallback; a ``max_tokens`` that was set caps the last two."""
        failed = False
        if token_budget is not None:
            reading = explicit_budget(token_budget, max_tokens, max_tokens_fallback)
        else:
            window, failed = provider_window(provider, reserve)
            reading = read_budget(window, max_tokens, max_tokens_fallback)
        self.reading = reading
        return reading.effective_budget, failed

    def change(self) -> dict[str, Any] | None:
        """The ``context:budget`` payload when this request's effective budget differs from the last one
        reported, else None (a reading that changed only otherwise is recorded silently)."""
        reading = self.reading
        if reading is None or reading == self.reported:
            return None
        changed = self.reported is None or reading.effective_budget != self.reported.effective_budget
        self.reported = reading
        return reading.payload() if changed else None


def fallback_budget(max_tokens: Any, max_tokens_fallback: Any) -> int:
    """The budget with no explicit budget and no provider window."""
    return read_budget(None, max_tokens, max_tokens_fallback).effective_budget
