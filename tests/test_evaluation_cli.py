"""Bad input to the evaluation: one line on stderr naming the file, the line and the problem; exit 2; no work done."""

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation import __main__ as evaluation_main
from evaluation import identity, runner
from evaluation.arms import ARMS
from evaluation.workloads import SHIPPED_DIR, load_jsonl

SMALL = SHIPPED_DIR / "taubench__airline__task002__trial1.jsonl"
LINES = SMALL.read_text(encoding="utf-8").splitlines()
ROOT = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def jsonl(*messages: dict) -> str:
    return "".join(json.dumps(m) + "\n" for m in messages)


SYSTEM, USER = {"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}
ANSWER = {"role": "assistant", "content": "hello"}


@pytest.fixture(autouse=True)
def keep_logging():
    """The commands quiet the module's logger for their tables; other tests' caplog must not notice."""
    module = logging.getLogger("amplifier_module_context_simple")
    level, disabled = module.level, logging.root.manager.disable
    yield
    module.setLevel(level)
    logging.disable(disabled)


@pytest.fixture
def no_workers(monkeypatch):
    """Fail the test if the replay (the workers) ever starts."""

    def refuse(*_a, **_k):
        raise AssertionError("the replay started although the input was bad")

    monkeypatch.setattr(runner, "run_all", refuse)


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    code = evaluation_main.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


BAD_LINE_11 = "\n".join(LINES[:10] + ['{"role": "user", "content": "x",}'] + LINES[11:])
NOT_UTF8 = jsonl(SYSTEM, USER).encode() + b'{"role": "assistant", "content": "\xff"}\n'
BAD_FILES = {
    "bad_json_line_11": ("s.jsonl", BAD_LINE_11, ":11:", "not valid JSON"),
    "bom": ("s.jsonl", b"\xef\xbb\xbf" + SMALL.read_bytes(), ":1:", "byte-order mark"),
    "number_content": ("s.jsonl", jsonl(SYSTEM, {"role": "user", "content": 42}, ANSWER), ":2:", "content is a number"),
    "object_content": ("s.jsonl", jsonl(SYSTEM, {"role": "user", "content": {"a": 1}}, ANSWER), ":2:", "JSON object"),
    "whole_file_array": ("s.jsonl", json.dumps([json.loads(x) for x in LINES]), ":1:", "JSON array"),
    "pretty_array": ("s.json", json.dumps([SYSTEM, USER, ANSWER], indent=1), ":1:", "JSON array"),
    "not_utf8": ("s.jsonl", NOT_UTF8, ":3:", "not UTF-8"),
    "bad_role": ("s.jsonl", jsonl(SYSTEM, {"role": "robot", "content": "x"}, ANSWER), ":2:", "role 'robot'"),
    "orphan_tool_result": (
        "s.jsonl",
        jsonl(SYSTEM, USER, {"role": "tool", "tool_call_id": "c9", "content": "x"}, ANSWER),
        ":3:",
        "'c9', which no earlier message made",
    ),
    "line_is_a_string": ("s.jsonl", jsonl(SYSTEM, USER) + '"hello"\n', ":3:", "a string, not a message object"),
    "empty": ("s.jsonl", "", "", "empty file"),
    "whitespace_only": ("s.jsonl", "  \n\n\t\n", "", "only whitespace"),
    "user_only": ("s.jsonl", jsonl(USER, USER), "", "no assistant message"),
    "anthropic_image_in_result": (
        "s.jsonl",
        jsonl(
            USER,
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "image"}]}]},
            ANSWER,
        ),
        ":3:",
        "'image' block cannot be converted",
    ),
    "anthropic_tool_use_on_user": (
        "s.jsonl",
        jsonl({"role": "user", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]}, ANSWER),
        ":1:",
        "a tool_use block belongs on an assistant message",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_workload_file_is_one_line_naming_file_line_and_problem(case, tmp_path, capsys, no_workers):
    name, data, line, problem = BAD_FILES[case]
    path = write(tmp_path, name, data)
    code, out, err = run_main(capsys, "--workload", str(path), "--out", str(tmp_path / "out"))
    assert code == 2
    one_line_error(err, f"{path}{line}", problem)
    assert out == ""


def test_a_missing_path_or_an_empty_folder_is_refused(tmp_path, capsys, no_workers):
    code, _, err = run_main(capsys, "--workload", str(tmp_path / "nope.jsonl"))
    assert code == 2
    one_line_error(err, str(tmp_path / "nope.jsonl"), "no such file or folder")
    code, _, err = run_main(capsys, "--workload", str(tmp_path))
    assert code == 2
    one_line_error(err, str(tmp_path), "no .jsonl sessions")


