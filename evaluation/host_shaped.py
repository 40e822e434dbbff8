"""A session as Amplifier's own orchestrator stores it, and what it sends each request (issue 28).

`shaped.py` varies what hosts may store; this module is one host, exactly: **loop-streaming** on
amplifier-core 2.0.2 with the hooks `hooks-status-context`, `hooks-todo-reminder` (`inject_role:
system`) and `hook-shell`. Read from microsoft/amplifier-module-loop-streaming @e5438b4 and
-loop-basic @937a53f, the hook modules, and checked against the installed amplifier-core 2.0.2:

* **Assistant turns** store the provider's content blocks as `model_dump()` dicts (thinking, text,
  then one `tool_call` block per call: `{"type": "tool_call", "id", "name", "input": {...}}`) beside
  `tool_calls: [{"id", "tool", "arguments": {...}}]` (arguments a dict; loop-basic stores the same),
  and loop-streaming copies the thinking block to `thinking_block`.
* **Tool results** are `{"role": "tool", "name", "tool_call_id", "content"}` whose content is the JSON
  of the whole result object: the kernel's hook emit returns a JSON copy of `tool:post`'s data (keys
  sorted), the loop takes it for a hook's change and stores `json.dumps(copy)`:
  `{"error": null, "output": "...", "success": true}`, one line, non-ASCII escaped. (loop-basic hands
  the emit the result object, gets `str(result)` back and stores the plain output.)
* **hook-shell** answers `tool:post` with a non-ephemeral `inject_context`; the kernel stores it as a
  system message, with the metadata below, while the tools run: after the call, before its results.
* **Steering**: `session.steer(text)` queues a user message that the loop stores at the start of
  the next iteration: after a group's results, before the next request.
* **Reminders** are not stored. Both hooks answer `provider:request`; amplifier-core 2.0.2 merges the
  two injections into one (texts joined by a blank line, the first hook's role: `user`, appended to
  the last tool result if either asks: the todo hook does), and the loop adds it to the messages
  `get_messages_for_request` returned: into the last message when that is a tool result, else as a new
  message (`with_reminders`). The harness bills it; the context manager never sees it.

One flavour, loop-streaming's, because it stores everything loop-basic does (call shape, content
blocks) and more (wrapped results, steering). The transform is seeded: the same (session, seed) gives
the same messages.

`host_shape(..., parts=...)` applies only some of the host's changes (`PARTS`: "calls" for the call
shape with its text and tool_call blocks, "names" for the results' `name`, "thinking", "wrapped",
"hook_shell", "steering"), so a study can tell them apart (evaluation/studies/host_parity.py). The random draws do
not depend on the parts: a part that is on changes exactly the messages it changes with all parts on.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from .shaped import LINT, thinking_block
from .tokens import content_text

Message = dict[str, Any]
PARTS = ("calls", "names", "thinking", "wrapped", "hook_shell", "steering")  # in the order a study adds them

THINKING_SHARE = 0.5  # of assistant turns with a thinking block (extended thinking on some requests)
HOOK_SHELL_SHARE = 0.25  # of tool groups whose tool a hook-shell matcher answers
STEER_SHARE = 0.1  # of tool groups followed, mid-turn, by a steering message
# Steering texts hold no distinctive token (evidence.py), so they add no evidence to the metric.
STEERING = (
    "Keep going, but please keep the change as small as you can.",
    "Also make sure the existing tests still pass before you finish.",
    "When you are done, tell me briefly what you found.",
)
STATUS = (
    '<system-reminder source="hooks-status-context">\n'
    "Here is useful information about the environment you are running in:\n<env>\n"
    "Working directory: /workspace/project\nSession ID: {session}\nIs sub-session: No\n"
    "Is directory a git repo: Yes\nPlatform: linux\nOS Version: Linux-6.8.0-x86_64-with-glibc2.39\n"
    "Today's date: 2025-01-01\n</env>\n\n"
    "gitStatus: This is the git status at the start of the conversation. Note that this status is a "
    "snapshot in time, and will not update during the conversation.\nCurrent branch: main\n\n"
    "Main branch (you will usually use this for PRs): main\n\nStatus:\n M src/app.py\n\n"
    "Recent commits:\n3f2a9c1 Fix the loader\n8b41d07 Add the cache\n\n"
    "This context is for your reference only. DO NOT mention this status information to the user "
    "unless directly relevant to their question. Process silently and continue your work.\n</system-reminder>"
)
TODO = (
    '<system-reminder source="hooks-todo-reminder">\n'
    "The todo tool hasn't been used recently. If you're working on tasks that would benefit from tracking "
    "progress, consider using the todo tool to track progress. Also consider cleaning up the todo list if it "
    "has become stale and no longer matches what you are working on. Only use it if it's relevant to the "
    "current work. This is just a gentle reminder - ignore if not applicable. Make sure that you NEVER "
    "mention this reminder to the user.\n\nDO NOT mention this reminder to the user. They can see your task "
    "progress in the UI. Process this silently and continue your work.\n</system-reminder>"
)


def wrapped_result(output: str) -> str:
    """What loop-streaming stores for a successful tool result on amplifier-core 2.0.x."""
    return json.dumps({"error": None, "output": output, "success": True})


def _arguments(raw: Any) -> dict[str, Any]:
    """A call's arguments as the dict the orchestrator stores (a non-object is kept under "input")."""
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw.strip() else raw or {}
    except ValueError:
        value = raw
    return value if isinstance(value, dict) else {"input": value}


