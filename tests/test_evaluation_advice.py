"""What a user reads after a run (issue 31, points 9 and 12): advice in configuration terms among the
choices a user makes, no internal words, numbers that say n/a where nothing was measured, counts that
agree with their nouns, and messages cut on a whole word."""

from __future__ import annotations

import logging
import re

from evaluation import report, report_text
from evaluation.__main__ import main
from evaluation.arms import ARMS
from evaluation.driver import WARNING_CHARS, Run, Window, _CountWarnings
from evaluation.metrics import evidence_recall
from evaluation.workloads import SHIPPED_DIR

SMALL = SHIPPED_DIR / "taubench__airline__task002__trial1.jsonl"
# The default run's pooled figures (6 shipped transcripts + 8 scenarios, window 30%): name -> (billed
# cost, evidence line miss, corrections kept of 16, planted facts kept).
MEASURED = {
    "none": (553_044, 0.0, 16, 1.0),
    "progressive": (396_112, 0.245, 3, 0.20),
    "target_0.3": (343_547, 0.306, 4, 0.14),
    "meter_actual": (390_489, 0.172, 5, 0.32),
    "counter_tiktoken": (406_686, 0.184, 7, 0.30),
    "ev_ledger": (449_235, 0.064, 2, 0.97),
    "preset_evidence": (371_287, 0.100, 16, 1.0),
    "preset_evidence_lean": (323_500, 0.179, 16, 1.0),
    "preset_evidence_balanced": (341_432, 0.118, 16, 1.0),
    "segments_evidence": (362_771, 0.095, 16, 1.0),
    "segments_balanced": (338_387, 0.131, 16, 1.0),
}


def measured(names: dict[str, tuple] = MEASURED) -> dict:
    """A report's data with the measured figures (what report.build gives, the parts the prose reads)."""
    arms = {a.name: {"engine": a.engine, "config": a.config, "notes": a.notes} for a in ARMS if a.name in names}
    totals = {}
    for name, (cost, miss, corrections, facts) in names.items():
        totals[name] = {
            "available": True,
            "reason": "",
            "cost": cost,
            "vs_none": cost / names["none"][0] - 1,
            "evidence_line_miss": miss,
            "evidence_token_miss": miss * 0.9,
            "over_window": 316 if name == "none" else 0,
            "invalid_views": 0,
            "boundaries": 0 if name == "none" else 40,
            "facts_final": facts,
            "corrections_kept": corrections,
            "corrections_total": 16,
            "corrections": f"{corrections}/16",
        }
    for t in totals.values():
        t["vs_default"] = t["cost"] / totals["progressive"]["cost"] - 1
        t["valid"] = report.valid(t, 0)
    return {
        "arms": arms,
        "totals": totals,
        "frontier": report.frontier(totals),
        "over_window_floor": {"requests": 0, "workloads": []},
        "workloads": {"real": [f"t{i}" for i in range(6)], "scenarios": [f"s{i}" for i in range(8)]},
        "settings": {"window_fraction": 0.3},
    }


def test_what_to_pick_names_the_presets_as_a_user_configures_them():
    lines = report_text.terminal_verdict(measured())
    text = " ".join(line.strip() for line in lines)
    assert "Drop-in: keep the default, no keys (bills 28% less than no compaction" in text
    assert "To forget least: set preset: evidence (bills 6% less than the default" in text
    assert "To pay least: set preset: evidence_lean (bills 18% less than the default" in text
    assert "For both, the cheapest that misses at most half of what the default misses: set preset: " in text
    assert "preset: evidence_balanced (bills 14% less than the default, misses 11.8%" in text
    assert "Adding evidence_ledger_segments: true to preset: evidence bills 2% less than without it" in text
    assert "3 of the user's 16 corrections" in text and "all 16 of the user's corrections" in text
    # A single knob that forgets least but costs more and drops the user's corrections is not advice.
    assert "ev_ledger" not in text and "evidence_ledger_share" not in text
    assert all(len(line) <= 80 for line in lines)


def test_the_advice_agrees_with_the_readme_presets_section():
    """README: `evidence` misses least, `evidence_balanced` is the cheapest at half the default's miss,
    `evidence_lean` is for cost first."""
    from evaluation import advice

    picks = advice.picks(measured())
    assert picks["preset_evidence"] == ["to forget least"]
    assert picks["preset_evidence_lean"] == ["to pay least"]
    assert picks["preset_evidence_balanced"][0].startswith("for both")


def test_report_md_keeps_the_other_configurations_for_comparison_in_user_terms():
    head = "\n".join(report_text.verdict(measured()))
    assert "`evidence_ledger_share: 0.5` (ev_ledger), outside the presets: bills 13% more than the default" in head
    assert "Best trade-offs among every configuration measured (no other valid configuration is both" in head


