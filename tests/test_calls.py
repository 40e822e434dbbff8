"""One reading of a tool call and of a tool result (calls.py), and every part that reads through it (issue 28).

Amplifier's orchestrators store calls as ``{"id", "tool", "arguments": {...}}`` beside the provider's content
blocks, which repeat each call as a ``tool_call`` block; loop-streaming on amplifier-core 2.0.x stores a result
as the JSON of the whole result object. Each test below failed before calls.py.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from amplifier_core import HookRegistry
from amplifier_core.models import ToolResult

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.calls import (
    Call,
    arguments_text,
    message_calls,
    read_call,
    read_calls,
    unwrap_result,
)
from amplifier_module_context_simple.evidence_text import argument_texts, message_text
from amplifier_module_context_simple.ledger import is_ledger
from amplifier_module_context_simple.repair import view_problems
from amplifier_module_context_simple.token_counter import CONTENT_COUNTER, tool_call_parts
from tests.test_evidence import LEDGER, filler, text_lines, views

ARGS = {"cmd": "cat src/pkg/mod_3.py", "opts": {"cwd": "/tmp/é"}}


def shapes(call_id: str, name: str, args: dict) -> dict[str, dict]:
    """The same call in the five shapes hosts store."""
    return {
        "orchestrator": {"id": call_id, "tool": name, "arguments": args},
        "toolcall": {"id": call_id, "name": name, "arguments": args},
        "openai": {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}},
        "anthropic": {"type": "tool_use", "id": call_id, "name": name, "input": args},
        "block": {"type": "tool_call", "id": call_id, "name": name, "input": args},
    }


def wrapped(output: object, success: bool = True, error: dict | None = None) -> str:
    """The JSON of the whole result object, in ``model_dump()``'s own key order."""
    return json.dumps(ToolResult(success=success, output=output, error=error).model_dump())


def kernel_wrapped(output: object, success: bool = True, error: dict | None = None) -> str:
    """A result exactly as loop-streaming stores it on amplifier-core 2.0.x: it emits ``tool:post`` with the
    result's ``model_dump()``, the kernel hands back a copy (keys sorted), and the loop stores its JSON."""
    data = {"tool_name": "bash", "result": ToolResult(success=success, output=output, error=error).model_dump()}

    async def emit() -> object:
        return (await HookRegistry().emit("tool:post", data)).data["result"]

    return json.dumps(asyncio.run(emit()))


WRAPPERS = {"model_dump order": wrapped, "as the kernel returns it": kernel_wrapped}


# ----- the reading -----------------------------------------------------------------------------------


def test_every_shape_reads_the_same_id_name_and_arguments() -> None:
    readings = {shape: read_call(call) for shape, call in shapes("c1", "bash", ARGS).items()}
    expected = Call("c1", "bash", json.dumps(ARGS, ensure_ascii=False))
    assert readings == dict.fromkeys(readings, expected)


def test_arguments_read_canonically_whatever_their_spacing() -> None:
    compact = {"id": "a", "function": {"name": "bash", "arguments": '{"cmd":"ls"}'}}
    assert arguments_text(compact) == arguments_text({"id": "a", "tool": "bash", "arguments": {"cmd": "ls"}})
    assert arguments_text(compact) == '{"cmd": "ls"}'
    assert arguments_text({"id": "a", "function": {"name": "x", "arguments": "not json"}}) == "not json"
    assert arguments_text({"id": "a", "name": "x"}) == ""


def test_the_name_is_function_name_then_name_then_tool() -> None:
    assert read_call({"id": "a", "function": {"name": "f"}, "name": "n", "tool": "t"}).name == "f"
    assert read_call({"id": "a", "name": "n", "tool": "t"}).name == "n"
    assert read_call({"id": "a", "tool": "t"}).name == "t"
    assert tool_call_parts({"id": "a", "tool": "t", "arguments": {"k": 1}}) == ("t", '{"k": 1}')  # kept for recall


def test_a_call_stored_in_tool_calls_and_as_a_content_block_is_one_call() -> None:
    call = shapes("c1", "bash", ARGS)
    host = {
        "role": "assistant",
        "content": [{"type": "text", "text": "Reading it."}, call["block"]],
        "tool_calls": [call["orchestrator"]],
    }
    assert message_calls(host) == [call["orchestrator"]]
    assert argument_texts(host) == ["cat src/pkg/mod_3.py", "/tmp/é"]
    plain = {"role": "assistant", "content": "Reading it.", "tool_calls": [call["openai"]]}
    assert CONTENT_COUNTER(host) == CONTENT_COUNTER(plain)  # sized once, with its real name


