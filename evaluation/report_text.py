"""The prose of report.md: the verdict drawn from this run, how it was sized and priced, what columns mean."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import report_host
from .report import (
    COLUMNS,
    DEFAULT_ARM,
    KEY_COLUMNS,
    REFERENCE_ARM,
    fmt,
    markdown_table,
    per_workload,
    shaped_rows,
    table_cells,
    valid,
)
from .tokens import FALLBACK_NAME, FRAMING_TOKENS

FALLBACK_NOTE = " tiktoken o200k_base was not used (it could not load, or --no-tiktoken); counts are approximate."
DEFINITIONS = [
    ("reqs", "requests made on the real transcripts (one view before every assistant message)"),
    ("errors", "requests where `get_messages_for_request` raised: a broken request"),
    ("warnings", "WARNING log records the engine emitted (e.g. compaction finished over budget)"),
    ("boundaries", "requests whose cacheable prefix is not an extension of the previous request's"),
    ("read share", "cache-read tokens / all prompt tokens"),
    ("waste", "tokens billed again (plain or write) that an earlier request had already cached"),
    ("cost", "billed input: plain x input + writes x cache_write + reads x cache_read (+ summarizer calls)"),
    ("vs none / vs default", "cost relative to the no-compaction reference / to the default arm, same workloads"),
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
        "recoverable by recall",
        "of the evidence the view missed (sampled, 2 tokens a request), the share one context_recall call "
        "with the token as its query returns within the tool's ~2,000-token output (opt-in recall_tool)",
    ),
    ("corrections kept", "the user's corrections still in the final view verbatim (the corrections scenarios)"),
    ("invalid", "requests that raised or whose view holds an orphan tool result or an unanswered call (must be 0)"),
    ("tail kept", "shortened tool results whose original last 80 characters are still in the view"),
    ("est err", "mean (estimate - true) / true over requests (estimator error against true tokens)"),
    ("ms p50 / p90", "wall time of `get_messages_for_request` in milliseconds (not deterministic)"),
]


def explain(data: dict[str, Any]) -> list[str]:
    """How the run was sized, priced and counted, then the engines and arms and the column definitions."""
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
        f"{p['cache_write']}, cache read {p['cache_read']}; output is not priced (identical across arms).",
        "- Estimate: " + "; ".join(data["estimate_source"] or ["n/a"]) + ".",
        "- Cost, boundaries and evidence are pooled over the real transcripts; over window, invalid views, "
        "warnings and planted facts over every workload, scenarios included.",
        "",
        "## Engines and arms",
        "",
    ]
    lines += [f"- engine `{name}`: {label}" for name, label in sorted(data["engines"].items())]
    lines.append("")
    for name, arm in data["arms"].items():
        t = data["totals"][name]
        status = "" if t["available"] else f" **not available**: {t['reason']}"
        if t["available"] and arm["config"].get("compaction_strategy") == "summary":
            status += f" Summarizer calls: {t['summary_calls']}."
        lines.append(f"- `{name}` ({arm['engine']}, config `{arm['config']}`): {arm['notes']}.{status}")
    lines += ["", "## Columns", ""] + [f"- **{k}**: {v}" for k, v in DEFINITIONS]
    return lines


def markdown(data: dict[str, Any], plots: list[str]) -> str:
    """The whole report.md."""

    parts = ["# Evaluation report", "", *verdict(data), "", "## Key numbers (pooled)", ""]
    parts += [markdown_table([h for h, _ in KEY_COLUMNS], table_cells(data, KEY_COLUMNS)), ""]
    parts += ["## Every pooled column", "", markdown_table([h for h, _ in COLUMNS], table_cells(data)), ""]
    parts += [*unavailable(data), *places(data), *warnings(data), "## How this run was made", "", *explain(data)]
    parts += shaped(data)
    parts += report_host.host_markdown(data) + report_host.tight_markdown(data)
    parts += ["", "## Per arm and workload", "", per_workload(data), ""]
    if plots:
        parts += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    return "\n".join(parts)


def _arm(data: dict[str, Any], name: str) -> str:
    t = data["totals"][name]
    miss = fmt("evidence_line_miss", t["evidence_line_miss"])
    return f"`{name}` (cost {fmt('vs_none', t['vs_none'])} vs none, evidence miss {miss})"


def verdict(data: dict[str, Any]) -> list[str]:
    """'How to read this / what to pick', from this run's numbers."""
    totals, front = data["totals"], data["frontier"]
    w = data["workloads"]
    out = [
        "## How to read this, and what to pick",
        "",
        f"Each arm is one configuration replayed on the same {len(w['real'])} real transcripts and "
        f"{len(w['scenarios'])} generated scenarios (planted facts, the user's corrections), with a window of "
        f"{data['settings']['window_fraction']:.0%} of each session's size, so every session must be compacted. "
        "Read three things: what it bills (**cost vs none**, lower is cheaper), what it forgets (**evidence line "
        "miss**: the share of what the agent used in its next step that the view no longer shows, after the "
        "first compaction; lower is better), and whether it is valid (**over window** and **invalid** are 0).",
        "",
    ]
    d = totals.get(DEFAULT_ARM)
    if d and d["available"]:
        over, invalid = _n(d["over_window"], "request"), _n(d["invalid_views"], "invalid view")
        out.append(
            f"- The default {_arm(data, DEFAULT_ARM)} keeps {fmt('facts_final', d['facts_final'])} of the planted "
            f"facts, with {over} over the window and {invalid}."
        )
    ok = [n for n, t in totals.items() if valid(t) and t["evidence_line_miss"] is not None]
    if ok:
        cheap = min(ok, key=lambda n: (totals[n]["cost"], totals[n]["evidence_line_miss"]))
        keep = min(ok, key=lambda n: (totals[n]["evidence_line_miss"], totals[n]["cost"]))
        out.append(f"- Cheapest valid arm: {_arm(data, cheap)}. Fewest evidence misses: {_arm(data, keep)}.")
        out.append("- The frontier (no valid arm is both cheaper and misses less): " + ", ".join(front) + ".")
    out += _corrections(totals) + _floor(data) + _not_valid(totals)
    out.append("- " + _pick(data))
    return out


