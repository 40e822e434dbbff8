"""The figures the README and docs quote from the main job, each with the command that prints it.

    uv run python -m evaluation                 # writes evaluation/out/report.json (~1.5-3 min)
    uv run python -m tests.docs_figures         # compare it with tests/data/docs_figures.json; exit 1 on drift
    uv run python -m tests.docs_figures --write # pin this run's figures (then fix the pages the test names)

tests/test_docs_figures.py checks every claim below against the pinned figures, so a page that quotes a
figure the command no longer prints fails the tests, and a run whose figures moved fails this command.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PINNED = ROOT / "tests" / "data" / "docs_figures.json"
REPORT = ROOT / "evaluation" / "out" / "report.json"
MAIN_JOB = "uv run python -m evaluation"
DEFAULT, NONE = "progressive", "none"
PRESETS = {"evidence": "preset_evidence", "balanced": "preset_evidence_balanced", "lean": "preset_evidence_lean"}


def _cost(report: dict[str, Any], arm: str, base: str = DEFAULT) -> float:
    totals = report["totals"]
    return totals[arm]["cost"] / totals[base]["cost"]


def _percent_less(ratio: float) -> str:
    return f"{round((1 - ratio) * 100)}"


def _figures(report: dict[str, Any]) -> dict[str, str]:
    """Every pinned figure, as the pages write it."""
    t = report["totals"]
    out = {
        "default_less_than_none": _percent_less(_cost(report, DEFAULT, NONE)),
        "default_miss_pct": f"{t[DEFAULT]['evidence_line_miss']:.1%}"[:-1],
        "default_miss": f"{t[DEFAULT]['evidence_line_miss']:.3f}",
        "default_corrections": str(t[DEFAULT]["corrections_kept"]),
        "target_02_cost2": f"{_cost(report, 'target_0.2'):.2f}",
    }
    for short, arm in PRESETS.items():
        out[f"{short}_less"] = _percent_less(_cost(report, arm))
        out[f"{short}_cost2"] = f"{_cost(report, arm):.2f}"
        out[f"{short}_cost3"] = f"{_cost(report, arm):.3f}"
        out[f"{short}_miss_pct"] = f"{t[arm]['evidence_line_miss']:.1%}"[:-1]
        out[f"{short}_miss"] = f"{t[arm]['evidence_line_miss']:.3f}"
        out[f"{short}_facts"] = f"{t[arm]['facts_final']:.0%}"
    for short, arm in (("segments", "segments_evidence"), ("segments_balanced", "segments_balanced")):
        out[f"{short}_cost3"] = f"{_cost(report, arm):.3f}"
        out[f"{short}_miss"] = f"{t[arm]['evidence_line_miss']:.3f}"
        out[f"{short}_facts"] = f"{t[arm]['facts_final']:.0%}"
    return out


# (page, the claim as the page writes it, with {figure} placeholders): each comes from MAIN_JOB.
CLAIMS: list[tuple[str, str]] = [
    (
        "README.md",
        "bills {default_less_than_none}% less than no compaction; misses {default_miss_pct}% of the "
        "evidence; keeps {default_corrections} of 16 corrections",
    ),
    (
        "README.md",
        "bills {evidence_less}% less than the default; misses {evidence_miss_pct}%; keeps 16 of 16. "
        "Cheaper: evidence_balanced ({balanced_less}% less, misses {balanced_miss_pct}%), evidence_lean "
        "({lean_less}% less, {lean_miss_pct}%)",
    ),
    ("docs/evidence-compaction.md", "({evidence_miss} against {default_miss}), keeps every planted fact"),
    ("docs/evidence-compaction.md", "for {evidence_cost2} of the default's cost |"),
    (
        "docs/evidence-compaction.md",
        "({balanced_miss} against {default_miss}) for {balanced_cost2} of the default's cost",
    ),
    (
        "docs/evidence-compaction.md",
        "({lean_cost2} of the default, against {target_02_cost2}) and still misses "
        "about half of what the default misses ({lean_miss})",
    ),
    ("docs/evidence-compaction.md", "| evidence | {evidence_cost3} | {evidence_miss} | {evidence_facts} |"),
    (
        "docs/evidence-compaction.md",
        "| evidence + segments | **{segments_cost3}** | **{segments_miss}** | {segments_facts} |",
    ),
    ("docs/evidence-compaction.md", "| evidence_balanced | {balanced_cost3} | {balanced_miss} | {balanced_facts} |"),
    (
        "docs/evidence-compaction.md",
        "| evidence_balanced + segments | {segments_balanced_cost3} | "
        "{segments_balanced_miss} | {segments_balanced_facts} |",
    ),
    ("docs/evidence-compaction.md", "| evidence_lean | {lean_cost3} | {lean_miss} | {lean_facts} |"),
    (
        "docs/configuration-checks.md",
        "bills {segments_cost3} of the default instead of {evidence_cost3} and misses "
        "{segments_miss} instead of {evidence_miss}, but keeps {segments_facts} of the planted facts instead of "
        "{evidence_facts}",
    ),
]


def pinned() -> dict[str, str]:
    return json.loads(PINNED.read_text(encoding="utf-8"))


def claims(figures: dict[str, str]) -> list[tuple[str, str]]:
    return [(page, text.format(**figures)) for page, text in CLAIMS]


def main(argv: list[str] | None = None, compute: Callable[[dict[str, Any]], dict[str, str]] = _figures) -> int:
    """Compare the pinned figures with the last run's; rewrite them only with ``--write``."""
    from evaluation.cli import Parser

    parser = Parser("python -m tests.docs_figures", __doc__, epilog="Without --write nothing is written.")
    parser.add_argument("--write", action="store_true", help="pin this run's figures in tests/data/docs_figures.json")
    write = parser.parse_args(sys.argv[1:] if argv is None else argv).write
    if not REPORT.exists():
        print(f"no {REPORT.relative_to(ROOT)}: run `{MAIN_JOB}` first", file=sys.stderr)
        return 2
    fresh = compute(json.loads(REPORT.read_text(encoding="utf-8")))
    if write:
        PINNED.write_text(json.dumps(fresh, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {PINNED.relative_to(ROOT)}; now `uv run pytest tests/test_docs_figures.py` names each page")
        return 0
    old = pinned()
    moved = {k: (old.get(k), v) for k, v in fresh.items() if old.get(k) != v}
    for key, (was, now) in sorted(moved.items()):
        print(f"{key}: pinned {was}, this run {now}")
    print("figures agree with this run" if not moved else f"{len(moved)} figure(s) moved: --write, then fix the docs")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
