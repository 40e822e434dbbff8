"""Golden hashes of every default-config view over the shipped transcripts (and, with --evidence, of
the evidence presets' views).

    uv run python -m tests.regen_golden                      # which hashes would change; exit 1 if any
    uv run python -m tests.regen_golden --write              # rewrite tests/data/golden_views.json only
    uv run python -m tests.regen_golden --evidence [--write] # the same for golden_evidence_views.json only

Rewrite deliberately, after a change to default behaviour (or to the presets' views) that you mean to
make (or: GOLDEN_REGEN=1 uv run pytest tests/test_golden.py, or tests/test_golden_evidence.py).

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
EVIDENCE_PATH = GOLDEN_PATH.with_name("golden_evidence_views.json")
EVIDENCE_PRESETS = ("evidence", "evidence_balanced")
EVIDENCE_FRACTION = 0.30
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


def evidence_key(path: Path, preset: str) -> str:
    return f"{path.stem}@{preset}"


async def compute_evidence_golden() -> dict[str, str]:
    """Every (transcript, preset) hash at ``EVIDENCE_FRACTION``."""
    return {
        evidence_key(path, preset): await views_hash(path, EVIDENCE_FRACTION, preset=preset)
        for path in WORKLOADS
        for preset in EVIDENCE_PRESETS
    }


def write_evidence_golden(hashes: dict[str, str]) -> None:
    document = {"fraction": EVIDENCE_FRACTION, "hashes": hashes}
    EVIDENCE_PATH.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def load_evidence_golden() -> dict[str, str]:
    return json.loads(EVIDENCE_PATH.read_text(encoding="utf-8"))["hashes"]


def main(argv: list[str] | None = None) -> int:
    """Compare the golden hashes with today's views; rewrite them only with ``--write``."""
    parser = Parser(
        "python -m tests.regen_golden",
        __doc__,
        epilog="Without --write nothing is written: the changed keys are listed and the exit status is 1.",
    )
    parser.add_argument("--write", action="store_true", help="rewrite the golden file with today's hashes")
    parser.add_argument(
        "--evidence",
        action="store_true",
        help=f"the evidence presets' views ({EVIDENCE_PATH.name}) instead of the default's ({GOLDEN_PATH.name})",
    )
    return guard(parser.prog, lambda: compare(**vars(parser.parse_args(sys.argv[1:] if argv is None else argv))))


def compare(write: bool, evidence: bool = False) -> int:
    """List the keys whose hash changed; rewrite the one golden file chosen only with ``write``."""
    compute, load, store, path = (
        (compute_evidence_golden, load_evidence_golden, write_evidence_golden, EVIDENCE_PATH)
        if evidence
        else (compute_golden, load_golden, write_golden, GOLDEN_PATH)
    )
    module_logger = logging.getLogger("amplifier_module_context_simple")
    level = module_logger.level
    module_logger.setLevel(logging.ERROR)  # the replays' tight budgets warn by design
    try:
        hashes = asyncio.run(compute())
    finally:
        module_logger.setLevel(level)
    old = load() if path.exists() else {}
    changed = sorted(key for key in hashes.keys() | old.keys() if old.get(key) != hashes.get(key))
    for key in changed:
        print(f"  changed: {key}")
    if write:
        store(hashes)
        print(f"wrote {len(hashes)} hashes to {path}; {len(changed)} changed")
        return 0
    if changed:
        print(f"{len(changed)} of {len(hashes)} golden hashes differ; run with --write to rewrite {path.name}")
        return 1
    print(f"all {len(hashes)} golden hashes match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
