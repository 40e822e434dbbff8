"""How far the estimate and content counters stray from true o200k counts on the real transcripts.

True = `tiktoken_counter("o200k_base")`: exact o200k tokens of the same billable parts plus the same
per-message overhead. Per counter, prints session-level ratios (sum counter / sum true) and
message-level |ratio - 1|. Run from the repository root:
`uv run python -m evaluation.studies.counter_error [--workload PATH ...]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from evaluation import cli
from evaluation.tokens import ensure_tiktoken_cache_dir
from evaluation.wording import plural

ROOT = Path(__file__).resolve().parent.parent.parent
WORKLOADS = ROOT / "tests" / "data" / "workloads"
PROG = "python -m evaluation.studies.counter_error"


def load_sessions(paths: list[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every named transcript (default: the shipped ones), checked, keyed by file stem."""
    return cli.sessions(paths, WORKLOADS)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(counter: Any, sessions: dict[str, list[dict[str, Any]]], truth: dict[str, list[int]]) -> dict:
    """Session ratios, message |ratio-1| errors and elapsed seconds of one counter."""
    session_ratios, message_errors, elapsed = [], [], 0.0
    for stem, messages in sessions.items():
        start = time.perf_counter()
        counts = [counter(message) for message in messages]
        elapsed += time.perf_counter() - start
        session_ratios.append(sum(counts) / sum(truth[stem]))
        message_errors.extend(abs(c / t - 1) for c, t in zip(counts, truth[stem], strict=True))
    return {"sessions": session_ratios, "errors": message_errors, "seconds": elapsed}


def main(argv: list[str] | None = None) -> int:
    """Print the error table for the estimate and content counters."""
    p = cli.Parser(PROG, __doc__)
    cli.add_workload(p, "tests/data/workloads")
    return cli.guard(PROG, lambda: _run(p.parse_args(sys.argv[1:] if argv is None else argv)))


def _run(args: argparse.Namespace) -> int:
    sessions = load_sessions(args.workload)  # checked before the work
    ensure_tiktoken_cache_dir()  # offline machines: the repository's copy of o200k
    from amplifier_module_context_simple.token_counter import resolve_counter

    true_counter = resolve_counter("tiktoken:o200k_base")
    truth = {stem: [true_counter(m) for m in messages] for stem, messages in sessions.items()}
    n_messages = sum(len(messages) for messages in sessions.values())
    total_true = sum(sum(counts) for counts in truth.values())
    print(f"{plural(len(sessions), 'session')}, {plural(n_messages, 'message')}, {total_true:,} true o200k tokens")
    print(f"ratio = counter / {true_counter.name} (billable parts + per-message overhead)\n")
    header = f"{'counter':<10} {'sess min':>9} {'sess med':>9} {'sess max':>9} {'msg mean|r-1|':>14}"
    print(f"{header} {'msg p90|r-1|':>13} {'seconds':>8}")
    for name in ("estimate", "content"):
        row = measure(resolve_counter(name), sessions, truth)
        ratios, errors = row["sessions"], row["errors"]
        print(
            f"{name:<10} {min(ratios):>9.3f} {statistics.median(ratios):>9.3f} {max(ratios):>9.3f} "
            f"{statistics.fmean(errors):>14.3f} {percentile(errors, 0.9):>13.3f} {row['seconds']:>8.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
