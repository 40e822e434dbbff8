"""Issue 37 point 1: a configuration warning is said once per session, never once per process.

The original warns at every mount; an app that starts many sessions (or a test suite) must see the mistake
each time. One session mounted twice (amplifier-core's validator mounts the module on a mock coordinator
with the same config object, then the session mounts it) must not hear it twice.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from amplifier_core.testing import MockCoordinator

from amplifier_module_context_simple import SimpleContextManager, mount

LOGGER = "amplifier_module_context_simple"
# The values issue 37 tried: each warns, naming the key (and the closest name where there is one).
BAD = [
    ({"protected_tool_results": -3}, "protected_tool_results"),
    ({"compact_max_consecutive_skips": -2}, "compact_max_consecutive_skips"),
    ({"compact_clear_at_least": -5}, "compact_clear_at_least"),
    ({"token_meter": "hybird"}, "did you mean 'hybrid'"),
    ({"token_meter": "psychic"}, "token_meter"),
    ({"compaction_strategy": "sumary"}, "compaction_strategy"),
]


def said(caplog: Any, needle: str) -> int:
    return sum(needle in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


@pytest.mark.asyncio
@pytest.mark.parametrize(("config", "needle"), BAD)
async def test_two_sessions_in_one_process_each_warn(config: dict[str, Any], needle: str, caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _session in range(3):  # a fresh config dict each time, as each session's mount plan is
            await mount(MockCoordinator(), dict(config))
    assert said(caplog, needle) == 3, caplog.text


@pytest.mark.asyncio
@pytest.mark.parametrize(("config", "needle"), BAD)
async def test_one_session_mounted_twice_warns_once(config: dict[str, Any], needle: str, caplog: Any) -> None:
    shared = dict(config)  # the validator's mount and the session's see the same config object
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await mount(MockCoordinator(), shared)
        coordinator = MockCoordinator()
        await mount(coordinator, shared)
        key = next(iter(shared))
        setattr(coordinator.get("context"), key, shared[key])  # the same value assigned live: said already
    assert said(caplog, needle) == 1, caplog.text


@pytest.mark.parametrize(("config", "needle"), BAD)
def test_each_manager_built_directly_warns(config: dict[str, Any], needle: str, caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        first = SimpleContextManager(**config)
        SimpleContextManager(**config)
        key = next(iter(config))
        setattr(first, key, config[key])  # repeated on the same manager: not said again
    assert said(caplog, needle) == 2, caplog.text
