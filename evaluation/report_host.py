"""The host-shaped sections of the report: the plain and host-shaped replays side by side (issue 28),
and the tight-window scenario (issue 29). Self-contained: their own columns, cells and terminal lines.
"""

from __future__ import annotations

import textwrap
from typing import Any

from .arms import Arm
from .driver import Run, Settings
from .report import DEFAULT_ARM, build
from .wording import plural

# (heading, key) per replay; each cell shows the plain replay, then the host-shaped one.
SIDE_BY_SIDE = [
    ("bill vs none", "vs_none"),
    ("evidence line miss", "evidence_line_miss"),
    ("over window", "over_window"),
    ("invalid", "invalid_views"),
    ("boundaries", "boundaries"),
    ("cache read share", "cache_read_share"),
]
TIGHT_KEYS = (
    "requests",
    "over_window",
    "over_budget_endings",
    "boundaries",
    "cache_read_share",
    "cost",
    "vs_default",
    "evidence_line_miss",
    "invalid_views",
)
TERMINAL_WIDTH = 80


def _totals(arms: list[Arm], runs: list[Run], settings: Settings, keys: tuple[str, ...]) -> dict[str, dict]:
    totals = build(arms, runs, settings, {})["totals"]
    return {name: {k: t.get(k) for k in keys} for name, t in totals.items() if t["available"]}


def host_section(arms: list[Arm], plain: list[Run], host: list[Run], settings: Settings) -> dict[str, Any]:
    """Per arm, the plain replay's and the host-shaped replay's figures on the same real sessions."""
    real = [r for r in plain if not r.synthetic]
    keys = ("cost", *(k for _, k in SIDE_BY_SIDE))
    plain_totals, host_totals = _totals(arms, real, settings, keys), _totals(arms, host, settings, keys)
    rows = {}
    for name, p in plain_totals.items():
        h = host_totals.get(name)
        if h is not None:
            rows[name] = {"plain": p, "host": h, "bill_ratio": h["cost"] / p["cost"] if p["cost"] else None}
    return {"workloads": sorted({r.workload for r in host}), "arms": rows}


def calls_only_section(arms: list[Arm], runs: list[Run], settings: Settings) -> dict[str, Any]:
    """Per configuration that ran, the figures of the replay that changes only the call shape."""
    return {"arms": _totals(arms, runs, settings, ("cost", "evidence_line_miss", "boundaries"))}


def tight_section(arms: list[Arm], runs: list[Run], settings: Settings, shape: dict[str, Any]) -> dict[str, Any]:
    """Per arm, the tight-window scenario's figures (issue 29's baseline), with the scenario's shape."""
    totals = _totals(arms, runs, settings, TIGHT_KEYS)
    for t in totals.values():
        t["boundaries_per_request"] = t["boundaries"] / t["requests"] if t["requests"] else None
    return {"shape": shape, "arms": totals}


def _ran(data: dict[str, Any], section: dict[str, Any]) -> dict[str, Any]:
    """The section's arms that ran in the main table too (one that did not is named once, there)."""
    totals = data.get("totals")
    if totals is None:
        return section["arms"]
    return {n: r for n, r in section["arms"].items() if totals.get(n, {}).get("available")}


def _pct(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:.{digits}%}"


def _signed(value: float | None) -> str:
    return "n/a" if value is None else "0%" if round(value * 100) == 0 else f"{value:+.0%}"


