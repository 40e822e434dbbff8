"""A script that runs a real session with this module exits with status 0, every time (docs/clean-exit.md).

The crash this guards against happens at interpreter exit, which pytest never reaches in-process, so the
scripts run in subprocesses. CONTEXT_SIMPLE_EXIT_RUNS sets how many times (default 10).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from amplifier_core.testing import MockCoordinator

import amplifier_module_context_simple as package
from amplifier_module_context_simple import mount
from tests.test_examples import NoChannelCoordinator
from tests.test_summary import Summarizer, small_history

ROOT = Path(__file__).resolve().parent.parent
RUNS = int(os.environ.get("CONTEXT_SIMPLE_EXIT_RUNS", "10"))


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # long replay: `uv run pytest -m slow` (CI runs it)
def test_the_session_example_exits_with_status_0_every_time():
    failures = []
    for attempt in range(RUNS):
        done = run_script("examples/session_example.py")
        if done.returncode != 0:
            failures.append((attempt, done.returncode, done.stderr[-400:]))
        assert "turn 3: answer 12" in done.stdout
    assert failures == [], f"{len(failures)} of {RUNS} runs died: {failures[:2]}"


@pytest.mark.slow  # long replay: `uv run pytest -m slow` (CI runs it)
def test_the_kernel_reproduction_exits_cleanly_with_the_workaround():
    codes = [run_script("examples/amplifier_core_exit_crash.py", "--settle").returncode for _ in range(RUNS)]
    assert codes == [0] * RUNS


@pytest.mark.asyncio
async def test_cleanup_cancels_a_summary_call_still_running():
    coordinator = MockCoordinator()
    cleanup = await mount(coordinator, {"compaction_strategy": "summary", "max_tokens": 3000, "protected_recent": 0.0})
    context = coordinator.get("context")
    await small_history(context)
    await context.get_messages_for_request(provider=Summarizer("hang"))
    await asyncio.sleep(0)  # the summary call has started and hangs in the provider
    task = context._summarization_task
    assert task is not None and not task.done() and context._is_summarizing
    await cleanup()
    assert task.cancelled() and context._summarization_task is None and not context._is_summarizing
    assert coordinator.hooks.list_handlers("llm:response") == {"llm:response": []}
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []


@pytest.fixture
def atexit_calls(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """What the module registers with atexit, in a process where it has registered nothing yet."""
    registered: list[object] = []
    monkeypatch.setattr(package, "_exit_settle_registered", False)
    monkeypatch.setattr(package.atexit, "register", registered.append)
    return registered


@pytest.mark.asyncio
async def test_mount_with_a_kernel_registers_the_exit_settle_once(atexit_calls: list[object]):
    await mount(MockCoordinator(), {})
    await mount(MockCoordinator(), {})
    assert atexit_calls == [package._exit_settle]


@pytest.mark.asyncio
async def test_mount_without_hooks_registers_no_exit_settle(atexit_calls: list[object]):
    await mount(NoChannelCoordinator(), {})
    assert atexit_calls == []
