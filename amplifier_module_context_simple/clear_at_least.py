"""The worth-the-rebuild predicate: refuse a compaction that frees too little to pay for the
cold prompt-cache rebuild it causes, and fail loud when refusing becomes a habit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