def _corrections(totals: dict[str, dict[str, Any]]) -> list[str]:
    """Which valid arms keep the most of the user's corrections verbatim (the corrections scenarios)."""
    ran = {n: t for n, t in totals.items() if valid(t) and t.get("corrections")}
    if not ran:
        return []
    best = max(t["corrections_kept"] for t in ran.values())
    names = ", ".join(f"`{n}`" for n, t in ran.items() if t["corrections_kept"] == best)
    d = totals.get(DEFAULT_ARM) or {}
    default = f"; the default keeps {d['corrections']}" if d.get("corrections") else ""
    total = next(iter(ran.values()))["corrections_total"]
    return [f"- To keep the user's corrections verbatim: {names} ({best}/{total} kept){default}."]


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _floor(data: dict[str, Any]) -> list[str]:
    floor = data["over_window_floor"]
    if not floor["requests"]:
        return []
    where = ", ".join(floor["workloads"]) or "various workloads"
    return [
        f"- Every compacting arm sends at least {floor['requests']} requests over the window ({where}): what "
        "cannot be removed (system prompt, protected messages) is larger than the window there. That floor "
        "is not held against any arm below."
    ]


def _not_valid(totals: dict[str, dict[str, Any]]) -> list[str]:
    out = []
    for name, t in totals.items():
        if not t["available"]:
            out.append(f"- `{name}` did not run: {t['reason']}.")
        elif not valid(t):
            why = f"{_n(t['over_window'], 'request')} over the window, {_n(t['invalid_views'], 'invalid view')}"
            ref = " (the reference, not a choice)" if name == REFERENCE_ARM else ""
            out.append(f"- `{name}` is not valid{ref}: {why}.")
    return out


def _pick(data: dict[str, Any]) -> str:
    totals, front = data["totals"], data["frontier"]
    d = totals.get(DEFAULT_ARM)
    if not front:
        return "What to pick: no arm was valid in this run; see the reasons above."
    if not d or not d["available"] or d["evidence_line_miss"] is None:
        return f"What to pick: the frontier arm whose evidence miss you can accept, at the lowest cost ({front[0]})."
    if DEFAULT_ARM in front:
        return (
            "What to pick: the default is on the frontier: no valid arm is both cheaper and misses less. "
            "Frontier arms cheaper than it forget more; those that forget less cost more."
        )
    better = [
        n
        for n in front
        if totals[n]["cost"] <= d["cost"] and totals[n]["evidence_line_miss"] <= d["evidence_line_miss"]
    ]
    names = ", ".join(f"`{n}` ({_against(totals[n], d)})" for n in better)
    verb, obj = ("beats", "it") if len(better) == 1 else ("beat", "one of them")
    return f"What to pick: {names} {verb} the default on both cost and evidence in this run; prefer {obj}."


