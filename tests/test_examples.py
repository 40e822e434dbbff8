"""The README's app guide: its code blocks are the example files, the examples run, the events are findable."""

from __future__ import annotations

import importlib.util
import re
import types
from pathlib import Path
from typing import Any

import pytest
from amplifier_core.events import ALL_EVENTS
from amplifier_core.testing import MockCoordinator

import amplifier_module_context_simple as package
from amplifier_module_context_simple import CONTEXT_EVENTS, OBSERVABILITY_CHANNEL, OBSERVABLE_EVENTS, mount

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PACKAGE_DIR = Path(package.__file__).resolve().parent


def load_example(name: str) -> types.ModuleType:
    """Import examples/<name>.py as a module (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def readme_python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_every_python_block_of_the_readme_is_part_of_an_example_file():
    sources = [path.read_text(encoding="utf-8") for path in EXAMPLES.glob("*.py")]
    blocks = readme_python_blocks()
    assert len(blocks) >= 3, "the README lost its examples"
    missing = [block[:60] for block in blocks if not any(block in source for source in sources)]
    assert missing == [], f"README code drifted from examples/: {missing}"


@pytest.mark.asyncio
async def test_session_example_runs_a_real_session_that_compacts_and_reports_events(capsys):
    counts = await load_example("session_example").main(turns=4)
    out = capsys.readouterr().out
    assert counts["context:token_meter"] == 12  # one per request: 4 turns x 3 requests
    assert counts["context:compaction"] >= 1 and "compacted:" in out
    assert "(usage)" in out, "the hybrid meter never used the provider's llm:response usage"
    assert "history: 33 messages" in out  # the stored history is complete: 1 system + 4 x 8


@pytest.mark.asyncio
async def test_direct_use_example_sends_a_compacted_view_and_keeps_the_history(capsys):
    view = await load_example("direct_use").main()
    out = capsys.readouterr().out
    assert "14 messages stored" in out and len(view) < 14
    assert "compacted" in out


def test_context_events_name_every_event_the_package_emits():
    emitted = set()
    for path in PACKAGE_DIR.glob("*.py"):  # the manager's _emit and the emit components are handed
        emitted |= set(re.findall(r"\b_?emit\(\s*\"(context:[^\"]+)\"", path.read_text(encoding="utf-8")))
    assert emitted and emitted == set(CONTEXT_EVENTS)
    # The kernel lists context:compaction; the module's own events are exactly the ones it does not.
    assert set(OBSERVABLE_EVENTS) == set(CONTEXT_EVENTS) - set(ALL_EVENTS)
    assert "context:compaction" in ALL_EVENTS


@pytest.mark.asyncio
async def test_mount_contributes_the_module_events_on_the_observability_channel():
    coordinator = MockCoordinator()
    assert await coordinator.collect_contributions(OBSERVABILITY_CHANNEL) == []
    cleanup = await mount(coordinator, {})
    contributions = await coordinator.collect_contributions(OBSERVABILITY_CHANNEL)
    assert contributions == [list(OBSERVABLE_EVENTS)]
    contributions[0].append("mutated by a collector")  # a collector extending the list changes nothing
    assert await coordinator.collect_contributions(OBSERVABILITY_CHANNEL) == [list(OBSERVABLE_EVENTS)]
    await cleanup()


@pytest.mark.asyncio
async def test_a_host_subscribing_through_the_channel_receives_the_meter_event():
    coordinator = MockCoordinator()
    cleanup = await mount(coordinator, {})
    seen: list[str] = []

    async def record(event: str, data: dict[str, Any]) -> None:
        seen.append(event)

    for names in await coordinator.collect_contributions(OBSERVABILITY_CHANNEL):
        for name in names:
            coordinator.hooks.register(name, record, priority=0, name=f"log:{name}")
    context = coordinator.get("context")
    await context.add_message({"role": "user", "content": "hi"})
    await context.get_messages_for_request()
    assert seen == ["context:budget", "context:token_meter"]  # the first request reports its budget
    await cleanup()


class NoChannelCoordinator:
    """A coordinator without capabilities or contributions (older or minimal hosts)."""

    hooks = None

    def __init__(self) -> None:
        self.mounted: dict[str, Any] = {}

    async def mount(self, point: str, obj: Any) -> None:
        self.mounted[point] = obj


class RaisingChannelCoordinator(NoChannelCoordinator):
    def register_contributor(self, channel: str, name: str, callback: Any) -> None:
        raise RuntimeError("channel closed")


@pytest.mark.asyncio
async def test_mount_without_a_channel_or_with_a_failing_one_still_mounts():
    plain = NoChannelCoordinator()
    await mount(plain, {})
    assert plain.mounted["context"].fault_stats.get("capability_register_failures", 0) == 0
    failing = RaisingChannelCoordinator()
    await mount(failing, {})
    assert failing.mounted["context"].fault_stats["capability_register_failures"] == 1


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_local_link_of_the_readme_and_docs_resolves():
    broken = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        prose = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if target.startswith(("http://", "https://")):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and linked.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), flags=re.MULTILINE)
                if anchor not in {github_anchor(h) for h in headings}:
                    broken.append(f"{page.name}: {target}")
    assert broken == []
