"""Golden hashes of every default-config view over the shipped transcripts.

Regenerate deliberately, after a change to default behaviour that you mean to make:

    uv run python -m tests.regen_golden        (or: GOLDEN_REGEN=1 uv run pytest tests/test_golden.py)

Each entry is the sha256 of the canonical JSON of every view of one replay (one line per request),
so any byte that changes in any view of any request changes a hash.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

from amplifier_module_context_simple import SimpleContextManager
from tests.conftest import WORKLOADS, Request, canonical_json, estimated_size, load_transcript, replay

GOLDEN_PATH = Path(__file__).resolve().parent / "data" / "golden_views.json"
GOLDEN_FRACTIONS = (0.30, 0.60)
FORMAT = "sha256 over canonical JSON (sort_keys, ensure_ascii=False, compact separators) of each view, newline-ended"


def golden_key(path: Path, fraction: float) -> str:
    return f"{path.stem}@{int(fraction * 100)}pct"


async def views_hash(path: Path, fraction: float, **options: Any) -> str:
    """The hash of every view of one replay of ``path`` at ``fraction`` of its estimated size."""
    messages = load_transcript(path)
    digest = hashlib.sha256()

    def record(request: Request, ctx: SimpleContextManager) -> None:
        digest.update(canonical_json(request.view).encode("utf-8"))
        digest.update(b"\n")

    budget = int(estimated_size(messages) * fraction)
    await replay(SimpleContextManager(**options), messages, budget, on_request=record)
    return digest.hexdigest()


async def compute_golden() -> dict[str, str]:
    """Every (transcript, budget) hash under the default configuration."""
    return {
        golden_key(path, fraction): await views_hash(path, fraction)
        for path in WORKLOADS
        for fraction in GOLDEN_FRACTIONS
    }


def write_golden(hashes: dict[str, str]) -> None:
    document = {"format": FORMAT, "fractions": list(GOLDEN_FRACTIONS), "hashes": hashes}
    GOLDEN_PATH.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def load_golden() -> dict[str, str]:
    return json.loads(GOLDEN_PATH.read_text(encoding="utf-8"))["hashes"]


def main() -> None:
    hashes = asyncio.run(compute_golden())
    old = load_golden() if GOLDEN_PATH.exists() else {}
    changed = sorted(key for key in hashes if old.get(key) != hashes[key])
    write_golden(hashes)
    print(f"wrote {len(hashes)} hashes to {GOLDEN_PATH}; {len(changed)} changed")
    for key in changed:
        print(f"  changed: {key}")


if __name__ == "__main__":
    main()
