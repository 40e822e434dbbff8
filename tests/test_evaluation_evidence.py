"""Evidence recall: which tokens count, what a kept line is, and the pooling after the first compaction."""

import json

import pytest

from evaluation import arms
from evaluation.arms import Arm
from evaluation.driver import Settings, replay
from evaluation.evidence import EvidenceIndex, Score, arguments_text, pool_totals, pooled, tokens
from evaluation.metrics import run_metrics
from evaluation.tokens import TokenCounter
from evaluation.workloads import Workload
from tests.test_evaluation_metrics import DropAtThirdRequest


def test_distinctive_tokens_by_kind():
    text = (
        "see src/pkg/loader.py and os.path.join; user42 cache_size fooBar FooBarBaz 12345 "
        "plain words and/or here, 12 abc1 a_b PATH CONSTANT Hello 3.14"
    )
    assert list(tokens(text)) == [
        "src/pkg/loader.py",
        "os.path.join",
        "user42",
        "cache_size",
        "fooBar",
        "FooBarBaz",
        "12345",
        "abc1",
    ]


def test_trailing_punctuation_and_escapes_are_not_part_of_a_token():
    assert list(tokens("Edit config.yaml. Then run\\ntest_main.")) == ["config.yaml", "test_main"]


def test_tool_call_arguments_are_read_as_their_string_values():
    args = json.dumps({"path": "src/a.py", "cmd": "grep -n foo_bar\nline2", "n": 3})
    assert arguments_text(args) == "src/a.py\ngrep -n foo_bar\nline2\n3"
    assert arguments_text("not json foo_bar") == "not json foo_bar"


def call(args: dict, cid: str = "c1") -> dict:
    fn = {"name": "read", "arguments": json.dumps(args)}
    return {"role": "assistant", "content": "", "tool_calls": [{"id": cid, "type": "function", "function": fn}]}


SYSTEM = {"role": "system", "content": "the system mentions system_only_token on a long line"}
USER = {"role": "user", "content": "please fix parse_config in src/config_loader.py"}
RESULT = {
    "role": "tool",
    "tool_call_id": "c1",
    "content": "line one is plain\ndef parse_config(path):\n    return load_yaml(path)\nshort_id",
}
ANSWER = call({"path": "src/config_loader.py", "note": "parse_config calls load_yaml; system_only_token"})


def indexed(*msgs: dict) -> EvidenceIndex:
    idx = EvidenceIndex()
    for m in msgs:
        idx.add(m)
    return idx


def test_needed_tokens_are_those_of_the_answer_found_in_earlier_non_system_lines():
    idx = indexed(SYSTEM, USER, call({"path": "src/config_loader.py"}), RESULT)
    assert idx.needed(ANSWER) == ["load_yaml", "parse_config", "src/config_loader.py"]


def test_line_recall_needs_a_whole_earlier_line_in_the_view():
    history = [SYSTEM, USER, call({"path": "x"}), RESULT]
    idx = indexed(*history)
    assert idx.score(history, ANSWER) == Score(3, 3, 3, True)
    # A digest that keeps the identifiers but not their lines: tokens kept, lines lost.
    bag = {**RESULT, "content": "[digest] parse_config load_yaml"}
    s = idx.score([SYSTEM, USER, history[2], bag], ANSWER, keep_missed=5)
    assert (s.needed, s.line_kept, s.token_kept, s.complete) == (3, 2, 3, False)
    assert s.missed == ("load_yaml",)  # parse_config is still on a user line
    # A truncation that keeps one whole line of the result (indentation stripped) keeps its tokens.
    cut = {**RESULT, "content": "...\n        return load_yaml(path)   \n[truncated]"}
    assert idx.score([SYSTEM, USER, history[2], cut], ANSWER).line_kept == 3
    # Dropping everything: only the system prompt is left.
    assert idx.score([SYSTEM], ANSWER) == Score(3, 0, 0, False)


def test_token_recall_counts_a_token_anywhere_even_inside_a_longer_word():
    idx = indexed(USER, RESULT)
    s = idx.score([{"role": "user", "content": "xxparse_configxx load_yaml_v2"}], ANSWER)
    assert (s.needed, s.line_kept, s.token_kept) == (3, 0, 2)  # the path is nowhere


def test_copies_of_the_same_text_are_the_same_piece():
    idx = indexed(USER, RESULT)
    copy = {**RESULT, "content": "".join(list(RESULT["content"]))}  # equal text, another object
    assert copy["content"] is not RESULT["content"]
    assert idx.score([USER, copy], ANSWER).complete


def test_pooled_starts_at_the_first_incomplete_view():
    scores = [Score(4, 4, 4, True), Score(10, 8, 9, False), Score(10, 10, 10, True), Score(0, 0, 0, False)]
    p = pooled(scores)
    assert p["evidence_requests"] == 3 and p["evidence_needed"] == 20
    assert p["evidence_line_miss"] == pytest.approx(0.1)
    assert p["evidence_token_miss"] == pytest.approx(0.05)
    assert pooled([Score(5, 5, 5, True)])["evidence_line_miss"] is None  # never compacted: not measured
    assert pooled([Score(0, 0, 0, False)])["evidence_line_miss"] is None
    total = pool_totals([p, pooled([Score(5, 5, 5, False)])])
    assert total["evidence_needed"] == 25 and total["evidence_line_miss"] == pytest.approx(2 / 25)
    assert pool_totals([])["evidence_line_miss"] is None


class DropToolResultsAfterTwo(DropAtThirdRequest):
    """Sends everything for two requests, then leaves every tool result out (and its call)."""

    async def get_messages_for_request(self, token_budget=None, provider=None):
        self.calls += 1
        if self.calls <= 2:
            return list(self.messages)
        return [m for m in self.messages if m["role"] != "tool" and not m.get("tool_calls")]


async def mount_drop_tools(coordinator, config):
    await coordinator.mount("context", DropToolResultsAfterTwo())


def test_replay_records_evidence_per_request_and_pools_after_the_first_compaction(monkeypatch):
    monkeypatch.setitem(arms.LOCAL_ENGINES, "droptools", mount_drop_tools)
    session = [SYSTEM, USER, call({"path": "src/config_loader.py"}), RESULT]
    session += [{"role": "assistant", "content": "parse_config is the culprit"}]
    session += [{"role": "user", "content": "and then?"}, ANSWER]
    run = replay(Arm("d", engine="droptools"), Workload("w", session), Settings(0.0, min_budget=0), TokenCounter(False))
    got = [(r.evidence.needed, r.evidence.line_kept, r.evidence.complete) for r in run.requests]
    # R1 needs the path (on the user line); R2 needs parse_config; R3 (tool results gone) keeps the
    # path and parse_config by their user and narration lines but loses load_yaml with the result.
    assert got == [(1, 1, True), (1, 1, True), (3, 2, False)]
    m = run_metrics(run)
    assert m["evidence_requests"] == 1 and m["evidence_needed"] == 3
    assert m["evidence_line_miss"] == pytest.approx(1 / 3) and m["evidence_missed_samples"] == ["load_yaml"]


def test_list_content_is_read_by_value_even_when_the_same_list_changes():
    blocks = [{"type": "text", "text": "def parse_config(path): pass"}]
    msg = {"role": "user", "content": blocks}
    idx = indexed(msg)
    answer = {"role": "assistant", "content": "parse_config again"}
    assert idx.score([msg], answer).line_kept == 1
    blocks[0] = {"type": "text", "text": "nothing left here"}  # a view that reuses and edits the list
    assert idx.score([msg], answer).line_kept == 0
