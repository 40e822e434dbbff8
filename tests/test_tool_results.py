"""Tool-result truncation: the legacy string, head+tail, precedence, validation, exemptions, names.

Also the seed's mechanism demonstration (the answer sits in the last line) and the byte-identity
proof that the shipped defaults, passed explicitly or not, emit the legacy bytes on real replays.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.config import parse_config
from amplifier_module_context_simple.tool_results import (
    ToolResultSettings,
    format_truncated,
    resolve_budget,
    truncate_tool_result,
)

WORKLOADS = Path(__file__).parent / "data" / "workloads"
TS = "2025-01-01T00:00:00.000+00:00"
LOGGER = "amplifier_module_context_simple"


# ----- helpers ------------------------------------------------------------------------------------


def call(call_id: str, name: str, shape: str = "openai") -> dict[str, Any]:
    """An assistant message with one tool call, in the OpenAI or a flat shape."""
    if shape == "openai":
        spec: dict[str, Any] = {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
    else:
        spec = {"id": call_id, shape: name, "arguments": {}}
    return {"role": "assistant", "content": "", "tool_calls": [spec], "metadata": {"timestamp": TS}}


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content, "metadata": {"timestamp": TS}}


def load(name: str) -> list[dict[str, Any]]:
    """A shipped transcript, each message stamped with a fixed timestamp and its line index."""
    lines = (WORKLOADS / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    messages = [json.loads(line) for line in lines if line.strip()]
    for index, message in enumerate(messages):
        message["metadata"] = {"timestamp": TS, "ix": index}
    return messages


def session_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m)) // 4 for m in messages)


async def replay(
    messages: list[dict[str, Any]], budget: int, resume_at: int | None = None, **config: Any
) -> list[list[dict[str, Any]]]:
    """Add the transcript message by message and take a view after each one.

    With ``resume_at``, the first messages arrive through ``set_messages`` (a resumed session).
    """
    cm = SimpleContextManager(**config)
    views = []
    if resume_at is not None:
        await cm.set_messages(messages[:resume_at])
        messages = messages[resume_at:]
    for message in messages:
        await cm.add_message(message)
        views.append(await cm.get_messages_for_request(token_budget=budget))
    return views


def dump(views: list[list[dict[str, Any]]]) -> str:
    return "\n".join(json.dumps(view, sort_keys=True, ensure_ascii=False) for view in views)


def truncated_by_ix(views: list[list[dict[str, Any]]]) -> dict[int, dict[str, Any]]:
    """Every truncated result seen in any view, keyed by its transcript line index."""
    return {m["metadata"]["ix"]: m for view in views for m in view if m.get("_truncated")}


# ----- the legacy string, pinned literally ---------------------------------------------------------

DIGITS = "0123456789" * 100  # 1,000 chars -> ~250 tokens


def test_legacy_replacement_string_is_pinned_literally():
    cm = SimpleContextManager()
    out = cm._truncate_tool_result(result("c1", DIGITS))
    # Oracle written out by hand from the legacy format, not computed by the code under test.
    expected = (
        "[truncated: ~250 tokens - call tool again if needed] "
        "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
        "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
        "01234567890123456789012345678901234567890123456789..."
    )
    assert out["content"] == expected
    assert out["_truncated"] is True and out["_original_tokens"] == 250
    assert out["tool_call_id"] == "c1" and out["role"] == "tool"


def test_legacy_token_count_uses_thousands_separators():
    out = SimpleContextManager()._truncate_tool_result(result("c1", "x" * 40_004))
    assert out["content"] == "[truncated: ~10,001 tokens - call tool again if needed] " + "x" * 250 + "..."


def test_results_within_budget_and_non_string_content_stay_the_same_object():
    cm = SimpleContextManager()
    short = result("c1", "y" * 250)
    blocks = {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "z" * 5000}]}
    assert cm._truncate_tool_result(short) is short
    assert cm._truncate_tool_result(blocks) is blocks


@pytest.mark.parametrize(
    ("config", "size"),
    [({}, 260), ({}, 300), ({"tool_result_budget_tokens": 30, "tool_result_shape": "head_tail"}, 130)],
)
def test_a_result_just_over_its_budget_stays_whole_rather_than_growing(config, size):
    # Issue 12 item 13: 260 characters became 93 -> 115 tokens with head, 130 -> 159 with head_tail.
    cm = SimpleContextManager(**config)
    near = result("c1", "w" * size)
    assert cm._truncate_tool_result(near) is near


@pytest.mark.parametrize("shape", ["head", "head_tail"])
def test_truncation_always_saves_tokens(shape):
    cm = SimpleContextManager(tool_result_budget_tokens=40, tool_result_shape=shape, truncate_chars=100)
    for size in range(100, 1200, 7):
        message = result("c1", "v" * size)
        out = cm._truncate_tool_result(message)
        assert out is message or len(str(out)) // 4 < len(str(message)) // 4, size
        assert out is not message or size < 400, size  # and far over the budget it does truncate


@pytest.mark.asyncio
async def test_no_truncation_is_recorded_when_it_would_not_save():
    cm = SimpleContextManager(protected_tool_results=0)
    history = [{"role": "user", "content": "task"}]
    for index, size in enumerate([260, 40_000, 10, 10, 10, 10, 10, 10]):  # level 1 reaches the first two
        history += [call(f"c{index}", "read"), result(f"c{index}", "n" * size)]
    for message in [*history, {"role": "user", "content": "next"}]:
        await cm.add_message(message)
    view = await cm.get_messages_for_request(token_budget=9_000)
    assert cm._sticky_level == 1 and cm._truncated_seqs == {4}
    assert [m["content"] for m in view if m.get("tool_call_id") == "c0"] == ["n" * 260]


# ----- head_tail -------------------------------------------------------------------------------------


def test_head_tail_keeps_both_ends_with_the_omitted_marker():
    content = "".join(chr(ord("a") + i % 26) for i in range(5000))
    cm = SimpleContextManager(tool_result_budget_tokens=10, tool_result_shape="head_tail")
    out = cm._truncate_tool_result(result("c1", content))
    expected = (
        "[truncated: ~1,250 tokens - call tool again if needed] "
        "abcdefghijklmnopqrst\n...[4,960 chars omitted]...\nopqrstuvwxyzabcdefgh"
    )
    assert out["content"] == expected
    assert not out["content"].endswith("...")  # head_tail has no trailing ellipsis


def test_head_tail_splits_an_odd_budget_head_down_tail_up():
    assert (
        format_truncated("abcdefghij", 5, "head_tail", "r")
        == "[truncated: ~2 tokens - r] ab\n...[5 chars omitted]...\nhij"
    )


def test_head_tail_is_char_based_on_a_single_huge_line():
    line = "A" * 100_000 + "THE-END"
    out = format_truncated(line, 40, "head_tail", "r")
    assert out.endswith("\n" + ("A" * 13 + "THE-END"))
    assert "...[99,967 chars omitted]..." in out


# ----- precedence ------------------------------------------------------------------------------------


def test_precedence_per_tool_then_global_then_legacy():
    both = ToolResultSettings(truncate_chars=100, budget_tokens=20, shape="head_tail", budget_by_tool=(("grep", 10),))
    assert resolve_budget("grep", both) == (40, "head_tail")
    assert resolve_budget("bash", both) == (80, "head_tail")
    assert resolve_budget(None, both) == (80, "head_tail")
    per_tool_only = ToolResultSettings(truncate_chars=100, shape="head_tail", budget_by_tool=(("grep", 10),))
    assert resolve_budget("grep", per_tool_only) == (40, "head_tail")
    # The legacy path is always head-only, whatever the shape says.
    assert resolve_budget("bash", per_tool_only) == (100, "head")


def test_per_tool_budget_only_leaves_other_tools_on_the_legacy_bytes():
    content = DIGITS * 3
    plain = SimpleContextManager()._truncate_tool_result(result("c1", content))
    cm = SimpleContextManager(tool_result_budget_by_tool={"grep": 10}, tool_result_shape="head_tail")
    assert cm._truncate_tool_result({**result("c1", content), "name": "bash"})["content"] == plain["content"]
    grep = cm._truncate_tool_result({**result("c1", content), "name": "grep"})["content"]
    assert "...[2,960 chars omitted]..." in grep


# ----- invalid values --------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -3, 2.5, "lots", True, [10]])
def test_bad_global_budget_is_disabled_with_a_warning(caplog, bad):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        cm = SimpleContextManager(tool_result_budget_tokens=bad)
    assert cm.tool_result_budget_tokens is None
    assert "tool_result_budget_tokens" in caplog.text
    out = cm._truncate_tool_result(result("c1", DIGITS))
    assert out["content"] == SimpleContextManager()._truncate_tool_result(result("c1", DIGITS))["content"]


def test_unknown_shape_falls_back_to_head_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        cm = SimpleContextManager(tool_result_shape="middle", tool_result_budget_tokens=10)
    assert cm.tool_result_shape == "head"
    assert "tool_result_shape" in caplog.text
    assert cm._truncate_tool_result(result("c1", DIGITS))["content"].endswith(DIGITS[:40] + "...")


def test_non_mapping_per_tool_budget_is_ignored_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        cm = SimpleContextManager(tool_result_budget_by_tool=["grep", 10])
    assert cm.tool_result_budget_by_tool == {}
    assert "tool_result_budget_by_tool" in caplog.text


def test_bad_per_tool_entries_are_dropped_one_by_one_naming_the_key(caplog):
    config = {"grep_zero": 0, "bash_float": 2.5, "flag_bool": True, "": 5, 7: 10, "ok": 3}
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        parsed = parse_config({"tool_result_budget_by_tool": config})
    assert parsed["tool_result_budget_by_tool"] == {"ok": 3}
    for key in ("grep_zero", "bash_float", "flag_bool", "7"):
        assert key in caplog.text
    assert "'ok'" not in caplog.text


def test_good_values_log_nothing(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        SimpleContextManager(
            tool_result_budget_tokens=100,
            tool_result_shape="head_tail",
            tool_result_budget_by_tool={"grep": 10},
            tool_result_exempt_tools=["load_skill"],
        )
    assert caplog.text == ""


# ----- exemptions and tool names -----------------------------------------------------------------------


async def pressure_session(cm: SimpleContextManager, names: list[str], size: int = 2000) -> None:
    await cm.add_message({"role": "user", "content": "go", "metadata": {"timestamp": TS}})
    for i, name in enumerate(names):
        await cm.add_message(call(f"c{i}", name))
        await cm.add_message(result(f"c{i}", f"{name} output {i}\n" + "." * size))


@pytest.mark.asyncio
async def test_exempt_tool_results_are_never_truncated_even_at_the_last_rungs():
    names = ["load_skill", "bash"] * 15
    cm = SimpleContextManager(tool_result_exempt_tools=["load_skill"], protected_tool_results=0)
    await pressure_session(cm, names)
    seen_bash = 0
    for budget in (12_000, 8_000, 5_000):
        for message in await cm.get_messages_for_request(token_budget=budget):
            if message.get("role") == "tool" and message["content"].startswith("load_skill"):
                assert not message.get("_truncated")
                assert message["content"].endswith("." * 2000)
            seen_bash += bool(message.get("_truncated"))
    assert seen_bash > 0  # the ladder did truncate: the exemption was really exercised
    skill = next(m for m in cm.messages if m.get("tool_call_id") == "c0")
    assert cm._truncate_tool_result(skill) is skill


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", ["openai", "name", "tool"])
async def test_tool_names_resolve_by_call_id_in_every_call_shape(shape):
    cm = SimpleContextManager(tool_result_budget_by_tool={"grep": 5})
    await cm.add_message(call("c1", "grep", shape))
    await cm.add_message(result("c1", DIGITS))
    out = cm._truncate_tool_result(cm.messages[-1])
    assert out["content"] == "[truncated: ~250 tokens - call tool again if needed] 01234567890123456789..."


@pytest.mark.asyncio
async def test_name_field_then_metadata_then_call_id():
    cm = SimpleContextManager(tool_result_budget_by_tool={"a": 1, "b": 2, "c": 3})
    await cm.add_message(call("x", "c"))
    by_name = {**result("x", DIGITS), "name": "a", "metadata": {"tool_name": "b"}}
    by_metadata = {**result("x", DIGITS), "metadata": {"tool_name": "b"}}
    lengths = [len(cm._truncate_tool_result(m)["content"].split("] ", 1)[1]) for m in (by_name, by_metadata)]
    assert lengths == [4 + 3, 8 + 3]
    await cm.add_message(result("x", DIGITS))
    assert cm._truncate_tool_result(cm.messages[-1])["content"].endswith("] " + DIGITS[:12] + "...")


@pytest.mark.asyncio
async def test_tool_names_are_rebuilt_by_set_messages():
    history = [call("c1", "grep"), result("c1", DIGITS), call("c2", "bash"), result("c2", DIGITS)]
    cm = SimpleContextManager(tool_result_budget_by_tool={"grep": 5, "bash": 7})
    await cm.add_message(call("c1", "bash"))  # a stale name for the same id, forgotten by set_messages
    await cm.set_messages(history)
    assert cm._tool_name_by_call_id == {"c1": "grep", "c2": "bash"}
    heads = [cm._truncate_tool_result(m)["content"].split("] ", 1)[1] for m in cm.messages if m["role"] == "tool"]
    assert heads == [DIGITS[:20] + "...", DIGITS[:28] + "..."]


def reused_ids_history() -> list[dict[str, Any]]:
    """Two turns of a provider that numbers calls per turn: ``call_0`` is first bash, then read_file."""
    return [
        {"role": "user", "content": "go"},
        call("call_0", "bash"),
        result("call_0", DIGITS),
        {"role": "user", "content": "again"},
        call("call_0", "read_file"),
        result("call_0", DIGITS),
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize("resumed", [False, True], ids=["live", "after set_messages"])
async def test_a_reused_call_id_keeps_each_result_under_its_own_tool(resumed: bool):
    cm = SimpleContextManager(tool_result_exempt_tools=["bash"], tool_result_budget_by_tool={"read_file": 3})
    if resumed:
        await cm.set_messages(reused_ids_history())
    else:
        for message in reused_ids_history():
            await cm.add_message(message)
    bash_result, read_result = cm.messages[2], cm.messages[5]
    assert cm._truncate_tool_result(bash_result) is bash_result  # exempt: its own call was bash
    assert cm._truncate_tool_result(read_result)["content"].endswith("] " + DIGITS[:12] + "...")


@pytest.mark.asyncio
async def test_the_default_configuration_harvests_no_tool_names():
    cm = SimpleContextManager()
    for message in reused_ids_history():
        await cm.add_message(message)
    await cm.set_messages(reused_ids_history())
    await cm.get_messages_for_request(token_budget=10)  # truncates every result
    assert cm._tool_name_by_call_id == {} and cm._tool_name_by_seq == {}
    cm.tool_result_exempt_tools = ["bash"]  # a live knob: names are read when first needed
    assert cm._truncate_tool_result(cm.messages[2]) is cm.messages[2]
    assert cm._tool_name_by_call_id == {"call_0": "read_file"}


# ----- the seed's mechanism demonstration: the answer is in the last line --------------------------------


def _pytest(i: int, rng: random.Random) -> str:
    lines = [f"tests/test_mod{i}.py::test_case_{k} PASSED" for k in range(rng.randint(5, 150))]
    lines += ["=" * 20 + " FAILURES " + "=" * 20, f"E   AssertionError: assert {i} == {i + 1}"]
    return "\n".join(lines + [f"FAILED tests/test_mod{i}.py::test_target_{i} - AssertionError"])


def _grep(i: int, rng: random.Random) -> str:
    lines = [f"src/pkg/file_{k}.py:{rng.randint(1, 900)}:    import os" for k in range(rng.randint(5, 150))]
    return "\n".join(lines + [f"src/pkg/answer_{i}.py:{100 + i}:def resolve_config_{i}(value):"])


def _git_log(i: int, rng: random.Random) -> str:
    lines: list[str] = []
    for k in range(rng.randint(2, 50)):
        lines += [f"commit {rng.getrandbits(160):040x}", "Author: Dev <dev@example.org>", f"    change {k}", ""]
    return "\n".join(lines + [f"    Revert 'feature {i}': introduced regression in parser"])


def _build(i: int, rng: random.Random) -> str:
    lines = [f"[{k:3d}/150] Compiling CXX object src/core.dir/unit_{k}.cpp.o" for k in range(rng.randint(5, 150))]
    return "\n".join(lines + [f"ld: undefined reference to `symbol_{i}::init()'"])


DEMO_WORKLOADS: dict[str, Callable[[int, random.Random], str]] = {
    "pytest": _pytest,
    "grep": _grep,
    "git_log": _git_log,
    "build": _build,
}


async def demo_arm(kind: str, **config: Any) -> tuple[int, int, int]:
    """(truncated results, of which keep their last line, of which the last line fits half the budget)."""
    rng = random.Random(kind)
    cm = SimpleContextManager(**config)
    await cm.add_message({"role": "user", "content": f"find the {kind} answer", "metadata": {"timestamp": TS}})
    last_lines, seen = {}, {}
    for i in range(40):
        output = DEMO_WORKLOADS[kind](i, rng)
        last_lines[f"c{i}"] = output.rsplit("\n", 1)[1]
        await cm.add_message(call(f"c{i}", "bash"))
        await cm.add_message(result(f"c{i}", output))
        for message in await cm.get_messages_for_request(token_budget=30_000):
            if message.get("_truncated"):
                seen[message["tool_call_id"]] = message["content"]
    kept = sum(last_lines[c] in text for c, text in seen.items())
    short = sum(len(last_lines[c]) < 62 * 4 // 2 for c in seen)
    return len(seen), kept, short


@pytest.mark.asyncio
async def test_mechanism_demo_head_tail_keeps_the_answer_at_the_same_budget():
    control = {kind: await demo_arm(kind) for kind in DEMO_WORKLOADS}
    neutral = {
        kind: await demo_arm(kind, tool_result_budget_tokens=62, tool_result_shape="head_tail")
        for kind in DEMO_WORKLOADS
    }
    # Shipped defaults (250 chars, head): no truncated result keeps its tail.
    assert all(kept == 0 for _, kept, _ in control.values()), control
    # Same bytes kept (62 tokens = 248 chars), head_tail: every short last line survives.
    assert all(kept == short for _, kept, short in neutral.values()), neutral
    assert sum(n for n, _, _ in control.values()) >= 20 and sum(n for n, _, _ in neutral.values()) >= 20
    assert all(n >= 5 for n, _, _ in neutral.values()), neutral  # every workload really truncated


# ----- byte identity on real replays -------------------------------------------------------------------

# (session, budget as a fraction of the session's tokens): chosen so truncated results stay in the views.
IDENTITY_SESSIONS = (
    ("msa__pr814__deepseek_lite_dev__pylint-dev__astroid-1268", 0.3),
    ("msa__pr816__deepseek_reasoner_dev__sqlfluff__sqlfluff-1517", 0.3),
    ("agentperf__agentperf-default-v1__django__django-14500", 0.5),
)
EXPLICIT_DEFAULTS = {
    "tool_result_budget_tokens": None,
    "tool_result_shape": "head",
    "tool_result_budget_by_tool": {},
    "tool_result_exempt_tools": [],
    "tool_result_spill_dir": None,
}


@pytest.mark.asyncio
@pytest.mark.parametrize("truncate_chars", [250, 40])
async def test_defaults_are_byte_identical_to_legacy_on_real_replays(truncate_chars):
    base = {"truncate_chars": truncate_chars} if truncate_chars != 250 else {}
    for name, fraction in IDENTITY_SESSIONS:
        messages = load(name)
        budget = int(session_tokens(messages) * fraction)
        default = dump(await replay(messages, budget, **base))
        explicit = dump(await replay(messages, budget, truncate_chars=truncate_chars, **EXPLICIT_DEFAULTS))
        unseen_tool = dump(await replay(messages, budget, **base, tool_result_budget_by_tool={"never_called": 1}))
        treated = dump(
            await replay(messages, budget, **base, tool_result_budget_tokens=62, tool_result_shape="head_tail")
        )
        assert default.count("[truncated: ") >= 20, name  # non-vacuous: many truncated results compared
        assert default == explicit, name
        assert default == unseen_tool, name
        assert treated != default, name  # negative control: the comparison sees a change when there is one


# ----- per-tool budgets and exemptions on a real transcript ------------------------------------------

TAU_CONFIG = {
    "tool_result_budget_tokens": 50,
    "tool_result_budget_by_tool": {"search_direct_flight": 20},
    "tool_result_exempt_tools": ["get_reservation_details"],
    "tool_result_shape": "head_tail",
    # Room for truncation before removal, so truncated results stay visible in the views.
    "target_usage": 0.8,
    "protected_tool_results": 2,
}


def tau_session() -> tuple[list[dict[str, Any]], dict[str, str]]:
    """A real transcript with the tool results' ``name`` stripped: names must come from the calls."""
    messages = [{k: v for k, v in m.items() if k != "name"} for m in load("taubench__airline__task002__trial1")]
    names = {c["id"]: c["function"]["name"] for m in messages for c in m.get("tool_calls") or []}
    return messages, names


