"""An Anthropic-style prompt-prefix cache, as a small pure class.

A request is a list of messages (each a hashable key with a token count) and the number of leading
messages that are cacheable (the breakpoint sits after the last non-ephemeral message). The request
reads the longest prefix, in whole messages, that is byte-identical to a prefix written earlier in
the session; it then writes its own cacheable prefix when that holds at least `min_tokens` tokens.
Tokens between the read point and the breakpoint are billed as cache writes; the rest as plain input.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

MIN_CACHEABLE_TOKENS = 1024


@dataclass(frozen=True)
class Prices:
    """Price per token unit of plain input, cache writes, cache reads and output."""

    input: float = 1.0
    cache_write: float = 1.25
    cache_read: float = 0.1
    output: float = 0.0


@dataclass(frozen=True)
class CacheOutcome:
    """How one request's prompt tokens were billed."""

    total: int
    read: int
    write: int
    plain: int
    waste: int
    read_messages: int

    @property
    def gross_input(self) -> int:
        """`input_tokens` as providers report it: fresh plain input plus cache reads."""
        return self.plain + self.read

    def cost(self, prices: Prices) -> float:
        """Billed input cost of this request."""
        return self.plain * prices.input + self.write * prices.cache_write + self.read * prices.cache_read


@dataclass
class PrefixCache:
    """Session prefix cache: a trie of message keys with the written prefixes marked."""

    min_tokens: int = MIN_CACHEABLE_TOKENS
    _children: dict[tuple[int, Hashable], int] = field(default_factory=dict)
    _written: set[int] = field(default_factory=set)
    _cached_keys: set[Hashable] = field(default_factory=set)

    def request(self, keys: Sequence[Hashable], tokens: Sequence[int], cacheable: int) -> CacheOutcome:
        """Bill one request and record what it writes."""
        cacheable = max(0, min(cacheable, len(keys)))
        cum = _cumulative(tokens)
        read_n = self._longest_written(keys, cacheable)
        waste = sum(t for k, t in zip(keys[read_n:], tokens[read_n:], strict=True) if k in self._cached_keys)
        write = 0
        if cum[cacheable] >= self.min_tokens:
            self._write(keys[:cacheable])
            write = cum[cacheable] - cum[read_n]
        read = cum[read_n]
        total = cum[-1]
        return CacheOutcome(total, read, write, total - read - write, waste, read_n)

    def _longest_written(self, keys: Sequence[Hashable], limit: int) -> int:
        node, best = 0, 0
        for i, key in enumerate(keys[:limit], start=1):
            node = self._children.get((node, key), -1)
            if node < 0:
                break
            if node in self._written:
                best = i
        return best

    def _write(self, keys: Sequence[Hashable]) -> None:
        node = 0
        for key in keys:
            nxt = self._children.get((node, key))
            if nxt is None:
                nxt = len(self._children) + 1
                self._children[(node, key)] = nxt
            node = nxt
        if node:
            self._written.add(node)
        self._cached_keys.update(keys)


def _cumulative(tokens: Sequence[int]) -> list[int]:
    out = [0]
    for t in tokens:
        out.append(out[-1] + t)
    return out