def _against(t: dict[str, Any], d: dict[str, Any]) -> str:
    """An arm's cost and evidence miss against the default's, e.g. 'cost -1%, miss 11.5% vs 12.3%'."""
    miss, base = fmt("evidence_line_miss", t["evidence_line_miss"]), fmt("evidence_line_miss", d["evidence_line_miss"])
    return f"cost {fmt('vs_default', t['vs_default'])} vs the default, evidence miss {miss} vs {base}"


def unavailable(data: dict[str, Any]) -> list[str]:
    """Arms that did not run, with the reason (nothing when every arm ran)."""
    rows = [f"- `{n}`: {t['reason']}" for n, t in data["totals"].items() if not t["available"]]
    return ["## Arms that did not run", "", *rows, ""] if rows else []


def places(data: dict[str, Any]) -> list[str]:
    """Planted-fact retention by place, per arm (nothing when no scenario ran)."""
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
        "mid-session correction; a fact is kept when it is still in the view verbatim."
    )
    return [head, "", intro, "", markdown_table(["arm", *names, "all"], rows), ""]


def _order(place: str) -> tuple[int, str]:
    from .scenarios import PLACES

    return (PLACES.index(place) if place in PLACES else len(PLACES), place)


def _kept(p: dict[str, Any] | None) -> str:
    return "n/a" if not p else f"{p['kept']}/{p['total']} ({p['share']:.0%})"


def warnings(data: dict[str, Any]) -> list[str]:
    """Each kind of error and engine warning once, with the arms (and counts) and workloads that met it."""
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
        where = ", ".join(e["workloads"][:MAX_WARNINGS]) + (" ..." if len(e["workloads"]) > MAX_WARNINGS else "")
        out.append(f'- {kind}: "{e["sample"]["message"]}"  \n  arms: {arms}; workloads: {where}')
    totals = [f"`{a}` {t['errors']}/{t['warnings']}" for a, t in data["totals"].items() if t["available"]]
    head = "Errors/warnings per arm: " + ", ".join(totals) + ". Each kind of message once (numbers vary):"
    return ["## Errors and warnings", "", head, "", *out, ""] if out else []


MAX_WARNINGS = 3


def shaped(data: dict[str, Any]) -> list[str]:
    """The Amplifier-shaped section: what hosts really store, every arm, the promises that must hold."""
    if "shaped" not in data:
        return []

    headers, rows = shaped_rows(data)
    return [
        "",
        "## Amplifier-shaped sessions",
        "",
        f"The same {len(data['shaped']['workloads'])} real sessions as an Amplifier host stores them "
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


def undecided(data: dict[str, Any]) -> list[str]:
    """Where this run's numbers cannot decide: sessions too small to compact, or arms that tie."""
    totals = {n: t for n, t in data["totals"].items() if valid(t) and t["evidence_line_miss"] is not None}
    out = []
    d = data["totals"].get(DEFAULT_ARM)
    if d and d["available"] and not d["boundaries"]:
        out.append(
            "The sessions were too small to compact at this window: the arms cannot be told apart; "
            "use a smaller --window-fraction or longer sessions."
        )
    seen: dict[tuple[str, str], str] = {}
    for name, t in totals.items():
        key = (fmt("vs_none", t["vs_none"]), fmt("evidence_line_miss", t["evidence_line_miss"]))
        if key in seen and name != REFERENCE_ARM:
            out.append(f"{seen[key]} and {name} tie on cost and evidence miss: these numbers cannot decide.")
        seen.setdefault(key, name)
    return out


def terminal_verdict(data: dict[str, Any], width: int = 80) -> list[str]:
    """Which arm to pick for which goal, from this run's numbers, wrapped to `width` for the terminal."""
    import textwrap

    bullets = [line[2:] for line in verdict(data) if line.startswith("- ")]
    lines = []
    for text in [*bullets, *undecided(data)]:
        lines += textwrap.wrap(plain(text), width, initial_indent="- ", subsequent_indent="  ")
    return lines
