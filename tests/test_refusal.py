"""Issue 41: a provider that refuses a request for its length teaches the module a limit the next views fit.

The parsing of the providers' wordings, the learned limit and how readings move it, the manager's
handling of ``provider:error`` (a length refusal, other errors, malformed payloads, a failing handler),
snapshot and stats, a byte-identity check when no refusal happens, and a real ``AmplifierSession`` whose
orchestrator emits ``provider:error`` exactly as loop-basic does (the same payload, then raise).
"""

from __future__ import annotations

import copy
import json
import logging
import sys
import types
from typing import Any

import pytest
from amplifier_core import AmplifierSession
from amplifier_core.events import PROVIDER_ERROR, PROVIDER_REQUEST
from amplifier_core.llm_errors import ContextLengthError, LLMError
from amplifier_core.message_models import ChatRequest, ChatResponse, Message, TextBlock, Usage
from amplifier_core.models import ProviderInfo
from amplifier_core.testing import MockCoordinator

from amplifier_module_context_simple import SimpleContextManager, mount
from amplifier_module_context_simple.estimate import estimate_tokens
from amplifier_module_context_simple.refusal import (
    FAR_RATIO,
    REFUSAL_MARGIN,
    Refusal,
    RefusalLimit,
    parse_refusal,
    valid_saved,
)
from tests.conftest import (
    WORKLOADS,
    EventLog,
    Recorder,
    asst_calls,
    by_transcript,
    load_transcript,
    result,
    stamped,
    system,
    user,
)

LOGGER = "amplifier_module_context_simple"
WINDOW, OUTPUT = 200_000, 8_192  # what the scripted provider reports
REFUSE_ABOVE = 100_000  # what it really takes

# The wordings the issue names, with the sizes each states (refused, maximum), and a bare one.
ANTHROPIC = "prompt is too long: {n:,} tokens > 100,000 maximum"
OPENAI = (
    "This model's maximum context length is 100000 tokens. However, your messages resulted in {n} tokens. "
    "Please reduce the length of the messages."
)
GEMINI = "The input token count ({n}) exceeds the maximum number of tokens allowed (100000)."
BARE = "Input is too long."
WORDINGS = {"anthropic": ANTHROPIC, "openai": OPENAI, "gemini": GEMINI, "bare": BARE}


def payload(error_type: str, message: Any) -> dict[str, Any]:
    """``provider:error`` as loop-basic and loop-streaming emit it for an LLMError."""
    return {
        "provider": "scripted",
        "error": {"type": error_type, "msg": message},
        "retryable": False,
        "status_code": 400,
    }


# ----- parsing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "message, refused, maximum",
    [
        ("prompt is too long: 131,000 tokens > 100,000 maximum", 131_000, 100_000),
        ("prompt is too long: 214850 tokens > 200000 maximum", 214_850, 200_000),
        (OPENAI.format(n=131000), 131_000, 100_000),
        # Azure's deployment wording is OpenAI's; vLLM and DeepSeek count the completion in "requested".
        (
            "This model's maximum context length is 100000 tokens. However, you requested 135000 tokens "
            "(131000 in the messages, 4000 in the completion). Please reduce the length of the messages.",
            131_000,
            96_000,
        ),
        (GEMINI.format(n=131000), 131_000, 100_000),
        (
            "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).",
            1_200_293,
            1_048_576,
        ),
        ("input length and `max_tokens` exceed context limit: 180000 + 32000 > 200000", 180_000, 168_000),
        ("Too many input tokens. Max input tokens: 100000, request input token count: 131000", 131_000, 100_000),
        ("Prompt contains 131000 tokens and 0 draft tokens, too large for model with 100000 maximum", 131_000, 100_000),
        ("This model's maximum context length is 8192 tokens. Please reduce the length of the messages.", None, 8_192),
        (BARE, None, None),
        ("Your input exceeds the context window of this model. Please adjust your input and try again.", None, None),
    ],
)
def test_each_wording_is_a_length_refusal_with_the_sizes_it_states(message, refused, maximum):
    for error_type in ("ContextLengthError", "BadRequestError", "InvalidRequestError"):
        assert parse_refusal(payload(error_type, message)) == Refusal(error_type, message, refused, maximum)


