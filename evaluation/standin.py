"""Small in-harness engines: a no-compaction reference and a stand-in for development.

`PassthroughContext` is the "no compaction" reference arm: every request sends the whole history.
`StandInContext` is a minimal sticky compactor used only while the real module cannot be imported;
the report names it whenever it ran. It accepts a handful of config keys and rejects the rest.
"""

from __future__ import annotations

from typing import Any

NOTICE = '<system-reminder source="context-compaction">\nContext has been compacted.\n</system-reminder>'
STANDIN_KEYS = {"max_tokens", "compact_threshold", "target_usage", "truncate_chars", "protected_tool_results"}


class PassthroughContext:
    """Keeps every message and sends them all: the reference that never compacts."""

    def __init__(self) -> None:
        self.messages: list[dict] = []

    async def add_message(self, message: dict) -> None:
        self.messages.append(dict(message))

    async def get_messages(self) -> list[dict]:
        return list(self.messages)

    async def get_messages_for_request(self, token_budget: int | None = None, provider: Any = None) -> list:
        return list(self.messages)

    async def set_messages(self, messages: list[dict]) -> None:
        self.messages = [dict(m) for m in messages]

    async def clear(self) -> None:
        self.messages = []


class StandInContext(PassthroughContext):
    """Sticky truncate-then-drop compactor with an ephemeral notice (development stand-in only)."""

    def __init__(self, config: dict) -> None:
        super().__init__()
        self.max_tokens = int(config.get("max_tokens", 200_000))
        self.threshold = float(config.get("compact_threshold", 0.92))
        self.target = float(config.get("target_usage", 0.5))
        self.chars = int(config.get("truncate_chars", 250))
        self.protected = int(config.get("protected_tool_results", 5))
        self.truncated: set[int] = set()
        self.removed: set[int] = set()

    async def set_messages(self, messages: list[dict]) -> None:
        await super().set_messages(messages)
        self.truncated, self.removed = set(), set()

    async def get_messages_for_request(self, token_budget: int | None = None, provider: Any = None) -> list:
        budget = (token_budget or _provider_budget(provider) or self.max_tokens) - 800
        view = self._view()
        if _estimate(view) < self.threshold * budget:
            return view
        self._plan(budget * self.target)
        view = self._view()
        return [*view, {"role": "user", "content": NOTICE, "metadata": {"ephemeral": True}}]

    def _view(self) -> list[dict]:
        out = []
        for i, m in enumerate(self.messages):
            if i in self.removed:
                continue
            if i in self.truncated:
                m = {**m, "content": str(m.get("content", ""))[: self.chars] + "\n...[truncated]"}
            out.append(m)
        return out

    def _plan(self, target: float) -> None:
        tools = [i for i, m in enumerate(self.messages) if m.get("role") == "tool"]
        keep = set(tools[-self.protected :]) if self.protected > 0 else set()
        for i in tools:
            if _estimate(self._view()) <= target:
                return
            if i not in keep:
                self.truncated.add(i)
        self._drop_oldest(target)

    def _drop_oldest(self, target: float) -> None:
        last_user = max((i for i, m in enumerate(self.messages) if m.get("role") == "user"), default=-1)
        n = len(self.messages)
        i = 0
        while _estimate(self._view()) > target and i < int(n * 0.7):
            m = self.messages[i]
            if m.get("role") not in ("system", "user") and i != last_user and m.get("role") != "tool":
                self.removed.add(i)
                j = i + 1
                while j < n and self.messages[j].get("role") == "tool":
                    self.removed.add(j)
                    j += 1
            i += 1


async def mount_passthrough(coordinator: Any, config: dict | None = None) -> Any:
    """Mount the no-compaction reference."""
    await coordinator.mount("context", PassthroughContext())
    return None


async def mount_standin(coordinator: Any, config: dict | None = None) -> Any:
    """Mount the development stand-in; unknown keys are rejected like a strict config reader would."""
    config = config or {}
    unknown = set(config) - STANDIN_KEYS
    if unknown:
        raise ValueError(f"stand-in does not support: {sorted(unknown)}")
    await coordinator.mount("context", StandInContext(config))
    return None


def _estimate(messages: list[dict]) -> int:
    return sum(len(str(m)) // 4 for m in messages)


def _provider_budget(provider: Any) -> int | None:
    try:
        d = provider.get_info().defaults
        return d["context_window"] - int(d["max_output_tokens"] * 0.5) - 4096
    except Exception:
        return None
