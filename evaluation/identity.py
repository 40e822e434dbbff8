"""Byte-identity check: `python -m evaluation identity`.

Every request view over scripted scenarios is serialized as canonical JSON (with frozen timestamps)
and hashed, for the default configuration and for every opt-in feature explicitly switched off. The
two must hash alike; a negative control (a changed default) must not. `--save`/`--check` pin the
hashes in a file so a later change can prove it left the default views byte-identical.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from . import cli
from .arms import Arm, ignored_keys
from .driver import Run, Settings, replay
from .scenarios import planted_facts
from .tokens import TokenCounter
from .workloads import Workload

OPT_IN_OFF = {
    "token_meter": "estimate",
    "compaction_strategy": "progressive",
    "compact_clear_at_least": None,
    "tool_result_budget_tokens": None,
    "tool_result_shape": "head",
    "tool_result_budget_by_tool": {},
    "tool_result_exempt_tools": [],
    "tool_result_spill_dir": None,
    "replay_last_user_on_compaction": False,
    "token_counter": "estimate",
}
PROG = "python -m evaluation identity"
NEGATIVE_CONTROL = {"compaction_notice_verbosity": "minimal"}


def scenarios() -> list[Workload]:
    """Scripted sessions that make the default configuration compact, truncate and remove."""
    return [
        planted_facts(seed=1),
        planted_facts(seed=2, tool_results=10, tool_chars=6000),
        planted_facts(seed=3, tool_results=20, tool_chars=2500),
    ]


def off_config(engine: str = "context-simple") -> tuple[dict, list[str]]:
    """OPT_IN_OFF minus the keys the installed engine does not read; also returns those keys."""
    skipped = ignored_keys(Arm("off", dict(OPT_IN_OFF), engine=engine))
    return {k: v for k, v in OPT_IN_OFF.items() if k not in skipped}, skipped


def _hash(arm: Arm, counter: TokenCounter) -> dict[str, str]:
    runs: list[Run] = [replay(arm, w, Settings(), counter) for w in scenarios()]
    return {r.workload: (r.view_digest if r.available else f"unavailable: {r.reason}") for r in runs}


def compute(counter: TokenCounter | None = None) -> dict:
    """Hashes per configuration and scenario, and the verdicts."""
    counter = counter or TokenCounter()
    off, skipped = off_config()
    hashes = {
        "default": _hash(Arm("default", {}), counter),
        "opt_in_off": _hash(Arm("opt_in_off", off), counter),
        "negative_control": _hash(Arm("negative_control", dict(NEGATIVE_CONTROL)), counter),
    }
    d, o, n = hashes["default"], hashes["opt_in_off"], hashes["negative_control"]
    return {
        "hashes": hashes,
        "opt_in_off_config": off,
        "keys_not_read_by_module": skipped,
        "default_equals_opt_in_off": d == o,
        "negative_control_differs": all(d[k] != n[k] for k in d),
    }


def main(argv: list[str]) -> int:
    """CLI: print the hashes and verdicts; --save/--check a pinned hash file. Exit 1 on failure, 2 on bad input."""
    p = cli.Parser(PROG, __doc__)
    p.add_argument("--save", type=Path, metavar="FILE", help="write the default hashes to this JSON file")
    p.add_argument("--check", type=Path, metavar="FILE", help="compare the default hashes with this JSON file")
    return cli.guard(PROG, lambda: _run(p.parse_args(argv)))


def _run(args: argparse.Namespace) -> int:
    pinned = read_pinned(args.check) if args.check else None  # checked before the work
    if args.save:
        cli.check_new_file("--save", args.save)
    result = compute()
    for config, per in result["hashes"].items():
        for scenario, h in per.items():
            print(f"{config:17} {scenario:28} {h}")
    ok = result["default_equals_opt_in_off"] and result["negative_control_differs"]
    print(f"default == every opt-in off: {result['default_equals_opt_in_off']}")
    print(f"negative control differs:    {result['negative_control_differs']}")
    if result["keys_not_read_by_module"]:
        print(f"(keys the module does not read, left out: {', '.join(result['keys_not_read_by_module'])})")
    current = result["hashes"]["default"]
    if args.save:
        args.save.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
        print(f"saved {len(current)} default-view hashes to {args.save}")
    if pinned is not None:
        diffs = differences(pinned, current)
        print(f"matches {args.check}: {not diffs}")
        for line in diffs:
            print(f"  {line}")
        ok = ok and not diffs
    return 0 if ok else 1


def read_pinned(path: Path) -> dict[str, str]:
    """A hash file written by --save: {scenario: hash}; a missing or malformed one is a UsageError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise cli.UsageError(f"--check {path}: no such file (write one with --save)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise cli.UsageError(f"--check {path}: cannot be read ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise cli.UsageError(f"--check {path}:{exc.lineno}: not JSON: {exc.msg}") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise cli.UsageError(f"--check {path}: expected an object of scenario name -> hash, as --save writes")
    return data


def differences(pinned: dict[str, str], current: dict[str, str]) -> list[str]:
    """One line per scenario whose hash differs, is missing now, or is new."""
    out = []
    for name in sorted(set(pinned) | set(current)):
        old, new = pinned.get(name), current.get(name)
        if old is None:
            out.append(f"scenario {name}: not in the pinned file (now {new})")
        elif new is None:
            out.append(f"scenario {name}: pinned but no longer computed")
        elif old != new:
            out.append(f"scenario {name} differs: pinned {old}, now {new}")
    return out
