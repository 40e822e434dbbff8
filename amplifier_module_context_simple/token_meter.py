"""The real-usage token meter: what the provider billed, the estimate, and the hybrid of both.

Every count carries its provenance (``kind``): 'usage' when anchored on a provider's reported
total, 'estimated' when it is the heuristic, 'none' when there was nothing to count.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .estimate import seq_of

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
    return UsageReading(gross + (cache_write or 0), cache_read, cache_write)


def measure_hybrid(
    working: list[dict[str, Any]],
    estimated: int,
    anchor: int | None,
    anchor_seq: int | None,
    anchor_estimate: int | None,
    count: Callable[[dict[str, Any]], int],
) -> HybridCount:
    """Anchor (last billed total) plus the estimate of messages appended since that request.

    The conservatism guard rejects an anchor below the estimate of the view it billed: such a
    total is no trustworthy floor, so the full estimate is reported, marked 'estimated'.
    """
    if not working:
        return HybridCount(0, METER_KIND_NONE, False, 0, 0, "no_messages")
    if anchor is None or anchor_seq is None:  # never measured, or invalidated by set_messages()
        return HybridCount(estimated, METER_KIND_ESTIMATED, False, None, None, "no_anchor")
    tail = [m for m in working if (seq := seq_of(m)) is not None and seq >= anchor_seq]
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