def cell(key: str, value: Any) -> str:
    """One figure of these sections, formatted on its own (the main table's formats may change)."""
    if key in ("vs_none", "vs_default"):
        return _signed(value)
    if key == "evidence_line_miss":
        return _pct(value, 1)
    if key in ("cache_read_share", "boundaries_per_request"):
        return _pct(value)
    if key == "cost":
        return "n/a" if value is None else f"{value:,.0f}"
    return "n/a" if value is None else f"{value:,}"


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def host_markdown(data: dict[str, Any]) -> list[str]:
    """report.md's side-by-side section (nothing when the host-shaped replay did not run)."""
    section = data.get("host")
    if not section:
        return []
    headers = ["configuration", *(f"{h} (plain / host)" for h, _ in SIDE_BY_SIDE), "host bill / plain bill"]
    rows = []
    for name, r in _ran(data, section).items():
        pairs = [f"{cell(k, r['plain'][k])} / {cell(k, r['host'][k])}" for _, k in SIDE_BY_SIDE]
        rows.append([name, *pairs, "n/a" if r["bill_ratio"] is None else f"{r['bill_ratio']:.2f}x"])
    intro = (
        f"The same {plural(len(section['workloads']), 'real session')} replayed twice through every configuration, "
        "on the same "
        "provider window: as the plain JSONL stores them, and as Amplifier's loop-streaming orchestrator on "
        "amplifier-core 2.0.2 stores them (evaluation/host_shaped.py, seeded): calls as `{id, tool, arguments: "
        "{...}}` beside content blocks (thinking, text, tool_call), every result as the JSON of the whole result "
        "object, hook-shell system messages between a call and its results, steering user messages mid-turn, "
        "and the status and todo reminders added to every request (billed; the context manager never sees "
        "them). Evidence miss reads decoded arguments and unwrapped results, so it is measured on the same "
        "lines in both replays. Each bill is against its own replay's `none`."
    )
    table = ["", "## Plain and host-shaped replays, side by side", "", intro, "", *_table(headers, rows), ""]
    return table + calls_only_markdown(data)


def _calls_only_rows(data: dict[str, Any]) -> list[tuple[str, dict, dict, dict]]:
    """(configuration, plain, calls only, host-shaped figures) for each configuration replayed all three ways."""
    host, calls = data.get("host"), data.get("host_calls")
    if not host or not calls:
        return []
    ran = _ran(data, host)
    return [(n, ran[n]["plain"], c, ran[n]["host"]) for n, c in calls["arms"].items() if n in ran]


def calls_only_markdown(data: dict[str, Any]) -> list[str]:
    """report.md's comparison of the plain replay, the call shape alone and the whole host shape."""
    rows = _calls_only_rows(data)
    if not rows:
        return []
    headers = ["configuration", "evidence line miss: plain", "call shape alone", "host-shaped"]
    headers += ["boundaries: plain", "call shape alone", "host-shaped", "bill: call shape alone / plain"]
    cells = []
    for name, plain, calls, host in rows:
        cells.append(
            [name, *(cell("evidence_line_miss", f["evidence_line_miss"]) for f in (plain, calls, host))]
            + [cell("boundaries", f["boundaries"]) for f in (plain, calls, host)]
            + [f"{calls['cost'] / plain['cost']:.2f}x" if plain["cost"] else "n/a"]
        )
    intro = (
        "The same sessions a third way, for the configurations a user picks between: only the calls stored as "
        "the orchestrators store them (`{id, tool, arguments: {...}}` beside text and tool_call content blocks), "
        "nothing else changed. What remains between this column and the host-shaped one is the session "
        "the host makes (wrapped results, hook-shell messages, steering, thinking blocks, reminders), not "
        "how the module reads it. Every counter sizes a call stored twice (in `tool_calls` and as a content "
        "block) once; the default `token_counter: estimate` (the original's `len(str(message)) // 4`) still "
        "reads the call's own text, which differs a little between shapes, so a boundary can move by a "
        "request; `python -m evaluation.studies.host_parity` takes the host's changes one at a time, and with "
        "`--module-counter content` the call shape alone decides exactly as the plain replay."
    )
    return ["### The call shape alone", "", intro, "", *_table(headers, cells), ""]


def tight_markdown(data: dict[str, Any]) -> list[str]:
    """report.md's tight-window section (nothing when the scenario did not run)."""
    section = data.get("tight")
    if not section:
        return []
    s = section["shape"]
    headers = ["configuration", "requests", "past the input limit", "OVER BUDGET endings", "boundaries per request"]
    headers += ["cache read share", "bill", "bill vs default", "evidence line miss", "invalid"]
    keys = ["requests", "over_window", "over_budget_endings", "boundaries_per_request", "cache_read_share"]
    keys += ["cost", "vs_default", "evidence_line_miss", "invalid_views"]
    rows = [[name, *(cell(k, t[k]) for k in keys)] for name, t in section["arms"].items()]
    intro = (
        "One generated session, stored as loop-streaming stores it (evaluation/host_shaped.py): "
        f"{plural(s['turns'], 'turn')}, {plural(s['tool_results'], 'tool result')} of {s['result_kb_min']}-"
        f"{s['result_kb_max']} KB (file reads, grep output, test logs), {plural(s['screenshots'], 'screenshot')} "
        "pasted in user turns, the hooks' reminders on every "
        f"request. The provider reports a {s['context_window']:,}-token window and {s['max_output_tokens']:,} "
        f"output tokens (input limit {s['input_limit']:,}); every configuration of this module runs with `max_tokens: "
        f"{s['max_tokens']}`. *Past the input limit*: requests a provider rejects. *OVER BUDGET endings*: the "
        "module's warnings that compaction could not reach its budget. The no-compaction reference is left "
        "out: its views would hold the whole session, far past the window."
    )
    return ["", "## Tight window", "", intro, "", *_table(headers, rows), ""]


