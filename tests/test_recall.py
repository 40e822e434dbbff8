"""`context_recall` (issue 21): the opt-in tool that searches what compaction took out of the view."""

from __future__ import annotations

import asyncio
import copy
import gc
import json
import os
import time
import tracemalloc
from typing import Any

import pytest
from amplifier_core import AmplifierSession
from amplifier_core.message_models import ChatRequest, ChatResponse, Message, TextBlock, ToolCall, ToolSpec, Usage
from amplifier_core.models import ProviderInfo
from amplifier_core.testing import MockCoordinator

from amplifier_module_context_simple import SimpleContextManager, mount
from amplifier_module_context_simple.ledger import is_ledger
from amplifier_module_context_simple.recall import MAX_OUTPUT_TOKENS, NOTE, TOOL_NAME, recall_traffic
from tests.conftest import add_all, asst, asst_calls, result, system, user
from tests.test_amplifier_core import inline_module, openai_call

FILLER = "plain output line of the build log\n" * 40


def history(steps: int = 20) -> list[dict[str, Any]]:
    """A session whose early tool results hold one marker each (MARK-k), buried in filler."""
    messages = [system(), user("Find why the deploy fails.")]
    for k in range(steps):
        messages += [
            asst_calls(f"c{k}", name="bash", text=f"step {k}"),
            result(f"c{k}", FILLER + f"MARK-{k:03d} port={8000 + k}\n" + FILLER),
        ]
    return [*messages, asst("Looking."), user("Go on.")]


async def mounted(config: dict[str, Any] | None = None) -> tuple[MockCoordinator, SimpleContextManager, Any]:
    coordinator = MockCoordinator()
    cleanup = await mount(coordinator, {"recall_tool": True, **(config or {})})
    return coordinator, coordinator.get("context"), cleanup


async def recall(coordinator: MockCoordinator, **arguments: Any) -> Any:
    return await coordinator.get("tools")[TOOL_NAME].execute(arguments)


@pytest.mark.asyncio
async def test_off_by_default_mounts_nothing_and_says_nothing():
    coordinator = MockCoordinator()
    await mount(coordinator, {"max_tokens": 3_000})
    assert TOOL_NAME not in (coordinator.get("tools") or {})
    ctx = coordinator.get("context")
    await add_all(ctx, history())
    view = await ctx.get_messages_for_request()
    assert ctx._last_compaction_stats is not None and "context_recall" not in json.dumps(view)


@pytest.mark.asyncio
async def test_mounted_at_tools_and_unmounted_by_cleanup():
    coordinator, ctx, cleanup = await mounted()
    tool = coordinator.get("tools")[TOOL_NAME]
    assert tool.name == TOOL_NAME and tool.input_schema["required"] == ["query"] and tool.description
    await cleanup()
    assert TOOL_NAME not in coordinator.get("tools") and not ctx._recall_mounted


@pytest.mark.asyncio
async def test_a_removed_result_is_found_with_its_number_role_and_call():
    coordinator, ctx, _ = await mounted({"max_tokens": 3_000})
    await add_all(ctx, history())
    view = await ctx.get_messages_for_request()
    assert "MARK-002" not in json.dumps(view)  # compaction took it out of the view
    stored = copy.deepcopy(ctx.messages)
    found = await recall(coordinator, query="mark-002")  # literal, case-insensitive
    assert found.success and "MARK-002 port=8002" in found.output
    assert "#7 tool result of bash() (removed from your view)" in found.output
    assert ctx.messages == stored  # the history is never changed
    best = await recall(coordinator, query="MARK-", max_results=3)
    labels = [line.split(" (")[0] for line in best.output.splitlines() if line.startswith("#")]
    removed = sorted((seq for seq in ctx._removed_seqs if seq % 2 and seq > 2), reverse=True)
    assert labels == [f"#{seq} tool result of bash()" for seq in removed[:3]]  # out of the view first, newest
    assert "more matching message(s) not shown" in best.output


