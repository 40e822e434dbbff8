"""Recall as an agent would ask (issue 31 point 11, issue 32 point 3): besides the exact lost word, a cue
from the same line, one from the call that produced it and three words of the line, each counted apart,
on either half of the shipped sessions."""

from __future__ import annotations

import json

import pytest

from amplifier_module_context_simple import SimpleContextManager
from evaluation import cli
from evaluation.__main__ import main
from evaluation.driver import Request, Run, Window
from evaluation.workloads import SHIPPED_DIR
from tests.conftest import add_all, asst, system, user

SMALL = SHIPPED_DIR / "taubench__airline__task002__trial1.jsonl"
QUERY_KINDS = ("exact", "line_cue", "call_cue", "three_words")
LOST = "ERROR cache_limit exceeded while loading SHARD_77 from replica_3"


def read_call(call_id: str, path: str) -> dict:
    arguments = json.dumps({"path": path})
    call = {"id": call_id, "type": "function", "function": {"name": "read_file", "arguments": arguments}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def session() -> list[dict]:
    return [
        system(),
        user("Why does worker_7 crash? SHARD_77 was mentioned once here in passing, a long user line."),
        read_call("c1", "logs/worker_7.log"),
        {"role": "tool", "tool_call_id": "c1", "content": f"boot ok\n{LOST}\nshutdown"},
        asst("Looking at the shard."),
    ]


def test_each_query_kind_comes_from_the_newest_line_that_held_the_lost_word():
    from evaluation.recall_probe import queries

    asked = queries(session(), "SHARD_77")
    assert asked == {
        "exact": "SHARD_77",
        "line_cue": "cache_limit",  # the first other distinctive word of the tool result's line
        "call_cue": "logs/worker_7.log",  # the path of the call whose result held the line
        "three_words": "ERROR cache_limit exceeded",  # the longest three-word run without the lost word
    }
    # A word only a user line held: no call produced it, so that kind is not asked.
    assert set(queries(session()[:2], "SHARD_77")) == {"exact", "line_cue", "three_words"}
    # A cue that holds the lost word would be the exact query in disguise: left out.
    held = [read_call("c2", "data/SHARD_77/part.log"), {"role": "tool", "tool_call_id": "c2", "content": LOST}]
    assert "call_cue" not in queries(held, "SHARD_77")
    assert queries([system()], "SHARD_77") == {"exact": "SHARD_77"}  # no line holds it: only the exact word


@pytest.mark.asyncio
async def test_the_probe_asks_the_recall_tool_once_per_kind():
    from evaluation.recall_probe import probe

    ctx = SimpleContextManager()
    await add_all(ctx, session())
    counts = await probe(ctx, ["SHARD_77", "replica_3"])
    assert set(counts) == set(QUERY_KINDS)
    assert counts["exact"] == [2, 2]  # the exact word is always found here
    assert counts["three_words"][0] == 2 and counts["line_cue"][1] >= 1
    assert all(0 <= found <= asked for asked, found in counts.values())

    class Other:  # another engine: no stored history to search
        messages = None

    assert await probe(Other(), ["SHARD_77"]) == {}


def test_recall_rates_pool_each_kind_over_the_runs():
    from evaluation.recall_probe import recall_rates

    window = Window(1, 1, 1, 1)
    one = Run("a", "w1", "", window, "x", requests=[Request(1, recall={"exact": [2, 2], "line_cue": [2, 1]})])
    two = Run("a", "w2", "", window, "x", requests=[Request(1, recall={"exact": [1, 1], "call_cue": [1, 0]})])
    off = Run("a", "w3", "", window, "x", available=False, requests=[Request(1, recall={"exact": [5, 0]})])
    rates = recall_rates([one, two, off])
    assert rates["exact"] == {"queries": 3, "found": 3, "rate": 1.0}
    assert rates["line_cue"]["rate"] == 0.5 and rates["call_cue"]["rate"] == 0.0
    assert rates["three_words"] == {"queries": 0, "found": 0, "rate": None}


def test_the_report_gives_recall_per_query_and_says_which_query_each_figure_uses(tmp_path, capsys):
    argv = ["--workload", str(SMALL), "--arms", "progressive", "--jobs", "1", "--no-plots", "--no-shaped"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    by = json.loads((tmp_path / "report.json").read_text())["totals"]["progressive"]["recall_by_query"]
    assert set(by) == set(QUERY_KINDS) and by["exact"]["queries"] > 0 and by["line_cue"]["queries"] > 0
    md = (tmp_path / "report.md").read_text()
    assert "## What context_recall gives back" in md
    assert "| configuration | exact word | word of the line | call | 3 words |" in md
    assert "- **call**: the path or command of the call whose result held it. The query:" in md
    flat = " ".join(out.split())
    assert "the exact lost word 100%" in flat and "another distinctive word of its line" in flat
    assert "three words of its line" in flat


def test_the_recall_study_runs_alone_on_named_sessions_within_80_columns(capsys):
    from evaluation.studies import recall_cues

    assert recall_cues.main(["--workload", str(SMALL), "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 80 for line in out.splitlines())
    assert "progressive, the default (no keys):" in out
    for label in ("exact word", "word of the line", "call", "3 words"):
        assert any(line.strip().startswith(label) for line in out.splitlines()), label


@pytest.mark.parametrize("command", ["evaluation.__main__", "evaluation.studies.recall_cues"])
def test_split_and_workload_together_are_refused_in_one_line(command, capsys):
    import importlib

    assert importlib.import_module(command).main(["--split", "tune", "--workload", str(SMALL)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--split picks a half of the 26 transcripts" in err and "\n" not in err


def test_the_two_halves_alternate_by_file_name_and_cover_the_26_transcripts():
    files = sorted(p.name for p in cli.TESTS_WORKLOADS.glob("*.jsonl"))
    tune = [w.source for w in cli.real_workloads(None, False, "tune")]
    report = [w.source for w in cli.real_workloads(None, False, "report")]
    assert len(files) == 26 and len(tune) == len(report) == 13
    assert [p.rsplit("/", 1)[-1] for p in tune] == files[0::2]
    assert [p.rsplit("/", 1)[-1] for p in report] == files[1::2]


def test_the_main_run_takes_a_half(monkeypatch):
    from evaluation import __main__ as entry

    args = entry.parse(["--split", "report", "--no-scenario"])
    names = [w.name for w in entry.choose_workloads(args)]
    assert names == [w.name for w in cli.real_workloads(None, False, "report")]
