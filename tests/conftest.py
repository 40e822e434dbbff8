"""Shared test helpers: transcript loading, a replay driver, invariant checkers and message builders.

Test modules import these as ``from tests.conftest import ...`` (the repo root is on ``sys.path``
through the editable install, and pytest registers this file as ``tests.conftest``).
"""

from __future__ import annotations

import copy
import errno
import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.config import reset_warnings
from amplifier_module_context_simple.estimate import estimate_tokens
from amplifier_module_context_simple.repair import view_problems
from amplifier_module_context_simple.replay import is_real_user_message

Message = dict[str, Any]


@pytest.fixture(autouse=True)
def fresh_config_warnings() -> None:
    """Forget the sessions' warning scopes (config_base): each test starts as a fresh process would."""
    reset_warnings()


DATA_DIR = Path(__file__).resolve().parent / "data"
WORKLOADS_DIR = DATA_DIR / "workloads"
WORKLOADS = sorted(WORKLOADS_DIR.glob("*.jsonl"))
# The transcripts every per-transcript test replays in the default command: one of each kind (agent
# tasks, a SWE session with one user message, an airline session of many turns, truncated results);
# the other transcripts run with `pytest -m slow` (CI runs both), so the default command stays fast.
FAST_TRANSCRIPTS = (
    "task_skill_search",
    "task_meeting_searchable_index",
    "task002__trial1",
    "django-14155",
    "django-11910",
)


def is_fast_transcript(path: Path) -> bool:
    return any(name in path.stem for name in FAST_TRANSCRIPTS)


def by_transcript(cases: list[Any], path_of: Any = lambda case: case) -> list[Any]:
    """``cases`` as parameters, those of transcripts outside :data:`FAST_TRANSCRIPTS` marked slow."""
    return [
        case if is_fast_transcript(path_of(case)) else pytest.param(*_values(case), marks=pytest.mark.slow)
        for case in cases
    ]


def _values(case: Any) -> tuple[Any, ...]:
    return case if isinstance(case, tuple) else (case,)


# A fixed timestamp makes every view a pure function of the transcript and the config.
FIXED_TIMESTAMP = "2025-01-01T00:00:00.000+00:00"
NOTICE_SOURCE = "context-compaction"


# ----- message builders --------------------------------------------------------------------------


def stamped(message: Message) -> Message:
    """``message`` with the fixed timestamp in its metadata (a new dict)."""
    metadata = {**(message.get("metadata") or {}), "timestamp": FIXED_TIMESTAMP}
    return {**message, "metadata": metadata}


def system(text: str = "You are a careful assistant.") -> Message:
    return {"role": "system", "content": text}


def user(text: str = "hi") -> Message:
    return {"role": "user", "content": text}


def asst(text: str = "ok") -> Message:
    return {"role": "assistant", "content": text}


def call(call_id: str, name: str = "read_file") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def asst_calls(*ids: str, name: str = "read_file", text: str = "") -> Message:
    """An assistant message with one tool call per id (several ids: parallel calls)."""
    return {"role": "assistant", "content": text, "tool_calls": [call(i, name) for i in ids]}


def result(call_id: str, content: str = "ok") -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


BIG = 80_000  # characters: ~20k tokens, the dominant weight of a hand-made scenario


def build(spec: str) -> list[dict[str, Any]]:
    """Messages from a spec of space-separated tokens.

    S system; U short user; U+ long user (200 chars, stubbable); U* huge user; A / A* short / huge
    assistant text; T / T* a tool call and its short / huge result; E* a huge result of the tool
    ``big_reader``; P3 / P3* three parallel calls and their results (the middle one huge in P3*).
    """
    out: list[dict[str, Any]] = []
    for index, token in enumerate(spec.split()):
        tag = f"m{index}"
        if token == "S":
            out.append(system(f"system prompt {tag}"))
        elif token in ("U", "U+", "U*"):
            tail = {"U": "", "U+": " " + "x" * 200, "U*": " " + "u" * BIG}[token]
            out.append(user(f"user turn {tag}{tail}"))
        elif token in ("A", "A*"):
            out.append(asst(f"assistant {tag}" + (" " + "a" * BIG if token == "A*" else "")))
        elif token in ("T", "T*", "E*"):
            name = "big_reader" if token == "E*" else "read_file"
            out.append(asst_calls(tag, name=name))
            out.append(result(tag, "r" * BIG if token != "T" else f"small result {tag}"))
        elif token in ("P3", "P3*"):
            ids = [f"{tag}a", f"{tag}b", f"{tag}c"]
            out.append(asst_calls(*ids))
            for position, call_id in enumerate(ids):
                huge = token == "P3*" and position == 1
                out.append(result(call_id, "r" * BIG if huge else f"small {call_id}"))
        else:
            raise ValueError(token)
    return out


