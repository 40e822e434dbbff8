"""The tight-window scenario (issue 29): a small model's window under Amplifier's own orchestrator.

One generated session, seeded: 40 user turns, each with one or two tool calls whose results are
5-60 KB of realistic text (numbered file reads, grep hits, test logs), some user turns with a
screenshot (an image block), stored as loop-streaming stores it (`host_shaped.host_shape`: content
blocks, wrapped results, hook-shell messages, steering) and sent with the hooks' reminders on every
request. The provider reports a 40,000-token window with 4,000 output tokens (input limit 36,000)
and every arm of this module runs with `max_tokens: 20000`.

Each turn's answer quotes names from its own results and from an earlier turn's, and each call after
the first turn names a file an earlier result listed, so the evidence metric has lines to miss.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from .arms import DEFAULT_ENGINE, PASSTHROUGH, Arm
from .host_shaped import host_shape
from .workloads import Workload

CONTEXT_WINDOW = 40_000
MAX_OUTPUT_TOKENS = 4_000
MAX_TOKENS = 20_000
TURNS = 40
RESULT_KB = (5, 60)
SCREENSHOT_EVERY = 5  # every fifth user turn pastes a screenshot
SCREENSHOT_BYTES = 30_000  # of PNG-like bytes, base64 in the block (a real one is larger: same cost)
TWO_CALLS_SHARE = 0.5
NAME = "tight-window"
SYSTEM = (
    "You are a software engineering agent working in a Python repository. Use the tools to read files, "
    "search the code and run the tests. Make small, reviewed changes, keep the user's requests in mind "
    "at every step, and report what you changed and why. Quote the lines you rely on."
)
TASKS = (
    "The loader fails on files with an empty header; find out why and fix it.",
    "Tests in the cache package are flaky on CI; see what the logs say.",
    "Where is the retry budget computed? It seems to ignore the config.",
    "Rename the old settings helper and update every caller.",
    "The parser is slow on large inputs; find the hot loop.",
)
KINDS = ("read_file", "grep", "run_tests")


class _Session:
    """The plain (OpenAI-style) session being generated, with what earlier results made known."""

    def __init__(self, rng: random.Random, screenshots: bool = True) -> None:
        self.rng = rng
        self.with_screenshots = screenshots
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        self.paths: list[str] = ["src/pkg/loader_1.py"]
        self.names: list[str] = ["parse_header_1"]
        self.calls = 0
        self.screenshots = 0
        self.results: list[int] = []

    def path(self) -> str:
        stem = self.rng.choice(("loader", "cache", "retry", "parser", "settings"))
        return f"src/pkg/{stem}_{self.rng.randint(1, 60)}.py"

    def name(self) -> str:
        stem = self.rng.choice(("parse_header", "load_block", "retry_budget", "cache_key", "read_config"))
        return f"{stem}_{self.rng.randint(1, 400)}"


def _code_lines(s: _Session, path: str) -> Iterator[str]:
    """A numbered file read: function definitions and bodies with distinctive names."""
    yield f"# {path}"
    n = 1
    while True:
        name = s.name()
        s.names.append(name)
        for text in (
            f"def {name}(buf, limit={s.rng.randint(100, 9999)}):",
            f'    """Read one block from buf; see {s.path()}."""',
            f"    header = buf.read_header(offset={s.rng.randint(0, 4096)})",
            "    if not header:",
            f"        raise ValueError('empty header in {name}')",
            f"    return header.value_{s.rng.randint(10, 99)} + limit",
            "",
        ):
            yield f"{n:6d}\t{text}"
            n += 1


def _grep_lines(s: _Session, pattern: str) -> Iterator[str]:
    while True:
        path = s.path()
        s.paths.append(path)
        yield f"{path}:{s.rng.randint(1, 900)}:    value = {pattern}(buf, limit={s.rng.randint(100, 9999)})"


def _log_lines(s: _Session, target: str) -> Iterator[str]:
    n = 0
    while True:
        n += 1
        sec = n % 60
        name = s.names[s.rng.randrange(len(s.names))]
        if n % 17 == 0:
            yield f"FAILED tests/test_{target}.py::test_{name} - ValueError: empty header in {name}"
        else:
            stamp = f"2025-01-01T12:{n // 60 % 60:02d}:{sec:02d}Z"
            yield f"{stamp} INFO worker_{n % 8} ran test_{name} in {s.rng.randint(3, 900)}ms"


def _result(s: _Session, kind: str, target: str, size: int) -> str:
    """A tool result of about `size` characters, of the kind's realistic shape."""
    source = {"read_file": _code_lines, "grep": _grep_lines, "run_tests": _log_lines}[kind](s, target)
    out: list[str] = []
    total = 0
    while total < size:
        line = next(source)
        out.append(line)
        total += len(line) + 1
    return "\n".join(out)


