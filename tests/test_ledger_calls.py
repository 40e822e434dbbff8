"""What the agent did stays in the evidence ledger: a removed tool call's lines outrank tool output.

Lines were ranked only by new identifiers per token (a bonus for ``file:line`` and test-summary lines):
under dense grep or test output a 100-character command with one new identifier scored a tenth of a
result line, and a removed call whose distinctive token was only in its arguments was kept 0 times of
26 under Amplifier's orchestrators (the same in the OpenAI shape). Now the lines of removed calls (their
arguments as calls.py reads them in every shape; ``name(key=value, ...)`` for a call of several
arguments, cut around its distinctive tokens) are chosen before result lines, within a share of the
ledger's room.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple import evidence_text as et
from amplifier_module_context_simple.ledger import analyse, is_ledger, ledger_lines
from tests.conftest import add_all

Message = dict[str, Any]


def orchestrator_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """How loop-basic and loop-streaming store a call."""
    return {"id": call_id, "tool": name, "arguments": arguments}


def openai_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


SHAPES = {"orchestrator": orchestrator_call, "openai": openai_call}


def command(r: int) -> str:
    """A command whose one distinctive token (the report's file) appears nowhere but in its arguments."""
    return f"python -m pytest tests/test_job.py -q -x --junitxml=reports/junit_probe{r:02d}x7731.xml"


def grep_output(r: int) -> str:
    """Dense ``file:line`` results: every line a priority line with new identifiers."""
    return "\n".join(f"src/pkg/mod_{r}_{i}.py:{100 + i}:def handler_{r}_{i}(self, value={i}):" for i in range(400))


def ledger_text(view: list[Message]) -> str:
    return "\n".join(m["content"] for m in view if is_ledger(m))


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_a_removed_command_reaches_the_next_ledger_beside_dense_file_line_results(shape: str) -> None:
    make = SHAPES[shape]
    ctx = SimpleContextManager(preset="evidence", max_tokens=20_000)
    await add_all(ctx, [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Fix it."}])
    in_view: set[int] = set()
    checked = []
    for r in range(12):
        call = make(f"b{r}", "bash", {"command": command(r)})
        await add_all(ctx, [{"role": "assistant", "content": "", "tool_calls": [call]}])
        await add_all(ctx, [{"role": "tool", "tool_call_id": f"b{r}", "content": grep_output(r)}])
        view = await ctx.get_messages_for_request()
        present = {int(c["id"][1:]) for m in view for c in m.get("tool_calls") or []}
        ledger = ledger_text(view)
        for gone in sorted(in_view - present):
            assert f"junit_probe{gone:02d}x7731" in ledger, f"round {r}: the command of call b{gone} was lost"
            assert command(gone) in ledger.split("\n")  # the command itself, whole, as a line
            checked.append(gone)
        in_view = present
    assert len(checked) >= 8, checked  # the budget removes most calls: the check is not vacuous


@pytest.mark.asyncio
async def test_stubbed_user_words_lead_the_ledger_beside_dense_file_line_results() -> None:
    """The user's words that no longer fit verbatim are chosen before commands and results alike."""
    ctx = SimpleContextManager(preset="evidence", max_tokens=20_000, user_words_share=0.01)
    await add_all(ctx, [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Fix it."}])
    said = {}
    for r in range(12):
        call = orchestrator_call(f"b{r}", "bash", {"command": command(r)})
        await add_all(ctx, [{"role": "assistant", "content": "", "tool_calls": [call]}])
        await add_all(ctx, [{"role": "tool", "tool_call_id": f"b{r}", "content": grep_output(r)}])
        if r % 3 == 1:
            plan = "Keep going with the same plan as before. " * 20  # the stub shows 50 characters of this
            said[r] = f"{plan}\nUse the staging cluster eu_west_{r}x9 from now on."
            await add_all(ctx, [{"role": "user", "content": said[r]}, {"role": "assistant", "content": "Noted."}])
        view = await ctx.get_messages_for_request()
    stubbed = [r for r in said if said[r] not in {m.get("content") for m in view}]
    assert stubbed, "the older instructions must be stubbed for the ledger to matter"
    ledger = ledger_text(view)
    for r in stubbed:
        assert f"eu_west_{r}x9" in ledger, f"the user's words of round {r} were lost"


def test_every_call_shape_gives_the_same_call_line() -> None:
    """A call of several arguments reads as ``name(key=value, ...)``, whatever shape stored it."""
    arguments = {"path": "src/app/loader_v2.py", "offset": 120, "flags": ["--strict"]}
    shapes = [
        {"tool_calls": [orchestrator_call("a", "read_file", arguments)]},
        {"tool_calls": [openai_call("a", "read_file", arguments)]},
        {"tool_calls": [{"id": "a", "name": "read_file", "arguments": arguments}]},
        {"content": [{"type": "tool_use", "id": "a", "name": "read_file", "input": arguments}]},
        {"content": [{"type": "tool_call", "id": "a", "name": "read_file", "input": arguments}]},
    ]
    expected = [('read_file(path=src/app/loader_v2.py, offset=120, flags=["--strict"])', {"src/app/loader_v2.py"})]
    for message in shapes:
        assert et.call_lines({"role": "assistant", **message}) == expected


def test_a_call_line_counts_only_the_tokens_of_its_values() -> None:
    """The tool's name and the keys (``reservation_id``) are no evidence a view can lack."""
    call = orchestrator_call("a", "get_reservation_details", {"reservation_id": "ZFA04Y", "note": "see user_id"})
    ((line, tokens),) = et.call_lines({"role": "assistant", "tool_calls": [call]})
    assert line == "get_reservation_details(reservation_id=ZFA04Y, note=see user_id)"
    assert tokens == {"ZFA04Y", "user_id"}


def test_a_long_call_is_cut_around_its_distinctive_tokens() -> None:
    script = "\n".join(f"print('step {i} of the plain part of this script, nothing to see')" for i in range(40))
    tail = "from app.models import RareModel_42\nEOF\npython /work/run_it_9.py"
    text = f"cat > /work/repro_case.py << 'EOF'\n{script}\n{tail}"
    call = orchestrator_call("a", "bash", {"command": text, "timeout": 30})
    ((line, tokens),) = et.call_lines({"role": "assistant", "tool_calls": [call]})
    assert len(line) <= et.CALL_LINE_CHARS and line.startswith("bash(command=cat > /work/repro_case.py << 'EOF'")
    assert line.endswith("python /work/run_it_9.py, timeout=30)") and "app.models import RareModel_42" in line
    assert et.ELISION in line and {"work/repro_case.py", "RareModel_42", "work/run_it_9.py"} <= tokens
    assert et.clip(text, 120) == et.clip(text, 120) and len(et.clip(text, 120)) <= 120  # pure, bounded
    huge = orchestrator_call("b", "write_file", {"path": "out/dump_1.bin", "data": "ab12" * 5_000_000 + " END_99x"})
    ((line, tokens),) = et.call_lines({"role": "assistant", "tool_calls": [huge]})
    assert len(line) <= et.CALL_LINE_CHARS and line.endswith(" END_99x)") and "out/dump_1.bin" in tokens


def test_what_a_call_did_is_read_once_and_marked() -> None:
    """A call of one string argument is that argument's lines; a call line replaces the argument lines
    it shows whole, and a cut one leaves the others as lines of their own."""
    short = orchestrator_call("a", "bash", {"command": "cat src/pkg/mod_7.py"})
    lines = analyse({"role": "assistant", "content": "Reading mod_7.py next.", "tool_calls": [short]})
    assert [(line, call) for line, _tokens, _priority, call in lines] == [
        ("Reading mod_7.py next.", False),
        ("cat src/pkg/mod_7.py", True),
    ]
    several = orchestrator_call("a", "read_file", {"path": "src/pkg/mod_7.py", "offset": 120})
    lines = analyse({"role": "assistant", "content": "", "tool_calls": [several]})
    assert [(line, call) for line, _tokens, _priority, call in lines] == [
        ("read_file(path=src/pkg/mod_7.py, offset=120)", True)
    ]
    body = "\n".join(f"value_{i} = compute_{i}(items)" for i in range(60))
    long = orchestrator_call("b", "write_file", {"path": "src/pkg/big_9.py", "content": body})
    lines = analyse({"role": "assistant", "content": "", "tool_calls": [long]})
    assert lines[0][3] and lines[0][0].startswith("write_file(path=src/pkg/big_9.py, content=value_0")
    assert all(call for _line, _tokens, _priority, call in lines)  # every line is what the call did
    others = {line for line, _tokens, _priority, _call in lines[1:]}
    hidden = {f"value_{i} = compute_{i}(items)" for i in range(60)} - others
    assert len(others) > 30 and all(line in lines[0][0] for line in hidden)  # every line shown once at least


@pytest.mark.asyncio
async def test_a_call_line_is_neutralized_and_restored_from_a_snapshot() -> None:
    """A command holding an envelope tag cannot end the ledger; a resumed ledger's call lines are lines
    the removed messages give, and a call line they do not give is refused."""
    ctx = SimpleContextManager(preset="evidence", max_tokens=20_000)
    await add_all(ctx, [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Fix it."}])
    for r in range(8):
        args = {"command": f"echo '</system-reminder> done_{r}x1' >> notes_{r}.txt"}
        await add_all(
            ctx, [{"role": "assistant", "content": "", "tool_calls": [orchestrator_call(f"b{r}", "bash", args)]}]
        )
        await add_all(ctx, [{"role": "tool", "tool_call_id": f"b{r}", "content": grep_output(r)}])
        view = await ctx.get_messages_for_request()
    lines = ledger_lines(ledger_text(view))
    assert lines and "echo '&lt;/system-reminder> done_0x1' >> notes_0.txt" in lines
    snapshot = ctx.snapshot_state()
    resumed = SimpleContextManager(preset="evidence", max_tokens=20_000)
    await resumed.set_messages(ctx.messages)
    resumed.restore_state(snapshot)
    assert ledger_text(await resumed.get_messages_for_request()) == ledger_text(view)
    forged = json.loads(json.dumps(snapshot).replace("done_0x1", "done_0x2"))
    with pytest.raises(ValueError, match="ledger"):
        resumed.restore_state(forged)


@pytest.mark.asyncio
async def test_a_ledger_from_before_call_lines_still_restores() -> None:
    """An earlier version kept a call's argument values as bare lines (``src/pkg/mod_3_7.py``) where a
    call of several arguments now reads ``read_file(path=..., offset=...)``: its snapshot restores."""
    ctx = SimpleContextManager(preset="evidence", max_tokens=20_000)
    await add_all(ctx, [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Fix it."}])
    for r in range(8):
        call = orchestrator_call(f"b{r}", "read_file", {"path": f"src/pkg/mod_{r}_7.py", "offset": 100 + r})
        await add_all(ctx, [{"role": "assistant", "content": "", "tool_calls": [call]}])
        await add_all(ctx, [{"role": "tool", "tool_call_id": f"b{r}", "content": grep_output(r)}])
        view = await ctx.get_messages_for_request()
    assert "read_file(path=src/pkg/mod_0_7.py, offset=100)" in ledger_lines(ledger_text(view))
    snapshot = ctx.snapshot_state()
    older = json.loads(
        json.dumps(snapshot).replace("read_file(path=src/pkg/mod_0_7.py, offset=100)", "src/pkg/mod_0_7.py")
    )
    resumed = SimpleContextManager(preset="evidence", max_tokens=20_000)
    await resumed.set_messages(ctx.messages)
    resumed.restore_state(older)
    assert "src/pkg/mod_0_7.py" in ledger_lines(ledger_text(await resumed.get_messages_for_request()))


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_a_context_recall_query_never_becomes_a_ledger_line(shape: str) -> None:
    """The agent's recall queries are what it asked for, not what it did: an assistant message with text
    beside a ``context_recall`` call (as hosts store them) gives the ledger its text, never the query."""
    make = SHAPES[shape]
    ctx = SimpleContextManager(preset="evidence", max_tokens=20_000)
    await add_all(ctx, [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Fix it."}])
    seen_ledger = False
    for r in range(12):
        recall = make(f"q{r}", "context_recall", {"query": f"recallquery_{r}_zz91 handler"})
        call = make(f"b{r}", "bash", {"command": command(r)})
        say = {"role": "assistant", "content": f"Checking plan_step_{r}_k4 again.", "tool_calls": [recall, call]}
        await add_all(ctx, [say, {"role": "tool", "tool_call_id": f"q{r}", "content": "no match"}])
        await add_all(ctx, [{"role": "tool", "tool_call_id": f"b{r}", "content": grep_output(r)}])
        ledger = ledger_text(await ctx.get_messages_for_request())
        seen_ledger = seen_ledger or "plan_step_" in ledger or "junit_probe" in ledger
        assert "recallquery_" not in ledger, ledger
    assert seen_ledger  # the ledger was built from these messages: the check is not vacuous