# ----- transcripts -------------------------------------------------------------------------------


def load_transcript(path: Path) -> list[Message]:
    """The messages of a shipped JSONL transcript, each with the fixed ``metadata.timestamp``."""
    with path.open(encoding="utf-8") as handle:
        return [stamped(json.loads(line)) for line in handle if line.strip()]


def estimated_size(messages: list[Message]) -> int:
    """The original estimator over the whole transcript (the basis of the budget percentages)."""
    return estimate_tokens(messages)


def canonical_json(value: Any) -> str:
    """The canonical JSON used by the golden hashes."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


# ----- views and invariants ----------------------------------------------------------------------


def is_ephemeral(message: Message) -> bool:
    metadata = message.get("metadata")
    return isinstance(metadata, dict) and metadata.get("ephemeral") is True


def non_ephemeral(view: list[Message]) -> list[Message]:
    return [m for m in view if not is_ephemeral(m)]


def wire_bytes(message: Message) -> str:
    """The message as bytes on the wire: key order kept, nothing sorted."""
    return json.dumps(message, ensure_ascii=False)


def assert_extends(previous: list[Message], current: list[Message]) -> None:
    """``current`` starts with ``previous``, message for message, byte for byte."""
    assert len(current) >= len(previous), f"view shrank from {len(previous)} to {len(current)} without a boundary"
    for index, (old, new) in enumerate(zip(previous, current, strict=False)):
        # ``==`` is a cheap pre-check (shared string objects compare by identity); bytes decide.
        if old is new or (old == new and wire_bytes(old) == wire_bytes(new)):
            continue
        raise AssertionError(f"message {index} changed between boundaries:\n{wire_bytes(old)}\n{wire_bytes(new)}")


def assert_tool_pairing(view: list[Message]) -> None:
    """No orphan tool result and no unanswered call except on a trailing assistant."""
    problems = view_problems(view)
    assert problems == [], problems


def strip_seq(message: Message) -> Message:
    metadata = {k: v for k, v in (message.get("metadata") or {}).items() if k != "_seq"}
    return {**message, "metadata": metadata}


def assert_no_seq(view: list[Message]) -> None:
    for message in view:
        assert "_seq" not in (message.get("metadata") or {}), message


def assert_system_messages_present(view: list[Message], stored: list[Message], front: bool = True) -> None:
    """Every stored system message is in the view, unchanged; with ``front``, they lead the view.

    A compacted view moves system messages to the front; an uncompacted one keeps history order.
    """
    wanted = [strip_seq(m) for m in stored if m.get("role") == "system"]
    got = [m for m in view if m.get("role") == "system"]
    assert got == wanted
    if front:
        assert view[: len(got)] == got, "system messages are not at the front"


def last_real_user(messages: list[Message]) -> Message | None:
    return next((m for m in reversed(messages) if is_real_user_message(m)), None)


def assert_last_user_present(view: list[Message], stored: list[Message]) -> None:
    """The last real user message of the history is in the view, whole (never stubbed)."""
    last = last_real_user(stored)
    if last is not None:
        assert strip_seq(last) in view, "the last real user message is missing from the view"


# ----- the replay driver -------------------------------------------------------------------------


@dataclass
class Request:
    """One request of a replay: the view, and whether a new compaction happened on it."""

    index: int
    view: list[Message]
    boundary: bool
    stats: dict[str, Any] | None


Hook = Callable[..., Awaitable[None] | None]


async def _call(hook: Hook | None, *args: Any) -> None:
    if hook is not None and (outcome := hook(*args)) is not None:
        await outcome


async def replay(
    ctx: SimpleContextManager,
    messages: list[Message],
    budget: int | None = None,
    on_request: Hook | None = None,
    before_request: Hook | None = None,
    provider: Any = None,
) -> list[Request]:
    """Add ``messages`` in order, requesting a view before every assistant message (as an orchestrator does).

    ``before_request(ctx)`` runs right before each request and ``on_request(request, ctx)`` right
    after it. A boundary is a request on which ``_last_compaction_stats`` became a new object (a
    new ``context:compaction``).
    """
    requests: list[Request] = []
    for message in messages:
        if message.get("role") == "assistant":
            await _call(before_request, ctx)
            before = ctx._last_compaction_stats
            view = await ctx.get_messages_for_request(token_budget=budget, provider=provider)
            stats = ctx._last_compaction_stats
            request = Request(len(requests), view, stats is not None and stats is not before, stats)
            requests.append(request)
            await _call(on_request, request, ctx)
        await ctx.add_message(message)
    return requests


class InvariantChecker:
    """Checks every request of a replay against the issue's invariants (use with :func:`replay`)."""

    def __init__(self) -> None:
        self.previous: list[Message] | None = None
        self.last_view: list[Message] | None = None
        self.snapshot: list[Message] = []
        self.checked = 0
        self.boundaries = 0

    def before(self, ctx: SimpleContextManager) -> None:
        """Snapshot the stored history; it only grows, so deep-copy the new messages (strings are shared)."""
        self.snapshot.extend(copy.deepcopy(ctx.messages[len(self.snapshot) :]))

    def after(self, request: Request, ctx: SimpleContextManager) -> None:
        view, stored = request.view, ctx.messages
        assert isinstance(view, list) and view is not stored and view is not self.last_view
        assert stored == self.snapshot, "stored messages changed during a request"
        assert_no_seq(view)
        assert_tool_pairing(view)
        assert_system_messages_present(view, stored, front=ctx._last_compaction_stats is not None)
        assert_last_user_present(view, stored)
        current = non_ephemeral(view)
        if self.previous is not None and not request.boundary:
            assert_extends(self.previous, current)
        self.previous, self.last_view = current, view
        self.checked += 1
        self.boundaries += request.boundary


