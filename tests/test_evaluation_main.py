"""The main command end to end on one small shipped workload: the report files exist and parse."""

import json

import pytest

from evaluation.__main__ import main
from evaluation.workloads import SHIPPED_DIR, load_path

SMALL = SHIPPED_DIR / "taubench__airline__task002__trial1.jsonl"


@pytest.mark.slow  # long replay: `uv run pytest -m slow` (CI runs it)
def test_main_command_writes_a_report_that_parses(tmp_path, capsys):
    argv = ["--workload", str(SMALL), "--scenario", "--arms", "none,progressive", "--jobs", "1", "--out", str(tmp_path)]
    code = main(argv)
    assert code == 0
    data = json.loads((tmp_path / "report.json").read_text())
    assert set(data["totals"]) == {"none", "progressive"}
    generated = {f"{kind}-seed{s}" for kind in ("retention", "corrections") for s in (7, 8, 9, 10)}
    assert {r["workload"] for r in data["rows"]} == {SMALL.stem} | generated
    assert data["totals"]["none"]["corrections"] == "16/16"  # no compaction keeps every correction
    assert data["token_counter"]
    none = data["totals"]["none"]
    assert none["boundaries"] == 0 and none["orphan_tool_results"] == 0
    assert none["facts_final"] == 1.0
    md = (tmp_path / "report.md").read_text()
    assert "| progressive |" in md and "Token counter" in md
    assert set(data["tight"]["arms"]) == {"progressive"}  # with the scenarios; no-compaction is left out
    assert data["tight"]["arms"]["progressive"]["requests"] > 80 and "## Tight window" in md
    assert set(data["host"]["arms"]) == {"none", "progressive"}
    for name in ("tokens.png", "frontier.png", "retention.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    assert "progressive" in capsys.readouterr().out


def test_shipped_workloads_load_in_the_documented_format():
    sessions = load_path(SHIPPED_DIR)
    assert len(sessions) >= 5
    for s in sessions:
        assert s.messages and all(m["role"] in {"system", "user", "assistant", "tool"} for m in s.messages)