@pytest.mark.asyncio
async def test_not_found_filters_and_regex():
    coordinator, ctx, _ = await mounted()
    await add_all(ctx, history())
    assert (await recall(coordinator, query="no such thing")).output.startswith("No message")
    assert "MARK" not in (await recall(coordinator, query="MARK-003", role="user")).output
    ranged = await recall(coordinator, query="MARK-", from_seq=10, to_seq=13)
    assert [line[:3] for line in ranged.output.splitlines() if line.startswith("#")] == ["#13", "#11"]
    pattern = await recall(coordinator, query=r"port=80(0[5-6])", regex=True)
    assert "MARK-005" in pattern.output and "MARK-006" in pattern.output and "MARK-007" not in pattern.output


@pytest.mark.asyncio
async def test_output_is_bounded_and_says_how_much_more_matched():
    coordinator, ctx, _ = await mounted()
    await add_all(ctx, history(60))
    out = (await recall(coordinator, query="plain output", max_results=100)).output
    assert len(out) <= MAX_OUTPUT_TOKENS * 4 + 200
    assert "more matching message(s) not shown" in out


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({}, "'query' is required"),
        ({"query": "   "}, "'query' is required"),
        ({"query": 7}, "'query' is required"),
        ({"query": "x", "regex": "yes"}, "'regex' must be true or false"),
        ({"query": "x", "role": "robot"}, "'role' must be one of"),
        ({"query": "x", "max_results": 0}, "'max_results' must be between"),
        ({"query": "x", "from_seq": -1}, "'from_seq' must be a whole number"),
        ({"query": "(unclosed", "regex": True}, "bad regular expression"),
        ({"query": r"(\w)\1", "regex": True}, "backreferences are not supported"),
        ({"query": "(?=a)b", "regex": True}, "lookahead and lookbehind are not supported"),
        ({"query": "a{9999}", "regex": True}, "use smaller counts"),
        ({"query": "a" * 201, "regex": True}, "longer than 200"),
    ],
)
async def test_bad_input_is_one_failed_line_and_never_raises(arguments, says):
    coordinator, ctx, _ = await mounted()
    await add_all(ctx, history(3))
    out = await coordinator.get("tools")[TOOL_NAME].execute(arguments)
    assert out.success is False and says in out.output and "\n" not in out.output


@pytest.mark.asyncio
async def test_recall_results_never_feed_a_later_recall_or_the_ledger():
    coordinator, ctx, _ = await mounted({"max_tokens": 3_000, "preset": "evidence"})
    messages = history()
    await add_all(ctx, messages)
    first = await recall(coordinator, query="MARK-004")
    call = {"id": "r1", "type": "function", "function": {"name": TOOL_NAME, "arguments": '{"query": "MARK-004"}'}}
    await add_all(ctx, [{"role": "assistant", "content": "", "tool_calls": [call]}, result("r1", first.output)])
    for k in range(20, 30):  # more work: the recall's result is removed at a later boundary
        await add_all(ctx, [asst_calls(f"c{k}", name="bash"), result(f"c{k}", FILLER + f"LATER-{k}\n")])
    await add_all(ctx, [user("and now?")])
    view = await ctx.get_messages_for_request()
    again = await recall(coordinator, query="MARK-004")
    assert again.output.count("MARK-004 port=8004") == 1  # the original only, not the earlier recall
    ledger = [m["content"] for m in view if is_ledger(m)]
    assert ledger and NOTE in ledger[0]
    assert not any(line.startswith("#") for line in ledger[0].splitlines())


@pytest.mark.asyncio
async def test_the_notice_names_the_tool_only_when_it_is_mounted():
    coordinator, ctx, _ = await mounted({"max_tokens": 3_000})
    await add_all(ctx, history())
    view = await ctx.get_messages_for_request()
    assert NOTE in view[-1]["content"]


# ----- issue 30, point 8: every search is bounded and leaves the event loop free ---------------------


async def held_loop_for(call: Any) -> tuple[Any, float]:
    """(what ``call`` returned, the longest the event loop went without running another task meanwhile)."""
    longest, running = 0.0, True

    async def ticker() -> None:
        nonlocal longest
        last = time.monotonic()
        while running:
            await asyncio.sleep(0)
            now = time.monotonic()
            longest, last = max(longest, now - last), now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    try:
        returned = await call
    finally:
        running = False
        await task  # its last tick measures the stretch up to the call's return
    return returned, longest


