"""Run every arm on every workload, in parallel worker processes, with a progress bar."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from .arms import Arm
from .driver import Run, Settings, replay
from .tokens import TokenCounter
from .workloads import Workload

_COUNTER: TokenCounter | None = None


def _init_worker(use_tiktoken: bool) -> None:
    global _COUNTER
    _COUNTER = TokenCounter(use_tiktoken)


def _task(arm: Arm, workload: Workload, settings: Settings) -> Run:
    assert _COUNTER is not None
    return replay(arm, workload, settings, _COUNTER)


def default_jobs() -> int:
    """Worker processes: the machine's cores, at most 4."""
    return max(1, min(4, os.cpu_count() or 1))


def run_all(
    arms: list[Arm],
    workloads: list[Workload],
    settings: Settings,
    jobs: int = 1,
    use_tiktoken: bool = True,
    progress: Any = None,
) -> list[Run]:
    """Every (arm, workload) pair, returned in table order whatever the completion order."""
    return run_pairs([(a, w) for a in arms for w in workloads], settings, jobs, use_tiktoken, progress)


def run_pairs(
    tasks: list[tuple[Arm, Workload]],
    settings: Settings,
    jobs: int = 1,
    use_tiktoken: bool = True,
    progress: Any = None,
) -> list[Run]:
    """Each (arm, workload) pair, returned in the given order; the largest sessions start first, so no
    worker is left with one long replay at the end."""
    if progress is not None:
        progress.total(len(tasks))
    if jobs <= 1:
        _init_worker(use_tiktoken)
        out = []
        for a, w in tasks:
            out.append(_task(a, w, settings))
            _advance(progress, a, w)
        return out
    sizes = {id(w): _size(w) for _, w in tasks}
    order = sorted(range(len(tasks)), key=lambda i: -sizes[id(tasks[i][1])])
    results: dict[int, Run] = {}
    with ProcessPoolExecutor(jobs, initializer=_init_worker, initargs=(use_tiktoken,)) as pool:
        futures = {pool.submit(_task, *tasks[i], settings): i for i in order}
        for fut in as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            _advance(progress, *tasks[i])
    return [results[i] for i in range(len(tasks))]


def _size(workload: Workload) -> int:
    """About how long a replay of the workload takes: the characters of its contents."""
    return sum(len(m["content"]) if isinstance(m.get("content"), str) else 1000 for m in workload.messages)


def _advance(progress: Any, arm: Arm, workload: Workload) -> None:
    if progress is not None:
        progress.advance(f"{arm.name} / {workload.name}")