async def checked_replay(
    ctx: SimpleContextManager, messages: list[Message], budget: int | None = None
) -> tuple[InvariantChecker, list[Request]]:
    """Replay ``messages`` through ``ctx``, checking every request's invariants."""
    checker = InvariantChecker()
    requests = await replay(ctx, messages, budget, on_request=checker.after, before_request=checker.before)
    return checker, requests


async def add_all(ctx: SimpleContextManager, messages: list[Message]) -> None:
    """Add ``messages`` in order, each with the fixed timestamp."""
    for message in messages:
        await ctx.add_message(stamped(message))


# ----- hooks -------------------------------------------------------------------------------------


class EventLog:
    """Records events emitted through a real hook registry (``MockCoordinator().hooks``)."""

    def __init__(self, hooks: Any, events: tuple[str, ...]) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []
        self._unregister = [hooks.register(e, self._record, priority=-1000, name=f"test-log:{e}") for e in events]

    async def _record(self, event: str, data: dict[str, Any]) -> Any:
        self.seen.append((event, data))
        return None

    def of(self, event: str) -> list[dict[str, Any]]:
        return [data for name, data in self.seen if name == event]


class Recorder:
    """A hooks stand-in that records every emitted event (for managers built without amplifier-core)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def emit(self, name: str, payload: dict[str, Any]) -> None:
        self.events.append((name, payload))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [p for n, p in self.events if n == name]

    def count(self, name: str) -> int:
        return len(self.named(name))


class FullDisk:
    """A file object whose writes fail as on a full disk (the descriptor is really closed): patch
    ``os.fdopen`` to return it to simulate ENOSPC on a spill write."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __enter__(self) -> FullDisk:
        return self

    def __exit__(self, *exc: Any) -> None:
        os.close(self.fd)

    def write(self, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
