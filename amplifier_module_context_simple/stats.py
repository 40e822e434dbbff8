"""What a compaction boundary records: ``_last_compaction_stats``, also the ``context:compaction`` payload
and what the notice reads (notice.py). Moved from the manager's ``_finalize_compaction_with_stats``
(issue 38): a pure function of the history, its decisions and the view."""

from __future__ import annotations

from typing import Any

from .estimate import seq_of
from .instructions import is_injected_instruction
from .notice import INJECTIONS_REMOVED_KEY, RECENT_RESULTS_REMOVED_KEY, removed_recent_results

Message = dict[str, Any]


def injections_removed(messages: list[Message], removed: set[int]) -> int:
    """System-role hook injections the ladder removed (the notice names them: not instructions)."""
    return sum(1 for m in messages if is_injected_instruction(m) and seq_of(m) in removed) if removed else 0


def compaction_stats(
    before: tuple[int, int],
    final: list[Message],
    final_tokens: int,
    system_count: int,
    decisions: Any,
    messages: list[Message],
    budget: int,
    target: int,
    protected_recent: float,
    protected_tool_results: int,
    summary_mode: bool,
) -> dict[str, Any]:
    """The boundary's stats: sizes before and after, the cumulative decisions of ``decisions`` (the
    history's, decisions.py), the settings that shaped them; the ledger's and the last rung's keys are
    added by the caller."""
    stats = {
        "before_tokens": before[0],
        "after_tokens": final_tokens,
        "before_messages": before[1],
        "after_messages": len(final),
        "messages_removed": len(decisions._removed_seqs),
        "messages_truncated": len(decisions._truncated_seqs) + len(decisions._clipped_seqs),
        "user_messages_stubbed": len(decisions._stubbed_seqs),
        "system_messages_preserved": system_count,
        "strategy_level": decisions._sticky_level,
        "budget": budget,
        "target_tokens": target,
        "protected_recent": protected_recent,
        "protected_tool_results": protected_tool_results,
    }
    if summary_mode:
        stats["messages_absorbed_by_summary"] = decisions._summary_absorbed_count
    if removed := removed_recent_results(messages, final, protected_tool_results, decisions._synthetic_calls):
        stats[RECENT_RESULTS_REMOVED_KEY] = removed  # the notice must not claim them
    if injections := injections_removed(messages, decisions._removed_seqs):
        stats[INJECTIONS_REMOVED_KEY] = injections  # nor "all system messages"
    return stats