def test_a_call_only_in_content_blocks_is_read_too() -> None:
    message = {"role": "assistant", "content": [shapes("c1", "bash", ARGS)["anthropic"]]}
    assert read_calls(message) == [Call("c1", "bash", json.dumps(ARGS, ensure_ascii=False))]
    assert "cat src/pkg/mod_3.py" in message_text(message)


# ----- wrapped results -------------------------------------------------------------------------------


@pytest.mark.parametrize("wrapped", WRAPPERS.values(), ids=WRAPPERS.keys())
def test_a_wrapped_result_reads_as_its_output_and_error(wrapped) -> None:
    assert unwrap_result(wrapped("line one\nline two")) == "line one\nline two"
    structured = {"stdout": "ok", "returncode": 0}
    assert json.loads(unwrap_result(wrapped(structured))) == structured  # as amplifier-core serializes it
    failed = wrapped(None, success=False, error={"message": "no such file: a.py"})
    assert unwrap_result(failed) == "no such file: a.py"  # the output it was given (the error) said once
    both = wrapped("partial output", success=False, error={"message": "timed out after 30s"})
    assert unwrap_result(both) == "partial output\ntimed out after 30s"
    for other in ('{"stdout": "x"}', '{"success": true}', "plain text", '{"success": true, "output": "x", "k": 1}'):
        assert unwrap_result(other) is None


def test_the_kernel_hands_back_the_result_with_its_keys_sorted() -> None:
    """The fact the wrapped readers depend on (amplifier-core 2.0.2): what loop-streaming stores opens with
    "error", not with model_dump()'s "success"."""
    assert kernel_wrapped("x") == '{"error": null, "output": "x", "success": true}'


