"""The 8-level progressive ladder, as a planner over a list of (non-system) messages.

Each level does a little more damage than the one before and the ladder stops as soon as the
view fits the target. It returns new messages and the sequence numbers it decided to truncate,
remove or stub; the manager records those as sticky decisions. Protected, always: the first real user
message (it may be stubbed at level 8, never removed), the current turn's prompt and its steering
messages while they fit the target (:func:`replay.turn_prompt_index`), the most recent
``protected_recent`` fraction of messages, the last ``protected_tool_results`` tool results, the
messages that loaded tools and the newest persisted reminder (:func:`pinned_indices`), and every
tool group as one unit.

With token protections (``protect_in_tokens``, :class:`Protections`) recency is a share of the budget's
tokens instead of a share of the messages, the last ``protected_tool_results`` results are protected only
within that share, and the newest tool group is never removed or truncated by a level (floor.py yields
it last).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field
from typing import Any

from .estimate import seq_of
from .instructions import is_injected_instruction, is_instruction
from .replay import turn_prompt_index
from .sticky import STUB_MIN_CHARS as STUB_MIN_CHARS  # re-exported: moved to sticky.py (issue 38)
from .sticky import apply_decisions as apply_decisions
from .sticky import content_chars, kept_whole
from .sticky import last_results as last_results
from .sticky import protected_tool_indices as protected_tool_indices
from .sticky import stub_user_message as stub_user_message
from .tool_pairs import has_tool_calls, is_hook_injection, is_persisted_reminder, tool_groups

Message = dict[str, Any]


@dataclass(frozen=True)
class LadderOps:
    """What the planner needs from its caller: counting, and the two rewrites."""

    count: Callable[[Message], int]
    truncate: Callable[[Message], Message]  # returns the message itself when it stays whole
    stub: Callable[[Message], Message]
    is_real_user: Callable[[Message], bool]
    # ``_seq`` of the turn's prompt in the stored history (replay.turn_prompt_seq); None: read from the list.
    turn_start: int | None = None
    # The last rung's clip of a result to about ``tokens`` (head and tail); None: nothing is clipped.
    clip: Callable[[Message, int], Message] | None = None
    # ``_seq`` of the results an earlier boundary's last rung clipped: the clip may shrink (never grow).
    clipped: Container[int] = frozenset()
    # A result no rewrite shortens (an exempt tool's): the clip leaves it whole, so the floor counts it whole.
    exempt: Callable[[Message], bool] | None = None


@dataclass(frozen=True)
class Protections:
    """How recency is measured: ``recent_tokens`` None protects a share of the messages (the original's
    rule); a number of tokens (the budget) protects the newest messages within that share of it."""

    recent_tokens: int | None = None


MESSAGES = Protections()


@dataclass
class LadderPlan:
    """The ladder's result: the new list, its exact total, the level reached and the decisions."""

    messages: list[Message]
    total: int
    level: int
    truncated: set[int] = field(default_factory=set)
    removed: set[int] = field(default_factory=set)
    stubbed: set[int] = field(default_factory=set)
    clipped: dict[int, int] = field(default_factory=dict)  # the newest group's results cut to tokens (floor.py)
    yields: dict[str, int] = field(default_factory=dict)  # what the last rung yielded (floor.Yields.stats)
    goal: int | None = None  # the total the last rung worked to (floor.py), when it ran
    unfit: int | None = None  # the smallest goal the true floor is over (floor.py): nothing valid fits it


THINKING_BLOCKS = ("thinking", "redacted_thinking")


def has_thinking(message: Message) -> bool:
    """An assistant turn carrying extended-thinking blocks (their signatures must reach the API intact)."""
    content = message.get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") in THINKING_BLOCKS for b in content)


def _latest_thinking_call(messages: list[Message]) -> int:
    """Index of the latest assistant turn with tool calls when it carries thinking blocks, else -1: the
    API rejects a tool loop whose latest assistant turn lost them, so that group is never removed."""
    for index in range(len(messages) - 1, -1, -1):
        if has_tool_calls(messages[index]):
            return index if has_thinking(messages[index]) else -1
    return -1


# Hosted tool search (OpenAI): the message that loaded tools; removing it unloads them mid-session.
TOOL_SEARCH_KEY = "openai:tool_search_items"


