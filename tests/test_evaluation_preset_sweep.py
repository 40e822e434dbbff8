"""The preset sweep: its configurations, its verdict on target 1, and its one-line errors."""

import pytest

from evaluation.studies import preset_sweep


def totals(cost: float, miss: float, available: bool = True) -> dict:
    return {
        "available": available,
        "reason": "" if available else "rejected at mount: bad key",
        "cost": cost,
        "evidence_line_miss": miss if available else None,
        "evidence_token_miss": miss,
        "facts_final": 0.5,
        "over_window": 0,
        "invalid_views": 0,
        "boundaries": 3,
        "ms_p50": 0.1,
    }


BASE = totals(100.0, 0.2)


def test_target_1_needs_both_the_cost_and_the_miss() -> None:
    assert preset_sweep.line("both", totals(70.0, 0.1), BASE).endswith("| yes |")
    assert preset_sweep.line("too dear", totals(71.0, 0.1), BASE).endswith("| no |")
    assert preset_sweep.line("forgets", totals(60.0, 0.11), BASE).endswith("| no |")


def test_an_arm_the_module_rejects_is_named_not_measured() -> None:
    assert "not available: rejected at mount" in preset_sweep.line("bad", totals(0, 0, available=False), BASE)


def test_configurations_are_the_default_then_the_grid_then_the_given_ones() -> None:
    args = preset_sweep.parse(["--grid", "frontier", "--config", 'x={"target_usage": 0.2}'])
    arms = preset_sweep.configurations(args)
    assert arms[0].name == "progressive" and arms[-1].name == "x" and arms[-1].config == {"target_usage": 0.2}
    assert {"preset": "evidence_balanced"} in [a.config for a in arms]
    assert len({a.name for a in arms}) == len(arms)


@pytest.mark.parametrize("text", ["nojson", 'x={"a": '])
def test_a_bad_config_is_one_line_and_exit_2(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert preset_sweep.main(["--config", text]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("python -m evaluation.studies.preset_sweep: error: --config") and "\n" not in err
