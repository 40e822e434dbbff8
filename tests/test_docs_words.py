"""What users read speaks their terms (issue 31 point 7): no issue numbers, no "arms" or "target 1", no
term without its definition, no names of the project's internal work."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# The evaluation's own pages may use the words its tables and options print, once defined on the page.
EVALUATION_PAGES = {"evaluation.md", "evaluation-commands.md"}
INTERNAL = {
    "an issue number": r"\bissues? \d+",
    "a point of an issue": r"\b(?:points?|items?) \d+(?:-\d+)?\b(?! ?(?:tokens|characters|%))",
    "a numbered target": r"\btargets? \d+\b(?![.\d])",
    "an internal label": r"\b[A-Z]+-[A-Z]+-[A-Z]+\b",
    "the project's internal work": r"\b(?:helpers?|worktrees?|another branch|on main|merging main)\b",
}
# A word a user does not know, and how a page that uses it defines it.
DEFINED_ONLY = {"arm": (r"(?<![\w-])arms?\b", r"\*arm\*"), "frontier": (r"\bfrontier\b", r"\*frontier\*")}


def prose(page: Path) -> str:
    """What a reader reads as words: no code blocks or spans, no link targets, lines joined."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    text = re.sub(r"`[^`]*`", "CODE", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return re.sub(r"\s+", " ", text)


def leaks(text: str, evaluation_page: bool) -> list[str]:
    found = [f"{what}: {m.group(0)!r}" for what, p in INTERNAL.items() for m in re.finditer(p, text)]
    for word, (pattern, definition) in DEFINED_ONLY.items():
        uses = re.findall(pattern, text, flags=re.IGNORECASE)
        if uses and not (evaluation_page and re.search(definition, text)):
            found.append(f"{word!r} without its definition ({len(uses)} uses)")
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_internal_words_reach_what_users_read(page):
    assert leaks(prose(page), page.name in EVALUATION_PAGES) == []


@pytest.mark.parametrize(
    "text",
    [
        "the evaluation target of issue 13 is stated at 30%",
        "(issue 30, point 14; before, the cached copies)",
        "| 1. a configuration | reached | target 1 |",
        "every compacting arm keeps every request inside the window",
        "The evidence presets sit on the frontier",
        "**G-METER-PROVENANCE**: in hybrid mode",
        "(issue 28 points 1-4, another branch)",
    ],
)
def test_the_words_users_met_are_caught(text):
    assert leaks(text, evaluation_page=False) != []


def test_a_defined_term_may_be_used_on_an_evaluation_page():
    text = "The evaluation calls each configuration an *arm*. Every arm runs."
    assert leaks(text, evaluation_page=True) == []
    assert leaks(text, evaluation_page=False) != []
