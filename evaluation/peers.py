"""Peers: the methods a user compares this module with, replayed as in-harness engines (arms `peer_*`).

Evaluation code only, never part of the module. Each peer keeps the whole history, as a host would, and
sends a view that differs from it only by placeholders in place of some tool results (tool calls, their
arguments, assistant and user messages are never touched), so a peer never shrinks below the sum of
what it keeps and may send requests over the window: those are counted, not dropped.

* **Observation masking** (Lindenbauer et al. 2025, "The Complexity Trap", after SWE-agent's
  `LastNObservations`): the results of the last M tool turns (an assistant message with tool calls and
  the results that answer it) are kept; every older result becomes a one-line placeholder. The edge
  moves with every new tool turn, so the masked prefix changes on nearly every request.
* **Tool-result clearing** (Anthropic's context editing, `clear_tool_uses_20250919`, decided server side
  per request from the whole history the client sends): when the request's input tokens exceed the
  trigger, every tool result but the newest `keep` is replaced by a placeholder; results of
  `exclude_tools` are never cleared; with `clear_at_least`, a clearing that would free fewer tokens than
  that is not applied (the request goes out whole). Anthropic's defaults: trigger 100,000 input tokens,
  keep 3 tool uses, no clear_at_least, no excluded tools, tool inputs kept. The replay's windows are
  sized from each session, so the trigger is given as a share of the window: 100,000 of a 200,000-token
  window is 0.5. The API does not publish its placeholder text; "[cleared]" is the one LangChain's
  mirror of this strategy (ClearToolUsesEdit) writes.

The decisions are pure functions over the messages (`masked_results`, `cleared_results`), pinned by
tests/test_evaluation_peers.py on a small session; `PeerContext` is the thin engine around them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .standin import PassthroughContext
from .tokens import read_call

MASKING = "peer-observation-masking"
CLEARING = "peer-clear-tool-uses"
MASK_PLACEHOLDER = "Old environment output: ({lines} lines omitted)"  # SWE-agent's LastNObservations
CLEAR_PLACEHOLDER = "[cleared]"
DEFAULT_KEEP_TURNS = 10  # M in "The Complexity Trap"
DEFAULT_TRIGGER_SHARE = 0.5  # Anthropic's 100,000 input tokens of a 200,000-token window
DEFAULT_KEEP_USES = 3


def tool_turns(messages: Sequence[dict]) -> list[list[int]]:
    """The positions of the tool results of each tool turn, oldest turn first. A tool turn is an
    assistant message with tool calls; a result belongs to the latest earlier turn that made its call
    (a result with no such call is a turn of its own)."""
    turns: list[list[int]] = []
    owner: dict[Any, int] = {}
    for i, m in enumerate(messages):
        calls = (m.get("tool_calls") or []) if m.get("role") == "assistant" else []
        if calls:
            turns.append([])
            owner.update({_call_id(c): len(turns) - 1 for c in calls})
        elif m.get("role") == "tool":
            turn = owner.get(m.get("tool_call_id"))
            if turn is None:
                turns.append([i])
            else:
                turns[turn].append(i)
    return [t for t in turns if t]


def masked_results(messages: Sequence[dict], keep_turns: int) -> set[int]:
    """Observation masking: the positions of every tool result older than the last `keep_turns` tool turns."""
    turns = tool_turns(messages)
    old = turns[: max(0, len(turns) - max(0, keep_turns))]
    return {i for turn in old for i in turn}


def cleared_results(
    messages: Sequence[dict],
    tokens: Sequence[int],
    trigger: int,
    keep: int,
    clear_at_least: int = 0,
    exclude_tools: Sequence[str] = (),
    placeholder_tokens: int = 0,
) -> set[int]:
    """Tool-result clearing for one request: nothing while the request's input (`sum(tokens)`, one count
    per message) is at most `trigger`; past it, every tool result but the newest `keep` whose tool is not
    in `exclude_tools`, unless that frees fewer than `clear_at_least` tokens."""
    if sum(tokens) <= trigger:
        return set()
    names = _tool_names(messages)
    results = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    kept = set(results[len(results) - keep :]) if keep > 0 else set()
    cleared = {i for i in results if i not in kept and names.get(messages[i].get("tool_call_id")) not in exclude_tools}
    freed = sum(max(0, tokens[i] - placeholder_tokens) for i in cleared)
    return cleared if cleared and freed >= clear_at_least else set()


def with_placeholders(messages: Sequence[dict], chosen: set[int], text: Callable[[dict], str]) -> list[dict]:
    """The view: the messages, those at `chosen` with their content replaced by `text(message)`."""
    return [{**m, "content": text(m)} if i in chosen else m for i, m in enumerate(messages)]


def mask_text(message: dict) -> str:
    """The one-line placeholder of a masked tool result, with the number of lines it stood for."""
    content = message.get("content")
    lines = len(content.splitlines()) if isinstance(content, str) else 1
    return MASK_PLACEHOLDER.format(lines=lines)


def _call_id(call: Any) -> Any:
    return call.get("id") if isinstance(call, dict) else getattr(call, "id", None)


def _tool_names(messages: Sequence[dict]) -> dict[Any, str]:
    """Tool-call id -> the tool's name, over every call in the messages."""
    return {_call_id(c): read_call(c)[0] for m in messages for c in m.get("tool_calls") or []}