@pytest.mark.parametrize("wrapped", WRAPPERS.values(), ids=WRAPPERS.keys())
def test_wrapped_results_feed_the_ledger_their_lines_and_are_sent_as_stored(wrapped) -> None:
    def session(wrap: bool) -> list[dict]:
        messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Fix the flaky loader please."}]
        for k in range(12):
            text = filler(40, f"m{k}") + f"\ndef loader_fn_{k}(shard_count_{k}): pass"
            messages.append(
                {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{k}", "tool": "bash", "arguments": {}}]}
            )
            messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": wrapped(text) if wrap else text})
        return [*messages, {"role": "user", "content": "Go on."}]

    output_lines = {line for m in session(False) if m["role"] == "tool" for line in m["content"].split("\n")}
    ctx, out = views(LEDGER, 3000, session(True))
    ledger = [m["content"].split("\n")[2:-1] for m in out[-1] if is_ledger(m)]
    assert ledger and "def loader_fn_0(shard_count_0): pass" in ledger[0]
    assert set(ledger[0]) <= output_lines  # the output's own lines, never the escaped JSON
    stored = {m["content"] for m in ctx.messages if m["role"] == "tool"}
    sent = [m for m in out[-1] if m["role"] == "tool" and not m.get("_truncated")]
    assert sent and all(m["content"] in stored for m in sent)  # byte for byte what was stored


# ----- every reader, under the orchestrators' shape --------------------------------------------------


def orchestrator_session(steps: int = 12) -> list[dict]:
    """tests.test_evidence.session with the orchestrators' calls and the provider's blocks beside them: each
    file's path is only in its call's arguments."""
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Fix the flaky loader please."}]
    for k in range(steps):
        args = {"cmd": f"cat src/pkg/mod_{k}.py"}
        call = shapes(f"c{k}", "bash", args)
        content = [{"type": "text", "text": f"Reading module {k} next."}, call["block"]]
        messages.append({"role": "assistant", "content": content, "tool_calls": [call["orchestrator"]]})
        text = filler(40, f"m{k}") + f"\ndef loader_fn_{k}(shard_count_{k}): pass"
        messages.append({"role": "tool", "name": "bash", "tool_call_id": f"c{k}", "content": text})
    return [*messages, {"role": "user", "content": "Go on."}]


def test_a_removed_calls_command_reaches_the_ledger_under_the_orchestrators_shape() -> None:
    ctx, out = views(LEDGER, 3000, orchestrator_session())
    assert ctx._removed_seqs and all(not view_problems(view) for view in out)
    lines = text_lines(out[-1])
    assert "cat src/pkg/mod_0.py" in lines and "def loader_fn_0(shard_count_0): pass" in lines


def test_per_tool_budgets_and_exemptions_read_the_name_of_a_call_given_as_a_block() -> None:
    cm = SimpleContextManager(tool_result_exempt_tools=["bash"], tool_result_budget_by_tool={"grep": 3})
    messages = [
        {"role": "assistant", "content": [shapes("b", "bash", {})["block"]], "tool_calls": []},
        {"role": "assistant", "content": [shapes("g", "grep", {})["anthropic"]]},
    ]
    for message in messages:
        cm.messages.append(message)
    cm._harvest_tool_names()
    assert cm._tool_name_by_call_id == {"b": "bash", "g": "grep"}


# ----- input: duplicate ids, block types, objects (issues 30.4, 31.5, 28.3) ----------------------------


async def _refused(ctx: SimpleContextManager, message: dict, named: str) -> None:
    before = list(ctx.messages)
    with pytest.raises(ValueError, match=named):
        await ctx.add_message(message)
    with pytest.raises(ValueError, match=named):
        await ctx.set_messages([{"role": "user", "content": "hi"}, message])
    assert ctx.messages == before


@pytest.mark.asyncio
async def test_two_calls_with_one_id_in_a_message_are_refused_naming_the_id() -> None:
    ctx = SimpleContextManager()
    await ctx.add_message({"role": "user", "content": "go"})
    twice = {"role": "assistant", "content": "", "tool_calls": [shapes("dup", "bash", {})["openai"]] * 2}
    await _refused(ctx, twice, r"tool_calls\[1\] repeats the tool-call id 'dup'")
    blocks = {"role": "assistant", "content": [shapes("dup", "bash", {})["anthropic"]] * 2}
    await _refused(ctx, blocks, r"content\[1\] repeats the tool-call id 'dup'")


@pytest.mark.asyncio
async def test_a_block_without_a_type_or_not_a_dict_is_refused_naming_its_index() -> None:
    ctx = SimpleContextManager()
    await _refused(ctx, {"role": "user", "content": ["ok", {"text": "no type"}]}, "content block 1 has type missing")
    await _refused(ctx, {"role": "user", "content": [{"type": "text", "text": "a"}, 7]}, "content block 1 must be")


@pytest.mark.asyncio
async def test_an_unknown_block_type_is_stored_and_sent_with_one_warning_per_type(caplog) -> None:
    ctx = SimpleContextManager()
    video = {"type": "video", "source": {"url": "https://example.com/v.mp4"}}
    with caplog.at_level(logging.WARNING, logger="amplifier_module_context_simple"):
        for text in ("one", "two"):
            await ctx.add_message({"role": "user", "content": [{"type": "text", "text": text}, video]})
        await ctx.set_messages([{"role": "user", "content": [video]}])
    view = await ctx.get_messages_for_request(token_budget=100_000)
    assert view[0]["content"] == [video]
    assert caplog.text.count("'video'") == 1


@pytest.mark.asyncio
async def test_content_blocks_and_calls_given_as_objects_are_stored_as_dicts() -> None:
    """loop-basic stores amplifier-core's content objects as they come (its own tests hand them over)."""
    from amplifier_core.content_models import TextContent, ThinkingContent
    from amplifier_core.message_models import TextBlock, ThinkingBlock, ToolCall

    blocks = [ThinkingContent(text="hmm"), TextContent(text="real"), ThinkingBlock(thinking="t", signature="s")]
    ctx = SimpleContextManager()
    await ctx.add_message({"role": "user", "content": "go"})
    await ctx.add_message({"role": "assistant", "content": [*blocks, TextBlock(text="answer")]})
    call = ToolCall(id="c1", name="bash", arguments={"cmd": "ls"})
    await ctx.add_message({"role": "assistant", "content": "", "tool_calls": [call]})
    await ctx.add_message({"role": "tool", "tool_call_id": "c1", "content": "a.py"})
    stored = ctx.messages[1]["content"]
    assert stored[:2] == [{"type": "thinking", "text": "hmm"}, {"type": "text", "text": "real"}]
    assert stored[2] == ThinkingBlock(thinking="t", signature="s").model_dump()
    assert ctx.messages[2]["tool_calls"] == [call.model_dump()]
    view = await ctx.get_messages_for_request(token_budget=100_000)
    assert not view_problems(view) and json.loads(json.dumps(view)) == view
