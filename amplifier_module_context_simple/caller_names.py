"""The private names callers of the original read and assign (upstream-behaviour.md section 15, and the
tests of this module), kept on the manager as thin properties of the component that owns the state.

``SimpleContextManager._cached_provider`` reads and writes ``manager._summary.cached_provider``: each
entry below is (component attribute of the manager, attribute of the component). The decisions about
the history have their own names (decisions.py).
"""

from __future__ import annotations

from typing import Any

from .caller_methods import (
    METHODS,
    _extract_seq,
    _input_readings_get,
    _input_readings_set,
    _learned_limit_get,
    _learned_limit_set,
    last_summary_call_stats,
    max_tokens_explicit,
)
from .manager_wiring import WIRING

FORWARDED: dict[str, tuple[str, str]] = {
    # the stored history (history.History)
    "messages": ("_history", "messages"),
    "_next_seq": ("_history", "next_seq"),
    "_store_guard": ("_history", "guard"),
    "_warned_block_types": ("_history", "warned_block_types"),
    # the compaction pass's call-scoped state (compaction.Compaction)
    "_clear_at_least_pending": ("_compaction", "pending"),
    "_clear_at_least_last_refused": ("_compaction", "last_refused"),
    # the meter (token_meter.TokenMeter)
    "_last_measured_prompt_tokens": ("_meter", "last_measured_prompt_tokens"),
    "_last_token_meter_stats": ("_meter", "last_stats"),
    "_usage_events": ("_meter", "usage_events"),
    "_cache_read_total": ("_meter", "cache_read_total"),
    "_cache_write_total": ("_meter", "cache_write_total"),
    "_cache_fields_complete": ("_meter", "cache_fields_complete"),
    "_measurement_stale": ("_meter", "measurement_stale"),
    "_tail_scan": ("_meter", "tail_scan"),
    # the budget (budget.Budget)
    "_budget_reading": ("_budget", "reading"),
    "_budget_reported": ("_budget", "reported"),
    # tool results and spill (tool_results.ToolResults)
    "_tool_name_by_call_id": ("_tool_results", "names_by_call_id"),
    "_tool_name_by_seq": ("_tool_results", "names_by_seq"),
    "_tool_names_harvested": ("_tool_results", "names_harvested"),
    "_spilled_paths": ("_tool_results", "spilled_paths"),
    "_spill_failure_reported": ("_tool_results", "spill_failure_reported"),
    "_derived": ("_tool_results", "derived"),
    # the evidence ledger (evidence.EvidenceLedger)
    "_evidence_reads": ("_evidence", "reads"),
    "_segment_cache": ("_evidence", "_segment_cache"),
    "_ledger_cache": ("_evidence", "_ledger_cache"),
    # the summary call (summary.Summary)
    "_summarization_task": ("_summary", "task"),
    "_summary_generation": ("_summary", "generation"),
    "_cached_provider": ("_summary", "cached_provider"),
    "_is_summarizing": ("_summary", "is_summarizing"),
    "_prompt_path_reported": ("_summary", "prompt_path_reported"),
    "_last_request_view": ("_summary", "last_request_view"),
    "_view_serial": ("_summary", "view_serial"),
    "_sent_messages": ("_summary", "sent_messages"),
    "_sent_serial": ("_summary", "sent_serial"),
    "_sent_tools": ("_summary", "sent_tools"),
    "_sent_tools_supplied": ("_summary", "sent_tools_supplied"),
    "_sent_model": ("_summary", "sent_model"),
    "_summary_fork_fallbacks": ("_summary", "fork_fallbacks"),
    "_fork_prefix_source": ("_summary", "fork_prefix_source"),
    "_fork_reasons_logged": ("_summary", "fork_reasons_logged"),
    "_last_summary_call": ("_summary", "last_call"),
}


class Forwarded:
    """A manager attribute that lives on one of its components (read and assigned through)."""

    __slots__ = ("component", "name")

    def __init__(self, component: str, name: str) -> None:
        self.component, self.name = component, name

    def __get__(self, manager: Any, owner: type | None = None) -> Any:
        if manager is None:
            return self
        return getattr(manager.__dict__[self.component], self.name)

    def __set__(self, manager: Any, value: Any) -> None:
        setattr(manager.__dict__[self.component], self.name, value)


def install_caller_names(cls: type) -> type:
    """Give ``cls`` every name of :data:`FORWARDED` as a thin property of its component, and every thin
    method of :data:`METHODS` (a name the class defines itself is left alone)."""
    for name, (component, attribute) in FORWARDED.items():
        setattr(cls, name, Forwarded(component, attribute))
    for method in (*METHODS, *WIRING):
        if method.__name__ not in vars(cls):
            setattr(cls, method.__name__, method)
    cls._extract_seq = staticmethod(_extract_seq)  # also called on the class
    cls.last_summary_call_stats = property(last_summary_call_stats)
    cls.max_tokens_explicit = property(max_tokens_explicit)
    cls._input_readings = property(_input_readings_get, _input_readings_set)
    cls._learned_limit = property(_learned_limit_get, _learned_limit_set)
    return cls
