"""Issue 42 point 6: "~/spill" made a folder literally named "~" in the working directory.

``~`` and environment variables are expanded as a shell expands them; a variable left unset or a
``<...>`` placeholder (the reference's starter config had one) warns.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from amplifier_module_context_simple import SimpleContextManager
from tests.test_spill import history, view

LOGGER = "amplifier_module_context_simple"


async def spilled(spill_dir: str) -> SimpleContextManager:
    ctx = SimpleContextManager(tool_result_spill_dir=spill_dir, target_usage=0.8)
    for message in history():
        await ctx.add_message(message)
    await view(ctx)
    return ctx


@pytest.mark.asyncio
async def test_a_tilde_is_the_home_folder_not_a_folder_named_tilde(tmp_path: Path, monkeypatch: Any) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    ctx = await spilled("~/spill")
    assert ctx.tool_result_spill_dir == str(home / "spill")
    assert list((home / "spill").iterdir()), "nothing was spilled"
    assert not (work / "~").exists()


@pytest.mark.asyncio
async def test_environment_variables_are_expanded(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("SPILL_ROOT", str(tmp_path))
    ctx = await spilled("${SPILL_ROOT}/s1")
    assert ctx.tool_result_spill_dir == str(tmp_path / "s1") and list((tmp_path / "s1").iterdir())


@pytest.mark.parametrize(
    ("path", "said"),
    [("$NO_SUCH_VARIABLE_42/spill", "not set"), ("/tmp/amplifier-spill-<session>", "placeholder")],
)
def test_an_unset_variable_or_a_placeholder_warns(path: str, said: str, monkeypatch: Any, caplog: Any) -> None:
    monkeypatch.delenv("NO_SUCH_VARIABLE_42", raising=False)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        SimpleContextManager(tool_result_spill_dir=path)
    assert said in caplog.text and "tool_result_spill_dir" in caplog.text


def test_the_reference_starter_config_marks_its_placeholder() -> None:
    reference = (Path(__file__).resolve().parents[1] / "docs" / "reference.md").read_text()
    assert "amplifier-spill-<session>" not in reference and "placeholder" in reference
