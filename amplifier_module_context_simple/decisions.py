"""Every decision about one history, as one object (architecture.md: "Decisions as one object per history").

The sticky sets, the evidence ledger, the level, the meter's anchor, the summary state and the last
compaction stats describe one history. ``set_messages()``, ``clear()``, ``restore_state()`` (and an
in-place edit of a stored message) replace the whole object, never its fields one by one, so a
request that started on an older history can tell: it notes the object it started with and, after
each await, starts again on the current history when the object was replaced (manager.py). Its
writes therefore never land in another history's decisions.

The manager keeps the private names callers of the original rely on (``_removed_seqs``,
``_last_compaction_stats``, ...; upstream-behaviour.md section 15) as attributes that read and write
the current object (:class:`DecisionAttribute`).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")


@dataclass(eq=False)
class Decisions:
    """The view-shaping state of one history; a fresh one holds no decision."""

    # sticky: what the ladder decided, re-applied with the same bytes on every request
    _removed_seqs: set[int] = field(default_factory=set)
    _truncated_seqs: set[int] = field(default_factory=set)
    _stubbed_seqs: set[int] = field(default_factory=set)
    _clipped_seqs: dict[int, int] = field(default_factory=dict)  # the last rung's clips: _seq -> tokens (floor.py)
    _ledger: tuple[int, str, int] | None = None  # (anchor seq, text, removals covered): evidence.py
    _ledger_segments: tuple[tuple[int, str, int, int], ...] = ()  # kept segments: ledger_segments.py
    _sticky_level: int = 0
    _hoist_limit: int | None = None  # instructions stored from this _seq on stay in place
    # (assistant _seq, call id) answered by view repair's synthetic result in a view: a result stored
    # later for that call is left out (repair.py), so views stay append-only and valid
    _synthetic_calls: set[tuple[int, str]] = field(default_factory=set)
    _last_compaction_stats: dict[str, Any] | None = None
    _last_replayed_boundary: tuple[int, int] | None = None
    _clear_at_least_skips: int = 0
    # the meter's anchor on this history
    _anchor_seq: int | None = None
    _anchor_estimate: int | None = None
    _last_sent_estimate: int | None = None
    _last_hybrid_tokens: int | None = None
    _last_hybrid_kind: str | None = None
    _last_hybrid_anchored: int | None = None
    _provenance_refusals: int = 0
    _provenance_overrides: int = 0
    _anchor_floor_fires: int = 0
    # the summary strategy's decisions (a running call is the manager's: it is cancelled on replace)
    _pending_summary: dict[str, Any] | None = None
    _summarization_failures: int = 0
    _summary_absorbed_count: int = 0
    _summary_armed: bool = True
    _summary_cooldown_left: int = 0

    # ----- the sticky sets (the manager's ``_record_removed`` and clear-at-least's rollback use these) -----

    def has_sticky(self) -> bool:
        return bool(self._removed_seqs or self._truncated_seqs or self._stubbed_seqs or self._clipped_seqs)

    def record_removed(self, seq: int) -> None:
        """A removal supersedes every other decision about that message."""
        self._removed_seqs.add(seq)
        self._truncated_seqs.discard(seq)
        self._stubbed_seqs.discard(seq)
        self._clipped_seqs.pop(seq, None)

    def sticky_snapshot(self) -> Sticky:
        sets = (self._removed_seqs, self._truncated_seqs, self._stubbed_seqs)
        return Sticky(*map(frozenset, sets), tuple(sorted(self._clipped_seqs.items())))

    def restore_sticky(self, sticky: Sticky) -> None:
        self._removed_seqs, self._truncated_seqs, self._stubbed_seqs = map(set, sticky[:3])
        self._clipped_seqs = dict(sticky.clipped)


class Sticky(NamedTuple):
    """The sticky sets at one moment (clear-at-least rolls a refused escalation back to them)."""

    removed: frozenset[int]
    truncated: frozenset[int]
    stubbed: frozenset[int]
    clipped: tuple[tuple[int, int], ...] = ()


NAMES: tuple[str, ...] = tuple(f.name for f in fields(Decisions))


class DecisionAttribute:
    """A manager attribute that lives on the manager's current :class:`Decisions` (``_decisions``)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, manager: Any, owner: type | None = None) -> Any:
        if manager is None:
            return self
        return getattr(manager.__dict__["_decisions"], self.name)

    def __set__(self, manager: Any, value: Any) -> None:
        setattr(manager.__dict__["_decisions"], self.name, value)


def install(cls: type) -> type:
    """Give ``cls`` every decision as an attribute of its current :class:`Decisions`."""
    for name in NAMES:
        setattr(cls, name, DecisionAttribute(name))
    return cls


class HistoryReplaced(Exception):  # noqa: N818 - a signal to start again, not an error
    """Raised inside a request when the history was replaced (``set_messages``, ``clear``,
    ``restore_state``, an in-place edit) while it awaited: nothing it decided landed in the new
    history's :class:`Decisions`, and :func:`restarts_when_replaced` builds the view again."""


def restarts_when_replaced(attempts: int) -> Callable[[Callable[..., Awaitable[T]]], Callable[..., Awaitable[T]]]:
    """Run the wrapped request again on the current history when it raised :class:`HistoryReplaced`;
    ``attempts`` times in a row is a host replacing the history from a hook on every request."""

    def wrap(request: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
        @functools.wraps(request)
        async def again(*args: Any, **kwargs: Any) -> T:
            for _attempt in range(attempts):
                try:
                    return await request(*args, **kwargs)
                except HistoryReplaced:
                    continue
            raise RuntimeError(
                "context-simple: the history was replaced (set_messages, clear, restore_state or an in-place "
                f"edit) while each of {attempts} attempts to build a view awaited a hook or the system prompt "
                "factory"
            )

        return again

    return wrap
