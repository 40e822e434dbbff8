"""The last view, kept so that a request between compaction boundaries costs what was appended.

Between boundaries a view is, by design, the previous view plus the messages stored since. The full
rebuild (``manager.get_messages_for_request``) walks the whole history; this cache keeps the last
view's body (the view before its tail of replay and notice), the body's wire copies and its token
total, and extends them by the appended messages: time in proportion to what was appended, plus the
copy of the list handed out. The tail is built as the full rebuild builds it, on the extended body.

It extends only what it can show unchanged, and otherwise returns None and the full rebuild runs:

* the previous request was recorded: a full rebuild whose decisions did not change during it (not a
  boundary, no clear-at-least refusal), or an extension; the progressive strategy (the summary
  strategy swaps messages in, so it always rebuilds);
* the same :class:`Key`: the decisions object (decisions.py), every sticky decision set (any attribute
  of the manager or its decisions named ``*_seqs``, so a new kind of decision is covered when it
  follows that naming) by identity and size, the sticky level,
  the last compaction stats and pending summary by identity, the history list, the count cache and
  every configuration attribute (``config.DEFAULTS``) by value;
* the same path (compacted or not), and a working list that view repair did not rewrite except at its
  end (repair_mirror.py) and that grew by appends only: same first message (the factory's prompt is
  one object while its text is the same), same message at the old end;
* appended messages that carry a ``_seq`` and no decision, and, in a compacted view, no instruction
  that would lead it (instructions.py: one stored after the last boundary stays in place).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from .config import COMPACTION_STRATEGY_PROGRESSIVE, DEFAULTS
from .estimate import seq_of, wire_form
from .instructions import hoisted_here, is_instruction
from .state import FIELDS
from .wire_copy import WireForms, edited

Message = dict[str, Any]


class Clipper(Protocol):
    """The view copy of a stored message under the per-result byte cap (``limit`` None: no cap)."""

    limit: int | None

    def apply(self, message: Message) -> Message: ...


@dataclass(frozen=True)
class Key:
    """What a view depends on besides the history's appends: objects by identity, values by ``==``."""

    objects: tuple[Any, ...]
    values: tuple[Any, ...]
    decision_sets: tuple[Any, ...]

    def same(self, other: Key) -> bool:
        return (
            len(self.objects) == len(other.objects)
            and all(map(operator.is_, self.objects, other.objects))
            and self.values == other.values
        )


class ViewInputs(NamedTuple):
    """What a view depends on besides the history's appends, as the manager hands it over (nothing here
    reads the manager): its own attributes (a decision set a caller adds, named ``*_seqs``, counts), the
    history's decisions, the history list, the count cache, the prompt factory and every configuration
    value (``config.DEFAULTS``' keys, in order)."""

    own: dict[str, Any]
    decisions: Any
    messages: list[Message]
    counts: Any
    prompt_factory: Any
    config: tuple[Any, ...]


CONFIG_KEYS = tuple(DEFAULTS)
# Every sticky decision a snapshot saves (state.FIELDS, group "sticky"), compared by identity: a new kind
# of decision (the evidence ledger) is covered once it is listed there.
_STICKY = tuple(field.attribute for field in FIELDS if field.group == "sticky")
_MUTABLE = (dict, list, set)


class _KeyReader:
    """Reads a manager's :class:`Key`; the names of the ``*_seqs`` sets (of the manager and of its
    decisions, decisions.py) are re-read when their attributes change."""

    def __init__(self) -> None:
        self._names: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # of the manager, of its decisions
        self._attributes = (-1, -1)

    def __call__(self, inputs: ViewInputs) -> Key:
        mine, decided = inputs.own, vars(inputs.decisions)  # the decisions' fields read directly
        sizes = (len(mine), len(decided))
        if sizes != self._attributes:
            self._attributes = sizes
            self._names = (_named_seqs(mine), _named_seqs(decided))
        sets = tuple(
            s
            for owner, names in zip((mine, decided), self._names, strict=True)
            for k in names
            if isinstance(s := owner.get(k), set | frozenset | dict)
        )
        config = inputs.config
        objects = (
            inputs.decisions,  # replaced with the history (set_messages, clear, restore_state)
            *map(decided.get, _STICKY),
            inputs.messages,
            inputs.counts,
            decided["_last_compaction_stats"],
            decided["_pending_summary"],
            inputs.prompt_factory,
            *sets,
        )
        values = (
            decided["_sticky_level"],
            decided["_summary_absorbed_count"],
            tuple(len(s) for s in sets),
            config,
            tuple(repr(v) for v in config if type(v) in _MUTABLE),  # an in-place edit of a dict or list knob
        )
        return Key(objects, values, sets)


