"""The metrics on a tiny replay whose numbers are worked out by hand here."""

import pytest

from evaluation import arms
from evaluation.arms import Arm
from evaluation.driver import Settings, replay, tail_retention, tool_pairing_faults
from evaluation.metrics import percentile, run_metrics
from evaluation.tokens import TokenCounter
from evaluation.workloads import Workload

NOTICE = {"role": "user", "content": "notice", "metadata": {"ephemeral": True}}


class FixedCounter(TokenCounter):
    """Every message is 1,000 tokens."""

    def __init__(self):
        super().__init__(use_tiktoken=False)
        self.name = "fixed 1000 per message"

    def message(self, msg, key=None):
        return 1000


class DropAtThirdRequest:
    """Sends everything, except that from its third request on it drops the first user message and the
    assistant tool call after it (leaving an orphan tool result) and appends an ephemeral notice."""

    def __init__(self):
        self.messages, self.calls = [], 0

    async def add_message(self, message):
        self.messages.append(message)

    async def get_messages_for_request(self, token_budget=None, provider=None):
        self.calls += 1
        if self.calls < 3:
            return list(self.messages)
        return [self.messages[0], *self.messages[3:], NOTICE]


async def mount_drop(coordinator, config):
    await coordinator.mount("context", DropAtThirdRequest())


CALL = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
SESSION = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "remember ALPHA-1"},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": "result"},
    {"role": "assistant", "content": "done"},
    {"role": "user", "content": "next"},
    {"role": "assistant", "content": "ok"},
]


@pytest.fixture
def run(monkeypatch):
    monkeypatch.setitem(arms.LOCAL_ENGINES, "drop", mount_drop)
    workload = Workload("tiny", SESSION, facts={"f1": "ALPHA-1"}, probe_requests=[1, 3])
    settings = Settings(window_fraction=0.0, min_budget=0, max_output_tokens=1000)
    return replay(Arm("drop", engine="drop"), workload, settings, FixedCounter())


def test_window_is_sized_from_the_module_budget_formula(run):
    # budget 0; window = 0 + 800 notice reserve + 4096 margin + int(1000 * 0.5)
    assert run.window.context_window == 5396
    assert run.window.limit == 4396


def test_tiny_replay_metrics_by_hand(run):
    m = run_metrics(run)
    # R1 [sys, user] 2,000: write 2,000 -> 2,500
    # R2 [sys, user, call, tool] 4,000: read 2,000 (200) + write 2,000 (2,500) -> 2,700
    # R3 [sys, tool, done, next] + notice 5,000: nothing readable; write 4,000 (5,000) + plain 1,000 -> 6,000
    assert m["requests"] == 3 and m["errors"] == 0
    assert m["prompt_tokens"] == 11_000
    assert m["cache_read_tokens"] == 2_000
    assert m["cache_read_share"] == pytest.approx(2_000 / 11_000)
    assert m["cost"] == pytest.approx(2_500 + 2_700 + 6_000)
    assert m["cache_waste"] == 2_000  # sys and the tool result had been cached
    assert m["boundaries"] == 1
    assert m["peak_true_tokens"] == 5_000
    assert m["over_window"] == 1  # 5,000 > 4,396
    assert m["orphan_tool_results"] == 1
    assert m["unanswered_tool_calls"] == 0
    assert m["system_prompt_hashes"] == 1
    assert m["facts_final"] == 0.0  # ALPHA-1 left with the first user message
    assert m["facts_probes"] == 0.5  # present at request 1, gone at request 3
    assert m["tail_retention"] is None


def test_same_inputs_give_the_same_numbers(run, monkeypatch):
    monkeypatch.setitem(arms.LOCAL_ENGINES, "drop", mount_drop)
    workload = Workload("tiny", SESSION, facts={"f1": "ALPHA-1"}, probe_requests=[1, 3])
    settings = Settings(window_fraction=0.0, min_budget=0, max_output_tokens=1000)
    again = replay(Arm("drop", engine="drop"), workload, settings, FixedCounter())
    strip = {"ms_p50", "ms_p90"}
    assert {k: v for k, v in run_metrics(run).items() if k not in strip} == {
        k: v for k, v in run_metrics(again).items() if k not in strip
    }
    assert run.view_digest == again.view_digest


def test_tool_pairing_faults():
    call = {"role": "assistant", "tool_calls": [{"id": "x"}, {"id": "y"}]}
    assert tool_pairing_faults([call, {"role": "tool", "tool_call_id": "x"}]) == (0, 1)
    assert tool_pairing_faults([{"role": "tool", "tool_call_id": "z"}]) == (1, 0)


def test_tail_retention_counts_shortened_results_whose_tail_survives():
    original = "HEAD " + "x" * 500 + " THE-TAIL-MARKER"
    view = [
        {"role": "tool", "tool_call_id": "a", "content": original[:100]},
        {"role": "tool", "tool_call_id": "b", "content": original[:50] + "..." + original[-90:]},
        {"role": "tool", "tool_call_id": "c", "content": original},
    ]
    assert tail_retention(view, {"a": original, "b": original, "c": original}) == (2, 1)


def test_percentile_is_nearest_rank():
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 90) == 9.0
    assert percentile([], 50) is None
