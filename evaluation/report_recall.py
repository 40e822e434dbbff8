"""What `context_recall` gives back of the lost evidence, per kind of query (see recall_probe.py)."""

from __future__ import annotations

from typing import Any

from .recall_probe import QUERY_KINDS, QUERY_LABELS, SHORT_LABELS
from .report import DEFAULT_ARM, markdown_table
from .wording import plural

HOW = {  # how the probe builds each query (recall_probe.py)
    "exact": "the token itself",
    "line_cue": "the first other distinctive word of the newest line that held it, a name or path rather than a number",
    "call_cue": "for a line of a tool result, the first path in the call's arguments, else their first "
    "distinctive word, else the command's first line",
    "three_words": "the longest run of three consecutive words of that line without the lost word, joined by spaces",
}


def cell(figure: dict[str, Any] | None) -> str:
    """`84% (84/100)`, or n/a when no query of that kind was asked."""
    if not figure or not figure.get("queries"):
        return "n/a"
    return f"{figure['rate']:.0%} ({figure['found']}/{figure['queries']})"


def section(data: dict[str, Any]) -> list[str]:
    """report.md: the share found per query kind and configuration (nothing when nothing was asked)."""
    rows = []
    for name, t in data["totals"].items():
        by = t.get("recall_by_query") or {}
        if t["available"] and any((by.get(k) or {}).get("queries") for k in QUERY_KINDS):
            rows.append([name, *(cell(by.get(k)) for k in QUERY_KINDS)])
    if not rows:
        return []
    kinds = [f"- **{SHORT_LABELS[k]}**: {QUERY_LABELS[k]}. The query: {HOW[k]}." for k in QUERY_KINDS]
    return [
        "## What context_recall gives back (opt-in `recall_tool: true`)",
        "",
        "Of the evidence a view lost (2 lost tokens sampled a request, real transcripts), the share one "
        "`context_recall` call returns within the tool's ~2,000-token output, for each query an agent could "
        "write (found/asked; a kind that does not apply to a lost token is not asked):",
        "",
        *kinds,
        "",
        markdown_table(["configuration", *(SHORT_LABELS[k] for k in QUERY_KINDS)], rows),
        "",
    ]


def terminal(data: dict[str, Any]) -> list[str]:
    """One sentence for the default (or the first configuration asked): the share found per query kind."""
    totals = data["totals"]
    order = [DEFAULT_ARM, *(n for n in totals if n != DEFAULT_ARM)]
    for name in order:
        by = (totals.get(name) or {}).get("recall_by_query") or {}
        if (by.get("exact") or {}).get("queries"):
            whose = "the default's" if name == DEFAULT_ARM else f"{name}'s"
            figures = ", ".join(f"{QUERY_LABELS[k]} {_rate(by.get(k))}" for k in QUERY_KINDS)
            return [
                f"With `recall_tool: true`, one context_recall call gives back this share of {whose} lost "
                f"evidence in this run's sessions ({_sample(data)}), by what it is asked for: {figures} "
                "(how each query is built: report.md; the README quotes the held-out half of the 26 "
                "transcripts, evaluation.studies.recall_cues --split report)."
            ]
    return []


def _sample(data: dict[str, Any]) -> str:
    """Which sessions the probe ran on: the main table's, at its window."""
    workloads = data.get("workloads") or {}
    real, generated = len(workloads.get("real") or []), len(workloads.get("scenarios") or [])
    window = (data.get("settings") or {}).get("window_fraction")
    at = f", window {window:.0%}" if isinstance(window, float) else ""
    return f"{plural(real, 'transcript')} and {plural(generated, 'generated session')}{at}"


def _rate(figure: dict[str, Any] | None) -> str:
    return "n/a" if not figure or figure.get("rate") is None else f"{figure['rate']:.0%}"
