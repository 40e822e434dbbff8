"""View repair: make a crash-broken history acceptable to a provider, without touching the history.

Providers require every assistant tool call to be answered by the tool messages right after it, and
every tool message to answer a call of that group. A crash can leave an assistant call whose result
never came, or a result whose call is missing. :func:`repair_view` fixes the VIEW only: it inserts a
fixed synthetic result for each unanswered call and leaves out orphan and duplicate results. A message
stored while a group still waits for results (amplifier-core's loop-basic stores a ``tool:post`` hook's
``inject_context`` before the results) is moved to follow the group. It never mutates its input; an
unbroken view comes back as the same list object.

A result stored after its call's group was closed in a view by a synthetic result (a late result) is
left out like an orphan, for every view after: the caller passes the (assistant ``_seq``, call id)
pairs answered synthetically so far (``synthetic``), and the report names the pairs it answered, so
views stay append-only instead of swapping the synthetic result for the real one.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from typing import Any

from .calls import call_id as read_call_id
from .estimate import seq_of
from .tool_pairs import is_hook_injection

# Stable bytes on purpose: the same broken view must always repair to the same request (prompt cache).
SYNTHETIC_RESULT_TEXT = (
    "[context-simple: no result was recorded for this tool call; the session was interrupted before it "
    "completed. Re-run the tool if you still need its output.]"
)


@dataclass(frozen=True)
class RepairReport:
    """What :func:`repair_view` did; ``calls_without_id`` are counted but cannot be repaired.

    ``messages_moved`` counts messages that sat between a call and its results (not a fault);
    ``synthetic_calls`` the (assistant ``_seq``, call id) pairs a synthetic result answered.
    """

    synthetic_results: int = 0
    orphans_dropped: int = 0
    duplicates_dropped: int = 0
    calls_without_id: int = 0
    messages_moved: int = 0
    synthetic_calls: tuple[tuple[int, str], ...] = field(default=(), compare=False)

    @property
    def broken(self) -> bool:
        """True when the history itself was broken (results invented or left out)."""
        return bool(self.synthetic_results or self.orphans_dropped or self.duplicates_dropped)

    @property
    def changed(self) -> bool:
        """True when the repaired view differs from the input view."""
        return self.broken or bool(self.messages_moved)


def tool_call_ids(message: dict[str, Any]) -> list[str | None] | None:
    """Ids of an assistant's tool calls in order (None for a missing/empty id); None if it has none."""
    if message.get("role") != "assistant":
        return None
    calls = message.get("tool_calls")
    if not isinstance(calls, list) or not calls:
        return None
    return [read_call_id(call) for call in calls]  # every shape keys on "id" (calls.py)


def _is_tool_result(message: dict[str, Any]) -> bool:
    return message.get("role") == "tool"


def synthetic_result(call_id: str) -> dict[str, Any]:
    """The stand-in result for a call that was never answered (a fresh dict every time)."""
    return {"role": "tool", "tool_call_id": call_id, "content": SYNTHETIC_RESULT_TEXT}


