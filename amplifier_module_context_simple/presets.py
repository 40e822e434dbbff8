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

PRESETS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        # Forget much less for about the default's cost: the ledger keeps removed messages' key lines.
        "evidence": MappingProxyType(
            {
                "evidence_ledger_share": 0.7,
                "target_usage": 0.30,
                "user_words_share": USER_WORDS_SHARE,
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
                "protect_in_tokens": True,
                "compaction_notice_enabled": False,
                "protected_tool_results": 1,
            }
        ),
        # Pay less, and still forget less than the default.
        "evidence_lean": MappingProxyType(
            {
                "evidence_ledger_share": 0.7,
                "target_usage": 0.15,
                "user_words_share": USER_WORDS_SHARE,
                "protect_in_tokens": True,
                "compaction_notice_verbosity": "minimal",
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
