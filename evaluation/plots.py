"""PNG plots (matplotlib, Agg): the cost/evidence frontier, tokens per request, and what each arm keeps.

Every arm has its own style (a colour, a marker and, past ten arms, a line style), used in every plot.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any

COLOURS = [f"C{i}" for i in range(10)]
MARKERS = ["o", "s", "^", "D", "v", "P", "X"]  # 7 markers against 10 colours: 70 distinct pairs
LINESTYLES = ["-", "--", "-.", ":"]
PLOTS = ("frontier.png", "tokens.png", "retention.png")
STALE = ("cost.png",)  # written by earlier versions of the harness


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def arm_style(i: int) -> dict[str, Any]:
    """The style of the i-th arm: distinct for the first 70 arms."""
    return {
        "color": COLOURS[i % len(COLOURS)],
        "marker": MARKERS[i % len(MARKERS)],
        "linestyle": LINESTYLES[(i // len(COLOURS)) % len(LINESTYLES)],
    }


def styles(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Arm name -> style, in the arm table's order."""
    return {name: arm_style(i) for i, name in enumerate(data["totals"])}


def _wrap(text: str, width: int = 60) -> str:
    return "\n".join(textwrap.wrap(text, width)) or text


def _by_workload(data: dict[str, Any]) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for key, series in data["series"].items():
        arm, workload = key.split("|", 1)
        out.setdefault(workload, {})[arm] = series
    return out


def frontier_plot(data: dict[str, Any], path: Path) -> None:
    """One point per arm: billed cost vs none against evidence line miss; frontier drawn, default marked.

    The left panel shows every arm; the right one zooms on the valid arms that save money, where the choice is.
    """
    from .report import valid

    plt = _pyplot()
    totals = data["totals"]
    pts = {
        n: ((t["vs_none"] or 0) * 100, (t["evidence_line_miss"] or 0) * 100)
        for n, t in totals.items()
        if t["available"] and t["vs_none"] is not None and t["evidence_line_miss"] is not None
    }
    fig, (whole, zoom) = plt.subplots(1, 2, figsize=(14, 6), layout="constrained")
    for ax in (whole, zoom):
        _frontier_panel(ax, data, pts)
    ok = [pts[n] for n in pts if valid(totals[n]) and pts[n][0] <= 0] or [pts[n] for n in pts if valid(totals[n])]
    if ok:
        costs, misses = [c for c, _ in ok], [m for _, m in ok]
        pad_c, pad_m = max(1.0, (max(costs) - min(costs)) * 0.15), max(1.0, (max(misses) - min(misses)) * 0.15)
        zoom.set_xlim(min(misses) - pad_m, max(misses) + pad_m)
        zoom.set_ylim(min(costs) - pad_c, max(costs) + pad_c)
    whole.set_title("every arm")
    zoom.set_title("zoom on the valid arms that bill less than no compaction")
    title = f"cost against evidence lost, {_scope(data)} (grey steps = frontier, hollow = not valid, ring = default)"
    recoverable = (totals.get("progressive") or {}).get("recoverable_miss")
    if recoverable is not None:
        title += f"; with recall_tool, context_recall returns {recoverable:.0%} of the default's missed evidence"
    fig.suptitle(_wrap(title, 110))
    handles, labels = whole.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=8)
    _save(plt, fig, path)


def _frontier_panel(ax: Any, data: dict[str, Any], pts: dict[str, tuple[float, float]]) -> None:
    from .report import DEFAULT_ARM, valid

    totals, style = data["totals"], styles(data)
    for n, (cost, miss) in pts.items():
        st = style[n]
        face = st["color"] if valid(totals[n]) else "none"
        ax.scatter(miss, cost, s=60, marker=st["marker"], edgecolors=st["color"], facecolors=face, label=n, zorder=3)
    front = [pts[n] for n in data["frontier"] if n in pts]
    if front:
        xs, ys = zip(*sorted((m, c) for c, m in front), strict=True)
        ax.step(xs, ys, where="post", color="grey", linewidth=1, zorder=1, label="frontier (valid arms)")
    if DEFAULT_ARM in pts:
        c, m = pts[DEFAULT_ARM]
        ax.scatter(m, c, s=260, facecolors="none", edgecolors="black", linewidths=1.5, zorder=2, label="default")
    _label_points(ax, pts, list(dict.fromkeys([*data["frontier"], DEFAULT_ARM])))
    ax.set_xlabel("evidence line miss after the first compaction (%, lower keeps more)")
    ax.set_ylabel("billed input cost vs no compaction (%, lower is cheaper)")
    ax.grid(True, alpha=0.3)


def _label_points(ax: Any, pts: dict[str, tuple[float, float]], named: list[str]) -> None:
    """Name the frontier arms and the default (the legend names the rest); arms on one spot share a label."""
    spots: dict[tuple[float, float], list[str]] = {}
    for n in named:
        if n in pts:
            cost, miss = pts[n]
            spots.setdefault((round(miss, 1), round(cost, 1)), []).append(n)
    for (miss, cost), names in spots.items():
        ax.annotate(_wrap(", ".join(names), 30), (miss, cost), xytext=(8, 6), textcoords="offset points", fontsize=8)


