"""Workloads: real transcripts in the documented JSONL format, plus generated planted-fact scenarios."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

SHIPPED_DIR = Path(__file__).resolve().parent / "workloads"
ROLES = {"system", "user", "assistant", "tool"}


@dataclass
class Workload:
    """A session to replay: its messages and, for scenarios, the facts to probe."""

    name: str
    messages: list[dict]
    facts: dict[str, str] = field(default_factory=dict)
    retracted: str | None = None
    probe_requests: list[int] = field(default_factory=list)
    source: str = ""


def load_jsonl(path: Path) -> Workload:
    """Load one session: one OpenAI-chat message per line (blank lines skipped)."""
    messages = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        msg = json.loads(line)
        if not isinstance(msg, dict) or msg.get("role") not in ROLES:
            raise ValueError(f"{path}:{n}: not a chat message with role system|user|assistant|tool")
        messages.append(_clean(msg))
    return Workload(name=path.stem, messages=messages, source=str(path))


def load_path(path: str | Path) -> list[Workload]:
    """Load a .jsonl file, or every .jsonl file in a folder (sorted by name)."""
    p = Path(path)
    files = sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
    if not files:
        raise FileNotFoundError(f"no .jsonl sessions under {p}")
    return [load_jsonl(f) for f in files]


def shipped() -> list[Workload]:
    """The real sessions shipped with the harness."""
    return load_path(SHIPPED_DIR)


def _clean(msg: dict) -> dict:
    out = {"role": msg["role"], "content": msg.get("content") if msg.get("content") is not None else ""}
    for key in ("tool_calls", "tool_call_id", "name"):
        if msg.get(key):
            out[key] = msg[key]
    return out
