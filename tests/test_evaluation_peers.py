"""The peers (evaluation/peers.py) do what the methods they stand for do, on a small session: what
observation masking masks and when, what tool-result clearing clears and when, and a peer that sends
requests over the window is shown with them, not dropped."""

from __future__ import annotations

import asyncio
import copy

from evaluation.arms import arm_by_name
from evaluation.driver import Settings, replay
from evaluation.peers import (
    CLEAR_PLACEHOLDER,
    CLEARING,
    MASKING,
    PeerContext,
    cleared_results,
    masked_results,
    tool_turns,
)
from evaluation.report import COLUMNS, build, fmt, table_cells
from evaluation.tokens import TokenCounter
from evaluation.workloads import Workload
from tests.conftest import asst, asst_calls, call, result, system, user

COUNTER = TokenCounter()


def session() -> list[dict]:
    """Five tool turns (the third with two parallel calls), results of 1-3 lines, one answer."""
    return [
        system("You are careful."),
        user("fix the bug"),
        asst_calls("t1"),
        result("t1", "one\ntwo\nthree"),
        asst_calls("t2", name="grep"),
        result("t2", "a match"),
        {"role": "assistant", "content": "", "tool_calls": [call("t3a"), call("t3b", "grep")]},
        result("t3a", "x\ny"),
        result("t3b", "z"),
        asst_calls("t4"),
        result("t4", "four"),
        asst_calls("t5"),
        result("t5", "five"),
        asst("done"),
    ]


class Provider:
    """What a peer reads of the provider: the counter, the window and the per-request overhead."""

    def __init__(self, window: int) -> None:
        self.counter, self.overhead_tokens, self.window = COUNTER, 0, window

    def get_info(self):
        from types import SimpleNamespace

        return SimpleNamespace(defaults={"context_window": self.window, "max_output_tokens": 1024})


def view_of(engine: str, config: dict, messages: list[dict], provider=None) -> list[dict]:
    async def go() -> list[dict]:
        ctx = PeerContext(engine, config)
        for m in messages:
            await ctx.add_message(m)
        return await ctx.get_messages_for_request(provider=provider)

    return asyncio.run(go())


def changed(messages: list[dict], view: list[dict]) -> dict[int, str]:
    """Position -> the new content, for every message the view changed (it must change nothing else)."""
    assert len(view) == len(messages)
    out = {}
    for i, (m, v) in enumerate(zip(messages, view, strict=True)):
        assert {k: x for k, x in v.items() if k != "content"} == {k: x for k, x in m.items() if k != "content"}
        if v["content"] != m["content"]:
            out[i] = v["content"]
    return out


def test_a_tool_turn_is_an_assistant_message_with_calls_and_every_result_that_answers_it():
    assert tool_turns(session()) == [[3], [5], [7, 8], [10], [12]]


def test_observation_masking_masks_the_results_older_than_the_last_m_tool_turns_with_one_line():
    messages = session()
    stored = copy.deepcopy(messages)
    view = view_of(MASKING, {"keep_tool_turns": 3}, messages)
    # turns t1 and t2 are older than the last three (t3 with two results, t4, t5): their results only
    assert changed(messages, view) == {
        3: "Old environment output: (3 lines omitted)",
        5: "Old environment output: (1 lines omitted)",
    }
    assert masked_results(messages, 2) == {3, 5, 7, 8}
    assert masked_results(messages, 5) == set() and masked_results(messages, 10) == set()
    assert messages == stored  # the history is never changed, only the view


def test_observation_masking_moves_its_edge_with_every_new_tool_turn():
    messages = session()
    before = masked_results(messages[:11], 3)  # up to t4's result: t1 is the only older turn
    after = masked_results(messages, 3)
    assert before == {3} and after == {3, 5}


def test_clearing_sends_the_whole_history_until_the_input_passes_the_trigger():
    messages = session()
    size = COUNTER.messages(messages)
    below = view_of(CLEARING, {"trigger_share": 0.5, "keep": 3}, messages, Provider(window=2 * size + 2))
    assert changed(messages, below) == {}
    above = view_of(CLEARING, {"trigger_share": 0.5, "keep": 3}, messages, Provider(window=2 * size - 2))
    # every tool result but the newest three (t3b, t4, t5) replaced; tool calls and their inputs kept
    assert changed(messages, above) == {3: CLEAR_PLACEHOLDER, 5: CLEAR_PLACEHOLDER, 7: CLEAR_PLACEHOLDER}


def test_clearing_is_decided_per_request_from_the_whole_history():
    messages = session()
    tokens = [COUNTER.message(m) for m in messages]
    earlier = cleared_results(messages[:11], tokens[:11], trigger=0, keep=3)
    later = cleared_results(messages, tokens, trigger=0, keep=3)
    assert earlier == {3, 5} and later == {3, 5, 7}  # t3a, kept at the earlier request, is cleared later
    assert cleared_results(messages, tokens, trigger=sum(tokens), keep=3) == set()  # at the trigger: not past it


