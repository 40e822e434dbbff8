"""The host-shaped replay (issue 28): the transcripts as loop-streaming on amplifier-core 2.0.2 stores them,
what it sends each request, and an evidence metric that reads both shapes alike."""

from __future__ import annotations

import json

import pytest

from evaluation.arms import arm_by_name
from evaluation.driver import Settings, replay
from evaluation.evidence import EvidenceIndex, tokens
from evaluation.host_shaped import (
    PARTS,
    STATUS,
    STEERING,
    TODO,
    host_shape,
    reminder_text,
    with_reminders,
    wrapped_result,
)
from evaluation.provider import cacheable_count
from evaluation.tokens import TokenCounter, content_text, read_call
from evaluation.workloads import SHIPPED_DIR, Workload, load_path

SESSIONS = load_path(SHIPPED_DIR)
SMALL = next(w for w in SESSIONS if w.name.startswith("taubench"))


def shaped_all(seed: int = 0) -> list[tuple[list[dict], list[dict]]]:
    return [(w.messages, host_shape(w.messages, seed)) for w in SESSIONS]


def test_the_transform_is_seeded_and_deterministic():
    one = [host_shape(w.messages, 3) for w in SESSIONS]
    assert one == [host_shape(w.messages, 3) for w in SESSIONS]
    assert one != [host_shape(w.messages, 4) for w in SESSIONS]
    assert SESSIONS[0].messages == load_path(SESSIONS[0].source)[0].messages  # the input is not changed


def test_calls_are_stored_as_the_orchestrators_store_them_beside_content_blocks():
    seen = 0
    for _plain, host in shaped_all():
        for m in host:
            if m["role"] != "assistant" or not m.get("tool_calls"):
                continue
            seen += 1
            assert all(
                set(c) == {"id", "tool", "arguments"} and isinstance(c["arguments"], dict) for c in m["tool_calls"]
            )
            blocks = [b for b in m["content"] if b["type"] == "tool_call"]
            assert [(b["id"], b["name"], b["input"]) for b in blocks] == [
                (c["id"], c["tool"], c["arguments"]) for c in m["tool_calls"]
            ]
            assert set(blocks[0]) == {"type", "id", "name", "input", "visibility"}  # ToolCallBlock.model_dump()
            kinds = [b["type"] for b in m["content"]]
            assert kinds == sorted(kinds, key=["thinking", "text", "tool_call"].index)  # the provider's order
            if kinds[0] == "thinking":
                assert m["thinking_block"] == m["content"][0] and m["content"][0]["signature"]
    assert seen > 100


def test_every_result_is_the_json_of_the_whole_result_object_on_one_line():
    for plain, host in shaped_all():
        names = {c["id"]: c["tool"] for m in host for c in m.get("tool_calls") or []}
        originals = [m for m in plain if m["role"] == "tool"]
        results = [m for m in host if m["role"] == "tool"]
        assert len(results) == len(originals)
        for original, stored in zip(originals, results, strict=True):
            text = content_text(original["content"])
            assert stored["content"] == wrapped_result(text)
            assert stored["content"].startswith('{"error": null, "output": "') and stored["content"].endswith(
                ', "success": true}'
            )  # the kernel's copy has its keys sorted; json.dumps' default separators
            assert "\n" not in stored["content"] and stored["content"].isascii()
            assert stored["name"] == names[stored["tool_call_id"]]


def test_each_part_of_the_host_shape_changes_only_what_it_names():
    """The study of one change at a time (evaluation/studies/host_parity.py) relies on it: a part on
    its own adds exactly the messages, or makes exactly the changes, it makes with every part on."""

    def added(messages: list[dict]) -> list[dict]:
        return [m for m in messages if m.get("metadata") or m.get("content") in STEERING]

    for plain, full in shaped_all(seed=2):
        assert host_shape(plain, 2, PARTS) == full and host_shape(plain, 2, ()) == plain
        wrapped = host_shape(plain, 2, ("wrapped",))
        assert [m["content"] for m in wrapped] == [
            wrapped_result(m["content"]) if m["role"] == "tool" else m["content"] for m in plain
        ]
        for part, kind in (("hook_shell", "system"), ("steering", "user")):
            alone = host_shape(plain, 2, (part,))
            assert [m for m in added(alone)] == [m for m in added(full) if m["role"] == kind]
            assert [m for m in alone if m not in added(alone)] == plain
        calls = host_shape(plain, 2, ("calls", "thinking"))
        assert [m for m in calls if m["role"] == "assistant"] == [m for m in full if m["role"] == "assistant"]
        assert [m for m in calls if m["role"] != "assistant"] == [m for m in plain if m["role"] != "assistant"]
    with pytest.raises(ValueError, match="unknown host part"):
        host_shape(SMALL.messages, 0, ("calls", "callz"))


