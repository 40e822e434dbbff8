"""`context_recall` by source (issue 43): a query naming a call's path, command or argument brings back
that call's output first, its most informative lines when it is long, pages on with ``offset``, and stays
within the tool's output bound, in every shape a host stores calls and results in."""

from __future__ import annotations

from typing import Any

import pytest

from amplifier_module_context_simple.calls import arguments_value, call_name
from amplifier_module_context_simple.recall import DESCRIPTION, INPUT_SCHEMA, MAX_OUTPUT_TOKENS
from amplifier_module_context_simple.recall_source import call_head, informative_lines
from tests.conftest import WORKLOADS, add_all, asst, by_transcript, load_transcript, result, system, user
from tests.test_calls import wrapped
from tests.test_recall import mounted, recall
from tests.test_recall_shapes import SHAPES, assistant_calls

Message = dict[str, Any]
BOUND = MAX_OUTPUT_TOKENS * 4
REPEATED = "    value = compute(value)\n"  # a line that says nothing new after its first time


def file_body(marker_at: int = 100, lines: int = 150) -> str:
    """A long file whose one informative line (a name said nowhere else) is deep inside."""
    body = [REPEATED.rstrip("\n")] * lines
    body[marker_at] = "ZX_CONFIG_PATH = '/etc/zx/settings.conf'  # read at start-up"
    return "\n".join(["def load_settings():", *body])


def mentions(count: int, start: int) -> list[Message]:
    """Assistant messages that merely mention the path (what a search by word ranks first)."""
    return [asst(f"Note {k}: src/settings_loader.py is where the settings come from.") for k in range(start, count)]


def session(shape: str = "openai", wrap: bool = False, body: str | None = None) -> list[Message]:
    output = file_body() if body is None else body
    return [
        system(),
        user("Why are the settings wrong?"),
        *mentions(12, 0),
        assistant_calls(shape, [("c1", "read_file", {"path": "src/settings_loader.py"})], "Reading it."),
        result("c1", wrapped(output) if wrap else output),
        *mentions(30, 12),
        user("Which file did it read the config from?"),
    ]


def labels(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("#")]


@pytest.mark.asyncio
@pytest.mark.parametrize("wrap", [False, True], ids=["plain", "wrapped"])
@pytest.mark.parametrize("shape", SHAPES)
async def test_a_query_naming_a_path_returns_that_calls_output_first_in_every_shape(shape: str, wrap: bool) -> None:
    coordinator, ctx, _ = await mounted()
    await add_all(ctx, session(shape, wrap))
    out = (await recall(coordinator, query="src/settings_loader.py")).output
    assert out.startswith("Output of the 1 call(s) naming it")
    assert labels(out)[0] == "#15 tool result of read_file(path=src/settings_loader.py)"
    assert "ZX_CONFIG_PATH = '/etc/zx/settings.conf'" in out  # deep in a long output: picked as informative
    assert "#14 assistant" not in out  # the message that only called it: its output is shown instead
    assert len(out) <= BOUND


@pytest.mark.asyncio
async def test_the_answer_is_the_same_in_every_shape() -> None:
    answers = set()
    for shape in SHAPES:
        for wrap in (False, True):
            coordinator, ctx, _ = await mounted()
            await add_all(ctx, session(shape, wrap))
            answers.add((await recall(coordinator, query="read_file settings_loader")).output)
    assert len(answers) == 1 and next(iter(answers)).startswith("Output of the 1 call(s) naming it")


@pytest.mark.asyncio
async def test_a_long_output_pages_on_with_offset_to_its_end() -> None:
    coordinator, ctx, _ = await mounted()
    body = "\n".join(f"row_{k:04d} = {k * 7}" for k in range(600))
    await add_all(ctx, session(body=body))
    first = (await recall(coordinator, query="src/settings_loader.py")).output
    note = next(line for line in first.splitlines() if "offset=" in line)
    assert note.endswith(", from_seq=15, to_seq=15]")
    seen, offset, pages = set(), int(note.split("offset=")[1].split(",")[0]), 0
    while True:
        page = (await recall(coordinator, query="src/settings_loader.py", from_seq=15, to_seq=15, offset=offset)).output
        assert len(page) <= BOUND and labels(page) == ["#15 tool result of read_file(path=src/settings_loader.py)"]
        rows = [line.strip() for line in page.splitlines() if line.startswith("  row_")]
        assert rows[0] == f"row_{offset:04d} = {offset * 7}"  # a page starts where offset says, in order
        assert rows == [f"row_{k:04d} = {k * 7}" for k in range(offset, offset + len(rows))]
        seen.update(rows)
        pages += 1
        if "the next: offset=" not in page:
            break
        offset = int(page.split("the next: offset=")[1].split(",")[0])
    assert seen >= {f"row_{k:04d} = {k * 7}" for k in range(int(note.split("offset=")[1].split(",")[0]), 600)}
    assert pages >= 2 and "of 600]" in page


