"""Evidence-preserving compaction: digests, supersession, dedupe, their stickiness and resume, presets."""

from __future__ import annotations

import asyncio
import json

import pytest

from amplifier_module_context_simple import PRESETS, SimpleContextManager
from amplifier_module_context_simple.config import DEFAULTS, parse_config
from amplifier_module_context_simple.digest import (
    DEDUPED,
    DIGEST,
    SUPERSEDED,
    distinctive_tokens,
    render,
    repeated_line_indices,
    select_lines,
)
from amplifier_module_context_simple.supersession import superseded_indices

EVIDENCE = {"evidence_supersede": True, "evidence_dedupe": True, "evidence_digest": True}


def call(call_id: str, name: str, args: dict) -> dict:
    fn = {"name": name, "arguments": json.dumps(args)}
    return {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "type": "function", "function": fn}]}


def result(call_id: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def filler(n: int, tag: str) -> str:
    return "\n".join(f"plain words of output number {i} for {tag} nothing special here" for i in range(n))


def session() -> list[dict]:
    """A coding session: the same file read twice, a failing test with a traceback, lots of filler."""
    traceback = (
        filler(30, "pytest")
        + '\nFile "src/loader/core.py", line 212, in load_config\nValueError: bad shard_count_v2\n'
        + "=== 1 failed, 41 passed in 3.21s ==="
    )
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Fix the flaky loader please."}]
    steps = [
        ("c1", "read_file", {"path": "src/loader/core.py"}, filler(60, "core v1")),
        ("c2", "bash", {"cmd": "pytest -x"}, traceback),
        ("c3", "read_file", {"path": "src/loader/core.py"}, filler(60, "core v2")),
        ("c4", "bash", {"cmd": "ls"}, filler(40, "ls")),
        ("c5", "bash", {"cmd": "git diff"}, filler(40, "diff")),
    ]
    for call_id, name, args, output in steps:
        messages.append(call(call_id, name, args))
        messages.append(result(call_id, output))
        messages.append({"role": "assistant", "content": f"Looked at {call_id}; next step."})
    messages.append({"role": "user", "content": "Go on."})
    return messages


async def fill(ctx: SimpleContextManager, messages: list[dict]) -> None:
    for message in messages:
        await ctx.add_message(message)


def views(config: dict, budget: int, messages: list[dict] | None = None) -> tuple[SimpleContextManager, list]:
    """Requests before every assistant message and at the end; returns the manager and every view."""
    ctx = SimpleContextManager(protected_tool_results=1, **config)
    out = []

    async def run() -> None:
        for message in messages or session():
            if message["role"] == "assistant":
                out.append(await ctx.get_messages_for_request(token_budget=budget))
            await ctx.add_message(message)
        out.append(await ctx.get_messages_for_request(token_budget=budget))

    asyncio.run(run())
    return ctx, out


# ----- pure planners -------------------------------------------------------------------------------


def test_distinctive_tokens_keep_paths_identifiers_and_long_numbers_only() -> None:
    found = distinctive_tokens("see src/a/b.py and os.path.join, shard_count_v2 fooBar x1 12 4096 the word")
    assert {"src/a/b.py", "os.path.join", "shard_count_v2", "fooBar", "4096"} <= found
    assert not {"word", "the", "x1", "12"} & found


def test_select_lines_prefers_errors_and_unknown_identifiers_within_budget() -> None:
    text = "nothing to see in this line\nValueError: bad thing happened\nuses known_name_a here\nnew_name_b appears"
    kept = select_lines(text, {"known_name_a"}, budget_tokens=20)
    assert kept == (1, 3)  # the error line and the line with an identifier found nowhere else
    assert select_lines(text, set(), budget_tokens=8) == (1,)  # the budget stops it


def test_render_keeps_lines_verbatim_and_says_what_happened() -> None:
    text = "a\n  keep this line verbatim\nb"
    out = render(text, DIGEST, (1,), 99, "call tool again if needed")
    assert out.splitlines() == [
        "[digest: ~99 tokens, 1 of 3 lines kept - call tool again if needed]",
        text.split("\n")[1],
    ]
    assert render(text, SUPERSEDED, (), 99, "x").startswith("[superseded: ~99 tokens")
    assert render(text, DEDUPED, (0, 2), 99, "x").startswith("[1 lines omitted")


def test_repeated_lines_are_dropped_from_the_earlier_result_only_when_long_enough() -> None:
    assert repeated_line_indices("short\nthis line repeats later\nunique line here", {"this line repeats later"}) == (
        0,
        2,
    )


def test_superseded_needs_the_same_tool_and_the_same_arguments_later() -> None:
    messages = [
        call("a", "read_file", {"path": "x.py"}),
        result("a", "v1"),
        call("b", "read_file", {"path": "y.py"}),
        result("b", "other"),
        call("c", "read_file", {"path": "x.py"}),
        result("c", "v2"),
    ]
    assert superseded_indices(messages) == [1]


# ----- the mode in the manager ---------------------------------------------------------------------


def test_off_by_default_and_every_key_defaults_to_off() -> None:
    ctx = SimpleContextManager()
    assert not (ctx.evidence_digest or ctx.evidence_supersede or ctx.evidence_dedupe) and ctx.preset is None
    assert parse_config({}) == DEFAULTS


def test_digest_keeps_the_evidence_that_truncation_loses() -> None:
    budget = 4000
    _, plain = views({}, budget)
    ctx, digested = views({"evidence_digest": True}, budget)
    text = json.dumps(digested[-1])
    assert "ValueError: bad shard_count_v2" in text and "=== 1 failed, 41 passed in 3.21s ===" in text
    assert "ValueError" not in json.dumps(plain[-1])
    stats = ctx._last_compaction_stats
    assert stats["results_digested"] >= 1 and stats["digest_tokens"] > 0


def test_supersession_goes_first_and_keeps_the_later_result() -> None:
    config = {"evidence_supersede": True, "compact_threshold": 0.8, "target_usage": 0.8}
    ctx, out = views(config, 4600)
    last = out[-1]
    first_read = next(m for m in last if m.get("tool_call_id") == "c1")
    assert first_read["content"].startswith("[superseded:")
    assert ctx._last_compaction_stats["results_superseded"] == 1
    assert not ctx._removed_seqs
    second_read = next(m for m in last if m.get("tool_call_id") == "c3")
    assert second_read["content"] == session()[9]["content"]


@pytest.mark.parametrize("budget", [1500, 2000, 4000, 4000])
def test_views_stay_valid_append_only_and_stored_messages_unchanged(budget: int) -> None:
    messages = session()
    before = json.dumps(messages)
    ctx, out = views(EVIDENCE, budget, messages)
    assert json.dumps(messages) == before
    assert all("tool-result" not in json.dumps(m) for m in ctx.messages)
    for view in out:
        calls = {c["id"] for m in view for c in m.get("tool_calls") or []}
        answered = {m["tool_call_id"] for m in view if m["role"] == "tool"}
        assert calls == answered
    for previous, current in zip(out, out[1:], strict=False):
        old = [m for m in previous if not (m.get("metadata") or {}).get("ephemeral")]
        if current[: len(old)] != old:  # a boundary: the next one must be a compaction
            assert ctx._last_compaction_stats is not None


def test_decisions_survive_snapshot_and_restore_byte_for_byte() -> None:
    ctx, out = views(EVIDENCE, 4000)
    state = json.loads(json.dumps(ctx.snapshot_state()))
    assert state["sticky"]["digests"]
    resumed = SimpleContextManager(protected_tool_results=1, **EVIDENCE)

    async def run() -> list:
        await resumed.set_messages(await ctx.get_messages())
        resumed.restore_state(state)
        return await resumed.get_messages_for_request(token_budget=4000)

    assert asyncio.run(run()) == asyncio.run(ctx.get_messages_for_request(token_budget=4000))


def test_a_snapshot_without_digests_still_restores() -> None:
    ctx, _ = views({}, 4000)
    state = ctx.snapshot_state()
    del state["sticky"]["digests"]
    ctx.restore_state(state)
    assert ctx._digests == {}


def test_a_digest_for_a_position_not_truncated_is_refused() -> None:
    ctx, _ = views(EVIDENCE, 4000)
    state = ctx.snapshot_state()
    state["sticky"]["digests"].append([0, DIGEST, []])
    with pytest.raises(ValueError, match="not marked truncated"):
        ctx.restore_state(state)


def test_notice_says_results_were_digested() -> None:
    _, out = views(EVIDENCE, 4000)
    notice = out[-1][-1]["content"]
    assert "digest" in notice


# ----- presets -------------------------------------------------------------------------------------


def test_preset_fills_only_what_the_caller_did_not_give() -> None:
    assert SimpleContextManager(preset="evidence").evidence_digest is True
    explicit = SimpleContextManager(preset="evidence", target_usage=0.5)
    assert explicit.target_usage == 0.5
    parsed = parse_config({"preset": "evidence", "target_usage": 0.5})
    assert parsed["target_usage"] == 0.5 and parsed["evidence_digest"] is True
    for key, value in PRESETS["evidence"].items():
        assert parse_config({"preset": "evidence"})[key] == value


def test_unknown_preset_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="evidence"):
        parse_config({"preset": "nope"})
    with pytest.raises(ValueError, match="evidence"):
        SimpleContextManager(preset="nope")


def test_every_preset_key_is_a_known_valid_key() -> None:
    for settings in PRESETS.values():
        assert set(settings) <= set(DEFAULTS)
        parse_config(dict(settings))
