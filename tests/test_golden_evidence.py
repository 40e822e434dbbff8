"""Golden hashes of the evidence presets' views: an opt-in ledger feature that is off (the append-only
segments, `evidence_ledger_segments`) changes no byte of any preset view. Regenerate deliberately with
`uv run python -m tests.regen_golden --evidence --write` (or `GOLDEN_REGEN=1 uv run pytest
tests/test_golden_evidence.py`) after a change to the presets' views you mean."""

from __future__ import annotations

import os

import pytest

from tests.conftest import WORKLOADS, by_transcript
from tests.regen_golden import (
    EVIDENCE_FRACTION,
    EVIDENCE_PRESETS,
    compute_evidence_golden,
    evidence_key,
    load_evidence_golden,
    views_hash,
    write_evidence_golden,
)

CASES = [(path, preset) for path in WORKLOADS for preset in EVIDENCE_PRESETS]
REGEN = os.environ.get("GOLDEN_REGEN") == "1"


@pytest.mark.asyncio
@pytest.mark.skipif(not REGEN, reason="set GOLDEN_REGEN=1 to rewrite the golden hashes deliberately")
async def test_regenerate_evidence_golden_hashes():
    write_evidence_golden(await compute_evidence_golden())


@pytest.mark.asyncio
@pytest.mark.skipif(REGEN, reason="regenerating")
@pytest.mark.parametrize(
    ("path", "preset"), by_transcript(CASES, lambda c: c[0]), ids=[evidence_key(p, s) for p, s in CASES]
)
async def test_preset_views_match_the_golden_hash(path, preset):
    expected = load_evidence_golden()[evidence_key(path, preset)]
    assert await views_hash(path, EVIDENCE_FRACTION, preset=preset) == expected, (
        "a preset view changed; if deliberate, run `uv run python -m tests.regen_golden --evidence --write` and commit"
    )
