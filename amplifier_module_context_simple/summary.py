"""Summary compaction strategy (placeholder while the strategy is being built: never triggers)."""

from __future__ import annotations

from typing import Any


class SummaryMixin:
    """Summary-strategy state and methods of SimpleContextManager."""

    def _reset_summary_state(self) -> None:
        self._pending_summary: dict[str, Any] | None = None
        self._is_summarizing = False
        self._summarization_task = None
        self._summarization_failures = 0
        self._summary_absorbed_count = 0
        self._last_request_view: list[dict[str, Any]] | None = None
        self._view_serial = 0
        self._sent_messages: list[dict[str, Any]] | None = None
        self._sent_serial: int | None = None
        self._sent_tools: Any = None
        self._sent_tools_supplied = False
        self._sent_model: str | None = None
        self._summary_fork_fallbacks = 0
        self._fork_prefix_source: str | None = None
        self._last_summary_call: dict[str, Any] | None = None

    def _fork_armed(self) -> bool:
        return False

    def _maybe_trigger_summary_compaction(self, token_count: int, budget: int) -> None:
        return None

    def _swap_in_pending_summary(self, non_system: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
        return non_system, False
