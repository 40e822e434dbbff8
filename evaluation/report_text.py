"""The prose of report.md: the verdict drawn from this run, how it was sized and priced, what columns mean."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import advice, report_host, report_peers, report_recall
from .report import (
    COLUMNS,
    KEY_COLUMNS,
    fmt,
    markdown_table,
    per_workload,
    shaped_rows,
    table_cells,
)
from .tokens import FALLBACK_NAME, FRAMING_TOKENS
from .wording import place_name, plural

FALLBACK_NOTE = " tiktoken o200k_base was not used (it could not load, or --no-tiktoken); counts are approximate."
DEFINITIONS = [
    ("reqs", "requests made on the real transcripts (one view before every assistant message)"),
    ("errors", "requests where `get_messages_for_request` raised: a broken request"),
    ("warnings", "WARNING log records the engine emitted (e.g. compaction finished over budget)"),
    ("boundaries", "requests whose cacheable prefix is not an extension of the previous request's"),
    ("read share", "cache-read tokens / all prompt tokens"),
    ("waste", "tokens billed again (plain or write) that an earlier request had already cached"),
    ("cost", "billed input: plain x input + writes x cache_write + reads x cache_read (+ summarizer calls)"),
    ("vs none / vs default", "cost relative to the no-compaction reference / to the default, same workloads"),
    (
        "evidence line / token miss",
        "real transcripts only, requests from each run's first compaction on: share of the distinctive tokens "
        "the next assistant message used from earlier messages whose earlier line is not a line of the view "
        "(line) / that are nowhere in the view (token); see evaluation/evidence.py",
    ),
    ("over window", "requests whose true prompt exceeds window - max_output_tokens (a provider rejects them)"),
    ("peak/limit", "largest true prompt / (window - max_output_tokens), worst workload"),
    ("orphans / unanswered", "tool results without their call; calls without their result (must be 0)"),
    ("sys hashes", "distinct system-prompt hashes within a session, worst workload (must be 1)"),
    (
        "facts end / probes",
        "planted facts present verbatim at the last request (pooled over the scenarios) / mean at the probes",
    ),
    ("scenario cost vs none", "billed cost on the generated scenarios relative to the no-compaction reference"),
    (
        "recall: exact word / word of the line / call / 3 words",
        "of the evidence the view missed (sampled, 2 tokens a request), the share one context_recall call "
        "returns within the tool's ~2,000-token output (opt-in recall_tool), asked for the exact lost word / "
        "another distinctive word of its line / the path or command of the call whose result held it / three "
        "words of its line (see *What context_recall gives back*)",
    ),
    (
        "corrections kept",
        "of the user's long mid-session corrections (4 in each corrections scenario), those still in the final "
        "view whole, as the user's own message",
    ),
    ("invalid", "requests that raised or whose view holds an orphan tool result or an unanswered call (must be 0)"),
    ("tail kept", "shortened tool results whose original last 80 characters are still in the view"),
    ("est err", "mean (estimate - true) / true over requests (estimator error against true tokens)"),
    ("ms p50 / p90", "wall time of `get_messages_for_request` in milliseconds (not deterministic)"),
]


def explain(data: dict[str, Any]) -> list[str]:
    """How the run was sized, priced and counted, then the configurations and the column definitions."""
    s = data["settings"]
    p = s["prices"]
    counter = data["token_counter"]
    lines = [
        f"- Token counter: **{counter}**." + (FALLBACK_NOTE if counter == FALLBACK_NAME else ""),
        f"- True tokens per message: role + content + tool-call names and arguments, plus {FRAMING_TOKENS} "
        "framing tokens; metadata and view markers are not sent and not counted. Fixed per-request "
        f"overhead (tool schemas etc.) added at the front: {s['request_overhead']:,} tokens.",
        f"- Window: the module's effective budget is {s['window_fraction']:.0%} of the session's true size "
        f"(at least {s['min_budget']:,}); window = budget + 800 (notice reserve) + 4096 (safety margin) + "
        f"int({s['max_output_tokens']} x {s['output_reserve_fraction']}); max_output_tokens = "
        f"{s['max_output_tokens']}.",
        f"- Cache: Anthropic-style prefix cache, breakpoint after the last non-ephemeral message, minimum "
        f"{s['min_cacheable']:,} tokens. Prices per token unit: input {p['input']}, cache write "
        f"{p['cache_write']}, cache read {p['cache_read']}; output is not priced (identical in every configuration).",
        "- Estimate: " + "; ".join(data["estimate_source"] or ["n/a"]) + ".",
        "- Cost, boundaries and evidence are pooled over the real transcripts; over window, invalid views, "
        "warnings and planted facts over every workload, scenarios included.",
        "",
        "## Configurations",
        "",
        "Each label of the tables, what a user writes in the module's config to get it, and what it is for.",
        "",
    ]
    lines += [f"- engine `{name}`: {label}" for name, label in sorted(data["engines"].items())]
    lines.append("")
    for name, arm in data["arms"].items():
        t = data["totals"][name]
        status = "" if t["available"] else f" **not available**: {t['reason']}"
        if t["available"] and arm["config"].get("compaction_strategy") == "summary":
            status += f" Summarizer calls: {t['summary_calls']}."
        lines.append(f"- `{name}`: {advice.words(data, name)}; {arm['notes']} (engine {arm['engine']}).{status}")
    lines += ["", "## Columns", ""] + [f"- **{k}**: {v}" for k, v in DEFINITIONS]
    return lines


PLOT_NAMES = {
    "frontier.png": "billed cost against evidence lost, per configuration",
    "tokens.png": "true prompt tokens per request",
    "retention.png": "planted facts kept, by place",
}


def markdown(data: dict[str, Any], plots: list[str]) -> str:
    """The whole report.md."""

    parts = ["# Evaluation report", "", *verdict(data), "", "## Key numbers (pooled)", ""]
    parts += [markdown_table([h for h, _ in KEY_COLUMNS], table_cells(data, KEY_COLUMNS)), ""]
    parts += ["## Every pooled column", "", markdown_table([h for h, _ in COLUMNS], table_cells(data)), ""]
    parts += [*report_peers.section(data), *unavailable(data), *places(data), *report_recall.section(data)]
    parts += warnings(data)
    parts += ["## How this run was made", "", *explain(data)]
    parts += shaped(data)
    parts += report_host.host_markdown(data) + report_host.tight_markdown(data)
    parts += ["", "## Per configuration and session", "", per_workload(data), ""]
    if plots:
        parts += ["## Plots", ""] + [f"![{PLOT_NAMES.get(p, p)}]({p})" for p in plots] + [""]
    return "\n".join(parts)


def verdict(data: dict[str, Any]) -> list[str]:
    """'How to read this / what to pick', from this run's numbers, in configuration terms."""
    w = data["workloads"]
    sessions = plural(len(w["real"]), "real transcript")
    if w["scenarios"]:
        sessions += f" and {plural(len(w['scenarios']), 'generated scenario')} (planted facts, the user's corrections)"
    out = [
        "## How to read this, and what to pick",
        "",
        f"Each configuration is replayed on the same {sessions}, with a window of "
        f"{data['settings']['window_fraction']:.0%} of each session's size, so every session must be compacted. "
        "Read three things: what it bills (**cost vs none**: against sending the whole history every time; "
        "lower is cheaper), what it forgets (**evidence line miss**: the share of what the agent used in its "
        "next step that the view no longer shows, after the first compaction; lower is better), and whether it "
        "is an option at all (**over window** and **invalid** are 0). A configuration is named by what you write "
        "in the module's config (`preset: evidence`); the tables give each a short label, listed with its "
        "settings under *Configurations*.",
        "",
        *(f"- {line}" for line in advice.advice(data)),
    ]
    rest = advice.others(data)
    if rest:
        out += ["", "The other configurations measured (single settings and experiments, for comparison):", ""]
        out += [f"- {line}" for line in rest]
    return out