def test_clearing_keeps_excluded_tools_and_skips_a_clearing_that_frees_too_little():
    messages = session()
    tokens = [COUNTER.message(m) for m in messages]
    assert cleared_results(messages, tokens, 0, keep=1, exclude_tools=["grep"]) == {3, 7, 10}
    freed = sum(tokens[i] for i in (3, 5, 7))
    assert cleared_results(messages, tokens, 0, keep=3, clear_at_least=freed) == {3, 5, 7}
    assert cleared_results(messages, tokens, 0, keep=3, clear_at_least=freed + 1) == set()


def test_a_peer_over_the_window_is_shown_with_its_requests_over_the_window():
    """Long assistant messages are never masked: the peer's views outgrow the window, and the table
    says how many requests a provider would refuse instead of leaving the peer out."""
    long_text = " ".join(f"word{i}" for i in range(3000))
    messages = [system("You are careful."), user("go")]
    for i in range(8):
        messages += [asst_calls(f"c{i}", text=long_text), result(f"c{i}", f"result {i}")]
    messages.append(asst("done"))
    workload = Workload("long-answers", messages)
    settings = Settings(window_fraction=0.3)
    arms = [arm_by_name("peer_observation_masking"), arm_by_name("peer_clear_tool_uses")]
    runs = [replay(arm, workload, settings, COUNTER) for arm in arms]
    data = build(arms, runs, settings, {})
    for arm in arms:
        t = data["totals"][arm.name]
        assert t["available"] and t["over_window"] > 0 and not t["valid"]
    rows = {row[0]: row for row in table_cells(data)}
    over = [heading for heading, _ in COLUMNS].index("over window")
    for arm in arms:
        assert rows[arm.name][over] == fmt("over_window", data["totals"][arm.name]["over_window"])


def test_a_miss_not_measured_is_n_a_not_zero():
    """No compaction ever (the whole history every request): the miss after the first compaction was
    not measured, and the table says n/a."""
    workload = Workload("short", session())
    settings = Settings(window_fraction=1.0)
    arm = arm_by_name("peer_clear_tool_uses")
    data = build([arm], [replay(arm, workload, settings, COUNTER)], settings, {})
    t = data["totals"][arm.name]
    assert t["boundaries"] == 0 and t["evidence_line_miss"] is None
    assert fmt("evidence_line_miss", t["evidence_line_miss"]) == "n/a"


def test_the_report_says_where_the_default_and_each_preset_stand_against_the_cheapest_peer():
    from evaluation import report_peers, report_text
    from evaluation.arms import CHOICES, PEERS
    from tests.test_evaluation_advice import MEASURED, measured

    costs = {"peer_observation_masking": 2_400_000, "peer_observation_masking_m5": 2_200_000}
    costs["peer_clear_tool_uses"] = 1_950_000
    data = measured(MEASURED | {n: (cost, 0.06, 16, 1.0) for n, cost in costs.items()})
    for n in PEERS:
        data["totals"][n]["over_window"] = 30
    sentence = report_peers.standing(data)
    assert sentence.startswith("Against the cheapest peer, tool-result clearing past 50% of the window")
    cheapest = data["totals"]["peer_clear_tool_uses"]["cost"]
    for n in CHOICES:
        t = data["totals"][n]
        assert f"{t['cost'] / cheapest:.2f}x" in sentence
        assert fmt("evidence_line_miss", t["evidence_line_miss"]) in sentence
    assert "sends 30 requests over the window" in sentence and "each with 0 requests over the window" in sentence
    md = "\n".join(report_peers.section(data))
    assert "## Beside the peers" in md and all(f"`{n}`" in md for n in PEERS)
    assert "--engine context-simple-original" in md  # how to replay the original module beside them
    terminal = " ".join(" ".join(report_text.terminal_verdict(data)).split())
    assert sentence in md and sentence.replace("`", "") in terminal


def test_an_80_column_terminal_shows_each_peer_with_bill_miss_boundaries_and_requests_over_the_window(
    monkeypatch, capsys
):
    from evaluation.arms import PEERS
    from evaluation.report import print_table
    from tests.test_evaluation_advice import MEASURED, measured

    data = measured(MEASURED | {n: (1_950_000, 0.092, 16, 1.0) for n in PEERS})
    for n in PEERS:
        data["totals"][n].update(over_window=34, boundaries=209)
    monkeypatch.setenv("COLUMNS", "80")
    print_table(data | {"token_counter": "tiktoken o200k_base"})
    out = capsys.readouterr().out
    assert "bound-" in out and "over" in out and max(len(line) for line in out.splitlines()) <= 80
    for n in PEERS:
        row = next(line for line in out.splitlines() if line.strip().startswith(n + " "))
        t = data["totals"][n]
        assert row.split()[1:5] == [fmt("vs_none", t["vs_none"]), "9.2%", "209", "34"]
