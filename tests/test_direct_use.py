"""Issue 42 points 2 and 9: the module used directly (no session), as the README's "Without a session".

2. ``recall_tool=True`` without mount() gave no tool and no warning: ``get_recall_tool()`` hands the tool
   to the caller's own tool loop, ``RecallTool`` is exported, and a manager that never took it says so once.
9. A public ``last_compaction_stats`` (the private name stays for hosts that read it).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

import amplifier_module_context_simple as package
from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.recall import NOTE
from tests.test_evidence import session, views

LOGGER = "amplifier_module_context_simple"
README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_the_recall_tool_is_exported() -> None:
    assert {"RecallTool", "RECALL_TOOL_NAME"} <= set(package.__all__)
    assert package.RecallTool(SimpleContextManager()).name == package.RECALL_TOOL_NAME == "context_recall"


@pytest.mark.asyncio
async def test_get_recall_tool_finds_what_compaction_removed_in_your_own_loop() -> None:
    ctx = SimpleContextManager(recall_tool=True)
    for message in session(14):
        await ctx.add_message(message)
    view = await ctx.get_messages_for_request(token_budget=2_500)
    lost = "loader_fn_0"
    assert lost not in str(view)  # compaction removed it from the view
    tool = ctx.get_recall_tool()
    assert tool.name == "context_recall" and tool.input_schema["properties"]["query"]
    result = await tool.execute({"query": lost})
    assert result.success and lost in result.output


def test_a_tool_taken_is_named_in_the_notice_as_a_mounted_one_is() -> None:
    ctx, _ = views({"recall_tool": True}, 2_500, session(14))
    ctx.get_recall_tool()
    later = asyncio.run(ctx.get_messages_for_request(token_budget=2_400))
    assert NOTE.strip()[:40] in str(later)


@pytest.mark.asyncio
async def test_recall_tool_true_used_directly_without_the_tool_warns_once(caplog: Any) -> None:
    ctx = SimpleContextManager(recall_tool=True)
    await ctx.add_message({"role": "user", "content": "hi"})
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await ctx.get_messages_for_request()
        await ctx.get_messages_for_request()
    said = [r.getMessage() for r in caplog.records if "get_recall_tool()" in r.getMessage()]
    assert len(said) == 1, caplog.text
    caplog.clear()
    taken = SimpleContextManager(recall_tool=True)
    taken.get_recall_tool()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await taken.get_messages_for_request()
    assert "get_recall_tool" not in caplog.text


def test_last_compaction_stats_is_public_and_a_copy() -> None:
    ctx, _ = views({}, 2_500, session(14))
    stats = ctx.last_compaction_stats
    assert stats == ctx._last_compaction_stats and stats["strategy_level"] >= 1
    stats["strategy_level"] = -1
    assert ctx._last_compaction_stats["strategy_level"] >= 1
    assert SimpleContextManager().last_compaction_stats is None


def test_the_readme_shows_the_public_names_and_what_is_synchronous() -> None:
    direct = README[README.index("### Without a session") : README.index("## Configuration")]
    assert "stats = context.last_compaction_stats" in direct and "stats = context._last" not in direct
    assert "get_recall_tool()" in direct
    assert "synchronous" in direct and "snapshot_state" in direct and "restore_state" in direct
    assert "`_seq`" in direct and "timestamp" in direct and "metadata" in direct
