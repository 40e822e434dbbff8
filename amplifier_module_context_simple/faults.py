"""The ``fault_stats`` keys: counters of optional features that failed and degraded, never failing the
host's turn (each present, 0, from the start). Moved from manager.py (issue 38), which re-exports it."""

FAULT_KEYS = (
    "hook_emit_failures",
    "provider_info_failures",
    "spill_write_failures",
    "summarization_failures",
    "system_prompt_factory_failures",
    "usage_events_ignored",
    "capability_register_failures",
    "repair_synthetic_results",
    "repair_orphans_dropped",
    "repair_duplicates_dropped",
    "evidence_failures",
    "recall_failures",
    "restore_summaries_dropped",
    "refusal_failures",
)