@pytest.mark.asyncio
@pytest.mark.parametrize("resume_at", [None, 36])
async def test_per_tool_budgets_and_exemptions_on_a_real_transcript(resume_at):
    messages, names = tau_session()
    budget = int(session_tokens(messages) * 0.5)
    views = await replay(messages, budget, resume_at=resume_at, **TAU_CONFIG)
    truncated = truncated_by_ix(views)
    by_tool: dict[str, int] = {}
    for ix, message in truncated.items():
        tool = names[messages[ix]["tool_call_id"]]
        by_tool[tool] = by_tool.get(tool, 0) + 1
        chars = (20 if tool == "search_direct_flight" else 50) * 4
        expected = format_truncated(messages[ix]["content"], chars, "head_tail", "call tool again if needed")
        assert message["content"] == expected, (ix, tool)
    # Both paths were exercised: the per-tool budget and the global one.
    assert by_tool.get("search_direct_flight", 0) >= 3 and len(by_tool) >= 2, by_tool
    assert "get_reservation_details" not in by_tool
    exempt = [m for view in views for m in view if names.get(m.get("tool_call_id")) == "get_reservation_details"]
    assert all(m["content"] == messages[m["metadata"]["ix"]]["content"] for m in exempt)
    if resume_at is None:
        assert exempt
    else:  # some truncated results answer calls that only set_messages saw
        assert min(truncated) < resume_at


@pytest.mark.asyncio
async def test_the_exempt_tool_would_be_truncated_without_the_exemption():
    messages, names = tau_session()
    config = {**TAU_CONFIG, "tool_result_exempt_tools": []}
    truncated = truncated_by_ix(await replay(messages, int(session_tokens(messages) * 0.5), **config))
    assert "get_reservation_details" in {names[messages[ix]["tool_call_id"]] for ix in truncated}


def test_pure_truncation_matches_the_manager_for_the_same_settings():
    settings = ToolResultSettings(budget_tokens=30, shape="head_tail")
    message = result("c1", DIGITS)
    cm = SimpleContextManager(tool_result_budget_tokens=30, tool_result_shape="head_tail")
    assert truncate_tool_result(message, settings, None) == cm._truncate_tool_result(message)