def test_a_context_length_error_is_a_refusal_whatever_its_message():
    assert parse_refusal(payload("ContextLengthError", "request rejected")) == Refusal(
        "ContextLengthError", "request rejected"
    )


@pytest.mark.parametrize(
    "data",
    [
        payload("RateLimitError", "Rate limit reached on tokens per min (TPM): too many tokens"),
        payload("AuthenticationError", "invalid x-api-key"),
        payload("InvalidRequestError", "messages.1: tool_use ids must be unique"),
        payload("ProviderUnavailableError", "overloaded"),
        payload("ContentFilterError", "the prompt is too long to be filtered"),  # the type decides
        {"provider": "scripted", "error": {"type": "RuntimeError", "msg": "boom"}},  # loop-basic's non-LLMError
    ],
)
def test_errors_about_something_else_are_not_refusals(data):
    assert parse_refusal(data) is None


@pytest.mark.parametrize(
    "data", [None, 42, "not json", [], {}, {"error": None}, {"error": {"msg": 7}}, {"error": ["too long"]}]
)
def test_a_malformed_payload_is_ignored_with_a_debug_log(data, caplog):
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        assert parse_refusal(data) is None
    assert all(record.levelno <= logging.DEBUG for record in caplog.records)


def test_a_payload_serialized_once_more_is_read():
    assert parse_refusal(json.dumps(payload("ContextLengthError", BARE))) == Refusal("ContextLengthError", BARE)


# ----- the learned limit ---------------------------------------------------------------------------


def test_both_sizes_scale_the_refused_view_by_maximum_over_refused():
    limit = RefusalLimit()
    learned = limit.refused(Refusal("ContextLengthError", "", 131_000, 100_000), sent=120_000)
    assert learned.limit == int(120_000 * 100_000 / 131_000) and learned.ceiling == 100_000
    assert limit.cap(195_000) == learned.limit and limit.cap(50_000) == 50_000


@pytest.mark.parametrize("refused, maximum", [(None, None), (131_000, None), (None, 100_000)])
def test_without_both_sizes_the_limit_is_the_refused_view_less_the_margin(refused, maximum):
    limit = RefusalLimit()
    learned = limit.refused(Refusal("ContextLengthError", "", refused, maximum), sent=120_000)
    assert learned.limit == int(120_000 * (1 - REFUSAL_MARGIN))


def test_a_refusal_before_any_view_was_sent_teaches_nothing():
    limit = RefusalLimit()
    assert limit.refused(Refusal("ContextLengthError", BARE), sent=None) is None
    assert limit.learned is None and limit.cap(195_000) == 195_000 and limit.goal(800) is None


def test_a_second_refusal_only_lowers_the_limit():
    limit = RefusalLimit()
    limit.refused(Refusal("ContextLengthError", BARE), sent=100_000)
    limit.refused(Refusal("ContextLengthError", BARE), sent=120_000)  # an evaluator's larger request
    assert limit.learned.limit == 90_000 and limit.refusals == 2


def test_a_reading_that_shows_more_room_raises_the_limit_and_one_far_reading_never_lowers_it():
    limit = RefusalLimit()
    limit.refused(Refusal("ContextLengthError", "", 150_000, 100_000), sent=150_000)  # limit 100,000
    limit.learned.limit = 60_000  # as if learned from a view that counted more than now
    limit.note(events=1, measured=50_000, counted=50_000, budget=195_000)
    assert limit.learned.limit == 100_000  # the provider counts as the module does: its maximum fits
    limit.note(events=2, measured=50_000 * 3 + 5_000, counted=50_000, budget=195_000)  # one outlier
    assert limit.learned.limit == 100_000
    limit.note(events=3, measured=60_000, counted=50_000, budget=195_000)  # a tokenizer 1.2x: follows
    assert limit.learned.limit == int(50_000 * 100_000 / 60_000)
    limit.note(events=3, measured=10, counted=50_000, budget=195_000)  # the same reading again: ignored
    assert limit.learned.limit == int(50_000 * 100_000 / 60_000)


