"""The real-usage token meter: what the provider billed, the estimate, and the hybrid of both.

Every count carries its provenance (``kind``): 'usage' when anchored on a provider's reported
total, 'estimated' when it is the heuristic, 'none' when there was nothing to count.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .config import TOKEN_METER_ACTUAL, TOKEN_METER_HYBRID
from .estimate import SEQ_KEY

logger = logging.getLogger("amplifier_module_context_simple")
Message = dict[str, Any]

METER_KIND_USAGE = "usage"
METER_KIND_ESTIMATED = "estimated"
METER_KIND_NONE = "none"


@dataclass(frozen=True)
class UsageReading:
    """One ``llm:response``'s usage: prompt occupancy and the optional cache fields."""

    prompt_tokens: int
    cache_read: int | None
    cache_write: int | None


@dataclass(frozen=True)
class HybridCount:
    """The hybrid meter's answer for one request."""

    tokens: int
    kind: str
    anchor_rejected: bool
    tail_tokens: int | None
    tail_messages: int | None
    reason: str | None
    anchored_tokens: int | None = None  # anchor + tail, even when the guard rejected the anchor


def _number(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return int(value)


def _as_dict(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str):  # a payload may arrive serialized once more
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def parse_usage(data: Any) -> UsageReading | None:
    """The usage of an ``llm:response`` payload, or None when it carries none we can trust.

    Prompt occupancy is ``input_tokens`` (gross: fresh + cache reads) plus ``cache_write_tokens``
    (billed on top); cache reads are already inside the gross figure and are not added again.
    Legacy providers' ``input``/``cache_write`` keys are read when the canonical ones are absent.
    A prompt of 0 tokens is no reading: as the anchor it would turn compaction off for good.
    """
    payload = _as_dict(data)
    if payload is None or payload.get("status") == "error":
        return None
    usage = _as_dict(payload.get("usage"))
    if usage is None:
        return None
    gross = _number(usage.get("input_tokens", usage.get("input")))
    if gross is None:
        return None
    cache_write = _number(usage.get("cache_write_tokens", usage.get("cache_write")))
    cache_read = _number(usage.get("cache_read_tokens", usage.get("cache_read")))
    if gross + (cache_write or 0) == 0:
        return None  # no prompt is empty (a host's placeholder, an aborted call): a reading of 0 is no reading
    return UsageReading(gross + (cache_write or 0), cache_read, cache_write)


def hybrid_tail(working: list[dict[str, Any]], anchor_seq: int) -> list[dict[str, Any]]:
    """The messages appended since the billed request: stored at or after ``anchor_seq``, and each
    message without a ``_seq`` (a synthetic result repair inserted) that follows one of those."""
    return TailScan().tail(working, anchor_seq, appended_only=False)


class TailScan:
    """:func:`hybrid_tail` of the request path, reading each working-list position once.

    A working list grows by appends between requests (view_cache.py, repair_mirror.py), so the scan
    resumes where the last one stopped. It remembers the positions in the tail, not the messages: a
    clipped copy rebuilt in place (ingress.py) sits at the same position with the same ``_seq``. A new
    anchor comes from an ``llm:response`` after the last scan, so every ``_seq`` read so far lies
    before it and the tail starts within what is new. Anything else (another list, a shorter one,
    repair moving earlier messages, an anchor that moved back) reads the whole list again.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._first: Message | None = None
        self._length = 0  # positions read: working[:length], which ended with _last
        self._last: Message | None = None
        self._anchor: int | None = None
        self._after = False  # the last stamped message read was at or after the anchor
        self._positions: list[int] = []  # of the tail within working[:length]
        self._max_seq = -1

    def tail(self, working: list[Message], anchor_seq: int, appended_only: bool) -> list[Message]:
        """The tail of ``working`` for ``anchor_seq``; ``appended_only``: view repair changed nothing
        before the end of the last working list, so ``working`` is that list plus appends if it ends
        the old length with the same message."""
        if not self._continues(working, anchor_seq, appended_only):
            self.reset()
            self._first = working[0] if working else None
        elif anchor_seq != self._anchor:
            self._after, self._positions = False, []  # every _seq read so far is below the new anchor
        self._anchor = anchor_seq
        after, positions, max_seq = self._after, self._positions, self._max_seq
        for index in range(self._length, len(working)):
            metadata = working[index].get("metadata")  # seq_of, inlined: the first scan reads everything
            seq = metadata.get(SEQ_KEY) if isinstance(metadata, dict) else None
            if isinstance(seq, int) and not isinstance(seq, bool):
                after = seq >= anchor_seq
                max_seq = max(max_seq, seq)
            if after:
                positions.append(index)
        self._after, self._max_seq, self._length = after, max_seq, len(working)
        self._last = working[-1] if working else None
        return [working[index] for index in positions]

    def _continues(self, working: list[Message], anchor_seq: int, appended_only: bool) -> bool:
        n = self._length
        if not appended_only or not working or n == 0 or n > len(working):
            return False
        if working[0] is not self._first or working[n - 1] is not self._last:
            return False
        return anchor_seq == self._anchor or anchor_seq > self._max_seq


def measure_hybrid(
    working: list[dict[str, Any]],
    estimated: int,
    anchor: int | None,
    anchor_seq: int | None,
    anchor_estimate: int | None,
    count: Callable[[dict[str, Any]], int],
    tail_of: Callable[[list[dict[str, Any]], int], list[dict[str, Any]]] = hybrid_tail,
) -> HybridCount:
    """Anchor (last billed total) plus the estimate of messages appended since that request.

    The conservatism guard rejects an anchor below the estimate of the view it billed: such a
    total is no trustworthy floor, so the full estimate is reported, marked 'estimated'.
    """
    if not working:
        return HybridCount(0, METER_KIND_NONE, False, 0, 0, "no_messages")
    if anchor is None or anchor_seq is None:  # never measured, or invalidated by set_messages()
        return HybridCount(estimated, METER_KIND_ESTIMATED, False, None, None, "no_anchor")
    tail = tail_of(working, anchor_seq)
    tail_tokens = sum(count(m) for m in tail)
    if anchor <= 0:
        return HybridCount(estimated, METER_KIND_ESTIMATED, True, tail_tokens, len(tail), "anchor_non_positive")
    anchored = anchor + tail_tokens
    if anchor_estimate is not None and anchor < anchor_estimate:
        reason = "anchor_below_heuristic"
        return HybridCount(estimated, METER_KIND_ESTIMATED, True, tail_tokens, len(tail), reason, anchored)
    return HybridCount(anchored, METER_KIND_USAGE, False, tail_tokens, len(tail), None, anchored)


def meter_stats(
    mode: str,
    source: str,
    kind: str,
    used: int,
    estimated: int,
    measured: int | None,
    hybrid: HybridCount,
    extras: dict[str, Any],
    budget: int,
) -> dict[str, Any]:
    """The ``_last_token_meter_stats`` dict, also the ``context:token_meter`` payload."""
    return {
        "mode": mode,
        "source": source,
        "kind": kind,
        "used_tokens": used,
        "estimated_tokens": estimated,
        "measured_tokens": measured,
        "hybrid_tokens": hybrid.tokens,
        "hybrid_kind": hybrid.kind,
        "anchor_tokens": extras["anchor_tokens"],
        "anchor_estimate": extras["anchor_estimate"],
        "anchor_rejected": hybrid.anchor_rejected,
        "tail_estimated_tokens": hybrid.tail_tokens,
        "tail_messages": hybrid.tail_messages,
        "cache_aggregates": extras["cache_aggregates"],
        "provenance_refusals": extras["provenance_refusals"],
        "provenance_overrides": extras["provenance_overrides"],
        "anchor_floor_fires": extras["anchor_floor_fires"],
        "budget": budget,
        "ratio": used / budget if budget > 0 else None,
    }


class TokenMeter:
    """The meter: the provider's usage readings (kept across ``set_messages``, as in the original) and the
    last reading's stats. The anchor on one history lives in that history's decisions (decisions.py),
    which every method takes as ``decisions``; nothing here reads the manager (issue 38)."""

    def __init__(self) -> None:
        self.last_measured_prompt_tokens: int | None = None
        self.last_stats: dict[str, Any] | None = None
        self.tail_scan = TailScan()  # the hybrid tail, read from where the last request stopped
        self.reset_usage()

    def reset_usage(self) -> None:
        self.usage_events = 0
        self.cache_read_total = 0
        self.cache_write_total = 0
        self.cache_fields_complete = True
        self.measurement_stale = False  # set_messages(): the reading describes another history

    def forget(self) -> None:
        """``clear()``: no reading, no stats, no usage."""
        self.last_measured_prompt_tokens = None
        self.last_stats = None
        self.reset_usage()

    def valid_measurement(self) -> int | None:
        """The last reading, unless ``set_messages()`` replaced the history it measured."""
        return None if self.measurement_stale else self.last_measured_prompt_tokens

    def measure(
        self,
        working: list[Message],
        decisions: Any,
        counts: Any,
        mode: str,
        budget: int,
        appended_only: bool = False,
    ) -> tuple[int, str, int, str]:
        """Compute all three meters, store the stats; return (count, source, estimate, kind).

        ``appended_only``: view repair rewrote nothing of the last working list (the request path says
        so); then the estimate and the hybrid tail read only what was appended since the last request.
        """
        estimated = counts.total_extending(working) if appended_only else counts.total(working)
        hybrid = self.measure_hybrid(working, decisions, counts, estimated, appended_only)
        measured = self.last_measured_prompt_tokens  # reported as is; it drives nothing once stale
        valid = self.valid_measurement()
        if mode == TOKEN_METER_ACTUAL and valid is not None:
            used, source, kind = valid, "measured", METER_KIND_USAGE
        elif mode == TOKEN_METER_HYBRID:
            used, source, kind = hybrid.tokens, "hybrid", hybrid.kind
        else:
            used, source = estimated, "estimate"
            kind = METER_KIND_NONE if not working else METER_KIND_ESTIMATED
        extras = {
            "anchor_tokens": measured,
            "anchor_estimate": decisions._anchor_estimate,
            "cache_aggregates": self.cache_aggregates(),
            "provenance_refusals": decisions._provenance_refusals,
            "provenance_overrides": decisions._provenance_overrides,
            "anchor_floor_fires": decisions._anchor_floor_fires,
        }
        self.last_stats = meter_stats(mode, source, kind, used, estimated, measured, hybrid, extras, budget)
        return used, source, estimated, kind

    def measure_hybrid(
        self, working: list[Message], decisions: Any, counts: Any, estimated: int, appended_only: bool = False
    ) -> HybridCount:
        hybrid = measure_hybrid(
            working,
            estimated,
            self.last_measured_prompt_tokens,
            decisions._anchor_seq,
            decisions._anchor_estimate,
            counts.count,
            lambda messages, anchor_seq: self.tail_scan.tail(messages, anchor_seq, appended_only),
        )
        decisions._last_hybrid_tokens, decisions._last_hybrid_kind = hybrid.tokens, hybrid.kind
        decisions._last_hybrid_anchored = hybrid.anchored_tokens
        return hybrid

    def should_compact(
        self, decisions: Any, mode: str, threshold: float, token_count: int, budget: int, kind: str | None
    ) -> bool:
        """The trigger: usage at or over the threshold; in hybrid mode only on a 'usage' count."""
        usage = token_count / budget if budget > 0 else 0
        if usage < threshold:
            return False
        if mode != TOKEN_METER_HYBRID or kind is None or kind == METER_KIND_USAGE:
            return True
        anchored = decisions._last_hybrid_anchored
        if anchored is not None and budget > 0 and anchored / budget >= threshold:
            # The provider's own total (rejected only as a floor, for being below the estimate) already
            # crosses the threshold: a lower bound over the line is proof, not a guess.
            decisions._anchor_floor_fires += 1
            return True
        # "No anchor ever arrived" for this history: set_messages() invalidates the anchor (not the reading).
        no_anchor = self.last_measured_prompt_tokens is None or decisions._anchor_seq is None
        if no_anchor and usage >= 1.0:
            decisions._provenance_overrides += 1
            logger.warning("context-simple: compacting on an estimate at %.0f%% of budget (no usage yet)", usage * 100)
            return True
        decisions._provenance_refusals += 1
        logger.info("context-simple: declined to compact on a count of kind %r", kind)
        return False

    def exceeds_threshold(self, decisions: Any, mode: str, threshold: float, estimated: int, budget: int) -> bool:
        """The escalation gate inside the ladder: measured or hybrid count when trusted, else the estimate."""
        if budget <= 0:
            return False
        measured = self.valid_measurement()
        if mode == TOKEN_METER_ACTUAL and measured is not None:
            return measured / budget >= threshold
        if mode == TOKEN_METER_HYBRID and decisions._last_hybrid_kind == METER_KIND_USAGE:
            return (decisions._last_hybrid_tokens or 0) / budget >= threshold
        return estimated / budget >= threshold

    def on_usage(self, data: Any, next_seq: int, decisions: Any, faults: Counter[str]) -> None:
        """Record the provider's reported prompt occupancy; never raises."""
        try:
            reading = parse_usage(data)
            if reading is None:
                faults["usage_events_ignored"] += 1
            else:
                self.last_measured_prompt_tokens = reading.prompt_tokens
                self.measurement_stale = False
                decisions._anchor_seq = next_seq
                decisions._anchor_estimate = decisions._last_sent_estimate
                self.usage_events += 1
                if reading.cache_read is None or reading.cache_write is None:
                    self.cache_fields_complete = False
                else:
                    self.cache_read_total += reading.cache_read
                    self.cache_write_total += reading.cache_write
        except Exception as exc:  # an observer must never fail the provider's turn
            faults["usage_events_ignored"] += 1
            logger.warning("context-simple: llm:response handler failed: %s", type(exc).__name__)

    def cache_aggregates(self) -> dict[str, int] | None:
        """Cache totals, or None (undefined) once any usage event lacked the cache fields."""
        if self.usage_events == 0 or not self.cache_fields_complete:
            return None
        return {
            "events": self.usage_events,
            "cache_read_tokens": self.cache_read_total,
            "cache_write_tokens": self.cache_write_total,
        }


def continue_result() -> Any:
    """A hook's answer: continue (amplifier-core's HookResult, or None without it)."""
    try:
        from amplifier_core.models import HookResult
    except ImportError:  # the host provides amplifier-core; without it, None also means continue
        return None
    return HookResult(action="continue")
