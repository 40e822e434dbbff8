"""The README's pre-registered gate for compact_clear_at_least, on real transcripts.

`uv run python -m evaluation.studies.clear_at_least_gate [--window-fraction 0.45] [--floors off 10000 20000 40000]`

Each session is replayed (a view before every assistant message) through context-simple mounted on
a mock coordinator, with the simulated provider billing every view against a prefix cache and
emitting `llm:response` (so `token_meter: hybrid` has real usage to anchor on). The explicit
`token_budget` is a fraction of the session's size by the module's own estimator, and the floors
are in those estimated tokens. Per run: compaction boundaries (`context:compaction` events),
refusals (`context:compaction-skipped`), provider-observed prefix breaks, billed input cost and
re-billed waste ("-" for a run cut short by the cap), peak view size / budget, and whether the
skip cap was reached (the RuntimeError is caught, the session stops there and the run is marked
FAIL@request). Gate: boundaries fall monotonically across the floors (a flat response falsifies
the mechanism) and the cap is never reached.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import cli
from ..driver import frozen
from ..provider import SimProvider
from ..tokens import TokenCounter, wire_key
from ..wording import plural
from ..workloads import Workload

REPO = Path(__file__).resolve().parent.parent.parent
DEFAULT_DIR = REPO / "tests" / "data" / "workloads"
PROG = "python -m evaluation.studies.clear_at_least_gate"
DEFAULT_FLOORS = ["off", "10000", "20000", "40000"]
MIN_SESSION_TOKENS = 70_000  # "the larger msa__ sessions": floors of 10k-40k must matter
NOTICE_RESERVE = 800
MAX_OUTPUT = 1024


@dataclass
class Result:
    """One (session, meter, floor) replay."""

    boundaries: int = 0
    skips: int = 0
    breaks: int = 0
    cost: float = 0.0
    waste: int = 0
    requests: int = 0
    failed_at: int | None = None
    peak_usage: float = 0.0
    freed: list[int] = field(default_factory=list)  # at accepted boundaries, measured from the views
    error: str = ""


def session_size(workload: Workload) -> int:
    """The session's size by the module's estimator (len(str(message)) // 4, stamped messages)."""
    return sum(len(str(frozen(m, i))) // 4 for i, m in enumerate(workload.messages))


def pin_system(workload: Workload, tokens: int) -> Workload:
    """The session with ~`tokens` more estimated tokens of system prompt (a production-sized pinned head)."""
    if tokens <= 0 or not workload.messages or workload.messages[0]["role"] != "system":
        return workload
    words = " ".join(f"rule-{i}: keep the tool contract stable." for i in range(tokens * 4 // 40))
    head = {**workload.messages[0], "content": f"{workload.messages[0]['content']}\n{words}"}
    return Workload(workload.name, [head, *workload.messages[1:]], source=workload.source)


def floor_value(text: str) -> Any:
    return None if text == "off" else float(text) if "." in text else int(text)


def floor_arg(text: str) -> str:
    """A --floors value: 'off', a token count >= 0 or a fraction in (0, 1)."""
    try:
        value = floor_value(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not 'off', a token count or a fraction") from None
    if value is not None and (value < 0 or (isinstance(value, float) and not 0 < value < 1)):
        raise argparse.ArgumentTypeError(f"{text} is out of range: tokens >= 0 or a fraction in (0, 1)")
    return text


async def replay(
    workload: Workload, budget: int, meter: str, floor: Any, counter: TokenCounter, extra: dict[str, Any]
) -> Result:
    """One replay; the budget is the explicit `token_budget` (the module subtracts the notice reserve)."""
    from amplifier_core.testing import MockCoordinator

    from amplifier_module_context_simple import mount

    coordinator = MockCoordinator()
    events: list[str] = []

    async def record(event: str, data: Any) -> None:
        events.append(event)

    for name in ("context:compaction", "context:compaction-skipped"):
        coordinator.hooks.register(name, record, name=f"gate-{name}")
    config = {**extra, "token_meter": meter, "compact_clear_at_least": floor}
    await mount(coordinator, config)
    ctx = coordinator.get("context")
    provider = SimProvider(counter, budget + 4096 + MAX_OUTPUT, MAX_OUTPUT, coordinator.hooks)
    out = Result()
    await _drive(ctx, provider, workload, budget, out, events)
    out.boundaries = events.count("context:compaction")
    out.skips = events.count("context:compaction-skipped")
    return out


async def _drive(ctx: Any, provider: SimProvider, workload: Workload, budget: int, out: Result, events: list) -> None:
    count = ctx._counts().total
    prev_keys: list | None = None
    prev_solid = 0
    seen = 0
    for i, message in enumerate(workload.messages):
        if message["role"] == "assistant":
            out.requests += 1
            boundaries_before = events.count("context:compaction")
            try:
                view = list(await ctx.get_messages_for_request(token_budget=budget))
            except RuntimeError as exc:
                out.failed_at, out.error = out.requests, str(exc)
                return
            solid = [m for m in view if not (m.get("metadata") or {}).get("ephemeral")]
            tokens = count(solid)
            if events.count("context:compaction") > boundaries_before and seen:
                baseline = prev_solid + count(_wire(ctx.messages[seen:]))
                out.freed.append(baseline - tokens)
            prev_solid, seen = tokens, len(ctx.messages)
            out.peak_usage = max(out.peak_usage, tokens / (budget - NOTICE_RESERVE))
            bill = await provider.respond(view, message)
            keys = [wire_key(m) for m in view]
            out.breaks += prev_keys is not None and keys[: len(prev_keys)] != prev_keys
            prev_keys = keys[: bill.cacheable]
            out.cost += bill.outcome.cost(provider.prices)
            out.waste += bill.outcome.waste
        await ctx.add_message(frozen(message, i))


def _wire(stored: list[dict]) -> list[dict]:
    return [{**m, "metadata": {k: v for k, v in m["metadata"].items() if k != "_seq"}} for m in stored]


def monotone(counts: list[int]) -> str:
    """'falls' (non-increasing, at least one drop), 'flat', or 'RISES'."""
    if any(b > a for a, b in zip(counts, counts[1:], strict=False)):
        return "RISES"
    return "falls" if counts[-1] < counts[0] else "flat"


def short(name: str) -> str:
    """A session name without the common prefix (msa__prNNN__deepseek_)."""
    return name.split("__deepseek_", 1)[-1][:44]


def cell(r: Result) -> str:
    mark = f" FAIL@{r.failed_at}" if r.failed_at else ""
    return f"{r.boundaries:>3}b {r.skips:>2}s{mark}"


def report(rows: list[tuple[str, int, int, str, dict[str, Result]]], floors: list[str]) -> bool:
    """Print the table and per-row verdicts; True when every row passes the gate."""
    per = " ".join(f"{f:>16}" for f in floors)
    print(
        f"{'session':44} {'size':>7} {'budget':>7} {'meter':8} {per}   shape  prefix-breaks  cost (k)"
        "           waste (k)    peak usage"
    )
    ok = True
    for name, size, budget, meter, results in rows:
        rs = [results[f] for f in floors]
        complete = [r.boundaries for r in rs if r.failed_at is None]
        shape = monotone(complete) if len(complete) > 1 else "n/a"
        ok = ok and shape == "falls" and not any(r.failed_at for r in rs)
        cost = "/".join("-" if r.failed_at else f"{r.cost / 1000:.0f}" for r in rs)
        waste = "/".join("-" if r.failed_at else f"{r.waste / 1000:.0f}" for r in rs)
        print(
            f"{short(name):44} {size:>7,} {budget:>7,} {meter:8} "
            + " ".join(f"{cell(r):>16}" for r in rs)
            + f"   {shape:6} {'/'.join(str(r.breaks) for r in rs):14} {cost:18} {waste:12} "
            + "/".join(f"{r.peak_usage:.2f}" for r in rs)
        )
    freed = [f for *_, res in rows for f in res[floors[0]].freed]
    if freed and floors[0] == "off":
        q = statistics.quantiles(freed, n=10) if len(freed) > 1 else freed * 9
        print(
            f"freed at accepted boundaries with the floor off: n={len(freed)}, min {min(freed):,}, "
            f"p10 {q[0]:,.0f}, median {statistics.median(freed):,.0f}, max {max(freed):,}"
        )
    return ok


def parse(argv: list[str]) -> argparse.Namespace:
    p = cli.Parser(PROG, __doc__)
    cli.add_workload(p, "tests/data/workloads")
    p.add_argument(
        "--min-tokens", type=cli.non_negative_int, default=MIN_SESSION_TOKENS, metavar="N", help="skip smaller sessions"
    )
    p.add_argument("--prefix", default="msa__", metavar="TEXT", help="only sessions whose name starts with this")
    cli.add_window_fraction(p, [0.45], "the token_budget as a share of each session's estimated size")
    p.add_argument(
        "--floors",
        nargs="+",
        type=floor_arg,
        default=DEFAULT_FLOORS,
        metavar="F",
        help="'off' or tokens (or a fraction)",
    )
    meters = ("estimate", "actual", "hybrid")
    p.add_argument(
        "--meters", nargs="+", choices=meters, default=["estimate", "hybrid"], metavar="M", help="|".join(meters)
    )
    p.add_argument(
        "--target-usage", type=cli.fraction, metavar="X", help="module target_usage (default: the module's 0.5)"
    )
    p.add_argument(
        "--pin-system",
        type=cli.non_negative_int,
        default=0,
        metavar="N",
        help="grow the system prompt by ~N estimated tokens",
    )
    cli.add_no_tiktoken(p)
    return p.parse_args(argv)


async def run(args: argparse.Namespace) -> bool:
    loads = [w for w in cli.workloads(args.workload, DEFAULT_DIR) if w.name.startswith(args.prefix)]
    loads = [pin_system(w, args.pin_system) for w in loads]
    sized = [(w, session_size(w)) for w in loads]
    sized = [(w, s) for w, s in sized if s >= args.min_tokens]
    source = ", ".join(args.workload or [str(DEFAULT_DIR.relative_to(REPO))])
    if not sized:  # a gate over no session would pass vacuously
        raise cli.UsageError(
            f"no session of {source} starts with {args.prefix!r} and has >= {args.min_tokens:,} tokens"
        )
    # The module's over-budget and provenance warnings would flood the table; they are expected here.
    logging.getLogger("amplifier_module_context_simple").setLevel(logging.ERROR)
    counter = TokenCounter(use_tiktoken=not args.no_tiktoken)
    print(f"{plural(len(sized), 'session')} from {source} (>= {args.min_tokens:,} estimated tokens, '{args.prefix}*');")
    print(f"provider counts: {counter.name}; floors in the module's estimated tokens; cells: boundaries, skips")
    extra = {} if args.target_usage is None else {"target_usage": args.target_usage}
    if extra or args.pin_system:
        print(f"module config besides the meter and the floor: {extra}; system prompt grown by {args.pin_system:,}")
    ok = True
    for fraction in args.window_fraction:
        rows = []
        for w, size in sized:
            budget = int(size * fraction)
            for meter in args.meters:
                results = {f: await replay(w, budget, meter, floor_value(f), counter, extra) for f in args.floors}
                rows.append((w.name, size, budget, meter, results))
        print(f"\n== budget = {fraction:.0%} of the session (token_budget; effective = budget - {NOTICE_RESERVE})")
        ok = report(rows, args.floors) and ok
        errors = [r.error for *_, res in rows for r in res.values() if r.error]
        if errors:
            print(f"\nfirst fail-loud message ({plural(len(errors), 'run')} reached the cap):\n  {errors[0]}")
    print(f"\ngate (every row falls monotonically and the cap is never reached): {'PASS' if ok else 'FAIL'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    """Run the gate; exit 0 whatever its verdict (a finding, not a harness failure), 2 on bad input."""
    return cli.guard(PROG, lambda: _main(parse(sys.argv[1:] if argv is None else argv)))


def _main(args: argparse.Namespace) -> int:
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
