"""`max_tool_result_share`: a tool result's view copy capped at a share of the budget, off by default."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from amplifier_module_context_simple import PRESETS, SimpleContextManager
from amplifier_module_context_simple.result_share import BYTES_PER_TOKEN, MIN_SHARE_CAP_BYTES, ingress_limit
from tests.conftest import add_all, asst, asst_calls, result, system, user

BIG = "\n".join(f"{n:6d}\tdef load_block_{n}(buf, limit={n * 7}):" for n in range(1500))  # ~60 KB


def session() -> list[dict[str, Any]]:
    return [system(), user("read the loader"), asst_calls("c1", name="read_file"), result("c1", BIG)]


def tool_text(view: list[dict[str, Any]]) -> str:
    return next(m for m in view if m["role"] == "tool")["content"]


def test_the_cap_is_the_lower_of_the_byte_cap_and_the_share_of_the_budget():
    assert ingress_limit(131_072, None, 20_000) == 131_072  # off: today's byte cap
    assert ingress_limit(131_072, 0.25, 20_000) == 20_000 * 0.25 * BYTES_PER_TOKEN
    assert ingress_limit(131_072, 0.5, 200_000) == 131_072  # a roomy budget: the byte cap is lower
    assert ingress_limit(None, 0.25, 20_000) == 20_000
    assert ingress_limit(131_072, 0.25, 4_000) == MIN_SHARE_CAP_BYTES  # a small result is never cut
    assert ingress_limit(4_000, 0.25, 4_000) == 4_000  # the byte cap, lower, still holds


@pytest.mark.asyncio
async def test_a_result_over_the_share_is_clipped_from_its_first_request_with_the_same_bytes_after():
    context = SimpleContextManager(max_tokens=20_000, max_tool_result_share=0.25)
    await add_all(context, session())
    stored = copy.deepcopy(context.messages)
    first = await context.get_messages_for_request()
    await add_all(context, [asst("It reads blocks."), user("and the header?")])
    second = await context.get_messages_for_request()
    clipped = tool_text(first)
    assert len(clipped.encode()) <= 20_000 < len(BIG) and BIG.startswith(clipped.split("\n[... tool result")[0])
    assert json.dumps(second[: len(first)]) == json.dumps(first)  # append-only: no cache rewrite
    assert context.messages[: len(stored)] == stored  # the history keeps the whole result


@pytest.mark.asyncio
async def test_off_or_in_a_roomy_budget_the_view_is_unchanged():
    views = []
    for share in (None, 0.25):
        for budget in (20_000, 1_000_000):
            context = SimpleContextManager(max_tokens=budget, max_tool_result_share=share)
            await add_all(context, session())
            views.append(json.dumps(await context.get_messages_for_request()))
    off_small, off_roomy, on_small, on_roomy = views
    assert on_roomy == off_roomy and tool_text(json.loads(off_small)) == BIG and on_small != off_small


@pytest.mark.parametrize("bad", ["half", True, [0.2]])
def test_a_share_of_a_wrong_type_is_refused_naming_the_key(bad):
    with pytest.raises(ValueError, match="max_tool_result_share"):
        SimpleContextManager(max_tool_result_share=bad)


@pytest.mark.parametrize(("value", "used"), [(-0.1, None), (1.5, 1.0)])
def test_a_share_outside_0_to_1_warns_and_runs_at_the_nearest_end(value, used, caplog):
    with caplog.at_level("WARNING"):
        context = SimpleContextManager(max_tool_result_share=value)
    assert context.max_tool_result_share == used
    assert any("max_tool_result_share" in r.getMessage() for r in caplog.records)


def test_zero_means_off_and_every_preset_sets_a_share():
    assert SimpleContextManager(max_tool_result_share=0).max_tool_result_share is None
    assert SimpleContextManager().max_tool_result_share is None
    assert all(0 < PRESETS[name]["max_tool_result_share"] <= 1 for name in PRESETS)
