"""`context_recall` under what Amplifier's orchestrators store (issue 28, its recall part).

loop-basic and loop-streaming store an assistant's calls as ``{"id", "tool", "arguments": {...}}`` beside the
provider's content blocks (thinking, text, and each call again as a ``tool_call`` block), and loop-streaming
stores a result as the JSON of the whole result object. Recall must skip its own calls and results in every
shape, keep the rest of the assistant's message searchable, name the tool a result answers with its
arguments decoded, read wrapped results as their output, and never serve an in-place redaction from its cache.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from amplifier_module_context_simple.recall import TOOL_NAME
from tests.conftest import add_all, asst, result, system, user
from tests.test_calls import shapes, wrapped
from tests.test_recall import mounted, recall

Message = dict[str, Any]
SHAPES = ("openai", "orchestrator", "toolcall", "anthropic", "block", "host")


def assistant_calls(shape: str, calls: list[tuple[str, str, dict]], text: str = "") -> Message:
    """An assistant message calling ``calls`` (id, name, arguments) as ``shape`` stores it; ``host`` is
    loop-streaming's: a thinking block, the text, each call as a ``tool_call`` block, and the calls again in
    ``tool_calls`` in the orchestrators' shape."""
    if shape != "host":
        return {"role": "assistant", "content": text, "tool_calls": [shapes(*c)[shape] for c in calls]}
    blocks: list[dict] = [{"type": "thinking", "thinking": "which call next?"}]
    blocks += [{"type": "text", "text": text}] if text else []
    blocks += [shapes(*c)["block"] for c in calls]
    return {"role": "assistant", "content": blocks, "tool_calls": [shapes(*c)["orchestrator"] for c in calls]}


def session(shape: str, wrap: bool) -> list[Message]:
    """A user asks, the agent reads a file (its result holds SECRET_TOKEN), says something, the user asks."""
    output = "alpha line\nSECRET_TOKEN=42 in the settings\nomega line"
    return [
        system(),
        user("Check the app's settings."),
        assistant_calls(shape, [("c1", "read_file", {"path": "src/app.py"})]),
        result("c1", wrapped(output) if wrap else output),
        asst("The token is set."),
        user("What was the token again?"),
    ]


def hit_labels(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("#")]


@pytest.mark.asyncio
@pytest.mark.parametrize("wrap", [False, True], ids=["plain", "wrapped"])
@pytest.mark.parametrize("shape", SHAPES)
async def test_a_second_recall_never_returns_the_first_one_in_any_shape(shape: str, wrap: bool) -> None:
    coordinator, ctx, _ = await mounted()
    await add_all(ctx, session(shape, wrap))
    first = await recall(coordinator, query="SECRET_TOKEN")
    assert first.output.count("SECRET_TOKEN=42") == 1
    said = "Let me search the earlier output for SECRET_TOKEN again."
    calls = [("r1", TOOL_NAME, {"query": "SECRET_TOKEN"}), ("c2", "bash", {"command": "grep -rn SECRET_TOKEN ."})]
    await add_all(
        ctx,
        [
            assistant_calls(shape, calls, text=said),  # a sentence and another call beside the recall
            result("r1", wrapped(first.output) if wrap else first.output),
            result("c2", wrapped("no match") if wrap else "no match"),
            user("and?"),
        ],
    )
    again = (await recall(coordinator, query="SECRET_TOKEN")).output
    assert TOOL_NAME not in again and again.count("SECRET_TOKEN=42") == 1  # never its own call or result
    assert f"> {said}" in again and "> bash(command=grep -rn SECRET_TOKEN .)" in again
    assert sorted(hit_labels(again)) == [
        "#3 tool result of read_file(path=src/app.py)",
        "#6 assistant",  # the sentence and the grep call: the agent's words, searchable
        "#8 tool result of bash(command=grep -rn SECRET_TOKEN .)",  # matched by its call
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", SHAPES)
async def test_an_assistant_message_that_only_called_recall_is_never_searched(shape: str) -> None:
    coordinator, ctx, _ = await mounted()
    await add_all(ctx, session(shape, False))
    await add_all(ctx, [assistant_calls(shape, [("r1", TOOL_NAME, {"query": "SECRET_TOKEN settings"})])])
    await add_all(ctx, [result("r1", "Matches, best first:\n\n> SECRET_TOKEN=42 in the settings"), user("ok")])
    out = (await recall(coordinator, query="SECRET_TOKEN")).output
    assert "(1 message(s) matched)" in out and TOOL_NAME not in out


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", SHAPES)
async def test_a_result_is_labelled_with_its_tool_and_decoded_arguments(shape: str) -> None:
    coordinator, ctx, _ = await mounted()
    args = {"path": "src/app.py", "lines": [1, 40], "note": "first\nsecond"}
    await add_all(ctx, [user("go"), assistant_calls(shape, [("c1", "read_file", args)]), result("c1", "MARK-7")])
    out = (await recall(coordinator, query="mark-7")).output
    assert hit_labels(out) == ["#2 tool result of read_file(path=src/app.py, lines=[1, 40], note=first second)"]


@pytest.mark.asyncio
async def test_a_wrapped_result_is_searched_and_shown_as_its_output_text() -> None:
    coordinator, ctx, _ = await mounted()
    output = "first line\nport = 8443 for the admin site\nlast line"
    failed = wrapped(None, success=False, error={"message": "permission denied: /etc/shadow"})
    await add_all(
        ctx,
        [
            user("go"),
            assistant_calls("host", [("c1", "bash", {"command": "cat conf"}), ("c2", "bash", {"command": "cat s"})]),
            result("c1", wrapped(output)),
            result("c2", failed),
            asst("done"),
        ],
    )
    out = (await recall(coordinator, query="8443")).output
    assert "  first line\n> port = 8443 for the admin site\n  last line" in out
    assert "\\n" not in out and '"success"' not in out
    denied = (await recall(coordinator, query="permission denied")).output
    assert "#3 tool result of bash(command=cat s)\n> permission denied: /etc/shadow" in denied


@pytest.mark.asyncio
async def test_an_in_place_redaction_is_never_served_from_the_text_cache() -> None:
    coordinator, ctx, _ = await mounted()
    pasted = {"role": "user", "content": [{"type": "text", "text": "my password is hunter2, keep it"}]}
    await add_all(ctx, [pasted, asst("noted")])
    assert "hunter2" in (await recall(coordinator, query="hunter2")).output
    stored = (await ctx.get_messages())[0]
    stored["content"][0]["text"] = "my password is [redacted], keep it"  # a nested edit: same content list
    assert (await recall(coordinator, query="hunter2")).output.startswith("No message")
    assert "[redacted]" in (await recall(coordinator, query="password")).output


@pytest.mark.asyncio
async def test_an_edit_during_a_search_ends_it_with_nothing_found() -> None:
    coordinator, ctx, _ = await mounted()
    tool = coordinator.get("tools")[TOOL_NAME]
    big = "\n".join(f"line {k} of the log holding hunter2" for k in range(200_000))
    await add_all(ctx, [user("go"), assistant_calls("openai", [("c1", "bash", {})]), result("c1", big)])
    tool.slice_s = 0.0

    async def redact_soon() -> None:
        await asyncio.sleep(0)
        ctx.messages[0]["content"] = "redacted"

    redacting = asyncio.create_task(redact_soon())
    found = await tool.execute({"query": "hunter2"})
    await redacting
    assert found.success and "edited during the search" in found.output and "hunter2" not in found.output
