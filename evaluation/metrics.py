"""Metrics per arm and workload, and their pooled totals per arm."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .driver import Run, message_shape
from .evidence import pool_totals, pooled
from .recall_probe import recall_rates
from .scenarios import PLACES, fact_place


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def run_metrics(run: Run) -> dict[str, Any]:
    """The metrics of one arm on one workload (see README for each definition)."""
    ok = [r for r in run.requests if r.error is None]
    total = sum(r.true_tokens for r in ok)
    m: dict[str, Any] = {
        "arm": run.arm,
        "workload": run.workload,
        "available": run.available,
        "reason": run.reason,
        "requests": len(run.requests),
        "errors": len(run.requests) - len(ok),
        "boundaries": sum(r.boundary for r in ok),
        "prompt_tokens": total,
        "cache_read_tokens": sum(r.read for r in ok),
        "cache_write_tokens": sum(r.write for r in ok),
        "plain_input_tokens": sum(r.plain for r in ok),
        "cache_read_share": _ratio(sum(r.read for r in ok), total),
        "cache_waste": sum(r.waste for r in ok),
        "cost": sum(r.cost for r in ok) + run.summary_cost,
        "summary_calls": run.summary_calls,
        "warnings": run.warnings,
        "over_budget_endings": run.over_budget,
        "warning_samples": run.warning_samples,
        "error_samples": list(dict.fromkeys(r.error for r in run.requests if r.error))[:3],
        "summary_cost": run.summary_cost,
        "peak_true_tokens": max((r.true_tokens for r in ok), default=0),
        "window": run.window.context_window,
        "window_limit": run.window.limit,
        "budget": run.window.budget,
        "over_window": sum(r.over_window for r in ok),
        "over_window_fitting": sum(r.over_window and r.instructions_fit for r in ok),
        "silent_prefix_changes": sum(r.boundary and not r.compaction_event for r in ok),
        "orphan_tool_results": sum(r.orphans for r in ok),
        "unanswered_tool_calls": sum(r.unanswered for r in ok),
        "invalid_views": sum(1 for r in run.requests if r.error or r.orphans or r.unanswered),
        "system_prompt_hashes": len({r.system_hash for r in ok}),
        "truncated_tool_results": sum(r.truncated_tools for r in ok),
        "tail_retention": _ratio(sum(r.tails_kept for r in ok), sum(r.truncated_tools for r in ok)),
        "ms_p50": percentile([r.ms for r in ok], 50),
        "ms_p90": percentile([r.ms for r in ok], 90),
    }
    m.update(estimator_error(ok))
    m.update(fact_retention(run))
    m.update(corrections_kept(run))
    m.update(evidence_recall(run))
    return m


def evidence_recall(run: Run) -> dict[str, Any]:
    """Evidence line/token miss after the run's first compaction, and its most often missed tokens."""
    scores = [r.evidence for r in run.requests if r.error is None and r.evidence is not None]
    out = pooled(scores)
    if run.synthetic:  # scripted answers carry no evidence: not measured (n/a), not a miss of 0
        out["evidence_line_miss"] = out["evidence_token_miss"] = None
    out["evidence_real"] = not run.synthetic
    seen: dict[str, int] = {}
    for s in scores:
        for tok in s.missed:
            seen[tok] = seen.get(tok, 0) + 1
    out["evidence_missed_samples"] = sorted(seen, key=lambda t: (-seen[t], t))[:8]
    ok = [r for r in run.requests if r.error is None]
    out["recall_checked"] = sum(r.recall_checked for r in ok)
    out["recall_found"] = sum(r.recall_found for r in ok)
    return out


def estimator_error(requests: Iterable[Any]) -> dict[str, float | None]:
    """Mean signed and mean absolute relative error of the estimate against true tokens."""
    errs = [(r.estimate - r.true_tokens) / r.true_tokens for r in requests if r.true_tokens > 0]
    if not errs:
        return {"estimator_error_mean": None, "estimator_error_abs": None}
    return {
        "estimator_error_mean": sum(errs) / len(errs),
        "estimator_error_abs": sum(abs(e) for e in errs) / len(errs),
    }


def corrections_kept(run: Run) -> dict[str, Any]:
    """The user's corrections still in the final view, verbatim, as user messages (issue 23)."""
    ok = [r for r in run.requests if r.error is None]
    final = ok[-1].corrections if ok and run.corrections else 0
    return {"corrections_total": run.corrections, "corrections_kept": final}


