"""The messages a view hands out: deep copies made once per message, that report in-place edits.

Views share their messages between requests (a fresh copy of every message on every request would
cost time in the history's length), so a caller that edits a view must not reach the history nor a
later view. Each wire form is therefore a deep copy of the stored message, without ``_seq``, built
from dict and list subclasses whose mutating methods flag the copy as edited before they act; the
next request replaces a flagged copy with a fresh one. To a caller they are ordinary dicts and lists
(``isinstance``, ``==``, ``repr``, ``json.dumps``, ``Message(**m)``); ``copy``, ``deepcopy`` and
``pickle`` give plain ones. Objects that are neither dicts nor lists (strings, numbers, tuples, models)
are shared: immutable, or not ours to copy.

The stored history is built the same way (:func:`stored_copy`, :class:`HistoryList`), with one guard
per history: an in-place edit of a stored message (a redaction through ``get_messages()``), or a change
of the history list other than an append, flags it, and the manager rebuilds its views from the edited
history on the next request instead of sending the copies it cached.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from .estimate import seq_of, wire_form

Message = dict[str, Any]
_ATOMS = frozenset({str, int, float, bool, type(None)})


class Guard:
    """Shared by every container of one copy; flagged, and queued in ``sink``, on the first edit."""

    __slots__ = ("edited", "sink")

    def __init__(self, sink: list[Guard]) -> None:
        self.edited = False
        self.sink = sink

    def touch(self) -> None:
        if not self.edited:
            self.edited = True
            self.sink.append(self)


def _reporting(method: Callable[..., Any]) -> Callable[..., Any]:
    def edit(self: Any, *args: Any, **kwargs: Any) -> Any:
        guard = getattr(self, "_guard", None)
        if guard is not None:
            guard.touch()
        return method(self, *args, **kwargs)

    edit.__name__ = edit.__qualname__ = method.__name__
    edit.__doc__ = method.__doc__
    return edit


class WireDict(dict):  # type: ignore[type-arg]
    """A dict of a view that reports in-place edits to its :class:`Guard`."""

    __slots__ = ("_guard",)

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return copy.deepcopy(dict(self), memo)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (dict, (dict(self),))


class WireList(list):  # type: ignore[type-arg]
    """A list of a view (content blocks, tool calls) that reports in-place edits to its :class:`Guard`."""

    __slots__ = ("_guard",)

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return copy.deepcopy(list(self), memo)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (list, (list(self),))


for _name in ("__setitem__", "__delitem__", "__ior__", "clear", "pop", "popitem", "setdefault", "update"):
    setattr(WireDict, _name, _reporting(getattr(dict, _name)))
for _name in (
    "__setitem__",
    "__delitem__",
    "__iadd__",
    "__imul__",
    "append",
    "clear",
    "extend",
    "insert",
    "pop",
    "remove",
    "reverse",
    "sort",
):
    setattr(WireList, _name, _reporting(getattr(list, _name)))


def reporting_copy(value: Any, guard: Guard) -> Any:
    """A deep copy of the dicts and lists in ``value``, each reporting edits to ``guard``."""
    if isinstance(value, dict):
        new: Any = WireDict({k: v if type(v) in _ATOMS else reporting_copy(v, guard) for k, v in value.items()})
    elif isinstance(value, list):
        new = WireList([v if type(v) in _ATOMS else reporting_copy(v, guard) for v in value])
    else:
        return value
    new._guard = guard
    return new


def stored_copy(value: Any, guard: Guard) -> Any:
    """A deep copy for the stored history: its dicts and lists report in-place edits to ``guard``; any
    other object is deep-copied (the caller's own objects never reach the history)."""
    if isinstance(value, dict):
        new: Any = WireDict({k: v if type(v) in _ATOMS else stored_copy(v, guard) for k, v in value.items()})
    elif isinstance(value, list):
        new = WireList([v if type(v) in _ATOMS else stored_copy(v, guard) for v in value])
    else:
        return copy.deepcopy(value)
    new._guard = guard
    return new


class HistoryList(WireList):
    """The stored history: appending is what a history does; any other change reports to its guard."""

    __slots__ = ()
    append = list.append
    extend = list.extend
    __iadd__ = list.__iadd__


def history_list(messages: Iterable[Message], guard: Guard) -> HistoryList:
    history = HistoryList(messages)
    history._guard = guard
    return history


def wire_copy(message: Message, sink: list[Guard]) -> Message:
    """The message as sent (``_seq`` stripped), as a reporting deep copy."""
    return reporting_copy(wire_form(message), Guard(sink))


def edited(message: Any) -> bool:
    """True when ``message`` is a reporting copy that a caller has edited in place."""
    guard = getattr(message, "_guard", None)
    return guard is not None and guard.edited


class WireForms:
    """Reporting wire copies of stored messages and of their rewrites, by ``_seq``.

    An entry remembers the message it was copied from, so a rewrite (a new object under the same
    ``_seq``) or an edited copy is copied afresh. Messages without ``_seq`` (the factory's prompt,
    repair's results, notice, replay) are copied on every call.
    """

    def __init__(self) -> None:
        self.sink: list[Guard] = []
        self._stored: dict[int, tuple[Message, Message]] = {}
        self._rewritten: dict[int, tuple[Message, Message]] = {}

    def get(self, message: Message) -> Message:
        seq = seq_of(message)
        if seq is None:
            return wire_copy(message, self.sink)
        slots = self._rewritten if ("_truncated" in message or "_stubbed" in message) else self._stored
        entry = slots.get(seq)
        if entry is not None and entry[0] is message and not entry[1]._guard.edited:  # type: ignore[attr-defined]
            return entry[1]
        wired = wire_copy(message, self.sink)
        slots[seq] = (message, wired)
        return wired

    def view(self, messages: Iterable[Message]) -> list[Message]:
        """Wire copies of ``messages``. Entries the view no longer holds (removed messages, the stored
        form of a truncated one) are dropped once they outnumber it: memory follows the current view,
        not everything ever sent."""
        out = [self.get(m) for m in messages]
        if len(self._stored) + len(self._rewritten) > 2 * len(out) + 64:
            kept = {id(m) for m in out}
            self._stored = {s: e for s, e in self._stored.items() if id(e[1]) in kept}
            self._rewritten = {s: e for s, e in self._rewritten.items() if id(e[1]) in kept}
        return out

    def clear(self) -> None:
        self._stored.clear()
        self._rewritten.clear()
        self.sink.clear()
