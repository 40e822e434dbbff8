"""A tool result's view copy capped at a share of the budget (``max_tool_result_share``; off by default).

In a small window one tool result can fill most of the budget: every result that arrives then forces a
compaction boundary, and each boundary rewrites the whole view at the cache's write price. Capping each
result's view copy at a share of the budget, from the first request that carries it, keeps two results
within the trigger, so boundaries come less often; the copy never changes afterwards (the same bytes on
every request), so the cap costs no rewrite. In a roomy window the share is larger than the results and
nothing changes. The cap is today's byte cap (``max_tool_result_bytes``, ingress.py) taken lower: the
stored history keeps the whole result, so the evidence ledger and ``context_recall`` still read all of it.
"""

from __future__ import annotations

# Bytes of text per token of budget: the module's estimator counts about 4 characters a token.
BYTES_PER_TOKEN = 4
# The share never clips a result below this: a result of ~3,000 tokens does not fill a window, and a clip
# cuts the lines past its head (measured: in the retention scenarios' small budgets a cap without this
# floor, or with 8 KB, cut the end of 10 KB results in budgets of ~6,500 tokens: a planted fact was lost).
MIN_SHARE_CAP_BYTES = 12288


def ingress_limit(max_bytes: int | None, share: float | None, budget: int | None) -> int | None:
    """The byte cap of a tool result's view copy this request: ``max_bytes``, or ``share`` of the budget
    (at 4 bytes a token) when that is lower, but never under ``MIN_SHARE_CAP_BYTES``."""
    if not share or budget is None or budget <= 0:
        return max_bytes
    cap = max(MIN_SHARE_CAP_BYTES, int(budget * share * BYTES_PER_TOKEN))
    return cap if max_bytes is None else min(max_bytes, cap)
