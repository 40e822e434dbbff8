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
    tasks = [(a, w) for a in arms for w in workloads]
    if progress is not None:
        progress.total(len(tasks))
    if jobs <= 1:
        _init_worker(use_tiktoken)
        out = []
        for a, w in tasks:
            out.append(_task(a, w, settings))
            _advance(progress, a, w)
        return out
    results: dict[int, Run] = {}
    with ProcessPoolExecutor(jobs, initializer=_init_worker, initargs=(use_tiktoken,)) as pool:
        futures = {pool.submit(_task, a, w, settings): i for i, (a, w) in enumerate(tasks)}
        for fut in as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            _advance(progress, *tasks[i])
    return [results[i] for i in range(len(tasks))]


def _advance(progress: Any, arm: Arm, workload: Workload) -> None:
    if progress is not None:
        progress.advance(f"{arm.name} / {workload.name}")
