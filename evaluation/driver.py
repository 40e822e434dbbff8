"""The replay driver: feed a session to a context engine the way an orchestrator does.

Messages are added in order (with a frozen `metadata.timestamp`, so views are deterministic) and a
request view is asked for before every assistant message. The simulated provider bills each view and
emits `llm:response`; the loop then yields a few times so a background summary task can finish.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import logging
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from amplifier_module_context_simple.instructions import is_instruction
from amplifier_module_context_simple.ledger import is_ledger, line_count

from .arms import Arm, ignored_keys, load_engine
from .cache import Prices
from .evidence import EvidenceIndex, Score
from .host_shaped import reminder_text, with_reminders
from .provider import SimProvider
from .recall_probe import probe as recall_probe
from .tokens import TokenCounter, canonical_json, content_text, read_call, wire_message
from .wording import clip
from .workloads import Workload

NOTICE_RESERVE = 800
SAFETY_MARGIN = 4096
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
TAIL_PROBE_CHARS = 80
YIELDS_AFTER_REQUEST = 10
MISSED_SAMPLES = 5  # missed evidence tokens kept per request, for the report
RECALL_SAMPLES = 2  # of those, checked against a context_recall call per request


@dataclass(frozen=True)
class Settings:
    """Per-run sizing and prices."""

    window_fraction: float = 0.35
    max_output_tokens: int = 1024
    output_reserve_fraction: float = 0.5
    min_budget: int = 2048
    min_cacheable: int = 1024
    request_overhead: int = 0
    prices: Prices = field(default_factory=Prices)


@dataclass(frozen=True)
class Window:
    """The simulated window of one workload, derived from its true size."""

    session_tokens: int
    budget: int
    context_window: int
    max_output_tokens: int

    @property
    def limit(self) -> int:
        """The largest prompt a provider accepts while leaving room for max_output_tokens."""
        return self.context_window - self.max_output_tokens


def size_window(session_tokens: int, s: Settings) -> Window:
    """Choose W so the module's effective budget is `window_fraction` of the session's true size.

    The module budgets W - int(max_output * reserve_fraction) - 4096 - 800 (notice reserve); we
    invert that formula.
    """
    budget = max(s.min_budget, int(session_tokens * s.window_fraction))
    window = budget + NOTICE_RESERVE + SAFETY_MARGIN + int(s.max_output_tokens * s.output_reserve_fraction)
    return Window(session_tokens, budget, window, s.max_output_tokens)


def workload_window(workload: Workload, settings: Settings, counter: TokenCounter) -> Window:
    """The window a workload states (a scenario's provider), else one sized from its true size; a
    reshaped session is sized by its original, so both replays face the same provider."""
    sized = counter.messages(workload.sized_by or workload.messages) + settings.request_overhead
    if not workload.context_window:
        return size_window(sized, settings)
    out = workload.max_output_tokens or settings.max_output_tokens
    budget = workload.context_window - int(out * settings.output_reserve_fraction) - SAFETY_MARGIN
    return Window(sized, budget, workload.context_window, out)


@dataclass
class Request:
    """What one request looked like and how it was billed."""

    index: int
    messages: int = 0
    true_tokens: int = 0
    estimate: int = 0
    read: int = 0
    write: int = 0
    plain: int = 0
    waste: int = 0
    cost: float = 0.0
    boundary: bool = False
    compaction_event: bool = False  # the module announced a boundary (context:compaction) on this request
    over_window: bool = False
    instructions_fit: bool = True  # the view's instructions alone fit the window
    orphans: int = 0
    unanswered: int = 0
    system_hash: str = ""
    ms: float = 0.0
    facts: list[str] = field(default_factory=list)
    facts_due: list[str] = field(default_factory=list)
    retracted_present: bool = False
    corrections: int = 0  # the workload's corrections present verbatim as a user message's whole text
    truncated_tools: int = 0
    tails_kept: int = 0
    ledger_lines: int | None = None  # lines of the evidence ledger in the view; None: the view has no ledger
    evidence: Score | None = None
    recall_checked: int = 0  # missed evidence tokens looked up with context_recall
    recall_found: int = 0  # of those, returned within the tool's output bound
    recall: dict[str, list[int]] = field(default_factory=dict)  # per query kind: [asked, found] (recall_probe)
    error: str | None = None


@dataclass
class Run:
    """One arm on one workload."""

    arm: str
    workload: str
    engine: str
    window: Window
    counter: str
    available: bool = True
    reason: str = ""
    requests: list[Request] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    probe_requests: list[int] = field(default_factory=list)
    corrections: int = 0  # how many the workload holds
    estimate_source: str = ""
    summary_calls: int = 0
    summary_cost: float = 0.0
    view_digest: str = ""
    warnings: int = 0
    over_budget: int = 0  # the module's "Compaction finished OVER BUDGET" warnings
    warning_samples: list[str] = field(default_factory=list)
    synthetic: bool = False


def frozen(msg: dict, i: int) -> dict:
    """A copy of a message with a fixed, per-position `metadata.timestamp`."""
    stamp = (EPOCH + timedelta(seconds=i)).isoformat(timespec="milliseconds")
    return {**msg, "metadata": {**(msg.get("metadata") or {}), "timestamp": stamp}}


async def mount_arm(arm: Arm, coordinator: Any) -> tuple[Any, Any, str]:
    """Mount an arm's engine on the coordinator; returns (context, cleanup, engine label)."""
    mount, label = load_engine(arm.engine)
    cleanup = await mount(coordinator, dict(arm.config))
    return coordinator.get("context"), cleanup, label


def replay(arm: Arm, workload: Workload, settings: Settings, counter: TokenCounter) -> Run:
    """Replay one workload through one arm (synchronous entry point)."""
    return asyncio.run(replay_async(arm, workload, settings, counter))


async def replay_async(arm: Arm, workload: Workload, settings: Settings, counter: TokenCounter) -> Run:
    """Replay one workload through one arm."""
    from amplifier_core.testing import MockCoordinator

    window = workload_window(workload, settings, counter)
    run = Run(arm.name, workload.name, "", window, counter.name, facts=sorted(workload.facts))
    # Generated scenarios carry planted facts or corrections; evidence is measured on real sessions only.
    run.synthetic = bool(workload.facts or workload.corrections)
    run.corrections = len(workload.corrections)
    run.probe_requests = list(workload.probe_requests)
    coordinator = MockCoordinator()
    provider = SimProvider(
        counter,
        window.context_window,
        window.max_output_tokens,
        coordinator.hooks,
        settings.prices,
        settings.min_cacheable,
        settings.request_overhead,
    )
    try:
        ctx, cleanup, run.engine = await mount_arm(arm, coordinator)
    except (ValueError, TypeError) as exc:
        run.available, run.reason = False, f"rejected at mount: {exc}"
        return run
    except (LookupError, ImportError) as exc:
        run.available, run.reason = False, f"engine could not be loaded: {exc}"
        return run
    ignored = ignored_keys(arm)
    if ignored:
        run.available, run.reason = False, f"config key(s) ignored by the engine: {', '.join(ignored)}"
        return run
    events = _EventCounter(coordinator.hooks)
    with _CountWarnings(run):
        await _drive(ctx, provider, workload, run, events)
        await _settle(ctx)
    await _cleanup(cleanup)
    run.summary_calls = provider.summary_calls
    p = settings.prices
    run.summary_cost = provider.summary_input_tokens * p.input + provider.summary_output_tokens * p.output
    return run


async def _settle(ctx: Any) -> None:
    """Let a background summary still in flight finish before the loop closes (a real session would)."""
    task = getattr(ctx, "_summarization_task", None)
    if isinstance(task, asyncio.Task) and not task.done():
        await asyncio.wait([task], timeout=5)


class _EventCounter:
    """Counts `context:compaction` events: a prefix that changes without one is a silent cache rebuild."""

    def __init__(self, hooks: Any) -> None:
        self.count = 0
        hooks.register("context:compaction", self._seen, priority=-1000, name="evaluation-compaction-count")

    async def _seen(self, event: str, data: Any) -> None:
        self.count += 1


async def _drive(ctx: Any, provider: SimProvider, workload: Workload, run: Run, events: _EventCounter) -> None:
    originals = {m["tool_call_id"]: m["content"] for m in workload.messages if m.get("tool_call_id")}
    prev: list[tuple] | None = None
    digest = hashlib.sha256()
    due: list[str] = []
    evidence = None if run.synthetic else EvidenceIndex()  # scripted answers carry no evidence
    for i, msg in enumerate(workload.messages):
        if msg["role"] == "assistant":
            req = Request(index=len(run.requests) + 1, facts_due=list(due))
            run.requests.append(req)
            seen = events.count
            prev = await _request(ctx, provider, msg, req, prev, run, workload, originals, digest, evidence)
            req.compaction_event = events.count > seen
            for _ in range(YIELDS_AFTER_REQUEST):
                await asyncio.sleep(0)
            # A summary started by this request finishes before the next one: the provider's hook
            # emit crosses threads, so a fixed number of yields would make the run nondeterministic.
            await _settle(ctx)
        await ctx.add_message(frozen(msg, i))
        if evidence is not None:
            evidence.add(msg)
        text = view_text([msg])
        due += [name for name, fact in workload.facts.items() if fact in text and name not in due]
    run.view_digest = digest.hexdigest()


async def _request(ctx, provider, answer, req, prev, run, workload, originals, digest, evidence) -> list[tuple] | None:
    start = time.perf_counter()
    try:
        view = list(await ctx.get_messages_for_request(provider=provider))
    except Exception as exc:  # a broken request is a finding, not a crash of the harness
        req.error = clip(f"{type(exc).__name__}: {exc}", WARNING_CHARS)
        digest.update(f"error {req.index}: {req.error}\n".encode())
        return prev
    req.ms = (time.perf_counter() - start) * 1000
    digest.update((canonical_json(view) + "\n").encode())
    sent = with_reminders(view, reminder_text(workload.name)) if workload.host_reminders else view
    bill = await provider.respond(sent, answer)  # what the host sends is what is billed
    keys = list(bill.keys)
    o = bill.outcome
    req.messages, req.true_tokens = len(view), o.total
    req.read, req.write, req.plain, req.waste = o.read, o.write, o.plain, o.waste
    req.cost = o.cost(provider.prices)
    req.boundary = prev is not None and keys[: len(prev)] != prev
    req.over_window = o.total > run.window.limit
    req.instructions_fit = provider.counter.messages([m for m in view if is_instruction(m)]) <= run.window.limit
    req.estimate, run.estimate_source = _estimate(ctx, view)
    req.orphans, req.unanswered = tool_pairing_faults(view)
    req.system_hash = system_hash(view)
    _probe_facts(view, workload, req)
    req.truncated_tools, req.tails_kept = tail_retention(view, originals)
    ledgers = [line_count(content_text(m.get("content"))) for m in view if is_ledger(m)]
    req.ledger_lines = sum(ledgers) if ledgers else None
    if evidence is not None:
        req.evidence = evidence.score(view, answer, keep_missed=MISSED_SAMPLES)
        if workload.recall_probe:
            req.recall = await recall_probe(ctx, req.evidence.missed[:RECALL_SAMPLES])
            req.recall_checked, req.recall_found = req.recall.get("exact", (0, 0))
    return keys[: bill.cacheable]


def _estimate(ctx: Any, view: list[dict]) -> tuple[int, str]:
    sent = getattr(ctx, "_last_sent_estimate", None)
    if isinstance(sent, int) and not isinstance(sent, bool):
        return sent, "the module's own estimate of the view it sent"
    return sum(len(str(m)) // 4 for m in view), "len(str(message))//4 over the view (upstream estimator)"


def tool_pairing_faults(view: list[dict]) -> tuple[int, int]:
    """(tool results with no earlier matching call, calls never answered) in a view."""
    open_calls: set[str] = set()
    orphans = 0
    for m in view:
        for call in m.get("tool_calls") or []:
            open_calls.add(call.get("id"))
        if m.get("role") == "tool":
            if m.get("tool_call_id") in open_calls:
                open_calls.discard(m.get("tool_call_id"))
            else:
                orphans += 1
    return orphans, len(open_calls)


def system_hash(view: list[dict]) -> str:
    """Hash of the wire form of every system message in a view."""
    systems = [wire_message(m) for m in view if m.get("role") == "system"]
    return hashlib.sha256(canonical_json(systems).encode()).hexdigest()[:16]


def view_text(view: list[dict]) -> str:
    """Every piece of text a model would read in a view (contents and tool-call arguments)."""
    parts = [content_text(m.get("content")) for m in view]
    for m in view:
        parts += [_arguments(c) for c in m.get("tool_calls") or []]
    return "\n".join(parts)


def _arguments(call: Any) -> str:
    raw = read_call(call)[1]
    return raw if isinstance(raw, str) else "" if raw is None else json.dumps(raw, ensure_ascii=False)


def _probe_facts(view: list[dict], workload: Workload, req: Request) -> None:
    if workload.corrections:
        typed = {m.get("content") for m in view if m.get("role") == "user" and isinstance(m.get("content"), str)}
        req.corrections = sum(text in typed for text in workload.corrections)
    if not workload.facts:
        return
    text = view_text(view)
    req.facts = sorted(name for name, fact in workload.facts.items() if fact in text)
    req.retracted_present = bool(workload.retracted and workload.retracted in text)


def tail_retention(view: list[dict], originals: dict[str, Any]) -> tuple[int, int]:
    """(tool results shown shortened, of which the original's last 80 chars are still shown)."""
    truncated = kept = 0
    for m in view:
        orig = originals.get(m.get("tool_call_id")) if m.get("role") == "tool" else None
        if not isinstance(orig, str) or m.get("content") == orig:
            continue
        truncated += 1
        tail = orig[-TAIL_PROBE_CHARS:].strip()
        kept += bool(tail) and tail in content_text(m.get("content"))
    return truncated, kept


WARNING_CHARS = 300
OVER_BUDGET = "OVER BUDGET"  # the module's warning when compaction could not reach the budget
WARNING_SHAPES = 5
SHAPE_CHARS = 120  # enough to tell kinds apart; a cut message still matches its kind


def message_shape(text: str) -> str:
    """A message's start with its numbers blanked: messages that differ only in numbers are one kind."""
    return re.sub(r"\d[\d,.]*", "N", text)[:SHAPE_CHARS]


class _CountWarnings(logging.Handler):
    """Counts the engine's WARNING+ log records into the run (and keeps them off the terminal)."""

    def __init__(self, run: Run) -> None:
        super().__init__(logging.WARNING)
        self.run = run

    def emit(self, record: logging.LogRecord) -> None:
        self.run.warnings += 1
        self.run.over_budget += OVER_BUDGET in record.getMessage()
        text = clip(record.getMessage(), WARNING_CHARS)  # on a whole word, with "..."
        shapes = {message_shape(t) for t in self.run.warning_samples}
        if len(self.run.warning_samples) < WARNING_SHAPES and message_shape(text) not in shapes:
            self.run.warning_samples.append(text)  # one example per kind of message

    def __enter__(self) -> _CountWarnings:
        logging.getLogger().addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger().removeHandler(self)


async def _cleanup(cleanup: Any) -> None:
    if cleanup is None:
        return
    result = cleanup()
    if inspect.isawaitable(result):
        await result
