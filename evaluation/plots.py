"""PNG plots (matplotlib, Agg): tokens per request, cumulative cost, retention."""

from __future__ import annotations

import math
from itertools import accumulate
from pathlib import Path
from typing import Any


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _grid(plt: Any, n: int, title: str) -> tuple[Any, list[Any]]:
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 3.8 * rows), squeeze=False)
    fig.suptitle(title)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _by_workload(data: dict[str, Any]) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for key, series in data["series"].items():
        arm, workload = key.split("|", 1)
        out.setdefault(workload, {})[arm] = series
    return out


def tokens_plot(data: dict[str, Any], path: Path) -> None:
    """True prompt tokens per request against the window limit; compaction boundaries marked."""
    plt = _pyplot()
    groups = _by_workload(data)
    fig, axes = _grid(plt, len(groups), "true prompt tokens per request (x = compaction boundary)")
    for ax, (workload, arms) in zip(axes, sorted(groups.items()), strict=True):
        for arm, s in arms.items():
            (line,) = ax.plot(s["index"], s["true_tokens"], label=arm, linewidth=1)
            xs = [i for i, b in zip(s["index"], s["boundary"], strict=True) if b]
            ys = [t for t, b in zip(s["true_tokens"], s["boundary"], strict=True) if b]
            ax.scatter(xs, ys, marker="x", s=14, color=line.get_color())
        w = data["windows"][workload]
        ax.axhline(w["context_window"] - w["max_output_tokens"], color="red", linestyle="--", label="limit")
        ax.set_title(workload[:48], fontsize=8)
        ax.set_xlabel("request")
        ax.set_ylabel("tokens")
    axes[0].legend(fontsize=6)
    _save(plt, fig, path)


def cost_plot(data: dict[str, Any], path: Path) -> None:
    """Cumulative billed input cost per arm, one panel per workload."""
    plt = _pyplot()
    groups = _by_workload(data)
    fig, axes = _grid(plt, len(groups), "cumulative billed input cost (token units)")
    for ax, (workload, arms) in zip(axes, sorted(groups.items()), strict=True):
        for arm, s in arms.items():
            ax.plot(s["index"], list(accumulate(s["cost"])), label=arm, linewidth=1)
        ax.set_title(workload[:48], fontsize=8)
        ax.set_xlabel("request")
    axes[0].legend(fontsize=6)
    _save(plt, fig, path)


def retention_plot(data: dict[str, Any], path: Path) -> None:
    """Planted-fact retention (end, probes) and tail retention per arm."""
    plt = _pyplot()
    arms = [a for a, t in data["totals"].items() if t["available"]]
    keys = [("facts_final", "facts at end"), ("facts_probes", "facts at probes"), ("tail_retention", "tail kept")]
    fig, ax = plt.subplots(figsize=(max(6, len(arms) * 1.1), 4))
    width = 0.8 / len(keys)
    for j, (key, label) in enumerate(keys):
        vals = [data["totals"][a][key] or 0 for a in arms]
        ax.bar([i + j * width for i in range(len(arms))], vals, width, label=label)
    ax.set_xticks([i + width for i in range(len(arms))], arms, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_title("what each arm keeps (share)")
    ax.legend(fontsize=7)
    _save(plt, fig, path)


def _save(plt: Any, fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_all(data: dict[str, Any], out: Path) -> list[str]:
    """Write every plot into `out`; returns the file names."""
    out.mkdir(parents=True, exist_ok=True)
    jobs = [("tokens.png", tokens_plot), ("cost.png", cost_plot), ("retention.png", retention_plot)]
    if not data["series"]:
        return []
    for name, fn in jobs:
        fn(data, out / name)
    return [name for name, _ in jobs]