def test_every_file_is_checked_before_the_replay_even_after_good_ones(tmp_path, capsys, no_workers):
    bad = write(tmp_path, "bad.jsonl", jsonl(USER))
    code, _, err = run_main(capsys, "--workload", str(SMALL), "--workload", str(bad))
    assert code == 2
    one_line_error(err, str(bad), "no assistant message")


def anthropic_style(lines: list[str]) -> list[dict]:
    """The OpenAI-style session as Anthropic content blocks (consecutive tool results in one user turn)."""
    out: list[dict] = []
    for message in map(json.loads, lines):
        if message["role"] == "assistant" and message.get("tool_calls"):
            blocks = [{"type": "text", "text": message["content"]}] if message["content"] else []
            for call in message["tool_calls"]:
                args = json.loads(call["function"]["arguments"])
                blocks.append({"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": args})
            out.append({"role": "assistant", "content": blocks})
        elif message["role"] == "tool":
            block = {"type": "tool_result", "tool_use_id": message["tool_call_id"], "content": message["content"]}
            if out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        else:
            out.append(message)
    return out


def openai_twin(lines: list[str]) -> str:
    """The session as Anthropic would carry it, still OpenAI-style: no tool names on results, arguments re-dumped."""
    out = []
    for message in map(json.loads, lines):
        message.pop("name", None)
        for call in message.get("tool_calls") or []:
            fn = call["function"]
            fn["arguments"] = json.dumps(json.loads(fn["arguments"]), ensure_ascii=False)
        out.append(message)
    return jsonl(*out)


def test_anthropic_tool_blocks_become_the_openai_shape(tmp_path):
    openai = write(tmp_path, "openai.jsonl", openai_twin(LINES))
    anthropic = write(tmp_path, "anthropic.jsonl", jsonl(*anthropic_style(LINES)))
    assert load_jsonl(anthropic).messages == load_jsonl(openai).messages
    assert any(m.get("tool_calls") for m in load_jsonl(anthropic).messages)


def test_an_anthropic_session_is_measured_with_its_tool_groups(tmp_path, capsys):
    """Before: accepted silently, no tool groups, estimate error +448%. Now the same figures as OpenAI-style."""
    figures = {}
    for name, text in (("openai", openai_twin(LINES)), ("anthropic", jsonl(*anthropic_style(LINES)))):
        path = write(tmp_path, f"{name}.jsonl", text)
        out = tmp_path / f"out-{name}"
        argv = ["--workload", str(path), "--arms", "progressive", "--jobs", "1", "--no-plots", "--out", str(out)]
        assert evaluation_main.main(argv) == 0
        data = json.loads((out / "report.json").read_text())
        figures[name] = {k: v for k, v in data["totals"]["progressive"].items() if "ms" not in k}
    capsys.readouterr()
    assert figures["anthropic"] == figures["openai"]
    assert figures["anthropic"]["orphan_tool_results"] == 0


def test_the_developer_role_is_accepted_and_replayed(tmp_path, capsys):
    path = write(tmp_path, "dev.jsonl", jsonl(SYSTEM, {"role": "developer", "content": "use tabs"}, USER, ANSWER))
    assert [m["role"] for m in load_jsonl(path).messages] == ["system", "developer", "user", "assistant"]
    argv = ["--workload", str(path), "--arms", "progressive", "--jobs", "1", "--no-plots", "--out", str(tmp_path)]
    assert evaluation_main.main(argv) == 0
    rows = json.loads((tmp_path / "report.json").read_text())["rows"]
    assert [r["workload"] for r in rows] == ["dev"]
    capsys.readouterr()


def test_named_workloads_run_alone_unless_the_scenario_is_asked_for():
    choose = evaluation_main.choose_workloads
    parse = evaluation_main.parse
    assert [w.name for w in choose(parse(["--workload", str(SMALL)]))] == [SMALL.stem]
    named_plus = [w.name for w in choose(parse(["--workload", str(SMALL), "--scenario"]))]
    generated = [f"{kind}-seed{s}" for kind in ("retention", "corrections") for s in (7, 8, 9, 10)]
    assert named_plus == [SMALL.stem, *generated]
    default = [w.name for w in choose(parse([]))]
    assert "retention-seed7" in default and len(default) > 5
    assert "retention-seed7" not in [w.name for w in choose(parse(["--no-scenario"]))]
    every = [w.name for w in choose(parse(["--all-workloads", "--no-scenario"]))]
    assert len(every) == 26 and SMALL.stem in every


