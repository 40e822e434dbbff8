"""The manager's wiring: what each component is handed, read from the manager in this one place (issue 38).

Each function builds one component's inputs from the manager's configuration values and state; the
components themselves never read the manager. Installed on the manager as methods (caller_names.py).
"""

from __future__ import annotations

import operator
from typing import Any

from .compaction import PassInputs
from .config import Knobs
from .evidence import LedgerInputs
from .summary import SummaryInputs
from .tool_results import ResultInputs, ToolResultSettings, budget_counter
from .view_cache import CONFIG_KEYS, ViewInputs

_CONFIG = operator.attrgetter(*CONFIG_KEYS)


def _view_inputs(self: Any) -> ViewInputs:
    """What the view cache compares between requests (view_cache.py)."""
    factory = self._system_prompt_factory  # vars(self): a decision set a caller adds (``*_seqs``) counts
    return ViewInputs(vars(self), self._decisions, self.messages, self._counts(), factory, _CONFIG(self))


def _knobs(self: Any) -> Knobs:
    """Every configuration value now, by key (config_keys.Knobs)."""
    return Knobs._make(_CONFIG(self))


def _result_inputs(self: Any) -> ResultInputs:
    """What a tool result's rewrite reads (tool_results.py)."""
    budget_by_tool = tuple(sorted((self.tool_result_budget_by_tool or {}).items()))
    exempt = frozenset(self.tool_result_exempt_tools or ())
    counts = self._counts()
    settings = ToolResultSettings(
        self.truncate_chars, self.tool_result_budget_tokens, self.tool_result_shape, budget_by_tool, exempt,
        self.tool_result_spill_dir, budget_counter(counts.counter),
    )  # fmt: skip
    return ResultInputs(
        settings, self.messages, self._needs_tool_names(), self._ingress.source, counts.count, self._fault_counts
    )


def _ledger_inputs(self: Any) -> LedgerInputs:
    """What the evidence ledger reads at a boundary (evidence.py)."""
    share, segments, dense = self.evidence_ledger_share, self.evidence_ledger_segments, self.evidence_ledger_dense
    threshold, derive, faults = self.compact_threshold, self._tool_results.derive, self._fault_counts
    return LedgerInputs(share, segments, dense, self.target_usage, threshold, self.user_words_share, self.messages,
                        self._recall_mounted, self._counts(), derive, faults)  # fmt: skip


def _summary_inputs(self: Any) -> SummaryInputs:
    """What the summary strategy reads (summary.py); the budget is the request's the meter recorded."""
    budget = (self._meter.last_stats or {}).get("budget")
    budget = budget if isinstance(budget, int) and budget > 0 else self._fallback_budget()
    sticky, contains = self._apply_sticky_decisions, self._prefix_contains_span
    return SummaryInputs(self._knobs(), self.messages, self._decisions, self._counts(), sticky, budget,
                         self._emit, self._fault_counts, contains)  # fmt: skip


def _pass_inputs(self: Any) -> PassInputs:
    """What a compaction pass reads (compaction.py)."""
    limit_goal, swap, estimate = self._limit_goal, self._swap_in_pending_summary, self._estimate_tokens
    return PassInputs(self._knobs(), self._decisions, self.messages, self._counts(), self._ladder_ops(),
                      self._apply_sticky_decisions, swap, self._exceeds_threshold, limit_goal,
                      self._budget.reading, self._evidence, self._ledger_inputs(), estimate, self._emit,
                      self._history.seq_now, self._refusal.take_boundary)  # fmt: skip


WIRING = (_view_inputs, _knobs, _result_inputs, _ledger_inputs, _summary_inputs, _pass_inputs)
