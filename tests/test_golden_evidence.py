"""Golden hashes of the evidence presets' views: an opt-in ledger feature that is off (the append-only
segments, `evidence_ledger_segments`) changes no byte of any preset view. Regenerate deliberately with
`GOLDEN_REGEN=1 uv run pytest tests/test_golden_evidence.py` after a change to the presets you mean."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import WORKLOADS
from tests.regen_golden import views_hash

PATH = Path(__file__).resolve().parent / "data" / "golden_evidence_views.json"
PRESETS = ("evidence", "evidence_balanced")
FRACTION = 0.30
CASES = [(path, preset) for path in WORKLOADS for preset in PRESETS]
REGEN = os.environ.get("GOLDEN_REGEN") == "1"


def key(path: Path, preset: str) -> str:
    return f"{path.stem}@{preset}"


@pytest.mark.asyncio
@pytest.mark.skipif(not REGEN, reason="set GOLDEN_REGEN=1 to rewrite the golden hashes deliberately")
async def test_regenerate_evidence_golden_hashes():
    hashes = {key(path, preset): await views_hash(path, FRACTION, preset=preset) for path, preset in CASES}
    PATH.write_text(json.dumps({"fraction": FRACTION, "hashes": hashes}, indent=1, sort_keys=True) + "\n")


@pytest.mark.asyncio
@pytest.mark.skipif(REGEN, reason="regenerating")
@pytest.mark.parametrize(("path", "preset"), CASES, ids=[key(p, s) for p, s in CASES])
async def test_preset_views_match_the_golden_hash(path, preset):
    expected = json.loads(PATH.read_text())["hashes"][key(path, preset)]
    assert await views_hash(path, FRACTION, preset=preset) == expected