def test_hook_shell_messages_sit_between_a_call_and_its_results():
    found = 0
    for _plain, host in shaped_all():
        for i, m in enumerate(host):
            if m["role"] != "system" or not m.get("metadata"):
                continue
            found += 1
            assert m["metadata"] == {
                "source": "hook",
                "hook_name": host[i - 1]["tool_calls"][0]["tool"],
                "event": "tool:post",
                "requested_role": "system",
                "ephemeral": False,
                "persisted": True,
            }
            ids = {c["id"] for c in host[i - 1]["tool_calls"]}
            assert host[i + 1]["role"] == "tool" and host[i + 1]["tool_call_id"] in ids
    assert found > 10


def test_steering_arrives_mid_turn_after_a_groups_results_and_carries_no_evidence():
    found = 0
    for _plain, host in shaped_all():
        for i, m in enumerate(host):
            if m["role"] == "user" and m["content"] in STEERING:
                found += 1
                assert host[i - 1]["role"] == "tool" and host[i + 1]["role"] == "assistant"
    assert found > 5
    assert not [t for text in STEERING for t in tokens(text)]


def test_stripped_of_its_host_shape_the_session_is_the_original():
    for plain, host in shaped_all():
        back = []
        for m in host:
            if (m["role"] == "system" and m.get("metadata")) or (m["role"] == "user" and m["content"] in STEERING):
                continue
            if m["role"] == "assistant":
                calls = [{"name": read_call(c)[0], "arguments": read_call(c)[1]} for c in m.get("tool_calls") or []]
                back.append(("assistant", content_text(m["content"]).strip("\n"), calls))
            elif m["role"] == "tool":
                back.append(("tool", json.loads(m["content"])["output"], m["tool_call_id"]))
            else:
                back.append((m["role"], m["content"], None))
        expected = []
        for m in plain:
            if m["role"] == "assistant":
                calls = [read_call(c) for c in m.get("tool_calls") or []]
                calls = [{"name": n, "arguments": json.loads(a) if a else {}} for n, a in calls]
                expected.append(("assistant", content_text(m["content"]).strip("\n"), calls))
            elif m["role"] == "tool":
                expected.append(("tool", content_text(m["content"]), m["tool_call_id"]))
            else:
                expected.append((m["role"], m["content"], None))
        assert back == expected


def test_the_reminders_ride_the_last_tool_result_or_come_as_a_user_message():
    text = reminder_text("some-session")
    assert text.startswith(STATUS.split("{")[0]) and text.endswith("\n\n" + TODO)  # amplifier-core's merge
    assert text == reminder_text("some-session") != reminder_text("another")
    tool_last = [{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "c", "content": "out"}]
    sent = with_reminders(tool_last, text)
    assert sent[:-1] == tool_last[:-1] and len(sent) == 2
    assert sent[-1]["content"] == f"out\n\n{text}" and tool_last[-1]["content"] == "out"  # the view is not changed
    assert cacheable_count(sent) == 1  # the provider keeps its breakpoint off what changes every request
    user_last = [{"role": "user", "content": "q"}]
    sent = with_reminders(user_last, text)
    assert sent[-1]["role"] == "user" and sent[-1]["content"] == text and cacheable_count(sent) == 1


def test_true_tokens_read_every_call_shape_and_bill_an_image_as_an_image():
    counter = TokenCounter()
    args = {"path": "src/pkg/loader.py", "line": 12}
    openai = {"id": "c", "type": "function", "function": {"name": "read_file", "arguments": json.dumps(args)}}
    for call in ({"id": "c", "tool": "read_file", "arguments": args}, {"id": "c", "name": "read_file", "input": args}):
        host = {"role": "assistant", "content": "", "tool_calls": [call]}
        assert counter.message(host) == counter.message({**host, "tool_calls": [openai]}) > 10
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 400_000}}
    pasted = {"role": "user", "content": [{"type": "text", "text": "see"}, image]}
    assert counter.message(pasted) == counter.message({"role": "user", "content": "see"}) + 1600
    sized = {**image, "source": {**image["source"], "width": 300, "height": 200}}
    assert (
        counter.message({"role": "user", "content": [sized]}) == counter.message({"role": "user", "content": ""}) + 80
    )


def scores(messages: list[dict], keep) -> list[tuple]:
    """Per request (before each assistant message), the evidence score of a view made of the messages
    `keep` selects from the history so far (by their position among the original messages)."""
    index, out, history = EvidenceIndex(), [], []
    for m in messages:
        if m["role"] == "assistant":
            view = [h for n, h in enumerate(history) if keep(n, len(history))]
            s = index.score(view, m, keep_missed=5)
            out.append((s.needed, s.line_kept, s.token_kept, s.missed))
        index.add(m)
        history.append(m)
    return out


def originals_only(host: list[dict]) -> list[dict]:
    """The host session with what the host added (hook-shell messages, steering) kept out of the count
    of positions, so a view selects the same original messages in both shapes."""
    return [m for m in host if not (m["role"] == "system" and m.get("metadata")) and m.get("content") not in STEERING]


