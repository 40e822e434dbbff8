"""What to pick, drawn from this run's numbers and said as a user configures it (`preset: evidence`).

The advice ranks the choices a user makes (the default and the shipped presets, `arms.CHOICES`) by goal:
forget least, pay least, and both (the cheapest that misses at most half of what the default misses),
as the README's presets section does; a documented knob added to a choice (`arms.REFINEMENTS`) gets one
line saying what it adds. When none of the choices ran (a run of `--arms` without them) it ranks every
configuration that ran. The other configurations measured are single knobs and experiments: report.md
names the best trade-offs among them, the terminal does not.
"""

from __future__ import annotations

from typing import Any

from .arms import CHOICES, REFINEMENTS
from .report import DEFAULT_ARM, REFERENCE_ARM, fmt, valid
from .wording import config_words, plural

HALF = 0.5  # "both": at most this share of the default's evidence miss


def doing(data: dict[str, Any], name: str) -> str:
    """What the user does to get a configuration: `keep the default`, `set preset: evidence`."""
    arm = data["arms"][name]
    if arm["engine"] == "context-simple" and not arm["config"]:
        return "keep the default (no keys)"
    text = words(data, name)
    return f"set {text}" if text.startswith("`") else f"use {text}"


def words(data: dict[str, Any], name: str) -> str:
    """A configuration as a user writes it: `preset: evidence`, or the default (no keys)."""
    arm = data["arms"][name]
    text = config_words(arm["config"], arm["engine"])
    return text if text.startswith(("the ", "no ")) else f"`{text}`"


def sentence(text: str) -> str:
    """The text with its first letter upper case (the rest untouched)."""
    return text[:1].upper() + text[1:]


def _ok(t: dict[str, Any]) -> bool:
    return valid(t) and t["evidence_line_miss"] is not None


def pool(data: dict[str, Any]) -> list[str]:
    """The configurations the advice ranks: the valid choices, else every valid configuration."""
    totals = data["totals"]
    choices = [n for n in CHOICES if n in totals and _ok(totals[n])]
    if len(choices) >= 2:
        return choices
    return [n for n, t in totals.items() if n != REFERENCE_ARM and _ok(t)]


def cost_words(t: dict[str, Any], against_default: bool) -> str:
    """`bills 6% less than the default`, `bills 28% less than no compaction`, `bills as much as ...`."""
    key, base = ("vs_default", "the default") if against_default else ("vs_none", "no compaction")
    change = t.get(key)
    if change is None:
        return "cost n/a"
    if round(change * 100) == 0:
        return f"bills as much as {base}"
    return f"bills {abs(change):.0%} {'less' if change < 0 else 'more'} than {base}"


def summary(data: dict[str, Any], name: str) -> str:
    """Cost, evidence miss, planted facts and corrections kept, against the default where it ran."""
    totals = data["totals"]
    t, d = totals[name], totals.get(DEFAULT_ARM)
    is_default = name == DEFAULT_ARM or not (d and d["available"])
    miss = f"misses {fmt('evidence_line_miss', t['evidence_line_miss'])} of the evidence"
    if not is_default and d.get("evidence_line_miss") is not None:
        miss += f" against the default's {fmt('evidence_line_miss', d['evidence_line_miss'])}"
    kept = []
    if t.get("facts_final") is not None:
        share = t["facts_final"]
        kept.append("all the planted facts" if share == 1 else f"{fmt('facts_final', share)} of the planted facts")
    if t.get("corrections"):
        kept.append(_corrections(t["corrections_kept"], t["corrections_total"]))
    tail = f", keeps {' and '.join(kept)}" if kept else ""
    return f"{cost_words(t, not is_default)}, {miss}{tail}"


def _corrections(kept: int, total: int) -> str:
    return f"all {total} of the user's corrections" if kept == total else f"{kept} of the user's {total} corrections"


def _both(data: dict[str, Any], names: list[str]) -> str | None:
    """The cheapest configuration that misses at most half of what the default misses."""
    d = data["totals"].get(DEFAULT_ARM) or {}
    if not d.get("available") or not d.get("evidence_line_miss"):
        return None
    totals = data["totals"]
    fits = [n for n in names if totals[n]["evidence_line_miss"] <= HALF * d["evidence_line_miss"]]
    return min(fits, key=lambda n: (totals[n]["cost"], totals[n]["evidence_line_miss"]), default=None)


def picks(data: dict[str, Any]) -> dict[str, list[str]]:
    """Configuration -> the goals it is the pick for, in the order the advice says them."""
    totals, names = data["totals"], pool(data)
    if not names:
        return {}
    out: dict[str, list[str]] = {}
    least_miss = min(names, key=lambda n: (totals[n]["evidence_line_miss"], totals[n]["cost"]))
    least_cost = min(names, key=lambda n: (totals[n]["cost"], totals[n]["evidence_line_miss"]))
    out.setdefault(least_miss, []).append("to forget least")
    out.setdefault(least_cost, []).append("to pay least")
    both = _both(data, names)
    if both is not None:
        out.setdefault(both, []).append("for both, the cheapest that misses at most half of what the default misses")
    return out


