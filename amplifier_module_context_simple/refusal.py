"""Learning from a refusal: when the provider says a request was too long, the next one fits.

A provider may report one window and refuse requests well below it (a server-side response chain or
server tools counted on top of the view, a model alias with a smaller window, a proxy). The
orchestrators (loop-basic, loop-streaming) then emit ``provider:error`` with
``{"error": {"type": ..., "msg": ...}}`` and raise; without this module hearing it, every later turn
resends a view just as large and fails the same way.

:func:`parse_refusal` reads such a payload: a refusal for length (``ContextLengthError``, or a message in
one of the providers' wordings) with the sizes the message states, if any. :class:`RefusalLimit` turns
it into a *learned limit*: the largest view, in the module's own count, taken to fit:

* both the refused size and the maximum stated: the refused view's count scaled by maximum / refused;
* otherwise: the refused view's count less ``REFUSAL_MARGIN`` (10%).

The manager caps its budget at the learned limit (so the trigger and the target follow it, and the
ladder compacts well under it, not to its edge) and sends no view past it less the input limit's margin.
Later usage readings (``llm:response``) move it: with the provider's ceiling known (its stated maximum, or
90% of what it refused) the limit follows ``view * ceiling / provider's count``, so a reading that shows
more room raises it; a view the provider accepted always fits. Usage readings far above the module's own
count on ``REPEATS`` responses in a row (a server-side chain really counted) are evidence of the same
kind: the limit follows them against the input limit, with one warning naming the likely cause.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from .limit import is_positive_number, margin

logger = logging.getLogger("amplifier_module_context_simple")

REFUSAL_MARGIN = 0.10  # below the refused view when the provider does not say by how much it was over
FAR_RATIO = 2.0  # a provider counting more than this times the module's count, plus FAR_SLACK_TOKENS,
FAR_SLACK_TOKENS = 2_000  # (tool schemas, reminders) is counting something the module never sent
MIN_READING = 1_000  # a smaller view's reading says more about fixed overheads than about a chain
REPEATS = 2  # far readings in a row that are evidence, not an outlier
REASON_CHARS = 300  # of the provider's message kept in the compaction payload
# Error types (amplifier-core's llm_errors, providers' own) about something else, whatever the message says.
NOT_LENGTH_TYPES = frozenset(
    {
        "RateLimitError",
        "AuthenticationError",
        "AccessDeniedError",
        "ContentFilterError",
        "ProviderUnavailableError",
        "LLMTimeoutError",
        "NotFoundError",
        "QuotaExceededError",
        "NetworkError",
        "AbortError",
    }
)
LENGTH_TYPE = "ContextLengthError"

_NUM = r"(\d[\d,_]*)"


@dataclass(frozen=True)
class _Wording:
    """A provider's wording that states sizes: the groups of the refused input, the maximum and the
    completion the request reserved (0: not stated); ``refused_has_completion``: the refused figure counts it."""

    pattern: re.Pattern[str]
    refused: int
    maximum: int
    completion: int = 0
    refused_has_completion: bool = False


_SIZED: tuple[_Wording, ...] = (
    # Anthropic: "prompt is too long: 131000 tokens > 100000 maximum"
    _Wording(re.compile(rf"prompt is too long:\s*{_NUM}\s*tokens?\s*>\s*{_NUM}", re.I), 1, 2),
    # Anthropic: "input length and `max_tokens` exceed context limit: 180000 + 32000 > 200000"
    _Wording(re.compile(rf"exceed context limit:\s*{_NUM}\s*\+\s*{_NUM}\s*>\s*{_NUM}", re.I), 1, 3, 2),
    # OpenAI, Azure, vLLM, DeepSeek: "maximum context length is 100000 tokens. However, your messages
    # resulted in 131000 tokens" / "However, you requested 135000 tokens (131000 in the messages, 4000 in
    # the completion)"
    _Wording(
        re.compile(
            rf"maximum context length is\s*{_NUM}\s*tokens.*?(?:resulted in|requested)\s*{_NUM}\s*tokens"
            rf"(?:[^.]*?{_NUM}\s*in the completion)?",
            re.I | re.S,
        ),
        2,
        1,
        3,
        True,
    ),
    # Gemini: "The input token count (131000) exceeds the maximum number of tokens allowed (100000)."
    _Wording(
        re.compile(
            rf"input token count\s*\(?{_NUM}\)?\s*exceeds the maximum number of tokens allowed\s*\(?{_NUM}", re.I
        ),
        1,
        2,
    ),
    # Bedrock: "Too many input tokens. Max input tokens: 100000, request input token count: 131000"
    _Wording(re.compile(rf"max input tokens:\s*{_NUM}\W+request input token count:\s*{_NUM}", re.I), 2, 1),
    # Mistral: "Prompt contains 131000 tokens ..., too large for model with 100000 maximum context length"
    _Wording(re.compile(rf"prompt contains\s*{_NUM}\s*tokens.*?too large for model with\s*{_NUM}", re.I | re.S), 1, 2),
    # Only the maximum: "This model's maximum context length is 8192 tokens. Please reduce ..."
    _Wording(re.compile(rf"maximum context length is\s*{_NUM}\s*tokens", re.I), 0, 1),
)
# Wordings that say "too long" without a size (and the sized ones' stems), for errors not typed as such.
_LENGTH_WORDS = re.compile(
    r"prompt is too long|input is too long|too long for (?:the )?(?:requested )?model|context length|"
    r"context[_ ]length[_ ]exceeded|context window|maximum context|exceed context limit|input token count|"
    r"too many (?:input )?tokens|maximum number of tokens|too large for model|"
    r"reduce the length of the (?:messages|prompt)",
    re.I,
)


@dataclass(frozen=True)
class Refusal:
    """A request refused for its length: the error's type, its message, and the sizes it states."""

    error_type: str
    message: str
    refused: int | None = None  # the provider's count of the refused input
    maximum: int | None = None  # the most input it takes


