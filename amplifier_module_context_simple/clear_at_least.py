"""The worth-the-rebuild predicate: refuse a compaction that frees too little to pay for the
cold prompt-cache rebuild it causes, and fail loud when refusing becomes a habit."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger("amplifier_module_context_simple")


@dataclass(frozen=True)
class Verdict:
    """What the predicate decided about one escalation."""

    accepted: bool
    freed: int
    required: int


def judge(baseline_tokens: int, final_tokens: int, required: int) -> Verdict:
    """Accept when the escalation freed at least ``required`` tokens against the sticky baseline."""
    freed = baseline_tokens - final_tokens
    return Verdict(accepted=freed >= required, freed=freed, required=required)


def skipped_payload(
    verdict: Verdict, pending: dict[str, Any], level: int, skips: int, cap: int, knobs: dict[str, Any]
) -> dict[str, Any]:
    """The ``context:compaction-skipped`` event payload."""
    return {
        "freed_tokens": verdict.freed,
        "required_tokens": verdict.required,
        "level_reached": level,
        "consecutive_skips": skips,
        "max_consecutive_skips": cap,
        "baseline_tokens": pending["baseline_tokens"],
        "budget": pending["budget"],
        "protected_recent": knobs["protected_recent"],
        "protected_tool_results": knobs["protected_tool_results"],
    }


def failure_message(
    raw: Any,
    verdict: Verdict,
    pending: dict[str, Any],
    level: int,
    skips: int,
    cap: int,
    knobs: dict[str, Any],
) -> str:
    """The fail-loud RuntimeError text: what was freed, what was required, which knob to move."""
    baseline = pending["baseline_view"]
    tool_results = sum(1 for m in baseline if m.get("role") == "tool")
    return (
        f"context-simple: compact_clear_at_least={raw!r} could not be satisfied {skips} consecutive "
        f"times (cap: {cap}). The compaction ladder reached level {level} and freed only "
        f"{verdict.freed:,} tokens against a required floor of {verdict.required:,}. Protected set "
        f"holding the floor: protected_tool_results={knobs['protected_tool_results']} (of {tool_results} "
        f"tool results in the view), protected_recent={knobs['protected_recent']:.0%} of {len(baseline)} "
        f"messages. Baseline view is {pending['baseline_tokens']:,} tokens against a budget of "
        f"{pending['budget']:,}. Lower compact_clear_at_least, lower "
        "protected_recent/protected_tool_results, or raise the budget -- compacting harder will not help."
    )


def refuse(
    verdict: Verdict,
    pending: dict[str, Any],
    level: int,
    decisions: Any,
    raw: Any,
    cap: int,
    knobs: dict[str, Any],
) -> dict[str, Any]:
    """Roll a refused escalation back on the history's ``decisions`` (its sticky sets and the ledger it
    may have recorded), count the skip, and return the ``context:compaction-skipped`` payload; the
    ``cap``-th consecutive refusal raises the fail-loud RuntimeError instead. Moved from manager.py."""
    decisions._clear_at_least_skips += 1
    decisions.restore_sticky(pending["sticky"])
    decisions._ledger = pending.get("ledger")
    decisions._ledger_segments = pending.get("ledger_segments", ())
    skips = decisions._clear_at_least_skips
    if skips >= cap:
        raise RuntimeError(failure_message(raw, verdict, pending, level, skips, cap, knobs))
    logger.info("context-simple: compaction skipped: freed %d < required %d", verdict.freed, verdict.required)
    return skipped_payload(verdict, pending, level, skips, cap, knobs)
