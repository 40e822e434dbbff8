"""The byte-identity check: default == every opt-in off, the negative control differs, and it is stable."""

import pytest

from evaluation.identity import OPT_IN_OFF, compute, main
from evaluation.tokens import TokenCounter


def test_default_views_equal_opt_in_off_and_differ_from_the_negative_control():
    result = compute(TokenCounter(use_tiktoken=False))
    assert result["default_equals_opt_in_off"], result["hashes"]
    assert result["negative_control_differs"], result["hashes"]
    assert set(result["opt_in_off_config"]) <= set(OPT_IN_OFF)


@pytest.mark.slow
def test_hashes_are_deterministic_and_can_be_pinned(tmp_path, capsys):
    pinned = tmp_path / "identity.json"
    assert main(["--save", str(pinned)]) == 0
    assert main(["--check", str(pinned)]) == 0
    assert "matches" in capsys.readouterr().out
