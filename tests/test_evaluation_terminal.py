"""What a user sees in the terminal (issue 23): bad input refused up front in one line, progress on
stderr, a verdict drawn from the run, and every line within 80 columns."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from evaluation import runner
from evaluation.__main__ import main
from evaluation.studies import preset_sweep
from evaluation.workloads import SHIPPED_DIR

SMALL = SHIPPED_DIR / "taubench__airline__task002__trial1.jsonl"
COMMANDS = [
    "evaluation.__main__",
    "evaluation.studies.preset_sweep",
    "evaluation.studies.recall_cues",
    "evaluation.identity",
    "evaluation.benchmarks.bench_scale",
    "evaluation.benchmarks.bench_request_path",
    "evaluation.benchmarks.bench_tool_results",
    "evaluation.benchmarks.bench_evidence",
    "evaluation.benchmarks.bench_ledger_boundary",
    "evaluation.benchmarks.bench_recall",
    "evaluation.studies.counter_arms",
    "evaluation.studies.counter_error",
    "evaluation.studies.meter_report",
    "evaluation.studies.resume_eval",
    "evaluation.studies.summary_refire",
    "evaluation.studies.tail_retention",
    "evaluation.studies.clear_at_least_gate",
    "evaluation.studies.tight_window",
    "evaluation.studies.bill_split",
    "evaluation.studies.calls_kept",
    "evaluation.studies.host_parity",
]


def assert_terminal_text(text: str, paths: tuple[Path, ...] = ()) -> None:
    for line in text.splitlines():
        # A path on a line of its own is as long as the user's folder makes it.
        assert len(line) <= 80 or line.strip() in {str(p) for p in paths}, f"over 80 columns: {line!r}"
        assert line == line.rstrip(), f"trailing spaces: {line!r}"
    assert "``" not in text


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep that got past its checks would call the runner: make that a test failure."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("ran before every input was checked")

    monkeypatch.setattr(runner, "run_all", refuse)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--arm", "nosuch"], "unknown arm 'nosuch'"),
        (["--config", "x=3"], "--config x: expected a JSON object"),
        (["--config", 'x={"target_usage": 0.95}'], "compact_threshold 0.92 <= target_usage 0.95"),
        (["--config", 'x={"compact_threshhold": 0.5}'], "did you mean compact_threshold?"),
        (["--config", 'x={"target_usage": "low"}'], "invalid target_usage='low'"),
        (["--config", 'progressive={"target_usage": 0.3}'], "'progressive' named twice"),
        (["--workload", "/no/such/file.jsonl"], "no such file"),
    ],
)
def test_a_bad_sweep_is_refused_in_one_line_before_any_work(no_work, capsys, argv, says):
    assert preset_sweep.main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("python -m evaluation.studies.preset_sweep: error:") and "\n" not in err
    assert says in err and captured.out == ""


def test_the_sweep_takes_the_same_workload_options_as_the_main_run():
    args = preset_sweep.parse(["--workload", str(SMALL), "--all-workloads", "--no-scenario"])
    assert args.workload == [str(SMALL)] and args.all_workloads


def test_the_main_run_reports_progress_on_stderr_and_a_verdict_within_80_columns(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    argv = ["--workload", str(SMALL), "--arms", "none,progressive,preset_evidence", "--jobs", "1"]
    assert main([*argv, "--no-plots", "--no-shaped", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "replaying: 3 runs..." in captured.err and "replaying: 3 runs done" in captured.err
    assert "replaying" not in captured.out
    assert "What to pick (this run's numbers):" in captured.out and "pay least: set preset: evidence" in captured.out
    assert_terminal_text(captured.out, (tmp_path / "report.md", tmp_path / "report.json"))


def test_the_sweep_prints_a_verdict_within_80_columns(tmp_path, capsys):
    argv = ["--workload", str(SMALL), "--no-scenario", "--arm", "preset_evidence", "--jobs", "1"]
    assert preset_sweep.main([*argv, "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "sweeping: 2 runs..." in captured.err
    assert "What to pick (this sweep's numbers):" in captured.out and "For the lowest cost:" in captured.out
    assert (tmp_path / "preset_sweep.md").read_text().startswith("| configuration |")
    assert_terminal_text(captured.out, (tmp_path / "preset_sweep.md",))


def totals(cost: float, miss: float, boundaries: int = 3) -> dict:
    return {
        "available": True,
        "cost": cost,
        "evidence_line_miss": miss,
        "invalid_views": 0,
        "boundaries": boundaries,
    }


def test_the_sweep_verdict_says_when_its_numbers_cannot_decide():
    arms = [preset_sweep.Arm("progressive", {}), preset_sweep.Arm("a", {}), preset_sweep.Arm("b", {})]
    tied = {"progressive": totals(100, 0.2), "a": totals(80, 0.1), "b": totals(80, 0.1)}
    assert any("tie; these numbers cannot decide" in line for line in preset_sweep.verdict(arms, tied))
    small = {name: totals(100, 0.0, boundaries=0) for name in ("progressive", "a", "b")}
    assert "too small to compact" in preset_sweep.verdict(arms, small)[0]


@pytest.mark.parametrize("module", COMMANDS)
def test_every_help_line_is_within_100_columns(module, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    entry = importlib.import_module(module).main
    assert entry(["--help"]) == 0
    out = capsys.readouterr().out
    assert out and max(len(line) for line in out.splitlines()) <= 100
    assert "``" not in out


def test_the_docs_show_only_options_each_command_accepts(capsys, monkeypatch):
    """docs/evaluation-commands.md: every option in a command's row, and --workload unless the row says
    "no workloads", is in that command's --help."""
    import re

    monkeypatch.setenv("COLUMNS", "200")
    doc = (Path(__file__).resolve().parent.parent / "docs" / "evaluation-commands.md").read_text()
    rows = [line for line in doc.splitlines() if re.match(r"\| `[a-z_]+` \|", line)]
    assert len(rows) >= 12
    for row in rows:
        name = row.split("`")[1]
        module = next(m for m in COMMANDS if m.endswith("." + name))
        assert importlib.import_module(module).main(["--help"]) == 0
        help_text = capsys.readouterr().out
        wanted = set(re.findall(r"(--[a-z][a-z-]+)", row.split("|")[3]))
        if "no workloads" not in row:
            wanted.add("--workload")
        missing = sorted(o for o in wanted if o not in help_text)
        assert not missing, f"{name}: the docs show {missing}, which --help does not list"