def test_repeated_far_readings_are_evidence_the_limit_follows_them_and_warns_once(caplog):
    limit = RefusalLimit()
    far = int(FAR_RATIO * 40_000) + 40_000  # a server-side chain counted on top of the view
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        limit.note(1, far, 40_000, budget=195_000)
        assert limit.learned is None  # one reading: maybe an outlier
        limit.note(2, far, 40_000, budget=195_000)
        limit.note(3, far + 10_000, 40_000, budget=195_000)
    assert limit.learned.source == "usage"
    assert limit.learned.limit == int(40_000 * 195_000 / (far + 10_000))  # follows the latest reading
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "server-side response chain" in warnings[0]
    assert limit.take_boundary()["compaction_reason"] == "provider_usage_far_above_count"
    limit.note(4, 44_000, 40_000, budget=195_000)  # the chain is gone: the budget holds again
    assert limit.learned.limit == int(40_000 * 195_000 / 44_000) and limit.cap(195_000) == 177_272


def test_saved_state_round_trips_and_is_validated():
    limit = RefusalLimit()
    assert limit.saved() is None and valid_saved(None)
    limit.refused(Refusal("ContextLengthError", BARE), sent=100_000)
    saved = json.loads(json.dumps(limit.saved()))
    assert valid_saved(saved)
    again = RefusalLimit()
    again.restore(saved)
    assert again.saved() == saved and again.cap(195_000) == 90_000
    for bad in (
        {**saved, "limit": -1},
        {**saved, "source": "guess"},
        {**saved, "extra": 1},
        [],
        {**saved, "warned": 1},
    ):
        assert not valid_saved(bad)


# ----- the manager ---------------------------------------------------------------------------------


class Refuser:
    """Reports a 200,000-token window and refuses a view it counts above 100,000 (the module's count
    times ``rate``) with ``wording``; answers the others with a usage reading."""

    def __init__(self, wording: str, rate: float = 1.0) -> None:
        self.wording, self.rate, self.refused, self.sent = wording, rate, 0, []

    def get_model_info(self) -> Any:
        return types.SimpleNamespace(context_window=WINDOW, max_output_tokens=OUTPUT)

    def count(self, view: list[dict[str, Any]]) -> int:
        return int(estimate_tokens(view) * self.rate)


async def turn(ctx: SimpleContextManager, provider: Refuser) -> bool:
    """One request as an orchestrator makes it: True when accepted (usage reported), False when refused
    (``provider:error`` reported)."""
    view = await ctx.get_messages_for_request(provider=provider)
    provider.sent.append(view)
    size = provider.count(view)
    if size > REFUSE_ABOVE:
        provider.refused += 1
        await ctx._on_provider_error(PROVIDER_ERROR, payload("ContextLengthError", provider.wording.format(n=size)))
        return False
    await ctx._on_llm_response("llm:response", {"usage": {"input_tokens": size}})
    return True