def _int(text: str | None) -> int | None:
    return None if text is None else int(re.sub(r"[,_]", "", text))


def _sizes(message: str) -> tuple[int | None, int | None]:
    """(refused, maximum) as the message states them; a completion the request reserved is the input's
    share of neither."""
    for wording in _SIZED:
        match = wording.pattern.search(message)
        if match is None:
            continue
        refused, maximum, completion = (
            _int(match.group(i)) if i else None for i in (wording.refused, wording.maximum, wording.completion)
        )
        if completion and maximum and completion < maximum:
            maximum -= completion
            if wording.refused_has_completion and refused and refused > completion:
                refused -= completion
        return refused, maximum
    return None, None


def parse_refusal(data: Any) -> Refusal | None:
    """The refusal in a ``provider:error`` payload, or None: not about length, or malformed (logged at
    debug level: an observer never fails the turn)."""
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            data = None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, str):  # a host that sends the message alone
        error = {"type": "", "msg": error}
    if not isinstance(error, dict) or not isinstance(error.get("msg", ""), str):
        logger.debug("context-simple: provider:error payload without an error object ignored: %r", data)
        return None
    error_type = error.get("type") if isinstance(error.get("type"), str) else ""
    message = error.get("msg") or error.get("message") or ""
    if not isinstance(message, str):
        logger.debug("context-simple: provider:error payload with a non-text message ignored")
        return None
    about_length = error_type == LENGTH_TYPE or (error_type not in NOT_LENGTH_TYPES and _LENGTH_WORDS.search(message))
    if not about_length:
        return None
    refused, maximum = _sizes(message)
    return Refusal(error_type, message, refused, maximum)


@dataclass
class Learned:
    """The learned limit: the largest view (module count) taken to fit, and what it was learned from."""

    limit: int
    ceiling: int | None  # the provider's own count it accepts, when known
    source: str  # "refusal" or "usage"


