"""PNG plots (matplotlib, Agg): cost against evidence lost, prompt tokens per request, planted facts kept.

Every configuration has its own colour and marker, the same in every plot. The no-compaction reference,
the default and the presets (what a user picks between) get fixed, strong styles; the others take the
next unused colour and marker, so no two of the first 26 configurations share a colour or look alike.
The peers (`peer_*`, evaluation/peers.py) are named on the left panel of the frontier, beside the
line of the no-compaction reference (whose evidence miss is not measured: it never compacts).
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any

from .arms import CHOICES, PEERS, REFINEMENTS
from .wording import config_words, place_name

FIXED = {  # name -> (colour, marker)
    "none": ("#7f7f7f", "X"),
    "progressive": ("#000000", "o"),
    "preset_evidence": ("#1f77b4", "^"),
    "preset_evidence_balanced": ("#2ca02c", "D"),
    "preset_evidence_lean": ("#ff7f0e", "v"),
    "segments_evidence": ("#9467bd", "P"),
}
# For the others: picked greedily from matplotlib's named colours (25 <= CIELAB L <= 75, chroma >= 30)
# so that each is as far as possible from FIXED, the grey of the best trade-offs and each other; any two
# configurations of the arm table differ by a `colour_distance` of at least 15 (about 2 is just visible),
# so no two series look alike (tests/test_evaluation_plots.py).
PALETTE = [
    "#800000",  # maroon
    "#0a481e",  # pine green
    "#17becf",  # cyan
    "#fe86a4",  # rosa
    "#010fcc",  # true blue
    "#7f5f00",  # olive brown
    "#750851",  # velvet
    "#bcbd22",  # olive
    "#8ab8fe",  # carolina blue
    "#d90166",  # dark hot pink
    "#137e6d",  # blue green
    "#e50000",  # red
    "#014182",  # darkish blue
    "#ff63e9",  # candy pink
    "#b17261",  # pinkish brown
    "#01c08d",  # green/blue
    "#9b8f55",  # dark khaki
    "#556b2f",  # dark olive green
    "#01889f",  # teal blue
    "#9900fa",  # vivid purple
]
MARKERS = ["s", "<", ">", "p", "h", "*", "d", "H", "8"]  # not used by FIXED
LINESTYLES = ["-", "--", "-.", ":"]
PLOTS = ("frontier.png", "tokens.png", "retention.png")
STALE = ("cost.png",)  # written by earlier versions of the harness
TOKEN_PANELS = 4  # sessions drawn in tokens.png (the longest real ones)
# Where a point's name may go, in points from it: nearest first, on every side.
DIRECTIONS = [(1, 0.6), (1, -0.8), (-1, 0.6), (-1, -0.8), (0, 1), (0, -1.2), (1, 0), (-1, 0)]
LABEL_OFFSETS = [(round(dx * r), round(dy * r)) for r in (14, 30, 50, 75) for dx, dy in DIRECTIONS]
POINT_WEIGHT = 5  # hiding a point, or running out of the panel, is worse than touching another label
LABEL_GAP = 3.0  # pixels kept clear around each placed name, so two names never touch


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def table_order(names: Any) -> list[str]:
    """Names in the arm table's order, then any others (engines) by name: the same in every run."""
    from .arms import ARMS

    known = [a.name for a in ARMS]
    return sorted(names, key=lambda n: (known.index(n), "") if n in known else (len(known), n))


