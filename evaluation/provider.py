"""The simulated provider: window metadata, true token counts, the prefix cache, `llm:response`.

It bills each request view against `PrefixCache` and emits `llm:response` through the coordinator's
real hook registry with `input_tokens` (gross = plain + cache read), `cache_read_tokens`,
`cache_write_tokens` and `output_tokens`, so the module's token meter is exercised for real.
Its `complete()` is a deterministic scripted summarizer: a mechanism test, not a quality claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .cache import CacheOutcome, PrefixCache, Prices
from .tokens import TokenCounter, content_text, wire_key

SUMMARY_MAX_LINES = 24
SUMMARY_LINE_CHARS = 100


@dataclass(frozen=True)
class Bill:
    """One request as the provider saw it."""

    outcome: CacheOutcome
    cacheable: int
    output_tokens: int
    keys: tuple = ()  # the wire key of each message, as measured for the bill


def is_ephemeral(msg: dict) -> bool:
    """True for view-only messages (metadata.ephemeral), which sit after the cache breakpoint."""
    meta = msg.get("metadata")
    return bool(isinstance(meta, dict) and meta.get("ephemeral"))


def cacheable_count(view: list[dict]) -> int:
    """Number of leading messages up to and including the last non-ephemeral one."""
    for i in range(len(view) - 1, -1, -1):
        if not is_ephemeral(view[i]):
            return i + 1
    return 0


class SimProvider:
    """A provider with a fixed window, an Anthropic-style cache and a scripted summarizer."""

    name = "simulated"

    def __init__(
        self,
        counter: TokenCounter,
        context_window: int,
        max_output_tokens: int,
        hooks: Any = None,
        prices: Prices | None = None,
        min_cacheable: int = 1024,
        overhead_tokens: int = 0,
    ) -> None:
        self.counter = counter
        self.context_window = context_window
        self.max_output_tokens = max_output_tokens
        self.hooks = hooks
        self.prices = prices or Prices()
        self.cache = PrefixCache(min_tokens=min_cacheable)
        self.overhead_tokens = overhead_tokens
        self.summary_calls = 0
        self.summary_input_tokens = 0
        self.summary_output_tokens = 0

    def get_info(self) -> Any:
        """Provider metadata whose defaults carry the window the module budgets from."""
        from amplifier_core.models import ProviderInfo

        defaults = {"context_window": self.context_window, "max_output_tokens": self.max_output_tokens}
        return ProviderInfo(id="simulated", display_name="Simulated provider", defaults=defaults)

    def measure(self, view: list[dict]) -> tuple[list[tuple], list[int]]:
        """Wire keys and true token counts of a view's messages.

        A fixed `overhead_tokens` (tool schemas and the like, sent before the messages) is added to
        the first message, so it sits at the front of the cached prefix.
        """
        keys = [wire_key(m) for m in view]
        tokens = [self.counter.message(m, k) for m, k in zip(view, keys, strict=True)]
        if tokens:
            tokens[0] += self.overhead_tokens
        return keys, tokens

    async def respond(self, view: list[dict], answer: dict | None) -> Bill:
        """Bill a request, emit `llm:response`, and return the bill."""
        keys, tokens = self.measure(view)
        cacheable = cacheable_count(view)
        outcome = self.cache.request(keys, tokens, cacheable)
        output = self.counter.message(answer) if answer else 0
        await self._emit(outcome.gross_input, outcome.read, outcome.write, output)
        return Bill(outcome, cacheable, output, tuple(keys))

    async def complete(self, request: Any, **kwargs: Any) -> Any:
        """Scripted summarizer: the first line of each summarized message, capped."""
        from amplifier_core.message_models import ChatResponse, TextBlock

        text = _request_text(request)
        summary = scripted_summary(text)
        in_tok, out_tok = self.counter.text(text), self.counter.text(summary)
        self.summary_calls += 1
        self.summary_input_tokens += in_tok
        self.summary_output_tokens += out_tok
        await self._emit(in_tok, 0, 0, out_tok)
        return ChatResponse(content=[TextBlock(text=summary)])

    async def _emit(self, gross: int, read: int, write: int, output: int) -> None:
        if self.hooks is None:
            return
        usage = {
            "input_tokens": gross,
            "output_tokens": output,
            "cache_read_tokens": read,
            "cache_write_tokens": write,
        }
        data = {"provider": self.name, "model": "sim", "status": "ok", "duration_ms": 0, "usage": usage}
        await self.hooks.emit("llm:response", data)


def _request_text(request: Any) -> str:
    messages = getattr(request, "messages", None) or []
    parts = []
    for msg in messages:
        content = getattr(msg, "content", None)
        if isinstance(content, list):
            content = [b if isinstance(b, dict) else {"text": getattr(b, "text", "")} for b in content]
        parts.append(content_text(content))
    return "\n".join(parts[1:] if len(parts) > 1 else parts)


def scripted_summary(text: str) -> str:
    """A deterministic stand-in for a model summary: headers of the summarized messages, capped."""
    heads = [ln.strip()[:SUMMARY_LINE_CHARS] for ln in text.splitlines() if ln.startswith("[")]
    kept = heads[:SUMMARY_MAX_LINES]
    more = len(heads) - len(kept)
    tail = [f"... and {more} more messages"] if more > 0 else []
    return "\n".join(["Summary of earlier conversation (scripted):", *kept, *tail])
