"""`evidence_ledger_dense` (ledger_dense.py): off, the ledger ranks its lines as before, byte for byte; on,
it keeps more of what the agent uses next per token (the agent's calls may take the whole room, no
priority bonus, shorter lines first), and `evidence_lean` sets it."""

from __future__ import annotations

import pytest

from amplifier_module_context_simple import SimpleContextManager, ledger
from amplifier_module_context_simple import evidence_text as et
from amplifier_module_context_simple.ledger_dense import DENSE, STANDARD, ranking
from amplifier_module_context_simple.presets import PRESETS
from tests.conftest import WORKLOADS, load_transcript
from tests.regen_golden import EVIDENCE_FRACTION, evidence_key, load_evidence_golden, views_hash

FIRST_TWO = WORKLOADS[:2]


def _old_score(new_tokens: int, priority: bool, recency: float, line: str) -> float:
    """The ranking before the key existed (ledger._choose's own formula then)."""
    return (new_tokens + (et.PRIORITY_BONUS if priority else 0)) * recency / (len(line) // 4 + 1)


def test_off_scores_every_line_of_a_real_transcript_as_before_bit_for_bit():
    lines = [line for m in load_transcript(WORKLOADS[0]) for line in ledger.analyse(m)]
    assert len(lines) > 100
    for recency in (1.0, 1.37, 2.0):
        for text, tokens, priority, _call in lines:
            assert STANDARD.score(len(tokens), priority, recency, text) == _old_score(
                len(tokens), priority, recency, text
            )
    assert ranking(False) is STANDARD and STANDARD.call_room_share == 0.75


@pytest.mark.asyncio
@pytest.mark.parametrize("path", FIRST_TWO, ids=[p.stem for p in FIRST_TWO])
async def test_off_changes_no_byte_of_the_golden_preset_views(path):
    """`evidence` with the key given as false gives the views recorded before the key existed."""
    expected = load_evidence_golden()[evidence_key(path, "evidence")]
    assert await views_hash(path, EVIDENCE_FRACTION, preset="evidence", evidence_ledger_dense=False) == expected


def _sources(n: int, line: str) -> list[tuple[ledger.Line, ...]]:
    return [((f"{line} {i}", frozenset(et.distinctive_tokens(f"{line} {i}")), False, False),) for i in range(n)]


def test_dense_prices_a_long_line_more_than_its_length():
    """Two new identifiers in 37 tokens against one in 20: the old ranking (per token) keeps the long line,
    the dense one (tokens ** 1.3) the short one, in a room for only one of them."""
    short_text = "see src/app/main.py " + "x" * 56
    long_text = "see src/app/util.py and src/app/db.py " + "y" * 106
    assert (ledger._line_cost(short_text), ledger._line_cost(long_text)) == (20, 37)
    short = (short_text, frozenset(et.distinctive_tokens(short_text)), False, False)
    long = (long_text, frozenset(et.distinctive_tokens(long_text)), False, False)
    assert (len(short[1]), len(long[1])) == (1, 2)
    sources = [(short, long)]
    old = ledger.select_in_turn([(sources, 37)], set(), 37, STANDARD)
    new = ledger.select_in_turn([(sources, 37)], set(), 37, DENSE)
    assert old == [long_text] and new == [short_text]


def test_dense_gives_no_room_to_a_priority_line_that_shows_nothing_new():
    known = {"src/app/main.py"}
    line = ("ERROR src/app/main.py:12 failed", frozenset({"src/app/main.py"}), True, False)
    assert ledger.select_in_turn([([(line,)], 100)], known, 100, STANDARD) == [line[0]]
    assert ledger.select_in_turn([([(line,)], 100)], known, 100, DENSE) == []


def test_dense_lets_the_agents_calls_take_the_whole_room():
    """Calls of one identifier each and output lines of three: off, the calls stop at 0.75 of the room and
    the output takes the rest; on, the calls take it all."""
    calls = [(f"bash(command=cat src/m{i}/f{i}.py)", frozenset({f"src/m{i}/f{i}.py"}), False, True) for i in range(40)]
    outputs = [(f"a_{i}1 b_{i}2 c_{i}3", frozenset({f"a_{i}1", f"b_{i}2", f"c_{i}3"}), False, False) for i in range(40)]
    room = sum(ledger._line_cost(c[0]) for c in calls)
    kept = {}
    for dense in (False, True):
        ctx = SimpleContextManager(evidence_ledger_share=0.5, evidence_ledger_dense=dense)
        chosen = ctx._evidence._select_lines(  # the ledger component, with the inputs the manager hands it
            [{"role": "assistant"}] * 40,
            [(c, o) for c, o in zip(calls, outputs, strict=True)],
            set(),
            room,
            ctx._ledger_inputs(),
        )
        kept[dense] = sum(line.startswith("bash(") for line in chosen)
    assert kept[True] == 40
    assert kept[False] <= 0.75 * 40


@pytest.mark.asyncio
async def test_on_changes_the_views_and_only_evidence_lean_sets_it():
    path = WORKLOADS[0]
    off = await views_hash(path, EVIDENCE_FRACTION, preset="evidence_lean", evidence_ledger_dense=False)
    assert await views_hash(path, EVIDENCE_FRACTION, preset="evidence_lean") != off
    assert [name for name, keys in PRESETS.items() if keys.get("evidence_ledger_dense")] == ["evidence_lean"]
    assert SimpleContextManager().evidence_ledger_dense is False