BAD_OPTIONS = {
    "misspelled_arm": (["--arms", "progresive"], "unknown arm 'progresive' (did you mean 'progressive'?)"),
    "no_arm": (["--arms", ","], "no arm named"),
    "arm_twice": (["--arms", "none,progressive,none"], "--arms: 'none' named twice"),
    "engine_twice": (["--engine", "passthrough", "--engine", "passthrough"], "--engine 'passthrough' named twice"),
    "workload_twice": (["--workload", str(SMALL), "--workload", str(SMALL)], f"two sessions named {SMALL.stem!r}"),
    "unknown_engine": (["--engine", "nonexistent-module"], "unknown engine 'nonexistent-module'"),
    "window_zero": (["--window-fraction", "0"], "--window-fraction: 0 is out of range"),
    "window_negative": (["--window-fraction", "-0.5"], "--window-fraction: -0.5 is out of range"),
    "window_two": (["--window-fraction", "2"], "--window-fraction: 2 is out of range"),
    "window_nan": (["--window-fraction", "nan"], "not a finite number"),
    "jobs_zero": (["--jobs", "0"], "--jobs: 0 is out of range: must be >= 1"),
    "max_output_negative": (["--max-output-tokens", "-5"], "--max-output-tokens: -5 is out of range"),
    "overhead_negative": (["--request-overhead", "-1"], "--request-overhead: -1 is out of range"),
    "price_negative": (["--price-cache-read", "-0.1"], "--price-cache-read: -0.1 is out of range"),
    "not_a_number": (["--jobs", "two"], "'two' is not an integer"),
    "unknown_option": (["--windowfraction", "0.3"], "unrecognized arguments"),
}


@pytest.mark.parametrize("case", sorted(BAD_OPTIONS))
def test_a_bad_option_is_one_line_and_exit_2(case, capsys, no_workers):
    argv, message = BAD_OPTIONS[case]
    code, out, err = run_main(capsys, *argv)
    assert code == 2
    one_line_error(err, message)


def test_out_that_is_a_file_is_refused_before_the_work(tmp_path, capsys, no_workers):
    blocker = write(tmp_path, "report", "x")
    code, _, err = run_main(capsys, "--workload", str(SMALL), "--out", str(blocker))
    assert code == 2
    one_line_error(err, "--out", "not a folder")


def test_help_shows_defaults_and_every_arm(capsys):
    code, out, _ = run_main(capsys, "--help")
    assert code == 0
    assert "(default: 0.3)" in out and "(default: 1024)" in out and "(default: 7)" in out
    for arm in ARMS:
        assert f"  {arm.name} " in out


def test_the_command_line_really_exits_2_with_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "evaluation", "--workload", str(tmp_path / "missing.jsonl")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    one_line_error(result.stderr, "missing.jsonl: no such file or folder")


# identity


@pytest.fixture
def fake_compute(monkeypatch):
    """identity.compute without the replays: fixed hashes, both verdicts true."""
    calls = []

    def compute():
        calls.append(1)
        hashes = {"planted-facts-seed1": "aaa", "planted-facts-seed2": "bbb"}
        return {
            "hashes": {"default": hashes, "opt_in_off": hashes, "negative_control": {"x": "y"}},
            "keys_not_read_by_module": [],
            "default_equals_opt_in_off": True,
            "negative_control_differs": True,
        }

    monkeypatch.setattr(identity, "compute", compute)
    return calls


def test_identity_check_of_a_missing_or_broken_file_fails_before_the_work(tmp_path, capsys, fake_compute):
    assert identity.main(["--check", str(tmp_path / "pinned.json")]) == 2
    one_line_error(capsys.readouterr().err, "--check", "pinned.json: no such file")
    broken = write(tmp_path, "broken.json", '{\n "a": "b",\n}')
    assert identity.main(["--check", str(broken)]) == 2
    one_line_error(capsys.readouterr().err, f"{broken}:3: not JSON")
    wrong = write(tmp_path, "wrong.json", "[1, 2]")
    assert identity.main(["--check", str(wrong)]) == 2
    one_line_error(capsys.readouterr().err, "expected an object of scenario name -> hash")
    assert fake_compute == []


def test_identity_save_into_a_missing_folder_fails_before_the_work(tmp_path, capsys, fake_compute):
    assert identity.main(["--save", str(tmp_path / "nowhere" / "pinned.json")]) == 2
    one_line_error(capsys.readouterr().err, "--save", "does not exist")
    assert fake_compute == []


