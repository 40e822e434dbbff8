"""Shape invariance (issue 28.4): the same session stored in any call shape compacts the same way.

Each shipped transcript (OpenAI shape) is rewritten into the shapes hosts store (calls.py lists them), and
replayed under a counter that reads calls through calls.py (``content``) with the evidence ledger on. Every
request must make the same compaction decisions (removed, truncated and stubbed ``_seq``), hold the same
ledger lines and end on the same notice as the OpenAI replay: what differs is the shape itself.

Wrapped results (loop-streaming on amplifier-core 2.0.x stores the JSON of the whole result object) are
larger on the wire, so under a real counter they compact at other points: that is the shape itself. Sized by
what they read through (``through``, a counter for this test only), they must compact exactly as plain
results do, with the same ledger lines and notice: everything but their size reads through calls.py.

Each transcript is replayed with `context_recall` traffic added (a recall call, beside a sentence of the
agent's, and its result after every ``RECALL_EVERY``-th turn of tool results), with the tool mounted, and
at every request the newest recall's query is asked again: the answer must be the same in every shape
(labels name the call with its arguments decoded, wrapped results read as their output) and must never
show the recall traffic itself.

To add an observation, add a function ``(ctx, view) -> comparable value`` to ``OBSERVERS``: every
variant's value must equal the OpenAI replay's, request by request.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from amplifier_core.models import ToolResult

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.calls import arguments_value, message_calls, unwrap_result
from amplifier_module_context_simple.config import DEFAULTS
from amplifier_module_context_simple.evidence_text import distinctive_tokens
from amplifier_module_context_simple.ledger import is_ledger, ledger_lines
from amplifier_module_context_simple.recall import MessageTexts, is_recall_call, parse, render, search, view_gaps
from amplifier_module_context_simple.recall_text import TOOL_NAME
from amplifier_module_context_simple.token_counter import CONTENT_COUNTER
from tests.conftest import WORKLOADS, by_transcript, estimated_size, load_transcript, replay

Message = dict[str, Any]
CONFIG = {
    "preset": "evidence",
    "token_counter": "content",
    "compaction_notice_verbosity": DEFAULTS["compaction_notice_verbosity"],  # the notice with its figures
}
FRACTION = 0.30
RECALL_EVERY = 4  # turns of tool results between two recalls added to a transcript
RECALL_CHARS = 8_000  # the tool's output bound


def _decoded(call: dict[str, Any]) -> tuple[str, str, Any]:
    function = call["function"]
    return call["id"], function["name"], json.loads(function["arguments"])


def _shaped(make: Callable[[str, str, Any], dict[str, Any]]) -> Callable[[Message], Message]:
    def rewrite(message: Message) -> Message:
        if not message.get("tool_calls"):
            return message
        return {**message, "tool_calls": [make(*_decoded(call)) for call in message["tool_calls"]]}

    return rewrite


def _host(message: Message) -> Message:
    """loop-streaming's assistant message: the provider's content blocks (text, then each call as a
    ``tool_call`` block) beside the orchestrators' ``tool_calls``."""
    if not message.get("tool_calls"):
        return message
    calls = [_decoded(call) for call in message["tool_calls"]]
    text = message.get("content")
    blocks = [{"type": "text", "text": text}] if text else []
    blocks += [{"type": "tool_call", "id": i, "name": n, "input": a} for i, n, a in calls]
    return {**message, "content": blocks, "tool_calls": [{"id": i, "tool": n, "arguments": a} for i, n, a in calls]}


SHAPES: dict[str, Callable[[Message], Message]] = {
    "orchestrator": _shaped(lambda i, n, a: {"id": i, "tool": n, "arguments": a}),
    "toolcall": _shaped(lambda i, n, a: {"id": i, "name": n, "arguments": a}),
    "anthropic": _shaped(lambda i, n, a: {"type": "tool_use", "id": i, "name": n, "input": a}),
    "block": _shaped(lambda i, n, a: {"type": "tool_call", "id": i, "name": n, "input": a}),
    "host": _host,
}


def _wrapped(message: Message) -> Message:
    """A result as loop-streaming stores it: ``json.dumps`` of the whole ``ToolResult.model_dump()``."""
    if message.get("role") != "tool":
        return message
    return {**message, "content": json.dumps(ToolResult(success=True, output=message["content"]).model_dump())}


def through(message: Message) -> int:
    """The ``content`` counter over a result's output as calls.py reads it (a wrapped object read through)."""
    content = message.get("content")
    if message.get("role") == "tool" and isinstance(content, str) and (output := unwrap_result(content)) is not None:
        message = {**message, "content": output}
    return CONTENT_COUNTER(message)


WRAPPED: dict[str, Callable[[Message], Message]] = {
    "wrapped": _wrapped,
    "host+wrapped": lambda message: _wrapped(_host(message)),
}


def _decisions(ctx: SimpleContextManager, view: list[Message]) -> tuple[Any, ...]:
    return tuple(sorted(getattr(ctx, name)) for name in ("_removed_seqs", "_truncated_seqs", "_stubbed_seqs"))


def _ledger(ctx: SimpleContextManager, view: list[Message]) -> list[list[str] | None]:
    return [ledger_lines(m["content"]) for m in view if is_ledger(m)]


def _notice(ctx: SimpleContextManager, view: list[Message]) -> str | None:
    last = view[-1] if view else {}
    return last["content"] if (last.get("metadata") or {}).get("source") == "context-compaction" else None


