"""The value checks of every configuration key: one validator a key (``_VALIDATORS``), numbers written
as strings, and the checks of keys read together (config.py applies them)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from .config_base import bad_value as _bad
from .config_base import collected_warnings as collected_warnings  # re-exported: config is the public place
from .config_base import is_int as _is_int
from .config_base import is_number as _is_number
from .config_base import reset_warnings as reset_warnings
from .config_base import warn as warn
from .config_hints import how_to_write_tokens, percent_hint
from .config_keys import (
    COMPACTION_STRATEGIES,
    COMPACTION_STRATEGY_PROGRESSIVE,
    DEFAULT_MAX_TOOL_RESULT_BYTES,
    MIN_TOOL_RESULT_BYTES,
    SUMMARY_CALL_MODE_FORK,
    SUMMARY_CALL_MODE_STANDALONE,
    TOKEN_METER_ESTIMATE,
    TOKEN_METER_MODES,
    TOOL_RESULT_SHAPE_HEAD,
    TOOL_RESULT_SHAPES,
    UNSET_MAX_TOKENS,
    DefaultTokens,
)
from .config_words import (
    auto_compact,
    boolean,
    choice,
    counter_spec,
    exempt_tools,
    notice_verbosity,
    optional_text,
    preset_name,
    spill_dir,
)


def _number_in(text: str) -> int | float | None:
    """The finite number a string spells ("5000", " 0.5 ", "1e3"), else None."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _read_number(key: str, value: Any) -> Any:
    """A string that reads as a finite number is that number, said once (YAML and environment variables
    often quote numbers); anything else is returned as given, for the key's own rule."""
    if not isinstance(value, str):
        return value
    number = _number_in(value)
    if number is None:
        return value
    warn("%s=%r is a string; read as the number %r", key, value, number)
    return number


