"""The incremental request path (view_cache.py) against the full rebuild, and views a caller may edit.

Differential: the same conversation runs through two managers, one extending its last view between
boundaries and one rebuilding every view (``_view_cache.enabled = False``, the path as it was before
the cache), and every request must agree byte for byte: the view (key order kept), the estimate of what
was sent, the meter's stats, the compaction stats and decisions, and every event. Generated
conversations come from the property tests' strategies; the shipped transcripts are replayed too.
"""

from __future__ import annotations

import asyncio
import copy
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from amplifier_core.message_models import Message as CoreMessage
from hypothesis import event, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import SimpleContextManager
from evaluation.shaped import shape
from tests.conftest import (
    WORKLOADS,
    Recorder,
    asst,
    asst_calls,
    build,
    estimated_size,
    load_transcript,
    replay,
    result,
    stamped,
    system,
    user,
)
from tests.test_properties import BUDGETS, PROFILE, configs, run, sessions

Message = dict[str, Any]
PROGRESSIVE = configs().map(lambda cfg: {**cfg, "compaction_strategy": "progressive"})


@pytest.fixture(scope="module")
def spill_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spill")


def state_of(ctx: SimpleContextManager, view: list[Message]) -> str:
    """Everything one request produced, as bytes (a view's key order included)."""
    return json.dumps(
        {
            "view": view,
            "sent_estimate": ctx._last_sent_estimate,
            "meter": ctx._last_token_meter_stats,
            "stats": ctx._last_compaction_stats,
            "decisions": [sorted(ctx._removed_seqs), sorted(ctx._truncated_seqs), sorted(ctx._stubbed_seqs)],
            "level": ctx._sticky_level,
            "replayed": ctx._last_replayed_boundary,
            "skips": ctx._clear_at_least_skips,
            "faults": ctx.fault_stats,
        },
        ensure_ascii=False,
        default=repr,
    )


class Trace:
    """Records every request of one manager; counts the requests the cache extended."""

    def __init__(self, incremental: bool) -> None:
        self.incremental = incremental
        self.requests: list[str] = []
        self.extended = 0
        self.ctx: SimpleContextManager | None = None

    def attach(self, ctx: SimpleContextManager) -> None:
        self.ctx = ctx
        ctx._view_cache.enabled = self.incremental
        request, extend = ctx.get_messages_for_request, ctx._view_cache.extend

        async def recorded(*args: Any, **kwargs: Any) -> list[Message]:
            view = await request(*args, **kwargs)
            self.requests.append(state_of(ctx, view))
            return view

        def counted(*args: Any) -> Any:
            extended = extend(*args)
            self.extended += extended is not None
            return extended

        ctx.get_messages_for_request = recorded  # type: ignore[method-assign]
        ctx._view_cache.extend = counted  # type: ignore[method-assign]


def assert_same(incremental: Trace, full: Trace) -> None:
    assert len(incremental.requests) == len(full.requests)
    for index, (got, want) in enumerate(zip(incremental.requests, full.requests, strict=True)):
        assert got == want, f"request {index} differs from the full rebuild:\n{got[:600]}\n{want[:600]}"


# ----- differential: generated conversations ------------------------------------------------------


