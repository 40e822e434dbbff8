"""Workloads: real transcripts in the documented JSONL format, plus generated planted-fact scenarios.

Every file is checked in full before anything runs: a problem is a `WorkloadError` whose message is
one line naming the file, the line and what is wrong. Anthropic-style `tool_use` / `tool_result`
content blocks are converted to the OpenAI-style shape the module expects (see `blocks.py`).
"""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .blocks import convert_blocks

SHIPPED_DIR = Path(__file__).resolve().parent / "workloads"
ROLES = ("system", "developer", "user", "assistant", "tool")


class WorkloadError(ValueError):
    """A workload that cannot be replayed; the message is one line: `file[:line]: problem`."""


@dataclass
class Workload:
    """A session to replay: its messages and, for scenarios, the facts to probe."""

    name: str
    messages: list[dict]
    facts: dict[str, str] = field(default_factory=dict)
    retracted: str | None = None
    probe_requests: list[int] = field(default_factory=list)
    source: str = ""
    corrections: list[str] = field(default_factory=list)  # user messages whose verbatim survival is probed
    host_reminders: bool = False  # the host adds its per-request reminders to what is billed (host_shaped.py)
    recall_probe: bool = True  # look missed evidence up with context_recall (a column only the main table shows)
    sized_by: list[dict] | None = None  # the messages whose size sets the window (default: these)
    context_window: int | None = None  # a fixed provider window instead of one sized from the session
    max_output_tokens: int | None = None  # with context_window: the provider's max_output_tokens


def read_messages(path: str | Path) -> list[dict]:
    """The checked messages of one .jsonl session, every key kept (Anthropic blocks converted)."""
    path = Path(path)
    lines = _lines(path)
    messages: list[tuple[int, dict]] = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        if not messages and line.lstrip().startswith("["):
            raise WorkloadError(f"{where}: a JSON array; expected JSONL, one message object per line")
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"{where}: not valid JSON: {exc.msg} (column {exc.colno})") from None
        check_message(obj, where)
        try:
            converted = convert_blocks(obj)
        except ValueError as exc:  # a block problem, said without the location
            raise WorkloadError(f"{where}: {exc}") from None
        messages += [(n, m) for m in converted]
    check_session(path, messages)
    return [m for _, m in messages]


def _lines(path: Path) -> list[str]:
    """The file's lines (split on newlines only: JSON strings may hold U+2028), decoded as UTF-8."""
    if not path.exists():
        raise WorkloadError(f"{path}: no such file or folder")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    if raw.startswith(codecs.BOM_UTF8):
        raise WorkloadError(f"{path}:1: starts with a UTF-8 byte-order mark (BOM); save it as UTF-8 without BOM")
    lines = raw.split(b"\n")
    for n, line in enumerate(lines, start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = f"byte 0x{line[exc.start]:02x} at column {exc.start + 1}"
            raise WorkloadError(f"{path}:{n}: not UTF-8 ({bad})") from None
    if not raw.strip():
        what = "empty file" if not raw else "only whitespace"
        raise WorkloadError(f"{path}: {what}; expected one JSON chat message per line")
    return [line.decode("utf-8").rstrip("\r") for line in lines]


def check_message(obj: Any, where: str) -> dict:
    """Refuse what the driver or the module could not take; returns the message."""
    if isinstance(obj, list):
        raise WorkloadError(f"{where}: a JSON array; expected one message object per line")
    if not isinstance(obj, dict):
        raise WorkloadError(f"{where}: a {_kind(obj)}, not a message object")
    role = obj.get("role")
    if role not in ROLES:
        raise WorkloadError(f"{where}: role {role!r} is not one of {', '.join(ROLES)}")
    content = obj.get("content")
    if content is not None and not isinstance(content, str | list):
        raise WorkloadError(f"{where}: content is a {_kind(content)}; expected a string or a list of content blocks")
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict | str):
            raise WorkloadError(f"{where}: a content block is a {_kind(block)}; expected an object or a string")
    _check_tool_calls(obj, where)
    if role == "tool" and not isinstance(obj.get("tool_call_id"), str):
        raise WorkloadError(f"{where}: a tool message needs a string tool_call_id")
    return obj


def _check_tool_calls(obj: dict, where: str) -> None:
    calls = obj.get("tool_calls")
    if calls is None:
        return
    if not isinstance(calls, list) or obj["role"] != "assistant":
        raise WorkloadError(f"{where}: tool_calls must be a list on an assistant message")
    for call in calls:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(call.get("id"), str) or not isinstance(fn.get("name"), str):
            raise WorkloadError(f"{where}: a tool call needs an 'id' and a 'function' with a 'name'")
        if not isinstance(fn.get("arguments", ""), str):
            raise WorkloadError(f"{where}: tool call {call['id']!r}: 'arguments' must be a JSON string")


def check_session(path: Path, messages: list[tuple[int, dict]]) -> None:
    """A session must have a request to replay and answer only calls it made."""
    if not messages:
        raise WorkloadError(f"{path}: only blank lines; expected one JSON chat message per line")
    calls: set[str] = set()
    for n, msg in messages:
        calls.update(c["id"] for c in msg.get("tool_calls") or [])
        if msg["role"] == "tool" and msg["tool_call_id"] not in calls:
            call = msg["tool_call_id"]
            raise WorkloadError(f"{path}:{n}: tool result for call id {call!r}, which no earlier message made")
    if not any(msg["role"] == "assistant" for _, msg in messages):
        raise WorkloadError(
            f"{path}: no assistant message, so nothing to replay (a request is made before each assistant message)"
        )


def _kind(value: Any) -> str:
    names = {dict: "JSON object", list: "JSON array", str: "string", bool: "boolean", int: "number", float: "number"}
    return names.get(type(value), type(value).__name__)


def load_jsonl(path: Path) -> Workload:
    """Load one session: one OpenAI-chat message per line (blank lines skipped)."""
    messages = [_clean(m) for m in read_messages(path)]
    return Workload(name=Path(path).stem, messages=messages, source=str(path))


def session_files(path: str | Path) -> list[Path]:
    """A .jsonl file, or every .jsonl file in a folder (sorted by name)."""
    p = Path(path)
    if not p.exists():
        raise WorkloadError(f"{p}: no such file or folder")
    files = sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
    if not files:
        raise WorkloadError(f"{p}: a folder with no .jsonl sessions")
    return files


def load_path(path: str | Path) -> list[Workload]:
    """Load a .jsonl file, or every .jsonl file in a folder (sorted by name)."""
    return [load_jsonl(f) for f in session_files(path)]


def shipped() -> list[Workload]:
    """The real sessions shipped with the harness."""
    return load_path(SHIPPED_DIR)


def _clean(msg: dict) -> dict:
    out = {"role": msg["role"], "content": msg.get("content") if msg.get("content") is not None else ""}
    for key in ("tool_calls", "tool_call_id", "name"):
        if msg.get(key):
            out[key] = msg[key]
    return out