@dataclass
class RefusalLimit:
    """What the provider's refusals and readings taught: a limit under its stated window, or None."""

    learned: Learned | None = None
    refusals: int = 0
    events: int = 0  # the usage readings seen (one per response)
    streak: int = 0  # far readings in a row
    warned: bool = False
    boundary: dict[str, Any] | None = field(default=None, repr=False)  # why the next boundary happens

    def refused(self, refusal: Refusal, sent: int | None, rate: float | None = None) -> Learned | None:
        """Learn from a refusal of a view the module counted ``sent`` (None: no view sent yet, nothing to
        scale); ``rate``: the provider's count per module token in its last reading, if any. The limit only
        goes down on a refusal."""
        if not sent or sent <= 0:
            logger.debug("context-simple: a length refusal before any view was sent; nothing learned")
            return None
        self.refusals += 1
        refused, maximum = refusal.refused, refusal.maximum
        if refused and maximum and maximum < refused:
            limit, ceiling = int(sent * maximum / refused), maximum
        else:
            limit = int(sent * (1 - REFUSAL_MARGIN))
            counted = refused or (int(sent * rate) if rate else None)  # the provider's count of the view
            ceiling = maximum or (int(counted * (1 - REFUSAL_MARGIN)) if counted else None)
        if self.learned is not None:
            limit = min(limit, self.learned.limit)
            ceiling = min(filter(None, (ceiling, self.learned.ceiling)), default=None)
        self.learned = Learned(max(1, limit), ceiling, "refusal")
        self.boundary = {
            "compaction_reason": "provider_refused_length",
            "refused_tokens": refused or sent,
            "learned_input_limit": self.learned.limit,
            "refusal_message": refusal.message[:REASON_CHARS],
        }
        return self.learned

    def note(self, events: int, measured: Any, counted: Any, budget: int | None) -> None:
        """A usage reading (the provider counted ``measured`` for a view the module counted ``counted``),
        taken once per response (``events`` moved). ``budget``: what the module sizes views for."""
        if events == self.events:
            return
        self.events = events
        if not (is_positive_number(measured) and is_positive_number(counted)):
            return
        measured, counted = int(measured), int(counted)
        far = counted >= MIN_READING and measured > FAR_RATIO * counted + FAR_SLACK_TOKENS
        self.streak = self.streak + 1 if far else 0
        if self.learned is not None:
            self._follow(self.learned, measured, counted, far, budget)
        if self.streak >= REPEATS and budget:
            self._follow_chain(measured, counted, budget)

    def _follow(self, learned: Learned, measured: int, counted: int, far: bool, budget: int | None) -> None:
        """The limit follows a reading: ``view * ceiling / provider's count``. A refusal's ceiling is the
        provider's (what it accepted, it accepts); a chain's is the budget. A single far reading may be an
        outlier: it only raises."""
        ceiling = learned.ceiling if learned.source == "refusal" else budget
        if not ceiling:
            learned.limit = max(learned.limit, counted)  # no ceiling known: a view it accepted fits
            return
        if learned.source == "refusal":
            ceiling = max(ceiling, measured)
        follow = max(1, int(counted * ceiling / measured))
        if follow > learned.limit or not far or self.streak >= REPEATS:
            learned.limit, learned.ceiling = follow, ceiling

    def _follow_chain(self, measured: int, counted: int, budget: int) -> None:
        """Repeated readings far above the module's count: the limit follows them (warned once)."""
        limit = max(1, int(counted * budget / measured))
        if self.learned is None or limit < self.learned.limit:
            self.learned = Learned(limit, budget, "usage")
            self.boundary = {
                "compaction_reason": "provider_usage_far_above_count",
                "refused_tokens": measured,
                "learned_input_limit": limit,
            }
        if not self.warned:
            self.warned = True
            logger.warning(
                "context-simple: the provider counted %d tokens for a view this module counts %d (%.1fx) on %d "
                "responses in a row: likely a server-side response chain (previous_response_id, stored "
                "conversation state) or server tools counted on top of the view; views now follow the "
                "provider's count (at most %d of the module's tokens)",
                measured,
                counted,
                measured / counted,
                self.streak,
                self.learned.limit,
            )

    def cap(self, budget: int) -> int:
        """The budget, at most the learned limit: the trigger and the target follow what the provider takes."""
        return budget if self.learned is None else min(budget, self.learned.limit)

    def goal(self, tail: int) -> int | None:
        """The largest view body (before its ``tail``) under the learned limit less the input limit's margin."""
        if self.learned is None:
            return None
        limit = self.learned.limit
        return limit - margin(limit) - tail

    def take_boundary(self) -> dict[str, Any]:
        """The reason for the boundary a refusal or a chain caused: the next compaction payload's keys, once."""
        boundary, self.boundary = self.boundary, None
        return boundary or {}

    def stats(self) -> dict[str, Any]:
        return {"length_refusals": self.refusals, "learned_input_limit": self.learned.limit if self.learned else None}

    def saved(self) -> dict[str, Any] | None:
        """What ``snapshot_state`` keeps (``meter.learned_limit``); None while nothing was read yet. The
        readings seen and the far streak are kept even before anything is learned: a twin restored without
        them would count the next far reading as the first and part from the session it resumes."""
        if self.learned is None and not (self.refusals or self.events or self.streak or self.warned):
            return None
        learned = self.learned
        return {
            "limit": learned.limit if learned else None,
            "ceiling": learned.ceiling if learned else None,
            "source": learned.source if learned else None,
            "refusals": self.refusals,
            "events": self.events,
            "streak": self.streak,
            "warned": self.warned,
        }

    def restore(self, saved: dict[str, Any] | None) -> None:
        self.__init__()  # type: ignore[misc]
        if saved is None:
            return
        if saved["limit"] is not None:
            self.learned = Learned(saved["limit"], saved["ceiling"], saved["source"])
        self.refusals, self.events, self.streak, self.warned = (
            saved["refusals"],
            saved["events"],
            saved["streak"],
            saved["warned"],
        )


SAVED_KEYS = frozenset({"limit", "ceiling", "source", "refusals", "events", "streak", "warned"})


def valid_saved(value: Any) -> bool:
    """A ``meter.learned_limit`` a snapshot may hold: null, or :meth:`RefusalLimit.saved`'s shape."""
    if value is None:
        return True
    if not (isinstance(value, dict) and set(value) == SAVED_KEYS):
        return False
    counts = all(_count(value[key]) for key in ("refusals", "events", "streak"))
    limit_ok = value["limit"] is None or (_count(value["limit"]) and value["limit"] >= 1)
    ceiling_ok = value["ceiling"] is None or (_count(value["ceiling"]) and value["ceiling"] >= 1)
    source_ok = value["source"] in ((None,) if value["limit"] is None else ("refusal", "usage"))
    return counts and limit_ok and ceiling_ok and source_ok and isinstance(value["warned"], bool)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