def unavailable(data: dict[str, Any]) -> list[str]:
    """Configurations that did not run, with the reason (nothing when every one ran)."""
    rows = [f"- `{n}`: {t['reason']}" for n, t in data["totals"].items() if not t["available"]]
    return ["## Configurations that did not run", "", *rows, ""] if rows else []


def places(data: dict[str, Any]) -> list[str]:
    """Planted-fact retention by place, per configuration (nothing when no scenario ran)."""
    names = sorted({p for t in data["totals"].values() for p in t.get("facts_by_place", {})}, key=_order)
    if not names:
        return []
    rows = []
    for arm, t in data["totals"].items():
        if t["available"]:
            by = t["facts_by_place"]
            rows.append([arm] + [_kept(by.get(p)) for p in names] + [fmt("facts_final", t["facts_final"])])
    head = "## Planted facts kept at the last request, by place"
    intro = (
        "Facts sit in early user turns, at the head, middle and end of tool results of mixed sizes, and in a "
        "*retraction* (a one-line mid-session message retracting an earlier instruction); a fact is kept when "
        "it is still in the view verbatim. Not to be confused with *corrections kept*, the user's long "
        "corrections kept whole."
    )
    headers = ["configuration", *(place_name(p) for p in names), "all"]
    return [head, "", intro, "", markdown_table(headers, rows), ""]