@pytest.mark.slow  # long replay: `uv run pytest -m slow` (CI runs it)
@settings(PROFILE, max_examples=max(PROFILE.max_examples // 2, 60))
@given(cfg=PROGRESSIVE, budget=BUDGETS, factory=st.booleans(), ops=sessions(), factor=st.sampled_from([1.0, 0.3, 2.5]))
def test_generated_conversations_match_the_full_rebuild_on_every_request(
    spill_root: Path, cfg: dict[str, Any], budget: tuple, factory: bool, ops: list[tuple], factor: float
) -> None:
    traces = []
    for incremental in (True, False):
        trace = Trace(incremental)
        ctx, _ = asyncio.run(run(cfg, budget, factory, ops, spill_root, factor, prepare=trace.attach))
        recorder = ctx._hooks
        trace.requests.append(json.dumps(recorder.events, default=repr))  # every event, in order
        traces.append(trace)
    assert_same(*traces)
    event(f"extended {round(10 * traces[0].extended / max(1, len(traces[0].requests) - 1))}/10 of requests")


# ----- differential: shipped transcripts ----------------------------------------------------------

TRANSCRIPT_CONFIGS = {
    "default": {},
    "hybrid+replay+head_tail": {
        "token_meter": "hybrid",
        "replay_last_user_on_compaction": True,
        "tool_result_budget_tokens": 250,
        "tool_result_shape": "head_tail",
    },
    "actual+clear_at_least+minimal": {
        "token_meter": "actual",
        "compact_clear_at_least": 0.1,
        "compaction_notice_verbosity": "minimal",
    },
    "evidence preset": {"preset": "evidence"},
}


async def transcript_trace(
    path: Path, config: dict[str, Any], fraction: float, factory: bool, incremental: bool, shaped: bool = False
):
    messages = load_transcript(path)
    if shaped:  # what amplifier hosts store: system-role hook injections inside groups, blocks, thinking
        messages = shape(messages, seed=len(messages))
    trace, hooks = Trace(incremental), Recorder()
    ctx = SimpleContextManager(hooks=hooks, **config)
    trace.attach(ctx)
    if factory:

        async def prompt() -> str:
            return "You are the factory's prompt."

        await ctx.set_system_prompt_factory(prompt)

    async def usage(request: Any, manager: SimpleContextManager) -> None:
        tokens = len(str(request.view)) // 5  # a provider that counts a little below the estimate
        await manager._on_llm_response("llm:response", {"usage": {"input_tokens": tokens}})

    try:
        await replay(ctx, messages, int(estimated_size(messages) * fraction), on_request=usage)
    except RuntimeError as exc:  # clear-at-least's fail-loud is part of the behaviour compared
        trace.requests.append(str(exc))
    trace.requests.append(json.dumps(hooks.events, default=repr))
    return trace


@pytest.mark.slow  # long replay: `uv run pytest -m slow` (CI runs it)
@pytest.mark.asyncio
@pytest.mark.parametrize("name", sorted(TRANSCRIPT_CONFIGS))
async def test_shipped_transcripts_match_the_full_rebuild_on_every_request(name: str) -> None:
    extended = requests = 0
    for index, path in enumerate(WORKLOADS):
        fraction, factory = (0.3, 0.6)[index % 2], index % 3 == 0
        incremental = await transcript_trace(path, TRANSCRIPT_CONFIGS[name], fraction, factory, True)
        full = await transcript_trace(path, TRANSCRIPT_CONFIGS[name], fraction, factory, False)
        assert_same(incremental, full)
        extended, requests = extended + incremental.extended, requests + len(incremental.requests) - 1
    assert extended > 0.6 * requests, f"only {extended} of {requests} requests took the incremental path"


@pytest.mark.slow  # long replay: `uv run pytest -m slow` (CI runs it)
@pytest.mark.asyncio
@pytest.mark.parametrize("name", sorted(TRANSCRIPT_CONFIGS))
async def test_amplifier_shaped_transcripts_match_the_full_rebuild_and_mostly_extend(name: str) -> None:
    """Issue 18 item 3: hook injections stored inside tool groups sent every later request down the full
    rebuild; now the repaired list grows by appends and the incremental path holds."""
    extended = requests = 0
    for index, path in enumerate(WORKLOADS):
        fraction, factory = (0.3, 0.6)[index % 2], index % 3 == 0
        incremental = await transcript_trace(path, TRANSCRIPT_CONFIGS[name], fraction, factory, True, True)
        full = await transcript_trace(path, TRANSCRIPT_CONFIGS[name], fraction, factory, False, True)
        assert_same(incremental, full)
        extended, requests = extended + incremental.extended, requests + len(incremental.requests) - 1
    assert extended > 0.6 * requests, f"only {extended} of {requests} requests took the incremental path"


# ----- twins: the same operations on an incremental and a full-rebuild manager --------------------


class Twins:
    """Two managers fed the same operations; every view must be equal, byte for byte."""

    def __init__(self, **config: Any) -> None:
        self.pair = [SimpleContextManager(**config), SimpleContextManager(**config)]
        self.pair[1]._view_cache.enabled = False
        self.extended = 0
        extend = self.pair[0]._view_cache.extend

        def counted(*args: Any) -> Any:
            extended = extend(*args)
            self.extended += extended is not None
            return extended

        self.pair[0]._view_cache.extend = counted  # type: ignore[method-assign]

    async def add(self, *messages: Message) -> None:
        for ctx in self.pair:
            for message in messages:
                await ctx.add_message(stamped(message))

    def both(self, action: Any) -> None:
        for ctx in self.pair:
            action(ctx)

    async def view(self, budget: int | None = None) -> list[Message]:
        """The incremental twin's view, after checking it against the full rebuild's."""
        (first, second), (view, full) = (
            self.pair,
            [await c.get_messages_for_request(token_budget=budget) for c in self.pair],
        )
        assert state_of(first, view) == state_of(second, full)
        return view

    @property
    def ctx(self) -> SimpleContextManager:
        return self.pair[0]


SESSION = "S U+ T* A U+ T* P3 A U+ E* T U+ T* A U+ T* P3* A U"


async def compacted_twins(**config: Any) -> tuple[Twins, int]:
    """Twins that compacted once (a small budget) and have extended since."""
    twins = Twins(**config)
    await twins.add(*build(SESSION))
    budget = estimated_size(twins.ctx.messages) // 2
    await twins.view(budget)
    for text in ("first", "second"):
        await twins.add(user(f"a {text} question"), asst("an answer"))
        await twins.view(budget)
    assert twins.ctx._sticky_level > 0 and twins.extended >= 1
    return twins, budget


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("attribute", "value"),
    [
        ("truncate_chars", 40),
        ("tool_result_budget_tokens", 30),
        ("tool_result_shape", "head_tail"),
        ("compaction_notice_verbosity", "minimal"),
        ("compaction_notice_enabled", False),
        ("compaction_notice_min_level", 8),
        ("token_counter", "content"),
        ("protected_tool_results", 0),
    ],
)
async def test_a_live_attribute_change_rebuilds(attribute: str, value: Any) -> None:
    twins, budget = await compacted_twins(tool_result_budget_by_tool={"read_file": 100})
    twins.both(lambda ctx: setattr(ctx, attribute, value))
    before = twins.extended
    await twins.view(budget)
    assert twins.extended == before, "the request after a live attribute change must rebuild"
    for text in ("and now?", "and then?", "and after that?"):  # a boundary, the rebuild after it, an extension
        await twins.add(user(text))
        await twins.view(budget)
    assert twins.extended > before


@pytest.mark.asyncio
async def test_a_dict_attribute_edited_in_place_rebuilds() -> None:
    twins, budget = await compacted_twins(tool_result_budget_by_tool={"read_file": 100})
    twins.both(lambda ctx: ctx.tool_result_budget_by_tool.__setitem__("read_file", 10))
    before = twins.extended
    await twins.view(budget)
    assert twins.extended == before


@pytest.mark.asyncio
async def test_decisions_made_by_a_caller_or_a_new_decision_set_rebuild() -> None:
    twins, budget = await compacted_twins()
    tools = [m["metadata"]["_seq"] for m in twins.ctx.messages if m.get("role") == "tool"]
    seq = next(s for s in tools if s not in twins.ctx._removed_seqs)
    before = twins.extended
    twins.both(lambda ctx: ctx._removed_seqs.add(seq))
    await twins.view(budget)
    twins.both(lambda ctx: setattr(ctx, "_digested_seqs", set()))  # another kind of decision, named *_seqs
    await twins.view(budget)
    twins.both(lambda ctx: ctx._digested_seqs.add(seq))
    await twins.view(budget)
    assert twins.extended == before
    await twins.view(budget)
    assert twins.extended == before + 1


@pytest.mark.asyncio
async def test_history_edits_outside_add_message_rebuild() -> None:
    twins, budget = await compacted_twins()
    extra = stamped(user("appended directly to messages"))
    before = twins.extended
    twins.both(lambda ctx: ctx.messages.append({**extra, "metadata": {**extra["metadata"], "_seq": 999}}))
    await twins.view(budget)
    assert twins.extended == before + 1  # an append with a _seq is an append
    twins.both(lambda ctx: ctx.messages.pop())
    await twins.view(budget)
    twins.both(lambda ctx: ctx.messages.__setitem__(-1, stamped(user("replaced the last message"))))
    await twins.view(budget)
    twins.both(lambda ctx: ctx.messages.append(stamped(user("no _seq at all"))))
    await twins.view(budget)
    assert twins.extended == before + 1


@pytest.mark.asyncio
async def test_set_messages_clear_and_restore_state_rebuild() -> None:
    twins, budget = await compacted_twins()
    snapshot = twins.ctx.snapshot_state()
    history = await twins.ctx.get_messages()
    for ctx in twins.pair:
        await ctx.set_messages(history)
        ctx.restore_state(copy.deepcopy(snapshot))
    await twins.view(budget)
    for ctx in twins.pair:
        await ctx.set_messages(history[:-3])
    await twins.view(budget)
    for ctx in twins.pair:
        await ctx.clear()
    await twins.view(budget)
    await twins.add(*build("S U T A U"))
    await twins.view(budget)


@pytest.mark.asyncio
async def test_a_changed_system_prompt_rebuilds_and_hook_messages_join_in_place() -> None:
    twins = Twins()
    prompts = ["first prompt"]

    async def factory() -> str:
        return prompts[-1]

    for ctx in twins.pair:
        await ctx.set_system_prompt_factory(factory)
    await twins.add(*build("S U T A U"))
    await twins.view(10**6)
    await twins.add(asst("more"))
    await twins.view(10**6)
    before = twins.extended
    prompts.append("second prompt")
    view = await twins.view(10**6)
    assert view[0]["content"] == "second prompt" and twins.extended == before
    await twins.add({**system("a hook speaks"), "metadata": {"source": "hook"}}, system("a stored prompt"))
    view = await twins.view(10**6)
    assert [m["content"] for m in view if m["role"] == "system"] == ["second prompt", "a hook speaks"]
    assert twins.extended == before + 1


@pytest.mark.asyncio
async def test_most_requests_of_a_long_session_extend() -> None:
    twins, budget = await compacted_twins()
    before = twins.extended
    for index in range(30):
        await twins.add(asst_calls(f"x{index}"), result(f"x{index}", "r" * 900), user(f"turn {index}"))
        await twins.view(budget)
    assert twins.extended - before >= 24, twins.extended - before  # the rest are boundaries and the request after


# ----- views a caller edits -----------------------------------------------------------------------


async def tool_twins(budget: int) -> tuple[Twins, list[Message]]:
    twins = Twins(protected_tool_results=0)  # a small budget truncates results, keeping every group
    blocks = [{"type": "text", "text": "the file " * 40}]
    await twins.add(user("read it"), asst_calls("c1"), result("c1", "more " * 2_000), asst("done"))
    await twins.add(user("again"), asst_calls("c2"), {**result("c2"), "content": blocks}, asst("done again"))
    return twins, await twins.view(budget)


@pytest.mark.asyncio
@pytest.mark.parametrize("budget", [10**6, 2_500])
async def test_editing_a_views_nested_objects_never_reaches_the_history_or_later_views(budget: int) -> None:
    """Issue 12, item 12: content blocks and tool calls of a view were the stored objects."""
    twins, view = await tool_twins(budget)
    assert budget > 10**5 or twins.ctx._sticky_level > 0
    ctx, stored = twins.ctx, copy.deepcopy(twins.ctx.messages)
    calls = [m for m in view if m.get("tool_calls")]
    blocks = [m for m in view if isinstance(m.get("content"), list)]
    assert calls and (blocks or budget < 10**5)
    calls[0]["tool_calls"][0]["function"]["name"] = "rm_rf"
    calls[-1]["tool_calls"].append({"id": "forged"})
    for message in blocks:
        message["content"][0]["text"] = "x" * 4_000
    view[0]["metadata"]["timestamp"] = "edited"
    view[-1]["content"] = "edited"
    del view[0]["role"]
    assert ctx.messages == stored
    for text in ("next", "and the next"):  # the views after the edit match the twin that saw no edit
        await twins.view(budget)
        await twins.add(user(text))
    assert ctx.messages[: len(stored)] == stored


@pytest.mark.asyncio
async def test_a_message_edited_after_add_message_changes_no_view() -> None:
    ctx = SimpleContextManager()
    message = {"role": "user", "content": [{"type": "text", "text": "mine"}], "metadata": {"k": [1]}}
    await ctx.add_message(message)
    view = await ctx.get_messages_for_request()
    message["content"][0]["text"] = "changed"
    message["metadata"]["k"].append(2)
    message["role"] = "assistant"
    assert await ctx.get_messages_for_request() == view
    assert view[0]["content"][0]["text"] == "mine"


@pytest.mark.asyncio
async def test_editing_the_returned_list_changes_no_later_view() -> None:
    twins, view = await tool_twins(10**6)
    view.append(user("appended to the view"))
    view.reverse()
    del view[1]
    await twins.view(10**6)


@pytest.mark.asyncio
async def test_view_messages_are_ordinary_dicts_to_callers() -> None:
    twins, view = await tool_twins(10**6)
    ctx, plain = twins.ctx, json.loads(json.dumps(view))
    assert view == plain and repr(view) == repr(plain) and str(view) == str(plain)
    for message in view:
        assert isinstance(message, dict)
        CoreMessage(**message)  # what an orchestrator builds from it
        for duplicate in (copy.copy(message), copy.deepcopy(message), pickle.loads(pickle.dumps(message))):
            assert duplicate == message and type(duplicate) is dict
    duplicate = copy.deepcopy(view)
    duplicate[1]["tool_calls"][0]["id"] = "edited in a copy"
    assert json.dumps(await twins.view(10**6)) == json.dumps(plain)
    assert ctx._view_cache.forms.sink == []  # edits of plain copies are not the view's business


@pytest.mark.asyncio
async def test_the_wire_copies_follow_the_current_view_not_every_message_ever_sent() -> None:
    twins = Twins()
    await twins.add(*build("S U T A"))
    for index in range(80):
        await twins.add(user(f"turn {index}"), asst_calls(f"y{index}"), result(f"y{index}", "r" * 5_000), asst("ok"))
        view = await twins.view(6_000)
    forms = twins.ctx._view_cache.forms
    held = len(forms._stored) + len(forms._rewritten)
    assert held <= 2 * len(view) + 64 < len(twins.ctx.messages), (held, len(view))


# ----- redaction: an in-place edit of the stored history (issue 30 point 14) ----------------------------

SECRET = "tok_9f8e7d6c5b4a3f2e1d"


def _redact_content(message: Message) -> None:
    message["content"] = message["content"].replace(SECRET, "[redacted]")


def _redact_block(message: Message) -> None:
    message["content"][0]["text"] = message["content"][0]["text"].replace(SECRET, "[redacted]")


REDACTIONS = {
    "content through get_messages()": _redact_content,
    "a content block through get_messages()": _redact_block,
}


def _secret_session(blocks: bool) -> list[Message]:
    """test_evidence's coding session with a token in the first tool result (as text or as a block)."""
    from tests.test_evidence import session

    messages = [stamped(m) for m in session(30)]
    first = next(m for m in messages if m["role"] == "tool")
    text = first["content"] + f"\nexport DEPLOY_TOKEN={SECRET}\n"
    first["content"] = [{"type": "text", "text": text}] if blocks else text
    return messages


@pytest.mark.asyncio
@pytest.mark.parametrize(("config", "at"), [({}, 2), ({"preset": "evidence"}, 8)], ids=["default", "evidence"])
@pytest.mark.parametrize("how", list(REDACTIONS))
async def test_a_redaction_in_place_reaches_the_next_view(config: dict[str, Any], at: int, how: str) -> None:
    """Review round 4, point 14: an in-place edit of a stored message (a redaction through
    get_messages()) was not what the next view sent: the cached copies (the evidence ledger's line, the
    view's wire copy) still carried the secret. Now the next request rebuilds from the edited history."""
    from tests.conftest import InvariantChecker, Request

    messages, checker = _secret_session(blocks="block" in how), InvariantChecker()
    ctx = SimpleContextManager(**config)
    sent = []
    for index, message in enumerate(messages):
        if message["role"] == "assistant":
            if len(sent) == at:  # the token is in the view (in evidence mode: in the ledger's lines)
                assert SECRET in json.dumps(sent[-1])
                REDACTIONS[how](next(m for m in await ctx.get_messages() if SECRET in json.dumps(m)))
                checker = InvariantChecker()  # the history changed on purpose, and so does the view
            checker.before(ctx)
            before = ctx._last_compaction_stats
            view = await ctx.get_messages_for_request(token_budget=2_500)
            checker.after(Request(index, view, ctx._last_compaction_stats is not before, None), ctx)
            sent.append(view)
        await ctx.add_message(message)
    assert all(SECRET not in json.dumps(view) for view in sent[at:])
    assert SECRET not in json.dumps(ctx.snapshot_state())


@pytest.mark.asyncio
async def test_replacing_a_stored_message_in_the_history_list_reaches_the_next_view() -> None:
    ctx = SimpleContextManager()
    for message in _secret_session(blocks=False)[:6]:
        await ctx.add_message(message)
    assert SECRET in json.dumps(await ctx.get_messages_for_request())
    index = next(i for i, m in enumerate(ctx.messages) if SECRET in json.dumps(m))
    ctx.messages[index] = {**ctx.messages[index], "content": "[redacted]"}
    assert SECRET not in json.dumps(await ctx.get_messages_for_request())
    await ctx.add_message(user("and after the redaction?"))
    assert SECRET not in json.dumps(await ctx.get_messages_for_request())


def test_no_module_tells_a_stored_message_from_a_dict_by_its_exact_type() -> None:
    """Stored messages, their blocks and metadata are dict and list subclasses (they report in-place
    edits): ``type(x) is dict`` would take them for something else (recall found nothing that way)."""
    import re
    from pathlib import Path

    import amplifier_module_context_simple as package

    exact = re.compile(r"type\([^)]*\) is (not )?(dict|list)\b")
    found = [
        f"{path.name}:{number}"
        for path in Path(package.__file__).parent.glob("*.py")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if exact.search(line)
    ]
    assert found == [], f"test with isinstance: {found}"
