"""Append-only ledger segments (issue 20, part 2): a boundary keeps earlier segments byte for byte."""

from __future__ import annotations

import asyncio
import copy
import json

import pytest

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.ledger import is_ledger
from amplifier_module_context_simple.ledger_segments import economize
from tests.conftest import WORKLOADS, Recorder, checked_replay, estimated_size, load_transcript, stamped
from tests.test_evidence import session

SEGMENTS = {"evidence_ledger_share": 0.5, "evidence_ledger_segments": True}


def boundary_views(config: dict, steps: int = 30, budget: int = 2_500) -> tuple[SimpleContextManager, list]:
    """Every view of a long session, with whether it was a boundary (a context:compaction event)."""
    hooks = Recorder()
    ctx = SimpleContextManager(hooks=hooks, **config)
    out: list = []

    async def run() -> None:
        for message in [stamped(m) for m in session(steps)]:
            if message["role"] == "assistant":
                before = hooks.count("context:compaction")
                view = await ctx.get_messages_for_request(token_budget=budget)
                out.append((view, hooks.count("context:compaction") > before))
            await ctx.add_message(message)

    asyncio.run(run())
    return ctx, out


def ledgers(view: list[dict]) -> list[str]:
    return [m["content"] for m in view if is_ledger(m)]


def test_a_boundary_keeps_the_earlier_segments_byte_for_byte_at_their_place():
    ctx, out = boundary_views(SEGMENTS)
    boundaries = [view for view, boundary in out if boundary]
    assert len(boundaries) >= 3
    grew = 0
    for before, after in zip(boundaries, boundaries[1:], strict=False):
        old, new = ledgers(before), ledgers(after)
        if len(new) > len(old):  # a segment was added: the older ones are unchanged, in order
            grew += 1
            assert new[: len(old)] == old
            first = next(i for i, m in enumerate(after) if is_ledger(m))
            assert json.dumps(after[: first + len(old)]) == json.dumps(before[: first + len(old)])
    assert grew >= 2 and len(ledgers(boundaries[-1])) >= 3


def test_the_plain_ledger_rewrites_where_segments_append():
    """The same session with the plain ledger: its one message changes at every boundary."""
    _, out = boundary_views({"evidence_ledger_share": 0.5})
    texts = [ledgers(view) for view, boundary in out if boundary and ledgers(view)]
    assert all(len(t) == 1 for t in texts) and len({t[0] for t in texts}) == len(texts)


def test_segments_survive_snapshot_and_restore_byte_for_byte():
    ctx, _ = boundary_views(SEGMENTS)
    assert len(ctx._ledger_segments) >= 2
    state = json.loads(json.dumps(ctx.snapshot_state()))
    twin = SimpleContextManager(**SEGMENTS)

    async def resume() -> tuple[list, list]:
        await twin.set_messages([{k: v for k, v in m.items()} for m in copy.deepcopy(ctx.messages)])
        twin.restore_state(state)
        return await ctx.get_messages_for_request(token_budget=2_500), await twin.get_messages_for_request(
            token_budget=2_500
        )

    expected, got = asyncio.run(resume())
    assert json.dumps(got) == json.dumps(expected)
    edited = copy.deepcopy(state)
    edited["sticky"]["ledger_segments"][0]["text"] = edited["sticky"]["ledger_segments"][0]["text"].replace(
        "\n</system-reminder>", "\nnever in the history\n</system-reminder>"
    )
    hostile = SimpleContextManager(**SEGMENTS)
    asyncio.run(hostile.set_messages(copy.deepcopy(ctx.messages)))
    with pytest.raises(ValueError, match="ledger"):
        hostile.restore_state(edited)
    assert hostile._ledger_segments == () and hostile._ledger is None


def test_listing_rows_and_hex_only_lines_are_not_spent_on():
    lines = (
        ("-rw-r--r--  1 root root  4096 Jan  1 12:00 setup_cfg.py", frozenset({"setup_cfg.py"}), False),
        ("3f786850e387550fdab836ed7e6dc881de23001b", frozenset({"3f786850e387550fdab836ed7e6dc881de23001b"}), False),
        ("src/pkg/loader.py:42: TypeError: bad shard_count", frozenset({"src/pkg/loader.py"}), True),
        ("def loader_fn_3(shard_count_3): pass", frozenset({"loader_fn_3"}), False),
    )
    assert [line[0] for line in economize(lines)] == [lines[2][0], lines[3][0]]


@pytest.mark.asyncio
@pytest.mark.parametrize("path", WORKLOADS[:8], ids=[p.stem for p in WORKLOADS[:8]])
async def test_shipped_transcripts_keep_every_invariant_with_segments(path):
    messages = load_transcript(path)
    budget = int(estimated_size(messages) * 0.3)
    await checked_replay(SimpleContextManager(preset="evidence", evidence_ledger_segments=True), messages, budget)


async def _checked_session(ctx: SimpleContextManager, messages: list, checker, budget: int = 2_500) -> list:
    """Add ``messages``, a checked request before each assistant message; the (view, boundary) pairs."""
    from tests.conftest import Request

    out = []
    for message in messages:
        if message["role"] == "assistant":
            checker.before(ctx)
            before = ctx._last_compaction_stats
            view = await ctx.get_messages_for_request(token_budget=budget)
            stats = ctx._last_compaction_stats
            boundary = stats is not None and stats is not before
            checker.after(Request(len(out), view, boundary, stats), ctx)
            out.append((view, boundary))
        await ctx.add_message(message)
    return out


SWITCH_CASES = {
    "session": ([stamped(m) for m in session(40)], 2_500, 0.5),
    "django-14500": (
        load_transcript(next(p for p in WORKLOADS if "django-14500" in p.name)),
        None,  # 30% of the transcript's estimate
        0.55,
    ),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("case", list(SWITCH_CASES))
@pytest.mark.parametrize("switch", ["preset = None", "restore_state into the default"])
async def test_segments_leave_with_the_ledger_at_one_boundary_and_never_come_back(case, switch):
    """Review round 4, point 5: with the ledger turned off mid-session every boundary view dropped the
    segments and the next request put them back with no event (5 prefix changes in 25 requests)."""
    from tests.conftest import InvariantChecker

    messages, budget, share = SWITCH_CASES[case]
    budget = budget or int(estimated_size(messages) * 0.3)
    half = int(len(messages) * share)
    ctx, checker = SimpleContextManager(preset="evidence", evidence_ledger_segments=True), InvariantChecker()
    await _checked_session(ctx, messages[:half], checker, budget)
    assert ctx._ledger_segments, "the first part must leave kept segments"
    if switch == "preset = None":
        ctx.preset = None
    else:
        state = json.loads(json.dumps(ctx.snapshot_state()))
        ctx, checker = SimpleContextManager(), InvariantChecker()
        await ctx.set_messages(copy.deepcopy(messages[:half]))
        ctx.restore_state(state)
    out = await _checked_session(ctx, messages[half:], checker, budget)  # append-only between boundaries
    first = next(i for i, (_view, boundary) in enumerate(out) if boundary)
    assert all(not ledgers(view) for view, _boundary in out[first:])
    assert ctx._ledger_segments == () and ctx._ledger is None
