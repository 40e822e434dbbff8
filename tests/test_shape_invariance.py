"""Shape invariance (issue 28.4): the same session stored in any call shape compacts the same way.

Each shipped transcript (OpenAI shape) is rewritten into the shapes hosts store (calls.py lists them), and
replayed under a counter that reads calls through calls.py (``content``) with the evidence ledger on. Every
request must make the same compaction decisions (removed, truncated and stubbed ``_seq``), hold the same
ledger lines and end on the same notice as the OpenAI replay: what differs is the shape itself.

Wrapped results (loop-streaming on amplifier-core 2.0.x stores the JSON of the whole result object) are
larger on the wire, so under a real counter they compact at other points: that is the shape itself. Sized by
what they read through (``through``, a counter for this test only), they must compact exactly as plain
results do, with the same ledger lines and notice: everything but their size reads through calls.py.

To add an observation (recall answers, say), add a function ``(ctx, view) -> comparable value`` to
``OBSERVERS``: every variant's value must equal the OpenAI replay's, request by request.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from amplifier_core.models import ToolResult

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.calls import unwrap_result
from amplifier_module_context_simple.config import DEFAULTS
from amplifier_module_context_simple.ledger import is_ledger, ledger_lines
from amplifier_module_context_simple.token_counter import CONTENT_COUNTER
from tests.conftest import WORKLOADS, estimated_size, load_transcript, replay

Message = dict[str, Any]
CONFIG = {
    "preset": "evidence",
    "token_counter": "content",
    "compaction_notice_verbosity": DEFAULTS["compaction_notice_verbosity"],  # the notice with its figures
}
FRACTION = 0.30
FAST = ("task_skill_search", "task_meeting_searchable_index", "task002__trial1", "django-14155")


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


# Observations compared request by request; a later helper adds recall answers here.
OBSERVERS: dict[str, Callable[[SimpleContextManager, list[Message]], Any]] = {
    "decisions": _decisions,
    "ledger": _ledger,
    "notice": _notice,
}


def observe(messages: list[Message], budget: int, **config: Any) -> dict[str, list[Any]]:
    """Every observer's value on every request of one replay (``config`` over :data:`CONFIG`)."""
    seen: dict[str, list[Any]] = {name: [] for name in OBSERVERS}

    def record(request: Any, ctx: SimpleContextManager) -> None:
        for name, observer in OBSERVERS.items():
            seen[name].append(observer(ctx, request.view))

    asyncio.run(replay(SimpleContextManager(**{**CONFIG, **config}), messages, budget, on_request=record))
    return seen


def check_invariance(path: Path) -> None:
    messages = load_transcript(path)
    budget = int(estimated_size(messages) * FRACTION)
    expected = observe(messages, budget)
    assert any(expected["decisions"][-1]), "the budget must make the replay compact"
    for shape, rewrite in SHAPES.items():
        assert_same(shape, expected, observe([rewrite(m) for m in messages], budget))
    expected = observe(messages, budget, token_counter=through)
    for shape, rewrite in WRAPPED.items():
        assert_same(shape, expected, observe([rewrite(m) for m in messages], budget, token_counter=through))


def assert_same(shape: str, expected: dict[str, list[Any]], got: dict[str, list[Any]]) -> None:
    for name in OBSERVERS:
        mismatch = next((i for i, (a, b) in enumerate(zip(expected[name], got[name], strict=True)) if a != b), None)
        assert mismatch is None, f"{shape}: {name} differs at request {mismatch}"


def _paths(names: tuple[str, ...]) -> list[Path]:
    return [p for p in WORKLOADS if any(name in p.stem for name in names)]


@pytest.mark.parametrize("path", _paths(FAST), ids=lambda p: p.stem)
def test_every_call_shape_compacts_like_the_openai_shape(path: Path) -> None:
    check_invariance(path)


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in WORKLOADS if p not in _paths(FAST)], ids=lambda p: p.stem)
def test_every_call_shape_compacts_like_the_openai_shape_on_every_transcript(path: Path) -> None:
    check_invariance(path)