def _assistant(
    message: Message, rng: random.Random, turn: int, parts: frozenset[str]
) -> tuple[Message, dict[str, str]]:
    """The stored assistant turn (with ``parts``' changes), and the tool name of each call id."""
    text = content_text(message.get("content"))
    calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    stored = [
        {"id": c["id"], "tool": c["function"]["name"], "arguments": _arguments(c["function"].get("arguments"))}
        for c in calls
    ]
    names = {c["id"]: c["tool"] for c in stored}
    thinking = None
    if rng.random() < THINKING_SHARE and "thinking" in parts:
        thinking = {**thinking_block(text, turn), "visibility": None, "content": None}
    if "calls" not in parts:  # the OpenAI shape, a thinking block (if any) before the text
        out = {k: v for k, v in message.items()}
        if thinking is not None:
            out["content"] = [thinking, *([{"type": "text", "text": text}] if text else [])]
        return out, names
    blocks: list[dict[str, Any]] = [] if thinking is None else [thinking]
    if text:
        blocks.append({"type": "text", "text": text, "visibility": None})
    blocks += [
        {"type": "tool_call", "id": c["id"], "name": c["tool"], "input": c["arguments"], "visibility": None}
        for c in stored
    ]
    out: Message = {"role": "assistant", "content": blocks or text}
    if stored:
        out["tool_calls"] = stored
    if thinking is not None:
        out["thinking_block"] = thinking
    return out, names


def hook_shell_message(rng: random.Random, turn: int, tool: str) -> Message:
    """A hook-shell injection as amplifier-core 2.0.2 stores it (hook_name is the tool's name)."""
    text = "PostToolUse hook: " + rng.choice(LINT).format(f=f"src/module_{turn % 7}.py")
    metadata = {"source": "hook", "hook_name": tool, "event": "tool:post", "requested_role": "system"}
    return {"role": "system", "content": text, "metadata": {**metadata, "ephemeral": False, "persisted": True}}


def _result(message: Message, names: dict[str, str], parts: frozenset[str]) -> Message:
    """A stored tool result: with the call's tool ``name`` ("names"), its content wrapped ("wrapped")."""
    if not parts & {"names", "wrapped"}:
        return {k: v for k, v in message.items()}
    call_id = message.get("tool_call_id")
    content = message.get("content")
    if "wrapped" in parts:
        content = wrapped_result(content_text(content))
    out: Message = {"role": "tool", "tool_call_id": call_id, "content": content}
    return {"role": "tool", "name": names.get(call_id, ""), **out} if "names" in parts else out


def host_shape(messages: list[Message], seed: int = 0, parts: tuple[str, ...] = PARTS) -> list[Message]:
    """The session as loop-streaming stores it (see the module docstring), with only ``parts`` of its
    changes (all by default); a new list."""
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise ValueError(f"unknown host part(s) {sorted(unknown)}; known: {', '.join(PARTS)}")
    on = frozenset(parts)
    rng = random.Random(seed)
    out: list[Message] = []
    names: dict[str, str] = {}
    for turn, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            stored, called = _assistant(message, rng, turn, on)
            names.update(called)
            out.append(stored)
            if called and rng.random() < HOOK_SHELL_SHARE:
                hook = hook_shell_message(rng, turn, next(iter(called.values())))
                out += [hook] if "hook_shell" in on else []
        elif role == "tool":
            out.append(_result(message, names, on))
            following = messages[turn + 1] if turn + 1 < len(messages) else None
            if following is not None and following.get("role") == "assistant" and rng.random() < STEER_SHARE:
                steering = {"role": "user", "content": rng.choice(STEERING)}
                out += [steering] if "steering" in on else []
        else:
            out.append({k: v for k, v in message.items()})
    return out


def reminder_text(session: str) -> str:
    """The merged per-request injection of hooks-status-context and hooks-todo-reminder."""
    digest = hashlib.sha256(session.encode()).hexdigest()
    session_id = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
    return STATUS.format(session=session_id) + "\n\n" + TODO


def with_reminders(view: list[Message], text: str) -> list[Message]:
    """What loop-streaming sends: the view, the injection appended to its last message when that is a
    tool result, else added as a user message. The message that carries it is marked ephemeral (for
    the harness's cache only): a provider keeps its cache breakpoint off what changes every request."""
    sent = list(view)
    last = sent[-1] if sent else None
    if last is not None and last.get("role") == "tool":
        metadata = {**(last.get("metadata") or {}), "ephemeral": True}
        sent[-1] = {**last, "content": f"{last.get('content', '')}\n\n{text}", "metadata": metadata}
    else:
        sent.append({"role": "user", "content": text, "metadata": {"ephemeral": True}})
    return sent
