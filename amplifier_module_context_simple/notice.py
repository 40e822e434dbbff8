"""The tail compaction notice: a pure function of the last compaction's stats, so it stays
byte-stable until the next boundary."""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from .estimate import seq_of
from .floor import yields_text
from .repair import repair_view
from .tool_pairs import in_flight_start

NOTICE_SOURCE = "context-compaction"
# Compaction stats key, present only when some of the last ``protected_tool_results`` results were removed.
RECENT_RESULTS_REMOVED_KEY = "protected_tool_results_removed"
# Present only when the ladder removed system-role hook injections (instructions.py): not instructions.
INJECTIONS_REMOVED_KEY = "hook_injections_removed"

_MINIMAL = (
    '<system-reminder source="context-compaction">\n'
    "Context has been compacted to fit within token budget. "
    "Some older messages and tool results may be truncated.\n"
    "</system-reminder>"
)


def _affected(level: int, protected_tool_results: int) -> str:
    lines = [
        "- Older tool results have been truncated",
        "- You can re-run tools if you need the full output",
    ]
    if level <= 2:
        return "\n".join(lines)
    if level <= 5:
        return "\n".join([*lines, "- Older conversation messages have been removed"])
    return "\n".join(
        [
            f"- Most tool results are truncated (except last {protected_tool_results})",
            "- Significant conversation history has been removed",
            '- Some user messages may be stubbed as "[User message compacted...]"',
            "- If context is critical, consider asking user to clarify their current goal",
        ]
    )


def _evidence_line(stats: dict[str, Any]) -> str:
    """In evidence mode (its stats keys present), where the removed messages' key lines are."""
    if not stats.get("ledger_lines"):
        return ""
    return f"- {stats['ledger_lines']} key lines of removed messages are kept where they were\n"


def removed_recent_results(
    stored: list[dict[str, Any]], view: list[dict[str, Any]], keep: int, synthetic: Container[tuple[int, str]] = ()
) -> int:
    """How many of the last ``keep`` stored tool results the view does not hold in full.

    ``protected_tool_results`` protects them from truncation, not from removal (as in the original),
    so the notice must not claim them when a level removed some.
    """
    if keep <= 0:
        return 0
    # Only results a view can hold: repair leaves out orphan and duplicate results (not compaction's doing).
    # Nor does it hold a trailing group whose results are still arriving, nor a result stored after its
    # call was answered synthetically in a view (``synthetic``).
    answerable, _report = repair_view(list(stored[: in_flight_start(stored)]), 0, synthetic)
    recent: set[int] = set()
    for message in reversed(answerable):
        if message.get("role") == "tool" and (seq := seq_of(message)) is not None:
            recent.add(seq)
            if len(recent) == keep:
                break
    whole = {seq_of(m) for m in view if m.get("role") == "tool" and not m.get("_truncated")}
    return len(recent - whole)


def _recent_results_line(stats: dict[str, Any]) -> str:
    keep, removed = stats["protected_tool_results"], stats.get(RECENT_RESULTS_REMOVED_KEY, 0)
    if not removed:
        return f"- Last {keep} tool results (full content)"
    return f"- Last {keep} tool results (full content), except {removed} of them removed by compaction"


def _yields_line(stats: dict[str, Any]) -> str:
    """What the last rung gave up (floor.py), when it gave up anything."""
    yielded = yields_text(stats)
    return f"- To fit, protected content yielded: {yielded}\n" if yielded else ""


def _system_line(stats: dict[str, Any]) -> str:
    removed = stats.get(INJECTIONS_REMOVED_KEY, 0)
    if not removed:
        return "- All system messages (your instructions and identity)"
    return f"- All system messages (your instructions and identity), except {removed} older hook reminders removed"


def notice_text(stats: dict[str, Any], verbosity: str, note: str = "") -> str:
    """The notice body for the given stats; "minimal" is one sentence, anything else the summary; ``note``
    (the recall tool's line, when it is mounted) goes last."""
    if note:
        return notice_text(stats, verbosity).replace("\n</system-reminder>", f"\n{note}\n</system-reminder>")
    if verbosity == "minimal":
        return _MINIMAL
    return (
        '<system-reminder source="context-compaction">\n'
        "Context has been compacted to fit within token budget.\n\n"
        "Compaction summary:\n"
        f"- Strategy level: {stats['strategy_level']}/8\n"
        f"- Messages: {stats['before_messages']} → {stats['after_messages']} "
        f"({stats['messages_removed']} removed, {stats['user_messages_stubbed']} stubbed)\n"
        f"- Tool results: {stats['messages_truncated']} truncated\n"
        f"{_evidence_line(stats)}"
        f"- Tokens: {stats['before_tokens']:,} → {stats['after_tokens']:,} "
        f"(target: {stats['target_tokens']:,})\n\n"
        "What was preserved:\n"
        f"{_system_line(stats)}\n"
        "- Last user message (current task)\n"
        f"- Recent messages ({stats['protected_recent']:.0%} of conversation)\n"
        f"{_recent_results_line(stats)}\n\n"
        "What may be affected:\n"
        f"{_affected(stats['strategy_level'], stats['protected_tool_results'])}\n"
        f"{_yields_line(stats)}\n"
        "Note: This compaction is ephemeral (affects only this request). "
        "Full history is preserved in session transcript.\n"
        "</system-reminder>"
    )


def notice_message(stats: dict[str, Any], verbosity: str, note: str = "") -> dict[str, Any]:
    """The ephemeral user-role notice appended at the tail of a compacted view."""
    return {
        "role": "user",
        "content": notice_text(stats, verbosity, note),
        "metadata": {"source": NOTICE_SOURCE, "ephemeral": True},
    }
