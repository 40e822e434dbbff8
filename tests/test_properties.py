"""Property-based invariants of SimpleContextManager over generated conversations and configurations.

Hypothesis generates sessions -- system prompts (stored, hook-injected or from a factory), user turns
as text or blocks with images, crafted ``<system-reminder source=...>`` look-alikes, assistant turns
with 0-8 parallel tool calls whose results (0-200,000 characters, mostly small) arrive one by one,
missing / duplicated / orphan / reused / absent ids, session resumes, synthetic ``llm:response``
usage (well-formed and malformed) between requests -- and configurations across every strategy and
knob. :class:`Checker` checks every view the manager returns:

* tool pairing: ``view_problems(view) == []`` (a trailing assistant's calls may be unanswered; calls
  without any id cannot be repaired and are left out of the check);
* every system message present and unchanged (with a factory: its prompt, then hook messages);
* the last real user message present word for word; the first present, or its level-8 stub, or
  (summary strategy) absorbed into a summary that is in the view;
* no stored message ever changed, ``_seq`` unique and increasing, the caller's dicts untouched; the
  history grows only by what was added, plus summaries in the summary strategy;
* budget (estimate meter; the actual/hybrid meters gate on a provider's count, so no estimate bound
  holds there): the non-ephemeral view exceeds the effective budget only with the over-budget
  warning on that request (after ladder level 8) or a clear-at-least refusal (its documented
  baseline view); with the notice inside its reserve, the whole view fits the budget;
* between boundaries (requests that emitted ``context:compaction``) the non-ephemeral view extends the
  previous one byte for byte; one documented exception: after a compaction, system messages lead
  the view, so a system message added mid-session joins the system block (then the system block and
  the rest each extend their previous selves);
* ephemeral messages only at the tail; a replay repeats the user's own last words.

Profiles (``settings.get_profile``, applied to these tests only):

* ``ci`` (default): 300 examples of the main property, 100 of the summary-focused one, and the shrunk
  counterexamples in ``tests/data/property_regressions.json``; seconds.
* ``long``: 5,000 + 1,666 examples, minutes: ``HYPOTHESIS_PROFILE=long uv run pytest
  tests/test_properties.py -q --hypothesis-show-statistics`` (statistics: repairs, boundaries, levels...).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from amplifier_core.message_models import ChatResponse, TextBlock
from amplifier_core.models import ProviderInfo
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.estimate import seq_of
from amplifier_module_context_simple.instructions import is_injected_instruction, is_instruction
from amplifier_module_context_simple.repair import view_problems
from amplifier_module_context_simple.token_counter import resolve_counter
from amplifier_module_context_simple.tool_pairs import in_flight_start

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}
settings.register_profile("context-simple-ci", max_examples=300, **_COMMON)
settings.register_profile("context-simple-long", max_examples=5000, **_COMMON)
PROFILE = settings.get_profile(f"context-simple-{os.environ.get('HYPOTHESIS_PROFILE', 'ci')}")

TIMESTAMP = "2026-01-01T00:00:00.000+00:00"
FACTORY_PROMPT = "You are the factory's system prompt."
TOOL_NAMES = ["read", "grep", "bash", "web", "../../etc/x"]
LOGGER = "amplifier_module_context_simple"
Message = dict[str, Any]

_WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu\n"


def text_of(tag: str, size: int) -> str:
    """Deterministic text of exactly ``size`` characters that starts with its tag (when it fits)."""
    body = f"{tag} " + _WORDS * (size // len(_WORDS) + 1)
    return body[:size]


def sizes(big: int = 200_000) -> st.SearchStrategy[int]:
    """Mostly small sizes so examples stay fast; now and then a large one, rarely a huge one."""
    mid = min(6_000, big // 2)
    return st.integers(0, 99).flatmap(
        lambda r: st.integers(0, 300) if r < 85 else st.integers(301, mid) if r < 97 else st.integers(mid + 1, big)
    )


def image_block(size: int) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR" * size}}


def user_content(kind: str, tag: str, size: int) -> Any:
    if kind == "text":
        return text_of(tag, max(size, len(tag)))
    if kind == "blocks":
        return [{"type": "text", "text": text_of(tag, max(size, len(tag)))}, image_block(size // 10 + 1)]
    if kind == "image_only":
        return [image_block(size // 10 + 1)]
    # A user-role message crafted to look like the module's own envelopes: never the user's own words.
    source = {"fake_summary": "context-summary", "fake_replay": "context-replay"}.get(kind, "context-compaction")
    return f'<system-reminder source="{source}">\n{text_of(tag, size)}\n</system-reminder>'


# --- generation ----------------------------------------------------------------------------------------

CALL = st.tuples(
    st.sampled_from(TOOL_NAMES),
    st.sampled_from(["openai", "flat"]),
    st.sampled_from(["ok"] * 12 + ["missing", "duplicate", "noid", "reuse"]),
    sizes(),
    st.integers(0, 19),  # 0: list-of-blocks result content
)
# Hook injections stored inside a tool group (loop-basic's tool:post inject_context order): role, size.
HOOKS = st.lists(
    st.tuples(st.sampled_from(["system", "user", "user_plain", "assistant"]), sizes(1_500)), max_size=2
).map(lambda hooks: hooks if len(hooks) < 2 or hooks[0][1] % 3 else [])
USER_KIND = st.sampled_from(["text"] * 8 + ["blocks", "image_only", "fake_summary", "fake_replay", "fake_notice"])

OP = st.integers(0, 99).flatmap(
    lambda r: (
        st.tuples(st.just("user"), USER_KIND, sizes(20_000))
        if r < 25
        else st.tuples(st.just("assistant"), sizes(4_000))
        if r < 38
        else st.tuples(st.just("tools"), st.lists(CALL, max_size=8), st.booleans(), st.integers(0, 9), HOOKS)
        if r < 85
        else st.tuples(st.just("usage"), st.sampled_from(["malformed", "error", "string", "negative", "none"]))
        if r < 92
        else st.tuples(st.just("system"), sizes(2_000), st.booleans())
        if r < 96
        else st.tuples(st.just("resume"), st.integers(0, 2))
    )
)


@st.composite
def sessions(draw: Any) -> list[tuple]:
    ops: list[tuple] = []
    for _ in range(draw(st.integers(0, 2))):
        ops.append(("system", draw(sizes(3_000)), False))
    ops.append(("user", draw(USER_KIND), draw(sizes(20_000))))
    ops += draw(st.lists(OP, min_size=1, max_size=28))
    return ops


FRACTION = st.floats(0.05, 1.0, allow_nan=False)


def below_threshold(cfg: dict[str, Any], target: float | None = None) -> dict[str, Any]:
    """The config with its target below its threshold (a target at or above it is refused at mount)."""
    target = cfg["target_usage"] if target is None else target
    threshold = cfg["compact_threshold"]
    return {**cfg, "target_usage": target if target < threshold else threshold / 2}


@st.composite
def configs(draw: Any) -> dict[str, Any]:
    cfg = {
        "compaction_strategy": draw(st.sampled_from(["progressive"] * 3 + ["summary"])),
        "compact_threshold": draw(st.sampled_from([0.92, 0.5, 1.0]) | FRACTION),
        "target_usage": draw(st.sampled_from([0.5, 0.1, 0.9]) | FRACTION),
        "protected_recent": draw(st.sampled_from([0.3, 0.0, 1.0]) | st.floats(0.0, 1.0)),
        "protected_tool_results": draw(st.integers(-1, 8)),
        "truncate_chars": draw(st.sampled_from([250, 1, 40, 2_000])),
        "tool_result_budget_tokens": draw(st.none() | st.integers(1, 600)),
        "tool_result_shape": draw(st.sampled_from(["head", "head_tail"])),
        "tool_result_budget_by_tool": draw(st.sampled_from([{}, {"read": 20}, {"grep": 5, "bash": 300}])),
        "tool_result_exempt_tools": draw(st.sampled_from([[], ["web"], ["read", "bash"]])),
        "tool_result_spill_dir": draw(st.sampled_from([None, "SPILL"])),
        "token_meter": draw(st.sampled_from(["estimate", "estimate", "actual", "hybrid"])),
        "token_counter": draw(st.sampled_from(["estimate", "content"])),
        "compact_clear_at_least": draw(st.sampled_from([None, None, None, 200, 0.1, 5_000, "lots", 0, -3])),
        "compact_max_consecutive_skips": draw(st.integers(0, 4)),
        "replay_last_user_on_compaction": draw(st.booleans()),
        "compaction_notice_enabled": draw(st.booleans()),
        "compaction_notice_token_reserve": draw(st.sampled_from([800, 0, 50, 3_000])),
        "compaction_notice_verbosity": draw(st.sampled_from(["normal", "minimal", "verbose"])),
        "compaction_notice_min_level": draw(st.integers(0, 8)),
        "summary_trigger": draw(st.sampled_from([0.6, 0.3, 0.9])),
        "summarization_timeout_s": 5.0,
        "max_tokens": draw(st.integers(400, 40_000)),
        "evidence_ledger_share": draw(st.sampled_from([0.0, 0.0, 0.0, 0.7, 0.3, 0.9])),
    }
    return below_threshold(cfg)


# budget: ("explicit", n) | ("provider", context_window, max_output) | ("max_tokens",)
BUDGETS = st.one_of(
    st.tuples(st.just("explicit"), st.sampled_from([1_000, 2_000, 4_000, 8_000]) | st.integers(300, 30_000)),
    st.tuples(st.just("provider"), st.integers(4_500, 40_000), st.integers(0, 3_000)),
    st.tuples(st.just("max_tokens")),
)


class Hooks:
    """Records every event the manager emits."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def emit(self, event_name: str, payload: dict[str, Any]) -> None:
        self.events.append((event_name, payload))

    def count(self, name: str) -> int:
        return sum(1 for e, _ in self.events if e == name)