def pinned_indices(messages: list[Message]) -> set[int]:
    """Messages the ladder never removes besides the users' and instructions: every one that loaded
    tools (hosted tool search), and the newest persisted reminder (the state a hook keeps current)."""
    pinned = set()
    for index, message in enumerate(messages):
        metadata = message.get("metadata")
        if isinstance(metadata, dict) and metadata.get(TOOL_SEARCH_KEY):
            pinned.add(index)
    for index in range(len(messages) - 1, -1, -1):
        if is_persisted_reminder(messages[index]):
            pinned.add(index)
            break
    return pinned


def newest_group(messages: list[Message]) -> tuple[int, ...]:
    """Indices of the newest tool group (its calls and results) while the model has not answered it yet,
    or () when there is none: once an assistant message follows it (the turn went on or ended), the model
    has read its results, and they are history like any other group. A hook's injection of the assistant
    role (loop-basic stores a ``tool:post`` hook's inside the group; repair moves it after the results) is
    no answer: the group stays the newest."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") != "assistant" or is_hook_injection(messages[index]):
            continue
        if not has_tool_calls(messages[index]):
            return ()  # the newest assistant message answered whatever came before it
        return tool_groups(messages).get(index, (index,))
    return ()


def _from(message: Message, start: int) -> bool:
    """A stored message at or after ``_seq`` ``start``."""
    seq = seq_of(message)
    return seq is not None and seq >= start


def _injected(message: Message) -> bool:
    return is_hook_injection(message) or is_injected_instruction(message)


class _Run:
    """One ladder pass: the working list, its running exact total and the decisions so far."""

    def __init__(
        self,
        messages: list[Message],
        total: int,
        target: int,
        ops: LadderOps,
        user_words: int = 0,
        protections: Protections = MESSAGES,
    ) -> None:
        self.messages = messages
        self.total = total
        self.target = target
        self.ops = ops
        self.user_words = user_words
        self.protections = protections
        self.plan = LadderPlan(messages, total, 1)

    def recent_start(self, share: float) -> int:
        """Where the protected recent tail starts: the last ``share`` of the messages (the original's rule);
        with token protections, of those only the newest that fit ``share`` of the budget's tokens."""
        n = len(self.messages)
        by_messages = max(0, int(n * (1 - share)))
        if self.protections.recent_tokens is None:
            return by_messages
        left = int(self.protections.recent_tokens * share)
        start = n
        while start > by_messages and (cost := self.ops.count(self.messages[start - 1])) <= left:
            left -= cost
            start -= 1
        return start

    def protected_results(self, keep: int, share: float) -> set[int]:
        """Tool results no wave truncates: the last ``keep`` (the original's rule); with token protections,
        of those only the newest that fit ``share`` of the budget's tokens, and the newest group's always."""
        if self.protections.recent_tokens is None:
            return protected_tool_indices(self.messages, keep)
        newest = {i for i in newest_group(self.messages) if self.messages[i].get("role") == "tool"}
        left = int(self.protections.recent_tokens * share)
        kept: set[int] = set()
        for index in sorted(protected_tool_indices(self.messages, keep), reverse=True):
            cost = self.ops.count(self.messages[index])
            if cost > left:
                break
            left -= cost
            kept.add(index)
        return kept | newest

    def kept_words(self) -> set[int]:
        """The newest real user messages whose tokens fit ``user_words`` together: never stubbed, so the
        user's own words (a correction, a constraint) stay verbatim. Empty when the share is 0."""
        kept: set[int] = set()
        left = self.user_words
        for index in range(len(self.messages) - 1, -1, -1):
            if left <= 0:
                break
            message = self.messages[index]
            if self.ops.is_real_user(message) and not message.get("_stubbed"):
                left -= self.ops.count(message)
                if left >= 0:
                    kept.add(index)
        return kept

    def fits(self) -> bool:
        return self.total <= self.target

    def _replace(self, index: int, new: Message) -> None:
        self.total += self.ops.count(new) - self.ops.count(self.messages[index])
        self.messages[index] = new

    def user_bounds(self) -> tuple[int | None, set[int]]:
        """The first real user message, and the turn's own: its prompt and every user message after it
        (steering messages stored mid-turn); without steering, the last real user message alone."""
        users = [i for i, m in enumerate(self.messages) if self.ops.is_real_user(m)]
        if not users:
            return None, set()
        start = self.ops.turn_start
        if start is None:
            prompt = turn_prompt_index(self.messages, self.ops.is_real_user)
            turn = {i for i in users if prompt is not None and i >= prompt}
        else:
            turn = {i for i in users if _from(self.messages[i], start)} | {users[-1]}
        return users[0], self._turn_within_target(turn, users[-1])

    def _turn_within_target(self, turn: set[int], newest: int) -> set[int]:
        """The turn's user messages while together they fit the target, else the newest alone: a user message
        after a tool round may be a new prompt after a turn that never got its answer (a crash) rather than
        a steer, so an unanswered turn's earlier words (a long paste) cannot stay protected whatever their
        size. ``target`` 0 (describe_floor's run) sets no bound."""
        if len(turn) < 2 or self.target <= 0:
            return turn
        if sum(self.ops.count(self.messages[i]) for i in turn) <= self.target:
            return turn
        return {newest}

    def truncate_wave(self, indices: list[int], protected: set[int]) -> None:
        for index in indices:
            if self.fits():
                return
            if index in protected or index >= len(self.messages):
                continue
            message = self.messages[index]
            if message.get("role") != "tool" or message.get("_truncated"):
                continue
            new = self.ops.truncate(message)
            if new is message:
                continue  # exempt, short or not text
            self._replace(index, new)
            self._record_truncated(message)

    def _record_truncated(self, message: Message) -> None:
        if (seq := seq_of(message)) is not None:
            self.plan.truncated.add(seq)

    def _record_clip(self, message: Message, tokens: int) -> None:
        if (seq := seq_of(message)) is not None:
            self.plan.clipped[seq] = tokens

    def truncate_slice(self, start: float, stop: float | None, protected_count: int, share: float) -> None:
        tools = [i for i, m in enumerate(self.messages) if m.get("role") == "tool"]
        n = len(tools)
        chosen = tools[int(n * start) : (int(n * stop) if stop is not None else n)]
        self.truncate_wave(chosen, self.protected_results(protected_count, share))

    def remove(self, protected_recent: float) -> None:
        """Remove old messages, whole tool groups at a time, then stub intermediate user turns."""
        n = len(self.messages)
        first_user, turn = self.user_bounds()
        protected = set(range(self.recent_start(protected_recent), n)) | {first_user} | turn
        if n and has_tool_calls(self.messages[-1]):
            protected.add(n - 1)  # calls in flight (protected_recent=0): their results would arrive orphaned
        if self.protections.recent_tokens is not None:
            protected |= set(newest_group(self.messages))  # the floor: what the model is about to read
        groups = tool_groups(self.messages)
        protected |= set(groups.get(_latest_thinking_call(self.messages), ()))
        for index in pinned_indices(self.messages):
            protected |= set(groups.get(index, (index,)))
        self.remove_groups(protected, groups, lambda m: self.ops.is_real_user(m) or is_instruction(m))
        if not self.fits():
            self.stub_users(protected_recent)

    def remove_groups(
        self, kept: set[int], groups: Mapping[int, tuple[int, ...]], spare: Callable[[Message], bool]
    ) -> int:
        """Remove the oldest messages outside ``kept`` (and not ``spare``), a whole tool group with its
        injections at a time, until the view fits; the number of messages removed."""
        doomed: set[int] = set()
        for index, message in enumerate(self.messages):
            if self.fits():
                break
            if index in doomed or index in kept or spare(message):
                continue
            members = self._with_injections(groups.get(index, (index,)))
            if any(member in kept for member in members):
                continue
            doomed.update(members)
            self.total -= sum(self.ops.count(self.messages[m]) for m in members)
        self._drop(doomed)
        return len(doomed)

    def _with_injections(self, members: tuple[int, ...]) -> tuple[int, ...]:
        """A tool group and the hook injections that follow it (stored inside it, moved after it by
        repair): they talk about its output, so they go with it."""
        if len(members) < 2:
            return members
        end = members[-1] + 1
        while end < len(self.messages) and _injected(self.messages[end]):
            end += 1
        return (*members, *range(members[-1] + 1, end))

    def _drop(self, doomed: set[int]) -> None:
        for index in doomed:
            if (seq := seq_of(self.messages[index])) is not None:
                self.plan.removed.add(seq)
                self.plan.truncated.discard(seq)
                self.plan.stubbed.discard(seq)
                self.plan.clipped.pop(seq, None)
        self.messages[:] = [m for i, m in enumerate(self.messages) if i not in doomed]

    def _stub(self, index: int) -> None:
        self._replace(index, self.ops.stub(self.messages[index]))
        if (seq := seq_of(self.messages[index])) is not None:
            self.plan.stubbed.add(seq)

    def _stubbable(self, message: Message) -> bool:
        content = message.get("content")
        return (
            self.ops.is_real_user(message)
            and not message.get("_stubbed")
            and isinstance(content, str | list)
            and not kept_whole(message)
            and content_chars(content) > STUB_MIN_CHARS
        )

    def stub_users(self, protected_recent: float) -> None:
        """Stub long user turns that are neither first, last nor recent, oldest first."""
        n = len(self.messages)
        first_user, turn = self.user_bounds()
        boundary = self.recent_start(protected_recent)
        kept = (self.kept_words() if self.user_words > 0 else set()) | turn | {first_user}
        for index in range(min(boundary, n)):
            if self.fits():
                return
            if index not in kept and self._stubbable(self.messages[index]):
                self._stub(index)

    def last_resort(self, protected_recent: float) -> None:
        """Level 8: stub the first user message, then drop old stubs and old user messages that are kept
        whole instead of stubbed (never the first user message, the turn's prompt and what follows it, nor
        the user's kept words)."""
        first_user, turn = self.user_bounds()
        kept = (self.kept_words() if self.user_words > 0 else set()) | turn
        if first_user is not None and first_user not in kept and self._stubbable(self.messages[first_user]):
            self._stub(first_user)
        if self.fits():
            return
        boundary = self.recent_start(protected_recent * 0.3)
        doomed: set[int] = set()
        for index, message in enumerate(self.messages[:boundary]):
            if self.fits():
                break
            whole = index not in kept and self.ops.is_real_user(message) and kept_whole(message)
            if (message.get("_stubbed") or whole) and index != first_user and index not in turn:
                doomed.add(index)
                self.total -= self.ops.count(message)
        self._drop(doomed)


def plan_compaction(
    messages: list[Message],
    system_tokens: int,
    target: int,
    protected_recent: float,
    protected_tool_results: int,
    ops: LadderOps,
    user_words: int = 0,
    protections: Protections = MESSAGES,
    last_rung: Callable[[_Run, int], dict[str, int]] | None = None,
) -> LadderPlan:
    """Run levels 1-8 over ``messages`` (already carrying sticky decisions) until ``target`` fits; the
    newest user messages within ``user_words`` tokens are never stubbed. ``last_rung`` (floor.py), given
    the run and the system tokens after level 8 when it does not fit, lets the protections yield."""
    total = system_tokens + sum(ops.count(m) for m in messages)
    run = _Run(list(messages), total, target, ops, user_words, protections)
    keep, share = protected_tool_results, protected_recent
    steps: list[Callable[[], None]] = [
        lambda: run.truncate_slice(0.0, 0.25, keep, share),
        lambda: run.truncate_slice(0.25, 0.5, keep, share),
        lambda: run.remove(protected_recent),
        lambda: run.truncate_slice(0.5, 0.75, keep, share),
        lambda: run.remove(protected_recent * 0.6),
        lambda: run.truncate_slice(0.0, None, keep, share),
        lambda: run.remove(protected_recent * 0.3),
    ]
    for level, step in enumerate(steps, start=1):
        step()
        run.plan.level = level
        if run.fits() and level < len(steps):
            return _finish(run)
    run.plan.level = 8
    if not run.fits():
        run.last_resort(protected_recent)
    if last_rung is not None and not run.fits():
        run.plan.yields = last_rung(run, system_tokens)
    return _finish(run)


def _finish(run: _Run) -> LadderPlan:
    run.plan.messages = run.messages
    run.plan.total = run.total
    return run.plan