def with_recalls(messages: list[Message]) -> list[Message]:
    """The transcript (OpenAI shape) with a recall after the 2nd turn of tool results and every
    ``RECALL_EVERY``-th after it:
    an assistant message saying a sentence and calling context_recall for two words of the last result's
    first line holding two, then a result quoting that line (as the tool would)."""
    out: list[Message] = []
    turns = 0
    for index, message in enumerate(messages):
        out.append(message)
        following = messages[index + 1] if index + 1 < len(messages) else {}
        if message.get("role") != "tool" or following.get("role") == "tool":
            continue
        turns += 1
        found = _two_words(message.get("content"))
        if (turns - 2) % RECALL_EVERY or found is None:
            continue
        line, query = found
        call_id = f"recall_{turns}"
        arguments = json.dumps({"query": query})
        call = {"id": call_id, "type": "function", "function": {"name": TOOL_NAME, "arguments": arguments}}
        out.append({"role": "assistant", "content": "Let me look back at that output.", "tool_calls": [call]})
        out.append({"role": "tool", "tool_call_id": call_id, "content": f"Matches, best first:\n\n> {line}"})
    return out


def _two_words(content: Any) -> tuple[str, str] | None:
    """(a line of a result's text, at most 2,000 characters of it, and two of its words: distinctive ones
    when a line holds two, else the longest words of the first line holding any)."""
    lines = [line[:2_000] for line in content.splitlines()] if isinstance(content, str) else []
    for line in lines:
        words = sorted(distinctive_tokens(line))
        if len(words) >= 2:
            return line, " ".join(words[:2])
    for line in lines:
        words = sorted(set(re.findall(r"[A-Za-z]{5,}", line)), key=lambda w: (-len(w), w))
        if words:
            return line, " ".join(words[:2])
    return None


def _recall(ctx: SimpleContextManager, view: list[Message]) -> str | None:
    """The answer to the newest recall's query, asked again now (None before the first recall)."""
    query = next((q for m in reversed(ctx.messages) if (q := _recall_query(m)) is not None), None)
    if query is None:
        return None
    texts = ctx.__dict__.setdefault("_invariance_texts", MessageTexts())
    gaps = view_gaps(ctx._decisions, ctx._ingress)
    found = search(ctx.messages, parse({"query": query}), texts, budget_s=600.0, gaps=gaps)
    return render(found, RECALL_CHARS)


def _recall_query(message: Message) -> str | None:
    for call in message_calls(message) if message.get("role") == "assistant" else ():
        if is_recall_call(call):
            return arguments_value(call)["query"]
    return None


# Observations compared request by request.
OBSERVERS: dict[str, Callable[[SimpleContextManager, list[Message]], Any]] = {
    "decisions": _decisions,
    "ledger": _ledger,
    "notice": _notice,
    "recall": _recall,
}


def observe(messages: list[Message], budget: int, **config: Any) -> dict[str, list[Any]]:
    """Every observer's value on every request of one replay (``config`` over :data:`CONFIG`)."""
    seen: dict[str, list[Any]] = {name: [] for name in OBSERVERS}

    def record(request: Any, ctx: SimpleContextManager) -> None:
        for name, observer in OBSERVERS.items():
            seen[name].append(observer(ctx, request.view))

    ctx = SimpleContextManager(**{**CONFIG, **config})
    ctx._recall_mounted = True  # as mount() sets it: the ledger and the notice leave recalls out
    asyncio.run(replay(ctx, messages, budget, on_request=record))
    return seen


def check_invariance(path: Path) -> None:
    messages = with_recalls(load_transcript(path))
    budget = int(estimated_size(messages) * FRACTION)
    expected = observe(messages, budget)
    assert any(expected["decisions"][-1]), "the budget must make the replay compact"
    assert_no_recall_traffic(messages, expected["recall"])
    for shape, rewrite in SHAPES.items():
        assert_same(shape, expected, observe([rewrite(m) for m in messages], budget))
    expected = observe(messages, budget, token_counter=through)
    for shape, rewrite in WRAPPED.items():
        assert_same(shape, expected, observe([rewrite(m) for m in messages], budget, token_counter=through))


def assert_no_recall_traffic(messages: list[Message], answers: list[str | None]) -> None:
    """No answer shows a recall's result, and a recall's assistant message only for its sentence."""
    results = {i for i, m in enumerate(messages) if m.get("role") == "tool" and m["tool_call_id"].startswith("recall_")}
    asked = [a for a in answers if a is not None]
    assert asked, "the transcript must get recalls"
    for answer in asked:
        assert TOOL_NAME not in answer and "Matches, best first:" not in answer
        seqs = {int(line[1:].split(" ")[0]) for line in answer.splitlines() if line.startswith("#")}
        assert not seqs & results


def assert_same(shape: str, expected: dict[str, list[Any]], got: dict[str, list[Any]]) -> None:
    for name in OBSERVERS:
        mismatch = next((i for i, (a, b) in enumerate(zip(expected[name], got[name], strict=True)) if a != b), None)
        assert mismatch is None, f"{shape}: {name} differs at request {mismatch}"


@pytest.mark.parametrize("path", by_transcript(WORKLOADS), ids=lambda p: p.stem)
def test_every_call_shape_compacts_like_the_openai_shape(path: Path) -> None:
    check_invariance(path)
