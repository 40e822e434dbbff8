"""Evidence-preserving compaction: a pass before the ladder that shrinks tool results, never deletes them.

Opt-in (``evidence_supersede``, ``evidence_dedupe``, ``evidence_digest``; all off by default, and then
this module changes nothing). When a compaction fires it runs, oldest result first, until the view
fits the target:

1. supersession: a result whose call (same tool, same arguments) was made again later shrinks to a
   one-line pointer (``supersession.py``);
2. dedupe: lines that a later result repeats verbatim are dropped from the earlier one;
3. digest: a result keeps only its informative lines within ``evidence_digest_tokens`` (``digest.py``).

The assistant's call and its arguments stay, so every tool pair stays valid and the model knows what it
ran. Whatever still does not fit goes to the ordinary ladder. Each decision is ``seq -> (kind, line
indices)``: the manager records it in ``_digests`` (and the seq in ``_truncated_seqs``), re-renders the
same bytes on every later request, and ``snapshot_state`` carries it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import digest as dg
from . import ledger
from .estimate import seq_of
from .ladder import LadderPlan, plan_compaction, protected_tool_indices
from .supersession import superseded_indices
from .tool_results import LEGACY_RECOVERY, spill_path, text_tokens

Message = dict[str, Any]
Decision = tuple[str, tuple[int, ...]]
MIN_DEDUPED_LINES = 3
LEDGER_CEILING = (
    0.8  # a ledger never takes the view past this share of the trigger  # fewer repeated lines are not worth a rewrite
)


@dataclass(frozen=True)
class EvidenceSettings:
    """The evidence knobs of one request."""

    digest: bool = False
    digest_tokens: int = 64
    supersede: bool = False
    dedupe: bool = False
    narration: bool = False
    ledger_share: float = 0.0

    @property
    def active(self) -> bool:
        return self.digest or self.supersede or self.dedupe or self.narration or self.ledger_share > 0


@dataclass(frozen=True)
class EvidenceOps:
    """What the pass needs from its caller: counting, the (memoized) rewrite, and token sets."""

    count: Callable[[Message], int]
    rewrite: Callable[[Message, Decision], Message]
    tokens: Callable[[Message], frozenset[str]]


@dataclass
class EvidencePlan:
    """The pass's result: the new list, its total, and the decisions by ``_seq``."""

    messages: list[Message]
    total: int
    decisions: dict[int, Decision] = field(default_factory=dict)


class _Pass:
    def __init__(self, messages: list[Message], total: int, target: int, ops: EvidenceOps) -> None:
        self.plan = EvidencePlan(list(messages), total)
        self.target = target
        self.ops = ops

    def fits(self) -> bool:
        return self.plan.total <= self.target

    def open_results(self, protected: set[int]) -> list[int]:
        """Indices of tool results still whole, stamped with a ``_seq``, not protected, oldest first."""
        messages = self.plan.messages
        return [
            i
            for i, m in enumerate(messages)
            if m.get("role") == "tool"
            and i not in protected
            and not m.get("_truncated")
            and isinstance(m.get("content"), str)
            and seq_of(m) is not None
        ]

    def old_narration(self, protected_recent: float) -> list[int]:
        """Indices of assistant messages with text, outside the recent ``protected_recent`` share, oldest first."""
        messages = self.plan.messages
        start = max(0, int(len(messages) * (1 - protected_recent)))
        return [
            i
            for i, m in enumerate(messages[:start])
            if m.get("role") == "assistant"
            and not m.get("_truncated")
            and isinstance(m.get("content"), str)
            and m["content"]
            and seq_of(m) is not None
        ]

    def apply(self, index: int, decision: Decision) -> Message | None:
        """Rewrite one result when that makes it smaller; returns the new message or None."""
        old = self.plan.messages[index]
        new = self.ops.rewrite(old, decision)
        delta = self.ops.count(new) - self.ops.count(old)
        if delta >= 0:
            return None
        self.plan.messages[index] = new
        self.plan.total += delta
        self.plan.decisions[seq_of(old)] = decision  # type: ignore[index]
        return new

    def supersede(self) -> None:
        open_set = set(self.open_results(set()))  # a later identical call outdates even a protected result
        for index in superseded_indices(self.plan.messages):
            if self.fits():
                return
            if index in open_set:
                self.apply(index, (dg.SUPERSEDED, ()))

    def dedupe(self, protected: set[int]) -> None:
        messages = self.plan.messages
        later: set[str] = set()
        keep: dict[int, tuple[int, ...]] = {}
        open_set = set(self.open_results(protected))
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if message.get("role") != "tool" or not isinstance(message.get("content"), str):
                continue
            text = message["content"]
            if index in open_set:
                kept = dg.repeated_line_indices(text, later)
                if text.count("\n") + 1 - len(kept) >= MIN_DEDUPED_LINES:
                    keep[index] = kept
            later |= dg.informative_lines(text)
        for index in sorted(keep):
            if self.fits():
                return
            self.apply(index, (dg.DEDUPED, keep[index]))

    def digest(self, indices: list[int], budget_tokens: int) -> None:
        """Keep only each message's informative lines, oldest first, until the view fits."""
        counts: Counter[str] = Counter()
        for message in self.plan.messages:
            counts.update(self.ops.tokens(message))
        for index in indices:
            if self.fits():
                return
            old = self.plan.messages[index]
            own = self.ops.tokens(old)
            elsewhere = {t for t in own if counts[t] > 1}
            lines = dg.select_lines(old["content"], elsewhere, budget_tokens)
            kind = dg.DIGEST if old.get("role") == "tool" else dg.NARRATION
            new = self.apply(index, (kind, lines))
            if new is not None:
                counts.subtract(own)
                counts.update(self.ops.tokens(new))


