"""The prose of report.md: what ran, how it was sized and priced, and what each column means."""

from __future__ import annotations

from typing import Any

from .tokens import FALLBACK_NAME, FRAMING_TOKENS

FALLBACK_NOTE = " tiktoken o200k_base was not used (it could not load, or --no-tiktoken); counts are approximate."
DEFINITIONS = [
    ("reqs", "requests made (one view before every assistant message of the transcript)"),
    ("errors", "requests where `get_messages_for_request` raised: a broken request"),
    ("warnings", "WARNING log records the engine emitted (e.g. compaction finished over budget)"),
    ("boundaries", "requests whose cacheable prefix is not an extension of the previous request's"),
    ("read share", "cache-read tokens / all prompt tokens"),
    ("waste", "tokens billed again (plain or write) that an earlier request had already cached"),
    ("cost", "billed input: plain x input + writes x cache_write + reads x cache_read (+ summarizer calls)"),
    ("vs none", "cost relative to the no-compaction reference on the same workloads"),
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
    ("facts end / probes", "planted facts present verbatim at the last request / mean at the probe points"),
    ("tail kept", "shortened tool results whose original last 80 characters are still in the view"),
    ("est err", "mean (estimate - true) / true over requests (estimator error against true tokens)"),
    ("ms p50 / p90", "wall time of `get_messages_for_request` in milliseconds (not deterministic)"),
]


def explain(data: dict[str, Any]) -> list[str]:
    """The report's opening sections."""
    s = data["settings"]
    p = s["prices"]
    counter = data["token_counter"]
    lines = [
        f"Token counter: **{counter}**." + (FALLBACK_NOTE if counter == FALLBACK_NAME else ""),
        f"True tokens per message: role + content + tool-call names and arguments, plus {FRAMING_TOKENS} "
        "framing tokens; metadata and view markers are not sent and not counted. Fixed per-request "
        f"overhead (tool schemas etc.) added at the front: {s['request_overhead']:,} tokens.",
        f"Window: the module's effective budget is {s['window_fraction']:.0%} of the session's true size "
        f"(at least {s['min_budget']:,}); window = budget + 800 (notice reserve) + 4096 (safety margin) + "
        f"int({s['max_output_tokens']} x {s['output_reserve_fraction']}); max_output_tokens = "
        f"{s['max_output_tokens']}.",
        f"Cache: Anthropic-style prefix cache, breakpoint after the last non-ephemeral message, minimum "
        f"{s['min_cacheable']:,} tokens. Prices per token unit: input {p['input']}, cache write "
        f"{p['cache_write']}, cache read {p['cache_read']}; output is not priced (identical across arms).",
        "Estimate: " + "; ".join(data["estimate_source"] or ["n/a"]) + ".",
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
