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
import secrets
import stat
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from .calls import call_names, wrapped_output
from .config import TOOL_RESULT_SHAPE_HEAD, TOOL_RESULT_SHAPE_HEAD_TAIL
from .estimate import estimate_message, seq_of, wire_form
from .ladder import STUB_MIN_CHARS, content_chars, kept_whole, stub_user_message
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


def _open_spill_dir(spill_dir: str) -> int:
    """Open (creating with mode 0700 if missing) the spill directory, refusing a symlink, a directory of
    another user, and one that others may write (they could plant or swap the files the model reads)."""
    if os.path.islink(spill_dir):
        raise PermissionError(f"spill directory {spill_dir!r} is a symlink; refusing to follow it")
    if not os.path.isdir(spill_dir):
        os.makedirs(spill_dir, mode=0o700, exist_ok=True)
    # O_NOFOLLOW closes the race between the check above and the open.
    fd = os.open(spill_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    problem = _not_private(os.fstat(fd))
    if problem is not None:
        os.close(fd)
        raise PermissionError(f"spill directory {spill_dir!r} is refused: {problem}")
    return fd


def _ours(info: os.stat_result) -> bool:
    return not hasattr(os, "geteuid") or info.st_uid == os.geteuid()


def _not_private(info: os.stat_result) -> str | None:
    """Why an existing spill directory is not private to this user (others could plant or swap the files
    the model is told to read), or None. It is never chmod-ed: the caller owns it."""
    if not _ours(info):
        return f"it belongs to another user (uid {info.st_uid})"
    if info.st_mode & 0o022:
        return (
            f"its group or others may write it (mode {stat.S_IMODE(info.st_mode):o}; chmod go-w it, or name a "
            "missing directory: it is created 0700)"
        )
    return None


def spill_dir_problem(spill_dir: str) -> str | None:
    """Why spill files could not be written in ``spill_dir``, in words, or None; creates nothing.

    Usable: a writable directory (not a symlink, which the writer refuses), or a missing one whose
    nearest existing ancestor is a writable directory (the writer creates it on the first spill).
    """
    if os.path.islink(spill_dir):
        return "it is a symlink, which spill writes never follow"
    if os.path.exists(spill_dir):
        if not os.path.isdir(spill_dir):
            return "it is not a directory"
        if not os.access(spill_dir, os.W_OK | os.X_OK):
            return "the directory is not writable"
        return _not_private(os.stat(spill_dir))
    ancestor = os.path.dirname(spill_dir)
    while not os.path.lexists(ancestor) and os.path.dirname(ancestor) != ancestor:
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        return f"{ancestor} is not a directory"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"it does not exist and {ancestor} is not writable"
    return None


def _existing(name: str, dir_fd: int) -> bool:
    """True when the target is already written; a symlink there is refused, never followed, and so is a
    file of another user."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode) or not _ours(info):
        raise PermissionError(f"spill target {name!r} exists and is not a regular file of this user; refusing")
    return True


def write_spill(path: str, content: str) -> None:
    """Write ``content`` to ``path`` atomically (temp file in the same directory, then rename), mode 0600.

    Idempotent: an existing regular file is the same content (the name is its hash). Raises OSError
    (PermissionError for a refused symlink) so the caller can log and count the failure.
    """
    directory, name = os.path.split(path)
    dir_fd = _open_spill_dir(directory)
    try:
        if _existing(name, dir_fd):
            return
        temp = f".{name}.{secrets.token_hex(6)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = os.open(temp, flags, 0o600, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(content.encode("utf-8", errors="replace"))
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(temp, dir_fd=dir_fd)
            except OSError:
                pass
            raise
    finally:
        os.close(dir_fd)


class ToolResultMixin:
    """Tool-result and stub rewrites of SimpleContextManager, memoized per ``_seq`` (state on the manager)."""

    def _tool_result_settings(self) -> ToolResultSettings:
        return ToolResultSettings(
            truncate_chars=self.truncate_chars,
            budget_tokens=self.tool_result_budget_tokens,
            shape=self.tool_result_shape,
            budget_by_tool=tuple(sorted((self.tool_result_budget_by_tool or {}).items())),
            exempt_tools=frozenset(self.tool_result_exempt_tools or ()),
            spill_dir=self.tool_result_spill_dir,
            counter=self._budget_counter(),
        )

    def _budget_counter(self) -> Any:
        """The counter token budgets are measured with; None keeps the estimator's 4 chars per token."""
        counter = self._counts().counter
        return None if getattr(counter, "name", COUNTER_ESTIMATE) == COUNTER_ESTIMATE else counter

    def _reset_tool_names(self) -> None:
        self._tool_name_by_call_id: dict[str, str] = {}
        self._tool_name_by_seq: dict[int, str] = {}  # a result's _seq -> the name its own call gave
        self._tool_names_harvested = 0  # messages read so far

    def _needs_tool_names(self) -> bool:
        """Only per-tool budgets and exemptions read tool names (the original harvests only then)."""
        return bool(self.tool_result_budget_by_tool or self.tool_result_exempt_tools)

    def _harvest_tool_names(self) -> None:
        """Read the names of calls stored since the last harvest, in order, when a per-tool knob needs them.

        Each result is tied to the name its own group's call gave (the latest call with its id), so a
        reused id cannot give an older result another tool's rules, now or after set_messages().
        """
        if not self._needs_tool_names():
            return
        if self._tool_names_harvested > len(self.messages):  # the list was replaced: read it again
            self._reset_tool_names()
        for message in self.messages[self._tool_names_harvested :]:
            role = message.get("role")
            if role == "assistant":
                self._tool_name_by_call_id.update(call_names(message))
            elif role == "tool" and (seq := seq_of(message)) is not None:
                name = self._tool_name_by_call_id.get(message.get("tool_call_id"))
                if name is not None:
                    self._tool_name_by_seq[seq] = name
        self._tool_names_harvested = len(self.messages)

    def _is_exempt_result(self, message: Message) -> bool:
        """A result of a tool in ``tool_result_exempt_tools``: no rewrite shortens it (the last rung's clip
        neither), so it counts whole in the floor."""
        if not self.tool_result_exempt_tools or message.get("role") != "tool":
            return False
        self._harvest_tool_names()
        name = tool_name_of(message, self._tool_name_by_call_id, self._tool_name_by_seq)
        return name is not None and name in self._tool_result_settings().exempt_tools

    def _truncate_tool_result(self, message: Message) -> Message:
        """The truncated form of a tool result (cached per ``_seq`` and settings), or the message itself."""
        settings = self._tool_result_settings()
        return self._derive(message, "truncated", settings, lambda: self._make_truncated(message, settings))

    def _clip_tool_result(self, message: Message, tokens: int) -> Message:
        """The last rung's clip of a result (floor.py): its head and tail within about ``tokens``, whatever
        the tool-result knobs say (exempt tools stay whole); cached per ``_seq`` and size."""
        settings = replace(
            self._tool_result_settings(), budget_tokens=tokens, budget_by_tool=(), shape=TOOL_RESULT_SHAPE_HEAD_TAIL
        )
        return self._derive(message, "clipped", settings, lambda: self._make_clipped(message, settings))

    def _make_clipped(self, message: Message, settings: ToolResultSettings) -> Message:
        """A wrapped result object (loop-streaming's) keeps its shape: its output is clipped inside it."""
        content = message.get("content")
        wrapped = wrapped_output(content) if isinstance(content, str) else None
        if wrapped is None:
            return self._make_truncated(message, settings)
        value, output = wrapped
        inner = self._make_truncated({**message, "content": output}, settings)
        if inner.get("content") is output:
            return message
        return {**inner, "content": json.dumps({**value, "output": inner["content"]})}

    def _make_truncated(self, message: Message, settings: ToolResultSettings) -> Message:
        self._harvest_tool_names()
        name = tool_name_of(message, self._tool_name_by_call_id, self._tool_name_by_seq)
        content = self._ingress.source(message).get("content")  # a spill file holds the full result
        spill_file = None
        if settings.spill_dir and isinstance(content, str):
            spill_file = spill_path(settings.spill_dir, seq_of(message), content)
        truncated = truncate_tool_result(message, settings, name, spill_file, self._counts().count)
        if truncated is not message and spill_file is not None:
            self._spill(spill_file, content)  # the pointer does not depend on the write succeeding
        return truncated

    def _spill(self, path: str, content: str) -> None:
        """Write the full result once; a failure is counted every time and logged once per directory
        (a bad directory was already named at mount), the pointer stays the same."""
        if path in self._spilled_paths:
            return
        try:
            write_spill(path, content)
            self._spilled_paths.add(path)
        except (OSError, ValueError) as exc:  # ValueError: a path the OS cannot take (NUL, bad encoding)
            self._fault_counts["spill_write_failures"] += 1
            directory = os.path.dirname(path)
            if self._spill_failure_reported != directory:
                self._spill_failure_reported = directory
                logger.warning(
                    "context-simple: spill write failed for %s: %s (later failures in this directory are "
                    "counted in fault_stats['spill_write_failures'], not logged)",
                    path,
                    exc,
                )

    def _stub_user_message(self, message: Message) -> Message:
        """The stub of a long user message; the message itself when a stub would save nothing or drop a
        block that is not text (the ladder's own rule, ladder._stubbable; today's original does the same)."""
        content = message.get("content")
        if not isinstance(content, str | list) or kept_whole(message) or content_chars(content) <= STUB_MIN_CHARS:
            return message
        return self._derive(message, "stubbed", None, lambda: stub_user_message(message))

    def _derive(self, message: Message, kind: str, settings: Any, make: Callable[[], Message]) -> Message:
        """Memoize a rewrite of a stored message by (``_seq``, kind) while source and settings hold."""
        seq = seq_of(message)
        if seq is None:
            return make()
        entry = self._derived.get((seq, kind))
        if entry is not None and entry[0] is message and entry[1] == settings:
            return entry[2]
        derived = make()
        self._derived[(seq, kind)] = (message, settings, derived)
        return derived