async def ticked(call: Any) -> tuple[Any, float, int]:
    """(what ``call`` returned, the longest the loop was held, how many turns another task got meanwhile)."""
    ticks = 0

    async def count_ticks() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    counter = asyncio.create_task(count_ticks())
    returned, held = await held_loop_for(call)
    counter.cancel()
    return returned, held, ticks


ISSUE_PATTERNS = [  # (pattern, the line that took Python's re seconds, a line that matches)
    ("((a)+)+$", "a" * 26 + "!", "a" * 27),
    ("(?:(?:a)+)+$", "a" * 40 + "!", "a" * 41),
    (".*a.*a.*a.*c", "a" * 900, "a" * 899 + "c"),
    ("(a+)(a+)(a+)(a+)c", "a" * 900, "a" * 899 + "c"),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("pattern", "slow_line", "matching_line"), ISSUE_PATTERNS)
async def test_the_issues_patterns_answer_exactly_and_never_hold_the_loop(pattern, slow_line, matching_line):
    coordinator, ctx, _ = await mounted()
    await add_all(
        ctx, [user("go"), asst_calls("c1", name="bash"), result("c1", slow_line), asst_calls("c2"), result("c2", "x")]
    )
    await add_all(ctx, [asst_calls("c3", name="grep"), result("c3", matching_line), asst("done")])
    found, held = await held_loop_for(recall(coordinator, query=pattern, regex=True))
    assert found.success and held < 1.0  # Python's re held it 8 to 12 s on these lines
    labels = [line for line in found.output.splitlines() if line.startswith("#")]
    assert labels == ["#6 tool result of grep()"]


@pytest.mark.asyncio
async def test_a_search_stops_at_its_budget_inside_one_huge_message_and_yields_meanwhile():
    coordinator, ctx, _ = await mounted()
    tool = coordinator.get("tools")[TOOL_NAME]
    huge = ("a" * 1_000 + "\n") * 3_000  # 3 MB: 20.7 s for \w+: in Python's re
    await add_all(ctx, [user("go"), asst_calls("c1", name="bash"), result("c1", huge), asst("MARK-9")])
    tool.time_budget_s = 0.05
    tool.slice_s = 0.0  # a turn for the loop at every checkpoint
    colon, held = await held_loop_for(tool.execute({"query": r"\w+:", "regex": True}))
    assert colon.output.startswith("No message") and held < 1.0  # no line holds the ":" every match needs
    digit, held, ticks = await ticked(tool.execute({"query": "[a-z]+[0-9]", "regex": True}))
    assert digit.success and held < 1.0 and ticks > 2
    assert "stopped at its time limit while reading #2" in digit.output
    literal = await tool.execute({"query": "mark-9"})  # a literal: str.find, in-process
    assert "#3 assistant" in literal.output and "time limit" not in literal.output


# ----- point 9: spill files are never read; a spill directory others may write is refused ------------


@pytest.mark.asyncio
async def test_a_symlink_planted_for_a_spill_file_is_never_read(tmp_path):
    spill = tmp_path / "spill"
    coordinator, ctx, _ = await mounted({"max_tokens": 3_000, "tool_result_spill_dir": str(spill)})
    await add_all(ctx, history())
    await ctx.get_messages_for_request()
    outside = tmp_path / "outside.txt"
    outside.write_text("OUTSIDE-SECRET of another file\n")
    planted = sorted(ctx._spilled_paths)
    for path in planted:
        os.unlink(path)
        os.symlink(outside, path)
    assert planted
    out = (await recall(coordinator, query="OUTSIDE-SECRET")).output
    assert out.startswith("No message") and "OUTSIDE" not in out


# ----- point 10: only the current history, and a cache that goes with it -----------------------------


@pytest.mark.asyncio
async def test_after_set_messages_the_previous_historys_spill_files_are_not_searched(tmp_path):
    coordinator, ctx, _ = await mounted({"max_tokens": 3_000, "tool_result_spill_dir": str(tmp_path)})
    await add_all(ctx, history())
    await ctx.get_messages_for_request()
    assert "MARK-004" in (await recall(coordinator, query="MARK-004")).output
    await ctx.set_messages([system(), user("another session"), asst("nothing marked here")])
    assert (await recall(coordinator, query="MARK-004")).output.startswith("No message")


