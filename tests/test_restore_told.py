"""Issue 42 points 7 and 8: what set_messages() and restore_state() now say instead of staying silent.

7. set_messages() given a view (the module's own notice and ledger envelopes among the messages) warns once.
8. restore_state() refusing because the host dropped ``metadata`` names metadata; a state saved under
   another configuration (a preset's, into a manager without it) is adopted with a warning.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

import pytest

from amplifier_module_context_simple import SimpleContextManager
from tests.test_evidence import session, views

LOGGER = "amplifier_module_context_simple"


def told(caplog: Any, needle: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and needle in r.getMessage()]


def evidence_run() -> tuple[SimpleContextManager, list[dict[str, Any]]]:
    """A preset manager after a compacted session, and its last view (a ledger and a notice in it)."""
    ctx, out = views({"preset": "evidence", "compaction_notice_enabled": True}, 2_500, session(14))
    return ctx, out[-1]


def test_set_messages_given_a_view_warns_once(caplog: Any) -> None:
    ctx, view = evidence_run()
    sources = {(m.get("metadata") or {}).get("source") for m in view}
    assert {"context-evidence", "context-compaction"} <= sources  # the view holds both envelopes
    fresh = SimpleContextManager()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        asyncio.run(fresh.set_messages(copy.deepcopy(view)))
        asyncio.run(fresh.set_messages(copy.deepcopy(view)))
    said = told(caplog, "set_messages() was given a view")
    assert len(said) == 1 and "get_messages()" in said[0], said


def test_set_messages_given_a_view_stripped_of_metadata_still_warns(caplog: Any) -> None:
    _, view = evidence_run()
    bare = [{k: v for k, v in m.items() if k != "metadata"} for m in view]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        asyncio.run(SimpleContextManager().set_messages(bare))
    assert told(caplog, "set_messages() was given a view")


def test_set_messages_given_the_history_says_nothing(caplog: Any) -> None:
    ctx, _ = evidence_run()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        asyncio.run(SimpleContextManager(preset="evidence").set_messages(asyncio.run(ctx.get_messages())))
    assert not told(caplog, "set_messages")


def test_a_refusal_because_metadata_was_dropped_names_metadata() -> None:
    ctx, _ = evidence_run()
    state = ctx.snapshot_state()
    history = asyncio.run(ctx.get_messages())
    dropped = [{k: v for k, v in m.items() if k != "metadata"} for m in history]
    fresh = SimpleContextManager(preset="evidence")
    asyncio.run(fresh.set_messages(dropped))
    with pytest.raises(ValueError) as caught:
        fresh.restore_state(state)
    assert "metadata" in str(caught.value) and "get_messages()" in str(caught.value)


def test_a_state_of_another_configuration_is_adopted_with_a_warning(caplog: Any) -> None:
    ctx, _ = evidence_run()
    state = ctx.snapshot_state()
    plain = SimpleContextManager()
    asyncio.run(plain.set_messages(asyncio.run(ctx.get_messages())))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        plain.restore_state(copy.deepcopy(state))
    said = told(caplog, "another configuration")
    assert len(said) == 1 and "preset: 'evidence' -> None" in said[0], said
    caplog.clear()
    same = SimpleContextManager(preset="evidence", compaction_notice_enabled=True)
    asyncio.run(same.set_messages(asyncio.run(ctx.get_messages())))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        same.restore_state(copy.deepcopy(state))
    assert not told(caplog, "another configuration")


def test_a_state_saved_before_the_fingerprint_still_restores_silently(caplog: Any) -> None:
    ctx, _ = evidence_run()
    state = ctx.snapshot_state()
    del state["config"]
    plain = SimpleContextManager()
    asyncio.run(plain.set_messages(asyncio.run(ctx.get_messages())))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        plain.restore_state(state)
    assert not told(caplog, "another configuration")
