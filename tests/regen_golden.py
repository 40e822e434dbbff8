"""Golden hashes of every default-config view over the shipped transcripts.

    uv run python -m tests.regen_golden           # which hashes would change; exit 1 if any
    uv run python -m tests.regen_golden --write   # rewrite tests/data/golden_views.json

Rewrite deliberately, after a change to default behaviour that you mean to make (or:
GOLDEN_REGEN=1 uv run pytest tests/test_golden.py).

Each entry is the sha256 of the canonical JSON of every view of one replay (one line per request),
so any byte that changes in any view of any request changes a hash.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sys
from pathlib import Path
from typing import Any

from amplifier_module_context_simple import SimpleContextManager
from evaluation.cli import Parser, guard
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


def main(argv: list[str] | None = None) -> int:
    """Compare the golden hashes with today's views; rewrite them only with ``--write``."""
    parser = Parser(
        "python -m tests.regen_golden",
        __doc__,
        epilog="Without --write nothing is written: the changed keys are listed and the exit status is 1.",
    )
    parser.add_argument("--write", action="store_true", help=f"rewrite {GOLDEN_PATH.name} with today's hashes")
    return guard(parser.prog, lambda: compare(parser.parse_args(sys.argv[1:] if argv is None else argv).write))


def compare(write: bool) -> int:
    module_logger = logging.getLogger("amplifier_module_context_simple")
    level = module_logger.level
    module_logger.setLevel(logging.ERROR)  # the replays' tight budgets warn by design
    try:
        hashes = asyncio.run(compute_golden())
    finally:
        module_logger.setLevel(level)
    old = load_golden() if GOLDEN_PATH.exists() else {}
    changed = sorted(key for key in hashes.keys() | old.keys() if old.get(key) != hashes.get(key))
    for key in changed:
        print(f"  changed: {key}")
    if write:
        write_golden(hashes)
        print(f"wrote {len(hashes)} hashes to {GOLDEN_PATH}; {len(changed)} changed")
        return 0
    if changed:
        print(f"{len(changed)} of {len(hashes)} golden hashes differ; run with --write to rewrite {GOLDEN_PATH.name}")
        return 1
    print(f"all {len(hashes)} golden hashes match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
