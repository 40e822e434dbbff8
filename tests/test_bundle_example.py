"""The bundle files and blocks we show app developers (examples/bundle.md, docs/bundles.md) are complete: they
parse as amplifier-foundation reads them (YAML, or markdown with YAML frontmatter), give every module a
``source:`` (amplifier-foundation installs nothing else), name this module by its entry point, and carry
only config keys the module accepts without a warning. amplifier-foundation itself is not needed."""

from __future__ import annotations

import logging
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from amplifier_core.testing import MockCoordinator

from amplifier_module_context_simple import mount
from amplifier_module_context_simple.config import DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
BUNDLE_FILE = ROOT / "examples" / "bundle.md"
BUNDLES_DOC = ROOT / "docs" / "bundles.md"
ORIGINAL_URL = "github.com/microsoft/amplifier-module-context-simple"  # the original's only public home


def entry_point_name() -> str:
    entry_points = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]
    (name,) = entry_points["amplifier.modules"]
    return name


def frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """A bundle.md: YAML between a first line ``---`` and the next ``---`` line, then the instruction."""
    match = re.match(r"---[ \t]*\n(.*?)\n---[ \t]*\n(.*)", text, flags=re.DOTALL)
    assert match, "a bundle.md starts with YAML frontmatter between --- lines"
    return yaml.safe_load(match.group(1)), match.group(2)


def doc_bundle_blocks() -> list[dict[str, Any]]:
    """Every ```yaml block of docs/bundles.md that configures this module's session.context."""
    blocks = re.findall(r"```yaml\n(.*?)```", BUNDLES_DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    parsed = [frontmatter(block)[0] if block.startswith("---") else yaml.safe_load(block) for block in blocks]
    return [block for block in parsed if isinstance(block, dict) and "context" in block.get("session", {})]


def assert_complete(bundle: dict[str, Any]) -> dict[str, Any]:
    """Every module has module + source; the context is this module, not from the original's URL."""
    session = bundle["session"]
    modules = [session["orchestrator"], session["context"], *bundle.get("providers", [])]
    for spec in modules:
        assert isinstance(spec, dict) and spec.get("module") and spec.get("source"), f"no source: {spec}"
    context = session["context"]
    assert context["module"] == entry_point_name()
    assert ORIGINAL_URL not in context["source"], "that URL installs the original, not this module"
    return context.get("config") or {}


async def assert_mounts_without_warning(config: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    unknown = sorted(set(config) - set(DEFAULTS))
    assert unknown == [], f"keys the module does not know: {unknown}"
    with caplog.at_level(logging.WARNING, logger="amplifier_module_context_simple"):
        cleanup = await mount(MockCoordinator(), config)
    await cleanup()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == []


@pytest.mark.asyncio
async def test_the_example_bundle_is_complete_and_its_config_mounts_without_a_warning(caplog):
    bundle, instruction = frontmatter(BUNDLE_FILE.read_text(encoding="utf-8"))
    assert bundle["bundle"]["name"] and instruction.strip()
    config = assert_complete(bundle)
    assert config.get("preset") == "evidence"  # what the docs say it shows
    await assert_mounts_without_warning(config, caplog)


@pytest.mark.asyncio
async def test_every_bundle_block_of_the_bundles_doc_is_complete_and_mounts_without_a_warning(caplog):
    blocks = doc_bundle_blocks()
    assert len(blocks) >= 2, "docs/bundles.md lost its bundle examples"
    for block in blocks:
        caplog.clear()
        await assert_mounts_without_warning(assert_complete(block), caplog)


def test_the_bundles_doc_shows_the_example_bundle_as_it_is():
    shown = re.findall(r"```yaml\n(---\n.*?)```", BUNDLES_DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert BUNDLE_FILE.read_text(encoding="utf-8") in shown


def test_no_example_suggests_a_source_that_installs_the_original():
    for path in sorted((ROOT / "examples").glob("*.*")):
        text = path.read_text(encoding="utf-8")
        assert "source: git+https://..." not in text, path.name
        sources = re.findall(r"source:\s*(\S+)", text)
        assert not [s for s in sources if ORIGINAL_URL in s], f"{path.name} points at the original: {sources}"


def readme_bundle() -> dict[str, Any]:
    """The README's bundle block (issue 31 point 6: a complete bundle, with `preset`)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL) if b.startswith("---")]
    bundle, instruction = frontmatter(block)
    assert bundle["bundle"]["name"] and instruction.strip()
    return bundle


@pytest.mark.asyncio
async def test_the_readme_bundle_is_complete_mounts_without_a_warning_and_is_the_example(caplog):
    shown = readme_bundle()
    config = assert_complete(shown)
    assert config.get("preset") == "evidence"
    await assert_mounts_without_warning(config, caplog)
    example, _ = frontmatter(BUNDLE_FILE.read_text(encoding="utf-8"))
    for part in ("orchestrator", "context"):
        for key in ("module", "source"):
            assert shown["session"][part][key] == example["session"][part][key]
    assert config.items() <= example["session"]["context"]["config"].items()
    assert [(p["module"], p["source"]) for p in shown["providers"]] == [
        (p["module"], p["source"]) for p in example["providers"]
    ]