def _call(s: _Session, kind: str, target: str) -> dict[str, Any]:
    s.calls += 1
    args = {
        "read_file": {"path": target},
        "grep": {"pattern": target, "path": "src"},
        "run_tests": {"command": f"pytest tests/test_{target}.py -x"},
    }[kind]
    return {"id": f"toolu_{s.calls:04d}", "type": "function", "function": {"name": kind, "arguments": json.dumps(args)}}


def _screenshot(s: _Session) -> dict[str, Any]:
    s.screenshots += 1
    data = base64.b64encode(s.rng.randbytes(SCREENSHOT_BYTES)).decode()
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def _turn(s: _Session, turn: int) -> None:
    rng = s.rng
    task = f"{TASKS[turn % len(TASKS)]} Start from {s.paths[-1]}."
    if turn % SCREENSHOT_EVERY == SCREENSHOT_EVERY - 1:
        image = _screenshot(s)  # drawn either way, so that a seed's calls and results do not depend on it
        content = [{"type": "text", "text": task}, image] if s.with_screenshots else task
        s.messages.append({"role": "user", "content": content})
    else:
        s.messages.append({"role": "user", "content": task})
    earlier = (rng.choice(s.paths), rng.choice(s.names))  # named by an earlier result, cited in the answer
    for _ in range(2 if rng.random() < TWO_CALLS_SHARE else 1):
        kind = rng.choice(KINDS)
        target = {"read_file": rng.choice(s.paths), "grep": rng.choice(s.names), "run_tests": rng.choice(s.names)}[kind]
        call = _call(s, kind, target)
        s.messages.append({"role": "assistant", "content": f"Looking at {target} next.", "tool_calls": [call]})
        size = int(1024 * rng.uniform(*RESULT_KB))
        s.messages.append({"role": "tool", "tool_call_id": call["id"], "content": _result(s, kind, target, size)})
        s.results.append(size)
    answer = (
        f"Found it: {s.names[-1]} raises on an empty header, called from {s.paths[-1]}. "
        f"It matches what {earlier[0]} showed earlier for {earlier[1]}; I will keep the change small."
    )
    s.messages.append({"role": "assistant", "content": answer})


def plain_session(seed: int = 7, screenshots: bool = True) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The session in the plain OpenAI form, and its shape (turns, results, sizes, screenshots). Without
    screenshots a seed gives the same session less its image blocks (their bytes are still drawn)."""
    s = _Session(random.Random(seed), screenshots)
    for turn in range(TURNS):
        _turn(s, turn)
    shape = {
        "turns": TURNS,
        "tool_results": len(s.results),
        "result_kb_min": RESULT_KB[0],
        "result_kb_max": RESULT_KB[1],
        "screenshots": s.screenshots if screenshots else 0,
        "context_window": CONTEXT_WINDOW,
        "max_output_tokens": MAX_OUTPUT_TOKENS,
        "input_limit": CONTEXT_WINDOW - MAX_OUTPUT_TOKENS,
        "max_tokens": MAX_TOKENS,
        "seed": seed,
    }
    return s.messages, shape


def tight_workload(seed: int = 7, screenshots: bool = True) -> tuple[Workload, dict[str, Any]]:
    """The scenario as the harness replays it: host-shaped, reminders billed, the provider's window fixed."""
    messages, shape = plain_session(seed, screenshots)
    workload = Workload(
        NAME,
        host_shape(messages, seed),
        source=f"generated (seed {seed})",
        host_reminders=True,
        recall_probe=False,
        context_window=CONTEXT_WINDOW,
        max_output_tokens=MAX_OUTPUT_TOKENS,
    )
    return workload, shape


def tight_arms(arms: list[Arm]) -> list[Arm]:
    """Every arm of this module with `max_tokens: 20000` (an arm's own setting wins), other engines as
    they are; not the no-compaction reference, which no 40,000-token window takes (its views hold the
    whole session, ~840,000 tokens: all but its first requests would be rejected), nor the peers, which
    never shrink what they keep either (evaluation/peers.py)."""
    from .peers import is_peer

    kept = [a for a in arms if a.engine != PASSTHROUGH and not is_peer(a.engine)]
    return [
        replace(a, config={"max_tokens": MAX_TOKENS, **a.config}) if a.engine == DEFAULT_ENGINE else a for a in kept
    ]