class _Scan:
    """Single-pass state of :func:`repair_view`: the open tool-call group and the counts so far."""

    def __init__(self, synthetic: Container[tuple[int, str]] = ()) -> None:
        self.synthetic_before = synthetic  # (seq, id) answered synthetically in an earlier view
        self.out: list[dict[str, Any]] = []
        self.expected: dict[str, None] = {}  # ordered set: ids of the open group, in call order
        self.answered: set[str] = set()
        self.seq: int | None = None  # the open group's assistant
        self.stand: set[str] = set()  # its ids whose synthetic result stands: a real one comes too late
        self.made: tuple[tuple[int, str], ...] = ()  # a tuple: every settled point reports it, uncopied
        self.deferred: list[dict[str, Any]] = []  # stored inside the open group: they follow it
        self.overtaken = 0  # how many of them a real result overtook (so they really moved)
        self.synthetic = self.orphans = self.duplicates = self.no_id = self.moved = 0
        self.repairs: list[tuple[str, Any]] = []  # (what was done, call id) in order: describe_repair()

    def open_group(self, ids: list[str | None], seq: int | None) -> None:
        self.expected = dict.fromkeys(i for i in ids if i is not None)
        self.answered = set()
        self.seq = seq
        before = self.synthetic_before
        self.stand = {i for i in self.expected if (seq, i) in before} if seq is not None and before else set()
        self.no_id += ids.count(None)

    def waiting(self) -> bool:
        """The open group still has calls without a result (one whose synthetic result stands has one)."""
        return len(self.answered) + len(self.stand) < len(self.expected)

    def defer(self, message: dict[str, Any]) -> None:
        """Hold a message stored between a call and its results; it follows the group."""
        self.deferred.append(message)

    def close_group(self) -> None:
        """Answer the open group's unanswered ids after its results, then the messages held back."""
        for call_id in self.expected:
            if call_id not in self.answered:
                self.out.append(synthetic_result(call_id))
                self.synthetic += 1
                self.repairs.append((_SYNTHETIC, call_id))
                if self.seq is not None:
                    self.made += ((self.seq, call_id),)
        self.out.extend(self.deferred)
        self.moved += self.overtaken
        self.expected, self.answered, self.deferred, self.overtaken = {}, set(), [], 0

    def tool_result(self, message: dict[str, Any]) -> None:
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or call_id not in self.expected or call_id in self.stand:
            self.orphan(call_id)  # a late result (its synthetic one stands) is left out like an orphan
        elif call_id in self.answered:
            self.duplicates += 1
            self.repairs.append((_DUPLICATE, call_id))
        else:
            self.answered.add(call_id)
            self.out.append(message)
            self.overtaken = len(self.deferred)

    def orphan(self, call_id: Any) -> None:
        self.orphans += 1
        self.repairs.append((_ORPHAN, call_id))


def scan_clean(messages: list[dict[str, Any]], start: int = 0) -> tuple[bool, int]:
    """Fast check for the common case (runs before every request): is ``messages[start:]`` clean?

    ``start`` must be a group boundary of an already-clean prefix. Returns (clean, resume): ``resume``
    is the last group boundary up to which the list is known clean, so the next request of an
    append-only history only scans what was added. Conservative: any irregularity, including a call
    without an id, means "not clean" and sends the view to the full repair scan.
    """
    open_ids: set[str] | None = None
    group_start = boundary = start
    for index in range(start, len(messages)):
        message = messages[index]
        role = message.get("role")
        if role == "tool":
            answered = message.get("tool_call_id")
            if open_ids is None or answered not in open_ids:
                return False, boundary
            open_ids.remove(answered)
            continue
        if open_ids:
            return False, boundary
        open_ids, boundary = None, index
        if role == "assistant" and message.get("tool_calls"):
            calls = message["tool_calls"]
            ids = set(map(read_call_id, calls))
            if len(ids) != len(calls) or None in ids:
                return False, boundary
            open_ids, group_start = ids, index
    if not open_ids:
        return True, len(messages)
    return group_start == len(messages) - 1, group_start


@dataclass(frozen=True)
class Settled:
    """The last point of a scan after which nothing read later can change the output before it:
    input index, output length, and the report's counts up to there."""

    index: int
    out_length: int
    report: RepairReport


def repair_segment(
    messages: list[dict[str, Any]], start: int, synthetic: Container[tuple[int, str]] = ()
) -> tuple[list[dict[str, Any]], RepairReport, Settled]:
    """Repair ``messages[start:]`` as :func:`repair_view` does after a settled ``start``; return the
    repaired segment, its report, and the last settled point inside it (for the next scan to start at)."""
    scan, settled = _scan_segment(messages, start, synthetic)
    return scan.out, _report(scan), settled


def _scan_segment(
    messages: list[dict[str, Any]], start: int, synthetic: Container[tuple[int, str]] = ()
) -> tuple[_Scan, Settled]:
    scan = _Scan(synthetic)
    group_start = -1
    settled = Settled(start, 0, RepairReport())
    for index in range(start, len(messages)):
        message = messages[index]
        if _is_tool_result(message):
            if group_start < 0:
                scan.orphan(message.get("tool_call_id"))
            else:
                scan.tool_result(message)
            continue
        if group_start >= 0:
            if (message.get("role") != "assistant" or is_hook_injection(message)) and scan.waiting():
                scan.defer(message)
                continue
            scan.close_group()
            group_start = -1
        settled = Settled(index, len(scan.out), _report(scan))  # no group open: what came before is final
        ids = tool_call_ids(message)
        if ids is not None:
            scan.open_group(ids, seq_of(message))
            group_start = index
        scan.out.append(message)
    if group_start >= 0 and group_start != len(messages) - 1:
        scan.close_group()
    return scan, settled


