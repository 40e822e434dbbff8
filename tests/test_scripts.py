"""Every script of the repository (tests/*.py tools, evaluation commands, examples) answers ``--help`` with
exit status 0 and writes nothing (issue 31 item 13: ``python -m tests.regen_golden --help`` rewrote the
golden file, ``python -m tests.review_sweep --help`` ended in a traceback)."""

from __future__ import annotations

import json
import os
import re
import runpy
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pytest

from tests import regen_golden

ROOT = Path(__file__).resolve().parent.parent
SCRIPT_FOLDERS = ("tests", "evaluation", "examples")
MAIN_GUARD = re.compile(r'^if __name__ == "__main__":', re.MULTILINE)
NOT_WRITTEN = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis"}


def scripts() -> list[str]:
    found = []
    for folder in SCRIPT_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if MAIN_GUARD.search(path.read_text(encoding="utf-8")):
                found.append(path.relative_to(ROOT).as_posix())
    return found


def tree_state() -> dict[str, tuple[int, int]]:
    """Every file of the checkout but caches, with its size and modification time."""
    state = {}
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in NOT_WRITTEN]
        for name in files:
            path = os.path.join(folder, name)
            info = os.stat(path)
            state[os.path.relpath(path, ROOT)] = (info.st_size, info.st_mtime_ns)
    return state


def run_script(script: str, *argv: str) -> int:
    """Run a script as ``python -m`` or ``python FILE`` would, in this process; its exit status."""
    saved = sys.argv
    sys.argv = [script, *argv]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # runpy: "found in sys.modules" (it is, by tests)
            if script.startswith("examples/"):
                runpy.run_path(str(ROOT / script), run_name="__main__")
            else:
                module = script.removesuffix(".py").removesuffix("/__main__").replace("/", ".")
                runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = saved
    return 0


def test_the_scripts_are_found():
    found = scripts()
    assert {"tests/regen_golden.py", "tests/review_sweep.py", "evaluation/__main__.py"} <= set(found)
    assert len([s for s in found if s.startswith("evaluation/")]) >= 10
    assert len([s for s in found if s.startswith("examples/")]) == 4


@pytest.mark.parametrize("script", scripts())
def test_every_script_answers_help_and_writes_nothing(script, tmp_path, monkeypatch, capsys):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # a temporary directory made at import shows here
    before = tree_state()
    code = run_script(script, "--help")
    out = capsys.readouterr().out
    assert code == 0, out
    assert "usage:" in out
    assert tree_state() == before, "a --help run changed files of the checkout"
    assert list(scratch.iterdir()) == []


def test_regen_golden_help_runs_as_a_command():
    done = subprocess.run(
        [sys.executable, "-m", "tests.regen_golden", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "--write" in done.stdout, done.stderr


@pytest.fixture
def golden_copy(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "golden_views.json"
    path.write_text(regen_golden.GOLDEN_PATH.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(regen_golden, "GOLDEN_PATH", path)
    hashes = regen_golden.load_golden()
    changed = {**hashes, sorted(hashes)[0]: "0" * 64}

    async def compute() -> dict[str, str]:
        return changed

    monkeypatch.setattr(regen_golden, "compute_golden", compute)
    return path


def test_regen_golden_shows_what_would_change_and_writes_only_when_asked(golden_copy, capsys):
    before = golden_copy.read_text(encoding="utf-8")
    assert regen_golden.main([]) == 1
    out = capsys.readouterr().out
    assert "changed: " in out and "--write" in out and golden_copy.read_text(encoding="utf-8") == before
    assert regen_golden.main(["--write"]) == 0
    assert "0" * 64 in json.loads(golden_copy.read_text(encoding="utf-8"))["hashes"].values()
    assert regen_golden.main([]) == 0 and "match" in capsys.readouterr().out


def test_regen_golden_evidence_rewrites_only_the_evidence_file(golden_copy, tmp_path, monkeypatch, capsys):
    """``--evidence`` compares and rewrites the presets' golden file, never the default's."""
    path = tmp_path / "golden_evidence_views.json"
    path.write_text(regen_golden.EVIDENCE_PATH.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(regen_golden, "EVIDENCE_PATH", path)
    hashes = regen_golden.load_evidence_golden()
    changed = {**hashes, sorted(hashes)[-1]: "1" * 64}

    async def compute() -> dict[str, str]:
        return changed

    monkeypatch.setattr(regen_golden, "compute_evidence_golden", compute)
    default_before, before = golden_copy.read_text(encoding="utf-8"), path.read_text(encoding="utf-8")
    assert regen_golden.main(["--evidence"]) == 1 and path.read_text(encoding="utf-8") == before
    assert f"changed: {sorted(hashes)[-1]}" in capsys.readouterr().out
    assert regen_golden.main(["--evidence", "--write"]) == 0
    assert json.loads(path.read_text(encoding="utf-8"))["hashes"] == changed
    assert golden_copy.read_text(encoding="utf-8") == default_before  # the default's file is untouched


def test_review_sweep_refuses_an_unknown_configuration_in_one_line(capsys):
    from tests import review_sweep

    assert review_sweep.main(["evidence,nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown configuration nope" in err[0]