def fact_retention(run: Run) -> dict[str, Any]:
    """Planted facts present verbatim at the end (overall and by place) and at the probe requests."""
    if not run.facts:
        return {
            "facts_final": None,
            "facts_probes": None,
            "stale_instruction": None,
            "facts_lost": [],
            "facts_total": 0,
            "facts_kept": 0,
            "facts_by_place": {},
        }
    by_index = {r.index: r for r in run.requests if r.error is None}
    final = by_index.get(max(by_index, default=0))
    probes = [by_index[i] for i in run.probe_requests if i in by_index]
    kept = set(final.facts) if final else set()
    probe_share = [len(p.facts) / len(p.facts_due) for p in probes if p.facts_due]
    places: dict[str, list[int]] = {}
    for name in run.facts:
        counts = places.setdefault(fact_place(name), [0, 0])
        counts[0] += name in kept
        counts[1] += 1
    return {
        "facts_final": len(kept) / len(run.facts),
        "facts_probes": sum(probe_share) / len(probe_share) if probe_share else None,
        "stale_instruction": bool(final and final.retracted_present and "correction" not in final.facts),
        "facts_lost": sorted(set(run.facts) - kept),
        "facts_total": len(run.facts),
        "facts_kept": len(kept),
        "facts_by_place": places,
    }


# Pooled over the real transcripts (what a user pays), or over every workload when none is real.
SUMMED = (
    "requests",
    "boundaries",
    "prompt_tokens",
    "cache_read_tokens",
    "cache_waste",
    "cost",
    "summary_calls",
)
# Pooled over every workload, scenarios included: a broken or oversized view anywhere counts.
SAFETY = (
    "errors",
    "warnings",
    "over_budget_endings",
    "over_window",
    "over_window_fitting",
    "silent_prefix_changes",
    "orphan_tool_results",
    "unanswered_tool_calls",
    "invalid_views",
    "truncated_tool_results",
    "facts_total",
    "facts_kept",
    "corrections_total",
    "corrections_kept",
    "recall_checked",
    "recall_found",
)


def arm_totals(rows: list[dict[str, Any]], runs: list[Run]) -> dict[str, Any]:
    """Pool one arm's available rows: cost over real transcripts, safety and facts over everything."""
    avail = [r for r in rows if r["available"]]
    real = [r for r in avail if r["evidence_real"]] or avail
    scenario = [r for r in avail if not r["evidence_real"]]
    out: dict[str, Any] = {k: sum(r[k] for r in real) for k in SUMMED}
    out.update({k: sum(r[k] for r in avail) for k in SAFETY})
    out["workloads"] = len(real)
    out["scenario_cost"] = sum(r["cost"] for r in scenario) if scenario else None
    out["cache_read_share"] = _ratio(out["cache_read_tokens"], out["prompt_tokens"])
    out["peak_over_limit"] = max((r["peak_true_tokens"] / r["window_limit"] for r in avail), default=None)
    out["max_system_prompt_hashes"] = max((r["system_prompt_hashes"] for r in avail), default=0)
    kept = sum((r["tail_retention"] or 0) * r["truncated_tool_results"] for r in avail)
    out["tail_retention"] = _ratio(kept, out["truncated_tool_results"])
    out["facts_final"] = _ratio(out["facts_kept"], out["facts_total"])
    # Issue 21: the share of missed evidence one context_recall call returns within its output bound.
    out["recoverable_miss"] = _ratio(out["recall_found"], out["recall_checked"])
    out["recall_by_query"] = recall_rates(runs)  # the exact word and the cues an agent would write
    probes = [r["facts_probes"] for r in avail if r["facts_probes"] is not None]
    out["facts_probes"] = sum(probes) / len(probes) if probes else None
    out["facts_by_place"] = _places(avail)
    errs = [r["estimator_error_mean"] for r in real if r["estimator_error_mean"] is not None]
    out["estimator_error_mean"] = sum(errs) / len(errs) if errs else None
    out.update(pool_totals(r for r in avail if r["evidence_real"]))
    out["warning_samples"] = _samples(avail, "warning_samples")
    out["error_samples"] = _samples(avail, "error_samples")
    ms = [q.ms for run in runs if run.available for q in run.requests if q.error is None]
    out["ms_p50"], out["ms_p90"] = percentile(ms, 50), percentile(ms, 90)
    out["available"] = bool(avail)
    out["reason"] = "" if avail else (rows[0]["reason"] if rows else "no runs")
    return out


def _places(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Planted-fact retention by place, pooled: {place: {kept, total, share}}."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        for place, (kept, total) in r["facts_by_place"].items():
            p = out.setdefault(place, {"kept": 0, "total": 0})
            p["kept"] += kept
            p["total"] += total
    for p in out.values():
        p["share"] = _ratio(p["kept"], p["total"])
    return {k: out[k] for k in sorted(out, key=_place_order)}


def _place_order(place: str) -> tuple[int, str]:
    return (PLACES.index(place) if place in PLACES else len(PLACES), place)


def _samples(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """One example per kind of warning or error message of an arm, with the workloads that produced it."""
    seen: dict[str, dict[str, Any]] = {}
    for r in rows:
        for text in r[key]:
            entry = seen.setdefault(message_shape(text), {"message": text, "workloads": []})
            entry["workloads"].append(r["workload"])
    return list(seen.values())