_SYNTHETIC, _ORPHAN, _DUPLICATE = "synthetic", "orphan", "duplicate"
# kind -> (what was found, what the view got instead), for describe_repair()
_REPAIR_WORDS = {
    _SYNTHETIC: ("tool calls without a recorded result", "a stand-in result was sent for each"),
    _ORPHAN: ("tool results answering no call before them", "left out"),
    _DUPLICATE: ("repeated results for tool calls", "the repeats left out"),
}
_NAMED_PER_KIND = 5  # ids named per kind of repair; the rest are counted


def describe_repair(messages: list[dict[str, Any]], synthetic: Container[tuple[int, str]] = ()) -> str:
    """What :func:`repair_view` does to ``messages``, in words, naming the call ids (for the log)."""
    scan, _settled = _scan_segment(messages, 0, synthetic)
    parts = []
    for kind, (found, done) in _REPAIR_WORDS.items():
        ids = [call_id for what, call_id in scan.repairs if what == kind]
        if ids:
            named = ", ".join(repr(i) if isinstance(i, str) else "(no tool_call_id)" for i in ids[:_NAMED_PER_KIND])
            more = f" and {len(ids) - _NAMED_PER_KIND} more" if len(ids) > _NAMED_PER_KIND else ""
            parts.append(f"{found}: {named}{more} ({done})")
    return "; ".join(parts) or "nothing to repair"


def _report(scan: _Scan) -> RepairReport:
    return RepairReport(scan.synthetic, scan.orphans, scan.duplicates, scan.no_id, scan.moved, scan.made)


def repair_view(
    messages: list[dict[str, Any]], start: int = 0, synthetic: Container[tuple[int, str]] = ()
) -> tuple[list[dict[str, Any]], RepairReport]:
    """Repair a view in one O(n) pass; return the same list object when nothing needed repair.

    ``start`` is a group boundary up to which the view is known clean (see :func:`scan_clean`):
    only what follows it is read. ``synthetic``: the (assistant ``_seq``, call id) pairs answered
    synthetically in an earlier view; their results stored since are left out.

    Unanswered calls of a non-trailing assistant get synthetic results; orphan and duplicate tool
    results are left out. A non-assistant message stored while the open group still waits for
    results is moved after the group, so the results that follow it still answer their calls. A
    trailing assistant (the last message) keeps its unanswered calls: the orchestrator is about to
    run them.
    """
    if scan_clean(messages, start)[0]:
        return messages, RepairReport()
    segment, report, _settled = repair_segment(messages, start, synthetic)
    return ([*messages[:start], *segment] if report.changed else messages), report


def view_problems(messages: list[dict[str, Any]]) -> list[str]:
    """Every reason a provider would reject this view's tool-call pairing; empty when valid.

    Checked: each assistant tool call (except the last message's) is answered by the contiguous tool
    messages right after it; each such tool message answers a distinct call of its group; every call
    has an id. Written independently of :func:`repair_view` so tests can use it as an oracle.
    """
    problems: list[str] = []
    index = 0
    while index < len(messages):
        ids = tool_call_ids(messages[index])
        if _is_tool_result(messages[index]):
            problems.append(f"message {index}: tool result outside any tool-call group")
            index += 1
            continue
        if ids is None:
            index += 1
            continue
        end = index + 1
        while end < len(messages) and _is_tool_result(messages[end]):
            end += 1
        problems.extend(_group_problems(messages, index, end, ids))
        index = end
    return problems


def _group_problems(messages: list[dict[str, Any]], start: int, end: int, ids: list[str | None]) -> list[str]:
    """Problems of one group: assistant at ``start``, its tool messages at ``start+1 .. end-1``."""
    problems = [f"message {start}: tool call without an id" for i in ids if i is None]
    seen: set[str] = set()
    for position in range(start + 1, end):
        call_id = messages[position].get("tool_call_id")
        if not isinstance(call_id, str) or call_id not in ids:
            problems.append(f"message {position}: tool result {call_id!r} answers no call of its group")
        elif call_id in seen:
            problems.append(f"message {position}: duplicate tool result for {call_id!r}")
        else:
            seen.add(call_id)
    if start != len(messages) - 1:
        for call_id in dict.fromkeys(i for i in ids if i is not None):
            if call_id not in seen:
                problems.append(f"message {start}: tool call {call_id!r} has no result")
    return problems
