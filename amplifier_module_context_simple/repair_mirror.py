"""View repair in time proportional to what was appended (the request path's cost, issue 18).

:func:`repair.repair_view` reads everything after the last clean point. Once a history holds one
irregular group (a hook injection stored between a call and its results, as amplifier-core's
loop-basic stores ``tool:post`` injections), every later request would re-read and re-copy the rest
of the session. The mirror keeps the repaired list and the last *settled* point (no tool group open
there, so nothing appended later can change the output before it) and repairs only what follows.
"""

from __future__ import annotations

import logging
from collections.abc import Container
from typing import Any

from .repair import RepairReport, describe_repair, repair_segment, scan_clean
from .tool_pairs import has_tool_calls

Message = dict[str, Any]
logger = logging.getLogger("amplifier_module_context_simple")


def _added(a: RepairReport, b: RepairReport) -> RepairReport:
    return RepairReport(
        a.synthetic_results + b.synthetic_results,
        a.orphans_dropped + b.orphans_dropped,
        a.duplicates_dropped + b.duplicates_dropped,
        a.calls_without_id + b.calls_without_id,
        a.messages_moved + b.messages_moved,
        a.synthetic_calls + b.synthetic_calls,
    )


def _last_group_start(working: list[Message], end: int) -> int:
    """Where the group ending at ``end`` starts: a result appended later (a duplicate) still belongs to
    it, and must be read with it, as the full scan reads it (counted as a duplicate, not an orphan)."""
    index = end
    while index > 0 and working[index - 1].get("role") == "tool":
        index -= 1
    if index > 0 and has_tool_calls(working[index - 1]):
        return index - 1
    return end


class RepairMirror:
    """The repaired form of one append-only working list, extended request by request."""

    def __init__(self) -> None:
        self.reset(None)

    def reset(self, first: Message | None) -> None:
        self._first = first
        self._settled_in = 0  # working[:settled_in] is final and ended with _last_in
        self._last_in: Message | None = None
        self._untouched = True  # while repair changed nothing, the output is the input itself
        self._out: list[Message] = []  # else out[:settled_out] is the repaired working[:settled_in]
        self._settled_out = 0
        self._settled_report = RepairReport()
        self._tail: list[Message] = []  # the last output after the settled point

    def _continues(self, working: list[Message]) -> bool:
        n = self._settled_in
        if not working or working[0] is not self._first or len(working) < n:
            return False
        return n == 0 or working[n - 1] is self._last_in

    def repair(
        self, working: list[Message], shared: bool, synthetic: Container[tuple[int, str]] = ()
    ) -> tuple[list[Message], RepairReport, bool]:
        """(repaired list, report over the whole list, whether the last output changed other than by
        appends). ``shared``: another request still reads the last output, so it is not edited.
        ``synthetic``: the calls earlier views answered synthetically (repair.py); it only grows, by
        the calls of the group this mirror re-reads (its last one), so what it settled holds."""
        if not self._continues(working):
            self.reset(working[0] if working else None)
        start = self._settled_in
        if self._untouched:
            clean, resume = scan_clean(working, start)
            if clean:
                resume = _last_group_start(working, resume)
                self._settle(working, resume, resume, RepairReport(), working[resume:])
                return working, self._settled_report, False
        segment, report, settled = repair_segment(working, start, synthetic)
        total = _added(self._settled_report, report)
        rewritten = len(segment) < len(self._tail) or any(a is not b for a, b in zip(self._tail, segment, strict=False))
        if self._untouched and not report.changed:
            self._settle(working, settled.index, settled.index, settled.report, segment[settled.out_length :])
            return working, total, rewritten
        base = start if self._untouched else self._settled_out  # out[:base] is the repaired working[:start]
        if self._untouched:
            out = working[:start]  # the first change: from here on the mirror owns a list
        elif shared:
            out = self._out[: self._settled_out]
        else:
            out = self._out
            del out[self._settled_out :]
        out.extend(segment)
        self._out, self._untouched = out, False
        tail = segment[settled.out_length :]
        self._settle(working, settled.index, base + settled.out_length, settled.report, tail)
        return out, total, rewritten

    def _settle(
        self, working: list[Message], index: int, out_length: int, report: RepairReport, tail: list[Message]
    ) -> None:
        """Move the settled point to ``working[:index]``, whose repaired form is ``out_length`` long."""
        self._settled_report = _added(self._settled_report, report)
        self._settled_in, self._settled_out = index, out_length
        self._last_in = working[index - 1] if index > 0 else None
        self._tail = tail


def repair_working(
    mirror: RepairMirror,
    working: list[Message],
    shared: bool,
    synthetic: set[tuple[int, str]],
    faults: Any,
    reported: set[tuple[str, int, int, int]],
) -> tuple[list[Message], bool]:
    """The view repaired for the provider, and whether an earlier repaired view changed other than
    by appends; only what was appended since the last settled point is read. ``synthetic`` (the
    history's calls answered by a stand-in) grows; a breakage is counted in ``faults`` and logged once
    (``reported``). Moved from manager.py (issue 38)."""
    repaired, report, rewritten = mirror.repair(working, shared, synthetic)
    synthetic.update(report.synthetic_calls)  # they stand in every later view (repair.py)
    if not report.broken:
        return repaired, rewritten  # unchanged, or only hook messages moved after their group: no fault
    faults["repair_synthetic_results"] += report.synthetic_results
    faults["repair_orphans_dropped"] += report.orphans_dropped
    faults["repair_duplicates_dropped"] += report.duplicates_dropped
    # The same breakage is repaired again on every request as the history grows: log it once.
    key = ("repair", report.synthetic_results, report.orphans_dropped, report.duplicates_dropped)
    if key not in reported:
        reported.add(key)
        logger.warning(
            "context-simple: repaired a broken tool-call history in the view (stored history unchanged): %s",
            describe_repair(working, synthetic),
        )
    return repaired, rewritten