@pytest.mark.asyncio
async def test_an_offset_past_the_end_says_so() -> None:
    coordinator, ctx, _ = await mounted()
    await add_all(ctx, session())
    out = (await recall(coordinator, query="settings_loader.py", offset=5_000)).output
    assert "[the output has 151 line(s); offset 5000 is past its end]" in out


@pytest.mark.asyncio
async def test_many_sources_and_a_huge_output_stay_within_the_bound() -> None:
    coordinator, ctx, _ = await mounted()
    messages = [system(), user("go")]
    for k in range(40):
        body = "\n".join(f"line {j} of read {k}: item_{k}_{j}" for j in range(2_000 if k % 7 else 40_000))
        messages += [
            assistant_calls("openai", [(f"c{k}", "bash", {"command": f"cat logs/run.log | head -{k + 10}"})]),
            result(f"c{k}", body),
        ]
    await add_all(ctx, [*messages, asst("logs/run.log has it all"), user("and?")])
    out = (await recall(coordinator, query="logs/run.log")).output
    assert len(out) <= BOUND and out.startswith("Output of the 40 call(s) naming it")
    assert labels(out)[0].startswith("#81 tool result of bash(command=cat logs/run.log | head -49)")  # newest first
    assert "item_39_0\n" in out and "from_seq=81, to_seq=81]" in out  # its output, and how to page on


@pytest.mark.asyncio
async def test_a_word_deep_in_a_script_does_not_make_its_output_a_source() -> None:
    coordinator, ctx, _ = await mounted()
    script = "cat > probe.py << 'EOF'\nimport os\nprint(os.environ['ZEBRA_FLAG'])\nEOF\npython probe.py"
    await add_all(
        ctx,
        [user("go"), assistant_calls("openai", [("c1", "bash", {"command": script})]), result("c1", "yes"), asst("ok")],
    )
    out = (await recall(coordinator, query="ZEBRA_FLAG")).output
    assert out.startswith("Matches, best first")  # the line of the script, not a call named by it
    named = (await recall(coordinator, query="probe.py")).output
    assert named.startswith("Output of the 1 call(s) naming it") and "\n  yes" in named


def test_a_calls_head_is_each_arguments_first_line() -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "edit", "arguments": '{"path": "a.py", "new": "x = 1\\ny = 2"}'},
    }
    assert call_head(call) == "edit(path=a.py, new=x = 1)"


def test_the_informative_lines_keep_their_order_and_mark_the_gaps() -> None:
    lines, note = informative_lines(file_body(), 0, 600)
    assert lines[0] == "  def load_settings():" and any("ZX_CONFIG_PATH" in line for line in lines)
    assert any(line.startswith("  [... lines ") for line in lines)
    assert note.startswith("[") and "of 151 lines shown, the most informative" in note
    assert sum(len(line) + 1 for line in lines) <= 600 + 100


def test_the_description_says_how_to_ask_for_a_files_or_a_commands_output() -> None:
    assert "give its path or command as the query" in DESCRIPTION and "offset" in DESCRIPTION
    assert INPUT_SCHEMA["properties"]["offset"]["minimum"] == 0


@pytest.mark.asyncio
async def test_an_offset_for_a_query_naming_no_call_says_so() -> None:
    coordinator, ctx, _ = await mounted()
    await add_all(ctx, session())
    out = (await recall(coordinator, query="ZX_CONFIG_PATH", offset=10)).output
    assert "ZX_CONFIG_PATH" in out and "no call's path or command holds it" in out


def _cues(messages: list[Message]) -> dict[str, int]:
    """For the tool results of a transcript: the first path-like word of their call's first argument line
    -> the position of the newest result whose call's arguments name it on one of their first lines."""
    calls, newest = {}, {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            calls[call["id"]] = call
    for index, message in enumerate(messages):
        call = calls.get(message.get("tool_call_id")) if message.get("role") == "tool" else None
        if call is None or call_name(call) == "context_recall":
            continue
        value = arguments_value(call)
        heads = [str(v).lstrip().split("\n")[0][:200] for v in (value.values() if isinstance(value, dict) else [value])]
        for cue in list(newest):
            if any(cue.lower() in " ".join(head.split()).lower() for head in heads):
                newest[cue] = index
        words = [w for head in heads for w in head.split() if ("/" in w or "." in w.strip(".")) and len(w) > 4]
        if words and words[0] not in newest:
            newest[words[0]] = index
    return newest


@pytest.mark.asyncio
@pytest.mark.parametrize("path", by_transcript(WORKLOADS), ids=lambda p: p.stem[-40:])
async def test_on_real_transcripts_a_calls_path_brings_its_newest_output_first_within_the_bound(path) -> None:
    coordinator, ctx, _ = await mounted()
    messages = load_transcript(path)
    await add_all(ctx, messages)
    cues = sorted(_cues(messages).items())[:12]
    for cue, index in cues:
        out = (await recall(coordinator, query=cue)).output
        assert len(out) <= BOUND, cue
        assert out.startswith("Output of the ") and labels(out)[0].startswith(f"#{index} tool result of "), cue