@pytest.mark.asyncio
async def test_the_text_cache_is_bounded_and_dropped_with_the_history():
    coordinator, ctx, _ = await mounted()
    await add_all(ctx, [user("go"), asst_calls("big", name="bash"), result("big", "X" * 8_000_000 + "\nNEEDLE")])
    tracemalloc.start()
    try:
        assert "NEEDLE" in (await recall(coordinator, query="needle")).output
        cached = tracemalloc.get_traced_memory()[0]
        await ctx.clear()
        gc.collect()
        left = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert cached > 8_000_000 > 1_000_000 > left  # the lowercase copy went with the history
    sizes = []
    for round_ in range(3):
        await ctx.set_messages([user(f"round {round_}"), *history(40)])
        await recall(coordinator, query="MARK-")
        sizes.append(len(ctx._recall_texts))
    assert sizes[0] == sizes[1] == sizes[2] <= len(ctx.messages)  # 501 -> 1,002 -> 1,503 before
    ctx._recall_texts.max_chars = 1_000
    await ctx.set_messages(history(5))
    await recall(coordinator, query="MARK-")
    assert ctx._recall_texts.chars <= 1_000


@pytest.mark.asyncio
async def test_a_history_replaced_during_a_search_answers_nothing_from_it():
    coordinator, ctx, _ = await mounted()
    tool = coordinator.get("tools")[TOOL_NAME]
    await add_all(ctx, [user("go"), asst_calls("c1", name="bash"), result("c1", ("a" * 1_000 + "9\n") * 2_000)])
    tool.slice_s = 0.0

    async def replace_soon() -> None:
        await asyncio.sleep(0)
        await ctx.set_messages([user("another session")])

    replacing = asyncio.create_task(replace_soon())
    found = await tool.execute({"query": "[a-z]+[0-9]$", "regex": True})
    await replacing
    assert found.success and "during the search" in found.output and "aaa" not in found.output
    assert len(ctx._recall_texts) == 0  # nothing of the old history was cached after the replacement


# ----- point 11: reused call ids, and filters on every hit --------------------------------------------


@pytest.mark.asyncio
async def test_a_recall_call_reusing_an_id_hides_no_other_result():
    coordinator, ctx, _ = await mounted()
    recall_call = {"id": "call_0", "type": "function", "function": {"name": TOOL_NAME, "arguments": "{}"}}
    await add_all(
        ctx,
        [
            user("deploy"),
            asst_calls("call_0", name="bash"),  # providers number calls per turn: call_0 in every turn
            result("call_0", "MARK-REUSED port=9000"),
            asst("checked"),
            user("what was the port?"),
            {"role": "assistant", "content": "", "tool_calls": [recall_call]},
            result("call_0", "Matches, best first:\n#2 tool result of bash()\n> MARK-REUSED port=9000"),
        ],
    )
    found = (await recall(coordinator, query="MARK-REUSED")).output
    labels = [line for line in found.splitlines() if line.startswith("#")]
    assert labels == ["#2 tool result of bash()"]  # the bash result, not the recall's copy of it
    assert recall_traffic(ctx.messages) == {5, 6}


@pytest.mark.asyncio
async def test_role_and_range_filters_hold_with_spill_files(tmp_path):
    coordinator, ctx, _ = await mounted({"max_tokens": 3_000, "tool_result_spill_dir": str(tmp_path)})
    await add_all(ctx, history())
    await ctx.get_messages_for_request()
    assert ctx._spilled_paths
    assert (await recall(coordinator, query="MARK-000", role="user")).output.startswith("No message")
    assert (await recall(coordinator, query="MARK-000", from_seq=4)).output.startswith("No message")
    found = (await recall(coordinator, query="MARK-000")).output
    assert found.count("MARK-000") == 1 and "(1 message(s) matched)" in found  # once: no spill duplicate


# ----- end to end through a real AmplifierSession ----------------------------------------------------