class PeerContext(PassthroughContext):
    """Keeps every message; each request view replaces the tool results its policy picks."""

    def __init__(self, engine: str, config: dict) -> None:
        super().__init__()
        self.engine = engine
        self.keep_turns = int(config.get("keep_tool_turns", DEFAULT_KEEP_TURNS))
        self.trigger_share = float(config.get("trigger_share", DEFAULT_TRIGGER_SHARE))
        self.keep = int(config.get("keep", DEFAULT_KEEP_USES))
        self.clear_at_least = int(config.get("clear_at_least", 0))
        self.exclude_tools = tuple(config.get("exclude_tools", ()))
        self._tokens: list[int] = []  # per stored message, counted once, with the provider's counter

    async def set_messages(self, messages: list[dict]) -> None:
        await super().set_messages(messages)
        self._tokens = []

    async def get_messages_for_request(self, token_budget: int | None = None, provider: Any = None) -> list:
        if self.engine == MASKING:
            return with_placeholders(self.messages, masked_results(self.messages, self.keep_turns), mask_text)
        counter = getattr(provider, "counter", None)
        window = _context_window(provider)
        if counter is None or window is None:  # nothing to measure the trigger against: sent whole
            return list(self.messages)
        for m in self.messages[len(self._tokens) :]:
            self._tokens.append(counter.message(m))
        tokens = list(self._tokens)
        if tokens:
            tokens[0] += int(getattr(provider, "overhead_tokens", 0) or 0)  # the request's input, as billed
        trigger = int(self.trigger_share * window)
        cleared = cleared_results(
            self.messages,
            tokens,
            trigger,
            self.keep,
            self.clear_at_least,
            self.exclude_tools,
            counter.text(CLEAR_PLACEHOLDER),
        )
        return with_placeholders(self.messages, cleared, lambda _m: CLEAR_PLACEHOLDER)


def _context_window(provider: Any) -> int | None:
    try:
        return int(provider.get_info().defaults["context_window"])
    except Exception:
        return None


KEYS = {MASKING: {"keep_tool_turns"}, CLEARING: {"trigger_share", "keep", "clear_at_least", "exclude_tools"}}


def mounter(engine: str) -> Callable[..., Any]:
    """The mount function of one peer engine; a key the peer does not read is rejected at mount."""

    async def mount(coordinator: Any, config: dict | None = None) -> Any:
        config = config or {}
        unknown = set(config) - KEYS[engine]
        if unknown:
            raise ValueError(f"{engine} does not read: {sorted(unknown)}")
        await coordinator.mount("context", PeerContext(engine, config))
        return None

    return mount


def peer_words(engine: str, config: dict) -> str:
    """A peer as a reader names it: the method and its parameters."""
    if engine == MASKING:
        turns = config.get("keep_tool_turns", DEFAULT_KEEP_TURNS)
        return f"the peer observation masking (results of the last {turns} tool turns kept)"
    share = config.get("trigger_share", DEFAULT_TRIGGER_SHARE)
    keep = config.get("keep", DEFAULT_KEEP_USES)
    return f"the peer tool-result clearing (past {share:.0%} of the window, all but the newest {keep} results)"


def is_peer(engine: str) -> bool:
    """True for the engine of a peer arm."""
    return engine in KEYS