def _numeric(check: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    """A numeric key's validator that first reads a number written as a string."""

    def read(key: str, value: Any) -> Any:
        return check(key, _read_number(key, value))

    return read


def _int_clamped(low: int, meaning: str) -> Callable[[str, Any], int]:
    """An integer; below ``low`` the original ran as ``low`` (``meaning`` says what that does)."""

    def check(key: str, value: Any) -> int:
        if not _is_int(value):
            raise _bad(key, value, f"an integer (below {low}: {meaning})")
        if value < low:
            warn("%s=%r is below %d; using %d (%s)", key, value, low, low, meaning)
            return low
        return value

    return check


def _max_tokens(key: str, value: Any) -> int | None:
    """None (no cap) or a number of tokens >= 1; anything else runs with no limit, as today's original
    runs it, warned with how to write it."""
    if value is None or isinstance(value, DefaultTokens):
        return value
    if _is_number(value) and value >= 1:
        return int(value)
    warn("%s=%r %s; running with no limit for now", key, value, how_to_write_tokens(value, "or null for no limit"))
    return None


def _fallback_tokens(key: str, value: Any) -> int:
    """The budget when the provider reports no window; a bad value warns and keeps the default."""
    if isinstance(value, DefaultTokens):
        return value
    if _is_number(value) and value >= 1:
        return int(value)
    warn("%s=%r %s; using %d for now", key, value, how_to_write_tokens(value, ""), UNSET_MAX_TOKENS)
    return UNSET_MAX_TOKENS


def _result_bytes(key: str, value: Any) -> int | None:
    """A byte cap per tool result in the view: an integer >= 1 (below the smallest workable cap, that
    cap), or None/0 for no cap."""
    if value is None or (_is_number(value) and value == 0):
        return None
    if _is_int(value) and value >= MIN_TOOL_RESULT_BYTES:
        return value
    if _is_int(value) and value >= 1:
        warn(
            "%s=%r leaves no room for a clipped result's marker and text; using the smallest workable cap, %d",
            key,
            value,
            MIN_TOOL_RESULT_BYTES,
        )
        return MIN_TOOL_RESULT_BYTES
    warn(
        "%s=%r is not an integer of bytes >= 1 (None or 0: no cap); using %d", key, value, DEFAULT_MAX_TOOL_RESULT_BYTES
    )
    return DEFAULT_MAX_TOOL_RESULT_BYTES


def _fraction(low_open: bool, high: float = 1.0, effect: str = "") -> Callable[[str, Any], float]:
    """A finite number; outside its documented range it still runs as in the original, with one warning
    (a percentage such as 50 asks "did you mean 0.5?")."""

    def check(key: str, value: Any) -> float:
        bound = "(0" if low_open else "[0"
        if not _is_number(value):
            raise _bad(key, value, f"a finite number (documented range {bound}, {high:g}])")
        inside = (value > 0 if low_open else value >= 0) and value <= high
        if not inside:
            hint = percent_hint(value)
            warn(
                "%s=%r is outside %s, %g]%s; used as given%s", key, value, bound, high, hint, effect and f" ({effect})"
            )
        return value if _is_int(value) else float(value)  # as written: the constructor's check says the same

    return check


def _own_fraction(high: float) -> Callable[[str, Any], float]:
    """A share of this module's own (no original has it): the one rule of every key, a wrong type
    raises and a number outside [0, high] warns and runs at the nearest end of the range."""

    def check(key: str, value: Any) -> float:
        if not _is_number(value):
            raise _bad(key, value, f"a number in [0, {high:g}]")
        if not 0 <= value <= high:
            used = min(high, max(0.0, float(value)))
            warn("%s=%r is outside [0, %g]%s; using %g", key, value, high, percent_hint(value), used)
            return used
        return float(value)

    return check


_share = _fraction(low_open=False)


def _optional_share(key: str, value: Any) -> float | None:
    """A share of this module's own that may be off: None or 0 (off), or a share of the budget in (0, 1]. The
    one rule of every key: a wrong type raises; a number outside warns and runs at the nearest end (0: off)."""
    if value is None:
        return None
    if not _is_number(value):
        raise _bad(key, value, "null, or a number in (0, 1]")
    if not 0 <= value <= 1:
        used = min(1.0, max(0.0, float(value)))
        warn("%s=%r is outside [0, 1]%s; using %g", key, value, percent_hint(value), used)
        return used or None
    return float(value) or None


def _protected_share(key: str, value: Any) -> float:
    # The original's int(n * (1 - share)) protects everything above 1 and nothing below 0: clamp to say so.
    return min(1.0, max(0.0, _share(key, value)))


_SUMMARY_CALL_MODES = (SUMMARY_CALL_MODE_STANDALONE, SUMMARY_CALL_MODE_FORK)


def _summary_call_mode(key: str, value: Any) -> str:
    if value == "inline":  # documented alias of standalone, silently accepted
        return SUMMARY_CALL_MODE_STANDALONE
    return choice(_SUMMARY_CALL_MODES, SUMMARY_CALL_MODE_STANDALONE, "summary_call_mode")(key, value)


def _max_skips(key: str, value: Any) -> int:
    # As the original: max(1, int(value)), so 2.7 runs as 2 and "3" as 3 (each named in a warning);
    # what int() refuses (inf, NaN, "lots", None) failed the original's constructor too.
    if isinstance(value, bool):
        raise _bad(key, value, "an integer (0 and below clamp to 1)")
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        raise _bad(key, value, "an integer (0 and below clamp to 1)") from None
    if not _is_int(value):
        warn("%s=%r is not an integer; using %d, as int() reads it", key, value, max(1, number))
    if number < 1:
        warn("%s=%r is below 1; using 1 (the first refusal past the cap raises)", key, value)
    return max(1, number)


def _timeout(key: str, value: Any) -> float:
    if not _is_number(value):
        raise _bad(key, value, "a number of seconds > 0")
    if value <= 0:  # the original runs it: every summary call times out at once and falls back
        warn(
            "%s=%r is not > 0; every summary call times out at once (write a number of seconds such as 30)", key, value
        )
    return float(value)


def _tool_budget(key: str, value: Any) -> int | None:
    if value is None:
        return None
    if _is_int(value) and value >= 1:
        return value
    warn("tool_result_budget_tokens=%r is not an integer >= 1; disabled", value)
    return None


def _budget_by_tool(key: str, value: Any) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        warn("tool_result_budget_by_tool=%r is not a mapping; ignored", value)
        return {}
    kept: dict[str, int] = {}
    for name, entry in value.items():
        budget = _read_number(f"tool_result_budget_by_tool[{name!r}]", entry)
        if isinstance(name, str) and name and _is_int(budget) and budget >= 1:
            kept[name] = budget
        else:
            warn(
                "tool_result_budget_by_tool entry %r=%r dropped (want name: int >= 1)",
                name,
                budget,
            )
    return kept


def _clear_at_least(key: str, value: Any) -> Any:
    # Checked here, once (the original warned on every compaction); unparseable means off.
    if value is None:
        return None
    try:
        number = math.nan if isinstance(value, bool) else float(value)  # true/false is no floor
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        warn("compact_clear_at_least=%r is not a (finite) number; disabled", value)
        return None
    if number < 0:
        warn("compact_clear_at_least=%r is negative; disabled (0 and below mean off)", value)
    return value


def _optional_fraction(key: str, value: Any) -> float | None:
    if value is None:
        return None
    return _fraction(low_open=True)(key, value)


def _absorb_floor(key: str, value: Any) -> int | float:
    # Like compact_clear_at_least: an int >= 1 is tokens, a number in (0, 1) a share of the budget.
    if _is_number(value) and 0 < value < 1:
        return float(value)
    if _is_number(value) and value == 0:
        return 0  # 0.0 is the same "off" as 0
    if _is_int(value) and value >= 1:
        return value
    if _is_number(value) and value < 0:
        warn("%s=%r is below 0; using 0 (off)", key, value)
        return 0
    raise _bad(key, value, "0 (off), an integer of tokens >= 1, or a fraction of the budget in (0, 1)")


def _max_messages(key: str, value: Any) -> Any:
    """Accepted and ignored, whatever its value (the original's README example sets it)."""
    if value is not None and not (_is_int(value) and value >= 1):
        warn("%s=%r is not a number of messages >= 1; ignored anyway (token budgets govern views)", key, value)
    return value


_THRESHOLD_EFFECT = "at or below 0 every request compacts, above 1 compaction never starts"
_TARGET_EFFECT = "compaction cuts down to this share of the budget; above 1 it cuts almost nothing"
_VALIDATORS: dict[str, Callable[[str, Any], Any]] = {
    "auto_compact": auto_compact,
    "max_tokens": _max_tokens,
    "compact_threshold": _fraction(
        low_open=True, effect="at or below 0 every request compacts, above 1 compaction never starts"
    ),
    "target_usage": _fraction(
        low_open=True, effect="compaction cuts down to this share of the budget; above 1 it cuts almost nothing"
    ),
    "protected_recent": _protected_share,
    "protected_tool_results": _int_clamped(0, "no tool result is protected from truncation"),
    "truncate_chars": _int_clamped(0, "a truncated result keeps no characters of its head"),
    "compaction_notice_enabled": boolean,
    "compaction_notice_token_reserve": _int_clamped(0, "no tokens are reserved for the notice"),
    "compaction_notice_verbosity": notice_verbosity,
    "compaction_notice_min_level": _int_clamped(0, "every compaction gets a notice"),
    "output_reserve_fraction": _fraction(low_open=False, effect="the share of max_output_tokens kept for output"),
    "token_meter": choice(TOKEN_METER_MODES, TOKEN_METER_ESTIMATE, "token_meter"),
    "token_counter": counter_spec,
    "compact_clear_at_least": _clear_at_least,
    "compact_max_consecutive_skips": _max_skips,
    "compaction_strategy": choice(COMPACTION_STRATEGIES, COMPACTION_STRATEGY_PROGRESSIVE, "compaction_strategy"),
    "summary_trigger": _fraction(low_open=True, effect="the share of the budget that starts a summary"),
    "summary_call_mode": _summary_call_mode,
    "summarization_model": optional_text,
    "summarization_prompt_path": optional_text,
    "summarization_timeout_s": _timeout,
    "summary_rearm_below": _optional_fraction,
    "summary_cooldown_requests": _int_clamped(0, "no cooldown"),
    "summary_min_absorb_tokens": _absorb_floor,
    "tool_result_budget_tokens": _tool_budget,
    "tool_result_shape": choice(TOOL_RESULT_SHAPES, TOOL_RESULT_SHAPE_HEAD, "tool_result_shape"),
    "tool_result_budget_by_tool": _budget_by_tool,
    "tool_result_exempt_tools": exempt_tools,
    "tool_result_spill_dir": spill_dir,
    "replay_last_user_on_compaction": boolean,
    "max_messages": _max_messages,
    "max_tokens_fallback": _fallback_tokens,
    "max_tool_result_bytes": _result_bytes,
    "max_tool_result_share": _optional_share,
    "evidence_ledger_share": _own_fraction(high=0.9),
    "evidence_ledger_segments": boolean,
    "evidence_ledger_dense": boolean,
    "recall_tool": boolean,
    "user_words_share": _own_fraction(high=0.9),
    "protect_in_tokens": boolean,
    "preset": preset_name,
}
# The one rule of every key (README, docs/configuration-checks.md): a value of the right type outside
# its range warns and runs (as the original runs it, or at the nearest end of the range for this module's
# own keys); a wrong type or a non-finite number raises, except for these keys, whose every value the
# original (or today's original) runs with: there a wrong type warns and runs the key's fallback.
RUNS_ANY_VALUE = (
    "max_tokens",
    "max_tokens_fallback",
    "max_tool_result_bytes",
    "compact_clear_at_least",
    "tool_result_budget_tokens",
    "tool_result_budget_by_tool",
    "max_messages",
)
# One rule for every numeric key: a number written as a string is that number (with a warning).
NUMERIC_KEYS = (
    "max_tokens",
    "compact_threshold",
    "target_usage",
    "protected_recent",
    "protected_tool_results",
    "truncate_chars",
    "compaction_notice_token_reserve",
    "compaction_notice_min_level",
    "output_reserve_fraction",
    "compact_clear_at_least",
    "compact_max_consecutive_skips",
    "summary_trigger",
    "summarization_timeout_s",
    "summary_rearm_below",
    "summary_cooldown_requests",
    "summary_min_absorb_tokens",
    "tool_result_budget_tokens",
    "max_messages",
    "max_tokens_fallback",
    "max_tool_result_bytes",
    "max_tool_result_share",
    "evidence_ledger_share",
    "user_words_share",
)
_VALIDATORS.update({key: _numeric(_VALIDATORS[key]) for key in NUMERIC_KEYS})


def _check_consistency(options: Mapping[str, Any]) -> None:
    """Name combinations no single key shows; the original accepts them, and so does this module."""
    threshold, target = options.get("compact_threshold"), options.get("target_usage")
    # A share above 1 was named by its own warning ("did you mean 0.5?"): one line, not two.
    if threshold is not None and target is not None and target >= threshold and target <= 1:
        # Tests of the original rely on it (0.5/0.5 forces a compaction on every request over 0.5).
        warn(
            "compact_threshold %r <= target_usage %r: every request over the threshold compacts, and a "
            "view cut down to the target can still be over the threshold (the original's behaviour)",
            threshold,
            target,
        )


_PAIRED = ("compact_threshold", "target_usage")  # the keys _check_consistency reads