class Provider:
    """Window metadata and a scripted summarizer (``complete``)."""

    def __init__(self, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.summaries = 0

    def get_info(self) -> Any:
        return ProviderInfo(id="scripted", display_name="Scripted", defaults=self.defaults)

    async def complete(self, request: Any, **kwargs: Any) -> Any:
        self.summaries += 1
        return ChatResponse(content=[TextBlock(text=f"Summary {self.summaries}: the user asked for work.")])


class Records(logging.Handler):
    """Every log message of the module, in order."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def expected_budget(cfg: dict[str, Any], budget: tuple) -> int:
    if budget[0] == "explicit":
        return budget[1]
    if budget[0] == "provider" and budget[2] > 0:
        value = budget[1] - int(budget[2] * 0.5) - 4096
        if value > 0:
            return min(value, cfg["max_tokens"])  # a set max_tokens caps the provider's budget
    return cfg["max_tokens"]


def effective(cfg: dict[str, Any], budget: int) -> int:
    reserve = cfg["compaction_notice_token_reserve"]
    if not cfg["compaction_notice_enabled"] or reserve <= 0 or budget - reserve <= 0:
        return budget
    return budget - reserve


# --- the oracle -------------------------------------------------------------------------------------


def wire(message: Message) -> Message:
    metadata = {k: v for k, v in (message.get("metadata") or {}).items() if k != "_seq"}
    return {**message, "metadata": metadata}


def is_ephemeral(message: Message) -> bool:
    metadata = message.get("metadata")
    return isinstance(metadata, dict) and bool(metadata.get("ephemeral"))


def is_summary(message: Message) -> bool:
    metadata = message.get("metadata")
    return isinstance(metadata, dict) and metadata.get("type") == "context_summary"


def users_own_words(message: Message) -> bool:
    """Independent of the module's predicate: a user turn that does not open a reminder envelope."""
    if message.get("role") != "user" or "tool_call_id" in message:
        return False
    if (message.get("metadata") or {}).get("source") == "hook":
        return False  # a hook's injection, even without an envelope
    content = message.get("content")
    if isinstance(content, str):
        return not content.lstrip().startswith("<system-reminder")
    texts = [b.get("text") for b in content or [] if isinstance(b, dict)]
    return not any(isinstance(t, str) and t.lstrip().startswith("<system-reminder") for t in texts)


@dataclass
class Checker:
    """Invariants of every view, plus the history the caller gave (see the module docstring)."""

    ctx: SimpleContextManager
    cfg: dict[str, Any]
    budget: int
    hooks: Hooks
    records: Records
    factory: bool
    snapshots: list[Message] = field(default_factory=list)
    given: list[tuple[Message, Message]] = field(default_factory=list)
    previous: list[str] | None = None
    previous_systems: int = 0
    views: int = 0

    def absorb(self, allowed_tags: set[str]) -> None:
        """The stored prefix is unchanged; new entries are what was added (or a summary)."""
        stored = self.ctx.messages
        assert stored[: len(self.snapshots)] == self.snapshots, "a stored message changed"
        for message in stored[len(self.snapshots) :]:
            tag = (message.get("metadata") or {}).get("tag")
            summary_ok = self.cfg["compaction_strategy"] == "summary" and is_summary(message)
            assert tag in allowed_tags or summary_ok, f"unexpected stored message {message!r:.200}"
            self.snapshots.append(copy.deepcopy(message))
        seqs = [seq_of(m) for m in stored]
        assert all(isinstance(s, int) for s in seqs) and seqs == sorted(set(seqs)), "_seq not unique/increasing"

    def rebase(self) -> None:
        """After set_messages: a new history and a new boundary."""
        self.snapshots = copy.deepcopy(self.ctx.messages)
        self.previous = None

    def check(self, view: list[Message], events_before: int, log_start: int) -> None:
        self.views += 1
        self.absorb(set())
        assert [p for p in view_problems(view) if "without an id" not in p] == [], view_problems(view)
        self.check_system(view)
        self.check_users(view)
        self.check_images_whole(view)
        self.check_tail(view)
        self.check_budget(view, log_start)
        boundary = self.hooks.count("context:compaction") > events_before
        self.check_extension(view, boundary)
        if boundary:
            self.check_notice(view)
        assert all(a == b for a, b in self.given), "the caller's message objects were mutated"

    def check_system(self, view: list[Message]) -> None:
        """Every instruction is in the view, in stored order; a system-role hook injection may be removed
        (issue 18: it is an ordinary message), but is never altered or invented."""
        working = self.ctx.messages
        if self.factory:  # the factory replaces stored system messages, except hooks' injections
            working = [m for m in working if m.get("role") != "system" or m["metadata"].get("source") == "hook"]
        held = in_flight_start(working)  # a trailing group's hook injections wait for its results
        stored = working[:held]
        expected = [wire(m) for m in stored if is_instruction(m)]
        if self.factory:
            expected = [{"role": "system", "content": FACTORY_PROMPT}, *expected]
        assert [m for m in view if is_instruction(m)] == expected
        injected = [wire(m) for m in stored if is_injected_instruction(m)]
        shown = [m for m in view if is_injected_instruction(m)]
        assert all(m in injected for m in shown), "a system-role injection the history does not hold"

    def check_users(self, view: list[Message]) -> None:
        real = [m for m in self.ctx.messages if users_own_words(m) and not is_summary(m)]
        if not real:
            return
        last, first = wire(real[-1]), wire(real[0])
        assert last in view, "last real user message missing or altered"
        if first in view:
            return
        tag = first["metadata"]["tag"]
        stubs = [m for m in view if (m.get("metadata") or {}).get("tag") == tag and m.get("_stubbed")]
        if stubs:
            assert stubs[0]["content"].startswith("[User message compacted - original: ")
            return
        absorbed = seq_of(real[0]) in self.ctx._removed_seqs and any(is_summary(m) for m in view)
        assert self.cfg["compaction_strategy"] == "summary" and absorbed, "first user message lost"

    def check_images_whole(self, view: list[Message]) -> None:
        """A user message holding an image is in the view whole or not at all (never stubbed as text)."""
        for message in self.ctx.messages:
            content = message.get("content")
            if message.get("role") != "user" or not isinstance(content, list):
                continue
            if any(isinstance(b, dict) and b.get("type") == "image" for b in content):
                tag = (message.get("metadata") or {}).get("tag")
                shown = [m for m in view if tag is not None and (m.get("metadata") or {}).get("tag") == tag]
                assert shown in ([], [wire(message)]), "a user message with an image was altered"

    def check_tail(self, view: list[Message]) -> None:
        """Ephemeral messages only at the tail; a replay repeats the user's own last words."""
        flags = [is_ephemeral(m) for m in view]
        assert flags == sorted(flags), "an ephemeral message sits before a non-ephemeral one"
        replays = [m for m in view if (m.get("metadata") or {}).get("source") == "context-replay"]
        if replays:
            real = [m for m in self.ctx.messages if users_own_words(m)]
            content = real[-1]["content"]
            texts = [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
            text = content if isinstance(content, str) else "\n".join(texts)
            assert replays[0]["content"].endswith(f"\n\n{text}\n</system-reminder>")
            event("replay appended")

    def check_budget(self, view: list[Message], log_start: int) -> None:
        """Estimate meter: over the effective budget only with the over-budget warning (after level 8)."""
        if self.cfg["token_meter"] != "estimate":
            return
        counter = resolve_counter(self.cfg["token_counter"])
        limit = effective(self.cfg, self.budget)
        body = sum(counter(m) for m in view if not is_ephemeral(m))
        logs = self.records.messages[log_start:]
        warned = [m for m in logs if "OVER BUDGET" in m]
        if warned:
            event("over-budget warning")
            assert all("at level 8" in m for m in warned), warned
        refused = self.ctx._clear_at_least_last_refused  # the documented exception: the baseline view
        if body > limit and not refused:
            assert warned, f"view of {body} tokens over effective budget {limit} without a warning"
        notices = [m for m in view if (m.get("metadata") or {}).get("source") == "context-compaction"]
        reserve_fits = notices and limit < self.budget and counter(notices[0]) <= self.budget - limit
        if reserve_fits and not (warned or refused):
            assert sum(counter(m) for m in view) <= self.budget, "the tail overflowed the notice reserve"

    def check_notice(self, view: list[Message]) -> None:
        """At a boundary, the notice claims only what the view holds (recent results whole, ledger lines)."""
        notices = [m["content"] for m in view if (m.get("metadata") or {}).get("source") == "context-compaction"]
        if not notices:
            return
        match = re.search(r"- Last (-?\d+) tool results \(full content\)(, except (\d+))?", notices[0])
        if match and int(match.group(1)) > 0:
            recent = answering_results(self.ctx.messages)[-int(match.group(1)) :]
            # As every view shows them: a result over max_tool_result_bytes is clipped, marked, in all of them.
            whole = [wire(m) for m in map(self.ctx._ingress.apply, recent) if wire(m) in view]
            assert len(recent) - len(whole) == int(match.group(3) or 0), "the notice miscounts whole recent results"
        lines = re.search(r"- (\d+) key lines of removed messages are kept", notices[0])
        ledgers = [m["content"] for m in view if (m.get("metadata") or {}).get("source") == "context-evidence"]
        if lines:
            assert ledgers and ledgers[0].count("\n") - 2 == int(lines.group(1)), "the notice claims ledger lines"

    def check_extension(self, view: list[Message], boundary: bool) -> None:
        """Between boundaries the non-ephemeral view extends the previous one, byte for byte.

        One documented exception: once a view is compacted, system messages lead it, so a system
        message added mid-session joins the system block instead of the tail. Then the system block
        and the rest must each extend their previous selves.
        """
        body = [m for m in view if not is_ephemeral(m)]
        keys = [json.dumps(m, ensure_ascii=False) for m in body]
        systems = sum(1 for m in body if m.get("role") == "system")
        if boundary:
            event("compaction boundary")
        elif self.previous is not None and keys[: len(self.previous)] != self.previous:
            assert systems > self.previous_systems, "view does not extend the previous one"
            head, tail = keys[:systems], keys[systems:]
            assert head[: self.previous_systems] == self.previous[: self.previous_systems]
            assert tail[: len(self.previous) - self.previous_systems] == self.previous[self.previous_systems :]
            event("mid-session system message hoisted into the system block")
        self.previous, self.previous_systems = keys, systems


def untimed(view: list[Message]) -> str:
    """The view's bytes, but a summary's wall-clock timestamp (taken when it is swapped in)."""
    clean = [{**m, "metadata": {**m["metadata"], "timestamp": None}} if is_summary(m) else m for m in view]
    return json.dumps(clean)


def answering_results(stored: list[Message]) -> list[Message]:
    """Stored tool results a view may hold: the first answer to a call of the nearest group, not held."""
    held = in_flight_start(stored)
    out: list[Message] = []
    open_ids: set[str] = set()
    for message in stored[:held]:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            open_ids = {c.get("id") for c in message["tool_calls"] if isinstance(c, dict)}
        elif message.get("role") == "tool" and message.get("tool_call_id") in open_ids:
            open_ids.discard(message["tool_call_id"])
            out.append(message)
    return out


# --- the driver ---------------------------------------------------------------------------------------


@dataclass
class Session:
    """Plays the generated operations against one manager and checks every request."""

    ctx: SimpleContextManager
    checker: Checker
    provider: Provider
    token_budget: int | None
    meter_factor: float
    serial: int = 0
    failed_loud: bool = False
    call_serial: int = 0
    previous_ids: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)

    def tag(self) -> str:
        self.serial += 1
        return f"m{self.serial}"

    async def add(self, message: Message, **metadata: Any) -> None:
        tag = self.tag()
        message["metadata"] = {"timestamp": TIMESTAMP, "tag": tag, **metadata}
        self.checker.given.append((message, copy.deepcopy(message)))
        await self.ctx.add_message(message)
        self.checker.absorb({tag})
        await self.request()

    async def request(self) -> None:
        events_before = self.checker.hooks.count("context:compaction")
        log_start = len(self.checker.records.messages)
        view = await self.ctx.get_messages_for_request(token_budget=self.token_budget, provider=self.provider)
        self.checker.check(view, events_before, log_start)
        if self.ctx.compaction_strategy == "summary" and self.ctx._summarization_task is not None:
            await self.ctx._summarization_task  # let the summarizer land between requests
        usage = {"input_tokens": int(self.meter_factor * len(str(view)) / 4), "cache_read_tokens": 0}
        await self.ctx._on_llm_response("llm:response", {"status": "ok", "usage": {**usage, "cache_write_tokens": 0}})

    async def play(self, op: tuple) -> None:
        kind = op[0]
        if kind == "user":
            tag = f"m{self.serial + 1}"
            await self.add({"role": "user", "content": user_content(op[1], tag, op[2])})
        elif kind == "assistant":
            await self.add({"role": "assistant", "content": text_of(f"m{self.serial + 1}", op[1])})
        elif kind == "tools":
            await self.tool_turn(op[1], op[2], op[3], op[4] if len(op) > 4 else [])
        elif kind == "usage":
            await self.bad_usage(op[1])
        elif kind == "system":
            hook = {"source": "hook"} if op[2] else {}
            await self.add({"role": "system", "content": text_of(f"m{self.serial + 1}", op[1] + 1)}, **hook)
        else:
            await self.resume(op[1])

    async def bad_usage(self, shape: str) -> None:
        payload = {
            "malformed": {"usage": "not a dict"},
            "error": {"status": "error", "usage": {"input_tokens": 10}},
            "string": "{not json",
            "negative": {"usage": {"input_tokens": -5}},
            "none": None,
        }[shape]
        await self.ctx._on_llm_response("llm:response", payload)

    async def restored_twin(self) -> None:
        """A new manager given the history and ``snapshot_state()`` sends the same next view, byte for byte."""
        if self.ctx._summarization_task is not None:
            return  # a summary in flight is not part of the snapshot's promise
        if self.ctx._pending_summary is not None:
            return  # nor a finished one awaiting its swap-in: restore_state never adopts it (unverifiable text)
        twin = SimpleContextManager(hooks=Hooks(), **self.options)
        if self.ctx._system_prompt_factory is not None:
            await twin.set_system_prompt_factory(self.ctx._system_prompt_factory)
        await twin.set_messages([wire(m) for m in await self.ctx.get_messages()])
        twin.restore_state(self.ctx.snapshot_state())
        events_before = self.checker.hooks.count("context:compaction")
        log_start = len(self.checker.records.messages)
        here = await self.ctx.get_messages_for_request(token_budget=self.token_budget, provider=self.provider)
        self.checker.check(here, events_before, log_start)
        there = await twin.get_messages_for_request(token_budget=self.token_budget, provider=self.provider)
        assert untimed(there) == untimed(here), "restored twin sends a different view"
        event("restored twin compared")

    async def resume(self, how: int) -> None:
        """set_messages with the stored history (0), with a tool result (1) or a call (2) deleted."""
        if how == 0:
            await self.restored_twin()
        stored = [wire(m) for m in await self.ctx.get_messages()]
        role = {1: "tool", 2: "assistant"}.get(how)
        doomed = [i for i, m in enumerate(stored) if m.get("role") == role and (how == 1 or m.get("tool_calls"))]
        if doomed:
            del stored[doomed[len(doomed) // 2]]
        given = copy.deepcopy(stored)
        await self.ctx.set_messages(stored)
        assert stored == given, "set_messages mutated the caller's list"
        assert [wire(m) for m in self.ctx.messages] == [wire(m) for m in given]
        self.checker.rebase()
        event("resume")
        await self.request()

    async def tool_turn(self, calls: list[tuple], reverse: bool, orphan: int, hooks: list) -> None:
        ids: list[str | None] = []
        for _, _, fate, _, _ in calls:
            self.call_serial += 1
            if fate == "reuse" and self.previous_ids:
                ids.append(self.previous_ids[0])
            else:
                ids.append(None if fate == "noid" else f"call_{self.call_serial}")
        if None in ids or len(set(ids)) < len(ids):
            # A call without an id, or with another call's id in the same message, is refused with the history
            # unchanged; the rest go on (each id once).
            before = copy.deepcopy(self.ctx.messages)
            with pytest.raises(ValueError, match="has id missing|repeats the tool-call id"):
                await self.ctx.add_message({"role": "assistant", "content": "", "tool_calls": tool_calls(calls, ids)})
            assert self.ctx.messages == before
            kept = [(c, i) for position, (c, i) in enumerate(zip(calls, ids, strict=True)) if i not in ids[:position]]
            calls = [c for c, i in kept if i is not None]
            ids = [i for _, i in kept if i is not None]
            if not ids:
                return
        await self.add({"role": "assistant", "content": "", "tool_calls": tool_calls(calls, ids)})
        self.previous_ids = [i for i in ids if i] or self.previous_ids
        results = [(i, c) for i, c in zip(ids, calls, strict=True) if i is not None and c[2] != "missing"]
        results += [(i, c) for i, c in results if c[2] == "duplicate"]
        if orphan == 0:
            results.append(("call_nobody", ("read", "openai", "ok", 10, 1)))
        for role, size in hooks if results else []:  # loop-basic: tool:post injections before the results
            tag = f"m{self.serial + 1}"
            text = text_of(tag, size + 1)  # amplifier-core stores an injection's text as given
            if role == "user":
                text = f"<system-reminder>\n{text}\n</system-reminder>"
            await self.add({"role": role.split("_")[0], "content": text}, source="hook")
        for call_id, (name, _, _, size, blocks) in reversed(results) if reverse else results:
            tag = f"m{self.serial + 1}"
            content: Any = text_of(tag, size) if blocks else [{"type": "text", "text": text_of(tag, size)}]
            await self.add({"role": "tool", "tool_call_id": call_id, "name": name, "content": content})


def tool_calls(calls: list[tuple], ids: list[str | None]) -> list[dict[str, Any]]:
    out = []
    for (name, shape, _, _, _), call_id in zip(calls, ids, strict=True):
        call: dict[str, Any] = (
            {"type": "function", "function": {"name": name, "arguments": '{"path": "x"}'}}
            if shape == "openai"
            else {"name": name, "input": {"path": "x"}}
        )
        if call_id is not None:
            call["id"] = call_id
        out.append(call)
    return out


def build(cfg: dict[str, Any], budget: tuple, factory: bool, spill: Path) -> tuple[SimpleContextManager, Session]:
    options = {k: (str(spill) if v == "SPILL" else v) for k, v in cfg.items()}
    hooks = Hooks()
    ctx = SimpleContextManager(hooks=hooks, **options)
    defaults = {"context_window": budget[1], "max_output_tokens": budget[2]} if budget[0] == "provider" else {}
    records = Records()
    checker = Checker(ctx, cfg, expected_budget(cfg, budget), hooks, records, factory)
    explicit = budget[1] if budget[0] == "explicit" else None
    return ctx, Session(ctx, checker, Provider(defaults), explicit, 1.0, options=options)


async def run(
    cfg: dict[str, Any], budget: tuple, factory: bool, ops: list[tuple], spill: Path, factor: float, prepare: Any = None
) -> Any:
    """Play ``ops``; ``prepare(ctx)`` (optional) runs on the new manager before the first operation."""
    ctx, session = build(cfg, budget, factory, spill)
    if prepare is not None:
        prepare(ctx)
    session.meter_factor = factor
    logger = logging.getLogger(LOGGER)
    logger.addHandler(session.checker.records)
    previous_level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        if factory:

            async def prompt() -> str:
                return FACTORY_PROMPT

            await ctx.set_system_prompt_factory(prompt)
        for op in ops:
            await session.play(op)
        await session.restored_twin()  # every session ends by resuming from its snapshot
    except RuntimeError as exc:  # the one documented failure: clear-at-least refused too often
        assert "could not be satisfied" in str(exc), exc
        assert cfg["compact_clear_at_least"] not in (None, 0, -3, "lots")
        session.failed_loud = True
        event("clear-at-least fail-loud")
    finally:
        logger.removeHandler(session.checker.records)
        logger.setLevel(previous_level)
    return ctx, session


@pytest.fixture(scope="module")
def spill_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spill")


# Regressions: shrunk counterexamples this property found (and what they broke), kept as fixed examples.
REGRESSIONS = json.loads((Path(__file__).parent / "data" / "property_regressions.json").read_text())


def with_regressions(test: Any) -> Any:
    for case in REGRESSIONS:
        cfg, budget = case["cfg"], tuple(case["budget"])
        factory = case.get("factory", cfg["compaction_strategy"] == "summary")
        factor = case.get("factor", 2.5)
        test = example(cfg=cfg, budget=budget, factory=factory, ops=case["ops"], factor=factor)(test)
    return test


@pytest.mark.slow  # long replay: `uv run pytest -m slow` (CI runs it)
@PROFILE
@with_regressions
@given(
    cfg=configs(),
    budget=BUDGETS,
    factory=st.booleans(),
    ops=sessions(),
    factor=st.sampled_from([1.0, 0.3, 2.5]),
)
def test_every_view_keeps_the_invariants(
    spill_root: Path, cfg: dict[str, Any], budget: tuple, factory: bool, ops: list[tuple], factor: float
) -> None:
    ctx, session = asyncio.run(run(cfg, budget, factory, ops, spill_root, factor))
    for name, value in ctx.fault_stats.items():
        if value:
            event(f"fault_stats: {name}")
    event(f"ladder level {ctx._sticky_level}")
    event(f"strategy {cfg['compaction_strategy']}, summaries absorbed: {bool(ctx._summary_absorbed_count)}")
    assert session.checker.views >= 1 or session.failed_loud


SUMMARY_CONFIGS = configs().map(
    lambda cfg: below_threshold({**cfg, "compaction_strategy": "summary", "compact_clear_at_least": None}, 0.5)
)


@pytest.mark.slow  # long replay: `uv run pytest -m slow` (CI runs it)
@settings(PROFILE, max_examples=max(PROFILE.max_examples // 3, 60))
@given(
    cfg=SUMMARY_CONFIGS,
    budget=st.tuples(st.just("explicit"), st.sampled_from([1_500, 3_000, 6_000])),
    factory=st.booleans(),
    ops=sessions(),
)
def test_summary_views_keep_the_invariants(
    spill_root: Path, cfg: dict[str, Any], budget: tuple, factory: bool, ops: list[tuple]
) -> None:
    """The summary strategy with budgets where a summary usually lands (the main property rarely gets there)."""
    ctx, session = asyncio.run(run(cfg, budget, factory, ops, spill_root, 1.0))
    event(f"summaries absorbed: {bool(ctx._summary_absorbed_count)}")
    event(f"summarization_failures: {ctx.fault_stats.get('summarization_failures', 0)}")
    assert session.checker.views >= 1