def _order(place: str) -> tuple[int, str]:
    from .scenarios import PLACES

    return (PLACES.index(place) if place in PLACES else len(PLACES), place)


def _kept(p: dict[str, Any] | None) -> str:
    return "n/a" if not p else f"{p['kept']}/{p['total']} ({p['share']:.0%})"


def warnings(data: dict[str, Any]) -> list[str]:
    """Each kind of error and engine warning once, with the configurations (and counts) and sessions that met it."""
    from .driver import message_shape

    kinds: dict[tuple[str, str], dict[str, Any]] = {}
    for arm, t in data["totals"].items():
        if not t["available"]:
            continue
        for kind, count_key in (("error", "errors"), ("warning", "warnings")):
            for sample in t[f"{kind}_samples"]:
                entry = kinds.setdefault((kind, message_shape(sample["message"])), {"sample": sample, "arms": {}})
                entry["arms"][arm] = t[count_key]
                entry["workloads"] = sorted(set(entry.get("workloads", [])) | set(sample["workloads"]))
    out = []
    for (kind, _), e in sorted(kinds.items(), key=lambda kv: kv[0][0]):  # errors first
        arms = ", ".join(f"`{a}`" for a in e["arms"])
        more = len(e["workloads"]) - MAX_WARNINGS
        where = ", ".join(e["workloads"][:MAX_WARNINGS]) + (f" and {more} more" if more > 0 else "")
        out.append(f'- {kind}: "{e["sample"]["message"]}"  \n  configurations: {arms}; sessions: {where}')
    totals = [f"`{a}` {t['errors']}/{t['warnings']}" for a, t in data["totals"].items() if t["available"]]
    head = "Errors/warnings per configuration: " + ", ".join(totals) + ". Each kind of message once (numbers vary):"
    return ["## Errors and warnings", "", head, "", *out, ""] if out else []


MAX_WARNINGS = 3


def shaped(data: dict[str, Any]) -> list[str]:
    """The Amplifier-shaped section: what hosts really store, every configuration, the promises that must hold."""
    if "shaped" not in data:
        return []

    headers, rows = shaped_rows(data)
    return [
        "",
        "## Amplifier-shaped sessions",
        "",
        f"The same {plural(len(data['shaped']['workloads']), 'real session')} as an Amplifier host stores them "
        "(evaluation/shaped.py, seeded): system-role hook injections after 40% of the tool calls, half of them "
        "between the call and its results; text blocks on 30% of user messages and tool results; a developer "
        "instruction on some sessions; signed thinking blocks on half the assistant turns; call ids reused per "
        "turn. *Prefix changes without event* must be 0 (a silent cache rebuild), *over window\\** counts "
        "requests over the window whose instructions alone fit (must be 0), *invalid* must be 0.",
        "",
        markdown_table(headers, rows),
        "",
    ]


def write(data: dict[str, Any], out: Path, plots: list[str]) -> tuple[Path, Path]:
    """Write report.json and report.md into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / "report.json", out / "report.md"
    json_path.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")
    md_path.write_text(markdown(data, plots), encoding="utf-8")
    return json_path, md_path


def plain(text: str) -> str:
    """Markdown emphasis and code marks taken out, for the terminal."""
    return text.replace("**", "").replace("`", "")


def terminal_verdict(data: dict[str, Any], width: int = 80) -> list[str]:
    """What to pick for which goal, in configuration terms, wrapped to `width` for the terminal."""
    import textwrap

    lines = []
    for text in [*advice.advice(data), *report_peers.terminal(data), *report_recall.terminal(data)]:
        lines += textwrap.wrap(plain(text), width, initial_indent="- ", subsequent_indent="  ")
    return lines
