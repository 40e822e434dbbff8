"""The provider's input limit: a view past it is rejected and the session stops, so none is sent while a
valid view fits.

The input limit is ``context_window - max_output_tokens``, when the provider reports both (the request
reserves the whole of ``max_output_tokens`` for the answer; the budget keeps only
``output_reserve_fraction`` of it, so with a large output allowance the budget can pass the limit). With
no window known (an explicit ``token_budget``, a provider without info) there is no limit and nothing here
acts: the original's behaviour stands.

The module counts with its own counter; the provider counts with its tokenizer, plus what the module
never sees (tool schemas, a host's reminders). :class:`ProviderCount` predicts the provider's count from
the readings of the views sent before (``llm:response`` usage, recorded in every meter mode):
``offset + rate * count``, the rate the readings' median ratio, the offset the largest any reading needs on
top, so a fixed amount (schemas) and a tokenizer that counts more than the module (code, numbers) are both
covered; a single reading far over what the others predict is set aside (:func:`set_aside`). With no
reading yet (a session's first request, a resumed one), the provider is taken to count
``PRIOR_RATE`` times the module plus ``PRIOR_OFFSET``: under Amplifier's orchestrators the module's
four-characters-a-token estimate ran 1.15-1.3x low on dense views and the host added 540-800 tokens
(tool schemas, reminders) the module never sees. A view must stay
``SAFETY_MARGIN_TOKENS`` (at most an eighth of the limit) under the limit in that prediction: what was
appended since the last reading may count more than the view it measured.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from .budget import SAFETY_MARGIN_TOKENS

READINGS = 8  # the readings the line is drawn through
MAX_RATE = 4.0  # a rate beyond these is a reading of another view, not a tokenizer
MIN_RATE = 0.5
MIN_READING = 1_000  # a smaller view's reading says more about fixed overheads than about a rate
PRIOR_RATE = 1.25  # before any reading: the provider's tokenizer counts a quarter more than the module
PRIOR_OFFSET = 800  # and the host sends this much the module never sees
OUTLIER_FACTOR = 2.0  # a reading this far over what the others predict is of another request's content
OUTLIER_QUORUM = 2  # the other readings an outlier is judged against


def input_limit(reading: Any) -> int | None:
    """``context_window - max_output_tokens`` from a budget reading, or None when no window is known."""
    window = getattr(reading, "context_window", None)
    output = getattr(reading, "max_output_tokens", None)
    if not window or not output or window <= output:
        return None
    return window - output


def margin(limit: int) -> int:
    """Headroom kept under the limit for content the last reading did not measure."""
    return min(SAFETY_MARGIN_TOKENS, limit // 8)


class ProviderCount:
    """The provider's count of a view, predicted from its readings of earlier views (module count, its count)."""

    def __init__(self) -> None:
        self.readings: deque[tuple[int, int]] = deque(maxlen=READINGS)
        self._events = 0

    def note(self, events: int, measured: Any, counted: Any) -> None:
        """Take the latest reading when the meter's event count moved (one reading per response)."""
        if events == self._events:
            return
        self._events = events
        if is_positive_number(measured) and is_positive_number(counted) and counted >= MIN_READING:
            self.readings.append((int(counted), int(measured)))

    def fit(self) -> tuple[float, int]:
        """(rate, offset): the provider counts about ``offset + rate * count`` for a view the module counts
        ``count``. The rate is the readings' median ratio; the offset is the largest any reading needs on top
        of it (tool schemas, a host's reminders), so every reading is covered, but for a single outlier
        (:func:`set_aside`)."""
        readings = set_aside(list(self.readings))
        return _fit(readings) if readings else (PRIOR_RATE, PRIOR_OFFSET)

    def saved(self) -> dict[str, Any]:
        """The readings as ``snapshot_state`` keeps them: a resumed session predicts as the original did."""
        return {"events": self._events, "pairs": [list(pair) for pair in self.readings]}

    def restore(self, saved: dict[str, Any]) -> None:
        self._events = saved["events"]
        self.readings = deque((tuple(pair) for pair in saved["pairs"]), maxlen=READINGS)

    def largest_count(self, ceiling: int) -> int:
        """The largest module count whose predicted provider count stays within ``ceiling``."""
        rate, offset = self.fit()
        return int((ceiling - offset) / rate)


def _fit(readings: list[tuple[int, int]]) -> tuple[float, int]:
    ratios = sorted(measured / counted for counted, measured in readings)
    rate = min(MAX_RATE, max(MIN_RATE, ratios[len(ratios) // 2]))
    return rate, max(int(measured - rate * counted) for counted, measured in readings)


def set_aside(readings: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The readings without a single outlier: one that counts over ``OUTLIER_FACTOR`` times what the fit of
    the others (at least ``OUTLIER_QUORUM`` of them) predicts for its view, as a provider that counted its
    server-side tools as input once would report; its offset would make every later request a boundary.
    Two such readings mask each other and both stay: a repeated reading far above is no outlier."""
    if len(readings) <= OUTLIER_QUORUM:
        return readings
    far = []
    for index, (counted, measured) in enumerate(readings):
        rate, offset = _fit(readings[:index] + readings[index + 1 :])
        if measured > OUTLIER_FACTOR * (offset + rate * counted):
            far.append(index)
    return readings if len(far) != 1 else readings[: far[0]] + readings[far[0] + 1 :]


def is_positive_number(value: Any) -> bool:
    """A usage field that is a reading: a number > 0 (a bool is no number)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


class InputLimit:
    """The manager's guard: the provider's readings so far, and the largest view body the limit takes."""

    def __init__(self) -> None:
        self.count = ProviderCount()

    def goal(self, reading: Any, events: int, measured: Any, counted: Any, tail: int) -> int | None:
        """The largest module count of a view's body (before its ``tail``: the notice's reserve) whose
        predicted provider count stays ``margin`` under the input limit; None with no window known."""
        limit = input_limit(reading)
        if limit is None:
            return None
        self.count.note(events, measured, counted)
        return self.count.largest_count(limit - margin(limit)) - tail
