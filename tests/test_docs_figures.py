"""Issue 42 point 3: every figure a page quotes from the main job is the main job's (tests/docs_figures.py).

docs/evidence-compaction.md said the presets cost 0.94 / 0.86 / 0.82 of the default and
docs/configuration-checks.md quoted segments at 0.918 vs 0.938, while the run printed 0.89 / 0.84 / 0.77
and 0.874 vs 0.894. Each claim is now written with the pinned figures (`uv run python -m tests.docs_figures
--write` after `uv run python -m evaluation`) and must appear on its page, which names the command.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests import docs_figures
from tests.docs_figures import MAIN_JOB, ROOT


def prose(page: str) -> str:
    """The page with inline code unwrapped and whitespace collapsed (a claim may wrap)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return re.sub(r"\s+", " ", text.replace("`", ""))


@pytest.mark.parametrize(("page", "claim"), docs_figures.claims(docs_figures.pinned()))
def test_each_quoted_figure_is_the_main_jobs(page: str, claim: str) -> None:
    assert claim in prose(page), f"{page} no longer says: {claim}"


@pytest.mark.parametrize("page", sorted({page for page, _ in docs_figures.CLAIMS}))
def test_each_page_names_the_command_its_figures_come_from(page: str) -> None:
    assert MAIN_JOB in prose(page)


def test_the_drift_command_compares_a_run_with_the_pinned_figures(tmp_path: Path, monkeypatch, capsys) -> None:
    report = tmp_path / "report.json"
    report.write_text("{}", encoding="utf-8")
    monkeypatch.setattr(docs_figures, "REPORT", report)
    same = docs_figures.pinned()
    assert docs_figures.main([], compute=lambda _report: same) == 0
    moved = {**same, "evidence_cost2": "0.99"}
    assert docs_figures.main([], compute=lambda _report: moved) == 1
    assert "evidence_cost2: pinned" in capsys.readouterr().out


def test_the_pinned_figures_are_what_the_claims_use() -> None:
    used = set(re.findall(r"\{([a-z0-9_]+)\}", " ".join(text for _, text in docs_figures.CLAIMS)))
    assert used <= set(json.loads(docs_figures.PINNED.read_text(encoding="utf-8")))
