"""Replay of every shipped transcript at 20%, 40% and 70% of its estimated size, checking every request.

On every request (one before each assistant message, as an orchestrator makes them): no orphan tool
result and no unanswered call inside the view, every system message present, the last real user
message present and whole, ``_seq`` stripped, the view a new list, the stored history unchanged,
and between boundaries the non-ephemeral view extends the previous one byte for byte.
"""

from __future__ import annotations

import pytest

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.ladder import stub_user_message
from amplifier_module_context_simple.replay import is_real_user_message
from tests.conftest import (
    WORKLOADS,
    InvariantChecker,
    Request,
    by_transcript,
    estimated_size,
    load_transcript,
    replay,
    strip_seq,
)

FRACTIONS = (0.20, 0.40, 0.70)


def test_all_26_transcripts_are_shipped():
    assert len(WORKLOADS) == 26


def assert_first_user_kept(request: Request, ctx: SimpleContextManager) -> None:
    """The first real user message is in every view, whole or as its level-8 stub, never removed."""
    first = next((m for m in ctx.messages if is_real_user_message(m)), None)
    if first is not None:
        whole, stub = strip_seq(first), strip_seq(stub_user_message(first))
        assert whole in request.view or stub in request.view, "the first user message was removed"


@pytest.mark.asyncio
@pytest.mark.parametrize("fraction", FRACTIONS, ids=lambda f: f"{int(f * 100)}pct")
@pytest.mark.parametrize("path", by_transcript(WORKLOADS), ids=lambda p: p.stem)
async def test_replay_invariants(path, fraction):
    messages = load_transcript(path)
    budget = int(estimated_size(messages) * fraction)
    ctx = SimpleContextManager()
    checker = InvariantChecker()

    def after(request: Request, manager: SimpleContextManager) -> None:
        checker.after(request, manager)
        assert_first_user_kept(request, manager)

    requests = await replay(ctx, messages, budget, on_request=after, before_request=checker.before)
    assert checker.checked == len(requests) == sum(m["role"] == "assistant" for m in messages)
    # Not vacuous: every budget below the transcript's size forces at least one compaction.
    assert checker.boundaries >= 1
    # The history is the transcript itself, stamped 0..N-1: compaction never touched it.
    assert [strip_seq(m) for m in ctx.messages] == messages
    assert [m["metadata"]["_seq"] for m in ctx.messages] == list(range(len(messages)))