def plan_evidence(
    messages: list[Message],
    system_tokens: int,
    target: int,
    protected: tuple[float, int],
    settings: EvidenceSettings,
    ops: EvidenceOps,
) -> EvidencePlan:
    """Supersede, dedupe and digest tool results (each step only if enabled) until ``target`` fits."""
    run = _Pass(messages, system_tokens + sum(ops.count(m) for m in messages), target, ops)
    protected_recent, protected_tool_results = protected
    protected = protected_tool_indices(messages, protected_tool_results)
    if settings.supersede:
        run.supersede()
    if settings.dedupe and not run.fits():
        run.dedupe(protected)
    if settings.digest and not run.fits():
        run.digest(run.open_results(protected), settings.digest_tokens)
    if settings.narration and not run.fits():
        run.digest(run.old_narration(protected_recent), settings.digest_tokens)
    return run.plan


def plan_with_evidence(
    working: list[Message],
    system_tokens: int,
    target: int,
    ladder_args: tuple[float, int],
    settings: EvidenceSettings,
    ops: EvidenceOps,
    ladder_ops: Any,
) -> tuple[LadderPlan, dict[int, Decision]]:
    """The evidence pass, then the ordinary ladder on what it left; the ladder's removals win."""
    protected_recent, protected_tool_results = ladder_args
    evidence = plan_evidence(working, system_tokens, target, ladder_args, settings, ops)
    plan = plan_compaction(
        evidence.messages, system_tokens, target, protected_recent, protected_tool_results, ladder_ops
    )
    decisions = {seq: d for seq, d in evidence.decisions.items() if seq not in plan.removed}
    plan.truncated |= set(decisions)
    return plan, decisions


