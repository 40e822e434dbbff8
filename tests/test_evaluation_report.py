"""The report as a reader meets it: the terminal table, report.md's verdict and sections, and the plots."""

import copy
import json

import pytest

from evaluation import plots
from evaluation.__main__ import main
from evaluation.report import (
    KEY_COLUMNS,
    _fitting_columns,
    fmt,
    frontier,
    over_window_floor,
    print_table,
    table_cells,
    valid,
)
from evaluation.report_text import markdown, verdict
from evaluation.workloads import SHIPPED_DIR

SMALL = SHIPPED_DIR / "taubench__airline__task002__trial1.jsonl"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    argv = [
        "--workload",
        str(SMALL),
        "--arms",
        "none,progressive,target_0.3",
        "--jobs",
        "1",
        "--no-plots",
        "--no-scenario",
    ]
    assert main([*argv, "--out", str(out)]) == 0
    return json.loads((out / "report.json").read_text())


def test_signed_percentages_never_print_minus_zero():
    assert fmt("vs_none", -0.001) == "0%"
    assert fmt("vs_none", 0.0) == "0%"
    assert fmt("vs_none", -0.26) == "-26%"
    assert fmt("evidence_line_miss", 0.1234) == "12.3%"
    assert fmt("facts_final", None) == "n/a"


def total(cost, miss, over=0, invalid=0, available=True):
    return {"cost": cost, "evidence_line_miss": miss, "over_window": over, "invalid_views": invalid,
            "available": available}  # fmt: skip


def test_frontier_keeps_valid_arms_that_nothing_beats_on_both_axes():
    totals = {
        "none": total(100, 0.0, over=5),  # cheapest to forget nothing, but not valid
        "a": total(60, 0.30),
        "b": total(70, 0.20),
        "c": total(75, 0.25),  # beaten by b
        "d": total(50, 0.10, invalid=1),  # broken views
        "e": total(70, 0.20),  # ties b: neither beats the other
        "f": total(1, 0.0, available=False),
    }
    assert frontier(totals) == ["a", "b", "e"]


def test_report_opens_with_a_verdict_drawn_from_the_numbers(data, tmp_path):
    md = tmp_path / "r.md"
    md.write_text(markdown(data, []))
    text = md.read_text()
    assert text.index("## How to read this, and what to pick") < text.index("## Key numbers")
    lines = verdict(data)
    d = data["totals"]["progressive"]
    cost = f"bills {abs(d['vs_none']):.0%} {'less' if d['vs_none'] < 0 else 'more'} than no compaction"
    assert any(line.startswith("- Drop-in: keep the default") and cost in line for line in lines)
    assert any(line.startswith("- No compaction (the reference) is not an option") for line in lines)
    assert any("pay least: set `target_usage: 0.3`" in line for line in lines)  # said as a user configures it


def test_report_has_no_dash_row_note_no_internal_names_and_no_empty_plots_heading(data):
    text = markdown(data, [])
    assert "row of '-'" not in text and "Configurations that did not run" not in text
    assert "_last_sent_estimate" not in text and "-0%" not in text
    assert "## Plots" not in text
    assert "## Plots" in markdown(data, ["frontier.png"])


def test_an_arm_that_did_not_run_is_named_with_its_reason(data):
    broken = copy.deepcopy(data)
    broken["totals"]["target_0.3"].update(available=False, reason="rejected at mount: bad key")
    for row in broken["rows"]:
        row["available"] = row["available"] and row["arm"] != "target_0.3"
    text = markdown(broken, [])
    assert "## Configurations that did not run" in text and "rejected at mount: bad key" in text
    assert "| target_0.3 |" not in text


def test_warning_messages_are_shown_not_only_counted(data):
    noisy = copy.deepcopy(data)
    samples = [{"message": "over budget by 12", "workloads": ["w"]}]
    noisy["totals"]["progressive"].update(warnings=2, warning_samples=samples)
    noisy["totals"]["target_0.3"].update(errors=1, error_samples=[{"message": "RuntimeError: cap", "workloads": ["v"]}])
    text = markdown(noisy, [])
    assert "## Errors and warnings" in text and '- warning: "over budget by 12"' in text
    assert '- error: "RuntimeError: cap"' in text and "configurations: `target_0.3`; sessions: v" in text
    assert "`target_0.3` 1/0" in text


