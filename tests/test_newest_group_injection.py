"""An assistant-role hook injection inside the newest tool group keeps the group the newest (issue 37.8).

loop-basic stores a ``tool:post`` hook's ``inject_context`` (any role: amplifier-core honours
``context_injection_role``) between an assistant's calls and their results; repair moves it after them.
The ladder took such an assistant message for the model's answer, so the group lost its protection and the
result the model was about to read was truncated.
"""

from __future__ import annotations

import pytest

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.ladder import newest_group
from tests.conftest import add_all, asst, asst_calls, result, system, user

BIG = "\n".join(f"{n:5d}  def handler_{n}(request): return dispatch(request, {n})" for n in range(400))


def injection(role: str) -> dict:
    return {"role": role, "content": "lint: 3 warnings in the file just read", "metadata": {"source": "hook"}}


def session(role: str | None) -> list[dict]:
    """Older rounds, then the newest group: a call, a hook's injection (loop-basic's place), the big result."""
    out = [system(), user("Find every handler that skips validation and list them."), asst("Reading.")]
    for k in range(8):
        out += [asst_calls(f"o{k}"), result(f"o{k}", f"# old file {k}\n" + "y" * 6_000)]
    out.append(asst_calls("new"))
    if role is not None:
        out.append(injection(role))
    return [*out, result("new", BIG)]


def test_the_newest_group_is_found_past_an_assistant_injection() -> None:
    messages = session("assistant")
    call_at = len(messages) - 3
    moved = [*messages[:call_at], messages[call_at], messages[-1], messages[-2]]  # as repair sends it
    assert newest_group(moved) == (call_at, call_at + 1)


@pytest.mark.asyncio
@pytest.mark.parametrize("role", [None, "user", "system", "assistant"])
async def test_the_result_about_to_be_read_stays_whole_whatever_the_injections_role(role: str | None) -> None:
    context = SimpleContextManager(max_tokens=12_000, protect_in_tokens=True)
    await add_all(context, session(role))
    view = await context.get_messages_for_request()
    assert context._last_compaction_stats is not None  # the ladder ran
    assert any(m.get("role") == "tool" and m.get("content") == BIG for m in view), f"newest result cut ({role})"