def styles(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Configuration name -> {color, marker, linestyle}: fixed ones for the reference, the default and
    the presets; the others by their place in the arm table, so a configuration keeps its style in a run
    of a few (`--arms`) and in a report read back from report.json."""
    from .arms import ARMS

    others = [a.name for a in ARMS if a.name not in FIXED]
    others += [n for n in table_order(data["totals"]) if n not in FIXED and n not in others]
    out: dict[str, dict[str, Any]] = {}
    for name in table_order(data["totals"]):
        if name in FIXED:
            colour, marker = FIXED[name]
            out[name] = {"color": colour, "marker": marker, "linestyle": "-"}
            continue
        i = others.index(name)
        out[name] = {
            "color": PALETTE[i % len(PALETTE)],
            "marker": MARKERS[i % len(MARKERS)],
            "linestyle": LINESTYLES[(i // len(PALETTE)) % len(LINESTYLES)],
        }
    return out


def colour_distance(a: str, b: str) -> float:
    """How different two colours look: CIE94 distance in CIELAB (graphic-arts weights, symmetric chroma)."""
    (l1, a1, b1), (l2, a2, b2) = _lab(a), _lab(b)
    c1, c2 = math.hypot(a1, b1), math.hypot(a2, b2)
    mean = math.sqrt(c1 * c2)
    hue2 = max(0.0, (a1 - a2) ** 2 + (b1 - b2) ** 2 - (c1 - c2) ** 2)
    return math.sqrt((l1 - l2) ** 2 + ((c1 - c2) / (1 + 0.045 * mean)) ** 2 + hue2 / (1 + 0.015 * mean) ** 2)


def _lab(colour: str) -> tuple[float, float, float]:
    """sRGB (any matplotlib colour) to CIELAB under D65."""
    from matplotlib.colors import to_rgb

    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(colour))
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883
    fx, fy, fz = (t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in (x, y, z))
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def _wrap(text: str, width: int = 60) -> str:
    return "\n".join(textwrap.wrap(text, width)) or text


def _by_workload(data: dict[str, Any]) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for key, series in data["series"].items():
        arm, workload = key.split("|", 1)
        out.setdefault(workload, {})[arm] = series
    return out


def _user_words(data: dict[str, Any], name: str) -> str:
    arm = data["arms"].get(name) or {}
    return config_words(arm.get("config") or {}, arm.get("engine", "context-simple"))


def frontier_plot(data: dict[str, Any], path: Path) -> None:
    """One point per configuration: billed cost vs none against evidence line miss; the best trade-offs
    drawn, the default ringed. Left: every configuration; right: the valid ones that bill less than none,
    where the choice is, with the default and the presets named as a user configures them."""
    from .report import valid

    plt = _pyplot()
    totals = data["totals"]
    pts = {
        n: (t["vs_none"] * 100, t["evidence_line_miss"] * 100)
        for n, t in totals.items()
        if t["available"] and t["vs_none"] is not None and t["evidence_line_miss"] is not None
    }
    fig, (whole, zoom) = plt.subplots(1, 2, figsize=(15, 6.5), layout="constrained")
    for ax in (whole, zoom):
        _frontier_panel(ax, data, pts)
    ok = [pts[n] for n in pts if valid(totals[n]) and pts[n][0] <= 0] or [pts[n] for n in pts if valid(totals[n])]
    if ok:
        costs, misses = [c for c, _ in ok], [m for _, m in ok]
        pad_c, pad_m = max(1.5, (max(costs) - min(costs)) * 0.2), max(1.5, (max(misses) - min(misses)) * 0.2)
        zoom.set_xlim(min(misses) - pad_m, max(misses) + pad_m)
        zoom.set_ylim(min(costs) - pad_c, max(costs) + pad_c)
    whole.set_title("every configuration")
    zoom.set_title("zoom: the valid ones that bill less than no compaction")
    fig.suptitle(_wrap(_frontier_title(data), 120))
    handles, labels = whole.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=8, title="configuration")
    fig.get_layout_engine().execute(fig)  # lay out once (no drawing), then freeze the layout, so labels
    fig.set_layout_engine("none")  # are placed where they will be drawn
    named = [n for n in (*CHOICES, *REFINEMENTS) if n in pts]
    _place_labels(fig, zoom, pts, {n: _user_words(data, n) for n in named})
    _place_labels(fig, whole, pts, {n: peer_label(data, n) for n in PEERS if n in pts})
    _save(plt, fig, path)


def peer_label(data: dict[str, Any], name: str) -> str:
    """A peer's short name on the plot: the method and its parameter."""
    config = (data["arms"].get(name) or {}).get("config") or {}
    if "keep_tool_turns" in config:
        return f"peer: observation masking, last {config['keep_tool_turns']} tool turns"
    if "keep" in config:
        return f"peer: clear_tool_uses, keep {config['keep']}"
    return name


def _frontier_title(data: dict[str, Any]) -> str:
    title = (
        f"cost against evidence lost, {_scope(data)}; grey steps = the best trade-offs (no valid configuration "
        "is both cheaper and forgets less), hollow = not valid (e.g. requests over the window), ring = the default, "
        "dotted = no compaction (its miss is not measured)"
    )
    recall = (data["totals"].get("progressive") or {}).get("recoverable_miss")
    if recall is not None:
        title += (
            f"; with recall_tool, one context_recall call asked for the exact lost word gives back {recall:.0%} "
            "of the default's lost evidence (other queries: report.md)"
        )
    return title


def _frontier_panel(ax: Any, data: dict[str, Any], pts: dict[str, tuple[float, float]]) -> None:
    from .report import DEFAULT_ARM, REFERENCE_ARM, valid

    totals, style = data["totals"], styles(data)
    for n in table_order(pts):
        cost, miss = pts[n]
        st = style[n]
        face = st["color"] if valid(totals[n]) else "none"
        size = 90 if n in FIXED else 55
        ax.scatter(miss, cost, s=size, marker=st["marker"], edgecolors=st["color"], facecolors=face, label=n, zorder=3)
    front = [pts[n] for n in data["frontier"] if n in pts]
    if front:
        xs, ys = zip(*sorted((m, c) for c, m in front), strict=True)
        ax.step(xs, ys, where="post", color="#b0b0b0", linewidth=1.2, zorder=1, label="best trade-offs")
    if REFERENCE_ARM in totals and totals[REFERENCE_ARM]["available"]:  # its miss is n/a: a line, not a point
        ax.axhline(0, color=FIXED[REFERENCE_ARM][0], linestyle=":", lw=1.2, zorder=1, label="none (miss n/a)")
    if DEFAULT_ARM in pts:
        c, m = pts[DEFAULT_ARM]
        ax.scatter(m, c, s=320, facecolors="none", edgecolors="black", linewidths=1.2, zorder=2, label="(default)")
    ax.set_xlabel("evidence line miss after the first compaction (%, lower keeps more)")
    ax.set_ylabel("billed input cost vs no compaction (%, lower is cheaper)")
    ax.grid(True, alpha=0.3)


def _place_labels(fig: Any, ax: Any, pts: dict[str, tuple[float, float]], labels: dict[str, str]) -> None:
    """Name some points inside `ax`, each at the first offset whose text overlaps no other label, no
    point and stays inside the panel (else where it overlaps least), joined to its point by a thin line."""
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    points = [_point_box(ax, miss, cost) for cost, miss in pts.values()]
    taken: list[Any] = []
    for name, text in labels.items():
        cost, miss = pts[name]
        if not (ax.get_xlim()[0] <= miss <= ax.get_xlim()[1] and ax.get_ylim()[0] <= cost <= ax.get_ylim()[1]):
            continue
        best: tuple[float, Any] | None = None
        for dx, dy in LABEL_OFFSETS:
            ann = ax.annotate(
                text,
                (miss, cost),
                xytext=(dx, dy),
                textcoords="offset points",
                ha="left" if dx > 0 else "right" if dx < 0 else "center",
                va="bottom" if dy > 0 else "top" if dy < 0 else "center",
                fontsize=8,
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8},
                arrowprops={"arrowstyle": "-", "lw": 0.6, "color": "0.35", "shrinkA": 0, "shrinkB": 4},
                zorder=4,
            )
            box = _text_box(ann, renderer).padded(LABEL_GAP)
            cost_of = sum(_overlap(box, t) for t in taken)
            cost_of += POINT_WEIGHT * (sum(_overlap(box, p) for p in points) + _outside(box, frame))
            if best is None or cost_of < best[0]:
                if best is not None:
                    best[1].remove()
                best = (cost_of, ann)
            else:
                ann.remove()
            if cost_of == 0:
                break
        if best is not None:
            taken.append(_text_box(best[1], renderer).padded(LABEL_GAP))


