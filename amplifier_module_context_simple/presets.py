"""Named configurations a bundle asks for in one line: ``preset: NAME``; explicit keys override it.

No preset means today's defaults, exactly. Each preset's measured effect and when to use it are in
docs/evidence-compaction.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

# Every preset keeps the newest user messages verbatim within this share of the budget (issue 23): the
# user's corrections and constraints are the first thing users miss when a compacting agent loses them.
USER_WORDS_SHARE = 0.2
# Every preset caps a tool result's view copy at this share of the budget (issue 39, result_share.py): in a
# small window one result no longer fills the view, so two fit under the trigger and a boundary (a rewrite
# of the whole view at the cache's write price) comes on under 0.40 of the requests instead of about half;
# in a roomy window no result reaches the cap and nothing changes.
RESULT_SHARE = 0.25
# A preset without a notice caps lower: under a host that appends its reminders to the last message, a view
# ending in a tool result bills that result uncached (a notice after it would carry the reminders instead).
RESULT_SHARE_NO_NOTICE = 0.2

PRESETS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        # Forget much less for about the default's cost: the ledger keeps removed messages' key lines.
        "evidence": MappingProxyType(
            {
                "evidence_ledger_share": 0.7,
                "target_usage": 0.30,
                "user_words_share": USER_WORDS_SHARE,
                "max_tool_result_share": RESULT_SHARE,
                "protect_in_tokens": True,
                "compaction_notice_verbosity": "minimal",
            }
        ),
        # The cheapest measured that still misses at most half the evidence the default misses
        # (issue 13, target 1, on the shipped transcripts): a smaller ledger, no notice, and only the
        # latest tool result protected from truncation (it stays whole; older ones may be cut).
        "evidence_balanced": MappingProxyType(
            {
                "evidence_ledger_share": 0.75,
                "target_usage": 0.20,
                "user_words_share": USER_WORDS_SHARE,
                "max_tool_result_share": RESULT_SHARE_NO_NOTICE,
                "protect_in_tokens": True,
                "compaction_notice_enabled": False,
                "protected_tool_results": 1,
            }
        ),
        # Pay less, and still forget less than the default (issue 39: at most 0.75 of its bill at half its
        # miss, on the held-out half). A ledger room of 0.105 of the budget leaves a small view after a
        # boundary, and with a small view the trigger that costs least is lower than the default's: a
        # boundary rewrites the view at the write price, every request re-reads it at the read price, so
        # the cheapest gap between view and trigger is sqrt(2 x write x view x growth / read), not the
        # default's 0.42 of the budget. No notice: billed in full on every request, and its reserve moves
        # the trigger down further. Its ledger ranks densely (ledger_dense.py: more of the lines the agent
        # uses next per token), so it compacts deeper, to 0.13 (ledger room 0.091 of the budget), and still
        # misses less (tuned on the "tune" half of the transcripts: 0.736 -> 0.722 of the default's bill,
        # line miss 0.067 -> 0.057).
        "evidence_lean": MappingProxyType(
            {
                "evidence_ledger_share": 0.7,
                "evidence_ledger_dense": True,
                "target_usage": 0.13,
                "compact_threshold": 0.8,
                "user_words_share": USER_WORDS_SHARE,
                "max_tool_result_share": RESULT_SHARE_NO_NOTICE,
                "protect_in_tokens": True,
                "compaction_notice_enabled": False,
            }
        ),
    }
)


def preset_settings(name: Any) -> Mapping[str, Any]:
    """The settings of a preset (empty for None); ValueError naming the known presets otherwise."""
    if name is None:
        return {}
    if not isinstance(name, str) or name not in PRESETS:
        known = ", ".join(sorted(PRESETS))
        raise ValueError(f"context-simple: invalid preset={name!r}; allowed: null or one of {known}")
    return PRESETS[name]