class RecallingProvider:
    """Answers with a tool call that reads the log, three times, then calls context_recall."""

    name = "recalling"

    def __init__(self) -> None:
        self.requests: list[ChatRequest] = []

    def get_info(self) -> ProviderInfo:
        return ProviderInfo(id="recalling", display_name="Recalling", defaults={"model": "r-1"})

    async def list_models(self) -> list[Any]:
        return []

    async def complete(self, request: ChatRequest, **kwargs: Any) -> ChatResponse:
        self.requests.append(request)
        usage = Usage(input_tokens=10, output_tokens=1, total_tokens=11)
        n = len(self.requests)
        last = [m for m in request.messages if m.role == "tool"][-1:]  # a compacted view ends on the notice
        if last and "Matches, best first" in str(last[0].content):
            return ChatResponse(content=[TextBlock(text="found it")], usage=usage)
        if n <= 12:
            return ChatResponse(
                content=[TextBlock(text="")],
                tool_calls=[ToolCall(id=f"t{n}", name="read_log", arguments={"n": n})],
                usage=usage,
            )
        call = ToolCall(id=f"t{n}", name=TOOL_NAME, arguments={"query": "MARK-001"})
        return ChatResponse(content=[TextBlock(text="")], tool_calls=[call], usage=usage)

    def parse_tool_calls(self, response: ChatResponse) -> list[ToolCall]:
        return response.tool_calls or []


class ListingOrchestrator:
    """A stand-in loop that lists the coordinator's tools to the provider and runs the calls."""

    async def execute(self, prompt, context, providers, tools, hooks, coordinator=None, **kwargs) -> str:
        await context.add_message({"role": "user", "content": prompt})
        provider = next(iter(providers.values()))
        specs = [ToolSpec(name=t.name, description=t.description, parameters=t.input_schema) for t in tools.values()]
        for _ in range(20):
            view = await context.get_messages_for_request(provider=provider)
            response = await provider.complete(ChatRequest(messages=[Message(**m) for m in view], tools=specs))
            calls = provider.parse_tool_calls(response)
            if not calls:
                text = "".join(block.text for block in response.content)
                await context.add_message({"role": "assistant", "content": text})
                return text
            await context.add_message(
                {"role": "assistant", "content": "", "tool_calls": [openai_call(c) for c in calls]}
            )
            for call in calls:
                if call.name in tools:
                    output = (await tools[call.name].execute(call.arguments)).output
                else:
                    output = (
                        FILLER + f"MARK-{int(call.arguments['n']):03d} port={8000 + call.arguments['n']}\n" + FILLER
                    )
                await context.add_message({"role": "tool", "tool_call_id": call.id, "content": output})
        raise AssertionError("never answered")


@pytest.mark.asyncio
async def test_a_real_session_lists_the_tool_and_recalls_what_compaction_removed(monkeypatch):
    made: dict[str, Any] = {}

    async def provider_mount(coordinator: Any, config: dict[str, Any] | None = None) -> None:
        made["provider"] = RecallingProvider()
        await coordinator.mount("providers", made["provider"], name="recalling")

    async def orchestrator_mount(coordinator: Any, config: dict[str, Any] | None = None) -> None:
        await coordinator.mount("orchestrator", ListingOrchestrator())

    inline_module(monkeypatch, "provider-recall-test", provider_mount)
    inline_module(monkeypatch, "loop-recall-test", orchestrator_mount)
    plan = {
        "session": {
            "orchestrator": "loop-recall-test",
            "context": {"module": "context-simple", "config": {"max_tokens": 4_000, "recall_tool": True}},
        },
        "providers": [{"module": "provider-recall-test", "config": {}}],
    }
    session = AmplifierSession(plan)
    await session.initialize()
    assert await session.execute("find the port of MARK-001") == "found it"
    requests = made["provider"].requests
    assert all(TOOL_NAME in [t.name for t in r.tools] for r in requests)
    recall_request = requests[-1]
    tool_messages = [m for m in recall_request.messages if m.role == "tool"]
    shown = json.dumps([m.model_dump(mode="json") for m in tool_messages[:-1]])
    assert "MARK-001 port=8001" not in shown  # compaction had removed it from the view
    assert "MARK-001 port=8001" in str(tool_messages[-1].content)  # the recall brought it back
    await session.cleanup()
