"""The last rung: after level 8, the ladder's protections yield in a fixed order, down to the true floor.

Level 8 stops at what the protections keep. When that is still over the rung's goal (the provider's
input limit when it reports a window; with ``protect_in_tokens``, also the budget), the protections
yield one after the other, each only as far as the goal needs:

1. **protected results**: the tool results the ladder kept whole (the last ``protected_tool_results``)
   are truncated as level 6 truncates the others; never the newest tool group's;
2. **recent messages**: the protected recent share shrinks: older messages that are not the user's
   are removed oldest first, a tool group whole with the hook injections that follow it;
3. **user words**: the user messages ``user_words_share`` kept are stubbed (removed when they hold an
   image, which a stub would drop), and the first user message is stubbed as level 8 stubs it;
4. **older user messages** are removed oldest first: stubs, short ones and those kept whole;
5. **the newest tool group**: its results are clipped to head and tail, sharing the room left (a clip an
   earlier boundary made shrinks when the room left for it did; it never grows).

The true floor, which nothing here touches: the instructions, the task (the first user message, stubbed
when long), the turn's prompt and its steering messages, the newest tool group (clipped to
``MIN_CLIP_TOKENS`` a result), the messages that loaded tools, calls still in flight, and what no rewrite
shortens (results of exempt tools, non-text results: counted whole). When even the floor exceeds every
goal nothing valid fits, and the user's words (3, 4) never yield for nothing: towards the provider's input
limit only 1, 2 and 5 do (its goal keeps a margin: a floor a little over it may be under the limit itself),
and one warning says the view may be refused; over the budget alone nothing yields. The warning names the
floor's largest part (:func:`describe_floor`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

from .calls import wrapped_output
from .estimate import IMAGE_BLOCK_TYPES, seq_of
from .instructions import is_instruction
from .ladder import LadderOps, Protections, _Run, kept_whole, newest_group, pinned_indices
from .ledger import is_ledger
from .tool_pairs import tool_groups

logger = logging.getLogger("amplifier_module_context_simple")
Message = dict[str, Any]
FloorPart = tuple[str, int, int]  # what keeps it, tokens, images
MIN_CLIP_TOKENS = 256  # the least of a result the newest group keeps: its head and tail
CLIP_HEADER_TOKENS = 40  # the clip's header and marker, at most
STATS_PREFIX = "floor_yield_"
TYPICAL_OF = 4  # the last results whose mean size a boundary leaves room for (protect_in_tokens)
ROOM_SLACK_TOKENS = 400  # and the call that brings it (an assistant message, a hook's injection)


@dataclass
class Yields:
    """What one boundary's rung yielded, counted per kind (stats keys ``floor_yield_<kind>``)."""

    protected_results: int = 0  # protected tool results truncated
    recent_messages: int = 0  # messages removed from the protected recent share
    user_words: int = 0  # user messages user_words_share kept, stubbed or removed (and the first, stubbed)
    user_messages: int = 0  # older user messages removed
    newest_results: int = 0  # results of the newest tool group clipped

    def stats(self) -> dict[str, int]:
        """The compaction stats keys of the yields that happened (none: no key, so stats stay as before)."""
        return {STATS_PREFIX + kind: count for kind, count in asdict(self).items() if count}


YIELD_KINDS: tuple[str, ...] = tuple(f.name for f in fields(Yields))


def _floor_members(run: _Run) -> set[int]:
    """Indices the rung never removes: the task, the turn's users, the newest group (which holds calls
    in flight), messages that loaded tools, instructions kept in place."""
    messages = run.messages
    first_user, turn = run.user_bounds()
    kept = set(turn) | set(newest_group(messages))
    if first_user is not None:
        kept.add(first_user)
    groups = tool_groups(messages)
    for index in pinned_indices(messages):
        if not _is_reminder_only(messages[index]):
            kept |= set(groups.get(index, (index,)))
    kept |= {i for i, m in enumerate(messages) if is_instruction(m)}
    return kept


def _is_reminder_only(message: Message) -> bool:
    """A persisted hook reminder (pinned by the levels, not part of the floor): it yields with the recent share."""
    metadata = message.get("metadata")
    return isinstance(metadata, dict) and metadata.get("persisted") is True