class EvidenceMixin:
    """The evidence mode's state on SimpleContextManager: ``_digests`` (seq -> decision) and its rewrites."""

    def _evidence_settings(self) -> EvidenceSettings:
        return EvidenceSettings(
            digest=self.evidence_digest,
            digest_tokens=self.evidence_digest_tokens,
            supersede=self.evidence_supersede,
            dedupe=self.evidence_dedupe,
            narration=self.evidence_digest_narration,
            ledger_share=self.evidence_ledger_share,
        )

    def _plan_compaction(self, working: list[Message], system_tokens: int, target: int) -> LadderPlan:
        """The ladder, preceded by the evidence pass when the mode is on (else exactly the ladder)."""
        settings = self._evidence_settings()
        ladder_args = (self.protected_recent, self.protected_tool_results)
        if not settings.active:
            return plan_compaction(working, system_tokens, target, *ladder_args, self._ladder_ops())
        # A clear-at-least refusal rolls the sticky sets back; a decision it orphaned is forgotten here.
        self._digests = {s: d for s, d in self._digests.items() if s in self._truncated_seqs}
        working = [m for m in working if not ledger.is_ledger(m)]  # re-decided below
        ops = EvidenceOps(self._counts().count, self._digest_form, self._evidence_tokens)
        reserve = int(target * settings.ledger_share)
        plan, decisions = plan_with_evidence(
            working, system_tokens, target - reserve, ladder_args, settings, ops, self._ladder_ops()
        )
        self._digests.update(decisions)
        for seq in plan.removed:
            self._digests.pop(seq, None)
        if settings.ledger_share > 0:
            self._add_ledger(plan, target)
        return plan

    def _add_ledger(self, plan: LadderPlan, target: int) -> None:
        """Decide the ledger of every removed message so far and put it in the plan's view."""
        removed = self._removed_seqs | plan.removed
        self._ledger = None
        if not removed:
            return
        known: set[str] = set()
        for message in plan.messages:
            known |= self._evidence_tokens(message)
        # Stubbed user turns lost their words too: their full text is a source like a removed message's.
        gone = removed | self._stubbed_seqs | plan.stubbed
        sources = [m for m in self.messages if seq_of(m) in gone and m.get("role") != "system"]
        empty = ledger.ledger_message(ledger.ledger_text([], len(removed)))
        # The ledger's share of the target is its own even when the protected floor already exceeds the
        # rest, as long as the view stays well under the trigger (else every request would compact).
        reserve = int(target * self.evidence_ledger_share)
        ceiling = int(target / self.target_usage * self.compact_threshold * LEDGER_CEILING) - plan.total
        room = min(max(target - plan.total, reserve), ceiling) - self._counts().count(empty)
        lines = ledger.select(sources, known, room) if room > 0 else []
        if not lines:
            return
        self._ledger = (min(removed), ledger.ledger_text(lines, len(removed)), len(removed))
        message = self._ledger_message()
        plan.messages = ledger.insert(plan.messages, min(removed), message)
        plan.total += self._counts().count(message)

    def _ledger_message(self) -> Message:
        """The recorded ledger as a message (the same object while the ledger holds, so counts are cached)."""
        cached = getattr(self, "_ledger_cache", None)
        if cached is not None and cached[0] == self._ledger:
            return cached[1]
        message = ledger.ledger_message(self._ledger[1])  # type: ignore[index]
        self._ledger_cache = (self._ledger, message)
        return message

    def _with_ledger(self, working: list[Message]) -> list[Message]:
        """Re-apply the recorded ledger (the same bytes, the same place) between boundaries."""
        if self._ledger is None or self._ledger[2] != len(self._removed_seqs):
            return working  # none, or a clear-at-least refusal rolled its removals back
        return ledger.insert(working, self._ledger[0], self._ledger_message())

    def _truncate_tool_result(self, message: Message) -> Message:
        """A recorded evidence decision re-renders its digest; anything else truncates as usual."""
        decision = self._digests.get(seq_of(message)) if self._digests else None
        if decision is None:
            return super()._truncate_tool_result(message)  # type: ignore[misc]
        return self._digest_form(message, decision)

    def _digest_form(self, message: Message, decision: Decision) -> Message:
        key = (decision, self.tool_result_spill_dir, self._budget_counter())
        return self._derive(message, "truncated", key, lambda: self._make_digest(message, decision))

    def _make_digest(self, message: Message, decision: Decision) -> Message:
        content = message.get("content")
        if not isinstance(content, str):
            return message
        counter = self._budget_counter()
        original = len(content) // 4 if counter is None else text_tokens(content, counter)
        recovery = LEGACY_RECOVERY
        if self.tool_result_spill_dir and message.get("role") == "tool":
            path = spill_path(self.tool_result_spill_dir, seq_of(message), content)
            self._spill(path, content)  # the pointer does not depend on the write succeeding
            recovery = f"read {path} for the full result"
        kind, indices = decision
        text = dg.render(content, kind, indices, original, recovery)
        return {**message, "content": text, "_truncated": True, "_original_tokens": original}

    def _evidence_tokens(self, message: Message) -> frozenset[str]:
        """Distinctive tokens of a message's text, memoized per ``_seq`` (and per rewrite)."""
        kind = "tokens-rewritten" if message.get("_truncated") or message.get("_stubbed") else "tokens"
        return self._derive(message, kind, None, lambda: frozenset(dg.distinctive_tokens(dg.message_text(message))))

    def _evidence_stats(self, working: list[Message]) -> dict[str, int]:
        """Stats keys of the evidence mode (none when it is off, so default stats stay as they were)."""
        if not self._evidence_settings().active:
            return {}
        live = {s: d for s, d in self._digests.items() if s in self._truncated_seqs}
        kinds = Counter(kind for kind, _ in live.values())
        count = self._counts().count
        tokens = sum(count(m) for m in working if seq_of(m) in live)
        in_ledger = self._ledger[1].count("\n") - 2 if self._ledger else 0
        return {
            "ledger_lines": in_ledger,
            "ledger_tokens": sum(count(m) for m in working if ledger.is_ledger(m)),
            "results_digested": kinds[dg.DIGEST],
            "results_superseded": kinds[dg.SUPERSEDED],
            "results_deduped": kinds[dg.DEDUPED],
            "narration_shortened": kinds[dg.NARRATION],
            "digest_tokens": tokens,
        }