def host_terminal(data: dict[str, Any]) -> list[str]:
    """The side-by-side table for the terminal, within 80 columns."""
    section = data.get("host")
    if not section:
        return []
    keys = ["vs_none", "evidence_line_miss", "over_window", "invalid_views"]
    cells = [
        [name, *(f"{cell(k, r['plain'][k])} | {cell(k, r['host'][k])}" for k in keys)]
        for name, r in _ran(data, section).items()
    ]
    heads = ["configuration", "bill vs none", "evidence miss", "over window", "invalid"]
    n = plural(len(section["workloads"]), "transcript")
    title = f"Plain | host-shaped replay ({n} as loop-streaming stores them):"
    return [title[:TERMINAL_WIDTH], *_aligned(heads, cells), *calls_only_terminal(data)]


def calls_only_terminal(data: dict[str, Any]) -> list[str]:
    """Evidence miss with the call shape alone beside the plain and host-shaped replays (terminal)."""
    rows = _calls_only_rows(data)
    if not rows:
        return []
    heads = ["configuration", "plain", "call shape alone", "host-shaped"]
    cells = [[n, *(cell("evidence_line_miss", f["evidence_line_miss"]) for f in fs)] for n, *fs in rows]
    return ["Evidence miss, the orchestrators' call shape alone (report.md):", *_aligned(heads, cells)]


def _aligned(heads: list[str], cells: list[list[str]]) -> list[str]:
    """A plain-text table: the first column left-aligned, the others right-aligned, two spaces apart."""
    widths = [max(len(row[i]) for row in [heads, *cells]) for i in range(len(heads))]
    lines = []
    for row in [heads, *cells]:
        right = ("  " + c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))
        lines.append((row[0].ljust(widths[0]) + "".join(right)).rstrip())
    return lines


def tight_terminal(data: dict[str, Any], where: str = "report.md") -> list[str]:
    """The tight-window scenario in a few terminal lines: where requests went past the limit, and how
    many compactions ended over budget."""
    section = data.get("tight")
    if not section:
        return []
    arms = section["arms"]
    past = [f"{n} {t['over_window']}" for n, t in arms.items() if t["over_window"]]
    over = sorted(arms.items(), key=lambda kv: (-kv[1]["over_budget_endings"], kv[0]))
    worst = ", ".join(f"{n} {t['over_budget_endings']}" for n, t in over[:3] if t["over_budget_endings"])
    default = arms.get(DEFAULT_ARM)
    s = section["shape"]
    text = (
        f"Tight window ({s['context_window']:,} tokens, max_tokens {s['max_tokens']:,}, host-shaped): "
        f"requests past the input limit: {', '.join(past) or 'none'}; "
        f"OVER BUDGET endings: "
        + (f"default {default['over_budget_endings']}, " if default else "")
        + (f"most {worst}" if worst else "none")
        + f" ({where})."
    )
    return textwrap.wrap(text, TERMINAL_WIDTH)


def tight_table(data: dict[str, Any]) -> list[str]:
    """The tight-window scenario per arm, for the terminal (within 80 columns)."""
    section = data.get("tight")
    if not section:
        return []
    keys = ["over_window", "over_budget_endings", "boundaries_per_request", "cache_read_share", "vs_default"]
    heads = ["configuration", "past limit", "OVER BUDGET", "bound/req", "cache rd", "vs dflt"]
    cells = [[name, *(cell(k, t[k]) for k in keys)] for name, t in section["arms"].items()]
    lines = _aligned(heads, cells)
    limit = section["shape"]["input_limit"]
    caption = (
        f"past limit: requests over the input limit ({limit:,} tokens); OVER BUDGET: compactions that ended "
        "over budget; bound/req: boundaries per request; cache rd: cache-read share; vs dflt: bill against "
        "the default's"
    )
    return lines + textwrap.wrap(caption, TERMINAL_WIDTH)