def floor_tokens(run: _Run, system_tokens: int, clip: bool = True) -> int:
    """The true floor's size: the floor members as they would stand after every yield (``clip`` False:
    every yield but the newest group's clip)."""
    total = system_tokens
    first_user, _turn = run.user_bounds()
    newest = set(newest_group(run.messages))
    for index in _floor_members(run):
        message = run.messages[index]
        if index == first_user and run._stubbable(message):
            total += run.ops.count(run.ops.stub(message))
        elif clip and index in newest and _clippable(run, message):
            total += min(run.ops.count(message), MIN_CLIP_TOKENS + CLIP_HEADER_TOKENS)
        else:
            total += run.ops.count(message)
    return total


def _clippable(run: _Run, message: Message) -> bool:
    """A text result the clip can shorten: whole, or clipped by an earlier boundary (the room left for it
    may have shrunk since: the turn's users grew, or the answer that made it history was removed)."""
    if run.ops.clip is None or message.get("role") != "tool" or not isinstance(message.get("content"), str):
        return False
    if run.ops.exempt is not None and run.ops.exempt(message):
        return False  # the clip leaves an exempt tool's result whole: it is floor as it stands
    return not message.get("_truncated") or seq_of(message) in run.ops.clipped


@dataclass(frozen=True)
class Goals:
    """What the last rung works to, each with the yields it may take (none: that goal is not set)."""

    must: tuple[int, ...] = ()  # every yield, the newest group's clip last: the input limit, the budget
    whole: int | None = None  # every yield but the clip: the view ends under the trigger (protect_in_tokens)
    room: int | None = None  # only what the model has read: room for the next typical result
    limit: int | None = None  # the provider's input limit, of ``must``: past it the view is refused


def floor_settings(
    budget: int, in_tokens: bool, limit: int | None, threshold: float, typical: Callable[[], int]
) -> tuple[Protections, Goals]:
    """How the ladder protects and what the last rung works to: the input limit (``limit``, the largest
    body it takes) when known; with token protections also the budget, a view under the trigger, and room
    under it for the next typical result (``typical()``, read only then)."""
    if not in_tokens:
        return Protections(), Goals(must=() if limit is None else (limit,), limit=limit)
    trigger = math.ceil(budget * threshold) - 1  # the largest view the trigger lets through
    must = (budget,) if limit is None else (limit, budget)
    room = trigger - typical() - ROOM_SLACK_TOKENS
    return Protections(budget), Goals(must=must, whole=min(trigger, budget), room=room, limit=limit)


def yield_floor(run: _Run, system_tokens: int, goals: Goals) -> dict[str, int]:
    """Yield the protections, in order, while ``run`` is over its goals: towards ``room`` only the
    protected results and the recent messages; under ``whole`` (when the floor without the clip fits it)
    every protection but the newest group's; to the smallest ``must`` goal the true floor allows, every
    one. Returns the yields' stats keys, and leaves in ``plan.goal`` the smallest ``must`` goal the view now
    fits (the evidence ledger never takes the view past it; room and the trigger are wishes, the ledger's
    lines are evidence)."""
    yields = Yields()
    floor = floor_tokens(run, system_tokens)
    must = min((goal for goal in goals.must if goal >= floor), default=None)
    whole = goals.whole
    if whole is not None and whole < floor_tokens(run, system_tokens, clip=False):
        whole = None  # out of reach without clipping what the model is about to read
    phases = [
        (goals.room, (_truncate_protected, _shrink_recent, _remove_older_images)),
        (whole, (_truncate_protected, _shrink_recent, _release_user_words, _remove_older_users)),
        (must, (_truncate_protected, _shrink_recent, _release_user_words, _remove_older_users, _clip_newest)),
    ]
    if must is None and goals.limit is not None:
        # Nothing valid fits the provider's limit: the user's words would be given up for nothing, and stay.
        # What is not theirs still yields towards it: the goal keeps a margin, so a floor a little over it
        # may well be under the limit itself (the manager says so, once: log_yields). Over the budget
        # alone nothing yields, as before: a view over it is not refused.
        run.plan.unfit = goals.limit
        phases.append((goals.limit, (_truncate_protected, _shrink_recent, _clip_newest)))
    for goal, steps in phases:
        if goal is None:
            continue
        run.target = goal
        for step in steps:
            if run.fits():
                break
            step(run, yields)
    run.plan.goal = min((goal for goal in goals.must if run.total <= goal), default=None)
    if run.plan.unfit is not None and run.total <= run.plan.unfit:
        run.plan.unfit = None  # the floor's count was an upper bound: the yields fit after all
    return yields.stats()


def _truncate_protected(run: _Run, yields: Yields) -> None:
    newest = set(newest_group(run.messages))
    for index, message in enumerate(run.messages):
        if run.fits():
            return
        if index in newest or message.get("role") != "tool" or message.get("_truncated"):
            continue
        new = run.ops.truncate(message)
        if new is not message:
            run._replace(index, new)
            run._record_truncated(message)
            yields.protected_results += 1