def test_with_none_of_the_choices_the_advice_ranks_what_ran():
    few = measured({k: MEASURED[k] for k in ("none", "progressive", "target_0.3", "meter_actual")})
    text = " ".join(report_text.terminal_verdict(few)).replace("\n", " ")
    text = " ".join(text.split())
    assert "To forget least: set token_meter: actual" in text and "To pay least: set target_usage: 0.3" in text


INTERNAL = re.compile(r"\barms?\b|frontier|target 1|\bissue \d", re.IGNORECASE)


def test_no_internal_word_reaches_the_terminal_or_report_md(tmp_path, capsys):
    argv = ["--workload", str(SMALL), "--arms", "none,progressive,preset_evidence", "--jobs", "1", "--no-plots"]
    assert main([*argv, "--no-shaped", "--no-scenario", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    md = (tmp_path / "report.md").read_text()
    synthetic = "\n".join(report_text.verdict(measured()) + report_text.terminal_verdict(measured()))
    for text in (out, md, synthetic):
        assert not INTERNAL.findall(text), INTERNAL.findall(text)[:5]


SINGULAR_NOUNS = "transcript|scenario|session|request|run|column|plot|view|configuration|correction|message"
ONE_PLURAL = re.compile(rf"(?<![\d,.])1 (?:\w+ )?(?:{SINGULAR_NOUNS})s\b")


def test_counts_agree_with_their_nouns_in_the_terminal_and_report_md(tmp_path, capsys):
    argv = ["--workload", str(SMALL), "--arms", "none,progressive", "--jobs", "1", "--no-scenario"]
    assert main([*argv, "--no-plots", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    for text in (captured.out, captured.err, (tmp_path / "report.md").read_text()):
        assert not ONE_PLURAL.findall(text), ONE_PLURAL.findall(text)
    assert captured.out.startswith("1 transcript, window 30%")
    assert (
        "Amplifier-shaped sessions (1)" in captured.out
        and "The same 1 real session as" in (tmp_path / "report.md").read_text()
    )
    from evaluation.wording import plural

    assert plural(1, "query") == "1 query" and plural(2, "query") == "2 queries" and plural(1500, "run") == "1,500 runs"


def test_evidence_is_n_a_where_it_was_not_measured_not_a_miss_of_zero():
    """Generated scenarios have scripted answers: their evidence miss is not measured (n/a); nor is a
    real run's that never compacted (no request after a first compaction: issue 40, n/a, not 0%)."""
    window = Window(1000, 2048, 8000, 1024)
    scenario = Run("progressive", "retention-seed7", "", window, "x", synthetic=True)
    real = Run("progressive", "t", "", window, "x")
    assert evidence_recall(scenario)["evidence_line_miss"] is None
    assert evidence_recall(real)["evidence_line_miss"] is None
    counts = ["requests", "errors", "boundaries", "cost", "over_window", "peak_true_tokens", "window_limit"]
    rows = [{"arm": "progressive", "workload": "retention-seed7", "available": True, **dict.fromkeys(counts, 1)}]
    rows[0].update(cache_read_share=0.5, facts_final=0.5, tail_retention=None, estimator_error_mean=0.1)
    rows[0].update(evidence_recall(scenario))
    table = report.per_workload({"rows": rows})
    assert "| retention-seed7 |" in table and "0.0%" not in table and "n/a" in table


def test_a_long_warning_is_cut_on_a_whole_word_with_an_ellipsis():
    words = " ".join(f"word{i}" for i in range(100))  # 600+ characters
    run = Run("a", "w", "", Window(1, 1, 1, 1), "x")
    with _CountWarnings(run):
        logging.getLogger("amplifier_module_context_simple").warning("context-simple: %s", words)
    sample = run.warning_samples[0]
    assert len(sample) <= WARNING_CHARS and sample.endswith("...")
    kept = sample.removesuffix("...").split(" ")
    assert kept[-1] in words.split(" ") and ("context-simple: " + words).startswith(sample.removesuffix("..."))
    from evaluation.wording import clip

    assert clip("short", 10) == "short" and clip("alpha beta gamma", 12) == "alpha..."
    assert clip("a" * 20, 10) == "aaaaaaa..."


def test_configurations_are_said_as_a_user_writes_them():
    from evaluation import cli
    from evaluation.wording import config_words

    assert config_words({}) == "the default (no keys)"
    assert config_words({"evidence_ledger_segments": True, "preset": "evidence"}) == (
        "preset: evidence, evidence_ledger_segments: true"
    )
    assert config_words({"target_usage": 0.3}) == "target_usage: 0.3"
    assert config_words({}, "passthrough") == "no compaction (the reference)"
    assert cli.SPLITS == ("tune", "report")