@pytest.mark.parametrize("name", [w.name for w in SESSIONS])
def test_the_evidence_metric_reads_both_shapes_alike(name):
    plain = next(w for w in SESSIONS if w.name == name).messages
    host = originals_only(host_shape(plain, seed=1))
    for keep in (lambda n, size: True, lambda n, size: n == 0 or n >= size * 2 // 3):  # whole, then compacted
        assert scores(host, keep) == scores(plain, keep)
    assert any(needed for needed, *_ in scores(plain, lambda n, size: True))


def test_a_no_compaction_replay_measures_the_same_evidence_in_both_shapes():
    counter, settings = TokenCounter(), Settings(0.3)
    host = Workload("host", host_shape(SMALL.messages, 0), host_reminders=True, sized_by=SMALL.messages)
    runs = [replay(arm_by_name("none"), w, settings, counter) for w in (SMALL, host)]
    plain_scores, host_scores = ([(q.evidence.needed, q.evidence.line_kept) for q in r.requests] for r in runs)
    assert plain_scores == host_scores and sum(n for n, _ in plain_scores) > 0
    assert runs[0].window == runs[1].window  # the same provider for both replays
    assert runs[1].requests[-1].true_tokens > runs[0].requests[-1].true_tokens  # wrapped, and the reminders billed


def side_by_side(names: list[str]) -> dict:
    def figures(shift: float) -> dict:
        return {
            "cost": 1000.0 + shift,
            "vs_none": -0.3 + shift,
            "evidence_line_miss": 0.1 + shift,
            "over_window": 145,
            "invalid_views": 0,
            "boundaries": 40,
            "cache_read_share": 0.8,
        }

    arms = {name: {"plain": figures(0.0), "host": figures(0.2), "bill_ratio": 1.25} for name in names}
    return {"host": {"workloads": ["a (host)", "b (host)"], "arms": arms}}


def test_the_side_by_side_table_fits_the_terminal_and_shows_both_replays():
    from evaluation.arms import ARMS
    from evaluation.report_host import host_markdown, host_terminal
    from tests.test_evaluation_terminal import assert_terminal_text

    data = side_by_side([a.name for a in ARMS])
    lines = host_terminal(data)
    assert_terminal_text("\n".join(lines))
    assert len(lines) == 2 + len(ARMS) and "-30% | -10%" in lines[-1] and "10.0% | 30.0%" in lines[-1]
    md = "\n".join(host_markdown(data))
    assert "| preset_evidence | -30% / -10% | 10.0% / 30.0% | 145 / 145 | 0 / 0 | 40 / 40 | 80% / 80% | 1.25x |" in md
    assert host_terminal({}) == host_markdown({}) == []


def test_the_main_run_reports_the_host_shaped_replay_beside_the_plain_one(tmp_path, capsys):
    from evaluation.__main__ import main
    from tests.test_evaluation_terminal import assert_terminal_text

    argv = ["--workload", str(SMALL.source), "--arms", "none,progressive", "--no-shaped", "--jobs", "1"]
    assert main([*argv, "--no-plots", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert_terminal_text(out, (tmp_path / "report.md", tmp_path / "report.json"))
    data = json.loads((tmp_path / "report.json").read_text())
    host = data["host"]
    assert host["workloads"] == [f"{SMALL.name} (host)"] and host["runs"] == 2 and "tight" not in data
    for name in ("none", "progressive"):
        for key in ("vs_none", "evidence_line_miss", "over_window", "boundaries"):
            assert host["arms"][name]["plain"][key] == data["totals"][name][key]  # the main table's own figures
    assert host["arms"]["progressive"]["host"]["boundaries"] > 0 and host["arms"]["none"]["bill_ratio"] > 1
    assert "Plain | host-shaped replay (1 transcript as" in out
    md = (tmp_path / "report.md").read_text()
    assert "## Plain and host-shaped replays, side by side" in md and "| progressive | " in md
    calls = data["host_calls"]  # the call shape alone, for the configurations a user picks between
    assert list(calls["arms"]) == ["progressive"] and calls["runs"] == 1
    assert calls["arms"]["progressive"]["boundaries"] > 0
    assert "### The call shape alone" in md and "the orchestrators' call shape alone" in out
    assert main([*argv, "--no-host", "--no-plots", "--out", str(tmp_path)]) == 0
    assert not {"host", "host_calls"} & set(json.loads((tmp_path / "report.json").read_text()))


def test_a_truncated_wrapped_result_keeps_the_lines_its_head_shows_as_a_plain_one_does():
    """The module cuts a wrapped result's stored text (escaped JSON, one line): the agent still reads the
    output lines the head shows, so the line metric counts them as it does in a plain result cut alike."""
    from amplifier_module_context_simple.tool_results import format_truncated

    output = "\n".join(f"row {k}: value_{k} in src/pkg/mod_{k}.py" for k in range(40))
    answer = {"role": "assistant", "content": "Open src/pkg/mod_2.py next."}
    for stored in (output, wrapped_result(output)):
        call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        session = [
            {"role": "user", "content": "Look at the rows please."},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": stored},
        ]
        index = EvidenceIndex()
        for m in session:
            index.add(m)
        cut = {**session[2], "content": format_truncated(stored, 300, "head", "not kept")}
        assert "src/pkg/mod_2.py" in cut["content"] and "mod_39" not in cut["content"]
        score = index.score([session[0], session[1], cut], answer)
        assert (score.needed, score.line_kept, score.token_kept) == (1, 1, 1), stored[:20]