def _shrink_recent(run: _Run, yields: Yields) -> None:
    floor = _floor_members(run)
    groups = tool_groups(run.messages)
    yields.recent_messages += run.remove_groups(floor, groups, run.ops.is_real_user)


def _release_user_words(run: _Run, yields: Yields) -> None:
    first_user, turn = run.user_bounds()
    if first_user is not None and first_user not in turn and run._stubbable(run.messages[first_user]):
        run._stub(first_user)
        yields.user_words += 1
    if run.fits() or run.user_words <= 0:
        return
    doomed: set[int] = set()
    for index in sorted(run.kept_words() - turn - {first_user}):
        if run.fits():
            break
        message = run.messages[index]
        if run._stubbable(message):
            run._stub(index)
        elif kept_whole(message):
            doomed.add(index)
            run.total -= run.ops.count(message)
        else:
            continue
        yields.user_words += 1
    run._drop(doomed)


def _remove_older_images(run: _Run, yields: Yields) -> None:
    """Older user messages holding an image (kept whole, ~1,600 tokens each), oldest first."""
    first_user, turn = run.user_bounds()
    words = run.kept_words() if run.user_words > 0 else set()
    doomed: set[int] = set()
    for index, message in enumerate(run.messages):
        if run.fits():
            break
        if index == first_user or index in turn or not (run.ops.is_real_user(message) and kept_whole(message)):
            continue
        doomed.add(index)
        run.total -= run.ops.count(message)
        yields.user_words += index in words
        yields.user_messages += index not in words
    run._drop(doomed)


def _remove_older_users(run: _Run, yields: Yields) -> None:
    first_user, turn = run.user_bounds()
    doomed: set[int] = set()
    for index, message in enumerate(run.messages):
        if run.fits():
            break
        if index == first_user or index in turn or not run.ops.is_real_user(message):
            continue
        doomed.add(index)
        run.total -= run.ops.count(message)
    yields.user_messages += len(doomed)
    run._drop(doomed)


def _clip_newest(run: _Run, yields: Yields) -> None:
    """Clip the newest group's results to head and tail, each to an equal share of the room left."""
    results = [i for i in newest_group(run.messages) if _clippable(run, run.messages[i])]
    if run.ops.clip is None or not results:
        return
    sizes = {i: run.ops.count(run.messages[i]) for i in results}
    room = run.target - (run.total - sum(sizes.values()))
    for position, index in enumerate(sorted(results, key=sizes.__getitem__)):
        share = room // (len(results) - position)
        message = run.messages[index]
        if sizes[index] > share:
            tokens, new = _clip_to(run, message, share)
            if new is not message:
                run._replace(index, new)
                run._record_clip(message, tokens)
                yields.newest_results += 1
        room -= run.ops.count(run.messages[index])


def _clip_to(run: _Run, message: Message, share: int) -> tuple[int, Message]:
    """The clip of ``message`` that counts at most ``share`` tokens (never under ``MIN_CLIP_TOKENS`` kept),
    and the size it was asked for (the sticky decision). A clip keeps four characters a token asked, while
    the count reads the message (escapes, a wrapper): the size asked follows the message's own rate, and
    shrinks by what the header and markers overshot (or, when the cut would not pay for its header and the
    result stays whole, by twice the header)."""
    assert run.ops.clip is not None
    size = run.ops.count(message)
    wrapped = wrapped_output(message["content"])  # a result object: its output is what is clipped
    rate = len(message["content"] if wrapped is None else wrapped[1]) / (4 * max(1, size))  # per counted token
    asked = max(MIN_CLIP_TOKENS, int((share - CLIP_HEADER_TOKENS) * rate))
    new = run.ops.clip(message, asked)
    for _attempt in range(4):
        over = run.ops.count(new) - share
        if (new is not message and over <= 0) or asked == MIN_CLIP_TOKENS:
            break
        asked = max(MIN_CLIP_TOKENS, asked - 1 - int((2 * CLIP_HEADER_TOKENS if new is message else over) * rate))
        new = run.ops.clip(message, asked)
    return asked, new


# ----- what a view that does not fit holds (the OVER BUDGET warning names its largest part) ------------


@dataclass(frozen=True)
class Protected:
    """What the ladder protected, to tell apart the parts of a view that did not fit."""

    ops: LadderOps
    user_words: int
    protections: Protections
    protected_recent: float
    protected_tool_results: int