def advice(data: dict[str, Any]) -> list[str]:
    """The bullets of "what to pick" (markdown, without the leading "- ")."""
    totals = data["totals"]
    d = totals.get(DEFAULT_ARM)
    out = []
    if d and _ok(d):
        out.append(f"Drop-in: keep the default, no keys ({summary(data, DEFAULT_ARM)}).")
    chosen = picks(data)
    if not chosen:
        out.append("No configuration kept every request valid in this run: nothing to pick; see why below.")
    for name, goals in chosen.items():
        out.append(sentence(f"{' and '.join(goals)}: {doing(data, name)} ({summary(data, name)})."))
    return out + refinements(data) + ties(data) + not_options(data, terminal=True)


def refinements(data: dict[str, Any]) -> list[str]:
    """What a documented knob adds to a choice, in this run."""
    totals, out = data["totals"], []
    for name, base in REFINEMENTS.items():
        if not (name in totals and base in totals and _ok(totals[name]) and _ok(totals[base])):
            continue
        config, base_config = data["arms"][name]["config"], data["arms"][base]["config"]
        added = {k: v for k, v in config.items() if base_config.get(k) != v}
        knob = config_words(added) if added else "nothing"
        t, b = totals[name], totals[base]
        change = {"vs_default": t["cost"] / b["cost"] - 1}
        cost = cost_words(change, True).replace("the default", "without it")
        miss, base_miss = (fmt("evidence_line_miss", x["evidence_line_miss"]) for x in (t, b))
        facts = _facts_change(t, b)
        out.append(f"Adding `{knob}` to {words(data, base)} {cost} and misses {miss} instead of {base_miss}{facts}.")
    return out


def _facts_change(with_knob: dict[str, Any], without: dict[str, Any]) -> str:
    """ ", but keeps 86% of the planted facts instead of 100%" when the knob changes that share, else ""."""
    kept, base_kept = with_knob.get("facts_final"), without.get("facts_final")
    if kept is None or base_kept is None or round(kept, 2) == round(base_kept, 2):
        return ""
    verb = "but keeps" if kept < base_kept else "and keeps"
    return f", {verb} {kept:.0%} of the planted facts instead of {base_kept:.0%}"


def ties(data: dict[str, Any]) -> list[str]:
    """Where this run's numbers cannot decide: sessions too small to compact, or configurations that tie."""
    totals, out = data["totals"], []
    d = totals.get(DEFAULT_ARM)
    if d and d["available"] and not d["boundaries"]:
        out.append(
            "The sessions were too small to compact at this window: the configurations cannot be told "
            "apart; use a smaller --window-fraction or longer sessions."
        )
    names = pool(data)
    for i, name in enumerate(names):
        twin = next((n for n in names[:i] if tie(totals[n], totals[name])), None)
        if twin is not None:
            both = f"{words(data, twin)} and {words(data, name)}"
            out.append(sentence(f"{both} tie on cost and evidence miss: these numbers cannot decide between them."))
    return out


def tie(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Within half a percent of each other's cost and a twentieth of a point of evidence miss."""
    return abs(a["cost"] / b["cost"] - 1) < 0.005 and abs(a["evidence_line_miss"] - b["evidence_line_miss"]) < 0.0005


def not_options(data: dict[str, Any], terminal: bool) -> list[str]:
    """Configurations that are not an option in this run, and why (the terminal: the choices only)."""
    totals, out = data["totals"], []
    floor = data["over_window_floor"]
    if floor["requests"]:
        where = ", ".join(floor["workloads"]) or "various sessions"
        out.append(
            f"Every compacting configuration sends at least {plural(floor['requests'], 'request')} over the "
            f"window ({where}): what cannot be removed (system prompt, protected messages) is larger than the "
            "window there. That floor is held against none of them."
        )
    shown = set(CHOICES) | set(REFINEMENTS) | {REFERENCE_ARM}
    for name, t in totals.items():
        if terminal and name not in shown:
            continue
        if not t["available"]:
            out.append(sentence(f"{words(data, name)} did not run: {t['reason']}."))
        elif not valid(t):
            why = f"{plural(t['over_window'], 'request')} over the window, {plural(t['invalid_views'], 'invalid view')}"
            if name == REFERENCE_ARM:
                out.append(f"No compaction (the reference) is not an option at this window: {why}.")
            else:
                out.append(sentence(f"{words(data, name)} is not an option here: {why}."))
    return out


def others(data: dict[str, Any]) -> list[str]:
    """report.md: the best trade-offs among every configuration measured, and the other invalid ones."""
    front = data["frontier"]
    out = []
    if front:
        names = ", ".join(f"{words(data, n)} ({n})" for n in front)
        out.append(
            "Best trade-offs among every configuration measured (no other valid configuration is both cheaper "
            f"and forgets less), cheapest first: {names}."
        )
    chosen = set(picks(data)) | set(CHOICES) | set(REFINEMENTS)
    for name in front:
        if name not in chosen:
            out.append(sentence(f"{words(data, name)} ({name}), outside the presets: {summary(data, name)}."))
    return out + [line for line in not_options(data, terminal=False) if line not in not_options(data, True)]
