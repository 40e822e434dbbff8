"""Tool-result truncation: legacy head-only, token budgets, head+tail shape, exemptions, spill.

Everything here works on characters, never lines, so a single 20 MB line costs time linear in its
size. The replacement text is a pure function of the content and the settings: sticky decisions
re-derive it on every request, and a byte that changed would cost a cold prompt-cache rebuild.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from .calls import call_names, wrapped_output
from .config import TOOL_RESULT_SHAPE_HEAD, TOOL_RESULT_SHAPE_HEAD_TAIL
from .estimate import estimate_message, seq_of, wire_form
from .spill import spill_dir_problem as spill_dir_problem
from .spill import write_spill
from .sticky import STUB_MIN_CHARS, content_chars, kept_whole, stub_user_message
from .token_counter import COUNTER_ESTIMATE

Message = dict[str, Any]

logger = logging.getLogger("amplifier_module_context_simple")

TOOL_RESULT_CHARS_PER_TOKEN = 4
# Content at least twice the replacement plus this margin always saves tokens (even if every character
# of the kept part doubled in the repr); shorter content is counted before and after.
_SURE_SAVING_CHARS = 256
LEGACY_RECOVERY = "call tool again if needed"


@dataclass(frozen=True)
class ToolResultSettings:
    """The live tool-result knobs of one request (hashable: part of the derived-message cache key)."""

    truncate_chars: int = 250
    budget_tokens: int | None = None
    shape: str = TOOL_RESULT_SHAPE_HEAD
    budget_by_tool: tuple[tuple[str, int], ...] = ()
    exempt_tools: frozenset[str] = frozenset()
    spill_dir: str | None = None
    # The configured token counter; None (the estimator) converts token budgets at 4 chars per token.
    counter: Callable[[dict[str, Any]], int] | None = None


def _token_budget(tool_name: str | None, settings: ToolResultSettings) -> int | None:
    """The token budget for one tool's results (per-tool first), or None for the legacy char budget."""
    per_tool = dict(settings.budget_by_tool)
    if tool_name is not None and tool_name in per_tool:
        return per_tool[tool_name]
    return settings.budget_tokens


def resolve_budget(tool_name: str | None, settings: ToolResultSettings) -> tuple[int, str]:
    """(budget in chars, shape) at the estimator's 4 chars per token: per-tool budget, then the global
    token budget, then legacy ``truncate_chars`` (always head-only)."""
    tokens = _token_budget(tool_name, settings)
    if tokens is None:
        return settings.truncate_chars, TOOL_RESULT_SHAPE_HEAD
    return tokens * TOOL_RESULT_CHARS_PER_TOKEN, settings.shape


# A tokenizer's cost on one huge unbroken "word" can grow faster than its length; counting in fixed
# slices keeps the cost linear in the content's size for any counter.
_COUNT_SLICE_CHARS = 16_384


def text_tokens(text: str, counter: Callable[[dict[str, Any]], int]) -> int:
    """What ``counter`` charges for ``text`` as a tool result's content, the message framing excluded."""
    framing = counter({"role": "tool", "content": ""})
    return sum(
        max(0, counter({"role": "tool", "content": text[i : i + _COUNT_SLICE_CHARS]}) - framing)
        for i in range(0, len(text), _COUNT_SLICE_CHARS)
    )


def budget_chars(content: str, tool_name: str | None, settings: ToolResultSettings) -> tuple[int, str, int]:
    """(chars to keep, shape, original tokens) for one result, counting its content at most once.

    With a configured counter a token budget keeps the content's own chars-per-token rate, so a budget
    means the same tokens the ladder counts.
    """
    chars, shape = resolve_budget(tool_name, settings)
    tokens = _token_budget(tool_name, settings)
    if tokens is None or settings.counter is None:
        return chars, shape, len(content) // 4
    counted = text_tokens(content, settings.counter)
    if counted <= tokens:
        return len(content), shape, counted
    return tokens * len(content) // counted, shape, counted


def tool_name_of(
    message: dict[str, Any], names_by_call_id: dict[str, str], names_by_seq: dict[int, str] | None = None
) -> str | None:
    """The tool that produced a result: its ``name``, ``metadata.tool_name``, or its call's name.

    The call's name is looked up by the result's own ``_seq`` first (the call of its group), then by
    id: providers that number calls per turn (``call_0``, ...) reuse ids across groups.
    """
    name = message.get("name")
    if isinstance(name, str) and name:
        return name
    metadata = message.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("tool_name"), str):
        return metadata["tool_name"]
    seq = seq_of(message)
    if names_by_seq and seq in names_by_seq:
        return names_by_seq[seq]
    return names_by_call_id.get(message.get("tool_call_id"))


