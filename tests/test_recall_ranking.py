"""`context_recall` finds what the agent half-remembers (issue 32): lines as the agent saw them, several
words in one query, results ranked by how well they match, and an output that says how to narrow."""

from __future__ import annotations

import json
from typing import Any

import pytest

from amplifier_module_context_simple.recall import DESCRIPTION, INPUT_SCHEMA, MAX_OUTPUT_TOKENS, TOOL_NAME
from amplifier_module_context_simple.recall_rank import query_words
from tests.conftest import add_all, asst, result, user
from tests.test_recall import FILLER, history, mounted, recall, ticked

Message = dict[str, Any]


def bash(call_id: str, command: str, text: str = "") -> Message:
    arguments = json.dumps({"command": command})
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "bash", "arguments": arguments}}],
    }


def seqs(output: str) -> list[int]:
    """The message numbers of the hits, in the order shown."""
    return [int(line[1:].split(" ")[0]) for line in output.splitlines() if line.startswith("#")]


# ----- what the agent saw ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_call_is_searched_and_shown_decoded_line_by_line() -> None:
    coordinator, ctx, _ = await mounted()
    command = "cd /repo && export DJANGO_SETTINGS=ci\npytest tests/test_login.py -k expired --maxfail=1"
    await add_all(ctx, [user("run the tests"), bash("c1", command), result("c1", "1 passed"), asst("ok")])
    out = (await recall(coordinator, query="maxfail")).output
    assert "#1 assistant\n  bash(command=cd /repo && export DJANGO_SETTINGS=ci\n" in out
    assert "> pytest tests/test_login.py -k expired --maxfail=1)" in out  # the whole line, never "\\n" escapes
    assert "\\n" not in out


@pytest.mark.asyncio
async def test_a_long_line_is_cut_around_every_word_of_the_query() -> None:
    coordinator, ctx, _ = await mounted()
    line = "x" * 3_000 + " alpha_key=17 " + "y" * 30_000 + " omega_key=99 " + "z" * 3_000
    await add_all(ctx, [user("go"), bash("c1", "dump"), result("c1", f"head\n{line}\ntail"), asst("ok")])
    out = (await recall(coordinator, query="alpha_key omega_key")).output
    assert "alpha_key=17" in out and "omega_key=99" in out and "..." in out
    assert len(out) <= MAX_OUTPUT_TOKENS * 4


# ----- several words, ranked ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_words_on_one_line_rank_above_nearby_lines_above_apart() -> None:
    coordinator, ctx, _ = await mounted()
    far = "ForeignKey declared here\n" + FILLER + "and to_field much later"
    await add_all(
        ctx,
        [
            user("why does the rename fail?"),
            asst("The ForeignKey keeps to_field='old_id' after the rename."),  # 1: one line
            asst("The ForeignKey is rebuilt.\nIts to_field is read again."),  # 2: nearby lines
            asst(far),  # 3: apart
            asst("Only ForeignKey here."),  # 4: one word only
            asst("So: foreignkey to_field is stale."),  # 5: the query as typed
        ],
    )
    out = (await recall(coordinator, query="ForeignKey to_field")).output
    assert out.startswith("Matches, best first (4 message(s) matched):")
    assert seqs(out) == [5, 1, 2, 3]


@pytest.mark.asyncio
async def test_a_rarer_word_weighs_more_and_recency_breaks_ties() -> None:
    coordinator, ctx, _ = await mounted()
    common = [asst(f"the build log, part {k}") for k in range(8)]
    await add_all(ctx, [user("go"), asst("build ZX9_FAIL seen"), *common, asst("build ok again"), user("?")])
    # No message holds all three words: the one holding the rare word ranks first.
    out = (await recall(coordinator, query="build ZX9_FAIL misspeled")).output
    assert out.startswith('No message holds all of "build", "zx9_fail", "misspeled"')
    assert seqs(out)[0] == 1
    tied = (await recall(coordinator, query="build log part")).output
    assert seqs(tied) == list(range(9, 1, -1))  # equal matches: the newest first


@pytest.mark.asyncio
async def test_messages_the_view_lacks_rank_first_and_say_so() -> None:
    coordinator, ctx, _ = await mounted({"max_tokens": 3_000})
    await add_all(ctx, history())
    await add_all(ctx, [asst("port=8000 is what MARK-000 used"), user("and?")])
    await ctx.get_messages_for_request()
    out = (await recall(coordinator, query="MARK-000")).output
    assert seqs(out) == [3, 44]  # the removed result before the newer message still in view
    assert "#3 tool result of bash() (removed from your view)" in out and "#44 assistant\n" in out


@pytest.mark.asyncio
async def test_the_output_says_how_many_more_matched_and_how_to_narrow() -> None:
    coordinator, ctx, _ = await mounted()
    await add_all(ctx, history(60))
    out = (await recall(coordinator, query="plain output", max_results=5)).output
    last = out.splitlines()[-1]
    assert last.startswith("[55 more matching message(s) not shown (#")
    assert last.endswith("; narrow with more words, role, or from_seq/to_seq]")
    assert len(out) <= MAX_OUTPUT_TOKENS * 4


def test_the_description_teaches_the_multi_word_form() -> None:
    query = INPUT_SCHEMA["properties"]["query"]["description"]
    assert "'parse_config settings.py'" in query and "all of them" in query
    assert "'ForeignKey to_field' finds lines holding both" in DESCRIPTION and "more words" in DESCRIPTION
    assert INPUT_SCHEMA["required"] == ["query"] and set(INPUT_SCHEMA["properties"]) == {
        "query",
        "regex",
        "role",
        "from_seq",
        "to_seq",
        "max_results",
        "offset",
    }


def test_query_words_split_on_white_space_and_keep_quoted_phrases() -> None:
    assert query_words('  Parse_Config   "missing key"  settings.py ') == ("parse_config", "missing key", "settings.py")
    assert query_words("a a b") == ("a", "b")
    assert len(query_words(" ".join(f"w{k:02d}" + "x" * k for k in range(20)))) == 8


# ----- as safe as before -------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_several_words_over_a_huge_message_stay_bounded_and_yield() -> None:
    coordinator, ctx, _ = await mounted()
    tool = coordinator.get("tools")[TOOL_NAME]
    block = "alpha line\n" * 3 + "filler\n" * 3 + "omega line\n" * 3 + "filler\n" * 3
    huge = block * 60_000  # 3.6 MB: both words on 180,000 lines, never on nearby ones
    await add_all(ctx, [user("go"), bash("c1", "cat log"), result("c1", huge), asst("done")])
    tool.slice_s = 0.0
    found, held, ticks = await ticked(tool.execute({"query": "alpha omega"}))
    assert found.success and held < 1.0 and ticks > 2
    assert seqs(found.output) == [2] and "[" in found.output  # apart: matched, with the lines left counted
    tool.time_budget_s = 0.0
    late = await tool.execute({"query": "alpha omega"})
    assert "stopped at its time limit" in late.output