def test_facts_by_place_table(data):
    text = markdown(data, [])
    assert "## Planted facts kept at the last request, by place" not in text  # no scenario in this run
    with_facts = copy.deepcopy(data)
    with_facts["totals"]["progressive"]["facts_by_place"] = {"user": {"kept": 1, "total": 2, "share": 0.5}}
    text = markdown(with_facts, [])
    assert "| progressive | 1/2 (50%) |" in text and "| none | n/a |" in text


def test_terminal_table_fits_80_columns_with_the_deciding_values(data, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    print_table(data)
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 80 and all(line == line.rstrip() for line in lines)
    row = next(line for line in lines if line.strip().startswith("progressive"))
    d = data["totals"]["progressive"]
    expected = [fmt(key, d.get(key)) for _, key in KEY_COLUMNS[1:]]
    shown = row.split()[1:]
    # Left out to fit, least important first: token miss, boundaries, facts; never cost, miss, validity.
    assert shown == [v for i, v in enumerate(expected) if i in _fitting_columns(table_cells(data, KEY_COLUMNS), 80)]
    for key in ("vs_none", "evidence_line_miss", "over_window", "invalid_views"):
        assert fmt(key, d[key]) in shown


def test_no_plots_removes_stale_pictures(tmp_path):
    for name in ("cost.png", "tokens.png", "frontier.png"):
        (tmp_path / name).write_bytes(b"old")
    argv = ["--workload", str(SMALL), "--arms", "none", "--jobs", "1", "--no-plots", "--no-scenario"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.md"]


def test_plots_are_written_and_retention_only_with_planted_facts(data, tmp_path):
    sparse = copy.deepcopy(data)
    sparse["totals"]["progressive"]["facts_by_place"] = {"user": {"kept": 1, "total": 2, "share": 0.5}}
    assert plots.write_all(data, tmp_path) == ["frontier.png", "tokens.png"]  # no scenario, no retention plot
    sparse["totals"]["progressive"]["facts_total"] = 2
    names = plots.write_all(sparse, tmp_path)
    assert names == ["frontier.png", "tokens.png", "retention.png"]
    for name in names:
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


def test_requests_over_the_window_that_every_compacting_arm_sends_are_not_held_against_one():
    totals = {"none": total(100, 0.0, over=50), "a": total(60, 0.3, over=3), "b": total(70, 0.2, over=4)}
    rows = [
        {"arm": "a", "workload": "big-system-prompt", "available": True, "over_window": 3},
        {"arm": "b", "workload": "big-system-prompt", "available": True, "over_window": 3},
        {"arm": "b", "workload": "other", "available": True, "over_window": 1},
    ]
    floor = over_window_floor(totals, rows)
    assert floor == {"requests": 3, "workloads": ["big-system-prompt"]}
    assert [valid(totals[n], floor["requests"]) for n in totals] == [False, True, False]


def test_a_narrow_terminal_leaves_out_columns_instead_of_cutting_them(data, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "50")
    print_table(data)
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 50
    assert [line for line in out.splitlines() if "…" in line] == []
    assert "columns left out to fit the terminal" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("progressive"))
    d = data["totals"]["progressive"]
    assert row.split()[1:3] == [fmt("vs_none", d["vs_none"]), fmt("evidence_line_miss", d["evidence_line_miss"])]


@pytest.mark.parametrize("silent", [0, 2])
def test_the_shaped_verdict_fits_80_columns_and_names_what_broke(silent, capsys):
    from evaluation.report import print_shaped

    totals = {
        name: {
            "silent_prefix_changes": silent if name == "progressive" else 0,
            "over_window_fitting": 0,
            "invalid_views": 0,
        }
        for name in ("none", "progressive", "preset_evidence_balanced")
    }
    print_shaped({"shaped": {"workloads": [f"w{i}" for i in range(26)], "totals": totals}})
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(len(line) <= 80 and line == line.rstrip() for line in lines)
    text = "\n".join(lines)
    assert ("progressive" in text) == bool(silent)
    assert "every compacting configuration" in text or "broken by" in text
