"""The ledger's choice ranks lazily (issue 37.12): the same lines as ranking every candidate, with exact
scoring (a set difference per line) only for the lines the room reaches, not for the whole removed history.
Speed itself is measured in evaluation/benchmarks/bench_ledger_boundary.py, not here."""

from __future__ import annotations

import random

from amplifier_module_context_simple import evidence_text as et
from amplifier_module_context_simple import ledger


def ranked_all(sources: list, known: set[str], budget_tokens: int) -> list[tuple[int, str]]:
    """The ranking before it was lazy, written out: score every candidate, sort, pick greedily."""
    candidates, seen = [], set()
    for position, lines in enumerate(sources):
        recency = 1 + position / max(1, len(sources))
        for line, all_tokens, priority, _call in lines:
            if line in seen or len(line) > budget_tokens * et.CHARS_PER_TOKEN:
                continue
            seen.add(line)
            tokens = all_tokens - known
            bonus = et.PRIORITY_BONUS if priority else 0
            if tokens or bonus:
                cost = len(line) // et.CHARS_PER_TOKEN + 1
                candidates.append(((len(tokens) + bonus) * recency / cost, position, line, tokens, bonus))
    candidates.sort(key=lambda c: (-c[0], -c[1], c[2]))
    chosen, covered, left = [], set(), budget_tokens
    for _score, position, line, tokens, bonus in candidates:
        cost = len(line) // et.CHARS_PER_TOKEN + 1
        if cost > left or not (tokens - covered or bonus):
            continue
        chosen.append((position, line))
        covered |= tokens
        left -= cost
    return chosen


def random_sources(rng: random.Random, messages: int) -> list:
    vocabulary = [f"id_{k:04d}" for k in range(400)]
    sources = []
    for _ in range(messages):
        lines = []
        for _ in range(rng.randrange(0, 12)):
            words = rng.sample(vocabulary, rng.randrange(1, 6))
            text = " ".join(words) + " " + "x" * rng.randrange(0, 120)
            lines.append((text, frozenset(words), rng.random() < 0.1, rng.random() < 0.3))
        if lines and rng.random() < 0.2:
            lines.append(lines[0])  # a line repeated within a message
        sources.append(tuple(lines))
    for _ in range(messages // 5):  # lines repeated across messages: the first occurrence counts
        a, b = rng.randrange(messages), rng.randrange(messages)
        if sources[a]:
            sources[b] = (*sources[b], sources[a][0])
    return sources


def test_the_lazy_ranking_chooses_what_ranking_every_line_chose() -> None:
    rng = random.Random(37)
    for _ in range(300):
        sources = random_sources(rng, rng.randrange(1, 40))
        known = {f"id_{k:04d}" for k in rng.sample(range(400), rng.randrange(0, 200))}
        budget = rng.choice([1, 5, 40, 200, 2_000, 50_000])
        assert ledger._choose(sources, known, budget) == ranked_all(sources, known, budget)


class CountingKnown:
    """A ``known`` set that counts the exact scorings (``all_tokens - known``) made against it: not a set, so
    ``frozenset - known`` falls to ``__rsub__``."""

    def __init__(self, items) -> None:
        self.items = frozenset(items)
        self.scored = 0

    def __rsub__(self, other: frozenset) -> frozenset:
        self.scored += 1
        return other - self.items


def test_a_small_room_scores_few_lines_of_a_long_removed_history() -> None:
    """2,000 removed messages, a room of 200 tokens: ranking every line scored all of them."""
    sources = random_sources(random.Random(12), 2_000)
    lines = sum(len(s) for s in sources)
    known = CountingKnown(f"id_{k:04d}" for k in range(0, 400, 3))
    chosen = ledger._choose(sources, known, 200)
    assert chosen and known.scored < lines // 10, (known.scored, lines)
