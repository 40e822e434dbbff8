"""The tight-window scenario (issue 29): its shape, its window, its arms, and its report section."""

from __future__ import annotations

import json
import logging

import pytest

from evaluation.arms import ARMS, PASSTHROUGH, Arm
from evaluation.driver import Run, Settings, Window, _CountWarnings, workload_window
from evaluation.evidence import EvidenceIndex
from evaluation.host_shaped import STEERING
from evaluation.report_host import tight_markdown, tight_table, tight_terminal
from evaluation.studies import tight_window as study
from evaluation.tight_scenario import MAX_TOKENS, plain_session, tight_arms, tight_workload
from evaluation.tokens import TokenCounter
from tests.test_evaluation_terminal import assert_terminal_text


@pytest.fixture(scope="module")
def scenario():
    return plain_session(7), tight_workload(7)


def test_the_provider_reports_a_40k_window_with_a_36k_input_limit(scenario):
    _, (workload, shape) = scenario
    window = workload_window(workload, Settings(0.3), TokenCounter())
    assert (window.context_window, window.max_output_tokens, window.limit) == (40_000, 4_000, 36_000)
    assert shape["input_limit"] == 36_000 and workload.host_reminders
    assert window.session_tokens > 10 * window.limit  # the session is far larger than the window


def test_forty_turns_of_5_to_60_kb_results_with_screenshots(scenario):
    (messages, shape), _ = scenario
    turns = [m for m in messages if m["role"] == "user"]
    results = [m["content"] for m in messages if m["role"] == "tool"]
    assert len(turns) == shape["turns"] == 40 and len(results) == shape["tool_results"] >= 40
    assert all(5 * 1024 <= len(r.encode()) <= 60 * 1024 + 200 for r in results)
    assert max(len(r) for r in results) > 45 * 1024 and min(len(r) for r in results) < 15 * 1024
    kinds = {
        next(iter(json.loads(m["tool_calls"][0]["function"]["arguments"]))) for m in messages if m.get("tool_calls")
    }
    assert kinds == {"path", "pattern", "command"}  # file reads, grep, test runs
    images = [b for m in turns if isinstance(m["content"], list) for b in m["content"] if b["type"] == "image"]
    assert len(images) == shape["screenshots"] >= 6 and all(b["source"]["data"] for b in images)


def test_it_is_stored_host_shaped_and_the_same_for_the_same_seed(scenario):
    _, (workload, _) = scenario
    stored = workload.messages
    assert all(json.loads(m["content"])["success"] is True for m in stored if m["role"] == "tool")
    assert all("tool" in c for m in stored for c in m.get("tool_calls") or [])
    assert any(m["role"] == "system" and (m.get("metadata") or {}).get("source") == "hook" for m in stored)
    assert any(m["role"] == "user" and m["content"] in STEERING for m in stored)
    assert tight_workload(7)[0].messages == stored != tight_workload(8)[0].messages


def test_the_answers_use_lines_of_earlier_results(scenario):
    (messages, _), _ = scenario
    index, needed = EvidenceIndex(), []
    for m in messages:
        if m["role"] == "assistant":
            needed.append(len(index.needed(m)))
        index.add(m)
    assert sum(n > 0 for n in needed) > 0.8 * len(needed)


def test_every_arm_of_this_module_runs_with_max_tokens_20000():
    compacting = [a for a in ARMS if a.engine != PASSTHROUGH and not a.name.startswith("peer_")]
    arms = tight_arms(ARMS)
    assert [a.name for a in arms] == [a.name for a in compacting] and "none" not in {a.name for a in arms}
    for before, after in zip(compacting, arms, strict=True):
        assert after.config == {"max_tokens": MAX_TOKENS, **before.config} and after.engine == before.engine
    own = tight_arms([Arm("x", {"max_tokens": 5000})])[0]
    assert own.config["max_tokens"] == 5000


def test_over_budget_endings_are_counted_from_the_modules_warning():
    run = Run("a", "w", "", Window(0, 0, 0, 0), "")
    logger = logging.getLogger("amplifier_module_context_simple")
    with _CountWarnings(run):
        logger.warning("context-simple: Compaction finished OVER BUDGET at level 8: 19,931 tokens against 19,200")
        logger.warning("context-simple: something else")
    assert (run.warnings, run.over_budget) == (2, 1)


def tight_data(names: list[str]) -> dict:
    arms = {
        name: {
            "requests": 97,
            "over_window": 3 if name == "none" else i % 2,
            "over_budget_endings": i,
            "boundaries": 40 + i,
            "boundaries_per_request": (40 + i) / 97,
            "cache_read_share": 0.4,
            "cost": 1_000_000.0 + i,
            "vs_default": 0.05,
            "evidence_line_miss": 0.5,
            "invalid_views": 0,
        }
        for i, name in enumerate(names)
    }
    _, shape = plain_session(7)
    return {"tight": {"shape": shape, "arms": arms}}


def test_the_section_names_every_arm_and_fits_the_terminal():
    data = tight_data([a.name for a in tight_arms(ARMS)])
    md = "\n".join(tight_markdown(data))
    assert "## Tight window" in md and "input limit 36,000" in md and "`max_tokens: 20000`" in md
    for name in data["tight"]["arms"]:
        assert f"| {name} | 97 |" in md
    lines = tight_table(data) + tight_terminal(data)
    assert_terminal_text("\n".join(lines))
    summary = " ".join(tight_terminal(data))
    assert "limit: target_0.3 1, " in summary and "progressive 0" not in summary  # arms past the limit only
    assert "default 0, most segments_balanced 19" in summary  # OVER BUDGET endings: the default, the most
    assert tight_terminal({}) == tight_markdown({}) == tight_table({}) == []


def test_the_study_refuses_a_bad_arm_in_one_line(capsys):
    assert study.main(["--arms", "progresive"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("python -m evaluation.studies.tight_window: error:") and "did you mean" in err


@pytest.mark.slow  # a 40-turn replay of ~840k tokens: `uv run pytest -m slow`
def test_the_study_replays_the_scenario_and_writes_its_section_when_asked(tmp_path, capsys):
    out = tmp_path / "tight.md"
    assert study.main(["--arms", "progressive,preset_evidence", "--jobs", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert_terminal_text(printed, (out, out.with_name("tight.md.json")))
    data = json.loads(out.with_name("tight.md.json").read_text())["tight"]["arms"]
    assert set(data) == {"progressive", "preset_evidence"} and data["progressive"]["requests"] > 80
    assert all(t["invalid_views"] == 0 for t in data.values())
    assert out.read_text().startswith("## Tight window")