def long_history(groups: int = 30, tokens: int = 4_500) -> list[dict[str, Any]]:
    """A task and ``groups`` tool calls whose results add up past 100,000 tokens, under the trigger."""
    messages = [system("You are a careful engineer."), user("Read every module and list what each one does.")]
    for i in range(groups):
        messages += [
            asst_calls(f"c{i}"),
            result(f"c{i}", f"module {i}: " + "def f(x): return x * 2  # ok\n" * (tokens // 7)),
        ]
    return messages


@pytest.mark.asyncio
@pytest.mark.parametrize("wording", WORDINGS)
async def test_after_a_refusal_the_next_view_fits_and_later_views_stay_under(wording):
    events = Recorder()
    ctx = SimpleContextManager(hooks=events)
    provider = Refuser(WORDINGS[wording])
    await ctx.set_messages(long_history())
    assert not await turn(ctx, provider)  # the view fits the reported window, not the real one
    assert ctx.messages and events.named("context:compaction") == []
    await ctx.add_message(user("go on"))
    assert await turn(ctx, provider), "the view after a refusal was as large as the refused one"
    (boundary,) = events.named("context:compaction")
    assert boundary["compaction_reason"] == "provider_refused_length"
    assert boundary["learned_input_limit"] < estimate_tokens(provider.sent[0])
    assert boundary["refusal_message"].startswith(WORDINGS[wording][:10])
    accepted = []
    for i in range(12):  # later turns grow the history again
        await ctx.add_message(asst_calls(f"n{i}"))
        await ctx.add_message(result(f"n{i}", "x = compute(y)  # step\n" * 900))
        accepted.append(await turn(ctx, provider) or await turn(ctx, provider))  # never refused twice in a row
    assert all(accepted)
    # Stated sizes: the first refusal is the last. A bare message: each refusal takes 10% off, so the
    # limit may need another refusal or two to get under what the provider takes.
    assert provider.refused == 1 if wording != "bare" else provider.refused <= 3
    stats = ctx._last_token_meter_stats
    assert stats["length_refusals"] == provider.refused and stats["learned_input_limit"] <= REFUSE_ABOVE
    assert ctx.fault_stats["refusal_failures"] == 0


@pytest.mark.asyncio
async def test_a_provider_counting_more_than_the_module_is_met_at_the_next_turn():
    ctx = SimpleContextManager()
    provider = Refuser(ANTHROPIC, rate=1.4)  # a tokenizer that counts 40% more than the estimate
    await ctx.set_messages(long_history(groups=22))
    assert not await turn(ctx, provider)
    await ctx.add_message(user("go on"))
    assert await turn(ctx, provider)


@pytest.mark.asyncio
async def test_other_errors_and_malformed_payloads_change_no_view():
    history = long_history()
    quiet, noisy = SimpleContextManager(), SimpleContextManager()
    provider = Refuser(BARE)
    views = []
    for ctx in (quiet, noisy):
        await ctx.set_messages(copy.deepcopy(history))
        views.append(await ctx.get_messages_for_request(provider=provider))
    for data in (
        payload("RateLimitError", "too many tokens per minute"),
        payload("AuthenticationError", "bad key"),
        {"provider": "scripted", "error": {"type": "RuntimeError", "msg": "boom"}},
        None,
        {"error": 3},
        "garbage",
    ):
        await noisy._on_provider_error(PROVIDER_ERROR, data)
    for ctx in (quiet, noisy):
        await ctx.add_message(stamped(user("go on")))
    first, second = [json.dumps(await c.get_messages_for_request(provider=provider)) for c in (quiet, noisy)]
    assert json.dumps(views[0]) == json.dumps(views[1]) and first == second
    assert noisy._refusal.learned is None and noisy._last_token_meter_stats["length_refusals"] == 0


@pytest.mark.asyncio
async def test_a_failing_handler_is_counted_and_never_raised(monkeypatch, caplog):
    ctx = SimpleContextManager()
    await ctx.set_messages(long_history(groups=3))
    await ctx.get_messages_for_request()

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError

    monkeypatch.setattr(ctx._refusal, "refused", broken)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        answer = await ctx._on_provider_error(PROVIDER_ERROR, payload("ContextLengthError", BARE))
    assert answer is None or answer.action == "continue"
    assert ctx.fault_stats["refusal_failures"] == 1 and "provider:error handler failed" in caplog.text


@pytest.mark.parametrize("path", by_transcript(WORKLOADS))
@pytest.mark.asyncio
async def test_without_a_refusal_no_view_changes_byte_for_byte(path):
    """A real transcript replayed twice, one manager hearing every kind of non-length error and usage
    readings near its own count: the same bytes at every request."""
    messages = load_transcript(path)
    plain, listening = SimpleContextManager(max_tokens=30_000), SimpleContextManager(max_tokens=30_000)
    for index, message in enumerate(messages):
        for ctx in (plain, listening):
            await ctx.add_message(copy.deepcopy(message))
        if message.get("role") == "user" or index % 5:
            continue
        views = [json.dumps(await ctx.get_messages_for_request()) for ctx in (plain, listening)]
        assert views[0] == views[1], f"request after message {index}"
        size = estimate_tokens(json.loads(views[1]))
        await listening._on_llm_response("llm:response", {"usage": {"input_tokens": int(size * 1.3) + 800}})
        await listening._on_provider_error(PROVIDER_ERROR, payload("RateLimitError", "slow down"))
    assert listening._refusal.learned is None


@pytest.mark.asyncio
async def test_the_learned_limit_is_saved_restored_and_older_snapshots_restore_without_it():
    ctx = SimpleContextManager()
    provider = Refuser(GEMINI)
    await ctx.set_messages(long_history())
    assert not await turn(ctx, provider)
    state = json.loads(json.dumps(ctx.snapshot_state()))
    assert state["meter"]["learned_limit"]["limit"] == ctx._refusal.learned.limit
    resumed = SimpleContextManager()
    await resumed.set_messages(await ctx.get_messages())
    resumed.restore_state(state)
    # One stamped message for both: unstamped, each would get its own clock's timestamp.
    await ctx.add_message(stamped(user("go on")))
    await resumed.add_message(stamped(user("go on")))
    view = await ctx.get_messages_for_request(provider=provider)
    assert json.dumps(await resumed.get_messages_for_request(provider=provider)) == json.dumps(view)
    assert provider.count(view) <= REFUSE_ABOVE
    # A snapshot of an earlier version has no learned limit: it restores, and nothing is learned.
    older = copy.deepcopy(state)
    del older["meter"]["learned_limit"]
    again = SimpleContextManager()
    await again.set_messages(await ctx.get_messages())
    again.restore_state(older)
    assert again._refusal.learned is None
    with pytest.raises(ValueError, match="learned_limit"):
        bad = copy.deepcopy(state)
        bad["meter"]["learned_limit"]["limit"] = "lots"
        again.restore_state(bad)


# ----- a real AmplifierSession, with an orchestrator that reports errors as loop-basic does ---------


class ScriptedRefuser:
    """Reports a 200,000-token window; refuses (ContextLengthError) a request it counts above 100,000."""

    name = "scripted"

    def __init__(self, coordinator: Any, wording: str) -> None:
        self.coordinator, self.wording, self.sizes, self.refused = coordinator, wording, [], 0

    def get_info(self) -> ProviderInfo:
        defaults = {"model": "scripted-1", "context_window": WINDOW, "max_output_tokens": OUTPUT}
        return ProviderInfo(id="scripted", display_name="Scripted", defaults=defaults)

    async def list_models(self) -> list[Any]:
        return []

    async def complete(self, request: ChatRequest, **kwargs: Any) -> ChatResponse:
        size = sum(len(json.dumps(m.model_dump(mode="json"))) for m in request.messages) // 4
        self.sizes.append(size)
        if size > REFUSE_ABOVE:
            self.refused += 1
            raise ContextLengthError(self.wording.format(n=size), provider="scripted", status_code=400)
        await self.coordinator.hooks.emit("llm:response", {"provider": "scripted", "usage": {"input_tokens": size}})
        usage = Usage(input_tokens=size, output_tokens=5, total_tokens=size + 5)
        return ChatResponse(content=[TextBlock(text=f"answer {len(self.sizes)}")], usage=usage)

    def parse_tool_calls(self, response: ChatResponse) -> list[Any]:
        return []


class LoopBasicLike:
    """loop-basic's request path, reduced: provider:request, the context's view, the provider; an
    LLMError is reported on provider:error with loop-basic's payload and raised (the turn fails)."""

    async def execute(self, prompt, context, providers, tools, hooks, coordinator=None, **kwargs) -> str:
        await context.add_message({"role": "user", "content": prompt})
        name, provider = next(iter(providers.items()))
        await hooks.emit(PROVIDER_REQUEST, {"provider": name, "iteration": 0})
        view = await context.get_messages_for_request(provider=provider)
        try:
            response = await provider.complete(ChatRequest(messages=[Message(**m) for m in view]))
        except LLMError as e:
            error = {"type": type(e).__name__, "msg": str(e)}
            await hooks.emit(
                PROVIDER_ERROR,
                {"provider": name, "error": error, "retryable": e.retryable, "status_code": e.status_code},
            )
            raise
        text = "".join(block.text for block in response.content)
        await context.add_message({"role": "assistant", "content": text})
        return text


@pytest.fixture
def refusing_session(monkeypatch: pytest.MonkeyPatch) -> Any:
    made: dict[str, Any] = {}

    def install(wording: str) -> None:
        async def provider_mount(coordinator: Any, config: dict[str, Any] | None = None) -> None:
            made["provider"] = ScriptedRefuser(coordinator, wording)
            await coordinator.mount("providers", made["provider"], name="scripted")

        async def orchestrator_mount(coordinator: Any, config: dict[str, Any] | None = None) -> None:
            await coordinator.mount("orchestrator", LoopBasicLike())

        for module_id, mount_fn in (
            ("provider-refusal-scripted", provider_mount),
            ("loop-refusal", orchestrator_mount),
        ):
            module = types.ModuleType("amplifier_module_" + module_id.replace("-", "_"))
            module.mount = mount_fn
            monkeypatch.setitem(sys.modules, module.__name__, module)

    made["install"] = install
    return made


@pytest.mark.asyncio
@pytest.mark.parametrize("wording", WORDINGS)
async def test_a_real_session_goes_on_at_the_next_turn_after_a_refusal(refusing_session, wording):
    refusing_session["install"](WORDINGS[wording])
    plan = {
        "session": {"orchestrator": "loop-refusal", "context": {"module": "context-simple", "config": {}}},
        "providers": [{"module": "provider-refusal-scripted", "config": {}}],
    }
    session = AmplifierSession(plan)
    await session.initialize()
    ctx = session.coordinator.get("context")
    events = EventLog(session.coordinator.hooks, ("context:compaction",))
    await ctx.set_messages(long_history())
    provider = refusing_session["provider"]
    with pytest.raises(Exception) as failed:  # 2.0.x wraps it: "Execution failed: ContextLengthError: ..."
        await session.execute("turn 1: summarize the modules")
    assert isinstance(failed.value, ContextLengthError) or "ContextLengthError" in str(failed.value)
    replies = [await session.execute(f"turn {n}: and now the next step") for n in range(2, 6)]
    assert replies == [f"answer {n}" for n in range(2, 6)] and provider.refused == 1
    assert all(size <= REFUSE_ABOVE for size in provider.sizes[1:])
    assert events.of("context:compaction")[0]["compaction_reason"] == "provider_refused_length"
    assert ctx._last_token_meter_stats["length_refusals"] == 1
    await session.cleanup()
    assert session.coordinator.hooks.list_handlers("provider:error") == {"provider:error": []}


@pytest.mark.asyncio
async def test_mount_registers_the_refusal_listener():
    coordinator = MockCoordinator()
    cleanup = await mount(coordinator, {})
    assert coordinator.hooks.list_handlers("provider:error") == {"provider:error": ["context-simple-refusal"]}
    await cleanup()
    assert coordinator.hooks.list_handlers("provider:error") == {"provider:error": []}
