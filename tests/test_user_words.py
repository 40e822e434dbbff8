"""The user's own words under the presets (issue 23): corrections stay verbatim, or reach the ledger."""

from __future__ import annotations

import random
from typing import Any

import pytest

from amplifier_module_context_simple import PRESETS, SimpleContextManager
from amplifier_module_context_simple.ledger import is_ledger
from tests.conftest import add_all, asst, asst_calls, result, system, user

WORDS = "alpha beta gamma delta config loader parser cache index router worker queue shard replica".split()


def corrected_session(seed: int) -> tuple[list[dict[str, Any]], list[str]]:
    """A session with 4 long mid-session corrections between tool rounds and status turns."""
    rng = random.Random(seed)
    line = lambda n: " ".join(rng.choice(WORDS) for _ in range(n))  # noqa: E731
    messages = [system(), user(f"Set up the service. {line(14)}."), asst("Noted.")]
    corrections = []
    for k in range(30):
        output = "\n".join(f"{i:04d} {line(9)}" for i in range(rng.choice((10, 40, 120))))
        messages += [asst_calls(f"c{k}", name="bash"), result(f"c{k}", output)]
        if k in (6, 12, 18, 24):
            corrections.append(
                f"Actually, use port {rng.randrange(1000, 9999)}, not {rng.randrange(1000, 9999)}: the old one "
                f"clashes with SVC-{rng.getrandbits(24):06X} ({line(6)}). Keep this for the rest of the session."
            )
            messages += [user(corrections[-1]), asst("Understood.")]
        elif k % 4 == 3:
            messages += [user(f"Status? {line(30)}"), asst(f"Progress: {line(25)}")]
    return [*messages, user("Final check: list every value you were told to use.")], corrections


async def final_view(messages: list[dict[str, Any]], **config: Any) -> list[dict[str, Any]]:
    context = SimpleContextManager(max_tokens=sum(len(str(m)) for m in messages) // 4 * 25 // 100, **config)
    await add_all(context, messages)
    return await context.get_messages_for_request()


def typed(view: list[dict[str, Any]]) -> set[str]:
    return {m["content"] for m in view if m.get("role") == "user" and isinstance(m.get("content"), str)}


@pytest.mark.asyncio
@pytest.mark.parametrize("preset", sorted(PRESETS))
async def test_every_preset_keeps_every_correction_verbatim_and_no_fewer_than_the_default(preset):
    kept_default = kept_preset = 0
    for seed in range(4):
        messages, corrections = corrected_session(seed)
        kept_default += len(set(corrections) & typed(await final_view(messages)))
        kept_preset += len(set(corrections) & typed(await final_view(messages, preset=preset)))
    assert kept_preset == 16 and kept_preset >= kept_default


@pytest.mark.asyncio
async def test_without_the_user_words_share_the_same_preset_stubs_corrections():
    """The knob is what keeps them: the same preset with the share at 0 loses some."""
    lost = 0
    for seed in range(4):
        messages, corrections = corrected_session(seed)
        view = await final_view(messages, preset="evidence_balanced", user_words_share=0.0)
        lost += len(set(corrections) - typed(view))
    assert lost > 0


@pytest.mark.asyncio
async def test_a_correction_that_does_not_fit_the_share_reaches_the_ledger():
    messages, corrections = corrected_session(1)
    view = await final_view(messages, preset="evidence_balanced", user_words_share=0.01)
    ledger = "\n".join(m["content"] for m in view if is_ledger(m))
    for text in corrections:
        assert text in typed(view) or text in ledger, f"lost silently: {text[:40]}"
    assert any(text in ledger for text in corrections)


@pytest.mark.parametrize("value", ["a fifth", [0.2], True, float("nan")])  # "0.1" is read as 0.1 (issue 31)
def test_user_words_share_of_a_wrong_type_is_refused(value):
    with pytest.raises(ValueError, match="user_words_share"):
        SimpleContextManager(user_words_share=value)


@pytest.mark.parametrize(("value", "used"), [(-0.1, 0.0), (0.95, 0.9), ("0.95", 0.9), (1.5, 0.9)])
def test_user_words_share_out_of_range_warns_and_runs_at_the_nearest_end(value, used, caplog):
    """Issue 42 point 4: one rule for every key, out of range warns (it raised for this module's own keys)."""
    with caplog.at_level("WARNING", logger="amplifier_module_context_simple"):
        assert SimpleContextManager(user_words_share=value).user_words_share == used
    assert "user_words_share" in caplog.text and f"using {used:g}" in caplog.text
