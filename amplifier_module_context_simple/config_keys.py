"""The configuration keys: their names, the words they take, and the README's defaults (config.py reads them)."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

TOKEN_METER_ESTIMATE = "estimate"
TOKEN_METER_ACTUAL = "actual"
TOKEN_METER_HYBRID = "hybrid"
TOKEN_METER_MODES = (TOKEN_METER_ESTIMATE, TOKEN_METER_ACTUAL, TOKEN_METER_HYBRID)

COMPACTION_STRATEGY_PROGRESSIVE = "progressive"
COMPACTION_STRATEGY_SUMMARY = "summary"
COMPACTION_STRATEGIES = (COMPACTION_STRATEGY_PROGRESSIVE, COMPACTION_STRATEGY_SUMMARY)

SUMMARY_CALL_MODE_STANDALONE = "standalone"
SUMMARY_CALL_MODE_FORK = "fork"

TOOL_RESULT_SHAPE_HEAD = "head"
TOOL_RESULT_SHAPE_HEAD_TAIL = "head_tail"
TOOL_RESULT_SHAPES = (TOOL_RESULT_SHAPE_HEAD, TOOL_RESULT_SHAPE_HEAD_TAIL)

DEFAULT_CLEAR_AT_LEAST = None
DEFAULT_MAX_CONSECUTIVE_SKIPS = 3
DEFAULT_MAX_TOOL_RESULT_BYTES = 131_072
# The smallest byte cap a clipped result fits in with its marker and some of its text (ingress.py);
# today's original refuses caps below its own marker's length (about 200 bytes).
MIN_TOOL_RESULT_BYTES = 256


class DefaultTokens(int):
    """A token default nobody set (``max_tokens``, ``max_tokens_fallback``): it reads as the number, and
    tells budget.py that the key was left alone. ``max_tokens`` left alone is the original's fallback
    budget only; a value set in config, at construction or live is a plain int and also caps the
    provider-derived budget (today's original)."""

    def __repr__(self) -> str:
        return int.__repr__(self)


UNSET_MAX_TOKENS = DefaultTokens(200_000)

# The README's table: key -> default. The constructor's keyword defaults are read from here.
DEFAULTS: dict[str, Any] = {
    "max_tokens": UNSET_MAX_TOKENS,
    "compact_threshold": 0.92,
    "target_usage": 0.50,
    "protected_recent": 0.30,
    "protected_tool_results": 5,
    "truncate_chars": 250,
    "compaction_notice_enabled": True,
    "compaction_notice_token_reserve": 800,
    "compaction_notice_verbosity": "normal",
    "compaction_notice_min_level": 1,
    "output_reserve_fraction": 0.5,
    "token_meter": TOKEN_METER_ESTIMATE,
    "token_counter": "estimate",
    "compact_clear_at_least": DEFAULT_CLEAR_AT_LEAST,
    "compact_max_consecutive_skips": DEFAULT_MAX_CONSECUTIVE_SKIPS,
    "compaction_strategy": COMPACTION_STRATEGY_PROGRESSIVE,
    "summary_trigger": 0.60,
    "summary_call_mode": SUMMARY_CALL_MODE_STANDALONE,
    "summarization_model": None,
    "summarization_prompt_path": None,
    "summarization_timeout_s": 30.0,
    "summary_rearm_below": None,
    "summary_cooldown_requests": 0,
    "summary_min_absorb_tokens": 0,
    "tool_result_budget_tokens": None,
    "tool_result_shape": TOOL_RESULT_SHAPE_HEAD,
    "tool_result_budget_by_tool": {},
    "tool_result_exempt_tools": frozenset(),
    "tool_result_spill_dir": None,
    "replay_last_user_on_compaction": False,
    "max_messages": None,
    # Keys of today's original (budget.py, ingress.py): a fallback budget apart from the cap, a byte cap
    # per tool result in the view.
    "max_tokens_fallback": UNSET_MAX_TOKENS,
    "max_tool_result_bytes": DEFAULT_MAX_TOOL_RESULT_BYTES,
    # A tool result's view copy capped at this share of the budget too (result_share.py); None: off.
    "max_tool_result_share": None,
    # Evidence-preserving compaction (evidence.py, ledger.py) and presets (presets.py); off by default.
    "evidence_ledger_share": 0.0,
    "evidence_ledger_segments": False,  # an append-only ledger (ledger_segments.py)
    "evidence_ledger_dense": False,  # more evidence lines per token in the ledger (ledger_dense.py)
    "recall_tool": False,  # mount the context_recall tool (recall.py)
    # The newest user messages within this share of the budget are never stubbed (presets set it).
    "user_words_share": 0.0,
    # Recency protected in tokens (a share of the budget), not in messages, and the last rung aiming at the
    # budget (ladder.py, floor.py); off: the original's rules (presets set it).
    "protect_in_tokens": False,
    "preset": None,
    # Carried by amplifier-foundation's standard bundles (auto_compact: true): accepted and changes nothing,
    # since this module compacts each request's view whenever it is over the threshold (as the original).
    "auto_compact": True,
}

# Every configuration value of one manager at one moment, by key (what components read; issue 38).
Knobs = namedtuple("Knobs", tuple(DEFAULTS))  # noqa: PYI024 - a plain record of the table's keys