def describe_floor(messages: list[Message], system_tokens: int, protected: Protected) -> list[FloorPart]:
    """The parts of a compacted view (``messages`` without its instructions, which are ``system_tokens``),
    largest first: (what keeps them, tokens, images)."""
    run = _Run(list(messages), 0, 0, protected.ops, protected.user_words, protected.protections)
    first_user, turn = run.user_bounds()
    words = run.kept_words() if protected.user_words > 0 else set()
    newest = set(newest_group(messages))
    share, keep = protected.protected_recent, protected.protected_tool_results
    whole = run.protected_results(keep, share) - newest
    recent = run.recent_start(share * 0.3)
    sizes: dict[str, list[int]] = {"the instructions (system messages)": [system_tokens, 0]}
    for index, message in enumerate(messages):
        if is_instruction(message):
            label = "the instructions (system messages)"
        elif index == first_user:
            label = "the task (the first user message)"
        elif index in turn:
            label = "the turn's prompt and steering"
        elif index in words:
            label = "user messages kept by user_words_share"
        elif run.ops.is_real_user(message):
            label = "older user messages"
        elif index in newest:
            label = "the newest tool group"
        elif index in whole:
            label = f"tool results kept whole by protected_tool_results={keep}"
        elif is_ledger(message):
            label = "the evidence ledger"
        elif index >= recent:
            label = f"recent messages kept by protected_recent={share:.0%}"
        else:
            label = "older messages no level removed (tool groups reaching into the recent share, hook reminders)"
        size = sizes.setdefault(label, [0, 0])
        size[0] += run.ops.count(message)
        size[1] += _images(message)
    return sorted(((label, tokens, images) for label, (tokens, images) in sizes.items()), key=lambda p: -p[1])


def _images(message: Message) -> int:
    content = message.get("content")
    if not isinstance(content, list):
        return 0
    return sum(1 for block in content if isinstance(block, dict) and block.get("type") in IMAGE_BLOCK_TYPES)


def floor_text(parts: list[FloorPart], shown: int = 3) -> str:
    """The largest parts in words: "the newest tool group: 10,451 tokens; then ..." (images named)."""
    words = [
        f"{label}: {tokens:,} tokens" + (f" ({images} image{'s' if images > 1 else ''})" if images else "")
        for label, tokens, images in parts[:shown]
        if tokens > 0
    ]
    return "; then ".join(words)


_YIELD_WORDS = {
    "protected_results": "protected tool results truncated",
    "recent_messages": "recent messages removed",
    "user_words": "user messages kept by user_words_share stubbed or removed",
    "user_messages": "older user messages removed",
    "newest_results": "results of the newest tool group clipped",
}


def yields_text(stats: dict[str, int]) -> str:
    """The yields of one boundary in words, in the order they happen."""
    counts = ((stats.get(STATS_PREFIX + kind, 0), words) for kind, words in _YIELD_WORDS.items())
    return ", ".join(f"{count} {words}" for count, words in counts if count)


def typical_result(stored: list[Message], count: Callable[[Message], int], last: int = TYPICAL_OF) -> int:
    """The mean size of the last ``last`` tool results stored (0 with none): what the next one may bring."""
    sizes: list[int] = []
    for index in range(len(stored) - 1, -1, -1):
        if len(sizes) >= last:
            break
        if stored[index].get("role") == "tool":
            sizes.append(count(stored[index]))
    return sum(sizes) // len(sizes) if sizes else 0


def log_yields(stats: dict[str, int], final_tokens: int, forced_by: int | None, unfit: int | None = None) -> None:
    """Say what the last rung gave up: a warning when the provider's input limit (``forced_by``) forced
    it, else (token protections working to the budget or to room) an info line. With ``unfit`` (the goal
    the true floor is over) a warning that nothing valid fits, and that the user's words were kept."""
    goal = f"the provider's input limit of {forced_by:,} tokens" if forced_by is not None else "the budget"
    if unfit is not None:
        logger.warning(
            "context-simple: nothing valid fits %s: what no protection may give up is over the goal of %s "
            "tokens; the user's words are kept and the view (%s tokens) may be refused%s",
            goal,
            f"{unfit:,}",
            f"{final_tokens:,}",
            f"; yielded: {yields_text(stats)}" if stats else "",
        )
        return
    logger.log(
        logging.WARNING if forced_by is not None else logging.INFO,
        "context-simple: the protections yielded to fit %s (view now %s tokens): %s",
        goal,
        f"{final_tokens:,}",
        yields_text(stats),
    )
