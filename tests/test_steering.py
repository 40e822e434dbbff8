"""A turn's own prompt stays in the view until the turn ends, also under steering (issue 28.2).

loop-streaming's ``session.steer(text)`` stores ``{"role": "user", "content": text}`` at the start of the
next iteration, right after the previous tool round's results, so the turn's prompt is no longer the last
user message. The ladder protected only the first and the last real user message: the prompt was removed
(8 requests per 40-turn run measured under loop-streaming).
"""

from __future__ import annotations

import pytest

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.replay import is_real_user_message, turn_prompt_index, turn_prompt_seq
from amplifier_module_context_simple.summary_span import live_messages, protected_bounds
from tests.conftest import WORKLOADS, Request, estimated_size, load_transcript, replay, stamped, strip_seq

PROMPT = "Refactor the loader so that it never reads the same shard twice, and keep every test green please."
STEER = "Also keep the public API of loader.py unchanged while you do it; other teams import it."


def call(k: int) -> dict:
    fn = {"id": f"c{k}", "tool": "read_file", "arguments": {"path": f"src/shard_{k}.py"}}
    return {"role": "assistant", "content": "", "tool_calls": [fn]}


def result(k: int) -> dict:
    return {"role": "tool", "name": "read_file", "tool_call_id": f"c{k}", "content": f"# shard {k}\n" + "x" * 3000}


def steered_turn(rounds: int = 24, steer_after: int = 6) -> list[dict]:
    """An earlier turn, then a turn whose prompt is followed by tool rounds and, mid-turn, a steering message."""
    out = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "Look around the repository first and tell me what you find there."},
        {"role": "assistant", "content": "It is a loader package with shards."},
        {"role": "user", "content": PROMPT},
    ]
    for k in range(rounds):
        out += [call(k), result(k)]
        if k == steer_after:
            out.append({"role": "user", "content": STEER})  # the steer: after a tool result, mid-turn
    return out


def test_the_turns_prompt_is_found_before_its_steering_messages() -> None:
    messages = steered_turn()
    assert messages[turn_prompt_index(messages)]["content"] == PROMPT
    plain = steered_turn()[:-1] + [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "Next."}]
    assert plain[turn_prompt_index(plain)]["content"] == "Next."  # a new turn's prompt follows an answer
    hook = {"role": "system", "content": "lint: ok", "metadata": {"source": "hook"}}
    mid = [*messages, hook, {"role": "user", "content": "and the docs"}]
    assert mid[turn_prompt_index(mid)]["content"] == PROMPT  # a hook's message between changes nothing


@pytest.mark.asyncio
@pytest.mark.parametrize("budget", [3_000, 6_000, 12_000])
async def test_the_prompt_and_the_steer_are_in_every_view_of_the_turn(budget: int) -> None:
    ctx = SimpleContextManager()
    seen = 0

    def check(request: Request, ctx: SimpleContextManager) -> None:
        nonlocal seen
        stored = [m for m in ctx.messages if is_real_user_message(m)]
        for message in stored[1:]:  # the turn's prompt, and the steer once it is stored
            assert strip_seq(message) in request.view, f"{message['content'][:30]!r} missing at {request.index}"
        seen += request.boundary

    await replay(ctx, [stamped(m) for m in steered_turn()], budget, on_request=check)
    assert seen and ctx._removed_seqs  # the ladder really removed messages around them


def with_steering(messages: list[dict]) -> tuple[list[dict], list[str]]:
    """A shipped transcript as a steered host stores it: after every 7th tool result that ends a tool round,
    a steering message (each distinct)."""
    out, steers, results = [], [], 0
    for index, message in enumerate(messages):
        out.append(message)
        following = messages[index + 1] if index + 1 < len(messages) else None
        if message["role"] == "tool" and (following is None or following["role"] == "assistant"):
            results += 1
            if results % 7 == 0:
                steers.append(f"Steer {results}: keep going, and note what changed in each file you touch.")
                out.append(stamped({"role": "user", "content": steers[-1]}))
    return out, steers


@pytest.mark.asyncio
@pytest.mark.parametrize("path", WORKLOADS, ids=[p.stem for p in WORKLOADS])
async def test_under_steering_every_view_keeps_its_turns_prompt(path) -> None:
    """Every shipped transcript, steered, at 30% of its size: on every request the prompt of the turn under
    way (the last real user message before its steering messages) is in the view, whole."""
    messages, _steers = with_steering(load_transcript(path))
    ctx = SimpleContextManager()

    def check(request: Request, ctx: SimpleContextManager) -> None:
        prompt = turn_prompt_index(ctx.messages)
        if prompt is not None:
            assert strip_seq(ctx.messages[prompt]) in request.view, f"the turn's prompt is missing at {request.index}"

    await replay(ctx, messages, int(estimated_size(messages) * 0.30), on_request=check)


def test_a_summary_never_absorbs_the_turns_prompt_under_steering() -> None:
    """The summary's span ends before the prompt, read in the stored history: with the tool results between
    the prompt and the steer removed, the live list alone would take the steer for the prompt."""
    stored = [{**m, "metadata": {"_seq": seq}} for seq, m in enumerate(steered_turn())]
    prompt = next(seq for seq, m in enumerate(stored) if m["content"] == PROMPT)
    removed = {seq for seq, m in enumerate(stored) if prompt < seq < prompt + 15}  # the 7 rounds before the steer
    live = live_messages(stored, removed)
    start, boundary = protected_bounds(live, 0.0, turn_prompt_seq(stored))
    assert live[boundary]["content"] == PROMPT and start <= boundary


def test_a_summary_never_absorbs_the_steering_messages_when_the_first_user_message_is_the_prompt() -> None:
    """The span starts after the first user message; when that message is the turn's prompt, the span must
    still end before the steering messages that follow it (found by the summary property test)."""
    stored = [{**m, "metadata": {"_seq": seq}} for seq, m in enumerate(steered_turn()[3:])]  # no earlier turn
    live = live_messages(stored, set())
    start, boundary = protected_bounds(live, 0.0, turn_prompt_seq(stored))
    steer = next(i for i, m in enumerate(live) if m["content"] == STEER)
    assert live[start - 1]["content"] == PROMPT and start <= boundary <= steer
