"""Every plot readable at a glance (issue 31, point 10): a colour per configuration, names that do not
overlap, a few chosen lines on a few sessions, and one word per measure."""

from __future__ import annotations

import itertools

import pytest
from matplotlib.text import Text

from evaluation import plots, report_text
from evaluation.arms import ARMS
from tests.test_evaluation_advice import MEASURED, measured


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list:
    """The figures the plots would save, kept open for inspection."""
    kept: list = []
    monkeypatch.setattr(plots, "_save", lambda plt, fig, path: kept.append(fig))
    yield kept
    import matplotlib.pyplot as plt

    for fig in kept:
        plt.close(fig)


def with_series(data: dict, sessions: int = 8) -> dict:
    """Per-request series for every configuration on `sessions` sessions of different lengths."""
    data = {**data, "series": {}, "windows": {}}
    data["workloads"] = {"real": [f"session-{i}" for i in range(sessions)], "scenarios": []}
    for i, workload in enumerate(data["workloads"]["real"]):
        data["windows"][workload] = {"context_window": 9000, "max_output_tokens": 1000}
        for j, name in enumerate(data["totals"]):
            n = 10 + 5 * i
            tokens = [1000 + 300 * k - (2000 if k > n // 2 and j else 0) for k in range(n)]
            data["series"][f"{name}|{workload}"] = {
                "index": list(range(1, n + 1)),
                "true_tokens": tokens,
                "boundary": [k == n // 2 + 1 and j > 0 for k in range(n)],
                "cost": [1.0] * n,
            }
    return data


def test_every_configuration_has_its_own_colour_and_keeps_it_in_a_smaller_run():
    every = {a.name: MEASURED["progressive"] for a in ARMS} | {"none": MEASURED["none"]}
    styles = plots.styles(measured(every))
    colours = [s["color"] for s in styles.values()]
    assert len(colours) == len(ARMS) and len(set(colours)) == len(colours)
    assert len({(s["color"], s["marker"]) for s in styles.values()}) == len(ARMS)
    few = plots.styles(measured({k: MEASURED[k] for k in ("none", "progressive", "ev_ledger")}))
    assert few["ev_ledger"] == styles["ev_ledger"] and few["progressive"]["color"] == "#000000"


def test_no_two_configurations_look_alike():
    """Issue 40: two series looked the same (gold and light orange; brown and maroon). Every two
    configurations of the table, peers included, and the grey of the best trade-offs, differ clearly."""
    every = {a.name: MEASURED["progressive"] for a in ARMS} | {"none": MEASURED["none"]}
    colours = {name: s["color"] for name, s in plots.styles(measured(every)).items()} | {"steps": "#b0b0b0"}
    close = [
        (a, b, round(plots.colour_distance(colours[a], colours[b]), 1))
        for a, b in itertools.combinations(colours, 2)
        if plots.colour_distance(colours[a], colours[b]) < 15
    ]
    assert close == []
    assert plots.colour_distance("#e7ba52", "#fdbf6f") < 15  # the pair that looked alike is caught


def test_the_frontier_names_the_peers_and_draws_no_compaction_as_a_line(figures, tmp_path):
    from evaluation.arms import PEERS

    figures_in = {n: MEASURED["progressive"] for n in PEERS} | MEASURED
    data = measured(figures_in)
    for n in PEERS:  # the peers bill more than no compaction and send requests over the window
        data["totals"][n].update({"vs_none": 2.5, "over_window": 40, "valid": False})
    data["totals"]["none"]["evidence_line_miss"] = None  # never compacts: not measured
    plots.frontier_plot(data, tmp_path / "frontier.png")
    fig = figures[0]
    whole = fig.axes[0]
    said = [t for t in whole.texts if t.get_text()]
    assert {t.get_text() for t in said} == {plots.peer_label(data, n) for n in PEERS}
    renderer = fig.canvas.get_renderer()
    boxes = [Text.get_window_extent(t, renderer) for t in said]
    assert not any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))
    legend = {t.get_text() for t in fig.legends[0].get_texts()}
    assert set(PEERS) <= legend and "none (miss n/a)" in legend and "none" not in legend


def test_the_frontier_names_the_choices_as_configured_without_overlaps(figures, tmp_path):
    data = measured()
    plots.frontier_plot(data, tmp_path / "frontier.png")
    fig = figures[0]
    legend = {t.get_text() for t in fig.legends[0].get_texts()}
    assert set(MEASURED) <= legend  # every configuration in the legend
    zoom = fig.axes[1]
    names = [t for t in zoom.texts if t.get_text()]
    said = {t.get_text() for t in names}
    assert {"the default (no keys)", "preset: evidence", "preset: evidence_lean"} <= said
    assert "preset: evidence, evidence_ledger_segments: true" in said
    renderer = fig.canvas.get_renderer()
    boxes = [Text.get_window_extent(t, renderer) for t in names]  # the text, not its leader line
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b), "two names overlap"
    frame = zoom.get_window_extent(renderer)
    assert all(frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1 for b in boxes)


def test_tokens_shows_no_compaction_the_default_and_the_presets_on_a_few_sessions(figures, tmp_path):
    data = with_series(measured())
    plots.tokens_plot(data, tmp_path / "tokens.png")
    fig = figures[0]
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == plots.TOKEN_PANELS  # the longest sessions, not all eight
    assert {ax.get_title() for ax in panels} == {f"session-{i}" for i in range(4, 8)}
    for ax in panels:
        series = [line for line in ax.get_lines() if len(line.get_xdata()) > 2]
        assert len(series) == 5  # none, the default and the three presets
        assert len({line.get_color() for line in series}) == 5
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == [
        "no compaction (the reference)",
        "the default (no keys)",
        "preset: evidence",
        "preset: evidence_balanced",
        "preset: evidence_lean",
        "window limit",
    ]


def test_the_retraction_place_and_the_corrections_kept_have_different_names(figures, tmp_path):
    data = measured()
    for name, t in data["totals"].items():
        share = 1.0 if name != "target_0.3" else 0.0
        t["facts_by_place"] = {
            "user": {"kept": 1, "total": 2, "share": 0.5},
            "correction": {"kept": int(share * 4), "total": 4, "share": share},
        }
    plots.retention_plot(data, tmp_path / "retention.png")
    ticks = [t.get_text() for t in figures[0].axes[0].get_xticklabels()]
    assert ticks == ["user turn", "retraction"]
    table = "\n".join(report_text.places(data))
    assert "| configuration | user turn | retraction | all |" in table and "correction |" not in table
    assert "corrections kept" in table  # named once, to tell the two apart