def _text_box(annotation: Any, renderer: Any) -> Any:
    """Where a label's text is drawn (its leader line left out)."""
    from matplotlib.text import Text

    annotation.update_positions(renderer)  # an annotation not drawn yet has not placed its text
    return Text.get_window_extent(annotation, renderer)


def _point_box(ax: Any, x: float, y: float, half: float = 6.0) -> Any:
    from matplotlib.transforms import Bbox

    px, py = ax.transData.transform((x, y))
    return Bbox([[px - half, py - half], [px + half, py + half]])


def _overlap(a: Any, b: Any) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0


def _outside(box: Any, frame: Any) -> float:
    return box.width * box.height - _overlap(box, frame)


def _scope(data: dict[str, Any]) -> str:
    from .wording import plural

    w = data["workloads"]
    return f"{plural(len(w['real']), 'transcript')}, window {data['settings']['window_fraction']:.0%}"


def token_choices(data: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(configurations, sessions) for tokens.png: no compaction, the default and the presets (else the
    first five that ran) on the longest real sessions (else any), so the few lines can be told apart."""
    groups = _by_workload(data)
    drawn = [n for n in table_order(data["totals"]) if any(n in arms for arms in groups.values())]
    wanted = [n for n in ("none", *CHOICES) if n in drawn]
    arms = wanted if len(wanted) >= 2 else drawn[:5]
    real = [w for w in data["workloads"]["real"] if w in groups] or sorted(groups)
    size = {w: max(len(s["index"]) for s in groups[w].values()) for w in real}
    sessions = sorted(real, key=lambda w: (-size[w], w))[:TOKEN_PANELS]
    return arms, sessions


def tokens_plot(data: dict[str, Any], path: Path) -> None:
    """True prompt tokens per request against the window limit for a few chosen configurations and
    sessions (every series is in report.json); compaction boundaries marked."""
    plt = _pyplot()
    groups, style = _by_workload(data), styles(data)
    arms, sessions = token_choices(data)
    cols = min(2, len(sessions))
    rows = math.ceil(len(sessions) / cols)
    fig, grid = plt.subplots(rows, cols, figsize=(7 * cols + 3, 4.2 * rows), squeeze=False, layout="constrained")
    for ax in [ax for row in grid for ax in row][len(sessions) :]:
        ax.set_visible(False)
    for ax, workload in zip([ax for row in grid for ax in row], sessions, strict=False):
        for arm in arms:
            s = groups[workload].get(arm)
            if s is None:
                continue
            st = style[arm]
            ax.plot(s["index"], s["true_tokens"], color=st["color"], linestyle=st["linestyle"], lw=1.4, label=arm)
            marks = [(i, t) for i, t, b in zip(s["index"], s["true_tokens"], s["boundary"], strict=True) if b]
            if marks:
                ax.scatter(*zip(*marks, strict=True), marker=st["marker"], s=26, color=st["color"], zorder=3)
        w = data["windows"][workload]
        ax.axhline(w["context_window"] - w["max_output_tokens"], color="black", linestyle=(0, (5, 3)), lw=1.2)
        ax.set_title(_wrap(workload, 70), fontsize=9)
        ax.set_xlabel("request")
        ax.set_ylabel("true prompt tokens")
        ax.grid(True, alpha=0.3)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], lw=1.4, markersize=6, label=_user_words(data, a), **style[a]) for a in arms if a in style]
    handles.append(Line2D([], [], color="black", linestyle=(0, (5, 3)), lw=1.2, label="window limit"))
    fig.legend(handles=handles, loc="outside right upper", fontsize=9)
    fig.suptitle(
        _wrap(
            f"true prompt tokens per request on the {len(sessions)} longest sessions (markers: compaction "
            "boundaries; dashes: the window limit); every configuration and session is in report.json",
            120,
        )
    )
    _save(plt, fig, path)


def retention_plot(data: dict[str, Any], path: Path) -> None:
    """Planted facts kept at the end, by place, per configuration: a table of shares (n/a where a
    configuration has no figure for a place, never drawn as 0)."""
    from .scenarios import PLACES

    plt = _pyplot()
    arms = [a for a in table_order(data["totals"]) if data["totals"][a]["available"]]
    places = [p for p in PLACES if any(p in data["totals"][a].get("facts_by_place", {}) for a in arms)]
    shares = [[(data["totals"][a]["facts_by_place"].get(p) or {}).get("share") for p in places] for a in arms]
    fig, ax = plt.subplots(figsize=(2.6 + 1.5 * len(places), 1.6 + 0.34 * len(arms)), layout="constrained")
    grid = [[math.nan if s is None else s * 100 for s in row] for row in shares]
    image = ax.imshow(grid, cmap="Greens", vmin=0, vmax=100, aspect="auto")  # n/a cells stay blank
    for i, row in enumerate(shares):
        for j, share in enumerate(row):
            text = "n/a" if share is None else f"{share:.0%}"
            dark = share is not None and share > 0.6
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
    ax.set_xticks(range(len(places)), [place_name(p) for p in places])
    ax.set_yticks(range(len(arms)), arms, fontsize=8)
    ax.xaxis.tick_top()
    fig.colorbar(image, ax=ax, label="planted facts kept at the last request (%)", shrink=0.6)
    ax.set_title(
        "planted facts kept at the last request, by where they were planted\n(retraction: a one-line "
        "message retracting an instruction; not the user's long corrections)",
        fontsize=9,
    )
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
