"""What the agent did, after compaction: removed tool calls whose evidence is only in their arguments.

Each transcript is replayed with a view before every assistant message, at a budget of a share of its
estimated size, under each evidence configuration. At every request that removes an assistant message
with tool calls, each of its calls is checked once: a call *counts* when a distinctive token of its
arguments (a path, a dotted or snake_case name, an identifier holding a digit, a 3+ digit number)
occurs nowhere else in the history so far (not in any other message, not in the call's own text), so
only the call itself could have shown it; it is *kept* when the ledger of that view holds such a token.
With --host the transcripts are stored as Amplifier's loop-streaming stores them (calls as
`{"id", "tool", "arguments": {...}}` beside content blocks, wrapped results: evaluation/host_shaped.py).
Run: `uv run python -m evaluation.studies.calls_kept [--split tune|report] [--host] [--window-fraction 0.3]`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple import evidence_text as et
from amplifier_module_context_simple.calls import arguments_value, message_calls
from amplifier_module_context_simple.estimate import estimate_tokens, seq_of
from amplifier_module_context_simple.ledger import is_ledger

from .. import cli
from ..evidence import arguments_text
from ..host_shaped import host_shape

PROG = "python -m evaluation.studies.calls_kept"
CONFIGS: dict[str, dict[str, Any]] = {
    "evidence": {"preset": "evidence"},
    "evidence_balanced": {"preset": "evidence_balanced"},
    "evidence_lean": {"preset": "evidence_lean"},
    "evidence + segments": {"preset": "evidence", "evidence_ledger_segments": True},
}
Message = dict[str, Any]


def own_tokens(message: Message, history: list[Message], tokens_of: dict[int, frozenset[str]]) -> list[set[str]]:
    """Per call of ``message``: the distinctive tokens of its arguments found in no other message."""
    elsewhere: set[str] = set()
    for other in history:
        if other is not message:
            elsewhere |= tokens_of[id(other)]
    elsewhere |= et.distinctive_tokens("\n".join(et.readable_texts(message)))
    return [et.distinctive_tokens(arguments_text(arguments_value(call))) - elsewhere for call in message_calls(message)]


async def replay(messages: list[Message], budget: int, config: dict[str, Any]) -> tuple[int, int]:
    """(calls that count, calls kept) over one replay."""
    ctx = SimpleContextManager(**config)
    tokens_of: dict[int, frozenset[str]] = {}
    checked: set[int] = set()
    counted = kept = 0
    for message in messages:
        if message.get("role") == "assistant":
            view = await ctx.get_messages_for_request(token_budget=budget)
            gone = ctx._removed_seqs - checked
            checked |= gone
            ledger = "\n".join(m["content"] for m in view if is_ledger(m))
            for stored in ctx.messages:
                if seq_of(stored) in gone and stored.get("tool_calls"):
                    for only in own_tokens(stored, ctx.messages, tokens_of):
                        counted += bool(only)
                        kept += any(token in ledger for token in only)
        await ctx.add_message(message)
        stored = ctx.messages[-1]
        tokens_of[id(stored)] = frozenset(et.distinctive_tokens(et.message_text(stored)))
    return counted, kept


def measure(sessions: list[list[Message]], fraction: float) -> dict[str, tuple[int, int]]:
    totals = {}
    for name, config in CONFIGS.items():
        pairs = [asyncio.run(replay(m, int(estimate_tokens(m) * fraction), config)) for m in sessions]
        totals[name] = (sum(p[0] for p in pairs), sum(p[1] for p in pairs))
    return totals


def main(argv: list[str] | None = None) -> int:
    """Print, per configuration, the removed calls that count and how many the next ledger kept."""
    p = cli.Parser(PROG, __doc__)
    cli.add_split(p)
    cli.add_window_fraction(p, 0.3, "the budget as a share of each session's estimated size")
    p.add_argument("--host", action="store_true", help="store the transcripts as loop-streaming stores them")
    return cli.guard(PROG, lambda: _run(p.parse_args(sys.argv[1:] if argv is None else argv)))


def _run(args: argparse.Namespace) -> int:
    loads = cli.real_workloads(None, True, args.split)
    sessions = [host_shape(w.messages) if args.host else w.messages for w in loads]
    logging.disable(logging.WARNING)  # the tight budgets warn by design
    shape = "host-shaped" if args.host else "plain"
    print(f"{len(sessions)} transcripts ({args.split or 'all 26'}, {shape}), budget {args.window_fraction:.0%}")
    print(f"{'configuration':<22}{'removed, shown only by args':>30}{'in the next ledger':>22}")
    for name, (counted, kept) in measure(sessions, args.window_fraction).items():
        share = f"{kept} ({kept / counted:.0%})" if counted else "n/a"
        print(f"{name:<22}{counted:>30}{share:>22}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