def _scope(data: dict[str, Any]) -> str:
    w = data["workloads"]
    return f"{len(w['real'])} transcripts, window {data['settings']['window_fraction']:.0%}"


def tokens_plot(data: dict[str, Any], path: Path) -> None:
    """True prompt tokens per request against the window limit; compaction boundaries marked."""
    plt = _pyplot()
    groups, style = _by_workload(data), styles(data)
    n = len(groups)
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, grid = plt.subplots(rows, cols, figsize=(6 * cols + 2.5, 3.9 * rows), squeeze=False)
    fig.suptitle("true prompt tokens per request (markers = compaction boundaries; black dashes = window limit)")
    flat = [ax for row in grid for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    for ax, (workload, arms) in zip(flat, sorted(groups.items()), strict=False):
        for arm, s in arms.items():
            st = style[arm]
            ax.plot(s["index"], s["true_tokens"], color=st["color"], linestyle=st["linestyle"], lw=1, label=arm)
            marks = [(i, t) for i, t, b in zip(s["index"], s["true_tokens"], s["boundary"], strict=True) if b]
            if marks:
                ax.scatter(*zip(*marks, strict=True), marker=st["marker"], s=14, color=st["color"])
        w = data["windows"][workload]
        ax.axhline(w["context_window"] - w["max_output_tokens"], color="black", linestyle=(0, (5, 3)), lw=1.2)
        ax.set_title(_wrap(workload, 55), fontsize=8)
        ax.set_xlabel("request")
        ax.set_ylabel("true prompt tokens")
    from matplotlib.lines import Line2D

    drawn = {a for arms in groups.values() for a in arms}
    handles = [Line2D([], [], lw=1, markersize=5, label=a, **st) for a, st in style.items() if a in drawn]
    handles.append(Line2D([], [], color="black", linestyle=(0, (5, 3)), lw=1.2, label="window limit"))
    labels = [h.get_label() for h in handles]
    right = 1 - 2.3 / fig.get_figwidth()  # room for the shared legend
    fig.tight_layout(rect=(0, 0, right, 0.97))  # cheaper than constrained layout on many panels
    fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(right, 0.97), fontsize=8)
    _save(plt, fig, path)


def retention_plot(data: dict[str, Any], path: Path) -> None:
    """Planted facts kept at the end, by place, per arm; a place with no facts is written n/a."""
    from .scenarios import PLACES

    plt = _pyplot()
    arms = [a for a, t in data["totals"].items() if t["available"]]
    places = [p for p in PLACES if any(p in data["totals"][a].get("facts_by_place", {}) for a in arms)]
    fig, ax = plt.subplots(figsize=(max(8, len(arms) * 1.0 + 3), 4.8), layout="constrained")
    width = 0.8 / len(places)
    for j, place in enumerate(places):
        for i, arm in enumerate(arms):
            share = (data["totals"][arm].get("facts_by_place", {}).get(place) or {}).get("share")
            x = i + (j - (len(places) - 1) / 2) * width
            if share is None:
                ax.text(x, 0.02, "n/a", rotation=90, ha="center", va="bottom", fontsize=7)
                continue
            ax.bar(x, share * 100, width, color=COLOURS[j % len(COLOURS)])
    ax.set_xticks(range(len(arms)), arms, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 105)
    ax.set_xlabel("arm")
    ax.set_ylabel("planted facts kept at the last request (%)")
    ax.set_title(_wrap("planted facts kept, by where they were planted (user turns; head, middle, end of results)"))
    from matplotlib.patches import Patch

    handles = [Patch(color=COLOURS[j % len(COLOURS)], label=p) for j, p in enumerate(places)]
    fig.legend(handles=handles, loc="outside right upper", fontsize=8, title="planted in")
    _save(plt, fig, path)


def _save(plt: Any, fig: Any, path: Path) -> None:
    fig.savefig(path, dpi=90)
    plt.close(fig)


def remove_stale(out: Path) -> None:
    """Delete plots an earlier run left in `out`, so the folder never shows another run's pictures."""
    for name in PLOTS + STALE:
        (out / name).unlink(missing_ok=True)


def write_all(data: dict[str, Any], out: Path) -> list[str]:
    """Write every plot into `out` (after removing old ones); returns the file names."""
    out.mkdir(parents=True, exist_ok=True)
    remove_stale(out)
    if not data["series"]:
        return []
    jobs = [("frontier.png", frontier_plot), ("tokens.png", tokens_plot)]
    if any(t.get("facts_total") for t in data["totals"].values()):
        jobs.append(("retention.png", retention_plot))  # only when a planted-fact scenario ran
    for name, fn in jobs:
        fn(data, out / name)
    return [name for name, _ in jobs]