def content_digest(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8", errors="replace")).hexdigest()[:16]


def spill_path(spill_dir: str, seq: int | None, content: str) -> str:
    """Content-addressed file name; nothing in it comes from tool output or tool names."""
    digest = content_digest(content)
    name = f"tool-result-{seq:06d}-{digest}.txt" if seq is not None else f"tool-result-{digest}.txt"
    return os.path.join(spill_dir, name)


def format_truncated(
    content: str, budget_chars: int, shape: str, recovery: str, original_tokens: int | None = None
) -> str:
    """The replacement text: header, then the head (legacy) or head and tail with a marker."""
    original_tokens = len(content) // 4 if original_tokens is None else original_tokens
    header = f"[truncated: ~{original_tokens:,} tokens - {recovery}]"
    if shape != TOOL_RESULT_SHAPE_HEAD_TAIL:
        return f"{header} {content[:budget_chars]}..."
    head_chars = budget_chars // 2
    tail_chars = budget_chars - head_chars
    tail = content[-tail_chars:] if tail_chars > 0 else ""
    omitted = len(content) - head_chars - len(tail)
    return f"{header} {content[:head_chars]}\n...[{omitted:,} chars omitted]...\n{tail}"


def truncate_tool_result(
    message: dict[str, Any],
    settings: ToolResultSettings,
    tool_name: str | None,
    spill_file: str | None = None,
    count: Callable[[dict[str, Any]], int] | None = None,
) -> dict[str, Any]:
    """A truncated copy of a tool result, or the message itself (by identity) when it stays whole.

    ``count`` sizes a message as the ladder does (default: the settings' counter on the wire form).
    """
    content = message.get("content")
    if not isinstance(content, str) or (tool_name is not None and tool_name in settings.exempt_tools):
        return message
    keep, shape, original = budget_chars(content, tool_name, settings)
    if len(content) <= keep:
        return message
    recovery = f"read {spill_file} for the full result" if spill_file else LEGACY_RECOVERY
    formatted = format_truncated(content, keep, shape, recovery, original)
    truncated = {**message, "content": formatted, "_truncated": True, "_original_tokens": original}
    if len(content) < 2 * len(formatted) + _SURE_SAVING_CHARS:
        # Near the budget the header and markers can outweigh what is cut (260 chars: 93 -> 115
        # tokens): keep the result whole, so no truncation is recorded either.
        if count is None:
            counter = settings.counter or estimate_message
            count = lambda m: counter(wire_form(m))  # noqa: E731
        if count(truncated) >= count(message):
            return message
    return truncated


class ResultInputs(NamedTuple):
    """What a rewrite of one tool result needs from its caller (the manager builds it per request)."""

    settings: ToolResultSettings
    messages: list[Message]  # the stored history: the tool names of its calls
    names_needed: bool  # a per-tool budget or exemption reads tool names (the original harvests only then)
    source: Callable[[Message], Message]  # the stored result a view copy was clipped from (ingress.py)
    count: Callable[[Message], int]
    faults: Counter[str]


def budget_counter(counter: Any) -> Any:
    """The counter token budgets are measured with; None keeps the estimator's 4 chars per token."""
    return None if getattr(counter, "name", COUNTER_ESTIMATE) == COUNTER_ESTIMATE else counter


class ToolResults:
    """Tool-result and stub rewrites, memoized per ``_seq`` (``derived``), the tool names read from the
    history, and the spill files written. Every method takes what it reads (:class:`ResultInputs`)."""

    def __init__(self) -> None:
        self.derived: dict[tuple[int, str], tuple[Message, Any, Message]] = {}
        self.spilled_paths: set[str] = set()
        self.spill_failure_reported: str | None = None  # the spill directory whose write failures were reported
        self.reset_names()

    def reset_names(self) -> None:
        self.names_by_call_id: dict[str, str] = {}
        self.names_by_seq: dict[int, str] = {}  # a result's _seq -> the name its own call gave
        self.names_harvested = 0  # messages read so far

    def harvest(self, messages: list[Message], needed: bool) -> None:
        """Read the names of calls stored since the last harvest, in order, when a per-tool knob needs them.

        Each result is tied to the name its own group's call gave (the latest call with its id), so a
        reused id cannot give an older result another tool's rules, now or after set_messages().
        """
        if not needed:
            return
        if self.names_harvested > len(messages):  # the list was replaced: read it again
            self.reset_names()
        for message in messages[self.names_harvested :]:
            role = message.get("role")
            if role == "assistant":
                self.names_by_call_id.update(call_names(message))
            elif role == "tool" and (seq := seq_of(message)) is not None:
                name = self.names_by_call_id.get(message.get("tool_call_id"))
                if name is not None:
                    self.names_by_seq[seq] = name
        self.names_harvested = len(messages)

    def is_exempt(self, message: Message, inputs: ResultInputs) -> bool:
        """A result of a tool in ``tool_result_exempt_tools``: no rewrite shortens it (the last rung's clip
        neither), so it counts whole in the floor."""
        if not inputs.settings.exempt_tools or message.get("role") != "tool":
            return False
        self.harvest(inputs.messages, inputs.names_needed)
        name = tool_name_of(message, self.names_by_call_id, self.names_by_seq)
        return name is not None and name in inputs.settings.exempt_tools

    def truncate(self, message: Message, inputs: ResultInputs) -> Message:
        """The truncated form of a tool result (cached per ``_seq`` and settings), or the message itself."""
        settings = inputs.settings
        return self.derive(message, "truncated", settings, lambda: self._make_truncated(message, settings, inputs))

    def clip(self, message: Message, tokens: int, inputs: ResultInputs) -> Message:
        """The last rung's clip of a result (floor.py): its head and tail within about ``tokens``, whatever
        the tool-result knobs say (exempt tools stay whole); cached per ``_seq`` and size."""
        settings = replace(inputs.settings, budget_tokens=tokens, budget_by_tool=(), shape=TOOL_RESULT_SHAPE_HEAD_TAIL)
        return self.derive(message, "clipped", settings, lambda: self._make_clipped(message, settings, inputs))

    def _make_clipped(self, message: Message, settings: ToolResultSettings, inputs: ResultInputs) -> Message:
        """A wrapped result object (loop-streaming's) keeps its shape: its output is clipped inside it."""
        content = message.get("content")
        wrapped = wrapped_output(content) if isinstance(content, str) else None
        if wrapped is None:
            return self._make_truncated(message, settings, inputs)
        value, output = wrapped
        inner = self._make_truncated({**message, "content": output}, settings, inputs)
        if inner.get("content") is output:
            return message
        return {**inner, "content": json.dumps({**value, "output": inner["content"]})}

    def _make_truncated(self, message: Message, settings: ToolResultSettings, inputs: ResultInputs) -> Message:
        self.harvest(inputs.messages, inputs.names_needed)
        name = tool_name_of(message, self.names_by_call_id, self.names_by_seq)
        content = inputs.source(message).get("content")  # a spill file holds the full result
        spill_file = None
        if settings.spill_dir and isinstance(content, str):
            spill_file = spill_path(settings.spill_dir, seq_of(message), content)
        truncated = truncate_tool_result(message, settings, name, spill_file, inputs.count)
        if truncated is not message and spill_file is not None:
            self._spill(spill_file, content, inputs.faults)  # the pointer does not depend on the write succeeding
        return truncated

    def _spill(self, path: str, content: str, faults: Counter[str]) -> None:
        """Write the full result once; a failure is counted every time and logged once per directory
        (a bad directory was already named at mount), the pointer stays the same."""
        if path in self.spilled_paths:
            return
        try:
            write_spill(path, content)
            self.spilled_paths.add(path)
        except (OSError, ValueError) as exc:  # ValueError: a path the OS cannot take (NUL, bad encoding)
            faults["spill_write_failures"] += 1
            directory = os.path.dirname(path)
            if self.spill_failure_reported != directory:
                self.spill_failure_reported = directory
                logger.warning(
                    "context-simple: spill write failed for %s: %s (later failures in this directory are "
                    "counted in fault_stats['spill_write_failures'], not logged)",
                    path,
                    exc,
                )

    def stub(self, message: Message) -> Message:
        """The stub of a long user message; the message itself when a stub would save nothing or drop a
        block that is not text (the ladder's own rule, ladder._stubbable; today's original does the same)."""
        content = message.get("content")
        if not isinstance(content, str | list) or kept_whole(message) or content_chars(content) <= STUB_MIN_CHARS:
            return message
        return self.derive(message, "stubbed", None, lambda: stub_user_message(message))

    def derive(self, message: Message, kind: str, settings: Any, make: Callable[[], Message]) -> Message:
        """Memoize a rewrite of a stored message by (``_seq``, kind) while source and settings hold."""
        seq = seq_of(message)
        if seq is None:
            return make()
        entry = self.derived.get((seq, kind))
        if entry is not None and entry[0] is message and entry[1] == settings:
            return entry[2]
        derived = make()
        self.derived[(seq, kind)] = (message, settings, derived)
        return derived
