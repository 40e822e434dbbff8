"""Configuration keys as live attributes: validated on assignment with the mount's rules (config.py).

Callers of the original assign knobs between requests (``ctx.max_tokens = 4000``); each assignment is
checked like the mount config, a misspelled public attribute is named, and a live ``preset`` follows
the one rule of presets: explicit keys always win.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Mapping
from typing import Any

from .config import _PAIRED, _VALIDATORS, DEFAULTS, _check_consistency, normalize_options, unknown_keyword_error
from .config_base import closest_name, current_scope, warn, warning_scope
from .config_words import checked_preset
from .presets import preset_settings
from .spill import spill_dir_problem


def _warn_missing_prompt(owner: Any, path: str | None) -> None:
    """Warn once per configured path that cannot be read; the summary call then falls back quietly."""
    if path is not None and not os.path.isfile(path):
        warn("summarization_prompt_path %r is not a readable file; using the default", path)
        owner._prompt_path_reported = path


def _warn_unusable_spill_dir(owner: Any, path: str | None) -> None:
    """Say at mount (or assignment) that spill files cannot be written there, instead of once per
    truncated result later; the writes that then fail are counted, not logged again (tool_results.py)."""
    problem = spill_dir_problem(path) if path is not None else None
    if problem is not None:
        warn(
            "tool_result_spill_dir %r cannot be used (%s); truncated results still name their spill file, "
            "and each failed write is counted in fault_stats['spill_write_failures']",
            path,
            problem,
        )
        owner._spill_failure_reported = path


# Checks of the environment (not of the value) run once per assignment, on the instance.
_AFTER_SET: dict[str, Callable[[Any, Any], None]] = {
    "summarization_prompt_path": _warn_missing_prompt,
    "tool_result_spill_dir": _warn_unusable_spill_dir,
}


class _LiveOption:
    """A config key as an attribute: validated on assignment like at mount; read at plain-attribute speed."""

    def __init__(self, key: str) -> None:
        self.key = key

    def __set__(self, owner: Any, value: Any) -> None:  # no __get__: reads come from the instance dict
        with warning_scope(owner.__dict__.setdefault("_said_warnings", set())):  # said once per manager
            self._set(owner, value)

    def _set(self, owner: Any, value: Any) -> None:
        value = _VALIDATORS[self.key](self.key, value)
        current = owner.__dict__
        explicit = current.setdefault("_explicit_keys", set())
        if self.key == "preset":
            changes = {**_preset_changes(current.get("preset"), value, explicit), "preset": value}
        else:
            changes = {self.key: value}
        _check_consistency({key: current.get(key) for key in _PAIRED} | changes)
        current.update(changes)
        if self.key != "preset":
            explicit.add(self.key)  # set by the caller: a preset assigned later leaves it alone
        after = _AFTER_SET.get(self.key)
        if after is not None:
            after(owner, value)


def _preset_changes(old: Any, new: Any, explicit: set[str]) -> dict[str, Any]:
    """The keys a live ``preset`` assignment changes. Explicit keys always win: a key the caller set (at
    construction, at mount or live) keeps its value; the old preset's other keys return to the default
    and the new preset's take its values (``preset = None`` turns a preset off)."""
    changes = {key: DEFAULTS[key] for key in preset_settings(old) if key not in explicit}
    changes.update({key: v for key, v in normalize_options(preset_settings(new)).items() if key not in explicit})
    return changes


class LiveOptions:
    """Base class whose config attributes (every key of the table) are validated when assigned. The
    environment checks note what they reported on the owner (``_prompt_path_reported``,
    ``_spill_failure_reported``: the summary's and the tool results' components, caller_names.py)."""

    def __setattr__(self, name: str, value: Any) -> None:
        # A misspelled key (ctx.target_usgae = 0.3) would silently create an attribute nothing reads.
        if name[0] != "_" and name not in self.__dict__ and not hasattr(type(self), name):
            close = closest_name(name, _VALIDATORS, 0.8)
            if close and name != "messages":
                with warning_scope(self.__dict__.setdefault("_said_warnings", set())):
                    warn(
                        "%s is not a configuration key (did you mean %s?); "
                        "the assignment sets an attribute nothing reads",
                        name,
                        close,
                    )
        object.__setattr__(self, name, value)

    def _apply_options(self, options: Mapping[str, Any]) -> None:
        """Validate a full set of options together (the constructor's), then adopt them."""
        self.__dict__.setdefault("_explicit_keys", set())  # apply_preset (below) names the given ones
        normalized = normalize_options(options)
        _check_consistency(normalized)
        self.__dict__.update(normalized)
        for key, after in _AFTER_SET.items():
            if key in normalized:
                after(self, normalized[key])


for _key in _VALIDATORS:
    setattr(LiveOptions, _key, _LiveOption(_key))


# Moved here from presets.py (issue 38), so presets.py imports nothing of config (no import circle).
def apply_preset(init: Callable[..., None]) -> Callable[..., None]:
    """Wrap a constructor so ``preset=NAME`` fills every keyword the caller did not pass explicitly."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            given = signature.bind_partial(self, *args, **kwargs).arguments
        except TypeError as error:
            raise unknown_keyword_error(error, kwargs) from None
        # A misspelled preset warns (naming the closest) and means none; a wrong type raises.
        for key, value in preset_settings(checked_preset(given.get("preset"))).items():
            if key not in given:
                kwargs[key] = value
        # The keys the caller gave: a preset assigned live later never overrides them (config.py).
        self.__dict__["_explicit_keys"] = set(given) - {"self", "hooks", "preset"}
        init(self, *args, **kwargs)

    @functools.wraps(init)
    def scoped(self: Any, *args: Any, **kwargs: Any) -> None:
        # One session's warnings: mount()'s scope if it opened one, else this manager's own (config_base).
        said = current_scope()
        self.__dict__["_said_warnings"] = said if said is not None else set()
        with warning_scope(self.__dict__["_said_warnings"]):
            wrapper(self, *args, **kwargs)

    return scoped
