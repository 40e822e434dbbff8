"""Amplifier-shaped variants of transcripts: what real hosts store, derived deterministically (issue 18).

The shipped transcripts are clean: string content, no hook messages. amplifier-core hosts store more.
:func:`shape` rewrites a session with a seeded random generator, so the same (session, seed) always
gives the same messages:

* after a share of the tool calls, a **system-role hook injection** (`metadata.source == "hook"`,
  a `<system-reminder>` envelope, as `HookResult.context_injection_role` defaults to "system"):
  about half stored between the call and its results (loop-basic's order for `tool:post`), the
  rest after the group;
* **list-of-blocks content** on some user messages and tool results (`[{"type": "text", ...}]`);
* a **developer-role instruction** after the system prompt on some sessions;
* **thinking blocks** with signatures on assistant turns (Anthropic extended thinking), the text
  kept as a text block after them;
* **call ids reused per turn** (`call_0`, `call_1`, ... in every assistant turn).
"""

from __future__ import annotations

import copy
import hashlib
import random
from typing import Any

Message = dict[str, Any]

INJECTION_SHARE = 0.4  # of tool groups followed by a hook injection
INSIDE_SHARE = 0.5  # of those injections, stored between the call and its results
BLOCK_SHARE = 0.3  # of user messages and tool results turned into text blocks
THINKING_SHARE = 0.5  # of assistant turns that carry a thinking block
DEVELOPER_SHARE = 0.5  # of sessions with a developer-role instruction
LINT = ("3 warnings in {f}", "tests still failing: {f}", "reminder: keep changes minimal", "todo list: 2 open")


def _stamp(like: Message) -> dict[str, Any]:
    """The neighbour's timestamp, if it has one: a replayed session stays byte-reproducible."""
    stamp = (like.get("metadata") or {}).get("timestamp")
    return {} if stamp is None else {"timestamp": stamp}


def injection(rng: random.Random, turn: int, like: Message) -> Message:
    text = rng.choice(LINT).format(f=f"src/module_{turn % 7}.py")
    content = f"<system-reminder>\n{text}\n</system-reminder>"
    return {"role": "system", "content": content, "metadata": {"source": "hook", **_stamp(like)}}


def thinking_block(text: str, turn: int) -> dict[str, Any]:
    digest = hashlib.sha256(f"{turn}:{text}".encode()).hexdigest()
    return {"type": "thinking", "thinking": f"Let me think about step {turn}. {text[:120]}", "signature": digest * 2}


def as_blocks(content: Any) -> Any:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _assistant(message: Message, rng: random.Random, turn: int, ids: dict[str, str]) -> Message:
    out = copy.deepcopy(message)
    calls = out.get("tool_calls") or []
    for index, call in enumerate(calls):
        if isinstance(call, dict) and isinstance(call.get("id"), str):
            ids[call["id"]] = f"call_{index}"  # reused in every turn, as some providers do
            call["id"] = f"call_{index}"
    if rng.random() < THINKING_SHARE:
        text = out.get("content") if isinstance(out.get("content"), str) else ""
        out["content"] = [thinking_block(text, turn), *([{"type": "text", "text": text}] if text else [])]
    return out


def shape(messages: list[Message], seed: int = 0) -> list[Message]:
    """The session as an Amplifier host would store it (see the module docstring); a new list."""
    rng = random.Random(seed)
    out: list[Message] = []
    ids: dict[str, str] = {}
    pending: list[Message] = []  # an injection to store after the current group
    developer = rng.random() < DEVELOPER_SHARE
    for turn, message in enumerate(messages):
        role = message.get("role")
        if role != "tool" and pending:
            out += pending
            pending = []
        if role == "assistant":
            out.append(_assistant(message, rng, turn, ids))
            if message.get("tool_calls") and rng.random() < INJECTION_SHARE:
                hook = injection(rng, turn, message)
                (out.append(hook) if rng.random() < INSIDE_SHARE else pending.append(hook))
            continue
        shaped = copy.deepcopy(message)
        if role == "tool":
            shaped["tool_call_id"] = ids.get(shaped.get("tool_call_id"), shaped.get("tool_call_id"))
        if role in ("user", "tool") and rng.random() < BLOCK_SHARE:
            shaped["content"] = as_blocks(shaped.get("content"))
        out.append(shaped)
        if role == "system" and developer and turn == 0:
            text = "Answer in English. Prefer small, reviewed changes."
            out.append({"role": "developer", "content": text, "metadata": _stamp(message)})
    return out + pending
