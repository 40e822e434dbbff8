"""Golden hashes: any change to a default-config view over the shipped transcripts must be deliberate.

To accept a change on purpose: ``uv run python -m tests.regen_golden --write`` (or ``GOLDEN_REGEN=1 uv run
pytest tests/test_golden.py``), then commit ``tests/data/golden_views.json`` with the change.
"""

from __future__ import annotations

import os

import pytest

from tests.conftest import WORKLOADS, by_transcript
from tests.regen_golden import (
    GOLDEN_FRACTIONS,
    GOLDEN_PATH,
    compute_golden,
    golden_key,
    load_golden,
    views_hash,
    write_golden,
)

REGEN = os.environ.get("GOLDEN_REGEN") == "1"
CONTROL = next(p for p in WORKLOADS if "django-11910" in p.stem)  # its 30% views carry truncated results
CASES = [(path, fraction) for path in WORKLOADS for fraction in GOLDEN_FRACTIONS]


@pytest.mark.asyncio
@pytest.mark.skipif(not REGEN, reason="set GOLDEN_REGEN=1 to rewrite the golden hashes deliberately")
async def test_regenerate_golden_hashes():
    write_golden(await compute_golden())


@pytest.mark.skipif(REGEN, reason="regenerating")
def test_golden_file_covers_exactly_the_shipped_transcripts():
    assert set(load_golden()) == {golden_key(path, fraction) for path, fraction in CASES}
    assert GOLDEN_PATH.stat().st_size < 20_000


@pytest.mark.asyncio
@pytest.mark.skipif(REGEN, reason="regenerating")
@pytest.mark.parametrize(
    ("path", "fraction"), by_transcript(CASES, lambda c: c[0]), ids=[golden_key(p, f) for p, f in CASES]
)
async def test_default_views_match_the_golden_hash(path, fraction):
    expected = load_golden()[golden_key(path, fraction)]
    assert await views_hash(path, fraction) == expected, (
        "a default-config view changed; if deliberate, run `uv run python -m tests.regen_golden --write` and commit"
    )


@pytest.mark.asyncio
async def test_negative_control_a_one_unit_config_change_changes_the_hash():
    default = await views_hash(CONTROL, 0.30)
    assert await views_hash(CONTROL, 0.30, truncate_chars=250) == default  # naming the default changes nothing
    assert await views_hash(CONTROL, 0.30, truncate_chars=249) != default