def test_identity_save_confirms_and_a_mismatch_names_the_scenario(tmp_path, capsys, fake_compute):
    pinned = tmp_path / "pinned.json"
    assert identity.main(["--save", str(pinned)]) == 0
    assert f"saved 2 default-view hashes to {pinned}" in capsys.readouterr().out
    assert identity.main(["--check", str(pinned)]) == 0
    pinned.write_text(json.dumps({"planted-facts-seed1": "aaa", "planted-facts-seed2": "zzz"}))
    assert identity.main(["--check", str(pinned)]) == 1
    out = capsys.readouterr().out
    assert "scenario planted-facts-seed2 differs: pinned zzz, now bbb" in out
    assert "seed1 differs" not in out


# the measurement commands: one argument style

COMMANDS = [
    "meter_report",
    "counter_error",
    "counter_arms",
    "tail_retention",
    "summary_refire",
    "resume_eval",
    "clear_at_least_gate",
    "bench_request_path",
    "bench_scale",
]
WINDOWED = ["meter_report", "counter_arms", "tail_retention", "summary_refire", "resume_eval", "clear_at_least_gate"]


def command(name: str):
    import importlib

    folder = "benchmarks." if name.startswith("bench_") else "" if name == "identity" else "studies."
    return importlib.import_module(f"evaluation.{folder}{name}").main


@pytest.mark.parametrize("name", [*COMMANDS, "bench_tool_results", "identity"])
def test_every_command_has_help(name, capsys):
    assert command(name)(["--help"]) == 0
    out = capsys.readouterr().out
    assert f"usage: python -m evaluation{'' if name == 'identity' else '.'}" in out
    assert ("--workload PATH" in out) == (name in COMMANDS)
    if name in WINDOWED:
        assert "--window-fraction X" in out and "(default: " in out


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_refuses_a_bad_workload_in_one_line(name, tmp_path, capsys):
    bad = write(tmp_path, "bad.jsonl", jsonl(SYSTEM, {"role": "user", "content": [1]}, ANSWER))
    assert command(name)(["--workload", str(bad)]) == 2
    err = capsys.readouterr().err
    one_line_error(err, f"python -m {command(name).__module__}: error: {bad}:2:", "content block is a number")
    assert command(name)(["--workload", str(tmp_path / "missing")]) == 2
    one_line_error(capsys.readouterr().err, "missing: no such file or folder")


@pytest.mark.parametrize("name", WINDOWED)
@pytest.mark.parametrize("value", ["0", "1.5", "-0.2"])
def test_every_window_fraction_is_range_checked(name, value, capsys):
    assert command(name)(["--window-fraction", value]) == 2
    one_line_error(capsys.readouterr().err, f"--window-fraction: {value} is out of range")


@pytest.mark.parametrize(
    ("name", "argv", "message"),
    [
        ("tail_retention", ["--fraction", "0"], "--fraction: 0 is out of range"),
        ("summary_refire", ["--limit", "0"], "--limit: 0 is out of range"),
        ("resume_eval", ["--every", "0"], "--every: 0 is out of range"),
        ("clear_at_least_gate", ["--floors", "lots"], "'lots' is not 'off', a token count or a fraction"),
        ("clear_at_least_gate", ["--meters", "exact"], "invalid choice: 'exact'"),
        ("clear_at_least_gate", ["--fractions", "0"], "--fractions: 0 is out of range"),
        ("clear_at_least_gate", ["--workload", str(SMALL)], "no session of"),
        ("bench_request_path", ["--longest", "0"], "--longest: 0 is out of range"),
        ("bench_tool_results", ["--reps", "0"], "--reps: 0 is out of range"),
        ("bench_tool_results", ["--spill-root", "/no/such/dir"], "--spill-root /no/such/dir: no such folder"),
        ("meter_report", ["--help.jsonl"], "unrecognized arguments"),
    ],
)
def test_command_specific_options_are_checked(name, argv, message, capsys):
    assert command(name)(argv) == 2
    one_line_error(capsys.readouterr().err, message)


def test_old_spellings_still_work_as_hidden_aliases(capsys):
    from evaluation.studies import clear_at_least_gate

    args = clear_at_least_gate.parse(["--workloads", str(SMALL), "--fractions", "0.3", "0.4"])
    assert args.workload == [str(SMALL)] and args.window_fraction == [0.3, 0.4]
    assert clear_at_least_gate.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--workload PATH" in out and "--workloads" not in out and "--fractions" not in out


def test_meter_report_reads_the_named_workload(capsys):
    from evaluation.studies import meter_report

    assert meter_report.main(["--workload", str(SMALL), "--window-fraction", "0.5"]) == 0
    out = capsys.readouterr().out
    assert f"| {SMALL.stem} |" in out and "window = token_budget = 50%" in out