def _named_seqs(attributes: dict[str, Any]) -> tuple[str, ...]:
    return tuple(k for k in attributes if k.endswith("_seqs"))


@dataclass
class _Body:
    """The recorded view body and what the next request checks before extending it."""

    key: Key
    compact: bool
    first: Message
    length: int  # of the working list it was built from
    last: Message
    base: list[Message]
    wire: list[Message]
    total: int


class ViewCache:
    """The incremental path of one manager; ``enabled = False`` gives the full rebuild on every request."""

    def __init__(self) -> None:
        self.enabled = True
        self.forms = WireForms()
        self.key = _KeyReader()
        self.sent_estimate = 0  # the token estimate of the last extended view (the meter's anchor estimate)
        self._prompt: Message | None = None
        self.invalidate()

    def invalidate(self) -> None:
        """Forget the last view (``set_messages``, ``clear``, ``restore_state``): the next request rebuilds."""
        self._body: _Body | None = None
        self._pending: tuple[list[Message], bool, Key] | None = None
        self._base: tuple[list[Message], int] | None = None
        self._mirror: tuple[Any, int, Any, Any, int | None, list[Message]] = (None, 0, None, None, None, [])
        self._open = 0  # requests that received the working list and have not returned (a raise leaks one)
        self._request: tuple[list[Message], bool] | None = None
        self.forms.clear()

    # ----- the working list ------------------------------------------------------------------------

    def working(
        self, messages: list[Message], prompt: str | None, keep: Callable[[Message], bool], clip: Clipper
    ) -> list[Message]:
        """The list a request starts from: the history, or with a factory's ``prompt`` that prompt, then the
        messages ``keep`` accepts, each as ``clip`` shows it (a tool result over the byte cap: ingress.py).
        Kept between requests and extended by appends; read-only. While another request that received it
        is still running (suspended in a hook), a new list is made instead."""
        if not self.enabled:
            kept = messages if prompt is None else [m for m in messages if keep(m)]
            head = [] if prompt is None else [{"role": "system", "content": prompt}]
            return [*head, *(map(clip.apply, kept) if clip.limit is not None else kept)]
        head = None if prompt is None else self._prompt_message(prompt)
        source, length, last, head_was, limit, mirror = self._mirror
        grown = source is messages and length <= len(messages) and (not length or messages[length - 1] is last)
        if not grown or head is not head_was or limit != clip.limit:
            length, mirror = 0, ([] if head is None else [head])
        elif self._open:
            mirror = list(mirror)  # never change a list a running request reads
        new = messages[length:]
        new = new if head is None else [m for m in new if keep(m)]
        mirror += new if clip.limit is None else map(clip.apply, new)
        self._mirror = (messages, len(messages), messages[-1] if messages else None, head, clip.limit, mirror)
        self._open += 1
        return mirror

    def _prompt_message(self, prompt: str) -> Message:
        """The factory prompt as a message: the same object while the text is the same."""
        if self._prompt is None or self._prompt["content"] != prompt:
            self._prompt = {"role": "system", "content": prompt}
        return self._prompt

    def note_repair(self, repaired: list[Message], rewritten: bool) -> list[Message]:
        """Remember this request's working list and whether view repair rewrote an earlier one other
        than by appends (then the last view cannot be extended); returns ``repaired``."""
        self._request = (repaired, rewritten)
        return repaired

    def appended_only(self, working: list[Message]) -> bool:
        """View repair rewrote nothing of the last working list before its end in this request's
        ``working`` (a reader of the list may then resume where it stopped, checking identities)."""
        return self._request is not None and self._request[0] is working and not self._request[1]

    def shared(self) -> bool:
        """Another request received a working list and has not returned (it may still read it)."""
        return self._open > 1

    # ----- one request -------------------------------------------------------------------------------

    def extend(
        self,
        strategy: str,
        working: list[Message],
        budget: int,
        compact: bool,
        escalate: bool,
        inputs: Callable[[], ViewInputs],
        boundary: Callable[[int, int, bool], bool],
        tail: Callable[[list[Message], int], Any],
    ) -> list[Message] | None:
        """The view extended from the last one, or None when the full rebuild must run (and record).
        ``boundary(total, budget, escalate)``: the compacting path would run the ladder at this total;
        ``tail(base, budget)`` appends replay and notice to ``base`` (the manager's own code). The
        estimate of the view handed out is left in ``sent_estimate``."""
        # Requests may interleave (a suspended request, another one meanwhile): every piece of
        # per-request state is tied to its working list, and anything that does not match is dropped.
        request, self._request, self._pending, self._base = self._request, None, None, None
        body, self._body = self._body, None  # put back only once extended
        if not self.enabled or strategy != COMPACTION_STRATEGY_PROGRESSIVE:
            return None
        if request is None or request[0] is not working or request[1] or not working:
            return None  # not this request's list, or repaired: unsure
        now = inputs()  # read only once the checks above passed
        key = self.key(now)
        self._pending = (working, compact, key)
        if body is None or body.compact != compact or not body.key.same(key):
            return None
        limit = now.decisions._hoist_limit
        appended = _appended(
            body, working, compact, key.decision_sets, lambda m: is_instruction(m) and hoisted_here(m, limit)
        )
        if appended is None:
            return None
        counts = now.counts
        total = body.total + sum(counts.count(m) for m in appended)
        if compact and boundary(total, budget, escalate):
            return None  # a boundary: the ladder runs in the full rebuild (the input limit: limit.py)
        self._refresh(body)
        body.base += appended
        body.wire += [self.forms.get(m) for m in appended]
        body.total, body.length, body.last = total, len(working), working[-1]
        tail = _tail(tail, body.base, budget) if compact else []
        self.sent_estimate = total + counts.total(tail)
        self._body, self._pending = body, None
        self._open = max(0, self._open - 1)
        return [*body.wire, *(self.forms.get(m) for m in tail)]

    def note_base(self, working: list[Message], compacted: list[Message]) -> None:
        """The full rebuild's compacted body, before replay and notice are appended to it."""
        if self._pending is not None and self._pending[0] is working:
            self._base = (compacted, len(compacted))
        else:
            self._pending = None  # another request ran meanwhile

    def finalize(self, view: list[Message], refused: bool, inputs: Callable[[], ViewInputs]) -> list[Message]:
        """The full rebuild's wire view; records its body when nothing decision-bearing changed (not after a
        clear-at-least refusal, ``refused``); ``inputs()`` reads the key again."""
        if not self.enabled:
            return [wire_form(m) for m in view]
        self._open = max(0, self._open - 1)
        wire = self.forms.view(view)
        if self._body is None:
            self.forms.sink.clear()  # every edited copy this view held was just replaced; no body to refresh
        pending, base, self._pending, self._base = self._pending, self._base, None, None
        if pending is None:
            return wire
        working, compact, key = pending
        if compact:
            if base is None or base[0] is not view:
                return wire
            base_len = base[1]
        elif view is working:
            base_len = len(view)
        else:
            return wire
        if refused:
            return wire
        now = inputs()
        if not key.same(self.key(now)):
            return wire  # a boundary: the next request rebuilds once more, then extends
        counts = now.counts
        total = counts.total(view) - counts.total(view[base_len:])
        self._body = _Body(key, compact, working[0], len(working), working[-1], view[:base_len], wire[:base_len], total)
        return wire

    def _refresh(self, body: _Body) -> None:
        """Replace the body's copies that a caller edited in place since they were handed out."""
        if not self.forms.sink:
            return
        for index, message in enumerate(body.wire):
            if edited(message):
                body.wire[index] = self.forms.get(body.base[index])
        self.forms.sink.clear()


def _appended(
    body: _Body, working: list[Message], compact: bool, sets: tuple[Any, ...], hoisted: Callable[[Message], bool]
) -> list[Message] | None:
    """The messages appended to the recorded working list, or None when it did not grow by appends."""
    n = body.length
    if len(working) < n or working[0] is not body.first or working[n - 1] is not body.last:
        return None
    appended = working[n:]
    for message in appended:
        seq = seq_of(message)
        if seq is None or (compact and hoisted(message)) or any(seq in s for s in sets):
            return None
    return appended


def _tail(append: Callable[[list[Message], int], Any], base: list[Message], budget: int) -> list[Message]:
    """Replay and notice, appended by the manager's own code to the body, then taken off it again."""
    start = len(base)
    try:
        append(base, budget)
        return base[start:]
    finally:
        del base[start:]
