"""Issue 42 points 1, 3 (recall samples), 10 and 11: what a new user reads is what happens.

1. Installing into a uv project: `uv add PATH` (the README said `uv pip install PATH`, which fails in a
   fresh `uv init` app and which the next `uv sync` removes); the slow test does it.
3. The recall shares printed by the main job and the README's come from different samples: each says which.
10. `context:token_meter`'s `used_tokens` is the count before compaction, and says so.
11. The segments advice says planted facts kept fall; "opt-in" agrees with the default's differences; a
    glossary defines the words a newcomer meets undefined.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from evaluation import advice, report_recall

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
FLAT = re.sub(r"\s+", " ", README.replace("`", ""))


def section(heading: str) -> str:
    start = README.index(heading)
    return README[start : README.index("\n#", start + len(heading))]


def test_the_readme_installs_into_a_uv_project_with_uv_add_and_names_pip() -> None:
    install = section("### Install")
    assert "uv add /path/to/amplifier-module-context-simple" in install
    assert "pip install /path/to/amplifier-module-context-simple" in install
    assert "uv pip install /path" not in install  # fails in a fresh uv project; uv sync removes it
    assert "uv sync" in install


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("uv") is None, reason="needs uv on PATH")
def test_uv_add_in_a_fresh_uv_project_installs_and_survives_uv_sync(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "UV_PROJECT"))}

    def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)

    assert run("uv", "init", "app", "-q", cwd=tmp_path).returncode == 0
    app = tmp_path / "app"
    added = run("uv", "add", str(ROOT), cwd=app)
    assert added.returncode == 0, added.stderr
    check = ("uv", "run", "python", "-c", "import amplifier_module_context_simple as m; print(m.__version__)")
    assert run(*check, cwd=app).returncode == 0
    assert run("uv", "sync", cwd=app).returncode == 0
    after = run(*check, cwd=app)
    assert after.returncode == 0, after.stderr


def test_used_tokens_is_labelled_the_count_before_compaction() -> None:
    example = (ROOT / "examples" / "session_example.py").read_text(encoding="utf-8")
    assert "before compaction: {data['used_tokens']}" in example and "request: {data['used_tokens']}" not in example
    reference = re.sub(r"\s+", " ", (ROOT / "docs" / "reference.md").read_text(encoding="utf-8"))
    assert "is the meter's count of the request **before compaction**" in reference
    assert "used_tokens is the meter's count of the request before compaction" in FLAT


def test_each_recall_figure_says_which_sample_it_comes_from() -> None:
    data = json.loads((ROOT / "tests" / "data" / "docs_figures.json").read_text(encoding="utf-8"))
    assert data  # the pinned figures exist; the recall sentence is built from a report's data:
    report = {
        "totals": {"progressive": {"recall_by_query": {"exact": {"queries": 3, "found": 3, "rate": 1.0}}}},
        "workloads": {"real": ["a"] * 6, "scenarios": ["s"] * 8},
        "settings": {"window_fraction": 0.3},
    }
    said = report_recall.terminal(report)[0]
    assert "6 transcripts and 8 generated sessions, window 30%" in said and "recall_cues --split report" in said
    assert "held-out half of the test transcripts, uv run python -m evaluation.studies.recall_cues" in FLAT
    assert "The main job prints the same shares for its own sessions" in FLAT


def test_the_segments_advice_says_planted_facts_fall() -> None:
    t = {"cost": 100.0, "evidence_line_miss": 0.072, "facts_final": 0.865, "errors": 0, "invalid_views": 0}
    b = {"cost": 102.0, "evidence_line_miss": 0.075, "facts_final": 1.0, "errors": 0, "invalid_views": 0}
    assert advice._facts_change(t, b) == ", but keeps 86% of the planted facts instead of 100%"
    assert advice._facts_change(b, b) == ""
    checks = re.sub(r"\s+", " ", (ROOT / "docs" / "configuration-checks.md").read_text(encoding="utf-8"))
    assert "keeps 86% of the planted facts instead of 100%" in checks


def test_opt_in_agrees_with_the_defaults_differences() -> None:
    assert "Every feature beyond the original is opt-in;" not in FLAT
    assert "The default differs from the original only where" in FLAT


GLOSSARY = ["plain replay", "host-shaped", "tool group", "floor", "boundary", "today's original", "$AMPLIFIER_HOME"]


@pytest.mark.parametrize("word", GLOSSARY)
def test_the_glossary_defines_each_word_a_newcomer_meets(word: str) -> None:
    glossary = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8").lower()
    assert f"**{word.lower()}**" in glossary or f"**`{word.lower()}`**" in glossary
    assert "docs/glossary.md" in README
