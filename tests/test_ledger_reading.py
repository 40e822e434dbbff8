"""What the evidence ledger reads of a text (issue 30, point 15).

The ledger read only the first and last 100 lines of a text: an ``ERROR deploy.sh:117`` line in the
middle of an 800-line result was lost, and on held-out real sessions the evidence miss rose by 1.3 to
1.4 points against 200 lines. A text of up to ``READ_WHOLE_LINES`` lines is now read whole; of a longer
one, the first and last ``EDGE_LINES`` lines and every failure line between, found by a scan in C. Each
message is read once (memoized per ``_seq``); the boundary's per-line work stays bounded.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple import ledger as ledger_module
from amplifier_module_context_simple.estimate import seq_of
from tests.conftest import WORKLOADS_DIR, load_transcript
from tests.test_evidence import call, result, views

Message = dict[str, Any]
DEPLOY_ERROR = "ERROR deploy.sh:117 rollout of release_v42 failed"
SETTINGS_LINE = "loaded settings from conf/prod_v7.yaml"


def plain(n: int, start: int = 0) -> list[str]:
    """Lines of output with nothing a ledger keeps (no identifier, no failure word)."""
    return [f"progress step {i} of the rollout went through as planned" for i in range(start, start + n)]


def deploy_session(result_lines: list[str]) -> list[Message]:
    """A deploy log read early, then ordinary steps that push it out of the view."""
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Why did the deploy fail?"}]
    messages += [call("c0", "bash", {"cmd": "cat deploy.log"}), result("c0", "\n".join(result_lines))]
    for k in range(1, 10):
        body = "\n".join(plain(40)) + f"\nchecked module_{k}.py"
        messages += [call(f"c{k}", "bash", {"cmd": f"cat src/module_{k}.py"}), result(f"c{k}", body)]
    return [*messages, {"role": "user", "content": "Go on."}]


def ledger_texts(all_views: list[list[Message]]) -> list[str]:
    return [m["content"] for view in all_views for m in view if ledger_module.is_ledger(m)]


def test_a_line_in_the_middle_of_an_800_line_result_reaches_the_ledger() -> None:
    lines = plain(300) + [SETTINGS_LINE] + plain(99, 300) + [DEPLOY_ERROR] + plain(400, 400)
    assert len(lines) == 801
    ctx, all_views = views({"preset": "evidence"}, 3_000, deploy_session(lines))
    assert 3 in ctx._removed_seqs, "the deploy log must be removed for the ledger to matter"
    texts = ledger_texts(all_views)
    assert texts and DEPLOY_ERROR in texts[-1] and SETTINGS_LINE in texts[-1], texts[-1]


def test_a_failure_line_in_the_middle_of_a_huge_log_reaches_the_ledger() -> None:
    lines = plain(10_000) + [DEPLOY_ERROR] + plain(10_000, 10_000)
    assert len(lines) > ledger_module.READ_WHOLE_LINES
    ctx, all_views = views({"preset": "evidence"}, 3_000, deploy_session(lines))
    assert 3 in ctx._removed_seqs
    assert DEPLOY_ERROR in ledger_texts(all_views)[-1]


def test_what_is_read_of_a_text() -> None:
    read = ledger_module.read_lines
    whole, edge = ledger_module.READ_WHOLE_LINES, ledger_module.EDGE_LINES
    short = "\n".join(plain(whole))
    assert read(short) == short.split("\n") and read("one line") == ["one line"] and read("") == [""]
    failures = [f"{'Error' if i % 3 else 'FAIL'} in step_{i}" for i in range(1_000)]
    body = plain(5_000) + [f"{i}: İstanbul exception at node_{i}" for i in range(3)] + failures + plain(5_000)
    lines = read("\n".join(body))
    assert lines[:edge] == body[:edge] and lines[-edge:] == body[-edge:]
    middle = lines[edge:-edge]
    assert len(middle) == ledger_module.MAX_MIDDLE_LINES  # the first ones, in order, any case
    quiet = set(plain(5_000))
    assert middle == [line for line in body[edge:-edge] if line not in quiet][: len(middle)]
    lone = read("\n".join(plain(3_000)) + "\nerror \ud800 here\n" + "\n".join(plain(3_000)))
    assert "error \ud800 here" in lone  # a lone surrogate is carried, not a crash


@pytest.mark.asyncio
async def test_each_message_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The analysis is memoized per message: over a whole replay with many boundaries no message is read
    twice (a boundary reads what was removed since the last one)."""
    reads: Counter[int | None] = Counter()
    original = ledger_module.analyse

    def counted(message: Message, arguments: bool = True) -> Any:
        reads[seq_of(message)] += 1
        return original(message, arguments)

    monkeypatch.setattr(ledger_module, "analyse", counted)
    messages = load_transcript(WORKLOADS_DIR / "msa__pr814__deepseek_bench1__django__django-13401.jsonl")
    ctx = SimpleContextManager(preset="evidence")
    budget = sum(len(str(m)) for m in messages) // 4 // 4
    boundaries = 0
    for message in messages:
        if message["role"] == "assistant":
            before = ctx._last_compaction_stats
            await ctx.get_messages_for_request(token_budget=budget)
            boundaries += ctx._last_compaction_stats is not before
        await ctx.add_message(message)
    assert boundaries >= 3 and len(reads) > 20 and max(reads.values()) == 1, (boundaries, reads.most_common(2))


@pytest.mark.asyncio
async def test_a_long_message_is_read_when_stored_so_no_boundary_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """In evidence mode a message with more than ``PRE_READ_CHARS`` of text is read as it is stored (and
    by ``set_messages``; ``restore_state`` keeps the reading): the boundary that removes it reads none."""
    from amplifier_module_context_simple.evidence import PRE_READ_CHARS

    log = "\n".join(plain(4_000))
    assert len(log) > PRE_READ_CHARS
    analysed: list[int | None] = []
    original = ledger_module.analyse
    monkeypatch.setattr(ledger_module, "analyse", lambda m, arguments=True: analysed.append(seq_of(m)) or original(m))
    ctx = SimpleContextManager(preset="evidence")
    messages = deploy_session(plain(300) + [DEPLOY_ERROR] + plain(3_700, 300))
    for message in messages[:4]:
        await ctx.add_message(message)
    assert analysed == [3]  # the long result, as it was stored; nothing else yet
    for message in messages[4:]:
        if message["role"] == "assistant":
            await ctx.get_messages_for_request(token_budget=3_000)
        await ctx.add_message(message)
    await ctx.get_messages_for_request(token_budget=3_000)
    assert 3 in ctx._removed_seqs and analysed.count(3) == 1
    snapshot = ctx.snapshot_state()
    resumed = SimpleContextManager(preset="evidence")
    await resumed.set_messages(ctx.messages)
    resumed.restore_state(snapshot)
    # set_messages read it once more; restore_state's check of the snapshot's ledger reads the removed
    # messages itself (an untrusted snapshot), and keeps the manager's reading.
    assert analysed.count(3) == 3 and resumed._evidence_reads[3][1] == ctx._evidence_reads[3][1]
    assert SimpleContextManager()._evidence_reads == {}  # off: nothing is read
