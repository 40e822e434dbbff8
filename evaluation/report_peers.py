"""The peers in the report: where the default and the presets stand against the best peer, what each
peer does, and how to replay the original module beside them (evaluation/peers.py, issue 40)."""

from __future__ import annotations

from typing import Any

from .arms import CHOICES, PEERS
from .peers import DEFAULT_KEEP_USES
from .report import fmt
from .wording import plural

ORIGINAL_ENGINE = "context-simple-original"


def ran(data: dict[str, Any]) -> list[str]:
    """The peers that ran, with a bill and an evidence miss."""
    totals = data["totals"]
    return [n for n in PEERS if n in totals and totals[n]["available"] and totals[n].get("cost")]


def best_peer(data: dict[str, Any]) -> str | None:
    """The peer a user would reach for first: the cheapest one that ran (then the one missing least)."""
    totals = data["totals"]
    miss = lambda n: totals[n]["evidence_line_miss"] if totals[n]["evidence_line_miss"] is not None else 1.0  # noqa: E731
    return min(ran(data), key=lambda n: (totals[n]["cost"], miss(n)), default=None)


def standing(data: dict[str, Any]) -> str | None:
    """One sentence: the default and each preset against the best peer, bill ratio and evidence miss."""
    from .advice import words

    best = best_peer(data)
    if best is None:
        return None
    totals, b = data["totals"], data["totals"][best]
    mine = [n for n in CHOICES if n in totals and totals[n]["available"] and totals[n].get("cost") is not None]
    if not mine:
        return None
    parts = [
        f"{'the default' if n == 'progressive' else words(data, n)} {'bills ' if i == 0 else ''}"
        f"{totals[n]['cost'] / b['cost']:.2f}x{' as much' if i == 0 else ''} and {'misses ' if i == 0 else ''}"
        f"{fmt('evidence_line_miss', totals[n]['evidence_line_miss'])}"
        for i, n in enumerate(mine)
    ]
    over = sorted({totals[n]["over_window"] for n in mine})
    over_words = plural(over[0], "request") if len(over) == 1 else f"{over[0]}-{plural(over[-1], 'request')}"
    return (
        f"Against the cheapest peer, {phrase(data, best)} (bills {fmt('vs_none', b['vs_none'])} against no "
        f"compaction, misses {fmt('evidence_line_miss', b['evidence_line_miss'])} of the evidence, sends "
        f"{plural(b['over_window'], 'request')} over the window), {', '.join(parts)}, each with {over_words} "
        "over the window."
    )


def phrase(data: dict[str, Any], name: str) -> str:
    """A peer in a few words: the method and its parameters."""
    config = data["arms"][name]["config"]
    if "keep_tool_turns" in config:
        return f"observation masking keeping the last {config['keep_tool_turns']} tool turns"
    keep = config.get("keep", DEFAULT_KEEP_USES)
    return f"tool-result clearing past {_share(data):.0%} of the window keeping the newest {keep} results"


def section(data: dict[str, Any]) -> list[str]:
    """report.md: the peers, what they do, where this module stands, how to add the original."""
    names = ran(data)
    if not names:
        return []
    totals = data["totals"]
    rows = [
        f"- `{n}`: {data['arms'][n]['notes']}; bills {fmt('vs_none', totals[n]['vs_none'])} against no "
        f"compaction, misses {fmt('evidence_line_miss', totals[n]['evidence_line_miss'])}, "
        f"{plural(totals[n]['boundaries'], 'boundary', 'boundaries')}, "
        f"{plural(totals[n]['over_window'], 'request')} over the window."
        for n in names
    ]
    sentence = standing(data)
    return [
        "## Beside the peers",
        "",
        "What users reach for instead, replayed on the same sessions, windows, cache model and metrics "
        "(evaluation/peers.py). Each keeps the whole history and puts a placeholder in place of some tool "
        "results; calls, their arguments, assistant and user messages are always sent, so a peer can send "
        "requests over the window: they are counted in *over window* (a provider would refuse them), and "
        "the peer stays in the tables and the plot, hollow.",
        "",
        *rows,
        "",
        "- Observation masking: the results of the last M tool turns (an assistant message with calls and "
        "the results answering it) are sent, every older one becomes `Old environment output: (N lines "
        "omitted)`; the masked edge moves with each tool turn, so nearly every request rewrites the cache "
        "from there.",
        "- Tool-result clearing (`clear_tool_uses_20250919`, Anthropic's defaults: trigger 100,000 input "
        "tokens, keep 3 tool uses, no clear_at_least, no excluded tools, tool inputs kept): decided per request "
        "from the whole history; past the trigger every tool result but the newest 3 becomes `[cleared]` (the "
        "API does not publish its placeholder; LangChain's mirror of the strategy writes this). The replay "
        "sizes each window from its session, so the trigger is the same share of the window as 100,000 of a "
        f"200,000-token window: {_share(data)} x the window (here {_trigger_range(data)} input tokens on the "
        "real sessions).",
        "",
        *([sentence, ""] if sentence else []),
        f"The original module is not a peer here: it registers the same entry-point name and import package "
        f"as this one, and the harness imports this one. To replay it beside the others, clone "
        f"microsoft/amplifier-module-context-simple, rename its package folder to "
        f"`amplifier_module_context_simple_original` and its entry point (pyproject.toml) to "
        f'`{ORIGINAL_ENGINE} = "amplifier_module_context_simple_original:mount"`, then run '
        f"`uv pip install ./that-clone` and `uv run --no-sync python -m evaluation --engine {ORIGINAL_ENGINE}`: "
        f"its defaults join the tables and the plot as `engine:{ORIGINAL_ENGINE}` (`uv sync` takes it out again).",
        "",
    ]


def _share(data: dict[str, Any]) -> float:
    """The clearing peer's trigger as a share of the window (its arm's setting, else the default)."""
    from .peers import DEFAULT_TRIGGER_SHARE

    config = (data["arms"].get("peer_clear_tool_uses") or {}).get("config") or {}
    return float(config.get("trigger_share", DEFAULT_TRIGGER_SHARE))


def _trigger_range(data: dict[str, Any]) -> str:
    """The triggers of this run's real sessions, as `lo-hi`."""
    real = set(data["workloads"]["real"])
    windows = [w["context_window"] for name, w in data.get("windows", {}).items() if name in real]
    if not windows:
        return "n/a"
    lo, hi = (int(_share(data) * w) for w in (min(windows), max(windows)))
    return f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"


def terminal(data: dict[str, Any]) -> list[str]:
    """The standing sentence for the terminal, plain (no markdown marks)."""
    sentence = standing(data)
    return [sentence.replace("`", "")] if sentence else []
