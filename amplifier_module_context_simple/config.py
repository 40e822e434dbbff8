"""Every configuration key in one place: defaults, parsing and validation.

The defaults table is the README's. This is a drop-in replacement, so every value the original
module accepts and runs with is accepted here too: an odd one (a target at or above the threshold,
a fraction outside [0, 1], a negative count, a misspelled name, a number written as a string) gets
one warning naming the key, the value and what follows, and the original's behaviour or the key's
documented fallback. ``ValueError`` is kept for what cannot work at all: a wrong type or a non-finite
number that would fail later, mid-session.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from .config_base import closest_name
from .config_base import collected_warnings as collected_warnings  # re-exported: config is the public place
from .config_base import is_number as _is_number
from .config_base import reset_warnings as reset_warnings
from .config_base import warn as warn
from .config_keys import COMPACTION_STRATEGIES as COMPACTION_STRATEGIES
from .config_keys import COMPACTION_STRATEGY_PROGRESSIVE as COMPACTION_STRATEGY_PROGRESSIVE
from .config_keys import COMPACTION_STRATEGY_SUMMARY as COMPACTION_STRATEGY_SUMMARY
from .config_keys import DEFAULT_CLEAR_AT_LEAST as DEFAULT_CLEAR_AT_LEAST
from .config_keys import DEFAULT_MAX_CONSECUTIVE_SKIPS as DEFAULT_MAX_CONSECUTIVE_SKIPS
from .config_keys import DEFAULT_MAX_TOOL_RESULT_BYTES as DEFAULT_MAX_TOOL_RESULT_BYTES
from .config_keys import DEFAULTS as DEFAULTS
from .config_keys import MIN_TOOL_RESULT_BYTES as MIN_TOOL_RESULT_BYTES
from .config_keys import SUMMARY_CALL_MODE_FORK as SUMMARY_CALL_MODE_FORK
from .config_keys import SUMMARY_CALL_MODE_STANDALONE as SUMMARY_CALL_MODE_STANDALONE
from .config_keys import TOKEN_METER_ACTUAL as TOKEN_METER_ACTUAL
from .config_keys import TOKEN_METER_ESTIMATE as TOKEN_METER_ESTIMATE
from .config_keys import TOKEN_METER_HYBRID as TOKEN_METER_HYBRID
from .config_keys import TOKEN_METER_MODES as TOKEN_METER_MODES
from .config_keys import TOOL_RESULT_SHAPE_HEAD as TOOL_RESULT_SHAPE_HEAD
from .config_keys import TOOL_RESULT_SHAPE_HEAD_TAIL as TOOL_RESULT_SHAPE_HEAD_TAIL
from .config_keys import TOOL_RESULT_SHAPES as TOOL_RESULT_SHAPES
from .config_keys import UNSET_MAX_TOKENS as UNSET_MAX_TOKENS
from .config_keys import DefaultTokens as DefaultTokens
from .config_keys import Knobs as Knobs
from .config_values import _PAIRED as _PAIRED
from .config_values import _VALIDATORS as _VALIDATORS
from .config_values import NUMERIC_KEYS as NUMERIC_KEYS
from .config_values import RUNS_ANY_VALUE as RUNS_ANY_VALUE
from .config_values import _check_consistency as _check_consistency
from .presets import preset_settings

logger = logging.getLogger("amplifier_module_context_simple")


def normalize_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Validate known keys and return them normalized; unknown keys are the caller's business."""
    return {key: _VALIDATORS[key](key, value) for key, value in options.items() if key in _VALIDATORS}


def _suggestion(key: Any) -> str:
    close = closest_name(key, DEFAULTS, 0.75)
    return f"{key!s} (did you mean {close}?)" if close else str(key)


def unknown_keyword_error(error: TypeError, names: Any) -> TypeError:
    """The constructor's TypeError for a misspelled keyword, with the closest known name."""
    for name in names:
        if name not in DEFAULTS and name != "hooks":
            close = closest_name(name, [*DEFAULTS, "hooks"], 0.75)
            hint = f" (did you mean {close}?)" if close else ""
            return TypeError(f"SimpleContextManager got an unexpected keyword argument {name!r}{hint}")
    return error


def parse_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Read a mount-plan config: warn about unknown keys, validate the rest, fill defaults."""
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise ValueError(
            f"context-simple: the config must be a mapping of key: value (session.context.config), "
            f"got {type(config).__name__} {config!r:.80}"
        )
    unknown = sorted((key for key in config if key not in DEFAULTS), key=str)
    if unknown:
        warn("ignoring unknown config keys: %s", ", ".join(map(_suggestion, unknown)))
    normalized = normalize_options({key: value for key, value in config.items() if key in DEFAULTS})
    options = {**DEFAULTS, **preset_settings(normalized.get("preset")), **normalized}
    _check_consistency(options)
    return options


def check_token_budget(value: Any) -> int | float | None:
    """A request's explicit ``token_budget``: None (ask the provider), or a finite number > 0."""
    if value is None or (_is_number(value) and value > 0):
        return value
    # 0, negative and NaN budgets would silently disable compaction; a string would fail deep inside.
    raise ValueError(f"context-simple: invalid token_budget={value!r}; allowed: a number of tokens > 0, or None")


def parse_clear_at_least(value: Any, budget: int) -> int:
    """Tokens a compaction must free (0 = disabled), per the README's value table."""
    if value is None:
        return 0
    try:
        number = float(value) if not isinstance(value, bool) else math.nan  # true/false is no floor
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        logger.warning("context-simple: compact_clear_at_least=%r is not a (finite) number; disabled", value)
        return 0
    if number <= 0:
        return 0
    if number < 1:
        return int(budget * number) if budget > 0 else 0
    return int(number)
