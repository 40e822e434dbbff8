"""The sdist ships a consistent source tree: every tracked file (tests with their data, the evaluation with its
workloads, the examples, the docs) except the CI wiring, so both README commands work from it."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LEFT_OUT = (".ci/",)  # CI wiring only


def tracked_files() -> set[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (e.g. an unpacked sdist): nothing to compare against")
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return {name for name in out.splitlines() if (ROOT / name).exists()}


def uv_command() -> list[str]:
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not available to build the sdist")
    return [uv]


@pytest.mark.slow
def test_sdist_contains_every_tracked_file_but_the_ci_wiring(tmp_path: Path):
    expected = {name for name in tracked_files() if not name.startswith(LEFT_OUT)}
    subprocess.run(
        [*uv_command(), "build", "--sdist", "--out-dir", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (archive,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        shipped = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert expected - shipped == set(), "tracked files missing from the sdist"
    assert not any(name.startswith(LEFT_OUT) for name in shipped)
    # The pieces the issue found inconsistent: tests ship together with their data and the evaluation.
    assert {"tests/conftest.py", "tests/data/golden_views.json", "evaluation/__main__.py"} <= shipped
    assert any(name.startswith("tests/data/workloads/") for name in shipped)
    assert any(name.startswith("evaluation/workloads/") for name in shipped)
